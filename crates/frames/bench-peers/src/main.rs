//! nvmos's frame allocators beside LLFree (luhsra/llfree-rs), measured in
//! one run on the patterns of LLFree's own `bench` (eval/src/bin/bench.rs)
//! at order 0.
//!
//! Patterns, each over `--memory` (default 4 GiB of 4 KiB frames), every
//! thread holding its share of half of memory (`frames / 2 / threads`):
//!
//! - `bulk`: allocate the share, then free it, last allocated first.
//!   Figures: ns per allocation and per free.
//! - `repeat`: allocate the share (untimed), then allocate and free one
//!   frame `share` times. Figure: ns per allocate+free pair, as LLFree
//!   reports it (in both columns).
//! - `rand`: allocate the share; all threads' frames are shuffled together
//!   and dealt out again; each thread frees its deal. Most frees land on
//!   another CPU's memory. This is nvmos's `rand` and also what LLFree's
//!   bench code does (its doc comment describes the next pattern).
//! - `rand-realloc`: allocate the share (untimed), then `share` times free
//!   a random frame of the share and allocate a replacement: LLFree's
//!   documented `rand`. Figure: ns per free+allocate pair (both columns).
//!
//! Each cell runs `--rounds` times (default 3) on a fresh allocator, the
//! rounds of all allocators interleaved (round `r` runs every allocator,
//! starting `r` places along the list); the medians are printed, with each nvmos cell's ratio to LLFree's cell of
//! the same run (below 1: nvmos faster). Threads are pinned to cores
//! while there are no more threads than cores. Afterwards every allocator
//! must be back to all memory free; nvmos allocators are also validated.
//!
//! Rows `…-pinned` drive the lazy layer through `PerCpu::pin`: each
//! benchmark thread owns its CPU's list (no lock, no atomic
//! read-modify-write on a list hit). The other nvmos rows go through the
//! `FrameAllocator` trait, as `nvmos bench alloc` does. Rows `…-percpu`
//! build iBuddy with `FreeOrder::PerCpu` (no stamp shared by the CPUs on
//! a free; `nvmos bench alloc --free-order per-cpu`); the others with the
//! default `FreeOrder::Accepted`, as replay does.
//!
//! `--cpu-time` times each thread's CPU time instead of wall time: on
//! this shared 2-core machine a thread is descheduled for much of a
//! wall-clock run (at load 18 LLFree's 2-thread shuffled free measured
//! 80-112 ns wall but 19 ns of CPU), so CPU time is the steadier measure
//! of the work an allocator does; wall time stays the default, as in
//! LLFree's bench. `--huge-pages` puts allocations of 2 MiB and more (the
//! per-frame arrays) on transparent huge pages.
//!
//! `--json PATH` also writes every round's figures of every cell (the
//! record `nvmos reproduce --only peers` renders), to `PATH.tmp` first,
//! renamed into place once whole; `LLFREE_REV` in the environment (set
//! by run.sh from the checkout) names the LLFree commit in it.
//!
//! Build and run with a checkout of LLFree (never vendored):
//! `LLFREE_DIR=/path/to/llfree-rs crates/frames/bench-peers/run.sh [args]`.

use std::str::FromStr;
use std::sync::{Barrier, Mutex};
/// A start time on the clock the figures use: wall time (default, as
/// LLFree's bench) or, with `--cpu-time`, the thread's CPU time, which
/// leaves out time the thread spent descheduled (this machine's 2 cores
/// are shared with other users' builds).
#[derive(Copy, Clone)]
struct Instant(u64);

