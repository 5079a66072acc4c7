//! `nvmos kernel wis`: will-it-scale's page-allocator tests in the guest.
//!
//! mm developers quote Anton Blanchard's will-it-scale for changes to the
//! page allocator: `page_fault1` (anonymous memory faulted in a page at a
//! time and unmapped), `page_fault2` (the same over a private mapping of a
//! file: every fault copies a page-cache page) and `mmap1` (128 MiB mapped
//! and unmapped without a touch). nvmos does not ship will-it-scale: the
//! caller gives a checkout ([`Options::source`]), and each of its
//! `tests/NAME.c` is compiled statically with nvmos' own harness
//! (`crates/kernel/wis/harness.c`, not will-it-scale's `main.c`, which
//! needs hwloc), once per content, into the kernel cache.
//!
//! One guest boots per policy and vCPU count under TCG with `-icount`
//! ([`ICOUNT_OPTIONS`]) and runs every test in turn at a task count equal
//! to its vCPUs (or at the counts of [`Options::tasks`]): the harness forks
//! the tasks, one bound to each vCPU, lets them warm up, then counts the
//! operations they complete in fixed intervals of the guest's clock.
//!
//! **The clock.** Under `-icount shift=0,sleep=off` the guest's clock
//! advances one nanosecond per guest instruction, and the vCPUs run in
//! turns on one host thread, all on that one clock. The figures are
//! operations per second of guest instruction time, not real time: on
//! `N` busy vCPUs a guest second holds 10^9 instructions of all of them
//! together. They do not depend on the host's speed or load, and they
//! show no parallel speed-up; TCG models no caches and no contended cache
//! line. Policies compare at the same vCPU count ([`Cell::vs_buddy`]).
//!
//! **QEMU's turns.** QEMU before 8.1 gives each turn's budget to the
//! first vCPU until it executes PAUSE or HLT; with a busy task on every
//! vCPU the others starve and the guest stops. The harness runs a
//! SCHED_FIFO helper on every CPU that executes PAUSE at each timer tick
//! (see `harness.c`); the tasks' shares still differ ([`Sample::task_ops`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use crate::run::ICOUNT_OPTIONS;
use crate::run::{self, Accel, Policy, RunOptions};
use crate::{kbuild, KernelError, Progress, Result};

/// nvmos' harness, linked with each test case.
pub const HARNESS_SOURCE: &str = include_str!("../wis/harness.c");

/// The tests run by default: will-it-scale's page-allocator tests.
pub const DEFAULT_TESTS: [&str; 3] = ["page_fault1", "page_fault2", "mmap1"];

/// How each test is compiled with the harness.
const CC_FLAGS: [&str; 3] = ["-static", "-O2", "-Wall"];

/// The most vCPUs a guest has (the kernel's NR_CPUS).
const MAX_CPUS: u32 = 8;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// How every guest boots (kernel, memory, QEMU); the policy, CPUs,
    /// `/init` and QEMU arguments are set per guest.
    pub run: RunOptions,
    /// A will-it-scale checkout: `tests/NAME.c` of every test is read.
    pub source: PathBuf,
    /// Test names (`tests/NAME.c`), run in this order in every guest.
    pub tests: Vec<String>,
    /// Policies, one guest per policy and vCPU count (and run).
    pub policies: Vec<Policy>,
    /// vCPU counts.
    pub cpus: Vec<u32>,
    /// Task counts each guest runs every test at: those of the list up to
    /// its vCPUs; empty, one count, the guest's vCPUs.
    pub tasks: Vec<u32>,
    /// Guest milliseconds the tasks run before the first sample.
    pub warmup_ms: u32,
    /// Guest milliseconds per sample.
    pub interval_ms: u32,
    /// Samples per test and task count.
    pub samples: u32,
    /// Guests per policy and vCPU count.
    pub runs: u32,
}

