//! `nvmos kernel` (`nvmos_kernel`: the allocators inside Linux 6.12 under
//! QEMU): the study's tables ([`table`]) and `kernel.html` ([`html`]), a
//! run's summary ([`run_text`]), the build's and checkpatch's lines.

use std::fmt::Write as _;
use std::path::Path;

use nvmos_kernel::kbuild::{self, Built, CheckResult};
use nvmos_kernel::run::Run;
use nvmos_kernel::study;
use nvmos_report::chart::{Axis, BarChart};
use nvmos_report::columns::{Column, Columns, Format, Key};
use nvmos_report::page::{Html, Page};
use serde_json::Value;

use crate::{align, Result};

/// `kernel build --check`: each patch's errors and warnings, with the
/// lines of checkpatch's output that say them.
pub fn check_text(results: &[CheckResult]) -> String {
    let mut out = String::new();
    for r in results {
        let _ = writeln!(
            out,
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
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// `kernel check` and `kernel test`: one line per item, failures first
/// in full, then a count.
pub fn mm_check_text(c: &nvmos_kernel::check::Check) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} kernel {}: {} items in {:.0} s",
        c.flavour.name(),
        c.kernel,
        c.items.len(),
        c.seconds
    );
    for i in &c.items {
        let _ = writeln!(
            out,
            "{:<4} {:<8} {:<40} {}",
            if i.passed { "ok" } else { "FAIL" },
            i.policy.name(),
            i.name,
            i.detail
        );
    }
    let failed = c.failures().len();
    let _ = writeln!(out, "{} passed, {failed} failed", c.items.len() - failed);
    out
}

