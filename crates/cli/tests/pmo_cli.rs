//! `nvmos pmo …` end to end: create a pool and objects, write, read back,
//! list, verify, destroy; wrong keys, unknown names, bad files and
//! tampering give clear errors and change nothing.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn nvmos(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .current_dir(dir)
        // The state store lives in the test's folder.
        .env("XDG_STATE_HOME", dir.join("state"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The library's open of the pool in `dir`, through the state store the
/// CLI uses there.
fn open_pool(dir: &Path) -> nvmos_pmo::Pool {
    let opts = nvmos_pmo::PoolOptions {
        state_dir: Some(dir.join("state/nvmos")),
        ..nvmos_pmo::PoolOptions::default()
    };
    nvmos_pmo::Pool::open_with(&dir.join("pool"), nvmos_pmo::Access::ReadOnly, opts).unwrap()
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
    std::fs::write(dir.join("key"), "s3cret-key-1\n").unwrap();
    std::fs::write(dir.join("wrong"), "s3cret-key-2\n").unwrap();
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
            "pmo", "--pool", "pool", "create", "plain", "--size", "2frames", "--plain",
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
                "pmo", "--pool", "pool", "create", "z", "--size", "0frames", "--plain",
            ],
            "zero",
        ),
        (
            vec![
                "pmo", "--pool", "pool", "create", "obj", "--size", "1frames", "--plain",
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
        let pool = open_pool(d);
        let h = pool
            .open_object("obj", nvmos_pmo::Perm::Read, Some(b"s3cret-key-1"))
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

fn args<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    let mut v = base.to_vec();
    v.extend_from_slice(more);
    v
}

const P: [&str; 3] = ["pmo", "--pool", "pool"];

/// An encrypted object replaced by a plain one. The
/// key is never dropped: a keyed read is an error; and the victim's state
/// store refuses the substituted object.
#[test]
fn plain_substitute_is_refused_with_the_key_and_by_the_state_store() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let mut bytes = std::fs::read(d.join("pool")).unwrap();
    bytes[4096..4096 + 128].fill(0);
    std::fs::write(d.join("pool"), &bytes).unwrap();
    std::fs::write(d.join("evil"), b"attacker").unwrap();
    // The attacker's nvmos, with its own state store (and told to go on
    // without the victim's, which the pool names).
    let evil = ["--state-dir", "evil-state", "--allow-missing-state"];
    ok(&nvmos(
        d,
        &args(
            &P,
            &[
                &["create", "obj", "--size", "1frames", "--plain"][..],
                &evil,
            ]
            .concat(),
        ),
    ));
    ok(&nvmos(
        d,
        &args(&P, &[&["write", "obj", "evil"][..], &evil].concat()),
    ));
    let e = err(&nvmos(
        d,
        &args(
            &P,
            &[&["read", "obj", "--key-file", "key"][..], &evil].concat(),
        ),
    ));
    assert!(
        e.starts_with("warning: pool pool is protected by state store ")
            && e.ends_with("\nerror: object \"obj\" is not encrypted; it takes no key\n"),
        "{e}"
    );
    let e = err(&nvmos(
        d,
        &args(&P, &["verify", "obj", "--key-file", "key"]),
    ));
    assert!(
        e.contains("object \"obj\" (slot 0) was replaced by another object"),
        "{e}"
    );
}

/// A flipped bit in a plain object's page.
#[test]
fn plain_page_corruption_is_caught_by_verify_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    ok(&nvmos(
        d,
        &args(&P, &["create", "pl", "--size", "5frames", "--plain"]),
    ));
    ok(&nvmos(d, &args(&P, &["write", "pl", "data"])));
    let frame = {
        let pool = open_pool(d);
        let h = pool.open_object("pl", nvmos_pmo::Perm::Read, None).unwrap();
        h.page_location(1).unwrap().0.unwrap()
    };
    let mut bytes = std::fs::read(d.join("pool")).unwrap();
    bytes[frame as usize * 4096 + 9] ^= 1;
    std::fs::write(d.join("pool"), &bytes).unwrap();
    let out = nvmos(d, &args(&P, &["verify", "pl"]));
    let e = err(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(
            "page 1: object \"pl\" page 1: hash mismatch (page corrupted; plain objects are protected against accident, not attack)"
        ),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(e, "error: object \"pl\": 1 pages failed verification\n");
    let out = nvmos(d, &args(&P, &["check"]));
    let e = err(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("DAMAGED: 1 pages fail their hash: [1]"),
        "{text}"
    );
    assert!(
        e.contains("1 damaged objects, 0 state-store disagreements"),
        "{e}"
    );
}

/// Rollback of the whole pool (a restored copy) is refused by the store.
#[test]
fn restored_pool_copy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let old = std::fs::read(d.join("pool")).unwrap();
    ok(&nvmos(
        d,
        &args(&P, &["write", "obj", "data", "--key-file", "key"]),
    ));
    std::fs::write(d.join("pool"), &old).unwrap();
    let e = err(&nvmos(d, &args(&P, &["ls"])));
    assert!(e.starts_with("error: pool pool rolled back by 1 epochs: object \"obj\" (slot 0) by 1 epochs (state store has epoch 3, the pool 2)"), "{e}");
    // check reports it instead of refusing.
    let out = nvmos(d, &args(&P, &["check"]));
    let e = err(&out);
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("state store: object \"obj\" (slot 0) by 1 epochs"));
    assert!(
        e.contains("0 damaged objects, 1 state-store disagreements"),
        "{e}"
    );
}

