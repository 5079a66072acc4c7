//! Workloads: page-reference strings for the paging model.
//!
//! A reference is a `u32`: the page id in the low 30 bits, [`REF_WRITE`]
//! for a store, [`REF_RELEASE`] for munmap of that page (its frame and
//! slot are freed). Pages are numbered densely from 0; `file[i]` says
//! page `i` is file-backed (page cache: dropped, never swapped).
//!
//! [`pc_scenario`] is seed 003's "typical PC usage scenario" as a
//! synthetic mix; [`hog`] writes a region once and reads it back (the
//! swap-out benchmark of the congestion figure).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// A store.
pub const REF_WRITE: u32 = 1 << 31;
/// munmap.
pub const REF_RELEASE: u32 = 1 << 30;
/// The page id bits.
pub const PAGE_MASK: u32 = REF_RELEASE - 1;

/// A stretch of references; counters are reset at the start of a
/// measured phase (the aging phases before it are not measured).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    /// What it is.
    pub name: String,
    /// First reference.
    pub start: usize,
    /// One past the last.
    pub end: usize,
    /// Whether measurement restarts here.
    pub measured: bool,
}

/// A reference string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Its name.
    pub name: String,
    /// References.
    pub refs: Vec<u32>,
    /// Pages (ids are below this).
    pub pages: u32,
    /// File-backed pages.
    pub file: Vec<bool>,
    /// Phases covering `refs` in order.
    pub phases: Vec<Phase>,
}

impl Workload {
    /// One measured phase over all of `refs`.
    pub fn from_refs(name: &str, refs: Vec<u32>, pages: u32, file: Vec<bool>) -> Workload {
        let end = refs.len();
        Workload {
            name: name.into(),
            refs,
            pages,
            file,
            phases: vec![Phase {
                name: name.into(),
                start: 0,
                end,
                measured: true,
            }],
        }
    }

    /// Anon pages.
    pub fn anon_pages(&self) -> u64 {
        self.file.iter().filter(|&&f| !f).count() as u64
    }
}

/// `pages` pages written in order, then read back in order: everything
/// beyond the memory limit goes out to swap and comes back.
pub fn hog(pages: u32) -> Workload {
    let mut refs: Vec<u32> = (0..pages).map(|p| p | REF_WRITE).collect();
    refs.extend(0..pages);
    let mut w = Workload::from_refs("hog", refs, pages, vec![false; pages as usize]);
    w.phases[0].name = "write then read".into();
    w
}

/// `pages` pages written once, in order: pure swap-out beyond the memory
/// limit (the swap-out benchmark of the congestion figure).
pub fn hog_write_only(pages: u32) -> Workload {
    let refs: Vec<u32> = (0..pages).map(|p| p | REF_WRITE).collect();
    let mut w = Workload::from_refs("write-only hog", refs, pages, vec![false; pages as usize]);
    w.phases[0].name = "write".into();
    w
}

/// Builds a reference string from regions.
struct Builder {
    rng: SmallRng,
    refs: Vec<u32>,
    file: Vec<bool>,
    /// References per visit of a page (loads and stores inside it).
    per_visit: u32,
}

#[derive(Clone, Copy)]
struct Region {
    start: u32,
    len: u32,
}

impl Builder {
    fn region(&mut self, len: u32, file: bool) -> Region {
        let start = self.file.len() as u32;
        self.file.extend(std::iter::repeat_n(file, len as usize));
        Region {
            start,
            len: len.max(1),
        }
    }

    fn visit(&mut self, page: u32, write: bool) {
        for k in 0..self.per_visit {
            // One store among the visit's references when it writes.
            let w = write && k == 0;
            self.refs.push(page | if w { REF_WRITE } else { 0 });
        }
    }

    fn sequential(&mut self, r: Region, from: u32, n: u32, write: bool) {
        for i in 0..n.min(r.len) {
            self.visit(r.start + (from + i) % r.len, write);
        }
    }

    /// `n` visits: 80% to a hot fifth of the region, the rest anywhere;
    /// `write_frac` of them store.
    fn hot_cold(&mut self, r: Region, n: u32, write_frac: f64) {
        let hot = (r.len / 5).max(1);
        for _ in 0..n {
            let p = if self.rng.gen_bool(0.8) {
                self.rng.gen_range(0..hot)
            } else {
                self.rng.gen_range(0..r.len)
            };
            let w = self.rng.gen_bool(write_frac);
            self.visit(r.start + p, w);
        }
    }

