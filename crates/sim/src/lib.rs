//! # nvmos-sim: the replay engine and the studies
//!
//! Drives [`nvmos_frames::FrameAllocator`]s with recorded page-allocation
//! traces ([`nvmos_trace::Event`]s) and measures what their placement does
//! to the memory: today, wear and lifetime of storage-class memory (seed
//! 000), and how many memory banks their placement keeps powered up and
//! at what energy ([`power`], seed 004). Results are plain data (serde);
//! the CLI renders them.
//!
//! [`banks`] is seed 002's study: cores running STREAM kernels over frames
//! an allocator placed, through the `nvmos-memsys` timing model, and the
//! seed's analysing program that recovers a machine's bank interleaving
//! from access latencies alone.
//!
//! [`bench_alloc`] is seed 000's Table 2 timed on this machine: every
//! registry allocator (and a peer that is not an nvmos allocator) under
//! bulk, repeat, shuffled and mixed-order patterns on 1 to 32 threads.
//!
//! [`writes`] attributes the sampled writes of a trace recorded with
//! `nvmos record --writes` to the frames each placement chose: the
//! write-weighted wear beside the allocation-only figure, and the
//! per-frame correlation of allocations and writes (seed 000's premise).
//!
//! [`levelling`] puts hardware wear levelling (none, Start-Gap with its
//! randomiser, two-level Security Refresh) beneath any allocator's
//! per-frame writes; [`levelling::study`] is `nvmos study levelling`.
//!
//! ```
//! use nvmos_frames::{IBuddy, MigrateType, Order, Pfn, Zone};
//! use nvmos_sim::{replay, WriteModel};
//! use nvmos_trace::{Event, Op};
//!
//! let alloc = IBuddy::<parking_lot::RawMutex>::new(&[Zone::new(0, 1024)], 2)?;
//! let trace = (0..100u64).flat_map(|i| {
//!     let block = |op| Ok::<_, std::io::Error>(Event { time_ns: i * 1000, cpu: 0, op, pfn: Pfn(7), order: Order::ZERO });
//!     [block(Op::Alloc(MigrateType::Movable)), block(Op::Free)]
//! });
//! let (stats, wear) = replay(&alloc, trace, WriteModel::default())?;
//! assert_eq!(stats.allocs, 100);
//! // Linux would reuse frame 7 every time; iBuddy hands out 100 different frames.
//! assert_eq!(wear.summary(stats.trace_ns).max, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod allocators;
pub mod banks;
pub mod banks_study;
pub mod bench_alloc;
pub mod evaluate;
pub mod horizon;
pub mod levelling;
pub mod power;
pub mod replay;
pub mod reproduce;
pub mod study;
pub mod swap_study;
pub mod units;
pub mod wear;
pub mod writes;

pub use allocators::{
    AllocatorJob, AllocatorKind, Caps, Info, Setup, StudyAllocator, DEFAULT_BANK_FRAMES,
};
pub use evaluate::{
    evaluate, study_allocator, study_as_recorded, EvaluateError, Evaluation, StudyError,
    StudyOptions, StudyRow, TraceStudy, AS_RECORDED,
};
pub use replay::{as_recorded, replay, ReplayError, ReplayStats};
pub use study::Progress;
pub use wear::{WearCounter, WearSummary, WriteModel, ENDURANCES};
