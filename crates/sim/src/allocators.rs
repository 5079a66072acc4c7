//! Every allocator configuration nvmos studies, by name: the one place
//! benchmarks, replay and the report build them from.

use lock_api::RawMutex;
use nvmos_frames::{
    Buddy, ConfigError, FrameAllocator, IBuddy, M3Policy, PcpPolicy, PerCpu, Pfn, Zone, M3,
};

/// An allocator configuration, named as seed 000's Table 2 names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum AllocatorKind {
    /// (a) the standard buddy system.
    Buddy,
    /// (b) lazy buddy, batch 1.
    Lbs1,
    /// (c) lazy buddy, batch 31.
    Lbs31,
    /// Linux 6.x's default pcp lists (batch 63).
    LinuxPcp,
    /// (d) iBuddy.
    IBuddy,
    /// (e) lazy iBuddy, list of 1.
    Lis1,
    /// (f) lazy iBuddy, lists of 31.
    Lis31,
    /// Lazy iBuddy with staged lists of 31 that keep iBuddy's reuse order
    /// (issue 12's fair lazy policy, `PcpPolicy::LIS_31_FAIR`).
    Lis31Fair,
    /// Seed 002's M³: frames at random over the banks of the seed's Xeon
    /// (`xeon-3ch`: 32 rank x bank colours, a bank every three frames).
    M3,
    /// M³ with those banks partitioned among the CPUs.
    M3Part,
}

impl AllocatorKind {
    /// Every configuration, in Table 2's order with Linux's default after
    /// the lazy buddies.
    pub const ALL: [AllocatorKind; 10] = [
        AllocatorKind::Buddy,
        AllocatorKind::Lbs1,
        AllocatorKind::Lbs31,
        AllocatorKind::LinuxPcp,
        AllocatorKind::IBuddy,
        AllocatorKind::Lis1,
        AllocatorKind::Lis31,
        AllocatorKind::Lis31Fair,
        AllocatorKind::M3,
        AllocatorKind::M3Part,
    ];

