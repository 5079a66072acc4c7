//! The SVG writer the charts share: elements with their extent tracked,
//! text measured (estimated) so it can be fitted, wrapped or truncated,
//! and the parts every chart has (title, axes, legend).

use std::fmt::Write as _;

use super::ticks::Resolved;
use super::{Chart, Extent, Head, Shape, WIDTH};
use crate::escape;

/// Estimated width of `s` at font size `size`: 0.6 em per character, a
/// little wider than the average glyph of common sans-serif fonts, so
/// estimated boxes hold the real text.
pub fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.6
}

/// `s` cut to fit `max_w` at `size`, ending in "…" when cut.
pub fn fit(s: &str, size: f64, max_w: f64) -> String {
    if text_width(s, size) <= max_w {
        return s.to_string();
    }
    let keep = ((max_w / (size * 0.6)).floor() as usize).saturating_sub(1);
    let mut out: String = s.chars().take(keep).collect();
    out.push('…');
    out
}

/// `s` broken at spaces into lines no wider than `max_w` (a word longer
/// than a line is cut with [`fit`]).
pub fn wrap(s: &str, size: f64, max_w: f64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in s.split_whitespace() {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if text_width(&candidate, size) <= max_w || line.is_empty() {
            line = candidate;
        } else {
            lines.push(std::mem::take(&mut line));
            line = word.to_string();
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines.into_iter().map(|l| fit(&l, size, max_w)).collect()
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn name(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// Tick labels, chart text and legend text sizes.
pub const SMALL: f64 = 11.0;
pub const LABEL: f64 = 12.0;
pub const TITLE: f64 = 14.0;

pub struct Svg {
    out: String,
    extent: Extent,
    marks: usize,
}

impl Svg {
    pub fn new() -> Self {
        Svg {
            out: String::new(),
            extent: Extent {
                min_x: f64::INFINITY,
                min_y: f64::INFINITY,
                max_x: f64::NEG_INFINITY,
                max_y: f64::NEG_INFINITY,
            },
            marks: 0,
        }
    }

    fn grow(&mut self, x0: f64, y0: f64, x1: f64, y1: f64) {
        let e = &mut self.extent;
        e.min_x = e.min_x.min(x0.min(x1));
        e.min_y = e.min_y.min(y0.min(y1));
        e.max_x = e.max_x.max(x0.max(x1));
        e.max_y = e.max_y.max(y0.max(y1));
    }

    /// A mark's opening attributes and closing part: `class="mark"` and a
    /// `<title>` tooltip when it carries data.
    fn mark(&mut self, tip: Option<&str>) -> (&'static str, String) {
        match tip {
            Some(t) => {
                self.marks += 1;
                (" class=\"mark\"", format!("<title>{}</title>", escape(t)))
            }
            None => ("", String::new()),
        }
    }

    /// A rectangle; a data mark when `tip` is given (`extra` is raw
    /// attribute text, already escaped by the caller).
    #[allow(clippy::too_many_arguments)]
    pub fn rect(
        &mut self,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        fill: &str,
        tip: Option<&str>,
        extra: &str,
    ) {
        self.grow(x, y, x + w, y + h);
        let (class, title) = self.mark(tip);
        if title.is_empty() {
            let _ = write!(
                self.out,
                "<rect{class} x=\"{x:.2}\" y=\"{y:.2}\" width=\"{w:.2}\" height=\"{h:.2}\" fill=\"{fill}\"{extra}/>"
            );
        } else {
            let _ = write!(
                self.out,
                "<rect{class} x=\"{x:.2}\" y=\"{y:.2}\" width=\"{w:.2}\" height=\"{h:.2}\" fill=\"{fill}\"{extra}>{title}</rect>"
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn line(
        &mut self,
        x1: f64,
        y1: f64,
        x2: f64,
        y2: f64,
        stroke: &str,
        width: f64,
        dash: Option<&str>,
    ) {
        self.grow(x1, y1, x2, y2);
        let dash = dash.map_or(String::new(), |d| format!(" stroke-dasharray=\"{d}\""));
        let _ = write!(
            self.out,
            "<line x1=\"{x1:.2}\" y1=\"{y1:.2}\" x2=\"{x2:.2}\" y2=\"{y2:.2}\" stroke=\"{stroke}\" stroke-width=\"{width}\"{dash}/>"
        );
    }

    /// A polyline; a data mark when `tip` is given.
    pub fn polyline(
        &mut self,
        points: &[(f64, f64)],
        stroke: &str,
        width: f64,
        dash: Option<&str>,
        tip: Option<&str>,
    ) {
        if points.is_empty() {
            return;
        }
        for &(x, y) in points {
            self.grow(x, y, x, y);
        }
        let (class, title) = self.mark(tip);
        let dash = dash.map_or(String::new(), |d| format!(" stroke-dasharray=\"{d}\""));
        let mut pts = String::new();
        for (x, y) in points {
            let _ = write!(pts, "{x:.2},{y:.2} ");
        }
        let _ = write!(
            self.out,
            "<polyline{class} fill=\"none\" stroke=\"{stroke}\" stroke-width=\"{width}\" stroke-linejoin=\"round\"{dash} points=\"{}\">{title}</polyline>",
            pts.trim_end()
        );
    }

    /// A marker of `shape` centred on (cx, cy), about `r` from centre to
    /// edge, with a thin white outline so that markers drawn over each
    /// other or over lines stay apart; a data mark when `tip` is given.
    pub fn marker(
        &mut self,
        shape: Shape,
        cx: f64,
        cy: f64,
        r: f64,
        fill: &str,
        tip: Option<&str>,
    ) {
        let r = match shape {
            Shape::Circle => r,
            // Squares and diamonds a little smaller, triangles a little
            // larger, so that each shape looks as big as the circle.
            Shape::Square => r * 0.9,
            Shape::Triangle => r * 1.2,
            Shape::Diamond => r * 1.15,
        };
        // The white outline (0.8 wide) reaches 0.4 beyond the shape.
        let o = r + 0.4;
        self.grow(cx - o, cy - o, cx + o, cy + o);
        let (class, title) = self.mark(tip);
        let paint = format!("fill=\"{fill}\" stroke=\"#fff\" stroke-width=\"0.8\"");
        let _ = match shape {
            Shape::Circle => write!(
                self.out,
                "<circle{class} cx=\"{cx:.2}\" cy=\"{cy:.2}\" r=\"{r:.2}\" {paint}>{title}</circle>"
            ),
            Shape::Square => write!(
                self.out,
                "<rect{class} x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" {paint}>{title}</rect>",
                cx - r,
                cy - r,
                2.0 * r,
                2.0 * r
            ),
            Shape::Triangle => write!(
                self.out,
                "<polygon{class} points=\"{:.2},{:.2} {:.2},{:.2} {:.2},{:.2}\" {paint}>{title}</polygon>",
                cx,
                cy - r,
                cx + r * 0.866,
                cy + r * 0.5,
                cx - r * 0.866,
                cy + r * 0.5
            ),
            Shape::Diamond => write!(
                self.out,
                "<polygon{class} points=\"{:.2},{:.2} {:.2},{:.2} {:.2},{:.2} {:.2},{:.2}\" {paint}>{title}</polygon>",
                cx,
                cy - r,
                cx + r,
                cy,
                cx,
                cy + r,
                cx - r,
                cy
            ),
        };
    }

    /// Text with its baseline at `y`; `tip` (full text of a cut label)
    /// becomes a `<title>`.
    #[allow(clippy::too_many_arguments)]
    pub fn text(
        &mut self,
        x: f64,
        y: f64,
        size: f64,
        anchor: Anchor,
        s: &str,
        fill: &str,
        bold: bool,
        tip: Option<&str>,
    ) {
        let w = text_width(s, size) * if bold { 1.1 } else { 1.0 };
        let x0 = match anchor {
            Anchor::Start => x,
            Anchor::Middle => x - w / 2.0,
            Anchor::End => x - w,
        };
        // Ascent about 0.8 em above the baseline, descent 0.25 em below.
        self.grow(x0, y - size * 0.8, x0 + w, y + size * 0.25);
        let weight = if bold { " font-weight=\"bold\"" } else { "" };
        let title = tip.map_or(String::new(), |t| format!("<title>{}</title>", escape(t)));
        let _ = write!(
            self.out,
            "<text x=\"{x:.2}\" y=\"{y:.2}\" font-size=\"{size}\" text-anchor=\"{}\" fill=\"{fill}\"{weight}>{}{title}</text>",
            anchor.name(),
            escape(s)
        );
    }

    /// Text turned a quarter left (a y-axis label), centred on (x, y).
    pub fn vertical_text(&mut self, x: f64, y: f64, size: f64, s: &str) {
        let w = text_width(s, size);
        self.grow(x - size * 0.8, y - w / 2.0, x + size * 0.25, y + w / 2.0);
        let _ = write!(
            self.out,
            "<text x=\"{x:.2}\" y=\"{y:.2}\" font-size=\"{size}\" text-anchor=\"middle\" fill=\"#333\" transform=\"rotate(-90 {x:.2} {y:.2})\">{}</text>",
            escape(s)
        );
    }

    /// The chart's title, wrapped to the width; returns the y below it.
    pub fn title(&mut self, title: &str) -> f64 {
        let mut y = 18.0;
        for line in wrap(title, TITLE, (WIDTH - 20.0) / 1.1) {
            self.text(10.0, y, TITLE, Anchor::Start, &line, "#222", true, None);
            y += TITLE + 4.0;
        }
        y
    }

    /// Close the chart at `height` (which must hold everything drawn).
    pub fn finish(self, head: &Head, height: f64) -> Chart {
        let mut svg = head.open(height, self.marks);
        svg.push_str(&self.out);
        svg.push_str("</svg>");
        let extent = if self.extent.min_x.is_finite() {
            self.extent
        } else {
            Extent {
                min_x: 0.0,
                min_y: 0.0,
                max_x: 0.0,
                max_y: 0.0,
            }
        };
        Chart {
            svg,
            width: WIDTH,
            height,
            extent,
            marks: self.marks,
        }
    }

    /// A horizontal value axis along `y` from `x0` to `x1`: ticks, their
    /// labels below, light grid lines up to `grid_top`, and the axis label.
    /// Returns the y below the label.
    #[allow(clippy::too_many_arguments)]
    pub fn x_axis(
        &mut self,
        axis: &Resolved,
        label: &str,
        x0: f64,
        x1: f64,
        y: f64,
        grid_top: Option<f64>,
    ) -> f64 {
        self.line(x0, y, x1, y, "#666", 1.0, None);
        let pos = |v: f64| x0 + (x1 - x0) * axis.frac(v);
        // Thin the labels when they would touch.
        let widest = axis
            .ticks
            .iter()
            .map(|(_, l)| text_width(l, SMALL))
            .fold(0.0, f64::max);
        let room = (x1 - x0) / axis.ticks.len().max(1) as f64;
        let every = ((widest + 8.0) / room.max(1.0)).ceil().max(1.0) as usize;
        for (i, (v, l)) in axis.ticks.iter().enumerate() {
            let x = pos(*v);
            if let Some(top) = grid_top {
                self.line(x, top, x, y, "#e4e4e4", 1.0, None);
            }
            self.line(x, y, x, y + 4.0, "#666", 1.0, None);
            if i % every == 0 {
                self.text(x, y + 15.0, SMALL, Anchor::Middle, l, "#333", false, None);
            }
        }
        let label = fit(label, LABEL, x1 - x0);
        self.text(
            (x0 + x1) / 2.0,
            y + 32.0,
            LABEL,
            Anchor::Middle,
            &label,
            "#333",
            false,
            None,
        );
        y + 38.0
    }

    /// A vertical value axis along `x` from `y0` (bottom) to `y1` (top):
    /// ticks, labels to the left, grid lines to `grid_right`.
    pub fn y_axis(&mut self, axis: &Resolved, x: f64, y0: f64, y1: f64, grid_right: Option<f64>) {
        self.line(x, y0, x, y1, "#666", 1.0, None);
        let pos = |v: f64| y0 + (y1 - y0) * axis.frac(v);
        let room = (y0 - y1) / axis.ticks.len().max(1) as f64;
        let every = ((SMALL + 4.0) / room.max(1.0)).ceil().max(1.0) as usize;
        for (i, (v, l)) in axis.ticks.iter().enumerate() {
            let y = pos(*v);
            if let Some(right) = grid_right {
                self.line(x, y, right, y, "#e4e4e4", 1.0, None);
            }
            self.line(x - 4.0, y, x, y, "#666", 1.0, None);
            if i % every == 0 {
                self.text(x - 6.0, y + 4.0, SMALL, Anchor::End, l, "#333", false, None);
            }
        }
    }

    /// The legend: entries in rows from (x, y) within `max_w`, each a
    /// sample (a line with its marker, or a swatch) and its label.
    /// Returns the y below the legend.
    pub fn legend(&mut self, entries: &[Legend], x: f64, y: f64, max_w: f64) -> f64 {
        if entries.is_empty() {
            return y;
        }
        let row_h = 18.0;
        let (mut cx, mut cy) = (x, y + 12.0);
        for e in entries {
            let label = fit(&e.label, SMALL, max_w - 30.0);
            let w = 24.0 + text_width(&label, SMALL) + 16.0;
            if cx > x && cx + w > x + max_w {
                cx = x;
                cy += row_h;
            }
            match &e.sample {
                Sample::Line { dash, marker } => {
                    self.line(
                        cx,
                        cy - 4.0,
                        cx + 20.0,
                        cy - 4.0,
                        &e.colour,
                        2.0,
                        dash.as_deref(),
                    );
                    if let Some(shape) = marker {
                        self.marker(*shape, cx + 10.0, cy - 4.0, 3.2, &e.colour, None);
                    }
                }
                Sample::Swatch { outline } => {
                    let extra = if *outline {
                        " stroke=\"#888\" stroke-width=\"0.5\""
                    } else {
                        ""
                    };
                    self.rect(cx + 4.0, cy - 9.0, 10.0, 10.0, &e.colour, None, extra);
                }
            }
            let tip = (label != e.label).then_some(e.label.as_str());
            self.text(
                cx + 24.0,
                cy,
                SMALL,
                Anchor::Start,
                &label,
                "#222",
                false,
                tip,
            );
            cx += w;
        }
        cy + 8.0
    }
}

/// One legend entry.
pub struct Legend {
    pub label: String,
    pub colour: String,
    pub sample: Sample,
}

pub enum Sample {
    /// A line (dashed if given), with the series' marker if it has one.
    Line {
        dash: Option<String>,
        marker: Option<Shape>,
    },
    /// A filled square; outlined when its colour is pale (white states).
    Swatch { outline: bool },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_or_wrapped_to_fit() {
        let s = "a very long allocator name that does not fit";
        let cut = fit(s, 11.0, 100.0);
        assert!(
            cut.ends_with('…') && text_width(&cut, 11.0) <= 100.0,
            "{cut}"
        );
        assert_eq!(fit("short", 11.0, 100.0), "short");
        let lines = wrap(s, 11.0, 100.0);
        assert!(lines.len() > 1);
        assert!(
            lines.iter().all(|l| text_width(l, 11.0) <= 100.0),
            "{lines:?}"
        );
        assert_eq!(wrap("", 11.0, 100.0), [""]);
    }
}
