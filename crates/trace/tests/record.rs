//! The recorder on the real kernel: runs only as root with tracefs
//! available, and says why when it skips.

#![cfg(target_os = "linux")]

use std::ffi::OsString;
use std::path::Path;

use nvmos_trace::record::{record, RecordOptions, EVENTS, TRACEFS};
use nvmos_trace::{EventSource, NvtReader, TraceInfo};

fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
}

/// The tracing state the recorder promises to restore.
fn snapshot(root: &Path) -> Vec<(String, String)> {
    let mut files = vec![
        "tracing_on".to_owned(),
        "current_tracer".to_owned(),
        "buffer_size_kb".to_owned(),
    ];
    files.extend(EVENTS.iter().map(|e| format!("events/{e}/enable")));
    files
        .into_iter()
        .map(|f| {
            let v = std::fs::read_to_string(root.join(&f)).unwrap();
            let v = v.trim();
            // Never-used buffers read "7 (expanded: 1408)"; restored as 1408.
            let v = v
                .split("expanded:")
                .nth(1)
                .map_or(v, |s| s.trim().trim_end_matches(')'))
                .to_owned();
            (f, v)
        })
        .collect()
}

fn command() -> Vec<OsString> {
    ["sh", "-c", "head -c 50000000 /dev/urandom > /dev/null"]
        .iter()
        .map(OsString::from)
        .collect()
}

fn record_and_check(out: &Path) {
    let summary = record(&command(), out, &RecordOptions::default()).unwrap();
    assert!(summary.events > 0, "{summary:?}");
    assert!(summary.exit.success());
    assert!(!summary.interrupted);
    let mut reader = NvtReader::open(out).unwrap();
    let header = reader.header().unwrap().clone();
    assert_eq!(header.events, summary.events);
    assert!(header.machine.as_ref().unwrap().page_size >= 4096);
    assert!(!header.machine.as_ref().unwrap().zones.is_empty());
    let info = TraceInfo::from_source(&mut reader).unwrap();
    assert_eq!(info.events, summary.events);
    assert_eq!(std::fs::metadata(out).unwrap().len(), summary.bytes);
}

#[test]
fn records_and_restores_the_tracing_state() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: recording needs root");
        return;
    }
    if !Path::new(TRACEFS).is_dir() {
        println!("skipped: no {TRACEFS} to mount tracefs on");
        return;
    }
    let dir = tempfile::tempdir().unwrap();

    // 1. tracefs not mounted: the recorder mounts it and unmounts it again.
    let was_mounted = tracefs_mounted();
    if !was_mounted {
        record_and_check(&dir.path().join("a.nvt"));
        assert!(!tracefs_mounted(), "the recorder left tracefs mounted");
    }

    // 2. tracefs mounted, with a state of ours: every file comes back.
    let we_mount = !tracefs_mounted();
    if we_mount {
        let status = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .unwrap();
        assert!(status.success());
    }
    let root = Path::new(TRACEFS);
    let before = snapshot(root);
    record_and_check(&dir.path().join("b.nvt"));
    let after = snapshot(root);
    // The command's failure: a complete trace and its exit status.
    let failing: Vec<OsString> = ["sh", "-c", "exit 3"].iter().map(OsString::from).collect();
    let summary = record(
        &failing,
        &dir.path().join("c.nvt"),
        &RecordOptions::default(),
    )
    .unwrap();
    assert_eq!(summary.exit.code, Some(3));
    assert!(NvtReader::open(dir.path().join("c.nvt")).is_ok());
    let after_failure = snapshot(root);
    // A command that cannot start: an error, and the state restored too.
    let missing = [OsString::from("/nonexistent/nvmos-no-such-command")];
    let err = record(
        &missing,
        &dir.path().join("d.nvt"),
        &RecordOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("cannot start"), "{err}");
    let after_spawn_error = snapshot(root);
    if we_mount {
        let _ = std::process::Command::new("umount").arg(TRACEFS).status();
    }
    assert_eq!(before, after);
    assert_eq!(before, after_failure);
    assert_eq!(before, after_spawn_error);
}

#[test]
fn a_missing_command_is_an_error_and_changes_nothing() {
    // SAFETY: as above.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: recording needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let err = record(&[], &dir.path().join("x.nvt"), &RecordOptions::default()).unwrap_err();
    // The message says what failed once; the cause is its source.
    let cause = std::error::Error::source(&err).map(ToString::to_string);
    assert!(
        cause.as_deref().unwrap_or("").contains("no command"),
        "{err}: {cause:?}"
    );
}
