//! What can go wrong building, booting and studying the kernel.

use std::path::PathBuf;

/// An error of `nvmos-kernel`; each names what failed and where.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A policy name the series does not know.
    #[error(
        "unknown policy {name:?}: the kernel series has {}",
        crate::run::Policy::EVERY.map(|p| p.name()).join(", ")
    )]
    UnknownPolicy {
        /// The name given.
        name: String,
    },
    /// A workload name the initramfs does not ship.
    #[error("unknown workload {name:?}: the study runs memstress, filejob, sortjob, compilejob")]
    UnknownWorkload {
        /// The name given.
        name: String,
    },
    /// The pinned kernel source package is not installed.
    #[error("kernel source {path} is missing: install Debian's linux-source-6.12 (apt-get install linux-source-6.12)")]
    SourceMissing {
        /// The tarball looked for.
        path: PathBuf,
    },
    /// A program the build or the run needs is not on PATH.
    #[error("{tool} not found (looked on PATH unless a path was given): {hint}")]
    ToolMissing {
        /// The program.
        tool: String,
        /// How to get it.
        hint: String,
    },
    /// A bad option.
    #[error("{0}")]
    Option(String),
    /// Reading or writing a file failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A program ran and failed.
    #[error("{what} failed ({status}); its output is in {log}{tail}")]
    Command {
        /// What was being done.
        what: String,
        /// How it ended.
        status: String,
        /// Where its output went.
        log: PathBuf,
        /// The last lines of that output, with a leading newline.
        tail: String,
    },
    /// The guest did not finish cleanly.
    #[error("guest {what}; console log {log}")]
    Guest {
        /// What went wrong.
        what: String,
        /// The guest's console log.
        log: PathBuf,
    },
    /// The guest's kernel reported a problem on its console (an oops, a
    /// BUG or WARNING, a lockdep splat, a KASAN or KFENCE report, a bad
    /// page, a bad free the policy caught): the run's output is not kept.
    #[error("the guest kernel reported {} problem line(s) (console: {log}):\n{}", problems.len(), problems.join("\n"))]
    GuestProblems {
        /// The console lines, each with the line before and after it.
        problems: Vec<String>,
        /// The guest's console log.
        log: PathBuf,
    },
    /// What the guest wrote could not be read.
    #[error("guest output {path}: {what}")]
    GuestOutput {
        /// The data disk.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// Reading or writing the trace failed.
    #[error(transparent)]
    Trace(#[from] nvmos_trace::TraceError),
    /// The replay or wear count of a study failed.
    #[error("study of {what}: {detail}")]
    Study {
        /// The run studied.
        what: String,
        /// The cause.
        detail: String,
    },
}

impl KernelError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        KernelError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

/// Result of this crate.
pub type Result<T, E = KernelError> = std::result::Result<T, E>;