/// `kernel bench`: instructions per request per policy, pattern and vCPU
/// count (mean ± sd, median, p99), the guest's TSC beside them, then seed
/// 000's Table 2 comparison and what was not measured.
pub fn bench_text(b: &nvmos_kernel::bench::Bench) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kernel {}: in-kernel allocation benchmark, {} guests, {:.0} s; guest instructions per request from the TCG plugin{}; TSC cycles {}",
        b.kernel,
        b.guests.len(),
        b.seconds,
        match (b.icount, b.icount_options.as_str()) {
            (false, _) => String::new(),
            (true, "") => ", under -icount shift=0".to_owned(),
            (true, o) => format!(", under -icount {o}"),
        },
        if b.icount {
            "count every vCPU's instructions (not real time, and charged other vCPUs' turns)"
        } else {
            "are TCG's host-clock-derived TSC (not real time)"
        }
    );
    let _ = writeln!(
        out,
        "per thread: bulk/rand {} frames, repeat {} pairs, mixed {} operations; {} run(s) per policy and vCPU count, their instruction means at most {:.2} % apart (the table: the first run)",
        b.count, b.repeat, b.mixed, b.runs, b.max_spread_pct
    );
    let mut rows = vec![[
        "policy",
        "vCPUs",
        "pattern",
        "kind",
        "requests",
        "instr mean",
        "sd",
        "median",
        "p99",
        "TSC mean",
        "TSC sd",
        "refused",
        "runs apart %",
    ]
    .map(String::from)
    .to_vec()];
    for c in &b.cells {
        let d = &c.instructions;
        rows.push(vec![
            c.policy.name().to_owned(),
            c.cpus.to_string(),
            c.pattern.name().to_owned(),
            c.kind.name().to_owned(),
            d.requests.to_string(),
            format!("{:.1}", d.mean),
            format!("{:.1}", d.sd),
            format!("{:.0}", d.median),
            format!("{:.0}", d.p99),
            format!("{:.1}", c.tsc.mean),
            c.tsc.sd.map_or("-".to_owned(), |s| format!("{s:.1}")),
            c.tsc.refused.to_string(),
            format!("{:.2}", c.spread_pct()),
        ]);
    }
    out.push_str(&align(&rows));
    if !b.comparisons.is_empty() {
        let _ = writeln!(
            out,
            "\nseed 000's Table 2 in the kernel: lazy buddy (buddy: Linux's pcp lists) against lazy iBuddy (lis31), guest instructions per request, allocations and frees together (the seed: lis31 32 % faster, and a standard deviation 3.5x smaller, 1400 -> 400 cycles)"
        );
        let mut rows = vec![[
            "vCPUs",
            "pattern",
            "buddy mean",
            "lis31 mean",
            "lis31 gain %",
            "buddy sd",
            "lis31 sd",
            "sd buddy:lis31",
            "user linux-pcp cyc",
            "user LiS-31 cyc",
            "user gain %",
        ]
        .map(String::from)
        .to_vec()];
        let opt = |v: Option<f64>, plus: bool| match v {
            Some(v) if plus => format!("{v:+.1}"),
            Some(v) => format!("{v:.1}"),
            None => "-".to_owned(),
        };
        for c in &b.comparisons {
            rows.push(vec![
                c.cpus.to_string(),
                c.pattern.name().to_owned(),
                format!("{:.1}", c.buddy_mean),
                format!("{:.1}", c.lis31_mean),
                format!("{:+.1}", c.gain_pct),
                format!("{:.1}", c.buddy_sd),
                format!("{:.1}", c.lis31_sd),
                if c.lis31_sd > 0.0 {
                    format!("{:.2}x", c.buddy_sd / c.lis31_sd)
                } else {
                    "-".to_owned()
                },
                opt(c.user_buddy_cycles, false),
                opt(c.user_lis31_cycles, false),
                opt(c.user_gain_pct, true),
            ]);
        }
        out.push_str(&align(&rows));
    }
    if !b.user_space.is_empty() {
        let _ = writeln!(
            out,
            "\nthe same patterns in user space (bench alloc, one round), each policy's twin in nvmos' registry, host TSC cycles per request (real time, this host)"
        );
        let mut rows = vec![[
            "policy", "twin", "threads", "pattern", "kind", "requests", "mean cyc", "sd cyc",
        ]
        .map(String::from)
        .to_vec()];
        for c in &b.user_space {
            rows.push(vec![
                c.policy.name().to_owned(),
                c.allocator.to_owned(),
                c.threads.to_string(),
                c.pattern.name().to_owned(),
                c.kind.name().to_owned(),
                c.requests.to_string(),
                format!("{:.1}", c.mean_cycles),
                format!("{:.1}", c.sd_cycles),
            ]);
        }
        out.push_str(&align(&rows));
    }
    let unpaired: u64 = b.guests.iter().map(|g| g.unpaired_markers).sum();
    let bytes: u64 = b.guests.iter().map(|g| g.plugin_bytes).sum();
    let _ = writeln!(
        out,
        "\nplugin: {} requests recorded, {unpaired} unpaired markers (requests not measured), {bytes} bytes of records",
        b.guests.iter().map(|g| g.records).sum::<u64>()
    );
    out
}

/// `kernel systime`: per program and policy, user, system and elapsed
/// guest time over the runs, and the overheads against buddy (seed 004's
/// Tables 3-4, with the elapsed time of seed 000's caveat).
pub fn systime_text(s: &nvmos_kernel::systime::SysTime) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kernel {}: system time of real programs, {} run(s) per policy, {} vCPUs, {} MiB; guest seconds under -icount shift=0 (one ns per instruction; user and sys tick-sampled at 10 ms), mean ± sd over the runs",
        s.kernel, s.runs, s.cpus, s.mem_mib
    );
    let mut rows = vec![[
        "program",
        "policy",
        "user s",
        "sys s",
        "sys sd",
        "sys vs buddy %",
        "real s",
        "real sd",
        "real vs buddy %",
    ]
    .map(String::from)
    .to_vec()];
    let pct = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:+.1}"));
    for r in &s.rows {
        rows.push(vec![
            r.program.name().to_owned(),
            r.policy.name().to_owned(),
            format!("{:.2}", r.user.mean),
            format!("{:.3}", r.sys.mean),
            format!("{:.3}", r.sys.sd),
            pct(r.sys_overhead_pct),
            format!("{:.2}", r.real.mean),
            format!("{:.3}", r.real.sd),
            pct(r.real_overhead_pct),
        ]);
    }
    out.push_str(&align(&rows));
    let _ = writeln!(out, "{:.0} host seconds", s.seconds);
    out
}

