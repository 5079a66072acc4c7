//! `nvmos kernel bench`: the policies' cost per page-allocation request,
//! measured inside the kernel.
//!
//! The series' benchmark (`mm/nvmos_bench.c`, debugfs `nvmos_bench`) runs
//! the patterns of the user-space benchmark (`bench alloc`: bulk, repeat,
//! rand at order 0, mixed orders) on kernel threads bound to CPUs 0..n-1.
//! Every request is measured two ways:
//!
//! - **guest instructions**, counted by a QEMU TCG plugin
//!   (`tcg/nvmos_tcg.c`, compiled into the cache) between two marker NOPs
//!   around each request, per vCPU. The count does not depend on the
//!   host's speed or load, and is exact per vCPU with any number of them;
//! - **TSC cycles**, read by the guest. Under TCG with `-icount shift=0,sleep=off`
//!   the TSC advances one tick per instruction of *all* vCPUs (they run
//!   in turns on one host thread), so a request on one vCPU is charged
//!   the other vCPUs' instructions whenever a turn ends inside it: the
//!   figures are labelled not real time. Under KVM they would be the
//!   headline, but the plugin needs TCG, and KVM does not run on a host
//!   without vmx/svm; the bench always runs TCG.
//!
//! One guest boots per policy and vCPU count and runs every pattern in
//! turn; the plugin's records and the guest's own request counts are
//! checked against each other. Beside them, the same patterns run in
//! user space through each policy's twin in nvmos' registry
//! ([`user_space_twin`]) with `bench alloc`, timed with the host's TSC.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::run::{self, Accel, Policy, RunOptions};
use crate::{KernelError, Progress, Result};

pub use crate::run::ICOUNT_OPTIONS;

/// The plugin's source, compiled on first use into the cache.
const PLUGIN_SOURCE: &str = include_str!("../tcg/nvmos_tcg.c");

pub use nvmos_sim::bench_alloc::{Op, Pattern};

/// The pattern index the kernel's phase marker carries (`enum
/// nvmos_bench_pattern` in `mm/nvmos_bench.c`).
fn marker_index(p: Pattern) -> u8 {
    match p {
        Pattern::Bulk => 0,
        Pattern::Repeat => 1,
        Pattern::Rand => 2,
        Pattern::Mixed => 3,
    }
}

