//! The book's results pages (`docs/src/results/`), rendered from the
//! results pipeline ([`nvmos_sim::reproduce`]).
//!
//! A page is data first ([`PageData`]: the stamp and the sections, which
//! the pipeline writes as JSON beside the page) and Markdown second
//! ([`markdown`]), so a test can render the committed data again and find
//! any hand edit of the page, and can compare the deterministic sections
//! of a fresh run with the committed ones cell by cell.
//!
//! Every section says whether it is deterministic (the same options give
//! the same text on any machine) or a timing; a timing is rendered as the
//! median and the spread of its alternating runs and as a ratio to the
//! baseline of the same runs, never as an absolute time alone.

use std::fmt::Write as _;

use nvmos_report::markdown;
use nvmos_sim::reproduce::{Reproduction, TimingTable};
use nvmos_sim::study::Scale;
use nvmos_sim::{AllocatorKind, Evaluation, StudyRow, TraceStudy};
use serde::{Deserialize, Serialize};

use crate::Result;

/// Where and when a page's figures were produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stamp {
    /// The commit of the code that ran (`git describe --always --dirty`).
    pub commit: String,
    /// The day the run started (UTC, `YYYY-MM-DD`).
    pub date: String,
    /// The processor's model name.
    pub cpu: String,
    /// Online CPUs.
    pub cores: u32,
    /// The kernel (`uname -sr`).
    pub kernel: String,
    /// The 1, 5 and 15 minute load averages when the run started.
    pub load_average: String,
    /// The command that produced the page.
    pub command: String,
}

impl Stamp {
    /// One line for a page: machine, commit, date.
    pub fn line(&self) -> String {
        format!(
            "Produced by `{}` on {} ({} cores, {}, load average {} at start), commit `{}`, {}.",
            self.command,
            self.cpu,
            self.cores,
            self.kernel,
            self.load_average,
            self.commit,
            self.date
        )
    }
}

/// A page: what the pipeline writes to `data/<stem>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PageData {
    /// Where and when.
    pub stamp: Stamp,
    /// The page.
    pub page: ResultsPage,
}

/// One results page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultsPage {
    /// The file's stem (`evaluate` for `evaluate.md`).
    pub stem: String,
    /// The page's title.
    pub title: String,
    /// What the page shows and how it was run, in words.
    pub intro: String,
    /// The scale its study ran at; `None` for a study with one size (the
    /// wear study on the traces).
    pub scale: Option<Scale>,
    /// The sections, in order.
    pub sections: Vec<Section>,
}

/// One section of a page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// Its heading.
    pub heading: String,
    /// Words before the body (may be empty).
    pub text: String,
    /// Whether the same options give the same body on any machine.
    pub deterministic: bool,
    /// What it shows.
    pub body: Body,
}

/// A section's content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Body {
    /// A Markdown table, already rendered.
    Table(String),
    /// A study's terminal output, shown as it prints.
    Text(String),
    /// Timing samples, rendered by [`timing_table`].
    Timing(TimingTable),
    /// A figure: an SVG element, put into the page as it is.
    Figure(String),
}

impl Section {
    fn table(heading: impl Into<String>, text: impl Into<String>, table: String) -> Self {
        Section {
            heading: heading.into(),
            text: text.into(),
            deterministic: true,
            body: Body::Table(table),
        }
    }

    fn text(heading: impl Into<String>, text: impl Into<String>, output: String) -> Self {
        Section {
            heading: heading.into(),
            text: text.into(),
            deterministic: true,
            body: Body::Text(output),
        }
    }
}

/// The allocators of the headline table, after the kernel's own placement.
const HEADLINE: [AllocatorKind; 6] = [
    AllocatorKind::Buddy,
    AllocatorKind::Lbs31,
    AllocatorKind::IBuddy,
    AllocatorKind::Lis31,
    AllocatorKind::M3,
    AllocatorKind::Adaptive,
];

/// What a page says of its scale.
fn scale_words(scale: Scale) -> &'static str {
    match scale {
        Scale::Full => "the full study",
        Scale::Quick => "the quick study (`--quick`: a small version, not the seed's figures)",
    }
}

