//! `power.html`: the power study through `nvmos_report`. Every number cell
//! carries `data-json`, the JSON pointer of its figure in `power.json`
//! (the browser test compares the two), besides `data-trace` (workload
//! and machine, or trace), `data-alloc` and `data-field`.

use crate::Result;
use nvmos_report::chart::{Axis, BarChart, LineChart, Series, State, StateMap};
use nvmos_report::columns::{Column, Columns, Key};
use nvmos_report::page::{Cell, Html, HtmlTable, NavLink, Page};
use nvmos_sim::power::{find_row, PowerRow, PowerStudy, SeedTable2, SeedTable5};
use nvmos_sim::units::format_frames;
use nvmos_sim::AllocatorKind;

use super::text::bound_text;

/// A number cell pointing at `pointer` in the JSON.
fn num(v: f64, place: &str, alloc: &str, field: &str, pointer: &str) -> Cell {
    Cell::number(
        v,
        &[
            ("data-trace", place),
            ("data-alloc", alloc),
            ("data-field", field),
            ("data-json", pointer),
        ],
    )
}

fn figure(v: Option<f64>) -> Cell {
    Cell::figure(v.map_or("-".into(), nvmos_report::format_value))
}

/// A row with the label it is shown under (its allocator, "+migration").
#[derive(serde::Serialize)]
pub(super) struct Labelled<'a> {
    label: String,
    #[serde(flatten)]
    row: &'a PowerRow,
}

pub(super) fn labelled(rows: &[PowerRow]) -> Vec<Labelled<'_>> {
    let label = |row| Labelled {
        label: PowerRow::label(row),
        row,
    };
    rows.iter().map(label).collect()
}

/// The rows of one workload or trace (`power.json`'s `{base}/rows`), for
/// the terminal and the page: every number cell names its row
/// (`data-trace` = `place`, `data-alloc`), field and JSON pointer.
pub(super) fn row_columns(place: &str, base: &str, rows: &[PowerRow]) -> Columns {
    let n = |h: &str, p: &str| Column::number(h, p);
    let mut c = Columns::new([
        Column::text("allocator", "label"),
        n("offline %", "offline_percent"),
        n("optimum %", "optimum_offline_percent"),
        n("points off", "points_off_optimum"),
        n("max offline %", "max_offline_percent"),
        n("pages migrated", "pages_migrated"),
        n("alloc failures", "alloc_failures"),
        n("pinned banks", "pinned_banks").files_only(),
        Column::figure("pinned", "")
            .with(|r| format!("{}/{}", r["pinned_banks"], r["banks"]))
            .terminal_only(),
    ]);
    for (j, e) in rows
        .first()
        .map_or(&[][..], |r| &r.energy)
        .iter()
        .enumerate()
    {
        let m = &e.model;
        let path = |f: &str| format!("energy.{j}.report.{f}");
        c.push(
            Column::number(format!("energy {m} ({})", e.report.unit), path("total"))
                .field(format!("energy/{m}/total"))
                .with(|v| v.as_f64().map_or("-".into(), |x| format!("{x:.4e}"))),
        );
        c.push(
            Column::number(format!("saving % {m}"), path("saving_percent"))
                .field(format!("energy/{m}/saving_percent"))
                .files_only(),
        );
    }
    c.key(Key::constant("data-trace", place))
        .key(Key::field("data-alloc", "label"))
        .key(Key::pointer("data-json", format!("{base}/rows")))
        .keep_nan()
}

/// The rows of one workload or trace: a table, a bar chart of offline
/// memory against the optimum.
fn rows(page: &mut Page, place: &str, base: &str, rows: &[PowerRow]) -> Result<()> {
    page.table(&row_columns(place, base, rows).html(&labelled(rows))?);
    let labels: Vec<String> = rows.iter().map(PowerRow::label).collect();
    let chart = BarChart::new("offline", format!("Memory offline, {place}"))
        .attr("data-trace", place)
        .value_axis(Axis::linear("% of memory offline (time-weighted mean)"))
        .unit("%")
        .categories(labels)
        .series(
            "offline",
            rows.iter().map(|r| Some(r.offline_percent)).collect(),
        )
        .series(
            "optimum",
            rows.iter()
                .map(|r| Some(r.optimum_offline_percent))
                .collect(),
        )
        .render()?;
    page.chart(&chart);
    Ok(())
}

