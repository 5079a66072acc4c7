//! nvmos-report: how nvmos shows results. Rendering only: no study logic,
//! no printing, no dependency on the studies' types. It takes plain data
//! (names, numbers, rows) and returns text: HTML pages in one style, SVG
//! charts from one implementation, terminal tables, CSV and JSON; and it
//! writes files atomically, never over an input.
//!
//! - [`escape`]: the one HTML escaper (`& < > " '`), used for every piece
//!   of data in a page or chart.
//! - [`format_value`]: how a number is printed, the same everywhere.
//! - [`page`]: the page skeleton (title, navigation between study pages, a
//!   summary block at the top), the CSS, tables whose number cells carry
//!   `data-` attributes, and the check script headless-browser tests read.
//! - [`chart`]: line charts, grouped bar charts, heat maps with a colour
//!   bar, state maps (seed 004's bank map); each with a title, axis labels,
//!   ticks at round values and a legend, never wider than the page.
//! - [`TextTable`]: terminal tables (comfy-table), numbers right-aligned.
//! - [`columns`]: a table defined once as a column list over serde rows,
//!   rendered as the terminal table, the page table (with `data-` cells)
//!   and CSV.
//! - [`csv_text`], [`csv_records`], [`json_text`], [`write_atomic`],
//!   [`OutputDir`]: output files.
//!
//! # Example
//!
//! ```
//! use nvmos_report::chart::{Axis, BarChart};
//! use nvmos_report::page::{Cell, Html, HtmlTable, Page};
//! use nvmos_report::OutputDir;
//!
//! let rows = [("buddy", 41.5), ("iBuddy", 97.25)];
//! let mut table = HtmlTable::new(["allocator", "lifetime % of ideal"]);
//! for (name, pct) in rows {
//!     table.row(vec![
//!         Cell::text(name),
//!         Cell::number(pct, &[("data-alloc", name), ("data-field", "lifetime_pct_of_ideal")]),
//!     ]);
//! }
//! let chart = BarChart::new("lifetime", "Lifetime, % of the ideal")
//!     .value_axis(Axis::linear("% of ideal lifetime"))
//!     .categories(rows.map(|r| r.0))
//!     .series("lifetime", rows.map(|r| Some(r.1)).to_vec())
//!     .render()?;
//! let dir = tempfile::tempdir().unwrap();
//! let out = OutputDir::create(dir.path(), &[])?;
//! let mut page = Page::new("index.html", "nvmos evaluate", "Wear of page-frame allocators");
//! page.nav(&out.nav("index.html"))
//!     .summary_note(&Html::new().text("iBuddy lives ").number(97.25 / 41.5).text("× longer"))
//!     .section("trace-t1", "t1")
//!     .table(&table)
//!     .chart(&chart);
//! let html = page.render();
//! assert!(html.contains("data-chart=\"lifetime\""));
//! out.write("index.html", html.as_bytes())?;
//! # Ok::<(), nvmos_report::Error>(())
//! ```
//!
//! # How to port a page
//!
//! A study page in `crates/cli` today builds its HTML with `write!`, its
//! own escaper and its own SVG. To move it here:
//!
//! 1. **Skeleton.** Replace the `<!DOCTYPE…><style>…` preamble and the
//!    closing `<script>` with `Page::new(file, title, heading)`, call
//!    `.nav(&out.nav(file))` (the study pages already in the output
//!    folder: never a link to a page that is not there), and end with
//!    `page.render()`. The style and the check script come with it.
//! 2. **Summary.** Put the figures a reader wants first (the headline, the
//!    seed's target met or missed, the summary across traces) in
//!    `summary_note` / `summary_table`.
//! 3. **Text.** Every piece of data goes in through `Html::text`,
//!    `Page::section`, `Cell::text` or a chart builder, which escape it;
//!    fixed markup through `Html::markup` (`&'static str` only).
//! 4. **Numbers.** Table numbers become `Cell::number(v, &[("data-trace",
//!    t), ("data-alloc", a), ("data-field", "max_over_mean")])`: printed by
//!    `format_value`, with the attributes, in that order, that say where
//!    the number is in the page's JSON (the browser test
//!    `crates/cli/tests/report_browser.rs` reads `<td data-trace=…>` cells
//!    and compares each with `results.json`). Use `Cell::figure` for text
//!    that is not a JSON number (counts with units, "1/4").
//! 5. **Charts.** Each hand-written SVG becomes one builder:
//!    - horizontal bars (`report.rs` lifetime/latency, `pmo_report.rs`
//!      bars, `study_swap.rs` grouped bars, `study_banks.rs` bars):
//!      [`BarChart`](chart::BarChart), one `series` per bar in a group,
//!      `reference` for the seed's value, `unit` for "%" or " s";
//!    - lines (`report.rs` CDF with `.steps()` and a log10 x axis,
//!      `pmo_report.rs` depth chart with `.markers()` and a reference,
//!      `study_swap.rs` lines over a log2 IOPS axis):
//!      [`LineChart`](chart::LineChart);
//!    - the wear heat map: [`HeatMap`](chart::HeatMap) with
//!      `ColourScale::Log` and the pfn range as the x axis range;
//!    - the bank map (`study_power.rs`): [`StateMap`](chart::StateMap),
//!      one row per allocator, banks along x, states down / movable /
//!      pinned.
//!
//!    Keep the `data-chart` kind and the `data-trace`/`data-workload`
//!    attributes (`.attr(…)`) the tests look for. Builders return
//!    `Result`: bad data (NaN, ragged rows) is an error naming the chart
//!    and the series, for the CLI to report.
//! 6. **Terminal tables.** Replace `align(&rows)` and `format!("{:>8}")`
//!    tables with [`TextTable`]: first column left, others right,
//!    `.left(c)` for more text columns. Better: where the page shows the
//!    same rows, define the table once as a [`columns::Columns`] list and
//!    take the terminal table, the page table and the CSV from it.
//! 7. **Files.** Replace `create_dir_all` + `std::fs::write` with
//!    `OutputDir::create(dir, &inputs)?` and `.write(name, bytes)` /
//!    `.write_json(name, &study)`; hand-made CSV with [`csv_text`] or
//!    [`csv_records`].

pub mod chart;
pub mod columns;
mod escape;
mod format;
pub mod markdown;
mod output;
pub mod page;
mod table;

use std::path::PathBuf;

pub use escape::escape;
pub use format::{format_tick, format_value};
pub use output::{csv_records, csv_text, json_text, write_atomic, OutputDir};
pub use table::TextTable;

/// What can go wrong while rendering or writing. Each message names the
/// chart, series or file; the underlying error is the `source`, not
/// repeated in the message (so an error chain prints it once).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A chart was given data it cannot draw.
    #[error("chart {chart}: {reason}")]
    Chart { chart: String, reason: String },
    /// Reading or writing a file failed.
    #[error("writing {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another run is writing the output folder.
    #[error("{}: another run is writing this folder; wait for it to finish or choose another --out (nothing was written)", path.display())]
    FolderBusy { path: PathBuf },
    /// An output would replace an input of the run.
    #[error("refusing to write {}: it is the input {}", path.display(), input.display())]
    WouldOverwriteInput { path: PathBuf, input: PathBuf },
    /// Encoding CSV failed.
    #[error("encoding CSV")]
    Csv(#[source] ::csv::Error),
    /// Encoding JSON failed (a map with non-string keys, for example).
    #[error("encoding JSON")]
    Json(#[source] serde_json::Error),
}
