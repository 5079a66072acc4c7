//! # nvmos-pmo-bench: the persistent-memory-object benchmarks as studies
//!
//! Seed 001's evaluation and the psync cost of a persistent memory object,
//! measured on this machine, as libraries with the one study shape of
//! `nvmos_sim::study`: options (serde, `Default`, built at a
//! [`Scale`](nvmos_sim::study::Scale)), `run(&Options, &mut dyn
//! FnMut(Progress))`, plain serialisable results carrying their seed and
//! target [`Check`](nvmos_sim::study::Check)s. The CLI (`nvmos bench
//! psync`, `nvmos bench pmo`) only parses, draws progress and renders.
//!
//! - [`psync`]: psync throughput (AES-256-GCM and plain, on one core and
//!   sealing on all CPUs) against PMDK's
//!   libpmemobj, which is compiled from `pmdk_psync.c` beside this crate
//!   with `cc -lpmemobj` during the run; when `cc` or PMDK is missing the
//!   PMDK rows are in the result, marked missing with the reason.
//! - [`heap`]: the heap inside an object (`palloc`/`pfree`, psync
//!   amortised) against libpmemobj's `pmemobj_alloc`/`pmemobj_free` on the
//!   same operations (`pmdk_heap.c`), with the fragmentation each leaves.
//! - [`pmo`]: seed 001's kernels ([`kernels`]) and a file server in every
//!   mode and prediction depth; the speed-up of DRAM cache with prediction
//!   over decrypt-at-fault against the seed's 1.81×, beside each kernel's
//!   computation alone on resident DRAM (what no fault path can beat) and
//!   the fault path's counters; attach and first-touch cost against a
//!   kernel page fault.
//! - [`incomplete`]: a psync or heap comparison with rows that could not
//!   run, as data ([`incomplete::Incomplete`]) the CLI fails with.
//!
//! ```no_run
//! use nvmos_pmo_bench::psync::{self, Psync};
//! use nvmos_sim::study::{Scale, Study};
//!
//! let options = Psync::options(Scale::Quick);
//! let result = psync::run(&options, &mut |p| eprintln!("{}/{} {}", p.done, p.total, p.step))?;
//! for row in &result.rows {
//!     match (row.gib_per_s, &row.missing) {
//!         (Some(v), _) => println!("{} on {}: {v:.3} GiB/s", row.system, row.medium),
//!         (None, why) => println!("{} on {}: missing ({why:?})", row.system, row.medium),
//!     }
//! }
//! # Ok::<(), nvmos_pmo_bench::BenchError>(())
//! ```

pub mod heap;
pub mod incomplete;
pub mod kernels;
pub mod pmo;
pub mod psync;
pub mod scaling;
pub mod writers;

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The options cannot run; the message names the field.
    #[error("{0}")]
    Options(String),
    /// A step failed; `what` says which.
    #[error("{what}")]
    Failed {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The benchmark's own consistency check failed (modes computing
    /// different results from the same data).
    #[error("{0}")]
    Inconsistent(String),
}

/// `context`/`with_context` for library errors: wrap any error with what
/// was being done, as [`BenchError::Failed`].
pub(crate) trait Context<T> {
    fn context(self, what: &str) -> Result<T, BenchError>;
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, BenchError>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, BenchError> {
        self.with_context(|| what.to_string())
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, BenchError> {
        self.map_err(|e| BenchError::Failed {
            what: what(),
            source: Box::new(e),
        })
    }
}

/// The load average (1, 5, 15 min) now, or why not: the machine's other
/// work skews every timing here.
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

/// Compile a PMDK baseline program (`source`, written to `dir` as
/// `name.c`) with the system's `cc` and `-lpmemobj`, with extra `flags`;
/// the executable's path, or why it could not be built (no compiler, no
/// libpmemobj-dev), which the benches put in their missing rows.
pub(crate) fn build_pmdk_program(
    dir: &std::path::Path,
    name: &str,
    source: &str,
    flags: &[&str],
) -> Result<std::path::PathBuf, BenchError> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).context("writing the PMDK program")?;
    let exe = dir.join(name);
    let o = std::process::Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(flags)
        .arg("-lpmemobj")
        .output()
        .context("running cc (install a C compiler and libpmemobj-dev for the PMDK baseline)")?;
    if !o.status.success() {
        return Err(BenchError::Options(format!(
            "cc -lpmemobj failed (is libpmemobj-dev installed?): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(exe)
}
