//! nvmos's frame allocators beside LLFree: the record `bench-peers --json`
//! writes (`crates/frames/bench-peers`, built against the user's LLFree
//! checkout), its checks and its table.
//!
//! Every cell (pattern × threads) holds each allocator's figure of every
//! round. The rounds of one cell interleave the allocators, so round `k`
//! of an nvmos allocator and round `k` of LLFree ran under the same load:
//! a ratio is taken per round and the table gives the median of those
//! ratios with their range, never a ratio of medians.

use std::fmt::Write as _;

use nvmos_report::markdown;
use nvmos_sim::study::{Bound, Check};
use serde::{Deserialize, Serialize};

/// The peer every ratio is taken against.
pub const PEER: &str = "LLFree";

/// What `bench-peers --json` writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerRun {
    /// Always `bench-peers`.
    pub tool: String,
    /// Memory each allocator manages, GiB of 4 KiB frames.
    pub memory_gib: u64,
    /// The same, frames.
    pub frames: u64,
    /// Rounds of every cell.
    pub rounds: u32,
    /// The first round's seed (round `k` uses `seed + k`).
    pub seed: u64,
    /// `cpu` (each thread's CPU time) or `wall`.
    pub clock: String,
    /// Whether the per-frame arrays were on transparent huge pages.
    pub huge_pages: bool,
    /// Cores the machine offered.
    pub cores: u64,
    /// LLFree's commit, when its checkout was a git repository.
    pub llfree_rev: Option<String>,
    /// Every cell, in the order run.
    pub cells: Vec<PeerCell>,
}

/// One pattern at one thread count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerCell {
    /// `bulk`, `repeat`, `rand` or `rand-realloc`.
    pub pattern: String,
    /// Benchmark threads.
    pub threads: u32,
    /// Whether the figure is per allocate+free pair (both columns).
    pub paired: bool,
    /// Every allocator run, LLFree among them.
    pub allocators: Vec<PeerSamples>,
}

/// One allocator's figures in one cell, a sample per round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerSamples {
    /// Its name in bench-peers (`LiS-31`, `iBuddy-percpu`, `LLFree`).
    pub name: String,
    /// Nanoseconds per allocation (per pair in a paired pattern).
    pub alloc_ns: Vec<f64>,
    /// Nanoseconds per free (per pair in a paired pattern).
    pub free_ns: Vec<f64>,
}

