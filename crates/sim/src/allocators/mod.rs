//! The allocator registry: every allocator configuration nvmos studies,
//! listed once, by name, with what it can do.
//!
//! Each allocator is one file in this folder holding a [`Recipe`]: its
//! [`Info`] (name, aliases, [`Caps`]) and how to build it from a
//! [`Setup`]. The `registry!` list at the bottom of this file turns the
//! files into [`AllocatorKind`], which benchmarks, replay, the studies and
//! the CLI use; they ask [`Caps`] (per-CPU? migrates? bank-aware? single
//! frames only?) instead of keeping their own lists. Adding an allocator is
//! one new file and one line in that list.
//!
//! ```
//! use nvmos_sim::{AllocatorKind, Setup};
//! use nvmos_frames::{Request, Zone};
//!
//! let kind = AllocatorKind::parse("lazy-ibuddy").unwrap();
//! assert_eq!(kind, AllocatorKind::Lis31);
//! assert!(kind.caps().per_cpu && !kind.caps().migrates);
//! let zones = [Zone::new(0, 1 << 16)];
//! let alloc = kind.build::<parking_lot::RawMutex>(&Setup::new(&zones, 2))?;
//! let pfn = alloc.alloc(Request::single(0))?;
//! alloc.free(pfn, Request::single(0))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use lock_api::RawMutex;
use nvmos_frames::{
    BankBuddy, Buddy, ConfigError, FrameAllocator, FreeOrder, IBuddy, Move, PerCpu, Zone, M3,
};
use nvmos_memsys::Machine;

/// Frames per bank for the bank-aware allocators unless a study says
/// otherwise: Linux's 128 MiB memory section in 4 KiB frames.
pub const DEFAULT_BANK_FRAMES: u64 = 32 * 1024;

/// What an allocator can do, for studies to query.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Caps {
    /// Has per-CPU lists in front of a shared allocator (a lazy layer).
    pub per_cpu: bool,
    /// Knows memory banks and can migrate movable pages between them
    /// ([`StudyAllocator::migrate`] answers).
    pub banks: bool,
    /// Migration passes are part of the configuration: replays run one
    /// every [`crate::replay::Replay::migrate_every_ns`].
    pub migrates: bool,
    /// Places frames by bank colour (M³).
    pub colours: bool,
    /// Built for single frames: larger blocks work but cost O(2^order).
    pub single_frame: bool,
}

impl Caps {
    /// None of them.
    pub const NONE: Caps = Caps {
        per_cpu: false,
        banks: false,
        migrates: false,
        colours: false,
        single_frame: false,
    };
}

/// What the registry says about one allocator.
#[derive(Copy, Clone, Debug, serde::Serialize)]
pub struct Info {
    /// Its name, as tables show it and `--alloc` takes it.
    pub name: &'static str,
    /// Other names people type (matched ignoring case, `-`, `_` and spaces).
    pub aliases: &'static [&'static str],
    /// What it is, in a few words.
    pub describe: &'static str,
    /// What it can do.
    pub caps: Caps,
}

/// What building an allocator needs beyond its type.
#[derive(Copy, Clone, Debug)]
pub struct Setup<'a> {
    /// The memory it manages, all free.
    pub zones: &'a [Zone],
    /// CPUs it serves.
    pub cpus: u32,
    /// Frames per bank for the bank-aware allocators. Their zones are cut
    /// to whole banks (a bank is aligned to its size, as a memory section
    /// is); the frames cut off are not managed and not counted.
    pub bank_frames: u64,
    /// The machine whose bank colours M³ uses; `None` for seed 002's Xeon
    /// (the `xeon-3ch` preset).
    pub machine: Option<&'a Machine>,
    /// Random seed for the allocators that draw (M³); `None` for theirs.
    pub seed: Option<u64>,
    /// The order iBuddy applies frees buffered on different CPUs in (the
    /// iBuddy-based allocators): `Accepted`, the default, is what a replay
    /// needs (the same frames as immediate frees, whatever CPUs the frees
    /// name); `PerCpu` spares concurrent callers a shared write per free.
    pub free_order: FreeOrder,
}

impl<'a> Setup<'a> {
    /// `zones` for `cpus` CPUs, everything else by default.
    pub fn new(zones: &'a [Zone], cpus: u32) -> Setup<'a> {
        Setup {
            zones,
            cpus,
            bank_frames: DEFAULT_BANK_FRAMES,
            machine: None,
            seed: None,
            free_order: FreeOrder::Accepted,
        }
    }

    /// iBuddy over the zones for the CPUs, with `free_order`.
    pub fn ibuddy<L: RawMutex>(&self) -> Result<IBuddy<L>, ConfigError> {
        Ok(IBuddy::new(self.zones, self.cpus)?.with_free_order(self.free_order))
    }

    /// This setup with `bank_frames` halved (down to one frame) until
    /// whole banks cover at least half of the memory: on a machine
    /// smaller than a few default banks (a test, a text trace with a
    /// small `--memory`) the bank-aware allocators still get one.
    pub fn fit_banks(mut self) -> Setup<'a> {
        let total: u64 = self.zones.iter().map(|z| z.frames()).sum();
        let covered = |s: &Setup| s.bank_zones().iter().map(|z| z.frames()).sum::<u64>();
        while self.bank_frames > 1 && 2 * covered(&self) < total {
            self.bank_frames /= 2;
        }
        self
    }

