//! `nvmos study swap` (seed 003): SCM as a fast paging device. Prints the
//! seed's tables on the modelled and recorded workloads and writes
//! `swap.html` (charts) and `swap.json` into the report folder.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use nvmos_sim::swap_study::{self, Pattern, SwapStudy, SwapStudyOptions, DEVICES};

use crate::render::align;
use crate::report::{escape, format_value, CHECK_SCRIPT, PALETTE, STYLE};

#[derive(Args, Debug)]
pub struct SwapArgs {
    /// Folder with recorded swap traces (`*.swt.zst`) and lackey traces
    /// (`*.lackey.zst`).
    #[arg(long, value_name = "DIR", default_value = "traces/swap")]
    pub traces: PathBuf,

    /// Report folder: `swap.html` and `swap.json` are written there.
    #[arg(long, value_name = "DIR", default_value = "nvmos-report")]
    pub out: PathBuf,

    /// PC scenario size relative to the seed's 1 GB machine [default: 0.25,
    /// 1/16 with --quick].
    #[arg(long, value_name = "X")]
    pub pc_scale: Option<f64>,

    /// Aging rounds of the aged PC scenario [default: 4, 2 with --quick].
    #[arg(long, value_name = "N")]
    pub aging_rounds: Option<u32>,

    /// Congestion control off in the workload runs (the sweep runs both).
    #[arg(long)]
    pub no_congestion: bool,

    /// `congestion_wait` timeout, ms.
    #[arg(long, value_name = "MS", default_value_t = 100.0)]
    pub congestion_timeout_ms: f64,

    /// Read-ahead of 2^N pages.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub page_cluster: u32,

    /// VMA-based read-ahead instead of the swap-slot window.
    #[arg(long)]
    pub vma_readahead: bool,

    /// Swap slot policy: ssd or hdd.
    #[arg(long, value_name = "POLICY", default_value = "ssd")]
    pub policy: nvmos_swap::SlotPolicy,

    /// Smaller and faster (tests).
    #[arg(long)]
    pub quick: bool,

    /// Print JSON on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SwapArgs) -> Result<()> {
    let mut opts = SwapStudyOptions {
        traces: args.traces.clone(),
        ..SwapStudyOptions::default()
    };
    if args.quick {
        opts.pc_scale = 1.0 / 16.0;
        opts.aging_rounds = 2;
        opts.hog_memory_pages = 4096;
    }
    if let Some(s) = args.pc_scale {
        anyhow::ensure!(s > 0.0 && s <= 4.0, "--pc-scale {s} is not in (0, 4]");
        opts.pc_scale = s;
    }
    if let Some(n) = args.aging_rounds {
        opts.aging_rounds = n;
    }
    opts.config.congestion.enabled = !args.no_congestion;
    anyhow::ensure!(
        args.congestion_timeout_ms.is_finite() && args.congestion_timeout_ms >= 0.0,
        "--congestion-timeout-ms must be zero or more"
    );
    opts.config.congestion.timeout_ns = (args.congestion_timeout_ms * 1e6) as u64;
    opts.config.page_cluster = args.page_cluster;
    opts.config.vma_readahead = args.vma_readahead;
    opts.config.policy = args.policy;
    let bar = crate::progress_bar(0);
    let study = swap_study::run(&opts, &mut |what: &str| {
        bar.set_message(what.to_owned());
        bar.tick();
    });
    bar.finish_and_clear();
    let study = study?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let json = serde_json::to_string_pretty(&study)?;
    std::fs::write(args.out.join("swap.json"), &json).context("writing swap.json")?;
    std::fs::write(args.out.join("swap.html"), html(&study)).context("writing swap.html")?;
    if args.json {
        println!("{json}");
    } else {
        print!("{}", tables(&study));
        println!("\nreport: {}", args.out.join("swap.html").display());
    }
    Ok(())
}

/// Every stream's patterns: (name, pattern).
fn patterns(s: &SwapStudy) -> Vec<(String, &Pattern)> {
    let mut v: Vec<(String, &Pattern)> = s
        .model
        .iter()
        .map(|m| (format!("{} (model)", m.workload), &m.pattern))
        .collect();
    for r in &s.recorded {
        for p in &r.patterns {
            v.push((format!("recorded {} · {}", r.trace, p.name), p));
        }
    }
    v
}