/// A page of one study's terminal output.
fn study_page(
    stem: &str,
    title: &str,
    scale: Scale,
    intro: &str,
    heading: &str,
    output: String,
) -> ResultsPage {
    ResultsPage {
        stem: stem.into(),
        title: title.into(),
        intro: format!("{intro}, {}.", scale_words(scale)),
        scale: Some(scale),
        sections: vec![Section::text(heading, "", output)],
    }
}

/// Every page of a run, in the order the book lists them.
pub fn pages(r: &Reproduction) -> Result<Vec<ResultsPage>> {
    let o = &r.options;
    let mut pages = Vec::new();
    if let Some(e) = &r.evaluation {
        pages.push(evaluate_page(e)?);
    }
    if let (Some(l), Some(scale)) = (&r.levelling, o.levelling) {
        pages.push(study_page(
            "levelling",
            "Wear levelling beneath the allocators",
            scale,
            "`nvmos study levelling` on the shipped traces: lifetime as a percentage of the ideal under no levelling, Start-Gap, randomised Start-Gap and Security Refresh, and Start-Gap held against its paper",
            "Lifetime under each scheme",
            crate::levelling::render(l),
        ));
    }
    if let (Some(b), Some(scale)) = (&r.banks, o.banks) {
        pages.push(study_page(
            "banks",
            "Banks and placement",
            scale,
            "`nvmos study banks`: STREAM-like kernels on 1, 2 and 4 cores over frames placed by Linux's buddy, at random and by M³, through the DDR timing model",
            "Row-buffer conflicts and run time",
            crate::banks::text(b)?,
        ));
    }
    if let (Some(p), Some(scale)) = (&r.power, o.power) {
        pages.push(study_page(
            "power",
            "Memory power",
            scale,
            "`nvmos study power --no-latency`: memory that can be powered down against the optimum, energy and migration for Linux's buddy, the Bank-Buddies and Adaptive-Buddy. The timed allocation-latency table is left to `nvmos study power`, since it depends on the machine",
            "Banks offline, energy and migration",
            crate::power::tables(p)?,
        ));
    }
    if let (Some(sw), Some(scale)) = (&r.swap, o.swap) {
        pages.push(study_page(
            "swap",
            "SCM as a paging device",
            scale,
            "`nvmos study swap`: swap request patterns, swap-in and swap-out time on SCM and NAND devices, congestion control, the per-fault breakdown and device lifetime",
            "The paging study",
            crate::swap::tables(sw),
        ));
    }
    if let (Some(timings), Some(scale)) = (&r.timings, o.timings) {
        pages.push(ResultsPage {
            stem: "timings".into(),
            title: "Timings".into(),
            scale: Some(scale),
            intro: format!(
                "Every table was taken in {} alternating runs: each run times every row once, baseline included, so a row and its baseline share the machine's state. Each row gives the median and the range of its samples and, more telling on a shared machine, the median and range of its per-run ratio to the baseline. The allocation benchmark ran at {}.",
                timings.runs,
                scale_words(scale)
            ),
            sections: timings
                .tables
                .iter()
                .map(|t| Section {
                    heading: t.title.clone(),
                    text: String::new(),
                    deterministic: false,
                    body: Body::Timing(t.clone()),
                })
                .collect(),
        });
    }
    Ok(pages)
}

