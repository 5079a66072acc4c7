//! `nvmos study swap` (seed 003).

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct SwapArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_args: SwapArgs) -> Result<()> {
    anyhow::bail!("not yet")
}