/// `kernel levelling`: hot-page migration against counting only, per
/// workload, with every run.
pub fn levelling_text(s: &nvmos_kernel::levelling::Levelling) -> String {
    let mut out = String::new();
    let h = &s.hot;
    let _ = writeln!(
        out,
        "kernel {}: hot-page migration under {} (a pass every {} ms of guest time, hot after {} passes written, copies ≤ {} % of the writes, least worn of {} frames), against the same counting with nothing moved; {} run(s) each, {} vCPUs, {} MiB, -icount shift=0",
        s.kernel,
        s.policy.name(),
        h.ms,
        h.threshold,
        h.budget_pct,
        h.candidates,
        s.runs,
        s.cpus,
        s.mem_mib
    );
    let _ = writeln!(
        out,
        "write-weighted lifetime = mean over the present frames / the most worn frame, from debugfs nvmos_wear (writes: dirty PTEs, one per page per pass; plus copies); median [min, max] over the runs"
    );
    let range = |m: &nvmos_kernel::levelling::Median, digits: usize| {
        format!(
            "{:.d$} [{:.d$}, {:.d$}]",
            m.median,
            m.min,
            m.max,
            d = digits
        )
    };
    let mut rows = vec![[
        "workload",
        "counting only % of ideal",
        "hot-migrate % of ideal",
        "ratio",
        "extra writes %",
        "pass CPU % of guest time",
    ]
    .map(String::from)
    .to_vec()];
    for w in &s.workloads {
        rows.push(vec![
            w.workload.clone(),
            range(&w.counting_lifetime, 4),
            range(&w.moving_lifetime, 4),
            format!("{:.2}", w.ratio),
            range(&w.extra_writes, 2),
            range(&w.task_pct, 1),
        ]);
    }
    out.push_str(&align(&rows));
    let mut rows = vec![[
        "workload",
        "setting",
        "run",
        "writes",
        "copies",
        "max",
        "% of ideal",
        "passes",
        "hot",
        "deferred",
        "no better",
        "failed",
        "busy",
        "guest s",
    ]
    .map(String::from)
    .to_vec()];
    for w in &s.workloads {
        for (setting, runs) in [("counting", &w.counting), ("hot-migrate", &w.moving)] {
            for m in runs {
                rows.push(vec![
                    w.workload.clone(),
                    setting.to_owned(),
                    m.run.to_string(),
                    m.writes.to_string(),
                    m.copies.to_string(),
                    m.max.to_string(),
                    format!("{:.4}", m.lifetime_pct),
                    m.passes.to_string(),
                    m.hot.to_string(),
                    m.deferred.to_string(),
                    m.no_better.to_string(),
                    m.failed.to_string(),
                    m.busy.to_string(),
                    format!("{:.1}", m.guest_s),
                ]);
            }
        }
    }
    out.push_str("\nevery run\n");
    out.push_str(&align(&rows));
    for c in &s.checks {
        let _ = writeln!(
            out,
            "[{}] {}: {:.2} {}\n    {}",
            if c.met { "met" } else { "MISSED" },
            c.what,
            c.measured,
            c.unit,
            c.detail
        );
    }
    let _ = writeln!(out, "{:.0} host seconds", s.seconds);
    out
}

/// `kernel wis`: will-it-scale's operations per guest second per test,
/// vCPU count, task count and policy (median over the samples, their
/// range and spread, per task, against buddy), with the clock they were
/// counted on.
pub fn wis_text(w: &nvmos_kernel::wis::Wis) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kernel {}: will-it-scale in the guest, {} guests ({}), {} MiB; operations per second of guest instruction time (-icount {}: one ns per guest instruction, all vCPUs' instructions on one clock), not real time; median over {} sample(s) of {} ms after {} ms of warm-up in each of {} run(s) per policy and vCPU count",
        w.kernel,
        w.guests.len(),
        w.accel,
        w.mem_mib,
        w.icount_options,
        w.samples,
        w.interval_ms,
        w.warmup_ms,
        w.runs
    );
    for t in &w.tests {
        let _ = writeln!(
            out,
            "  {}: {} (tests/{}.c, sha256 {})",
            t.name, t.description, t.name, t.sha256
        );
    }
    let mut rows = vec![[
        "test", "vCPUs", "tasks", "policy", "ops/s", "min", "max", "spread %", "per task",
        "vs buddy",
    ]
    .map(String::from)
    .to_vec()];
    for c in &w.cells {
        let s = &c.ops_per_s;
        rows.push(vec![
            c.test.clone(),
            c.cpus.to_string(),
            c.tasks.to_string(),
            c.policy.name().to_owned(),
            format!("{:.0}", s.median),
            format!("{:.0}", s.min),
            format!("{:.0}", s.max),
            format!("{:.1}", s.spread_pct),
            format!("{:.0}", c.per_task_ops_per_s),
            c.vs_buddy.map_or("-".to_owned(), |r| format!("{r:.3}")),
        ]);
    }
    out.push_str(&align(&rows));
    let host: Vec<f64> = w.guests.iter().map(|g| g.host_s).collect();
    let _ = writeln!(
        out,
        "{:.0} host seconds; a guest {:.0} to {:.0} s",
        w.seconds,
        host.iter().copied().fold(f64::INFINITY, f64::min),
        host.iter().copied().fold(0.0, f64::max)
    );
    out
}

