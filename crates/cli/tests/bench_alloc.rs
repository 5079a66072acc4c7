//! `nvmos bench alloc` and `nvmos evaluate`, run as a user runs them. The
//! tests check what is printed and written, never how fast anything was.

use std::path::PathBuf;
use std::process::{Command, Output};

const ROWS: [&str; 8] = [
    "(a) buddy",
    "(b) LBS-1",
    "(c) LBS-31",
    "(d) iBuddy",
    "(e) LiS-1",
    "(f) LiS-31",
    "linux-pcp",
    "bsa",
];

/// A small, fast run: 16 MiB, one and two threads.
const TINY: [&str; 12] = [
    "bench",
    "alloc",
    "--memory",
    "16MiB",
    "--threads",
    "1,2",
    "--rounds",
    "1",
    "--repeat",
    "2000",
    "--mixed-ops",
    "2000",
];

fn nvmos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .expect("the nvmos binary runs")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "nvmos failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("utf-8 output")
}

#[test]
fn the_table_has_every_row_and_column() {
    let out = stdout(&nvmos(&TINY));
    for pattern in ["bulk", "repeat", "rand", "mixed"] {
        for op in ["alloc", "free"] {
            assert!(
                out.contains(&format!("{pattern}: {op}")),
                "no {pattern} {op} table:\n{out}"
            );
        }
    }
    let count = |prefix: &str| out.lines().filter(|l| l.starts_with(prefix)).count();
    // Eight pattern/op tables, then the metadata table.
    for row in ROWS {
        assert_eq!(count(row), 9, "row {row}:\n{out}");
    }
    for row in ["(c-e)/c", "c/f"] {
        assert_eq!(count(row), 8, "row {row}:\n{out}");
    }
    for line in out
        .lines()
        .filter(|l| ROWS.iter().any(|r| l.starts_with(r)))
    {
        let cells = line.matches(" ±").count() + line.matches("n/a").count();
        let numbers = line
            .split_whitespace()
            .filter(|w| w.parse::<f64>().is_ok())
            .count();
        assert!(
            cells == 2 || numbers >= 2,
            "a row without two columns: {line}"
        );
    }
    assert!(out.contains("1 thr") && out.contains("2 thr"));
    assert!(out.contains("GHz"), "no timer frequency:\n{out}");
    assert!(out.contains("metadata bytes per 4 KiB frame"));
}

