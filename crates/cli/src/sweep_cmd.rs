//! `nvmos sweep GRID.toml`: a design-space sweep. The sweep engine is the
//! Python package's (`nvmos._sweep`: a process pool here, or Ray tasks on
//! a cluster, results in Parquet), because Ray and Arrow live in Python.
//! This command checks the grid, finds an interpreter that has the
//! package, runs `PYTHON -m nvmos sweep ...` with the same arguments,
//! passes SIGINT and SIGTERM on to it, and passes its exit status on.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// How the interpreter is found, and what the exit status says: the
/// `--help` text after the options.
const AFTER_HELP: &str = "\
The sweep runs in Python, in the first interpreter of:
  1. $NVMOS_PYTHON, when set;
  2. $VIRTUAL_ENV/bin/python, when a virtual environment is active;
  3. python3 on PATH.
It must have the nvmos package (`pip install .` in the nvmos checkout).
The grid is checked (it exists, parses, and names known axes) before
the interpreter is looked for.

Each cell is saved the moment it finishes. Ctrl-C (SIGINT) or SIGTERM
stops the sweep within seconds, keeping the finished cells in
sweep.parquet; the same command again resumes, running only the others.

Exit status: 0 done; 1 failed cells or an error; 2 a usage error;
130 stopped by SIGINT; 143 stopped by SIGTERM.";

/// `nvmos sweep`.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct SweepArgs {
    /// The grid: a TOML file naming the study and its axes (traces or
    /// trace folders, allocators, memory sizes, CPU counts, endurance
    /// values, memsys presets, study options).
    pub grid: PathBuf,
    /// Output folder: sweep.parquet and sweep.html [default: the grid's
    /// `output`, else sweep-out].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Local worker processes [default: every core]; with --ray, cells in
    /// flight at most.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Run each cell as a Ray task on this cluster: `auto` (the cluster
    /// this machine belongs to) or its address (HOST:PORT).
    #[arg(long, value_name = "auto|ADDRESS")]
    pub ray: Option<String>,
    /// Run every cell, even those already in the output.
    #[arg(long)]
    pub no_resume: bool,
    /// Extra attempts for a cell whose worker failed.
    #[arg(long, default_value_t = 2)]
    pub retries: u32,
    /// With --ray: cells of one trace per task (fewer tasks and trace
    /// fetches, a coarser unit of retry).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

// ---------------------------------------------------------------------------
// The grid

/// The axes each study takes: `STUDY_AXES` of `nvmos._sweep`, repeated
/// here so a bad grid is refused on a machine without the package. The
/// Python tests hold the two lists to each other.
const STUDY_AXES: [(&str, &[&str]); 3] = [
    (
        "wear",
        &[
            "traces",
            "allocators",
            "memory",
            "cpus",
            "writes_per_alloc",
            "endurance",
        ],
    ),
    (
        "banks",
        &[
            "machine",
            "cores",
            "placement",
            "access",
            "kernel",
            "array_mib",
            "passes",
            "mlp",
            "policy",
            "queue",
            "seed",
            "basic_model",
        ],
    ),
    (
        "swap",
        &[
            "pc_scale",
            "aging_rounds",
            "page_cluster",
            "policy",
            "congestion_timeout_ms",
            "no_congestion",
            "vma_readahead",
            "traces",
            "quick",
        ],
    ),
];

/// Fixed options a wear grid takes besides its axes.
const WEAR_OPTIONS: [&str; 1] = ["heat_buckets"];

