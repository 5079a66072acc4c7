//! Charts: one implementation for every page. Each chart is an inline
//! `<svg class="chart">` whose `viewBox` is [`WIDTH`] wide and whose CSS
//! width is `100%` up to that, so it never overflows its page; every
//! element is placed inside the viewBox (the builder tracks the extent of
//! what it draws, and the tests check it). Data marks carry `class="mark"`
//! (the page's check script counts them) and a `<title>` with the series
//! and the value as [`format_value`](crate::format_value) prints it.
//!
//! Kinds: [`LineChart`] (several series, optional steps, markers and
//! reference lines), [`BarChart`] (grouped horizontal bars), [`HeatMap`]
//! (rows × columns of values with a colour bar) and [`StateMap`] (rows ×
//! columns of categorical states, seed 004's Fig. 9 bank map).
//!
//! Why our own module and not plotters: plotters' SVG backend draws text
//! without font files (it estimates text size), but it cannot put a class,
//! a `data-` attribute or a `<title>` on a data mark, which the pages' check
//! script and the number-for-number browser test rely on, and a colour bar
//! or a categorical map would be hand-placed rectangles either way.

mod bar;
mod heat;
mod line;
mod state;
mod svg;
mod ticks;

pub use bar::BarChart;
pub use heat::{ColourScale, HeatMap};
pub use line::{LineChart, Series};
pub use state::{State, StateMap};
pub use ticks::{linear_ticks, log10_ticks, log2_ticks, Axis, Scale, Ticks};

use crate::escape;

/// Width of every chart's viewBox, in user units (CSS pixels at 100 %).
pub const WIDTH: f64 = 760.0;

/// Series colours, in order; the first is near-black for the reference
/// series (on the wear pages, "Linux (as recorded)"). Sixteen, so that a
/// chart of every allocator gives each its own hue: the ten most distinct
/// first, then six that sit near an earlier hue (grey near black, navy
/// near blue…), placed where [`DASHES`] gives them a different dash from
/// that neighbour.
pub const PALETTE: [&str; 16] = [
    "#222222", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22", "#8c8c8c", "#003f7f", "#e7298a", "#1b9e77", "#66a61e", "#5a2d82",
];

/// Dash patterns of line series, in turn: solid, dashed, dotted. The
/// second channel beside colour: three is coprime to the sixteen colours,
/// so no two of the first 48 series share (colour, dash), and neighbours
/// in the legend always differ in both.
pub const DASHES: [Option<&str>; 3] = [None, Some("7 3"), Some("2 2.5")];

/// Marker shapes of line series, in turn (the third channel, which also
/// survives a grey-scale print: (dash, shape) differ for the first 12).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Square,
    Triangle,
    Diamond,
}

/// The shapes, in the order series take them.
pub const SHAPES: [Shape; 4] = [
    Shape::Circle,
    Shape::Square,
    Shape::Triangle,
    Shape::Diamond,
];

/// A rendered chart: the SVG text, its viewBox, and the extent of what was
/// drawn (for checking that nothing sticks out).
#[derive(Clone, Debug)]
pub struct Chart {
    svg: String,
    width: f64,
    height: f64,
    extent: Extent,
    marks: usize,
}

/// The box holding everything a chart drew, text included (text at an
/// estimated 0.6 em per character, which is wider than the average glyph
/// of the sans-serif fonts browsers pick).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Extent {
    pub min_x: f64,
    pub min_y: f64,
    pub max_x: f64,
    pub max_y: f64,
}

impl Chart {
    /// The `<svg>` element, ready to put in a page.
    pub fn svg(&self) -> &str {
        &self.svg
    }

    /// The viewBox: (width, height).
    pub fn view_box(&self) -> (f64, f64) {
        (self.width, self.height)
    }

    /// What was drawn, in viewBox units.
    pub fn extent(&self) -> Extent {
        self.extent
    }

    /// How many data marks (bars, line points, cells) were drawn.
    pub fn marks(&self) -> usize {
        self.marks
    }
}

impl std::fmt::Display for Chart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.svg)
    }
}

/// What every chart has besides its data: the `data-chart` kind (tests and
/// scripts find charts by it), a title, and extra `data-` attributes naming
/// what the chart shows (`data-trace`, `data-workload`…).
#[derive(Clone, Debug)]
pub(crate) struct Head {
    pub kind: String,
    pub title: String,
    pub attrs: Vec<(String, String)>,
}

impl Head {
    pub fn new(kind: impl Into<String>, title: impl Into<String>) -> Self {
        Head {
            kind: kind.into(),
            title: title.into(),
            attrs: Vec::new(),
        }
    }

    pub fn attr(&mut self, name: &str, value: &str) {
        self.attrs.push((name.to_string(), value.to_string()));
    }

    /// The opening tag, for a chart of the given height.
    fn open(&self, height: f64, marks: usize) -> String {
        let mut s = format!("<svg class=\"chart\" data-chart=\"{}\"", escape(&self.kind));
        for (name, value) in &self.attrs {
            s.push_str(&format!(" {}=\"{}\"", attr_name(name), escape(value)));
        }
        s.push_str(&format!(
            " data-mark-count=\"{marks}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height:.0}\" width=\"{WIDTH}\" height=\"{height:.0}\" role=\"img\" font-family=\"system-ui, sans-serif\"><title>{}</title>",
            escape(&self.title)
        ));
        s
    }
}

/// An attribute name as given, or `data-invalid` for one that could break
/// the tag: names come from code, not data, but a typo must not produce
/// broken markup.
fn attr_name(name: &str) -> &str {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        name
    } else {
        "data-invalid"
    }
}

/// The colour of series `i`, skipping none.
pub(crate) fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// The dash pattern of line series `i` (`None`: solid).
pub(crate) fn dash(i: usize) -> Option<&'static str> {
    DASHES[i % DASHES.len()]
}

/// The marker shape of line series `i`.
pub(crate) fn shape(i: usize) -> Shape {
    SHAPES[i % SHAPES.len()]
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    /// Everything drawn lies inside the viewBox, and the SVG is well
    /// formed enough: one root, balanced tags of the kinds we write.
    pub fn assert_fits(chart: &Chart) {
        let (w, h) = chart.view_box();
        let e = chart.extent();
        assert!(w <= WIDTH + 1e-9, "viewBox wider than the page: {w}");
        assert!(
            e.min_x >= -1e-6 && e.min_y >= -1e-6 && e.max_x <= w + 1e-6 && e.max_y <= h + 1e-6,
            "drawn {e:?} outside the viewBox {w}x{h}"
        );
        let svg = chart.svg();
        assert!(svg.starts_with("<svg class=\"chart\""));
        assert!(svg.ends_with("</svg>"));
        for tag in ["svg", "text", "title", "g"] {
            let open =
                svg.matches(&format!("<{tag} ")).count() + svg.matches(&format!("<{tag}>")).count();
            let close = svg.matches(&format!("</{tag}>")).count();
            assert_eq!(open, close, "<{tag}> not balanced in {svg}");
        }
        assert_eq!(
            svg.matches("class=\"mark\"").count(),
            chart.marks(),
            "marks counted"
        );
    }
}
