//! `nvmos kernel` refuses bad input with a clear message and a failing exit
//! status, before building or booting anything. (Booting is tested in
//! crates/kernel/tests/boot.rs.)

use std::process::Command;

fn nvmos(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kernel_commands_refuse_bad_input() {
    let out = std::env::temp_dir().join("nvmos-kernel-cmd-test.nvt");
    let out = out.to_str().unwrap();
    // Adaptive-Buddy's bank size must be a power of two: refused before
    // anything is built or booted.
    let (ok, err) = nvmos(&[
        "kernel",
        "run",
        "--policy",
        "adaptive",
        "--bank-mib",
        "100",
        "-o",
        out,
        "--",
        "memstress",
        "1",
        "5",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--bank-mib 100: a power of two from 4 to 65536"),
        "{err}"
    );
    let (ok, err) = nvmos(&[
        "kernel",
        "run",
        "--policy",
        "slab",
        "-o",
        out,
        "--",
        "memstress",
    ]);
    assert!(!ok);
    assert!(err.contains("unknown policy \"slab\""), "{err}");
    let (ok, err) = nvmos(&[
        "kernel",
        "run",
        "--policy",
        "ibuddy",
        "--mem",
        "lots",
        "-o",
        out,
        "--",
        "memstress",
    ]);
    assert!(!ok);
    assert!(err.contains("lots"), "{err}");
    let (ok, err) = nvmos(&["kernel", "study", "--workloads", "kernbench"]);
    assert!(!ok);
    assert!(err.contains("unknown workload \"kernbench\""), "{err}");
    let (ok, err) = nvmos(&["kernel", "build", "--source", "/nonexistent/linux.tar.xz"]);
    assert!(!ok);
    assert!(err.contains("apt-get install linux-source-6.12"), "{err}");
    assert!(!std::path::Path::new(out).exists(), "no output written");
}

#[test]
fn kernel_wis_refuses_a_missing_or_wrong_will_it_scale_checkout() {
    // No checkout named: clap says which option is missing.
    let (ok, err) = nvmos(&["kernel", "wis"]);
    assert!(!ok);
    assert!(err.contains("--source <DIR>"), "{err}");
    let (ok, err) = nvmos(&["kernel", "wis", "--source", "/nonexistent/will-it-scale"]);
    assert!(!ok);
    assert!(
        err.contains("--source /nonexistent/will-it-scale: not a folder"),
        "{err}"
    );
    // A folder without the test: named, before anything is built.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    let src = dir.path().to_str().unwrap();
    let (ok, err) = nvmos(&["kernel", "wis", "--source", src, "--tests", "mmap1"]);
    assert!(!ok);
    assert!(
        err.contains("will-it-scale test mmap1") && err.contains("tests/mmap1.c does not exist"),
        "{err}"
    );
    let (ok, err) = nvmos(&["kernel", "wis", "--source", src, "--vcpus", "16"]);
    assert!(!ok);
    assert!(err.contains("--vcpus 16"), "{err}");
}
