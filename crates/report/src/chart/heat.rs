//! Heat maps: rows (allocators) × columns (slices of an x range such as
//! the pfn range), colour from white through yellow to dark red, with a
//! colour bar whose ticks are round values.

use super::svg::{fit, text_width, Anchor, Svg, SMALL};
use super::ticks::{linear_ticks, Axis, Scale};
use super::{Chart, Head, WIDTH};
use crate::{format_value, Error};

/// How values map to colour.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ColourScale {
    /// Colour proportional to the value, from 0 to the maximum.
    Linear,
    /// Colour proportional to log(1 + value): wear counts span decades,
    /// and 0 (never written) stays white.
    Log,
}

/// A heat map. Every row has the same number of columns; column `j` of
/// `n` covers `x_lo + (x_hi - x_lo) * j / n ..` on the x axis.
///
/// ```
/// use nvmos_report::chart::{Axis, ColourScale, HeatMap};
/// let chart = HeatMap::new("heat", "Wear over the pfn range")
///     .x_axis(Axis::linear("pfn").range(4096.0, 20480.0))
///     .colour_scale(ColourScale::Log, "most writes to one frame")
///     .row("buddy", vec![0.0, 3.0, 120.0, 7.0])
///     .row("iBuddy", vec![2.0, 2.0, 3.0, 2.0])
///     .render()
///     .unwrap();
/// assert_eq!(chart.marks(), 8);
/// ```
#[derive(Clone, Debug)]
pub struct HeatMap {
    head: Head,
    x: Axis,
    scale: ColourScale,
    colour_label: String,
    rows: Vec<(String, Vec<f64>)>,
}

impl HeatMap {
    pub fn new(kind: impl Into<String>, title: impl Into<String>) -> Self {
        HeatMap {
            head: Head::new(kind, title),
            x: Axis::linear("column"),
            scale: ColourScale::Linear,
            colour_label: "value".into(),
            rows: Vec::new(),
        }
    }

    /// Add a `data-` attribute to the `<svg>`.
    pub fn attr(mut self, name: &str, value: &str) -> Self {
        self.head.attr(name, value);
        self
    }

    /// The x axis; give it a [`range`](Axis::range) (the columns' span),
    /// or the columns are numbered 0..n.
    pub fn x_axis(mut self, axis: Axis) -> Self {
        self.x = axis;
        self
    }

    /// Colour scale and the colour bar's label.
    pub fn colour_scale(mut self, scale: ColourScale, label: impl Into<String>) -> Self {
        self.scale = scale;
        self.colour_label = label.into();
        self
    }

    pub fn row(mut self, label: impl Into<String>, values: Vec<f64>) -> Self {
        self.rows.push((label.into(), values));
        self
    }