impl Options {
    /// The default tests on every policy at 1, 2 and 4 vCPUs, tasks =
    /// vCPUs, 5 samples of 1 guest second after 1 second of warm-up, one
    /// guest each.
    pub fn new(run: RunOptions, source: PathBuf) -> Options {
        Options {
            run,
            source,
            tests: DEFAULT_TESTS.map(String::from).to_vec(),
            policies: Policy::ALL.to_vec(),
            cpus: vec![1, 2, 4],
            tasks: Vec::new(),
            warmup_ms: 1000,
            interval_ms: 1000,
            samples: 5,
            runs: 1,
        }
    }

    /// The task counts a guest of `cpus` vCPUs runs.
    pub fn task_counts(&self, cpus: u32) -> Vec<u32> {
        if self.tasks.is_empty() {
            return vec![cpus];
        }
        let mut t: Vec<u32> = self.tasks.iter().copied().filter(|&n| n <= cpus).collect();
        t.sort_unstable();
        t.dedup();
        t
    }

    fn check(&self) -> Result<()> {
        let bad = |m: String| Err(KernelError::Option(m));
        if self.policies.is_empty() || self.cpus.is_empty() || self.tests.is_empty() {
            return bad("kernel wis needs at least one policy, vCPU count and test".into());
        }
        if self.runs == 0 {
            return bad("--runs 0: at least one run".into());
        }
        if let Some(c) = self.cpus.iter().find(|&&c| !(1..=MAX_CPUS).contains(&c)) {
            return bad(format!(
                "--vcpus {c}: between 1 and {MAX_CPUS} (the kernel's NR_CPUS)"
            ));
        }
        if let Some(t) = self.tasks.iter().find(|&&t| t == 0) {
            return bad(format!("--tasks {t}: at least 1"));
        }
        for &c in &self.cpus {
            if self.task_counts(c).is_empty() {
                return bad(format!(
                    "--tasks {}: a guest of {c} vCPU(s) would run none (a guest runs the counts up to its vCPUs)",
                    self.tasks
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
        }
        let mut seen = BTreeSet::new();
        for t in &self.tests {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return bad(format!(
                    "test {t:?}: a will-it-scale test name (letters, digits, _), as in tests/NAME.c"
                ));
            }
            if !seen.insert(t) {
                return bad(format!("test {t} given twice"));
            }
        }
        if !(10..=60_000).contains(&self.interval_ms) {
            return bad(format!(
                "--interval-ms {}: between 10 and 60000",
                self.interval_ms
            ));
        }
        if self.warmup_ms > 600_000 {
            return bad(format!("--warmup-ms {}: at most 600000", self.warmup_ms));
        }
        if !(1..=1000).contains(&self.samples) {
            return bad(format!("--samples {}: between 1 and 1000", self.samples));
        }
        Ok(())
    }
}

/// One test's source.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestSource {
    /// Its name (`tests/NAME.c`).
    pub name: String,
    /// Its `testcase_description`, as the harness printed it.
    pub description: String,
    /// The first 16 hex digits of the source file's SHA-256.
    pub sha256: String,
}

/// One interval of one test in one guest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The guest's run (from 1).
    pub run: u32,
    /// The interval, guest nanoseconds (instructions).
    pub ns: u64,
    /// Operations all tasks completed in it.
    pub ops: u64,
    /// Each task's.
    pub task_ops: Vec<u64>,
}

impl Sample {
    /// Operations per guest second.
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 * 1e9 / self.ns as f64
    }
}

/// The median of a cell's samples and how far they spread.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Median.
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// `(max - min) / median`, percent.
    pub spread_pct: f64,
}

impl Summary {
    fn of(values: &[f64]) -> Summary {
        let Some(median) = nvmos_measure::stats::median(values) else {
            return Summary::default();
        };
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Summary {
            median,
            min,
            max,
            spread_pct: if median > 0.0 {
                100.0 * (max - min) / median
            } else {
                0.0
            },
        }
    }
}