static CPU_TIME: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Instant {
    fn now() -> Instant {
        let clock = if CPU_TIME.load(std::sync::atomic::Ordering::Relaxed) {
            libc::CLOCK_THREAD_CPUTIME_ID
        } else {
            libc::CLOCK_MONOTONIC
        };
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write; both clocks exist on
        // Linux.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        Instant(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
    fn elapsed(self) -> std::time::Duration {
        std::time::Duration::from_nanos(Instant::now().0 - self.0)
    }
}

use llfree::{Alloc, Class, Classing, Init, LLFree, MetaData};
use nvmos_frames::sync::SpinYield;
use nvmos_frames::{
    Buddy, FrameAllocator, FreeOrder, IBuddy, MigrateType, Order, PcpPolicy, PerCpu, Pfn,
    PinnedCpu, Request, Zone,
};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

type Lock = SpinYield;

/// With `--huge-pages`, allocations of 2 MiB and more (the allocators'
/// per-frame arrays) are 2 MiB-aligned and advised as transparent huge
/// pages (`MADV_HUGEPAGE`; this machine's THP mode is `madvise`), so
/// random accesses to them miss the TLB far less. Off by default.
struct HugePages;

static HUGE_PAGES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
const HUGE: usize = 2 << 20;

impl HugePages {
    fn layout(layout: std::alloc::Layout) -> std::alloc::Layout {
        if layout.size() >= HUGE && HUGE_PAGES.load(std::sync::atomic::Ordering::Relaxed) {
            std::alloc::Layout::from_size_align(layout.size().next_multiple_of(HUGE), HUGE)
                .unwrap_or(layout)
        } else {
            layout
        }
    }
}

// SAFETY: every call is forwarded to `System` with one layout per block:
// `layout` maps a block's layout to the same adjusted layout at
// allocation and at deallocation (the flag is set before any large
// allocation and never cleared).
unsafe impl std::alloc::GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let adjusted = Self::layout(layout);
        let p = std::alloc::System.alloc(adjusted);
        if !p.is_null() && adjusted.align() == HUGE {
            libc::madvise(p.cast(), adjusted.size(), libc::MADV_HUGEPAGE);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: std::alloc::Layout) {
        std::alloc::System.dealloc(p, Self::layout(layout))
    }
}

#[global_allocator]
static GLOBAL: HugePages = HugePages;

/// One benchmark thread's view of an allocator.
trait Worker {
    fn alloc(&mut self) -> Result<u64, String>;
    fn free(&mut self, pfn: u64) -> Result<(), String>;
}

/// An allocator under test.
trait Target: Sync {
    type W<'a>: Worker
    where
        Self: 'a;
    /// The worker for benchmark thread `cpu` (which names CPU `cpu`).
    fn worker(&self, cpu: u32) -> Self::W<'_>;
    /// After every worker is gone: all memory must be free again.
    fn finish(&self) -> Result<(), String>;
}

/// An nvmos allocator through the `FrameAllocator` trait.
struct Shared<A>(A);

struct SharedWorker<'a, A> {
    a: &'a A,
    cpu: u32,
}

impl<A: FrameAllocator> Worker for SharedWorker<'_, A> {
    #[inline]
    fn alloc(&mut self) -> Result<u64, String> {
        self.a
            .alloc(Request::single(self.cpu))
            .map(Pfn::get)
            .map_err(|e| e.to_string())
    }
    #[inline]
    fn free(&mut self, pfn: u64) -> Result<(), String> {
        self.a
            .free(Pfn(pfn), Request::single(self.cpu))
            .map_err(|e| e.to_string())
    }
}

fn finish_nvmos(a: &dyn FrameAllocator) -> Result<(), String> {
    a.validate().map_err(|e| e.to_string())?;
    let held = a.stats().allocated_frames();
    if held != 0 {
        return Err(format!("{held} frames still allocated after the pattern"));
    }
    Ok(())
}

impl<A: FrameAllocator> Target for Shared<A> {
    type W<'a>
        = SharedWorker<'a, A>
    where
        A: 'a;
    fn worker(&self, cpu: u32) -> SharedWorker<'_, A> {
        SharedWorker { a: &self.0, cpu }
    }
    fn finish(&self) -> Result<(), String> {
        finish_nvmos(&self.0)
    }
}

/// A lazy layer driven through pinned CPU slots.
struct Pinned<A>(PerCpu<A, Lock>);

