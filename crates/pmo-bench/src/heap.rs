//! The heap inside an object against PMDK's atomic allocator (`nvmos
//! bench heap`): the same sequence of allocations (64–4096 bytes) and
//! random frees, the live set capped, every live block's handle kept in
//! the root block (as a program keeps them), on the same medium in the
//! same run; then the fragmentation probe.
//!
//! PMDK's `pmemobj_alloc`/`pmemobj_free` make each operation durable on
//! return; nvmos's heap is durable when the object's psync commits, so
//! nvmos runs at several psync intervals (every operation — PMDK's
//! durability — and amortised over a batch), the psync time counted in the
//! operation's cost. Both sides draw the operations from the same
//! xorshift64* generator and seed (`pmdk_heap.c` has the C twin), so they
//! run exactly the same operations.
//!
//! A third row runs the same operations on a heap in plain DRAM (no
//! object, no psync): what the allocator itself costs, apart from the
//! mapping engine and psync.
//!
//! Fragmentation is measured the same way on both: after the workload, the
//! largest single allocation that still succeeds (bisection), beside the
//! bytes still live; nvmos also reports its heap's exact free-space
//! fragmentation (1 − largest free block / free bytes).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use nvmos_measure::stats::median_index;
use nvmos_pmo::heap::{Heap, HeapError};
use nvmos_pmo::{Attachment, KdfParams, Mode, Perm, Pool};
use nvmos_sim::study::{Bound, Check, Progress, Scale, Study};
use serde::{Deserialize, Serialize};

use crate::{BenchError, Context};

type Result<T, E = BenchError> = std::result::Result<T, E>;

const PMDK_SOURCE: &str = include_str!("../pmdk_heap.c");
const KEY: &[u8] = b"nvmos bench heap key";
/// nvmos's target: within this factor of PMDK per operation.
pub const TARGET_RATIO: f64 = 1.5;

/// What to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeapOptions {
    /// Bytes of the heap: nvmos's object, PMDK's pool.
    pub heap_bytes: u64,
    /// Operations per run.
    pub ops: u64,
    /// At most this many blocks live (allocations always while fewer
    /// than half are live, then half the time).
    pub live_max: u64,
    /// The operation generator's seed.
    pub seed: u64,
    /// nvmos psync intervals, in operations (1: every operation durable,
    /// as PMDK's).
    pub psync_every: Vec<u64>,
    /// Runs per row; the median is reported.
    pub rounds: u32,
    /// Directory standing for persistent memory.
    pub pmem_dir: PathBuf,
    /// The nvmos object sealed with AES-256-GCM (PMDK has no encryption).
    pub encrypted: bool,
}

impl Default for HeapOptions {
    /// The full run: a 64 MiB heap, 1,000,000 operations, up to 16,384
    /// live blocks (about 32 MiB), psync every 1 and every 64 operations,
    /// median of 3, on /dev/shm, encrypted.
    fn default() -> Self {
        HeapOptions {
            heap_bytes: 64 << 20,
            ops: 1_000_000,
            live_max: 16_384,
            seed: 7,
            psync_every: vec![1, 64],
            rounds: 3,
            pmem_dir: PathBuf::from("/dev/shm"),
            encrypted: true,
        }
    }
}

impl HeapOptions {
    /// The options at `scale`: `Quick` is 100,000 operations, one round.
    pub fn at(scale: Scale) -> Self {
        match scale {
            Scale::Full => Self::default(),
            Scale::Quick => HeapOptions {
                ops: 100_000,
                rounds: 1,
                ..Self::default()
            },
        }
    }

    /// Refuse options that cannot run, naming the field.
    pub fn check(&self) -> Result<()> {
        let fail = |m: &str| Err(BenchError::Options(m.into()));
        if self.ops == 0 {
            return fail("ops: at least 1");
        }
        if self.rounds == 0 {
            return fail("rounds: at least 1");
        }
        if self.live_max < 2 {
            return fail("live_max: at least 2");
        }
        if self.psync_every.contains(&0) {
            return fail("psync_every: intervals are at least 1 operation");
        }
        // The root's handle array and a live set of average-sized blocks
        // (2 KiB and a header) must fit; allocations beyond are refused
        // and counted.
        if self.live_max * (8 + 2080) > self.heap_bytes {
            return fail("heap_bytes: too small for live_max blocks of 2 KiB on average");
        }
        Ok(())
    }
}