/// The wear page: per trace, every allocator's wear table (its timing
/// column left out) and, for traces with sampled writes, the
/// write-weighted table.
fn evaluate_page(e: &Evaluation) -> Result<ResultsPage> {
    let mut sections = vec![Section::table(
        "Lifetime at a glance",
        "Lifetime in percent of the ideal (every frame worn evenly: 100), one full-page write per allocated frame per allocation: how long the memory lasts under each placement; higher is better.",
        headline(e)?,
    )];
    for t in &e.traces {
        let first = t.rows.first();
        let text = format!(
            "{} events over {:.2} s on {} frames and {} CPUs{}. {}",
            t.events,
            t.duration_ns as f64 / 1e9,
            first.map_or(0, |r| r.wear.frames),
            t.machine.cpus,
            if t.inferred {
                " (inferred from the trace)"
            } else {
                ""
            },
            first.map_or(String::new(), |r| crate::events_read(&r.stats.accounting)),
        );
        let mut table = crate::evaluate::wear_columns(false)
            .deterministic()
            .markdown(&crate::evaluate::wear_rows_of(t))?;
        if let Some(writes) = write_weighted(t)? {
            table.push_str("\nWrite-weighted, from the sampled writes:\n\n");
            table.push_str(&writes);
        }
        sections.push(Section::table(format!("`{}`", t.trace), text, table));
    }
    Ok(ResultsPage {
        stem: "evaluate".into(),
        title: "Wear on the shipped traces".into(),
        scale: None,
        intro: "`nvmos evaluate` on every trace in `traces/`: the kernel's own placement (`AS_RECORDED`) and every allocator of the registry, replayed on the recorded machine. Flags (`!!`) mark rows whose figures are not the trace's.".into(),
        sections,
    })
}

/// The write-weighted table of a trace recorded with sampled writes.
fn write_weighted(t: &TraceStudy) -> Result<Option<String>> {
    let rows: Vec<&StudyRow> = t.rows.iter().filter(|r| r.writes.is_some()).collect();
    if rows.is_empty() {
        return Ok(None);
    }
    crate::evaluate::write_columns().markdown(&rows).map(Some)
}

/// The headline: every trace's lifetime (% of ideal) under the kernel's
/// placement and the allocators of [`HEADLINE`].
fn headline(e: &Evaluation) -> Result<String> {
    let names: Vec<&str> = std::iter::once("AS_RECORDED")
        .chain(HEADLINE.iter().map(|k| k.name()))
        .collect();
    let mut header = vec!["trace".to_string()];
    header.extend(names.iter().map(|n| match *n {
        "AS_RECORDED" => "Linux (as recorded)".to_string(),
        n => n.to_string(),
    }));
    let left: Vec<bool> = (0..header.len()).map(|i| i == 0).collect();
    let rows: Vec<Vec<String>> = e
        .traces
        .iter()
        .map(|t| {
            let mut row = vec![t.trace.clone()];
            row.extend(names.iter().enumerate().map(|(i, n)| {
                // The kernel's own placement is every trace's first row.
                let found = match i {
                    0 => t.rows.first(),
                    _ => t.rows.iter().find(|r| r.allocator == *n),
                };
                found.map_or("-".into(), |r| {
                    let pct = r.wear.lifetime_pct_of_ideal;
                    if pct.is_finite() {
                        nvmos_report::format_value(pct)
                    } else {
                        "-".into()
                    }
                })
            }));
            row
        })
        .collect();
    Ok(markdown::table(&header, &left, &rows))
}

/// A timing table: per row the median and range of its samples and of
/// its per-run ratio to the baseline.
pub fn timing_table(t: &TimingTable) -> String {
    let baseline = t.rows.iter().find(|r| r.label == t.baseline);
    let header = [
        "row".to_string(),
        format!("median ({})", t.unit),
        "range".to_string(),
        format!("ratio to {} (median)", t.baseline),
        "ratio range".to_string(),
    ];
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            let (lo, mid, hi) = spread(&r.samples);
            let ratios: Vec<f64> = match baseline {
                Some(b) => r
                    .samples
                    .iter()
                    .zip(&b.samples)
                    .map(|(x, b)| x / b)
                    .collect(),
                None => Vec::new(),
            };
            let (rlo, rmid, rhi) = spread(&ratios);
            vec![
                r.label.clone(),
                fmt(mid),
                format!("{}–{}", fmt(lo), fmt(hi)),
                if ratios.is_empty() {
                    "no baseline".into()
                } else {
                    format!("{:.2}×", rmid)
                },
                if ratios.is_empty() {
                    "-".into()
                } else {
                    format!("{:.2}–{:.2}", rlo, rhi)
                },
            ]
        })
        .collect();
    let mut out = markdown::table(&header, &[true, false, false, false, false], &rows);
    let better = if t.higher_is_better {
        "higher is better"
    } else {
        "lower is better"
    };
    let _ = writeln!(
        out,
        "\n{} samples a row ({better}; a ratio below 1 means {} than the baseline).",
        t.rows.first().map_or(0, |r| r.samples.len()),
        if t.higher_is_better {
            "slower"
        } else {
            "faster"
        }
    );
    out
}

