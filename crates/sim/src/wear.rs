//! Wear: how often each frame was written, and what that means for the
//! lifetime of a storage-class memory with limited write endurance.

use nvmos_frames::{Order, Pfn, ZoneMap};
use nvmos_trace::table::ZeroTable;

/// How allocations turn into writes to the medium.
///
/// The default, one full-page write per allocated frame per allocation,
/// is the seed's working assumption ("positive relation between allocation
/// and write"): a freshly allocated frame is written (zeroed, filled from a
/// file, or used for new data) before it is freed again, and the CPU cache
/// absorbs repeated writes to it within one allocation.
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WriteModel {
    /// Full-page writes each frame of an allocated block receives.
    pub writes_per_alloc: u32,
}

impl WriteModel {
    /// The most writes per allocation the model takes. Counts are 32-bit
    /// per frame; at this multiplier a frame saturates only after 2^24
    /// allocations of it, and a page rewritten more often than this within
    /// one allocation is what sampled writes (`record --writes`) measure,
    /// not this model.
    pub const MAX_WRITES_PER_ALLOC: u32 = 256;
}

impl Default for WriteModel {
    fn default() -> Self {
        WriteModel {
            writes_per_alloc: 1,
        }
    }
}

/// Write endurances the lifetime is reported for: PCM's 10^6 to 10^8.
pub const ENDURANCES: [f64; 3] = [1e6, 1e7, 1e8];

/// Per-frame write counts over a set of zones.
///
/// One `u32` per frame of the zones (the machine's frames, whatever part
/// of them a trace touches: summaries average over all of them), in a
/// [`ZeroTable`]: lazily mapped huge pages, so the frames an allocator
/// never places on cost nothing and a placement far from the last needs
/// no page-table walk.
#[derive(Clone, Debug)]
pub struct WearCounter {
    map: ZoneMap,
    writes: ZeroTable<u32>,
    model: WriteModel,
    /// Writes to frames outside the zones (a trace that does not match its
    /// header); reported, never silently dropped.
    pub outside: u64,
    /// Sampled writes per frame (`record --writes`), in dense zone order;
    /// empty until the first one.
    sampled: ZeroTable<u32>,
    /// Sampled writes that landed outside the zones.
    pub sampled_outside: u64,
    /// Pages copied onto each frame by migration, in dense zone order;
    /// empty until the first copy.
    copied: ZeroTable<u32>,
}

/// Starts loading the cache line of `value` (a hint: reads nothing the
/// program sees, cannot fault).
#[inline]
fn prefetch_read<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it reads nothing the program
    // sees and cannot fault, and `value` is a valid reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

impl WearCounter {
    /// Zero counts over every frame of `map`.
    pub fn new(map: ZoneMap, model: WriteModel) -> WearCounter {
        WearCounter {
            writes: ZeroTable::new(map.frames() as usize),
            map,
            model,
            outside: 0,
            sampled: ZeroTable::default(),
            sampled_outside: 0,
            copied: ZeroTable::default(),
        }
    }

    /// Count the copy of a migrated block of `order` to `pfn`: a write of
    /// every frame, in the allocation wear (as an allocation of the block
    /// there) and in the copies the write-weighted wear adds.
    #[inline]
    pub fn record_copy(&mut self, pfn: Pfn, order: Order) {
        self.record_alloc(pfn, order);
        if let Some(first) = self.map.dense_index(pfn) {
            if self.copied.is_empty() {
                self.copied = ZeroTable::new(self.writes.len());
            }
            let end = (first + order.frames() as usize).min(self.copied.len());
            for c in &mut self.copied[first..end] {
                *c = c.saturating_add(1);
            }
        }
    }

    /// Pages copied onto each frame by migration, when any were.
    pub fn copies(&self) -> Option<&[u32]> {
        (!self.copied.is_empty()).then_some(&self.copied[..])
    }

    /// The most write-weighted wear of a frame (sampled writes plus
    /// copies), without building the per-frame table: what a long run
    /// checks after every repetition.
    pub fn max_written(&self) -> u32 {
        match (self.sampled_writes(), self.copies()) {
            (None, None) => 0,
            (Some(w), None) | (None, Some(w)) => w.iter().copied().max().unwrap_or(0),
            (Some(s), Some(c)) => s
                .iter()
                .zip(c)
                .map(|(a, b)| a.saturating_add(*b))
                .max()
                .unwrap_or(0),
        }
    }

