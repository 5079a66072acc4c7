//! Address mappings: how a memory controller splits a physical address into
//! channel, rank, bank group, bank, row, column and byte offset.
//!
//! Real controllers do two kinds of thing, and a mapping here is made of
//! both:
//!
//! - **Bit slices and XOR functions** (GF(2)-linear maps). Every output bit
//!   is the parity of a set of address bits: one bit for a plain slice,
//!   several for an XOR function, as reverse-engineered Intel mappings are
//!   (Pessl et al., "DRAMA", USENIX Security 2016).
//! - **A modulo channel interleave**, for channel counts that are not a
//!   power of two (the seed's Xeon spreads each frame over 3 channels by
//!   cache line). The address is cut into granules; granule `g` goes to
//!   channel `g mod ways`, and the channel-local address is
//!   `(g / ways) * granule + offset`. The bit functions then apply to that
//!   channel-local address.
//!
//! # Invertibility
//!
//! [`AddressMapping::new`] accepts a mapping only if every bit of the
//! (channel-local) address is *owned* by exactly one output bit: a plain
//! slice owns its bit; an XOR function owns its *free* bit, the one bit it
//! contains that no other output mentions. Then `encode` can set every
//! slice bit first and solve each XOR function for its free bit (its other
//! bits are all slice bits, since a free bit appears nowhere else), and
//! `decode` and `encode` are inverse bijections between `[0, size)` and the
//! coordinates within the organisation.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One field of [`Coordinates`], as named in a preset's `[mapping]` table.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// Byte within a column (one bus-width transfer).
    Offset,
    /// Column within a row, in units of `bytes_per_column`.
    Column,
    /// Channel.
    Channel,
    /// Rank within a channel.
    Rank,
    /// Bank group within a rank (DDR4 and later).
    BankGroup,
    /// Bank within a bank group.
    Bank,
    /// Row within a bank.
    Row,
}

impl Field {
    /// Every field, in the order of the index `Field as usize`.
    pub const ALL: [Field; 7] = [
        Field::Offset,
        Field::Column,
        Field::Channel,
        Field::Rank,
        Field::BankGroup,
        Field::Bank,
        Field::Row,
    ];

    /// The field's key in a preset's `[mapping]` table.
    pub fn name(self) -> &'static str {
        match self {
            Field::Offset => "offset",
            Field::Column => "column",
            Field::Channel => "channel",
            Field::Rank => "rank",
            Field::BankGroup => "bank_group",
            Field::Bank => "bank",
            Field::Row => "row",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a physical address lives in the memory organisation.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Coordinates {
    /// Channel.
    pub channel: u32,
    /// Rank within the channel.
    pub rank: u32,
    /// Bank group within the rank.
    pub bank_group: u32,
    /// Bank within the bank group.
    pub bank: u32,
    /// Row within the bank.
    pub row: u32,
    /// Column within the row, in units of `bytes_per_column`.
    pub column: u32,
    /// Byte within the column. Kept so that `encode(decode(a)) == a` for
    /// every byte address, not just column-aligned ones.
    pub offset: u32,
}

impl Coordinates {
    /// The value of one field.
    pub fn get(&self, field: Field) -> u32 {
        match field {
            Field::Offset => self.offset,
            Field::Column => self.column,
            Field::Channel => self.channel,
            Field::Rank => self.rank,
            Field::BankGroup => self.bank_group,
            Field::Bank => self.bank,
            Field::Row => self.row,
        }
    }

    /// Set one field.
    pub fn set(&mut self, field: Field, value: u32) {
        match field {
            Field::Offset => self.offset = value,
            Field::Column => self.column = value,
            Field::Channel => self.channel = value,
            Field::Rank => self.rank = value,
            Field::BankGroup => self.bank_group = value,
            Field::Bank => self.bank = value,
            Field::Row => self.row = value,
        }
    }
}

/// One output bit as written in a preset: least significant output bit
/// first in each field's list.
///
/// - `13` — the output bit is address bit 13 (a slice bit);
/// - `[13, 17]` — the output bit is address bit 13 XOR address bit 17;
/// - `"3..=12"` — shorthand for the slice bits 3, 4, …, 12, in that order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BitSpec {
    /// A plain address bit.
    Bit(u32),
    /// The XOR of these address bits.
    Xor(Vec<u32>),
    /// An inclusive range of plain address bits, `"lo..=hi"`.
    Range(String),
}

/// A modulo channel interleave, for channel counts that are not a power of
/// two: granule `g = paddr / granule` goes to channel `g % ways`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelModulo {
    /// Number of channels interleaved (3 on the seed's Xeon).
    pub ways: u32,
    /// Bytes sent to one channel before moving to the next (a power of
    /// two; 64, a cache line, on the seed's Xeon).
    pub granule: u64,
}

