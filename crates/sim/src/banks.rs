//! Seed 002's study: how frame placement decides row-buffer conflicts.
//!
//! - [`run_workload`]: N cores, each running a STREAM kernel (copy, scale,
//!   add, triad) or the same kernel over its lines in random order, over
//!   its own arrays. Each core's virtual pages are backed by frames a
//!   [`FrameAllocator`] returns, faulted in the order STREAM's
//!   initialisation loop touches them (a, b, c page by page), one core
//!   after the other. Every access is a cache line; a core keeps at most
//!   `mlp` misses outstanding (Westmere's ten line-fill buffers by
//!   default) and issues the next when one completes, `gap` cycles after
//!   its previous issue; an optional shared last-level cache (set
//!   associative, LRU, write-back, write-allocate) filters the accesses.
//!   The cores' requests meet in one [`Controller`], in time order.
//! - [`crate::banks_study`]: the seed's experiment (1, 2 and 4 cores;
//!   sequential (buddy), random and M³ placement; sequential and random
//!   access) in the one study shape.
//! - [`analyse`]: the seed's analysing program, on the model: the access
//!   latency of address pairs accessed alternately (a row conflict shows
//!   as a long latency), and from those latencies alone which address
//!   strides change the bank — the machine's interleaving — checked
//!   against its mapping.

use nvmos_frames::{FrameAllocator, MigrateType, Order, Pfn, Request, Zone};

use crate::allocators::{AllocatorJob, AllocatorKind, Setup};
use nvmos_memsys::{
    AccessKind, BankDecoder, Completion, Controller, ControllerConfig, ControllerError,
    ControllerReport, Machine, MemRequest,
};
use serde::{Deserialize, Serialize};

type Lock = nvmos_frames::sync::SpinYield;

/// Cache-line size, bytes.
pub const LINE: u64 = 64;

/// The colour of each frame by bank: the bank (rank, bank group, bank)
/// within its channel of the frame's first byte. On seed 002's Xeon a
/// frame lies in one bank of each of the three channels, the same one.
#[derive(Clone, Debug)]
pub struct BankColouring {
    decoder: BankDecoder,
    page_size: u64,
    frames: u64,
}

impl BankColouring {
    /// The colouring of `machine`.
    pub fn new(machine: &Machine) -> Self {
        Self {
            decoder: BankDecoder::new(machine),
            page_size: machine.page_size(),
            frames: machine.memory_bytes() / machine.page_size(),
        }
    }

    /// Number of colours: banks per channel.
    pub fn colours(&self) -> u32 {
        self.decoder.banks_per_channel()
    }

    /// The colour of `pfn` (frames beyond the machine wrap around).
    pub fn colour(&self, pfn: Pfn) -> u32 {
        let paddr = (pfn.0 % self.frames) * self.page_size;
        let at = self.decoder.decode(paddr).expect("inside the machine");
        at.bank % self.colours()
    }
}

/// A STREAM kernel: which arrays it reads and which it writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// c = a
    Copy,
    /// b = s·c
    Scale,
    /// c = a + b
    Add,
    /// a = b + s·c
    Triad,
}

impl Kernel {
    /// (arrays read, array written), arrays numbered a = 0, b = 1, c = 2.
    fn arrays(self) -> (&'static [u64], u64) {
        match self {
            Kernel::Copy => (&[0], 2),
            Kernel::Scale => (&[2], 1),
            Kernel::Add => (&[0, 1], 2),
            Kernel::Triad => (&[1, 2], 0),
        }
    }
}

/// In which order a core visits its lines.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Line after line, as STREAM does.
    Sequential,
    /// Lines of the arrays in random order.
    Random,
}

/// A shared last-level cache.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlcSpec {
    /// Capacity in bytes.
    pub bytes: u64,
    /// Ways per set.
    pub ways: u32,
}