    /// The SVG. Errors: no rows, rows of different or zero length, a value
    /// negative or not finite, a log x axis.
    pub fn render(&self) -> Result<Chart, Error> {
        let kind = &self.head.kind;
        let bad = |reason: String| Error::Chart {
            chart: kind.clone(),
            reason,
        };
        let Some(cols) = self.rows.first().map(|r| r.1.len()) else {
            return Err(bad("no rows to draw".into()));
        };
        if cols == 0 {
            return Err(bad(format!("row \"{}\" has no values", self.rows[0].0)));
        }
        if self.x.scale != Scale::Linear {
            return Err(bad("a heat map's x axis is linear".into()));
        }
        let mut max = 0.0f64;
        for (label, values) in &self.rows {
            if values.len() != cols {
                return Err(bad(format!(
                    "row \"{label}\" has {} columns, the first row {cols}",
                    values.len()
                )));
            }
            if let Some((j, v)) = values
                .iter()
                .enumerate()
                .find(|(_, v)| !v.is_finite() || **v < 0.0)
            {
                return Err(bad(format!(
                    "row \"{label}\" column {j}: {v} is not a finite value ≥ 0"
                )));
            }
            max = values.iter().copied().fold(max, f64::max);
        }
        // Columns fill the plot, so the axis spans exactly their range.
        let axis = match self.x.range {
            Some(_) => self.x.clone(),
            None => self.x.clone().range(0.0, cols as f64),
        };
        let x = axis.resolve(kind, 0.0, cols as f64)?;
        let level = |v: f64| -> f64 {
            if max <= 0.0 {
                0.0
            } else {
                match self.scale {
                    ColourScale::Linear => v / max,
                    ColourScale::Log => (1.0 + v).ln() / (1.0 + max).ln(),
                }
            }
        };

        let mut svg = Svg::new();
        let top = svg.title(&self.head.title) + 8.0;
        let widest = self
            .rows
            .iter()
            .map(|r| text_width(&r.0, SMALL))
            .fold(0.0, f64::max);
        let label_w = widest.min(WIDTH * 0.3);
        let left = 10.0 + label_w + 8.0;
        // The colour bar sits at the right: a strip and its tick labels.
        let bar_ticks = self.bar_ticks(max);
        let tick_w = bar_ticks
            .iter()
            .map(|(_, l)| text_width(l, SMALL))
            .fold(0.0, f64::max);
        let bar_w = 14.0;
        let bar_x = WIDTH - 10.0 - 18.0 - tick_w - 6.0 - bar_w;
        let right = bar_x - 24.0;
        let row_h = 18.0;
        let bottom = top + row_h * self.rows.len() as f64;
        let cell_w = (right - left) / cols as f64;
        for (i, (label, values)) in self.rows.iter().enumerate() {
            let y = top + row_h * i as f64;
            let shown = fit(label, SMALL, label_w);
            let tip = (shown != *label).then_some(label.as_str());
            svg.text(
                left - 6.0,
                y + 13.0,
                SMALL,
                Anchor::End,
                &shown,
                "#222",
                false,
                tip,
            );
            for (j, &v) in values.iter().enumerate() {
                let tip = format!("{label}, column {j}: {}", format_value(v));
                // A hair of overlap so anti-aliasing shows no seams.
                svg.rect(
                    left + cell_w * j as f64,
                    y + 1.0,
                    cell_w + 0.05,
                    row_h - 2.0,
                    &ramp(level(v)),
                    Some(&tip),
                    "",
                );
            }
        }
        svg.rect(
            left,
            top,
            right - left,
            bottom - top,
            "none",
            None,
            " stroke=\"#999\" stroke-width=\"0.5\"",
        );
        let below = svg.x_axis(&x, &self.x.label, left, right, bottom, None);

        // Colour bar: as tall as the rows (at least 100), 64 steps.
        // Tall enough for its label, which runs along it.
        let bar_top = top;
        let need = text_width(&self.colour_label, SMALL).clamp(100.0, 300.0) + 10.0;
        let bar_bottom = bottom.max(top + need);
        let steps = 64;
        let step_h = (bar_bottom - bar_top) / steps as f64;
        for k in 0..steps {
            let l = (k as f64 + 0.5) / steps as f64;
            svg.rect(
                bar_x,
                bar_bottom - step_h * (k + 1) as f64,
                bar_w,
                step_h + 0.05,
                &ramp(l),
                None,
                "",
            );
        }
        svg.rect(
            bar_x,
            bar_top,
            bar_w,
            bar_bottom - bar_top,
            "none",
            None,
            " stroke=\"#999\" stroke-width=\"0.5\"",
        );
        for (v, l) in &bar_ticks {
            let y = bar_bottom - (bar_bottom - bar_top) * level(*v);
            svg.line(bar_x + bar_w, y, bar_x + bar_w + 4.0, y, "#666", 1.0, None);
            svg.text(
                bar_x + bar_w + 6.0,
                y + 4.0,
                SMALL,
                Anchor::Start,
                l,
                "#333",
                false,
                None,
            );
        }
        let label = fit(&self.colour_label, SMALL, bar_bottom - bar_top);
        svg.vertical_text(WIDTH - 16.0, (bar_top + bar_bottom) / 2.0, SMALL, &label);
        let end = below.max(bar_bottom + 8.0);
        Ok(svg.finish(&self.head, end + 4.0))
    }

