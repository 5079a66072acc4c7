//! Shared by the integration tests: every allocator configuration under
//! test, and a reference model of which frames are handed out.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};

use nvmos_frames::{
    AllocError, BankBuddy, BankPolicy, Buddy, FrameAllocator, FreeOrder, IBuddy, M3Policy,
    MigrateType, Order, PcpPolicy, PerCpu, Pfn, Request, Zone, M3,
};

pub type Lock = parking_lot::RawMutex;

/// Every allocator configuration the project ships.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Config {
    Buddy,
    Lbs1,
    Lbs31,
    LinuxDefault,
    IBuddy,
    /// iBuddy applying frees buffered on different CPUs one CPU after
    /// another (`FreeOrder::PerCpu`).
    IBuddyPerCpu,
    Lis1,
    Lis31,
    /// LiS-31 over iBuddy with `FreeOrder::PerCpu`.
    Lis31PerCpu,
    /// The fair lazy iBuddy (staged lists of 31).
    Lis31Fair,
    /// M³, random placement (8 colours of 3 frames, like a bank every
    /// three frames on seed 002's Xeon).
    M3Random,
    /// M³ with the colours partitioned among the CPUs.
    M3Partitioned,
    /// Seed 004's bank-aware allocators: banks must divide the zones, so
    /// they run on `test_zones(config)`.
    ArrayBank,
    ListBank,
    Adaptive,
}

/// The test colouring of M³: 8 colours, a new one every three frames.
pub fn m3_colour(pfn: Pfn) -> u32 {
    (pfn.0 / 3 % 8) as u32
}

impl Config {
    pub const ALL: [Config; 12] = [
        Config::Buddy,
        Config::Lbs1,
        Config::Lbs31,
        Config::LinuxDefault,
        Config::IBuddy,
        Config::IBuddyPerCpu,
        Config::Lis1,
        Config::Lis31,
        Config::Lis31PerCpu,
        Config::Lis31Fair,
        Config::M3Random,
        Config::M3Partitioned,
    ];

    /// The bank-aware configurations (not in `ALL`: their zones must be
    /// whole banks).
    pub const BANKED: [Config; 3] = [Config::ArrayBank, Config::ListBank, Config::Adaptive];

    /// `ALL` and then `BANKED`.
    pub fn every() -> impl Iterator<Item = Config> {
        Config::ALL.into_iter().chain(Config::BANKED)
    }

    /// The bank policy of a bank-aware configuration.
    pub fn bank_policy(self) -> Option<BankPolicy> {
        match self {
            Config::ArrayBank => Some(BankPolicy::Array),
            Config::ListBank => Some(BankPolicy::List),
            Config::Adaptive => Some(BankPolicy::Adaptive),
            _ => None,
        }
    }

    /// The fixed zones the configuration is tested on.
    pub fn test_zones(self) -> Vec<Zone> {
        if self.bank_policy().is_some() {
            banked_zones()
        } else {
            awkward_zones()
        }
    }

    pub fn build(self, zones: &[Zone], cpus: u32) -> Box<dyn FrameAllocator> {
        self.build_with::<Lock>(zones, cpus)
    }

    /// The same allocator with another lock.
    pub fn build_with<Lock: lock_api::RawMutex + Send + Sync + 'static>(
        self,
        zones: &[Zone],
        cpus: u32,
    ) -> Box<dyn FrameAllocator> {
        let buddy = || Buddy::<Lock>::new(zones, cpus).unwrap();
        let ibuddy = || IBuddy::<Lock>::new(zones, cpus).unwrap();
        let per_cpu_order = || ibuddy().with_free_order(FreeOrder::PerCpu);
        match self {
            Config::Buddy => Box::new(buddy()),
            Config::Lbs1 => Box::new(PerCpu::<_, Lock>::new(buddy(), PcpPolicy::LBS_1).unwrap()),
            Config::Lbs31 => Box::new(PerCpu::<_, Lock>::new(buddy(), PcpPolicy::LBS_31).unwrap()),
            Config::LinuxDefault => {
                Box::new(PerCpu::<_, Lock>::new(buddy(), PcpPolicy::LINUX_DEFAULT).unwrap())
            }
            Config::IBuddy => Box::new(ibuddy()),
            Config::IBuddyPerCpu => Box::new(per_cpu_order()),
            Config::Lis31PerCpu => {
                Box::new(PerCpu::<_, Lock>::new(per_cpu_order(), PcpPolicy::LIS_31).unwrap())
            }
            Config::Lis1 => Box::new(PerCpu::<_, Lock>::new(ibuddy(), PcpPolicy::LIS_1).unwrap()),
            Config::Lis31 => Box::new(PerCpu::<_, Lock>::new(ibuddy(), PcpPolicy::LIS_31).unwrap()),
            Config::Lis31Fair => {
                Box::new(PerCpu::<_, Lock>::new(ibuddy(), PcpPolicy::LIS_31_FAIR).unwrap())
            }
            Config::M3Random => {
                Box::new(M3::<Lock>::new(zones, cpus, 8, m3_colour, M3Policy::RANDOM).unwrap())
            }
            Config::M3Partitioned => {
                Box::new(M3::<Lock>::new(zones, cpus, 8, m3_colour, M3Policy::PARTITIONED).unwrap())
            }
            Config::ArrayBank | Config::ListBank | Config::Adaptive => Box::new(
                BankBuddy::<Lock>::new(
                    zones,
                    cpus,
                    test_bank_frames(zones),
                    self.bank_policy().unwrap(),
                )
                .unwrap(),
            ),
        }
    }
}

