//! Seed 004's Fig. 10 as data: each run's free, offline and migrated
//! memory over time, sampled so the JSON stays small.

use serde::{Deserialize, Serialize};

/// The most samples a run keeps (one more at its end).
pub const TIMELINE_POINTS: usize = 60;

/// One moment of a run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the run began (epochs, or trace time).
    pub t_s: f64,
    /// Memory not allocated, percent of the machine.
    pub free_percent: f64,
    /// Memory offline (banks holding nothing), percent.
    pub offline_percent: f64,
    /// Memory the optimum keeps offline, percent.
    pub optimum_offline_percent: f64,
    /// Memory copied by migration since the run began, percent of the
    /// machine (cumulative: a page moved twice counts twice).
    pub migrated_percent: f64,
}

/// Samples at most [`TIMELINE_POINTS`], evenly thinned: every offered
/// sample is kept until there are too many, then every other one is
/// dropped and samples are taken at least twice as far apart. The same
/// run gives the same samples.
#[derive(Clone, Debug, Default)]
pub(super) struct Timeline {
    samples: Vec<Sample>,
    spacing: f64,
    next: f64,
}

impl Timeline {
    /// Offer the state at `s.t_s`.
    pub(super) fn offer(&mut self, s: Sample) {
        if s.t_s < self.next && !self.samples.is_empty() {
            return;
        }
        self.samples.push(s);
        if self.samples.len() > TIMELINE_POINTS {
            let mut i = 0;
            self.samples.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            // The kept samples are as far apart as every other one was.
            let gap = self.samples[1].t_s - self.samples[0].t_s;
            self.spacing = (2.0 * self.spacing).max(gap);
        }
        self.next = self.samples.last().map_or(0.0, |l| l.t_s) + self.spacing;
    }

    /// The samples, with the state at the end of the run.
    pub(super) fn finish(mut self, end: Sample) -> Vec<Sample> {
        if self.samples.last().is_none_or(|l| l.t_s < end.t_s) {
            self.samples.push(end);
        }
        self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: f64) -> Sample {
        Sample {
            t_s: t,
            free_percent: t,
            offline_percent: 0.0,
            optimum_offline_percent: 0.0,
            migrated_percent: 0.0,
        }
    }

    #[test]
    fn long_runs_are_thinned_evenly_and_end_at_the_end() {
        let mut short = Timeline::default();
        for t in 0..40 {
            short.offer(at(f64::from(t)));
        }
        assert_eq!(
            short.finish(at(40.0)).len(),
            41,
            "a short run keeps every epoch"
        );
        // 200 epochs: every fourth, evenly.
        let mut epochs = Timeline::default();
        for t in 0..200 {
            epochs.offer(at(f64::from(t)));
        }
        let s = epochs.finish(at(200.0));
        assert!(s.len() <= TIMELINE_POINTS + 1);
        assert!(s.windows(2).all(|w| w[1].t_s - w[0].t_s == 4.0), "{s:?}");
        let mut long = Timeline::default();
        for t in 0..1_000_000 {
            long.offer(at(f64::from(t) * 1e-3));
        }
        let s = long.finish(at(1000.0));
        assert!(
            s.len() <= TIMELINE_POINTS + 1 && s.len() > TIMELINE_POINTS / 3,
            "{}",
            s.len()
        );
        assert_eq!(s[0].t_s, 0.0);
        assert_eq!(s.last().unwrap().t_s, 1000.0);
        // The gaps before the end sample are even.
        let gaps: Vec<f64> = s[..s.len() - 1]
            .windows(2)
            .map(|w| w[1].t_s - w[0].t_s)
            .collect();
        let (lo, hi) = gaps
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &g| (a.min(g), b.max(g)));
        assert!(hi <= 2.5 * lo + 1e-9, "evenly spaced: gaps {lo}..{hi}");
    }
}