/// One test at one task count under one policy and vCPU count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The policy booted.
    pub policy: Policy,
    /// vCPUs.
    pub cpus: u32,
    /// The test.
    pub test: String,
    /// Tasks (processes) running it.
    pub tasks: u32,
    /// Every sample of every run.
    pub samples: Vec<Sample>,
    /// Operations per guest second, all tasks together, over the samples.
    pub ops_per_s: Summary,
    /// The median per task.
    pub per_task_ops_per_s: f64,
    /// The median against buddy's at the same vCPUs, test and tasks;
    /// `None` for buddy, or when buddy did not run.
    pub vs_buddy: Option<f64>,
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
}

/// The result of `nvmos kernel wis`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Wis {
    /// The kernel's cache hash.
    pub kernel: String,
    /// Always `tcg`: icount needs it.
    pub accel: String,
    /// QEMU's `-icount` options.
    pub icount_options: String,
    /// Guest memory, MiB.
    pub mem_mib: u64,
    /// Guests per policy and vCPU count.
    pub runs: u32,
    /// Guest milliseconds of warm-up before the samples.
    pub warmup_ms: u32,
    /// Guest milliseconds per sample.
    pub interval_ms: u32,
    /// Samples per test, task count and guest.
    pub samples: u32,
    /// The tests, in the order each guest ran them.
    pub tests: Vec<TestSource>,
    /// Every cell: vCPUs, then test, then tasks, then policy in the
    /// order given.
    pub cells: Vec<Cell>,
    /// Every guest.
    pub guests: Vec<GuestInfo>,
    /// Host seconds for the whole run.
    pub seconds: f64,
}

/// `source/tests/NAME.c` of every test, each with its SHA-256 prefix;
/// refuses a missing folder or file, naming it.
fn test_sources(opts: &Options) -> Result<Vec<(String, PathBuf, String)>> {
    if !opts.source.is_dir() {
        return Err(KernelError::Option(format!(
            "--source {}: not a folder; give a will-it-scale checkout (its tests/NAME.c are compiled with nvmos' harness)",
            opts.source.display()
        )));
    }
    opts.tests
        .iter()
        .map(|name| {
            let path = opts.source.join("tests").join(format!("{name}.c"));
            if !path.is_file() {
                return Err(KernelError::Option(format!(
                    "will-it-scale test {name}: {} does not exist (is --source {} a will-it-scale checkout?)",
                    path.display(),
                    opts.source.display()
                )));
            }
            let bytes = fs::read(&path).map_err(|e| KernelError::io("reading", &path, e))?;
            let sha = kbuild::hex(&Sha256::digest(&bytes)[..8]);
            Ok((name.clone(), path, sha))
        })
        .collect()
}

/// Compile every test with the harness (`cc -static -O2`) into
/// `cache/wis/<hash>/wis-NAME`, once per content; the programs' paths.
fn compile(sources: &[(String, PathBuf, String)], cache: &Path) -> Result<Vec<(String, PathBuf)>> {
    kbuild::require_tool("cc", "apt-get install gcc libc6-dev")?;
    let mut bins = Vec::new();
    for (name, path, _) in sources {
        let test = fs::read(path).map_err(|e| KernelError::io("reading", path, e))?;
        let mut h = Sha256::new();
        h.update(CC_FLAGS.join(" ").as_bytes());
        h.update((HARNESS_SOURCE.len() as u64).to_le_bytes());
        h.update(HARNESS_SOURCE.as_bytes());
        h.update(name.as_bytes());
        h.update(&test);
        let dir = cache.join("wis").join(kbuild::hex(&h.finalize()[..8]));
        let bin = dir.join(format!("wis-{name}"));
        if !bin.is_file() {
            fs::create_dir_all(&dir).map_err(|e| KernelError::io("creating", &dir, e))?;
            let harness = dir.join("harness.c");
            kbuild::write_atomic(&harness, HARNESS_SOURCE.as_bytes())?;
            run::cc_sources_into(&CC_FLAGS, &[&harness, path], &bin).map_err(|e| match e {
                KernelError::Command {
                    what,
                    status,
                    log,
                    tail,
                } => KernelError::Command {
                    what: format!(
                        "compiling will-it-scale test {name} with nvmos' harness ({what})"
                    ),
                    status,
                    tail: compiler_errors(&log).unwrap_or(tail),
                    log,
                },
                other => other,
            })?;
        }
        bins.push((name.clone(), bin));
    }
    Ok(bins)
}

