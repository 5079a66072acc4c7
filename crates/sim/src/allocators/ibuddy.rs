//! (d) iBuddy: one buddy space per CPU, wear-levelling reuse (seed 000).

use lock_api::RawMutex;
use nvmos_frames::ConfigError;

use super::{Caps, Info, Recipe, Setup};

/// (d) iBuddy: one buddy space per CPU, wear-levelling reuse (seed 000).
pub struct IBuddy;

impl Recipe for IBuddy {
    const INFO: Info = Info {
        name: "iBuddy",
        aliases: &["d"],
        describe: "(d) iBuddy: one buddy space per CPU, wear-levelling reuse (seed 000).",
        caps: Caps {
            
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = nvmos_frames::IBuddy<L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        setup.ibuddy()
    }
}
