//! Seed 004's List-based Bank-Buddy: first fit over the banks in use order.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, BankBuddy, BankPolicy};

use super::{Caps, Info, Recipe, Setup};

/// Seed 004's List-based Bank-Buddy: first fit over the banks in use order.
pub struct ListBank;

impl Recipe for ListBank {
    const INFO: Info = Info {
        name: "List Bank-Buddy",
        aliases: &["list-bank", "list-based-bank-buddy"],
        describe: "Seed 004's List-based Bank-Buddy: first fit over the banks in use order.",
        caps: Caps {
            banks: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = BankBuddy<L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        BankBuddy::new(&setup.bank_zones(), setup.cpus, setup.bank_frames, BankPolicy::List)
    }
}
