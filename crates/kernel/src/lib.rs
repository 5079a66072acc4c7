//! # nvmos-kernel: the allocators inside a real Linux kernel
//!
//! Seeds 000 and 004 measured their allocators in a running kernel. This
//! crate puts nvmos' policies there too (iBuddy, lazy iBuddy,
//! Adaptive-Buddy) and measures them:
//!
//! - [`kbuild`]: unpacks Debian's pinned `linux-source-6.12`, applies the
//!   series in the repository's `kernel/` (the `nvmos_policy=` and
//!   `nvmos_bank_mib=` boot parameters and the policy cores
//!   `kernel/policy/ibuddy_core.c` and `adaptive_core.c`), builds a
//!   small configuration into a cache keyed by the series' hash, and runs
//!   `checkpatch.pl` on the series.
//! - [`run`]: boots the kernel under QEMU (KVM when it works, else TCG)
//!   with a busybox initramfs and the static workloads of
//!   `traces/workloads`, records `kmem:mm_page_alloc/free` in the guest
//!   and brings the trace out as `.nvt` with the guest's machine header,
//!   plus the policy's counters from `nvmos_policy` in debugfs. A watchdog ends
//!   a guest that stops responding.
//! - [`study`]: every policy × workload, in-kernel wear, pinned banks
//!   (`adaptive` against `buddy`; split into memblock's, the trace
//!   buffers' and the policy's from the guest's `/proc/kpageflags`), and
//!   replay of the `buddy` trace through nvmos' models against what the
//!   kernel actually did; with [`study::Options::keep`] the study so far
//!   and each run's trace are written as runs finish.
//! - [`check`]: the series under mm's own checks: every policy and
//!   workload on the debug kernel, and a guest per policy that tests
//!   compaction, THP, CMA, memory offlining, soft-offline, CPU offlining,
//!   stress-ng and the in-kernel KUnit suite.
//! - [`policy_core`]: the kernel's C policy cores compiled for user space,
//!   for the differential tests against `nvmos-frames`.
//!
//! ```
//! use nvmos_kernel::policy_core::CoreSpace;
//!
//! // The kernel's iBuddy core over 64 frames, with a LiS-31 bypass list.
//! let mut space = CoreSpace::new(0, 64, 31)?;
//! let a = space.alloc(0)?.unwrap();
//! let b = space.alloc(0)?.unwrap();
//! assert_eq!((a, b), (0, 1)); // least recently freed first: pfn order at start
//! space.free(a, 0)?;
//! // The freed frame sits on the bypass list and is reused first.
//! assert_eq!(space.alloc(0)?, Some(a));
//! assert!(space.free(63, 0).is_err()); // never allocated
//! # Ok::<(), nvmos_kernel::policy_core::CoreError>(())
//! ```
#![warn(missing_docs)]

pub mod banks_real;
pub mod bench;
pub mod check;
mod cpio;
mod error;
pub mod kbuild;
pub mod levelling;
pub mod memtrace;
pub mod policy_core;
pub mod run;
pub mod study;
pub mod systime;
pub mod wis;

pub use error::{KernelError, Result};
pub use run::{Policy, Run, RunOptions};
pub use study::{run_study, Options, Study};

/// What a long call reports while it works.
#[derive(Clone, Debug)]
pub enum Progress {
    /// A step began.
    Step(String),
    /// Study progress: `done` of `total` runs.
    Run {
        /// Runs finished.
        done: usize,
        /// Runs in all.
        total: usize,
        /// The run starting.
        label: String,
    },
}

/// The repository's `kernel/` folder, as this crate was built from.
pub fn repo_kernel_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernel")
}

/// The repository's `traces/workloads` folder.
pub fn repo_workloads_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/workloads")
}