/// Check the grid file as the sweep engine will (it exists, is TOML,
/// names a known study, and its axes and options are that study's; a wear
/// grid's traces exist) and return its output folder. Values beyond that
/// (allocator names, sizes) are the engine's to check.
fn check_grid(path: &Path) -> Result<PathBuf> {
    let refuse = |problem: String| anyhow!("grid {}: {problem}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| refuse(format!("cannot read it: {e}")))?;
    let mut spec: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        refuse(format!("not valid TOML: {}", e.to_string().trim_end()))
    })?;
    let base = path.parent().unwrap_or(Path::new(""));

    let study = match spec.remove("study") {
        None => "wear".to_string(),
        Some(toml::Value::String(s)) => s,
        Some(other) => return Err(refuse(format!("study: {other} is not a string"))),
    };
    let known = STUDY_AXES
        .iter()
        .find(|(name, _)| *name == study)
        .map(|(_, axes)| *axes)
        .ok_or_else(|| {
            let names: Vec<_> = STUDY_AXES.iter().map(|(n, _)| *n).collect();
            refuse(format!(
                "study: {study:?} is not one of {}",
                names.join(", ")
            ))
        })?;
    let output = match spec.remove("output") {
        None => base.join("sweep-out"),
        Some(toml::Value::String(s)) => base.join(s),
        Some(other) => return Err(refuse(format!("output: {other} is not a folder name"))),
    };
    let mut table = |key: &str| match spec.remove(key) {
        None => Ok(toml::Table::new()),
        Some(toml::Value::Table(t)) => Ok(t),
        Some(_) => Err(refuse(format!("{key}: give a table ([{key}])"))),
    };
    let axes = table("axes")?;
    let options = table("options")?;
    if !spec.is_empty() {
        let unknown: Vec<_> = spec.keys().map(String::as_str).collect();
        return Err(refuse(format!(
            "unknown keys {}; known: study, output, axes, options",
            unknown.join(", ")
        )));
    }

    let mut allowed: Vec<&str> = known.to_vec();
    if study == "wear" {
        allowed.extend(WEAR_OPTIONS);
    }
    for name in axes.keys().chain(options.keys()) {
        if !allowed.contains(&name.as_str()) {
            let mut sorted = allowed.clone();
            sorted.sort_unstable();
            return Err(refuse(format!(
                "`{name}` is not an axis or option of study {study:?}; known: {}",
                sorted.join(", ")
            )));
        }
        if axes.contains_key(name) && options.contains_key(name) {
            return Err(refuse(format!(
                "`{name}` is both an axis and a fixed option"
            )));
        }
    }
    for (name, values) in &axes {
        if !matches!(values, toml::Value::Array(v) if !v.is_empty()) {
            return Err(refuse(format!(
                "axes.{name}: give a non-empty list of values"
            )));
        }
    }

    if study == "wear" {
        let (key, traces) = match (axes.get("traces"), options.get("traces")) {
            (Some(t), _) => ("axes.traces", t),
            (None, Some(t)) => ("options.traces", t),
            (None, None) => {
                return Err(refuse(
                    "axes.traces: a wear sweep needs traces (files or folders)".into(),
                ))
            }
        };
        let listed = match traces {
            toml::Value::Array(v) => v.iter().collect(),
            one => vec![one],
        };
        for t in listed {
            let toml::Value::String(t) = t else {
                return Err(refuse(format!("{key}: {t} is not a path")));
            };
            if !base.join(t).exists() {
                return Err(refuse(format!(
                    "{key}: {t} is neither a trace file nor a folder"
                )));
            }
        }
    }
    Ok(output)
}

// ---------------------------------------------------------------------------
// The interpreter

/// The interpreter the sweep runs in, and how it was found (for messages).
struct Python {
    program: OsString,
    found: &'static str,
}

/// The interpreter: `$NVMOS_PYTHON`, else the active virtual
/// environment's (`$VIRTUAL_ENV`), else `python3` on PATH. An active
/// environment without an interpreter is an error rather than a fall back
/// to `python3`, which would run whatever nvmos (if any) is installed
/// there instead of the one the user activated.
fn find_python() -> Result<Python> {
    if let Some(p) = std::env::var_os("NVMOS_PYTHON").filter(|p| !p.is_empty()) {
        return Ok(Python {
            program: p,
            found: "from NVMOS_PYTHON",
        });
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        let venv = PathBuf::from(venv);
        let python = venv.join("bin").join("python");
        if !python.exists() {
            bail!(
                "VIRTUAL_ENV is {} but {} does not exist: activate a working virtual environment, \
                 or set NVMOS_PYTHON to an interpreter that has the nvmos package",
                venv.display(),
                python.display()
            );
        }
        return Ok(Python {
            program: python.into_os_string(),
            found: "the active virtual environment's, from VIRTUAL_ENV",
        });
    }
    Ok(Python {
        program: "python3".into(),
        found: "python3 on PATH",
    })
}

// ---------------------------------------------------------------------------
// Running it

/// How long the Python sweep has, after a signal was passed on, before it
/// is killed: it stops within 2 s; the rest is room for a loaded machine.
/// Killing it loses nothing that finished (each cell is saved as it
/// finishes).
const GRACE: Duration = Duration::from_secs(10);

/// How often a signal is passed on again while the sweep has not stopped:
/// one that arrives while Python starts (before its handlers are in) is
/// lost, and the sweep takes a repeat as the same request.
const RESEND: Duration = Duration::from_secs(1);

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// Stop this process as interrupted by `signal`: the shell's status for
/// it (128 + the signal), which tells a caller the sweep did not finish.
fn exit_interrupted(signal: i32) -> ! {
    std::process::exit(128 + signal)
}