/// `kernel build`: the kernel built (or found in the cache) and how long.
pub fn built_text(built: &Built) -> String {
    format!(
        "kernel {} ({} {}): {}{} in {:.1} s\n",
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
    )
}

/// `kernel run`: the run's times and events, the kernel's counters before
/// and during the workload, and the banks holding kernel pages
/// (`output`: the trace written; `bank_mib`: the bank size asked for).
pub fn run_text(r: &Run, output: &Path, bank_mib: u64) -> String {
    let mut out = format!(
        "policy {} ({}): boot {:.1} s, run {:.1} s; workload exit {}; {} events, {} lost; trace {}\n",
        r.policy.name(),
        r.accel,
        r.boot_s,
        r.total_s,
        r.workload_status,
        r.event_count,
        r.counts.lost_events,
        output.display()
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
    out.push_str(&align(&table));
    if let Some(n) = r.zone_lock_acquisitions {
        let _ = writeln!(
            out,
            "zone->lock acquisitions during the workload: {n} ({:.1} per 1,000 order-0 allocations, {} of them)",
            if r.order0_allocations > 0 {
                1000.0 * n as f64 / r.order0_allocations as f64
            } else {
                f64::NAN
            },
            r.order0_allocations
        );
    }
    let _ = writeln!(
        out,
        "banks of {} MiB: {} in use, {} pinned by kernel pages, of {}",
        bank_mib,
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
    let _ = writeln!(out, "  bank:kernel/used pages: {}", pinned.join(" "));
    if let Some(h) = &r.hot {
        let max = h.wear.iter().map(|&(_, w)| w).max().unwrap_or(0);
        let _ = writeln!(
            out,
            "hot-page migration (a pass every {} ms, threshold {}): {} passes, {} writes counted, {} pages found hot, {} moved, {} failed, {} with no less worn frame, {} deferred by the budget; {} frames worn, the most worn {} (writes plus copies)",
            h.settings.ms,
            h.settings.threshold,
            h.get("hot_passes"),
            h.get("hot_writes"),
            h.get("hot_found"),
            h.get("hot_moved"),
            h.get("hot_failed"),
            h.get("hot_no_better"),
            h.get("hot_deferred"),
            h.wear.len(),
            max
        );
    }
    if let Some(m) = &r.mem_trace {
        out.push_str(&mem_trace_text(m));
    }
    out
}

/// What `nvmos kernel run --mem-trace` recorded, in a few lines.
pub fn mem_trace_text(m: &nvmos_kernel::memtrace::MemTraceReport) -> String {
    let mut out = format!(
        "memory trace {} ({} bytes): {} requests ({} line fills, {} writebacks) from {} loads and {} stores of {} vCPU(s) over {} instructions; {} I/O accesses counted, not recorded; {} accesses across two pages (first line only); {} accesses timed at their vCPU's previous one (QEMU gave them another instruction's index)\n",
        m.output.display(),
        m.trace_bytes,
        m.records,
        m.misses,
        m.writebacks,
        m.loads,
        m.stores,
        m.vcpus,
        m.instructions,
        m.io,
        m.page_cross,
        m.retimed,
    );
    let _ = writeln!(
        out,
        "  cache of {} ({} KiB, {} ways, 64-byte lines, LRU, write-back): {:.2} % of lines missed; assumed 1 instruction = {} ps, memory clock {} ps (requests in its cycles)",
        m.machine,
        m.llc_bytes >> 10,
        m.llc_ways,
        100.0 * m.miss_rate(),
        m.insn_ps,
        m.tck_ps
    );
    if let Some(w) = &m.watch {
        let _ = writeln!(
            out,
            "  watched window: {} accesses over {} pages and {} frames, {}..{} per page, {} after a page moved",
            w.accesses, w.pages, w.frames, w.min_per_page, w.max_per_page, w.remapped
        );
    }
    out
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
        Column::number("buddy workload", "buddy_workload").with(f),
        Column::number("adaptive workload", "adaptive_workload").with(f),
        Column::number("ratio workload (target <= 0.25)", "ratio_workload").with(f),
        Column::number("adaptive-migrate workload", "adaptive_migrate_workload").with(f),
        Column::number("buddy workload peak", "buddy_workload_peak").with(f),
        Column::number("adaptive workload peak", "adaptive_workload_peak").with(f),
        Column::number(
            "ratio workload peak (target <= 0.25)",
            "ratio_workload_peak",
        )
        .with(f),
        Column::number(
            "adaptive-migrate workload peak",
            "adaptive_migrate_workload_peak",
        )
        .with(f),
        Column::number("banks", "banks").format(Format::Plain),
    ])
    .key(Key::constant("data-list", "pinned_banks"))
    .key(Key::index("data-row"))
}