/// What the cores run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadSpec {
    /// Cores, each with its own arrays.
    pub cores: u32,
    /// The kernel.
    pub kernel: Kernel,
    /// Line order.
    pub access: Access,
    /// Bytes of each of the three arrays (a multiple of the page size).
    pub array_bytes: u64,
    /// Kernel steps per core (one step: a line of each array it touches).
    pub steps: u64,
    /// Misses a core keeps outstanding.
    pub mlp: u32,
    /// Memory cycles between two issues of one core (its compute).
    pub gap: u64,
    /// Optional last-level cache.
    pub llc: Option<LlcSpec>,
    /// Seed of the random line order.
    pub seed: u64,
}

/// Why a workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum BanksError {
    /// The allocator ran out of frames for the arrays.
    #[error("the allocator ran out of frames after {allocated} of the {needed} the arrays need")]
    OutOfFrames {
        /// Frames allocated.
        allocated: u64,
        /// Frames needed.
        needed: u64,
    },
    /// A bad request or configuration of the timing model.
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// A workload parameter out of range.
    #[error("workload: {0}")]
    Spec(&'static str),
    /// An allocator could not be built.
    #[error("building the allocator")]
    Allocator(#[from] nvmos_frames::ConfigError),
    /// The machine named is neither a preset nor a file.
    #[error("{name:?} is neither a preset ({presets}) nor a machine file")]
    UnknownMachine {
        /// What was asked for.
        name: String,
        /// The preset names, comma-separated.
        presets: String,
    },
    /// A machine preset or file could not be loaded.
    #[error("loading machine {name}")]
    Machine {
        /// The preset or file.
        name: String,
        /// Why.
        #[source]
        source: nvmos_memsys::LoadError,
    },
}

/// What a workload run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// The timing model's report.
    pub memory: ControllerReport,
    /// Accesses the LLC served.
    pub llc_hits: u64,
    /// When each core finished its last access, nanoseconds.
    pub core_finish_ns: Vec<f64>,
    /// When the last core finished, nanoseconds: the run time.
    pub run_ns: f64,
}

/// The last-level cache model: LRU, write-back, write-allocate, 64-byte
/// lines; set = line mod sets. The memory-trace plugin of `nvmos kernel
/// run --mem-trace` models the same cache in C and is tested against
/// this one.
pub struct Llc {
    sets: u64,
    ways: usize,
    /// Per set: (line tag + 1, last use, dirty); tag 0 = empty.
    lines: Vec<(u64, u64, bool)>,
    clock: u64,
}

impl Llc {
    /// An empty cache. Refuses a size that is not whole sets.
    pub fn new(spec: LlcSpec) -> Result<Self, BanksError> {
        let lines = spec.bytes / LINE;
        if spec.ways == 0 || lines == 0 || !lines.is_multiple_of(u64::from(spec.ways)) {
            return Err(BanksError::Spec(
                "llc: bytes must be a non-zero multiple of ways x 64",
            ));
        }
        Ok(Self {
            sets: lines / u64::from(spec.ways),
            ways: spec.ways as usize,
            lines: vec![(0, 0, false); lines as usize],
            clock: 0,
        })
    }

    /// Look `line` (an address over 64) up; on a miss, fill it. Returns
    /// (hit, dirty line evicted).
    pub fn access(&mut self, line: u64, write: bool) -> (bool, Option<u64>) {
        self.clock += 1;
        let set = (line % self.sets) as usize * self.ways;
        let ways = &mut self.lines[set..set + self.ways];
        if let Some(w) = ways.iter_mut().find(|w| w.0 == line + 1) {
            w.1 = self.clock;
            w.2 |= write;
            return (true, None);
        }
        let victim = ways
            .iter_mut()
            .min_by_key(|w| w.1)
            .expect("at least one way");
        let evicted = (victim.0 != 0 && victim.2).then(|| victim.0 - 1);
        *victim = (line + 1, self.clock, write);
        (false, evicted)
    }
}

struct Core {
    /// Frame of each virtual page (a, b, c arrays back to back).
    pages: Vec<Pfn>,
    /// Per outstanding-miss slot: when it frees; `u64::MAX` while its
    /// request waits for the scheduler.
    slots: Vec<u64>,
    next_issue: u64,
    step: u64,
    /// Position within the step: reads, then the write.
    part: usize,
    line: u64,
    rng: u64,
    finish: u64,
}

