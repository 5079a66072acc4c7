//! Results a researcher can trust, end to end: the text-trace
//! machine inferred, every event accounted for in every replay output and
//! the same as `trace info`'s, flagged rows, the long-horizon mode, and
//! swap studies refusing what they cannot use.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn nvmos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refused(out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{n:?} not in: {stderr}");
    }
}

/// Every unusual case once or more, CPUs 0-2, pfns up to 0x5555.
fn every_case() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data/every_case.txt")
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).unwrap()
}

const COUNTS: [&str; 7] = [
    "events_read",
    "lost_events",
    "frees_before_recording",
    "frees_mismatched_order",
    "partial_frees",
    "allocs_of_live_pfn",
    "time_reversals",
];

#[test]
fn a_text_trace_gets_its_memory_and_cpus_from_its_events() {
    let trace = every_case();
    let trace = trace.to_str().unwrap();
    // No --memory needed, and not 1 CPU: 3 (highest CPU + 1).
    let out = nvmos(&["replay", "--trace", trace, "--alloc", "LiS-31", "--json"]);
    let v = json(&out);
    let t = &v["traces"][0];
    assert_eq!(t["inferred"], true);
    assert_eq!(t["machine"]["cpus"], 3);
    assert_eq!(t["machine"]["zones"][0]["spanned"], 0x5556);
    let table = ok(&nvmos(&["replay", "--trace", trace, "--alloc", "LiS-31"]));
    assert!(table.contains("3 CPUs (inferred from the trace"), "{table}");
    let info = ok(&nvmos(&["trace", "info", trace]));
    assert!(info.contains("inferred      3 CPUs"), "{info}");
    // Smaller than it needs: refused, naming the line and pfn or CPU.
    refused(
        &nvmos(&["replay", "--trace", trace, "--memory", "16384frames"]),
        &["every_case.txt:11: pfn 0x5555"],
    );
    refused(
        &nvmos(&["replay", "--trace", trace, "--cpus", "2"]),
        &["every_case.txt:13: CPU 2 is beyond the 2 CPUs"],
    );
}

#[test]
fn trace_info_and_replay_report_the_same_counts_in_every_output() {
    let trace = every_case();
    let trace = trace.to_str().unwrap();
    let info = json(&nvmos(&["trace", "info", "--json", trace]));
    let expected: Vec<u64> = COUNTS
        .iter()
        .map(|c| info["accounting"][c].as_u64().unwrap())
        .collect();
    assert_eq!(expected, [14, 5, 1, 1, 4, 2, 1]);
    let out = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(every_case(), dir.path().join("every_case.txt")).unwrap();
    let v = json(&nvmos(&[
        "evaluate",
        "--traces",
        dir.path().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--alloc",
        "buddy,iBuddy,LiS-31",
        "--json",
    ]));
    let rows = v["traces"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        let got: Vec<u64> = COUNTS
            .iter()
            .map(|c| row["stats"][c].as_u64().unwrap())
            .collect();
        assert_eq!(got, expected, "{}", row["allocator"]);
    }
    // The same counts in results.json, the CSV and the HTML.
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap())
            .unwrap();
    assert_eq!(results["traces"][0]["rows"][1]["stats"]["partial_frees"], 4);
    let csv = std::fs::read_to_string(out.path().join("summary.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for line in csv.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        for (c, want) in COUNTS.iter().zip(&expected) {
            let i = header
                .iter()
                .position(|h| h == c)
                .unwrap_or_else(|| panic!("{c} not in the CSV"));
            assert_eq!(cells[i], want.to_string(), "{c} in {line}");
        }
    }
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    for c in COUNTS {
        assert!(
            html.contains(&format!("data-field=\"{c}\"")),
            "{c} not in the HTML"
        );
    }
}

