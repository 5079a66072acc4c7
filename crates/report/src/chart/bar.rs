//! Grouped horizontal bar charts: one group per category (a row label),
//! one bar per series in each group, the value printed after each bar, a
//! value axis with round ticks, a legend, optional reference lines.

use super::svg::{fit, text_width, Anchor, Legend, Sample, Svg, SMALL};
use super::ticks::{Axis, Scale};
use super::{colour, Chart, Head, WIDTH};
use crate::{escape, format_value, Error};

/// A grouped bar chart. Values are `Option<f64>`: `None` is "not
/// measured" (no bar, "n/a"); `+inf` is drawn to the end of the axis and
/// labelled `inf` (an unbounded lifetime).
///
/// ```
/// use nvmos_report::chart::{Axis, BarChart};
/// let chart = BarChart::new("swap-in", "swap-in time (s)")
///     .value_axis(Axis::linear("seconds"))
///     .categories(["fio (model)", "recorded t1"])
///     .series("SCM-400", vec![Some(0.4), Some(0.9)])
///     .series("SSD", vec![Some(3.1), None])
///     .render()
///     .unwrap();
/// assert_eq!(chart.marks(), 3);
/// ```
#[derive(Clone, Debug)]
pub struct BarChart {
    head: Head,
    axis: Axis,
    categories: Vec<String>,
    series: Vec<(String, Vec<Option<f64>>)>,
    references: Vec<(f64, String)>,
    unit: String,
    bar_attr: Option<String>,
}

impl BarChart {
    pub fn new(kind: impl Into<String>, title: impl Into<String>) -> Self {
        BarChart {
            head: Head::new(kind, title),
            axis: Axis::linear("value"),
            categories: Vec::new(),
            series: Vec::new(),
            references: Vec::new(),
            unit: String::new(),
            bar_attr: None,
        }
    }

    /// Add a `data-` attribute to the `<svg>`.
    pub fn attr(mut self, name: &str, value: &str) -> Self {
        self.head.attr(name, value);
        self
    }

    /// The value axis (linear only: bars start at zero).
    pub fn value_axis(mut self, axis: Axis) -> Self {
        self.axis = axis;
        self
    }

    /// The groups, top to bottom.
    pub fn categories<S: Into<String>>(mut self, c: impl IntoIterator<Item = S>) -> Self {
        self.categories = c.into_iter().map(Into::into).collect();
        self
    }

    /// One bar per category, named `name` in the legend.
    pub fn series(mut self, name: impl Into<String>, values: Vec<Option<f64>>) -> Self {
        self.series.push((name.into(), values));
        self
    }

    /// Put attribute `name` with the category's value on each bar (say
    /// `data-alloc`), so a script can find a category's bars.
    pub fn category_attr(mut self, name: &str) -> Self {
        self.bar_attr = Some(name.to_string());
        self
    }

    /// Printed after each value ("%", " s", "×").
    pub fn unit(mut self, unit: impl Into<String>) -> Self {
        self.unit = unit.into();
        self
    }

    /// A dashed vertical line at `value`, named in the legend.
    pub fn reference(mut self, value: f64, label: impl Into<String>) -> Self {
        self.references.push((value, label.into()));
        self
    }