impl Core {
    fn ready(&self) -> u64 {
        let free = self.slots.iter().copied().min().unwrap_or(0);
        self.next_issue.max(free)
    }
}

/// Back each core's arrays with frames from `alloc` and run the workload
/// on `machine`'s timing model.
pub fn run_workload(
    machine: &Machine,
    controller: ControllerConfig,
    alloc: &dyn FrameAllocator,
    spec: &WorkloadSpec,
) -> Result<WorkloadResult, BanksError> {
    let page = machine.page_size();
    if spec.cores == 0
        || spec.mlp == 0
        || spec.array_bytes < page
        || !spec.array_bytes.is_multiple_of(page)
    {
        return Err(BanksError::Spec(
            "cores and mlp must be positive and array_bytes a non-zero multiple of the page size",
        ));
    }
    let pages_per_array = spec.array_bytes / page;
    let needed = 3 * pages_per_array * u64::from(spec.cores);
    let mut cores = Vec::new();
    let mut allocated = 0;
    for cpu in 0..spec.cores {
        // STREAM's initialisation loop writes a[j], b[j], c[j] together:
        // the pages fault a, b, c, a, b, c, ...
        let mut pages = vec![Pfn(0); 3 * pages_per_array as usize];
        for p in 0..pages_per_array {
            for array in 0..3 {
                let req = Request::new(Order::ZERO, cpu, MigrateType::Movable);
                let pfn = alloc
                    .alloc(req)
                    .map_err(|_| BanksError::OutOfFrames { allocated, needed })?;
                allocated += 1;
                pages[(array * pages_per_array + p) as usize] = pfn;
            }
        }
        cores.push(Core {
            pages,
            slots: vec![0; spec.mlp as usize],
            next_issue: 0,
            step: 0,
            part: 0,
            line: 0,
            rng: spec.seed ^ (u64::from(cpu) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            finish: 0,
        });
    }
    let mut mc = Controller::new(machine, controller)?;
    let mut llc = spec.llc.map(Llc::new).transpose()?;
    let mut llc_hits = 0;
    let (reads, write) = spec.kernel.arrays();
    let lines_per_array = spec.array_bytes / LINE;
    let mut done: Vec<Completion> = Vec::new();
    // Which core each request id belongs to (posted write-backs: none).
    let mut owner: Vec<Option<u32>> = Vec::new();
    loop {
        let next_core = cores
            .iter()
            .enumerate()
            .filter(|(_, c)| c.step < spec.steps)
            .map(|(i, c)| (c.ready(), i))
            .min();
        let next_decision = mc.next_decision();
        match (next_core, next_decision) {
            (Some((t, i)), d) if t != u64::MAX && d.is_none_or(|(_, dt)| t < dt) => {
                let core = &mut cores[i];
                if core.part == 0 {
                    core.line = match spec.access {
                        Access::Sequential => core.step % lines_per_array,
                        Access::Random => {
                            core.rng ^= core.rng << 13;
                            core.rng ^= core.rng >> 7;
                            core.rng ^= core.rng << 17;
                            core.rng % lines_per_array
                        }
                    };
                }
                let (array, kind) = match reads.get(core.part) {
                    Some(&a) => (a, AccessKind::Read),
                    None => (write, AccessKind::Write),
                };
                let vaddr = array * spec.array_bytes + core.line * LINE;
                let pfn = core.pages[(vaddr / page) as usize];
                let paddr = pfn.0 * page + vaddr % page;
                // A core whose channel queue is full stalls until the
                // channel's next decision frees a slot (later than t:
                // nothing decides before t).
                let channel = mc.channel_of(paddr)?;
                if !mc.has_space(channel) {
                    let d = mc.decision_time(channel).expect("a full queue decides");
                    core.next_issue = core.next_issue.max(d + 1);
                    continue;
                }
                // Through the LLC: a hit costs the core only its gap; a
                // miss (write-allocate: a write misses as a read for
                // ownership) goes to memory; a dirty victim is written
                // back, posted (if its channel is full, that channel
                // decides at once to make room).
                let mut to_memory = Some(kind);
                if let Some(llc) = llc.as_mut() {
                    let (hit, evicted) = llc.access(paddr / LINE, kind == AccessKind::Write);
                    if hit {
                        llc_hits += 1;
                        to_memory = None;
                    } else {
                        to_memory = Some(AccessKind::Read);
                    }
                    if let Some(victim) = evicted {
                        let wb = MemRequest {
                            paddr: victim * LINE,
                            kind: AccessKind::Write,
                            core: i as u32,
                            arrival: t,
                        };
                        let id = mc.submit(wb, &mut done)?;
                        record(id, None, &mut owner);
                    }
                }
                let core = &mut cores[i];
                match to_memory {
                    Some(kind) => {
                        let req = MemRequest {
                            paddr,
                            kind,
                            core: i as u32,
                            arrival: t,
                        };
                        let id = mc.submit(req, &mut done)?;
                        record(id, Some(i as u32), &mut owner);
                        claim_slot(core);
                    }
                    None => core.finish = core.finish.max(t),
                }
                advance(core, t, spec, reads.len());
            }
            (_, Some(_)) => {
                let c = mc.decide_next().expect("a decision is due");
                done.push(c);
            }
            _ => break,
        }
        for c in done.drain(..) {
            if let Some(Some(core)) = owner.get(c.id as usize) {
                let core = &mut cores[*core as usize];
                let slot = core
                    .slots
                    .iter_mut()
                    .find(|s| **s == u64::MAX)
                    .expect("a completion frees a waiting slot");
                *slot = c.done;
                core.finish = core.finish.max(c.done);
            }
        }
    }
    mc.drain(&mut done);
    let memory = mc.report();
    let tck = f64::from(mc.timing().tck_ps) / 1000.0;
    let core_finish_ns: Vec<f64> = cores.iter().map(|c| c.finish as f64 * tck).collect();
    Ok(WorkloadResult {
        run_ns: core_finish_ns.iter().copied().fold(0.0, f64::max),
        core_finish_ns,
        memory,
        llc_hits,
    })
}

fn record(id: u64, core: Option<u32>, owner: &mut Vec<Option<u32>>) {
    debug_assert_eq!(id as usize, owner.len());
    owner.push(core);
}

fn claim_slot(core: &mut Core) {
    let slot = core
        .slots
        .iter_mut()
        .min()
        .expect("a core has at least one slot");
    *slot = u64::MAX;
}

fn advance(core: &mut Core, t: u64, spec: &WorkloadSpec, reads: usize) {
    core.next_issue = t + spec.gap;
    core.part += 1;
    if core.part > reads {
        core.part = 0;
        core.step += 1;
    }
}

/// Where frames come from in the study.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// The buddy system: consecutive frames.
    Sequential,
    /// M³ without partitions: frames at random over all banks.
    Random,
    /// M³ with the banks partitioned among the cores by colour (on the
    /// seed's Xeon each of four cores gets one rank: the 3 MB partition).
    M3,
}