#[test]
fn refused_allocations_flag_the_row_on_screen_and_in_the_report() {
    // Eight frames filled with single frames, every other one freed, then
    // a block of two: memory holds it only if the allocator placed the
    // singles so that two free ones are buddies. The buddy allocators do
    // not, and must say so.
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("# tracer: nop\n");
    let mut t = 1;
    let mut line = |op: &str, pfn: u64, order: u8| {
        let fields = if op == "mm_page_alloc" {
            " migratetype=1 gfp_flags=GFP_USER"
        } else {
            ""
        };
        text.push_str(&format!(
            " a-1 [000] ..... 1.{t:06}: {op}: page=00000000deadbeef pfn={pfn:#x} order={order}{fields}\n"
        ));
        t += 1;
    };
    for pfn in 0..8 {
        line("mm_page_alloc", pfn, 0);
    }
    for pfn in (0..8).step_by(2) {
        line("mm_page_free", pfn, 0);
    }
    line("mm_page_alloc", 0, 1);
    let trace = dir.path().join("frag.txt");
    std::fs::write(&trace, &text).unwrap();
    let out = tempfile::tempdir().unwrap();
    let stdout = ok(&nvmos(&[
        "evaluate",
        "--traces",
        dir.path().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--memory",
        "8frames",
        "--alloc",
        "buddy,iBuddy",
    ]));
    assert!(
        stdout.contains("!! buddy: 1 allocations refused")
            && stdout.contains("!! iBuddy: 1 allocations refused"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    assert_eq!(
        html.matches("class=\"flagged\"").count(),
        2,
        "flagged rows in the report"
    );
    let csv = std::fs::read_to_string(out.path().join("summary.csv")).unwrap();
    assert_eq!(csv.matches("1 allocations refused").count(), 2, "{csv}");
    // The kernel's own placement is not flagged.
    assert!(!stdout.contains("!! Linux"), "{stdout}");
}

#[test]
fn the_long_horizon_mode_reports_years_fraction_and_repetitions() {
    let trace = every_case();
    let out = json(&nvmos(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--horizon",
        "--alloc",
        "buddy",
        "--json",
    ]));
    assert!(out["criterion"].as_str().unwrap().contains("least squares"));
    let rows = out["traces"][0]["rows"].as_array().unwrap();
    assert_eq!(rows[0]["allocator"], "Linux (as recorded)");
    let buddy = &rows[1]["result"];
    assert_eq!(buddy["stop"], "converged");
    assert!(buddy["reps"].as_u64().unwrap() >= 8);
    let years = buddy["years_to_first_failure"].as_array().unwrap();
    let y: Vec<f64> = years.iter().map(|y| y.as_f64().unwrap()).collect();
    // Ten times the endurance, ten times the years (to a repetition).
    assert!(
        (y[1] / y[0] - 10.0).abs() < 0.01 && (y[2] / y[1] - 10.0).abs() < 0.01,
        "{y:?}"
    );
    let f = buddy["fraction_of_ideal"].as_f64().unwrap();
    assert!(f > 0.0 && f <= 1.0);
    let table = ok(&nvmos(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--horizon",
        "--alloc",
        "buddy",
    ]));
    assert!(
        table.contains("yrs@1e6") && table.contains("converged"),
        "{table}"
    );
    refused(
        &nvmos(&[
            "replay",
            "--trace",
            trace.to_str().unwrap(),
            "--horizon",
            "--horizon-max-reps",
            "2",
        ]),
        &["--horizon-max-reps 2"],
    );
}

#[test]
fn study_swap_refuses_an_empty_trace_and_unbounded_aging() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("zero.swt.zst"), b"").unwrap();
    let out = tempfile::tempdir().unwrap();
    refused(
        &nvmos(&[
            "study",
            "swap",
            "--quick",
            "--traces",
            dir.path().to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
        ]),
        &["zero.swt.zst:1: the file is empty"],
    );
    refused(
        &nvmos(&[
            "study",
            "swap",
            "--quick",
            "--aging-rounds",
            "100000",
            "--out",
            out.path().to_str().unwrap(),
        ]),
        &["aging-rounds", "100000 is more than 64"],
    );
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn study_power_refuses_zero_latency_pages_at_once_and_warns_of_its_length() {
    let out = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    refused(
        &nvmos(&[
            "study",
            "power",
            "--quick",
            "--no-traces",
            "--latency-pages",
            "0",
            "--out",
            out.path().to_str().unwrap(),
        ]),
        &["--latency-pages 0"],
    );
    // Refused before anything ran, not after the rest of the study.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // The default (long) study says how long it takes before it starts.
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(["study", "power", "--out", out.path().to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stderr.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        first.contains("several minutes") && first.contains("--quick"),
        "{first:?}"
    );
}

#[test]
fn bench_psync_without_pmdk_fails_naming_what_could_not_run() {
    // No C compiler on PATH: the PMDK baseline cannot be built.
    let out = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(["bench", "psync", "--quick"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("could not run") && stderr.contains("PMDK"),
        "{stderr}"
    );
    // The figures that could be measured are still printed.
    assert!(String::from_utf8_lossy(&out.stdout).contains("nvmos psync"));
}
