//! Which frames does a lazy list recycle? Replays recorded traces through
//! iBuddy, LiS-31 and LiS-31-fair and, for every order-0 allocation, tells
//! a *recycled* frame (freed by the caller and handed out again without
//! having gone back to iBuddy: it came off a per-CPU list) from one iBuddy
//! handed out (its least recently freed frame).
//!
//! Prints per trace and allocator: max/mean wear (one write per allocated
//! frame per allocation, as `nvmos evaluate`), the share of order-0
//! allocations that were recycled, how many distinct frames were ever
//! recycled, the share of recycled allocations among the 100 most
//! allocated frames, and the median number of events between a frame's
//! free and its next allocation, recycled against not.
//!
//! `LLFREE_DIR=… BIN=lazy-reuse crates/frames/bench-peers/run.sh traces/*.nvt`

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use nvmos_frames::sync::SpinYield;
use nvmos_frames::{
    AllocError, FrameAllocator, IBuddy, Order, PcpPolicy, PerCpu, Pfn, Request, Stats,
    ValidationError, Zone, ZoneMap,
};
use nvmos_sim::evaluate::recorded_zones;
use nvmos_sim::{replay, WearSummary, WriteModel};

type Lock = SpinYield;

/// Per-frame facts shared by the probe (outside the lazy layer) and the
/// tap (between the lazy layer and iBuddy).
struct Facts {
    map: ZoneMap,
    /// The caller freed the frame since its last allocation.
    freed: Vec<AtomicBool>,
    /// iBuddy got the frame back since the caller's last free of it.
    returned: Vec<AtomicBool>,
    /// Event number of the caller's last free of the frame.
    freed_at: Vec<AtomicU64>,
    allocs: Vec<AtomicU32>,
    recycled: Vec<AtomicU32>,
    clock: AtomicU64,
    distances_recycled: std::sync::Mutex<Vec<u64>>,
    distances_inner: std::sync::Mutex<Vec<u64>>,
}

impl Facts {
    fn new(map: ZoneMap) -> Facts {
        let n = map.frames() as usize;
        let vec_of = |f: fn() -> AtomicU64| (0..n).map(|_| f()).collect::<Vec<_>>();
        Facts {
            freed: (0..n).map(|_| AtomicBool::new(false)).collect(),
            returned: (0..n).map(|_| AtomicBool::new(false)).collect(),
            freed_at: vec_of(|| AtomicU64::new(0)),
            allocs: (0..n).map(|_| AtomicU32::new(0)).collect(),
            recycled: (0..n).map(|_| AtomicU32::new(0)).collect(),
            clock: AtomicU64::new(0),
            distances_recycled: Default::default(),
            distances_inner: Default::default(),
            map,
        }
    }

    fn index(&self, pfn: Pfn) -> usize {
        self.map
            .dense_index(pfn)
            .expect("frames come from the zones")
    }
}

/// Between the lazy layer and iBuddy: notes every single frame iBuddy
/// gets back.
struct Tap<'a> {
    inner: IBuddy<Lock>,
    facts: &'a Facts,
}

impl Tap<'_> {
    fn returned(&self, pfn: Pfn, order: Order) {
        if order == Order::ZERO {
            let i = self.facts.index(pfn);
            self.facts.returned[i].store(true, Ordering::Relaxed);
        }
    }
}

impl FrameAllocator for Tap<'_> {
    fn alloc(&self, req: Request) -> Result<Pfn, AllocError> {
        self.inner.alloc(req)
    }
    fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        self.inner.free(pfn, req)?;
        self.returned(pfn, req.order);
        Ok(())
    }
    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        self.inner.check_free(pfn, order)
    }
    fn alloc_bulk(&self, req: Request, out: &mut [Pfn]) -> usize {
        self.inner.alloc_bulk(req, out)
    }
    fn free_bulk(&self, blocks: &[Pfn], req: Request) -> Result<(), (usize, AllocError)> {
        let result = self.inner.free_bulk(blocks, req);
        let done = match result {
            Ok(()) => blocks.len(),
            Err((n, _)) => n,
        };
        for &pfn in &blocks[..done] {
            self.returned(pfn, req.order);
        }
        result
    }
    fn stats(&self) -> Stats {
        self.inner.stats()
    }
    fn validate(&self) -> Result<(), ValidationError> {
        self.inner.validate()
    }
    fn zones(&self) -> &[Zone] {
        self.inner.zones()
    }
    fn cpus(&self) -> u32 {
        self.inner.cpus()
    }
    fn metadata_bytes(&self) -> usize {
        self.inner.metadata_bytes()
    }
}

/// What the replay calls: the allocator under test, observed.
struct Probe<'a, A> {
    alloc: A,
    facts: &'a Facts,
}

