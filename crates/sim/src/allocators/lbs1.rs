//! (b) lazy buddy: per-CPU lists of 1 frame over the buddy system.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, Buddy, PcpPolicy, PerCpu};

use super::{Caps, Info, Recipe, Setup};

/// (b) lazy buddy: per-CPU lists of 1 frame over the buddy system.
pub struct Lbs1;

impl Recipe for Lbs1 {
    const INFO: Info = Info {
        name: "LBS-1",
        aliases: &["lazy-buddy-1", "b"],
        describe: "(b) lazy buddy: per-CPU lists of 1 frame over the buddy system.",
        caps: Caps {
            per_cpu: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = PerCpu<Buddy<L>, L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        PerCpu::new(Buddy::new(setup.zones, setup.cpus)?, PcpPolicy::LBS_1)
    }
}
