//! The paging system: memory under a limit, reclaim, swap slots, the swap
//! cache, read-ahead and the swap device, driven by page references.
//!
//! # The model
//!
//! - **Frames** are counted, not placed: `nr_free` of `memory_pages`.
//! - **Watermarks** (min, low, high), Linux's: `min_free_kbytes =
//!   sqrt(16 · memory KiB)` clamped to 128 KiB..64 MiB, low = min + min/4,
//!   high = min + min/2 (or given).
//! - **kswapd** wakes when `nr_free < low` and reclaims batches of
//!   `batch` (SWAP_CLUSTER_MAX, 32) pages until `nr_free ≥ high`. It runs
//!   on another CPU: it has its own clock and is run up to the faulting
//!   process's time at every allocation.
//! - **Direct reclaim**: an allocation that finds `nr_free ≤ min`
//!   reclaims in the faulting process until a batch is freed, at
//!   decreasing priorities (scan `pages >> priority`, from 12). A pass
//!   that frees less than a batch is a failure; with **congestion
//!   control** on, failures from priority 9 down (2.6.32's `priority <
//!   DEF_PRIORITY - 2`) sleep in `congestion_wait`: until the device
//!   queue drops below its off threshold when it is congested, and the
//!   whole timeout when it is not (nothing wakes the sleeper then; that
//!   is the idle time the seed measured on fast devices). With it off,
//!   the process goes straight on (waiting only when nothing at all can
//!   be done until a write completes).
//! - **LRU**: an active and an inactive list (both anon and file pages,
//!   as one pair). New anon pages start active, file and read-ahead pages
//!   inactive. Aging is second chance: the scan of the active list's
//!   tail moves referenced pages back to its head (clearing the bit) and
//!   the rest to the inactive list, keeping inactive ≥ active; the scan
//!   of the inactive tail activates referenced mapped pages, drops clean
//!   pages (file pages; anon pages whose swap copy is valid), and starts
//!   writeback of dirty anon pages to newly allocated slots. Written
//!   pages stay on the list and are rotated to its tail when the write
//!   completes (`rotate_reclaimable_page`), to be freed by the next scan.
//! - **Swap cache**: a resident page keeps its slot while it is clean; a
//!   write to it frees the slot (`reuse_swap_page`), as does a swap-in
//!   when the area is more than half full (`vm_swap_full`).
//! - **Read-ahead**: a swap-in reads the aligned window of
//!   `2^page_cluster` slots holding the faulting slot (pages in use and
//!   not resident), or with VMA read-ahead the window of virtually
//!   adjacent pages; read-ahead pages enter the swap cache unmapped, and a
//!   later fault on one is a swap-cache hit.
//! - **Requests**: each reclaim pass sorts the slots it wrote and merges
//!   adjacent ones into requests of at most `max_request_pages`; one FIFO
//!   device queue serves reads and writes (the noop scheduler the seed
//!   used).
//! - **Fault cost** is the seed's seven stages (see [`FaultCosts`]); the
//!   device stage is the device model's time, waiting in the queue
//!   included. Reclaim costs per page are [`ReclaimCosts`].

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::blocktrace::SwapRequest;
use crate::device::{Device, DeviceSpec, DeviceStats, Dir, PAGE_SIZE};
use crate::slots::{SlotPolicy, SlotStats, SwapMap, HEADER_SLOTS};
use crate::workload::{Workload, PAGE_MASK, REF_RELEASE, REF_WRITE};
use crate::SwapError;

const NONE: u32 = u32::MAX;

// Page flags.
const RESIDENT: u8 = 1;
const MAPPED: u8 = 2;
const REFERENCED: u8 = 4;
const ACTIVE: u8 = 8;
const DIRTY: u8 = 16;
const WRITEBACK: u8 = 32;
const TOUCHED: u8 = 64;
const FILE: u8 = 128;

const INACTIVE_LIST: usize = 0;
const ACTIVE_LIST: usize = 1;

/// Linux's `DEF_PRIORITY`.
const DEF_PRIORITY: u32 = 12;

/// The seed's swap-in stages, µs ("Swap In Overhead Analysis").
pub const SEED_FAULT_TABLE: [(&str, f64); 7] = [
    ("lookup swap cache", 0.7),
    ("swap page read", 12.0),
    ("SCM read", 10.0),
    ("swap page reuse", 2.2),
    ("page mapping", 0.4),
    ("swap slot free", 1.2),
    ("update MMU cache", 4.5),
];

/// Costs of the OS stages of a swap-in fault, ns; defaults are the
/// seed's measured table (S5PV210, 800 MHz, Linux 2.6.32). The device
/// stage ("SCM read", 10 µs there) comes from the device model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultCosts {
    /// Looking the slot up in the swap cache.
    pub lookup_swap_cache_ns: u64,
    /// The swap read path above the device (page allocation, swap cache
    /// insertion, bio set-up, block layer, dcache flush).
    pub swap_page_read_ns: u64,
    /// `reuse_swap_page`.
    pub swap_page_reuse_ns: u64,
    /// Installing the pte.
    pub page_mapping_ns: u64,
    /// `swap_free`.
    pub swap_slot_free_ns: u64,
    /// `update_mmu_cache`.
    pub update_mmu_cache_ns: u64,
    /// A minor fault (zero-fill or page-cache hit): the seed's "about
    /// 6 µs".
    pub minor_fault_ns: u64,
}