/// The plugin's record code of a request that ended (`NVMOS_MARK_ALLOC`,
/// `NVMOS_MARK_FREE`).
fn marker_code(op: Op) -> u8 {
    match op {
        Op::Alloc => 2,
        Op::Free => 3,
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// How every guest boots (kernel, memory, QEMU); the policy, CPUs,
    /// `/init` and QEMU arguments are set per guest.
    pub run: RunOptions,
    /// Policies, one guest per policy and vCPU count.
    pub policies: Vec<Policy>,
    /// vCPU counts; the benchmark runs one thread per vCPU.
    pub cpus: Vec<u32>,
    /// Patterns, each run once per guest.
    pub patterns: Vec<Pattern>,
    /// bulk and rand: frames per thread.
    pub count: u64,
    /// repeat: allocate/free pairs per thread.
    pub repeat: u64,
    /// mixed: operations per thread.
    pub mixed: u64,
    /// Run QEMU with `-icount shift=0,sleep=off` (guest time counts instructions: the TSC
    /// counts instructions).
    pub icount: bool,
    /// Also run the patterns in user space through each policy's twin
    /// (`bench alloc`, one round).
    pub user_space: bool,
    /// Guests per policy and vCPU count: the instruction counts of all
    /// runs are compared (they should agree).
    pub runs: u32,
}

impl Options {
    /// Every policy on 1, 2 and 4 vCPUs, every pattern: 32 768 frames per
    /// thread for bulk and rand (512 MiB at 4 threads of the 2 GiB guest),
    /// 20 000 repeat pairs and mixed operations per thread, under icount.
    pub fn new(run: RunOptions) -> Options {
        Options {
            run,
            policies: Policy::ALL.to_vec(),
            cpus: vec![1, 2, 4],
            patterns: Pattern::ALL.to_vec(),
            count: 32_768,
            repeat: 20_000,
            mixed: 20_000,
            icount: true,
            user_space: true,
            runs: 2,
        }
    }

    fn check(&self) -> Result<()> {
        let bad = |m: String| Err(KernelError::Option(m));
        if self.runs == 0 {
            return bad("--runs 0: at least one run".into());
        }
        if self.policies.is_empty() || self.cpus.is_empty() || self.patterns.is_empty() {
            return bad("kernel bench needs at least one policy, vCPU count and pattern".into());
        }
        if let Some(c) = self.cpus.iter().find(|&&c| !(1..=8).contains(&c)) {
            return bad(format!(
                "--cpus {c}: between 1 and 8 (the kernel's NR_CPUS)"
            ));
        }
        for (what, n) in [
            ("--count", self.count),
            ("--repeat", self.repeat),
            ("--mixed", self.mixed),
        ] {
            // The kernel's NVMOS_BENCH_MAX_COUNT.
            if !(1..=1 << 22).contains(&n) {
                return bad(format!("{what} {n}: between 1 and 4194304"));
            }
        }
        // bulk and rand hold count frames per thread at once: at most half
        // of the guest's memory, so that the run measures the allocator
        // and not reclaim.
        let max_threads = u64::from(*self.cpus.iter().max().unwrap_or(&1));
        let held_mib = self.count * max_threads * 4 / 1024;
        if (self.patterns.contains(&Pattern::Bulk) || self.patterns.contains(&Pattern::Rand))
            && held_mib * 2 > self.run.mem_mib
        {
            return bad(format!(
                "--count {} x {max_threads} threads holds {held_mib} MiB: more than half of the guest's {} MiB",
                self.count, self.run.mem_mib
            ));
        }
        Ok(())
    }

    fn count_of(&self, p: Pattern) -> u64 {
        match p {
            Pattern::Bulk | Pattern::Rand => self.count,
            Pattern::Repeat => self.repeat,
            Pattern::Mixed => self.mixed,
        }
    }
}

/// The distribution of one cell's per-request figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Requests measured.
    pub requests: u64,
    /// Mean per request.
    pub mean: f64,
    /// Standard deviation per request.
    pub sd: f64,
    /// Median.
    pub median: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Cell {
    /// How far the runs' means are apart: `(max - min) / min`, percent.
    pub fn spread_pct(&self) -> f64 {
        let min = self.run_means.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.run_means.iter().copied().fold(0.0, f64::max);
        if min > 0.0 {
            100.0 * (max - min) / min
        } else {
            0.0
        }
    }
}

impl Distribution {
    fn of(values: &mut [u32]) -> Distribution {
        if values.is_empty() {
            return Distribution::default();
        }
        values.sort_unstable();
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let var = values
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n;
        let at = |q: f64| f64::from(values[((n - 1.0) * q).round() as usize]);
        Distribution {
            requests: values.len() as u64,
            mean,
            sd: var.sqrt(),
            median: at(0.5),
            p99: at(0.99),
            max: f64::from(values[values.len() - 1]),
        }
    }
}

/// The guest's TSC figures for one cell, summed over its threads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tsc {
    /// Requests made (refused ones included).
    pub requests: u64,
    /// Requests the allocator refused (not in the mean).
    pub refused: u64,
    /// Mean TSC cycles per served request.
    pub mean: f64,
    /// Standard deviation; `None` when a thread's sum of squares
    /// saturated.
    pub sd: Option<f64>,
}

/// One pattern's requests of one kind, under one policy and vCPU count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The policy booted.
    pub policy: Policy,
    /// vCPUs (and benchmark threads).
    pub cpus: u32,
    /// The pattern.
    pub pattern: Pattern,
    /// `alloc` or `free`.
    pub kind: Op,
    /// Guest instructions per request (the plugin's counts), first run.
    pub instructions: Distribution,
    /// The mean instructions per request of every run, first run first.
    pub run_means: Vec<f64>,
    /// TSC cycles per request (the guest's own timing; not real time
    /// under TCG).
    pub tsc: Tsc,
}

/// One pattern's requests of one kind in user space (`bench alloc`),
/// through the registry's twin of a policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserCell {
    /// The policy whose twin ran.
    pub policy: Policy,
    /// The twin's registry name.
    pub allocator: String,
    /// Threads (and the allocator's CPUs).
    pub threads: u32,
    /// The pattern.
    pub pattern: Pattern,
    /// `alloc` or `free`.
    pub kind: Op,
    /// Requests timed.
    pub requests: u64,
    /// Mean host TSC cycles per request.
    pub mean_cycles: f64,
    /// Their standard deviation.
    pub sd_cycles: f64,
}

