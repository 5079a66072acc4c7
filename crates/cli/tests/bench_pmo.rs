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
        "stream,stride,adaptive",
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
            "stride-4",
            "adaptive-4",
            "plain+hash",
            "decrypt-at-fault, no IV",
            "dram-cache, no IV",
            "adaptive-4, no IV"
        ]
    );
    // 8 MiB in and 8 MiB out: 4096 pages, each arriving once.
    for c in conv["cells"].as_array().unwrap() {
        let s = &c["session"]["stats"];
        let arrived = s["faults"].as_u64().unwrap() + s["predicted"].as_u64().unwrap()
            - s["predicted_late"].as_u64().unwrap();
        assert_eq!(arrived, 4096, "{c}");
        let decrypted = s["pages_decrypted"].as_u64().unwrap();
        let plain = c["mode"].as_str().unwrap().starts_with("plain");
        assert_eq!(decrypted, if plain { 0 } else { 4096 }, "{c}");
        assert_eq!(
            c["iv"] == true,
            !c["mode"].as_str().unwrap().ends_with("no IV") && c["mode"] != "plain",
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
    let best = conv["best"]["mode"].as_str().unwrap();
    assert!(
        ["stream-4", "stride-4", "adaptive-4"].contains(&best),
        "{best}"
    );
    // The claims' figures: the design against the cache alone, the best
    // depth (one depth above 0 here), IV with prediction against the
    // original design without it.
    assert!(conv["design_vs_cache"].as_f64().unwrap() > 0.0, "{conv}");
    assert_eq!(conv["best_depth"]["depth"], 4, "{conv}");
    assert_eq!(json["best_depth_on_average"]["depth"], 4);
    assert_eq!(
        json["best_depth_on_average"]["rounds"],
        serde_json::json!([4])
    );
    assert!(conv["iv"]["speedup"].as_f64().unwrap() > 0.0, "{conv}");
    assert_eq!(conv["iv"]["cost"].as_array().unwrap().len(), 3, "{conv}");
    assert_eq!(json["talk_sizes"][0]["talk"], "256×1024");
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
    // Per workload: 1.81× the original design (the seed's figure), never
    // below 0.98× the cache alone, IV; and the best depth on average.
    let checks = json["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2 * 3 + 1);
    let with_seed = |f: f64| checks.iter().filter(|c| c["seed_figure"] == f).count();
    assert_eq!((with_seed(1.81), with_seed(8.0)), (2, 1));
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
