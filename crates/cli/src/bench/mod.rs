//! `nvmos bench …`: thin front ends over the benchmark studies
//! (`nvmos_sim::bench_alloc`, `nvmos_pmo_bench::{psync, heap, pmo}`). Each
//! parses its arguments into the study's options (`Option` fields
//! overriding `Study::options(scale)`), draws the progress bar and renders
//! the result; the studies measure and decide.

pub mod alloc;
pub mod heap;
pub mod pmo;
pub mod psync;
pub mod writers;
