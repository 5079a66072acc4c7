//! State maps: rows × columns of categorical states, one colour each; seed
//! 004's Fig. 9 (banks coloured black where kernel pages pin them). A row
//! is an allocator (banks along x) or a moment (banks × time).

use super::svg::{fit, text_width, Anchor, Legend, Sample, Svg, SMALL};
use super::ticks::{Axis, Scale};
use super::{Chart, Head, WIDTH};
use crate::Error;

/// One state: its name (legend, tooltips) and colour.
#[derive(Clone, Debug)]
pub struct State {
    pub name: String,
    pub colour: String,
}

impl State {
    pub fn new(name: impl Into<String>, colour: impl Into<String>) -> Self {
        State {
            name: name.into(),
            colour: colour.into(),
        }
    }
}

/// A state map. Cells hold indices into the states.
///
/// ```
/// use nvmos_report::chart::{Axis, State, StateMap};
/// let chart = StateMap::new("banks", "Banks at the end of the run")
///     .x_axis(Axis::linear("bank"))
///     .states(vec![
///         State::new("down", "#ffffff"),
///         State::new("movable pages only", "#999999"),
///         State::new("pinned by kernel pages", "#000000"),
///     ])
///     .row("Buddy", vec![2, 1, 2, 0])
///     .row("Adaptive-Buddy", vec![2, 0, 0, 0])
///     .render()
///     .unwrap();
/// assert_eq!(chart.marks(), 8);
/// ```
#[derive(Clone, Debug)]
pub struct StateMap {
    head: Head,
    x: Axis,
    states: Vec<State>,
    rows: Vec<(String, Vec<u8>)>,
}

impl StateMap {
    pub fn new(kind: impl Into<String>, title: impl Into<String>) -> Self {
        StateMap {
            head: Head::new(kind, title),
            x: Axis::linear("column"),
            states: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Add a `data-` attribute to the `<svg>`.
    pub fn attr(mut self, name: &str, value: &str) -> Self {
        self.head.attr(name, value);
        self
    }

    /// The x axis (columns numbered from 0 unless given a range).
    pub fn x_axis(mut self, axis: Axis) -> Self {
        self.x = axis;
        self
    }

    pub fn states(mut self, states: Vec<State>) -> Self {
        self.states = states;
        self
    }

    pub fn row(mut self, label: impl Into<String>, cells: Vec<u8>) -> Self {
        self.rows.push((label.into(), cells));
        self
    }

    /// The SVG. Errors: no states or rows, rows of different or zero
    /// length, a cell naming a state that does not exist.
    pub fn render(&self) -> Result<Chart, Error> {
        let kind = &self.head.kind;
        let bad = |reason: String| Error::Chart {
            chart: kind.clone(),
            reason,
        };
        if self.states.is_empty() {
            return Err(bad("no states".into()));
        }
        let Some(cols) = self.rows.first().map(|r| r.1.len()) else {
            return Err(bad("no rows to draw".into()));
        };
        if cols == 0 {
            return Err(bad(format!("row \"{}\" has no cells", self.rows[0].0)));
        }
        if self.x.scale != Scale::Linear {
            return Err(bad("a state map's x axis is linear".into()));
        }
        for (label, cells) in &self.rows {
            if cells.len() != cols {
                return Err(bad(format!(
                    "row \"{label}\" has {} cells, the first row {cols}",
                    cells.len()
                )));
            }
            if let Some((j, s)) = cells
                .iter()
                .enumerate()
                .find(|(_, s)| usize::from(**s) >= self.states.len())
            {
                return Err(bad(format!(
                    "row \"{label}\" cell {j}: state {s}, but only {} states are named",
                    self.states.len()
                )));
            }
        }
        // Columns fill the plot, so the axis spans exactly their range.
        let axis = match self.x.range {
            Some(_) => self.x.clone(),
            None => self.x.clone().range(0.0, cols as f64),
        };
        let x = axis.resolve(kind, 0.0, cols as f64)?;
        let mut svg = Svg::new();
        let top = svg.title(&self.head.title) + 8.0;
        let widest = self
            .rows
            .iter()
            .map(|r| text_width(&r.0, SMALL))
            .fold(0.0, f64::max);
        let label_w = widest.min(WIDTH * 0.3);
        let left = 10.0 + label_w + 8.0;
        let right = WIDTH - 20.0;
        let row_h = 18.0;
        let cell_w = (right - left) / cols as f64;
        // Cell borders only where cells are wide enough to show them.
        let stroke = if cell_w >= 4.0 {
            " stroke=\"#bbb\" stroke-width=\"0.5\""
        } else {
            ""
        };
        for (i, (label, cells)) in self.rows.iter().enumerate() {
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
            for (j, &s) in cells.iter().enumerate() {
                let state = &self.states[usize::from(s)];
                let tip = format!("{label}, {} {j}: {}", self.x.label, state.name);
                svg.rect(
                    left + cell_w * j as f64,
                    y + 1.0,
                    cell_w + 0.05,
                    row_h - 2.0,
                    &state.colour,
                    Some(&tip),
                    stroke,
                );
            }
        }
        let bottom = top + row_h * self.rows.len() as f64;
        svg.rect(
            left,
            top,
            right - left,
            bottom - top,
            "none",
            None,
            " stroke=\"#888\" stroke-width=\"0.5\"",
        );
        let below = svg.x_axis(&x, &self.x.label, left, right, bottom, None);
        let legend: Vec<Legend> = self
            .states
            .iter()
            .map(|s| Legend {
                label: s.name.clone(),
                colour: s.colour.clone(),
                sample: Sample::Swatch { outline: true },
            })
            .collect();
        let end = svg.legend(&legend, left, below, WIDTH - left - 10.0);
        Ok(svg.finish(&self.head, end + 4.0))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::assert_fits;
    use super::*;

    fn states() -> Vec<State> {
        vec![
            State::new("down", "#ffffff"),
            State::new("movable pages only", "#999999"),
            State::new("pinned by kernel pages", "#000000"),
        ]
    }

    #[test]
    fn bank_map_has_a_legend_of_states() {
        let c = StateMap::new("banks", "Banks at the end of the run (seed 004 Fig. 9)")
            .x_axis(Axis::linear("bank"))
            .states(states())
            .row("Buddy", (0..256).map(|b| (b % 3) as u8).collect())
            .row(
                "Adaptive-Buddy +migration",
                (0..256).map(|b| u8::from(b < 20) * 2).collect(),
            )
            .render()
            .unwrap();
        assert_fits(&c);
        assert_eq!(c.marks(), 512);
        for name in ["down", "movable pages only", "pinned by kernel pages"] {
            assert!(
                c.svg().contains(&format!(">{name}<")),
                "legend lacks {name}"
            );
        }
        assert!(c
            .svg()
            .contains("<title>Buddy, bank 2: pinned by kernel pages</title>"));
        assert!(c.svg().contains(">250<"), "x ticks at round bank numbers");
        assert!(!c.svg().contains(">300<"), "the axis ends at the last bank");
    }

    #[test]
    fn unknown_states_are_refused() {
        let e = StateMap::new("b", "t")
            .states(states())
            .row("r", vec![0, 3])
            .render()
            .unwrap_err();
        assert!(e.to_string().contains("cell 1: state 3"), "{e}");
    }
}