    /// The zones cut to whole banks of `bank_frames` (empty ones dropped).
    pub fn bank_zones(&self) -> Vec<Zone> {
        let b = self.bank_frames.max(1);
        self.zones
            .iter()
            .filter_map(|z| {
                let start = z.start.0.div_ceil(b) * b;
                let end = z.end.0 / b * b;
                (start < end).then(|| Zone::new(start, end))
            })
            .collect()
    }
}

/// An allocator as the studies drive it: the frame allocator, and one
/// migration pass where it has them.
pub trait StudyAllocator: FrameAllocator {
    /// One migration pass: the blocks it moved; `None` when it cannot
    /// migrate.
    fn migrate(&self) -> Option<Vec<Move>> {
        None
    }
}

impl<L: RawMutex + Send + Sync> StudyAllocator for Buddy<L> {}
impl<L: RawMutex + Send + Sync> StudyAllocator for IBuddy<L> {}
impl<L: RawMutex + Send + Sync> StudyAllocator for M3<L> {}
impl<A: FrameAllocator, L: RawMutex + Send + Sync> StudyAllocator for PerCpu<A, L> {}
impl<L: RawMutex + Send + Sync> StudyAllocator for BankBuddy<L> {
    fn migrate(&self) -> Option<Vec<Move>> {
        Some(BankBuddy::migrate(self).moves)
    }
}

/// One allocator's entry: one file of this folder holds one.
pub trait Recipe {
    /// Name, aliases, capabilities.
    const INFO: Info;
    /// The allocator's concrete type with lock `L`.
    type Alloc<L: RawMutex + Send + Sync + 'static>: StudyAllocator + 'static;
    /// Build it, all memory free.
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError>;
}

/// Work to do with a freshly built allocator of any concrete type.
pub trait AllocatorJob {
    /// What the work returns.
    type Output;
    /// Do it.
    fn run<A: StudyAllocator + 'static>(self, alloc: A) -> Self::Output;
}

/// `name` reduced for matching: lower case, only letters, digits and `+`
/// (`³` read as `3`).
fn fold(name: &str) -> String {
    name.chars()
        .map(|c| if c == '³' { '3' } else { c })
        .filter(|c| c.is_ascii_alphanumeric() || *c == '+')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident => $module:ident,)*) => {
        $(mod $module;)*

        /// An allocator configuration of the registry.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum AllocatorKind {
            $($(#[$doc])* $variant,)*
        }

        impl AllocatorKind {
            /// Every allocator, in the registry's order.
            pub const ALL: [AllocatorKind; [$(stringify!($variant)),*].len()] =
                [$(AllocatorKind::$variant),*];

            /// What the registry says about it.
            pub const fn info(self) -> &'static Info {
                match self {
                    $(AllocatorKind::$variant => &<$module::$variant as Recipe>::INFO,)*
                }
            }

            /// Build it with lock type `L` and hand it to `job` by value,
            /// so the job is compiled for the allocator's concrete type
            /// (no virtual calls in timed loops).
            pub fn with<L, J>(self, setup: &Setup, job: J) -> Result<J::Output, ConfigError>
            where
                L: RawMutex + Send + Sync + 'static,
                J: AllocatorJob,
            {
                Ok(match self {
                    $(AllocatorKind::$variant =>
                        job.run(<$module::$variant as Recipe>::build::<L>(setup)?),)*
                })
            }
        }
    };
}

impl AllocatorKind {
    /// Its name.
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// What it is, in a few words.
    pub const fn describe(self) -> &'static str {
        self.info().describe
    }

    /// What it can do.
    pub const fn caps(self) -> Caps {
        self.info().caps
    }

    /// The allocator named `name` (or one of its aliases), ignoring case,
    /// `-`, `_` and spaces.
    pub fn parse(name: &str) -> Option<AllocatorKind> {
        let want = fold(name);
        Self::ALL.into_iter().find(|kind| {
            let info = kind.info();
            fold(info.name) == want || info.aliases.iter().any(|a| fold(a) == want)
        })
    }

    /// Every name, for error messages.
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|k| k.name()).collect()
    }

    /// Build it with lock type `L` behind a trait object.
    pub fn build<L: RawMutex + Send + Sync + 'static>(
        self,
        setup: &Setup,
    ) -> Result<Box<dyn StudyAllocator>, ConfigError> {
        struct Boxed;
        impl AllocatorJob for Boxed {
            type Output = Box<dyn StudyAllocator>;
            fn run<A: StudyAllocator + 'static>(self, alloc: A) -> Box<dyn StudyAllocator> {
                Box::new(alloc)
            }
        }
        self.with::<L, _>(setup, Boxed)
    }
}