/// An address mapping as written in a preset's `[mapping]` table: for each
/// field, its output bits, least significant first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappingSpec {
    /// Modulo channel interleave applied before the bit functions. When
    /// present, `channel` must be empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_modulo: Option<ChannelModulo>,
    /// Byte within a column.
    #[serde(default)]
    pub offset: Vec<BitSpec>,
    /// Column within a row.
    #[serde(default)]
    pub column: Vec<BitSpec>,
    /// Channel (bit functions; empty with `channel_modulo`).
    #[serde(default)]
    pub channel: Vec<BitSpec>,
    /// Rank.
    #[serde(default)]
    pub rank: Vec<BitSpec>,
    /// Bank group.
    #[serde(default)]
    pub bank_group: Vec<BitSpec>,
    /// Bank within a bank group.
    #[serde(default)]
    pub bank: Vec<BitSpec>,
    /// Row.
    #[serde(default)]
    pub row: Vec<BitSpec>,
}

impl MappingSpec {
    fn field(&self, field: Field) -> &[BitSpec] {
        match field {
            Field::Offset => &self.offset,
            Field::Column => &self.column,
            Field::Channel => &self.channel,
            Field::Rank => &self.rank,
            Field::BankGroup => &self.bank_group,
            Field::Bank => &self.bank,
            Field::Row => &self.row,
        }
    }
}

/// Address bits above this are refused: the mapped size must fit in a
/// `u64` even after a modulo interleave multiplies it.
pub const MAX_ADDRESS_BITS: u32 = 62;

