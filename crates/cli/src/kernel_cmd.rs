//! `nvmos kernel build|run|study|check|test|bench|systime|wis`: the
//! allocators inside a real Linux kernel under QEMU (crate
//! `nvmos-kernel`); this file parses, prints what `nvmos_pages::kernel`
//! renders and writes `kernel.html`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use nvmos_kernel::kbuild::{self, BuildOptions};
use nvmos_kernel::run::{self, Accel, Policy, RunOptions};
use nvmos_kernel::{check, study, Progress};

use crate::units::{parse_memory, FRAME_BYTES};
use nvmos_pages::kernel as pages;
use nvmos_report::OutputDir;

#[derive(Subcommand, Debug)]
pub enum KernelCommand {
    /// Unpack Debian's linux-source-6.12, apply kernel/'s series, build a
    /// small kernel into the cache (instant when nothing changed).
    Build(BuildArgs),
    /// Boot the patched kernel under QEMU with a policy, run a workload,
    /// write its page-allocation trace as .nvt.
    Run(RunArgs),
    /// Every policy × workload in the kernel: in-kernel wear, pinned
    /// banks, replay against reality.
    Study(StudyArgs),
    /// The series under mm's own checks, on the debug kernel: every
    /// policy × workload traced with no kernel report, then a guest per
    /// policy (5 GiB: two zones; 4 vCPUs) testing compaction, THP, CMA,
    /// memory offlining, soft-offline, CPU offlining under load,
    /// stress-ng and the KUnit suite. Exits non-zero on any failure.
    Check(CheckArgs),
    /// Boot every policy with kunit.enable=1 and report the series' KUnit
    /// suite (nvmos_policy) case by case.
    Test(TestArgs),
    /// The in-kernel allocation benchmark (the series' debugfs
    /// nvmos_bench): bulk, repeat, rand and mixed-order patterns on 1, 2
    /// and 4 vCPUs under every policy, each request's guest instructions
    /// counted by a QEMU TCG plugin, and the guest's TSC beside them.
    Bench(BenchArgs),
    /// System time of real programs under every policy (the compile,
    /// file and sort jobs; the host's gzip, xz and sqlite3 over 9p), in
    /// guest instruction time under -icount, each policy against buddy.
    Systime(SystimeArgs),
    /// will-it-scale's page_fault1, page_fault2 and mmap1 (from a
    /// will-it-scale checkout, --source) in the guest under every policy
    /// at 1, 2 and 4 vCPUs: operations per second of guest instruction
    /// time (-icount), not real time, each policy against buddy. (Here
    /// --source is the checkout; the kernel source tarball is
    /// --kernel-source.)
    #[command(mut_arg("source", |a| a.long("kernel-source")))]
    Wis(WisArgs),
    /// Hot-page migration (the series' nvmos_hot_ms=) on the write
    /// workloads, against the same write counting with nothing moved:
    /// write-weighted lifetime from the guest's own per-frame counts,
    /// extra writes, and the passes' CPU time.
    Levelling(LevellingArgs),
}

#[derive(Args, Debug)]
pub struct LevellingArgs {
    /// The policy under hot-page migration.
    #[arg(long, default_value = "ibuddy")]
    policy: String,
    /// Workloads, each a command of the initramfs, separated by commas.
    #[arg(
        long,
        default_value = "memstress 512 2,sortjob 32 2",
        value_delimiter = ','
    )]
    workloads: Vec<String>,
    /// Guests per workload and setting (counting only, moving).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Guest vCPUs (the shipped traces were recorded on one; with more,
    /// QEMU's -icount round robin can starve the guest's timers, and a
    /// run whose passes did not keep time is refused).
    #[arg(long, default_value_t = 1)]
    cpus: u32,
    /// Period of the passes, ms of guest time.
    #[arg(long, default_value_t = 50)]
    hot_ms: u32,
    /// Passes a page was written in before it moves.
    #[arg(long, default_value_t = 4)]
    hot_threshold: u32,
    /// Copies at most, percent of the writes counted.
    #[arg(long, default_value_t = 5)]
    hot_budget: u32,
    /// Frames asked of the allocator per move, the least worn kept.
    #[arg(long, default_value_t = 4)]
    hot_candidates: u32,
    #[command(flatten)]
    guest: MeasureArgs,
}