impl Default for FaultCosts {
    fn default() -> Self {
        FaultCosts {
            lookup_swap_cache_ns: 700,
            swap_page_read_ns: 12_000,
            swap_page_reuse_ns: 2_200,
            page_mapping_ns: 400,
            swap_slot_free_ns: 1_200,
            update_mmu_cache_ns: 4_500,
            minor_fault_ns: 6_000,
        }
    }
}

/// Costs of reclaim, ns. The seed measured swap-in stage by stage but not
/// swap-out; the defaults mirror its swap-in stages: scanning a page
/// (rmap check) as page mapping (0.4 µs); unmapping as mapping plus
/// update MMU cache (4.9 µs); `add_to_swap` as slot free plus swap cache
/// lookup (1.9 µs); submitting a request as the swap page read path
/// (12 µs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReclaimCosts {
    /// Per page scanned.
    pub scan_page_ns: u64,
    /// Per page unmapped (freed or written).
    pub unmap_page_ns: u64,
    /// Per page given a slot and put in the swap cache.
    pub add_to_swap_ns: u64,
    /// Per write request submitted.
    pub submit_request_ns: u64,
}

impl Default for ReclaimCosts {
    fn default() -> Self {
        ReclaimCosts {
            scan_page_ns: 400,
            unmap_page_ns: 4_900,
            add_to_swap_ns: 1_900,
            submit_request_ns: 12_000,
        }
    }
}

/// Congestion control in direct reclaim.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CongestionControl {
    /// On (Linux 2.6.32) or off (the seed's "nc").
    pub enabled: bool,
    /// `congestion_wait` timeout, ns (2.6.32: HZ/10 = 100 ms).
    pub timeout_ns: u64,
    /// The queue's `nr_requests`: congested at `nr - nr/8 + 1` requests
    /// in flight, uncongested below `nr - nr/8 - nr/16 - 1`.
    pub nr_requests: u32,
}

impl Default for CongestionControl {
    fn default() -> Self {
        CongestionControl {
            enabled: true,
            timeout_ns: 100_000_000,
            nr_requests: 128,
        }
    }
}

/// Zone watermarks, pages.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermarks {
    /// Direct reclaim below this.
    pub min: u64,
    /// kswapd wakes below this.
    pub low: u64,
    /// kswapd sleeps at or above this.
    pub high: u64,
}

impl Watermarks {
    /// Linux's watermarks for a zone of `pages` 4 KiB pages.
    pub fn linux(pages: u64) -> Watermarks {
        let kb = pages * 4;
        let min_kb = ((16 * kb) as f64).sqrt() as u64;
        let min = min_kb.clamp(128, 65536) / 4;
        Watermarks {
            min,
            low: min + min / 4,
            high: min + min / 2,
        }
    }
}

/// Everything the model is set up with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwapConfig {
    /// The memory limit, pages.
    pub memory_pages: u64,
    /// The swap area, slots (pages), header included.
    pub swap_pages: u32,
    /// Watermarks; `None`: Linux's for `memory_pages`.
    pub watermarks: Option<Watermarks>,
    /// Slot allocation.
    pub policy: SlotPolicy,
    /// Read-ahead of `2^page_cluster` pages (Linux's default 3: 8 pages).
    pub page_cluster: u32,
    /// VMA-based read-ahead instead of slot-window read-ahead.
    pub vma_readahead: bool,
    /// Congestion control.
    pub congestion: CongestionControl,
    /// Swap-in fault stages.
    pub fault_costs: FaultCosts,
    /// Reclaim costs.
    pub reclaim_costs: ReclaimCosts,
    /// Computation per page reference, ns (the time the program runs
    /// between references; about two cycles of the seed's 800 MHz CPU).
    pub ref_ns: u64,
    /// Pages reclaimed per batch (SWAP_CLUSTER_MAX).
    pub batch: u32,
    /// Largest request the block layer builds, pages (512 KiB).
    pub max_request_pages: u32,
    /// Keep every request (for distributions).
    pub record_requests: bool,
}

impl Default for SwapConfig {
    fn default() -> Self {
        SwapConfig {
            memory_pages: 262_144,
            swap_pages: 262_144,
            watermarks: None,
            policy: SlotPolicy::Ssd,
            page_cluster: 3,
            vma_readahead: false,
            congestion: CongestionControl::default(),
            fault_costs: FaultCosts::default(),
            reclaim_costs: ReclaimCosts::default(),
            ref_ns: 2,
            batch: 32,
            max_request_pages: 128,
            record_requests: true,
        }
    }
}

impl SwapConfig {
    /// The watermarks in force.
    pub fn watermarks(&self) -> Watermarks {
        self.watermarks
            .unwrap_or_else(|| Watermarks::linux(self.memory_pages))
    }

