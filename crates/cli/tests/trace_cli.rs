//! `nvmos trace convert` and `nvmos trace info` on a real ftrace capture
//! from this machine's kernel: converting keeps every event, and `info`
//! tells the same story before and after.

use std::path::Path;
use std::process::Command;

fn nvmos(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .unwrap()
}

fn info(path: &str) -> serde_json::Value {
    let out = nvmos(&["trace", "info", "--json", path]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn convert_keeps_every_event_and_info_agrees() {
    let text = Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data/ftrace_trace.txt");
    let text = text.to_str().unwrap();
    let nvt = std::env::temp_dir().join(format!("nvmos-convert-{}.nvt", std::process::id()));
    let nvt = nvt.to_str().unwrap();
    let out = nvmos(&["trace", "convert", text, nvt]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let before = info(text);
    let after = info(nvt);
    assert_eq!(before["format"], "ftrace");
    assert_eq!(after["format"], "nvt");
    for field in [
        "events",
        "allocs",
        "frees",
        "cpus",
        "alloc_orders",
        "free_orders",
        "migratetypes",
        "pfn_min",
        "pfn_max",
    ] {
        assert_eq!(before[field], after[field], "{field}");
    }
    // The capture: 7 allocations and 43 frees once the kernel's duplicate
    // batched frees are dropped; 3 lines of another kmem event skipped.
    assert_eq!(
        (before["events"].as_u64(), before["allocs"].as_u64()),
        (Some(50), Some(7))
    );

    let table = String::from_utf8_lossy(&nvmos(&["trace", "info", nvt]).stdout).into_owned();
    assert!(
        table.contains("events        50") && table.contains("pfn span"),
        "{table}"
    );
    let _ = std::fs::remove_file(nvt);
}

#[test]
fn convert_refuses_a_missing_input_and_names_it() {
    let out = nvmos(&["trace", "convert", "/nonexistent/in.txt", "/tmp/out.nvt"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("/nonexistent/in.txt") && !stderr.contains("panicked"),
        "{stderr}"
    );
}