#[derive(Args, Debug)]
pub struct WisArgs {
    /// A will-it-scale checkout (github.com/antonblanchard/will-it-scale):
    /// each test's tests/NAME.c is compiled statically with nvmos' own
    /// harness.
    #[arg(long = "source", id = "wis_source", value_name = "DIR")]
    source: PathBuf,
    #[command(flatten)]
    policies: PolicyArgs,
    /// vCPU counts, one guest per policy and count, comma-separated.
    #[arg(long, default_value = "1,2,4", value_delimiter = ',')]
    vcpus: Vec<u32>,
    /// Tests (tests/NAME.c of the checkout), comma-separated.
    #[arg(
        long,
        default_value = "page_fault1,page_fault2,mmap1",
        value_delimiter = ','
    )]
    tests: Vec<String>,
    /// Task counts (processes) each guest runs every test at, those up to
    /// its vCPUs, comma-separated [default: the guest's vCPUs].
    #[arg(long, value_delimiter = ',')]
    tasks: Vec<u32>,
    /// Guest milliseconds the tasks run before the first sample.
    #[arg(long, default_value_t = 1000)]
    warmup_ms: u32,
    /// Guest milliseconds per sample.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u32,
    /// Samples per test and task count in each guest.
    #[arg(long, default_value_t = 5)]
    samples: u32,
    /// Guests per policy and vCPU count.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    #[command(flatten)]
    guest: MeasureArgs,
}

#[derive(Args, Debug)]
pub struct SystimeArgs {
    #[command(flatten)]
    policies: PolicyArgs,
    /// Programs, comma-separated.
    #[arg(
        long,
        default_value = "compilejob,filejob,sortjob,gzip,xz,sqlite3",
        value_delimiter = ','
    )]
    programs: Vec<String>,
    /// Guests per policy.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Guest vCPUs.
    #[arg(long, default_value_t = 2)]
    cpus: u32,
    #[command(flatten)]
    guest: MeasureArgs,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    policies: PolicyArgs,
    /// vCPU counts (one benchmark thread per vCPU), comma-separated.
    #[arg(long, default_value = "1,2,4", value_delimiter = ',')]
    vcpus: Vec<u32>,
    /// Patterns, comma-separated.
    #[arg(long, default_value = "bulk,repeat,rand,mixed", value_delimiter = ',')]
    patterns: Vec<nvmos_kernel::bench::Pattern>,
    /// bulk and rand: frames each thread allocates.
    #[arg(long, default_value_t = 32_768)]
    count: u64,
    /// repeat: allocate/free pairs per thread.
    #[arg(long, default_value_t = 20_000)]
    repeat: u64,
    /// mixed: operations per thread.
    #[arg(long, default_value_t = 20_000)]
    mixed: u64,
    /// Run QEMU without -icount (the instruction counts are the
    /// same; the TSC then follows the host's clock).
    #[arg(long)]
    no_icount: bool,
    /// Guests per policy and vCPU count (their instruction counts are
    /// compared).
    #[arg(long, default_value_t = 2)]
    runs: u32,
    /// Leave out the same patterns in user space (bench alloc through
    /// each policy's twin in nvmos' registry).
    #[arg(long)]
    no_user_space: bool,
    #[command(flatten)]
    guest: MeasureArgs,
}

/// The guests of the measuring commands (bench, systime, wis), which set their
/// own policy, vCPUs, `/init` and accelerator.
#[derive(Args, Debug)]
pub struct MeasureArgs {
    /// Guest memory (e.g. 2GiB).
    #[arg(long, default_value = "2GiB")]
    mem: String,
    /// Longest guest run, seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
    /// Also write the result as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

impl MeasureArgs {
    fn run_options(&self) -> Result<RunOptions> {
        let mut o = RunOptions::new(
            self.common.build_options(),
            nvmos_kernel::repo_workloads_dir(),
            Policy::Buddy,
            Vec::new(),
        );
        o.mem_mib = mib(&self.mem, "--mem")?;
        o.timeout_s = self.timeout;
        Ok(o)
    }

    /// Write `value` to `--json`, if given.
    fn write_json(&self, value: &impl serde::Serialize) -> Result<()> {
        match &self.json {
            Some(path) => write_json(path, value),
            None => Ok(()),
        }
    }
}

/// The policies a multi-guest command boots.
#[derive(Args, Debug)]
pub struct PolicyArgs {
    /// Policies, comma-separated.
    #[arg(
        long = "policies",
        value_name = "POLICIES",
        default_value = "buddy,ibuddy,lis1,lis31,lis31-fair,adaptive",
        value_delimiter = ',',
        value_parser = parse_policy
    )]
    list: Vec<Policy>,
}

