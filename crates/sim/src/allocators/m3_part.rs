//! M³ with the banks partitioned among the CPUs by colour.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, M3Policy, M3 as M3Alloc};

use super::{m3::build_m3, Caps, Info, Recipe, Setup};

/// M³, each CPU on its own banks (seed 002's partitions).
pub struct M3Part;

impl Recipe for M3Part {
    const INFO: Info = Info {
        name: "M3-part",
        aliases: &["m3-partitioned", "m3p"],
        describe: "Seed 002's M3 with the banks partitioned among the CPUs by colour.",
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
        build_m3(setup, M3Policy::PARTITIONED)
    }
}
