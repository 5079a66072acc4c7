//! Renders one sample page with every chart kind, for looking at:
//! `cargo run -p nvmos-report --example sample_page -- /tmp/sample`, then
//! open `/tmp/sample/index.html` (or screenshot it with headless Chromium).
//! The data are made up to exercise the layout (long names, infinite
//! values, log axes); they are not results.

use std::path::PathBuf;

use nvmos_report::chart::{
    Axis, BarChart, ColourScale, HeatMap, LineChart, Series, State, StateMap,
};
use nvmos_report::page::{Cell, Html, HtmlTable, Page, STUDY_PAGES};
use nvmos_report::{csv_text, OutputDir, TextTable};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/sample-report".into()),
    );
    let allocators = [
        "Linux (as recorded)",
        "buddy",
        "LBS-31",
        "iBuddy",
        "LiS-31",
        "Adaptive-Buddy +migration",
    ];
    let lifetime = [3.2, 11.5, 14.0, 97.25, f64::INFINITY, 40.0];
    let ns = [0.0, 58.1, 61.7, 44.2, 39.9, 120.4];

    let mut summary =
        HtmlTable::new(["trace", "best allocator", "lifetime % of ideal", "vs Linux"]);
    summary.row(vec![
        Cell::text("kernel-build <x86>"),
        Cell::text("iBuddy"),
        Cell::number(
            97.25,
            &[
                ("data-trace", "kernel-build <x86>"),
                ("data-alloc", "iBuddy"),
                ("data-field", "lifetime_pct_of_ideal"),
            ],
        ),
        Cell::figure("30.4×"),
    ]);
    let mut table = HtmlTable::new(["allocator", "lifetime % of ideal", "ns/event"]);
    for (i, a) in allocators.iter().enumerate() {
        table.row(vec![
            Cell::text(*a),
            Cell::number(
                lifetime[i],
                &[
                    ("data-trace", "t"),
                    ("data-alloc", a),
                    ("data-field", "lifetime_pct_of_ideal"),
                ],
            ),
            Cell::number(
                ns[i],
                &[
                    ("data-trace", "t"),
                    ("data-alloc", a),
                    ("data-field", "ns_per_event"),
                ],
            ),
        ]);
    }

    let cdf = allocators.iter().enumerate().fold(
        LineChart::new("cdf", "CDF of allocation counts over the frames each allocator touched (x: writes per frame, log)")
            .attr("data-trace", "t")
            .x_axis(Axis::log10("writes per frame"))
            .y_axis(Axis::linear("fraction of touched frames").range(0.0, 1.0))
            .steps(),
        |c, (i, a)| {
            let spread = 1.0 + i as f64;
            let pts = (0..12).map(|k| (f64::from(1 << k).min(1500.0 / spread), (f64::from(k) + 1.0) / 12.0)).collect();
            c.series(Series::new(*a, pts))
        },
    );
    let lifetime_chart = BarChart::new(
        "lifetime",
        "Lifetime, % of the ideal (perfectly even) lifetime",
    )
    .attr("data-trace", "t")
    .value_axis(Axis::linear("% of ideal lifetime"))
    .categories(allocators)
    .series("lifetime", lifetime.iter().map(|v| Some(*v)).collect())
    .unit("%");
    let grouped = BarChart::new("swap-in", "swap-in time per device (s)")
        .value_axis(Axis::linear("seconds"))
        .categories([
            "fio-randrw (model)",
            "kernel build (model)",
            "recorded swaptrace-1",
        ])
        .series("SCM-400", vec![Some(0.41), Some(1.2), Some(0.07)])
        .series("SSD (log-block FTL)", vec![Some(3.3), Some(7.9), None])
        .series("HDD", vec![Some(41.0), Some(88.5), Some(6.25)])
        .reference(10.0, "budget")
        .unit(" s");
    let depth = LineChart::new(
        "depth",
        "Speed-up over decrypt-at-fault by prediction depth",
    )
    .x_axis(Axis::linear("prediction depth"))
    .y_axis(Axis::linear("speed-up (×)"))
    .markers()
    .reference(1.81, "seed 001")
    .series(Series::new(
        "stream",
        vec![(0.0, 1.0), (1.0, 1.4), (2.0, 1.7), (4.0, 2.1), (8.0, 2.2)],
    ))
    .series(Series::new(
        "stride",
        vec![(0.0, 1.0), (1.0, 1.3), (2.0, 1.5), (4.0, 1.9), (8.0, 1.95)],
    ))
    .series(
        Series::new(
            "Markov",
            vec![(0.0, 1.0), (1.0, 1.1), (2.0, 1.2), (4.0, 1.25), (8.0, 1.2)],
        )
        .dashed("4 3"),
    );
    let iops = LineChart::new("congestion", "swap-out time of a write-only hog (model), s")
        .x_axis(Axis::log2("device random-write IOPS (4 KiB)"))
        .y_axis(Axis::linear("seconds"))
        .markers()
        .series(Series::new(
            "c (model hog)",
            vec![
                (12_500.0, 9.0),
                (25_000.0, 4.6),
                (50_000.0, 2.4),
                (100_000.0, 1.9),
                (400_000.0, 1.8),
            ],
        ))
        .series(Series::new(
            "nc (model hog)",
            vec![
                (12_500.0, 8.7),
                (25_000.0, 4.4),
                (50_000.0, 2.2),
                (100_000.0, 1.1),
                (400_000.0, 0.3),
            ],
        ));
    let heat = allocators.iter().enumerate().fold(
        HeatMap::new(
            "heat",
            "Wear heat map over the pfn range (most writes to one frame per slice, log colour)",
        )
        .attr("data-trace", "t")
        .x_axis(Axis::linear("pfn").range(4096.0, 20480.0))
        .colour_scale(ColourScale::Log, "most writes to one frame"),
        |h, (i, a)| {
            let row = (0..128u32)
                .map(|b| {
                    if i == 0 {
                        f64::from((b * 37) % 11).powi(3)
                    } else {
                        f64::from((b + i as u32) % 5) * (i as f64)
                    }
                })
                .collect();
            h.row(*a, row)
        },
    );
    let states = vec![
        State::new("down", "#ffffff"),
        State::new("movable pages only", "#999999"),
        State::new("pinned by kernel (unmovable) pages", "#000000"),
    ];
    let banks = StateMap::new("banks", "Banks at the end of the run (seed 004's Fig. 9)")
        .x_axis(Axis::linear("bank"))
        .states(states)
        .row(
            "Buddy",
            (0..256u32)
                .map(|b| {
                    if b % 5 == 0 {
                        2
                    } else if b % 3 == 0 {
                        0
                    } else {
                        1
                    }
                })
                .collect(),
        )
        .row(
            "Array Bank-Buddy",
            (0..256u32)
                .map(|b| u8::from(b < 90) + u8::from(b % 31 == 0))
                .collect(),
        )
        .row(
            "Adaptive-Buddy +migration",
            (0..256u32)
                .map(|b| if b < 8 { 2 } else { u8::from(b < 70) })
                .collect(),
        );

    let mut page = Page::new(
        "index.html",
        "nvmos sample page",
        "nvmos report: a sample page with every chart kind",
    );
    page.nav(&STUDY_PAGES)
        .summary_note(
            &Html::new()
                .text("Made-up figures to check the layout; ")
                .tag("code", "cargo run -p nvmos-report --example sample_page")
                .text(" writes it."),
        )
        .summary_table(&summary)
        .section("trace-t", "trace t")
        .note(&Html::new().text("A note with <angle brackets> & 'quotes' that must show as typed."))
        .table(&table)
        .chart(&cdf.render()?)
        .chart(&heat.render()?)
        .chart(&lifetime_chart.render()?)
        .section("other", "other kinds")
        .chart(&grouped.render()?)
        .chart(&depth.render()?)
        .chart(&iops.render()?)
        .chart(&banks.render()?);
    let mut text = TextTable::new(["allocator", "lifetime %", "ns/event"]);
    for (i, a) in allocators.iter().enumerate() {
        text.row([
            a.to_string(),
            nvmos_report::format_value(lifetime[i]),
            nvmos_report::format_value(ns[i]),
        ]);
    }
    page.pre(&text.render());

    let out = OutputDir::create(&dir, &[])?;
    let rows = allocators
        .iter()
        .enumerate()
        .map(|(i, a)| vec![a.to_string(), lifetime[i].to_string()]);
    out.write(
        "sample.csv",
        csv_text(&["allocator", "lifetime_pct_of_ideal"], rows)?.as_bytes(),
    )?;
    let path = out.write("index.html", page.render().as_bytes())?;
    print!("{}", text.render());
    println!("{}", path.display());
    Ok(())
}