/// Why a mapping was refused. Each names the field (`mapping.<field>[i]` is
/// the `i`-th output bit of that field, counting entries as written, a
/// range counting as one entry) or the address bit at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// An XOR function with no bits.
    #[error("mapping.{field}[{index}] is an empty XOR function")]
    EmptyXor {
        /// Field.
        field: Field,
        /// Entry index.
        index: usize,
    },
    /// An XOR function naming the same bit twice (which would cancel out).
    #[error("mapping.{field}[{index}] names address bit {bit} twice")]
    RepeatedBit {
        /// Field.
        field: Field,
        /// Entry index.
        index: usize,
        /// The repeated bit.
        bit: u32,
    },
    /// A range that is not `"lo..=hi"` with `lo <= hi`.
    #[error("mapping.{field}[{index}]: {text:?} is not a bit range \"lo..=hi\" with lo <= hi")]
    BadRange {
        /// Field.
        field: Field,
        /// Entry index.
        index: usize,
        /// The text as written.
        text: String,
    },
    /// An address bit beyond [`MAX_ADDRESS_BITS`].
    #[error("mapping.{field}[{index}] names address bit {bit}, beyond the {MAX_ADDRESS_BITS} bits supported")]
    BitTooHigh {
        /// Field.
        field: Field,
        /// Entry index.
        index: usize,
        /// The bit.
        bit: u32,
    },
    /// Two output bits take the same address bit as a plain slice bit.
    #[error("address bit {bit} is used as a slice bit twice: by mapping.{first} and by mapping.{second}")]
    Overlap {
        /// The bit.
        bit: u32,
        /// The field that took it first.
        first: Field,
        /// The field that took it again.
        second: Field,
    },
    /// An XOR function all of whose bits are used by other outputs: it has
    /// no bit of its own to solve for, so the mapping is not invertible.
    #[error("mapping.{field}[{index}] (XOR of bits {bits:?}) has no free bit: every one of its bits is used by another output, so the mapping cannot be inverted")]
    XorNoFreeBit {
        /// Field.
        field: Field,
        /// Entry index.
        index: usize,
        /// Its bits.
        bits: Vec<u32>,
    },
    /// An XOR function with several bits used by no other output: only one
    /// can be solved for, the others would be lost.
    #[error("mapping.{field}[{index}] has several bits used by no other output ({free:?}): only one can be recovered, so the others are unmapped")]
    XorManyFreeBits {
        /// Field.
        field: Field,
        /// Entry index.
        index: usize,
        /// The bits only it uses.
        free: Vec<u32>,
    },
    /// An address bit below the highest one mapped that no output owns.
    #[error("address bit {bit} is unmapped: no output takes it as a slice bit or as the free bit of an XOR function (the mapping covers bits 0..{width})")]
    Unmapped {
        /// The bit.
        bit: u32,
        /// The address width: one more than the highest bit named.
        width: u32,
    },
    /// A field with more output bits than a coordinate holds.
    #[error("mapping.{field} has {bits} bits; a coordinate holds at most 32")]
    FieldTooWide {
        /// Field.
        field: Field,
        /// Its output bits.
        bits: usize,
    },
    /// The mapped size does not fit in a 64-bit address.
    #[error("mapping.channel_modulo.ways = {ways} times 2^{width} bytes per channel does not fit in a 64-bit address")]
    TooLarge {
        /// The modulo ways.
        ways: u64,
        /// The channel-local address width.
        width: u32,
    },
    /// No output bits at all.
    #[error("the mapping maps no address bits")]
    Empty,
    /// Both a modulo interleave and channel bit functions.
    #[error("mapping.channel must be empty when mapping.channel_modulo is given")]
    ChannelTwice,
    /// A modulo interleave over zero channels.
    #[error("mapping.channel_modulo.ways must be at least 1")]
    ModuloWays,
    /// A modulo granule that is not a power of two or is wider than the
    /// channel-local address.
    #[error("mapping.channel_modulo.granule = {granule} must be a power of two no larger than the channel-local address space (2^{width} bytes)")]
    ModuloGranule {
        /// The granule.
        granule: u64,
        /// The channel-local address width.
        width: u32,
    },
}

/// Why an address or coordinates could not be translated.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// The physical address lies beyond the mapped range.
    #[error("physical address {paddr:#x} lies beyond the mapped range 0..{size:#x}")]
    Beyond {
        /// The address.
        paddr: u64,
        /// The mapped size in bytes.
        size: u64,
    },
    /// A coordinate is too large for the mapping.
    #[error("{field} = {value} is out of range: the mapping has {field} 0..{limit}")]
    OutOfRange {
        /// The field.
        field: Field,
        /// Its value.
        value: u32,
        /// The number of values it can take.
        limit: u64,
    },
}

/// A validated address mapping. See the module documentation for the
/// invariant that makes [`decode`](Self::decode) and
/// [`encode`](Self::encode) inverse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressMapping {
    spec: MappingSpec,
    /// `(ways, log2 granule)` of the modulo channel interleave.
    modulo: Option<(u64, u32)>,
    /// Width of the channel-local address (the number of output bits).
    width: u32,
    /// Bytes mapped: `ways * 2^width` (`ways` = 1 without modulo).
    size: u64,
    /// Per field, the address-bit mask of each output bit, LSB first.
    masks: [Vec<u64>; 7],
    /// Encode step 1: (field, output bit, address bit) of each slice.
    slices: Vec<(Field, u32, u32)>,
    /// Decode, slices: runs of consecutive slice bits feeding consecutive
    /// output bits, as (field, first address bit, run mask, first output
    /// bit). Most mappings are a handful of runs, so decode is a few
    /// shifts instead of one parity per output bit.
    runs: Vec<(Field, u32, u64, u32)>,
    /// Decode, XOR functions: (field, output bit, mask).
    xor_outs: Vec<(Field, u32, u64)>,
    /// Encode step 2: (field, output bit, free bit, mask of the other bits)
    /// of each XOR function. Invariant: the other bits are all slice bits.
    xors: Vec<(Field, u32, u32, u64)>,
}

