//! Benchmarks: programs that measure and return figures as data.

pub mod alloc;
pub mod pmo;
pub mod pmo_kernels;
pub mod pmo_report;
pub mod psync;
pub mod target;