/// Seed 004's Fig. 10 for one workload or trace: free and offline memory
/// over time under Adaptive-Buddy without and with migration, and the
/// offline memory migration bought against the memory it copied.
fn timelines(page: &mut Page, place: &str, rows: &[PowerRow]) -> Result<()> {
    let (Some(plain), Some(mig)) = (
        find_row(rows, AllocatorKind::Adaptive, false),
        find_row(rows, AllocatorKind::Adaptive, true),
    ) else {
        return Ok(());
    };
    let line = |r: &PowerRow, name: String, y: fn(&nvmos_sim::power::Sample) -> f64| {
        Series::new(name, r.timeline.iter().map(|s| (s.t_s, y(s))).collect())
    };
    let x = Axis::linear("seconds");
    let free = LineChart::new(
        "timeline",
        format!("Free and offline memory over time, {place} (seed 004 Fig. 10)"),
    )
    .attr("data-trace", place)
    .x_axis(x.clone())
    .y_axis(Axis::linear("% of memory").range(0.0, 100.0))
    .series(line(mig, "free".into(), |s| s.free_percent))
    .series(line(plain, format!("offline, {}", plain.label()), |s| {
        s.offline_percent
    }))
    .series(line(mig, format!("offline, {}", mig.label()), |s| {
        s.offline_percent
    }))
    .series(
        line(mig, "offline, optimum".into(), |s| {
            s.optimum_offline_percent
        })
        .dashed("4 3"),
    )
    .render()?;
    let top = mig
        .timeline
        .iter()
        .map(|s| s.migrated_percent.max(s.offline_percent))
        .fold(1.0, f64::max);
    let moved = LineChart::new(
        "migration",
        format!("Offline against migrated memory, {}, {place}", mig.label()),
    )
    .attr("data-trace", place)
    .x_axis(x)
    .y_axis(Axis::linear("% of memory").range(0.0, top))
    .series(line(mig, "offline".into(), |s| s.offline_percent))
    .series(line(mig, "migrated so far (cumulative)".into(), |s| {
        s.migrated_percent
    }))
    .render()?;
    page.chart(&free).chart(&moved);
    Ok(())
}