fn fmt(x: f64) -> String {
    if x.is_finite() {
        nvmos_report::format_value(x)
    } else {
        "-".into()
    }
}

/// Smallest, median and largest; NaN for none.
pub(crate) fn spread(samples: &[f64]) -> (f64, f64, f64) {
    let lo = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match nvmos_measure::stats::median(samples) {
        Some(mid) => (lo, mid, hi),
        None => (f64::NAN, f64::NAN, f64::NAN),
    }
}

/// A results page as Markdown: title, stamp, intro, then each section.
pub fn markdown(data: &PageData) -> String {
    let p = &data.page;
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", p.title);
    let _ = writeln!(
        out,
        "<!-- Generated by `nvmos reproduce` from data/{}.json: do not edit; run the pipeline again. -->\n",
        p.stem
    );
    let _ = writeln!(out, "*{}*\n", data.stamp.line());
    let _ = writeln!(out, "{}\n", p.intro);
    for s in &p.sections {
        let _ = writeln!(out, "## {}\n", s.heading);
        if !s.text.is_empty() {
            let _ = writeln!(out, "{}\n", s.text);
        }
        match &s.body {
            Body::Table(t) => out.push_str(t),
            Body::Text(t) => {
                let _ = write!(out, "```text\n{}", t);
                if !t.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str("```\n");
            }
            Body::Timing(t) => out.push_str(&timing_table(t)),
            Body::Figure(svg) => {
                let _ = writeln!(out, "<div class=\"figure\">\n{}\n</div>", svg.trim());
            }
        }
        out.push('\n');
    }
    out
}

/// The pages in the order the book lists them; a page of another name
/// comes after them.
pub const PAGE_ORDER: [&str; 12] = [
    "evaluate",
    "levelling",
    "banks",
    "banks-real",
    "power",
    "swap",
    "timings",
    "kernel",
    "hot-migrate",
    "pmo",
    "psync",
    "peers",
];

/// The page of nvmos's frame allocators beside LLFree, from what
/// `bench-peers --json` recorded ([`crate::peers::PeerRun`], validated by
/// the caller). Timings on a shared machine, so not deterministic.
pub fn peers_page(run: &crate::peers::PeerRun) -> Result<ResultsPage> {
    let rev = run.llfree_rev.as_deref().map_or(
        "a checkout whose commit was not recorded".to_string(),
        // Characters, not bytes: the record is the user's file.
        |r| format!("commit `{}`", r.chars().take(12).collect::<String>()),
    );
    let clock = if run.clock == "cpu" {
        "each benchmark thread's CPU time (time descheduled by other users of the machine left out)"
    } else {
        "wall time"
    };
    let sections = vec![
        Section {
            heading: "Frees on another CPU's memory".into(),
            text: "The target: in the `rand` pattern every thread allocates its share, then all threads' frames are shuffled together and dealt out again, so most frees return a frame that another CPU's space owns. iBuddy and the lazy layers over it and over buddy (`LiS-…`, `LBS-…`), reached through the `FrameAllocator` trait, must free at or below LLFree's time at every thread count; buddy and linux-pcp, Linux's own design, are in the table below for reference.".into(),
            deterministic: false,
            body: Body::Text(crate::checks::checks_text(&crate::peers::checks(run))),
        },
        Section {
            heading: "Every pattern".into(),
            text: "LLFree's own benchmark patterns at order 0: `bulk` allocates each thread's share then frees it; `repeat` allocates and frees one frame again and again over a held share; `rand` is the shuffled free above; `rand-realloc` frees a random frame of the share and allocates a replacement. Rows ending in `-pinned` drive the per-CPU lists through `PerCpu::pin` (the thread owns its CPU's list); `-percpu` rows stamp frees per CPU instead of in one shared order; the other rows go through the `FrameAllocator` trait, as replay does.".into(),
            deterministic: false,
            body: Body::Table(crate::peers::table(run)),
        },
    ];
    Ok(ResultsPage {
        stem: "peers".into(),
        title: "Frame allocators beside LLFree".into(),
        intro: format!(
            "nvmos's frame allocators and LLFree (Wrenger, Rommel, Halbuer, Dietrich and Lohmann, *LLFree: Scalable and Optionally-Persistent Page-Frame Allocation*; luhsra/llfree-rs, {rev}) in one program, `crates/frames/bench-peers`, on {} GiB of 4 KiB frames with {} cores; the clock is {clock}{}. Made by `nvmos reproduce --only peers --llfree-source DIR`, which builds and runs it against that LLFree checkout (nvmos does not ship LLFree), or from its `--json` record with `--peers-from DIR`.",
            run.memory_gib,
            run.cores,
            if run.huge_pages {
                "; per-frame arrays on transparent huge pages"
            } else {
                ""
            }
        ),
        scale: None,
        sections,
    })
}