impl<A: FrameAllocator> FrameAllocator for Probe<'_, A> {
    fn alloc(&self, req: Request) -> Result<Pfn, AllocError> {
        let now = self.facts.clock.fetch_add(1, Ordering::Relaxed);
        let pfn = self.alloc.alloc(req)?;
        if req.order == Order::ZERO {
            let f = self.facts;
            let i = f.index(pfn);
            f.allocs[i].fetch_add(1, Ordering::Relaxed);
            if f.freed[i].swap(false, Ordering::Relaxed) {
                let distance = now - f.freed_at[i].load(Ordering::Relaxed);
                if f.returned[i].load(Ordering::Relaxed) {
                    f.distances_inner.lock().unwrap().push(distance);
                } else {
                    f.recycled[i].fetch_add(1, Ordering::Relaxed);
                    f.distances_recycled.lock().unwrap().push(distance);
                }
            }
        }
        Ok(pfn)
    }
    fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        let now = self.facts.clock.fetch_add(1, Ordering::Relaxed);
        if req.order == Order::ZERO {
            let i = self.facts.index(pfn);
            // Cleared before the frame can reach iBuddy.
            self.facts.returned[i].store(false, Ordering::Relaxed);
            self.alloc.free(pfn, req)?;
            self.facts.freed[i].store(true, Ordering::Relaxed);
            self.facts.freed_at[i].store(now, Ordering::Relaxed);
            return Ok(());
        }
        self.alloc.free(pfn, req)
    }
    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        self.alloc.check_free(pfn, order)
    }
    fn drain(&self) {
        self.alloc.drain()
    }
    fn stats(&self) -> Stats {
        self.alloc.stats()
    }
    fn validate(&self) -> Result<(), ValidationError> {
        self.alloc.validate()
    }
    fn zones(&self) -> &[Zone] {
        self.alloc.zones()
    }
    fn cpus(&self) -> u32 {
        self.alloc.cpus()
    }
    fn metadata_bytes(&self) -> usize {
        self.alloc.metadata_bytes()
    }
}

fn median(v: &mut [u64]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

fn run(path: &str, policy: Option<PcpPolicy>, name: &str) -> Result<(), String> {
    let source = nvmos_trace::open(path).map_err(|e| e.to_string())?;
    let machine = source
        .header()
        .and_then(|h| h.machine.clone())
        .ok_or_else(|| format!("{path}: no machine header (a text trace?)"))?;
    let zones = recorded_zones(&machine);
    let map = ZoneMap::new(&zones).map_err(|e| e.to_string())?;
    let facts = Facts::new(map);
    let ibuddy = IBuddy::<Lock>::new(&zones, machine.cpus.max(1)).map_err(|e| e.to_string())?;
    let tap = Tap {
        inner: ibuddy,
        facts: &facts,
    };
    let (stats, wear) = match policy {
        Some(policy) => {
            let probe = Probe {
                alloc: PerCpu::<_, Lock>::new(tap, policy).map_err(|e| e.to_string())?,
                facts: &facts,
            };
            replay(&probe, source, WriteModel::default()).map_err(|e| e.to_string())?
        }
        None => {
            let probe = Probe {
                alloc: tap,
                facts: &facts,
            };
            replay(&probe, source, WriteModel::default()).map_err(|e| e.to_string())?
        }
    };
    let summary = WearSummary::of(wear.writes(), stats.trace_ns);
    let allocs: u64 = facts
        .allocs
        .iter()
        .map(|a| u64::from(a.load(Ordering::Relaxed)))
        .sum();
    let recycled: Vec<u32> = facts
        .recycled
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .collect();
    let recycled_total: u64 = recycled.iter().map(|&r| u64::from(r)).sum();
    let distinct = recycled.iter().filter(|&&r| r > 0).count();
    // The 100 most written frames: how many of their order-0 allocations
    // were recycles.
    let writes = wear.writes();
    let mut order: Vec<usize> = (0..writes.len()).collect();
    order.sort_unstable_by_key(|&i| std::cmp::Reverse(writes[i]));
    let top = &order[..100.min(order.len())];
    let top_allocs: u64 = top
        .iter()
        .map(|&i| u64::from(facts.allocs[i].load(Ordering::Relaxed)))
        .sum();
    let top_recycled: u64 = top.iter().map(|&i| u64::from(recycled[i])).sum();
    let mut dr = std::mem::take(&mut *facts.distances_recycled.lock().unwrap());
    let mut di = std::mem::take(&mut *facts.distances_inner.lock().unwrap());
    let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
    println!(
        "{:<14} {:<12} {:>8.1} {:>9.1} {:>10} {:>9} {:>11.1} {:>10} {:>10} {:>9}",
        path.rsplit('/').next().unwrap_or(path),
        name,
        summary.max_over_mean,
        pct(recycled_total, allocs),
        distinct,
        summary.touched,
        pct(top_recycled, top_allocs),
        median(&mut dr).map_or("-".into(), |d| d.to_string()),
        median(&mut di).map_or("-".into(), |d| d.to_string()),
        stats.alloc_failures,
    );
    Ok(())
}

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: lazy-reuse TRACE.nvt...");
        std::process::exit(2);
    }
    println!(
        "{:<14} {:<12} {:>8} {:>9} {:>10} {:>9} {:>11} {:>10} {:>10} {:>9}",
        "trace",
        "allocator",
        "max/mean",
        "recycled%",
        "recycled#",
        "touched",
        "top100 rec%",
        "dist rec",
        "dist inner",
        "refused"
    );
    for path in &paths {
        for (policy, name) in [
            (None, "iBuddy"),
            (Some(PcpPolicy::LIS_31), "LiS-31"),
            (Some(PcpPolicy::LIS_31_FAIR), "LiS-31-fair"),
        ] {
            if let Err(e) = run(path, policy, name) {
                eprintln!("lazy-reuse: {path}, {name}: {e}");
                std::process::exit(1);
            }
        }
    }
}