impl<A: FrameAllocator> Worker for PinnedCpu<'_, A, Lock> {
    #[inline]
    fn alloc(&mut self) -> Result<u64, String> {
        PinnedCpu::alloc(self, Order::ZERO, MigrateType::Movable)
            .map(Pfn::get)
            .map_err(|e| e.to_string())
    }
    #[inline]
    fn free(&mut self, pfn: u64) -> Result<(), String> {
        PinnedCpu::free(self, Pfn(pfn), Order::ZERO, MigrateType::Movable)
            .map_err(|e| e.to_string())
    }
}

impl<A: FrameAllocator> Target for Pinned<A> {
    type W<'a>
        = PinnedCpu<'a, A, Lock>
    where
        A: 'a;
    fn worker(&self, cpu: u32) -> PinnedCpu<'_, A, Lock> {
        self.0.pin(cpu).expect("one benchmark thread per CPU")
    }
    fn finish(&self) -> Result<(), String> {
        finish_nvmos(&self.0)
    }
}

/// LLFree with `Classing::simple` (its bench's default): class 0 for small
/// frames, one local reservation per core.
struct LLFreeTarget {
    a: LLFree<'static>,
    cores: usize,
}

impl LLFreeTarget {
    fn new(frames: u64, cores: u32) -> Result<Self, String> {
        let (classing, _) = Classing::simple(cores as usize);
        let size = LLFree::metadata_size(&classing, frames as usize);
        // LLFree's own helper; its buffers are leaked (a few hundred KiB
        // per cell), as in LLFree's bench.
        let meta = MetaData::alloc(&size);
        let a = LLFree::new(frames as usize, Init::FreeAll, &classing, meta)
            .map_err(|e| format!("LLFree::new: {e:?}"))?;
        Ok(LLFreeTarget {
            a,
            cores: cores as usize,
        })
    }
}

struct LLFreeWorker<'a> {
    a: &'a LLFree<'static>,
    request: llfree::Request,
}

impl Worker for LLFreeWorker<'_> {
    #[inline]
    fn alloc(&mut self) -> Result<u64, String> {
        self.a
            .get(None, self.request)
            .map(|(f, _)| f.0 as u64)
            .map_err(|e| format!("LLFree get: {e:?}"))
    }
    #[inline]
    fn free(&mut self, pfn: u64) -> Result<(), String> {
        self.a
            .put(llfree::FrameId(pfn as usize), self.request)
            .map_err(|e| format!("LLFree put of {pfn:#x}: {e:?}"))
    }
}

impl Target for LLFreeTarget {
    type W<'a> = LLFreeWorker<'a>;
    fn worker(&self, cpu: u32) -> LLFreeWorker<'_> {
        LLFreeWorker {
            a: &self.a,
            request: llfree::Request::new(0, Class(0), Some(cpu as usize % self.cores)),
        }
    }
    fn finish(&self) -> Result<(), String> {
        let free = self.a.stats().free_frames;
        if free != self.a.frames() {
            return Err(format!(
                "LLFree: {} frames still allocated after the pattern",
                self.a.frames() - free
            ));
        }
        Ok(())
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Pattern {
    Bulk,
    Repeat,
    Rand,
    RandRealloc,
}

impl Pattern {
    const ALL: [Pattern; 4] = [
        Pattern::Bulk,
        Pattern::Repeat,
        Pattern::Rand,
        Pattern::RandRealloc,
    ];
    fn name(self) -> &'static str {
        match self {
            Pattern::Bulk => "bulk",
            Pattern::Repeat => "repeat",
            Pattern::Rand => "rand",
            Pattern::RandRealloc => "rand-realloc",
        }
    }
    /// Whether the figure is per allocate+free pair.
    fn paired(self) -> bool {
        matches!(self, Pattern::Repeat | Pattern::RandRealloc)
    }
}

impl FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Pattern::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown pattern '{s}': bulk, repeat, rand or rand-realloc"))
    }
}

/// The rows.
const ALLOCATORS: [&str; 15] = [
    "LLFree",
    "buddy",
    "LBS-31",
    "LBS-31-pinned",
    "linux-pcp",
    "linux-pcp-pinned",
    "iBuddy",
    "iBuddy-percpu",
    "LiS-31",
    "LiS-31-pinned",
    "LiS-31-percpu",
    "LiS-31-percpu-pinned",
    "LiS-31-fair",
    "LiS-31-fair-pinned",
    "LiS-1",
];