/// A flipped bit in the current directory record: check names it, the
/// pool stays usable, repair keeps the intact objects.
#[test]
fn check_and_repair_quarantine_a_damaged_object() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    ok(&nvmos(
        d,
        &args(&P, &["create", "pl", "--size", "5frames", "--plain"]),
    ));
    let mut bytes = std::fs::read(d.join("pool")).unwrap();
    // obj: pcreate (record 0, epoch 1), write (record 1, epoch 2).
    bytes[4096 + 64 + 56] ^= 0x80;
    std::fs::write(d.join("pool"), &bytes).unwrap();
    let out = nvmos(d, &args(&P, &["check"]));
    err(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("obj                      DAMAGED: quarantined: directory record 1 fails its check (checksum mismatch)"), "{text}");
    let ls = ok(&nvmos(d, &args(&P, &["ls"])));
    assert!(
        ls.contains("obj                      QUARANTINED (slot 0)"),
        "{ls}"
    );
    let e = err(&nvmos(d, &args(&P, &["read", "obj", "--key-file", "key"])));
    assert!(
        e.starts_with("error: object \"obj\" is quarantined: directory record 1 fails its check"),
        "{e}"
    );
    let r = ok(&nvmos(d, &args(&P, &["repair"])));
    assert!(
        r.contains("1 intact objects kept, 1 quarantined left untouched"),
        "{r}"
    );
    ok(&nvmos(d, &args(&P, &["verify", "pl"])));
}

