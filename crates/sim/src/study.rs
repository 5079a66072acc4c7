//! What every study shares: its shape, its progress reports, its scale
//! (`--quick`) and its checks against the seeds and nvmos's own targets.
//!
//! Every study of this crate has one shape: an `Options` (serde, with a
//! `Default` and a [`Scale`]d constructor), a
//! `run(&Options, &mut dyn FnMut(Progress)) -> Result<Study, Error>` and a
//! result that is plain, serialisable data carrying its own [`Check`]s;
//! the CLI and Python parse options, draw `Progress` as a bar and render
//! the result. The [`Study`] trait names that shape so a front end can
//! treat every study alike.

use serde::{Deserialize, Serialize};

/// How far a study is: `done` of `total` steps, and what runs now.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    /// Steps finished.
    pub done: u64,
    /// Steps in all.
    pub total: u64,
    /// What the next step does ("compile: LiS-31").
    pub step: String,
}

/// How big a study runs. The one `--quick` mechanism: a front end asks a
/// study for its options at a scale (`Study::options(Scale::Quick)`) and
/// then overrides only what the user named explicitly, so no front end
/// compares a value against a default to guess whether it was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// The study as the seeds ran it (minutes).
    #[default]
    Full,
    /// A small version with the same code paths (seconds): for tests,
    /// smoke runs and CI. Its figures are not the seeds' figures.
    Quick,
}

/// Which way a target bounds its figure.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The figure must be at most this.
    AtMost(f64),
    /// The figure must be at least this.
    AtLeast(f64),
    /// The figure must lie within `tolerance` of `value`.
    Within {
        /// The figure aimed at.
        value: f64,
        /// How far off it may be.
        tolerance: f64,
    },
}

impl Bound {
    /// Whether `measured` meets this bound (a NaN never does).
    pub fn met_by(&self, measured: f64) -> bool {
        match *self {
            Bound::AtMost(b) => measured <= b,
            Bound::AtLeast(b) => measured >= b,
            Bound::Within { value, tolerance } => (measured - value).abs() <= tolerance,
        }
    }
}

/// One figure of a study held against a target (nvmos's own) or a seed's
/// published figure: data in the study's result, rendered by the front
/// ends, never a string assembled there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What is checked, in words ("Adaptive-Buddy with migration within 5
    /// points of the optimum (light, seed-004)").
    pub what: String,
    /// Where the target or figure comes from ("nvmos target", "seed 004 Fig. 9").
    pub source: String,
    /// The measured figure.
    pub measured: f64,
    /// Its unit ("points", "x", "%", "ns").
    pub unit: String,
    /// The bound it must meet.
    pub bound: Bound,
    /// The seed's own figure for the same quantity, where it published one.
    pub seed_figure: Option<f64>,
    /// Whether `measured` meets `bound`.
    pub met: bool,
    /// What else a reader needs to judge it (the raw figures it was
    /// derived from, the assumption it rests on).
    pub detail: String,
}

impl Check {
    /// A check of `measured` against `bound`; `met` is computed here so
    /// no front end decides it.
    pub fn new(
        what: impl Into<String>,
        source: impl Into<String>,
        measured: f64,
        unit: impl Into<String>,
        bound: Bound,
    ) -> Self {
        Check {
            what: what.into(),
            source: source.into(),
            measured,
            unit: unit.into(),
            met: bound.met_by(measured),
            bound,
            seed_figure: None,
            detail: String::new(),
        }
    }

    /// The seed's published figure for the same quantity.
    pub fn seed(mut self, figure: f64) -> Self {
        self.seed_figure = Some(figure);
        self
    }

    /// Words a reader needs beside the figure.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }
}

/// The shape every study has, named so front ends (the CLI, Python,
/// sweeps) can treat studies alike.
///
/// Contract: `run` never prints; it reports through `progress` (a caller
/// that wants to stop makes the study return its `Cancelled`-like error
/// on the next report where the study supports it), and returns plain
/// data. The same options give the same result wherever the study is
/// deterministic; where it times things, the result says so.
pub trait Study {
    /// What the study is asked to do.
    type Options: Default + Serialize;
    /// What it found.
    type Output: Serialize;
    /// Why it could not run.
    type Error: std::error::Error + Send + Sync + 'static;
    /// The study's name as the CLI spells it ("power", "banks").
    const NAME: &'static str;
    /// The options at a scale: `Scale::Full` is `Default::default()`.
    fn options(scale: Scale) -> Self::Options;
    /// Run it.
    fn run(
        options: &Self::Options,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Self::Output, Self::Error>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_decide_met() {
        assert!(Bound::AtMost(5.0).met_by(5.0));
        assert!(!Bound::AtMost(5.0).met_by(5.1));
        assert!(Bound::AtLeast(2.0).met_by(2.5));
        assert!(!Bound::AtLeast(2.0).met_by(f64::NAN));
        let w = Bound::Within {
            value: 10.0,
            tolerance: 1.0,
        };
        assert!(w.met_by(9.0) && w.met_by(11.0) && !w.met_by(11.5));
        let c = Check::new("x", "nvmos target", 12.0, "x", Bound::AtMost(10.0)).seed(9.5);
        assert!(!c.met);
        assert_eq!(c.seed_figure, Some(9.5));
    }
}
