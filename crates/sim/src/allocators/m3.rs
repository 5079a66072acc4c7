//! Seed 002's M³: every frame from a random bank colour.

use lock_api::RawMutex;
use nvmos_frames::{ConfigError, M3Policy, Pfn, Zone, M3 as M3Alloc};

use super::{Caps, Info, Recipe, Setup};

/// Seed 002's M³: frames at random over all banks.
pub struct M3;

impl Recipe for M3 {
    const INFO: Info = Info {
        name: "M3",
        aliases: &["m3-random", "random"],
        describe: "Seed 002's M3: frames at random over the banks (by default the seed's Xeon: 32 rank x bank colours).",
        caps: Caps {
            colours: true,
            single_frame: true,
            ..Caps::NONE
        },
    };
    type Alloc<L: RawMutex + Send + Sync + 'static> = M3Alloc<L>;
    fn build<L: RawMutex + Send + Sync + 'static>(
        setup: &Setup,
    ) -> Result<Self::Alloc<L>, ConfigError> {
        build_m3(setup, M3Policy::RANDOM)
    }
}

/// Build M³ with `policy` over the colours of the setup's machine (seed
/// 002's Xeon by default), with the setup's seed if it gives one.
pub(super) fn build_m3<L: RawMutex + Send + Sync + 'static>(
    setup: &Setup,
    policy: M3Policy,
) -> Result<M3Alloc<L>, ConfigError> {
    let policy = M3Policy {
        seed: setup.seed.unwrap_or(policy.seed),
        ..policy
    };
    if let Some((colours, table)) = colour_table(setup) {
        let base = setup.zones.first().map_or(0, |z| z.start.0);
        return M3Alloc::new(
            setup.zones,
            setup.cpus,
            colours,
            |pfn| u32::from(table[(pfn.0 - base) as usize]),
            policy,
        );
    }
    let colouring = crate::banks::BankColouring::new(&machine_of(setup));
    M3Alloc::new(
        setup.zones,
        setup.cpus,
        colouring.colours(),
        |pfn| colouring.colour(pfn),
        policy,
    )
}

/// The setup's machine, or seed 002's Xeon.
fn machine_of(setup: &Setup) -> nvmos_memsys::Machine {
    match setup.machine {
        Some(m) => m.clone(),
        None => nvmos_memsys::Machine::preset("xeon-3ch").expect("the built-in xeon-3ch preset loads"),
    }
}

/// The bank colouring of a machine over a set of zones: the number of
/// colours and each frame's colour, by pfn from the first zone's start.
type Colours = (u32, std::sync::Arc<Vec<u8>>);

/// Colourings computed, latest last: every row of `evaluate` builds M³
/// and M³-part over the same machine and zones, and decoding the bank of
/// each of its 6.3 M frames again was a third of building M³ (the
/// colouring is a pure function of machine and zones).
#[allow(clippy::type_complexity)]
static COLOURINGS: std::sync::Mutex<Vec<((Option<nvmos_memsys::Machine>, Vec<Zone>), Colours)>> =
    std::sync::Mutex::new(Vec::new());

/// Colourings kept at once (an `evaluate` meets a machine or two).
const KEEP_COLOURINGS: usize = 4;

/// The colouring for `setup`, computed once: `None` where a table would
/// not pay (more than 256 colours, or holes between the zones larger than
/// the zones), and M³ colours each frame itself.
fn colour_table(setup: &Setup) -> Option<Colours> {
    let key = (setup.machine.cloned(), setup.zones.to_vec());
    let mut cache = COLOURINGS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, found)) = cache.iter().find(|(k, _)| *k == key) {
        return Some(found.clone());
    }
    let (first, last) = (setup.zones.first()?.start.0, setup.zones.last()?.end.0);
    let frames: u64 = setup.zones.iter().map(|z| z.frames()).sum();
    if last < first || last - first > 2 * frames {
        return None;
    }
    let colouring = crate::banks::BankColouring::new(&machine_of(setup));
    let colours = colouring.colours();
    if colours == 0 || colours > 256 {
        return None;
    }
    // Holes between the zones get a colour too, unused.
    let table: Vec<u8> = (first..last)
        .map(|pfn| (colouring.colour(Pfn(pfn)) % colours) as u8)
        .collect();
    let entry = (colours, std::sync::Arc::new(table));
    if cache.len() == KEEP_COLOURINGS {
        cache.remove(0);
    }
    cache.push((key, entry.clone()));
    Some(entry)
}
