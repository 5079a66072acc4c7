//! Line charts: several series over a shared x axis, a legend with line
//! samples, optional steps (CDFs), markers and horizontal reference lines.

use super::svg::{fit, text_width, Legend, Sample, Svg, SMALL};
use super::ticks::Axis;
use super::{colour, Chart, Head, WIDTH};
use crate::{format_value, Error};

/// One line: a name (legend and tooltips) and its points, x ascending.
#[derive(Clone, Debug)]
pub struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    colour: Option<String>,
    dash: Option<String>,
}

impl Series {
    /// A series named `name` through `points`.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            colour: None,
            dash: None,
        }
    }

    /// Draw it in `colour` (CSS colour) instead of the palette's.
    pub fn colour(mut self, colour: impl Into<String>) -> Self {
        self.colour = Some(colour.into());
        self
    }

    /// Draw it dashed (an SVG dash array such as "4 3").
    pub fn dashed(mut self, dash: impl Into<String>) -> Self {
        self.dash = Some(dash.into());
        self
    }
}

/// A line chart. Build it, then [`render`](LineChart::render).
///
/// ```
/// use nvmos_report::chart::{Axis, LineChart, Series};
/// let chart = LineChart::new("cdf", "CDF of writes per frame")
///     .x_axis(Axis::log10("writes per frame"))
///     .y_axis(Axis::linear("fraction of frames").range(0.0, 1.0))
///     .steps()
///     .series(Series::new("buddy", vec![(1.0, 0.5), (10.0, 0.9), (40.0, 1.0)]))
///     .render()
///     .unwrap();
/// assert!(chart.svg().contains("data-chart=\"cdf\""));
/// ```
#[derive(Clone, Debug)]
pub struct LineChart {
    head: Head,
    x: Axis,
    y: Axis,
    series: Vec<Series>,
    steps: bool,
    markers: bool,
    references: Vec<(f64, String)>,
    height: f64,
}

impl LineChart {
    /// A chart of kind `kind` (its `data-chart`) titled `title`.
    pub fn new(kind: impl Into<String>, title: impl Into<String>) -> Self {
        LineChart {
            head: Head::new(kind, title),
            x: Axis::linear("x"),
            y: Axis::linear("y"),
            series: Vec::new(),
            steps: false,
            markers: false,
            references: Vec::new(),
            height: 260.0,
        }
    }

    /// Add a `data-` attribute to the `<svg>` (say `data-trace`).
    pub fn attr(mut self, name: &str, value: &str) -> Self {
        self.head.attr(name, value);
        self
    }

    pub fn x_axis(mut self, axis: Axis) -> Self {
        self.x = axis;
        self
    }

    pub fn y_axis(mut self, axis: Axis) -> Self {
        self.y = axis;
        self
    }

    pub fn series(mut self, series: Series) -> Self {
        self.series.push(series);
        self
    }

    /// Draw each series as steps (a CDF): flat until the next x, then up.
    pub fn steps(mut self) -> Self {
        self.steps = true;
        self
    }

    /// A dot at every point (each a data mark with its value).
    pub fn markers(mut self) -> Self {
        self.markers = true;
        self
    }

    /// A dashed horizontal line at `y`, named in the legend.
    pub fn reference(mut self, y: f64, label: impl Into<String>) -> Self {
        self.references.push((y, label.into()));
        self
    }

    /// Height of the plot area (default 260).
    pub fn plot_height(mut self, h: f64) -> Self {
        self.height = h.clamp(80.0, 800.0);
        self
    }