    /// The write-weighted wear per frame in dense zone order: sampled
    /// writes plus migration copies; `None` when there is neither.
    pub fn written_with_copies(&self) -> Option<Vec<u32>> {
        match (self.sampled_writes(), self.copies()) {
            (None, None) => None,
            (Some(s), None) => Some(s.to_vec()),
            (None, Some(c)) => Some(c.to_vec()),
            (Some(s), Some(c)) => {
                Some(s.iter().zip(c).map(|(a, b)| a.saturating_add(*b)).collect())
            }
        }
    }

    /// Count one sampled write of frame `pfn`.
    #[inline]
    pub fn record_write(&mut self, pfn: Pfn) {
        match self.map.dense_index(pfn) {
            Some(i) => {
                if self.sampled.is_empty() {
                    self.sampled = ZeroTable::new(self.writes.len());
                }
                self.sampled[i] = self.sampled[i].saturating_add(1);
            }
            None => self.sampled_outside += 1,
        }
    }

    /// A hint: `record_alloc(pfn, ..)` comes soon; starts loading the
    /// count of its first frame into the cache.
    #[inline]
    pub fn prefetch_alloc(&self, pfn: Pfn) {
        if let Some(count) = self.map.dense_index(pfn).and_then(|i| self.writes.get(i)) {
            prefetch_read(count);
        }
    }

    /// A hint: a sampled write of `pfn` comes soon; starts loading its
    /// count into the cache.
    #[inline]
    pub fn prefetch_write(&self, pfn: Pfn) {
        if let Some(count) = self.map.dense_index(pfn).and_then(|i| self.sampled.get(i)) {
            prefetch_read(count);
        }
    }

    /// Sampled writes per frame in dense zone order, when any were
    /// counted.
    pub fn sampled_writes(&self) -> Option<&[u32]> {
        (!self.sampled.is_empty()).then_some(&self.sampled[..])
    }

    /// Count the writes one allocation of `order` at `pfn` causes.
    #[inline]
    pub fn record_alloc(&mut self, pfn: Pfn, order: Order) {
        match self.map.dense_index(pfn) {
            // Blocks never straddle zones, so the block is dense too.
            Some(first)
                if self
                    .map
                    .dense_index(Pfn(pfn.0 + order.frames() - 1))
                    .is_some() =>
            {
                for w in &mut self.writes[first..first + order.frames() as usize] {
                    *w = w.saturating_add(self.model.writes_per_alloc);
                }
            }
            _ => self.outside += order.frames(),
        }
    }

    /// Per-frame write counts in dense zone order.
    pub fn writes(&self) -> &[u32] {
        &self.writes
    }

    /// The zones counted over.
    pub fn zone_map(&self) -> &ZoneMap {
        &self.map
    }

    /// Summarise, for a trace that lasted `duration_ns`.
    pub fn summary(&self, duration_ns: u64) -> WearSummary {
        WearSummary::of(&self.writes, duration_ns)
    }
}

/// How evenly writes spread, and the lifetime that follows.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WearSummary {
    /// Frames counted over (every frame of the zones).
    pub frames: u64,
    /// Frames written at least once.
    pub touched: u64,
    /// All writes.
    pub total_writes: u64,
    /// Writes to the most written frame.
    pub max: u64,
    /// Mean writes per frame over all frames.
    pub mean: f64,
    /// `max / mean`: 1 is perfectly even.
    pub max_over_mean: f64,
    /// `max` over the mean of the touched frames only.
    pub max_over_touched_mean: f64,
    /// Coefficient of variation (standard deviation / mean) over all frames.
    pub cov: f64,
    /// Gini coefficient of writes over all frames: 0 even, 1 all on one.
    pub gini: f64,
    /// Lifetime as a percentage of the ideal, perfectly even lifetime
    /// (`mean / max`), the metric Start-Gap reports.
    pub lifetime_pct_of_ideal: f64,
    /// Years until the most written frame reaches each of [`ENDURANCES`],
    /// if the workload ran on repeat: `endurance × duration / max`.
    pub lifetime_years: [f64; 3],
    /// Sorted distinct write counts and how many frames have each, for CDFs.
    pub histogram: Vec<(u32, u64)>,
}