#[test]
fn json_has_every_cell_with_positive_means() {
    let out = stdout(&nvmos(&[&TINY[..], &["--json"]].concat()));
    let report: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert!(report["clock"]["ticks_per_ns"].as_f64().unwrap() > 0.0);
    let cells = report["cells"].as_array().expect("cells");
    let skipped = report["skipped"].as_array().expect("skipped");
    // Every registry allocator and the peer by default; the allocators
    // built for single frames (M3, M3-part) are not timed on `mixed`, and
    // say so.
    assert_eq!(cells.len(), 15 * 4 * 2 - 4, "{report}");
    assert_eq!(skipped.len(), 2 * 2);
    for s in skipped {
        assert!(s["allocator"] == "M3" || s["allocator"] == "M3-part", "{s}");
        assert_eq!(s["pattern"], "mixed");
        assert!(s["reason"].as_str().unwrap().contains("single frames"));
    }
    let checks = report["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 2, "the seed's two claims");
    for c in checks {
        assert!(c["source"].as_str().unwrap().starts_with("seed 000"));
        assert!(c["met"].is_boolean());
    }
    for allocator in [
        "buddy",
        "LBS-1",
        "LBS-31",
        "iBuddy",
        "LiS-1",
        "LiS-31",
        "linux-pcp",
        "bsa",
    ] {
        for pattern in ["bulk", "repeat", "rand", "mixed"] {
            for threads in [1, 2] {
                let cell = cells
                    .iter()
                    .find(|c| {
                        c["allocator"] == allocator
                            && c["pattern"] == pattern
                            && c["threads"] == threads
                    })
                    .unwrap_or_else(|| panic!("no cell {allocator} {pattern} {threads}"));
                for op in ["alloc", "free"] {
                    let r = &cell[op];
                    let requests = r["requests"].as_u64().unwrap();
                    assert!(
                        requests > 0,
                        "{allocator} {pattern} {threads} {op}: no requests"
                    );
                    // Wall time over requests is always positive; a timed
                    // request faster than the timer's own read overhead
                    // (subtracted from every sample) reads as 0.
                    let amortized = r["mean_ns_amortized"].as_f64().unwrap_or(f64::NAN);
                    assert!(
                        amortized.is_finite() && amortized > 0.0,
                        "{allocator} {pattern} {threads} {op} mean_ns_amortized = {amortized}"
                    );
                    for field in [
                        "mean_ns",
                        "mean_cycles",
                        "sd_ns",
                        "p50_ns",
                        "p99_ns",
                        "max_ns",
                    ] {
                        assert!(r[field].as_f64().is_some_and(|v| v.is_finite() && v >= 0.0));
                    }
                    if pattern != "mixed" {
                        assert_eq!(r["failures"], 0, "{allocator} {pattern} {threads} {op}");
                    }
                }
                assert_eq!(cell["validated"], allocator != "bsa", "{cell}");
                if pattern != "mixed" {
                    assert_eq!(cell["alloc"]["requests"], cell["free"]["requests"]);
                }
            }
        }
    }
}

#[test]
fn the_free_order_asked_for_is_run_and_said() {
    let args = [
        &TINY[..],
        &["--alloc", "iBuddy,LiS-31", "--patterns", "rand"],
    ]
    .concat();
    let out = stdout(&nvmos(&[&args[..], &["--free-order", "per-cpu"]].concat()));
    assert!(out.contains("iBuddy free order per-cpu"), "{out}");
    let out = stdout(&nvmos(&[&args[..], &["--json"]].concat()));
    let report: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(report["options"]["free_order"], "accepted", "the default");
    let out = stdout(&nvmos(
        &[&args[..], &["--json", "--free-order", "Per-CPU"]].concat(),
    ));
    let report: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(report["options"]["free_order"], "per-cpu");
    let cells = report["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2 * 2);
    assert!(cells.iter().all(|c| c["validated"] == true), "{report}");
}

#[test]
fn csv_has_a_header_and_a_line_per_cell_and_op() {
    let path: PathBuf =
        std::env::temp_dir().join(format!("nvmos-bench-{}.csv", std::process::id()));
    let args = [
        &TINY[..],
        &[
            "--alloc",
            "buddy,LIS-1",
            "--patterns",
            "bulk,mixed",
            "--csv",
            path.to_str().unwrap(),
        ],
    ]
    .concat();
    stdout(&nvmos(&args));
    let text = std::fs::read_to_string(&path).expect("the CSV was written");
    std::fs::remove_file(&path).ok();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("allocator,pattern,threads,op,requests,failures,mean_ns_amortized")
    );
    // 2 allocators x 2 patterns x 2 thread counts x 2 ops.
    assert_eq!(lines.len(), 1 + 16, "{text}");
    let columns = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == columns));
    assert!(lines[1].starts_with("buddy,bulk,1,alloc,"));
    assert!(text.contains("LiS-1,mixed,2,free,"));
}

fn refused(args: &[&str], bad: &str) {
    let output = nvmos(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{args:?} succeeded");
    assert!(
        stderr.contains(bad),
        "{args:?}: the message does not name '{bad}': {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
}

#[test]
fn bad_inputs_are_refused_by_name() {
    refused(&["bench", "alloc", "--threads", "0"], "'0'");
    refused(&["bench", "alloc", "--threads", "1,x"], "'x'");
    refused(&["bench", "alloc", "--memory", "lots"], "'lots'");
    refused(&["bench", "alloc", "--alloc", "nosuch"], "'nosuch'");
    refused(&["bench", "alloc", "--patterns", "sideways"], "'sideways'");
    refused(&["bench", "alloc", "--rounds", "0"], "'0'");
    refused(
        &["bench", "alloc", "--free-order", "sideways"],
        "'sideways'",
    );
    // Parses, but cannot run: 4 frames for 8 threads.
    refused(
        &["bench", "alloc", "--memory", "4frames", "--threads", "8"],
        "8 threads",
    );
}

#[test]
fn usage_errors_exit_2_and_others_1() {
    assert_eq!(
        nvmos(&["bench", "alloc", "--memory", "lots"]).status.code(),
        Some(2)
    );
    assert_eq!(
        nvmos(&["bench", "alloc", "--memory", "4frames", "--threads", "8"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn evaluate_says_what_it_runs() {
    let output = nvmos(&["evaluate", "--help"]);
    let help = stdout(&output);
    assert!(
        help.contains("--traces") && help.contains("every allocator"),
        "{help}"
    );
}
