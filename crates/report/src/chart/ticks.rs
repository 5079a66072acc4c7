//! Axis scales and ticks at round values: 1, 2 or 5 times a power of ten
//! on linear axes, powers of ten (with 2× and 5× inside a single decade)
//! on log10 axes, powers of two on log2 axes.

use crate::format::format_tick;
use crate::Error;

/// How an axis maps values to positions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Even spacing of values.
    Linear,
    /// Even spacing of decades; every value must be positive.
    Log10,
    /// Even spacing of doublings (device IOPS, block sizes); every value
    /// must be positive.
    Log2,
}

/// An axis as the caller describes it: its label, its scale, and
/// optionally a fixed range (otherwise the data's, widened to round
/// values).
#[derive(Clone, Debug)]
pub struct Axis {
    pub(crate) label: String,
    pub(crate) scale: Scale,
    pub(crate) range: Option<(f64, f64)>,
}

impl Axis {
    /// A linear axis labelled `label` (say what and the unit: "time (ms)").
    pub fn linear(label: impl Into<String>) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            range: None,
        }
    }

    /// A log10 axis labelled `label`.
    pub fn log10(label: impl Into<String>) -> Self {
        Axis {
            scale: Scale::Log10,
            ..Axis::linear(label)
        }
    }

    /// A log2 axis labelled `label`.
    pub fn log2(label: impl Into<String>) -> Self {
        Axis {
            scale: Scale::Log2,
            ..Axis::linear(label)
        }
    }

    /// Show exactly `lo..=hi` (for example 0..=1 for a CDF); ticks are the
    /// round values inside it. Checked when the chart is rendered.
    pub fn range(mut self, lo: f64, hi: f64) -> Self {
        self.range = Some((lo, hi));
        self
    }

    /// Fix the domain and the ticks for data spanning `lo..=hi`.
    pub(crate) fn resolve(&self, chart: &str, lo: f64, hi: f64) -> Result<Resolved, Error> {
        let bad = |reason: String| Error::Chart {
            chart: chart.to_string(),
            reason,
        };
        let (lo, hi, fixed) = match self.range {
            Some((a, b)) => {
                if !(a.is_finite() && b.is_finite() && a < b) {
                    return Err(bad(format!(
                        "axis \"{}\": range {a}..{b} is empty or not finite",
                        self.label
                    )));
                }
                (a, b, true)
            }
            None => (lo, hi, false),
        };
        if !(lo.is_finite() && hi.is_finite()) {
            return Err(bad(format!(
                "axis \"{}\": no finite values to show",
                self.label
            )));
        }
        if self.scale != Scale::Linear && lo <= 0.0 {
            return Err(bad(format!(
                "axis \"{}\" is logarithmic but has the value {lo}, not positive",
                self.label
            )));
        }
        let ticks = match self.scale {
            Scale::Linear => linear_ticks(lo, hi, 6),
            Scale::Log10 => log10_ticks(lo, hi),
            Scale::Log2 => log2_ticks(lo, hi),
        };
        let (lo, hi) = if fixed {
            (lo, hi)
        } else {
            (ticks.lo, ticks.hi)
        };
        let values: Vec<(f64, String)> = ticks
            .values
            .iter()
            .zip(ticks.labels)
            .filter(|(v, _)| **v >= lo - (hi - lo) * 1e-9 && **v <= hi + (hi - lo) * 1e-9)
            .map(|(v, l)| (*v, l))
            .collect();
        Ok(Resolved {
            scale: self.scale,
            lo,
            hi,
            ticks: values,
        })
    }
}

/// An axis with its domain and ticks fixed.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub scale: Scale,
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<(f64, String)>,
}

impl Resolved {
    /// Where `v` falls, 0 at `lo` and 1 at `hi`.
    pub fn frac(&self, v: f64) -> f64 {
        let t = |x: f64| match self.scale {
            Scale::Linear => x,
            Scale::Log10 => x.log10(),
            Scale::Log2 => x.log2(),
        };
        (t(v) - t(self.lo)) / (t(self.hi) - t(self.lo))
    }
}