/// The user-space allocator of the same design as `policy`, in nvmos'
/// registry: Linux's pcp lists for `buddy`, the same names otherwise.
pub fn user_space_twin(policy: Policy) -> nvmos_sim::AllocatorKind {
    use nvmos_sim::AllocatorKind as K;
    match policy {
        Policy::Buddy => K::LinuxPcp,
        Policy::IBuddy => K::IBuddy,
        Policy::Lis1 => K::Lis1,
        Policy::Lis31 => K::Lis31,
        Policy::Lis31Fair => K::Lis31Fair,
        // The bench's patterns allocate and free; no pass runs in user space.
        Policy::Adaptive | Policy::AdaptiveMigrate => K::Adaptive,
        Policy::M3 => K::M3Part,
    }
}

/// The patterns in user space: every policy's twin at every thread
/// count. bulk and rand hold half of the memory, so the memory is twice
/// the frames the largest thread count holds in the kernel.
fn user_space(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Vec<UserCell>> {
    use nvmos_sim::bench_alloc::{self as ba, BenchAllocOptions, BenchAllocator};
    let max_threads = u64::from(*opts.cpus.iter().max().unwrap_or(&1));
    let ua = BenchAllocOptions {
        frames: 2 * opts.count * max_threads,
        allocators: opts
            .policies
            .iter()
            .map(|&p| BenchAllocator::Nvmos(user_space_twin(p)))
            .collect(),
        threads: opts.cpus.clone(),
        patterns: opts.patterns.clone(),
        rounds: 1,
        repeat: opts.repeat,
        mixed_ops: opts.mixed,
        ..BenchAllocOptions::default()
    };
    progress(Progress::Step(format!(
        "user space: bench alloc over {} frames",
        ua.frames
    )));
    let r = ba::run(&ua, &mut |_| {})
        .map_err(|e| KernelError::Option(format!("the user-space benchmark: {e}")))?;
    let mut out = Vec::new();
    for c in &r.cells {
        let Some(&policy) = opts
            .policies
            .iter()
            .find(|&&p| BenchAllocator::Nvmos(user_space_twin(p)) == c.allocator)
        else {
            continue;
        };
        let pattern = c.pattern;
        for op in [&c.alloc, &c.free] {
            out.push(UserCell {
                policy,
                allocator: c.allocator.name().to_owned(),
                threads: c.threads,
                pattern,
                kind: op.op,
                requests: op.requests,
                mean_cycles: op.mean_cycles,
                sd_cycles: op.sd_cycles,
            });
        }
    }
    Ok(out)
}

/// One guest's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuestInfo {
    /// The policy booted.
    pub policy: Policy,
    /// vCPUs.
    pub cpus: u32,
    /// Which run (from 1).
    pub run: u32,
    /// Host seconds from QEMU's start to the guest's init.
    pub boot_s: f64,
    /// Host seconds for the whole guest.
    pub host_s: f64,
    /// The plugin's records (one per request).
    pub records: u64,
    /// Markers that did not pair (a begin without its end or the
    /// reverse): requests the plugin could not measure.
    pub unpaired_markers: u64,
    /// Bytes of the plugin's output.
    pub plugin_bytes: u64,
}

/// Seed 000's Table 2, lazy buddy against lazy iBuddy, in the kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// vCPUs.
    pub cpus: u32,
    /// The pattern.
    pub pattern: Pattern,
    /// Mean instructions per request (allocations and frees together),
    /// Linux's allocator with its pcp lists (the seed's lazy buddy).
    pub buddy_mean: f64,
    /// The same under lazy iBuddy with 31-frame bypass lists (lis31).
    pub lis31_mean: f64,
    /// User space, host TSC cycles per request: `linux-pcp`, the twin of
    /// buddy (allocations and frees together); `None` when not run.
    pub user_buddy_cycles: Option<f64>,
    /// User space: `LiS-31`, the twin of lis31.
    pub user_lis31_cycles: Option<f64>,
    /// User space: `1 - LiS-31 / linux-pcp`, percent.
    pub user_gain_pct: Option<f64>,
    /// `1 - lis31 / buddy`, percent (the seed: 32 % on average).
    pub gain_pct: f64,
    /// Standard deviations per request, buddy and lis31 (the seed: 1 400
    /// and 400 cycles).
    pub buddy_sd: f64,
    /// See `buddy_sd`.
    pub lis31_sd: f64,
}