/// One run's figures.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct HeapSample {
    /// Nanoseconds per operation, wall clock (psync included).
    pub ns_per_op: f64,
    /// Nanoseconds per operation of CPU time.
    pub cpu_ns_per_op: f64,
    /// Allocations done.
    pub allocs: u64,
    /// Frees done.
    pub frees: u64,
    /// Allocations refused (out of space): counted, never hidden.
    pub failed_allocs: u64,
    /// Bytes asked for by the blocks live at the end.
    pub live_bytes: u64,
    /// The largest single allocation that still succeeds at the end.
    pub largest_allocatable: u64,
    /// nvmos only: 1 − largest free block / free bytes, exact.
    pub heap_fragmentation: Option<f64>,
    /// nvmos only: psyncs done.
    pub psyncs: u64,
    /// nvmos only: the attachment's counters over the timed operations
    /// (missing-page and write-protect faults, the handler's wake-ups,
    /// pages psync staged, compared with the DRAM cache and kept writable,
    /// time in psync).
    pub faults: u64,
    pub wp_faults: u64,
    pub handler_wakeups: u64,
    pub pages_synced: u64,
    pub pages_compared: u64,
    pub pages_kept_writable: u64,
    pub psync_ns: u64,
}

/// One row: a system and setting.
#[derive(Clone, Debug, Serialize)]
pub struct HeapRow {
    /// Which system and setting.
    pub system: String,
    /// The median run by wall time per operation; `None` when the row
    /// could not run (`missing` says why).
    pub median: Option<HeapSample>,
    /// Every run.
    pub rounds: Vec<HeapSample>,
    /// Why there is no figure.
    pub missing: Option<String>,
}

/// The benchmark's result.
#[derive(Clone, Debug, Serialize)]
pub struct HeapBench {
    /// The settings.
    pub options: HeapOptions,
    /// The rows: nvmos at each psync interval, then PMDK.
    pub rows: Vec<HeapRow>,
    /// The target, held against this run.
    pub checks: Vec<Check>,
    /// Load average when the run started.
    pub loadavg: String,
}

impl Study for HeapBench {
    type Options = HeapOptions;
    type Output = HeapBench;
    type Error = BenchError;
    const NAME: &'static str = "bench-heap";

    fn options(scale: Scale) -> HeapOptions {
        HeapOptions::at(scale)
    }

    fn run(options: &HeapOptions, progress: &mut dyn FnMut(Progress)) -> Result<HeapBench> {
        run(options, progress)
    }
}

/// xorshift64*, as `pmdk_heap.c`.
struct Ops(u64);

impl Ops {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn heap_err(what: &str) -> impl FnOnce(HeapError) -> BenchError + '_ {
    move |e| BenchError::Failed {
        what: what.to_string(),
        source: Box::new(e),
    }
}

/// Where the heap lives: an attached PMO (psync commits it), or plain
/// DRAM (the allocator alone, nothing made durable: what the heap itself
/// costs, apart from the mapping engine and psync).
enum Region {
    Pmo(Attachment),
    Dram(Vec<u8>),
}

impl Region {
    fn mem(&mut self) -> &mut [u8] {
        match self {
            Region::Pmo(a) => a.as_mut_slice().expect("attached writable"),
            Region::Dram(v) => v,
        }
    }

    fn stats(&self) -> Option<nvmos_pmo::AttachStats> {
        match self {
            Region::Pmo(a) => Some(a.stats()),
            Region::Dram(_) => None,
        }
    }

    fn psync(&mut self) -> Result<()> {
        match self {
            Region::Pmo(a) => a.psync().map(|_| ()).context("psync"),
            Region::Dram(_) => Ok(()),
        }
    }
}

/// One nvmos run in an attached object with a psync every `every`
/// operations, or in DRAM with none (`every` = None).
fn nvmos_run(cfg: &HeapOptions, every: Option<u64>) -> Result<HeapSample> {
    let Some(every) = every else {
        return run_ops(cfg, None, Region::Dram(vec![0; cfg.heap_bytes as usize]));
    };
    let dir = tempfile::tempdir_in(&cfg.pmem_dir)
        .with_context(|| format!("a temporary directory in {}", cfg.pmem_dir.display()))?;
    let path = dir.path().join("heap.pool");
    let pool = Pool::create(&path, cfg.heap_bytes * 2 + (16 << 20)).context("creating the pool")?;
    let key = cfg.encrypted.then_some(KEY);
    pool.pcreate_with("heap", cfg.heap_bytes, key, KdfParams::INSECURE_FAST)
        .context("creating the object")?;
    let mode = if cfg.encrypted {
        Mode::DramCache
    } else {
        Mode::Plain
    };
    let a = pool
        .attach("heap", Perm::Write, key, mode)
        .context("attaching the object")?;
    run_ops(cfg, Some(every), Region::Pmo(a))
}