/// Keys: the one key-file rule, a minimum length, KDF bounds, a warning.
#[test]
fn key_rules_and_kdf_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    std::fs::write(d.join("k1"), b"k\n").unwrap();
    let e = err(&nvmos(
        d,
        &args(
            &P,
            &[
                &["create", "x", "--size", "1frames", "--key-file", "k1"][..],
                &FAST,
            ]
            .concat(),
        ),
    ));
    assert_eq!(e, "error: the key file k1 holds 1 bytes (after one trailing newline is dropped); a key needs at least 8\n");
    let e = err(&nvmos(
        d,
        &args(
            &P,
            &[
                "create",
                "x",
                "--size",
                "1frame",
                "--key-file",
                "key",
                "--kdf-passes",
                "100",
            ],
        ),
    ));
    assert_eq!(
        e,
        "error: key derivation parameters refused: 100 passes (accepted: 1..=16)\n"
    );
    std::fs::write(d.join("weak"), b"aaaaaaaa").unwrap();
    let out = nvmos(
        d,
        &args(
            &P,
            &[
                &["create", "w", "--size", "1frames", "--key-file", "weak"][..],
                &FAST,
            ]
            .concat(),
        ),
    );
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: the key for \"w\" looks weak"));
    let e = err(&nvmos(
        d,
        &args(
            &P,
            &[
                "create",
                "y",
                "--size",
                "1frames",
                "--plain",
                "--key-file",
                "key",
            ],
        ),
    ));
    assert!(
        e.contains("--plain stores object \"y\" without encryption"),
        "{e}"
    );
}

/// A 0-byte file at the pool path; errors printed once.
#[test]
fn empty_pool_file_is_refused_and_errors_print_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("empty"), b"").unwrap();
    let e = err(&nvmos(
        d,
        &["pmo", "pool", "create", "empty", "--size", "4MiB"],
    ));
    assert!(e.contains("exists and is empty (0 bytes"), "{e}");
    let e = err(&nvmos(d, &["pmo", "--pool", "empty", "ls"]));
    assert_eq!(
        e,
        "error: empty is not an nvmos PMO pool: the file is empty (0 bytes)\n"
    );
    let e = err(&nvmos(d, &["pmo", "--pool", "missing", "ls"]));
    assert_eq!(e.matches("No such file").count(), 1, "{e}");
    let e = err(&nvmos(
        d,
        &["pmo", "pool", "create", "nodir/p", "--size", "4MiB"],
    ));
    assert_eq!(e.matches("No such file").count(), 1, "{e}");
    assert_eq!(
        std::fs::read_dir(d).unwrap().count(),
        1 + usize::from(d.join("state").exists())
    );
}

/// A deliberate restore: refused with a hint, accepted with
/// `repair --accept-rollback`, which lists what it re-based; the pool then
/// opens, and a later rollback is refused again.
#[test]
fn repair_accept_rollback_rebases_the_state_store() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let old = std::fs::read(d.join("pool")).unwrap();
    ok(&nvmos(
        d,
        &args(&P, &["write", "obj", "data", "--key-file", "key"]),
    ));
    std::fs::write(d.join("pool"), &old).unwrap();
    let e = err(&nvmos(d, &args(&P, &["ls"])));
    assert!(
        e.contains("; if you restored the pool on purpose, accept it with `nvmos pmo --pool pool repair --accept-rollback`"),
        "{e}"
    );
    // Plain repair does not accept it.
    err(&nvmos(d, &args(&P, &["repair"])));
    let out = ok(&nvmos(d, &args(&P, &["repair", "--accept-rollback"])));
    assert!(
        out.contains(
            "accepted: object \"obj\" (slot 0) by 1 epochs (state store has epoch 3, the pool 2)"
        ),
        "{out}"
    );
    assert!(
        out.contains("state store: object \"obj\" (slot 0): live epoch 3 -> live epoch 2"),
        "{out}"
    );
    assert!(
        out.contains("accepted the restore: 1 slots re-based, 1 epochs back"),
        "{out}"
    );
    ok(&nvmos(
        d,
        &args(&P, &["verify", "obj", "--key-file", "key"]),
    ));
    ok(&nvmos(d, &args(&P, &["check"])));
    let accepted = std::fs::read(d.join("pool")).unwrap();
    ok(&nvmos(
        d,
        &args(&P, &["write", "obj", "data", "--key-file", "key"]),
    ));
    std::fs::write(d.join("pool"), &accepted).unwrap();
    let e = err(&nvmos(d, &args(&P, &["ls"])));
    assert!(
        e.starts_with("error: pool pool rolled back by 1 epochs: object \"obj\" (slot 0) by 1 epochs (state store has epoch 3, the pool 2)"),
        "{e}"
    );
}

