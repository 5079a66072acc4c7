//! `nvmos study …`: one subcommand per seed study.

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum Study {
    /// Seed 003: SCM as a fast paging device — swap request patterns,
    /// swap-in/out time on SCM and NAND, congestion control, the per-fault
    /// breakdown and device lifetime.
    Swap(crate::study_swap::SwapArgs),
}

pub fn run(study: Study) -> Result<()> {
    match study {
        Study::Swap(args) => crate::study_swap::run(args),
    }
}
