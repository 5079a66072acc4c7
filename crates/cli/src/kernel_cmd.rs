//! `nvmos kernel build|run|study`: the allocators inside a real Linux
//! kernel under QEMU (crate `nvmos-kernel`); this file parses and renders.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use nvmos_kernel::kbuild::{self, BuildOptions};
use nvmos_kernel::run::{self, Accel, Policy, RunOptions};
use nvmos_kernel::{study, Progress};

use crate::units::{parse_memory, FRAME_BYTES};
use nvmos_pages::align;
use nvmos_report::chart::{Axis, BarChart};
use nvmos_report::columns::{Column, Columns, Format, Key};
use nvmos_report::page::{Html, Page};
use nvmos_report::OutputDir;
use serde_json::Value;

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
    /// Each CPU's trace ring buffer, KiB (`buffer_size_kb`): the guest
    /// allocates it as kernel pages before the workload; too small a
    /// buffer loses events (counted).
    #[arg(long, default_value_t = 32768)]
    trace_buffer_kib: u32,
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
        o.buffer_kb = self.trace_buffer_kib;
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
    /// Folder for kernel.json and kernel.html; kernel.json and each run's
    /// trace are written there as the runs finish.
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
        keep: a.out.clone(),
    };
    let s = study::run_study(&opts, &mut progress)?;
    print!("{}", table(&s)?);
    if let Some(dir) = &a.out {
        let out = OutputDir::create(dir, &[])?;
        out.write_json("kernel.json", &s)?;
        let page = out.write("kernel.html", html(&s)?.as_bytes())?;
        println!("report: {}", page.display());
    }
    if !s.failed.is_empty() {
        bail!(
            "{} of {} runs failed: {}",
            s.failed.len(),
            s.planned,
            s.failed
                .iter()
                .map(|f| format!(
                    "{} {} run {}: {}",
                    f.policy.name(),
                    f.workload,
                    f.run,
                    f.error
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
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

fn pool_tag(pool: &str) -> String {
    if pool == "-" {
        String::new()
    } else {
        format!("({pool})")
    }
}

/// A figure in the terminal tables: 3 significant-ish digits, "-" for
/// nothing measured.
fn f(v: &Value) -> String {
    match v.as_f64() {
        None => "-".into(),
        Some(v) if v.is_nan() => "-".into(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.4}"),
    }
}

/// `kernel.json`'s `runs`.
fn run_columns() -> Columns {
    Columns::new([
        Column::text("policy", "policy"),
        Column::text("workload", "workload"),
        Column::text("run", "run"),
        Column::text("accel", "accel"),
        Column::number("boot s", "boot_s").with(f),
        Column::number("run s", "total_s").with(f),
        Column::number("events", "events").format(Format::Plain),
        Column::number("lost", "lost_events").format(Format::Plain),
        Column::number("max", "wear.max").format(Format::Plain),
        Column::number("mean", "wear.mean").with(f),
        Column::number("max/mean", "wear.max_over_mean").with(f),
        Column::number("used banks", "used_banks").format(Format::Plain),
        Column::figure("pinned banks", "")
            .with(|r| format!("{}/{}", r["pinned_banks"], r["banks"])),
        Column::figure("problems", "problems")
            .with(|v| v.as_array().map_or(0, Vec::len).to_string()),
    ])
    .key(Key::constant("data-list", "runs"))
    .key(Key::index("data-row"))
}

/// `kernel.json`'s `replay`.
fn replay_columns() -> Columns {
    Columns::new([
        Column::text("workload", "workload"),
        Column::text("kernel policy", "policy"),
        Column::text("replayed model", "model"),
        Column::number("predicted max", "predicted_max").with(f),
        Column::number("measured max", "measured_max").with(f),
        Column::number("ratio max", "ratio_max").with(f),
        Column::number("predicted mean", "predicted_mean").with(f),
        Column::number("measured mean", "measured_mean").with(f),
        Column::number("ratio mean", "ratio_mean").with(f),
    ])
    .key(Key::constant("data-list", "replay"))
    .key(Key::index("data-row"))
}

/// `kernel.json`'s `pinned_banks`.
fn pinned_columns() -> Columns {
    Columns::new([
        Column::text("workload", "workload"),
        Column::number("buddy pinned banks", "buddy").with(f),
        Column::number("adaptive pinned banks", "adaptive").with(f),
        Column::number("adaptive / buddy (target <= 0.25)", "ratio").with(f),
        Column::number("buddy placed", "buddy_placed").with(f),
        Column::number("adaptive placed", "adaptive_placed").with(f),
        Column::number("ratio placed", "ratio_placed").with(f),
        Column::number("buddy untraced", "buddy_untraced").with(f),
        Column::number("adaptive untraced", "adaptive_untraced").with(f),
        Column::number("ratio untraced", "ratio_untraced").with(f),
        Column::number("buddy added", "buddy_added").with(f),
        Column::number("adaptive added", "adaptive_added").with(f),
        Column::number("buddy added untraced", "buddy_added_untraced").with(f),
        Column::number("adaptive added untraced", "adaptive_added_untraced").with(f),
        Column::number("banks", "banks").format(Format::Plain),
    ])
    .key(Key::constant("data-list", "pinned_banks"))
    .key(Key::index("data-row"))
}

fn table(s: &study::Study) -> Result<String> {
    let mut out = format!(
        "Runs ({} MiB, {} CPUs; wear = allocations per frame during the workload, the kernel's own placement):\n",
        s.mem_mib, s.cpus
    );
    out.push_str(&run_columns().text(&s.runs)?);
    out.push_str(
        "\nReplay vs reality (buddy's trace replayed through the model; medians over runs):\n",
    );
    out.push_str(&replay_columns().text(&s.replay)?);
    out.push('\n');
    for (w, r) in &s.ibuddy_max_reduction {
        let _ = writeln!(
            out,
            "{w}: buddy's max / ibuddy's max = {} (target >= 10)",
            f(&(*r).into())
        );
    }
    let _ = writeln!(
        out,
        "\nBanks of {} MiB holding kernel pages at the end of the workload (medians over runs; \
         placed = pinned by pages the page-frame policy placed, not memblock's PG_reserved ones; \
         untraced = placed, less the trace buffers' pinned frames; added = pinned banks with \
         no memblock frame):",
        s.bank_mib
    );
    out.push_str(&pinned_columns().text(&s.pinned_banks)?);
    Ok(out)
}

fn html(s: &study::Study) -> Result<String> {
    let mut page = Page::new(
        "kernel.html",
        "nvmos kernel study",
        "iBuddy, lazy iBuddy and Adaptive-Buddy inside Linux 6.12 under QEMU",
    );
    for (w, r) in &s.ibuddy_max_reduction {
        page.summary_note(
            &Html::new()
                .text(&format!("{w}: buddy's most allocated frame / iBuddy's = "))
                .figure(
                    *r,
                    &[
                        ("data-workload", w.as_str()),
                        ("data-field", "ibuddy_max_reduction"),
                    ],
                )
                .text("× (target ≥ 10)."),
        );
    }
    page.section("about", "How it was run").note(&Html::new().text(&format!(
        "{} MiB, {} CPUs, banks of {} MiB. Wear is allocations per frame during the workload, counted from the kernel's own mm_page_alloc events. Timing under TCG is not real time.",
        s.mem_mib, s.cpus, s.bank_mib
    )));
    page.section("runs", "Runs")
        .table(&run_columns().html(&s.runs)?);
    page.section("replay", "Replay vs reality")
        .table(&replay_columns().html(&s.replay)?);
    page.section("pinned", "Banks holding kernel pages (adaptive vs buddy)")
        .table(&pinned_columns().html(&s.pinned_banks)?);
    if !s.ibuddy_max_reduction.is_empty() {
        let chart = BarChart::new(
            "ibuddy-reduction",
            "iBuddy's reduction of the most allocated frame (buddy's max / iBuddy's max)",
        )
        .value_axis(Axis::linear("buddy's max / iBuddy's max"))
        .unit("×")
        .categories(s.ibuddy_max_reduction.iter().map(|(w, _)| w.clone()))
        .series(
            "reduction",
            s.ibuddy_max_reduction
                .iter()
                .map(|(_, r)| Some(*r).filter(|v| !v.is_nan()))
                .collect(),
        )
        .reference(10.0, "target ≥ 10")
        .render()?;
        page.section(
            "reduction",
            "iBuddy's reduction of the most allocated frame",
        )
        .chart(&chart);
    }
    Ok(page.render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_number_and_draws_the_reduction() {
        let s = study::Study {
            mem_mib: 512,
            cpus: 2,
            runs: Vec::new(),
            replay: vec![study::ReplayRow {
                workload: "memstress <1>".into(),
                policy: Policy::IBuddy,
                model: "iBuddy".into(),
                predicted_max: 3.0,
                predicted_mean: 1.5,
                measured_max: 4.0,
                measured_mean: 1.25,
                ratio_max: 0.75,
                ratio_mean: 1.2,
            }],
            ibuddy_max_reduction: vec![("memstress <1>".into(), 12.5)],
            bank_mib: 16,
            pinned_banks: vec![study::PinnedRow {
                workload: "memstress <1>".into(),
                buddy: 10.0,
                adaptive: 8.0,
                ratio: 0.8,
                buddy_placed: 9.0,
                adaptive_placed: 6.0,
                ratio_placed: 6.0 / 9.0,
                buddy_untraced: 8.0,
                adaptive_untraced: 2.0,
                ratio_untraced: 0.25,
                buddy_added: 4.0,
                adaptive_added: 3.0,
                buddy_added_untraced: 2.0,
                adaptive_added_untraced: 0.0,
                banks: 128,
            }],
            failed: Vec::new(),
            planned: 0,
        };
        let html = html(&s).unwrap();
        assert!(
            html.contains("<td class=\"text\">memstress &lt;1&gt;</td>"),
            "{html}"
        );
        assert!(html.contains(
            "<td data-list=\"replay\" data-row=\"0\" data-field=\"ratio_max\">0.750</td>"
        ));
        assert!(html.contains(
            "data-workload=\"memstress &lt;1&gt;\" data-field=\"ibuddy_max_reduction\">12.500</b>"
        ));
        assert!(html.contains(
            "<td data-list=\"pinned_banks\" data-row=\"0\" data-field=\"ratio\">0.800</td>"
        ));
        assert!(html.contains(
            "<td data-list=\"pinned_banks\" data-row=\"0\" data-field=\"ratio_untraced\">0.250</td>"
        ));
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 1);
        assert!(html.contains("<script>"), "the check script");
    }
}