/// The study's tables: runs, replay against reality, iBuddy's reduction
/// of the most allocated frame, banks holding kernel pages.
pub fn table(s: &study::Study) -> Result<String> {
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
         no memblock frame; workload = pinned at the end, none at the workload's start; \
         workload peak = the most such banks at any sample while the workload ran):",
        s.bank_mib
    );
    out.push_str(&pinned_columns().text(&s.pinned_banks)?);
    out.push_str(&timeline_text(s));
    Ok(out)
}

/// The banks part of a study for the results pipeline: who pins the
/// banks, then the timeline and migration ([`timeline_text`]).
pub fn banks_text(s: &study::Study) -> Result<String> {
    let mut out = format!(
        "Banks of {} MiB holding kernel pages at the end of the workload, medians over runs \
         ({} MiB guest, {} vCPU{}): pinned = any frame neither on an LRU list nor movable; \
         placed = beyond memblock's PG_reserved frames; untraced = placed, less the trace \
         buffers' frames; added = no memblock frame; workload = pinned at the end, none at \
         the workload's start; workload peak = the most such banks at any sample while the \
         workload ran:\n",
        s.bank_mib,
        s.mem_mib,
        s.cpus,
        if s.cpus == 1 { "" } else { "s" }
    );
    out.push_str(&pinned_columns().text(&s.pinned_banks)?);
    out.push_str("\nThe same, run by run (the spread behind the medians):\n");
    out.push_str(&pinned_run_columns().text(&s.runs)?);
    out.push_str(&timeline_text(s));
    if let Some(why) = s.incomplete() {
        let _ = writeln!(out, "\nINCOMPLETE: {why}");
    }
    Ok(out)
}

/// `kernel.json`'s runs: the banks each pinned, the figures
/// [`pinned_columns`] takes the medians of.
fn pinned_run_columns() -> Columns {
    let n = |h: &str, p: &str| Column::number(h, p).format(Format::Plain);
    Columns::new([
        Column::text("workload", "workload"),
        Column::text("policy", "policy"),
        n("run", "run"),
        n("pinned", "pinned_banks"),
        n("placed", "pinned_banks_placed"),
        n("untraced", "pinned_banks_placed_untraced"),
        n("added", "pinned_banks_added"),
        n("added untraced", "pinned_banks_added_untraced"),
        n("workload", "pinned_banks_workload"),
        n("workload peak", "pinned_banks_workload_peak"),
        n("banks", "banks"),
    ])
    .key(Key::constant("data-list", "runs"))
    .key(Key::index("data-row"))
}