fn histogram_table(
    s: &SwapStudy,
    title: &str,
    pick: fn(&Pattern) -> &nvmos_swap::analysis::Distributions,
    ird: bool,
) -> String {
    let ps = patterns(s);
    let Some((_, first)) = ps.first() else {
        return String::new();
    };
    let labels = if ird {
        &pick(first).ird.labels
    } else {
        &pick(first).size.labels
    };
    let mut rows = vec![std::iter::once(format!("{title} (% of requests)"))
        .chain(std::iter::once("requests".to_owned()))
        .chain(labels.iter().cloned())
        .collect::<Vec<_>>()];
    for (name, p) in &ps {
        let d = pick(p);
        let h = if ird { &d.ird } else { &d.size };
        let mut row = vec![name.clone(), d.requests.to_string()];
        row.extend(h.percent().iter().map(|v| format!("{v:.1}")));
        rows.push(row);
    }
    align(&rows)
}

fn tables(s: &SwapStudy) -> String {
    let mut out = String::new();
    out.push_str("Swap I/O pattern: request size\n");
    out.push_str(&histogram_table(s, "reads: size", |p| &p.reads, false));
    out.push('\n');
    out.push_str(&histogram_table(s, "writes: size", |p| &p.writes, false));
    out.push_str("\nSwap I/O pattern: inter-request distance\n");
    out.push_str(&histogram_table(s, "reads: IRD", |p| &p.reads, true));
    out.push('\n');
    out.push_str(&histogram_table(s, "writes: IRD", |p| &p.writes, true));

    out.push_str("\nSwap-in and swap-out time (s)\n");
    let mut rows = vec![std::iter::once("workload".to_owned())
        .chain(DEVICES.iter().map(|d| format!("in {d}")))
        .chain(DEVICES.iter().map(|d| format!("out {d}")))
        .collect::<Vec<_>>()];
    let mut add = |name: String, devs: &[swap_study::DeviceTime]| {
        let mut row = vec![name];
        row.extend(devs.iter().map(|d| format_value(d.swap_in_s)));
        row.extend(devs.iter().map(|d| format_value(d.swap_out_s)));
        rows.push(row);
    };
    for m in &s.model {
        add(format!("{} (model)", m.workload), &m.devices);
    }
    for r in &s.recorded {
        add(format!("recorded {}", r.trace), &r.devices);
    }
    out.push_str(&align(&rows));

    out.push_str("\nCongestion control as the device gets faster: swap-out of a write-only hog (model), and recorded traffic replayed at the OS's pace\n");
    let mut rows = vec![vec![
        "write IOPS".to_owned(),
        "c: time (s)".into(),
        "c: congestion wait (s)".into(),
        "nc: time (s)".into(),
    ]];
    for r in &s.recorded {
        rows[0].push(format!("recorded {} span (s)", r.trace));
    }
    for p in &s.congestion {
        let mut row = vec![
            format!("{:.0}K", p.iops / 1000.0),
            format_value(p.on_s),
            format_value(p.on_idle_s),
            format_value(p.off_s),
        ];
        row.extend(p.recorded_span_s.iter().map(|&v| format_value(v)));
        rows.push(row);
    }
    out.push_str(&align(&rows));
    for r in &s.recorded {
        writeln!(
            out,
            "  recorded {}: swap-outs issued over {:.3} s as recorded; {} reclaim throttles ({:.3} s)",
            r.trace, r.recorded_write_span_s, r.throttles, r.throttle_s
        )
        .unwrap();
    }

    out.push_str("\nSwap-in fault breakdown (µs per fault; device read on SCM-400)\n");
    let mut rows = vec![std::iter::once("stage".to_owned())
        .chain(std::iter::once("seed".to_owned()))
        .chain(s.model.iter().map(|m| m.workload.clone()))
        .collect::<Vec<_>>()];
    for (i, (stage, seed)) in s.seed_breakdown.iter().enumerate() {
        let mut row = vec![stage.clone(), format!("{seed:.1}")];
        row.extend(s.model.iter().map(|m| format!("{:.1}", m.breakdown[i].1)));
        rows.push(row);
    }
    let mut queue = vec!["(queue wait, not a seed stage)".to_owned(), "-".into()];
    queue.extend(s.model.iter().map(|m| {
        format!(
            "{:.1}",
            m.stats.breakdown.queue_wait_ns as f64 / 1e3 / m.stats.breakdown.faults.max(1) as f64
        )
    }));
    let mut reclaim = vec![
        "(reclaim for the frame, not a seed stage)".to_owned(),
        "-".into(),
    ];
    reclaim.extend(s.model.iter().map(|m| {
        format!(
            "{:.1}",
            m.stats.breakdown.reclaim_ns as f64 / 1e3 / m.stats.breakdown.faults.max(1) as f64
        )
    }));
    let mut total = vec![
        "total".to_owned(),
        format!("{:.1}", s.seed_breakdown.iter().map(|x| x.1).sum::<f64>()),
    ];
    total.extend(
        s.model
            .iter()
            .map(|m| format!("{:.1}", m.breakdown.iter().map(|x| x.1).sum::<f64>())),
    );
    rows.push(total);
    rows.push(queue);
    rows.push(reclaim);
    out.push_str(&align(&rows));

    out.push_str("\nLifetime (years): without wear levelling / with (over the pages written) / ideal (over the whole device)\n");
    let mut rows = vec![vec![
        "writes".to_owned(),
        "hours".into(),
        "pages written".into(),
        "max/page".into(),
        "mean/page".into(),
        "SCM 10^6".into(),
        "SLC 100K".into(),
        "MLC 10K".into(),
    ]];
    let profiles: Vec<(&String, &nvmos_swap::WriteProfile)> = std::iter::empty()
        .chain(s.model.iter().map(|m| (&m.workload, &m.write_profile)))
        .chain(s.recorded.iter().map(|r| (&r.trace, &r.write_profile)))
        .collect();
    let seed_profile = nvmos_swap::WriteProfile::seed();
    let seed_name = "seed inputs".to_owned();
    for (name, p) in std::iter::once((&seed_name, &seed_profile)).chain(profiles) {
        let t = nvmos_swap::lifetime_table(p);
        let mut row = vec![
            name.clone(),
            format!("{:.4}", p.hours),
            p.written_pages.to_string(),
            p.max_writes_per_page.to_string(),
            format!("{:.2}", p.mean_writes_per_page),
        ];
        row.extend(t.iter().map(|l| {
            format!(
                "{} / {} / {}",
                format_value(l.years_without_wl),
                format_value(l.years_with_wl),
                l.years_ideal_wl.map_or("-".into(), format_value)
            )
        }));
        rows.push(row);
    }
    let mut printed = vec![
        "seed's table as printed".to_owned(),
        "2".into(),
        "163177".into(),
        "4".into(),
        "1.32".into(),
    ];
    printed.extend(
        s.seed_lifetime_printed
            .iter()
            .map(|(_, a, b)| format!("{a} / {b} / -")),
    );
    rows.push(printed);
    out.push_str(&align(&rows));
    out.push_str("  The seed's SCM 'with WL' cell reads 1,000,000 h = 11.4 y: 1,000,000 h is 114.2 y; its whole WL row is the formula at 2 writes/page (1.32 gives 173.0 / 17.3 / 1.73 y).\n");

    let f = &s.findings;
    out.push_str("\nFindings\n");
    let list = |v: &[f64], digits: usize| {
        v.iter()
            .map(|x| format!("{x:.digits$}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    writeln!(
        out,
        "  model, write IOPS {}:\n    congestion control on:  {}x as fast as at the slowest (congestion waits {}% of the time)\n    congestion control off: {}x",
        s.congestion.iter().map(|p| format!("{:.1}K", p.iops / 1000.0)).collect::<Vec<_>>().join(" "),
        list(&f.model_on_speedup, 2),
        list(&f.model_idle_percent, 0),
        list(&f.model_off_speedup, 1)
    )
    .unwrap();
    for (r, v) in s.recorded.iter().zip(&f.recorded_os_limited_from_iops) {
        writeln!(
            out,
            "  recorded {}: swap-out is paced by the OS, not the device, from {} IOPS",
            r.trace,
            v.map_or("beyond the sweep".into(), |v| format!("{:.0}K", v / 1000.0))
        )
        .unwrap();
    }
    for ((name, c, a), ((_, rc, ra), (_, mc, ma))) in f
        .small_writes
        .iter()
        .zip(f.random_writes.iter().zip(&f.mean_write_kib))
    {
        writeln!(
            out,
            "  {name}: 4 KiB writes {c:.1}% clean → {a:.1}% aged; non-sequential {rc:.1}% → {ra:.1}%; mean write {mc:.1} → {ma:.1} KiB"
        )
        .unwrap();
    }
    out
}

const W: f64 = 860.0;

fn svg_open(out: &mut String, kind: &str, title: &str, h: f64) {
    write!(
        out,
        "<svg class=\"chart\" data-kind=\"{kind}\" width=\"{W}\" height=\"{h}\" viewBox=\"0 0 {W} {h}\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>",
        escape(title)
    )
    .unwrap();
}

/// Grouped horizontal bars: one group per row, one bar per series.
fn bars(
    out: &mut String,
    kind: &str,
    title: &str,
    series: &[String],
    rows: &[(String, Vec<f64>)],
    unit: &str,
) {
    let bar_h = 12.0;
    let group_h = bar_h * series.len() as f64 + 8.0;
    let top = 30.0 + 14.0 * series.len() as f64 + 6.0;
    let left = 250.0;
    let h = top + group_h * rows.len() as f64 + 10.0;
    svg_open(out, kind, title, h);
    for (i, s) in series.iter().enumerate() {
        let y = 26.0 + 14.0 * i as f64;
        write!(out, "<rect x=\"{left}\" y=\"{y}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>", PALETTE[(i + 1) % PALETTE.len()], left + 14.0, y + 9.0, escape(s)).unwrap();
    }
    let max = rows
        .iter()
        .flat_map(|r| r.1.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let plot = W - left - 90.0;
    for (g, (name, vals)) in rows.iter().enumerate() {
        let y0 = top + group_h * g as f64;
        write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            y0 + group_h / 2.0,
            escape(name)
        )
        .unwrap();
        for (i, &v) in vals.iter().enumerate() {
            let w = if v.is_finite() { plot * v / max } else { plot };
            let y = y0 + bar_h * i as f64;
            write!(
                out,
                "<rect class=\"mark\" x=\"{left}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{}\"><title>{}: {}</title></rect><text x=\"{:.1}\" y=\"{}\" font-size=\"10\">{}{unit}</text>",
                w.max(1.0),
                bar_h - 2.0,
                PALETTE[(i + 1) % PALETTE.len()],
                escape(&series[i]),
                format_value(v),
                left + w.max(1.0) + 3.0,
                y + bar_h - 3.0,
                format_value(v)
            )
            .unwrap();
        }
    }
    out.push_str("</svg>");
}

/// Lines over a log2 x axis.
fn lines(
    out: &mut String,
    kind: &str,
    title: &str,
    xs: &[f64],
    series: &[(String, Vec<f64>)],
    ylabel: &str,
) {
    let h = 300.0;
    let (left, right, top, bottom) = (70.0, 200.0, 30.0, 40.0);
    svg_open(out, kind, title, h);
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let (x0, x1) = (
        xs[0].log2(),
        xs[xs.len() - 1].log2().max(xs[0].log2() + 1.0),
    );
    let px = |x: f64| left + (W - left - right) * (x.log2() - x0) / (x1 - x0);
    let py = |y: f64| top + (h - top - bottom) * (1.0 - y / ymax);
    write!(out, "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/><line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"#999\"/>", h - bottom, W - right, h - bottom, h - bottom).unwrap();
    for &x in xs {
        write!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{:.1}K</text>",
            px(x),
            h - bottom + 14.0,
            x / 1000.0
        )
        .unwrap();
    }
    write!(out, "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">device random-write IOPS (4 KiB)</text><text x=\"8\" y=\"{}\" font-size=\"10\">{} (max {})</text>", (left + W - right) / 2.0, h - 8.0, top - 6.0, escape(ylabel), format_value(ymax)).unwrap();
    for (i, (name, ys)) in series.iter().enumerate() {
        let color = PALETTE[(i + 1) % PALETTE.len()];
        let pts: Vec<String> = xs
            .iter()
            .zip(ys)
            .map(|(&x, &y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        write!(
            out,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        )
        .unwrap();
        for (&x, &y) in xs.iter().zip(ys) {
            write!(out, "<circle class=\"mark\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"><title>{}: {}</title></circle>", px(x), py(y), escape(name), format_value(y)).unwrap();
        }
        write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{color}\">{}</text>",
            W - right + 8.0,
            top + 14.0 * i as f64 + 10.0,
            escape(name)
        )
        .unwrap();
    }
    out.push_str("</svg>");
}

fn html(s: &SwapStudy) -> String {
    let mut out = String::new();
    write!(out, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>nvmos study swap</title><style>{STYLE}</style></head><body><h1>nvmos study swap: SCM as a fast paging device (seed 003)</h1><p class=\"note\">Modelled workloads run through the paging model (watermarks, kswapd, direct reclaim, LRU, swap cache, read-ahead, SSD slot policy); recorded traces are real Linux swap traffic from <code>nvmos record-swap</code>. <a href=\"index.html\">wear report</a></p>").unwrap();
    let ps = patterns(s);
    for (dir, pick) in [
        (
            "reads",
            (|p: &Pattern| &p.reads) as fn(&Pattern) -> &nvmos_swap::analysis::Distributions,
        ),
        ("writes", |p: &Pattern| &p.writes),
    ] {
        for ird in [false, true] {
            let Some((_, first)) = ps.first() else { break };
            let labels = if ird {
                &pick(first).ird.labels
            } else {
                &pick(first).size.labels
            };
            let rows: Vec<(String, Vec<f64>)> = labels
                .iter()
                .enumerate()
                .map(|(b, l)| {
                    let vals = ps.iter().map(|(_, p)| {
                        let d = pick(p);
                        (if ird { &d.ird } else { &d.size }).percent()[b]
                    });
                    (l.clone(), vals.collect())
                })
                .collect();
            let series: Vec<String> = ps.iter().map(|(n, _)| n.clone()).collect();
            let what = if ird {
                "inter-request distance"
            } else {
                "request size"
            };
            write!(out, "<h2>{dir}: {what}</h2>").unwrap();
            bars(
                &mut out,
                &format!("{dir}-{}", if ird { "ird" } else { "size" }),
                &format!("{dir}: {what} (% of requests)"),
                &series,
                &rows,
                "%",
            );
        }
    }
    out.push_str("<h2>Swap-in and swap-out time per device</h2>");
    let mut rows = Vec::new();
    for m in &s.model {
        rows.push((
            format!("{} (model)", m.workload),
            m.devices.iter().map(|d| d.swap_in_s).collect(),
        ));
    }
    for r in &s.recorded {
        rows.push((
            format!("recorded {}", r.trace),
            r.devices.iter().map(|d| d.swap_in_s).collect(),
        ));
    }
    let series: Vec<String> = DEVICES.iter().map(|d| d.to_string()).collect();
    bars(
        &mut out,
        "swap-in",
        "swap-in time (s)",
        &series,
        &rows,
        " s",
    );
    let mut rows = Vec::new();
    for m in &s.model {
        rows.push((
            format!("{} (model)", m.workload),
            m.devices.iter().map(|d| d.swap_out_s).collect(),
        ));
    }
    for r in &s.recorded {
        rows.push((
            format!("recorded {}", r.trace),
            r.devices.iter().map(|d| d.swap_out_s).collect(),
        ));
    }
    bars(
        &mut out,
        "swap-out",
        "swap-out time (s)",
        &series,
        &rows,
        " s",
    );
    out.push_str("<h2>Congestion control on (c) and off (nc) as the device gets faster</h2>");
    let xs: Vec<f64> = s.congestion.iter().map(|p| p.iops).collect();
    if !xs.is_empty() {
        let mut series = vec![
            (
                "c (model hog)".to_owned(),
                s.congestion.iter().map(|p| p.on_s).collect::<Vec<_>>(),
            ),
            (
                "c: congestion wait".to_owned(),
                s.congestion.iter().map(|p| p.on_idle_s).collect(),
            ),
            (
                "nc (model hog)".to_owned(),
                s.congestion.iter().map(|p| p.off_s).collect(),
            ),
        ];
        lines(
            &mut out,
            "congestion",
            "swap-out time of a write-only hog (model), s",
            &xs,
            &series,
            "seconds",
        );
        series.clear();
        for (i, r) in s.recorded.iter().enumerate() {
            series.push((
                format!("recorded {}", r.trace),
                s.congestion.iter().map(|p| p.recorded_span_s[i]).collect(),
            ));
        }
        if !series.is_empty() {
            lines(
                &mut out,
                "recorded-pace",
                "recorded swap-outs replayed at the OS's pace: span, s",
                &xs,
                &series,
                "seconds",
            );
        }
    }
    out.push_str("<h2>Tables</h2><pre>");
    out.push_str(&escape(&tables(s)));
    write!(out, "</pre><script>{CHECK_SCRIPT}</script></body></html>").unwrap();
    out
}