/// The pool truncated by another process while `nvmos pmo read` has it
/// open: a clear error naming the pool and offset, not a SIGBUS. The key
/// file is a FIFO, so the reader (which opens the pool first) waits on it
/// while the test truncates the pool.
#[test]
fn truncating_the_pool_under_a_running_read_is_a_clear_error() {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let fifo = d.join("key-fifo");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success(), "mkfifo failed");
    let child = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .current_dir(d)
        .env("XDG_STATE_HOME", d.join("state"))
        .args(args(&P, &["read", "obj", "--key-file", "key-fifo"]))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Opening the FIFO for writing succeeds once the reader has opened it,
    // that is after it opened and mapped the pool.
    let start = std::time::Instant::now();
    let mut w = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(120),
                    "the reader never opened the key FIFO"
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("opening the FIFO: {e}"),
        }
    };
    // Header and directory stay; every data frame goes.
    let cut = 9 * 4096;
    let st = Command::new("truncate")
        .args(["-s", &cut.to_string(), "pool"])
        .current_dir(d)
        .status()
        .unwrap();
    assert!(st.success(), "truncate failed");
    w.write_all(b"s3cret-key-1\n").unwrap();
    drop(w);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), None, "killed by a signal: {out:?}");
    assert!(out.stdout.is_empty(), "no partial output");
    let e = err(&out);
    let prefix = format!(
        "error: pool pool was truncated to {cut} bytes while open (it is 4194304 bytes): access at offset "
    );
    assert!(e.starts_with(&prefix), "{e}");
    let offset: u64 = e[prefix.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((cut..4194304).contains(&offset), "{e}");
    assert!(
        e.ends_with(" is past its end; nothing after it was committed\n"),
        "{e}"
    );
}

#[test]
fn dump_info_stats_and_rm() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = setup(d);
    let key = ["--key-file", "key"];
    // dump: pmempool's hex format from the offset asked for.
    let out = ok(&nvmos(
        d,
        &args(
            &[
                "pmo", "--pool", "pool", "dump", "obj", "--offset", "16", "--length", "40",
            ],
            &key,
        ),
    ));
    let lines: Vec<&str> = out.lines().collect();
    let hex: Vec<String> = data[16..32].iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        lines[0].starts_with(&format!("00000010  {}", hex.join(" "))),
        "{out}"
    );
    assert_eq!(lines.last().unwrap(), &format!("{:08x}", 56), "{out}");
    assert_eq!(lines.len(), 4, "{out}");
    // The tail of the object is zeros: folded into one `*`.
    let out = ok(&nvmos(
        d,
        &args(&["pmo", "--pool", "pool", "dump", "obj"], &key),
    ));
    assert!(out.lines().any(|l| l == "*"), "{out}");
    let e = err(&nvmos(
        d,
        &args(
            &[
                "pmo", "--pool", "pool", "dump", "obj", "--offset", "99999999",
            ],
            &key,
        ),
    ));
    assert!(
        e.contains("--offset 99999999") && e.contains("32768 bytes"),
        "{e}"
    );

    // A second object holding a heap (formatted and filled in memory, then
    // written): info --stats reports it; obj has none.
    let mut image = vec![0u8; 32 << 10];
    {
        let mut heap = nvmos_pmo::heap::Heap::format(&mut image[..]).unwrap();
        heap.root(64).unwrap();
        for i in 0..10 {
            heap.palloc(100 + i * 50, 1).unwrap();
        }
        let gap = heap.palloc(500, 2).unwrap();
        heap.palloc(100, 2).unwrap();
        heap.pfree(gap).unwrap();
    }
    std::fs::write(d.join("image"), &image).unwrap();
    let mut create = vec![
        "pmo", "--pool", "pool", "create", "heaped", "--size", "32KiB", "--plain",
    ];
    create.extend(FAST);
    ok(&nvmos(d, &create));
    ok(&nvmos(
        d,
        &["pmo", "--pool", "pool", "write", "heaped", "image"],
    ));
    let out = ok(&nvmos(
        d,
        &args(
            &["pmo", "--pool", "pool", "info", "--stats", "--json"],
            &key,
        ),
    ));
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let by = |n: &str| rows.iter().find(|r| r["object"]["name"] == n).unwrap();
    assert_eq!(by("obj")["heap"]["none"], "no heap formatted in it");
    let h = &by("heaped")["heap"];
    assert_eq!(h["allocated_blocks"], 12, "{h}");
    assert!(h["fragmentation"].as_f64().unwrap() > 0.0, "{h}");
    // Without the key the encrypted object is named, not guessed at.
    let out = ok(&nvmos(
        d,
        &["pmo", "--pool", "pool", "info", "obj", "--stats"],
    ));
    assert!(
        out.contains("heap: none (encrypted; give --key-file"),
        "{out}"
    );
    let e = err(&nvmos(d, &["pmo", "--pool", "pool", "info", "nothing"]));
    assert!(e.contains("no object named \"nothing\""), "{e}");

    // rm is pdestroy.
    ok(&nvmos(
        d,
        &args(&["pmo", "--pool", "pool", "rm", "obj"], &key),
    ));
    let out = ok(&nvmos(d, &["pmo", "--pool", "pool", "ls"]));
    assert!(!out.contains("obj ") && out.contains("heaped"), "{out}");
}

