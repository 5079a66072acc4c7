//! Seed 004's Adaptive-Buddy: kernel and user pages on separate banks, fewest banks in use; no migration.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, BankBuddy, BankPolicy};

use super::{Caps, Info, Recipe, Setup};

/// Seed 004's Adaptive-Buddy: kernel and user pages on separate banks, fewest banks in use; no migration.
pub struct Adaptive;

impl Recipe for Adaptive {
    const INFO: Info = Info {
        name: "Adaptive-Buddy",
        aliases: &["adaptive", "adaptive-no-migration"],
        describe: "Seed 004's Adaptive-Buddy: kernel and user pages on separate banks, fewest banks in use; no migration.",
        caps: Caps {
            banks: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = BankBuddy<L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        BankBuddy::new(&setup.bank_zones(), setup.cpus, setup.bank_frames, BankPolicy::Adaptive)
    }
}
