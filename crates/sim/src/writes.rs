//! Write-weighted wear: the sampled writes of a trace recorded with
//! `nvmos record --writes`, attributed to the frames the placement chose.
//!
//! A sampled write names a *traced* frame at a time. During a replay the
//! engine finds the traced block live at that frame at that time (the
//! [`BlockTracker`](nvmos_trace::BlockTracker) that matches frees to
//! allocations, at the block's head or inside it) and the placement's
//! frame for it: the allocator put the block at `ours`, so the frame
//! `ours + (pfn - head)` is the one that wears ([`Hook::written`]). With
//! the kernel's own placement (`Linux (as recorded)`) that is the traced
//! frame itself.
//!
//! Every write is counted somewhere ([`WriteStats`], and the tracker's
//! [`Accounting::write_samples`](nvmos_trace::Accounting::write_samples)
//! and `writes_not_live`): on a placed block, on a block the allocator
//! refused, or on no live block at all (frames allocated before the
//! recording). A row's [`WriteWear`] then gives the write-weighted wear
//! beside the allocation-only figure, and the per-frame correlation
//! between allocations and sampled writes: seed 000's premise, "a
//! positive relation between allocation and write", measured.
//!
//! Sampled writes are a lower bound of the real ones: at most one per
//! frame per sampling interval, and only user-space writes of the recorded
//! command's processes (see `nvmos_trace::softdirty`).

use nvmos_frames::Pfn;
use nvmos_trace::{Event, LiveBlock};

use crate::replay::Hook;
use crate::wear::{WearCounter, WearSummary};

/// Where the sampled writes of a replay went.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WriteStats {
    /// Writes to a frame of a live block the placement placed: passed to
    /// the hook ([`Hook::written`]).
    pub attributed: u64,
    /// Writes to a frame of a live block the allocator refused (no frame
    /// of ours holds it).
    pub of_refused: u64,
}

/// Attributes one sampled write `event` to the live block `block` holds
/// its frame in (`None`: no live block; the tracker counted it): our
/// frame it landed on, if any.
#[inline]
pub(crate) fn attribute<H: Hook + ?Sized>(
    hook: &mut H,
    stats: &mut WriteStats,
    event: &Event,
    block: Option<LiveBlock>,
) -> Option<Pfn> {
    let block = block?;
    match block.tag {
        Some(ours) => {
            stats.attributed += 1;
            let ours = Pfn(ours + (event.pfn.0 - block.pfn));
            hook.written(ours);
            Some(ours)
        }
        None => {
            stats.of_refused += 1;
            None
        }
    }
}

/// Pearson's and Spearman's correlation between two per-frame counts.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Correlation {
    /// Frames compared: those with at least one allocation or one sampled
    /// write (the untouched rest would only add (0, 0) pairs).
    pub frames: u64,
    /// Pearson's r of the counts; `None` when either is constant.
    pub pearson: Option<f64>,
    /// Spearman's ρ (Pearson's r of the ranks, ties given their mean
    /// rank); `None` when either is constant.
    pub spearman: Option<f64>,
}

impl Correlation {
    /// The correlation of `a` and `b` (same length) over the frames where
    /// either is non-zero.
    pub fn of(a: &[u32], b: &[u32]) -> Correlation {
        let pairs: Vec<(u32, u32)> = a
            .iter()
            .zip(b)
            .filter(|&(&x, &y)| x > 0 || y > 0)
            .map(|(&x, &y)| (x, y))
            .collect();
        let xs: Vec<f64> = pairs.iter().map(|p| f64::from(p.0)).collect();
        let ys: Vec<f64> = pairs.iter().map(|p| f64::from(p.1)).collect();
        let rx = ranks(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
        let ry = ranks(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
        Correlation {
            frames: pairs.len() as u64,
            pearson: pearson(&xs, &ys),
            spearman: pearson(&rx, &ry),
        }
    }
}

/// Pearson's r; `None` for fewer than two values or a constant side.
fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len() as f64;
    if x.len() < 2 {
        return None;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// 1-based ranks, ties sharing their mean rank.
fn ranks(v: &[u32]) -> Vec<f64> {
    let mut sorted = v.to_vec();
    sorted.sort_unstable();
    // Mean rank of each distinct value: positions lo+1 ..= hi.
    let mut mean_rank = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j] == sorted[i] {
            j += 1;
        }
        mean_rank.push((sorted[i], (i + 1 + j) as f64 / 2.0));
        i = j;
    }
    v.iter()
        .map(|x| {
            let k = mean_rank
                .binary_search_by_key(x, |&(value, _)| value)
                .expect("every value is in the table");
            mean_rank[k].1
        })
        .collect()
}

/// A row's write-weighted figures, for traces with sampled writes.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WriteWear {
    /// Wear and lifetime from the sampled writes per frame (each frame's
    /// count is the number of samples in which it was written) plus the
    /// pages migration copied onto it, over the same frames as the
    /// allocation-only figure.
    pub wear: WearSummary,
    /// Sampled writes that landed outside the replayed zones.
    pub outside: u64,
    /// Per-frame allocation count (the allocation-only wear) against
    /// sampled writes.
    pub correlation: Correlation,
}

