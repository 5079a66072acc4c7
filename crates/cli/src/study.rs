//! `nvmos study …`: one subcommand per seed study. Each study keeps its own
//! arguments and rendering in its own file; add a variant here and an arm
//! in [`run`].

use anyhow::Result;
use clap::Subcommand;

use crate::{study_banks, study_power, study_swap};

/// The studies.
#[derive(Subcommand, Debug)]
pub enum Study {
    /// Seed 002: frame placement (buddy, random, M3) and row-buffer
    /// conflicts of 1, 2 and 4 cores running STREAM on the timing model,
    /// and the seed's analysing program recovering the bank interleaving
    /// from latencies.
    Banks(study_banks::BanksArgs),
    /// Seed 003: SCM as a fast paging device — swap request patterns,
    /// swap-in/out time on SCM and NAND, congestion control, the per-fault
    /// breakdown and device lifetime.
    Swap(study_swap::SwapArgs),
    /// Seed 004 (Adaptive-Buddy): memory offline (banks powered down)
    /// against the optimum, energy, migration, pinned banks, allocation
    /// latency; for Buddy, lazy buddy, the bank-buddy allocators and
    /// Adaptive-Buddy, with and without migration.
    Power(study_power::PowerArgs),
    /// Seed 000 beside the hardware: lifetime (% of ideal) of each
    /// allocator's placement with no wear levelling, Start-Gap, randomised
    /// Start-Gap (Qureshi, MICRO'09) and Security Refresh (Seong, ISCA'10)
    /// beneath it, and Start-Gap checked against its paper.
    Levelling(crate::levelling_cmd::LevellingArgs),
}

/// Run a study.
pub fn run(study: Study) -> Result<()> {
    match study {
        Study::Banks(args) => study_banks::run(args),
        Study::Swap(args) => study_swap::run(args),
        Study::Power(args) => study_power::run(args),
        Study::Levelling(args) => crate::levelling_cmd::run(args),
    }
}

use nvmos_report::page::{Cell, Html, HtmlTable};
use nvmos_report::{format_value, TextTable};
use nvmos_sim::study::{Bound, Check, Scale};

/// The scale `--quick` asks for.
pub(crate) fn scale(quick: bool) -> Scale {
    if quick {
        Scale::Quick
    } else {
        Scale::Full
    }
}

/// A check's bound in words: "≤ 1", "≥ 1", "57.1 ± 0.05".
fn bound_text(bound: &Bound) -> String {
    match *bound {
        Bound::AtMost(b) => format!("≤ {}", format_value(b)),
        Bound::AtLeast(b) => format!("≥ {}", format_value(b)),
        Bound::Within { value, tolerance } => {
            format!("{} ± {}", format_value(value), format_value(tolerance))
        }
    }
}

fn met_text(check: &Check) -> &'static str {
    if check.met {
        "met"
    } else {
        "MISSED"
    }
}

/// A study's checks as a terminal table, then each one's detail.
pub(crate) fn checks_text(checks: &[Check]) -> String {
    if checks.is_empty() {
        return String::new();
    }
    let mut t = TextTable::new(["check", "measured", "unit", "target", "seed", "", "source"]);
    t.left(2).left(5).left(6);
    for c in checks {
        t.row([
            c.what.clone(),
            if c.measured.is_finite() {
                format_value(c.measured)
            } else {
                "not measured".into()
            },
            c.unit.clone(),
            bound_text(&c.bound),
            c.seed_figure.map_or("-".into(), format_value),
            met_text(c).into(),
            c.source.clone(),
        ]);
    }
    let mut out = t.render();
    for c in checks.iter().filter(|c| !c.detail.is_empty()) {
        out.push_str(&format!("  {}: {}\n", c.what, c.detail));
    }
    out
}

/// A study's checks as a page table: the measured figure in a cell that
/// names where it is in the page's JSON (`checks[i].measured`).
pub(crate) fn checks_table(checks: &[Check]) -> HtmlTable {
    let mut t = HtmlTable::new([
        "check", "measured", "unit", "target", "seed", "", "source", "detail",
    ]);
    for (i, c) in checks.iter().enumerate() {
        let index = i.to_string();
        let met = if c.met {
            Html::new().markup("<span class=\"met\">met</span>")
        } else {
            Html::new().markup("<span class=\"missed\">missed</span>")
        };
        t.row(vec![
            Cell::text(c.what.clone()),
            Cell::number(
                c.measured,
                &[("data-check", index.as_str()), ("data-field", "measured")],
            ),
            Cell::text(c.unit.clone()),
            Cell::figure(bound_text(&c.bound)),
            match c.seed_figure {
                Some(v) => Cell::number(
                    v,
                    &[
                        ("data-check", index.as_str()),
                        ("data-field", "seed_figure"),
                    ],
                ),
                None => Cell::figure("-"),
            },
            Cell::Html(met),
            Cell::text(c.source.clone()),
            Cell::text(c.detail.clone()),
        ]);
    }
    t
}
