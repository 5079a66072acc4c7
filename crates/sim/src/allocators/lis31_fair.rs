//! Lazy iBuddy with staged lists of 31 that keep iBuddy's reuse order.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, IBuddy, PcpPolicy, PerCpu};

use super::{Caps, Info, Recipe, Setup};

/// The fair lazy policy (`PcpPolicy::LIS_31_FAIR`).
pub struct Lis31Fair;

impl Recipe for Lis31Fair {
    const INFO: Info = Info {
        name: "LiS-31-fair",
        aliases: &["fair-lazy-ibuddy", "lazy-ibuddy-fair"],
        describe: "lazy iBuddy, staged lists of 31 that keep iBuddy's reuse order (fair)",
        caps: Caps {
            per_cpu: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = PerCpu<IBuddy<L>, L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        PerCpu::new(setup.ibuddy()?, PcpPolicy::LIS_31_FAIR)
    }
}
