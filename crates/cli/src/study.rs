//! `nvmos study …`: one subcommand per study. Each study keeps its own
//! arguments and rendering in its own file; add a variant here and an arm
//! in [`run`].

use anyhow::Result;
use clap::Subcommand;

use crate::study_banks;

/// The studies.
#[derive(Subcommand, Debug)]
pub enum Study {
    /// Seed 002: frame placement (buddy, random, M3) and row-buffer
    /// conflicts of 1, 2 and 4 cores running STREAM on the timing model,
    /// and the seed's analysing program recovering the bank interleaving
    /// from latencies.
    Banks(study_banks::BanksArgs),
}

/// Run a study.
pub fn run(study: Study) -> Result<()> {
    match study {
        Study::Banks(args) => study_banks::run(args),
    }
}
