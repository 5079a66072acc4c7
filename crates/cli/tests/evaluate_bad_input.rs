//! `nvmos evaluate` and `nvmos replay` on bad input: a clear error that
//! says what and where, exit code 1, never a panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nvmos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .unwrap()
}

/// Refused with exit code 1, no panic, and every `needle` in the message.
fn refused(output: &Output, needles: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
    stderr
}

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvmos-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn a_missing_trace_folder_is_named() {
    let out = nvmos(&[
        "evaluate",
        "--traces",
        "/nonexistent/traces",
        "--out",
        "/tmp/unused",
    ]);
    refused(&out, &["/nonexistent/traces", "No such file"]);
}

#[test]
fn a_flipped_byte_is_a_checksum_error_with_file_and_offset() {
    let mut bytes = std::fs::read(shipped("numpy.nvt")).unwrap();
    bytes[5000] ^= 0xff;
    let path = scratch("flipped.nvt");
    std::fs::write(&path, bytes).unwrap();
    let stderr = refused(
        &nvmos(&["replay", "--trace", path.to_str().unwrap()]),
        &["flipped.nvt", "checksum", "offset"],
    );
    assert_eq!(
        stderr.matches("checksum").count(),
        1,
        "the cause is said once: {stderr}"
    );
}

#[test]
fn a_truncated_trace_is_named() {
    let bytes = std::fs::read(shipped("numpy.nvt")).unwrap();
    let path = scratch("cut.nvt");
    std::fs::write(&path, &bytes[..7000]).unwrap();
    refused(
        &nvmos(&["replay", "--trace", path.to_str().unwrap()]),
        &["cut.nvt", "truncated", "7000"],
    );
}

#[test]
fn a_file_that_is_no_trace_is_named() {
    let path = scratch("notes.txt");
    std::fs::write(&path, "hello\n").unwrap();
    refused(
        &nvmos(&["replay", "--trace", path.to_str().unwrap()]),
        &["notes.txt", "not a trace"],
    );
}

#[test]
fn unknown_allocators_and_bad_sizes_are_named() {
    let trace = shipped("numpy.nvt");
    let trace = trace.to_str().unwrap();
    refused(
        &nvmos(&["replay", "--trace", trace, "--alloc", "nosuch"]),
        &["\"nosuch\"", "LiS-31"],
    );
    refused(
        &nvmos(&["replay", "--trace", trace, "--memory", "lots"]),
        &["--memory", "lots"],
    );
    refused(
        &nvmos(&["replay", "--trace", trace, "--cpus", "0"]),
        &["--cpus 0"],
    );
}

/// A replay over less memory than the trace touches is refused, naming
/// the first pfn beyond it: dropping the writes outside it would report
/// the kernel's row as max 0, lifetime 100 %.
#[test]
fn too_little_memory_is_refused_naming_the_first_pfn_beyond_it() {
    // A text trace has no machine but the memory given: its recorded
    // placement cannot put a block beyond it, so the run is refused.
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data/ftrace_pipe.txt");
    for memory in ["1MiB", "1frame"] {
        let out = nvmos(&[
            "replay",
            "--trace",
            trace.to_str().unwrap(),
            "--memory",
            memory,
            "--alloc",
            "iBuddy",
            "--json",
        ]);
        refused(
            &out,
            &[
                "ftrace_pipe.txt:",
                "pfn 0x",
                "beyond the",
                "needs more memory",
            ],
        );
        assert!(out.stdout.is_empty(), "no table after the error");
    }
}

#[test]
fn a_smaller_memory_for_a_recorded_trace_flags_the_refusing_allocator() {
    // A recorded trace keeps its own zones for the recorded placement; an
    // allocator given less memory than the traced pfns span is a real
    // question (a memory-size sweep): every refused allocation is counted
    // and the row is flagged, never dropped in silence.
    let trace = shipped("numpy.nvt");
    let out = nvmos(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--memory",
        "1frame",
        "--alloc",
        "iBuddy",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("iBuddy: 21074 allocations refused"),
        "the refusing row is flagged: {stdout}"
    );
}

#[test]
fn a_missing_trace_file_is_said_once() {
    let out = nvmos(&["replay", "--trace", "/nonexistent/trace.nvt"]);
    let stderr = refused(&out, &["/nonexistent/trace.nvt", "No such file"]);
    // Each error of the chain says its own part: the system's words once.
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
}

/// Every command that reads a trace or a trace folder says a missing one
/// once: no message repeats the error it wraps.
#[test]
fn every_command_says_a_missing_file_once() {
    let out = scratch("missing-out");
    let out = out.to_str().unwrap();
    for args in [
        &["trace", "info", "/nonexistent/trace.nvt"][..],
        &["replay", "--trace", "/nonexistent/trace.nvt", "--horizon"],
        &["evaluate", "--traces", "/nonexistent/traces", "--out", out],
        &["study", "levelling", "--traces", "/nonexistent/traces"],
        &[
            "study",
            "swap",
            "--traces",
            "/nonexistent/traces",
            "--out",
            out,
        ],
    ] {
        let o = nvmos(args);
        let stderr = refused(&o, &["/nonexistent/", "No such file"]);
        assert_eq!(
            stderr.matches("No such file").count(),
            1,
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn every_registry_allocator_replays_a_shipped_trace() {
    let trace = shipped("numpy.nvt");
    let out = nvmos(&["replay", "--trace", trace.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["traces"][0]["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["allocator"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        nvmos_sim::AllocatorKind::ALL.len() + 1,
        "{names:?}"
    );
    for kind in nvmos_sim::AllocatorKind::ALL {
        let row = rows.iter().find(|r| r["allocator"] == kind.name()).unwrap();
        assert!(row["stats"]["allocs"].as_u64().unwrap() > 20_000, "{kind}");
        let passes = row["stats"]["migration_passes"].as_u64().unwrap();
        // numpy lasts 3.9 s: migration passes at 1, 2 and 3 s.
        assert_eq!(passes > 0, kind.caps().migrates, "{kind}: {passes} passes");
    }
}

#[test]
fn a_folder_with_a_stray_file_and_colliding_names_is_evaluated_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data/ftrace_trace.txt");
    std::fs::copy(&sample, dir.path().join("t.txt")).unwrap();
    let nvt = dir.path().join("t.nvt");
    let o = nvmos(&[
        "trace",
        "convert",
        sample.to_str().unwrap(),
        nvt.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(dir.path().join("junk.bin"), [0u8, 1, 2, 3]).unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = nvmos(&[
        "evaluate",
        "--traces",
        dir.path().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--alloc",
        "iBuddy",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("skipped 1 files that are not traces") && stdout.contains("junk.bin"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("results.json")).unwrap()).unwrap();
    let names: Vec<&str> = json["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trace"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["t.nvt", "t.txt"]);
    assert_eq!(json["not_traces"].as_array().unwrap().len(), 1);
    let page = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    assert!(page.contains("junk.bin"));
    // One trace named directly, and replay's positional trace.
    let o = nvmos(&[
        "evaluate",
        "--traces",
        nvt.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--alloc",
        "iBuddy",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["traces"].as_array().unwrap().len(), 1);
    let numpy = shipped("numpy.nvt");
    let o = nvmos(&[
        "replay",
        numpy.to_str().unwrap(),
        "--alloc",
        "iBuddy",
        "--memory",
        "1GiB",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("the allocators manage 1 GiB"), "{stdout}");
}
