//! The machine: page size, zones and their technology, the memory
//! organisation, the address mapping and the timings; loaded from TOML.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{LoadError, MachineError};
use crate::mapping::{AddressError, AddressMapping, Coordinates, Field, MappingSpec};
use crate::timing::{Technology, Timing, Timings};

/// How the memory is organised: counts of each level, per level above it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Organisation {
    /// Channels (independent buses).
    pub channels: u32,
    /// Ranks per channel.
    pub ranks: u32,
    /// Bank groups per rank (1 before DDR4, or when unknown).
    pub bank_groups: u32,
    /// Banks per bank group.
    pub banks: u32,
    /// Rows per bank.
    pub rows: u32,
    /// Columns per row.
    pub columns: u32,
    /// Bytes moved per column access per transfer: the channel's data
    /// width (8 for a 64-bit channel).
    pub bytes_per_column: u32,
}

impl Organisation {
    /// The count the organisation gives for a field (for the offset,
    /// `bytes_per_column`), and that count's name in a preset.
    pub fn count(&self, field: Field) -> (u32, &'static str) {
        match field {
            Field::Offset => (self.bytes_per_column, "organisation.bytes_per_column"),
            Field::Column => (self.columns, "organisation.columns"),
            Field::Channel => (self.channels, "organisation.channels"),
            Field::Rank => (self.ranks, "organisation.ranks"),
            Field::BankGroup => (self.bank_groups, "organisation.bank_groups"),
            Field::Bank => (self.banks, "organisation.banks"),
            Field::Row => (self.rows, "organisation.rows"),
        }
    }

    /// Banks in the whole machine: channels × ranks × bank groups × banks.
    pub fn total_banks(&self) -> usize {
        self.channels as usize
            * self.ranks as usize
            * self.bank_groups as usize
            * self.banks as usize
    }

    /// Bytes in one row of one bank (across the rank's chips).
    pub fn row_bytes(&self) -> u64 {
        u64::from(self.columns) * u64::from(self.bytes_per_column)
    }
}

/// The last-level cache in front of the memory, for tools that filter a
/// program's accesses into memory requests (the QEMU plugin of `nvmos
/// kernel run --mem-trace`): `bytes` over `ways` ways of 64-byte lines.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Llc {
    /// Capacity in bytes: a non-zero multiple of `ways` × 64.
    pub bytes: u64,
    /// Associativity.
    pub ways: u32,
}

impl Llc {
    /// The line size every nvmos cache model uses, bytes.
    pub const LINE: u64 = 64;

    /// Sets: `bytes / (ways × 64)`.
    pub fn sets(&self) -> u64 {
        self.bytes / (u64::from(self.ways) * Self::LINE)
    }
}

/// A range of page frames `start_pfn..end_pfn` and the technology behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zone {
    /// Name, as Linux names zones (`DMA32`, `Normal`, …).
    pub name: String,
    /// First frame.
    pub start_pfn: u64,
    /// One past the last frame.
    pub end_pfn: u64,
    /// The technology behind these frames.
    pub technology: Technology,
}

/// A machine as written in a preset file, before it is checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    /// Short name.
    pub name: String,
    /// What machine this is and where its numbers come from.
    #[serde(default)]
    pub description: String,
    /// Page size in bytes.
    pub page_size: u64,
    /// Zones, ascending and disjoint.
    pub zones: Vec<Zone>,
    /// The organisation.
    pub organisation: Organisation,
    /// The address mapping.
    pub mapping: MappingSpec,
    /// Timings per technology.
    pub timing: Timings,
    /// The last-level cache of the system the memory belongs to, if the
    /// preset names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc: Option<Llc>,
}

/// A checked machine description, shared by every study.
///
/// # Invariants
///
/// - The mapping is invertible (see [`AddressMapping`]) and each field's
///   number of values equals the organisation's count for it.
/// - Zones are non-empty, ascending, disjoint and lie inside the mapped
///   memory; every zone's technology has a timing table, and every timing
///   table is consistent ([`Timing::validate`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "MachineSpec", into = "MachineSpec")]
pub struct Machine {
    spec: MachineSpec,
    mapping: AddressMapping,
}

/// The presets built into the crate: name and TOML text.
const PRESETS: &[(&str, &str)] = &[
    ("xeon-3ch", include_str!("../presets/xeon-3ch.toml")),
    ("ddr4-2400", include_str!("../presets/ddr4-2400.toml")),
    (
        "coffeelake-xor",
        include_str!("../presets/coffeelake-xor.toml"),
    ),
    ("pcm-lee2009", include_str!("../presets/pcm-lee2009.toml")),
    (
        "ddr4-2400-dramsim3",
        include_str!("../presets/ddr4-2400-dramsim3.toml"),
    ),
];

