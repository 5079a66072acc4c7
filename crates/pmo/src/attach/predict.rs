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
    /// Read-ahead as Linux does it for files, per stream: nothing is
    /// predicted until two faults in a row are neighbours, or a fault
    /// lands on the object's first page (a read from the start, as
    /// Linux's read-ahead treats offset 0); then a window of pages ahead
    /// that doubles (up to `depth`) each time the next fault lands just
    /// past it, which shows the window was used. A
    /// window the stream abandons halves the cap on every stream's
    /// windows, and a used one doubles it again: predictions that go
    /// unused back off. See [`Adaptive`].
    Adaptive,
}

impl PredictorKind {
    /// Lower-case name, as the CLI prints it.
    pub fn name(self) -> &'static str {
        match self {
            PredictorKind::Stream => "stream",
            PredictorKind::Stride => "stride",
            PredictorKind::Markov => "markov",
            PredictorKind::Adaptive => "adaptive",
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
            "adaptive" => Ok(PredictorKind::Adaptive),
            _ => Err(format!(
                "unknown predictor '{s}' (expected stream, stride, markov or adaptive)"
            )),
        }
    }
}

/// A predictor: fed each faulting page, answers the pages to fetch ahead.
pub trait Predictor: Send {
    /// Page `page` faulted; push the pages to install ahead onto `out`
    /// (at most the prediction depth, each in `0..pages`, never `page`).
    fn on_fault(&mut self, page: usize, out: &mut Vec<usize>);

    /// How many of the pages the last `on_fault` named the fault handler
    /// should install with the faulting page, at once and in one copy,
    /// rather than leave to the prediction worker (whose wake-up costs as
    /// much as the fault it saves when the pages are needed right away).
    fn install_now(&self) -> usize {
        0
    }
}

