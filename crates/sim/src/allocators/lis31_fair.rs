//! LiS-31-fair: lazy iBuddy whose per-CPU lists of 31 are staged (the
//! frames helper's fair lazy-layer policy, `PcpPolicy::LIS_31_FAIR`), so
//! the lazy layer no longer recycles the same frames.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, IBuddy, PcpPolicy, PerCpu};

use super::{Caps, Info, Recipe, Setup};

/// LiS-31-fair: lazy iBuddy with staged per-CPU lists of 31 frames.
pub struct Lis31Fair;

impl Recipe for Lis31Fair {
    const INFO: Info = Info {
        name: "LiS-31-fair",
        aliases: &["lazy-ibuddy-fair"],
        describe: "lazy iBuddy, staged lists of 31 (fair)",
        caps: Caps {
            per_cpu: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = PerCpu<IBuddy<L>, L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        PerCpu::new(IBuddy::new(setup.zones, setup.cpus)?, PcpPolicy::LIS_31_FAIR)
    }
}
