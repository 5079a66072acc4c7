//! Security Refresh (Seong, Woo, Lee, "Security Refresh: Prevent Malicious
//! Wear-out and Increase Durability for Phase-Change Memory with
//! Dynamically Randomized Address Mapping", ISCA 2010), two-level.
//!
//! # The machine
//!
//! A *region* (the paper's bank) of `n = 2^b` lines is remapped twice:
//!
//! - **Outer level**, over the whole region: two keys `kp` (previous) and
//!   `kc` (current) and a refresh pointer `crp`. Memory address `m` maps to
//!   the intermediate address `m ⊕ kc` if it has been refreshed in this
//!   round (`m < crp` or `m ⊕ kp ⊕ kc < crp`), else `m ⊕ kp`. Every
//!   `outer_interval` demand writes to the region one *refresh step* runs:
//!   if `crp`'s partner `crp ⊕ kp ⊕ kc` has not been refreshed yet, the
//!   lines at `crp ⊕ kp` and `crp ⊕ kc` swap (two writes; this remaps both
//!   `crp` and its partner), otherwise the step does nothing; `crp`
//!   advances. After `n` steps (a *round*) `kp ← kc` and `kc` is a new
//!   random key.
//! - **Inner level**, one controller per *sub-region* of `s = n / R` lines,
//!   the same scheme over the intermediate address's offset within its
//!   sub-region, stepping every `inner_interval` demand writes *to that
//!   sub-region*.
//!
//! # The model
//!
//! As for Start-Gap, the workload is a write *rate* per line, repeated
//! until a physical line reaches its endurance `E`, and demand writes are
//! a fluid: line `m` takes share `g[m]` of every write. Between two
//! refresh steps that move a written line nothing changes, so the model
//! jumps from one such step to the next: per outer round each written
//! line moves once (at step `min(m, m ⊕ kp ⊕ kc)`), and per inner round
//! of its sub-region once; a line's wear is flushed into its physical
//! line when it moves. Zero-rate lines cost nothing, so the work is
//! `O(z · E / interval · log z)` for `z` written lines, whatever `n` is.
//!
//! Every key is drawn as the registers draw it (one random generator per
//! controller, seeded from [`SecurityRefresh::seed`]), so the model
//! follows the same remapping as a write-by-write simulation of the
//! registers (`tests::fluid_model_matches_the_registers`). Swap writes:
//! the inner level's are counted exactly (each physical line of a
//! sub-region is written once per inner round, at the step that swaps
//! it); the outer level's land wherever the inner mapping puts the
//! intermediate line at that moment, which the model does not follow:
//! it counts their expectation, one write per physical line per outer
//! round (they are `1 / outer_interval` of the demand writes).

use rand::{rngs::StdRng, Rng, SeedableRng};
use rayon::prelude::*;

use super::LevellingError;

/// Security Refresh's parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SecurityRefresh {
    /// Lines per region (the paper's bank), each with its own outer
    /// controller: a power of two that divides the line count.
    pub region_lines: u64,
    /// Sub-regions per region, each with its own inner controller: a
    /// power of two, at most `region_lines`.
    pub sub_regions: u64,
    /// Demand writes to the region between two outer refresh steps;
    /// `None`: no outer level (single-level Security Refresh over each
    /// sub-region).
    pub outer_interval: Option<u64>,
    /// Demand writes to a sub-region between two of its refresh steps.
    pub inner_interval: u64,
    /// Seed of the controllers' key generators.
    pub seed: u64,
}

impl SecurityRefresh {
    /// nvmos's configuration at page granularity: 1 GiB regions of 4 KiB
    /// frames (2^18 lines), 512 sub-regions of 512 lines, outer step every
    /// 128 region writes, inner step every 64 sub-region writes (2.3 %
    /// extra writes). The paper evaluates two-level Security Refresh with
    /// parameters of this kind (a bank, sub-regions, refresh intervals of
    /// tens to hundreds of writes); these values are not checked against
    /// its tables, whose text was not available to nvmos.
    pub const DEFAULT: SecurityRefresh = SecurityRefresh {
        region_lines: 1 << 18,
        sub_regions: 512,
        outer_interval: Some(128),
        inner_interval: 64,
        seed: 0x5345_4352,
    };