    /// The SVG. Errors: no series, a series without points, a point or
    /// reference not finite, a non-positive value on a log axis.
    pub fn render(&self) -> Result<Chart, Error> {
        let kind = &self.head.kind;
        let bad = |reason: String| Error::Chart {
            chart: kind.clone(),
            reason,
        };
        if self.series.is_empty() {
            return Err(bad("no series to draw".into()));
        }
        let (mut xl, mut xh, mut yl, mut yh) = (
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
        );
        for s in &self.series {
            if s.points.is_empty() {
                return Err(bad(format!("series \"{}\" has no points", s.name)));
            }
            for (i, &(x, y)) in s.points.iter().enumerate() {
                if !(x.is_finite() && y.is_finite()) {
                    return Err(bad(format!(
                        "series \"{}\" point {i} is ({x}, {y}), not finite",
                        s.name
                    )));
                }
                xl = xl.min(x);
                xh = xh.max(x);
                yl = yl.min(y);
                yh = yh.max(y);
            }
        }
        for (v, l) in &self.references {
            if !v.is_finite() {
                return Err(bad(format!("reference \"{l}\" is {v}, not finite")));
            }
            yl = yl.min(*v);
            yh = yh.max(*v);
        }
        let x = self.x.resolve(kind, xl, xh)?;
        let y = self.y.resolve(kind, yl, yh)?;

        let mut svg = Svg::new();
        let top = svg.title(&self.head.title) + 8.0;
        let tick_w = y
            .ticks
            .iter()
            .map(|(_, l)| text_width(l, SMALL))
            .fold(0.0, f64::max);
        let left = 10.0 + 16.0 + 6.0 + tick_w + 8.0;
        let last_x = x
            .ticks
            .last()
            .map_or(0.0, |(_, l)| text_width(l, SMALL) / 2.0);
        let right = WIDTH - 12.0 - last_x.max(4.0);
        let bottom = top + self.height;
        let px = |v: f64| left + (right - left) * x.frac(v);
        let py = |v: f64| bottom - (bottom - top) * y.frac(v);

        svg.y_axis(&y, left, bottom, top, Some(right));
        let below = svg.x_axis(&x, &self.x.label, left, right, bottom, Some(top));
        let ylabel = fit(&self.y.label, 12.0, self.height);
        svg.vertical_text(20.0, (top + bottom) / 2.0, 12.0, &ylabel);

        let mut legend = Vec::new();
        for (v, label) in &self.references {
            let yy = py(*v);
            svg.line(left, yy, right, yy, "#d62728", 1.5, Some("5 4"));
            legend.push(Legend {
                label: format!("{label} ({})", format_value(*v)),
                colour: "#d62728".into(),
                sample: Sample::Line {
                    dash: Some("5 4".into()),
                    marker: false,
                },
            });
        }
        for (i, s) in self.series.iter().enumerate() {
            let c = s.colour.clone().unwrap_or_else(|| colour(i).to_string());
            let mut pts: Vec<(f64, f64)> = Vec::new();
            for &(vx, vy) in &s.points {
                if self.steps {
                    if let Some(&(_, last_y)) = pts.last() {
                        pts.push((px(vx), last_y));
                    }
                }
                pts.push((px(vx), py(vy)));
            }
            // Clip to the plot area: a fixed range may cut data off.
            for p in &mut pts {
                p.0 = p.0.clamp(left, right);
                p.1 = p.1.clamp(top, bottom);
            }
            let tip = format!("{}: {} points", s.name, s.points.len());
            svg.polyline(&pts, &c, 1.8, s.dash.as_deref(), Some(&tip));
            if self.markers {
                for &(vx, vy) in &s.points {
                    let tip = format!("{}: {} at {}", s.name, format_value(vy), format_value(vx));
                    svg.circle(
                        px(vx).clamp(left, right),
                        py(vy).clamp(top, bottom),
                        3.0,
                        &c,
                        Some(&tip),
                    );
                }
            }
            legend.push(Legend {
                label: s.name.clone(),
                colour: c,
                sample: Sample::Line {
                    dash: s.dash.clone(),
                    marker: self.markers,
                },
            });
        }
        let end = svg.legend(&legend, left, below, WIDTH - left - 10.0);
        Ok(svg.finish(&self.head, end + 4.0))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::assert_fits;
    use super::*;

    fn sample() -> LineChart {
        LineChart::new("congestion", "swap-out time of a write-only hog (model), s")
            .attr("data-trace", "t<1>")
            .x_axis(Axis::log2("device random-write IOPS (4 KiB)"))
            .y_axis(Axis::linear("seconds"))
            .markers()
            .reference(1.81, "seed 001")
            .series(Series::new(
                "c (model hog)",
                vec![(12_500.0, 3.1), (25_000.0, 1.7), (400_000.0, 0.37)],
            ))
            .series(
                Series::new(
                    "nc (model hog)",
                    vec![(12_500.0, 2.9), (25_000.0, 1.5), (400_000.0, 0.21)],
                )
                .dashed("4 3"),
            )
    }

    #[test]
    fn legend_names_every_series_with_a_line_sample() {
        let c = sample().render().unwrap();
        assert_fits(&c);
        let svg = c.svg();
        for name in ["c (model hog)", "nc (model hog)", "seed 001 (1.810)"] {
            assert!(svg.contains(&format!(">{name}<")), "legend lacks {name}");
        }
        // Two series lines, the reference line and a sample per entry.
        assert!(svg.matches("stroke-dasharray=\"4 3\"").count() >= 2);
        assert_eq!(c.marks(), 2 + 6, "two lines and six points");
        assert!(svg.contains("data-trace=\"t&lt;1&gt;\""));
        assert!(svg.contains("<title>nc (model hog): 0.210 at 400000</title>"));
    }

    #[test]
    fn cdf_steps_and_fixed_range() {
        let c = LineChart::new("cdf", "CDF")
            .x_axis(Axis::log10("writes per frame"))
            .y_axis(Axis::linear("fraction").range(0.0, 1.0))
            .steps()
            .series(Series::new(
                "buddy",
                vec![(1.0, 0.25), (3.0, 0.75), (1500.0, 1.0)],
            ))
            .render()
            .unwrap();
        assert_fits(&c);
        for tick in [
            ">1<", ">10<", ">100<", ">1000<", ">10000<", ">0.0<", ">1.0<",
        ] {
            assert!(c.svg().contains(tick), "no tick {tick}");
        }
    }

    #[test]
    fn bad_data_is_refused_by_name() {
        let e = LineChart::new("k", "t").render().unwrap_err();
        assert!(e.to_string().contains("no series"), "{e}");
        let e = LineChart::new("k", "t")
            .series(Series::new("s1", vec![(0.0, f64::NAN)]))
            .render()
            .unwrap_err();
        assert!(
            e.to_string().contains("s1") && e.to_string().contains("k"),
            "{e}"
        );
        let e = LineChart::new("k", "t")
            .x_axis(Axis::log10("w"))
            .series(Series::new("s", vec![(0.0, 1.0)]))
            .render()
            .unwrap_err();
        assert!(e.to_string().contains("logarithmic"), "{e}");
    }

    #[test]
    fn never_wider_than_the_page_with_long_names() {
        let long = "an allocator with a name far longer than any legend row could ever hold, repeated twice over to be sure";
        let mut chart = LineChart::new("k", long.repeat(3)).y_axis(Axis::linear(long));
        for i in 0..12 {
            chart = chart.series(Series::new(
                format!("{long} {i}"),
                vec![(0.0, 1e9), (1.0, -3e9)],
            ));
        }
        assert_fits(&chart.render().unwrap());
    }
}
