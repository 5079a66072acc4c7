//! nvmos-measure: how nvmos's benchmarks take time and summarise it. One
//! timer ([`timer::ticks`], the time-stamp counter on x86_64, calibrated
//! by [`timer::Clock`]) and one set of order statistics ([`stats`]) for
//! every study that times something: `bench alloc`, `bench psync`,
//! `bench pmo` and the power study's latency table (seed 004 Table 5).
//!
//! ```
//! use nvmos_measure::stats::summarize;
//! let mut samples = vec![5, 1, 3, 2, 4];
//! let s = summarize(&mut samples);
//! assert_eq!((s.count, s.p50, s.max), (5, 3, 5));
//! ```

pub mod stats;
pub mod timer;