/// The persistent-memory-object page: seed 001's claims as `nvmos bench
/// pmo` measures them, each against its baseline of the same run, and
/// Fig. 1 from `nvmos bench scaling`. Timings on a shared machine, so
/// `reproduce --check` holds the page to its data only.
pub fn pmo_page(
    bench: &nvmos_pmo_bench::pmo::PmoBench,
    scaling: &nvmos_pmo_bench::scaling::Scaling,
) -> Result<ResultsPage> {
    let sizes = if bench.options.sizes == nvmos_pmo_bench::kernels::Sizes::full() {
        "the full sizes"
    } else {
        "sizes of its own"
    };
    let sections = vec![
        Section {
            heading: "Seed 001's claims".into(),
            text: format!(
                "`nvmos bench pmo` at {sizes}, median of {} rounds over every configuration in turn: each claim of the talk against its own baseline measured in the same run (the original design is decrypt-at-fault; the DRAM cache alone is dram-cache; the design whose prediction must never hurt is the adaptive predictor at the largest depth). A missed check is reported as it is; its detail says what was measured.",
                bench.rounds
            ),
            deterministic: false,
            body: Body::Text(crate::checks::checks_text(&bench.checks)),
        },
        Section {
            heading: "Every workload in every configuration".into(),
            text: "Session times (attach, compute, psync, detach) and the fault path's counters, per workload and configuration; the speed-ups are over decrypt-at-fault and over the DRAM cache alone, of the medians. Wall times on a shared 2-core machine: read the ratios, not the milliseconds.".into(),
            deterministic: false,
            body: Body::Text(crate::bench::pmo::table(bench)?),
        },
        Section {
            heading: "Fig. 1: thread scalability".into(),
            text: format!(
                "`nvmos bench scaling`: {} pages per thread written and psynced {} times, all threads in one object or one object each, median of {} rounds; the conclusion at the end is computed from the cells.",
                scaling.options.pages_per_thread, scaling.options.iterations, scaling.options.rounds
            ),
            deterministic: false,
            body: Body::Text(crate::bench::writers::scaling_table(scaling)),
        },
        Section {
            heading: "Fig. 1, drawn".into(),
            text: String::new(),
            deterministic: false,
            body: Body::Figure(crate::bench::writers::scaling_chart(scaling)?.svg().to_string()),
        },
    ];
    Ok(ResultsPage {
        stem: "pmo".into(),
        title: "Persistent memory objects: seed 001's claims".into(),
        intro: "Greenspan, Mustafa, Delgado, Heinrich and Solihin's PD-LOaPP (Accelerating the Performance of PMOs Through Prediction and DRAM as Cache) on this machine. Persistent memory is DRAM here (objects sealed in process memory, pools in /dev/shm): the talk's PM write bandwidth, which its DRAM cache also saves, is not modelled, so the speed-ups are those of the fault path alone. Made by `nvmos reproduce --only pmo`, which runs both benchmarks, or from their JSON with `--pmo-from`.".into(),
        scale: None,
        sections,
    })
}