#[test]
fn psync_many_writes_objects_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let key = ["--key-file", "key"];
    let mut create = args(&P, &["create", "two", "--size", "16KiB"]);
    create.extend(key);
    create.extend(FAST);
    ok(&nvmos(d, &create));
    std::fs::write(d.join("one"), b"first object").unwrap();
    std::fs::write(d.join("big"), vec![7u8; 40_000]).unwrap();
    std::fs::write(d.join("second"), b"second object").unwrap();
    let out = ok(&nvmos(
        d,
        &args(
            &P,
            &[
                "psync-many",
                "obj",
                "one",
                "two",
                "second",
                "--json",
                "--key-file",
                "key",
            ],
        ),
    ));
    let epochs: Vec<u64> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["epoch"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(epochs, vec![3, 2], "{out}");
    let read = |name| ok(&nvmos(d, &args(&P, &["read", name, "--key-file", "key"])));
    assert!(read("obj").starts_with("first object"));
    assert!(read("two").starts_with("second object"));
    // Refusals change nothing: a file too big for its object, a name twice,
    // an odd argument count.
    let e = err(&nvmos(
        d,
        &args(
            &P,
            &[
                "psync-many",
                "obj",
                "second",
                "two",
                "big",
                "--key-file",
                "key",
            ],
        ),
    ));
    assert!(e.contains("\"two\"") && e.contains("40000"), "{e}");
    let e = err(&nvmos(
        d,
        &args(
            &P,
            &[
                "psync-many",
                "obj",
                "one",
                "obj",
                "one",
                "--key-file",
                "key",
            ],
        ),
    ));
    assert!(e.contains("\"obj\" is given twice"), "{e}");
    let e = err(&nvmos(d, &args(&P, &["psync-many", "obj", "one", "two"])));
    assert!(e.contains("pairs"), "{e}");
    assert!(read("obj").starts_with("first object"));
    assert!(read("two").starts_with("second object"));
}