    fn release(&mut self, r: Region) {
        for p in r.start..r.start + r.len {
            self.refs.push(p | REF_RELEASE);
        }
    }
}

/// Settings of the PC scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcScenario {
    /// Sizes are the seed's times this (1.0: 1 GiB of memory, 1.4 GB
    /// searched).
    pub scale: f64,
    /// Rounds of use before the measured round (0: clean).
    pub aging_rounds: u32,
    /// Random seed.
    pub seed: u64,
}

/// The most aging rounds [`PcScenario::check`] accepts: each round adds
/// about as many page references as the measured one (the whole
/// scenario's memory goes up with it), and the seed's aged system is a
/// few rounds old.
pub const MAX_AGING_ROUNDS: u32 = 64;

/// The largest [`PcScenario::scale`]: 4× the seed's 1 GB machine.
pub const MAX_PC_SCALE: f64 = 4.0;

impl PcScenario {
    /// Refuses settings that cannot make a sensible scenario or would
    /// grow without bound: a scale outside (0, [`MAX_PC_SCALE`]], more
    /// than [`MAX_AGING_ROUNDS`] aging rounds.
    pub fn check(&self) -> Result<(), crate::SwapError> {
        if !(self.scale > 0.0 && self.scale <= MAX_PC_SCALE) {
            return Err(crate::SwapError::BadConfig {
                field: "pc-scale",
                reason: format!(
                    "{} is not in (0, {MAX_PC_SCALE}] (1 is the seed's 1 GB machine)",
                    self.scale
                ),
            });
        }
        if self.aging_rounds > MAX_AGING_ROUNDS {
            return Err(crate::SwapError::BadConfig {
                field: "aging-rounds",
                reason: format!(
                    "{} is more than {MAX_AGING_ROUNDS}: every round adds a measured round's references (memory grows with them)",
                    self.aging_rounds
                ),
            });
        }
        Ok(())
    }

    /// The memory (and swap) size the scenario is made for: 1 GiB scaled.
    pub fn memory_pages(&self) -> u64 {
        ((262_144.0 * self.scale) as u64).max(1024)
    }
}

