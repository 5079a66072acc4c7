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

/// A FIFO and a Unix socket in `dir`: outputs that are not regular files.
fn special_files(
    dir: &Path,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    std::os::unix::net::UnixListener,
) {
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let sock = dir.join("sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    (fifo, sock, listener)
}

fn is_special(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let ty = std::fs::symlink_metadata(path).unwrap().file_type();
    ty.is_fifo() || ty.is_socket()
}

#[test]
fn device_nodes_fifos_and_sockets_are_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (fifo, sock, _listener) = special_files(dir.path());
    let input = dir.path().join("t.txt");
    std::fs::copy(sample(), &input).unwrap();
    for out in [&fifo, &sock] {
        let runs: Vec<Vec<&std::ffi::OsStr>> = vec![
            vec![
                "trace".as_ref(),
                "convert".as_ref(),
                input.as_os_str(),
                out.as_os_str(),
            ],
            vec![
                "bench".as_ref(),
                "alloc".as_ref(),
                "--memory".as_ref(),
                "16MiB".as_ref(),
                "--threads".as_ref(),
                "1".as_ref(),
                "--rounds".as_ref(),
                "1".as_ref(),
                "--repeat".as_ref(),
                "100".as_ref(),
                "--mixed-ops".as_ref(),
                "100".as_ref(),
                "--csv".as_ref(),
                out.as_os_str(),
            ],
            vec![
                "probe".as_ref(),
                "banks".as_ref(),
                "--simulate".as_ref(),
                "ddr4".as_ref(),
                "--out".as_ref(),
                out.as_os_str(),
            ],
        ];
        for args in runs {
            let o = nvmos(&args);
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(
                !o.status.success(),
                "{args:?} succeeded onto a special file"
            );
            assert!(stderr.contains("not a regular file"), "{args:?}: {stderr}");
            assert!(is_special(out), "{args:?} replaced {out:?}");
        }
    }
}

#[test]
fn dash_writes_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .current_dir(dir.path())
        .args(["trace", "convert"])
        .arg(sample())
        .arg("-")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.starts_with(b"\x89NVT"), "no trace on stdout");
    assert_eq!(
        listing(dir.path()),
        Vec::<String>::new(),
        "a file named - appeared"
    );
}

#[test]
fn a_second_run_into_a_folder_being_written_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // The first run, as the second sees it: a lock on the folder.
    let holder = std::fs::File::open(&out).unwrap();
    holder.try_lock().unwrap();
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/memstress.nvt");
    let o = nvmos(&[
        "evaluate".as_ref(),
        "--traces".as_ref(),
        traces.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "the second run went ahead");
    assert!(stderr.contains("another run is writing"), "{stderr}");
    assert_eq!(listing(&out), Vec::<String>::new());
    drop(holder);
}

#[test]
fn record_refuses_to_replace_a_trace_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("old.nvt");
    std::fs::write(&out, b"an earlier recording").unwrap();
    let o = nvmos(&[
        "record".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        "--".as_ref(),
        "true".as_ref(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "record replaced an existing trace");
    assert!(
        stderr.contains("exists") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"an earlier recording");
    let help = nvmos(&["record".as_ref(), "--help".as_ref()]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("system-wide"));
}