impl std::fmt::Display for AllocatorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AllocatorKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        AllocatorKind::parse(s).ok_or_else(|| {
            format!(
                "unknown allocator {s:?}; known: {}",
                AllocatorKind::names().join(", ")
            )
        })
    }
}

impl serde::Serialize for AllocatorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for AllocatorKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

// The registry: one line per allocator, in the order tables show them
// (seed 000's Table 2, Linux's default after the lazy buddies, then seed
// 002's and seed 004's allocators).
registry! {
    /// (a) the standard buddy system.
    Buddy => buddy,
    /// (b) lazy buddy, batch 1.
    Lbs1 => lbs1,
    /// (c) lazy buddy, batch 31.
    Lbs31 => lbs31,
    /// Linux 6.x's default pcp lists (batch 63).
    LinuxPcp => linux_pcp,
    /// (d) iBuddy.
    IBuddy => ibuddy,
    /// (e) lazy iBuddy, list of 1.
    Lis1 => lis1,
    /// (f) lazy iBuddy, lists of 31.
    Lis31 => lis31,
    /// Lazy iBuddy, staged lists of 31 in iBuddy's reuse order (fair).
    Lis31Fair => lis31_fair,
    /// Seed 002's M³, random over the banks.
    M3 => m3,
    /// M³ with the banks partitioned among the CPUs.
    M3Part => m3_part,
    /// Seed 004's Array-based Bank-Buddy.
    ArrayBank => array_bank,
    /// Seed 004's List-based Bank-Buddy.
    ListBank => list_bank,
    /// Seed 004's Adaptive-Buddy.
    Adaptive => adaptive,
    /// Adaptive-Buddy with its migration passes.
    AdaptiveMigrate => adaptive_migrate,
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_frames::{Request, Zone};

    #[test]
    fn names_round_trip_and_every_kind_builds() {
        assert_eq!(AllocatorKind::ALL.len(), 14);
        for kind in AllocatorKind::ALL {
            assert_eq!(
                AllocatorKind::parse(&kind.name().to_uppercase()),
                Some(kind)
            );
            for alias in kind.info().aliases {
                assert_eq!(AllocatorKind::parse(alias), Some(kind), "{alias}");
            }
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(serde_json::from_str::<AllocatorKind>(&json).unwrap(), kind);
            let zones = [Zone::new(0, 4 * DEFAULT_BANK_FRAMES)];
            let a = kind
                .build::<parking_lot::RawMutex>(&Setup::new(&zones, 2))
                .unwrap();
            let pfn = a.alloc(Request::single(1)).unwrap();
            a.free(pfn, Request::single(0)).unwrap();
            a.validate().unwrap();
            assert_eq!(a.migrate().is_some(), kind.caps().banks, "{kind}");
        }
        assert_eq!(AllocatorKind::parse("nosuch"), None);
        for (alias, kind) in [
            ("lazy-ibuddy", AllocatorKind::Lis31),
            ("lis31", AllocatorKind::Lis31),
            ("LiS 1", AllocatorKind::Lis1),
            ("adaptive", AllocatorKind::Adaptive),
            ("lazy-buddy", AllocatorKind::LinuxPcp),
            ("M³", AllocatorKind::M3),
            ("array-bank", AllocatorKind::ArrayBank),
        ] {
            assert_eq!(AllocatorKind::parse(alias), Some(kind), "{alias}");
        }
        assert!("bogus"
            .parse::<AllocatorKind>()
            .unwrap_err()
            .contains("LiS-31"));
    }

    #[test]
    fn every_name_and_alias_is_unique() {
        let mut seen = std::collections::HashSet::new();
        for kind in AllocatorKind::ALL {
            for name in std::iter::once(kind.name()).chain(kind.info().aliases.iter().copied()) {
                assert!(seen.insert(fold(name)), "{name} names two allocators");
            }
        }
    }

    #[test]
    fn bank_zones_are_cut_to_whole_aligned_banks() {
        let zones = [
            Zone::new(1, 0x9f),
            Zone::new(0x1000, 0xc0000),
            Zone::new(0x100000, 0x640000),
        ];
        let setup = Setup::new(&zones, 1);
        assert_eq!(
            setup.bank_zones(),
            vec![Zone::new(0x8000, 0xc0000), Zone::new(0x100000, 0x640000)]
        );
        assert_eq!(setup.fit_banks().bank_frames, DEFAULT_BANK_FRAMES);
        let small = [Zone::new(0x100, 0x900)];
        let fitted = Setup::new(&small, 1).fit_banks();
        assert_eq!(fitted.bank_frames, 1024);
        assert_eq!(fitted.bank_zones(), vec![Zone::new(0x400, 0x800)]);
    }
}
