//! A pool file truncated by another process while
//! this one has it open is an error naming the pool and the offset, never a
//! SIGBUS that kills the reader. A real second process (`truncate(1)`)
//! shortens the file between two steps of the reader.

use std::path::{Path, PathBuf};
use std::process::Command;

use nvmos_pmo::layout::{DATA_START, PAGE};
use nvmos_pmo::{
    Access, AttachError, BackingErrorKind, KdfParams, Mode, Perm, PmoError, Pool, PoolOptions,
};

const KEY: &[u8] = b"correct horse battery staple";
const POOL_BYTES: u64 = 4 << 20;
/// Header and directory survive; every data frame is cut off.
const CUT: u64 = DATA_START * PAGE as u64;

/// One test at a time: a child spawned by one test holds (until its exec)
/// the descriptors, and so the pool locks, another test has open.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Folders to put pools in: the temporary folder (msync durability) and,
/// where it exists, /dev/shm (tmpfs: cache-line flushes, MAP_POPULATE).
fn folders() -> Vec<tempfile::TempDir> {
    let mut v = vec![tempfile::tempdir().unwrap()];
    if Path::new("/dev/shm").is_dir() {
        v.push(tempfile::tempdir_in("/dev/shm").unwrap());
    }
    v
}

fn opts(dir: &Path) -> PoolOptions {
    PoolOptions {
        state_dir: Some(dir.join("state")),
        ..PoolOptions::default()
    }
}

/// A pool with encrypted "obj" (8 pages written) and plain "plain" (4).
fn setup(dir: &Path) -> PathBuf {
    let path = dir.join("pool");
    let pool = Pool::create_with(&path, POOL_BYTES, opts(dir)).unwrap();
    for (name, key) in [("obj", Some(KEY)), ("plain", None)] {
        pool.pcreate_with(name, 8 * PAGE as u64, key, KdfParams::INSECURE_FAST)
            .unwrap();
        let h = pool.open_object(name, Perm::Write, key).unwrap();
        for i in 0..8 {
            h.stage(i, &[i as u8 + 1; PAGE]).unwrap();
        }
        h.psync().unwrap();
    }
    path
}

/// Shorten the pool with another process, as a user or a script would.
fn truncate(path: &Path, size: u64) {
    let st = Command::new("truncate")
        .arg("-s")
        .arg(size.to_string())
        .arg(path)
        .status()
        .expect("running truncate(1)");
    assert!(st.success(), "truncate(1) failed: {st:?}");
}

/// Assert `e` is the truncation error for `path` and return its text.
fn assert_truncated(e: &PmoError, path: &Path) -> String {
    let PmoError::TruncatedWhileOpen {
        path: p,
        offset,
        size,
        expected,
    } = e
    else {
        panic!("expected TruncatedWhileOpen, got {e:?}: {e}");
    };
    assert_eq!(p, path);
    assert_eq!(*size, Some(CUT));
    assert_eq!(*expected, POOL_BYTES);
    assert!(*offset >= CUT && *offset < POOL_BYTES, "offset {offset}");
    let text = e.to_string();
    assert_eq!(
        text,
        format!(
            "pool {} was truncated to {CUT} bytes while open (it is {POOL_BYTES} bytes): access at offset {offset} is past its end; nothing after it was committed",
            path.display()
        )
    );
    text
}

#[test]
fn reading_an_object_of_a_truncated_pool_is_an_error_naming_pool_and_offset() {
    let _serial = serial();
    for dir in folders() {
        let path = setup(dir.path());
        for (name, key) in [("obj", Some(KEY)), ("plain", None)] {
            std::fs::copy(&path, dir.path().join("copy")).unwrap();
            let pool = Pool::open_with(&path, Access::ReadOnly, opts(dir.path())).unwrap();
            let h = pool.open_object(name, Perm::Read, key).unwrap();
            let mut page = vec![0u8; PAGE];
            h.read(3, &mut page).unwrap();
            assert_eq!(page, vec![4u8; PAGE]);
            truncate(&path, CUT);
            let e = h.read(5, &mut page).unwrap_err();
            assert_truncated(&e, &path);
            assert!(page.iter().all(|&b| b == 0), "no data on failure");
            // The open pool stays refused, even for pages read before.
            assert_truncated(&h.read(3, &mut page).unwrap_err(), &path);
            assert_truncated(&h.read_all().unwrap_err(), &path);
            assert_truncated(&pool.verify(name, key).unwrap_err(), &path);
            let c = pool.check_report();
            assert!(!c.ok());
            assert!(c.truncated.unwrap().contains("was truncated to"));
            drop(h);
            drop(pool);
            // Reopening the short file is the ordinary, clear refusal.
            let e = Pool::open(&path, Access::ReadOnly).unwrap_err();
            assert!(matches!(e, PmoError::Truncated { actual: CUT, .. }), "{e}");
            std::fs::rename(dir.path().join("copy"), &path).unwrap();
        }
    }
}