fn parse_policy(name: &str) -> Result<Policy, String> {
    Policy::parse(name).map_err(|e| e.to_string())
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    policies: PolicyArgs,
    /// Workloads traced under each policy, comma-separated; `none` for none.
    #[arg(
        long,
        default_value = "memstress,filejob,sortjob,compilejob",
        value_delimiter = ','
    )]
    workloads: Vec<String>,
    /// Skip the mm guest (compaction, THP, CMA, offlining, stress, KUnit).
    #[arg(long)]
    no_mm: bool,
    /// Skip stress-ng in the mm guest.
    #[arg(long)]
    no_stress: bool,
    /// How long stress-ng runs in the mm guest, seconds.
    #[arg(long, default_value_t = 20)]
    stress_seconds: u32,
    /// The mm guest's memory (more than 4 GiB gives it a Normal zone).
    #[arg(long, default_value = "5GiB")]
    mm_mem: String,
    /// The mm guest's vCPUs.
    #[arg(long, default_value_t = 4)]
    mm_cpus: u32,
    /// Check the plain kernel instead of the debug one.
    #[arg(long)]
    plain: bool,
    /// Also write the items as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    guest: GuestArgs,
}

#[derive(Args, Debug)]
pub struct TestArgs {
    #[command(flatten)]
    policies: PolicyArgs,
    #[command(flatten)]
    guest: GuestArgs,
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// Run checkpatch.pl --strict on the series instead of building.
    #[arg(long)]
    check: bool,
    /// Build the series one patch more at a time (each patch must build
    /// on top of the ones before it), then the whole series.
    #[arg(long, conflicts_with = "check")]
    each_patch: bool,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// The series folder (config, patches/, policy/).
    #[arg(long, default_value_os_t = nvmos_kernel::repo_kernel_dir())]
    kernel_dir: PathBuf,
    /// Cache for sources, builds and runs [default: $XDG_CACHE_HOME/nvmos/kernel].
    #[arg(long)]
    cache: Option<PathBuf>,
    /// The kernel source tarball.
    #[arg(long, default_value = kbuild::SOURCE_TARBALL)]
    source: PathBuf,
    /// make -j.
    #[arg(long, default_value_t = 2)]
    jobs: u32,
    /// The debug kernel: the same series with DEBUG_VM, PROVE_LOCKING,
    /// LOCK_STAT, DEBUG_PAGEALLOC, DEBUG_LIST, PAGE_OWNER, KASAN and
    /// KFENCE (kernel/config-debug), cached apart from the plain one.
    #[arg(long)]
    debug: bool,
}

