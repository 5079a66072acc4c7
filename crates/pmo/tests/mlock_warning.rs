//! Memory that holds secrets is `mlock`ed so it is never written to swap.
//! When the kernel refuses (RLIMIT_MEMLOCK), the library says so on
//! stderr, once per process for key material and once for the DRAM cache
//! of decrypted pages, however many keys and caches it makes.

use std::process::{Command, Stdio};

use nvmos_pmo::layout::PAGE;
use nvmos_pmo::{Access, KdfParams, Mode, Perm, Pool};

const KEY: &[u8] = b"a key that stays in memory";
const ROLE: &str = "NVMOS_PMO_MLOCK_CHILD";

/// This process may lock no memory from now on: CAP_IPC_LOCK (which
/// ignores the limit) leaves the effective set, RLIMIT_MEMLOCK becomes 0.
fn forbid_mlock() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_IPC_LOCK: u32 = 14;
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data words, as
    // capget(2) documents.
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
        d[0].effective &= !(1 << CAP_IPC_LOCK);
        assert_eq!(libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()), 0);
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &none), 0);
    }
    // The setup works: locking one page is refused now.
    let page = vec![0u8; 4096];
    // SAFETY: our own buffer; unlocked again if the lock was granted.
    let r = unsafe { libc::mlock(page.as_ptr().cast(), page.len()) };
    assert_ne!(r, 0, "mlock still succeeds: the test cannot forbid it here");
}

/// Child: with mlock forbidden, make two objects' keys and two DRAM
/// caches (each attach derives keys and fills a cache).
#[test]
fn mlock_child() {
    let Ok(dir) = std::env::var(ROLE) else {
        return; // Only does something when the parent test runs it.
    };
    forbid_mlock();
    let path = std::path::Path::new(&dir).join("pool");
    let pool = Pool::create(&path, 4 << 20).unwrap();
    for name in ["one", "two"] {
        pool.pcreate_with(name, 2 * PAGE as u64, Some(KEY), KdfParams::INSECURE_FAST)
            .unwrap();
    }
    drop(pool);
    for name in ["one", "two"] {
        let pool = Pool::open(&path, Access::ReadOnly).unwrap();
        let a = pool
            .attach(name, Perm::Read, Some(KEY), Mode::DramCache)
            .unwrap();
        assert_eq!(a.as_slice()[0], 0);
        a.detach().unwrap();
    }
}

#[test]
fn a_refused_mlock_is_reported_once_per_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "mlock_child", "--test-threads=1", "--nocapture"])
        .env(ROLE, dir.path())
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    let lines = |needle: &str| stderr.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(
        lines("nvmos-pmo: warning: could not lock key material in memory"),
        1,
        "{stderr}"
    );
    assert_eq!(
        lines("nvmos-pmo: warning: could not lock the DRAM cache of decrypted pages in memory"),
        1,
        "{stderr}"
    );
}