/// `kernel.json`'s runs that migrated: what each pass did and cost.
fn migration_columns() -> Columns {
    let n = |h: &str, p: &str| Column::number(h, p).format(Format::Plain);
    Columns::new([
        Column::text("workload", "workload"),
        Column::text("run", "run"),
        n("passes", "migration.passes"),
        n("candidate banks", "migration.candidate_banks"),
        n("banks emptied", "migration.emptied_banks"),
        n("frames moved", "migration.moved_frames"),
        n("frames put back", "migration.failed_frames"),
        n("frames unmovable", "migration.unmovable_frames"),
        n("pass ns", "migration.task_ns"),
        Column::number("ns per moved frame", "migration.ns_per_moved_frame").with(f),
    ])
    .key(Key::constant("data-list", "runs"))
    .key(Key::index("data-row"))
}

/// What a run's timeline says in one line of figures: its time-weighted
/// means of free and offlinable memory (each sample held until the next).
fn timeline_means(t: &[study::TimelinePoint]) -> Option<(f64, f64, f64)> {
    let span = t.last()?.t_s - t.first()?.t_s;
    if t.len() < 2 || span <= 0.0 {
        return None;
    }
    let (mut free, mut off) = (0.0, 0.0);
    for w in t.windows(2) {
        let dt = w[1].t_s - w[0].t_s;
        free += w[0].free_percent * dt;
        off += w[0].offlinable_percent * dt;
    }
    Some((free / span, off / span, span))
}

