//! Per-page predictors (seed 001, "Per-Page Prediction"): at every page fault
//! the fault handler tells the predictor which page faulted, and the
//! predictor names up to `depth` pages (the prediction depth) to decrypt and
//! install before they are touched. The worker skips pages that are already
//! mapped or on their way, as the seed's handler "decrypts next X pages,
//! skipping already predicted pages".
//!
//! Predictors see only faults, never the accesses to pages they installed:
//! a perfect prediction makes the stream of faults sparse (the next fault of
//! a sequential scan lands `depth + 1` pages on), so each predictor reasons
//! about the pages that fault, not about every access.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Which predictor a `Mode::Predict` attachment runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PredictorKind {
    /// Stream buffer: the `depth` pages after the faulting one, in the
    /// direction the last two faults moved (forward when unknown).
    Stream,
    /// Stride: once two successive faults are the same distance `s` apart,
    /// the pages `p + s, p + 2s, …, p + depth·s`.
    Stride,
    /// First-order Markov chain over faulting pages: remembers which page
    /// faulted after which, and follows the most frequent successor `depth`
    /// steps from the faulting page.
    Markov,
}

impl PredictorKind {
    /// Lower-case name, as the CLI prints it.
    pub fn name(self) -> &'static str {
        match self {
            PredictorKind::Stream => "stream",
            PredictorKind::Stride => "stride",
            PredictorKind::Markov => "markov",
        }
    }
}

impl std::str::FromStr for PredictorKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "stream" => Ok(PredictorKind::Stream),
            "stride" => Ok(PredictorKind::Stride),
            "markov" => Ok(PredictorKind::Markov),
            _ => Err(format!(
                "unknown predictor '{s}' (expected stream, stride or markov)"
            )),
        }
    }
}

/// A predictor: fed each faulting page, answers the pages to fetch ahead.
pub trait Predictor: Send {
    /// Page `page` faulted; push the pages to install ahead onto `out`
    /// (at most the prediction depth, each in `0..pages`, never `page`).
    fn on_fault(&mut self, page: usize, out: &mut Vec<usize>);
}

/// Build a predictor of `kind` with prediction depth `depth` for an object
/// of `pages` pages.
pub fn new_predictor(kind: PredictorKind, depth: usize, pages: usize) -> Box<dyn Predictor> {
    match kind {
        PredictorKind::Stream => Box::new(Stream::new(depth, pages)),
        PredictorKind::Stride => Box::new(Stride::new(depth, pages)),
        PredictorKind::Markov => Box::new(Markov::new(depth, pages)),
    }
}

/// See [`PredictorKind::Stream`].
pub struct Stream {
    depth: usize,
    pages: usize,
    last: Option<usize>,
    backward: bool,
}

impl Stream {
    pub fn new(depth: usize, pages: usize) -> Stream {
        Stream {
            depth,
            pages,
            last: None,
            backward: false,
        }
    }
}

impl Predictor for Stream {
    fn on_fault(&mut self, page: usize, out: &mut Vec<usize>) {
        if let Some(last) = self.last {
            if page < last {
                self.backward = true;
            } else if page > last {
                self.backward = false;
            }
        }
        self.last = Some(page);
        for k in 1..=self.depth {
            let next = if self.backward {
                page.checked_sub(k)
            } else {
                page.checked_add(k).filter(|&p| p < self.pages)
            };
            match next {
                Some(p) => out.push(p),
                None => break,
            }
        }
    }
}

/// See [`PredictorKind::Stride`].
pub struct Stride {
    depth: usize,
    pages: usize,
    last: Option<usize>,
    stride: Option<isize>,
}

impl Stride {
    pub fn new(depth: usize, pages: usize) -> Stride {
        Stride {
            depth,
            pages,
            last: None,
            stride: None,
        }
    }
}

impl Predictor for Stride {
    fn on_fault(&mut self, page: usize, out: &mut Vec<usize>) {
        let seen = self.last.map(|last| page as isize - last as isize);
        self.last = Some(page);
        let confirmed = seen.is_some() && seen == self.stride && seen != Some(0);
        self.stride = seen;
        if !confirmed {
            return;
        }
        let stride = seen.unwrap_or(0);
        for k in 1..=self.depth as isize {
            let p = page as isize + k * stride;
            if p < 0 || p as usize >= self.pages {
                break;
            }
            out.push(p as usize);
        }
    }
}

/// How many successors a Markov state remembers; the least frequent is
/// replaced when a new one arrives.
const MARKOV_WAYS: usize = 4;

/// See [`PredictorKind::Markov`].
pub struct Markov {
    depth: usize,
    pages: usize,
    last: Option<usize>,
    /// page → (successor, times seen), at most `MARKOV_WAYS` per page.
    table: HashMap<usize, Vec<(usize, u32)>>,
}

