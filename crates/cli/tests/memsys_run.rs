//! `nvmos memsys run`: DRAMSim3 and Ramulator 2 traces end to end, and bad
//! input refused by name.

use std::io::Write;
use std::process::{Command, Output};

use serde_json::Value;

fn nvmos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .unwrap()
}

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn both_formats_run_and_report_dramsim3s_statistics() {
    let dir = tempfile::tempdir().unwrap();
    // 256 sequential reads, one every 20 cycles, then 64 writes.
    let mut text: String = (0..256u64)
        .map(|i| format!("{:#x} READ {}\n", i * 64, i * 20))
        .collect();
    text += &(0..64u64)
        .map(|i| format!("{:#x} WRITE {}\n", (1 << 20) + i * 64, 6000 + i * 20))
        .collect::<String>();
    let trace = file(&dir, "seq.trace", &text);
    let output = nvmos(&["memsys", "run", "--trace", &trace, "--no-refresh", "--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["machine"], "ddr4-2400-dramsim3");
    assert_eq!(v["reads"], 256);
    assert_eq!(v["writes"], 64);
    // Two rows of 128 lines read, one row written.
    assert_eq!(v["read_row_hits"], 254);
    assert_eq!(v["write_row_hits"], 63);
    assert_eq!(v["read_latency"]["p50"], 21);
    assert_eq!(v["refreshes"], 0);

    let output = nvmos(&["memsys", "run", "--trace", &trace]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    for stat in [
        "num_reads_done",
        "num_read_row_hits",
        "num_ref_cmds",
        "average_bandwidth",
        "average_read_latency",
    ] {
        assert!(stdout.contains(stat), "{stat}: {stdout}");
    }

    let ram = file(&dir, "ram.trace", "LD 0x0\nLD 0x40\nST 0x80\n");
    let output = nvmos(&[
        "memsys",
        "run",
        "--trace",
        &ram,
        "--format",
        "ramulator",
        "--json",
    ]);
    assert!(output.status.success());
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (v["reads"].as_u64(), v["writes"].as_u64()),
        (Some(2), Some(1))
    );
}

#[test]
fn a_ramulator_trace_runs_offered_every_n_cycles_and_a_dramsim3_one_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    // Far apart: every request is taken at its tick, so the run is the
    // DRAMSim3 trace with request i at cycle 100 i.
    let ram: String = (0..64u64).map(|i| format!("LD {:#x}\n", i << 16)).collect();
    let d3: String = (0..64u64)
        .map(|i| format!("{:#x} READ {}\n", i << 16, i * 100))
        .collect();
    let ram = file(&dir, "ram.trace", &ram);
    let d3 = file(&dir, "d3.trace", &d3);
    let json = |args: &[&str]| -> Value {
        let o = nvmos(args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let offered = json(&[
        "memsys",
        "run",
        "--trace",
        &ram,
        "--format",
        "ramulator",
        "--offer-every",
        "100",
        "--json",
    ]);
    let timed = json(&["memsys", "run", "--trace", &d3, "--json"]);
    assert_eq!(offered["read_latency"], timed["read_latency"]);
    assert_eq!(offered["cycles"], timed["cycles"]);
    // A DRAMSim3 trace times its own requests: refused, not ignored.
    let o = nvmos(&["memsys", "run", "--trace", &d3, "--offer-every", "8"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--offer-every: only with --format ramulator")
    );
}

#[test]
fn bad_traces_formats_and_machines_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let bad = file(&dir, "bad.trace", "0x0 READ 0\n0x40 FETCH 1\n");
    let beyond = file(&dir, "beyond.trace", "0x0 READ 0\n0x400000000 READ 1\n");
    let good = file(&dir, "good.trace", "0x0 READ 0\n");
    for (args, why) in [
        (vec!["--trace", bad.as_str()], "line 2"),
        (vec!["--trace", beyond.as_str()], "beyond"),
        (vec!["--trace", good.as_str(), "--format", "gem5"], "gem5"),
        (vec!["--trace", good.as_str(), "--machine", "nope"], "nope"),
        (vec!["--trace", "/nonexistent/trace"], "/nonexistent/trace"),
        (
            vec!["--trace", good.as_str(), "--queue-depth", "0"],
            "queue_depth",
        ),
    ] {
        let output = nvmos(&[&["memsys", "run"][..], &args[..]].concat());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}
