//! (e) lazy iBuddy: per-CPU lists of 1 frame over iBuddy.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, IBuddy, PcpPolicy, PerCpu};

use super::{Caps, Info, Recipe, Setup};

/// (e) lazy iBuddy: per-CPU lists of 1 frame over iBuddy.
pub struct Lis1;

impl Recipe for Lis1 {
    const INFO: Info = Info {
        name: "LiS-1",
        aliases: &["lazy-ibuddy-1", "e"],
        describe: "(e) lazy iBuddy: per-CPU lists of 1 frame over iBuddy.",
        caps: Caps {
            per_cpu: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = PerCpu<IBuddy<L>, L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        PerCpu::new(setup.ibuddy()?, PcpPolicy::LIS_1)
    }
}