/// The page of psync beside PMDK: what `nvmos bench psync` prints, a
/// run whose every row has its figure (the caller refuses an incomplete
/// one). Timings on a shared machine, so `reproduce --check` holds the
/// page to its data only.
pub fn psync_page(run: &nvmos_pmo_bench::psync::Psync) -> Result<ResultsPage> {
    use crate::bench::psync::size;
    let o = &run.options;
    Ok(ResultsPage {
        stem: "psync".into(),
        title: "psync beside PMDK".into(),
        intro: "A persistent memory object's psync with AES-256-GCM sealing (nvmos-pmo) beside PMDK's libpmemobj transactions (no encryption) on the same medium, in the same run: a memory file system (`/dev/shm` unless the run says otherwise) standing for persistent memory (cache-line write-back and a fence, PMDK with `PMEM_IS_PMEM_FORCE=1`) and a file system on disk (`msync` for both). PMDK's program is compiled in the run from `crates/pmo-bench/pmdk_psync.c` against the system's libpmemobj. Made by `nvmos reproduce --only psync`, which runs `nvmos bench psync` at full size, or from its JSON with `--psync-from`.".into(),
        scale: None,
        sections: vec![Section {
            heading: "Throughput, group commits and the state store".into(),
            text: format!(
                "`nvmos bench psync`: an object of {} swept {} pages per psync (one PMDK transaction each), {} a run in `{}` and {} in {}, median of {} runs{}. Every ratio is of figures of this run.",
                size(o.object_bytes),
                o.pages_per_psync,
                size(o.pmem_bytes),
                o.pmem_dir.display(),
                size(o.disk_bytes),
                // The run's temporary directory unless it named one.
                o.disk_dir.as_ref().map_or_else(
                    || "the system's temporary directory".to_string(),
                    |d| format!("`{}`", d.display())
                ),
                o.rounds,
                if o.group_objects.is_empty() {
                    ""
                } else {
                    "; then `psync_many` of N objects against N single psyncs, without a state store and with one (its records deferred to the committer thread, or durable before each psync returns)"
                }
            ),
            deterministic: false,
            body: Body::Text(crate::bench::psync::table(run)),
        }],
    })
}

/// The kernel page: what `nvmos kernel bench`, `nvmos kernel systime`,
/// the banks study of `nvmos kernel study` and `nvmos kernel wis` print. Its sections are not deterministic (guests on several vCPUs do
/// not repeat their instruction counts exactly, and the user-space twins
/// are timed), so `reproduce --check` holds the page to its data only.
pub fn kernel_page(
    bench: &nvmos_kernel::bench::Bench,
    systime: &nvmos_kernel::systime::SysTime,
    banks: &nvmos_kernel::study::Study,
    wis: &nvmos_kernel::wis::Wis,
) -> Result<ResultsPage> {
    let sections = vec![
        Section {
            heading: "Cost per request: seed 000's Table 2 in the kernel".into(),
            text: "`nvmos kernel bench`: the series' in-kernel benchmark under every policy, each request's guest instructions counted by the TCG plugin, the guest's TSC beside them, seed 000's comparison, and the same patterns in user space.".into(),
            deterministic: false,
            body: Body::Text(crate::kernel::bench_text(bench)),
        },
        Section {
            heading: "System time of real programs".into(),
            text: "`nvmos kernel systime`: user, system and elapsed guest time of real programs under every policy, against buddy (the shape of seed 004's Table 3).".into(),
            deterministic: false,
            body: Body::Text(crate::kernel::systime_text(systime)),
        },
        Section {
            heading: "Banks in use over time: seed 004's Fig. 10 and pinned banks in the kernel".into(),
            text: "`nvmos kernel study` (`Options::banks`: buddy, adaptive and adaptive-migrate on the sparse, pressure and file jobs, one vCPU under `-icount shift=0`, banks of 16 MiB, `nvmos_policy` sampled every second of guest time): the banks kernel pages pin, with boot-time allocations apart, free and offlinable memory over time, and what migration moved at what cost.".into(),
            deterministic: false,
            body: Body::Text(crate::kernel::banks_text(banks)?),
        },
        Section {
            heading: "will-it-scale in the guest".into(),
            text: "`nvmos kernel wis`: will-it-scale's page_fault1, page_fault2 and mmap1 (compiled from a will-it-scale checkout with nvmos' own harness) under every policy, one task per vCPU on 1, 2 and 4 vCPUs: operations per second of guest instruction time under `-icount` (one nanosecond per instruction of all vCPUs together), not real time, each policy against buddy at the same vCPUs.".into(),
            deterministic: false,
            body: Body::Text(crate::kernel::wis_text(wis)),
        },
    ];
    Ok(ResultsPage {
        stem: "kernel".into(),
        title: "The policies in the kernel".into(),
        intro: "The series booted under QEMU (TCG; this machine has no KVM): the policies' cost per allocation request in guest instructions, the time real programs spend in the kernel under each, the banks Adaptive-Buddy keeps in use, with and without migration, and will-it-scale's page-fault and mmap tests. Made by `nvmos reproduce --only kernel`, which runs them all (two hours and more on 2 cores), or from their JSON with `--kernel-from`.".into(),
        scale: None,
        sections,
    })
}

