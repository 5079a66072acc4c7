//! How numbers are printed, the same in every output (tables, chart labels,
//! tooltips): the browser test reads numbers back from pages and compares
//! them with the JSON, so one function decides.

/// A figure as shown in tables and beside bars: integers without a point,
/// values of 100 and more with one decimal, values down to 0.01 with
/// three, smaller ones in scientific notation; `inf`, `-inf` and `NaN` for
/// the non-finite (JSON writes them as `null`).
///
/// ```
/// use nvmos_report::format_value;
/// assert_eq!(format_value(12.0), "12");
/// assert_eq!(format_value(1234.56), "1234.6");
/// assert_eq!(format_value(1.23456), "1.235");
/// assert_eq!(format_value(0.0001234), "1.234e-4");
/// ```
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.3e}")
    }
}

/// A tick label: `v` printed with as many decimals as the tick `step`
/// needs (ticks 0.25 apart get two), large and tiny magnitudes in
/// scientific notation with the fewest digits that tell ticks apart.
pub fn format_tick(v: f64, step: f64) -> String {
    // A tick computed as lo + i*step carries rounding noise; print what the
    // step can resolve, and never "-0".
    let v = if v.abs() < step.abs() * 1e-9 { 0.0 } else { v };
    let magnitude = v.abs();
    if magnitude != 0.0 && !(1e-3..1e7).contains(&magnitude) {
        let digits = (magnitude.log10().floor() - step.abs().log10().floor()).clamp(0.0, 6.0);
        let s = format!("{v:.*e}", digits as usize);
        return trim_mantissa(&s);
    }
    let decimals = if step > 0.0 && step.is_finite() {
        (-step.log10().floor()).max(0.0) as usize
    } else {
        0
    };
    // Steps such as 0.25 need one more decimal than their magnitude says.
    let decimals = if decimals > 0 && ((step * 10f64.powi(decimals as i32)).fract().abs() > 1e-6) {
        decimals + 1
    } else {
        decimals
    };
    format!("{v:.decimals$}")
}

/// "1.50e6" → "1.5e6", "2.0e3" → "2e3".
fn trim_mantissa(s: &str) -> String {
    match s.split_once('e') {
        Some((m, e)) if m.contains('.') => {
            let m = m.trim_end_matches('0').trim_end_matches('.');
            format!("{m}e{e}")
        }
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_the_same_everywhere() {
        assert_eq!(format_value(12.0), "12");
        assert_eq!(format_value(1234.56), "1234.6");
        assert_eq!(format_value(1.23456), "1.235");
        assert_eq!(format_value(0.0001234), "1.234e-4");
        assert_eq!(format_value(f64::INFINITY), "inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(-3.0), "-3");
    }

    #[test]
    fn ticks_print_what_the_step_resolves() {
        assert_eq!(format_tick(0.30000000000000004, 0.1), "0.3");
        assert_eq!(format_tick(0.5, 0.25), "0.50");
        assert_eq!(format_tick(0.75, 0.25), "0.75");
        assert_eq!(format_tick(1500.0, 500.0), "1500");
        assert_eq!(format_tick(-1e-17, 0.2), "0.0");
        assert_eq!(format_tick(-1e-17, 2.0), "0");
        assert_eq!(format_tick(2e7, 1e7), "2e7");
        assert_eq!(format_tick(1.5e7, 5e6), "1.5e7");
        assert_eq!(format_tick(0.0002, 0.0001), "2e-4");
    }
}