impl AddressMapping {
    /// Validate a mapping. Errors name the field or bit at fault; see
    /// [`MappingError`].
    pub fn new(spec: MappingSpec) -> Result<Self, MappingError> {
        // Expand each entry to a mask, checking it on the way.
        let mut masks: [Vec<u64>; 7] = Default::default();
        // (field, output bit, entry index) for each output bit.
        let mut origin: Vec<(Field, u32, usize)> = Vec::new();
        for field in Field::ALL {
            for (index, entry) in spec.field(field).iter().enumerate() {
                let groups: Vec<Vec<u32>> = match entry {
                    BitSpec::Bit(b) => vec![vec![*b]],
                    BitSpec::Xor(bits) => {
                        if bits.is_empty() {
                            return Err(MappingError::EmptyXor { field, index });
                        }
                        vec![bits.clone()]
                    }
                    BitSpec::Range(text) => parse_range(text)
                        .ok_or_else(|| MappingError::BadRange {
                            field,
                            index,
                            text: text.clone(),
                        })?
                        .map(|b| vec![b])
                        .collect(),
                };
                for bits in groups {
                    let mut mask = 0u64;
                    for &bit in &bits {
                        if bit >= MAX_ADDRESS_BITS {
                            return Err(MappingError::BitTooHigh { field, index, bit });
                        }
                        if mask & (1 << bit) != 0 {
                            return Err(MappingError::RepeatedBit { field, index, bit });
                        }
                        mask |= 1 << bit;
                    }
                    origin.push((field, masks[field as usize].len() as u32, index));
                    masks[field as usize].push(mask);
                }
            }
        }
        if origin.is_empty() {
            return Err(MappingError::Empty);
        }
        if let Some(field) = Field::ALL
            .into_iter()
            .find(|&f| masks[f as usize].len() > 32)
        {
            return Err(MappingError::FieldTooWide {
                field,
                bits: masks[field as usize].len(),
            });
        }

        // How many output bits mention each address bit.
        let mut uses = [0u32; 64];
        let all_masks = || {
            origin
                .iter()
                .map(|&(f, i, idx)| (f, i, idx, masks[f as usize][i as usize]))
        };
        for (_, _, _, mask) in all_masks() {
            for (bit, count) in uses.iter_mut().enumerate() {
                *count += ((mask >> bit) & 1) as u32;
            }
        }

        // Give every address bit its owner: a slice its bit, an XOR
        // function its one free bit.
        let mut owner: [Option<Field>; 64] = [None; 64];
        let mut slices = Vec::new();
        let mut xors = Vec::new();
        for (field, out, index, mask) in all_masks() {
            if mask.count_ones() == 1 {
                let bit = mask.trailing_zeros();
                if let Some(first) = owner[bit as usize] {
                    return Err(MappingError::Overlap {
                        bit,
                        first,
                        second: field,
                    });
                }
                owner[bit as usize] = Some(field);
                slices.push((field, out, bit));
            } else {
                let bits: Vec<u32> = (0..64).filter(|b| mask >> b & 1 == 1).collect();
                let free: Vec<u32> = bits
                    .iter()
                    .copied()
                    .filter(|&b| uses[b as usize] == 1)
                    .collect();
                match free.len() {
                    0 => return Err(MappingError::XorNoFreeBit { field, index, bits }),
                    1 => {
                        let pivot = free[0];
                        // A free bit is mentioned once, so no slice owns it.
                        owner[pivot as usize] = Some(field);
                        xors.push((field, out, pivot, mask & !(1 << pivot)));
                    }
                    _ => return Err(MappingError::XorManyFreeBits { field, index, free }),
                }
            }
        }

        let width = 64
            - origin
                .iter()
                .fold(0u64, |acc, &(f, i, _)| acc | masks[f as usize][i as usize])
                .leading_zeros();
        if let Some(bit) = (0..width).find(|&b| owner[b as usize].is_none()) {
            return Err(MappingError::Unmapped { bit, width });
        }
        // Every bit below `width` has exactly one owner and every output
        // owns exactly one bit, so there are `width` outputs: the GF(2) map
        // is square and, by the encode construction, invertible.
        debug_assert_eq!(origin.len() as u32, width);

        let modulo = match spec.channel_modulo {
            None => None,
            Some(m) => {
                if !spec.channel.is_empty() {
                    return Err(MappingError::ChannelTwice);
                }
                if m.ways == 0 {
                    return Err(MappingError::ModuloWays);
                }
                if !m.granule.is_power_of_two() || m.granule.trailing_zeros() > width {
                    return Err(MappingError::ModuloGranule {
                        granule: m.granule,
                        width,
                    });
                }
                Some((u64::from(m.ways), m.granule.trailing_zeros()))
            }
        };
        // 2^width fits (width <= MAX_ADDRESS_BITS); ways times it may not.
        let ways = modulo.map_or(1, |(w, _)| w);
        let size = ways
            .checked_mul(1u64 << width)
            .ok_or(MappingError::TooLarge { ways, width })?;

        let mut runs: Vec<(Field, u32, u64, u32)> = Vec::new();
        let mut xor_outs = Vec::new();
        for field in Field::ALL {
            // (address bit, output bit) of the last slice seen in this field.
            let mut last: Option<(u32, u32)> = None;
            for (out, &mask) in masks[field as usize].iter().enumerate() {
                let out = out as u32;
                if mask.count_ones() != 1 {
                    xor_outs.push((field, out, mask));
                    last = None;
                    continue;
                }
                let bit = mask.trailing_zeros();
                match (last, runs.last_mut()) {
                    (Some((b, o)), Some(run)) if b + 1 == bit && o + 1 == out => {
                        run.2 = (run.2 << 1) | 1;
                    }
                    _ => runs.push((field, bit, 1, out)),
                }
                last = Some((bit, out));
            }
        }

        Ok(Self {
            spec,
            runs,
            xor_outs,
            modulo,
            width,
            size,
            masks,
            slices,
            xors,
        })
    }