    /// Checks the settings against each other.
    pub fn validate(&self) -> Result<(), SwapError> {
        let bad = |field, reason: String| Err(SwapError::BadConfig { field, reason });
        let wm = self.watermarks();
        if !(wm.min <= wm.low && wm.low <= wm.high) {
            return bad(
                "watermarks",
                format!(
                    "must be min ≤ low ≤ high, not {}/{}/{}",
                    wm.min, wm.low, wm.high
                ),
            );
        }
        // A fault must always be able to take a frame and its read-ahead
        // window above the min watermark.
        let need = wm.high + u64::from(self.batch) + (1u64 << self.page_cluster.min(16));
        if self.memory_pages < wm.min {
            return bad(
                "memory_pages",
                format!(
                    "the memory limit of {} pages is below the min watermark ({} pages)",
                    self.memory_pages, wm.min
                ),
            );
        }
        if self.memory_pages < need {
            return bad(
                "memory_pages",
                format!(
                    "the memory limit of {} pages leaves no room above the watermarks (min {}, low {}, high {}): at least {need} pages",
                    self.memory_pages, wm.min, wm.low, wm.high
                ),
            );
        }
        if self.swap_pages <= HEADER_SLOTS {
            return bad(
                "swap_pages",
                format!("{} slots hold no page", self.swap_pages),
            );
        }
        if self.page_cluster > 10 {
            return bad(
                "page_cluster",
                format!("{} is more than 10 (1024 pages)", self.page_cluster),
            );
        }
        if self.batch == 0 {
            return bad("batch", "must be at least 1".into());
        }
        if self.max_request_pages == 0 {
            return bad("max_request_pages", "must be at least 1".into());
        }
        if self.congestion.nr_requests < 16 {
            return bad("congestion.nr_requests", "must be at least 16".into());
        }
        Ok(())
    }
}

/// Time of each swap-in stage summed over faults, ns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultBreakdown {
    /// Faults that read from the device.
    pub faults: u64,
    /// Lookup swap cache.
    pub lookup_swap_cache_ns: u64,
    /// Swap page read (OS).
    pub swap_page_read_ns: u64,
    /// Device read: the device model's service time of the request
    /// holding the faulting page.
    pub device_read_ns: u64,
    /// Waiting in the device queue behind earlier requests (not a seed
    /// stage; kept apart).
    pub queue_wait_ns: u64,
    /// Swap page reuse.
    pub swap_page_reuse_ns: u64,
    /// Page mapping.
    pub page_mapping_ns: u64,
    /// Swap slot free.
    pub swap_slot_free_ns: u64,
    /// Update MMU cache.
    pub update_mmu_cache_ns: u64,
    /// Reclaim done to get the frame (not a seed stage; kept apart).
    pub reclaim_ns: u64,
}

impl FaultBreakdown {
    /// The seven stages as (name, mean µs per fault), in the seed's order.
    pub fn mean_us(&self) -> Vec<(String, f64)> {
        let n = self.faults.max(1) as f64 * 1000.0;
        [
            self.lookup_swap_cache_ns,
            self.swap_page_read_ns,
            self.device_read_ns,
            self.swap_page_reuse_ns,
            self.page_mapping_ns,
            self.swap_slot_free_ns,
            self.update_mmu_cache_ns,
        ]
        .iter()
        .zip(SEED_FAULT_TABLE)
        .map(|(&ns, (name, _))| {
            let name = if name == "SCM read" {
                "device read"
            } else {
                name
            };
            (name.to_owned(), ns as f64 / n)
        })
        .collect()
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    /// Page references served.
    pub refs: u64,
    /// Zero-fill and file-page faults.
    pub minor_faults: u64,
    /// Faults that read from the swap device.
    pub major_faults: u64,
    /// Faults served from the swap cache (read-ahead hits).
    pub swap_cache_hits: u64,
    /// Pages read ahead besides the faulting one.
    pub readahead_pages: u64,
    /// Pages written to swap.
    pub pages_swapped_out: u64,
    /// Pages read from swap (read-ahead included).
    pub pages_swapped_in: u64,
    /// Slots freed because a resident page was written (`reuse_swap_page`).
    pub slot_reuses: u64,
    /// Dirty file pages written back to their files (not swap traffic).
    pub file_writebacks: u64,
    /// File pages read again after being dropped (not swap traffic).
    pub file_refaults: u64,
    /// kswapd wake-ups.
    pub kswapd_wakeups: u64,
    /// Pages kswapd freed.
    pub kswapd_freed: u64,
    /// Direct reclaim entries.
    pub direct_reclaims: u64,
    /// Pages direct reclaim freed.
    pub direct_freed: u64,
    /// Direct reclaim passes that freed less than a batch.
    pub direct_failures: u64,
    /// Time processes spent in direct reclaim, ns (waits included).
    pub direct_reclaim_ns: u64,
    /// `congestion_wait` calls.
    pub congestion_waits: u64,
    /// Time slept in `congestion_wait`, ns (the seed's idle time).
    pub congestion_wait_ns: u64,
    /// Time of swap-in faults and swap-cache hits, ns.
    pub swap_in_ns: u64,
    /// Simulated time of the run, ns, until the last write completed.
    pub run_ns: u64,
    /// Swap-in stage breakdown.
    pub breakdown: FaultBreakdown,
}

/// Everything a run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Counters and times.
    pub stats: RunStats,
    /// The device's counters.
    pub device: DeviceStats,
    /// The slot allocator's counters.
    pub slots: SlotStats,
    /// Requests issued (when recorded).
    pub requests: Vec<SwapRequest>,
    /// Writes per swap page.
    pub writes_per_page: Vec<u32>,
}

#[derive(Copy, Clone, Debug)]
struct Page {
    flags: u8,
    slot: u32,
    prev: u32,
    next: u32,
}

struct InFlight {
    done: u64,
    pages: Vec<(u32, u32)>,
}

#[derive(Default)]
struct Pass {
    scanned: u64,
    freed: u64,
    written: u64,
    unmapped: u64,
    requests: u64,
}

/// The paging system.
pub struct PagingSystem {
    cfg: SwapConfig,
    wm: Watermarks,
    pages: Vec<Page>,
    head: [u32; 2],
    tail: [u32; 2],
    len: [u64; 2],
    nr_free: u64,
    swap: SwapMap,
    slot_owner: Vec<u32>,
    device: Device,
    device_free: u64,
    inflight: VecDeque<InFlight>,
    clock: u64,
    kswapd_awake: bool,
    kswapd_clock: u64,
    kswapd_idle_passes: u32,
    stats: RunStats,
    requests: Vec<SwapRequest>,
    reference: u64,
    /// Time origin of the current measurement.
    epoch: u64,
}