/// Work generic over the allocator's type, so timed loops are
/// monomorphised.
trait Job {
    fn run<T: Target>(&mut self, target: &T) -> Result<Figures, String>;
}

/// Build allocator `name` over `frames` frames for `cpus` CPUs.
fn with_target(name: &str, frames: u64, cpus: u32, job: &mut impl Job) -> Result<Figures, String> {
    let zones = [Zone::new(0, frames)];
    let err = |e: nvmos_frames::ConfigError| format!("building {name}: {e}");
    let buddy = || Buddy::<Lock>::new(&zones, cpus).map_err(err);
    let ibuddy = || IBuddy::<Lock>::new(&zones, cpus).map_err(err);
    let ibuddy_percpu = || Ok::<_, String>(ibuddy()?.with_free_order(FreeOrder::PerCpu));
    fn lazy<A: FrameAllocator>(inner: A, policy: PcpPolicy) -> Result<PerCpu<A, Lock>, String> {
        PerCpu::new(inner, policy).map_err(|e| format!("building the lazy layer: {e}"))
    }
    match name {
        "LLFree" => job.run(&LLFreeTarget::new(frames, cpus)?),
        "buddy" => job.run(&Shared(buddy()?)),
        "LBS-31" => job.run(&Shared(lazy(buddy()?, PcpPolicy::LBS_31)?)),
        "LBS-31-pinned" => job.run(&Pinned(lazy(buddy()?, PcpPolicy::LBS_31)?)),
        "linux-pcp" => job.run(&Shared(lazy(buddy()?, PcpPolicy::LINUX_DEFAULT)?)),
        "linux-pcp-pinned" => job.run(&Pinned(lazy(buddy()?, PcpPolicy::LINUX_DEFAULT)?)),
        "iBuddy" => job.run(&Shared(ibuddy()?)),
        "iBuddy-percpu" => job.run(&Shared(ibuddy_percpu()?)),
        "LiS-31" => job.run(&Shared(lazy(ibuddy()?, PcpPolicy::LIS_31)?)),
        "LiS-31-percpu" => job.run(&Shared(lazy(ibuddy_percpu()?, PcpPolicy::LIS_31)?)),
        "LiS-31-percpu-pinned" => job.run(&Pinned(lazy(ibuddy_percpu()?, PcpPolicy::LIS_31)?)),
        "LiS-31-pinned" => job.run(&Pinned(lazy(ibuddy()?, PcpPolicy::LIS_31)?)),
        "LiS-31-fair" => job.run(&Shared(lazy(ibuddy()?, PcpPolicy::LIS_31_FAIR)?)),
        "LiS-31-fair-pinned" => job.run(&Pinned(lazy(ibuddy()?, PcpPolicy::LIS_31_FAIR)?)),
        "LiS-1" => job.run(&Shared(lazy(ibuddy()?, PcpPolicy::LIS_1)?)),
        other => Err(format!(
            "unknown allocator '{other}': one of {}",
            ALLOCATORS.join(", ")
        )),
    }
}

/// ns per allocation and per free, averaged over threads.
#[derive(Copy, Clone, Debug, Default)]
struct Figures {
    alloc_ns: f64,
    free_ns: f64,
}

struct Run {
    pattern: Pattern,
    threads: u32,
    frames: u64,
    seed: u64,
}