/// The benchmark's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bench {
    /// The kernel's cache hash.
    pub kernel: String,
    /// Whether QEMU ran with `-icount`.
    pub icount: bool,
    /// Its `-icount` options; results without the field ran with
    /// `shift=0`.
    #[serde(default)]
    pub icount_options: String,
    /// Always `tcg`: the plugin needs it.
    pub accel: String,
    /// Guests per policy and vCPU count.
    pub runs: u32,
    /// The largest [`Cell::spread_pct`]: how far two runs' instruction
    /// means are apart at most.
    pub max_spread_pct: f64,
    /// Per-thread sizes: bulk/rand frames, repeat pairs, mixed operations.
    pub count: u64,
    /// See `count`.
    pub repeat: u64,
    /// See `count`.
    pub mixed: u64,
    /// Every cell.
    pub cells: Vec<Cell>,
    /// Every guest.
    pub guests: Vec<GuestInfo>,
    /// The same patterns in user space, through each policy's twin.
    pub user_space: Vec<UserCell>,
    /// Table 2's comparison, where both buddy and lis31 ran.
    pub comparisons: Vec<Comparison>,
    /// Host seconds for the whole benchmark.
    pub seconds: f64,
}

/// Compile the plugin into the cache once per content; its path.
pub fn plugin(cache: &Path) -> Result<PathBuf> {
    crate::memtrace::compile_cached(
        cache,
        PLUGIN_SOURCE,
        "nvmos_tcg",
        "nvmos_tcg.so",
        &["-shared", "-fPIC", "-O2", "-Wall", "-Wextra"],
    )
}

/// One record of the plugin's output.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The vCPU.
    pub vcpu: u8,
    /// The pattern index (0xff: outside a pattern).
    pub pattern: u8,
    /// 2: allocation, 3: free.
    pub code: u8,
    /// Instructions between the request's two markers (saturated at
    /// `u32::MAX`).
    pub instructions: u32,
}

/// The plugin's output: its records and the unpaired markers. Refuses a
/// file without its trailer (truncated) or whose record count disagrees.
pub fn parse_records(bytes: &[u8], path: &Path) -> Result<(Vec<Record>, u64)> {
    let bad = |what: String| KernelError::GuestOutput {
        path: path.to_owned(),
        what,
    };
    if !bytes.len().is_multiple_of(8) || bytes.len() < 16 {
        return Err(bad(format!(
            "{} bytes: not whole 8-byte records with the 16-byte trailer (truncated?)",
            bytes.len()
        )));
    }
    let (body, trailer) = bytes.split_at(bytes.len() - 16);
    let word = |b: &[u8]| u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    if trailer[..4] != [0xff; 4] || trailer[8..12] != [0xfe; 4] {
        return Err(bad("no trailer: the plugin did not finish".into()));
    }
    let count = word(&trailer[..8]) as usize;
    let unpaired = u64::from(word(&trailer[8..]));
    if count != body.len() / 8 {
        return Err(bad(format!(
            "the trailer counts {count} records, the file holds {}",
            body.len() / 8
        )));
    }
    let records = body
        .chunks_exact(8)
        .map(|r| Record {
            vcpu: r[0],
            pattern: r[1],
            code: r[2],
            instructions: word(r),
        })
        .collect();
    Ok((records, unpaired))
}

/// One thread's line of the kernel's result.
#[derive(Clone, Debug, Default, PartialEq)]
struct ThreadLine {
    requests: u64,
    refused: u64,
    sum: u64,
    sumsq: u64,
}

