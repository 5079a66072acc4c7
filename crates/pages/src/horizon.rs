//! `nvmos evaluate --horizon` and `nvmos replay --horizon`
//! (`nvmos_sim::horizon`, wear over a device's lifetime): the terminal
//! table ([`table`]) and `horizon.csv` ([`csv`]).

use nvmos_report::columns::{Column, Columns};
use nvmos_report::format_value;
use nvmos_sim::horizon::{HorizonRow, Stop, Study, TraceHorizon};

use crate::Result;

/// `horizon.csv`: every row of every trace, headed by field names, with
/// the trace, the accounting and more figures than the terminal shows.
pub fn csv(study: &Study) -> Result<String> {
    columns(true).csv(&rows(&study.traces))
}

/// A row's warning: refused allocations or writes outside memory make its
/// figures those of a different workload.
pub fn flag(row: &HorizonRow) -> Option<String> {
    let mut what = Vec::new();
    if row.refused > 0 {
        what.push(format!("{} allocations refused", row.refused));
    }
    if row.outside > 0 {
        what.push(format!("{} frames written outside memory", row.outside));
    }
    if row.result.stop == Stop::MaxReps {
        what.push("not converged".to_owned());
    }
    (!what.is_empty()).then(|| what.join(", "))
}

/// A row of the table: the study's row with its trace's name and
/// accounting (one repetition) and its warning.
#[derive(serde::Serialize)]
struct Row<'a> {
    trace: &'a str,
    flag: Option<String>,
    accounting: &'a nvmos_trace::Accounting,
    #[serde(flatten)]
    row: &'a HorizonRow,
}

fn rows(traces: &[TraceHorizon]) -> Vec<Row<'_>> {
    let rows = traces.iter().flat_map(|t| {
        t.rows.iter().map(|row| Row {
            trace: &t.trace,
            flag: flag(row),
            accounting: &t.accounting,
            row,
        })
    });
    rows.collect()
}

/// The table for the terminal and, `csv` given, `horizon.csv` (headed by
/// field names, with the trace, the accounting and more figures).
fn columns(csv: bool) -> Columns {
    let r = |h: &str, f: &str| Column::number(h, format!("result.{f}")).field(f);
    let years = |i: usize, h: &str, f: &str| r(h, &format!("years_to_first_failure.{i}")).field(f);
    let mut c = Columns::new(csv.then(|| Column::text("trace", "trace")));
    c.extend([
        Column::text("allocator", "allocator"),
        r("reps", "reps"),
        Column::text("stop", "result.stop").with(|v| v.as_str().unwrap_or("-").replace('_', " ")),
        r("max/rep", "max_per_rep"),
        r("mean/rep", "mean_per_rep").files_only(),
        r("fraction of ideal", "fraction_of_ideal").files_only(),
        Column::derived("% ideal", |row| {
            row["result"]["fraction_of_ideal"]
                .as_f64()
                .map(|f| 100.0 * f)
                .into()
        })
        .terminal_only(),
        years(0, "yrs@1e6", "years_1e6"),
        years(1, "yrs@1e7", "years_1e7"),
        years(2, "yrs@1e8", "years_1e8"),
        r("recycled", "recycled_frames"),
        // Traces with sampled writes: the write-weighted lifetime over the
        // whole run ("-" for a trace without; the JSON has the rest).
        Column::number("writes % ideal", "writes.wear.lifetime_pct_of_ideal").terminal_only(),
        Column::number("writes yrs@1e7", "writes.wear.lifetime_years.1").terminal_only(),
        Column::number("secs", "elapsed_ms")
            .with(|v| format!("{:.1}", v.as_f64().unwrap_or(f64::NAN) / 1e3))
            .terminal_only(),
        Column::text("", "flag")
            .with(|v| v.as_str().map_or(String::new(), |f| format!("!! {f}")))
            .terminal_only(),
    ]);
    if csv {
        c.extend(["refused", "outside"].map(|f| Column::number(f, f)));
        c.extend(
            [
                "events_read",
                "lost_events",
                "frees_before_recording",
                "frees_mismatched_order",
                "partial_frees",
                "allocs_of_live_pfn",
                "time_reversals",
            ]
            .map(|f| Column::number(f, format!("accounting.{f}")).field(f)),
        );
        c.push(Column::text("flag", "flag").with(|v| v.as_str().unwrap_or("").into()));
    }
    c
}

fn years(y: Option<f64>) -> String {
    y.map_or_else(|| "-".to_owned(), format_value)
}

/// The table as printed.
pub fn table(study: &Study) -> Result<String> {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "long horizon: {}", study.criterion);
    for t in &study.traces {
        let period = t.rows.first().map_or(0.0, |r| r.result.period_s);
        let _ = writeln!(
            s,
            "\n{} — {} events a repetition of {:.2} s, {} frames, {} CPUs{}",
            t.trace,
            t.events,
            period,
            t.memory_frames,
            t.cpus,
            if t.inferred {
                " (inferred from the trace: highest pfn + block, highest CPU + 1)"
            } else {
                ""
            }
        );
        let _ = writeln!(s, "  one repetition: {}", crate::events_read(&t.accounting));
        for line in columns(false).text(&rows(std::slice::from_ref(t)))?.lines() {
            let _ = writeln!(s, "  {line}");
        }
        if let Some(r) = t.rows.first() {
            let _ = writeln!(
                s,
                "  ideal (perfectly even): {} / {} / {} years at 10^6 / 10^7 / 10^8 writes",
                years(r.result.ideal_years[0]),
                years(r.result.ideal_years[1]),
                years(r.result.ideal_years[2])
            );
        }
    }
    Ok(s)
}
