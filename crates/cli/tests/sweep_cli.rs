//! `nvmos sweep` before and around the Python engine: a bad grid is a grid
//! error naming the file and the problem even where no Python has the
//! package; the interpreter comes from `NVMOS_PYTHON`, else the active
//! virtual environment, else `python3`; SIGINT and SIGTERM reach the
//! Python sweep and its interrupted status is passed on. Fake interpreters
//! (shell scripts in a temporary folder) show which one was chosen, so no
//! real Python is needed.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn shipped_trace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/numpy.nvt")
}

/// `nvmos sweep ARGS` with `NVMOS_PYTHON` and `VIRTUAL_ENV` as given
/// (unset when None), so the test's own environment does not decide
/// which interpreter runs.
fn sweep(args: &[&Path], nvmos_python: Option<&Path>, venv: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvmos"));
    cmd.arg("sweep").args(args);
    env(&mut cmd, nvmos_python, venv);
    cmd.output().unwrap()
}

fn env(cmd: &mut Command, nvmos_python: Option<&Path>, venv: Option<&Path>) {
    cmd.env_remove("NVMOS_PYTHON").env_remove("VIRTUAL_ENV");
    if let Some(p) = nvmos_python {
        cmd.env("NVMOS_PYTHON", p);
    }
    if let Some(v) = venv {
        cmd.env("VIRTUAL_ENV", v);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Refused with exit status 1, no panic, every needle in the message, and
/// the message about the grid, not about Python.
fn grid_error(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
    assert!(
        !err.to_lowercase().contains("python"),
        "a grid error, not a Python one: {err}"
    );
}

/// A grid file `name` in `dir` holding `text`.
fn grid(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A good wear grid in `dir` over the shipped numpy trace.
fn good_grid(dir: &Path) -> PathBuf {
    grid(
        dir,
        "grid.toml",
        &format!(
            "study = \"wear\"\noutput = \"out\"\n[axes]\ntraces = [{:?}]\nallocators = [\"iBuddy\"]\n",
            shipped_trace().display()
        ),
    )
}

/// An executable shell script at `path`.
fn script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A fake interpreter at `path` that has the package (its import probe
/// succeeds) and, run as the sweep, appends `tag` and its arguments to
/// `log`.
fn fake_python(path: &Path, tag: &str, log: &Path) {
    script(
        path,
        &format!(
            "if [ \"$1\" = -c ]; then exit 0; fi\necho \"{tag} $*\" >> '{}'\n",
            log.display()
        ),
    );
}

/// No Python at all: `NVMOS_PYTHON` names nothing.
fn no_python() -> Option<&'static Path> {
    Some(Path::new("/nonexistent/python3"))
}

#[test]
fn a_missing_grid_is_a_grid_error_without_python() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.toml");
    let o = sweep(&[&missing], no_python(), None);
    grid_error(
        &o,
        &["grid", &missing.display().to_string(), "No such file"],
    );
}

#[test]
fn a_grid_that_is_not_toml_is_named_with_where_it_breaks() {
    let dir = tempfile::tempdir().unwrap();
    let bad = grid(dir.path(), "bad.toml", "study = 'wear'\n[axes\n");
    let o = sweep(&[&bad], no_python(), None);
    grid_error(&o, &[&bad.display().to_string(), "TOML", "line 2"]);
}

#[test]
fn an_unknown_axis_is_named_with_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let g = grid(
        dir.path(),
        "grid.toml",
        &format!(
            "[axes]\ntraces = [{:?}]\ncolour = [1]\n",
            shipped_trace().display()
        ),
    );
    let o = sweep(&[&g], no_python(), None);
    grid_error(
        &o,
        &[&g.display().to_string(), "colour", "wear", "allocators, "],
    );
}

#[test]
fn an_unknown_study_key_or_shape_is_named() {
    let dir = tempfile::tempdir().unwrap();
    for (text, needles) in [
        (
            "study = \"latency\"\n",
            &["study", "latency", "wear, banks, swap"][..],
        ),
        ("colour = 1\n", &["colour", "study, output, axes, options"]),
        (
            "study = \"banks\"\n[axes]\ncores = []\n",
            &["axes.cores", "non-empty list"],
        ),
        (
            "study = \"banks\"\n[axes]\ncores = [1]\n[options]\ncores = 2\n",
            &["cores", "both an axis and a fixed option"],
        ),
        ("study = \"wear\"\n", &["traces"]),
        (
            "[axes]\ntraces = [\"no-such-trace.nvt\"]\n",
            &[
                "axes.traces",
                "no-such-trace.nvt",
                "neither a trace file nor a folder",
            ],
        ),
    ] {
        let g = grid(dir.path(), "grid.toml", text);
        let o = sweep(&[&g], no_python(), None);
        let mut all = vec![g.to_str().unwrap()];
        all.extend(needles);
        grid_error(&o, &all);
    }
}

#[test]
fn the_active_virtual_environment_is_used_without_nvmos_python() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ran.log");
    let venv = dir.path().join("venv");
    fake_python(&venv.join("bin/python"), "venv", &log);
    let g = good_grid(dir.path());
    let o = sweep(&[&g], None, Some(&venv));
    assert!(o.status.success(), "{}", stderr(&o));
    let ran = std::fs::read_to_string(&log).unwrap();
    assert!(ran.starts_with("venv -m nvmos sweep "), "{ran}");
    assert!(ran.contains(&g.display().to_string()), "{ran}");
}