/// `nvmos` in `dir` with the state store under `state` (another HOME).
fn nvmos_with_state(dir: &Path, state: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .current_dir(dir)
        .env("XDG_STATE_HOME", state)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A rolled-back copy of a pool, with its state store deleted or looked
/// for under another HOME: every command, read-only ones included, is
/// refused naming the pool and the store, never exit 0 with the old data.
#[test]
fn a_pool_without_its_state_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let old = std::fs::read(d.join("pool")).unwrap();
    std::fs::write(d.join("newer"), b"newer contents").unwrap();
    ok(&nvmos(
        d,
        &args(&P, &["write", "obj", "newer", "--key-file", "key"]),
    ));
    std::fs::write(d.join("pool"), &old).unwrap();
    let commands: [&[&str]; 6] = [
        &["ls"],
        &["check"],
        &["info"],
        &["read", "obj", "--key-file", "key"],
        &["verify", "obj", "--key-file", "key"],
        &["write", "obj", "data", "--key-file", "key"],
    ];
    let other_home = d.join("other-home");
    for (state, why) in [
        (other_home.clone(), "another HOME"),
        (d.join("state"), "deleted"),
    ] {
        if why == "deleted" {
            std::fs::remove_dir_all(d.join("state")).unwrap();
        }
        for c in commands {
            let out = nvmos_with_state(d, &state, &args(&P, c));
            let e = err(&out);
            // check reports it (and fails); the others print nothing.
            let text = if c == ["check"] {
                String::from_utf8_lossy(&out.stdout).into_owned()
            } else {
                assert!(out.stdout.is_empty(), "{why}: {c:?} printed {out:?}");
                e.clone()
            };
            assert!(
                text.contains("pool pool is protected by state store")
                    && text.contains(&state.join("nvmos").display().to_string()),
                "{why}: {c:?}: {text}"
            );
        }
    }
    assert!(
        std::fs::read(d.join("pool")).unwrap() == old,
        "a refused command changed the pool"
    );
    // Opened anyway on request: every output says the pool is unprotected.
    let allow = |c: &[&str]| {
        let mut v = args(&P, c);
        v.push("--allow-missing-state");
        nvmos(d, &v)
    };
    let out = allow(&["ls", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert!(
        v["state_missing"]
            .as_str()
            .unwrap()
            .contains("opened without it"),
        "{v}"
    );
    assert_eq!(v["result"][0]["name"], "obj", "{v}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("warning: pool pool is protected by state store"),
        "{out:?}"
    );
    let out = allow(&["read", "obj", "--key-file", "key"]);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("warning: "));
    let v: serde_json::Value =
        serde_json::from_str(&ok(&allow(&["pool", "info", "--json"]))).unwrap();
    assert!(v["state_missing"].is_string(), "{v}");
    // Without the flag it is still refused; accepting binds the pool to the
    // store in use, after which it opens (and rolls back no more).
    err(&nvmos(d, &args(&P, &["ls"])));
    let out = ok(&nvmos(d, &args(&P, &["repair", "--accept-rollback"])));
    assert!(out.contains("state store: state store record "), "{out}");
    ok(&nvmos(d, &args(&P, &["check"])));
    ok(&nvmos(
        d,
        &args(&P, &["verify", "obj", "--key-file", "key"]),
    ));
}

/// One flipped bit in the root pointer of an object's current directory
/// record: check quarantines it, repair zeroes none of its frames, and
/// with the bit restored the object reads back whole.
#[test]
fn repair_does_not_zero_a_quarantined_object() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = setup(d);
    // obj: pcreate (record 0, epoch 1), write (record 1, epoch 2); the
    // root frame is at byte 16 of the record.
    let at = 4096 + 64 + 16;
    let flip = |d: &Path| {
        let mut bytes = std::fs::read(d.join("pool")).unwrap();
        bytes[at] ^= 1;
        std::fs::write(d.join("pool"), &bytes).unwrap();
    };
    flip(d);
    let out = nvmos(d, &args(&P, &["check"]));
    err(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("DAMAGED: quarantined"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    ok(&nvmos(d, &args(&P, &["repair"])));
    flip(d);
    let read = nvmos(d, &args(&P, &["read", "obj", "--key-file", "key"]));
    ok(&read);
    assert_eq!(&read.stdout[..data.len()], &data[..]);
}
