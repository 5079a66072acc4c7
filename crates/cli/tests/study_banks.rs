//! `nvmos study banks`: the seed 002 study end to end (small), its JSON and
//! report page, and bad input.

use std::process::{Command, Output};

use serde_json::Value;

fn nvmos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn json_has_every_cell_and_the_analysis_agrees_with_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let output = nvmos(&[
        "study",
        "banks",
        "--quick",
        "--cores",
        "1,2",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = v["study"]["rows"].as_array().unwrap();
    // 2 core counts x 2 access orders x 3 placements.
    assert_eq!(rows.len(), 12);
    for r in rows {
        let sum = r["hit_rate"].as_f64().unwrap()
            + r["miss_rate"].as_f64().unwrap()
            + r["conflict_rate"].as_f64().unwrap();
        assert!((sum - 1.0).abs() < 1e-9, "{r}");
        assert!(r["run_ns"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(v["analysis"]["agrees"], Value::Bool(true));
    assert_eq!(v["analysis"]["unit_lines"], 3);
    // The seed's findings are data: two placements against sequential
    // frames with the most cores, and the analysing program.
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 3);
    for (c, h) in checks.iter().zip(v["headline"].as_array().unwrap()) {
        assert_eq!(c["measured"], h["vs_sequential"]);
        assert_eq!(
            c["met"],
            Value::Bool(h["vs_sequential"].as_f64().unwrap() <= 1.0)
        );
    }
    assert_eq!(checks[2]["measured"].as_f64(), Some(0.0));
    let html = std::fs::read_to_string(out.join("banks.html")).unwrap();
    assert_eq!(
        html.matches("<svg").count(),
        4,
        "three study charts and the line latencies"
    );
    assert!(html.contains("data-check=\"2\" data-field=\"measured\""));
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("banks.json")).unwrap()).unwrap();
    assert_eq!(saved, v);
}

#[test]
fn a_bad_machine_is_refused_by_name() {
    let output = nvmos(&["study", "banks", "--machine", "nosuch-machine"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("nosuch-machine") && stderr.contains("xeon-3ch"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.toml");
    let text = nvmos_memsys::Machine::preset_toml("ddr4-2400")
        .unwrap()
        .replace("tRAS = 39", "tRAS = 3");
    std::fs::write(&file, text).unwrap();
    let output = nvmos(&["study", "banks", "--machine", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("m.toml") && stderr.contains("tRAS"),
        "{stderr}"
    );
}