/// Seed 003's PC scenario (memory 1 GB, swap 1 GB): an image viewer
/// opening seven 10 MB images, a 160 MB file copy, a browser with 8 tabs
/// (browsing and scrolling), a 32 MB download in 64 KB chunks, a
/// presentation (3.2 MB file, editing), and a 1.4 GB file search,
/// interleaved as a user switches between them. Sizes the seed does not
/// give are ours: a tab's heap 40 MB, the office suite's 120 MB, the
/// image viewer's decoded image equal to the file.
///
/// Clean: one round on a fresh system. Aged: `aging_rounds` rounds first
/// in which applications are closed and reopened and tabs replaced (their
/// memory and slots freed), then the measured round.
pub fn pc_scenario(s: &PcScenario) -> Workload {
    let mb = |m: f64| ((m * 256.0 * s.scale) as u32).max(4);
    let mut b = Builder {
        rng: SmallRng::seed_from_u64(s.seed),
        refs: Vec::new(),
        file: Vec::new(),
        per_visit: 4,
    };
    let mut phases = Vec::new();
    // Long-lived regions, reallocated when an application is reopened.
    let mut tabs: Vec<Region> = (0..8).map(|_| b.region(mb(40.0), false)).collect();
    let mut office = b.region(mb(120.0), false);
    let mut viewer = b.region(mb(70.0), false);
    for round in 0..=s.aging_rounds {
        let start = b.refs.len();
        // Fresh page cache for this round's files.
        let copy_src = b.region(mb(160.0), true);
        let copy_dst = b.region(mb(160.0), true);
        let download = b.region(mb(32.0), true);
        let dl_buf = b.region(mb(0.0625).max(16), false);
        let pres_file = b.region(mb(3.2), true);
        let search = b.region(mb(1400.0), true);
        let steps = 8u32;
        for step in 0..steps {
            // Image viewer: open one image (decode into the viewer's heap).
            if step < 7 {
                let img = viewer.len / 7;
                b.sequential(viewer, step * img, img, true);
                b.hot_cold(
                    Region {
                        start: viewer.start + step * img,
                        len: img,
                    },
                    img,
                    0.0,
                );
            }
            // Browser: open or revisit tabs, browse and scroll.
            let tab = tabs[(step as usize) % 8];
            if round == 0 && step < 8 {
                b.sequential(tab, 0, tab.len, true);
            }
            for t in 0..=(step as usize % 3) {
                let tab = tabs[(step as usize + t * 3) % 8];
                b.hot_cold(tab, tab.len / 2, 0.3);
            }
            // File copy, one eighth per step: read the source, write the copy.
            let chunk = copy_src.len / steps;
            b.sequential(copy_src, step * chunk, chunk, false);
            b.sequential(copy_dst, step * chunk, chunk, true);
            // Download: 64 KB chunks (16 pages) through a small buffer.
            let dl_chunk = download.len / steps;
            let mut done = 0;
            while done < dl_chunk {
                b.sequential(dl_buf, 0, 16, true);
                b.sequential(download, step * dl_chunk + done, 16, true);
                done += 16;
            }
            // Presentation: open, then page through and type.
            if round == 0 && step == 0 {
                b.sequential(office, 0, office.len, true);
            }
            b.sequential(pres_file, 0, pres_file.len, false);
            b.hot_cold(office, office.len / 4, 0.2);
            // File search, one eighth per step.
            let sc = search.len / steps;
            b.sequential(search, step * sc, sc, false);
        }
        b.release(dl_buf);
        if round < s.aging_rounds {
            // Aging: close the viewer and two tabs, reopen them.
            b.release(viewer);
            viewer = b.region(viewer.len, false);
            for k in 0..2 {
                let i = (round as usize * 2 + k) % 8;
                b.release(tabs[i]);
                tabs[i] = b.region(tabs[i].len, false);
                let t = tabs[i];
                b.sequential(t, 0, t.len, true);
            }
            if round % 2 == 1 {
                b.release(office);
                office = b.region(office.len, false);
                b.sequential(office, 0, office.len, true);
            }
        }
        let end = b.refs.len();
        phases.push(Phase {
            name: if round < s.aging_rounds {
                format!("aging round {}", round + 1)
            } else {
                "measured round".into()
            },
            start,
            end,
            measured: round == s.aging_rounds,
        });
    }
    let pages = b.file.len() as u32;
    Workload {
        name: if s.aging_rounds == 0 {
            "PC scenario (clean)".into()
        } else {
            "PC scenario (aged)".into()
        },
        refs: b.refs,
        pages,
        file: b.file,
        phases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbounded_settings_are_refused() {
        let ok = PcScenario {
            scale: 1.0,
            aging_rounds: MAX_AGING_ROUNDS,
            seed: 1,
        };
        assert!(ok.check().is_ok());
        for (bad, field) in [
            (
                PcScenario {
                    aging_rounds: 100_000,
                    ..ok.clone()
                },
                "aging-rounds",
            ),
            (
                PcScenario {
                    scale: 0.0,
                    ..ok.clone()
                },
                "pc-scale",
            ),
            (
                PcScenario {
                    scale: f64::NAN,
                    ..ok.clone()
                },
                "pc-scale",
            ),
            (
                PcScenario {
                    scale: 5.0,
                    ..ok.clone()
                },
                "pc-scale",
            ),
        ] {
            let e = bad.check().unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
    }

    #[test]
    fn scenario_is_deterministic_and_phased() {
        let s = PcScenario {
            scale: 1.0 / 64.0,
            aging_rounds: 2,
            seed: 1,
        };
        let a = pc_scenario(&s);
        assert_eq!(a, pc_scenario(&s));
        assert_eq!(a.phases.len(), 3);
        assert!(a.phases.last().unwrap().measured);
        assert_eq!(a.phases.last().unwrap().end, a.refs.len());
        assert!(a.refs.iter().all(|&r| (r & PAGE_MASK) < a.pages));
        assert!(a.anon_pages() > 0 && a.anon_pages() < u64::from(a.pages));
    }
}