/// Pin the calling thread to core `t` when there are no more threads
/// than cores, as LLFree's bench does; otherwise leave it to the
/// scheduler.
fn pin_thread(t: u32, threads: u32) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    if threads > cores {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // inside it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(t as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

impl Job for Run {
    fn run<T: Target>(&mut self, target: &T) -> Result<Figures, String> {
        let threads = self.threads;
        let share = (self.frames / 2 / u64::from(threads)) as usize;
        let barrier = Barrier::new(threads as usize);
        let exchange: Mutex<Vec<Vec<u64>>> = Mutex::new(vec![Vec::new(); threads as usize]);
        let per_thread: Vec<Result<Figures, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (barrier, exchange) = (&barrier, &exchange);
                    let (pattern, seed) = (self.pattern, self.seed);
                    s.spawn(move || -> Result<Figures, String> {
                        pin_thread(t, threads);
                        let mut w = target.worker(t);
                        // Faulted in before any timing: a first touch of
                        // its 4 MiB inside a timed loop cost every
                        // allocator a page fault per 512 allocations.
                        let mut held = vec![0u64; share];
                        held.clear();
                        let figures = match pattern {
                            Pattern::Bulk => {
                                barrier.wait();
                                let t0 = Instant::now();
                                for _ in 0..share {
                                    held.push(w.alloc()?);
                                }
                                let alloc = t0.elapsed();
                                barrier.wait();
                                let t0 = Instant::now();
                                while let Some(pfn) = held.pop() {
                                    w.free(pfn)?;
                                }
                                Figures {
                                    alloc_ns: alloc.as_nanos() as f64 / share as f64,
                                    free_ns: t0.elapsed().as_nanos() as f64 / share as f64,
                                }
                            }
                            Pattern::Repeat => {
                                for _ in 0..share {
                                    held.push(w.alloc()?);
                                }
                                barrier.wait();
                                let t0 = Instant::now();
                                for _ in 0..share {
                                    let pfn = std::hint::black_box(w.alloc()?);
                                    w.free(pfn)?;
                                }
                                let pair = t0.elapsed().as_nanos() as f64 / share as f64;
                                for pfn in held.drain(..) {
                                    w.free(pfn)?;
                                }
                                Figures {
                                    alloc_ns: pair,
                                    free_ns: pair,
                                }
                            }
                            Pattern::Rand => {
                                barrier.wait();
                                let t0 = Instant::now();
                                for _ in 0..share {
                                    held.push(w.alloc()?);
                                }
                                let alloc = t0.elapsed();
                                exchange.lock().unwrap()[t as usize] = std::mem::take(&mut held);
                                if barrier.wait().is_leader() {
                                    let mut slots = exchange.lock().unwrap();
                                    let mut all: Vec<u64> =
                                        slots.iter_mut().flat_map(std::mem::take).collect();
                                    all.shuffle(&mut SmallRng::seed_from_u64(seed));
                                    for (slot, chunk) in slots.iter_mut().zip(all.chunks(share)) {
                                        *slot = chunk.to_vec();
                                    }
                                }
                                barrier.wait();
                                let mine =
                                    std::mem::take(&mut exchange.lock().unwrap()[t as usize]);
                                barrier.wait();
                                let t0 = Instant::now();
                                for &pfn in &mine {
                                    w.free(pfn)?;
                                }
                                Figures {
                                    alloc_ns: alloc.as_nanos() as f64 / share as f64,
                                    free_ns: t0.elapsed().as_nanos() as f64
                                        / mine.len().max(1) as f64,
                                }
                            }
                            Pattern::RandRealloc => {
                                for _ in 0..share {
                                    held.push(w.alloc()?);
                                }
                                let mut rng = SmallRng::seed_from_u64(seed ^ u64::from(t));
                                let picks: Vec<usize> =
                                    (0..share).map(|_| rng.gen_range(0..share)).collect();
                                barrier.wait();
                                let t0 = Instant::now();
                                for &i in &picks {
                                    w.free(held[i])?;
                                    held[i] = w.alloc()?;
                                }
                                let pair = t0.elapsed().as_nanos() as f64 / share as f64;
                                for pfn in held.drain(..) {
                                    w.free(pfn)?;
                                }
                                Figures {
                                    alloc_ns: pair,
                                    free_ns: pair,
                                }
                            }
                        };
                        Ok(figures)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
                .collect()
        });
        let mut sum = Figures::default();
        for f in per_thread {
            let f = f?;
            sum.alloc_ns += f.alloc_ns;
            sum.free_ns += f.free_ns;
        }
        target.finish()?;
        Ok(Figures {
            alloc_ns: sum.alloc_ns / f64::from(threads),
            free_ns: sum.free_ns / f64::from(threads),
        })
    }
}

/// `value` into `path` whole: written to `path.tmp`, then renamed.
fn write_json(path: &std::path::Path, value: &serde_json::Value) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Args {
    huge_pages: bool,
    cpu_time: bool,
    memory_gib: u64,
    threads: Vec<u32>,
    patterns: Vec<Pattern>,
    allocators: Vec<String>,
    rounds: u32,
    seed: u64,
    json: Option<std::path::PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        huge_pages: false,
        cpu_time: false,
        memory_gib: 4,
        threads: vec![1, 2],
        patterns: Pattern::ALL.to_vec(),
        allocators: ALLOCATORS.iter().map(|s| s.to_string()).collect(),
        rounds: 3,
        seed: 42,
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let list =
            |v: String| -> Vec<String> { v.split(',').map(|s| s.trim().to_string()).collect() };
        match flag.as_str() {
            "--memory-gib" => {
                args.memory_gib = value()?.parse().map_err(|e| format!("--memory-gib: {e}"))?
            }
            "--threads" => {
                args.threads = list(value()?)
                    .iter()
                    .map(|s| s.parse().map_err(|e| format!("--threads '{s}': {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--patterns" => {
                args.patterns = list(value()?)
                    .iter()
                    .map(|s| s.parse())
                    .collect::<Result<_, _>>()?
            }
            "--alloc" => args.allocators = list(value()?),
            "--huge-pages" => args.huge_pages = true,
            "--cpu-time" => args.cpu_time = true,
            "--rounds" => args.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--seed" => args.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--json" => args.json = Some(value()?.into()),
            "--help" | "-h" => {
                return Err("usage: bench-peers [--memory-gib 4] [--threads 1,2] \
                     [--patterns bulk,repeat,rand,rand-realloc] [--alloc LLFree,LiS-31,...] \
                     [--rounds 3] [--seed 42] [--huge-pages] [--cpu-time] [--json PATH]"
                    .into())
            }
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    if args.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    if !(1..=64).contains(&args.memory_gib) {
        return Err(format!("--memory-gib {} is out of 1..=64", args.memory_gib));
    }
    for &t in &args.threads {
        if !(1..=nvmos_frames::MAX_CPUS).contains(&t) {
            return Err(format!("thread count {t} is out of range"));
        }
    }
    for name in &args.allocators {
        if !ALLOCATORS.contains(&name.as_str()) {
            return Err(format!(
                "unknown allocator '{name}': one of {}",
                ALLOCATORS.join(", ")
            ));
        }
    }
    Ok(args)
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("bench-peers: {e}");
            std::process::exit(2);
        }
    };
    HUGE_PAGES.store(args.huge_pages, std::sync::atomic::Ordering::Relaxed);
    CPU_TIME.store(args.cpu_time, std::sync::atomic::Ordering::Relaxed);
    let frames = args.memory_gib << 18;
    println!(
        "order 0, {} GiB ({frames} frames), {} rounds per cell (medians), cores: {}{}",
        args.memory_gib,
        args.rounds,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        if args.huge_pages {
            ", per-frame arrays on transparent huge pages"
        } else {
            ""
        },
    );
    println!(
        "clock: {}",
        if args.cpu_time {
            "each thread's CPU time (time descheduled left out)"
        } else {
            "wall time"
        }
    );
    println!(
        "{:<20} {:<13} {:>3} {:>10} {:>10} {:>9} {:>9}",
        "allocator", "pattern", "thr", "alloc ns", "free ns", "a/LLFree", "f/LLFree"
    );
    let mut results: Vec<(String, Pattern, u32, Figures)> = Vec::new();
    let mut cells = Vec::new();
    for &pattern in &args.patterns {
        for &threads in &args.threads {
            // Rounds interleave the allocators, each round starting one
            // further along the list: a cell's rounds are spread over the
            // whole run and no allocator always runs first, so a burst of
            // load from other users of the machine, or whatever the
            // previous allocator left behind, weighs on every allocator
            // alike. (Running one allocator's rounds back to back put
            // the first one listed 10-25 % behind in the `rand-realloc`
            // cell, whichever allocator that was.)
            let n = args.allocators.len();
            let mut allocs = vec![Vec::new(); n];
            let mut frees = vec![Vec::new(); n];
            for round in 0..args.rounds {
                for k in 0..n {
                    let a = (k + round as usize) % n;
                    let name = &args.allocators[a];
                    let mut run = Run {
                        pattern,
                        threads,
                        frames,
                        seed: args.seed + u64::from(round),
                    };
                    match with_target(name, frames, threads, &mut run) {
                        Ok(f) => {
                            allocs[a].push(f.alloc_ns);
                            frees[a].push(f.free_ns);
                        }
                        Err(e) => {
                            eprintln!(
                                "bench-peers: {name}, {}, {threads} threads, round {round}: {e}",
                                pattern.name()
                            );
                            std::process::exit(1);
                        }
                    }
                }
            }
            cells.push(serde_json::json!({
                "pattern": pattern.name(),
                "threads": threads,
                "paired": pattern.paired(),
                "allocators": args.allocators.iter().enumerate().map(|(a, name)| serde_json::json!({
                    "name": name,
                    "alloc_ns": allocs[a],
                    "free_ns": frees[a],
                })).collect::<Vec<_>>(),
            }));
            let figures: Vec<Figures> = (0..n)
                .map(|a| Figures {
                    alloc_ns: median(std::mem::take(&mut allocs[a])),
                    free_ns: median(std::mem::take(&mut frees[a])),
                })
                .collect();
            let llfree = args
                .allocators
                .iter()
                .position(|name| name == "LLFree")
                .map(|a| figures[a]);
            for (name, &f) in args.allocators.iter().zip(&figures) {
                let ratio = |x: f64, base: Option<f64>| match base {
                    Some(b) if name != "LLFree" => format!("{:.2}", x / b),
                    _ => "-".to_string(),
                };
                println!(
                    "{:<20} {:<13} {:>3} {:>10.1} {:>10.1} {:>9} {:>9}{}",
                    name,
                    pattern.name(),
                    threads,
                    f.alloc_ns,
                    f.free_ns,
                    ratio(f.alloc_ns, llfree.map(|l| l.alloc_ns)),
                    ratio(f.free_ns, llfree.map(|l| l.free_ns)),
                    if pattern.paired() { "  (per pair)" } else { "" }
                );
                results.push((name.clone(), pattern, threads, f));
            }
        }
    }
    if let Some(path) = &args.json {
        let record = serde_json::json!({
            "tool": "bench-peers",
            "memory_gib": args.memory_gib,
            "frames": frames,
            "rounds": args.rounds,
            "seed": args.seed,
            "clock": if args.cpu_time { "cpu" } else { "wall" },
            "huge_pages": args.huge_pages,
            "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
            "llfree_rev": std::env::var("LLFREE_REV").ok().filter(|r| !r.is_empty()),
            "cells": cells,
        });
        if let Err(e) = write_json(path, &record) {
            eprintln!("bench-peers: writing {}: {e}", path.display());
            std::process::exit(1);
        }
    }
    // Seed 000's row: lazy iBuddy over lazy buddy (above 1: lazy iBuddy
    // faster), per pattern and thread count, from this run.
    let find = |name: &str, p: Pattern, t: u32| {
        results
            .iter()
            .find(|(n, pp, tt, _)| n == name && *pp == p && *tt == t)
            .map(|r| r.3)
    };
    for (lis, lbs) in [("LiS-31", "LBS-31"), ("LiS-31-pinned", "LBS-31-pinned")] {
        for &pattern in &args.patterns {
            let mut row = Vec::new();
            for &t in &args.threads {
                if let (Some(a), Some(b)) = (find(lis, pattern, t), find(lbs, pattern, t)) {
                    row.push(format!(
                        "{t}: {:.2}/{:.2}",
                        b.alloc_ns / a.alloc_ns,
                        b.free_ns / a.free_ns
                    ));
                }
            }
            if !row.is_empty() {
                println!(
                    "{lbs} / {lis} time (alloc/free; above 1: lazy iBuddy faster), {}: {}",
                    pattern.name(),
                    row.join("  ")
                );
            }
        }
    }
}