const SECONDS_PER_YEAR: f64 = 365.25 * 24.0 * 3600.0;

impl WearSummary {
    /// Summarise per-frame counts for a trace of `duration_ns`.
    pub fn of(writes: &[u32], duration_ns: u64) -> WearSummary {
        let frames = writes.len() as u64;
        // A histogram of counts, by counting sort in one pass over the
        // frames: the largest count is far below the number of frames, so
        // the array of counts stays small (it grows to the largest seen).
        let mut by_count = vec![0u64; 64];
        // Counts past the dense bound go to a map: a few frames with huge
        // counts must not size the array (2^32 counts would be 32 GiB).
        const DENSE: usize = 1 << 20;
        let mut large = std::collections::BTreeMap::<u32, u64>::new();
        let mut add = |w: u32| {
            let i = w as usize;
            if i >= DENSE {
                *large.entry(w).or_insert(0) += 1;
                return;
            }
            if i >= by_count.len() {
                by_count.resize(i + 1, 0);
            }
            by_count[i] += 1;
        };
        // Most frames of a machine are never written: runs of zeros are
        // counted a chunk at a time (a vector compare), not one increment
        // of the same counter after another (a chain of dependent stores).
        const RUN: usize = 32;
        let mut zeros = 0u64;
        let chunks = writes.chunks_exact(RUN);
        let rest = chunks.remainder();
        for chunk in chunks {
            if chunk.iter().fold(0, |acc, &w| acc | w) == 0 {
                zeros += RUN as u64;
            } else {
                chunk.iter().for_each(|&w| add(w));
            }
        }
        rest.iter().for_each(|&w| add(w));
        by_count[0] += zeros;
        let histogram: Vec<(u32, u64)> = by_count
            .into_iter()
            .enumerate()
            .filter(|&(_, n)| n > 0)
            .map(|(w, n)| (w as u32, n))
            .chain(large)
            .collect();
        let total_writes: u64 = histogram.iter().map(|&(w, n)| u64::from(w) * n).sum();
        let touched: u64 = histogram
            .iter()
            .filter(|&&(w, _)| w > 0)
            .map(|&(_, n)| n)
            .sum();
        let max = histogram.last().map_or(0, |&(w, _)| u64::from(w));
        let mean = if frames == 0 {
            0.0
        } else {
            total_writes as f64 / frames as f64
        };
        let variance = if frames == 0 {
            0.0
        } else {
            histogram
                .iter()
                .map(|&(w, n)| n as f64 * (f64::from(w) - mean).powi(2))
                .sum::<f64>()
                / frames as f64
        };
        // Gini over the sorted counts: G = 2·Σ i·x_i / (n·Σx) − (n+1)/n,
        // with i the 1-based rank; a run of n equal counts x starting after
        // rank r contributes x·(n·r + n(n+1)/2).
        let gini = if total_writes == 0 {
            0.0
        } else {
            let n = frames as f64;
            let mut rank = 0f64;
            let mut weighted = 0f64;
            for &(w, count) in &histogram {
                let c = count as f64;
                weighted += f64::from(w) * (c * rank + c * (c + 1.0) / 2.0);
                rank += c;
            }
            2.0 * weighted / (n * total_writes as f64) - (n + 1.0) / n
        };
        let ratio = |num: f64, den: f64| if den > 0.0 { num / den } else { 0.0 };
        let duration_s = duration_ns as f64 / 1e9;
        WearSummary {
            frames,
            touched,
            total_writes,
            max,
            mean,
            max_over_mean: ratio(max as f64, mean),
            max_over_touched_mean: ratio(max as f64 * touched as f64, total_writes as f64),
            cov: ratio(variance.sqrt(), mean),
            gini,
            lifetime_pct_of_ideal: if max == 0 {
                100.0
            } else {
                100.0 * mean / max as f64
            },
            lifetime_years: ENDURANCES.map(|e| {
                if max == 0 {
                    f64::INFINITY
                } else {
                    e * duration_s / max as f64 / SECONDS_PER_YEAR
                }
            }),
            histogram,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_counts_are_summarised_without_a_huge_array() {
        let s = WearSummary::of(&[u32::MAX, 0, 5, u32::MAX - 1, 5], 1);
        assert_eq!(
            s.histogram,
            vec![(0, 1), (5, 2), (u32::MAX - 1, 1), (u32::MAX, 1)]
        );
        assert_eq!(s.touched, 4);
    }

    #[test]
    fn the_histogram_counts_zero_runs_as_one_by_one() {
        // Zero runs of every length around the chunk size, at every
        // offset, with written frames between: the same summary as a
        // histogram built one frame at a time.
        let mut x = Vec::new();
        let mut seed = 7u64;
        for run in [0usize, 1, 31, 32, 33, 64, 95, 200] {
            x.extend(std::iter::repeat_n(0u32, run));
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            x.push((seed >> 60) as u32 + 1);
        }
        x.extend(std::iter::repeat_n(0u32, 17));
        for start in 0..40 {
            let w = &x[start..];
            let s = WearSummary::of(w, 1_000_000_000);
            let mut naive = std::collections::BTreeMap::new();
            for &v in w {
                *naive.entry(v).or_insert(0u64) += 1;
            }
            let naive: Vec<(u32, u64)> = naive.into_iter().collect();
            assert_eq!(s.histogram, naive, "from {start}");
            assert_eq!(s.frames, w.len() as u64);
            assert_eq!(s.touched, w.iter().filter(|&&v| v > 0).count() as u64);
        }
    }

    #[test]
    fn even_wear_is_ideal() {
        let s = WearSummary::of(&[3, 3, 3, 3], 1_000_000_000);
        assert_eq!(s.max, 3);
        assert!((s.max_over_mean - 1.0).abs() < 1e-12);
        assert!(s.gini.abs() < 1e-12);
        assert!(s.cov.abs() < 1e-12);
        assert!((s.lifetime_pct_of_ideal - 100.0).abs() < 1e-9);
        // 10^6 writes at 3 per second.
        assert!((s.lifetime_years[0] - 1e6 / 3.0 / SECONDS_PER_YEAR).abs() < 1e-12);
    }

    #[test]
    fn skewed_wear_matches_hand_computed_figures() {
        // One frame takes every write: Gini (n-1)/n, max/mean n.
        let s = WearSummary::of(&[0, 0, 0, 8], 2_000_000_000);
        assert_eq!((s.frames, s.touched, s.total_writes, s.max), (4, 1, 8, 8));
        assert!((s.max_over_mean - 4.0).abs() < 1e-12);
        assert!((s.max_over_touched_mean - 1.0).abs() < 1e-12);
        assert!((s.gini - 0.75).abs() < 1e-12);
        assert!((s.lifetime_pct_of_ideal - 25.0).abs() < 1e-9);
        // mean 2, sd sqrt((3*4 + 36)/4) = sqrt(12)
        assert!((s.cov - 12f64.sqrt() / 2.0).abs() < 1e-12);
        // Gini by definition: mean absolute difference / (2 * mean).
        let x = [1u32, 2, 3, 10];
        let n = x.len() as f64;
        let mean = 4.0;
        let mad: f64 = x
            .iter()
            .flat_map(|a| x.iter().map(move |b| (f64::from(*a) - f64::from(*b)).abs()))
            .sum::<f64>()
            / (n * n);
        let g = WearSummary::of(&x, 1).gini;
        assert!((g - mad / (2.0 * mean)).abs() < 1e-12, "{g}");
    }

    #[test]
    fn counter_records_blocks_and_flags_strays() {
        let map = ZoneMap::new(&[
            nvmos_frames::Zone::new(10, 20),
            nvmos_frames::Zone::new(30, 34),
        ])
        .unwrap();
        let mut c = WearCounter::new(
            map,
            WriteModel {
                writes_per_alloc: 2,
            },
        );
        c.record_alloc(Pfn(32), Order::new(1).unwrap());
        c.record_alloc(Pfn(12), Order::new(2).unwrap());
        c.record_alloc(Pfn(0), Order::ZERO);
        c.record_alloc(Pfn(18), Order::new(2).unwrap()); // runs past the zone
        assert_eq!(c.outside, 5);
        let w = c.writes();
        assert_eq!(&w[2..6], &[2, 2, 2, 2]);
        assert_eq!(&w[12..14], &[2, 2]);
        assert_eq!(w.iter().map(|&x| u64::from(x)).sum::<u64>(), 12);
    }
}
