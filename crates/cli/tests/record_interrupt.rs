//! `nvmos record` interrupted with Ctrl-C (SIGINT) while its command runs:
//! it stops the command, keeps the events recorded so far in a readable
//! `.nvt` file, says so, and leaves the kernel's tracing state as it found
//! it. Runs only as root with tracefs, and says why when it skips.

#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TRACEFS: &str = "/sys/kernel/tracing";

fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
}

/// What the recorder changes and must put back.
fn snapshot() -> Vec<(String, String)> {
    let mut files = vec!["tracing_on", "current_tracer", "buffer_size_kb"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    for event in ["mm_page_alloc", "mm_page_free", "mm_page_free_batched"] {
        files.push(format!("events/kmem/{event}/enable"));
    }
    files
        .into_iter()
        .map(|f| {
            let v = std::fs::read_to_string(Path::new(TRACEFS).join(&f)).unwrap();
            let v = v.trim();
            // A never-used buffer reads "7 (expanded: 1408)"; it comes back as 1408.
            let v = v
                .split("expanded:")
                .nth(1)
                .map_or(v, |s| s.trim().trim_end_matches(')'));
            (f, v.to_owned())
        })
        .collect()
}

#[test]
fn ctrl_c_stops_the_command_keeps_the_events_and_restores_tracing() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: recording needs root");
        return;
    }
    if !Path::new(TRACEFS).is_dir() {
        println!("skipped: no {TRACEFS}");
        return;
    }
    // Mount tracefs ourselves so the state can be read before and after.
    let mounted_here = !tracefs_mounted();
    if mounted_here {
        let ok = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting tracefs");
    }
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
    assert_eq!(snapshot(), before);
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
    if mounted_here {
        let _ = Command::new("umount").arg(TRACEFS).status();
    }
}