    /// Short name for tables.
    pub fn name(&self) -> String {
        match self.outer_interval {
            Some(o) => format!(
                "security-refresh(region={}, {} sub-regions, outer={o}, inner={})",
                self.region_lines, self.sub_regions, self.inner_interval
            ),
            None => format!(
                "security-refresh(single-level, {} lines, interval={})",
                self.region_lines / self.sub_regions,
                self.inner_interval
            ),
        }
    }

    /// Extra writes, percent of demand writes: a refresh step swaps (two
    /// writes) half the time.
    pub fn extra_writes_pct(&self) -> f64 {
        100.0 / self.inner_interval as f64 + self.outer_interval.map_or(0.0, |o| 100.0 / o as f64)
    }

    pub(super) fn validate(&self, lines: u64) -> Result<(), LevellingError> {
        // The model keeps a region's lines densely: bounded as the lines
        // of a memory are.
        let ok = self.region_lines.is_power_of_two()
            && self.region_lines <= super::MAX_LINES
            && self.sub_regions.is_power_of_two()
            && self.sub_regions <= self.region_lines
            && self.inner_interval >= 1
            && self.outer_interval != Some(0);
        if !ok || lines == 0 {
            return Err(LevellingError::SecurityRefresh(*self));
        }
        Ok(())
    }

    /// Physical lines the last region has beyond the line count (a bank is
    /// a power of two; the lines past the memory's end are never addressed
    /// but take part in the remapping).
    pub fn padding_lines(&self, lines: u64) -> u64 {
        lines.next_multiple_of(self.region_lines) - lines
    }