impl Placement {
    /// Every placement, in the study's order.
    pub const ALL: [Placement; 3] = [Placement::Sequential, Placement::Random, Placement::M3];

    /// The registry allocator that places the frames.
    pub const fn allocator(self) -> AllocatorKind {
        match self {
            Placement::Sequential => AllocatorKind::Buddy,
            Placement::Random => AllocatorKind::M3,
            Placement::M3 => AllocatorKind::M3Part,
        }
    }

    /// Build the allocator over `zones` for `cpus` CPUs, colouring frames
    /// by `machine`'s banks.
    pub fn build(
        self,
        machine: &Machine,
        zones: &[Zone],
        cpus: u32,
        seed: u64,
    ) -> Result<Box<dyn FrameAllocator>, BanksError> {
        let setup = Setup {
            machine: Some(machine),
            seed: Some(seed),
            ..Setup::new(zones, cpus)
        };
        struct Boxed;
        impl AllocatorJob for Boxed {
            type Output = Box<dyn FrameAllocator>;
            fn run<A: crate::StudyAllocator + 'static>(self, alloc: A) -> Box<dyn FrameAllocator> {
                Box::new(alloc)
            }
        }
        Ok(self.allocator().with::<Lock, _>(&setup, Boxed)?)
    }
}

/// The analysing program's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// The machine's name.
    pub machine: String,
    /// The reference address every probe is paired with.
    pub reference: u64,
    /// The first address found to conflict with the reference.
    pub conflicting: u64,
    /// Latency of each cache line of the first frames after
    /// `conflicting`, paired with the reference: (offset, ns).
    pub line_latency_ns: Vec<(u64, f64)>,
    /// The latency threshold between "same bank, other row" and the rest.
    pub threshold_ns: f64,
    /// The smallest stride, in lines, that stays in the conflicting bank.
    pub unit_lines: u64,
    /// For each stride `unit_lines · 64 · 2^k` bytes: (stride, whether the
    /// latencies say it leaves the bank, whether the mapping says so).
    pub strides: Vec<(u64, bool, bool)>,
    /// Lines among the first frames whose latency says "other bank" but
    /// the mapping says otherwise, or the reverse.
    pub line_mismatches: u64,
    /// Every stride and line agrees with the mapping.
    pub agrees: bool,
}

