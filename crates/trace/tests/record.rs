//! The recorder on the real kernel: runs only as root with tracefs
//! available, and says why when it skips.

#![cfg(target_os = "linux")]

use std::ffi::OsString;
use std::path::Path;

use nvmos_trace::record::{record, RecordOptions, EVENTS};
use nvmos_trace::{EventSource, NvtReader, TraceInfo};

#[path = "kernel_state/mod.rs"]
mod kernel_state;
use kernel_state::tracefs_mounted;

/// The tracing state the recorder promises to restore.
fn snapshot() -> Vec<(String, String)> {
    let mut files = vec![
        "tracing_on".to_owned(),
        "current_tracer".to_owned(),
        "buffer_size_kb".to_owned(),
    ];
    files.extend(EVENTS.iter().map(|e| format!("events/{e}/enable")));
    kernel_state::snapshot(&files.iter().map(String::as_str).collect::<Vec<_>>())
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
    if !kernel_state::can_record("recording") {
        return;
    }
    let _lock = kernel_state::lock();
    let dir = tempfile::tempdir().unwrap();

    // 1. tracefs not mounted: the recorder mounts it and unmounts it again.
    let was_mounted = tracefs_mounted();
    if !was_mounted {
        record_and_check(&dir.path().join("a.nvt"));
        assert!(!tracefs_mounted(), "the recorder left tracefs mounted");
    }

    // 2. tracefs mounted, with a state of ours: every file comes back.
    let mount = kernel_state::Mounted::new();
    let before = snapshot();
    record_and_check(&dir.path().join("b.nvt"));
    let after = snapshot();
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
    let after_failure = snapshot();
    // A command that cannot start: an error, and the state restored too.
    let missing = [OsString::from("/nonexistent/nvmos-no-such-command")];
    let err = record(
        &missing,
        &dir.path().join("d.nvt"),
        &RecordOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("cannot start"), "{err}");
    let after_spawn_error = snapshot();
    kernel_state::assert_restored(&before, &after, "after a recording");
    kernel_state::assert_restored(&before, &after_failure, "after a failing command");
    kernel_state::assert_restored(&before, &after_spawn_error, "after a spawn error");
    // Twice in a row: the state left by the first recording is restored
    // exactly by the next (no rounding drift).
    let again = snapshot();
    record_and_check(&dir.path().join("e.nvt"));
    assert_eq!(snapshot(), again, "a second recording changed the state");
    drop(mount);
}

#[test]
fn a_missing_command_is_an_error_and_changes_nothing() {
    if !kernel_state::can_record("recording") {
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

/// `--writes` on the real kernel. Where soft-dirty bits work: a command
/// that fills a 32 MiB buffer again and again is recorded with writes
/// every 10 ms, and writes land on frames allocated in the trace. Where
/// the kernel lacks them (built without `CONFIG_MEM_SOFT_DIRTY`, as this
/// repository's VM): the recorder refuses before touching anything, with
/// an error that says why, and leaves no file and the tracing state as it
/// was.
#[test]
fn records_writes_of_frames_it_allocated() {
    use nvmos_trace::{BlockTracker, Effect, Op};
    if !kernel_state::can_record("recording writes") {
        return;
    }
    let _lock = kernel_state::lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.nvt");
    let mount = kernel_state::Mounted::new();
    let mut files = vec![
        "tracing_on",
        "current_tracer",
        "buffer_size_kb",
        "trace_clock",
    ];
    let enables: Vec<String> = EVENTS
        .iter()
        .map(|e| format!("events/{e}/enable"))
        .collect();
    files.extend(enables.iter().map(String::as_str));
    let before = kernel_state::snapshot(&files);
    // dd reads /dev/zero into its 32 MiB buffer 40 times: user pages the
    // kernel writes through their page tables, so their bits are set.
    let command: Vec<OsString> = ["dd", "if=/dev/zero", "of=/dev/null", "bs=32M", "count=40"]
        .iter()
        .map(OsString::from)
        .collect();
    let opts = RecordOptions {
        write_interval: Some(std::time::Duration::from_millis(10)),
        ..RecordOptions::default()
    };
    let supported = nvmos_trace::softdirty::check_support();
    let result = record(&command, &out, &opts);
    let after = kernel_state::snapshot(&files);
    kernel_state::assert_restored(&before, &after, "after recording writes");
    drop(mount);
    if let Err(why) = supported {
        let err = result.unwrap_err();
        assert_eq!(err.to_string(), why.to_string());
        assert!(err.to_string().contains("soft-dirty") || err.to_string().contains("pagemap"));
        assert!(!out.exists(), "a refused recording left {}", out.display());
        eprintln!(
            "NOTE recording writes: this kernel cannot sample writes ({err}); checked the refusal, not the sampling"
        );
        return;
    }
    let summary = result.unwrap();
    assert!(summary.exit.success(), "{summary:?}");
    let sampling = summary.header.writes.clone().unwrap();
    assert_eq!(sampling.interval_ns, 10_000_000);
    assert!(sampling.samples > 0 && sampling.writes > 0, "{sampling:?}");
    let mut reader = NvtReader::open(&out).unwrap();
    assert_eq!(reader.header().unwrap().writes, Some(sampling.clone()));
    let mut tracker = BlockTracker::new();
    let (mut writes, mut on_allocated, mut last) = (0u64, 0u64, 0u64);
    for e in reader.by_ref() {
        let e = e.unwrap();
        assert!(
            e.time_ns >= last || e.op != Op::Write,
            "writes out of order"
        );
        last = e.time_ns;
        if let Effect::Written(block) = tracker.step(&e) {
            writes += 1;
            on_allocated += u64::from(block.is_some());
        }
    }
    assert_eq!(writes, sampling.writes);
    // 32 MiB is 8192 frames, allocated during the recording and written
    // in every sample while dd runs.
    assert!(
        on_allocated >= 4096,
        "{on_allocated} of {writes} writes on frames allocated in the trace"
    );
}