#[test]
fn nvmos_python_comes_before_the_virtual_environment() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ran.log");
    let venv = dir.path().join("venv");
    fake_python(&venv.join("bin/python"), "venv", &log);
    let chosen = dir.path().join("chosen/python");
    fake_python(&chosen, "chosen", &log);
    let g = good_grid(dir.path());
    let o = sweep(&[&g], Some(&chosen), Some(&venv));
    assert!(o.status.success(), "{}", stderr(&o));
    let ran = std::fs::read_to_string(&log).unwrap();
    assert!(ran.starts_with("chosen -m nvmos sweep "), "{ran}");
}

#[test]
fn a_virtual_environment_without_python_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("empty-venv");
    std::fs::create_dir_all(&venv).unwrap();
    let g = good_grid(dir.path());
    let o = sweep(&[&g], None, Some(&venv));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("VIRTUAL_ENV"), "{err}");
    assert!(
        err.contains(&venv.join("bin/python").display().to_string()),
        "{err}"
    );
}

#[test]
fn without_the_package_the_message_says_which_interpreter_and_how_it_was_found() {
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    script(&venv.join("bin/python"), "exit 1\n");
    let g = good_grid(dir.path());
    let o = sweep(&[&g], None, Some(&venv));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the Python package nvmos is not installed"),
        "{err}"
    );
    assert!(
        err.contains(&venv.join("bin/python").display().to_string()),
        "{err}"
    );
    assert!(err.contains("VIRTUAL_ENV"), "{err}");
}

#[test]
fn the_help_gives_the_interpreter_search_order() {
    let o = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(["sweep", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    let at = |needle: &str| {
        help.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in the help:\n{help}"))
    };
    assert!(at("NVMOS_PYTHON") < at("VIRTUAL_ENV"), "{help}");
    assert!(at("VIRTUAL_ENV") < at("python3 on PATH"), "{help}");
}

/// The fake interpreter's pid, killed when a test fails before it exits
/// (it loops until a signal ends it).
struct Fake(Option<i32>);

impl Drop for Fake {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill has no memory-safety preconditions; the pid is
            // the fake interpreter this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// SIGINT and SIGTERM sent to `nvmos sweep` alone (as a scheduler or
/// `kill` does) reach the Python sweep, `nvmos` waits for it to stop and
/// exits with its interrupted status, leaving no interpreter running.
#[test]
fn sigint_and_sigterm_reach_the_python_sweep_and_its_status_is_passed_on() {
    for (signal, name, code) in [(libc::SIGTERM, "TERM", 143), (libc::SIGINT, "INT", 130)] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("ran.log");
        let python = dir.path().join("bin/python");
        script(
            &python,
            // Perl, not sh, for the sweep: like Python it can handle a
            // signal it started with ignored (`nvmos sweep` starts the
            // interpreter with SIGINT ignored); sh cannot trap one.
            &format!(
                "if [ \"$1\" = -c ]; then exit 0; fi\n\
                 exec /usr/bin/perl -e '\n\
                 sub note {{ open(my $f, \">>\", \"{log}\"); print $f \"got $_[0]\\n\"; close $f; }}\n\
                 $SIG{{TERM}} = sub {{ note(\"TERM\"); exit 143 }};\n\
                 $SIG{{INT}} = sub {{ note(\"INT\"); exit 130 }};\n\
                 note(\"started $$\");\n\
                 sleep 1 while 1;'\n",
                log = log.display()
            ),
        );
        let g = good_grid(dir.path());
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvmos"));
        cmd.arg("sweep").arg(&g);
        env(&mut cmd, Some(&python), None);
        // stderr to a file, not a pipe: an interpreter left running would
        // hold a pipe open and block the read of it.
        let err_path = dir.path().join("stderr");
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let mut fake = Fake(None);
        let python_pid = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(pid) = text.strip_prefix("got started ") {
                fake.0 = Some(pid.trim().parse::<i32>().unwrap());
                break fake.0.unwrap();
            }
            if start.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("the fake sweep did not start within 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let sent = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if sent.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("nvmos sweep did not stop within 10 s of SIG{name}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = std::fs::read_to_string(&err_path).unwrap();
        assert_eq!(status.code(), Some(code), "SIG{name}: {status:?} {err}");
        assert!(!err.contains("the sweep failed"), "{err}");
        let ran = std::fs::read_to_string(&log).unwrap();
        assert!(ran.contains(&format!("got {name}")), "SIG{name}: {ran}");
        // The interpreter has exited (it is not left running alone).
        // SAFETY: signal 0 only checks that the process exists.
        let alive = unsafe { libc::kill(python_pid, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{python_pid}/stat"))
                .map(|s| {
                    s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(true);
        if !alive {
            fake.0 = None;
        }
        assert!(!alive, "SIG{name}: the Python sweep is still running");
    }
}
