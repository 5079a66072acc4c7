//! The report as a person sees it: `nvmos evaluate` on a small trace, then
//! `index.html` in headless Chromium (Debian's `chromium`, which `.ci/run`
//! installs): every chart laid out with marks in it, and every number shown
//! equal to the one in `results.json`.

use std::path::{Path, PathBuf};
use std::process::Command;

use nvmos_frames::{MigrateType, Order, Pfn};
use nvmos_trace::{Event, MachineInfo, NvtWriter, Op, TraceHeader, ZoneInfo};
use serde_json::Value;

fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NVMOS_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH")?
                .to_str()?
                .split(':')
                .map(|dir| Path::new(dir).join(name))
                .find(|p| p.is_file())
        })
}

/// A trace with the kernel's habit (the frame just freed is handed out
/// again), blocks of several orders, and a free of a frame allocated before
/// the recording.
fn write_trace(path: &Path) {
    let machine = MachineInfo {
        page_size: 4096,
        memory_bytes: 64 << 20,
        cpus: 2,
        zones: vec![ZoneInfo {
            node: 0,
            name: "Normal".into(),
            start_pfn: 0x1000,
            spanned: 16384,
            present: 16384,
        }],
        kernel: "test".into(),
        ram: Vec::new(),
    };
    let header = TraceHeader {
        machine: Some(machine),
        source: "test".into(),
        ..TraceHeader::default()
    };
    let mut writer = NvtWriter::create(path, header).unwrap();
    let mut t = 0;
    let mut push = |op, pfn: u64, order: u8, cpu: u32| {
        t += 1000;
        writer
            .push(Event {
                time_ns: t,
                cpu,
                op,
                pfn: Pfn(pfn),
                order: Order::new(order).unwrap(),
            })
            .unwrap();
    };
    push(Op::Free, 0x1fff, 0, 0);
    for i in 0..3000u64 {
        let cpu = (i % 2) as u32;
        let order = [0u8, 0, 0, 1, 2][(i % 5) as usize];
        let pfn = 0x2000 + 64 * (i % 8);
        push(Op::Alloc(MigrateType::Movable), pfn, order, cpu);
        push(Op::Free, pfn, order, cpu);
    }
    writer.finish().unwrap();
}

/// `(trace, allocator, field, text)` of every number cell in the DOM.
fn number_cells(dom: &str) -> Vec<(String, String, String, String)> {
    let attr = |tag: &str, name: &str| {
        let key = format!("{name}=\"");
        let start = tag.find(&key)? + key.len();
        Some(tag[start..].split('"').next()?.replace("&amp;", "&"))
    };
    dom.match_indices("<td data-trace=")
        .filter_map(|(at, _)| {
            let rest = &dom[at..];
            let tag_end = rest.find('>')?;
            let tag = &rest[..tag_end];
            let text = rest[tag_end + 1..].split("</td>").next()?.to_string();
            Some((
                attr(tag, "data-trace")?,
                attr(tag, "data-alloc")?,
                attr(tag, "data-field")?,
                text,
            ))
        })
        .collect()
}

fn expected(row: &Value, field: &str) -> f64 {
    let num = |v: &Value| v.as_f64().unwrap_or(f64::INFINITY); // JSON null: infinite
    let stats = &row["stats"];
    let wear = &row["wear"];
    match field {
        "allocs"
        | "alloc_failures"
        | "outside"
        | "events_read"
        | "lost_events"
        | "frees_before_recording"
        | "frees_mismatched_order"
        | "partial_frees"
        | "allocs_of_live_pfn"
        | "time_reversals" => num(&stats[field]),
        "touched"
        | "max"
        | "max_over_mean"
        | "max_over_touched_mean"
        | "cov"
        | "gini"
        | "lifetime_pct_of_ideal" => num(&wear[field]),
        "lifetime_years_1e7" => num(&wear["lifetime_years"][1]),
        "ns_per_event" => num(&stats["elapsed_ns"]) / num(&stats["events"]),
        other => panic!("the report shows a field the test does not know: {other}"),
    }
}

#[test]
fn report_renders_in_chromium_and_shows_the_results() {
    let Some(chromium) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium: .ci/run installs it"
        );
        eprintln!("skipped: no chromium on PATH (apt-get install chromium, or set NVMOS_CHROMIUM)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("nvmos-report-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    write_trace(&dir.join("traces/synthetic.nvt"));

    let out = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(["evaluate", "--traces"])
        .arg(dir.join("traces"))
        .arg("--out")
        .arg(dir.join("report"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "evaluate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Linux (as recorded)") && stdout.contains("LiS-31"),
        "{stdout}"
    );

    let page = dir.join("report/index.html");
    let dom = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("data-checked=\"yes\""),
        "the page's check did not run:\n{}",
        &dom[..dom.len().min(2000)]
    );

    // Every chart laid out, with marks drawn.
    let charts = dom.matches("<svg class=\"chart\"").count();
    assert_eq!(
        charts, 4,
        "one CDF, heat map, lifetime and speed chart per trace"
    );
    assert_eq!(
        dom.matches("data-rendered=\"yes\"").count(),
        charts,
        "a chart did not render"
    );
    for kind in ["cdf", "heat", "lifetime", "latency"] {
        assert!(
            dom.contains(&format!("data-chart=\"{kind}\"")),
            "no {kind} chart"
        );
    }

    // Every number shown is the one in results.json.
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report/results.json")).unwrap())
            .unwrap();
    let trace = &results["traces"][0];
    let rows = trace["rows"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        nvmos_sim::AllocatorKind::ALL.len() + 1,
        "Linux (as recorded) and every allocator of the registry"
    );
    let cells = number_cells(&dom);
    assert_eq!(
        cells.len(),
        rows.len() * 19 + rows.len(),
        "every row shows nineteen figures (the wear figures and the accounting), \
         and the summary across traces at the top each allocator's lifetime"
    );
    // The summary across traces comes first, and its numbers are checked
    // with the rest below.
    let summary = dom.find("<section class=\"summary\">").expect("a summary");
    assert!(summary < dom.find("<h2 id=\"trace-").unwrap());
    assert!(
        cells
            .iter()
            .filter(|c| c.2 == "lifetime_pct_of_ideal")
            .count()
            == 2 * rows.len(),
        "lifetime in the summary and in the trace's table"
    );
    for (trace_name, allocator, field, text) in cells {
        assert_eq!(trace_name, trace["trace"].as_str().unwrap());
        let row = rows
            .iter()
            .find(|r| r["allocator"].as_str() == Some(allocator.as_str()))
            .unwrap_or_else(|| {
                panic!("the page shows an allocator not in results.json: {allocator}")
            });
        let want = expected(row, &field);
        let shown: f64 = if text == "inf" {
            f64::INFINITY
        } else {
            text.parse()
                .unwrap_or_else(|_| panic!("{allocator} {field}: {text:?} is not a number"))
        };
        let close = (shown.is_infinite() && want.is_infinite())
            || (shown - want).abs() <= 1e-3 * want.abs().max(1e-3) + 0.051;
        assert!(
            close,
            "{allocator} {field}: page shows {text}, results.json has {want}"
        );
    }
    // The kernel reused its frames; iBuddy spread them.
    let max_over_mean = |name: &str| {
        rows.iter().find(|r| r["allocator"] == name).unwrap()["wear"]["max_over_mean"]
            .as_f64()
            .unwrap()
    };
    assert!(max_over_mean("Linux (as recorded)") > 10.0 * max_over_mean("iBuddy"));
    let _ = std::fs::remove_dir_all(&dir);
}