    fn outer_rng(&self, region: u64) -> StdRng {
        StdRng::seed_from_u64(self.seed ^ region.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// Writes per line between two refresh rounds (the outer level's
    /// interval, else the inner's), and the rounds a line of `endurance`
    /// lasts at most: every line is written once per interval writes per
    /// line.
    fn rounds(&self, endurance: f64) -> (u64, f64) {
        let interval = self.outer_interval.unwrap_or(self.inner_interval).max(1);
        (interval, endurance / interval as f64)
    }

    /// Refuses an endurance that would take more than [`MAX_ROUNDS`]
    /// refresh rounds per region to simulate. Every line is written once
    /// per `interval` writes per line, so a region fails within
    /// E / interval rounds; the simulation's cost grows with that count,
    /// so it is bounded rather than left to run for hours.
    pub fn check_rounds(&self, endurance: f64) -> Result<(), LevellingError> {
        let (interval, rounds) = self.rounds(endurance);
        if rounds > MAX_ROUNDS as f64 {
            return Err(LevellingError::TooManyRounds {
                endurance,
                interval,
                rounds,
            });
        }
        Ok(())
    }

    /// Refuses a run whose work bound exceeds [`MAX_WORK`]: every written
    /// line moves at least once per outer round, and every sub-region's
    /// controller is visited once per round, for up to E / interval
    /// rounds (the rounds to failure when writes are even; hotter lines
    /// fail sooner).
    pub fn check_work(
        &self,
        endurance: f64,
        lines: u64,
        written: u64,
    ) -> Result<(), LevellingError> {
        let (_, rounds) = self.rounds(endurance);
        let regions = lines.div_ceil(self.region_lines);
        let work = rounds * (written as f64 + (regions * self.sub_regions) as f64);
        if work > MAX_WORK {
            return Err(LevellingError::TooMuchWork {
                written,
                lines,
                rounds,
                work,
            });
        }
        Ok(())
    }

    fn inner_rng(&self, region: u64, sub: u64) -> StdRng {
        StdRng::seed_from_u64(
            self.seed
                ^ region.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ (sub + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F),
        )
    }
}

/// Most refresh rounds per region [`writes_to_failure`] simulates.
pub const MAX_ROUNDS: u64 = 1 << 17;

/// Most work one [`writes_to_failure`] takes on: written lines moved per
/// round plus controller steps, times rounds (see
/// [`SecurityRefresh::check_work`]). A line-round costs about ten
/// nanoseconds, so this bounds one run at minutes of CPU.
pub const MAX_WORK: f64 = (1u64 << 34) as f64;

/// Demand writes served until the first physical line reaches `endurance`,
/// for write rates `rates` over `rates.len()` lines.
pub(super) fn writes_to_failure(
    rates: &[f64],
    sr: &SecurityRefresh,
    endurance: f64,
) -> Result<f64, LevellingError> {
    let n = rates.len() as u64;
    sr.validate(n)?;
    sr.check_rounds(endurance)?;
    let written = rates.iter().filter(|&&r| r > 0.0).count() as u64;
    sr.check_work(endurance, n, written)?;
    let total: f64 = rates.iter().sum();
    // Regions are independent (each has its own controllers and keys):
    // the memory fails with the first of them.
    let w = rates
        .par_chunks(sr.region_lines as usize)
        .enumerate()
        .map(|(r, region)| {
            let share: f64 = region.iter().sum::<f64>() / total;
            if share <= 0.0 {
                return f64::INFINITY;
            }
            let t = if region.len() as u64 == sr.region_lines {
                region_writes_to_failure(region, sr, r as u64, endurance)
            } else {
                let mut padded = region.to_vec();
                padded.resize(sr.region_lines as usize, 0.0);
                region_writes_to_failure(&padded, sr, r as u64, endurance)
            };
            t / share
        })
        .reduce(|| f64::INFINITY, f64::min);
    Ok(w)
}

/// No written line at this intermediate address (see [`Region::at`]).
const EMPTY: u32 = u32::MAX;

/// A set of refresh steps `0..s`, as a bitmap with a summary word per 64
/// bitmap words, so that the next pending step is found in a few word
/// reads however sparse the written lines are.
struct StepSet {
    words: Vec<u64>,
    summary: Vec<u64>,
}

impl StepSet {
    fn new(s: u64) -> StepSet {
        let words = s.div_ceil(64) as usize;
        StepSet {
            words: vec![0; words],
            summary: vec![0; words.div_ceil(64)],
        }
    }

    fn insert(&mut self, step: u64) {
        let w = (step / 64) as usize;
        self.words[w] |= 1 << (step % 64);
        self.summary[w / 64] |= 1 << (w % 64);
    }

    /// Removes `step`; whether it was there.
    fn remove(&mut self, step: u64) -> bool {
        let w = (step / 64) as usize;
        let bit = 1 << (step % 64);
        let was = self.words[w] & bit != 0;
        self.words[w] &= !bit;
        if self.words[w] == 0 {
            self.summary[w / 64] &= !(1 << (w % 64));
        }
        was
    }

    /// The smallest step in the set, given that none is below `from`.
    fn first(&self, from: u64) -> Option<u64> {
        let start = (from / 64 / 64) as usize;
        let (k, sw) = self.summary[start.min(self.summary.len())..]
            .iter()
            .enumerate()
            .find(|(_, &sw)| sw != 0)?;
        let w = (start + k) * 64 + sw.trailing_zeros() as usize;
        Some(w as u64 * 64 + u64::from(self.words[w].trailing_zeros()))
    }

    fn is_empty(&self) -> bool {
        self.summary.iter().all(|&sw| sw == 0)
    }
}

/// One written line.
struct Line {
    /// Its share of the region's writes.
    g: f64,
    /// Physical line (within the region) it sits at.
    phys: u64,
    /// Time (region writes) its wear was last flushed.
    since: f64,
    /// Its position in its sub-region's [`Sub::members`].
    slot: u32,
}

/// One inner controller and the written lines in its sub-region.
struct Sub {
    kp: u64,
    kc: u64,
    ptr: u64,
    /// Sub-region writes since the last step, in `[0, interval)`.
    part: f64,
    /// Time (region writes) the controller has been advanced to.
    tau: f64,
    /// Completed rounds in which the keys differed (each wrote every
    /// physical line of the sub-region once).
    swap_rounds: u64,
    /// Share of the region's writes landing here.
    rho: f64,
    /// The written lines in the sub-region (indices into
    /// [`Region::lines`], in no order).
    members: Vec<u32>,
    /// The steps of this round that will move a written line: step `c`
    /// moves the lines at offsets `c` and `c ^ kp ^ kc`. Invariant: a
    /// written line is pending (not yet remapped this round) exactly when
    /// its step is at or past `ptr` and the keys differ, and its step's
    /// bit is set exactly when one of the step's two offsets holds a
    /// pending line.
    pending: StepSet,
    rng: StdRng,
}

struct Region<'a> {
    s: u64,
    interval: f64,
    endurance: f64,
    lines: Vec<Line>,
    subs: Vec<Sub>,
    /// Intermediate address → index of the written line there, or
    /// [`EMPTY`]. Dense: a region is at most a few million lines, and
    /// the model touches it once per line move.
    at: Vec<u32>,
    /// Demand-write wear of every physical line of the region.
    wear: &'a mut [f64],
    /// Outer rounds (keys differing) completed: one expected write per line.
    outer_rounds: u64,
    /// Earliest time a line reached the endurance.
    failure: f64,
}

impl Region<'_> {
    /// Swap writes physical line `p` (region offset) has received.
    fn swaps(&self, p: u64) -> f64 {
        let sub = &self.subs[(p / self.s) as usize];
        let q = p % self.s;
        let d = sub.kp ^ sub.kc;
        // Physical q holds offsets q ^ kp (before its step) and q ^ kc
        // (after): partners, swapped at the step min of the two.
        let now = u64::from(d != 0 && (q ^ sub.kp).min(q ^ sub.kc) < sub.ptr);
        (sub.swap_rounds + now + self.outer_rounds) as f64
    }