/// Mean latency in ns of `a` when accessed alternately with `b`, one
/// access outstanding at a time (the data dependency of the seed's
/// program), on a fresh controller.
fn pair_latency(machine: &Machine, a: u64, b: u64) -> Result<f64, BanksError> {
    let rounds = 6;
    // `b` first, so every access to `a` finds `b`'s row just used.
    let (cycles, tck_ps) = Controller::alternating_latencies(machine, b, a, rounds)?;
    // `a`'s accesses are the odd ones.
    let sum: u64 = cycles.iter().skip(1).step_by(2).sum();
    let tck = f64::from(tck_ps) / 1000.0;
    Ok(sum as f64 / f64::from(rounds - 1) * tck)
}

/// Seed 002's analysing program on the model. Only latencies decide the
/// result; the mapping is consulted afterwards, to check it.
pub fn analyse(machine: &Machine, frames: u64) -> Result<Analysis, BanksError> {
    let page = machine.page_size();
    let reference = 0;
    // The two latencies a pair can show: both rows stay open (hits), or
    // each access closes the other's row. Find the first conflict by
    // scanning frame by frame, then line by line before it.
    let limit = (machine.memory_bytes() / page).min(1 << 16);
    let mut lat = Vec::new();
    for f in 1..limit {
        let l = pair_latency(machine, f * page, reference)?;
        lat.push((f * page, l));
        let lo = lat.iter().map(|x| x.1).fold(f64::MAX, f64::min);
        if l > lo * 1.5 {
            break;
        }
    }
    let (lo, hi) = lat
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(x.1), hi.max(x.1)));
    let threshold = (lo + hi) / 2.0;
    let conflicting = lat
        .iter()
        .find(|x| x.1 > threshold)
        .map(|x| x.0)
        .ok_or(BanksError::Spec("no address conflicts with the reference"))?;
    let conflicts = |a: u64| -> Result<bool, BanksError> {
        Ok(pair_latency(machine, a, reference)? > threshold)
    };
    let same_bank = |a: u64, b: u64| {
        let (x, y) = (machine.decode(a).unwrap(), machine.decode(b).unwrap());
        machine.bank_index(&x) == machine.bank_index(&y)
    };
    // The latency of each line of the first frames after the conflict.
    let mut line_latency_ns = Vec::new();
    let mut line_mismatches = 0;
    for off in (0..frames * page).step_by(LINE as usize) {
        let a = conflicting + off;
        if a >= machine.memory_bytes() {
            break;
        }
        let l = pair_latency(machine, a, reference)?;
        line_latency_ns.push((off, l));
        let model_says = same_bank(a, reference)
            && machine.decode(a).unwrap().row != machine.decode(reference).unwrap().row;
        if (l > threshold) != model_says {
            line_mismatches += 1;
        }
    }
    let unit_lines = (1..=64)
        .find(|&k| conflicts(conflicting + k * LINE).unwrap_or(false))
        .ok_or(BanksError::Spec("no nearby line stays in the bank"))?;
    let mut strides = Vec::new();
    let mut k = 0;
    loop {
        let stride = (unit_lines * LINE) << k;
        let a = conflicting + stride;
        if a >= machine.memory_bytes() || k > 40 {
            break;
        }
        let leaves = !conflicts(a)?;
        strides.push((stride, leaves, !same_bank(a, conflicting)));
        k += 1;
    }
    let agrees = line_mismatches == 0 && strides.iter().all(|s| s.1 == s.2);
    Ok(Analysis {
        machine: machine.name().to_owned(),
        reference,
        conflicting,
        line_latency_ns,
        threshold_ns: threshold,
        unit_lines,
        strides,
        line_mismatches,
        agrees,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bank_colouring_follows_the_xeon_bank_every_three_frames() {
        let m = Machine::preset("xeon-3ch").unwrap();
        let c = BankColouring::new(&m);
        assert_eq!(c.colours(), 32);
        let colours: Vec<u32> = (0..9).map(|f| c.colour(Pfn(f))).collect();
        assert_eq!(colours, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
        // Ranks every 3 MB = 768 frames: colour 8 is rank 1, bank 0.
        assert_eq!(c.colour(Pfn(768)), 8);
    }

    #[test]
    fn the_analysing_program_recovers_the_xeon_interleaving() {
        let m = Machine::preset("xeon-3ch").unwrap();
        let a = analyse(&m, 1).unwrap();
        assert!(a.agrees, "{a:?}");
        // Same bank every third line: three channels by cache line.
        assert_eq!(a.unit_lines, 3);
        let leaving: Vec<u64> = a.strides.iter().filter(|s| s.1).map(|s| s.0).collect();
        // Banks at 12, 24, 48 KB; ranks at 3 and 6 MB.
        assert_eq!(leaving, [12 << 10, 24 << 10, 48 << 10, 3 << 20, 6 << 20]);
    }

    #[test]
    fn workloads_run_and_every_access_is_counted() {
        let m = Machine::preset("xeon-3ch").unwrap();
        let zones = [Zone::new(1 << 20, (1 << 20) + 8192)];
        let spec = WorkloadSpec {
            cores: 2,
            kernel: Kernel::Add,
            access: Access::Random,
            array_bytes: 64 << 10,
            steps: 500,
            mlp: 4,
            gap: 2,
            llc: None,
            seed: 1,
        };
        let config = ControllerConfig {
            check: true,
            ..ControllerConfig::default()
        };
        for placement in Placement::ALL {
            let alloc = placement.build(&m, &zones, 2, 7).unwrap();
            let r = run_workload(&m, config, &*alloc, &spec).unwrap();
            // Add reads two lines and writes one per step.
            assert_eq!(r.memory.requests, 2 * 500 * 3, "{placement:?}");
            assert_eq!(r.memory.reads, 2 * 500 * 2);
            assert_eq!(r.memory.cores.len(), 2);
            assert!(r.run_ns > 0.0);
        }
        // With an LLC that holds everything, the second pass hits.
        let spec = WorkloadSpec {
            access: Access::Sequential,
            steps: 2 * 1024,
            llc: Some(LlcSpec {
                bytes: 1 << 20,
                ways: 16,
            }),
            ..spec
        };
        let alloc = Placement::Sequential.build(&m, &zones, 2, 7).unwrap();
        let r = run_workload(&m, config, &*alloc, &spec).unwrap();
        assert_eq!(r.llc_hits, 2 * 1024 * 3);
        assert_eq!(r.memory.requests, 2 * 1024 * 3);
        // Too little memory is an error, not a panic.
        let tiny = [Zone::new(1 << 20, (1 << 20) + 8)];
        let alloc = Placement::Random.build(&m, &tiny, 2, 7).unwrap();
        assert!(matches!(
            run_workload(&m, config, &*alloc, &spec),
            Err(BanksError::OutOfFrames { allocated: 8, .. })
        ));
    }
}