/// Ticks and the round domain that holds them.
#[derive(Clone, Debug, PartialEq)]
pub struct Ticks {
    /// The domain, widened from the data's to round values.
    pub lo: f64,
    /// See `lo`.
    pub hi: f64,
    /// Tick values, ascending.
    pub values: Vec<f64>,
    /// Their labels, as [`format_tick`] prints them.
    pub labels: Vec<String>,
}

/// The round step nearest `raw`: 1, 2 or 5 times a power of ten.
fn nice_step(raw: f64) -> f64 {
    let power = 10f64.powf(raw.log10().floor());
    let f = raw / power;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// About `target` ticks at round values over `lo..=hi` (the domain widened
/// to the ticks around it). An empty range is widened around its value.
pub fn linear_ticks(lo: f64, hi: f64, target: usize) -> Ticks {
    let (mut lo, mut hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    if hi - lo <= hi.abs().max(lo.abs()) * 1e-12 {
        if lo == 0.0 {
            hi = 1.0;
        } else {
            let pad = lo.abs() * 0.5;
            lo -= pad;
            hi += pad;
        }
    }
    let step = nice_step((hi - lo) / target.max(2) as f64);
    // lo / step can land a hair off an integer; snap before rounding out.
    let snap = |q: f64| {
        if (q - q.round()).abs() < 1e-9 {
            q.round()
        } else {
            q
        }
    };
    let first = snap(lo / step).floor();
    let last = snap(hi / step).ceil();
    let values: Vec<f64> = (first as i64..=last as i64)
        .map(|i| {
            // i * step, rounded to what the step resolves so that 0.1*3 is 0.3.
            let v = i as f64 * step;
            let digits = (-step.log10().floor()).max(0.0) as i32 + 1;
            let scale = 10f64.powi(digits);
            (v * scale).round() / scale
        })
        .collect();
    let labels = values.iter().map(|&v| format_tick(v, step)).collect();
    Ticks {
        lo: first * step,
        hi: last * step,
        values,
        labels,
    }
}

/// Powers of ten over `lo..=hi` (both positive), plus 2× and 5× when the
/// range holds fewer than two decades; at most about ten ticks.
pub fn log10_ticks(lo: f64, hi: f64) -> Ticks {
    let a = lo.log10().floor() as i32;
    let b = (hi.log10().ceil() as i32).max(a + 1);
    let decades = b - a;
    let stride = ((decades + 9) / 10).max(1);
    let mut values = Vec::new();
    for k in a..=b {
        let p = 10f64.powi(k);
        if (k - a) % stride == 0 || k == b {
            values.push(p);
        }
        if decades <= 2 && k < b {
            values.push(2.0 * p);
            values.push(5.0 * p);
        }
    }
    values.sort_by(f64::total_cmp);
    values.dedup();
    let labels = values.iter().map(|&v| log_label(v)).collect();
    Ticks {
        lo: 10f64.powi(a),
        hi: 10f64.powi(b),
        values,
        labels,
    }
}

/// Powers of two over `lo..=hi` (both positive), at most about ten.
pub fn log2_ticks(lo: f64, hi: f64) -> Ticks {
    let a = lo.log2().floor() as i32;
    let b = (hi.log2().ceil() as i32).max(a + 1);
    let stride = ((b - a + 9) / 10).max(1);
    let values: Vec<f64> = (a..=b)
        .filter(|k| (k - a) % stride == 0 || *k == b)
        .map(|k| 2f64.powi(k))
        .collect();
    let labels = values.iter().map(|&v| log_label(v)).collect();
    Ticks {
        lo: 2f64.powi(a),
        hi: 2f64.powi(b),
        values,
        labels,
    }
}

/// A power-axis label: plain up to a million, "1e7" beyond, and "0.001"
/// style for fractions.
fn log_label(v: f64) -> String {
    if (1e-3..1e7).contains(&v) {
        crate::format_value(v)
    } else {
        format_tick(v, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tick is round when it is 1, 2, 2.5 or 5 times a power of ten
    /// times an integer step count: here, when v / step is an integer and
    /// step is 1, 2 or 5 times a power of ten.
    fn is_round_step(step: f64) -> bool {
        let m = step / 10f64.powf(step.log10().floor());
        [1.0, 2.0, 5.0, 10.0].iter().any(|x| (m - x).abs() < 1e-9)
    }

    #[test]
    fn linear_ticks_are_round_for_awkward_ranges() {
        for (lo, hi) in [
            (0.0, 1.0),
            (0.0, 7.3),
            (0.0, 1234.56),
            (3.7, 9.2),
            (-17.0, 43.0),
            (0.000123, 0.000789),
            (1e9, 3.3e9),
            (99.9, 100.1),
            (0.0, 0.0),
            (5.0, 5.0),
        ] {
            let t = linear_ticks(lo, hi, 6);
            assert!(
                t.values.len() >= 2 && t.values.len() <= 13,
                "{lo}..{hi}: {t:?}"
            );
            assert!(
                t.lo <= lo.min(hi) && t.hi >= hi.max(lo),
                "{lo}..{hi}: {t:?}"
            );
            let step = t.values[1] - t.values[0];
            assert!(is_round_step(step), "{lo}..{hi}: step {step}");
            for w in t.values.windows(2) {
                assert!(
                    ((w[1] - w[0]) / step - 1.0).abs() < 1e-6,
                    "{lo}..{hi}: {t:?}"
                );
            }
            for (v, label) in t.values.iter().zip(&t.labels) {
                assert!(
                    ((v / step).round() - v / step).abs() < 1e-6,
                    "{v} not a multiple of {step}"
                );
                let back: f64 = label.parse().unwrap();
                assert!((back - v).abs() <= step * 1e-6, "{label} for {v}");
            }
        }
    }

    #[test]
    fn awkward_range_gets_the_expected_ticks() {
        let t = linear_ticks(0.0, 7.3, 6);
        assert_eq!(t.labels, ["0", "2", "4", "6", "8"]);
        let t = linear_ticks(0.0, 1.0, 6);
        assert_eq!(t.labels, ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
        let t = linear_ticks(3.7, 9.2, 6);
        assert_eq!(t.labels, ["3", "4", "5", "6", "7", "8", "9", "10"]);
    }

    #[test]
    fn log_ticks_are_powers() {
        let t = log10_ticks(1.0, 1500.0);
        assert_eq!(t.labels, ["1", "10", "100", "1000", "10000"]);
        let t = log10_ticks(3.0, 40.0);
        assert_eq!(t.labels, ["1", "2", "5", "10", "20", "50", "100"]);
        let t = log2_ticks(12_500.0, 400_000.0);
        assert!(t.values.iter().all(|v| v.log2().fract() == 0.0));
        assert!(t.lo <= 12_500.0 && t.hi >= 400_000.0);
        let t = log10_ticks(1.0, 1e30);
        assert!(t.values.len() <= 12, "{t:?}");
    }

    #[test]
    fn bad_axes_are_refused_with_their_name() {
        let e = Axis::log10("writes").resolve("cdf", 0.0, 10.0).unwrap_err();
        assert!(e.to_string().contains("writes"), "{e}");
        let e = Axis::linear("x")
            .range(1.0, 1.0)
            .resolve("c", 0.0, 1.0)
            .unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        let e = Axis::linear("x").resolve("c", f64::NAN, 1.0).unwrap_err();
        assert!(e.to_string().contains("finite"), "{e}");
    }

    #[test]
    fn fixed_range_keeps_its_bounds() {
        let r = Axis::linear("fraction")
            .range(0.0, 1.0)
            .resolve("c", 0.3, 0.4)
            .unwrap();
        assert_eq!((r.lo, r.hi), (0.0, 1.0));
        assert_eq!(r.ticks.first().unwrap().1, "0.0");
        assert_eq!(r.ticks.last().unwrap().1, "1.0");
        assert_eq!(r.frac(0.5), 0.5);
    }
}
