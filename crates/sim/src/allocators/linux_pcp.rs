//! Linux 6.x's default: per-CPU lists (batch 63) over the buddy system.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, Buddy, PcpPolicy, PerCpu};

use super::{Caps, Info, Recipe, Setup};

/// Linux 6.x's default: per-CPU lists (batch 63) over the buddy system.
pub struct LinuxPcp;

impl Recipe for LinuxPcp {
    const INFO: Info = Info {
        name: "linux-pcp",
        aliases: &["pcp", "lazy-buddy", "linux"],
        describe: "Linux 6.x's default: per-CPU lists (batch 63) over the buddy system.",
        caps: Caps {
            per_cpu: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = PerCpu<Buddy<L>, L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        PerCpu::new(Buddy::new(setup.zones, setup.cpus)?, PcpPolicy::LINUX_DEFAULT)
    }
}