#[test]
fn metadata_reads_and_psync_on_a_truncated_pool_are_refused_and_commit_nothing() {
    let _serial = serial();
    for dir in folders() {
        let path = setup(dir.path());
        let before = std::fs::read(&path).unwrap();
        let pool = Pool::open_with(&path, Access::ReadWrite, opts(dir.path())).unwrap();
        let w = pool.open_object("plain", Perm::Write, None).unwrap();
        w.stage(0, &[0xEE; PAGE]).unwrap();
        truncate(&path, CUT);
        // Opening an object reads its root and page tables from the pool.
        let e = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
        assert_truncated(&e, &path);
        // Staging writes a data frame past the end; psync must not publish.
        let e = w.stage(1, &[0xDD; PAGE]).unwrap_err();
        assert_truncated(&e, &path);
        assert_truncated(&w.psync().unwrap_err(), &path);
        drop(w);
        drop(pool);
        // Put the bytes back (as a restore would): the directory was never
        // touched, so the pool opens at its last psync with the state store.
        std::fs::write(&path, &before).unwrap();
        let pool = Pool::open_with(&path, Access::ReadOnly, opts(dir.path())).unwrap();
        let h = pool.open_object("plain", Perm::Read, None).unwrap();
        let mut page = vec![0u8; PAGE];
        h.read(0, &mut page).unwrap();
        assert_eq!(page, vec![1u8; PAGE], "the refused psync committed nothing");
    }
}

/// Reads through an attachment's mapping: the fault handler's read of the
/// pool faults past the end; the page is refused (poisoned, as any page
/// that cannot be opened) and the error, of kind `Truncated`, names the
/// pool and the offset. A kernel-mode read (write(2) from the page) sees
/// EFAULT, so this process survives to check.
#[test]
fn faults_of_an_attachment_over_a_truncated_pool_are_refused_naming_pool_and_offset() {
    let _serial = serial();
    for (i, mode) in [Mode::DecryptAtFault, Mode::DramCache]
        .into_iter()
        .enumerate()
    {
        for dir in folders() {
            let path = setup(dir.path());
            let pool = Pool::open_with(&path, Access::ReadWrite, opts(dir.path())).unwrap();
            let a = pool.attach("obj", Perm::Write, Some(KEY), mode).unwrap();
            assert_eq!(a.as_slice()[PAGE * 2], 3);
            truncate(&path, CUT);
            let mut fds = [0; 2];
            // SAFETY: plain pipe(2), write(2), close(2) on our descriptors;
            // the source is a page of our attachment.
            let (n, errno) = unsafe {
                assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
                let n = libc::write(fds[1], a.as_ptr().add(6 * PAGE).cast(), 16);
                let errno = std::io::Error::last_os_error().raw_os_error();
                libc::close(fds[0]);
                libc::close(fds[1]);
                (n, errno)
            };
            assert_eq!(n, -1, "{mode:?}: a page of a truncated pool was read");
            assert_eq!(errno, Some(libc::EFAULT));
            let e = a.fault_error().expect("the failure is recorded");
            let AttachError::FaultFailed {
                page,
                kind,
                message,
                ..
            } = &e
            else {
                panic!("{e:?}");
            };
            assert_eq!((*page, *kind), (6, Some(BackingErrorKind::Truncated)));
            assert!(
                message.starts_with(&format!(
                    "pool {} was truncated to {CUT} bytes while open (it is {POOL_BYTES} bytes): access at offset ",
                    path.display()
                )),
                "{i}: {message}"
            );
            // A page installed before the truncation is still readable.
            assert_eq!(a.as_slice()[PAGE * 2], 3);
            assert!(matches!(
                a.psync(),
                Err(AttachError::FaultFailed { page: 6, .. })
            ));
            assert!(a.detach().is_err());
        }
    }
}

const CHILD_ENV: &str = "NVMOS_PMO_FOREIGN_SIGBUS_CHILD";

#[test]
fn foreign_sigbus_child() {
    // Runs only as the child of the test below: with a pool open (the
    // guard installed), fault past the end of a file that is not a pool.
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let _pool = Pool::open(&dir.join("pool"), Access::ReadOnly).unwrap();
    let other = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join("other"))
        .unwrap();
    other.set_len(PAGE as u64).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: a shared mapping of our own file; the read below faults
    // once the file is shortened, which is the point.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ,
            libc::MAP_SHARED,
            other.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    other.set_len(0).unwrap();
    let v = unsafe { std::ptr::read_volatile(p as *const u8) };
    // Reaching here means the guard swallowed a fault that was not its own.
    println!("read {v}");
    std::process::exit(0);
}

/// The guard handles faults in pool mappings only: a SIGBUS anywhere else
/// (here a truncated file that is not a pool) still ends the process with
/// SIGBUS, as it would without nvmos.
#[test]
fn a_sigbus_outside_any_pool_still_ends_the_process() {
    use std::os::unix::process::ExitStatusExt;
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    Pool::create(&dir.path().join("pool"), POOL_BYTES).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "foreign_sigbus_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGBUS), "{out:?}");
}