impl PagingSystem {
    /// A system with every frame free, for a workload of `pages` pages
    /// (`file[i]`: page `i` is file-backed).
    pub fn new(
        cfg: SwapConfig,
        device: DeviceSpec,
        workload: &Workload,
    ) -> Result<Self, SwapError> {
        cfg.validate()?;
        let device = Device::new(device)?;
        let wm = cfg.watermarks();
        let pages = (0..workload.pages as usize)
            .map(|i| Page {
                flags: if workload.file.get(i).copied().unwrap_or(false) {
                    FILE
                } else {
                    0
                },
                slot: NONE,
                prev: NONE,
                next: NONE,
            })
            .collect();
        Ok(PagingSystem {
            wm,
            pages,
            head: [NONE; 2],
            tail: [NONE; 2],
            len: [0; 2],
            nr_free: cfg.memory_pages,
            swap: SwapMap::new(cfg.swap_pages, cfg.policy),
            slot_owner: vec![NONE; cfg.swap_pages as usize],
            device,
            device_free: 0,
            inflight: VecDeque::new(),
            clock: 0,
            kswapd_awake: false,
            kswapd_clock: 0,
            kswapd_idle_passes: 0,
            stats: RunStats::default(),
            requests: Vec::new(),
            reference: 0,
            epoch: 0,
            cfg,
        })
    }

    /// The watermarks in force.
    pub fn watermarks(&self) -> Watermarks {
        self.wm
    }

    /// Free frames now.
    pub fn nr_free(&self) -> u64 {
        self.nr_free
    }

    /// Starts a new measurement: counters, requests and the time origin
    /// are reset; memory, swap and device state are kept (aging).
    pub fn reset_measurement(&mut self) {
        self.stats = RunStats::default();
        self.requests.clear();
        self.epoch = self.clock;
    }

    /// Serves page references (see [`Workload`] for the encoding).
    pub fn run(&mut self, refs: &[u32]) -> Result<(), SwapError> {
        let ref_ns = self.cfg.ref_ns;
        let base = self.stats.refs;
        for (i, &r) in refs.iter().enumerate() {
            self.clock += ref_ns;
            let id = (r & PAGE_MASK) as usize;
            let write = r & REF_WRITE != 0;
            let Some(p) = self.pages.get_mut(id) else {
                return Err(SwapError::BadConfig {
                    field: "workload",
                    reason: format!(
                        "reference {} is to page {id} of a workload of {} pages",
                        base + i as u64,
                        self.pages.len()
                    ),
                });
            };
            let f = p.flags;
            if f & MAPPED != 0 && r & REF_RELEASE == 0 && (!write || p.slot == NONE) {
                // The fast path: a resident, mapped page (the hardware
                // sets the accessed and dirty bits).
                p.flags = f | REFERENCED | if write { DIRTY } else { 0 };
                continue;
            }
            self.reference = base + i as u64;
            if r & REF_RELEASE != 0 {
                self.release(id as u32);
            } else {
                self.slow(id as u32, write)?;
            }
        }
        self.stats.refs = base + refs.len() as u64;
        Ok(())
    }

    /// Finishes: waits for writes in flight and returns the results.
    pub fn finish(mut self) -> RunResult {
        let end = self
            .inflight
            .back()
            .map_or(self.clock, |f| f.done.max(self.clock));
        self.complete_until(end);
        self.stats.run_ns = end - self.epoch;
        RunResult {
            stats: self.stats,
            device: self.device.stats().clone(),
            slots: self.swap.stats().clone(),
            requests: self.requests,
            writes_per_page: self.device.writes_per_page().to_vec(),
        }
    }

    // ---- LRU lists -------------------------------------------------------

    fn list_of(flags: u8) -> usize {
        if flags & ACTIVE != 0 {
            ACTIVE_LIST
        } else {
            INACTIVE_LIST
        }
    }

    fn push_head(&mut self, id: u32, list: usize) {
        let old = self.head[list];
        let p = &mut self.pages[id as usize];
        p.prev = NONE;
        p.next = old;
        if list == ACTIVE_LIST {
            p.flags |= ACTIVE;
        } else {
            p.flags &= !ACTIVE;
        }
        if old != NONE {
            self.pages[old as usize].prev = id;
        } else {
            self.tail[list] = id;
        }
        self.head[list] = id;
        self.len[list] += 1;
    }

    fn push_tail(&mut self, id: u32, list: usize) {
        let old = self.tail[list];
        let p = &mut self.pages[id as usize];
        p.next = NONE;
        p.prev = old;
        if list == ACTIVE_LIST {
            p.flags |= ACTIVE;
        } else {
            p.flags &= !ACTIVE;
        }
        if old != NONE {
            self.pages[old as usize].next = id;
        } else {
            self.head[list] = id;
        }
        self.tail[list] = id;
        self.len[list] += 1;
    }

    fn unlink(&mut self, id: u32) {
        let Page {
            flags, prev, next, ..
        } = self.pages[id as usize];
        let list = Self::list_of(flags);
        if prev != NONE {
            self.pages[prev as usize].next = next;
        } else {
            self.head[list] = next;
        }
        if next != NONE {
            self.pages[next as usize].prev = prev;
        } else {
            self.tail[list] = prev;
        }
        self.len[list] -= 1;
        let p = &mut self.pages[id as usize];
        p.prev = NONE;
        p.next = NONE;
    }

