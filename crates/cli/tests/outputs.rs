//! Every command that writes a file writes it whole or not at all, and
//! never over its own input: `trace convert`, `record`, `record-swap`
//! (nothing destroyed, nothing half-written).

use std::path::Path;
use std::process::Command;

mod tracefs_common;

fn nvmos(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(args)
        .output()
        .unwrap()
}

fn sample() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data/ftrace_trace.txt")
}

/// Names in `dir`, sorted: what a command left there.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn convert_refuses_its_own_input_by_path_and_by_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("t.txt");
    std::fs::copy(sample(), &input).unwrap();
    let original = std::fs::read(&input).unwrap();
    let link = dir.path().join("link.nvt");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    for out in [&input, &link] {
        let o = nvmos(&[
            "trace".as_ref(),
            "convert".as_ref(),
            input.as_os_str(),
            out.as_os_str(),
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "converting onto {out:?} succeeded");
        assert!(stderr.contains("is the input"), "{stderr}");
        assert_eq!(
            std::fs::read(&input).unwrap(),
            original,
            "the input changed"
        );
    }
    assert_eq!(listing(dir.path()), ["link.nvt", "t.txt"]);
}

#[test]
fn a_failed_convert_leaves_no_file_and_keeps_an_old_one() {
    let dir = tempfile::tempdir().unwrap();
    // A good trace with a malformed line in the middle.
    let text = std::fs::read_to_string(sample()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let mid = lines.len() / 2;
    lines.insert(
        mid,
        " a-1 [000] ..... 1.0: mm_page_free: page=0 pfn=0x11 order=1",
    );
    let input = dir.path().join("bad.txt");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let out = dir.path().join("out.nvt");
    let o = nvmos(&[
        "trace".as_ref(),
        "convert".as_ref(),
        input.as_os_str(),
        out.as_os_str(),
    ]);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains(&format!("bad.txt:{}", mid + 1)), "{stderr}");
    assert_eq!(
        listing(dir.path()),
        ["bad.txt"],
        "a partial output was left"
    );
    // An existing output is not touched by a failed conversion.
    std::fs::write(&out, b"keep me").unwrap();
    let o = nvmos(&[
        "trace".as_ref(),
        "convert".as_ref(),
        input.as_os_str(),
        out.as_os_str(),
    ]);
    assert!(!o.status.success());
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    assert_eq!(listing(dir.path()), ["bad.txt", "out.nvt"]);
    // And a good conversion replaces it whole.
    let o = nvmos(&[
        "trace".as_ref(),
        "convert".as_ref(),
        sample().as_os_str(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(nvmos_trace::NvtReader::open(&out).is_ok());
    assert_eq!(listing(dir.path()), ["bad.txt", "out.nvt"]);
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_record_or_record_swap_leaves_no_file() {
    if !tracefs_common::can_record("record output") {
        return;
    }
    let _lock = tracefs_common::lock();
    let _mount = tracefs_common::Mounted::new();
    // On a disk-backed filesystem: record-swap's swap file lives there.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let missing = "/nonexistent/nvmos-no-such-program";
    let out = dir.path().join("r.nvt");
    let o = nvmos(&[
        "record".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        "--".as_ref(),
        missing.as_ref(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot start"));
    assert_eq!(
        listing(dir.path()),
        Vec::<String>::new(),
        "record left a file"
    );

    let out = dir.path().join("s.swt.zst");
    let o = nvmos(&[
        "record-swap".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        "--limit".as_ref(),
        "32MiB".as_ref(),
        "--swap-size".as_ref(),
        "64MiB".as_ref(),
        "--".as_ref(),
        missing.as_ref(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(missing));
    assert_eq!(
        listing(dir.path()),
        Vec::<String>::new(),
        "record-swap left a file"
    );
}
