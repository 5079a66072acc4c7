//! `nvmos bench …`: thin front ends over the benchmark studies
//! (`nvmos_sim::bench_alloc`, `nvmos_pmo_bench::{psync, heap, pmo}`). Each
//! parses its arguments into the study's options (`Option` fields
//! overriding `Study::options(scale)`), draws the progress bar and renders
//! the result; the studies measure and decide.

pub mod alloc;
pub mod heap;
pub mod pmo;
pub mod psync;
pub mod writers;

use nvmos_report::format_value;
use nvmos_sim::study::{Bound, Check};

/// A study's checks as lines: what, the figure, the bound, the seed's
/// figure, met or missed, and the detail.
pub fn checks_text(checks: &[Check]) -> String {
    let mut out = String::from("checks:\n");
    for c in checks {
        let bound = match c.bound {
            Bound::AtLeast(b) => format!("≥ {}", format_value(b)),
            Bound::AtMost(b) => format!("≤ {}", format_value(b)),
            Bound::Within { value, tolerance } => {
                format!("{} ± {}", format_value(value), format_value(tolerance))
            }
        };
        // "12%", "1.10x", "0.58 GiB/s".
        let unit = if c.unit.chars().count() > 1 {
            format!(" {}", c.unit)
        } else {
            c.unit.clone()
        };
        let measured = if c.measured.is_finite() {
            format!("{}{unit}", format_value(c.measured))
        } else {
            "not measured".to_string()
        };
        let seed = c.seed_figure.map_or(String::new(), |s| {
            format!(", seed {}{unit}", format_value(s))
        });
        out.push_str(&format!(
            "  [{}] {} ({}): {measured} (target {bound}{unit}{seed})\n",
            if c.met { "met" } else { "missed" },
            c.what,
            c.source,
        ));
        if !c.detail.is_empty() {
            out.push_str(&format!("        {}\n", c.detail));
        }
    }
    out
}
