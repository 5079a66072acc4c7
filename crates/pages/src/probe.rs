//! `nvmos probe banks` (`nvmos_memsys::probe`, seed 002's analysing
//! program): its report as text ([`text`]).

use std::fmt::Write as _;
use std::path::Path;

use nvmos_memsys::probe::ProbeReport;

/// A line into the text being built (writing to a `String` cannot fail).
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// The probe of `source` (the machine or model probed): the pairs timed,
/// the bank functions, row and column bits found, the check, the verdict,
/// and the preset (shown whole, or where it was written: `out`).
pub fn text(source: &str, r: &ProbeReport, out: Option<&Path>) -> String {
    let mut s = String::new();
    outln!(s, "probe banks on {source}");
    outln!(
        s,
        "  step 1: {} pairs; fast {:.1}, slow {:.1}, threshold {:.1}, separation {:.2}, {} conflicting addresses",
        r.pool, r.fast_mean, r.slow_mean, r.threshold, r.separation, r.conflicts
    );
    if !r.functions.is_empty() {
        let fs: Vec<String> = r
            .functions
            .iter()
            .map(|&f| {
                let bits: Vec<String> = (0..64)
                    .filter(|b| f >> b & 1 == 1)
                    .map(|b| format!("a{b}"))
                    .collect();
                bits.join("^")
            })
            .collect();
        outln!(s, "  bank functions: {}", fs.join(", "));
        outln!(s, "  row bits: {:?}", r.row_bits);
        outln!(s, "  column bits (>= 6): {:?}", r.column_bits);
        outln!(
            s,
            "  check: {:.1} % of {} fresh pairs predicted",
            100.0 * r.confidence,
            r.checked
        );
    }
    outln!(s, "  verdict: {}", r.verdict);
    match (&r.preset_toml, out) {
        (Some(_), Some(p)) => outln!(s, "  preset written to {}", p.display()),
        (Some(t), None) => outln!(s, "\n{t}"),
        (None, _) => outln!(s, "  no preset written"),
    }
    s
}