    // ---- slots ------------------------------------------------------------

    fn free_slot(&mut self, id: u32) {
        let slot = self.pages[id as usize].slot;
        if slot == NONE {
            return;
        }
        self.pages[id as usize].slot = NONE;
        self.pages[id as usize].flags &= !WRITEBACK;
        self.slot_owner[slot as usize] = NONE;
        if let (_, Some(_cluster)) = self.swap.free(slot) {
            self.device
                .discard(crate::slots::CLUSTER as u64 * PAGE_SIZE);
        }
    }

    // ---- the device queue --------------------------------------------------

    /// Queues a request at `at`; returns its completion time and service
    /// time.
    fn submit(&mut self, dir: Dir, slot: u32, pages: u32, at: u64) -> (u64, u64) {
        let start = at.max(self.device_free);
        let ns = self.device.service(
            dir,
            u64::from(slot) * PAGE_SIZE,
            u64::from(pages) * PAGE_SIZE,
        );
        self.device_free = start + ns;
        if self.cfg.record_requests {
            self.requests.push(SwapRequest {
                time_ns: at.saturating_sub(self.epoch),
                dir,
                offset: u64::from(slot) * PAGE_SIZE,
                size: u64::from(pages) * PAGE_SIZE,
            });
        }
        (self.device_free, ns)
    }

    /// Completes the writes done by `t`: their pages are clean and rotate
    /// to the inactive tail.
    fn complete_until(&mut self, t: u64) {
        while self.inflight.front().is_some_and(|f| f.done <= t) {
            let f = self.inflight.pop_front().expect("checked");
            for (id, slot) in f.pages {
                let p = self.pages[id as usize];
                if p.flags & WRITEBACK != 0 && p.slot == slot {
                    self.pages[id as usize].flags &= !WRITEBACK;
                    if p.flags & RESIDENT != 0 && p.flags & ACTIVE == 0 {
                        self.unlink(id);
                        self.push_tail(id, INACTIVE_LIST);
                    }
                }
            }
        }
    }

    // ---- faults -----------------------------------------------------------

    fn slow(&mut self, id: u32, write: bool) -> Result<(), SwapError> {
        let c = self.cfg.fault_costs.clone();
        let f = self.pages[id as usize].flags;
        if f & MAPPED != 0 {
            // A write to a clean page holding a slot: the swap copy is
            // obsolete (`do_wp_page` → `reuse_swap_page`).
            self.free_slot(id);
            self.pages[id as usize].flags |= DIRTY | REFERENCED;
            self.stats.slot_reuses += 1;
            self.clock += c.swap_page_reuse_ns + c.swap_slot_free_ns;
            return Ok(());
        }
        if f & RESIDENT != 0 {
            // In the swap cache, brought in by read-ahead.
            let t0 = self.clock;
            self.stats.swap_cache_hits += 1;
            self.clock += c.lookup_swap_cache_ns
                + c.swap_page_reuse_ns
                + c.page_mapping_ns
                + c.swap_slot_free_ns
                + c.update_mmu_cache_ns;
            self.map_swapped_in(id, write);
            self.stats.swap_in_ns += self.clock - t0;
            return Ok(());
        }
        if self.pages[id as usize].slot != NONE {
            return self.swap_in(id, write);
        }
        // Zero-fill (first touch of anon memory) or a file page read from
        // its file.
        self.alloc_frame()?;
        self.clock += c.minor_fault_ns;
        self.stats.minor_faults += 1;
        let p = &mut self.pages[id as usize];
        let file = p.flags & FILE != 0;
        if file && p.flags & TOUCHED != 0 {
            self.stats.file_refaults += 1;
        }
        // Anon memory is dirty from the start: only swap can hold it.
        p.flags = (p.flags & FILE)
            | TOUCHED
            | RESIDENT
            | MAPPED
            | REFERENCED
            | if write || !file { DIRTY } else { 0 };
        self.push_head(id, if file { INACTIVE_LIST } else { ACTIVE_LIST });
        Ok(())
    }

    /// Maps a page that is in the swap cache; frees its slot on a write
    /// or when the area is more than half full.
    fn map_swapped_in(&mut self, id: u32, write: bool) {
        if write || self.swap.half_full() {
            self.free_slot(id);
        }
        let p = &mut self.pages[id as usize];
        p.flags |= MAPPED | REFERENCED | if write { DIRTY } else { 0 };
        if p.slot == NONE {
            // Without a valid swap copy the page must be written again.
            p.flags |= DIRTY;
        }
    }

