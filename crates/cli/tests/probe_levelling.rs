//! `nvmos probe banks --simulate` and `nvmos study levelling`: end to end
//! through the binary, and bad input refused by name.

use std::process::{Command, Output};

fn nvmos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn probe_on_a_preset_writes_a_preset_that_loads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("probed.toml");
    let o = nvmos(&[
        "probe",
        "banks",
        "--simulate",
        "coffeelake-xor",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("a6^a13, a14^a17, a15^a18, a16^a19"),
        "{stdout}"
    );
    let m = nvmos_memsys::Machine::load(&out).unwrap();
    assert_eq!(m.organisation().total_banks(), 16);
}

#[test]
fn probe_refuses_the_modulo_interleave_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("probed.toml");
    let o = nvmos(&[
        "probe",
        "banks",
        "--simulate",
        "xeon-3ch",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no preset written"));
    assert!(!out.exists());
}

#[test]
fn bad_input_is_refused_by_name() {
    let o = nvmos(&["probe", "banks", "--simulate", "nosuch"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuch"));
    let o = nvmos(&["study", "levelling", "--endurance", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--endurance"));
    let o = nvmos(&["study", "levelling", "--lines-per-frame", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--lines-per-frame"));
    for (flag, value, says) in [
        ("--hot-threshold", "0", "threshold"),
        ("--hot-budget", "0", "budget"),
        ("--hot-budget", "150", "budget"),
        ("--hot-candidates", "0", "candidates"),
        ("--hot-epoch-ms", "0", "--hot-epoch-ms"),
        ("--steady-max-reps", "2", "--steady-max-reps"),
    ] {
        let o = nvmos(&["study", "levelling", flag, value]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{flag} {value}: {stderr}");
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
        assert!(o.stdout.is_empty());
    }
    let dir = tempfile::tempdir().unwrap();
    let o = nvmos(&[
        "study",
        "levelling",
        "--traces",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no traces"));
}

/// A folder holding only the shipped numpy trace.
fn numpy_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/numpy.nvt");
    std::fs::copy(&trace, dir.path().join("numpy.nvt")).unwrap();
    dir
}

#[test]
fn an_endurance_beyond_the_simulation_is_refused_before_any_replay() {
    let dir = numpy_folder();
    for e in ["1e300", "1e9"] {
        let o = nvmos(&[
            "study",
            "levelling",
            "--quick",
            "--alloc",
            "iBuddy",
            "--endurance",
            e,
            "--traces",
            dir.path().to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}: {stderr}");
        assert!(
            stderr.contains("at most") && stderr.contains("rounds"),
            "{stderr}"
        );
        assert!(o.stdout.is_empty(), "{e}: printed a result");
    }
}

#[test]
fn security_refresh_beyond_the_work_bound_is_refused_with_the_bound() {
    // Within the rounds bound, but a million written lines for 1.25·10^5
    // rounds: refused once the first replay shows how many lines it wrote.
    let dir = numpy_folder();
    let o = nvmos(&[
        "study",
        "levelling",
        "--quick",
        "--no-recorded",
        "--alloc",
        "iBuddy",
        "--endurance",
        "1.6e7",
        "--lines-per-frame",
        "16",
        "--traces",
        dir.path().to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("line-rounds") && stderr.contains("at most") && stderr.contains("iBuddy"),
        "{stderr}"
    );
    assert!(o.stdout.is_empty(), "printed a result");
}

#[test]
fn a_stray_file_in_the_traces_folder_is_skipped_and_listed() {
    let dir = numpy_folder();
    std::fs::write(dir.path().join("notes.txt"), "not a trace\n").unwrap();
    let o = nvmos(&[
        "study",
        "levelling",
        "--quick",
        "--no-recorded",
        "--alloc",
        "iBuddy",
        "--traces",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["traces"].as_array().unwrap().len(), 1);
    let skipped = v["not_traces"].as_array().unwrap();
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].as_str().unwrap().ends_with("notes.txt"));
}

#[test]
fn too_small_a_memory_is_flagged_in_the_levelling_table() {
    let dir = numpy_folder();
    let o = nvmos(&[
        "study",
        "levelling",
        "--quick",
        "--no-recorded",
        "--alloc",
        "iBuddy",
        "--memory",
        "1MiB",
        "--traces",
        dir.path().to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("!! iBuddy:") && stdout.contains("allocations refused"),
        "{stdout}"
    );
}

#[test]
fn levelling_quick_on_one_trace_has_four_columns_and_the_checks() {
    let dir = tempfile::tempdir().unwrap();
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/numpy.nvt");
    assert!(trace.exists(), "shipped trace {} missing", trace.display());
    std::fs::copy(&trace, dir.path().join("numpy.nvt")).unwrap();
    let o = nvmos(&[
        "study",
        "levelling",
        "--quick",
        "--no-recorded",
        "--alloc",
        "iBuddy",
        "--traces",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schemes"].as_array().unwrap().len(), 4);
    let rows = v["traces"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["levelled"].as_array().unwrap().len(), 4);
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c["met"] == true), "{checks:?}");
}

#[test]
fn the_write_weighted_part_prints_hot_migrate_beside_the_hardware() {
    let dir = tempfile::tempdir().unwrap();
    let trace =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/memstress_writes.nvt");
    std::fs::copy(&trace, dir.path().join("memstress_writes.nvt")).unwrap();
    let o = nvmos(&[
        "study",
        "levelling",
        "--quick",
        "--alloc",
        "iBuddy",
        "--hot-threshold",
        "8",
        "--traces",
        dir.path().to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("write-weighted lifetime"), "{stdout}");
    assert!(stdout.contains("hot-migrate + start-gap %"), "{stdout}");
    assert!(stdout.contains("a block with 8 sampled writes"), "{stdout}");
    assert!(stdout.contains("iBuddy     one pass"), "{stdout}");
    assert!(!stdout.contains("steady state  "), "{stdout}");
}