/// Run `nvmos sweep`.
pub fn run(args: SweepArgs) -> Result<()> {
    let output = check_grid(&args.grid)?;
    let output = args.out.clone().unwrap_or(output);
    let python = find_python()?;
    let shown = Path::new(&python.program).display().to_string();

    // SIGINT and SIGTERM are noted, not fatal: this process stays to pass
    // them on to the sweep and report how it ended.
    let received = Arc::new(AtomicUsize::new(0));
    for signal in [libc::SIGINT, libc::SIGTERM] {
        signal_hook::flag::register_usize(signal, Arc::clone(&received), signal as usize)
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    let interrupted = || match received.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s as i32),
    };

    // Tell a missing package apart from a failing sweep.
    let probe = Command::new(&python.program)
        .args(["-c", "import nvmos._sweep"])
        .output()
        .with_context(|| {
            format!(
                "running {shown} ({}): the sweep runs in Python; set NVMOS_PYTHON to an \
                 interpreter that has the nvmos package",
                python.found
            )
        })?;
    if let Some(signal) = interrupted() {
        eprintln!(
            "nvmos sweep: interrupted by {} before the sweep started; nothing ran",
            signal_name(signal)
        );
        exit_interrupted(signal);
    }
    if !probe.status.success() {
        bail!(
            "the Python package nvmos is not installed for {shown} ({}): install it with \
             `pip install .` in the nvmos checkout, or set NVMOS_PYTHON to an interpreter that has it\n{}",
            python.found,
            String::from_utf8_lossy(&probe.stderr).trim_end()
        );
    }

    let mut cmd = Command::new(&python.program);
    cmd.args(["-m", "nvmos", "sweep"]).arg(&args.grid);
    if let Some(out) = &args.out {
        cmd.arg("--out").arg(out);
    }
    if let Some(n) = args.workers {
        cmd.arg("--workers").arg(n.to_string());
    }
    if let Some(address) = &args.ray {
        cmd.arg("--ray").arg(address);
    }
    if args.no_resume {
        cmd.arg("--no-resume");
    }
    if args.quiet {
        cmd.arg("--quiet");
    }
    cmd.arg("--retries").arg(args.retries.to_string());
    cmd.arg("--batch").arg(args.batch.to_string());
    // The interpreter starts with SIGINT ignored, so a Ctrl-C while it
    // imports its libraries is not a KeyboardInterrupt traceback; the
    // sweep puts its own handler in, and the signal comes again (RESEND).
    // SAFETY: the closure runs in the forked child before exec and only
    // calls signal(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("running {shown} -m nvmos sweep"))?;

    // Wait, passing each signal on. A Ctrl-C at a terminal reaches the
    // sweep directly too; it takes a repeated signal as the same request.
    let mut first_signal: Option<(i32, Instant)> = None;
    let mut last_sent = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for the Python sweep")? {
            break status;
        }
        let mut signal = received.swap(0, Ordering::SeqCst) as i32;
        if signal == 0 {
            if let Some((first, _)) = first_signal.filter(|_| last_sent.elapsed() >= RESEND) {
                signal = first;
            }
        }
        if signal != 0 {
            // SAFETY: kill has no memory-safety preconditions; the pid is
            // our child's, not yet reaped (try_wait just saw it running).
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
            first_signal.get_or_insert((signal, Instant::now()));
            last_sent = Instant::now();
        }
        if let Some((signal, at)) = first_signal {
            if at.elapsed() > GRACE {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!(
                    "nvmos sweep: interrupted by {}; the Python sweep did not stop within {} s and \
                     was killed. The cells that finished are kept in {} (sweep.parquet and \
                     sweep-cells/); the same command again resumes",
                    signal_name(signal),
                    GRACE.as_secs(),
                    output.display()
                );
                exit_interrupted(signal);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if status.success() {
        return Ok(());
    }
    match status.code() {
        // The sweep stopped on a signal and said so in its own line: pass
        // its status on and add nothing.
        Some(code) if code == 128 + libc::SIGINT || code == 128 + libc::SIGTERM => {
            std::process::exit(code)
        }
        Some(_) => bail!("the sweep failed ({status}); its messages are above"),
        None => {
            if let Some((signal, _)) = first_signal {
                eprintln!(
                    "nvmos sweep: interrupted by {}; the cells that finished are kept in {}; \
                     the same command again resumes",
                    signal_name(signal),
                    output.display()
                );
                exit_interrupted(signal);
            }
            bail!(
                "the Python sweep was killed ({status}); the cells that finished are kept in {}",
                output.display()
            )
        }
    }
}
