//! The C examples `examples/c/phashmap.c` and `ptransfer.c` (psync_many), compiled with the system's `cc`
//! against the committed header and the cdylib (and once the staticlib)
//! cargo built for this test, then run as separate processes: what one
//! run puts, later runs get; a delete survives too; a wrong passphrase is
//! refused with `NVMOS_PMO_STATUS_WRONG_KEY`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nvmos_pmo_c::NvmosPmoStatus;

/// The folder holding `libnvmos_pmo_c.so` and `.a`: cargo builds the
/// library with all its crate types for this test, into the test
/// executable's folder (`target/<profile>/deps`; the copies one level up
/// may be older, from another profile's build).
fn cdylib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("the test's folder").to_path_buf();
    for dir in [
        deps.clone(),
        deps.parent().map(Path::to_path_buf).unwrap_or_default(),
    ] {
        if dir.join("libnvmos_pmo_c.so").is_file() {
            return dir;
        }
    }
    panic!(
        "libnvmos_pmo_c.so not found beside {} or in its parent: the cdylib was not built",
        exe.display()
    );
}

/// How the example links the library.
#[derive(Clone, Copy)]
enum Link {
    /// `-lnvmos_pmo_c` with an rpath to the cdylib.
    Dynamic,
    /// `libnvmos_pmo_c.a` and the system libraries Rust's std needs on
    /// Linux (what `rustc --print native-static-libs` lists).
    Static,
}

fn compile(out: &Path, link: Link) -> PathBuf {
    compile_example(out, link, "phashmap")
}