    /// Add line `i`'s writes since it was last flushed to its physical
    /// line, noting when that line reached the endurance.
    fn flush(&mut self, i: usize, now: f64) {
        let (g, phys, since) = {
            let l = &self.lines[i];
            (l.g, l.phys, l.since)
        };
        let swaps = self.swaps(phys);
        let w = &mut self.wear[phys as usize];
        let before = *w;
        *w += g * (now - since);
        if *w + swaps >= self.endurance && g > 0.0 {
            let t = since + ((self.endurance - swaps - before) / g).max(0.0);
            self.failure = self.failure.min(t.min(now));
        }
        self.lines[i].since = now;
    }

    /// Run sub-region `j`'s controller up to time `t`.
    fn advance(&mut self, j: usize, t: f64) {
        let s = self.s;
        let base = j as u64 * s;
        loop {
            let sub = &mut self.subs[j];
            if sub.tau >= t {
                return;
            }
            if sub.rho <= 0.0 {
                sub.tau = t;
                return;
            }
            let target = sub.pending.first(sub.ptr).unwrap_or(s - 1);
            let need = (target - sub.ptr + 1) as f64 * self.interval - sub.part;
            let dt = need / sub.rho;
            if sub.tau + dt > t {
                let writes = sub.part + sub.rho * (t - sub.tau);
                let steps = (writes / self.interval).floor();
                sub.ptr += steps as u64;
                sub.part = writes - steps * self.interval;
                sub.tau = t;
                return;
            }
            sub.tau += dt;
            sub.part = 0.0;
            let now = sub.tau;
            let d = sub.kp ^ sub.kc;
            let mut moved = [EMPTY; 2];
            if sub.pending.remove(target) {
                for (k, off) in [target, target ^ d].into_iter().enumerate() {
                    if k == 0 || off != target {
                        moved[k] = self.at[(base + off) as usize];
                    }
                }
            }
            // The wear up to the step lands where the line was (the step
            // has not happened yet for `swaps`: flush before moving on).
            self.subs[j].ptr = target;
            for &i in moved.iter().filter(|&&i| i != EMPTY) {
                self.flush(i as usize, now);
            }
            let sub = &mut self.subs[j];
            sub.ptr = target + 1;
            for &i in moved.iter().filter(|&&i| i != EMPTY) {
                let line = &mut self.lines[i as usize];
                // It sat at offset ^ kp: move it to offset ^ kc.
                let o = (line.phys - base) ^ sub.kp;
                line.phys = base + (o ^ sub.kc);
            }
            if sub.ptr == s {
                debug_assert!(sub.pending.is_empty());
                if sub.kp != sub.kc {
                    sub.swap_rounds += 1;
                }
                sub.kp = sub.kc;
                sub.kc = sub.rng.gen_range(0..s);
                sub.ptr = 0;
                let d = sub.kp ^ sub.kc;
                if d != 0 {
                    // Every written line is pending again; its offset is
                    // where its physical line came from under the (new)
                    // previous key.
                    for &i in &sub.members {
                        let o = (self.lines[i as usize].phys - base) ^ sub.kp;
                        sub.pending.insert(o.min(o ^ d));
                    }
                }
            }
        }
    }

