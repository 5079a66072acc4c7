//! Seed 004's Array-based Bank-Buddy: first fit over the banks in address order.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, BankBuddy, BankPolicy};

use super::{Caps, Info, Recipe, Setup};

/// Seed 004's Array-based Bank-Buddy: first fit over the banks in address order.
pub struct ArrayBank;

impl Recipe for ArrayBank {
    const INFO: Info = Info {
        name: "Array Bank-Buddy",
        aliases: &["array-bank", "array-based-bank-buddy"],
        describe: "Seed 004's Array-based Bank-Buddy: first fit over the banks in address order.",
        caps: Caps {
            banks: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = BankBuddy<L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        BankBuddy::new(&setup.bank_zones(), setup.cpus, setup.bank_frames, BankPolicy::Array)
    }
}
