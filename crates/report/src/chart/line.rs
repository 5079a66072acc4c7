//! Line charts: several series over a shared x axis, a legend with line
//! samples, optional steps (CDFs), markers and horizontal reference lines.
//!
//! Every series is told apart three ways: its colour, its dash pattern
//! and its marker shape (series `i` takes `PALETTE[i % 16]`, `DASHES[i %
//! 3]`, `SHAPES[i % 4]`), so no two of the first 48 share a look. Lines
//! that coincide (two allocators with the same CDF) must both stay
//! visible, so series are drawn in order, each a little thinner than the
//! one before (the earlier line's edges show around the later one, and
//! through its dashes), and each carries a few markers at positions along
//! its path staggered by series, which never fall on another series'
//! markers where paths coincide. With [`LineChart::markers`] every data
//! point gets the series' marker instead.

use super::svg::{fit, text_width, Legend, Sample, Svg, SMALL};
use super::ticks::Axis;
use super::{colour, dash, shape, Chart, Head, Shape, WIDTH};
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

    /// Draw it dashed (an SVG dash array such as "4 3") instead of the
    /// series' turn in [`DASHES`](super::DASHES).
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
                    marker: None,
                },
            });
        }
        // Lines first, in order and thinning; every marker after them, so
        // no line covers a marker.
        let n = self.series.len();
        let mut markers: Vec<(Shape, f64, f64, String, Option<String>)> = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            let c = s.colour.clone().unwrap_or_else(|| colour(i).to_string());
            let d = s.dash.clone().or_else(|| dash(i).map(str::to_string));
            let m = shape(i);
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
            svg.polyline(&pts, &c, line_width(i), d.as_deref(), Some(&tip));
            if self.markers {
                for &(vx, vy) in &s.points {
                    let tip = format!("{}: {} at {}", s.name, format_value(vy), format_value(vx));
                    markers.push((
                        m,
                        px(vx).clamp(left, right),
                        py(vy).clamp(top, bottom),
                        c.clone(),
                        Some(tip),
                    ));
                }
            } else {
                for (x, y) in staggered(&pts, i, n) {
                    markers.push((m, x, y, c.clone(), None));
                }
            }
            legend.push(Legend {
                label: s.name.clone(),
                colour: c,
                sample: Sample::Line {
                    dash: d,
                    marker: Some(m),
                },
            });
        }
        for (m, x, y, c, tip) in &markers {
            svg.marker(*m, *x, *y, 3.2, c, tip.as_deref());
        }
        let end = svg.legend(&legend, left, below, WIDTH - left - 10.0);
        Ok(svg.finish(&self.head, end + 4.0))
    }
}

/// Stroke width of series `i`: 2.4 for the first, each later one 0.07
/// thinner down to 1.4, so a line drawn over an earlier one it coincides
/// with leaves the earlier one's edges showing.
fn line_width(i: usize) -> f64 {
    let w = 2.4 - (0.07 * i as f64).min(1.0);
    (w * 100.0).round() / 100.0
}

/// Distance along a path between two markers of one series.
const MARKER_SPACING: f64 = 110.0;