    /// Take the written line at intermediate address `x` out of its
    /// sub-region at time `now`.
    fn remove(&mut self, x: u64, now: f64) {
        let j = (x / self.s) as usize;
        self.advance(j, now);
        let off = x % self.s;
        let i = std::mem::replace(&mut self.at[x as usize], EMPTY);
        debug_assert!(i != EMPTY, "a written line sits at {x}");
        let i = i as usize;
        let sub = &mut self.subs[j];
        let d = sub.kp ^ sub.kc;
        let step = off.min(off ^ d);
        // The step stays pending while its other offset holds a line.
        if d != 0 && step >= sub.ptr && self.at[(x - off + (off ^ d)) as usize] == EMPTY {
            sub.pending.remove(step);
        }
        sub.rho -= self.lines[i].g;
        let slot = self.lines[i].slot as usize;
        sub.members.swap_remove(slot);
        if let Some(&moved) = sub.members.get(slot) {
            self.lines[moved as usize].slot = slot as u32;
        }
        if sub.members.is_empty() {
            sub.rho = 0.0;
        }
        self.flush(i, now);
    }

    /// Put written line `i` at intermediate address `x` at time `now`.
    fn insert(&mut self, i: usize, x: u64, now: f64) {
        let j = (x / self.s) as usize;
        self.advance(j, now);
        let off = x % self.s;
        let sub = &mut self.subs[j];
        let d = sub.kp ^ sub.kc;
        let step = off.min(off ^ d);
        let refreshed = d == 0 || step < sub.ptr;
        let key = if refreshed { sub.kc } else { sub.kp };
        if !refreshed {
            sub.pending.insert(step);
        }
        self.lines[i].slot = sub.members.len() as u32;
        sub.members.push(i as u32);
        self.at[x as usize] = i as u32;
        sub.rho += self.lines[i].g;
        self.lines[i].phys = j as u64 * self.s + (off ^ key);
        self.lines[i].since = now;
    }
}

