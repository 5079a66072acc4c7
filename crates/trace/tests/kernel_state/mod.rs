//! What every test that changes global kernel state (tracefs, swap,
//! cgroups) shares, across test binaries and crates: one machine-wide lock
//! so such tests never overlap, a check that they can run here (an error
//! under CI, a message elsewhere), and a snapshot of tracing files that
//! compares what a recorder may be asked to put back.
//!
//! Included with `#[path]` by `nvmos-trace`'s and `nvmos`'s tests, since
//! they are different test binaries: a `Mutex` would not serialize them.

#![allow(dead_code)]

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::Command;

pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Held while a test changes kernel state; dropping it (or the process
/// dying) releases the `flock`.
pub struct KernelStateLock {
    _file: File,
}

/// Waits for the machine-wide lock of tests that touch kernel state. The
/// lock file lives in `/tmp` (not `TMPDIR`, which test harnesses may set
/// per binary) so every test binary of every checkout agrees on it.
pub fn lock() -> KernelStateLock {
    let path = Path::new("/tmp/nvmos-kernel-state.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "flock: {e}");
    }
    KernelStateLock { _file: file }
}

/// Whether CI runs this (`CI` set, as `.ci/run` does): then a test that
/// cannot run fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Skips (or, under CI, fails) with `why`.
pub fn cannot_run(what: &str, why: &str) {
    assert!(
        !in_ci(),
        "{what}: {why}; CI must run every test (.ci/run runs as root)"
    );
    eprintln!("SKIPPED {what}: {why} (an error under CI)");
}

pub fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
}

/// Root and a tracefs mount point: whether a recorder test can run.
pub fn can_record(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        cannot_run(what, "needs root");
        return false;
    }
    if !Path::new(TRACEFS).is_dir() {
        cannot_run(what, &format!("no {TRACEFS}"));
        return false;
    }
    true
}

/// Tracefs mounted for a test that holds the lock; unmounts on drop what
/// it mounted, also when the test panics.
pub struct Mounted {
    pub mounted_here: bool,
}

impl Mounted {
    pub fn new() -> Mounted {
        let mounted_here = !tracefs_mounted();
        if mounted_here {
            let ok = Command::new("mount")
                .args(["-t", "tracefs", "nodev", TRACEFS])
                .status()
                .unwrap()
                .success();
            assert!(ok, "mounting tracefs");
        }
        Mounted { mounted_here }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.mounted_here {
            let _ = Command::new("umount").arg(TRACEFS).status();
        }
    }
}

/// The raw, trimmed contents of tracing files (relative to tracefs); a
/// file the kernel lacks reads as `<missing>`, so its appearing is a
/// change too.
pub fn snapshot(files: &[&str]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|f| {
            let v = std::fs::read_to_string(Path::new(TRACEFS).join(f))
                .unwrap_or_else(|_| "<missing>".into());
            (f.to_string(), v.trim().to_owned())
        })
        .collect()
}

/// Asserts `after` is the state `before` restored: equal, except that a
/// never-used ring buffer (`buffer_size_kb` reading `7 (expanded: 1408)`)
/// cannot be un-used, so it must read what the kernel reports for a write
/// of its expanded size (the kernel rounds to whole sub-buffers: 1408
/// reads back as 1410). That is checked by writing the expanded size again
/// and reading it back: a no-op when the recorder got it right.
pub fn assert_restored(before: &[(String, String)], after: &[(String, String)], what: &str) {
    assert_eq!(before.len(), after.len());
    for ((file, b), (_, a)) in before.iter().zip(after) {
        let expanded = (file == "buffer_size_kb")
            .then(|| b.split("expanded:").nth(1))
            .flatten()
            .map(|s| s.trim().trim_end_matches(')').trim().to_owned());
        match expanded {
            Some(size) if a != b => {
                let path = Path::new(TRACEFS).join(file);
                std::fs::write(&path, &size).unwrap();
                let reported = std::fs::read_to_string(&path).unwrap().trim().to_owned();
                if &reported != a {
                    // Put back what the recorder left before failing.
                    let _ = std::fs::write(&path, a);
                }
                assert_eq!(
                    a, &reported,
                    "{what}: {file} was {b:?}; the kernel reports {reported:?} for {size}, the recorder left {a:?}"
                );
            }
            _ => assert_eq!(a, b, "{what}: {file} changed"),
        }
    }
}
