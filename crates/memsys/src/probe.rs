//! Seed 002's analysing program on a real machine: recover which physical
//! address bits select the bank (channel, rank, bank group and bank
//! together) from the latency of pairs of uncached accesses, the
//! row-conflict method of DRAMA (Pessl et al., USENIX Security 2016).
//!
//! Two addresses in the same bank but different rows evict each other's
//! open row, so accessing them alternately is slower than any other pair.
//! The program:
//!
//! 1. times `base` against a random pool of addresses and splits the
//!    latencies in two (the split maximising the between-class variance).
//!    If the two classes are not clearly apart (separation below
//!    [`MIN_SEPARATION`] pooled standard deviations) or the slow class is
//!    not a plausible bank's share, there is no row-conflict signal and the
//!    program says so instead of guessing;
//! 2. the slow set `C` (same bank as `base`, other row) fixes the bank
//!    functions: every XOR mask `m` with `parity(m & (x ^ base)) = 0` for
//!    all `x` in `C`, i.e. the GF(2) null space of the differences, found
//!    exactly by elimination; a low-weight basis is reported;
//! 3. each remaining bit `b` is flipped together with the pivot bits that
//!    keep every function unchanged: slow means `b` changes the row, fast
//!    means it is a column bit;
//! 4. a fresh sample checks the result: the fraction of pairs whose
//!    latency class the recovered mapping predicts is the confidence, and
//!    a mapping is emitted only if it reaches [`MIN_CONFIDENCE`].
//!
//! Row conflicts cannot tell a channel bit from a rank, bank-group or bank
//! bit (all of them only say "another bank"), so every function is
//! emitted as a bank bit of one flat group; bits 0..=5 (within a cache
//! line) cannot be timed and are assumed to be the 8-byte offset and the
//! low column bits. Modulo (non-power-of-two) channel interleaves are not
//! GF(2)-linear; the check in step 4 fails on them and no mapping is
//! emitted.
//!
//! The same code runs on simulated timing ([`SimTimer`]: this crate's
//! controller model of a [`Machine`]) and, on x86-64 Linux as root, on the
//! hardware ([`HwTimer`]: `clflush`, fenced loads, `rdtscp`, physical
//! addresses from `/proc/self/pagemap`).

use std::collections::HashMap;

use crate::{Controller, ControllerError, Field, Machine};

/// Cache-line size: bits below this cannot be told apart by timing.
pub const LINE_BITS: u32 = 6;
/// Pooled standard deviations the two latency classes must be apart.
pub const MIN_SEPARATION: f64 = 4.0;
/// Fraction of check pairs the mapping must predict to be emitted.
pub const MIN_CONFIDENCE: f64 = 0.98;

/// Why the probe stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The timing model refused.
    #[error("timing model")]
    Model(#[from] ControllerError),
    /// An address outside what the timer can reach.
    #[error("address {0:#x} is not available to the timer")]
    Unavailable(u64),
    /// Reading or mapping memory failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The machine cannot run the hardware probe.
    #[error("{0}")]
    Unsupported(String),
    /// Too few addresses to work with.
    #[error("only {0} usable addresses; need at least 64")]
    TooFew(usize),
}

/// Times pairs of uncached accesses.
pub trait Timer {
    /// Physical address bits the memory spans (addresses are below `2^bits`).
    fn address_bits(&self) -> u32;
    /// Whether the timer can access physical address `paddr`.
    fn contains(&self, paddr: u64) -> bool;
    /// Up to `n` distinct cache-line-aligned physical addresses it can
    /// access, spread over its memory, chosen with `seed`.
    fn pool(&mut self, n: usize, seed: u64) -> Vec<u64>;
    /// Latency (any unit, consistently) of accessing `a` and `b`
    /// alternately, both uncached.
    fn pair(&mut self, a: u64, b: u64) -> Result<f64, ProbeError>;
}