impl Machine {
    /// Check a spec and build the machine.
    pub fn new(spec: MachineSpec) -> Result<Self, MachineError> {
        if !spec.page_size.is_power_of_two() {
            return Err(MachineError::PageSize {
                page_size: spec.page_size,
            });
        }
        let mapping = AddressMapping::new(spec.mapping.clone())?;
        let org = &spec.organisation;
        for field in Field::ALL {
            let (count, name) = org.count(field);
            let values = mapping.values(field);
            if u64::from(count) != values {
                return Err(MachineError::Geometry {
                    mapping: field,
                    bits: mapping.bits(field),
                    values,
                    organisation: name,
                    count,
                });
            }
        }
        for technology in [Technology::Dram, Technology::Pcm] {
            if let Some(t) = spec.timing.get(technology) {
                t.validate(technology)?;
            }
        }
        if let Some(llc) = spec.llc {
            if llc.ways == 0
                || llc.bytes == 0
                || !llc.bytes.is_multiple_of(u64::from(llc.ways) * Llc::LINE)
            {
                return Err(MachineError::Llc {
                    bytes: llc.bytes,
                    ways: llc.ways,
                });
            }
        }
        if spec.zones.is_empty() {
            return Err(MachineError::NoZones);
        }
        let frames = mapping.size() / spec.page_size;
        let mut previous: Option<&Zone> = None;
        for zone in &spec.zones {
            if zone.start_pfn >= zone.end_pfn {
                return Err(MachineError::EmptyZone {
                    zone: zone.name.clone(),
                });
            }
            if let Some(p) = previous {
                if zone.start_pfn < p.end_pfn {
                    return Err(MachineError::ZoneOverlap {
                        first: p.name.clone(),
                        second: zone.name.clone(),
                    });
                }
            }
            if zone.end_pfn > frames {
                return Err(MachineError::ZoneBeyondMemory {
                    zone: zone.name.clone(),
                    end_pfn: zone.end_pfn,
                    frames,
                });
            }
            if spec.timing.get(zone.technology).is_none() {
                return Err(MachineError::NoTiming {
                    zone: zone.name.clone(),
                    technology: zone.technology,
                });
            }
            previous = Some(zone);
        }
        Ok(Self { spec, mapping })
    }

    /// Parse and check a machine written in TOML. `file` names the source
    /// in errors.
    pub fn from_toml_str(text: &str, file: &str) -> Result<Self, LoadError> {
        let spec: MachineSpec = toml::from_str(text).map_err(|source| LoadError::Parse {
            file: file.to_owned(),
            source: Box::new(source),
        })?;
        Self::new(spec).map_err(|source| LoadError::Invalid {
            file: file.to_owned(),
            source,
        })
    }

    /// Read, parse and check a machine file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LoadError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// A built-in preset by name; see [`preset_names`](Self::preset_names).
    pub fn preset(name: &str) -> Result<Self, LoadError> {
        let (_, text) =
            PRESETS
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| LoadError::UnknownPreset {
                    name: name.to_owned(),
                    known: Self::preset_names().join(", "),
                })?;
        Self::from_toml_str(text, &format!("presets/{name}.toml (built in)"))
    }

    /// The names of the built-in presets.
    pub fn preset_names() -> Vec<&'static str> {
        PRESETS.iter().map(|(n, _)| *n).collect()
    }

    /// The TOML text of a built-in preset, to copy and edit.
    pub fn preset_toml(name: &str) -> Option<&'static str> {
        PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// The description as written.
    pub fn spec(&self) -> &MachineSpec {
        &self.spec
    }

    /// Short name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> u64 {
        self.spec.page_size
    }

    /// Zones, ascending.
    pub fn zones(&self) -> &[Zone] {
        &self.spec.zones
    }

    /// The organisation.
    pub fn organisation(&self) -> &Organisation {
        &self.spec.organisation
    }

    /// The address mapping.
    pub fn mapping(&self) -> &AddressMapping {
        &self.mapping
    }

    /// The last-level cache, if the preset names one.
    pub fn llc(&self) -> Option<Llc> {
        self.spec.llc
    }

    /// Bytes of memory the mapping covers.
    pub fn memory_bytes(&self) -> u64 {
        self.mapping.size()
    }

    /// The timings of a technology, if the machine has it.
    pub fn timing(&self, technology: Technology) -> Option<&Timing> {
        self.spec.timing.get(technology)
    }

    /// The zone holding `pfn`, if any.
    pub fn zone_of(&self, pfn: u64) -> Option<&Zone> {
        self.spec
            .zones
            .iter()
            .find(|z| (z.start_pfn..z.end_pfn).contains(&pfn))
    }

    /// The technology behind `pfn`, if it lies in a zone.
    pub fn technology_of(&self, pfn: u64) -> Option<Technology> {
        self.zone_of(pfn).map(|z| z.technology)
    }

    /// Where the byte at `paddr` lives.
    #[inline]
    pub fn decode(&self, paddr: u64) -> Result<Coordinates, AddressError> {
        self.mapping.decode(paddr)
    }

    /// The physical address of `c`.
    #[inline]
    pub fn encode(&self, c: &Coordinates) -> Result<u64, AddressError> {
        self.mapping.encode(c)
    }

    /// A dense index `0..organisation().total_banks()` of the bank `c` is
    /// in, for per-bank tables.
    pub fn bank_index(&self, c: &Coordinates) -> usize {
        let o = &self.spec.organisation;
        (((c.channel as usize * o.ranks as usize + c.rank as usize) * o.bank_groups as usize
            + c.bank_group as usize)
            * o.banks as usize)
            + c.bank as usize
    }
}

impl TryFrom<MachineSpec> for Machine {
    type Error = MachineError;

    fn try_from(spec: MachineSpec) -> Result<Self, MachineError> {
        Machine::new(spec)
    }
}

impl From<Machine> for MachineSpec {
    fn from(m: Machine) -> MachineSpec {
        m.spec
    }
}
