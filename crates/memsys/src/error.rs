//! What can go wrong loading a machine.

use std::path::PathBuf;

use crate::mapping::{Field, MappingError};
use crate::timing::{Technology, TimingError};

/// Why a machine description is inconsistent. Each names the preset field
/// at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// The mapping is not invertible.
    #[error(transparent)]
    Mapping(#[from] MappingError),
    /// A timing table is inconsistent.
    #[error(transparent)]
    Timing(#[from] TimingError),
    /// A mapping field's number of values does not match the organisation.
    #[error("mapping.{mapping} has {bits} bits ({values} values) but {organisation} = {count}")]
    Geometry {
        /// The mapping field.
        mapping: Field,
        /// Its output bits.
        bits: u32,
        /// The values those bits (or the modulo interleave) give.
        values: u64,
        /// The organisation field.
        organisation: &'static str,
        /// Its count.
        count: u32,
    },
    /// The page size is not a power of two.
    #[error("page_size = {page_size} is not a power of two")]
    PageSize {
        /// The page size.
        page_size: u64,
    },
    /// A last-level cache whose size is not whole sets of 64-byte lines.
    #[error("llc: bytes = {bytes} must be a non-zero multiple of ways ({ways}, non-zero) x 64")]
    Llc {
        /// Its bytes.
        bytes: u64,
        /// Its ways.
        ways: u32,
    },
    /// No zones.
    #[error("zones: a machine needs at least one zone")]
    NoZones,
    /// A zone with `start_pfn >= end_pfn`.
    #[error("zone {zone:?}: start_pfn must be below end_pfn")]
    EmptyZone {
        /// Zone name.
        zone: String,
    },
    /// Zones out of order or overlapping.
    #[error(
        "zone {second:?} starts before zone {first:?} ends: zones must be ascending and disjoint"
    )]
    ZoneOverlap {
        /// The earlier zone.
        first: String,
        /// The later one.
        second: String,
    },
    /// A zone beyond the memory the mapping covers.
    #[error(
        "zone {zone:?}: end_pfn = {end_pfn} lies beyond the {frames} frames the mapping covers"
    )]
    ZoneBeyondMemory {
        /// Zone name.
        zone: String,
        /// Its end.
        end_pfn: u64,
        /// Frames mapped.
        frames: u64,
    },
    /// A zone whose technology has no timing table.
    #[error("zone {zone:?} is {technology} but there is no [timing.{technology}] table")]
    NoTiming {
        /// Zone name.
        zone: String,
        /// Its technology.
        technology: Technology,
    },
}

/// Why a machine could not be loaded. Each names the file (or built-in
/// preset); a parse error carries TOML's line and column.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not TOML, an unknown key, a missing key or a wrong type.
    #[error("{file}: {source}")]
    Parse {
        /// The file.
        file: String,
        /// TOML's error, with line and column.
        source: Box<toml::de::Error>,
    },
    /// Parsed but inconsistent.
    #[error("{file}: {source}")]
    Invalid {
        /// The file.
        file: String,
        /// What is inconsistent.
        source: MachineError,
    },
    /// No built-in preset by that name.
    #[error("no preset named {name:?}; the presets are {known}")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The names there are.
        known: String,
    },
}