/// The kernel's result for one pattern: per kind, the threads' lines.
fn parse_result(
    text: &str,
    pattern: Pattern,
    threads: u32,
) -> std::result::Result<BTreeMap<Op, Vec<ThreadLine>>, String> {
    let mut lines = text.lines();
    let head = lines.next().ok_or("empty result")?;
    let want = format!("pattern={} threads={threads} ", pattern.name());
    if !head.starts_with(&want) {
        return Err(format!("result header {head:?}, expected {want:?}…"));
    }
    let mut out: BTreeMap<Op, Vec<ThreadLine>> = BTreeMap::new();
    for line in lines {
        let field = |name: &str| -> std::result::Result<&str, String> {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
                .ok_or_else(|| format!("no {name} in {line:?}"))
        };
        let num = |name: &str| -> std::result::Result<u64, String> {
            field(name)?
                .parse()
                .map_err(|_| format!("{name} is not a number in {line:?}"))
        };
        let kind = match field("kind")? {
            "alloc" => Op::Alloc,
            "free" => Op::Free,
            k => return Err(format!("unknown kind {k:?}")),
        };
        out.entry(kind).or_default().push(ThreadLine {
            requests: num("requests")?,
            refused: num("refused")?,
            sum: num("sum")?,
            sumsq: num("sumsq")?,
        });
    }
    for kind in Op::BOTH {
        let n = out.get(&kind).map_or(0, Vec::len);
        if n != threads as usize {
            return Err(format!("{n} {} lines for {threads} threads", kind.name()));
        }
    }
    Ok(out)
}

fn tsc_of(lines: &[ThreadLine]) -> Tsc {
    let requests: u64 = lines.iter().map(|l| l.requests).sum();
    let refused: u64 = lines.iter().map(|l| l.refused).sum();
    let served = (requests - refused) as f64;
    let sum: f64 = lines.iter().map(|l| l.sum as f64).sum();
    let mean = if served > 0.0 { sum / served } else { 0.0 };
    let sd = (!lines.iter().any(|l| l.sumsq == u64::MAX) && served > 0.0).then(|| {
        let sumsq: f64 = lines.iter().map(|l| l.sumsq as f64).sum();
        (sumsq / served - mean * mean).max(0.0).sqrt()
    });
    Tsc {
        requests,
        refused,
        mean,
        sd,
    }
}

/// The guest's `/init`: every pattern in turn, each result (or its
/// failure) into the `bench` section.
fn init_script(opts: &Options, cpus: u32) -> String {
    let mut runs = String::new();
    for &p in &opts.patterns {
        let spec = format!("{} {cpus} {}", p.name(), opts.count_of(p));
        runs.push_str(&format!(
            "echo \"nvmos-bench {spec}\"\nif echo '{spec}' > $B; then cat $B >> /tmp/bench; else echo 'failed {spec}' >> /tmp/bench; fi\necho '==' >> /tmp/bench\n"
        ));
    }
    format!(
        r#"{prelude}mount -t tmpfs tmp /tmp
mount -t debugfs nodev /sys/kernel/debug
B=/sys/kernel/debug/nvmos_bench
(while :; do sleep 5; echo nvmos-heartbeat; done) &
: > /tmp/bench
echo nvmos-guest-start
{runs}{finish}"#,
        prelude = run::GUEST_PRELUDE,
        finish = run::guest_finish(&[("bench", "cat /tmp/bench")]),
    )
}

