//! Fast decode for the timing model: which bank and row an address is in,
//! from byte-wise lookup tables.
//!
//! A mapping's bit functions are GF(2)-linear: every output bit is the
//! parity of some address bits, so the outputs of a whole address are the
//! XOR of the outputs of each of its bytes taken alone. [`BankDecoder`]
//! tabulates, for each byte position and each of its 256 values, the packed
//! bank and row bits it contributes, and decodes an address with one table
//! look-up per byte (eight at most) instead of one parity per output bit.
//! A modulo channel interleave is a division by a small constant, done by
//! a multiply-high with a correction step.

use crate::mapping::{AddressMapping, Field};
use crate::Machine;

/// Where an address lives, as the timing model needs it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct BankRow {
    /// Dense bank index, as [`Machine::bank_index`] numbers banks.
    pub bank: u32,
    /// Row within the bank.
    pub row: u32,
}

/// Byte-wise lookup tables of a mapping's bank and row functions.
///
/// Packed layout of a table entry: bits `0..32` the bank within the
/// channel (bank, then bank group, then rank, then the channel's own bits
/// when the channel is bit-mapped, least significant first), bits `32..64`
/// the row. Because every count of a bit-mapped field is a power of two,
/// the low half is the dense bank index within the channel.
#[derive(Clone, Debug)]
pub struct BankDecoder {
    tables: Vec<[u64; 256]>,
    size: u64,
    /// `(ways, log2 granule, floor(2^64 / ways))` of a modulo interleave.
    modulo: Option<(u64, u32, u64)>,
    banks_per_channel: u32,
}

impl BankDecoder {
    /// Tabulate a machine's mapping.
    pub fn new(machine: &Machine) -> Self {
        let mapping: &AddressMapping = machine.mapping();
        let width = mapping.width();
        // What each address bit contributes to the packed output.
        let mut contrib = vec![0u64; width as usize];
        let mut shift = 0;
        let mut place = |field: Field, base: u32| {
            for (i, &mask) in mapping.masks(field).iter().enumerate() {
                for (bit, c) in contrib.iter_mut().enumerate() {
                    if mask >> bit & 1 == 1 {
                        *c ^= 1 << (base + i as u32);
                    }
                }
            }
            mapping.bits(field)
        };
        for field in [Field::Bank, Field::BankGroup, Field::Rank, Field::Channel] {
            shift += place(field, shift);
        }
        debug_assert!(shift <= 32);
        place(Field::Row, 32);
        let tables = contrib
            .chunks(8)
            .map(|bits| {
                let mut table = [0u64; 256];
                for (value, entry) in table.iter_mut().enumerate() {
                    *entry = bits
                        .iter()
                        .enumerate()
                        .filter(|&(j, _)| value >> j & 1 == 1)
                        .fold(0, |acc, (_, &c)| acc ^ c);
                }
                table
            })
            .collect();
        let org = machine.organisation();
        let banks_per_channel = org.ranks * org.bank_groups * org.banks;
        let modulo = mapping.channel_modulo().map(|m| {
            let ways = u64::from(m.ways);
            (ways, m.granule.trailing_zeros(), u64::MAX / ways)
        });
        Self {
            tables,
            size: mapping.size(),
            modulo,
            banks_per_channel,
        }
    }

    /// Bytes mapped.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Banks in each channel.
    pub fn banks_per_channel(&self) -> u32 {
        self.banks_per_channel
    }

    /// The bank and row of `paddr`, or `None` beyond the mapped memory.
    #[inline]
    pub fn decode(&self, paddr: u64) -> Option<BankRow> {
        if paddr >= self.size {
            return None;
        }
        let (channel, local) = match self.modulo {
            None => (0, paddr),
            Some((ways, shift, magic)) => {
                let granule = paddr >> shift;
                // q is floor(granule / ways) or one less.
                let mut q = ((u128::from(granule) * u128::from(magic)) >> 64) as u64;
                let mut r = granule - q * ways;
                if r >= ways {
                    q += 1;
                    r -= ways;
                }
                (r as u32, (q << shift) | (paddr & ((1 << shift) - 1)))
            }
        };
        let mut packed = 0;
        let mut rest = local;
        for table in &self.tables {
            packed ^= table[(rest & 0xff) as usize];
            rest >>= 8;
        }
        Some(BankRow {
            bank: channel * self.banks_per_channel + packed as u32,
            row: (packed >> 32) as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_mapping_on_every_preset() {
        for name in Machine::preset_names() {
            let m = Machine::preset(name).unwrap();
            let d = BankDecoder::new(&m);
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for i in 0..20_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Random addresses and the first and last lines.
                let a = match i {
                    0 => 0,
                    1 => m.memory_bytes() - 1,
                    _ => x % m.memory_bytes(),
                };
                let c = m.decode(a).unwrap();
                let want = BankRow {
                    bank: m.bank_index(&c) as u32,
                    row: c.row,
                };
                assert_eq!(d.decode(a), Some(want), "{name} {a:#x}");
            }
            assert_eq!(d.decode(m.memory_bytes()), None);
        }
    }
}