impl WriteWear {
    /// The figures of `wear`'s counts for a trace of `duration_ns`, or
    /// `None` when the trace has no sampled writes (`write_samples` of its
    /// accounting is 0).
    pub fn of(wear: &WearCounter, write_samples: u64, duration_ns: u64) -> Option<WriteWear> {
        if write_samples == 0 {
            return None;
        }
        let written = wear
            .written_with_copies()
            .unwrap_or_else(|| vec![0; wear.writes().len()]);
        let sampled_only;
        let sampled = match wear.sampled_writes() {
            Some(s) => s,
            None => {
                sampled_only = vec![0; wear.writes().len()];
                &sampled_only
            }
        };
        Some(WriteWear {
            wear: WearSummary::of(&written, duration_ns),
            outside: wear.sampled_outside,
            correlation: Correlation::of(wear.writes(), sampled),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn correlation_of_known_series() {
        // Perfectly linear: both 1.
        let c = Correlation::of(&[1, 2, 3, 4, 0], &[2, 4, 6, 8, 0]);
        assert_eq!(c.frames, 4);
        assert!((c.pearson.unwrap() - 1.0).abs() < 1e-12);
        assert!((c.spearman.unwrap() - 1.0).abs() < 1e-12);
        // Monotone but not linear: Spearman 1, Pearson below.
        let c = Correlation::of(&[1, 2, 3, 4], &[1, 10, 100, 1000]);
        assert!((c.spearman.unwrap() - 1.0).abs() < 1e-12);
        assert!(c.pearson.unwrap() < 0.9);
        // Reversed: -1.
        let c = Correlation::of(&[1, 2, 3], &[3, 2, 1]);
        assert!((c.pearson.unwrap() + 1.0).abs() < 1e-12);
        // A constant side has no correlation.
        assert_eq!(Correlation::of(&[1, 1, 1], &[1, 2, 3]).pearson, None);
        // By hand: x = 1 2 3 4, y = 2 1 4 3: r = 0.6; ranks the same.
        let c = Correlation::of(&[1, 2, 3, 4], &[2, 1, 4, 3]);
        assert!((c.pearson.unwrap() - 0.6).abs() < 1e-12);
        assert!((c.spearman.unwrap() - 0.6).abs() < 1e-12);
    }

    use crate::replay::{as_recorded, replay};
    use crate::wear::WriteModel;
    use nvmos_frames::{Buddy, FrameAllocator, MigrateType, Order, Zone, ZoneMap};
    use nvmos_trace::Op;
    use std::convert::Infallible;

    fn ev(time_ns: u64, op: Op, pfn: u64, order: u8) -> Result<Event, Infallible> {
        Ok(Event {
            time_ns,
            cpu: 0,
            op,
            pfn: Pfn(pfn),
            order: Order::new(order).unwrap(),
        })
    }

    const A: Op = Op::Alloc(MigrateType::Movable);

    /// A block at traced 1000..1004 and one at 2000; writes inside the
    /// first, at the second's head, to a refused block and to nothing.
    fn trace() -> Vec<Result<Event, Infallible>> {
        vec![
            ev(0, A, 1000, 2),
            ev(1, A, 2000, 0),
            ev(2, Op::Write, 1002, 0),
            ev(2, Op::Write, 1003, 0),
            ev(2, Op::Write, 2000, 0),
            ev(3, Op::Write, 5000, 0), // no live block
            ev(4, A, 3000, 3),         // refused: no room left
            ev(5, Op::Write, 3004, 0), // inside the refused block
            ev(6, Op::Free, 1000, 2),
            ev(7, Op::Write, 1002, 0), // freed: no live block
            ev(8, Op::Write, 2000, 0),
        ]
    }

    #[test]
    fn writes_land_on_the_frames_the_allocator_chose() {
        // 8 frames: the order-3 block cannot be placed.
        let alloc = Buddy::<parking_lot::RawMutex>::new(&[Zone::new(100, 108)], 1).unwrap();
        let (stats, wear) = replay(&alloc, trace(), WriteModel::default()).unwrap();
        assert_eq!(stats.accounting.write_samples, 7);
        assert_eq!(stats.accounting.writes_not_live, 2);
        assert_eq!(
            stats.writes,
            WriteStats {
                attributed: 4,
                of_refused: 1
            }
        );
        assert_eq!(stats.alloc_failures, 1);
        assert_eq!(alloc.stats().allocated_frames(), 1);
        // Every write accounted for once.
        let w = &stats.writes;
        assert_eq!(
            w.attributed + w.of_refused + stats.accounting.writes_not_live,
            stats.accounting.write_samples
        );
        let sampled = wear.sampled_writes().unwrap();
        assert_eq!(sampled.iter().map(|&x| u64::from(x)).sum::<u64>(), 4);
        // Frames 2 and 3 of the order-2 block, wherever buddy put it, and
        // the order-0 block's frame twice.
        let by_alloc: Vec<usize> = (0..8).filter(|&i| wear.writes()[i] == 1).collect();
        let order2 = by_alloc
            .iter()
            .copied()
            .find(|&i| i % 4 == 0 && wear.writes()[i..i + 4] == [1, 1, 1, 1]);
        let head = order2.expect("an order-2 block placed");
        assert_eq!(sampled[head..head + 4], [0, 0, 1, 1]);
        let single = by_alloc
            .iter()
            .copied()
            .find(|i| !(head..head + 4).contains(i))
            .unwrap();
        assert_eq!(sampled[single], 2);
        let ww = WriteWear::of(&wear, stats.accounting.write_samples, 8).unwrap();
        assert_eq!(ww.wear.max, 2);
        assert_eq!(ww.wear.total_writes, 4);
        assert_eq!(ww.correlation.frames, 5);
    }

    #[test]
    fn as_recorded_writes_land_on_the_traced_frames() {
        let map = ZoneMap::new(&[Zone::new(0, 4096)]).unwrap();
        let (stats, wear) = as_recorded(map, trace(), WriteModel::default()).unwrap();
        let sampled = wear.sampled_writes().unwrap();
        assert_eq!((sampled[1002], sampled[1003], sampled[2000]), (1, 1, 2));
        assert_eq!(sampled[3004], 1); // the kernel placed it
        assert_eq!(
            stats.writes,
            WriteStats {
                attributed: 5,
                of_refused: 0
            }
        );
        assert_eq!(stats.accounting.writes_not_live, 2);
        // No writes: no write figures.
        let plain: Vec<_> = trace()
            .into_iter()
            .filter(|e| e.unwrap().op != Op::Write)
            .collect();
        let map = ZoneMap::new(&[Zone::new(0, 4096)]).unwrap();
        let (stats, wear) = as_recorded(map, plain, WriteModel::default()).unwrap();
        assert!(wear.sampled_writes().is_none());
        assert_eq!(
            WriteWear::of(&wear, stats.accounting.write_samples, 8),
            None
        );
    }

    /// The shipped trace with writes, through the one per-trace study:
    /// every sampled write is accounted for in every row, and the rows
    /// carry the write-weighted figures.
    #[test]
    fn shipped_trace_with_writes_is_accounted_in_every_row() {
        use crate::allocators::AllocatorKind;
        use crate::evaluate::{study_trace, StudyOptions};
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../traces/sortjob_writes.nvt");
        let rows = [None, Some(AllocatorKind::ALL[0])];
        let study = study_trace(
            &path,
            &|| nvmos_trace::open(&path),
            &rows,
            &StudyOptions::default(),
            &mut |_, _| true,
        )
        .unwrap();
        for row in &study.rows {
            let (a, w) = (&row.stats.accounting, &row.stats.writes);
            assert!(a.write_samples > 100_000, "{}", row.allocator);
            assert_eq!(
                w.attributed + w.of_refused + a.writes_not_live,
                a.write_samples,
                "{}",
                row.allocator
            );
            let ww = row.writes.as_ref().unwrap();
            assert_eq!(ww.wear.total_writes + ww.outside, w.attributed);
            assert!(ww.correlation.frames > 0);
        }
    }

    #[test]
    fn ties_share_their_mean_rank() {
        assert_eq!(ranks(&[5, 1, 5, 3]), vec![3.5, 1.0, 3.5, 2.0]);
    }
}
