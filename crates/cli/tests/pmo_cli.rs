//! `nvmos pmo …` end to end: create a pool and objects, write, read back,
//! list, verify, destroy; wrong keys, unknown names, bad files and
//! tampering give clear errors and change nothing.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn nvmos(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn err(out: &Output) -> String {
    assert!(!out.status.success(), "unexpectedly succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Cheap key stretching so the test runs fast.
const FAST: [&str; 4] = ["--kdf-memory", "64", "--kdf-passes", "1"];

fn setup(dir: &Path) -> Vec<u8> {
    std::fs::write(dir.join("key"), "s3cret\n").unwrap();
    std::fs::write(dir.join("wrong"), "s3cret!\n").unwrap();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    std::fs::write(dir.join("data"), &data).unwrap();
    ok(&nvmos(
        dir,
        &["pmo", "pool", "create", "pool", "--size", "4MiB"],
    ));
    let mut create = vec!["pmo", "--pool", "pool", "create", "obj", "--size", "32KiB"];
    create.extend(["--key-file", "key"]);
    create.extend(FAST);
    ok(&nvmos(dir, &create));
    ok(&nvmos(
        dir,
        &[
            "pmo",
            "--pool",
            "pool",
            "write",
            "obj",
            "data",
            "--key-file",
            "key",
        ],
    ));
    data
}

#[test]
fn create_write_read_verify_ls_destroy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = setup(d);
    ok(&nvmos(
        d,
        &[
            "pmo", "--pool", "pool", "create", "plain", "--size", "2", "--plain",
        ],
    ));
    let read = nvmos(
        d,
        &["pmo", "--pool", "pool", "read", "obj", "--key-file", "key"],
    );
    let bytes = ok(&read);
    let raw = read.stdout;
    assert_eq!(raw.len(), 32 * 1024, "{}", bytes.len());
    assert_eq!(&raw[..data.len()], &data[..]);
    assert!(raw[data.len()..].iter().all(|&b| b == 0));
    // The plaintext is nowhere in the pool file.
    let pool = std::fs::read(d.join("pool")).unwrap();
    assert!(!pool.windows(64).any(|w| w == &data[4096..4160]));

    let ls: serde_json::Value =
        serde_json::from_str(&ok(&nvmos(d, &["pmo", "--pool", "pool", "ls", "--json"]))).unwrap();
    let names: Vec<_> = ls
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_string(),
                o["encrypted"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(names, [("obj".into(), true), ("plain".into(), false)]);

    let v: serde_json::Value = serde_json::from_str(&ok(&nvmos(
        d,
        &[
            "pmo",
            "--pool",
            "pool",
            "verify",
            "obj",
            "--key-file",
            "key",
            "--json",
        ],
    )))
    .unwrap();
    assert_eq!(v["pages"], 8);
    assert_eq!(v["pages_written"], 5);
    assert_eq!(v["bad_pages"].as_array().unwrap().len(), 0);

    ok(&nvmos(
        d,
        &[
            "pmo",
            "--pool",
            "pool",
            "destroy",
            "obj",
            "--key-file",
            "key",
        ],
    ));
    let e = err(&nvmos(
        d,
        &["pmo", "--pool", "pool", "read", "obj", "--key-file", "key"],
    ));
    assert!(e.contains("no object named \"obj\""), "{e}");
    let text = ok(&nvmos(d, &["pmo", "--pool", "pool", "ls"]));
    assert!(text.contains("plain") && !text.contains("obj "), "{text}");
}

#[test]
fn bad_input_gives_clear_errors_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let before = std::fs::read(d.join("pool")).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "pmo",
                "--pool",
                "pool",
                "read",
                "obj",
                "--key-file",
                "wrong",
            ],
            "wrong key for object \"obj\"",
        ),
        (
            vec![
                "pmo",
                "--pool",
                "pool",
                "write",
                "obj",
                "data",
                "--key-file",
                "wrong",
            ],
            "wrong key",
        ),
        (
            vec![
                "pmo",
                "--pool",
                "pool",
                "destroy",
                "obj",
                "--key-file",
                "wrong",
            ],
            "wrong key",
        ),
        // No key file and no terminal to prompt on.
        (vec!["pmo", "--pool", "pool", "read", "obj"], "--key-file"),
        (
            vec!["pmo", "--pool", "pool", "read", "nope", "--key-file", "key"],
            "no object named \"nope\"",
        ),
        (
            vec![
                "pmo", "--pool", "pool", "create", "z", "--size", "0", "--plain",
            ],
            "zero",
        ),
        (
            vec![
                "pmo", "--pool", "pool", "create", "obj", "--size", "1", "--plain",
            ],
            "already exists",
        ),
        (
            vec![
                "pmo",
                "--pool",
                "pool",
                "write",
                "obj",
                "missing-file",
                "--key-file",
                "key",
            ],
            "missing-file",
        ),
        (
            vec!["pmo", "pool", "create", "pool", "--size", "4MiB"],
            "already exists",
        ),
        (vec!["pmo", "ls"], "--pool PATH"),
        (vec!["pmo", "--pool", "missing", "ls"], "missing"),
    ];
    for (args, want) in cases {
        let e = err(&nvmos(d, &args));
        assert!(e.contains(want), "{args:?}: {e}");
    }
    // No way to give the key on the command line.
    let e = err(&nvmos(
        d,
        &["pmo", "--pool", "pool", "read", "obj", "--key", "s3cret"],
    ));
    assert!(e.contains("unexpected argument"), "{e}");
    // Too big a file for the object.
    std::fs::write(d.join("big"), vec![1u8; 40_000]).unwrap();
    let e = err(&nvmos(
        d,
        &[
            "pmo",
            "--pool",
            "pool",
            "write",
            "obj",
            "big",
            "--key-file",
            "key",
        ],
    ));
    assert!(e.contains("holds 32768"), "{e}");
    assert!(
        std::fs::read(d.join("pool")).unwrap() == before,
        "the pool changed"
    );

    // Not a pool, truncated.
    std::fs::write(d.join("junk"), vec![0u8; 100_000]).unwrap();
    let e = err(&nvmos(d, &["pmo", "--pool", "junk", "ls"]));
    assert!(e.contains("not an nvmos PMO pool"), "{e}");
    std::fs::write(d.join("short"), &before[..before.len() / 3]).unwrap();
    let e = err(&nvmos(d, &["pmo", "--pool", "short", "ls"]));
    assert!(e.contains("truncated"), "{e}");
}

#[test]
fn verify_names_a_tampered_page() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    // Find page 2's frame from the library and flip one ciphertext bit.
    let frame = {
        let pool = nvmos_pmo::Pool::open(&d.join("pool"), nvmos_pmo::Access::ReadOnly).unwrap();
        let h = pool
            .open_object("obj", nvmos_pmo::Perm::Read, Some(b"s3cret"))
            .unwrap();
        h.page_location(2).unwrap().0.unwrap()
    };
    let mut bytes = std::fs::read(d.join("pool")).unwrap();
    bytes[frame as usize * 4096 + 77] ^= 4;
    std::fs::write(d.join("pool"), &bytes).unwrap();
    let out = nvmos(
        d,
        &[
            "pmo",
            "--pool",
            "pool",
            "verify",
            "obj",
            "--key-file",
            "key",
        ],
    );
    let e = err(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("page 2: object \"obj\" page 2: authentication failed"),
        "{stdout}"
    );
    assert!(e.contains("1 pages failed verification"), "{e}");
    let e = err(&nvmos(
        d,
        &["pmo", "--pool", "pool", "read", "obj", "--key-file", "key"],
    ));
    assert!(e.contains("page 2"), "{e}");
}
