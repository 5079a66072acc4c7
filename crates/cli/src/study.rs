//! `nvmos study …`: the seeds' studies, one subcommand each, each in its
//! own module.

use anyhow::Result;
use clap::Subcommand;

/// The studies.
#[derive(Subcommand, Debug)]
pub enum Study {
    /// Seed 004 (Adaptive-Buddy): memory offline (banks powered down)
    /// against the optimum, energy, migration, pinned banks, allocation
    /// latency; for Buddy, lazy buddy, the bank-buddy allocators and
    /// Adaptive-Buddy, with and without migration.
    Power(crate::study_power::PowerArgs),
}

/// Run a study.
pub fn run(study: Study) -> Result<()> {
    match study {
        Study::Power(args) => crate::study_power::run(args),
    }
}