/// What the probe found.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbeReport {
    /// Pairs timed in step 1.
    pub pool: usize,
    /// Latency threshold between the classes.
    pub threshold: f64,
    /// Mean latency of the fast and the slow class.
    pub fast_mean: f64,
    /// Mean latency of the slow class.
    pub slow_mean: f64,
    /// `(slow − fast) / pooled standard deviation` (infinite when both
    /// classes are exact, as on the model).
    pub separation: f64,
    /// Addresses in the slow class.
    pub conflicts: usize,
    /// Whether a row-conflict signal was found at all.
    pub signal: bool,
    /// Bank functions (XOR masks of address bits), low weight first.
    pub functions: Vec<u64>,
    /// Bits that change the row.
    pub row_bits: Vec<u32>,
    /// Bits (at or above [`LINE_BITS`]) that change only the column.
    pub column_bits: Vec<u32>,
    /// Fraction of check pairs the mapping predicts.
    pub confidence: f64,
    /// Check pairs timed.
    pub checked: usize,
    /// The verdict in words.
    pub verdict: String,
    /// A memsys preset with the mapping, when confidence allows.
    pub preset_toml: Option<String>,
}

fn parity(x: u64) -> bool {
    x.count_ones() % 2 == 1
}

/// GF(2) null space of `rows` (each a bit vector over bits `lo..hi`): every
/// mask over those bits orthogonal to all rows, as a basis.
fn null_space(rows: &[u64], lo: u32, hi: u32) -> Vec<u64> {
    // Row-reduce, remembering pivot columns.
    let mut basis: Vec<(u32, u64)> = Vec::new(); // (pivot bit, row)
    for &r in rows {
        let mut r = r;
        for &(p, b) in &basis {
            if r >> p & 1 == 1 {
                r ^= b;
            }
        }
        if r == 0 {
            continue;
        }
        let p = 63 - r.leading_zeros();
        // Keep the basis fully reduced on pivots.
        for e in basis.iter_mut() {
            if e.1 >> p & 1 == 1 {
                e.1 ^= r;
            }
        }
        basis.push((p, r));
    }
    let pivots: u64 = basis.iter().fold(0, |m, &(p, _)| m | 1 << p);
    // One null vector per free column f: e_f plus, for each pivot row
    // containing f, its pivot.
    (lo..hi)
        .filter(|f| pivots >> f & 1 == 0)
        .map(|f| {
            basis
                .iter()
                .filter(|&&(_, b)| b >> f & 1 == 1)
                .fold(1u64 << f, |m, &(p, _)| m | 1 << p)
        })
        .collect()
}

/// A basis of the span of `basis` made of low-weight vectors, each with a
/// distinct lowest bit that no other vector contains (its pivot).
fn nice_basis(basis: &[u64]) -> Vec<u64> {
    let k = basis.len();
    if k == 0 {
        return Vec::new();
    }
    let mut all: Vec<u64> = (1u64..1 << k.min(16))
        .map(|s| {
            (0..k)
                .filter(|i| s >> i & 1 == 1)
                .fold(0, |m, i| m ^ basis[i])
        })
        .collect();
    all.sort_by_key(|v| (v.count_ones(), *v));
    // Greedy independent low-weight vectors.
    let mut chosen: Vec<u64> = Vec::new();
    let mut reduced: Vec<(u32, u64)> = Vec::new();
    for v in all {
        let mut r = v;
        for &(p, b) in &reduced {
            if r >> p & 1 == 1 {
                r ^= b;
            }
        }
        if r != 0 {
            reduced.push((63 - r.leading_zeros(), r));
            chosen.push(v);
        }
        if chosen.len() == k {
            break;
        }
    }
    // Reduce on lowest bits so each vector's lowest bit is its own.
    chosen.sort_by_key(|v| v.trailing_zeros());
    for i in 0..chosen.len() {
        let p = chosen[i].trailing_zeros();
        for j in 0..chosen.len() {
            if j != i && chosen[j] >> p & 1 == 1 {
                chosen[j] ^= chosen[i];
            }
        }
    }
    chosen.sort_by_key(|v| (v.trailing_zeros(), *v));
    chosen
}

