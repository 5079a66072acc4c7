//! `nvmos record` interrupted with Ctrl-C (SIGINT) while its command runs:
//! it stops the command, keeps the events recorded so far in a readable
//! `.nvt` file, says so, and leaves the kernel's tracing state as it found
//! it. Runs only as root with tracefs, and says why when it skips.

#![cfg(target_os = "linux")]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod tracefs_common;
use tracefs_common::tracefs_mounted;

/// What the recorder changes and must put back.
fn snapshot() -> Vec<(String, String)> {
    tracefs_common::snapshot(&[
        "tracing_on",
        "current_tracer",
        "buffer_size_kb",
        "events/kmem/mm_page_alloc/enable",
        "events/kmem/mm_page_free/enable",
        "events/kmem/mm_page_free_batched/enable",
    ])
}

#[test]
fn ctrl_c_stops_the_command_keeps_the_events_and_restores_tracing() {
    if !tracefs_common::can_record("recording") {
        return;
    }
    let _lock = tracefs_common::lock();
    let mount = tracefs_common::Mounted::new();
    let before = snapshot();

    let dir = std::env::temp_dir().join(format!("nvmos-record-int-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("interrupted.nvt");
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .arg("record")
        .arg("-o")
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "while :; do head -c 1000000 /dev/urandom > /dev/null; done",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("nvmos record did not stop within 30 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !status.success(),
        "an interrupted recording reports failure"
    );
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // The tracing state is what it was, and tracefs is still mounted.
    tracefs_common::assert_restored(&before, &snapshot(), "after Ctrl-C");
    assert!(tracefs_mounted());

    // The events up to the interrupt are in a readable trace.
    let info = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(["trace", "info", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        info.status.success(),
        "{}",
        String::from_utf8_lossy(&info.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert!(info["events"].as_u64().unwrap() > 0, "{info}");

    let _ = std::fs::remove_dir_all(&dir);
    drop(mount);
}