    /// The mapping as written.
    pub fn spec(&self) -> &MappingSpec {
        &self.spec
    }

    /// Bytes mapped: addresses `0..size()` decode.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Width in bits of the (channel-local) address the bit functions see.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// How many output bits a field has (for the channel under a modulo
    /// interleave: none; see [`values`](Self::values)).
    pub fn bits(&self, field: Field) -> u32 {
        self.masks[field as usize].len() as u32
    }

    /// How many values a field takes: `2^bits`, or the modulo ways for the
    /// channel.
    pub fn values(&self, field: Field) -> u64 {
        match (field, self.modulo) {
            (Field::Channel, Some((ways, _))) => ways,
            _ => 1u64 << self.bits(field),
        }
    }

    /// The address-bit mask of each output bit of a field, least
    /// significant output bit first: output bit `i` is the parity of
    /// `local & masks(field)[i]`, `local` the channel-local address.
    pub fn masks(&self, field: Field) -> &[u64] {
        &self.masks[field as usize]
    }

    /// The modulo channel interleave, if any.
    pub fn channel_modulo(&self) -> Option<ChannelModulo> {
        self.spec.channel_modulo
    }

    /// Where the byte at `paddr` lives.
    #[inline]
    pub fn decode(&self, paddr: u64) -> Result<Coordinates, AddressError> {
        if paddr >= self.size {
            return Err(AddressError::Beyond {
                paddr,
                size: self.size,
            });
        }
        let (channel, local) = match self.modulo {
            None => (None, paddr),
            Some((ways, shift)) => {
                let granule = paddr >> shift;
                let low = paddr & ((1 << shift) - 1);
                (
                    Some((granule % ways) as u32),
                    ((granule / ways) << shift) | low,
                )
            }
        };
        let mut v = [0u32; 7];
        for &(field, from, mask, to) in &self.runs {
            v[field as usize] |= (((local >> from) & mask) as u32) << to;
        }
        for &(field, out, mask) in &self.xor_outs {
            v[field as usize] |= ((local & mask).count_ones() & 1) << out;
        }
        let mut c = Coordinates {
            offset: v[Field::Offset as usize],
            column: v[Field::Column as usize],
            channel: v[Field::Channel as usize],
            rank: v[Field::Rank as usize],
            bank_group: v[Field::BankGroup as usize],
            bank: v[Field::Bank as usize],
            row: v[Field::Row as usize],
        };
        if let Some(channel) = channel {
            c.channel = channel;
        }
        Ok(c)
    }

