//! nvmos-pages: how each nvmos study is shown. Per study, one module
//! holds its tables (as [`nvmos_report::columns::Columns`] where the
//! terminal, the page and CSV share rows), its HTML page, its charts and
//! its terminal text, built from the study's result type; all through
//! nvmos-report (one page style, one escaper, one chart implementation),
//! so nvmos-report stays free of study types and the CLI is left with
//! argument parsing, the progress bar and writing what these return.
//!
//! Nothing here prints or writes files: every function returns a
//! `String` (terminal text, HTML, CSV) or a page part, and fails only
//! with [`nvmos_report::Error`] (a chart given data it cannot draw, a
//! table that cannot be encoded).
//!
//! | module | study (library) | what it renders |
//! |---|---|---|
//! | [`evaluate`] | `nvmos_sim::evaluate` | `index.html`, `summary.csv`, `wear_cdf.csv`, the terminal tables of `nvmos evaluate`/`replay` |
//! | [`horizon`] | `nvmos_sim::horizon` | `--horizon` table and `horizon.csv` |
//! | [`levelling`] | `nvmos_sim::levelling::study` | `nvmos study levelling`'s tables |
//! | [`banks`] | `nvmos_sim::banks_study` | `banks.html`, its table and text |
//! | [`swap`] | `nvmos_sim::swap_study` | `swap.html`, the seed 003 tables |
//! | [`power`] | `nvmos_sim::power` | `power.html`, the power tables |
//! | [`kernel`] | `nvmos_kernel` | `kernel.html`, the kernel study tables, `kernel run`/`build` summaries |
//! | [`bench`](mod@bench) | `nvmos_sim::bench_alloc`, `nvmos_pmo_bench` | the bench tables, `pmo.html`, the alloc CSV |
//! | [`trace`] | `nvmos_trace`, `nvmos_swap::record` | `nvmos record`, `record-swap` and `trace info` summaries |
//! | [`memsys`] | `nvmos_memsys::trace` | `nvmos memsys run`'s statistics |
//! | [`probe`] | `nvmos_memsys::probe` | `nvmos probe banks`'s report |
//! | [`pmo`] | `nvmos_pmo` (and its `tools`) | the pmo shell's text: `ls`, `info`, `verify`, `check`, `repair` |
//! | [`checks`] | `nvmos_sim::study::Check` | every study's checks, terminal and page |
//! | [`peers`] | `bench-peers --json` (beside LLFree) | the peers page's table and checks |
//!
//! # Example
//!
//! ```
//! use nvmos_sim::study::{Bound, Check};
//! let checks = [Check {
//!     what: "lifetime".into(),
//!     measured: 97.5,
//!     unit: "%".into(),
//!     bound: Bound::AtLeast(90.0),
//!     seed_figure: Some(98.0),
//!     met: true,
//!     source: "seed 000".into(),
//!     detail: String::new(),
//! }];
//! let text = nvmos_pages::checks::checks_text(&checks);
//! assert!(text.contains("lifetime") && text.contains("met"));
//! ```

pub mod banks;
pub mod banks_real;
pub mod bench;
pub mod checks;
pub mod evaluate;
pub mod horizon;
pub mod kernel;
pub mod levelling;
pub mod memsys;
pub mod peers;
pub mod pmo;
pub mod power;
pub mod probe;
pub mod results;
pub mod swap;
pub mod trace;

/// What rendering returns: text, or the nvmos-report error naming the
/// chart or table that could not be drawn.
pub type Result<T> = std::result::Result<T, nvmos_report::Error>;

/// Lay out rows in columns (the first row is the header): the first
/// column left-aligned, the rest right; through nvmos-report's TextTable.
pub fn align(rows: &[Vec<String>]) -> String {
    let Some((header, rest)) = rows.split_first() else {
        return String::new();
    };
    let mut t = nvmos_report::TextTable::new(header.clone());
    for r in rest {
        t.row(r.clone());
    }
    t.render()
}

/// "N events read", then every event skipped or outside the model that a
/// replay counted ("; frees of pre-recording frames 12, ...").
pub fn events_read(a: &nvmos_trace::Accounting) -> String {
    let unusual: Vec<String> = a
        .rows()
        .iter()
        .skip(1)
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    if unusual.is_empty() {
        format!("{} events read", a.events_read)
    } else {
        format!("{} events read; {}", a.events_read, unusual.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["a".to_string(), "1".to_string()],
            vec!["long".to_string(), "12345".to_string()],
        ];
        assert_eq!(align(&rows), "a         1\nlong  12345\n");
    }
}
