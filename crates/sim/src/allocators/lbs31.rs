//! (c) lazy buddy: per-CPU lists of 31 frames over the buddy system.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, Buddy, PcpPolicy, PerCpu};

use super::{Caps, Info, Recipe, Setup};

/// (c) lazy buddy: per-CPU lists of 31 frames over the buddy system.
pub struct Lbs31;

impl Recipe for Lbs31 {
    const INFO: Info = Info {
        name: "LBS-31",
        aliases: &["lazy-buddy-31", "c"],
        describe: "(c) lazy buddy: per-CPU lists of 31 frames over the buddy system.",
        caps: Caps {
            per_cpu: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = PerCpu<Buddy<L>, L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        PerCpu::new(Buddy::new(setup.zones, setup.cpus)?, PcpPolicy::LBS_31)
    }
}
