//! `nvmos study power`: a small run end to end (JSON, report page) on the
//! shipped numpy trace, and bad input refused with a clear error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nvmos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvmos-study-power-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn refused(output: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
}

#[test]
fn quick_study_writes_json_and_a_report_page() {
    let out_dir = scratch("ok");
    // Only the small numpy trace: copy it into its own folder.
    let traces = scratch("traces");
    let numpy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/numpy.nvt");
    std::fs::copy(&numpy, traces.join("numpy.nvt")).unwrap();
    // A stray file: skipped and listed, not the end of the run.
    std::fs::write(traces.join("notes.txt"), "not a trace\n").unwrap();
    let output = nvmos(&[
        "study",
        "power",
        "--quick",
        "--epochs",
        "12",
        "--traces",
        traces.to_str().unwrap(),
        "--latency-pages",
        "2000",
        "--latency-rounds",
        "2",
        "--json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let skipped = v["not_traces"].as_array().unwrap();
    assert!(
        skipped.len() == 1 && skipped[0].as_str().unwrap().ends_with("notes.txt"),
        "{skipped:?}"
    );
    // Two workloads on two machines; 5 allocators, 3 of them also with migration.
    let synthetic = v["synthetic"].as_array().unwrap();
    assert_eq!(synthetic.len(), 4);
    for s in synthetic {
        let rows = s["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 8);
        for r in rows {
            let offline = r["offline_percent"].as_f64().unwrap();
            let optimum = r["optimum_offline_percent"].as_f64().unwrap();
            // Nobody beats the optimum.
            assert!(offline <= optimum + 1e-9, "{r}");
            assert_eq!(r["energy"].as_array().unwrap().len(), 3);
            let banks = r["banks"].as_u64().unwrap() as usize;
            assert_eq!(r["bank_map"].as_array().unwrap().len(), banks);
        }
        let mig = rows
            .iter()
            .find(|r| r["allocator"] == "Adaptive-Buddy" && r["migration"] == true)
            .unwrap();
        assert!(mig["migration_passes"].as_u64().unwrap() == 12);
    }
    assert_eq!(v["traces"].as_array().unwrap().len(), 1);
    assert_eq!(v["traces"][0]["trace"], "numpy");
    let latency = v["latency"]["rows"].as_array().unwrap();
    assert_eq!(latency.len(), 5);
    assert!(latency.iter().all(|r| r["mean_ns"].as_f64().unwrap() > 0.0
        && r["worst_ns"].as_f64().unwrap() <= r["raw_max_ns"].as_f64().unwrap()));
    // nvmos's targets and the seed's figures, as data.
    let checks = v["checks"].as_array().unwrap();
    assert!(checks.iter().any(|c| c["what"]
        .as_str()
        .unwrap()
        .starts_with("Adaptive-Buddy with migration within 5 points")
        && c["bound"]["at_most"] == 5.0));
    for c in checks {
        let measured = c["measured"].as_f64().unwrap();
        let met = match (&c["bound"]["at_most"], &c["bound"]["at_least"]) {
            (b, _) if b.is_number() => measured <= b.as_f64().unwrap(),
            (_, b) => measured >= b.as_f64().unwrap(),
        };
        assert_eq!(c["met"], met, "{c}");
    }
    let html = std::fs::read_to_string(out_dir.join("power.html")).unwrap();
    assert!(html.contains("<svg class=\"chart\""));
    assert!(html.contains("Table 5"));
    assert!(html.contains("data-chart=\"timeline\"") && html.contains("data-chart=\"migration\""));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("power.json")).unwrap())
            .unwrap();
    assert_eq!(
        json["synthetic"], v["synthetic"],
        "power.json is what --json printed"
    );
    page_in_a_browser_shows_the_json(&out_dir, &json);
}

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

/// `power.html` in headless Chromium: every chart laid out with marks,
/// and every number cell equal to the figure its `data-json` pointer
/// names in `power.json`.
fn page_in_a_browser_shows_the_json(dir: &Path, json: &serde_json::Value) {
    let Some(chromium) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium: .ci/run installs it"
        );
        eprintln!("skipped the browser check: no chromium on PATH (apt-get install chromium, or set NVMOS_CHROMIUM)");
        return;
    };
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
        .arg(format!("file://{}", dir.join("power.html").display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("data-checked=\"yes\""),
        "the page's check did not run"
    );
    let charts = dom.matches("<svg class=\"chart\"").count();
    // Per workload x machine: offline bars, a bank map and Fig. 10's two
    // timelines; per trace: offline bars and the timelines; the latency
    // bars.
    let synthetic = json["synthetic"].as_array().unwrap().len();
    let traces = json["traces"].as_array().unwrap().len();
    assert_eq!(charts, 4 * synthetic + 3 * traces + 1);
    assert_eq!(
        dom.matches("data-rendered=\"yes\"").count(),
        charts,
        "a chart did not render"
    );
    let mut cells = 0;
    for (at, _) in dom.match_indices("<td data-trace=") {
        let rest = &dom[at..];
        let tag = &rest[..rest.find('>').unwrap()];
        let text = rest[tag.len() + 1..].split("</td>").next().unwrap();
        let pointer = tag
            .split("data-json=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_else(|| panic!("a number cell without data-json: {tag}"));
        let want = json
            .pointer(pointer)
            .unwrap_or_else(|| panic!("{pointer} is not in power.json"))
            .as_f64()
            .unwrap_or(f64::INFINITY); // JSON null: not finite
        let shown: f64 = match text {
            "inf" | "NaN" => f64::INFINITY,
            t => t
                .parse()
                .unwrap_or_else(|_| panic!("{pointer}: {t:?} is not a number")),
        };
        let close = (shown.is_infinite() && want.is_infinite())
            || (shown - want).abs() <= 1e-3 * want.abs().max(1e-3) + 0.051;
        assert!(
            close,
            "{pointer}: the page shows {text}, power.json has {want}"
        );
        cells += 1;
    }
    // Every power row shows 7 figures and 2 per model; the latency rows 8.
    let rows: usize = ["synthetic", "traces"]
        .iter()
        .flat_map(|k| json[k].as_array().unwrap())
        .map(|s| s["rows"].as_array().unwrap().len())
        .sum();
    let latency = json["latency"]["rows"].as_array().map_or(0, Vec::len);
    let models = json["models"].as_array().unwrap().len();
    let table2 = 0; // the quick machines are not the seed's
    let checks = json["checks"].as_array().unwrap().len();
    assert_eq!(
        cells,
        rows * (7 + 2 * models) + latency * 8 + 2 * table2 + checks
    );
}

#[test]
fn bad_input_is_refused_clearly() {
    let out_dir = scratch("bad");
    let out = out_dir.to_str().unwrap();
    // A bank size that does not divide the machine.
    refused(
        &nvmos(&[
            "study",
            "power",
            "--sizes",
            "1GiB",
            "--bank",
            "96MiB",
            "--no-traces",
            "--no-latency",
            "--out",
            out,
        ]),
        &["bank size 96 MiB does not divide the machine size 1 GiB"],
    );
    // A footprint above 100%.
    refused(
        &nvmos(&[
            "study",
            "power",
            "--workloads",
            "huge:50-120",
            "--no-traces",
            "--no-latency",
            "--out",
            out,
        ]),
        &[
            "workload \"huge\"",
            "footprint_max_percent = 120% is outside 0–100%",
        ],
    );
    // A power model that is not there.
    refused(
        &nvmos(&[
            "study",
            "power",
            "--power",
            "/nonexistent/p.toml",
            "--no-traces",
            "--no-latency",
            "--out",
            out,
        ]),
        &["power model '/nonexistent/p.toml'", "reading power model"],
    );
    // More latency pages than memory.
    refused(
        &nvmos(&[
            "study",
            "power",
            "--quick",
            "--epochs",
            "1",
            "--no-traces",
            "--latency-memory",
            "16MiB",
            "--latency-pages",
            "10000",
            "--out",
            out,
        ]),
        &["10000 pages do not fit in 16 MiB"],
    );
    // A migration period of 0 ms is not "every 1 ms".
    refused(
        &nvmos(&[
            "study",
            "power",
            "--quick",
            "--no-latency",
            "--migrate-every-ms",
            "0",
            "--out",
            out,
        ]),
        &["migrate_every_ms 0", "1 ms to"],
    );
}
