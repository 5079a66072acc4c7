//! Seed 004's Adaptive-Buddy with its migration passes (movable pages packed onto few banks).

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, BankBuddy, BankPolicy};

use super::{Caps, Info, Recipe, Setup};

/// Seed 004's Adaptive-Buddy with its migration passes (movable pages packed onto few banks).
pub struct AdaptiveMigrate;

impl Recipe for AdaptiveMigrate {
    const INFO: Info = Info {
        name: "Adaptive-Buddy+migration",
        aliases: &["adaptive-migrate", "adaptive-migration", "adaptive+migrate", "adaptive-buddy-with-migration"],
        describe: "Seed 004's Adaptive-Buddy with its migration passes (movable pages packed onto few banks).",
        caps: Caps {
            banks: true, migrates: true,
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