/// Compile `examples/c/<name>.c`.
fn compile_example(out: &Path, link: Link, name: &str) -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = cdylib_dir();
    let exe = out.join(match link {
        Link::Dynamic => name.to_string(),
        Link::Static => format!("{name}-static"),
    });
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.args([
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
        "-O1",
    ])
    .arg("-I")
    .arg(crate_dir.join("include"))
    .arg(crate_dir.join(format!("examples/c/{name}.c")));
    match link {
        Link::Dynamic => {
            cc.arg("-L")
                .arg(&lib)
                .arg("-lnvmos_pmo_c")
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                // DT_RPATH, not DT_RUNPATH: `cargo test` puts
                // `target/<profile>` on LD_LIBRARY_PATH, which overrides a
                // RUNPATH, and the copy there may be an older build (one
                // without the newest functions), not the one tested here.
                .arg("-Wl,--disable-new-dtags");
        }
        Link::Static => {
            let a = lib.join("libnvmos_pmo_c.a");
            assert!(a.is_file(), "{} was not built", a.display());
            cc.arg(a).args([
                "-lgcc_s",
                "-lutil",
                "-lrt",
                "-lpthread",
                "-lm",
                "-ldl",
                "-lc",
            ]);
        }
    }
    let status = cc
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("running the system's cc");
    assert!(status.success(), "cc failed on {name}.c: {status}");
    exe
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(exe: &Path, pool: &Path, key: &Path, args: &[&str]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(exe)
        // Cheap key stretching (the library's lower bounds) so 36 runs
        // take seconds; the default cost is the same code path.
        .env("PHASHMAP_KDF", "8,1,1")
        .arg(pool)
        .arg(key)
        .args(args)
        .output()
        .expect("running phashmap");
    Run {
        code: status.code().expect("phashmap ended by a signal"),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

fn ok(exe: &Path, pool: &Path, key: &Path, args: &[&str]) -> String {
    let r = run(exe, pool, key, args);
    assert_eq!(
        r.code, 0,
        "phashmap {args:?} failed ({}): {}",
        r.code, r.stderr
    );
    r.stdout
}

#[test]
fn phashmap_survives_restarts_and_refuses_a_wrong_key() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), Link::Dynamic);
    let pool = dir.path().join("map.pool");
    let key = dir.path().join("key");
    std::fs::write(&key, "a long passphrase\n").unwrap();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "another passphrase").unwrap();

    // Each call below is a separate process.
    assert_eq!(
        ok(&exe, &pool, &key, &["put", "alpha", "1"]),
        "put alpha; 1 entries\n"
    );
    ok(&exe, &pool, &key, &["put", "beta", "two"]);
    ok(&exe, &pool, &key, &["put", "gamma", "3"]);
    assert_eq!(ok(&exe, &pool, &key, &["get", "alpha"]), "1\n");
    assert_eq!(ok(&exe, &pool, &key, &["get", "beta"]), "two\n");
    // Overwrite, delete, and a key that was never there.
    assert_eq!(
        ok(&exe, &pool, &key, &["put", "alpha", "one"]),
        "put alpha; 3 entries\n"
    );
    assert_eq!(
        ok(&exe, &pool, &key, &["del", "beta"]),
        "deleted beta; 2 entries\n"
    );
    let missing = run(&exe, &pool, &key, &["get", "beta"]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("beta: not found"),
        "{}",
        missing.stderr
    );
    assert_eq!(run(&exe, &pool, &key, &["del", "beta"]).code, 1);
    // The tombstone is reused, and lookups probe past it.
    ok(&exe, &pool, &key, &["put", "delta", "4"]);
    let mut all: Vec<String> = ok(&exe, &pool, &key, &["list"])
        .lines()
        .map(String::from)
        .collect();
    all.sort();
    assert_eq!(all, ["alpha=one", "delta=4", "gamma=3"]);
    assert_eq!(ok(&exe, &pool, &key, &["get", "gamma"]), "3\n");

    // A wrong passphrase: refused with the library's code, nothing changed.
    let wrong_key = NvmosPmoStatus::WrongKey as i32;
    for args in [&["get", "alpha"][..], &["put", "alpha", "evil"][..]] {
        let r = run(&exe, &pool, &wrong, args);
        assert_eq!(r.code, 100 + wrong_key, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "wrong key (code {wrong_key}): wrong key for object \"map\""
            )),
            "{}",
            r.stderr
        );
    }
    assert_eq!(ok(&exe, &pool, &key, &["get", "alpha"]), "one\n");

    // Bad usage is refused before touching the pool.
    assert_eq!(run(&exe, &pool, &key, &["put", "only-key"]).code, 64);
    // More entries over more runs: they hash all over the 64-page table.
    for i in 0..12 {
        ok(
            &exe,
            &pool,
            &key,
            &["put", &format!("k{i}"), &format!("v{i}")],
        );
    }
    for i in (0..12).step_by(5) {
        assert_eq!(
            ok(&exe, &pool, &key, &["get", &format!("k{i}")]),
            format!("v{i}\n")
        );
    }
    assert_eq!(ok(&exe, &pool, &key, &["list"]).lines().count(), 15);

    // A malformed cost, and one Argon2 refuses, leave no pool behind.
    let fresh = dir.path().join("fresh.pool");
    for (kdf, code) in [("8,1", 64), ("1,1,1", 100 + NvmosPmoStatus::BadKey as i32)] {
        let r = Command::new(&exe)
            .env("PHASHMAP_KDF", kdf)
            .arg(&fresh)
            .arg(&key)
            .args(["put", "a", "b"])
            .output()
            .unwrap();
        assert_eq!(r.status.code(), Some(code), "PHASHMAP_KDF={kdf}");
        assert!(!fresh.exists(), "PHASHMAP_KDF={kdf} left a pool");
    }

    // The same program linked with the staticlib reads and writes the
    // same map.
    let static_exe = compile(dir.path(), Link::Static);
    assert_eq!(ok(&static_exe, &pool, &key, &["get", "gamma"]), "3\n");
    ok(&static_exe, &pool, &key, &["put", "epsilon", "5"]);
    assert_eq!(ok(&exe, &pool, &key, &["get", "epsilon"]), "5\n");
    let r = run(&static_exe, &pool, &wrong, &["get", "gamma"]);
    assert_eq!(r.code, 100 + wrong_key, "{}", r.stderr);
}

/// `examples/c/ptransfer.c`: two objects changed through their mappings
/// and committed with `nvmos_pmo_psync_many`, over separate processes; a
/// duplicate in the group and a detached handle are refused (the example
/// checks both itself).
#[test]
fn ptransfer_moves_between_two_objects_with_psync_many() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_example(dir.path(), Link::Dynamic, "ptransfer");
    let pool = dir.path().join("bank.pool");
    let key = dir.path().join("key");
    std::fs::write(&key, "a long passphrase\n").unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(&exe)
            .arg(&pool)
            .arg(&key)
            .args(args)
            .output()
            .expect("running ptransfer");
        (
            out.status.code().expect("ptransfer ended by a signal"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&["init", "100"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "from 100 to 0 sum 100\n"),
        "{err}"
    );
    for amount in ["30", "5"] {
        let (code, _, err) = run(&["move", amount]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, out, err) = run(&["show"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "from 65 to 35 sum 100\n"),
        "{err}"
    );
    let (code, _, err) = run(&["move", "66"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(run(&["show"]).1, "from 65 to 35 sum 100\n");
}
