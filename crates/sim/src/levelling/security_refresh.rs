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

use std::collections::{BTreeSet, HashMap};

use rand::{rngs::StdRng, Rng, SeedableRng};

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

    fn validate(&self, lines: u64) -> Result<(), LevellingError> {
        let ok = self.region_lines.is_power_of_two()
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

    /// Refuses an endurance that would take more than [`MAX_ROUNDS`]
    /// refresh rounds per region to simulate. Every line is written once
    /// per `interval` writes per line, so a region fails within
    /// E / interval rounds; the simulation's cost grows with that count,
    /// so it is bounded rather than left to run for hours.
    pub fn check_rounds(&self, endurance: f64) -> Result<(), LevellingError> {
        let interval = self.outer_interval.unwrap_or(self.inner_interval).max(1);
        let rounds = endurance / interval as f64;
        if rounds > MAX_ROUNDS as f64 {
            return Err(LevellingError::TooManyRounds {
                endurance,
                interval,
                rounds,
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
    let total: f64 = rates.iter().sum();
    let mut w = f64::INFINITY;
    for (r, region) in rates.chunks(sr.region_lines as usize).enumerate() {
        let share: f64 = region.iter().sum::<f64>() / total;
        if share > 0.0 {
            let t = if region.len() as u64 == sr.region_lines {
                region_writes_to_failure(region, sr, r as u64, endurance)
            } else {
                let mut padded = region.to_vec();
                padded.resize(sr.region_lines as usize, 0.0);
                region_writes_to_failure(&padded, sr, r as u64, endurance)
            };
            w = w.min(t / share);
        }
    }
    Ok(w)
}

/// One written line.
struct Line {
    /// Its share of the region's writes.
    g: f64,
    /// Physical line (within the region) it sits at.
    phys: u64,
    /// Time (region writes) its wear was last flushed.
    since: f64,
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
    /// Offset within the sub-region → index of the written line there.
    lines: HashMap<u64, usize>,
    /// Written lines not yet remapped this round: (step, offset).
    pending: BTreeSet<(u64, u64)>,
    rng: StdRng,
}

struct Region<'a> {
    s: u64,
    interval: f64,
    endurance: f64,
    lines: Vec<Line>,
    subs: Vec<Sub>,
    wear: &'a mut HashMap<u64, f64>,
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
        let w = self.wear.entry(phys).or_insert(0.0);
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
        loop {
            let sub = &mut self.subs[j];
            if sub.tau >= t {
                return;
            }
            if sub.rho <= 0.0 {
                sub.tau = t;
                return;
            }
            let target = sub.pending.first().map_or(s - 1, |&(c, _)| c);
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
            sub.ptr = target + 1;
            sub.part = 0.0;
            let now = sub.tau;
            let mut moved = Vec::new();
            while let Some(&(c, off)) = sub.pending.first() {
                if c != target {
                    break;
                }
                sub.pending.pop_first();
                moved.push(sub.lines[&off]);
            }
            // The wear up to the step lands where the line was (the step
            // has not happened yet for `swaps`: flush before moving on).
            sub.ptr = target;
            for &i in &moved {
                self.flush(i, now);
            }
            let sub = &mut self.subs[j];
            sub.ptr = target + 1;
            let base = j as u64 * s;
            for &i in &moved {
                let off = self.lines[i].phys - base;
                // It sat at off ^ kp... recover its offset from the
                // physical line and move it to offset ^ kc.
                let o = off ^ sub.kp;
                self.lines[i].phys = base + (o ^ sub.kc);
            }
            if sub.ptr == s {
                if sub.kp != sub.kc {
                    sub.swap_rounds += 1;
                }
                sub.kp = sub.kc;
                sub.kc = sub.rng.gen_range(0..s);
                sub.ptr = 0;
                let d = sub.kp ^ sub.kc;
                if d != 0 {
                    let pending: Vec<(u64, u64)> =
                        sub.lines.keys().map(|&o| (o.min(o ^ d), o)).collect();
                    sub.pending.extend(pending);
                }
            }
        }
    }

    /// Take the written line at intermediate address `x` out of its
    /// sub-region at time `now`.
    fn remove(&mut self, x: u64, now: f64) -> usize {
        let j = (x / self.s) as usize;
        self.advance(j, now);
        let off = x % self.s;
        let sub = &mut self.subs[j];
        let i = sub.lines.remove(&off).expect("a written line sits there");
        let d = sub.kp ^ sub.kc;
        sub.pending.remove(&(off.min(off ^ d), off));
        sub.rho -= self.lines[i].g;
        if sub.lines.is_empty() {
            sub.rho = 0.0;
        }
        self.flush(i, now);
        i
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
            sub.pending.insert((step, off));
        }
        sub.lines.insert(off, i);
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
    let mut wear = HashMap::new();
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
                    lines: HashMap::new(),
                    pending: BTreeSet::new(),
                    rng,
                }
            })
            .collect(),
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
            });
            logical.push(m as u64);
            reg.insert(i, m as u64 ^ okp, 0.0);
        }
    }
    // One outer round at a time (or, with no outer level, a check period
    // of the same length as an inner round of the whole region).
    let round = sr.outer_interval.unwrap_or(sr.inner_interval) as f64 * n as f64;
    let mut start = 0.0f64;
    let mut events: Vec<(u64, usize)> = Vec::new();
    loop {
        let d = okp ^ okc;
        if let (Some(o), true) = (sr.outer_interval, d != 0) {
            events.clear();
            events.extend(logical.iter().enumerate().map(|(i, &m)| (m.min(m ^ d), i)));
            events.sort_unstable();
            let mut k = 0;
            while k < events.len() {
                let c = events[k].0;
                let now = start + (c + 1) as f64 * o as f64;
                let mut group = Vec::new();
                while k < events.len() && events[k].0 == c {
                    let i = events[k].1;
                    let x = reg.remove(logical[i] ^ okp, now);
                    group.push(x);
                    k += 1;
                }
                for i in group {
                    reg.insert(i, logical[i] ^ okc, now);
                }
            }
        }
        let end = start + round;
        for j in 0..reg.subs.len() {
            reg.advance(j, end);
        }
        for i in 0..reg.lines.len() {
            reg.flush(i, end);
        }
        if sr.outer_interval.is_some() {
            if d != 0 {
                reg.outer_rounds += 1;
            }
            okp = okc;
            okc = orng.gen_range(0..n);
        }
        if reg.failure <= end {
            return reg.failure;
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