    /// The SVG. Errors: no categories or series, a series whose length is
    /// not the number of categories, a NaN, a log axis.
    pub fn render(&self) -> Result<Chart, Error> {
        let kind = &self.head.kind;
        let bad = |reason: String| Error::Chart {
            chart: kind.clone(),
            reason,
        };
        if self.categories.is_empty() || self.series.is_empty() {
            return Err(bad("no categories or no series to draw".into()));
        }
        if self.axis.scale != Scale::Linear {
            return Err(bad(
                "bars need a linear value axis (they start at zero)".into()
            ));
        }
        let (mut lo, mut hi) = (0.0f64, f64::NEG_INFINITY);
        for (name, values) in &self.series {
            if values.len() != self.categories.len() {
                return Err(bad(format!(
                    "series \"{name}\" has {} values for {} categories",
                    values.len(),
                    self.categories.len()
                )));
            }
            for (c, v) in self.categories.iter().zip(values) {
                match v {
                    Some(v) if v.is_nan() => {
                        return Err(bad(format!(
                            "series \"{name}\", category \"{c}\": value is NaN"
                        )))
                    }
                    Some(v) if v.is_finite() => {
                        lo = lo.min(*v);
                        hi = hi.max(*v);
                    }
                    _ => {}
                }
            }
        }
        for (v, l) in &self.references {
            if !v.is_finite() {
                return Err(bad(format!("reference \"{l}\" is {v}, not finite")));
            }
            lo = lo.min(*v);
            hi = hi.max(*v);
        }
        if !hi.is_finite() {
            hi = lo.max(0.0) + 1.0;
        }
        let axis = self.axis.resolve(kind, lo, hi)?;

        let mut svg = Svg::new();
        let top = svg.title(&self.head.title) + 8.0;
        let widest = self
            .categories
            .iter()
            .map(|c| text_width(c, SMALL))
            .fold(0.0, f64::max);
        let label_w = widest.min(WIDTH * 0.35);
        let left = 10.0 + label_w + 8.0;
        let value_w = self
            .series
            .iter()
            .flat_map(|(_, v)| v.iter())
            .map(|v| text_width(&self.value_text(*v), SMALL - 1.0))
            .fold(0.0, f64::max);
        let right = WIDTH - 12.0 - value_w - 6.0;
        let n = self.series.len();
        let bar_h = if n == 1 { 16.0 } else { 12.0 };
        let group_h = bar_h * n as f64 + 8.0;
        let bottom = top + group_h * self.categories.len() as f64;
        let px = |v: f64| left + (right - left) * axis.frac(v.clamp(axis.lo, axis.hi));
        let zero = px(0.0);

        // Grid and axis first, so bars are drawn over the grid.
        let below = svg.x_axis(&axis, &self.axis.label, left, right, bottom, Some(top));
        for (g, cat) in self.categories.iter().enumerate() {
            let y0 = top + group_h * g as f64 + 4.0;
            let shown = fit(cat, SMALL, label_w);
            let tip = (shown != *cat).then_some(cat.as_str());
            svg.text(
                left - 6.0,
                y0 + bar_h * n as f64 / 2.0 + 4.0,
                SMALL,
                Anchor::End,
                &shown,
                "#222",
                false,
                tip,
            );
            for (i, (name, values)) in self.series.iter().enumerate() {
                let y = y0 + bar_h * i as f64;
                let v = values[g];
                let text = self.value_text(v);
                if let Some(v) = v {
                    let end = if v.is_infinite() {
                        if v > 0.0 {
                            right
                        } else {
                            left
                        }
                    } else {
                        px(v)
                    };
                    let (x, w) = if end >= zero {
                        (zero, end - zero)
                    } else {
                        (end, zero - end)
                    };
                    let extra = match &self.bar_attr {
                        Some(attr) => format!(" {}=\"{}\"", attr, escape(cat)),
                        None => String::new(),
                    };
                    let tip = format!("{cat} · {name}: {text}");
                    svg.rect(
                        x,
                        y,
                        w.max(1.0),
                        bar_h - 2.0,
                        colour(i + 1),
                        Some(&tip),
                        &extra,
                    );
                }
                let after = match v {
                    Some(v) if v.is_finite() => px(v).max(zero),
                    Some(v) if v > 0.0 => right,
                    _ => zero,
                };
                svg.text(
                    after + 4.0,
                    y + bar_h - 3.5,
                    SMALL - 1.0,
                    Anchor::Start,
                    &text,
                    "#333",
                    false,
                    None,
                );
            }
        }
        let mut legend = Vec::new();
        for (v, label) in &self.references {
            let x = px(*v);
            svg.line(x, top - 4.0, x, bottom, "#d62728", 1.5, Some("5 4"));
            legend.push(Legend {
                label: format!("{label} ({}{})", format_value(*v), self.unit),
                colour: "#d62728".into(),
                sample: Sample::Line {
                    dash: Some("5 4".into()),
                    marker: None,
                },
            });
        }
        for (i, (name, _)) in self.series.iter().enumerate() {
            legend.push(Legend {
                label: name.clone(),
                colour: colour(i + 1).into(),
                sample: Sample::Swatch { outline: false },
            });
        }
        let end = svg.legend(&legend, left, below, WIDTH - left - 10.0);
        Ok(svg.finish(&self.head, end + 4.0))
    }

    fn value_text(&self, v: Option<f64>) -> String {
        match v {
            Some(v) => format!("{}{}", format_value(v), self.unit),
            None => "n/a".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::assert_fits;
    use super::*;

    #[test]
    fn grouped_bars_with_legend_values_and_reference() {
        let c = BarChart::new("best", "Speed-up over decrypt-at-fault")
            .attr("data-workload", "summary")
            .value_axis(Axis::linear("speed-up (×)"))
            .categories(["matmul (stream-4)", "kv \"store\""])
            .series("best", vec![Some(2.3), Some(1.2)])
            .series("worst", vec![Some(0.9), None])
            .reference(1.81, "seed 001")
            .unit("×")
            .category_attr("data-alloc")
            .render()
            .unwrap();
        assert_fits(&c);
        let svg = c.svg();
        assert_eq!(c.marks(), 3);
        for text in [
            ">2.300×<",
            ">n/a<",
            ">best<",
            ">worst<",
            ">seed 001 (1.810×)<",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert!(svg.contains("data-alloc=\"kv &quot;store&quot;\""));
        for tick in [">0.0<", ">0.5<", ">1.0<", ">2.0<", ">2.5<"] {
            assert!(svg.contains(tick), "no tick {tick}");
        }
    }

    #[test]
    fn infinite_values_fill_the_axis_and_say_inf() {
        let c = BarChart::new("lifetime", "Lifetime")
            .value_axis(Axis::linear("% of ideal"))
            .categories(["a", "b"])
            .series("lifetime", vec![Some(f64::INFINITY), Some(40.0)])
            .render()
            .unwrap();
        assert_fits(&c);
        assert!(c.svg().contains(">inf<"));
    }

    #[test]
    fn mismatched_or_bad_values_are_refused() {
        let e = BarChart::new("k", "t")
            .categories(["a", "b"])
            .series("s", vec![Some(1.0)])
            .render()
            .unwrap_err();
        assert!(e.to_string().contains("1 values for 2 categories"), "{e}");
        let e = BarChart::new("k", "t")
            .categories(["a"])
            .series("s", vec![Some(f64::NAN)])
            .render()
            .unwrap_err();
        assert!(e.to_string().contains("\"a\""), "{e}");
    }

    #[test]
    fn long_labels_and_many_bars_fit() {
        let cats: Vec<String> = (0..20)
            .map(|i| format!("recorded trace number {i} · a rather long pattern name"))
            .collect();
        let mut chart = BarChart::new("k", "t").categories(cats.clone());
        for s in 0..4 {
            chart = chart.series(
                format!("series {s}"),
                cats.iter()
                    .map(|_| Some(123456.789 * s as f64 - 1000.0))
                    .collect(),
            );
        }
        assert_fits(&chart.render().unwrap());
    }
}