impl Common {
    fn build_options(&self) -> BuildOptions {
        BuildOptions {
            kernel_dir: self.kernel_dir.clone(),
            cache: self.cache.clone().unwrap_or_else(kbuild::default_cache),
            source: self.source.clone(),
            jobs: self.jobs,
            flavour: if self.debug {
                kbuild::Flavour::Debug
            } else {
                kbuild::Flavour::Plain
            },
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct GuestArgs {
    /// Guest memory (e.g. 2GiB, 512MiB).
    #[arg(long, default_value = "2GiB")]
    mem: String,
    /// Guest CPUs.
    #[arg(long, default_value_t = 2)]
    cpus: u32,
    /// Longest run, seconds.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// Longest console silence before the watchdog kills the guest, seconds.
    #[arg(long, default_value_t = 180)]
    stall: u64,
    /// Never try KVM.
    #[arg(long)]
    tcg: bool,
    /// Bank size in MiB (`nvmos_bank_mib=`): the unit of the per-bank
    /// counters and of adaptive's pools; a power of two, at least 4.
    #[arg(long, default_value_t = nvmos_kernel::run::DEFAULT_BANK_MIB)]
    bank_mib: u64,
    /// Each CPU's trace ring buffer, KiB (`buffer_size_kb`): the guest
    /// allocates it as kernel pages before the workload; too small a
    /// buffer loses events (counted).
    #[arg(long, default_value_t = 32768)]
    trace_buffer_kib: u32,
    /// Static workloads compiled into the initramfs.
    #[arg(long, default_value_os_t = nvmos_kernel::repo_workloads_dir())]
    workloads_dir: PathBuf,
    /// Hot-page migration: a pass every this many ms (`nvmos_hot_ms=`) counts dirty PTEs as writes and moves hot pages to less worn frames; off when not given.
    #[arg(long)]
    hot_ms: Option<u32>,
    /// Hot-page migration: passes a page was written in before it moves; 0 counts without moving [default: 4].
    #[arg(long, requires = "hot_ms")]
    hot_threshold: Option<u32>,
    /// Hot-page migration: copies at most, percent of the writes counted [default: 5].
    #[arg(long, requires = "hot_ms")]
    hot_budget: Option<u32>,
    /// Hot-page migration: frames asked of the allocator per move, the least worn kept [default: 4].
    #[arg(long, requires = "hot_ms")]
    hot_candidates: Option<u32>,
    #[command(flatten)]
    common: Common,
}

impl GuestArgs {
    fn run_options(&self, policy: Policy, command: Vec<String>) -> Result<RunOptions> {
        let frames = parse_memory(&self.mem).map_err(anyhow::Error::msg)?;
        let bytes = frames * FRAME_BYTES;
        if !bytes.is_multiple_of(1 << 20) {
            bail!("--mem {}: a whole number of MiB", self.mem);
        }
        let mut o = RunOptions::new(
            self.common.build_options(),
            self.workloads_dir.clone(),
            policy,
            command,
        );
        o.mem_mib = bytes >> 20;
        o.cpus = self.cpus;
        o.timeout_s = self.timeout;
        o.stall_s = self.stall;
        o.accel = if self.tcg { Accel::Tcg } else { Accel::Auto };
        o.bank_mib = self.bank_mib;
        o.buffer_kb = self.trace_buffer_kib;
        if let Some(ms) = self.hot_ms {
            let mut h = nvmos_kernel::run::HotMigrate::new(ms);
            h.threshold = self.hot_threshold.unwrap_or(h.threshold);
            h.budget_pct = self.hot_budget.unwrap_or(h.budget_pct);
            h.candidates = self.hot_candidates.unwrap_or(h.candidates);
            h.check().map_err(anyhow::Error::msg)?;
            o.hot = Some(h);
        }
        Ok(o)
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// buddy, ibuddy, lis1, lis31 or adaptive.
    #[arg(long)]
    policy: String,
    /// The .nvt trace to write.
    #[arg(short, long)]
    output: PathBuf,
    /// Also print the run as JSON.
    #[arg(long)]
    json: bool,
    /// Also record the guest's memory accesses while the workload runs
    /// (a QEMU TCG plugin; forces TCG), filtered through the machine's
    /// last-level cache, and write the fills and writebacks here as a
    /// DRAMSim3 trace for `nvmos memsys run`.
    #[arg(long)]
    mem_trace: Option<PathBuf>,
    /// The machine preset whose last-level cache and memory clock the
    /// memory trace models.
    #[arg(long, default_value = "ddr4-2400", requires = "mem_trace")]
    mem_machine: String,
    /// Share the host's root read-only with the guest (virtio-9p, tag
    /// `hostroot`), so the workload can run host programs in a chroot.
    #[arg(long)]
    host_root: bool,
    /// QEMU's -cpu model (e.g. `max`, which host programs built for
    /// x86-64-v2 need under TCG).
    #[arg(long)]
    cpu_model: Option<String>,
    /// One more kernel parameter after the policy's (repeatable), e.g.
    /// `--kernel-arg nvmos_m3_partition=0`.
    #[arg(long, value_name = "PARAM")]
    kernel_arg: Vec<String>,
    #[command(flatten)]
    guest: GuestArgs,
    /// The command the guest runs, e.g. `memstress 256 2` (the
    /// initramfs has busybox and traces/workloads' programs).
    #[arg(last = true, required = true)]
    workload: Vec<String>,
}

#[derive(Args, Debug)]
pub struct StudyArgs {
    #[command(flatten)]
    policies: PolicyArgs,
    /// Workloads, comma-separated.
    #[arg(
        long,
        default_value = "memstress,filejob,sortjob,compilejob",
        value_delimiter = ','
    )]
    workloads: Vec<String>,
    /// Runs of each policy × workload.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Folder for kernel.json and kernel.html; kernel.json and each run's
    /// trace are written there as the runs finish.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Sample the guest's nvmos_policy file every this many milliseconds
    /// of guest time during each workload (the timeline of seed 004's
    /// Fig. 10); 0 takes no samples.
    #[arg(long, default_value_t = 1000)]
    sample_ms: u64,
    /// Run the guests under QEMU's -icount shift=0 (TCG only): guest time
    /// is then instructions, one nanosecond each, and migration's cost is
    /// counted in instructions.
    #[arg(long)]
    icount: bool,
    #[command(flatten)]
    guest: GuestArgs,
}

pub(crate) fn progress(p: Progress) {
    match p {
        Progress::Step(s) => eprintln!("{s}"),
        Progress::Run { done, total, label } => eprintln!("[{done}/{total}] {label}"),
    }
}

pub fn run(cmd: KernelCommand) -> Result<()> {
    match cmd {
        KernelCommand::Build(a) => build(&a),
        KernelCommand::Run(a) => run_one(&a),
        KernelCommand::Study(a) => run_study(&a),
        KernelCommand::Check(a) => run_check(&a),
        KernelCommand::Test(a) => run_test(&a),
        KernelCommand::Bench(a) => run_bench(&a),
        KernelCommand::Systime(a) => run_systime(&a),
        KernelCommand::Levelling(a) => run_levelling(&a),
        KernelCommand::Wis(a) => run_wis(&a),
    }
}

fn run_wis(a: &WisArgs) -> Result<()> {
    use nvmos_kernel::wis;
    let mut opts = wis::Options::new(a.guest.run_options()?, a.source.clone());
    opts.policies = a.policies.list.clone();
    opts.cpus = a.vcpus.clone();
    opts.tests = a.tests.clone();
    opts.tasks = a.tasks.clone();
    opts.warmup_ms = a.warmup_ms;
    opts.interval_ms = a.interval_ms;
    opts.samples = a.samples;
    opts.runs = a.runs;
    let w = wis::wis(&opts, &mut progress)?;
    a.guest.write_json(&w)?;
    print!("{}", pages::wis_text(&w));
    Ok(())
}

fn run_levelling(a: &LevellingArgs) -> Result<()> {
    use nvmos_kernel::levelling;
    let mut o = a.guest.run_options()?;
    o.cpus = a.cpus;
    o.policy = Policy::parse(&a.policy)?;
    // Guest time is instructions: the passes fall at the same points of
    // the workload whatever the host's load.
    o.use_icount();
    let mut opts = levelling::Options::new(o);
    opts.run.cpus = a.cpus;
    opts.workloads = a
        .workloads
        .iter()
        .map(|w| w.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    if opts.workloads.iter().any(Vec::is_empty) {
        bail!("--workloads: an empty command");
    }
    opts.runs = a.runs;
    opts.hot = nvmos_kernel::run::HotMigrate {
        ms: a.hot_ms,
        threshold: a.hot_threshold,
        budget_pct: a.hot_budget,
        candidates: a.hot_candidates,
    };
    let s = levelling::levelling(&opts, &mut progress)?;
    a.guest.write_json(&s)?;
    print!("{}", pages::levelling_text(&s));
    Ok(())
}

fn run_systime(a: &SystimeArgs) -> Result<()> {
    use nvmos_kernel::systime;
    let mut o = a.guest.run_options()?;
    o.cpus = a.cpus;
    let mut opts = systime::Options::new(o);
    opts.policies = a.policies.list.clone();
    opts.programs = a
        .programs
        .iter()
        .map(|p| systime::Program::parse(p))
        .collect::<Result<_, _>>()?;
    opts.runs = a.runs;
    let s = systime::systime(&opts, &mut progress)?;
    a.guest.write_json(&s)?;
    print!("{}", pages::systime_text(&s));
    Ok(())
}

fn run_bench(a: &BenchArgs) -> Result<()> {
    let mut opts = nvmos_kernel::bench::Options::new(a.guest.run_options()?);
    opts.policies = a.policies.list.clone();
    opts.cpus = a.vcpus.clone();
    opts.patterns = a.patterns.clone();
    opts.count = a.count;
    opts.repeat = a.repeat;
    opts.mixed = a.mixed;
    opts.icount = !a.no_icount;
    opts.user_space = !a.no_user_space;
    opts.runs = a.runs;
    let b = nvmos_kernel::bench::bench(&opts, &mut progress)?;
    a.guest.write_json(&b)?;
    print!("{}", pages::bench_text(&b));
    Ok(())
}

/// `value` as JSON at `path` (`-`: standard output), whole or not at all.
fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> Result<()> {
    let mut out = nvmos_trace::Output::create(path, &[])?;
    serde_json::to_writer_pretty(&mut out, value)?;
    out.commit()?;
    Ok(())
}

fn mib(text: &str, what: &str) -> Result<u64> {
    let bytes = parse_memory(text).map_err(anyhow::Error::msg)? * FRAME_BYTES;
    if !bytes.is_multiple_of(1 << 20) {
        bail!("{what} {text}: a whole number of MiB");
    }
    Ok(bytes >> 20)
}

fn finish_check(c: &check::Check) -> Result<()> {
    print!("{}", pages::mm_check_text(c));
    let failed = c.failures();
    if !failed.is_empty() {
        bail!("{} of {} checks failed", failed.len(), c.items.len());
    }
    Ok(())
}

fn run_check(a: &CheckArgs) -> Result<()> {
    let mut opts = check::Options::new(a.guest.run_options(Policy::Buddy, Vec::new())?);
    opts.policies = a.policies.list.clone();
    opts.workloads = a
        .workloads
        .iter()
        .filter(|w| w.as_str() != "none")
        .cloned()
        .collect();
    opts.mm = !a.no_mm;
    opts.stress = !a.no_stress;
    opts.stress_s = a.stress_seconds;
    opts.mm_mem_mib = mib(&a.mm_mem, "--mm-mem")?;
    opts.mm_cpus = a.mm_cpus;
    opts.plain = a.plain;
    let c = check::check(&opts, &mut progress)?;
    if let Some(path) = &a.json {
        write_json(path, &c)?;
    }
    finish_check(&c)
}

fn run_test(a: &TestArgs) -> Result<()> {
    let mut opts = check::Options::new(a.guest.run_options(Policy::Buddy, Vec::new())?);
    opts.policies = a.policies.list.clone();
    opts.plain = !a.guest.common.debug;
    let c = check::kunit(&opts, &mut progress)?;
    finish_check(&c)
}

fn build(a: &BuildArgs) -> Result<()> {
    let opts = a.common.build_options();
    if a.check {
        let results = kbuild::check(&opts, &mut progress)?;
        print!("{}", pages::check_text(&results));
        let errors: u32 = results.iter().map(|r| r.errors).sum();
        if errors > 0 {
            bail!("checkpatch found {errors} errors");
        }
        return Ok(());
    }
    if a.each_patch {
        for built in kbuild::build_each_patch(&opts, &mut progress)? {
            print!("{}", pages::built_text(&built));
        }
        return Ok(());
    }
    let built = kbuild::build(&opts, &mut progress)?;
    print!("{}", pages::built_text(&built));
    Ok(())
}

fn run_one(a: &RunArgs) -> Result<()> {
    let policy = Policy::parse(&a.policy)?;
    let mut opts = a.guest.run_options(policy, a.workload.clone())?;
    opts.output = Some(a.output.clone());
    opts.share_host_root = a.host_root;
    opts.cpu_model = a.cpu_model.clone();
    opts.extra_cmdline.extend(a.kernel_arg.iter().cloned());
    if let Some(path) = &a.mem_trace {
        opts.mem_trace = Some(nvmos_kernel::memtrace::MemTrace::for_machine(
            path.clone(),
            &a.mem_machine,
        )?);
    }
    let r = run::run(&opts, &mut progress)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    }
    print!("{}", pages::run_text(&r, &a.output, opts.bank_mib));
    if r.workload_status != 0 {
        bail!(
            "the workload exited with {} in the guest",
            r.workload_status
        );
    }
    Ok(())
}

fn run_study(a: &StudyArgs) -> Result<()> {
    let mut run = a.guest.run_options(Policy::Buddy, Vec::new())?;
    run.sample_ms = (a.sample_ms > 0).then_some(a.sample_ms);
    if a.icount {
        run.use_icount();
    }
    let opts = study::Options {
        run,
        policies: a.policies.list.clone(),
        workloads: a.workloads.clone(),
        runs: a.runs,
        keep: a.out.clone(),
    };
    let s = study::run_study(&opts, &mut progress)?;
    print!("{}", pages::table(&s)?);
    if let Some(dir) = &a.out {
        let out = OutputDir::create(dir, &[])?;
        out.write_json("kernel.json", &s)?;
        let page = out.write("kernel.html", pages::html(&s)?.as_bytes())?;
        println!("report: {}", page.display());
    }
    if let Some(why) = s.incomplete() {
        bail!("{why}");
    }
    Ok(())
}