impl PeerRun {
    /// Refuses a record this page would misread: another tool's, no
    /// cells, a cell without LLFree, or an allocator without one positive
    /// finite figure per round in either column. The error names where.
    pub fn validate(&self) -> Result<(), String> {
        if self.tool != "bench-peers" {
            return Err(format!("tool {:?}, not bench-peers", self.tool));
        }
        if self.rounds == 0 || self.cells.is_empty() {
            return Err(format!(
                "{} rounds, {} cells: nothing measured",
                self.rounds,
                self.cells.len()
            ));
        }
        if self.clock != "cpu" && self.clock != "wall" {
            return Err(format!("clock {:?}: not cpu or wall", self.clock));
        }
        for c in &self.cells {
            let at = format!("{} at {} threads", c.pattern, c.threads);
            if !c.allocators.iter().any(|a| a.name == PEER) {
                return Err(format!("{at}: no {PEER} figures to compare with"));
            }
            for a in &c.allocators {
                for (column, v) in [("alloc_ns", &a.alloc_ns), ("free_ns", &a.free_ns)] {
                    if v.len() != self.rounds as usize {
                        return Err(format!(
                            "{at}, {}: {} {column} figures for {} rounds",
                            a.name,
                            v.len(),
                            self.rounds
                        ));
                    }
                    if let Some(x) = v.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
                        return Err(format!("{at}, {}: {column} figure {x}", a.name));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Per-round ratios of `ours` to `peer`.
fn ratios(ours: &[f64], peer: &[f64]) -> Vec<f64> {
    ours.iter().zip(peer).map(|(x, p)| x / p).collect()
}

/// The median of a cell's samples.
fn median(v: &[f64]) -> f64 {
    crate::results::spread(v).1
}

/// "0.87× (0.80–0.95)": the median of per-round ratios and their range.
fn ratio_cell(r: &[f64]) -> String {
    let (lo, mid, hi) = crate::results::spread(r);
    format!("{mid:.2}× ({lo:.2}–{hi:.2})")
}

/// The cell table: per cell and allocator the median figures and, for
/// every allocator but LLFree, the per-round ratios to LLFree's.
pub fn table(run: &PeerRun) -> String {
    let header = [
        "pattern",
        "threads",
        "allocator",
        "alloc ns (median)",
        "free ns (median)",
        "alloc ÷ LLFree",
        "free ÷ LLFree",
    ]
    .map(String::from);
    let mut rows = Vec::new();
    for c in &run.cells {
        let Some(peer) = c.allocators.iter().find(|a| a.name == PEER) else {
            continue;
        };
        for a in &c.allocators {
            let (alloc, free) = (median(&a.alloc_ns), median(&a.free_ns));
            let (ra, rf) = if a.name == PEER {
                ("-".to_string(), "-".to_string())
            } else {
                (
                    ratio_cell(&ratios(&a.alloc_ns, &peer.alloc_ns)),
                    ratio_cell(&ratios(&a.free_ns, &peer.free_ns)),
                )
            };
            rows.push(if c.paired {
                vec![
                    c.pattern.clone(),
                    c.threads.to_string(),
                    a.name.clone(),
                    format!("{alloc:.1} per pair"),
                    "(pair)".into(),
                    ra,
                    "(pair)".into(),
                ]
            } else {
                vec![
                    c.pattern.clone(),
                    c.threads.to_string(),
                    a.name.clone(),
                    format!("{alloc:.1}"),
                    format!("{free:.1}"),
                    ra,
                    rf,
                ]
            });
        }
    }
    let left = [true, false, true, false, false, false, false];
    let mut out = markdown::table(&header, &left, &rows);
    let _ = writeln!(
        out,
        "\n{} rounds a cell; a ratio is the median of the per-round ratios, with their range in brackets (below 1×: nvmos faster).",
        run.rounds
    );
    out
}

/// Whether `name` is held to the target: iBuddy and the lazy layers of
/// seed 000 (`iBuddy…`, `LiS-…`, `LBS-…`) reached through the
/// `FrameAllocator` trait; the `-pinned` rows own their CPU's list, which
/// the trait does not, and buddy and linux-pcp are Linux's own design,
/// shown for reference.
fn held_to_target(name: &str) -> bool {
    (name.starts_with("iBuddy") || name.starts_with("LiS-") || name.starts_with("LBS-"))
        && !name.ends_with("-pinned")
}

/// The target: frees of frames that another CPU's space owns (the `rand`
/// pattern's shuffled frees) at or below LLFree's time, at every thread
/// count, for each allocator [`held_to_target`].
pub fn checks(run: &PeerRun) -> Vec<Check> {
    let mut out = Vec::new();
    for c in run.cells.iter().filter(|c| c.pattern == "rand") {
        let Some(peer) = c.allocators.iter().find(|a| a.name == PEER) else {
            continue;
        };
        for a in c.allocators.iter().filter(|a| held_to_target(&a.name)) {
            let r = ratios(&a.free_ns, &peer.free_ns);
            let (lo, mid, hi) = crate::results::spread(&r);
            let mut check = Check::new(
                format!(
                    "{}: shuffled frees (most on another CPU's memory), {} thread{}, time ÷ LLFree's",
                    a.name,
                    c.threads,
                    if c.threads == 1 { "" } else { "s" }
                ),
                "nvmos target",
                mid,
                "x",
                Bound::AtMost(1.0),
            );
            check.detail = format!(
                "{:.1} ns against {:.1} ns (medians); per-round ratios {lo:.2}–{hi:.2}",
                median(&a.free_ns),
                median(&peer.free_ns)
            );
            out.push(check);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(name: &str, alloc: &[f64], free: &[f64]) -> PeerSamples {
        PeerSamples {
            name: name.into(),
            alloc_ns: alloc.to_vec(),
            free_ns: free.to_vec(),
        }
    }

    pub(crate) fn run() -> PeerRun {
        PeerRun {
            tool: "bench-peers".into(),
            memory_gib: 4,
            frames: 1 << 20,
            rounds: 3,
            seed: 42,
            clock: "cpu".into(),
            huge_pages: false,
            cores: 2,
            llfree_rev: Some("441c8d1".into()),
            cells: vec![
                PeerCell {
                    pattern: "rand".into(),
                    threads: 2,
                    paired: false,
                    allocators: vec![
                        samples(PEER, &[30.0, 30.0, 30.0], &[80.0, 100.0, 40.0]),
                        // Ratios 0.5, 1.5, 1.25 (median 1.25), not the
                        // ratio of medians (90 / 80 = 1.125).
                        samples("iBuddy", &[15.0, 15.0, 15.0], &[40.0, 150.0, 50.0]),
                        samples("LiS-31-pinned", &[15.0, 15.0, 15.0], &[1.0, 1.0, 1.0]),
                        samples("buddy", &[15.0, 15.0, 15.0], &[1.0, 1.0, 1.0]),
                    ],
                },
                PeerCell {
                    pattern: "repeat".into(),
                    threads: 1,
                    paired: true,
                    allocators: vec![
                        samples(PEER, &[40.0, 40.0, 40.0], &[40.0, 40.0, 40.0]),
                        samples("buddy", &[20.0, 20.0, 20.0], &[20.0, 20.0, 20.0]),
                    ],
                },
            ],
        }
    }

    #[test]
    fn ratios_are_medians_of_per_round_ratios() {
        let t = table(&run());
        assert!(t.contains("1.25× (0.50–1.50)"), "{t}");
        assert!(t.contains("0.50× (0.50–0.50)"), "{t}");
        // A paired pattern shows one figure per pair.
        assert!(t.contains("20.0 per pair"), "{t}");
        let c = checks(&run());
        // Only iBuddy and the lazy layers through the trait, in the rand
        // cell, are held to the target.
        assert_eq!(c.len(), 1);
        assert!(c[0].what.starts_with("iBuddy") && !c[0].met);
        assert!((c[0].measured - 1.25).abs() < 1e-12);
    }

    #[test]
    fn any_commit_text_is_shortened_by_characters() {
        let mut r = run();
        // Byte 12 falls inside the sixth "é": a byte slice would panic.
        r.llfree_rev = Some(format!("a{}", "é".repeat(12)));
        let page = crate::results::peers_page(&r).unwrap();
        let shown = format!("commit `a{}`", "é".repeat(11));
        assert!(page.intro.contains(&shown), "{}", page.intro);
    }

    #[test]
    fn a_record_it_would_misread_is_refused_naming_where() {
        assert_eq!(run().validate(), Ok(()));
        let mut r = run();
        r.cells[0].allocators.remove(0);
        assert!(r
            .validate()
            .unwrap_err()
            .contains("rand at 2 threads: no LLFree"));
        let mut r = run();
        r.cells[1].allocators[1].free_ns.pop();
        let e = r.validate().unwrap_err();
        assert!(e.contains("repeat at 1 threads, buddy: 2 free_ns"), "{e}");
        let mut r = run();
        r.cells[0].allocators[1].alloc_ns[0] = f64::NAN;
        assert!(r
            .validate()
            .unwrap_err()
            .contains("iBuddy: alloc_ns figure NaN"));
        let mut r = run();
        r.tool = "other".into();
        assert!(r.validate().is_err());
        let mut r = run();
        r.cells.clear();
        assert!(r.validate().is_err());
    }
}