/// The compiler's first `error:` lines in `log` (with a leading newline
/// each), or `None` when it has none.
fn compiler_errors(log: &Path) -> Option<String> {
    let text = fs::read_to_string(log).ok()?;
    let errors: Vec<String> = text
        .lines()
        .filter(|l| l.contains("error:") || l.contains("undefined reference"))
        .take(8)
        .map(|l| format!("\n  {l}"))
        .collect();
    (!errors.is_empty()).then(|| errors.concat())
}

/// The guest's `/init`: every test in turn at the guest's task counts.
fn init_script(opts: &Options, cpus: u32) -> String {
    let counts: Vec<String> = opts.task_counts(cpus).iter().map(u32::to_string).collect();
    let mut runs = String::new();
    for t in &opts.tests {
        runs.push_str(&format!(
            "echo 'nvmos-wis {t}'\ncd /tmp\nwis-{t} -n {t} -t {counts} -w {w} -i {i} -s {s} >> /tmp/.wis 2>> /tmp/.wis-stderr\necho \"wis-exit test={t} status=$?\" >> /tmp/.wis\ncd /\n",
            counts = counts.join(","),
            w = opts.warmup_ms,
            i = opts.interval_ms,
            s = opts.samples,
        ));
    }
    format!(
        r#"{prelude}mount -t tmpfs -o size=75% tmp /tmp
(while :; do sleep 5; echo nvmos-heartbeat; done) &
: > /tmp/.wis
: > /tmp/.wis-stderr
echo nvmos-guest-start
# The kernel switches from the early TSC clocksource to the refined one
# about a second after boot, stopping every CPU to do so: not during a
# sample.
CS=/sys/devices/system/clocksource/clocksource0/current_clocksource
i=0
while [ "$(cat $CS 2>/dev/null)" = tsc-early ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
{runs}{finish}"#,
        prelude = run::GUEST_PRELUDE,
        finish = run::guest_finish(&[
            ("cpus", "grep -c ^processor /proc/cpuinfo"),
            ("wis", "cat /tmp/.wis"),
            ("stderr", "cat /tmp/.wis-stderr"),
        ]),
    )
}

/// One test at one task count, as the harness printed it in one guest.
#[derive(Clone, Debug, Default, PartialEq)]
struct Measured {
    /// `testcase_description`.
    description: String,
    /// Online CPUs the harness saw.
    cpus: u32,
    /// Per sample: its number, guest ns, operations, each task's.
    samples: Vec<(u32, u64, u64, Vec<u64>)>,
    /// Whether `wis-end` came.
    ended: bool,
}

/// A harness line's words after its kind: `key=value` pairs, and
/// `description=` running to the end of the line.
fn fields(rest: &str) -> std::result::Result<BTreeMap<&str, &str>, String> {
    let mut out = BTreeMap::new();
    let mut rest = rest.trim_start();
    while !rest.is_empty() {
        let (word, next) = rest.split_once(' ').unwrap_or((rest, ""));
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| format!("{word:?} is not key=value"))?;
        if key.is_empty() {
            return Err(format!("{word:?} has no key"));
        }
        let (value, next) = if key == "description" || key == "what" {
            (&rest[key.len() + 1..], "")
        } else {
            (value, next)
        };
        if out.insert(key, value).is_some() {
            return Err(format!("{key} given twice"));
        }
        rest = next.trim_start();
    }
    Ok(out)
}

