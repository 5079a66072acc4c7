//! A study's target and seed checks (`nvmos_sim::study::Check`) as a
//! terminal table and as a page table; every study shows its checks
//! through these two.

use nvmos_report::page::{Cell, Html, HtmlTable};
use nvmos_report::{format_value, TextTable};
use nvmos_sim::study::{Bound, Check};

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
pub fn checks_text(checks: &[Check]) -> String {
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
pub fn checks_table(checks: &[Check]) -> HtmlTable {
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