pub fn order(k: u8) -> Order {
    Order::new(k).unwrap()
}

pub fn req(k: u8, cpu: u32) -> Request {
    Request::new(order(k), cpu, MigrateType::Movable)
}

/// What the allocator should have handed out: blocks by first frame, and
/// every frame they cover.
#[derive(Default)]
pub struct Model {
    pub zones: Vec<Zone>,
    pub live: BTreeMap<u64, Order>,
    pub occupied: HashSet<u64>,
}

impl Model {
    pub fn new(zones: &[Zone]) -> Model {
        Model {
            zones: zones.to_vec(),
            ..Model::default()
        }
    }

    /// Record a block the allocator returned, checking it is well placed
    /// and overlaps nothing handed out.
    pub fn record_alloc(&mut self, pfn: Pfn, order: Order) -> Result<(), String> {
        if !pfn.is_aligned(order) {
            return Err(format!("block {pfn} of order {order} is misaligned"));
        }
        if !self.zones.iter().any(|z| z.contains_block(pfn, order)) {
            return Err(format!("block {pfn} of order {order} is outside the zones"));
        }
        for f in pfn.0..pfn.0 + order.frames() {
            if !self.occupied.insert(f) {
                return Err(format!(
                    "frame {f:#x} handed out twice (block {pfn}, order {order})"
                ));
            }
        }
        self.live.insert(pfn.0, order);
        Ok(())
    }

    pub fn record_free(&mut self, pfn: u64) -> Order {
        let order = self.live.remove(&pfn).expect("freeing a live block");
        for f in pfn..pfn + order.frames() {
            self.occupied.remove(&f);
        }
        order
    }

    /// Whether some aligned block of `order` inside a zone is wholly free:
    /// exactly when an allocator that drains its lazy lists must succeed.
    pub fn has_free_block(&self, order: Order) -> bool {
        self.zones.iter().any(|z| {
            let n = order.frames();
            let mut start = z.start.0.next_multiple_of(n);
            while start + n <= z.end.0 {
                if (start..start + n).all(|f| !self.occupied.contains(&f)) {
                    return true;
                }
                start += n;
            }
            false
        })
    }

    /// Check the allocator's counters agree with the model.
    pub fn check_counts(&self, a: &dyn FrameAllocator) -> Result<(), String> {
        let stats = a.stats();
        if stats.allocated_frames() != self.occupied.len() as u64 {
            return Err(format!(
                "allocator says {} frames allocated, model {}",
                stats.allocated_frames(),
                self.occupied.len()
            ));
        }
        if stats.free_frames_in_blocks() != stats.free_frames {
            return Err(format!(
                "free blocks by order add up to {} frames but {} are free",
                stats.free_frames_in_blocks(),
                stats.free_frames
            ));
        }
        Ok(())
    }
}

/// Allocate, check against the model, or check that out-of-memory was due.
pub fn model_alloc(
    a: &dyn FrameAllocator,
    model: &mut Model,
    request: Request,
) -> Result<Option<Pfn>, String> {
    match a.alloc(request) {
        Ok(pfn) => model.record_alloc(pfn, request.order).map(|()| Some(pfn)),
        Err(AllocError::OutOfMemory { order }) if order == request.order => {
            if model.has_free_block(request.order) {
                Err(format!(
                    "out of memory for order {} although an aligned free block exists",
                    request.order
                ))
            } else {
                Ok(None)
            }
        }
        Err(e) => Err(format!("alloc {request:?} failed: {e}")),
    }
}

/// Zones used by the fixed-configuration tests: unaligned edges and a hole.
pub fn awkward_zones() -> Vec<Zone> {
    vec![Zone::new(0x103, 0xa00), Zone::new(0xc00, 0x1c01)]
}

/// Like `awkward_zones`, but whole banks of `test_bank_frames` (256)
/// frames: an unaligned start, a hole, an aligned end.
pub fn banked_zones() -> Vec<Zone> {
    vec![Zone::new(0x103, 0xa03), Zone::new(0xc00, 0x1c00)]
}

/// The bank size the fixed tests use: the largest divisor of every zone's
/// size up to 256 frames.
pub fn test_bank_frames(zones: &[Zone]) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = zones.iter().map(Zone::frames).fold(0, gcd);
    (1..=g.min(256)).rev().find(|d| g % d == 0).unwrap_or(1)
}