/// The operations of `pmdk_heap.c` on the heap in `region`, then the
/// fragmentation probe. The region is dropped at the end without a psync
/// (the probe's allocations are not kept).
fn run_ops(cfg: &HeapOptions, every: Option<u64>, mut region: Region) -> Result<HeapSample> {
    let slots = {
        let mut heap = Heap::format(region.mem()).map_err(heap_err("formatting the heap"))?;
        heap.root(cfg.live_max * 8)
            .map_err(heap_err("the root block"))?
    };
    region.psync()?;
    let mut sizes = vec![0u64; cfg.live_max as usize];
    let mut s = HeapSample::default();
    let mut ops = Ops(cfg.seed | 1);
    let mut live = 0u64;
    let before = region.stats().unwrap_or_default();
    let (t0, c0) = (Instant::now(), nvmos_measure::timer::thread_cpu_seconds());
    for i in 0..cfg.ops {
        let r = ops.next();
        {
            let mut heap = Heap::open(region.mem()).map_err(heap_err("opening the heap"))?;
            let at = |j: u64| (8 * j) as usize;
            if live < cfg.live_max && (live < cfg.live_max / 2 || r & 1 == 0) {
                let size = 64 + (r >> 8) % 4033;
                match heap.palloc(size, 1) {
                    Ok(off) => {
                        let root = heap.bytes_mut(slots).map_err(heap_err("the root"))?;
                        root[at(live)..at(live) + 8].copy_from_slice(&off.to_le_bytes());
                        sizes[live as usize] = size;
                        s.live_bytes += size;
                        live += 1;
                        s.allocs += 1;
                    }
                    Err(HeapError::OutOfSpace { .. }) => s.failed_allocs += 1,
                    Err(e) => return Err(heap_err("palloc")(e)),
                }
            } else {
                let k = (r >> 8) % live;
                let root = heap.bytes_mut(slots).map_err(heap_err("the root"))?;
                let off = u64::from_le_bytes(root[at(k)..at(k) + 8].try_into().expect("8 bytes"));
                s.live_bytes -= sizes[k as usize];
                live -= 1;
                if k != live {
                    // The moved handle is written back, as a program would.
                    root.copy_within(at(live)..at(live) + 8, at(k));
                    sizes[k as usize] = sizes[live as usize];
                }
                heap.pfree(off).map_err(heap_err("pfree"))?;
                s.frees += 1;
            }
        }
        if every.is_some_and(|e| (i + 1) % e == 0) {
            region.psync()?;
            s.psyncs += 1;
        }
    }
    if every.is_some() {
        region.psync()?;
        s.psyncs += 1;
    }
    let (wall, cpu) = (
        t0.elapsed().as_secs_f64(),
        nvmos_measure::timer::thread_cpu_seconds() - c0,
    );
    s.ns_per_op = wall * 1e9 / cfg.ops as f64;
    s.cpu_ns_per_op = cpu * 1e9 / cfg.ops as f64;
    if let Some(after) = region.stats() {
        s.faults = after.faults - before.faults;
        s.wp_faults = after.wp_faults - before.wp_faults;
        s.handler_wakeups = after.handler_wakeups - before.handler_wakeups;
        s.pages_synced = after.pages_synced - before.pages_synced;
        s.pages_compared = after.pages_compared - before.pages_compared;
        s.pages_kept_writable = after.pages_kept_writable - before.pages_kept_writable;
        s.psync_ns = after.psync_ns - before.psync_ns;
    }
    let mut heap = Heap::open(region.mem()).map_err(heap_err("opening the heap"))?;
    let stats = heap.check().map_err(heap_err("checking the heap"))?;
    s.heap_fragmentation = Some(stats.fragmentation);
    let (mut lo, mut hi) = (0u64, cfg.heap_bytes);
    while lo + 64 < hi {
        let mid = lo + (hi - lo) / 2;
        match heap.palloc(mid, 2) {
            Ok(off) => {
                heap.pfree(off).map_err(heap_err("pfree"))?;
                lo = mid;
            }
            Err(_) => hi = mid,
        }
    }
    s.largest_allocatable = lo;
    Ok(s)
}

