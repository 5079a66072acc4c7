//! (f) lazy iBuddy: per-CPU lists of 31 frames over iBuddy (seed 000's design).

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, IBuddy, PcpPolicy, PerCpu};

use super::{Caps, Info, Recipe, Setup};

/// (f) lazy iBuddy: per-CPU lists of 31 frames over iBuddy (seed 000's design).
pub struct Lis31;

impl Recipe for Lis31 {
    const INFO: Info = Info {
        name: "LiS-31",
        aliases: &["lazy-ibuddy", "lazy-ibuddy-31", "f"],
        describe: "(f) lazy iBuddy: per-CPU lists of 31 frames over iBuddy (seed 000's design).",
        caps: Caps {
            per_cpu: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = PerCpu<IBuddy<L>, L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        PerCpu::new(setup.ibuddy()?, PcpPolicy::LIS_31)
    }
}
