//! `nvmos study swap`: runs on the shipped traces and writes its report;
//! malformed traces are errors naming the file, line and field.

use std::path::PathBuf;
use std::process::Command;

fn traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces/swap")
}

fn tmp(name: &str) -> PathBuf {
    let d =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn quick_study_on_the_shipped_traces() {
    let out = tmp("study-swap");
    let o = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(["study", "swap", "--quick", "--json", "--traces"])
        .arg(traces())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // PC clean, PC aged, the lackey program.
    assert_eq!(v["model"].as_array().unwrap().len(), 3);
    let rec = &v["recorded"][0];
    let names: Vec<&str> = rec["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["whole trace", "clean", "aged"]);
    assert_eq!(v["congestion"].as_array().unwrap().len(), 8);
    let scm = &v["seed_lifetime"][0];
    assert_eq!(
        (scm["years_without_wl"].as_f64().unwrap() * 10.0).round() / 10.0,
        57.1
    );
    // Every device of the seed, for every workload.
    for m in v["model"].as_array().unwrap() {
        let devs: Vec<&str> = m["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["device"].as_str().unwrap())
            .collect();
        assert_eq!(devs, ["SCM-133", "SCM-400", "SLC", "MLC"]);
    }
    // The seed's lifetime row without wear levelling, from its inputs, and
    // the congestion finding, as checks.
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 4);
    assert_eq!(checks[0]["seed_figure"].as_f64(), Some(57.1));
    assert!(checks[..3].iter().all(|c| c["met"] == true), "{checks:?}");
    let html = std::fs::read_to_string(out.join("swap.html")).unwrap();
    assert!(html.matches("<svg class=\"chart\"").count() >= 8);
    assert!(html.contains("class=\"mark\""));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("swap.json")).unwrap()).unwrap();
    assert_eq!(json, v);
}

#[test]
fn malformed_traces_name_file_line_and_field() {
    for (file, text, expect) in [
        (
            "bad.lackey.zst",
            "I  00400000,4\n L 7ff0,q\n",
            ["bad.lackey.zst:2", "`size`"],
        ),
        (
            "bad.swt.zst",
            "# nvmos swap trace 1\nW 1 4096 4096 x\nW 2 8192\n",
            ["bad.swt.zst:3", "`size`"],
        ),
    ] {
        let dir = tmp("study-swap-bad");
        std::fs::write(dir.join(file), text).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_nvmos"))
            .args(["study", "swap", "--quick", "--traces"])
            .arg(&dir)
            .arg("--out")
            .arg(dir.join("out"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        for e in expect {
            assert!(err.contains(e), "{file}: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Events a recording lost (`# lost_events:`) are counted in every output
/// of the study: the tables, the JSON and the HTML page.
#[test]
fn lost_events_of_a_recording_are_in_every_output() {
    let dir = tmp("study-swap-lost");
    let mut text = String::from("# nvmos swap trace 1\n# swap_bytes: 67108864\n# lost_events: 7\n");
    for i in 0..64u64 {
        let dir = if i % 3 == 0 { 'R' } else { 'W' };
        text.push_str(&format!("{dir} {} {} 4096 x\n", i * 1000, 4096 * (1 + i)));
    }
    std::fs::write(dir.join("lossy.swt.zst"), text).unwrap();
    let run = |json: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvmos"));
        cmd.args(["study", "swap", "--quick", "--traces"])
            .arg(&dir)
            .arg("--out")
            .arg(dir.join("out"));
        if json {
            cmd.arg("--json");
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let tables = run(false);
    assert!(
        tables.contains("recorded lossy.swt.zst: swap-outs issued over")
            && tables.contains("7 events lost while recording"),
        "{tables}"
    );
    let v: serde_json::Value = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(v["recorded"][0]["lost_events"], 7);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out").join("swap.json")).unwrap())
            .unwrap();
    assert_eq!(json["recorded"][0]["lost_events"], 7);
    let html = std::fs::read_to_string(dir.join("out").join("swap.html")).unwrap();
    assert!(
        html.contains("recorded lossy.swt.zst: 64 requests; 7 events lost while recording"),
        "the page does not count the lost events"
    );
}
