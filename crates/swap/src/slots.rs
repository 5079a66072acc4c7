//! Swap slots: the swap area's map, allocated in clusters of 256 slots.
//!
//! Seed 003 describes two policies (Linux 2.6.32's `scan_swap_map`):
//!
//! - **HDD**: write sequentially inside a cluster (256 slots, 1 MiB);
//!   when it is used up, scan *forward* for a free cluster while the
//!   *swap cluster utilisation* (touched clusters / total clusters) is
//!   under 50%, and from the start of the area (the first half first)
//!   once it is 50% or more, keeping the used span short for seeks; when
//!   no cluster is free, reuse obsolete slots (freed slots inside
//!   clusters still in use) one by one.
//! - **SSD**: never reuse obsolete slots before the device is full: a
//!   cursor walks the whole area once, skipping used slots; only after it
//!   wraps are freed slots reused (free clusters first, forward from the
//!   cursor). A cluster whose last slot is freed is discarded (TRIM) so
//!   the FTL need not copy its stale pages.
//!
//! Invariants: `used_in[c]` is the number of used slots in cluster `c`;
//! `touched` is the number of clusters with `used_in > 0`; `in_use` the
//! number of used slots.

use serde::{Deserialize, Serialize};

/// Slots per cluster (Linux's `SWAPFILE_CLUSTER`).
pub const CLUSTER: u32 = 256;

/// Slot 0 holds the swap header and is never allocated.
pub const HEADER_SLOTS: u32 = 1;

/// How free slots are found.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SlotPolicy {
    /// Rotating disks (seek-minimising).
    Hdd,
    /// Solid-state devices (no reuse before full, discard).
    Ssd,
}

impl std::str::FromStr for SlotPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "hdd" => Ok(SlotPolicy::Hdd),
            "ssd" => Ok(SlotPolicy::Ssd),
            _ => Err(format!("swap policy '{s}' is not hdd or ssd")),
        }
    }
}

/// What the allocator did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlotStats {
    /// Slots handed out.
    pub allocs: u64,
    /// Slots freed.
    pub frees: u64,
    /// New clusters started.
    pub clusters_started: u64,
    /// Allocations that reused an obsolete slot (no free cluster).
    pub obsolete_reuses: u64,
    /// Clusters discarded (SSD policy).
    pub discards: u64,
    /// Allocations refused because every slot was used.
    pub full: u64,
}

/// The swap map.
#[derive(Clone, Debug)]
pub struct SwapMap {
    policy: SlotPolicy,
    used: Vec<bool>,
    used_in: Vec<u16>,
    touched: u32,
    in_use: u32,
    /// Next slot to try in the current cluster, and the end of that run.
    next: u32,
    run_end: u32,
    /// SSD: whether the cursor has walked the whole area once.
    wrapped: bool,
    stats: SlotStats,
}

impl SwapMap {
    /// A map of `slots` slots (slot 0 is the header).
    pub fn new(slots: u32, policy: SlotPolicy) -> SwapMap {
        let clusters = slots.div_ceil(CLUSTER) as usize;
        let mut used = vec![false; slots as usize];
        let mut used_in = vec![0u16; clusters];
        // The header slot is permanently used.
        for s in 0..HEADER_SLOTS.min(slots) {
            used[s as usize] = true;
            used_in[(s / CLUSTER) as usize] += 1;
        }
        SwapMap {
            policy,
            used,
            used_in,
            touched: u32::from(slots > 0),
            in_use: 0,
            next: HEADER_SLOTS,
            run_end: CLUSTER.min(slots),
            wrapped: false,
            stats: SlotStats::default(),
        }
    }

    /// Slots in the area (header included).
    pub fn slots(&self) -> u32 {
        self.used.len() as u32
    }

    /// Slots in use (header excluded).
    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    /// Whether more than half the slots are used (Linux's `vm_swap_full`).
    pub fn half_full(&self) -> bool {
        u64::from(self.in_use) * 2 > u64::from(self.slots() - HEADER_SLOTS)
    }