/// Demand writes one region serves (rates `rates`, any scale) until a
/// physical line reaches `endurance`.
fn region_writes_to_failure(
    rates: &[f64],
    sr: &SecurityRefresh,
    region: u64,
    endurance: f64,
) -> f64 {
    let n = rates.len() as u64;
    let s = n / sr.sub_regions;
    let total: f64 = rates.iter().sum();
    let mut orng = sr.outer_rng(region);
    let (mut okp, mut okc) = match sr.outer_interval {
        Some(_) => (orng.gen_range(0..n), orng.gen_range(0..n)),
        None => (0, 0),
    };
    let mut wear = vec![0.0; n as usize];
    let mut reg = Region {
        s,
        interval: sr.inner_interval as f64,
        endurance,
        lines: Vec::new(),
        subs: (0..sr.sub_regions)
            .map(|j| {
                let mut rng = sr.inner_rng(region, j);
                let kp = rng.gen_range(0..s);
                let kc = rng.gen_range(0..s);
                Sub {
                    kp,
                    kc,
                    ptr: 0,
                    part: 0.0,
                    tau: 0.0,
                    swap_rounds: 0,
                    rho: 0.0,
                    members: Vec::new(),
                    pending: StepSet::new(s),
                    rng,
                }
            })
            .collect(),
        at: vec![EMPTY; n as usize],
        wear: &mut wear,
        outer_rounds: 0,
        failure: f64::INFINITY,
    };
    // The written lines, logical address → index; placed through the
    // outer level's first keys (nothing refreshed yet).
    let mut logical: Vec<u64> = Vec::new();
    for (m, &r) in rates.iter().enumerate() {
        if r > 0.0 {
            let i = reg.lines.len();
            reg.lines.push(Line {
                g: r / total,
                phys: 0,
                since: 0.0,
                slot: 0,
            });
            logical.push(m as u64);
            reg.insert(i, m as u64 ^ okp, 0.0);
        }
    }
    // One outer round at a time (or, with no outer level, a check period
    // of the same length as an inner round of the whole region).
    let round = sr.outer_interval.unwrap_or(sr.inner_interval) as f64 * n as f64;
    let mut start = 0.0f64;
    // A move as one sortable word: its step above, the line below (a
    // region has at most 2^32 lines, so both fit).
    let mut events: Vec<u64> = Vec::new();
    loop {
        let d = okp ^ okc;
        if let (Some(o), true) = (sr.outer_interval, d != 0) {
            events.clear();
            events.extend(
                logical
                    .iter()
                    .enumerate()
                    .map(|(i, &m)| (m.min(m ^ d) << 32) | i as u64),
            );
            events.sort_unstable();
            // Step c moves the lines at logical c and c ^ d: at most two.
            for pair in events.chunk_by(|a, b| a >> 32 == b >> 32) {
                let now = start + ((pair[0] >> 32) + 1) as f64 * o as f64;
                for &e in pair {
                    let i = (e & u64::from(u32::MAX)) as usize;
                    reg.remove(logical[i] ^ okp, now);
                }
                for &e in pair {
                    let i = (e & u64::from(u32::MAX)) as usize;
                    reg.insert(i, logical[i] ^ okc, now);
                }
            }
        }
        let end = start + round;
        for j in 0..reg.subs.len() {
            reg.advance(j, end);
        }
        // Every line's wear up to the round's end, so that a line is
        // charged the swap writes of the rounds it has seen (they are
        // counted per round: see `Region::swaps`).
        for i in 0..reg.lines.len() {
            reg.flush(i, end);
        }
        if reg.failure <= end {
            return reg.failure;
        }
        if sr.outer_interval.is_some() {
            if d != 0 {
                reg.outer_rounds += 1;
            }
            okp = okc;
            okc = orng.gen_range(0..n);
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-level registers, write by write, with the deterministic
    /// stream in which line `m` takes share `g[m]` of every write (smooth
    /// weighted round robin): demand writes until a physical line reaches
    /// `e`. Keys come from the same generators as the model's.
    fn registers(g: &[f64], sr: &SecurityRefresh, e: u64) -> u64 {
        let n = g.len() as u64;
        let s = n / sr.sub_regions;
        let mut orng = sr.outer_rng(0);
        let (mut okp, mut okc) = match sr.outer_interval {
            Some(_) => (orng.gen_range(0..n), orng.gen_range(0..n)),
            None => (0, 0),
        };
        let (mut optr, mut ocount) = (0u64, 0u64);
        struct In {
            kp: u64,
            kc: u64,
            ptr: u64,
            count: u64,
            rng: StdRng,
        }
        let mut subs: Vec<In> = (0..sr.sub_regions)
            .map(|j| {
                let mut rng = sr.inner_rng(0, j);
                let kp = rng.gen_range(0..s);
                let kc = rng.gen_range(0..s);
                In {
                    kp,
                    kc,
                    ptr: 0,
                    count: 0,
                    rng,
                }
            })
            .collect();
        let map = |kp: u64, kc: u64, ptr: u64, x: u64| {
            let d = kp ^ kc;
            if x < ptr || (x ^ d) < ptr {
                x ^ kc
            } else {
                x ^ kp
            }
        };
        let phys = |subs: &[In], x: u64| {
            let j = (x / s) as usize;
            let sub = &subs[j];
            j as u64 * s + map(sub.kp, sub.kc, sub.ptr, x % s)
        };
        let mut wear = vec![0u64; n as usize];
        let mut credit = vec![0.0f64; n as usize];
        let mut writes = 0u64;
        loop {
            for (c, &x) in credit.iter_mut().zip(g) {
                *c += x;
            }
            let m = (0..n as usize)
                .max_by(|&a, &b| credit[a].total_cmp(&credit[b]).then(b.cmp(&a)))
                .unwrap();
            credit[m] -= 1.0;
            let x = map(okp, okc, optr, m as u64);
            let p = phys(&subs, x) as usize;
            wear[p] += 1;
            writes += 1;
            if wear[p] >= e {
                return writes;
            }
            // The inner step of the sub-region written.
            let j = (x / s) as usize;
            subs[j].count += 1;
            if subs[j].count == sr.inner_interval {
                let sub = &mut subs[j];
                sub.count = 0;
                let (c, d) = (sub.ptr, sub.kp ^ sub.kc);
                if d != 0 && c < (c ^ d) {
                    for q in [c ^ sub.kp, c ^ sub.kc] {
                        let p = (j as u64 * s + q) as usize;
                        wear[p] += 1;
                        if wear[p] >= e {
                            return writes;
                        }
                    }
                }
                sub.ptr += 1;
                if sub.ptr == s {
                    sub.ptr = 0;
                    sub.kp = sub.kc;
                    sub.kc = sub.rng.gen_range(0..s);
                }
            }
            if let Some(o) = sr.outer_interval {
                ocount += 1;
                if ocount == o {
                    ocount = 0;
                    let (c, d) = (optr, okp ^ okc);
                    if d != 0 && c < (c ^ d) {
                        for x in [c ^ okp, c ^ okc] {
                            let p = phys(&subs, x) as usize;
                            wear[p] += 1;
                            if wear[p] >= e {
                                return writes;
                            }
                        }
                    }
                    optr += 1;
                    if optr == n {
                        optr = 0;
                        okp = okc;
                        okc = orng.gen_range(0..n);
                    }
                }
            }
        }
    }

    fn skewed(n: usize) -> Vec<f64> {
        let raw: Vec<f64> = (0..n)
            .map(|i| match i {
                3 => 30.0,
                17 => 12.0,
                _ if i % 5 == 0 => 0.0,
                _ => 1.0 + (i % 7) as f64,
            })
            .collect();
        let total: f64 = raw.iter().sum();
        raw.iter().map(|x| x / total).collect()
    }

    #[test]
    fn fluid_model_matches_the_registers() {
        let g = skewed(64);
        for (sub_regions, outer, inner, e) in [
            (1u64, None, 4u64, 3000u64),
            (4, None, 2, 4000),
            (4, Some(8u64), 4, 4000),
            (8, Some(4), 2, 6000),
            (2, Some(16), 8, 20_000),
        ] {
            let sr = SecurityRefresh {
                region_lines: 64,
                sub_regions,
                outer_interval: outer,
                inner_interval: inner,
                seed: 11,
            };
            let exact = registers(&g, &sr, e) as f64;
            let model = region_writes_to_failure(&g, &sr, 0, e as f64);
            let err = (model - exact).abs() / exact;
            assert!(
                err < 0.03,
                "{sr:?} E {e}: model {model} registers {exact} ({:.1} %)",
                100.0 * err
            );
        }
    }

    #[test]
    fn a_hot_line_is_spread_and_no_levelling_is_not() {
        // One line takes half of all writes: without levelling it lasts
        // 2E writes (1/n·2 of ideal); Security Refresh moves it every
        // inner round, so the region lasts far longer.
        let n = 1 << 10;
        let mut g = vec![1.0; n];
        g[7] = (n - 1) as f64;
        let sr = SecurityRefresh {
            region_lines: n as u64,
            sub_regions: 16,
            outer_interval: Some(32),
            inner_interval: 8,
            seed: 3,
        };
        let e = 2e4;
        let w = writes_to_failure(&g, &sr, e).unwrap();
        let pct = 100.0 * w / (n as f64 * e);
        assert!(pct > 20.0, "{pct}");
        assert!(pct < 100.0, "{pct}");
    }

    #[test]
    fn uniform_writes_lose_only_the_refresh_writes() {
        let n = 1 << 12;
        let g = vec![1.0; n];
        let sr = SecurityRefresh {
            region_lines: n as u64,
            sub_regions: 64,
            outer_interval: Some(128),
            inner_interval: 64,
            seed: 5,
        };
        let e = 1e5;
        let pct = 100.0 * writes_to_failure(&g, &sr, e).unwrap() / (n as f64 * e);
        let ideal = 100.0 / (1.0 + sr.extra_writes_pct() / 100.0);
        assert!((pct - ideal).abs() < 1.0, "{pct} vs {ideal}");
    }

    #[test]
    fn the_step_set_finds_the_next_step_as_an_ordered_set_does() {
        // Sizes across the summary's word boundaries (64 and 4096 steps).
        for s in [1u64, 64, 100, 4096, 5000, 1 << 14] {
            let mut set = StepSet::new(s);
            let mut reference = std::collections::BTreeSet::new();
            let mut rng = StdRng::seed_from_u64(s);
            let mut from = 0;
            for _ in 0..20_000 {
                // As the controller uses it: nothing is inserted below the
                // pointer, and the pointer moves up to the first step.
                let step = rng.gen_range(from..s);
                if rng.gen_bool(0.5) {
                    set.insert(step);
                    reference.insert(step);
                } else {
                    assert_eq!(set.remove(step), reference.remove(&step));
                }
                assert_eq!(set.first(from), reference.first().copied());
                assert_eq!(set.is_empty(), reference.is_empty());
                if rng.gen_bool(0.01) {
                    from = reference.first().copied().unwrap_or(0);
                }
            }
        }
    }

    #[test]
    fn a_run_beyond_the_work_bound_is_refused_before_it_starts() {
        // 2^20 written lines for 10^7 / 128 rounds: 8·10^10 line-rounds.
        let sr = SecurityRefresh::DEFAULT;
        let rates = vec![1.0; 1 << 20];
        let err = writes_to_failure(&rates, &sr, 1e7).unwrap_err();
        assert!(
            matches!(err, LevellingError::TooMuchWork { written, .. } if written == 1 << 20),
            "{err:?}"
        );
        assert!(err.to_string().contains("smaller endurance"), "{err}");
        // The same memory with one written line in a hundred is within it.
        let sparse: Vec<f64> = (0..1 << 20).map(|i| f64::from(i % 100 == 0)).collect();
        let written = sparse.iter().filter(|&&r| r > 0.0).count() as u64;
        assert!(sr.check_work(1e7, 1 << 20, written).is_ok());
    }

    #[test]
    fn bad_parameters_are_refused() {
        let bad = SecurityRefresh {
            region_lines: 48,
            ..SecurityRefresh::DEFAULT
        };
        assert!(matches!(
            writes_to_failure(&[1.0; 48], &bad, 1e6),
            Err(LevellingError::SecurityRefresh(_))
        ));
        let sr = SecurityRefresh {
            region_lines: 64,
            sub_regions: 128,
            ..SecurityRefresh::DEFAULT
        };
        assert!(matches!(
            writes_to_failure(&[1.0; 64], &sr, 1e6),
            Err(LevellingError::SecurityRefresh(_))
        ));
        // A last region shorter than the others is padded, and says so.
        let sr = SecurityRefresh {
            region_lines: 64,
            sub_regions: 4,
            ..SecurityRefresh::DEFAULT
        };
        assert_eq!(sr.padding_lines(96), 32);
        assert!(writes_to_failure(&[1.0; 96], &sr, 1e4).unwrap() > 0.0);
    }
}
