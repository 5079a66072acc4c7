//! `nvmos record-swap` interrupted at any point (SIGINT or SIGTERM, during
//! set-up, while the command runs, near its end) leaves no swap file
//! enabled or on disk, no cgroup, and the tracing state as it was; a
//! completed recording is a readable trace; a command that cannot start
//! is a clear error with everything removed. Needs root (CI runs as root).

#![cfg(target_os = "linux")]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod tracefs_common;
const PREFIX: &str = "nvmos-swap-";

/// The tracing files the recorder changes.
fn snapshot() -> Vec<(String, String)> {
    tracefs_common::snapshot(&[
        "tracing_on",
        "current_tracer",
        "trace_clock",
        "buffer_size_kb",
        "events/block/block_rq_issue/enable",
        "events/block/block_rq_issue/filter",
        "events/block/block_rq_requeue/enable",
        "events/block/block_rq_requeue/filter",
        "events/vmscan/mm_vmscan_throttled/enable",
    ])
}

/// Cgroup directories named like ours anywhere under /sys/fs/cgroup
/// (three levels deep is where they are made).
fn leftover_cgroups() -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            if e.file_name().to_string_lossy().starts_with(PREFIX) {
                out.push(p);
            } else if depth > 0 {
                walk(&p, depth - 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), 4, &mut out);
    out
}

fn assert_clean(dir: &Path, before: &[(String, String)], what: &str) {
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(
        !swaps.contains(PREFIX),
        "{what}: a swap file is still enabled:\n{swaps}"
    );
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(PREFIX))
        .map(|e| e.path())
        .collect();
    assert!(files.is_empty(), "{what}: swap file left: {files:?}");
    let cgroups = leftover_cgroups();
    assert!(cgroups.is_empty(), "{what}: cgroup left: {cgroups:?}");
    tracefs_common::assert_restored(before, &snapshot(), &format!("{what}: tracing state"));
}

fn nvmos(dir: &Path, out: &str, cmd: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nvmos"));
    c.arg("record-swap")
        .arg("-o")
        .arg(dir.join(out))
        .args(["--limit", "32MiB", "--swap-size", "256MiB", "--swap-dir"])
        .arg(dir)
        .arg("--")
        .args(cmd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The signals start at their default action in the child: a runner
    // that started the tests in the background (a non-interactive
    // shell's `&`) has SIGINT ignored, the child would inherit that, and
    // a SIGINT sent before nvmos installs its handler (the 0 ms case)
    // would be lost, leaving the recording running until the test gave
    // up on it.
    // SAFETY: `signal` is async-signal-safe, so it may run between fork
    // and exec; the closure touches nothing else.
    unsafe {
        c.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    c
}

/// A command that swaps for as long as it is left running.
const SWAPPER: [&str; 3] = [
    "python3",
    "-c",
    "import itertools\nbufs=[bytearray(8<<20) for _ in range(12)]\nfor i in itertools.count():\n    b=bufs[i%12]; b[0:len(b):4096]=bytes([i%250+1])*(len(b)//4096)\n",
];

fn wait(mut child: std::process::Child, what: &str) -> (std::process::ExitStatus, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (status, String::from_utf8_lossy(&out.stderr).into_owned());
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{what}: nvmos record-swap did not stop within 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn interrupted_anywhere_leaves_nothing_behind() {
    if !tracefs_common::can_record("record-swap") {
        return;
    }
    let _lock = tracefs_common::lock();
    let mount = tracefs_common::Mounted::new();
    let before = snapshot();
    // The swap file must live on a disk-backed filesystem: the target dir.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("record-swap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // Interrupted at many points: during set-up (0–100 ms), while the
    // command swaps, and with SIGTERM.
    for (i, (delay_ms, signal)) in [
        (0, libc::SIGINT),
        (5, libc::SIGINT),
        (15, libc::SIGINT),
        (30, libc::SIGINT),
        (60, libc::SIGINT),
        (120, libc::SIGINT),
        (250, libc::SIGTERM),
        (600, libc::SIGINT),
        (1500, libc::SIGTERM),
    ]
    .into_iter()
    .enumerate()
    {
        let what = format!("signal {signal} after {delay_ms} ms");
        let child = nvmos(&dir, &format!("int{i}.swt.zst"), &SWAPPER)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        unsafe { libc::kill(child.id() as i32, signal) };
        let (status, stderr) = wait(child, &what);
        assert!(
            !status.success(),
            "{what}: an interrupted recording reports failure"
        );
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        // Killed by the signal itself only if it came before the handlers
        // were installed, which is before anything is created.
        use std::os::unix::process::ExitStatusExt;
        assert!(
            stderr.contains("interrupted") || status.signal() == Some(signal),
            "{what}: {status:?} {stderr}"
        );
        assert_clean(&dir, &before, &what);
    }

    // A command that cannot start: a clear error, nothing left.
    let (status, stderr) = wait(
        nvmos(&dir, "bad.swt.zst", &["/nonexistent/program"])
            .spawn()
            .unwrap(),
        "bad command",
    );
    assert!(!status.success());
    assert!(stderr.contains("/nonexistent/program"), "{stderr}");
    assert_clean(&dir, &before, "bad command");

    // A short complete recording: swap-outs in a readable trace.
    let (status, stderr) = wait(
        nvmos(
            &dir,
            "ok.swt.zst",
            &["python3", "-c", "b=bytearray(64<<20); b[0:len(b):4096]=b'x'*(len(b)//4096); print(sum(b[0:len(b):4096]))"],
        )
        .spawn()
        .unwrap(),
        "complete",
    );
    assert!(status.success(), "{stderr}");
    assert_clean(&dir, &before, "complete");
    let trace = nvmos_swap::SwapTrace::read(&dir.join("ok.swt.zst")).unwrap();
    let written: u64 = trace
        .requests
        .iter()
        .filter(|r| r.dir == nvmos_swap::Dir::Write)
        .map(|r| r.size)
        .sum();
    // 64 MiB through a 32 MiB limit: at least 16 MiB must have gone out.
    assert!(written >= 16 << 20, "{written} bytes written to swap");

    let _ = std::fs::remove_dir_all(&dir);
    drop(mount);
}