    fn swap_in(&mut self, id: u32, write: bool) -> Result<(), SwapError> {
        let c = self.cfg.fault_costs.clone();
        let t0 = self.clock;
        self.stats.major_faults += 1;
        let b = &mut self.stats.breakdown;
        b.faults += 1;
        b.lookup_swap_cache_ns += c.lookup_swap_cache_ns;
        self.clock += c.lookup_swap_cache_ns;
        let before = self.clock;
        self.alloc_frame()?;
        self.stats.breakdown.reclaim_ns += self.clock - before;
        self.clock += c.swap_page_read_ns;
        self.stats.breakdown.swap_page_read_ns += c.swap_page_read_ns;

        let slot = self.pages[id as usize].slot;
        let mut batch: Vec<(u32, u32)> = vec![(slot, id)];
        let window = 1u32 << self.cfg.page_cluster;
        if window > 1 {
            let candidates: Vec<u32> = if self.cfg.vma_readahead {
                let lo = id & !(window - 1);
                (lo..lo.saturating_add(window).min(self.pages.len() as u32)).collect()
            } else {
                let lo = slot & !(window - 1);
                (lo..lo.saturating_add(window).min(self.swap.slots()))
                    .map(|s| self.slot_owner[s as usize])
                    .filter(|&o| o != NONE)
                    .collect()
            };
            for other in candidates {
                let p = self.pages[other as usize];
                if other == id || p.slot == NONE || p.flags & RESIDENT != 0 {
                    continue;
                }
                // Read-ahead takes frames only above the low watermark: it
                // must not push the system into reclaim.
                if self.nr_free <= self.wm.low {
                    break;
                }
                self.nr_free -= 1;
                self.stats.readahead_pages += 1;
                let q = &mut self.pages[other as usize];
                q.flags = (q.flags & FILE) | TOUCHED | RESIDENT;
                self.push_head(other, INACTIVE_LIST);
                batch.push((p.slot, other));
            }
        }
        batch.sort_unstable();
        self.stats.pages_swapped_in += batch.len() as u64;
        // Merge adjacent slots into requests; wait for the one holding the
        // faulting page.
        let issue = self.clock;
        let mut wait_until = issue;
        let mut service = 0;
        let mut i = 0;
        while i < batch.len() {
            let mut j = i + 1;
            while j < batch.len()
                && batch[j].0 == batch[j - 1].0 + 1
                && (j - i) < self.cfg.max_request_pages as usize
            {
                j += 1;
            }
            let (done, ns) = self.submit(Dir::Read, batch[i].0, (j - i) as u32, issue);
            if batch[i..j].iter().any(|&(_, p)| p == id) {
                wait_until = done;
                service = ns;
            }
            i = j;
        }
        self.stats.breakdown.device_read_ns += service;
        self.stats.breakdown.queue_wait_ns += (wait_until - issue).saturating_sub(service);
        self.clock = wait_until;
        self.clock +=
            c.swap_page_reuse_ns + c.page_mapping_ns + c.swap_slot_free_ns + c.update_mmu_cache_ns;
        let b = &mut self.stats.breakdown;
        b.swap_page_reuse_ns += c.swap_page_reuse_ns;
        b.page_mapping_ns += c.page_mapping_ns;
        b.swap_slot_free_ns += c.swap_slot_free_ns;
        b.update_mmu_cache_ns += c.update_mmu_cache_ns;
        let p = &mut self.pages[id as usize];
        p.flags = (p.flags & FILE) | TOUCHED | RESIDENT;
        self.push_head(id, INACTIVE_LIST);
        self.map_swapped_in(id, write);
        self.stats.swap_in_ns += self.clock - t0;
        Ok(())
    }

    /// munmap: the page's frame and slot are freed; a later touch is a
    /// new zero page.
    fn release(&mut self, id: u32) {
        let f = self.pages[id as usize].flags;
        if f & RESIDENT != 0 {
            self.unlink(id);
            self.nr_free += 1;
        }
        self.free_slot(id);
        self.pages[id as usize].flags = f & FILE;
    }

    // ---- allocation and reclaim ---------------------------------------------

    fn alloc_frame(&mut self) -> Result<(), SwapError> {
        self.kswapd_catch_up(self.clock);
        if self.nr_free <= self.wm.min {
            self.direct_reclaim()?;
        }
        self.nr_free -= 1;
        if self.nr_free < self.wm.low && !self.kswapd_awake {
            self.kswapd_awake = true;
            self.kswapd_clock = self.kswapd_clock.max(self.clock);
            self.stats.kswapd_wakeups += 1;
        }
        Ok(())
    }

    fn pass_cost(&self, r: &Pass) -> u64 {
        let c = &self.cfg.reclaim_costs;
        r.scanned * c.scan_page_ns
            + r.unmapped * c.unmap_page_ns
            + r.written * c.add_to_swap_ns
            + r.requests * c.submit_request_ns
    }

    fn kswapd_catch_up(&mut self, now: u64) {
        while self.kswapd_awake && self.kswapd_clock < now {
            self.complete_until(self.kswapd_clock);
            if self.nr_free >= self.wm.high {
                self.kswapd_awake = false;
                break;
            }
            let r = self.shrink(self.kswapd_clock, u64::from(self.cfg.batch));
            self.kswapd_clock += self.pass_cost(&r).max(1);
            self.stats.kswapd_freed += r.freed;
            if r.freed == 0 && r.written == 0 {
                // No progress: wait for writeback, or after a whole
                // priority sweep of aging without result, go back to sleep.
                self.kswapd_idle_passes += 1;
                if let Some(f) = self.inflight.front() {
                    self.kswapd_clock = self.kswapd_clock.max(f.done);
                } else if self.kswapd_idle_passes > DEF_PRIORITY {
                    self.kswapd_awake = false;
                    self.kswapd_idle_passes = 0;
                    break;
                }
            } else {
                self.kswapd_idle_passes = 0;
            }
        }
    }