/// Where series `i` of `n` puts its markers on the path `pts` (viewBox
/// units): every [`MARKER_SPACING`] along it, starting `(i + ½) / n` of a
/// spacing in, so that the markers of series that share a path fall at
/// different places; on a path too short for one, a single marker at the
/// same fraction of its length (a one-point path gets one on its point).
fn staggered(pts: &[(f64, f64)], i: usize, n: usize) -> Vec<(f64, f64)> {
    let frac = (i as f64 + 0.5) / n.max(1) as f64;
    let length: f64 = pts
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).hypot(w[1].1 - w[0].1))
        .sum();
    let mut at: Vec<f64> = Vec::new();
    let mut d = frac * MARKER_SPACING;
    while d <= length {
        at.push(d);
        d += MARKER_SPACING;
    }
    if at.is_empty() {
        at.push(frac * length);
    }
    // Walk the segments once, placing each marker on its segment.
    let mut out = Vec::with_capacity(at.len());
    let mut walked = 0.0;
    let mut next = at.into_iter().peekable();
    for w in pts.windows(2) {
        let seg = (w[1].0 - w[0].0).hypot(w[1].1 - w[0].1);
        while let Some(&d) = next.peek() {
            if d > walked + seg {
                break;
            }
            let t = if seg > 0.0 { (d - walked) / seg } else { 0.0 };
            out.push((
                w[0].0 + t * (w[1].0 - w[0].0),
                w[0].1 + t * (w[1].1 - w[0].1),
            ));
            next.next();
        }
        walked += seg;
    }
    if let (Some(&p), Some(_)) = (pts.last(), next.peek()) {
        // Rounding left a marker past the end, or the path is one point.
        out.extend(next.map(|_| p));
    }
    out
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

    /// The value of attribute `name` in each element of `tag` carrying
    /// `marker` (`None` when the element lacks the attribute).
    fn attrs(svg: &str, tag: &str, marker: &str, name: &str) -> Vec<Option<String>> {
        svg.split(&format!("<{tag}"))
            .skip(1)
            .map(|rest| &rest[..rest.find('>').unwrap()])
            .filter(|t| t.contains(marker))
            .map(|t| {
                let key = format!(" {name}=\"");
                let at = t.find(&key)? + key.len();
                Some(t[at..].split('"').next()?.to_string())
            })
            .collect()
    }

    fn sixteen(same_points: bool) -> LineChart {
        let mut chart = LineChart::new("cdf", "CDF")
            .x_axis(Axis::log10("writes per frame"))
            .y_axis(Axis::linear("fraction").range(0.0, 1.0))
            .steps();
        for i in 0..16 {
            let k = if same_points { 1.0 } else { 1.0 + i as f64 };
            chart = chart.series(Series::new(
                format!("allocator {i}"),
                vec![(k, 0.3), (3.0 * k, 0.8), (40.0 * k, 1.0)],
            ));
        }
        chart
    }

    #[test]
    fn sixteen_series_each_have_their_own_colour_dash_and_legend_sample() {
        let c = sixteen(false).render().unwrap();
        assert_fits(&c);
        let svg = c.svg();
        let strokes = attrs(svg, "polyline", "class=\"mark\"", "stroke");
        let dashes = attrs(svg, "polyline", "class=\"mark\"", "stroke-dasharray");
        assert_eq!(strokes.len(), 16);
        let colours: std::collections::HashSet<_> = strokes.iter().collect();
        assert_eq!(colours.len(), 16, "a colour each: {strokes:?}");
        let looks: std::collections::HashSet<_> = strokes.iter().zip(&dashes).collect();
        assert_eq!(looks.len(), 16, "a (colour, dash) each");
        // Neighbours differ in dash too, so similar hues are told apart.
        for i in 1..16 {
            assert_ne!(
                dashes[i],
                dashes[i - 1],
                "series {i} and {} dash alike",
                i - 1
            );
        }
        // The legend shows each series' dash and marker.
        for i in 0..16 {
            assert!(svg.contains(&format!(">allocator {i}<")));
        }
        let legend_lines = attrs(svg, "line", "stroke-width=\"2\"", "stroke-dasharray");
        assert_eq!(
            legend_lines.iter().filter(|d| d.is_some()).count(),
            dashes.iter().filter(|d| d.is_some()).count()
        );
        // Beyond the palette, (colour, dash) still differs up to 48 series.
        let looks: std::collections::HashSet<_> = (0..48)
            .map(|i| (super::super::colour(i), dash(i)))
            .collect();
        assert_eq!(looks.len(), 48);
    }

    #[test]
    fn series_on_one_path_all_stay_visible() {
        // Sixteen identical CDFs: every series draws markers of its own
        // colour, no two at the same place, and each line is thinner than
        // the one drawn before it (the earlier one's edges show).
        let c = sixteen(true).render().unwrap();
        assert_fits(&c);
        let svg = c.svg();
        let widths: Vec<f64> = attrs(svg, "polyline", "class=\"mark\"", "stroke-width")
            .into_iter()
            .map(|w| w.unwrap().parse().unwrap())
            .collect();
        assert!(widths.windows(2).all(|w| w[1] < w[0]), "{widths:?}");
        let mut spots = std::collections::HashSet::new();
        for (i, &col) in super::super::PALETTE.iter().enumerate() {
            let mut mine = 0;
            for tag in ["circle", "rect", "polygon"] {
                let fill = format!("fill=\"{col}\" stroke=\"#fff\"");
                for (x, y) in attrs(svg, tag, &fill, "cx")
                    .into_iter()
                    .zip(attrs(svg, tag, &fill, "cy"))
                    .chain(
                        attrs(svg, tag, &fill, "x")
                            .into_iter()
                            .zip(attrs(svg, tag, &fill, "y")),
                    )
                    .chain(
                        attrs(svg, tag, &fill, "points")
                            .into_iter()
                            .map(|p| (p, Some(String::new()))),
                    )
                {
                    if let (Some(x), Some(y)) = (x, y) {
                        mine += 1;
                        assert!(spots.insert((x, y)), "series {i}: a marker on another");
                    }
                }
            }
            // One in the legend, the rest on the plot.
            assert!(mine >= 2, "series {i} has no marker on its line");
        }
    }

    #[test]
    fn markers_are_spaced_along_the_path_and_staggered() {
        let at = |pts: &[(f64, f64)], i, n| -> Vec<(f64, f64)> {
            let r = |v: f64| (v * 1e6).round() / 1e6;
            staggered(pts, i, n)
                .into_iter()
                .map(|(x, y)| (r(x), r(y)))
                .collect()
        };
        let path = [(0.0, 0.0), (200.0, 0.0), (200.0, 100.0)];
        assert_eq!(at(&path, 0, 2), [(27.5, 0.0), (137.5, 0.0), (200.0, 47.5)]);
        assert_eq!(at(&path, 1, 2), [(82.5, 0.0), (192.5, 0.0)]);
        // Too short for the spacing: one marker; one point: on it.
        assert_eq!(at(&[(0.0, 0.0), (10.0, 0.0)], 1, 2), [(7.5, 0.0)]);
        assert_eq!(at(&[(5.0, 6.0)], 0, 3), [(5.0, 6.0)]);
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
