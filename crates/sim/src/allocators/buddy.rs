//! (a) the standard buddy system.

use lock_api::RawMutex;
use nvmos_frames::ConfigError;

use super::{Caps, Info, Recipe, Setup};

/// (a) the standard buddy system.
pub struct Buddy;

impl Recipe for Buddy {
    const INFO: Info = Info {
        name: "buddy",
        aliases: &["buddy-system", "a"],
        describe: "(a) the standard buddy system.",
        caps: Caps {
            
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = nvmos_frames::Buddy<L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        nvmos_frames::Buddy::new(setup.zones, setup.cpus)
    }
}
