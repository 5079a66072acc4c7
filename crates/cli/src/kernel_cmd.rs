//! `nvmos kernel build|run|study`: the allocators inside a real Linux
//! kernel under QEMU (crate `nvmos-kernel`); this file parses and renders.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nvmos_kernel::kbuild::{self, BuildOptions};
use nvmos_kernel::run::{self, Accel, Policy, RunOptions};
use nvmos_kernel::{study, Progress};

use crate::render::align;
use crate::report::escape;
use crate::units::{parse_memory, FRAME_BYTES};

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
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// Run checkpatch.pl on the series instead of building.
    #[arg(long)]
    check: bool,
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
}

impl Common {
    fn build_options(&self) -> BuildOptions {
        BuildOptions {
            kernel_dir: self.kernel_dir.clone(),
            cache: self.cache.clone().unwrap_or_else(kbuild::default_cache),
            source: self.source.clone(),
            jobs: self.jobs,
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
    /// Static workloads compiled into the initramfs.
    #[arg(long, default_value_os_t = nvmos_kernel::repo_workloads_dir())]
    workloads_dir: PathBuf,
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
    #[command(flatten)]
    guest: GuestArgs,
    /// The command the guest runs, e.g. `memstress 256 2` (the
    /// initramfs has busybox and traces/workloads' programs).
    #[arg(last = true, required = true)]
    workload: Vec<String>,
}

#[derive(Args, Debug)]
pub struct StudyArgs {
    /// Policies, comma-separated.
    #[arg(
        long,
        default_value = "buddy,ibuddy,lis1,lis31,adaptive",
        value_delimiter = ','
    )]
    policies: Vec<String>,
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
    /// Folder for kernel.json and kernel.html.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    guest: GuestArgs,
}

fn progress(p: Progress) {
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
    }
}

fn build(a: &BuildArgs) -> Result<()> {
    let opts = a.common.build_options();
    if a.check {
        let results = kbuild::check(&opts, &mut progress)?;
        let mut errors = 0;
        for r in &results {
            println!(
                "{}: {} errors, {} warnings",
                r.file.display(),
                r.errors,
                r.warnings
            );
            for line in r
                .output
                .lines()
                .filter(|l| l.contains(": ERROR:") || l.contains(": WARNING:"))
            {
                println!("  {line}");
            }
            errors += r.errors;
        }
        if errors > 0 {
            bail!("checkpatch found {errors} errors");
        }
        return Ok(());
    }
    let built = kbuild::build(&opts, &mut progress)?;
    println!(
        "kernel {} ({} {}): {}{} in {:.1} s",
        built.hash,
        kbuild::SOURCE_PACKAGE,
        built.source_version,
        built.bzimage.display(),
        if built.cached {
            " (cached)"
        } else if built.cold {
            " (cold build)"
        } else {
            " (rebuilt)"
        },
        built.seconds
    );
    Ok(())
}

fn run_one(a: &RunArgs) -> Result<()> {
    let policy = Policy::parse(&a.policy)?;
    let mut opts = a.guest.run_options(policy, a.workload.clone())?;
    opts.output = Some(a.output.clone());
    let r = run::run(&opts, &mut progress)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    }
    println!(
        "policy {} ({}): boot {:.1} s, run {:.1} s; workload exit {}; {} events, {} lost; trace {}",
        r.policy.name(),
        r.accel,
        r.boot_s,
        r.total_s,
        r.workload_status,
        r.event_count,
        r.counts.lost_events,
        a.output.display()
    );
    let rows: Vec<Vec<String>> = r
        .counters
        .values
        .iter()
        .map(|(k, v)| {
            vec![
                k.clone(),
                v.to_string(),
                v.saturating_sub(r.counters_before.get(k)).to_string(),
            ]
        })
        .collect();
    let mut table = vec![vec!["counter".into(), "after".into(), "workload".into()]];
    table.extend(rows);
    print!("{}", align(&table));
    println!(
        "banks of {} MiB: {} in use, {} pinned by kernel pages, of {}",
        opts.bank_mib,
        r.counters.used_banks(),
        r.counters.pinned_banks(),
        r.counters.bank_count()
    );
    let pinned: Vec<String> = r
        .counters
        .banks
        .iter()
        .filter(|b| b.used > 0)
        .map(|b| format!("{}:{}/{}{}", b.bank, b.pinned, b.used, pool_tag(&b.pool)))
        .collect();
    println!("  bank:kernel/used pages: {}", pinned.join(" "));
    if !r.problems.is_empty() {
        bail!(
            "the guest's console reports problems ({}):\n{}",
            r.console_log.display(),
            r.problems.join("\n")
        );
    }
    if r.workload_status != 0 {
        bail!(
            "the workload exited with {} in the guest",
            r.workload_status
        );
    }
    Ok(())
}