    fn direct_reclaim(&mut self) -> Result<(), SwapError> {
        self.stats.direct_reclaims += 1;
        let t0 = self.clock;
        let batch = u64::from(self.cfg.batch);
        let mut freed = 0;
        let mut priority = DEF_PRIORITY;
        let mut idle_rounds = 0u32;
        loop {
            self.complete_until(self.clock);
            let lru = self.len[INACTIVE_LIST] + self.len[ACTIVE_LIST];
            let scan = batch.max(lru >> priority);
            let r = self.shrink(self.clock, scan);
            self.clock += self.pass_cost(&r);
            freed += r.freed;
            self.stats.direct_freed += r.freed;
            if freed >= batch || self.nr_free > self.wm.min + batch {
                break;
            }
            self.stats.direct_failures += 1;
            priority = priority.saturating_sub(1);
            let stuck = r.freed == 0 && r.written == 0;
            if stuck && self.inflight.is_empty() {
                idle_rounds += 1;
                if priority == 0 && idle_rounds > 2 * DEF_PRIORITY {
                    if self.nr_free > 0 {
                        break;
                    }
                    return Err(SwapError::OutOfMemory {
                        reference: self.reference,
                        reason: format!(
                            "{} free frames, {} pages on the LRU lists, {} of {} swap slots used, nothing in writeback",
                            self.nr_free,
                            lru,
                            self.swap.in_use(),
                            self.swap.slots() - HEADER_SLOTS
                        ),
                    });
                }
            }
            if self.cfg.congestion.enabled && priority < DEF_PRIORITY - 2 {
                let wait = self.congestion_wait();
                self.clock += wait;
                self.stats.congestion_waits += 1;
                self.stats.congestion_wait_ns += wait;
            } else if stuck {
                if let Some(f) = self.inflight.front() {
                    self.clock = self.clock.max(f.done);
                }
            }
        }
        self.stats.direct_reclaim_ns += self.clock - t0;
        Ok(())
    }

    /// 2.6.32's `congestion_wait`: sleeps until the queue is no longer
    /// congested, or the whole timeout when it was not congested.
    fn congestion_wait(&self) -> u64 {
        let cc = &self.cfg.congestion;
        let nr = cc.nr_requests as usize;
        let on = nr - nr / 8 + 1;
        let off = nr - nr / 8 - nr / 16 - 1;
        let n = self.inflight.len();
        if n >= on {
            let must_complete = n - off + 1;
            let t = self.inflight[must_complete - 1].done;
            (t.saturating_sub(self.clock)).min(cc.timeout_ns)
        } else {
            cc.timeout_ns
        }
    }

    /// One reclaim pass: ages the active list, then scans up to `scan`
    /// pages from the inactive tail. Writes are submitted at `now`.
    fn shrink(&mut self, now: u64, scan: u64) -> Pass {
        let mut r = Pass::default();
        // Second-chance aging of the active list, keeping inactive ≥ active.
        let mut moved = 0;
        while self.len[INACTIVE_LIST] < self.len[ACTIVE_LIST] && moved < scan {
            let id = self.tail[ACTIVE_LIST];
            moved += 1;
            r.scanned += 1;
            self.unlink(id);
            let p = &mut self.pages[id as usize];
            if p.flags & REFERENCED != 0 {
                p.flags &= !REFERENCED;
                self.push_head(id, ACTIVE_LIST);
            } else {
                self.push_head(id, INACTIVE_LIST);
            }
        }
        let mut writes: Vec<(u32, u32)> = Vec::new();
        let mut kept: Vec<u32> = Vec::new();
        for _ in 0..scan {
            let id = self.tail[INACTIVE_LIST];
            if id == NONE {
                break;
            }
            r.scanned += 1;
            self.unlink(id);
            let p = self.pages[id as usize];
            if p.flags & WRITEBACK != 0 {
                kept.push(id);
                continue;
            }
            if p.flags & REFERENCED != 0 && p.flags & MAPPED != 0 {
                self.pages[id as usize].flags &= !REFERENCED;
                self.push_head(id, ACTIVE_LIST);
                continue;
            }
            if p.flags & FILE != 0 {
                if p.flags & DIRTY != 0 {
                    self.stats.file_writebacks += 1;
                }
                self.drop_frame(id, &mut r);
                continue;
            }
            if p.slot != NONE && p.flags & DIRTY == 0 {
                // A clean swap-cache page: its copy in swap is valid.
                self.drop_frame(id, &mut r);
                continue;
            }
            let Some(slot) = self.swap.alloc() else {
                // Swap is full: keep it.
                self.push_head(id, ACTIVE_LIST);
                continue;
            };
            self.slot_owner[slot as usize] = id;
            let q = &mut self.pages[id as usize];
            q.slot = slot;
            q.flags = (q.flags | WRITEBACK) & !(DIRTY | MAPPED | REFERENCED);
            r.written += 1;
            r.unmapped += 1;
            writes.push((slot, id));
            kept.push(id);
        }
        // Kept pages go back to the head (putback_lru_pages).
        for id in kept.into_iter().rev() {
            self.push_head(id, INACTIVE_LIST);
        }
        if !writes.is_empty() {
            writes.sort_unstable();
            self.stats.pages_swapped_out += writes.len() as u64;
            let mut i = 0;
            while i < writes.len() {
                let mut j = i + 1;
                while j < writes.len()
                    && writes[j].0 == writes[j - 1].0 + 1
                    && (j - i) < self.cfg.max_request_pages as usize
                {
                    j += 1;
                }
                let (done, _) = self.submit(Dir::Write, writes[i].0, (j - i) as u32, now);
                r.requests += 1;
                self.inflight.push_back(InFlight {
                    done,
                    pages: writes[i..j].iter().map(|&(s, p)| (p, s)).collect(),
                });
                i = j;
            }
        }
        r
    }