/// Run the benchmark.
pub fn bench(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Bench> {
    opts.check()?;
    let started = Instant::now();
    let plugin = plugin(&opts.run.build.cache)?;
    let built = crate::kbuild::build(&opts.run.build, progress)?;
    let mut cells = Vec::new();
    let mut guests = Vec::new();
    let total = opts.policies.len() * opts.cpus.len() * opts.runs as usize;
    let mut done = 0;
    for &policy in &opts.policies {
        for &cpus in &opts.cpus {
            for run_no in 1..=opts.runs {
                progress(Progress::Run {
                    done,
                    total,
                    label: format!("{} on {cpus} vCPUs, run {run_no}", policy.name()),
                });
                done += 1;
                let t = Instant::now();
                let out_dir = tempfile::Builder::new()
                    .prefix("bench-")
                    .tempdir_in(&opts.run.build.cache)
                    .map_err(|e| {
                        KernelError::io("creating a folder in", &opts.run.build.cache, e)
                    })?;
                let records_path = out_dir.path().join("records.bin");
                let mut o = opts.run.clone();
                o.policy = policy;
                o.cpus = cpus;
                o.accel = Accel::Tcg;
                o.command = vec!["nvmos_bench".to_owned()];
                o.init = Some(init_script(opts, cpus));
                o.extra_qemu_args = vec![
                    "-plugin".to_owned(),
                    format!("{},out={}", plugin.display(), records_path.display()),
                ];
                if opts.icount {
                    o.use_icount();
                }
                let guest = run::boot_guest(&o, progress)?;
                let text = guest
                    .sections
                    .get("bench")
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .ok_or_else(|| KernelError::GuestOutput {
                        path: guest.disk.clone(),
                        what: "no bench section".into(),
                    })?;
                let bytes = fs::read(&records_path).map_err(|e| {
                    KernelError::io("reading the plugin's output", &records_path, e)
                })?;
                let (records, unpaired) = parse_records(&bytes, &records_path)?;
                let mut values: BTreeMap<(u8, u8), Vec<u32>> = BTreeMap::new();
                for r in &records {
                    values
                        .entry((r.pattern, r.code))
                        .or_default()
                        .push(r.instructions);
                }
                let results: Vec<&str> = text.split("==\n").collect();
                for (k, &pattern) in opts.patterns.iter().enumerate() {
                    let bad = |what: String| KernelError::GuestOutput {
                        path: guest.disk.clone(),
                        what: format!(
                            "{} on {cpus} vCPUs, {}: {what}",
                            policy.name(),
                            pattern.name()
                        ),
                    };
                    let result = results.get(k).copied().unwrap_or("");
                    if result.starts_with("failed") {
                        return Err(bad(format!(
                            "the kernel refused the run ({}); console {}",
                            result.trim(),
                            guest.console_log.display()
                        )));
                    }
                    let lines = parse_result(result, pattern, cpus).map_err(bad)?;
                    for kind in Op::BOTH {
                        // parse_result returned a line per thread of each kind.
                        let tsc = tsc_of(&lines[&kind]);
                        let mut v = values
                            .remove(&(marker_index(pattern), marker_code(kind)))
                            .unwrap_or_default();
                        // Every request ran between two markers: the plugin
                        // saw each, unless a marker went unpaired.
                        let missing = tsc.requests.abs_diff(v.len() as u64);
                        if missing > unpaired {
                            return Err(bad(format!(
                            "the guest made {} {} requests, the plugin measured {} (and {unpaired} markers did not pair)",
                            tsc.requests,
                            kind.name(),
                            v.len()
                        )));
                        }
                        let instructions = Distribution::of(&mut v);
                        match cells.iter_mut().find(|c: &&mut Cell| {
                            c.policy == policy
                                && c.cpus == cpus
                                && c.pattern == pattern
                                && c.kind == kind
                        }) {
                            Some(c) => c.run_means.push(instructions.mean),
                            None => cells.push(Cell {
                                policy,
                                cpus,
                                pattern,
                                kind,
                                run_means: vec![instructions.mean],
                                instructions,
                                tsc,
                            }),
                        }
                    }
                }
                guests.push(GuestInfo {
                    policy,
                    cpus,
                    run: run_no,
                    boot_s: guest.boot_s,
                    host_s: t.elapsed().as_secs_f64(),
                    records: records.len() as u64,
                    unpaired_markers: unpaired,
                    plugin_bytes: bytes.len() as u64,
                });
                guest.discard();
            }
        }
    }
    let user = if opts.user_space {
        user_space(opts, progress)?
    } else {
        Vec::new()
    };
    let comparisons = compare(&cells, &user);
    let max_spread_pct = cells.iter().map(Cell::spread_pct).fold(0.0, f64::max);
    Ok(Bench {
        kernel: built.hash,
        icount: opts.icount,
        icount_options: if opts.icount {
            ICOUNT_OPTIONS.to_owned()
        } else {
            String::new()
        },
        runs: opts.runs,
        max_spread_pct,
        accel: "tcg".to_owned(),
        count: opts.count,
        repeat: opts.repeat,
        mixed: opts.mixed,
        cells,
        guests,
        user_space: user,
        comparisons,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Allocations and frees of one policy, vCPU count and pattern together:
/// (mean, sd) over every request.
fn pooled(cells: &[Cell], policy: Policy, cpus: u32, pattern: Pattern) -> Option<(f64, f64)> {
    let mine: Vec<&Distribution> = cells
        .iter()
        .filter(|c| c.policy == policy && c.cpus == cpus && c.pattern == pattern)
        .map(|c| &c.instructions)
        .collect();
    let n: f64 = mine.iter().map(|d| d.requests as f64).sum();
    if mine.is_empty() || n == 0.0 {
        return None;
    }
    let mean = mine.iter().map(|d| d.mean * d.requests as f64).sum::<f64>() / n;
    let second = mine
        .iter()
        .map(|d| (d.sd * d.sd + d.mean * d.mean) * d.requests as f64)
        .sum::<f64>()
        / n;
    Some((mean, (second - mean * mean).max(0.0).sqrt()))
}

/// User space: allocations and frees of one policy's twin together, mean
/// host TSC cycles per request.
fn user_pooled(user: &[UserCell], policy: Policy, threads: u32, pattern: Pattern) -> Option<f64> {
    let mine: Vec<&UserCell> = user
        .iter()
        .filter(|c| c.policy == policy && c.threads == threads && c.pattern == pattern)
        .collect();
    let n: f64 = mine.iter().map(|c| c.requests as f64).sum();
    (n > 0.0).then(|| {
        mine.iter()
            .map(|c| c.mean_cycles * c.requests as f64)
            .sum::<f64>()
            / n
    })
}

fn compare(cells: &[Cell], user: &[UserCell]) -> Vec<Comparison> {
    let mut out = Vec::new();
    let mut keys: Vec<(u32, Pattern)> = cells.iter().map(|c| (c.cpus, c.pattern)).collect();
    keys.sort();
    keys.dedup();
    for (cpus, pattern) in keys {
        if let (Some((bm, bs)), Some((lm, ls))) = (
            pooled(cells, Policy::Buddy, cpus, pattern),
            pooled(cells, Policy::Lis31, cpus, pattern),
        ) {
            let ub = user_pooled(user, Policy::Buddy, cpus, pattern);
            let ul = user_pooled(user, Policy::Lis31, cpus, pattern);
            out.push(Comparison {
                cpus,
                pattern,
                buddy_mean: bm,
                lis31_mean: lm,
                user_buddy_cycles: ub,
                user_lis31_cycles: ul,
                user_gain_pct: ub.zip(ul).map(|(b, l)| 100.0 * (1.0 - l / b)),
                gain_pct: 100.0 * (1.0 - lm / bm),
                buddy_sd: bs,
                lis31_sd: ls,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(vcpu: u8, pattern: u8, code: u8, n: u32) -> [u8; 8] {
        let mut r = [vcpu, pattern, code, 0, 0, 0, 0, 0];
        r[4..].copy_from_slice(&n.to_le_bytes());
        r
    }

    fn file(records: &[[u8; 8]], count: u32, unpaired: u32) -> Vec<u8> {
        let mut b: Vec<u8> = records.iter().flatten().copied().collect();
        b.extend([0xff; 4]);
        b.extend(count.to_le_bytes());
        b.extend([0xfe; 4]);
        b.extend(unpaired.to_le_bytes());
        b
    }

    #[test]
    fn plugin_records_parse_and_a_truncated_file_is_refused() {
        let p = Path::new("r.bin");
        let b = file(&[record(0, 1, 2, 310), record(1, 1, 3, 205)], 2, 1);
        let (r, unpaired) = parse_records(&b, p).unwrap();
        assert_eq!(unpaired, 1);
        assert_eq!(
            r[1],
            Record {
                vcpu: 1,
                pattern: 1,
                code: 3,
                instructions: 205
            }
        );
        // Cut anywhere: refused.
        for cut in [8, 16, b.len() - 8, b.len() - 3] {
            assert!(parse_records(&b[..cut], p).is_err(), "cut at {cut}");
        }
        // A trailer that disagrees with the body.
        assert!(parse_records(&file(&[record(0, 1, 2, 3)], 2, 0), p).is_err());
    }

    #[test]
    fn the_kernels_result_parses_and_a_short_one_is_refused() {
        let text = "pattern=repeat threads=2 count=10 cycles=tsc\n\
            thread=0 kind=alloc requests=10 refused=0 sum=1000 sumsq=110000 min=90 max=120\n\
            thread=0 kind=free requests=10 refused=0 sum=500 sumsq=25000 min=50 max=50\n\
            thread=1 kind=alloc requests=10 refused=1 sum=900 sumsq=90000 min=100 max=100\n\
            thread=1 kind=free requests=9 refused=0 sum=450 sumsq=22500 min=50 max=50\n";
        let r = parse_result(text, Pattern::Repeat, 2).unwrap();
        let tsc = tsc_of(&r[&Op::Alloc]);
        assert_eq!((tsc.requests, tsc.refused), (20, 1));
        assert!((tsc.mean - 100.0).abs() < 1e-9);
        assert!((tsc.sd.unwrap() - (200_000.0f64 / 19.0 - 1e4).sqrt()).abs() < 1e-9);
        assert!(parse_result(text, Pattern::Bulk, 2).is_err());
        assert!(parse_result(text, Pattern::Repeat, 3).is_err());
        let short: String = text.lines().take(3).collect::<Vec<_>>().join("\n");
        assert!(parse_result(&short, Pattern::Repeat, 2).is_err());
        // A saturated sum of squares gives no deviation, not a wrong one.
        let sat = text.replace("sumsq=90000", &format!("sumsq={}", u64::MAX));
        assert_eq!(
            tsc_of(&parse_result(&sat, Pattern::Repeat, 2).unwrap()[&Op::Alloc]).sd,
            None
        );
    }

    #[test]
    fn distributions_and_the_pooled_comparison() {
        let d = Distribution::of(&mut [4, 1, 3, 2, 100]);
        assert_eq!((d.requests, d.median, d.max), (5, 3.0, 100.0));
        assert!((d.mean - 22.0).abs() < 1e-9);
        let cell = |policy, kind, values: &mut [u32]| Cell {
            policy,
            cpus: 1,
            pattern: Pattern::Repeat,
            kind,
            run_means: vec![],
            instructions: Distribution::of(values),
            tsc: Tsc::default(),
        };
        let cells = vec![
            cell(Policy::Buddy, Op::Alloc, &mut [300, 300]),
            cell(Policy::Buddy, Op::Free, &mut [100, 100]),
            cell(Policy::Lis31, Op::Alloc, &mut [150, 150]),
            cell(Policy::Lis31, Op::Free, &mut [50, 50]),
        ];
        let user = vec![
            UserCell {
                policy: Policy::Buddy,
                allocator: "linux-pcp".into(),
                threads: 1,
                pattern: Pattern::Repeat,
                kind: Op::Alloc,
                requests: 10,
                mean_cycles: 100.0,
                sd_cycles: 1.0,
            },
            UserCell {
                policy: Policy::Lis31,
                allocator: "LiS-31".into(),
                threads: 1,
                pattern: Pattern::Repeat,
                kind: Op::Alloc,
                requests: 10,
                mean_cycles: 75.0,
                sd_cycles: 1.0,
            },
        ];
        let c = compare(&cells, &user);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].user_gain_pct, Some(25.0));
        assert!((c[0].buddy_mean - 200.0).abs() < 1e-9);
        assert!((c[0].buddy_sd - 100.0).abs() < 1e-9);
        assert!((c[0].gain_pct - 50.0).abs() < 1e-9);
    }

    #[test]
    fn impossible_options_are_refused() {
        let build = crate::kbuild::BuildOptions {
            kernel_dir: PathBuf::from("kernel"),
            cache: PathBuf::from("/nonexistent"),
            source: PathBuf::from("/nonexistent"),
            jobs: 1,
            flavour: crate::kbuild::Flavour::Plain,
        };
        let base = Options::new(RunOptions::new(
            build,
            PathBuf::from("w"),
            Policy::Buddy,
            vec![],
        ));
        for o in [
            Options {
                cpus: vec![0],
                ..base.clone()
            },
            Options {
                cpus: vec![16],
                ..base.clone()
            },
            Options {
                count: 0,
                ..base.clone()
            },
            Options {
                repeat: 1 << 23,
                ..base.clone()
            },
            Options {
                count: 1 << 20,
                ..base.clone()
            },
            Options {
                policies: vec![],
                ..base.clone()
            },
            Options {
                runs: 0,
                ..base.clone()
            },
        ] {
            assert!(matches!(o.check(), Err(KernelError::Option(_))), "{o:?}");
        }
        assert!(base.check().is_ok());
    }
}