/// Parse a guest's harness output: every `(test, tasks)` of `want` with
/// its `samples` samples, in order, each task's operations adding up, and
/// the test's program exiting 0. Anything else — an unknown or malformed
/// line, a harness error, a missing sample or end — is refused, naming
/// the test and task count.
fn parse_output(
    text: &str,
    want: &[(&str, u32)],
    samples: u32,
) -> std::result::Result<BTreeMap<(String, u32), Measured>, String> {
    let mut got: BTreeMap<(String, u32), Measured> = BTreeMap::new();
    let mut exits: BTreeMap<String, i64> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |what: String| format!("line {}: {what}: {line:?}", i + 1);
        if line.trim().is_empty() {
            continue;
        }
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        if !matches!(
            kind,
            "wis-test" | "wis-sample" | "wis-end" | "wis-error" | "wis-exit"
        ) {
            return Err(bad("not a line of the harness".into()));
        }
        let f = fields(rest).map_err(bad)?;
        let get = |k: &str| f.get(k).copied().ok_or_else(|| bad(format!("no {k}=")));
        let num = |k: &str| -> std::result::Result<u64, String> {
            get(k)?
                .parse::<u64>()
                .map_err(|_| bad(format!("{k} is not a count")))
        };
        if kind == "wis-exit" {
            let status: i64 = get("status")?
                .parse()
                .map_err(|_| bad("status is not a number".into()))?;
            exits.insert(get("test")?.to_owned(), status);
            continue;
        }
        let test = get("test")?.to_owned();
        let tasks = u32::try_from(num("tasks")?).map_err(|_| bad("tasks too large".into()))?;
        let at = format!("{test} at {tasks} task(s)");
        match kind {
            "wis-error" => return Err(format!("{at}: the harness failed: {}", get("what")?)),
            "wis-test" => {
                let m = Measured {
                    description: get("description")?.to_owned(),
                    cpus: u32::try_from(num("cpus")?).map_err(|_| bad("bad cpus".into()))?,
                    ..Measured::default()
                };
                if got.insert((test, tasks), m).is_some() {
                    return Err(bad(format!("{at} started twice")));
                }
            }
            "wis-sample" => {
                let m = got
                    .get_mut(&(test, tasks))
                    .filter(|m| !m.ended)
                    .ok_or_else(|| bad(format!("a sample of {at} outside its run")))?;
                let k = u32::try_from(num("sample")?).map_err(|_| bad("bad sample".into()))?;
                if k as usize != m.samples.len() + 1 {
                    return Err(bad(format!("sample {k} of {at} after {}", m.samples.len())));
                }
                let (ns, ops) = (num("ns")?, num("ops")?);
                if ns == 0 {
                    return Err(bad(format!("an interval of 0 ns in {at}")));
                }
                let task_ops = get("task_ops")?
                    .split(',')
                    .map(|v| v.parse::<u64>())
                    .collect::<std::result::Result<Vec<u64>, _>>()
                    .map_err(|_| bad("task_ops is not a list of counts".into()))?;
                if task_ops.len() != tasks as usize {
                    return Err(bad(format!(
                        "{} task counts for {tasks} tasks",
                        task_ops.len()
                    )));
                }
                if task_ops.iter().try_fold(0u64, |a, &b| a.checked_add(b)) != Some(ops) {
                    return Err(bad("the tasks' operations do not add up to ops".into()));
                }
                m.samples.push((k, ns, ops, task_ops));
            }
            _ => {
                let m = got
                    .get_mut(&(test, tasks))
                    .ok_or_else(|| bad(format!("{at} ended before it started")))?;
                m.ended = true;
            }
        }
    }
    for &(test, tasks) in want {
        let at = format!("{test} at {tasks} task(s)");
        match exits.get(test) {
            Some(0) => {}
            Some(s) => return Err(format!("{test}: the harness exited with status {s}")),
            None => return Err(format!("{test}: the harness's exit status is missing")),
        }
        let m = got
            .get(&(test.to_owned(), tasks))
            .ok_or_else(|| format!("{at}: no result"))?;
        if m.samples.len() != samples as usize {
            return Err(format!("{at}: {} of {samples} samples", m.samples.len()));
        }
        if !m.ended {
            return Err(format!("{at}: no end line"));
        }
    }
    let want: BTreeSet<(String, u32)> = want.iter().map(|&(t, n)| (t.to_owned(), n)).collect();
    if let Some((t, n)) = got.keys().find(|k| !want.contains(*k)) {
        return Err(format!("{t} at {n} task(s): not asked for"));
    }
    Ok(got)
}

