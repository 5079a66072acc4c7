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

/// The value printed on the `trace info` line that starts with `name`.
fn row<'a>(table: &'a str, name: &str) -> Option<&'a str> {
    table
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .and_then(|l| l.split_whitespace().last())
}

/// Events the ring buffer overwrote (ftrace's `entries-in-buffer/
/// entries-written` header line) are lost events, and events stamped
/// earlier than the one before are out of order: in the table and the
/// JSON, before and after conversion.
#[test]
fn info_counts_overwritten_entries_and_backwards_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let alloc = |cpu: u32, ts: &str, pfn: u32| {
        format!(" a-1 [{cpu:03}] ..... {ts}: mm_page_alloc: page=00000000deadbeef pfn={pfn:#x} order=0 migratetype=1 gfp_flags=GFP_USER\n")
    };
    let free = |cpu: u32, ts: &str, pfn: u32| {
        format!(" a-1 [{cpu:03}] ..... {ts}: mm_page_free: page=00000000deadbeef pfn={pfn:#x} order=0\n")
    };
    // 5, 2 (back, before the first), 9, 3 (back): two out of order.
    let text = [
        "# tracer: nop\n#\n# entries-in-buffer/entries-written: 4/1004   #P:2\n#\n".to_owned(),
        alloc(0, "10.000005", 0x100),
        alloc(1, "10.000002", 0x200),
        free(0, "10.000009", 0x100),
        free(1, "10.000003", 0x200),
    ]
    .concat();
    let txt = dir.path().join("back.txt");
    std::fs::write(&txt, text).unwrap();
    let nvt = dir.path().join("back.nvt");
    let out = nvmos(&[
        "trace",
        "convert",
        txt.to_str().unwrap(),
        nvt.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for path in [&txt, &nvt] {
        let path = path.to_str().unwrap();
        let v = info(path);
        assert_eq!(v["accounting"]["lost_events"], 1000, "{path}");
        assert_eq!(v["counts"]["lost_events"], 1000, "{path}");
        assert_eq!(v["accounting"]["time_reversals"], 2, "{path}");
        let table = String::from_utf8_lossy(&nvmos(&["trace", "info", path]).stdout).into_owned();
        assert_eq!(row(&table, "lost events"), Some("1000"), "{table}");
        assert_eq!(row(&table, "out-of-order timestamps"), Some("2"), "{table}");
    }
}

/// An `.nvt` whose header describes an impossible machine is refused,
/// naming the file, the header's offset and the field; never a panic.
#[test]
fn info_refuses_a_crafted_nvt_header_naming_file_offset_and_field() {
    use nvmos_trace::{MachineInfo, NvtWriter, TraceHeader, ZoneInfo};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forged.nvt");
    let header = TraceHeader {
        machine: Some(MachineInfo {
            page_size: 4096,
            memory_bytes: 1 << 30,
            cpus: 1,
            zones: vec![ZoneInfo {
                node: 0,
                name: "Normal".into(),
                start_pfn: 0x1000,
                spanned: u64::MAX - 0x10,
                present: 0x1000,
            }],
            kernel: String::new(),
            ram: Vec::new(),
        }),
        ..TraceHeader::default()
    };
    let w = NvtWriter::create(&path, header).unwrap();
    w.finish().unwrap();
    let out = nvmos(&["trace", "info", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("forged.nvt")
            && stderr.contains("offset")
            && stderr.contains("machine.zones[0].spanned")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
}