    /// Touched clusters over all clusters.
    pub fn cluster_utilisation(&self) -> f64 {
        f64::from(self.touched) / self.used_in.len().max(1) as f64
    }

    /// What it did.
    pub fn stats(&self) -> &SlotStats {
        &self.stats
    }

    fn clusters(&self) -> u32 {
        self.used_in.len() as u32
    }

    fn cluster_len(&self, c: u32) -> u32 {
        (self.slots() - c * CLUSTER).min(CLUSTER)
    }

    fn take(&mut self, slot: u32) -> u32 {
        debug_assert!(!self.used[slot as usize]);
        self.used[slot as usize] = true;
        let c = (slot / CLUSTER) as usize;
        if self.used_in[c] == 0 {
            self.touched += 1;
        }
        self.used_in[c] += 1;
        self.in_use += 1;
        self.stats.allocs += 1;
        self.next = slot + 1;
        slot
    }

    /// The next free slot in `[from, to)`.
    fn free_in(&self, from: u32, to: u32) -> Option<u32> {
        (from..to).find(|&s| !self.used[s as usize])
    }

    /// The first wholly free cluster scanning from cluster `start`,
    /// wrapping round.
    fn free_cluster_from(&self, start: u32) -> Option<u32> {
        let n = self.clusters();
        (0..n)
            .map(|i| (start + i) % n)
            .find(|&c| self.used_in[c as usize] == 0 && self.cluster_len(c) == CLUSTER)
    }

    /// Any free slot scanning from `start`, wrapping, skipping full
    /// clusters.
    fn any_free_from(&self, start: u32) -> Option<u32> {
        let n = self.clusters();
        let first = start / CLUSTER;
        for i in 0..=n {
            let c = (first + i) % n;
            if u32::from(self.used_in[c as usize]) == self.cluster_len(c) {
                continue;
            }
            let lo = if i == 0 { start } else { c * CLUSTER };
            let hi = c * CLUSTER + self.cluster_len(c);
            if let Some(s) = self.free_in(lo, hi) {
                return Some(s);
            }
        }
        None
    }

    /// Starts a run at cluster `c`.
    fn start_cluster(&mut self, c: u32) -> u32 {
        self.stats.clusters_started += 1;
        self.run_end = c * CLUSTER + self.cluster_len(c);
        self.take(c * CLUSTER)
    }

    /// Reuses obsolete slots from `start` on; the run goes on to the end
    /// of that slot's cluster.
    fn reuse_obsolete(&mut self, start: u32) -> Option<u32> {
        let s = self.any_free_from(start)?;
        self.stats.obsolete_reuses += 1;
        let c = s / CLUSTER;
        self.run_end = c * CLUSTER + self.cluster_len(c);
        Some(self.take(s))
    }

    /// Allocates one slot, or `None` when every slot is used.
    pub fn alloc(&mut self) -> Option<u32> {
        if self.in_use + HEADER_SLOTS >= self.slots() {
            self.stats.full += 1;
            return None;
        }
        // Sequential inside the current run.
        if self.next < self.run_end {
            if let Some(s) = self.free_in(self.next, self.run_end) {
                return Some(self.take(s));
            }
        }
        match self.policy {
            SlotPolicy::Hdd => {
                let start = if self.cluster_utilisation() < 0.5 {
                    (self.next / CLUSTER) % self.clusters()
                } else {
                    0
                };
                match self.free_cluster_from(start) {
                    Some(c) => Some(self.start_cluster(c)),
                    None => self.reuse_obsolete(self.next % self.slots()),
                }
            }
            SlotPolicy::Ssd => {
                if !self.wrapped {
                    // The cursor walks the area once: skip used slots only.
                    if let Some(s) = self.free_in(self.next, self.slots()) {
                        self.run_end = self.slots();
                        return Some(self.take(s));
                    }
                    self.wrapped = true;
                    self.next = HEADER_SLOTS;
                }
                let start = (self.next / CLUSTER) % self.clusters();
                match self.free_cluster_from(start) {
                    Some(c) => Some(self.start_cluster(c)),
                    None => self.reuse_obsolete(self.next % self.slots()),
                }
            }
        }
    }

