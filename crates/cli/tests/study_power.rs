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
    assert!(!v["targets"].as_array().unwrap().is_empty());
    let html = std::fs::read_to_string(out_dir.join("power.html")).unwrap();
    assert!(html.contains("<svg class=\"chart\""));
    assert!(html.contains("Table 5"));
    assert!(out_dir.join("power.json").exists());
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
}