fn build_pmdk(dir: &Path) -> Result<PathBuf> {
    crate::build_pmdk_program(dir, "pmdk_heap", PMDK_SOURCE, &[])
}

fn pmdk_run(exe: &Path, cfg: &HeapOptions) -> Result<HeapSample> {
    let dir = tempfile::tempdir_in(&cfg.pmem_dir)
        .with_context(|| format!("a temporary directory in {}", cfg.pmem_dir.display()))?;
    let path = dir.path().join("pmdk-heap.pool");
    let o = Command::new(exe)
        .arg(&path)
        .arg(cfg.heap_bytes.to_string())
        .arg(cfg.ops.to_string())
        .arg(cfg.live_max.to_string())
        .arg(cfg.seed.to_string())
        .env("PMEM_IS_PMEM_FORCE", "1")
        .output()
        .context("running the PMDK program")?;
    if !o.status.success() {
        return Err(BenchError::Inconsistent(format!(
            "PMDK program failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let f: Vec<f64> = text
        .split_whitespace()
        .map(|w| w.parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| BenchError::Inconsistent(format!("PMDK program printed {text:?}")))?;
    let [ops, secs, cpu, allocs, frees, failed, live, largest, _curr] = f[..] else {
        return Err(BenchError::Inconsistent(format!(
            "PMDK program printed {text:?}"
        )));
    };
    Ok(HeapSample {
        ns_per_op: secs * 1e9 / ops,
        cpu_ns_per_op: cpu * 1e9 / ops,
        allocs: allocs as u64,
        frees: frees as u64,
        failed_allocs: failed as u64,
        live_bytes: live as u64,
        largest_allocatable: largest as u64,
        ..HeapSample::default()
    })
}

fn row(system: String, rounds: u32, mut f: impl FnMut() -> Result<HeapSample, String>) -> HeapRow {
    let mut runs = Vec::new();
    for _ in 0..rounds {
        match f() {
            Ok(s) => runs.push(s),
            Err(why) => {
                return HeapRow {
                    system,
                    median: None,
                    rounds: runs,
                    missing: Some(why),
                }
            }
        }
    }
    let wall: Vec<f64> = runs.iter().map(|s| s.ns_per_op).collect();
    HeapRow {
        system,
        median: median_index(&wall).map(|i| runs[i]),
        rounds: runs,
        missing: None,
    }
}

/// The PMDK row's name.
pub const PMDK_ROW: &str = "PMDK pmemobj_alloc/pmemobj_free";
/// The row of the allocator alone, in DRAM, nothing made durable.
pub const DRAM_ROW: &str = "nvmos heap in DRAM (allocator alone, no PMO, no psync)";

fn nvmos_row_name(every: u64, encrypted: bool) -> String {
    let cipher = if encrypted { "AES-256-GCM" } else { "plain" };
    format!("nvmos heap, psync every {every} op(s), {cipher}")
}

/// Run every row. A row that cannot run (no PMDK) is in the result with
/// `missing` set.
pub fn run(cfg: &HeapOptions, progress: &mut dyn FnMut(Progress)) -> Result<HeapBench> {
    cfg.check()?;
    let loadavg = crate::loadavg();
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let pmdk = build_pmdk(tmp.path()).map_err(|e| nvmos_pmo::error_chain(&e));
    let total = cfg.psync_every.len() as u64 + 2;
    let mut rows = Vec::new();
    progress(Progress {
        done: 0,
        total,
        step: DRAM_ROW.into(),
    });
    rows.push(row(DRAM_ROW.into(), cfg.rounds, || {
        nvmos_run(cfg, None).map_err(|e| nvmos_pmo::error_chain(&e))
    }));
    for (i, &every) in cfg.psync_every.iter().enumerate() {
        let name = nvmos_row_name(every, cfg.encrypted);
        progress(Progress {
            done: i as u64 + 1,
            total,
            step: name.clone(),
        });
        rows.push(row(name, cfg.rounds, || {
            nvmos_run(cfg, Some(every)).map_err(|e| nvmos_pmo::error_chain(&e))
        }));
    }
    progress(Progress {
        done: total - 1,
        total,
        step: PMDK_ROW.into(),
    });
    rows.push(row(PMDK_ROW.into(), cfg.rounds, || match &pmdk {
        Ok(exe) => pmdk_run(exe, cfg).map_err(|e| nvmos_pmo::error_chain(&e)),
        Err(why) => Err(format!("the PMDK baseline could not be built: {why}")),
    }));
    progress(Progress {
        done: total,
        total,
        step: "done".into(),
    });
    let checks = checks(cfg, &rows);
    Ok(HeapBench {
        options: cfg.clone(),
        rows,
        checks,
        loadavg,
    })
}

/// nvmos per operation over PMDK's, at each psync interval, against the
/// 1.5× target (same operations, same medium, same run).
fn checks(cfg: &HeapOptions, rows: &[HeapRow]) -> Vec<Check> {
    let pmdk = rows.iter().find(|r| r.system == PMDK_ROW);
    let mut out = Vec::new();
    for &every in &cfg.psync_every {
        let name = nvmos_row_name(every, cfg.encrypted);
        let Some(ours) = rows.iter().find(|r| r.system == name) else {
            continue;
        };
        let ratio = match (ours.median, pmdk.and_then(|p| p.median)) {
            (Some(a), Some(b)) => a.ns_per_op / b.ns_per_op,
            _ => f64::NAN,
        };
        let cpu = match (ours.median, pmdk.and_then(|p| p.median)) {
            (Some(a), Some(b)) => format!("{:.2}", a.cpu_ns_per_op / b.cpu_ns_per_op),
            _ => "-".into(),
        };
        let why: Vec<String> = [Some(ours), pmdk]
            .into_iter()
            .flatten()
            .filter_map(|r| r.missing.as_ref().map(|m| format!("{}: {m}", r.system)))
            .collect();
        out.push(
            Check::new(
                format!("{name}: time per operation within {TARGET_RATIO}x of PMDK's pmemobj_alloc/free"),
                "nvmos target: heap against libpmemobj in the same run (/dev/shm)",
                ratio,
                "x",
                Bound::AtMost(TARGET_RATIO),
            )
            .detail(if why.is_empty() {
                format!("wall-clock ratio, psync included; by CPU time {cpu}x")
            } else {
                format!("not measured: {}", why.join("; "))
            }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every system runs exactly the same operations: the same counts of
    /// allocations, frees and live bytes; the PMDK row is either measured
    /// with the same counts or missing with its reason. (The heap is large
    /// enough that no system refuses an allocation: a refusal changes the
    /// live set and so the rest of the sequence.)
    #[test]
    fn every_row_runs_the_same_operations() {
        let cfg = HeapOptions {
            heap_bytes: 32 << 20,
            ops: 3000,
            live_max: 512,
            psync_every: vec![1, 16],
            rounds: 1,
            pmem_dir: std::env::temp_dir(),
            ..HeapOptions::default()
        };
        let r = run(&cfg, &mut |_| {}).unwrap();
        assert_eq!(r.rows.len(), 4);
        let dram = r.rows[0].median.expect("the DRAM row runs");
        assert_eq!(dram.allocs + dram.frees + dram.failed_allocs, 3000);
        assert!(dram.live_bytes > 0 && dram.largest_allocatable > 0);
        assert_eq!(dram.failed_allocs, 0);
        for row in &r.rows[1..] {
            match (row.median, &row.missing) {
                (Some(m), None) => {
                    assert_eq!(
                        (m.allocs, m.frees, m.failed_allocs, m.live_bytes),
                        (dram.allocs, dram.frees, dram.failed_allocs, dram.live_bytes),
                        "{}",
                        row.system
                    );
                }
                (None, Some(why)) => assert!(row.system == PMDK_ROW, "{}: {why}", row.system),
                other => panic!("{}: {other:?}", row.system),
            }
        }
        assert_eq!(r.checks.len(), 2);
        // Bad options are refused naming the field.
        let bad = HeapOptions {
            psync_every: vec![0],
            ..cfg
        };
        assert!(
            matches!(run(&bad, &mut |_| {}), Err(BenchError::Options(m)) if m.contains("psync_every"))
        );
    }
}