/// The page.
///
/// `nav`: the study pages beside it in the report folder
/// ([`OutputDir::nav`](nvmos_report::OutputDir::nav)).
pub fn html(study: &PowerStudy, nav: &[NavLink]) -> Result<String> {
    let mut page = Page::new(
        "power.html",
        "nvmos: memory power (seed 004)",
        "Memory power: Adaptive-Buddy and the bank-buddy allocators (seed 004)",
    );
    page.nav(nav).summary_note(&Html::new().text(
        "Offline memory: share of banks with no allocated frame (they may be put in self-refresh or deep power-down, partial array self-refresh), time-weighted over the run. Optimum: the fewest banks that can hold what is allocated. Energy: background power of banks up and down, plus migration's copies; the workload's own accesses are the same for every allocator and left out.",
    ));
    if !study.not_traces.is_empty() {
        page.summary_note(&Html::new().text(&format!(
            "Skipped {} file(s) of the traces folder that are not traces: {}.",
            study.not_traces.len(),
            study.not_traces.join(", ")
        )));
    }
    let mut checks = HtmlTable::new(["check", "measured", "bound", "seed 004", "", "source"]);
    for (i, c) in study.checks.iter().enumerate() {
        let p = format!("/checks/{i}/measured");
        checks.row(vec![
            Cell::text(format!("{} — {}", c.what, c.detail)),
            num(c.measured, "checks", &c.what, "measured", &p),
            Cell::figure(bound_text(c)),
            figure(c.seed_figure),
            Cell::text(if c.met { "met" } else { "MISSED" }),
            Cell::text(&c.source),
        ]);
    }
    page.summary_table(&checks);
    // Table 2 beside ours.
    let mut table2 = 0;
    let mut t2 = HtmlTable::new([
        "workload",
        "machine",
        "seed max",
        "seed optimal",
        "seed Adaptive-Buddy",
        "our optimum",
        "our Adaptive-Buddy +migration",
    ]);
    for (k, s) in study.synthetic.iter().enumerate() {
        let (Some(seed), Some(i)) = (
            SeedTable2::of(s),
            find_row(&s.rows, AllocatorKind::Adaptive, true)
                .and_then(|r| s.rows.iter().position(|x| std::ptr::eq(x, r))),
        ) else {
            continue;
        };
        let r = &s.rows[i];
        let place = format!("{} {}", s.workload.name, s.machine.name);
        let p = |f: &str| format!("/synthetic/{k}/rows/{i}/{f}");
        let n = |v, f: &str| num(v, &place, &r.label(), f, &p(f));
        table2 += 1;
        t2.row(vec![
            Cell::text(&s.workload.name),
            Cell::text(seed.machine),
            figure(Some(seed.max_offline)),
            figure(Some(seed.optimal)),
            figure(Some(seed.adaptive)),
            n(r.optimum_offline_percent, "optimum_offline_percent"),
            n(r.offline_percent, "offline_percent"),
        ]);
    }
    if table2 > 0 {
        page.summary_note(
            &Html::new().text("Seed 004 Table 2 (average offline memory %) beside ours:"),
        )
        .summary_table(&t2);
    } else {
        page.summary_note(&Html::new().text(
            "Seed 004 Table 2: not comparable here (the seed's machines are 32 GB and 4 GB; this run's are not).",
        ));
    }

    let states = vec![
        State::new("down", "#ffffff"),
        State::new("movable pages only", "#999999"),
        State::new("pinned by kernel pages", "#000000"),
    ];
    for (k, s) in study.synthetic.iter().enumerate() {
        let (w, m) = (&s.workload, &s.machine);
        let place = format!("{} {}", w.name, m.name);
        page.section(
            &format!("synthetic-{k}"),
            &format!(
                "{} workload (footprint {}–{}%), {} machine, {} banks of {}",
                w.name,
                w.footprint_min_percent,
                w.footprint_max_percent,
                m.name,
                m.frames / m.bank_frames,
                format_frames(m.bank_frames)
            ),
        );
        rows(&mut page, &place, &format!("/synthetic/{k}"), &s.rows)?;
        let mut map = StateMap::new(
            "banks",
            format!("Banks at the end of the run, {place} (seed 004 Fig. 9)"),
        )
        .attr("data-trace", &place)
        .x_axis(Axis::linear("bank"))
        .states(states.clone());
        for r in &s.rows {
            map = map.row(r.label(), r.bank_map.clone());
        }
        page.chart(&map.render()?);
        timelines(&mut page, &place, &s.rows)?;
    }
    for (k, t) in study.traces.iter().enumerate() {
        let m = &t.machine;
        page.section(
            &format!("trace-{}", t.trace),
            &format!(
                "Trace {} on {} ({} banks)",
                t.trace,
                format_frames(m.frames),
                m.frames / m.bank_frames
            ),
        );
        rows(&mut page, &t.trace, &format!("/traces/{k}"), &t.rows)?;
        timelines(&mut page, &t.trace, &t.rows)?;
    }
    if let Some(l) = &study.latency {
        page.section("latency", "Synthetic latency benchmark (seed 004's Table 5)")
            .note(&Html::new().text(&format!(
                "Successive single-page requests on a fresh allocator of {}, each timed with the {} timer. Worst = the slowest request after taking each request's fastest time over {} identical rounds (strips preemption on a shared VM); raw max = the slowest request of any round. Timings of this machine: they change run to run.",
                format_frames(l.frames),
                l.clock.source,
                l.rounds
            )));
        let mut t = HtmlTable::new([
            "allocator",
            "pages",
            "mean ns",
            "p99",
            "p99.99",
            "worst ns",
            "worst/mean",
            "raw max ns",
            "raw/mean",
            "seed mean",
            "seed worst",
        ]);
        for (i, r) in l.rows.iter().enumerate() {
            let place = format!("latency {}", r.pages);
            let n = |v, f: &str| {
                num(
                    v,
                    &place,
                    &r.allocator,
                    f,
                    &format!("/latency/rows/{i}/{f}"),
                )
            };
            let seed = SeedTable5::of(r.kind, r.pages);
            t.row(vec![
                Cell::text(&r.allocator),
                n(r.pages as f64, "pages"),
                n(r.mean_ns, "mean_ns"),
                n(r.p99_ns, "p99_ns"),
                n(r.p9999_ns, "p9999_ns"),
                n(r.worst_ns, "worst_ns"),
                n(r.worst_over_mean, "worst_over_mean"),
                n(r.raw_max_ns, "raw_max_ns"),
                n(r.raw_max_over_mean, "raw_max_over_mean"),
                figure(seed.map(|x| x.0)),
                figure(seed.map(|x| x.1)),
            ]);
        }
        page.table(&t);
        let mut pages: Vec<u64> = l.rows.iter().map(|r| r.pages).collect();
        pages.dedup();
        let mut names: Vec<&str> = l.rows.iter().map(|r| r.allocator.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let mut chart = BarChart::new(
            "latency",
            "Mean ns per allocation (fastest round per request)",
        )
        .value_axis(Axis::linear("ns per allocation"))
        .unit(" ns")
        .categories(names.iter().copied());
        for &n in &pages {
            let v = names
                .iter()
                .map(|a| {
                    l.rows
                        .iter()
                        .find(|r| r.pages == n && r.allocator == *a)
                        .map(|r| r.mean_ns)
                })
                .collect();
            chart = chart.series(format!("{n} pages"), v);
        }
        page.chart(&chart.render()?);
    }
    page.section("models", "Power models");
    for m in &study.models {
        page.note(
            &Html::new()
                .tag("b", &m.name)
                .text(&format!(" ({}): {}", m.unit, m.source)),
        );
    }
    Ok(page.render())
}
