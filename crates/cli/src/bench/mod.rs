//! `nvmos bench …`: thin front ends over the benchmark studies
//! (`nvmos_sim::bench_alloc`, `nvmos_pmo_bench::{psync, heap, pmo}`). Each
//! parses its arguments into the study's options (`Option` fields
//! overriding `Study::options(scale)`), draws the progress bar and prints
//! what `nvmos_pages::bench` renders; the studies measure and decide.

pub mod alloc;
pub mod heap;
pub mod pmo;
pub mod psync;
pub mod writers;

use anyhow::Result;
use clap::Subcommand;

/// The benchmarks, one subcommand each.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Allocation and free latency of the page-frame allocators: seed 000's
    /// Table 2 (iBuddy) on this machine, one table per pattern and
    /// operation, rows = allocators, columns = thread counts.
    Alloc(alloc::AllocArgs),
    /// psync throughput of a persistent memory object (AES-256-GCM, one
    /// core) beside PMDK's libpmemobj on /dev/shm and on disk.
    Psync(psync::PsyncArgs),
    /// The heap inside an object (palloc/pfree, psync amortised) beside
    /// PMDK's pmemobj_alloc/pmemobj_free on the same operations, and the
    /// fragmentation each leaves.
    Heap(heap::HeapArgs),
    /// Persistent memory objects (seed 001): seed 001's kernels and a file
    /// server in every mode and prediction depth, attach and first-touch
    /// cost; writes pmo.html beside the report.
    Pmo(pmo::PmoArgs),
    /// Concurrent writers: N processes psyncing their own objects of one pool against one.
    Writers(writers::WritersArgs),
    /// Seed 001's Fig. 1: write and psync throughput by thread count, one object or one each, every mode.
    Scaling(writers::ScalingArgs),
}

/// Run a benchmark.
pub fn run(bench: BenchCommand) -> Result<()> {
    match bench {
        BenchCommand::Alloc(args) => alloc::main(&args),
        BenchCommand::Psync(args) => psync::main(&args),
        BenchCommand::Heap(args) => heap::main(&args),
        BenchCommand::Pmo(args) => pmo::main(&args),
        BenchCommand::Writers(args) => writers::writers_main(&args),
        BenchCommand::Scaling(args) => writers::scaling_main(&args),
    }
}