/// Split sorted latencies in two maximising between-class variance.
fn split(sorted: &[f64]) -> (usize, f64) {
    let n = sorted.len();
    let total: f64 = sorted.iter().sum();
    let (mut best, mut at) = (-1.0, n);
    let mut left = 0.0;
    for i in 1..n {
        left += sorted[i - 1];
        if sorted[i] == sorted[i - 1] {
            continue;
        }
        let (w0, w1) = (i as f64, (n - i) as f64);
        let (m0, m1) = (left / w0, (total - left) / w1);
        let between = w0 * w1 * (m1 - m0).powi(2);
        if between > best {
            best = between;
            at = i;
        }
    }
    let threshold = if at < n {
        (sorted[at - 1] + sorted[at]) / 2.0
    } else {
        f64::INFINITY
    };
    (at, threshold)
}

fn stats(xs: &[f64]) -> (f64, f64) {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var)
}

/// Run the analysing program with `timer`: `pool` addresses in step 1,
/// `checks` pairs in step 4, randomness from `seed`.
pub fn probe(
    timer: &mut dyn Timer,
    pool: usize,
    checks: usize,
    seed: u64,
) -> Result<ProbeReport, ProbeError> {
    let addrs = timer.pool(pool, seed);
    if addrs.len() < 64 {
        return Err(ProbeError::TooFew(addrs.len()));
    }
    let bits = timer.address_bits();
    let base = addrs[0];
    let mut lat = Vec::with_capacity(addrs.len() - 1);
    for &x in &addrs[1..] {
        lat.push((x, timer.pair(base, x)?));
    }
    let mut sorted: Vec<f64> = lat.iter().map(|l| l.1).collect();
    sorted.sort_by(f64::total_cmp);
    let (at, threshold) = split(&sorted);
    let (fast_mean, fast_var) = stats(&sorted[..at]);
    let (slow_mean, slow_var) = stats(&sorted[at.min(sorted.len())..]);
    let pooled = ((fast_var * at as f64 + slow_var * (sorted.len() - at) as f64)
        / sorted.len() as f64)
        .sqrt();
    let separation = if pooled > 0.0 {
        (slow_mean - fast_mean) / pooled
    } else if slow_mean > fast_mean {
        f64::INFINITY
    } else {
        0.0
    };
    let slow: Vec<u64> = lat
        .iter()
        .filter(|l| l.1 > threshold)
        .map(|l| l.0)
        .collect();
    let share = slow.len() as f64 / lat.len() as f64;
    let mut report = ProbeReport {
        pool: lat.len(),
        threshold,
        fast_mean,
        slow_mean,
        separation,
        conflicts: slow.len(),
        signal: false,
        functions: Vec::new(),
        row_bits: Vec::new(),
        column_bits: Vec::new(),
        confidence: 0.0,
        checked: 0,
        verdict: String::new(),
        preset_toml: None,
    };
    // A bank takes 1/banks of random addresses: at most a half (2 banks),
    // and enough samples to pin the functions down.
    if separation < MIN_SEPARATION || share > 0.5 || slow.len() < 16 {
        report.verdict = format!(
            "no row-conflict signal: latencies split {:.1} vs {:.1} ({} of {} slow), separation {:.2} < {} or implausible slow share; no mapping reported",
            fast_mean, slow_mean, slow.len(), lat.len(), separation, MIN_SEPARATION
        );
        return Ok(report);
    }
    report.signal = true;
    // The null space pins the functions only once the slow set spans all
    // other bits: keep timing fresh addresses against the threshold until
    // it holds twice as many addresses as there are bits (or 16 pools).
    let mut slow = slow;
    let mut round = 1u64;
    while slow.len() < 2 * bits as usize && round < 16 {
        for x in timer.pool(
            pool,
            seed.wrapping_add(round.wrapping_mul(0x5851_f42d_4c95_7f2d)),
        ) {
            if x != base && timer.pair(base, x)? > threshold {
                slow.push(x);
            }
        }
        round += 1;
    }
    report.conflicts = slow.len();
    let diffs: Vec<u64> = slow
        .iter()
        .map(|&x| (x ^ base) >> LINE_BITS << LINE_BITS)
        .collect();
    let functions = nice_basis(&null_space(&diffs, LINE_BITS, bits));
    let same_bank = |a: u64, b: u64| functions.iter().all(|&f| !parity(f & (a ^ b)));
    // Step 3: classify every non-pivot bit.
    let pivots: u64 = functions.iter().fold(0, |m, f| m | 1 << f.trailing_zeros());
    for b in LINE_BITS..bits {
        if pivots >> b & 1 == 1 {
            continue;
        }
        let v = functions
            .iter()
            .filter(|&&f| f >> b & 1 == 1)
            .fold(1u64 << b, |m, f| m ^ (1 << f.trailing_zeros()));
        let Some(&a) = addrs.iter().find(|&&a| timer.contains(a ^ v)) else {
            report.verdict =
                format!("no address pair differs in exactly {v:#x}: bit {b} unclassified");
            return Ok(report);
        };
        if timer.pair(a, a ^ v)? > threshold {
            report.row_bits.push(b);
        } else {
            report.column_bits.push(b);
        }
    }
    // Step 4: predict a fresh sample.
    let row_mask: u64 = report.row_bits.iter().fold(0, |m, b| m | 1 << b);
    let check = timer.pool(checks + 1, seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut right = 0;
    for &x in &check[1..] {
        let predicted = same_bank(x, check[0]) && (x ^ check[0]) & row_mask != 0;
        let measured = timer.pair(check[0], x)? > threshold;
        right += usize::from(predicted == measured);
    }
    report.checked = check.len() - 1;
    report.confidence = right as f64 / report.checked.max(1) as f64;
    report.functions = functions;
    if report.confidence >= MIN_CONFIDENCE {
        report.verdict = format!(
            "{} bank functions ({} banks), {} row bits, {} column bits; {:.1} % of {} check pairs predicted",
            report.functions.len(),
            1u64 << report.functions.len(),
            report.row_bits.len(),
            report.column_bits.len(),
            100.0 * report.confidence,
            report.checked
        );
        report.preset_toml = Some(preset_toml(&report, bits));
    } else {
        report.verdict = format!(
            "functions do not predict the latencies ({:.1} % of {} check pairs < {} %): not GF(2)-linear (a modulo interleave?) or noise; no mapping reported",
            100.0 * report.confidence,
            report.checked,
            100.0 * MIN_CONFIDENCE
        );
    }
    Ok(report)
}

fn bit_list(bits: &[u32]) -> String {
    bits.iter()
        .map(|b| b.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A preset TOML for the recovered mapping, with DDR4-2400 timings as a
/// placeholder the user must replace (timing is not what the probe finds).
fn preset_toml(r: &ProbeReport, bits: u32) -> String {
    let bank: Vec<String> = r
        .functions
        .iter()
        .map(|&f| {
            let set: Vec<u32> = (0..64).filter(|b| f >> b & 1 == 1).collect();
            if set.len() == 1 {
                set[0].to_string()
            } else {
                format!("[{}]", bit_list(&set))
            }
        })
        .collect();
    let mut column: Vec<u32> = (3..LINE_BITS).collect();
    column.extend(&r.column_bits);
    let frames = (1u64 << bits) / 4096;
    format!(
        "# Recovered by `nvmos probe banks` (row-conflict method, DRAMA, USENIX Security 2016).\n\
         # Confidence {conf:.3} over {checked} check pairs; separation {sep:.1}.\n\
         # Row conflicts do not tell channel, rank, bank-group and bank bits apart:\n\
         # all bank-selecting functions are listed as `bank`. Bits 0..=5 are not\n\
         # measurable (one cache line) and are assumed offset 0..=2, column 3..=5.\n\
         # The timings are DDR4-2400 (JESD79-4) defaults, not measured.\n\
         name = \"probed\"\n\
         description = \"bank mapping recovered by nvmos probe banks\"\n\
         page_size = 4096\n\
         zones = [ {{ name = \"Normal\", start_pfn = 0, end_pfn = {frames}, technology = \"dram\" }} ]\n\n\
         [organisation]\nchannels = 1\nranks = 1\nbank_groups = 1\nbanks = {banks}\nrows = {rows}\ncolumns = {columns}\nbytes_per_column = 8\n\n\
         [mapping]\noffset = [\"0..=2\"]\ncolumn = [{col}]\nbank = [{bank}]\nrow = [{row}]\n\n\
         [timing.dram]\ntCK_ps = 833\ntRCD = 17\ntCL = 17\ntRP = 17\ntRAS = 39\ntWR = 18\nburst_length = 8\ntCWL = 12\ntRTP = 9\ntWTR = 9\ntCCD = 4\ntRRD = 4\ntFAW = 26\n",
        conf = r.confidence,
        checked = r.checked,
        sep = r.separation,
        banks = 1u64 << r.functions.len(),
        rows = 1u64 << r.row_bits.len(),
        columns = 1u64 << column.len(),
        col = bit_list(&column),
        bank = bank.join(", "),
        row = bit_list(&r.row_bits),
    )
}

/// The model's timing: alternate accesses to two addresses through a fresh
/// controller, one outstanding at a time, as the seed's program does.
pub struct SimTimer<'m> {
    machine: &'m Machine,
    bits: u32,
}

impl<'m> SimTimer<'m> {
    /// Time on `machine`'s controller model.
    pub fn new(machine: &'m Machine) -> SimTimer<'m> {
        SimTimer {
            machine,
            bits: 64 - (machine.memory_bytes() - 1).leading_zeros(),
        }
    }

    /// The GF(2) span of every bank-selecting mask of the machine's
    /// mapping (channel, rank, bank group, bank), as a basis: what the
    /// probe should recover.
    pub fn bank_masks(machine: &Machine) -> Vec<u64> {
        let m = machine.mapping();
        [Field::Channel, Field::Rank, Field::BankGroup, Field::Bank]
            .into_iter()
            .flat_map(|f| m.masks(f).to_vec())
            .collect()
    }
}

impl Timer for SimTimer<'_> {
    fn address_bits(&self) -> u32 {
        self.bits
    }

    fn contains(&self, paddr: u64) -> bool {
        paddr < self.machine.memory_bytes()
    }

    fn pool(&mut self, n: usize, seed: u64) -> Vec<u64> {
        // splitmix64: reproducible and enough for picking addresses.
        let mut s = seed;
        let lines = self.machine.memory_bytes() >> LINE_BITS;
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(n);
        while out.len() < n.min(lines as usize) {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let a = (z % lines) << LINE_BITS;
            if seen.insert(a) {
                out.push(a);
            }
        }
        out
    }

    fn pair(&mut self, a: u64, b: u64) -> Result<f64, ProbeError> {
        for x in [a, b] {
            if !self.contains(x) {
                return Err(ProbeError::Unavailable(x));
            }
        }
        let rounds = 4;
        let (cycles, _) = Controller::alternating_latencies(self.machine, a, b, rounds)?;
        let sum: u64 = cycles.iter().sum();
        Ok(sum as f64 / f64::from(2 * rounds - 2))
    }
}

/// The hardware: a buffer of this process, its physical addresses from
/// `/proc/self/pagemap` (root), and `rdtscp`-timed pairs of `clflush`ed
/// loads. x86-64 Linux only.
pub struct HwTimer {
    /// Physical page → virtual address of that page in the buffer.
    pages: HashMap<u64, usize>,
    sorted: Vec<u64>,
    bits: u32,
    buffer: *mut u8,
    len: usize,
    /// Repetitions per pair; the median of the per-round times is taken.
    pub rounds: usize,
}

impl HwTimer {
    /// Map and touch `bytes` of memory and read its physical addresses.
    /// `address_bits`: the physical address width to analyse (e.g. from
    /// the machine's RAM size).
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    pub fn new(bytes: usize, address_bits: u32) -> Result<HwTimer, ProbeError> {
        use std::io::{Read, Seek, SeekFrom};
        const PAGE: usize = 4096;
        let len = bytes / PAGE * PAGE;
        // SAFETY: an anonymous private mapping; checked for failure.
        let buffer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if buffer == libc::MAP_FAILED {
            return Err(ProbeError::Io {
                what: format!("mapping a {len}-byte buffer"),
                source: std::io::Error::last_os_error(),
            });
        }
        let buffer = buffer as *mut u8;
        let mut timer = HwTimer {
            pages: HashMap::new(),
            sorted: Vec::new(),
            bits: address_bits,
            buffer,
            len,
            rounds: 200,
        };
        // Touch every page with distinct data so none is the shared zero page.
        for (i, off) in (0..len).step_by(PAGE).enumerate() {
            // SAFETY: inside the mapping.
            unsafe { buffer.add(off).write_volatile(i as u8 | 1) };
        }
        let io = |what: &str, source| ProbeError::Io {
            what: what.to_string(),
            source,
        };
        let mut pagemap = std::fs::File::open("/proc/self/pagemap")
            .map_err(|e| io("opening /proc/self/pagemap", e))?;
        let first = buffer as u64 / PAGE as u64;
        pagemap
            .seek(SeekFrom::Start(first * 8))
            .map_err(|e| io("seeking /proc/self/pagemap", e))?;
        let mut raw = vec![0u8; len / PAGE * 8];
        pagemap
            .read_exact(&mut raw)
            .map_err(|e| io("reading /proc/self/pagemap", e))?;
        for (i, entry) in raw.chunks_exact(8).enumerate() {
            let e = u64::from_le_bytes(entry.try_into().expect("8 bytes"));
            let present = e >> 63 & 1 == 1;
            let pfn = e & ((1 << 55) - 1);
            if present && pfn != 0 {
                timer.pages.insert(pfn, buffer as usize + i * PAGE);
            }
        }
        if timer.pages.is_empty() {
            return Err(ProbeError::Unsupported(
                "/proc/self/pagemap shows no page frame numbers (they are hidden from non-root users)".into(),
            ));
        }
        timer.sorted = timer.pages.keys().copied().collect();
        timer.sorted.sort_unstable();
        Ok(timer)
    }

    /// Not available off x86-64 Linux.
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    pub fn new(_bytes: usize, _address_bits: u32) -> Result<HwTimer, ProbeError> {
        Err(ProbeError::Unsupported(
            "the hardware probe needs x86-64 Linux (clflush, rdtscp, pagemap)".into(),
        ))
    }

    /// Physical pages of the buffer.
    pub fn frames(&self) -> usize {
        self.pages.len()
    }

    fn vaddr(&self, paddr: u64) -> Option<*const u8> {
        self.pages
            .get(&(paddr >> 12))
            .map(|&v| (v + (paddr & 0xfff) as usize) as *const u8)
    }
}

impl Drop for HwTimer {
    fn drop(&mut self) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe {
            libc::munmap(self.buffer as *mut libc::c_void, self.len);
        }
    }
}

impl Timer for HwTimer {
    fn address_bits(&self) -> u32 {
        self.bits
    }

    fn contains(&self, paddr: u64) -> bool {
        self.pages.contains_key(&(paddr >> 12))
    }

    fn pool(&mut self, n: usize, seed: u64) -> Vec<u64> {
        let mut s = seed;
        let mut out = Vec::with_capacity(n);
        let mut seen = std::collections::HashSet::new();
        let want = n.min(self.sorted.len() * 64);
        while out.len() < want {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let page = self.sorted[(z % self.sorted.len() as u64) as usize];
            let a = page << 12 | ((z >> 40) & 63) << LINE_BITS;
            if seen.insert(a) {
                out.push(a);
            }
        }
        out
    }

    fn pair(&mut self, a: u64, b: u64) -> Result<f64, ProbeError> {
        let (Some(va), Some(vb)) = (self.vaddr(a), self.vaddr(b)) else {
            return Err(ProbeError::Unavailable(if self.contains(a) {
                b
            } else {
                a
            }));
        };
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__rdtscp, _mm_clflush, _mm_mfence};
            let mut times = Vec::with_capacity(self.rounds);
            let mut aux = 0u32;
            for _ in 0..self.rounds {
                // SAFETY: va and vb point into the live buffer; clflush,
                // mfence and rdtscp exist on every x86-64 this runs on.
                unsafe {
                    _mm_clflush(va);
                    _mm_clflush(vb);
                    _mm_mfence();
                    let t0 = __rdtscp(&mut aux);
                    std::ptr::read_volatile(va);
                    std::ptr::read_volatile(vb);
                    _mm_mfence();
                    let t1 = __rdtscp(&mut aux);
                    times.push((t1 - t0) as f64);
                }
            }
            times.sort_by(f64::total_cmp);
            Ok(times[times.len() / 2])
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (va, vb);
            Err(ProbeError::Unsupported("timing needs x86-64".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span_equal(a: &[u64], b: &[u64]) -> bool {
        let rank = |v: &[u64]| {
            let mut basis: Vec<u64> = Vec::new();
            for &x in v {
                let mut r = x;
                for &b in &basis {
                    r = r.min(r ^ b);
                }
                if r != 0 {
                    basis.push(r);
                    basis.sort_unstable_by(|x, y| y.cmp(x));
                }
            }
            basis.len()
        };
        let both: Vec<u64> = a.iter().chain(b).copied().collect();
        rank(a) == rank(b) && rank(&both) == rank(a)
    }

    fn recovers(name: &str) {
        let m = Machine::preset(name).unwrap();
        let mut timer = SimTimer::new(&m);
        let r = probe(&mut timer, 600, 200, 1).unwrap();
        assert!(r.signal, "{name}: {r:?}");
        let expected = SimTimer::bank_masks(&m);
        assert!(
            span_equal(&r.functions, &expected),
            "{name}: found {:x?}, preset {:x?}",
            r.functions,
            expected
        );
        let rows: Vec<u32> = (0..64)
            .filter(|b| m.mapping().masks(Field::Row).iter().any(|&x| x == 1 << b))
            .collect();
        assert_eq!(r.row_bits, rows, "{name}");
        assert_eq!(r.confidence, 1.0, "{name}: {r:?}");
        // The emitted preset loads and decodes banks as the original does.
        let probed = Machine::from_toml_str(r.preset_toml.as_ref().unwrap(), "probed").unwrap();
        let bank = |mm: &Machine, a: u64| mm.bank_index(&mm.decode(a).unwrap());
        let pool = timer.pool(2000, 99);
        for &a in &pool {
            for &b in &pool[..20] {
                assert_eq!(
                    bank(&m, a) == bank(&m, b),
                    bank(&probed, a) == bank(&probed, b)
                );
            }
        }
    }

    #[test]
    fn recovers_ddr4_2400() {
        recovers("ddr4-2400");
    }

    #[test]
    fn recovers_coffeelake_xor() {
        recovers("coffeelake-xor");
    }

    #[test]
    fn recovers_pcm_lee2009() {
        recovers("pcm-lee2009");
    }

    #[test]
    fn the_modulo_interleave_is_not_presented_as_a_mapping() {
        let m = Machine::preset("xeon-3ch").unwrap();
        // 96 banks: a pool of 3000 gives about 30 conflicts, a signal.
        let r = probe(&mut SimTimer::new(&m), 3000, 200, 1).unwrap();
        assert!(r.signal, "{r:?}");
        // Not GF(2)-linear: the check must refuse it.
        assert!(r.preset_toml.is_none(), "{r:?}");
        assert!(r.confidence < MIN_CONFIDENCE, "{r:?}");
    }

    /// Noise: latencies from a timer with no bank structure.
    struct Noise(u64);
    impl Timer for Noise {
        fn address_bits(&self) -> u32 {
            30
        }
        fn contains(&self, _: u64) -> bool {
            true
        }
        fn pool(&mut self, n: usize, seed: u64) -> Vec<u64> {
            (0..n as u64)
                .map(|i| ((i * 7919 + seed) % (1 << 24)) << 6)
                .collect()
        }
        fn pair(&mut self, _: u64, _: u64) -> Result<f64, ProbeError> {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            Ok(200.0 + (self.0 >> 33) as f64 % 40.0)
        }
    }

    #[test]
    fn noise_is_not_a_mapping() {
        let r = probe(&mut Noise(3), 600, 200, 1).unwrap();
        assert!(!r.signal, "{r:?}");
        assert!(r.functions.is_empty() && r.preset_toml.is_none());
    }
}