    /// The physical address of `c`; the inverse of [`decode`](Self::decode).
    pub fn encode(&self, c: &Coordinates) -> Result<u64, AddressError> {
        for field in Field::ALL {
            let value = c.get(field);
            let limit = self.values(field);
            if u64::from(value) >= limit {
                return Err(AddressError::OutOfRange {
                    field,
                    value,
                    limit,
                });
            }
        }
        let mut local = 0u64;
        for &(field, out, bit) in &self.slices {
            local |= u64::from((c.get(field) >> out) & 1) << bit;
        }
        // Each XOR's other bits are slice bits, all set above.
        for &(field, out, free, others) in &self.xors {
            let want = u64::from((c.get(field) >> out) & 1);
            let have = u64::from((local & others).count_ones() & 1);
            local |= (want ^ have) << free;
        }
        Ok(match self.modulo {
            None => local,
            Some((ways, shift)) => {
                let low = local & ((1 << shift) - 1);
                ((((local >> shift) * ways) + u64::from(c.channel)) << shift) | low
            }
        })
    }
}

/// `"lo..=hi"` → `lo..=hi`, or `None` if malformed or empty.
fn parse_range(text: &str) -> Option<std::ops::RangeInclusive<u32>> {
    let (lo, hi) = text.split_once("..=")?;
    let lo: u32 = lo.trim().parse().ok()?;
    let hi: u32 = hi.trim().parse().ok()?;
    (lo <= hi).then_some(lo..=hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(f: impl FnOnce(&mut MappingSpec)) -> MappingSpec {
        let mut s = MappingSpec {
            offset: vec![BitSpec::Range("0..=2".into())],
            column: vec![BitSpec::Range("3..=9".into())],
            bank: vec![BitSpec::Xor(vec![10, 13]), BitSpec::Xor(vec![11, 14])],
            row: vec![BitSpec::Range("12..=15".into())],
            ..Default::default()
        };
        f(&mut s);
        s
    }

    #[test]
    fn small_xor_mapping_round_trips() {
        let m = AddressMapping::new(spec(|_| ())).unwrap();
        assert_eq!(m.width(), 16);
        assert_eq!(m.size(), 1 << 16);
        for a in 0..m.size() {
            let c = m.decode(a).unwrap();
            assert_eq!(m.encode(&c).unwrap(), a);
        }
        // Bit 13 is row bit 1 and flips bank bit 0 with it.
        let c = m.decode(1 << 13).unwrap();
        assert_eq!((c.row, c.bank), (2, 1));
    }

    #[test]
    fn each_kind_of_bad_mapping_has_its_own_error() {
        let err = |f: fn(&mut MappingSpec)| AddressMapping::new(spec(f)).unwrap_err();
        assert!(matches!(
            err(|s| s.rank = vec![BitSpec::Xor(vec![])]),
            MappingError::EmptyXor {
                field: Field::Rank,
                index: 0
            }
        ));
        assert!(matches!(
            err(|s| s.rank = vec![BitSpec::Xor(vec![16, 16])]),
            MappingError::RepeatedBit {
                field: Field::Rank,
                bit: 16,
                ..
            }
        ));
        assert!(matches!(
            err(|s| s.row = vec![BitSpec::Range("15..=12".into())]),
            MappingError::BadRange {
                field: Field::Row,
                ..
            }
        ));
        assert!(matches!(
            err(|s| s.row.push(BitSpec::Bit(70))),
            MappingError::BitTooHigh {
                field: Field::Row,
                bit: 70,
                ..
            }
        ));
        assert!(matches!(
            err(|s| s.rank = vec![BitSpec::Bit(4)]),
            MappingError::Overlap {
                bit: 4,
                first: Field::Column,
                second: Field::Rank
            }
        ));
        assert!(matches!(
            err(|s| s.bank[1] = BitSpec::Xor(vec![4, 14])),
            MappingError::XorNoFreeBit {
                field: Field::Bank,
                index: 1,
                ..
            }
        ));
        assert!(matches!(
            err(|s| s.bank[1] = BitSpec::Xor(vec![11, 14, 16])),
            MappingError::XorManyFreeBits {
                field: Field::Bank,
                index: 1,
                ..
            }
        ));
        assert!(matches!(
            err(|s| s.row = vec![BitSpec::Range("12..=14".into()), BitSpec::Bit(17)]),
            MappingError::Unmapped { bit: 15, width: 18 }
        ));
        assert!(matches!(
            err(|s| s.row = vec![
                BitSpec::Range("12..=15".into()),
                BitSpec::Range("16..=44".into())
            ]),
            MappingError::FieldTooWide {
                field: Field::Row,
                bits: 33
            }
        ));
        assert!(matches!(
            AddressMapping::new(MappingSpec::default()).unwrap_err(),
            MappingError::Empty
        ));
        assert!(matches!(
            err(|s| {
                s.channel_modulo = Some(ChannelModulo {
                    ways: 3,
                    granule: 64,
                });
                s.row.push(BitSpec::Bit(16));
                s.channel = vec![BitSpec::Bit(17)];
            }),
            MappingError::ChannelTwice
        ));
        assert!(matches!(
            err(|s| {
                s.channel_modulo = Some(ChannelModulo {
                    ways: 5,
                    granule: 64,
                });
                s.row = vec![BitSpec::Range("12..=40".into())];
                s.rank = vec![BitSpec::Range("41..=61".into())];
            }),
            MappingError::TooLarge { ways: 5, width: 62 }
        ));
        assert!(matches!(
            err(|s| s.channel_modulo = Some(ChannelModulo {
                ways: 0,
                granule: 64
            })),
            MappingError::ModuloWays
        ));
        assert!(matches!(
            err(|s| s.channel_modulo = Some(ChannelModulo {
                ways: 3,
                granule: 48
            })),
            MappingError::ModuloGranule { granule: 48, .. }
        ));
    }

    #[test]
    fn errors_name_the_field() {
        let e = AddressMapping::new(spec(|s| s.bank[1] = BitSpec::Xor(vec![4, 14]))).unwrap_err();
        assert!(e.to_string().contains("mapping.bank[1]"), "{e}");
    }

    #[test]
    fn consecutive_slice_bits_decode_as_one_run() {
        let m = AddressMapping::new(spec(|_| ())).unwrap();
        // offset 0..=2, column 3..=9, row 12..=15: three runs; two XORs.
        assert_eq!(m.runs.len(), 3);
        assert_eq!(m.runs[1], (Field::Column, 3, 0x7f, 0));
        assert_eq!(m.xor_outs.len(), 2);
    }

    #[test]
    fn modulo_interleave_round_trips() {
        let m = AddressMapping::new(spec(|s| {
            s.channel_modulo = Some(ChannelModulo {
                ways: 3,
                granule: 64,
            })
        }))
        .unwrap();
        assert_eq!(m.size(), 3 << 16);
        assert_eq!(m.values(Field::Channel), 3);
        for a in (0..m.size()).step_by(7) {
            let c = m.decode(a).unwrap();
            assert_eq!(m.encode(&c).unwrap(), a, "{c:?}");
        }
        assert!(m.decode(3 << 16).is_err());
        let bad = Coordinates {
            channel: 3,
            ..Default::default()
        };
        assert!(matches!(
            m.encode(&bad),
            Err(AddressError::OutOfRange {
                field: Field::Channel,
                value: 3,
                limit: 3
            })
        ));
    }
}