    fn drop_frame(&mut self, id: u32, r: &mut Pass) {
        let p = &mut self.pages[id as usize];
        if p.flags & MAPPED != 0 {
            r.unmapped += 1;
        }
        p.flags &= FILE | TOUCHED;
        self.nr_free += 1;
        r.freed += 1;
    }
}

/// Runs a whole workload on a fresh system and returns the results.
pub fn run_workload(
    cfg: &SwapConfig,
    device: &DeviceSpec,
    workload: &Workload,
) -> Result<RunResult, SwapError> {
    let mut sys = PagingSystem::new(cfg.clone(), device.clone(), workload)?;
    for phase in &workload.phases {
        if phase.measured {
            sys.reset_measurement();
        }
        sys.run(&workload.refs[phase.start..phase.end])?;
    }
    Ok(sys.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn cfg(memory_pages: u64) -> SwapConfig {
        SwapConfig {
            memory_pages,
            swap_pages: 8192,
            ..SwapConfig::default()
        }
    }

    #[test]
    fn memory_limit_below_min_watermark_is_refused() {
        let w = Workload::from_refs("x", vec![0, 1], 2, vec![false; 2]);
        let c = SwapConfig {
            memory_pages: 10,
            watermarks: Some(Watermarks {
                min: 32,
                low: 40,
                high: 48,
            }),
            ..cfg(10)
        };
        let e = PagingSystem::new(c, DeviceSpec::preset("SCM-400").unwrap(), &w)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("memory_pages") && e.contains("min watermark"),
            "{e}"
        );
    }

    #[test]
    fn a_hog_swaps_everything_out_and_back_in() {
        // 4096 pages written twice over 1024 frames.
        let pages = 4096u32;
        let mut refs: Vec<u32> = (0..pages).map(|p| p | REF_WRITE).collect();
        refs.extend(0..pages);
        let w = Workload::from_refs("hog", refs, pages, vec![false; pages as usize]);
        let r = run_workload(&cfg(1024), &DeviceSpec::preset("SCM-400").unwrap(), &w).unwrap();
        let s = &r.stats;
        assert_eq!(s.minor_faults, u64::from(pages));
        assert!(s.pages_swapped_out >= u64::from(pages) - 1024, "{s:?}");
        assert!(s.major_faults + s.swap_cache_hits >= u64::from(pages) - 1024);
        assert!(s.readahead_pages > 0 && s.swap_cache_hits > 0, "{s:?}");
        assert!(s.kswapd_wakeups > 0);
        // Every write request is in the log and in the device counters.
        let writes = r.requests.iter().filter(|q| q.dir == Dir::Write).count() as u64;
        assert_eq!(writes, r.device.writes);
        assert_eq!(
            r.writes_per_page.iter().map(|&c| u64::from(c)).sum::<u64>(),
            s.pages_swapped_out
        );
        // The breakdown's stages add up to the faults' time less reclaim.
        let b = &s.breakdown;
        assert_eq!(b.faults, s.major_faults);
    }

    #[test]
    fn a_single_page_fault_costs_the_seeds_stages() {
        // Read-ahead off: every swap-in reads one 4 KiB page, 10.24 µs on
        // SCM-400; the other stages are the seed's table: 31.24 µs in all.
        let pages = 4096u32;
        let mut refs: Vec<u32> = (0..pages).map(|p| p | REF_WRITE).collect();
        refs.extend(0..pages);
        let w = Workload::from_refs("hog", refs, pages, vec![false; pages as usize]);
        let c = SwapConfig {
            page_cluster: 0,
            ..cfg(1024)
        };
        let r = run_workload(&c, &DeviceSpec::preset("SCM-400").unwrap(), &w).unwrap();
        let means = r.stats.breakdown.mean_us();
        let expect = [0.7, 12.0, 10.24, 2.2, 0.4, 1.2, 4.5];
        for ((name, got), want) in means.iter().zip(expect) {
            assert!((got - want).abs() < 1e-9, "{name}: {got} µs, not {want}");
        }
        assert!((means.iter().map(|m| m.1).sum::<f64>() - 31.24).abs() < 1e-9);
        assert_eq!(r.stats.readahead_pages, 0);
    }

    #[test]
    fn out_of_memory_is_an_error_not_a_panic() {
        let pages = 4096u32;
        let refs: Vec<u32> = (0..pages).map(|p| p | REF_WRITE).collect();
        let w = Workload::from_refs("hog", refs, pages, vec![false; pages as usize]);
        let c = SwapConfig {
            swap_pages: 512,
            ..cfg(1024)
        };
        let e = run_workload(&c, &DeviceSpec::preset("SCM-400").unwrap(), &w).unwrap_err();
        assert!(matches!(e, SwapError::OutOfMemory { .. }), "{e}");
    }

    #[test]
    fn congestion_control_adds_idle_time() {
        let pages = 6000u32;
        let refs: Vec<u32> = (0..pages).map(|p| p | REF_WRITE).collect();
        let w = Workload::from_refs("hog", refs, pages, vec![false; pages as usize]);
        let fast = DeviceSpec::scm_with_write_iops(400.0, 160_000.0);
        let on = run_workload(&cfg(1024), &fast, &w).unwrap();
        let mut off_cfg = cfg(1024);
        off_cfg.congestion.enabled = false;
        let off = run_workload(&off_cfg, &fast, &w).unwrap();
        assert_eq!(off.stats.congestion_wait_ns, 0);
        assert!(on.stats.run_ns >= off.stats.run_ns);
        assert_eq!(on.stats.pages_swapped_out, off.stats.pages_swapped_out);
    }
}