/// The page of hot-page migration in the kernel: what `nvmos kernel
/// levelling` prints. Guests on two vCPUs do not repeat their counts
/// exactly, so `reproduce --check` holds the page to its data only.
pub fn hot_migrate_page(l: &nvmos_kernel::levelling::Levelling) -> Result<ResultsPage> {
    Ok(ResultsPage {
        stem: "hot-migrate".into(),
        title: "Write-aware levelling in the kernel".into(),
        intro: "The series' hot-page migration (`nvmos_hot_ms=`) booted under QEMU (TCG, `-icount shift=0`) on the write workloads, against the same write counting with nothing moved. The simulated policy, beside Start-Gap and Security Refresh on the traces, is on the wear levelling page. Made by `nvmos reproduce --only hot-migrate`, which runs `nvmos kernel levelling` (about a quarter of an hour on 2 cores), or from its JSON with `--hot-from`.".into(),
        scale: None,
        sections: vec![Section {
            heading: "Hot-page migration against counting only".into(),
            text: "`nvmos kernel levelling`: write-weighted lifetime from the guest's own per-frame counts (debugfs `nvmos_wear`), the copies it cost, and the passes' own CPU time.".into(),
            deterministic: false,
            body: Body::Text(crate::kernel::levelling_text(l)),
        }],
    })
}

/// Seed 002 on real programs: what `nvmos study banks --real` prints, its
/// figure from the recordings beside the synthetic study's on the same
/// machine (`synthetic`), and how each policy fares against buddy. Guests
/// do not repeat their interleavings, so `reproduce --check` holds the
/// page to its data only.
pub fn banks_real_page(
    real: &nvmos_kernel::banks_real::BanksReal,
    synthetic: &nvmos_sim::banks_study::BanksOutput,
) -> Result<ResultsPage> {
    let programs: Vec<&str> = crate::banks_real::programs(real)
        .into_iter()
        .map(|p| p.name())
        .collect();
    Ok(ResultsPage {
        stem: "banks-real".into(),
        title: "Banks and placement on real programs".into(),
        intro: format!(
            "Seed 002's claim on real programs ({}): each one ran in a guest of the patched kernel under each placement the kernel booted, its memory accesses recorded by nvmos's QEMU plugin through {}'s last-level cache and replayed through that machine's memory. Made by `nvmos reproduce --only banks-real`, which runs `nvmos study banks --real` (about {:.0} minutes on 2 cores), or from its JSON with `--banks-real-from`.",
            programs.join(", "),
            real.machine,
            (real.seconds / 60.0).ceil()
        ),
        scale: None,
        sections: vec![
            Section {
                heading: "The claim on real programs".into(),
                text: "Seed 002 holds that bank-spread placement runs programs faster; the checks take M³, partitioned and shared, against buddy on each program's read time; the detail of each gives its bank-level parallelism, latency and buddy's noise floor.".into(),
                deterministic: false,
                body: Body::Text(crate::checks::checks_text(&real.checks)),
            },
            Section {
                heading: "Every program under every placement".into(),
                text: String::new(),
                deterministic: false,
                body: Body::Text(crate::banks_real::text(real)?),
            },
            Section {
                heading: "Seed 002's figure, from the real programs".into(),
                text: String::new(),
                deterministic: false,
                body: Body::Figure(crate::banks_real::blp_chart(real)?.svg().to_string()),
            },
            Section {
                heading: "The same figure from the synthetic streams, on the same machine".into(),
                text: format!(
                    "`nvmos study banks --machine {}`, run with the real programs: STREAM over frames placed by each of the study's placements, cores × access order.",
                    synthetic.study.machine
                ),
                // Deterministic in itself, but made only beside the real
                // runs, so a check holds it to its data like them.
                deterministic: false,
                body: Body::Figure(
                    crate::banks::blp_chart(synthetic, "synthetic-blp")?
                        .svg()
                        .to_string(),
                ),
            },
            Section {
                heading: "Read time against buddy".into(),
                text: String::new(),
                deterministic: false,
                body: Body::Figure(crate::banks_real::read_time_chart(real)?.svg().to_string()),
            },
        ],
    })
}