/// Run every test in a guest per policy and vCPU count (and run).
pub fn wis(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Wis> {
    opts.check()?;
    let started = Instant::now();
    let sources = test_sources(opts)?;
    let bins = compile(&sources, &opts.run.build.cache)?;
    let built = kbuild::build(&opts.run.build, progress)?;
    let mut descriptions: BTreeMap<String, String> = BTreeMap::new();
    let mut samples: BTreeMap<(Policy, u32, String, u32), Vec<Sample>> = BTreeMap::new();
    let mut guests = Vec::new();
    let total = opts.runs as usize * opts.cpus.len() * opts.policies.len();
    let mut done = 0;
    for run_no in 1..=opts.runs {
        for &cpus in &opts.cpus {
            for &policy in &opts.policies {
                let label = format!("{} on {cpus} vCPU(s), run {run_no}", policy.name());
                progress(Progress::Run {
                    done,
                    total,
                    label: label.clone(),
                });
                done += 1;
                let t = Instant::now();
                let mut o = opts.run.clone();
                o.policy = policy;
                o.cpus = cpus;
                o.accel = Accel::Tcg;
                o.command = vec!["wis".to_owned()];
                o.init = Some(init_script(opts, cpus));
                o.files = bins
                    .iter()
                    .map(|(name, bin)| (format!("bin/wis-{name}"), bin.clone()))
                    .collect();
                o.extra_qemu_args.clear();
                o.use_icount();
                let guest = run::boot_guest(&o, progress)?;
                let problems = run::console_problems(&guest.console);
                if !problems.is_empty() {
                    return Err(KernelError::GuestProblems {
                        problems,
                        log: guest.console_log,
                    });
                }
                let section = |name: &str| {
                    guest
                        .sections
                        .get(name)
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                        .unwrap_or_default()
                };
                let bad = |what: String| {
                    let stderr = section("stderr");
                    KernelError::GuestOutput {
                        path: guest.console_log.clone(),
                        what: format!(
                            "{label}: {what}{}",
                            if stderr.trim().is_empty() {
                                String::new()
                            } else {
                                format!("; the tests' standard error: {}", stderr.trim())
                            }
                        ),
                    }
                };
                let seen: u32 = section("cpus")
                    .trim()
                    .parse()
                    .map_err(|_| bad("no CPU count".into()))?;
                if seen != cpus {
                    return Err(bad(format!(
                        "the guest runs on {seen} CPUs though QEMU was given {cpus}"
                    )));
                }
                let counts = opts.task_counts(cpus);
                let want: Vec<(&str, u32)> = opts
                    .tests
                    .iter()
                    .flat_map(|t| counts.iter().map(move |&n| (t.as_str(), n)))
                    .collect();
                let measured = parse_output(&section("wis"), &want, opts.samples).map_err(bad)?;
                for ((test, tasks), m) in measured {
                    if m.cpus != cpus {
                        return Err(bad(format!(
                            "{test}: the harness saw {} CPUs, not {cpus}",
                            m.cpus
                        )));
                    }
                    descriptions.entry(test.clone()).or_insert(m.description);
                    samples
                        .entry((policy, cpus, test, tasks))
                        .or_default()
                        .extend(m.samples.into_iter().map(|(_, ns, ops, task_ops)| Sample {
                            run: run_no,
                            ns,
                            ops,
                            task_ops,
                        }));
                }
                guests.push(GuestInfo {
                    policy,
                    cpus,
                    run: run_no,
                    boot_s: guest.boot_s,
                    host_s: t.elapsed().as_secs_f64(),
                });
                guest.discard();
            }
        }
    }
    let mut cells = Vec::new();
    for &cpus in &opts.cpus {
        for test in &opts.tests {
            for tasks in opts.task_counts(cpus) {
                let median = |p: Policy| {
                    samples.get(&(p, cpus, test.clone(), tasks)).map(|s| {
                        Summary::of(&s.iter().map(Sample::ops_per_s).collect::<Vec<_>>()).median
                    })
                };
                let base = median(Policy::Buddy);
                for &policy in &opts.policies {
                    let s = samples
                        .remove(&(policy, cpus, test.clone(), tasks))
                        .unwrap_or_default();
                    let ops_per_s =
                        Summary::of(&s.iter().map(Sample::ops_per_s).collect::<Vec<_>>());
                    cells.push(Cell {
                        policy,
                        cpus,
                        test: test.clone(),
                        tasks,
                        per_task_ops_per_s: ops_per_s.median / f64::from(tasks),
                        vs_buddy: base
                            .filter(|&b| policy != Policy::Buddy && b > 0.0)
                            .map(|b| ops_per_s.median / b),
                        ops_per_s,
                        samples: s,
                    });
                }
            }
        }
    }
    Ok(Wis {
        kernel: built.hash,
        accel: "tcg".to_owned(),
        icount_options: ICOUNT_OPTIONS.to_owned(),
        mem_mib: opts.run.mem_mib,
        runs: opts.runs,
        warmup_ms: opts.warmup_ms,
        interval_ms: opts.interval_ms,
        samples: opts.samples,
        tests: sources
            .into_iter()
            .map(|(name, _, sha256)| TestSource {
                description: descriptions.remove(&name).unwrap_or_default(),
                name,
                sha256,
            })
            .collect(),
        cells,
        guests,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str =
        "wis-test test=page_fault1 tasks=2 cpus=2 description=Anonymous memory page fault\n\
        wis-sample test=page_fault1 tasks=2 sample=1 ns=1000000000 ops=300 task_ops=100,200\n\
        wis-sample test=page_fault1 tasks=2 sample=2 ns=500000000 ops=200 task_ops=120,80\n\
        wis-end test=page_fault1 tasks=2\n\
        wis-exit test=page_fault1 status=0\n";

    fn parse(text: &str) -> std::result::Result<BTreeMap<(String, u32), Measured>, String> {
        parse_output(text, &[("page_fault1", 2)], 2)
    }

    #[test]
    fn the_harness_output_parses() {
        let m = parse(OUT).unwrap();
        let m = &m[&("page_fault1".to_owned(), 2)];
        assert_eq!(m.description, "Anonymous memory page fault");
        assert_eq!(m.cpus, 2);
        assert_eq!(m.samples[1], (2, 500_000_000, 200, vec![120, 80]));
        let s = Sample {
            run: 1,
            ns: 500_000_000,
            ops: 200,
            task_ops: vec![],
        };
        assert_eq!(s.ops_per_s(), 400.0);
    }

    #[test]
    fn malformed_or_incomplete_output_is_refused() {
        let cases: Vec<(String, &str)> = vec![
            // A line that is not the harness's.
            (format!("hello\n{OUT}"), "not a line of the harness"),
            // A sample without its tasks' split, or one that does not add up.
            (OUT.replace(" task_ops=100,200", ""), "no task_ops="),
            (OUT.replace("task_ops=100,200", "task_ops=100,201"), "do not add up"),
            // Counts whose sum overflows: refused, not a panic.
            (
                OUT.replace("task_ops=100,200", "task_ops=18446744073709551615,301"),
                "do not add up",
            ),
            (OUT.replace("task_ops=120,80", "task_ops=200"), "1 task counts for 2 tasks"),
            (OUT.replace("ops=300", "ops=many"), "ops is not a count"),
            (OUT.replace("ns=500000000", "ns=0"), "0 ns"),
            (OUT.replace("sample=2", "sample=3"), "sample 3"),
            (OUT.replace("ops=300 ", "ops=300 junk "), "\"junk\" is not key=value"),
            (format!("hello world\n{OUT}"), "not a line of the harness"),
            // A sample missing: the guest stopped early.
            (
                OUT.lines()
                    .filter(|l| !l.contains("sample=2"))
                    .map(|l| format!("{l}\n"))
                    .collect(),
                "1 of 2 samples",
            ),
            (OUT.replace("wis-end test=page_fault1 tasks=2\n", ""), "no end line"),
            (OUT.replace("status=0", "status=1"), "exited with status 1"),
            (OUT.replace("wis-exit test=page_fault1 status=0\n", ""), "exit status is missing"),
            (
                OUT.replace(
                    "wis-end",
                    "wis-error test=page_fault1 tasks=2 what=task 0 was killed by signal 6 (Aborted)\nwis-end",
                ),
                "killed by signal 6",
            ),
            (String::new(), "page_fault1: the harness's exit status is missing"),
            (
                "wis-exit test=page_fault1 status=0\n".to_owned(),
                "page_fault1 at 2 task(s): no result",
            ),
            (
                OUT.replace("test=page_fault1 tasks", "test=page_fault3 tasks"),
                "page_fault1 at 2 task(s): no result",
            ),
            (format!("{OUT}{OUT}"), "started twice"),
        ];
        for (text, want) in cases {
            let e = parse(&text).unwrap_err();
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
    }

    #[test]
    fn summaries_take_the_median_and_spread() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert!((s.spread_pct - 120.0).abs() < 1e-9);
        assert_eq!(Summary::of(&[5.0, 1.0, 3.0]).median, 3.0);
    }

    #[test]
    fn the_init_runs_every_test_at_the_guests_task_counts() {
        let build = kbuild::BuildOptions {
            kernel_dir: PathBuf::from("kernel"),
            cache: PathBuf::from("/nonexistent"),
            source: PathBuf::from("/nonexistent"),
            jobs: 1,
            flavour: kbuild::Flavour::Plain,
        };
        let run = RunOptions::new(build, PathBuf::from("w"), Policy::Buddy, vec![]);
        let mut o = Options::new(run, PathBuf::from("/wis"));
        let init = init_script(&o, 4);
        for t in DEFAULT_TESTS {
            assert!(
                init.contains(&format!("wis-{t} -n {t} -t 4 -w 1000 -i 1000 -s 5")),
                "{init}"
            );
        }
        o.tasks = vec![4, 1, 2, 1];
        assert_eq!(o.task_counts(2), vec![1, 2]);
        assert!(init_script(&o, 2).contains("-t 1,2 "));
        assert!(o.check().is_ok());
        for bad in [
            Options {
                tasks: vec![8],
                ..o.clone()
            },
            Options {
                tasks: vec![0],
                ..o.clone()
            },
            Options {
                cpus: vec![9],
                ..o.clone()
            },
            Options {
                tests: vec!["page_fault1; rm".into()],
                ..o.clone()
            },
            Options {
                tests: vec!["mmap1".into(), "mmap1".into()],
                ..o.clone()
            },
            Options {
                samples: 0,
                ..o.clone()
            },
            Options {
                interval_ms: 1,
                ..o.clone()
            },
            Options {
                runs: 0,
                ..o.clone()
            },
            Options {
                policies: vec![],
                ..o.clone()
            },
        ] {
            assert!(
                matches!(bad.check(), Err(KernelError::Option(_))),
                "{bad:?}"
            );
        }
    }
}
