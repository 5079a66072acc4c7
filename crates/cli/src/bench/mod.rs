//! Benchmarks: programs that measure and return figures as data.

pub mod alloc;
pub mod psync;
pub mod stats;
pub mod target;
pub mod timer;
