//! Seed 002's M³: every frame from a random bank colour.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, M3Policy, M3 as M3Alloc};

use super::{Caps, Info, Recipe, Setup};

/// Seed 002's M³: frames at random over all banks.
pub struct M3;

impl Recipe for M3 {
    const INFO: Info = Info {
        name: "M3",
        aliases: &["m3-random", "random"],
        describe: "Seed 002's M3: frames at random over the banks (by default the seed's Xeon: 32 rank x bank colours).",
        caps: Caps {
            colours: true,
            single_frame: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = M3Alloc<L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        build_m3(setup, M3Policy::RANDOM)
    }
}

/// Build M³ with `policy` over the colours of the setup's machine (seed
/// 002's Xeon by default), with the setup's seed if it gives one.
pub(super) fn build_m3<L: RawMutex + Send + Sync + 'static>(
    setup: &Setup,
    policy: M3Policy,
) -> Result<M3Alloc<L>, ConfigError> {
    let xeon;
    let machine = match setup.machine {
        Some(m) => m,
        None => {
            xeon = nvmos_memsys::Machine::preset("xeon-3ch")
                .expect("the built-in xeon-3ch preset loads");
            &xeon
        }
    };
    let colouring = crate::banks::BankColouring::new(machine);
    let policy = M3Policy {
        seed: setup.seed.unwrap_or(policy.seed),
        ..policy
    };
    M3Alloc::new(
        setup.zones,
        setup.cpus,
        colouring.colours(),
        |pfn| colouring.colour(pfn),
        policy,
    )
}
