//! `nvmos bench pmo`, run as a user runs it: what it prints and writes,
//! never how fast anything was.

use std::process::{Command, Output};

fn nvmos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .expect("the nvmos binary runs")
}

#[test]
fn a_small_run_writes_the_report_with_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rep");
    let o = nvmos(&[
        "bench",
        "pmo",
        "--quick",
        "--workloads",
        "conv2d,fileserver",
        "--predictors",
        "stream,stride",
        "--depths",
        "0,4",
        "--touch-pages",
        "64",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("convolution of 8 images of 256×1024"),
        "{text}"
    );
    assert!(text.contains("seed 001: 1.81×"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("pmo.json")).unwrap()).unwrap();
    let workloads = json["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 2);
    let conv = &workloads[0];
    let modes: Vec<&str> = conv["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["mode"].as_str().unwrap())
        .collect();
    assert_eq!(
        modes,
        [
            "plain",
            "decrypt-at-fault",
            "dram-cache",
            "stream-0",
            "stream-4",
            "stride-4"
        ]
    );
    // 8 MiB in and 8 MiB out: 4096 pages, each arriving once.
    for c in conv["cells"].as_array().unwrap() {
        let s = &c["session"]["stats"];
        let arrived = s["faults"].as_u64().unwrap() + s["predicted"].as_u64().unwrap()
            - s["predicted_late"].as_u64().unwrap();
        assert_eq!(arrived, 4096, "{c}");
        let decrypted = s["pages_decrypted"].as_u64().unwrap();
        assert_eq!(
            decrypted,
            if c["mode"] == "plain" { 0 } else { 4096 },
            "{c}"
        );
        // Where the time went is counted: every arrived page was copied
        // in by a UFFDIO_COPY, and the handler woke at least once.
        assert_eq!(s["pages_copied"].as_u64().unwrap(), arrived, "{c}");
        assert!(s["copy_ioctls"].as_u64().unwrap() >= 1, "{c}");
        assert!(s["handler_wakeups"].as_u64().unwrap() >= 1, "{c}");
        let session = &c["session"];
        let parts = ["attach_ns", "compute_ns", "sync_ns"]
            .iter()
            .map(|k| session[k].as_u64().unwrap())
            .sum::<u64>();
        assert!(parts <= session["ns"].as_u64().unwrap(), "{c}");
        // Every output page is written and psynced.
        assert_eq!(s["pages_synced"].as_u64().unwrap(), 2048, "{c}");
        let used = c["session"]["predicted_used"].as_u64().unwrap();
        let wasted = c["session"]["predicted_wasted"].as_u64().unwrap();
        assert_eq!(used + wasted, s["predicted"].as_u64().unwrap(), "{c}");
    }
    assert!(conv["best"]["mode"].as_str().unwrap().starts_with("str"));
    // The kernel alone on DRAM: the floor, and the ceiling it implies.
    assert!(conv["dram_ms"].as_f64().unwrap() > 0.0, "{conv}");
    assert!(conv["ceiling"].as_f64().unwrap() > 0.0, "{conv}");
    assert!(
        workloads[1]["dram_ms"].is_null(),
        "the file server has none"
    );
    assert_eq!(json["touch"].as_array().unwrap().len(), 5);
    let html = std::fs::read_to_string(out.join("pmo.html")).unwrap();
    assert!(html.contains("<svg class=\"chart\" data-chart=\"depth\" data-workload=\"conv2d\""));
    assert!(html.contains("data-workload=\"conv2d\" data-field=\"best.speedup\""));
    // One page style (nvmos-report), the seed's figure as a check; no
    // navigation bar, as no other study page is in the fresh folder.
    assert!(html.contains("<section class=\"summary\">"), "{html}");
    assert!(!html.contains("<nav>"), "{html}");
    let checks = json["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c["seed_figure"] == 1.81));
}

#[test]
fn unknown_names_are_refused() {
    let o = nvmos(&["bench", "pmo", "--workloads", "conv2d,nosuch"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown workload 'nosuch'"));
    let o = nvmos(&["bench", "pmo", "--predictors", "lru"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown predictor 'lru'"));
}