    /// Short name, as `--alloc` takes it.
    pub const fn name(self) -> &'static str {
        match self {
            AllocatorKind::Buddy => "buddy",
            AllocatorKind::Lbs1 => "LBS-1",
            AllocatorKind::Lbs31 => "LBS-31",
            AllocatorKind::LinuxPcp => "linux-pcp",
            AllocatorKind::IBuddy => "iBuddy",
            AllocatorKind::Lis1 => "LiS-1",
            AllocatorKind::Lis31 => "LiS-31",
            AllocatorKind::Lis31Fair => "LiS-31-fair",
            AllocatorKind::M3 => "M3",
            AllocatorKind::M3Part => "M3-part",
        }
    }

    /// What it is, in a few words.
    pub const fn describe(self) -> &'static str {
        match self {
            AllocatorKind::Buddy => "(a) standard buddy system",
            AllocatorKind::Lbs1 => "(b) lazy buddy, batch 1",
            AllocatorKind::Lbs31 => "(c) lazy buddy, batch 31",
            AllocatorKind::LinuxPcp => "Linux 6.x default pcp, batch 63",
            AllocatorKind::IBuddy => "(d) iBuddy",
            AllocatorKind::Lis1 => "(e) lazy iBuddy, list of 1",
            AllocatorKind::Lis31 => "(f) lazy iBuddy, lists of 31",
            AllocatorKind::Lis31Fair => "lazy iBuddy, staged lists of 31 (fair)",
            AllocatorKind::M3 => "M3, random over the Xeon's banks (seed 002)",
            AllocatorKind::M3Part => "M3, banks partitioned among CPUs (seed 002)",
        }
    }

    /// The configuration named `name`, ignoring case.
    pub fn parse(name: &str) -> Option<AllocatorKind> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name().eq_ignore_ascii_case(name))
    }

    /// Build it over `zones` for `cpus` CPUs, all memory free, with lock
    /// type `L`, and hand it to `job` by value, so the job is compiled for
    /// the allocator's concrete type (no virtual calls in timed loops).
    pub fn with<L, J>(self, zones: &[Zone], cpus: u32, job: J) -> Result<J::Output, ConfigError>
    where
        L: RawMutex + Send + Sync + 'static,
        J: AllocatorJob,
    {
        let buddy = || Buddy::<L>::new(zones, cpus);
        let ibuddy = || IBuddy::<L>::new(zones, cpus);
        Ok(match self {
            AllocatorKind::Buddy => job.run(buddy()?),
            AllocatorKind::Lbs1 => job.run(PerCpu::<_, L>::new(buddy()?, PcpPolicy::LBS_1)?),
            AllocatorKind::Lbs31 => job.run(PerCpu::<_, L>::new(buddy()?, PcpPolicy::LBS_31)?),
            AllocatorKind::LinuxPcp => {
                job.run(PerCpu::<_, L>::new(buddy()?, PcpPolicy::LINUX_DEFAULT)?)
            }
            AllocatorKind::IBuddy => job.run(ibuddy()?),
            AllocatorKind::Lis1 => job.run(PerCpu::<_, L>::new(ibuddy()?, PcpPolicy::LIS_1)?),
            AllocatorKind::Lis31 => job.run(PerCpu::<_, L>::new(ibuddy()?, PcpPolicy::LIS_31)?),
            AllocatorKind::Lis31Fair => {
                job.run(PerCpu::<_, L>::new(ibuddy()?, PcpPolicy::LIS_31_FAIR)?)
            }
            AllocatorKind::M3 | AllocatorKind::M3Part => {
                // The default colouring: the seed's own machine.
                let xeon = nvmos_memsys::Machine::preset("xeon-3ch")
                    .expect("the built-in xeon-3ch preset loads");
                let colouring = crate::banks::BankColouring::new(&xeon);
                let policy = if self == AllocatorKind::M3 {
                    M3Policy::RANDOM
                } else {
                    M3Policy::PARTITIONED
                };
                job.run(M3::<L>::new(
                    zones,
                    cpus,
                    colouring.colours(),
                    |pfn: Pfn| colouring.colour(pfn),
                    policy,
                )?)
            }
        })
    }

    /// Build it over `zones` for `cpus` CPUs, all memory free, with lock
    /// type `L`, behind a trait object.
    pub fn build<L: RawMutex + Send + Sync + 'static>(
        self,
        zones: &[Zone],
        cpus: u32,
    ) -> Result<Box<dyn FrameAllocator>, ConfigError> {
        struct Boxed;
        impl AllocatorJob for Boxed {
            type Output = Box<dyn FrameAllocator>;
            fn run<A: FrameAllocator + 'static>(self, alloc: A) -> Box<dyn FrameAllocator> {
                Box::new(alloc)
            }
        }
        self.with::<L, _>(zones, cpus, Boxed)
    }
}

/// Work to do with a freshly built allocator of any concrete type.
pub trait AllocatorJob {
    /// What the work returns.
    type Output;
    /// Do it.
    fn run<A: FrameAllocator + 'static>(self, alloc: A) -> Self::Output;
}

impl std::fmt::Display for AllocatorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_frames::{Request, Zone};

    #[test]
    fn names_round_trip_and_every_kind_builds() {
        for kind in AllocatorKind::ALL {
            assert_eq!(
                AllocatorKind::parse(&kind.name().to_uppercase()),
                Some(kind)
            );
            let a = kind
                .build::<parking_lot::RawMutex>(&[Zone::new(0, 4096)], 2)
                .unwrap();
            let pfn = a.alloc(Request::single(1)).unwrap();
            a.free(pfn, Request::single(0)).unwrap();
            a.validate().unwrap();
        }
        assert_eq!(AllocatorKind::parse("nosuch"), None);
    }
}