/// Build a predictor of `kind` with prediction depth `depth` for an object
/// of `pages` pages.
pub fn new_predictor(kind: PredictorKind, depth: usize, pages: usize) -> Box<dyn Predictor> {
    match kind {
        PredictorKind::Stream => Box::new(Stream::new(depth, pages)),
        PredictorKind::Stride => Box::new(Stride::new(depth, pages)),
        PredictorKind::Markov => Box::new(Markov::new(depth, pages)),
        PredictorKind::Adaptive => Box::new(Adaptive::new(depth, pages)),
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

/// Streams an [`Adaptive`] predictor follows at once (a kernel reading
/// one matrix row by row and writing another, a file read while a log is
/// appended); the least recently faulted one makes room for a new one.
const ADAPTIVE_STREAMS: usize = 4;

/// The first window of a confirmed stream, in pages (Linux starts file
/// read-ahead at a few pages too and grows it as the stream goes on; 8 is
/// the talk's best fixed depth).
const ADAPTIVE_FIRST_WINDOW: usize = 8;

/// One stream of an [`Adaptive`] predictor.
#[derive(Clone, Copy, Debug)]
struct Track {
    /// The page that faulted last in this stream.
    last: usize,
    /// Backward (descending pages) or forward.
    backward: bool,
    /// The current window, in pages (0: not yet confirmed, nothing
    /// predicted).
    window: usize,
    /// One page past the window's far end: the page whose fault shows the
    /// window was used (every page of it installed and passed). `None`
    /// while nothing is predicted, or when the window reached the
    /// object's end.
    mark: Option<usize>,
    /// When it last faulted, for replacement.
    tick: u64,
}

impl Track {
    /// Whether `page` lies in the stream's predicted window, between its
    /// last fault and its mark.
    fn inside(&self, page: usize) -> bool {
        match self.mark {
            Some(m) if self.backward => page < self.last && page > m,
            Some(m) => page > self.last && page < m,
            None => false,
        }
    }

    /// The next page in the stream's direction after `page`.
    fn step(&self, page: usize) -> Option<usize> {
        if self.backward {
            page.checked_sub(1)
        } else {
            page.checked_add(1)
        }
    }
}

/// See [`PredictorKind::Adaptive`].
///
/// Invariants: `cap` stays in `1..=max` (when `max > 0`); a stream's
/// window never exceeds `cap`; a fault that matches no stream predicts
/// nothing, so isolated (random) faults never install a page.
pub struct Adaptive {
    max: usize,
    pages: usize,
    cap: usize,
    streams: Vec<Track>,
    tick: u64,
    /// Windows the stream went on past (their mark faulted).
    pub confirmed: u64,
    /// Windows whose stream was dropped before its mark faulted.
    pub abandoned: u64,
    /// The pages of the last fault's window to install with it: all of a
    /// stream's first window, none of a later one.
    now: usize,
}

impl Adaptive {
    pub fn new(max: usize, pages: usize) -> Adaptive {
        Adaptive {
            max,
            pages,
            cap: max,
            streams: Vec::with_capacity(ADAPTIVE_STREAMS),
            tick: 0,
            confirmed: 0,
            abandoned: 0,
            now: 0,
        }
    }

    /// The cap on every window now (it halves when windows go unused).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Predict `window` pages after `page` in stream `i`'s direction,
    /// clipped at the object's ends, and set the stream's mark.
    fn open_window(&mut self, i: usize, page: usize, window: usize, out: &mut Vec<usize>) {
        let t = &mut self.streams[i];
        t.window = window;
        t.last = page;
        let mut at = page;
        let mut n = 0;
        while n < window {
            match t.step(at).filter(|&p| p < self.pages) {
                Some(p) => {
                    out.push(p);
                    at = p;
                    n += 1;
                }
                None => break,
            }
        }
        t.mark = if n == window {
            t.step(at).filter(|&p| p < self.pages)
        } else {
            None
        };
    }
}

impl Predictor for Adaptive {
    /// A stream's first window is needed at once (the program is about to
    /// touch its next page) and is small: it goes in with the fault, in
    /// one copy, as the kernel's fault-around maps neighbours. Later,
    /// larger windows are ahead of the program, and the worker installs
    /// them while it works.
    fn install_now(&self) -> usize {
        self.now
    }

    fn on_fault(&mut self, page: usize, out: &mut Vec<usize>) {
        self.tick += 1;
        self.now = 0;
        let tick = self.tick;
        if self.max == 0 {
            return;
        }
        // The window was used: the stream faulted just past it.
        if let Some(i) = self.streams.iter().position(|t| t.mark == Some(page)) {
            self.confirmed += 1;
            self.cap = (self.cap * 2).min(self.max);
            let window = (self.streams[i].window * 2).min(self.cap);
            self.streams[i].tick = tick;
            self.open_window(i, page, window, out);
            return;
        }
        // A page of a window not yet installed (the worker is behind):
        // ask again for the rest of the window, which the newest fault's
        // predictions would otherwise drop.
        if let Some(i) = self.streams.iter().position(|t| t.inside(page)) {
            let t = &mut self.streams[i];
            t.tick = tick;
            t.last = page;
            let mark = t.mark;
            let mut at = page;
            while let Some(p) = t.step(at).filter(|&p| Some(p) != mark && p < self.pages) {
                out.push(p);
                at = p;
            }
            return;
        }
        // The neighbour of a stream's last fault: a sequential stream,
        // confirmed now (or turned around).
        let neighbour = self
            .streams
            .iter()
            .position(|t| t.mark.is_none() && t.last.abs_diff(page) == 1);
        if let Some(i) = neighbour {
            let t = &mut self.streams[i];
            t.backward = page < t.last;
            t.tick = tick;
            let window = ADAPTIVE_FIRST_WINDOW.min(self.cap);
            self.open_window(i, page, window, out);
            self.now = window;
            return;
        }
        // A new stream: nothing predicted yet, unless it starts at the
        // object's first page. It takes the place of the least recently
        // faulted stream once all are in use; a window that stream left
        // unconfirmed went (at least partly) unused.
        let fresh = Track {
            last: page,
            backward: false,
            window: 0,
            mark: None,
            tick,
        };
        let i = if self.streams.len() < ADAPTIVE_STREAMS {
            self.streams.push(fresh);
            self.streams.len() - 1
        } else {
            let (i, _) = self
                .streams
                .iter()
                .enumerate()
                .min_by_key(|(_, t)| t.tick)
                .expect("ADAPTIVE_STREAMS > 0");
            if self.streams[i].mark.is_some() {
                self.abandoned += 1;
                self.cap = (self.cap / 2).max(1);
            }
            self.streams[i] = fresh;
            i
        };
        if page == 0 {
            let window = ADAPTIVE_FIRST_WINDOW.min(self.cap);
            self.open_window(i, page, window, out);
            self.now = window;
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
    fn adaptive_waits_for_a_stream_and_grows_its_window_while_it_is_used() {
        let mut a = Adaptive::new(32, 1000);
        assert!(run(&mut a, 100).is_empty(), "one fault is not a stream");
        assert_eq!(run(&mut a, 101), (102..110).collect::<Vec<_>>());
        assert_eq!(
            a.install_now(),
            8,
            "the first window goes in with the fault"
        );
        // The fault just past the window: used, so the window doubles.
        assert_eq!(run(&mut a, 110), (111..127).collect::<Vec<_>>());
        assert_eq!(a.install_now(), 0, "later ones are the worker's");
        assert_eq!(run(&mut a, 127), (128..160).collect::<Vec<_>>());
        // Capped at the depth.
        assert_eq!(run(&mut a, 160), (161..193).collect::<Vec<_>>());
        assert_eq!(a.confirmed, 3);
        // A late fault inside the window asks for the rest of it again.
        assert_eq!(run(&mut a, 180), (181..193).collect::<Vec<_>>());
        // Stops at the object's end.
        let mut e = Adaptive::new(64, 10);
        run(&mut e, 3);
        assert_eq!(run(&mut e, 4), vec![5, 6, 7, 8, 9]);
        assert_eq!(run(&mut e, 9), Vec::<usize>::new());
        // A fault on the first page starts a stream at once.
        let mut z = Adaptive::new(4, 100);
        assert_eq!(run(&mut z, 0), vec![1, 2, 3, 4]);
        assert_eq!(run(&mut z, 5), vec![6, 7, 8, 9]);
    }

    #[test]
    fn adaptive_never_predicts_for_isolated_faults() {
        let mut a = Adaptive::new(64, 1 << 20);
        let mut x = 12345usize;
        for _ in 0..1000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407)
                >> 3;
            // Multiples of 4 from 4 on: never neighbours, never the first page.
            let page = (x % (1 << 18)) * 4 + 4;
            assert!(run(&mut a, page).is_empty());
        }
        assert_eq!((a.confirmed, a.abandoned), (0, 0));
    }

    #[test]
    fn adaptive_follows_a_backward_stream_and_several_at_once() {
        let mut a = Adaptive::new(16, 1000);
        run(&mut a, 500);
        assert_eq!(run(&mut a, 499), (491..499).rev().collect::<Vec<_>>());
        run(&mut a, 10);
        assert_eq!(run(&mut a, 11), (12..20).collect::<Vec<_>>());
        // Both go on.
        assert_eq!(run(&mut a, 490), (474..490).rev().collect::<Vec<_>>());
        assert_eq!(run(&mut a, 20), (21..37).collect::<Vec<_>>());
    }

    #[test]
    fn adaptive_backs_off_when_windows_go_unused() {
        let mut a = Adaptive::new(64, 1 << 20);
        // Short runs of two faults each, far apart: every run opens a
        // window that a later run's stream then abandons.
        for r in 0..40usize {
            let p = 1000 + r * 1000;
            run(&mut a, p);
            run(&mut a, p + 1);
        }
        assert!(a.abandoned > 30, "{}", a.abandoned);
        assert_eq!(a.cap(), 1, "the cap fell to one page");
        assert_eq!(run(&mut a, 900_000), Vec::<usize>::new());
        assert_eq!(run(&mut a, 900_001), vec![900_002]);
        // A stream that goes on restores it.
        assert_eq!(run(&mut a, 900_003), vec![900_004, 900_005]);
        assert_eq!(a.cap(), 2);
    }

    #[test]
    fn names_round_trip() {
        for k in [
            PredictorKind::Stream,
            PredictorKind::Stride,
            PredictorKind::Markov,
            PredictorKind::Adaptive,
        ] {
            assert_eq!(k.name().parse::<PredictorKind>().unwrap(), k);
        }
        assert!("lru".parse::<PredictorKind>().is_err());
    }
}