/// `results/index.md`: what each page holds and where it came from, in
/// [`PAGE_ORDER`].
pub fn index(pages: &[PageData]) -> String {
    let mut pages: Vec<&PageData> = pages.iter().collect();
    pages.sort_by_key(|d| {
        let stem = d.page.stem.as_str();
        (
            PAGE_ORDER
                .iter()
                .position(|&p| p == stem)
                .unwrap_or(PAGE_ORDER.len()),
            stem.to_string(),
        )
    });
    let mut out = String::from("# Results\n\n");
    out.push_str(
        "<!-- Generated by `nvmos reproduce`: do not edit; run the pipeline again. -->\n\n",
    );
    out.push_str("Every figure in these pages was produced by `nvmos reproduce` (see [Reproducing the results](../reproducing.md)) and is held by a test: the deterministic ones exactly, against a fresh run; the timings against the data the page was rendered from.\n\n");
    let header = [
        "page".to_string(),
        "scale".into(),
        "commit".into(),
        "date".into(),
        "machine".into(),
    ];
    let rows: Vec<Vec<String>> = pages
        .iter()
        .map(|d| {
            vec![
                format!("[{}]({}.md)", d.page.title, d.page.stem),
                match d.page.scale {
                    None => "one size".into(),
                    Some(Scale::Full) => "full".into(),
                    Some(Scale::Quick) => "quick".into(),
                },
                format!("`{}`", d.stamp.commit),
                d.stamp.date.clone(),
                format!("{}, {} cores", d.stamp.cpu, d.stamp.cores),
            ]
        })
        .collect();
    out.push_str(&markdown::table(&header, &[true; 5], &rows));
    out
}

/// README's results table: the headline of the wear page and its stamp.
/// `None` if the page has no headline section.
pub fn readme_table(evaluate: &PageData) -> Option<String> {
    let s = evaluate.page.sections.first()?;
    let Body::Table(table) = &s.body else {
        return None;
    };
    Some(format!(
        "{}\n\n{}\n*{}*\n",
        s.text,
        table,
        evaluate.stamp.line()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_sim::reproduce::TimingRow;

    #[test]
    fn timing_ratios_are_taken_run_by_run() {
        let t = TimingTable {
            id: "x".into(),
            title: "x".into(),
            unit: "ns".into(),
            higher_is_better: false,
            baseline: "base".into(),
            rows: vec![
                TimingRow {
                    label: "base".into(),
                    samples: vec![10.0, 20.0, 40.0],
                },
                TimingRow {
                    label: "fast".into(),
                    samples: vec![5.0, 10.0, 40.0],
                },
            ],
        };
        let md = timing_table(&t);
        // Run by run 0.5, 0.5, 1.0: median 0.5; the medians' ratio would
        // be 10/20 = 0.5 too, but the range shows the third run.
        assert!(
            md.contains("| fast | 10 | 5–40 | 0.50× | 0.50–1.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| base | 20 | 10–40 | 1.00× | 1.00–1.00 |"),
            "{md}"
        );
    }
}
