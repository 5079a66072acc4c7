//! The benchmarks' tables and pages: `nvmos bench alloc`
//! (`nvmos_sim::bench_alloc`), `psync`, `heap`, `writers`, `scaling` and
//! `pmo` (`nvmos_pmo_bench`).

pub mod alloc;
pub mod heap;
pub mod pmo;
pub mod psync;
pub mod writers;
