//! `nvmos study …`: one subcommand per seed study. Each study keeps its own
//! arguments in its own file (its rendering is in `nvmos-pages`); add a
//! variant here and an arm in [`run`].

use anyhow::Result;
use clap::Subcommand;

use crate::{study_banks, study_power, study_swap};

/// The studies.
#[derive(Subcommand, Debug)]
pub enum Study {
    /// Seed 002: frame placement (buddy, random, M3) and row-buffer
    /// conflicts of 1, 2 and 4 cores running STREAM on the timing model,
    /// and the seed's analysing program recovering the bank interleaving
    /// from latencies.
    Banks(study_banks::BanksArgs),
    /// Seed 003: SCM as a fast paging device — swap request patterns,
    /// swap-in/out time on SCM and NAND, congestion control, the per-fault
    /// breakdown and device lifetime.
    Swap(study_swap::SwapArgs),
    /// Seed 004 (Adaptive-Buddy): memory offline (banks powered down)
    /// against the optimum, energy, migration, pinned banks, allocation
    /// latency; for Buddy, lazy buddy, the bank-buddy allocators and
    /// Adaptive-Buddy, with and without migration.
    Power(study_power::PowerArgs),
    /// Seed 000 beside the hardware: lifetime (% of ideal) of each
    /// allocator's placement with no wear levelling, Start-Gap, randomised
    /// Start-Gap (Qureshi, MICRO'09) and Security Refresh (Seong, ISCA'10)
    /// beneath it, and Start-Gap checked against its paper.
    Levelling(crate::levelling_cmd::LevellingArgs),
}

/// Run a study.
pub fn run(study: Study) -> Result<()> {
    match study {
        Study::Banks(args) => study_banks::run(args),
        Study::Swap(args) => study_swap::run(args),
        Study::Power(args) => study_power::run(args),
        Study::Levelling(args) => crate::levelling_cmd::run(args),
    }
}

use nvmos_sim::study::Scale;

/// The scale `--quick` asks for.
pub(crate) fn scale(quick: bool) -> Scale {
    if quick {
        Scale::Quick
    } else {
        Scale::Full
    }
}
