//! # nvmos-swap: storage-class memory as a fast paging device (seed 003)
//!
//! A model of Linux's paging system under a memory limit, and the swap
//! devices it could page to:
//!
//! - [`system`]: zone watermarks, kswapd and direct reclaim, active and
//!   inactive LRU lists with second-chance aging, congestion control
//!   (switchable), the swap cache, read-ahead of `2^page_cluster` pages
//!   (or VMA-based), and the seed's per-fault cost breakdown.
//! - [`slots`]: swap slots in clusters of 256 with the HDD and SSD
//!   allocation policies.
//! - [`device`]: SCM (SCM-133, SCM-400), NAND SLC and MLC behind a
//!   log-block FTL whose merges follow the inter-request distance as the
//!   seed's simulation method says, DRAM and a disk; per-page write counts.
//! - [`lifetime`]: years of life from writes per page, with and without
//!   wear levelling.
//! - Workloads: [`lackey`] (valgrind page references), [`workload`] (the
//!   seed's PC scenario, a memory hog), [`blocktrace`] (requests a real
//!   swap device saw, recorded by [`record`]), and [`analysis`] of request
//!   streams (size and IRD distributions, replay on device models).
//!
//! ```
//! use nvmos_swap::{run_workload, workload, DeviceSpec, SwapConfig};
//!
//! // 16 MiB written and read back through 8 MiB of memory, swapping to SCM-400.
//! let hog = workload::hog(4096);
//! let cfg = SwapConfig { memory_pages: 2048, swap_pages: 8192, ..SwapConfig::default() };
//! let result = run_workload(&cfg, &DeviceSpec::preset("SCM-400").unwrap(), &hog)?;
//! assert!(result.stats.pages_swapped_out >= 2048);
//! assert!(result.stats.major_faults > 0);
//! # Ok::<(), nvmos_swap::SwapError>(())
//! ```
#![warn(missing_docs)]

pub mod analysis;
pub mod blocktrace;
pub mod device;
mod error;
pub mod lackey;
pub mod lifetime;
#[cfg(target_os = "linux")]
pub mod record;
pub mod slots;
pub mod system;
pub mod workload;

pub use blocktrace::{SwapRequest, SwapTrace};
pub use device::{Device, DeviceKind, DeviceSpec, Dir};
pub use error::SwapError;
pub use lifetime::{lifetime, lifetime_table, Lifetime, WriteProfile};
pub use slots::{SlotPolicy, SwapMap};
pub use system::{run_workload, PagingSystem, RunResult, RunStats, SwapConfig, Watermarks};
pub use workload::Workload;