fn run_study(a: &StudyArgs) -> Result<()> {
    let policies = a
        .policies
        .iter()
        .map(|p| Policy::parse(p))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = study::Options {
        run: a.guest.run_options(Policy::Buddy, Vec::new())?,
        policies,
        workloads: a.workloads.clone(),
        runs: a.runs,
    };
    let s = study::run_study(&opts, &mut progress)?;
    print!("{}", table(&s));
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        write_atomic(
            &dir.join("kernel.json"),
            serde_json::to_string_pretty(&s)?.as_bytes(),
        )?;
        write_atomic(&dir.join("kernel.html"), html(&s).as_bytes())?;
        println!("report: {}", dir.join("kernel.html").display());
    }
    let bad: Vec<&study::RunRow> = s
        .runs
        .iter()
        .filter(|r| !r.problems.is_empty() || r.lost_events > 0)
        .collect();
    if !bad.is_empty() {
        bail!(
            "{} runs had kernel problems or lost events: {}",
            bad.len(),
            bad.iter()
                .map(|r| format!("{} {} run {}", r.policy.name(), r.workload, r.run))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// The file whole or not at all (`nvmos_trace::Output`: a temporary in
/// the same folder, renamed on success).
fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    let mut out = nvmos_trace::Output::create(path, &[])?;
    std::io::Write::write_all(&mut out, bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    out.commit()?;
    Ok(())
}

fn pool_tag(pool: &str) -> String {
    if pool == "-" {
        String::new()
    } else {
        format!("({pool})")
    }
}

fn pinned_rows(s: &study::Study) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "workload",
        "buddy pinned banks",
        "adaptive pinned banks",
        "adaptive / buddy (target <= 0.25)",
        "banks",
    ]
    .map(String::from)
    .to_vec()];
    for r in &s.pinned_banks {
        rows.push(vec![
            r.workload.clone(),
            f(r.buddy),
            f(r.adaptive),
            f(r.ratio),
            r.banks.to_string(),
        ]);
    }
    rows
}

fn f(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn run_rows(s: &study::Study) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "policy",
        "workload",
        "run",
        "accel",
        "boot s",
        "run s",
        "events",
        "lost",
        "max",
        "mean",
        "max/mean",
        "used banks",
        "pinned banks",
        "problems",
    ]
    .map(String::from)
    .to_vec()];
    for r in &s.runs {
        rows.push(vec![
            r.policy.name().into(),
            r.workload.clone(),
            r.run.to_string(),
            r.accel.clone(),
            f(r.boot_s),
            f(r.total_s),
            r.events.to_string(),
            r.lost_events.to_string(),
            r.wear.max.to_string(),
            f(r.wear.mean),
            f(r.wear.max_over_mean),
            r.used_banks.to_string(),
            format!("{}/{}", r.pinned_banks, r.banks),
            r.problems.len().to_string(),
        ]);
    }
    rows
}

fn replay_rows(s: &study::Study) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "workload",
        "kernel policy",
        "replayed model",
        "predicted max",
        "measured max",
        "ratio max",
        "predicted mean",
        "measured mean",
        "ratio mean",
    ]
    .map(String::from)
    .to_vec()];
    for r in &s.replay {
        rows.push(vec![
            r.workload.clone(),
            r.policy.name().into(),
            r.model.clone(),
            f(r.predicted_max),
            f(r.measured_max),
            f(r.ratio_max),
            f(r.predicted_mean),
            f(r.measured_mean),
            f(r.ratio_mean),
        ]);
    }
    rows
}

fn table(s: &study::Study) -> String {
    let mut out = format!(
        "Runs ({} MiB, {} CPUs; wear = allocations per frame during the workload, the kernel's own placement):\n",
        s.mem_mib, s.cpus
    );
    out.push_str(&align(&run_rows(s)));
    out.push_str(
        "\nReplay vs reality (buddy's trace replayed through the model; medians over runs):\n",
    );
    out.push_str(&align(&replay_rows(s)));
    out.push('\n');
    for (w, r) in &s.ibuddy_max_reduction {
        let _ = writeln!(
            out,
            "{w}: buddy's max / ibuddy's max = {} (target >= 10)",
            f(*r)
        );
    }
    let _ = writeln!(
        out,
        "\nBanks of {} MiB holding kernel pages at the end of the workload (medians over runs):",
        s.bank_mib
    );
    out.push_str(&align(&pinned_rows(s)));
    out
}

fn html_table(rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table border=\"1\" cellspacing=\"0\" cellpadding=\"3\">");
    for (i, row) in rows.iter().enumerate() {
        out.push_str("<tr>");
        for c in row {
            let tag = if i == 0 { "th" } else { "td" };
            let _ = write!(out, "<{tag}>{}</{tag}>", escape(c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

fn html(s: &study::Study) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>nvmos: the allocators in a real kernel</title></head><body>\n",
    );
    let _ = write!(
        out,
        "<h1>iBuddy, lazy iBuddy and Adaptive-Buddy inside Linux 6.12 under QEMU</h1><p>{} MiB, {} CPUs, banks of {} MiB. Wear is allocations per frame during the workload, counted from the kernel's own mm_page_alloc events. Timing under TCG is not real time.</p><h2>Runs</h2>{}<h2>Replay vs reality</h2>{}<h2>Banks holding kernel pages</h2>{}<h2>iBuddy's reduction of the most allocated frame</h2><ul>",
        s.mem_mib,
        s.cpus,
        s.bank_mib,
        html_table(&run_rows(s)),
        html_table(&replay_rows(s)),
        html_table(&pinned_rows(s))
    );
    for (w, r) in &s.ibuddy_max_reduction {
        let _ = write!(out, "<li>{}: {}×</li>", escape(w), f(*r));
    }
    out.push_str("</ul></body></html>\n");
    out
}