    /// Colour-bar ticks at round values from 0 to `max`: 0 and powers of
    /// ten on a log scale (with 2× and 5× when there are few), the linear
    /// ticks otherwise; always ending at the maximum itself.
    fn bar_ticks(&self, max: f64) -> Vec<(f64, String)> {
        if max <= 0.0 {
            return vec![(0.0, "0".into())];
        }
        let mut ticks: Vec<(f64, String)> = match self.scale {
            ColourScale::Linear => {
                let t = linear_ticks(0.0, max, 5);
                t.values
                    .into_iter()
                    .zip(t.labels)
                    .filter(|(v, _)| *v <= max * (1.0 + 1e-9))
                    .collect()
            }
            ColourScale::Log => {
                let mut t = vec![(0.0, "0".to_string())];
                let mut p = 1.0;
                while p <= max {
                    t.push((p, format_value(p)));
                    if max < 100.0 {
                        for m in [2.0, 5.0] {
                            if m * p <= max {
                                t.push((m * p, format_value(m * p)));
                            }
                        }
                    }
                    p *= 10.0;
                }
                t.sort_by(|a, b| a.0.total_cmp(&b.0));
                t
            }
        };
        // Label the maximum unless a tick is already close to it.
        let near = |v: f64| match self.scale {
            ColourScale::Linear => (max - v) / max < 0.08,
            ColourScale::Log => ((1.0 + max).ln() - (1.0 + v).ln()) / (1.0 + max).ln() < 0.08,
        };
        if !ticks.iter().any(|(v, _)| near(*v)) {
            ticks.push((max, format!("max {}", format_value(max))));
        }
        ticks
    }
}

/// White (0) through yellow to dark red (1).
fn ramp(level: f64) -> String {
    let l = level.clamp(0.0, 1.0);
    let (r, g, b) = (
        255.0 - 100.0 * l,
        255.0 - 235.0 * l,
        255.0 * (1.0 - l).powi(3),
    );
    format!("rgb({r:.0},{g:.0},{b:.0})")
}

#[cfg(test)]
mod tests {
    use super::super::test_util::assert_fits;
    use super::*;

    #[test]
    fn colour_bar_is_present_with_round_ticks() {
        let c = HeatMap::new("heat", "Wear heat map")
            .attr("data-trace", "synthetic")
            .x_axis(Axis::linear("pfn").range(4096.0, 20480.0))
            .colour_scale(ColourScale::Log, "most writes to one frame")
            .row(
                "Linux (as recorded)",
                (0..256).map(|i| f64::from(i % 7) * 100.0).collect(),
            )
            .row("iBuddy", (0..256).map(|i| f64::from(i % 3)).collect())
            .render()
            .unwrap();
        assert_fits(&c);
        let svg = c.svg();
        assert_eq!(c.marks(), 512);
        assert!(
            svg.contains(">most writes to one frame<"),
            "colour bar label"
        );
        for tick in [">0<", ">1<", ">10<", ">100<", ">max 600<"] {
            assert!(svg.contains(tick), "colour bar lacks {tick}");
        }
        // 64 colour-bar steps besides the cells.
        assert!(svg.matches("<rect ").count() >= 64);
        assert!(svg.contains("<title>iBuddy, column 2: 2</title>"));
        for tick in [">5000<", ">10000<", ">20000<"] {
            assert!(svg.contains(tick), "x axis lacks {tick}");
        }
    }

    #[test]
    fn linear_colour_bar_and_all_zero() {
        let c = HeatMap::new("h", "t")
            .colour_scale(ColourScale::Linear, "v")
            .row("a", vec![0.0, 0.37, 0.9])
            .render()
            .unwrap();
        assert_fits(&c);
        assert!(c.svg().contains(">0.8<"));
        let c = HeatMap::new("h", "t")
            .row("a", vec![0.0; 4])
            .render()
            .unwrap();
        assert_fits(&c);
    }

    #[test]
    fn ragged_or_negative_rows_are_refused() {
        let e = HeatMap::new("h", "t")
            .row("a", vec![1.0, 2.0])
            .row("b", vec![1.0])
            .render()
            .unwrap_err();
        assert!(e.to_string().contains("row \"b\" has 1 columns"), "{e}");
        let e = HeatMap::new("h", "t")
            .row("a", vec![-1.0])
            .render()
            .unwrap_err();
        assert!(e.to_string().contains("column 0"), "{e}");
    }
}