impl Markov {
    pub fn new(depth: usize, pages: usize) -> Markov {
        Markov {
            depth,
            pages,
            last: None,
            table: HashMap::new(),
        }
    }

    fn learn(&mut self, from: usize, to: usize) {
        let ways = self.table.entry(from).or_default();
        if let Some(w) = ways.iter_mut().find(|w| w.0 == to) {
            w.1 = w.1.saturating_add(1);
        } else if ways.len() < MARKOV_WAYS {
            ways.push((to, 1));
        } else if let Some(w) = ways.iter_mut().min_by_key(|w| w.1) {
            *w = (to, 1);
        }
    }

    fn likeliest(&self, from: usize) -> Option<usize> {
        // Ties go to the successor learnt first: stable across runs.
        let ways = self.table.get(&from)?;
        let best = ways.iter().map(|w| w.1).max()?;
        ways.iter().find(|w| w.1 == best).map(|w| w.0)
    }
}

impl Predictor for Markov {
    fn on_fault(&mut self, page: usize, out: &mut Vec<usize>) {
        if let Some(last) = self.last {
            if last != page {
                self.learn(last, page);
            }
        }
        self.last = Some(page);
        let start = out.len();
        let mut at = page;
        for _ in 0..self.depth {
            match self.likeliest(at) {
                Some(next)
                    if next < self.pages && next != page && !out[start..].contains(&next) =>
                {
                    out.push(next);
                    at = next;
                }
                _ => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &mut dyn Predictor, page: usize) -> Vec<usize> {
        let mut out = Vec::new();
        p.on_fault(page, &mut out);
        out
    }

    #[test]
    fn stream_predicts_the_next_pages_and_stops_at_the_end() {
        let mut s = Stream::new(4, 10);
        assert_eq!(run(&mut s, 0), vec![1, 2, 3, 4]);
        assert_eq!(run(&mut s, 5), vec![6, 7, 8, 9]);
        assert_eq!(run(&mut s, 8), vec![9]);
        let mut none = Stream::new(0, 10);
        assert!(run(&mut none, 3).is_empty());
    }

    #[test]
    fn stream_follows_a_backward_scan() {
        let mut s = Stream::new(3, 100);
        run(&mut s, 50);
        assert_eq!(run(&mut s, 46), vec![45, 44, 43]);
        assert_eq!(run(&mut s, 1), vec![0]);
        // Turning forward again.
        assert_eq!(run(&mut s, 10), vec![11, 12, 13]);
    }

    #[test]
    fn stride_waits_for_a_confirmed_stride() {
        let mut s = Stride::new(3, 1000);
        assert!(run(&mut s, 10).is_empty());
        assert!(
            run(&mut s, 17).is_empty(),
            "one stride is not yet a pattern"
        );
        assert_eq!(run(&mut s, 24), vec![31, 38, 45]);
        // A break in the pattern stops predictions until confirmed again.
        assert!(run(&mut s, 100).is_empty());
        assert!(run(&mut s, 90).is_empty());
        assert_eq!(run(&mut s, 80), vec![70, 60, 50]);
        assert_eq!(run(&mut s, 70), vec![60, 50, 40]);
        // Clipped at the object's ends.
        let mut e = Stride::new(8, 30);
        run(&mut e, 0);
        run(&mut e, 10);
        assert_eq!(run(&mut e, 20), Vec::<usize>::new());
        let mut f = Stride::new(8, 31);
        run(&mut f, 0);
        run(&mut f, 10);
        assert_eq!(run(&mut f, 20), vec![30]);
    }

    #[test]
    fn markov_replays_a_learnt_irregular_sequence() {
        let order = [7, 3, 90, 12, 55, 4];
        let mut m = Markov::new(3, 100);
        for &p in &order {
            run(&mut m, p);
        }
        // Second pass: each fault predicts the next three of the first pass.
        assert_eq!(run(&mut m, 7), vec![3, 90, 12]);
        // 12 → 55 → 4, then 4 → 7 (learnt when the second pass began).
        assert_eq!(run(&mut m, 12), vec![55, 4, 7]);
        let mut unseen = Markov::new(3, 100);
        assert!(run(&mut unseen, 42).is_empty());
    }

    #[test]
    fn markov_prefers_the_most_frequent_successor() {
        let mut m = Markov::new(1, 100);
        for seq in [[1, 2], [1, 3], [1, 3]] {
            for p in seq {
                run(&mut m, p);
            }
            run(&mut m, 50); // separator
        }
        assert_eq!(run(&mut m, 1), vec![3]);
    }

    #[test]
    fn names_round_trip() {
        for k in [
            PredictorKind::Stream,
            PredictorKind::Stride,
            PredictorKind::Markov,
        ] {
            assert_eq!(k.name().parse::<PredictorKind>().unwrap(), k);
        }
        assert!("lru".parse::<PredictorKind>().is_err());
    }
}