/// Seed 004's Fig. 10 as text: per workload and policy, the first run's
/// free and offlinable memory at up to 12 moments, and the time-weighted
/// means of every run; then what migration did.
pub fn timeline_text(s: &study::Study) -> String {
    let mut out = String::new();
    if s.runs.iter().all(|r| r.timeline.is_empty()) {
        return out;
    }
    let clock = if s.icount {
        "guest seconds under -icount shift=0 (10^9 instructions)"
    } else {
        "guest seconds (TCG: not real time)"
    };
    let _ = writeln!(
        out,
        "\nFree and offlinable memory over time (seed 004's Fig. 10): % of the guest's banks; \
         offlinable = frames of banks with nothing in use; samples every {} ms of guest time; {clock}:",
        s.sample_ms.unwrap_or(0)
    );
    let mut workloads: Vec<&str> = s.runs.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    for w in workloads {
        let mut rows = vec![vec![
            "policy".to_string(),
            "runs".into(),
            "span s".into(),
            "mean free % (runs' range)".into(),
            "mean offlinable % (runs' range)".into(),
            "first run: t s free% / offlinable%".into(),
        ]];
        let mut policies: Vec<nvmos_kernel::run::Policy> = s
            .runs
            .iter()
            .filter(|r| r.workload == w)
            .map(|r| r.policy)
            .collect();
        policies.dedup();
        for p in policies {
            let runs: Vec<&study::RunRow> = s
                .runs
                .iter()
                .filter(|r| r.workload == w && r.policy == p && !r.timeline.is_empty())
                .collect();
            let means: Vec<(f64, f64, f64)> = runs
                .iter()
                .filter_map(|r| timeline_means(&r.timeline))
                .collect();
            // The median over the runs, and their range when they differ.
            let med = |k: fn(&(f64, f64, f64)) -> f64| {
                let v: Vec<f64> = means.iter().map(k).collect();
                let Some(m) = nvmos_measure::stats::median(&v) else {
                    return "-".to_string();
                };
                let (lo, hi) = v
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                        (a.min(x), b.max(x))
                    });
                if format!("{lo:.1}") == format!("{hi:.1}") {
                    format!("{m:.1}")
                } else {
                    format!("{m:.1} ({lo:.1}-{hi:.1})")
                }
            };
            let points = runs.first().map_or(String::new(), |r| {
                let t = &r.timeline;
                let step = t.len().div_ceil(12).max(1);
                let mut picked: Vec<&study::TimelinePoint> = t.iter().step_by(step).collect();
                if let Some(last) = t.last() {
                    if !std::ptr::eq(*picked.last().unwrap_or(&last), last) {
                        picked.push(last);
                    }
                }
                picked
                    .iter()
                    .map(|q| {
                        format!(
                            "{:.1}:{:.0}/{:.0}",
                            q.t_s, q.free_percent, q.offlinable_percent
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            });
            rows.push(vec![
                p.name().to_string(),
                runs.len().to_string(),
                med(|m| m.2),
                med(|m| m.0),
                med(|m| m.1),
                points,
            ]);
        }
        let _ = writeln!(out, "{w}:");
        out.push_str(&align(&rows));
    }
    let migrated: Vec<&study::RunRow> = s.runs.iter().filter(|r| r.migration.is_some()).collect();
    if !migrated.is_empty() {
        let _ = writeln!(
            out,
            "\nMigration (adaptive-migrate; pass ns = the passes' own CPU time in guest ns, bank walks included{}):",
            if s.icount && s.cpus == 1 {
                ": instructions, one vCPU under -icount shift=0"
            } else {
                ": not instructions unless the study ran with --icount on one vCPU"
            }
        );
        if let Ok(t) = migration_columns().text(&migrated) {
            out.push_str(&t);
        }
    }
    out
}

/// `kernel.html`: the reduction per workload, how it was run, the three
/// tables and the reduction chart.
pub fn html(s: &study::Study) -> Result<String> {
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
    timeline_charts(&mut page, s)?;
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

/// Seed 004's Fig. 10 from the guests: per workload, free and offlinable
/// memory over time, each policy's first run with a timeline.
fn timeline_charts(page: &mut Page, s: &study::Study) -> Result<()> {
    use nvmos_report::chart::{LineChart, Series};
    let mut workloads: Vec<&str> = s.runs.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    for w in workloads {
        let mut chart = LineChart::new(
            "timeline",
            format!("Free and offlinable memory over time, {w} (seed 004 Fig. 10, in the kernel)"),
        )
        .attr("data-workload", w)
        .x_axis(Axis::linear(if s.icount {
            "guest seconds (icount: 10^9 instructions)"
        } else {
            "guest seconds"
        }))
        .y_axis(Axis::linear("% of memory").range(0.0, 100.0));
        let mut any = false;
        let mut free_drawn = false;
        let mut seen = Vec::new();
        for r in s
            .runs
            .iter()
            .filter(|r| r.workload == w && !r.timeline.is_empty())
        {
            if seen.contains(&r.policy) {
                continue;
            }
            seen.push(r.policy);
            any = true;
            let pts = |y: fn(&study::TimelinePoint) -> f64| {
                r.timeline.iter().map(|q| (q.t_s, y(q))).collect::<Vec<_>>()
            };
            if !free_drawn {
                chart = chart.series(
                    Series::new(
                        format!("free, {}", r.policy.name()),
                        pts(|q| q.free_percent),
                    )
                    .dashed("4 3"),
                );
                free_drawn = true;
            }
            chart = chart.series(Series::new(
                format!("offlinable, {}", r.policy.name()),
                pts(|q| q.offlinable_percent),
            ));
        }
        if any {
            page.section(
                "timeline",
                &format!("Free and offlinable memory over time: {w}"),
            )
            .chart(&chart.render()?);
        }
    }
    let migrated: Vec<&study::RunRow> = s.runs.iter().filter(|r| r.migration.is_some()).collect();
    if !migrated.is_empty() {
        page.section("migration", "Migration (adaptive-migrate)")
            .table(&migration_columns().html(&migrated)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_kernel::run::Policy;

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
                buddy_workload: 4.0,
                adaptive_workload: 1.0,
                ratio_workload: 0.25,
                adaptive_migrate_workload: f64::NAN,
                buddy_workload_peak: 6.0,
                adaptive_workload_peak: 1.0,
                ratio_workload_peak: 1.0 / 6.0,
                adaptive_migrate_workload_peak: f64::NAN,
                banks: 128,
            }],
            sample_ms: None,
            icount: false,
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
        assert!(html.contains(
            "<td data-list=\"pinned_banks\" data-row=\"0\" data-field=\"ratio_workload\">0.250</td>"
        ));
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 1);
        assert!(html.contains("<script>"), "the check script");
    }

    fn row(
        policy: Policy,
        timeline: Vec<study::TimelinePoint>,
        migration: Option<study::Migration>,
    ) -> study::RunRow {
        study::RunRow {
            policy,
            workload: "sparsejob".into(),
            run: 1,
            accel: "tcg".into(),
            boot_s: 1.0,
            total_s: 2.0,
            events: 10,
            lost_events: 0,
            frees_before_recording: 0,
            wear: nvmos_sim::WearSummary::of(&[1, 2, 3], 1_000_000_000),
            counters: Default::default(),
            counter_delta: Default::default(),
            used_banks: 2,
            pinned_banks: 1,
            banks: 16,
            pinned_banks_placed: 1,
            pinned_banks_placed_untraced: 1,
            pinned_banks_reserved_only: 0,
            pinned_banks_added: 0,
            pinned_banks_added_untraced: 0,
            reserved_pinned_frames: 0,
            trace_buffer_frames: 0,
            pinned_frames: 1,
            pinned_banks_workload: 0,
            pinned_banks_workload_peak: 0,
            timeline,
            migration,
            page_flags: Default::default(),
            console_log: "console.log".into(),
            trace: None,
        }
    }

    fn point(t_s: f64, free_percent: f64, offlinable_percent: f64) -> study::TimelinePoint {
        study::TimelinePoint {
            t_s,
            free_percent,
            offlinable_percent,
            used_banks: 2,
            pinned_banks: 1,
            migrated_frames: 0,
        }
    }

    #[test]
    fn the_timeline_is_drawn_per_workload_and_its_means_are_time_weighted() {
        let t = |off: [f64; 3]| {
            vec![
                point(0.0, 90.0, off[0]),
                point(1.0, 90.0, off[1]),
                point(4.0, 90.0, off[2]),
            ]
        };
        let m = study::Migration {
            passes: 4,
            candidate_banks: 3,
            emptied_banks: 2,
            moved_frames: 4096,
            failed_frames: 1,
            unmovable_frames: 0,
            task_ns: 8_192_000,
            ns_per_moved_frame: 2000.0,
        };
        let s = study::Study {
            mem_mib: 2048,
            cpus: 1,
            runs: vec![
                row(Policy::Buddy, t([0.0, 0.0, 0.0]), None),
                row(Policy::Adaptive, t([80.0, 60.0, 60.0]), None),
                row(Policy::AdaptiveMigrate, t([80.0, 60.0, 75.0]), Some(m)),
                row(Policy::AdaptiveMigrate, t([80.0, 80.0, 80.0]), None),
            ],
            replay: Vec::new(),
            ibuddy_max_reduction: Vec::new(),
            bank_mib: 128,
            pinned_banks: Vec::new(),
            sample_ms: Some(1000),
            icount: true,
            failed: Vec::new(),
            planned: 3,
        };
        let text = timeline_text(&s);
        // adaptive-migrate: 80 for 1 s, 60 for 3 s: 65 over the 4 s.
        let line = text
            .lines()
            .find(|l| l.starts_with("adaptive-migrate"))
            .unwrap();
        // Two runs: 65 and 80, their median 72.5 and their range.
        assert!(line.contains(" 72.5 (65.0-80.0) "), "{line}");
        let buddy = text.lines().find(|l| l.starts_with("buddy")).unwrap();
        assert!(buddy.contains(" 0.0 "), "one run: no range: {buddy}");
        assert!(!buddy.contains("(0.0"), "{buddy}");
        let banks = banks_text(&s).unwrap();
        assert!(banks.contains("run by run"), "{banks}");
        assert_eq!(
            banks
                .lines()
                .filter(|l| l.starts_with("sparsejob") && l.contains("adaptive-migrate"))
                .count(),
            2,
            "each run of the workload listed: {banks}"
        );
        assert!(line.contains("0.0:90/80 1.0:90/60 4.0:90/75"), "{line}");
        assert!(
            text.contains("instructions, one vCPU under -icount shift=0"),
            "{text}"
        );
        assert!(text.contains("4096"), "{text}");
        let html = html(&s).unwrap();
        assert_eq!(
            html.matches("<svg class=\"chart\"").count(),
            1,
            "one workload, one chart"
        );
        for p in ["buddy", "adaptive", "adaptive-migrate"] {
            assert!(html.contains(&format!("offlinable, {p}")), "{p}");
        }
        assert!(
            html.contains("data-field=\"migration.moved_frames\">4096</td>"),
            "{html}"
        );
    }
}