    /// Frees a slot. Returns the cluster discarded, if the SSD policy
    /// discards one (its last used slot was freed). A slot that is not in
    /// use is left alone and `false` is returned in `.0`.
    pub fn free(&mut self, slot: u32) -> (bool, Option<u32>) {
        let i = slot as usize;
        if slot < HEADER_SLOTS || i >= self.used.len() || !self.used[i] {
            return (false, None);
        }
        self.used[i] = false;
        self.in_use -= 1;
        self.stats.frees += 1;
        let c = slot / CLUSTER;
        self.used_in[c as usize] -= 1;
        if self.used_in[c as usize] == 0 {
            self.touched -= 1;
            if self.policy == SlotPolicy::Ssd {
                self.stats.discards += 1;
                return (true, Some(c));
            }
        }
        (true, None)
    }

    /// Checks the invariants (tests).
    pub fn validate(&self) -> Result<(), String> {
        let mut touched = 0;
        let mut in_use = 0;
        for c in 0..self.clusters() {
            let lo = (c * CLUSTER) as usize;
            let hi = lo + self.cluster_len(c) as usize;
            let n = self.used[lo..hi].iter().filter(|&&u| u).count();
            if n != usize::from(self.used_in[c as usize]) {
                return Err(format!(
                    "cluster {c}: {n} used, counted {}",
                    self.used_in[c as usize]
                ));
            }
            touched += u32::from(n > 0);
            in_use += n as u32;
        }
        if touched != self.touched || in_use != self.in_use + HEADER_SLOTS {
            return Err(format!(
                "touched {touched}/{}, in use {in_use}/{}",
                self.touched, self.in_use
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdd_writes_clusters_sequentially_then_first_half() {
        let mut m = SwapMap::new(CLUSTER * 8, SlotPolicy::Hdd);
        let a: Vec<u32> = (0..CLUSTER * 3).map(|_| m.alloc().unwrap()).collect();
        assert_eq!(a[0], 1);
        assert!(a.windows(2).all(|w| w[1] == w[0] + 1));
        // Free cluster 0 entirely except the header: under 50% utilisation
        // the scan goes forward, not back to cluster 0.
        for s in 1..CLUSTER {
            m.free(s);
        }
        let next = m.alloc().unwrap();
        assert_eq!(next, a.last().unwrap() + 1);
        m.validate().unwrap();
    }

    #[test]
    fn hdd_reuses_obsolete_slots_when_no_cluster_is_free() {
        let mut m = SwapMap::new(CLUSTER * 2, SlotPolicy::Hdd);
        let all: Vec<u32> = std::iter::from_fn(|| m.alloc()).collect();
        assert_eq!(all.len() as u32, CLUSTER * 2 - 1);
        m.free(300);
        m.free(10);
        assert_eq!(m.alloc(), Some(10));
        assert_eq!(m.stats().obsolete_reuses, 1);
        m.validate().unwrap();
    }

    #[test]
    fn ssd_does_not_reuse_before_full_and_discards() {
        let mut m = SwapMap::new(CLUSTER * 4, SlotPolicy::Ssd);
        let a: Vec<u32> = (0..CLUSTER * 2 - 1).map(|_| m.alloc().unwrap()).collect();
        for &s in &a[..CLUSTER as usize - 1] {
            m.free(s);
        }
        assert_eq!(m.stats().discards, 0, "cluster 0 keeps the header");
        for &s in &a[CLUSTER as usize - 1..] {
            let (_, d) = m.free(s);
            if s == CLUSTER * 2 - 1 {
                assert_eq!(d, Some(1));
            }
        }
        // No reuse: the cursor goes on past slot 512.
        assert_eq!(m.alloc(), Some(CLUSTER * 2));
        let rest: Vec<u32> = std::iter::from_fn(|| m.alloc()).collect();
        // After the cursor wrapped, freed slots are reused.
        assert!(rest.contains(&1));
        assert_eq!(m.in_use(), CLUSTER * 4 - 1);
        m.validate().unwrap();
    }
}
