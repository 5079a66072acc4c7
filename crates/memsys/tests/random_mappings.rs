//! Random valid mappings: every one is accepted, and decode and encode are
//! inverse on it.

use nvmos_memsys::{AddressMapping, BitSpec, ChannelModulo, Coordinates, Field, MappingSpec};
use proptest::prelude::*;

/// A random valid mapping over `width` address bits: deal the bits out to
/// the seven fields as slices, then turn some outputs into XOR functions by
/// adding bits owned by slices that stay slices. Each XOR keeps its own bit
/// as the free bit, which no other output mentions, so the mapping is
/// invertible by construction. Optionally a modulo channel interleave (then
/// no channel bits).
fn valid_mapping() -> impl Strategy<Value = MappingSpec> {
    (4u32..=40)
        .prop_flat_map(|width| {
            (
                Just(width),
                Just((0..width).collect::<Vec<u32>>()).prop_shuffle(),
                proptest::collection::vec(0usize..7, width as usize),
                proptest::collection::vec(any::<bool>(), width as usize),
                proptest::collection::vec(
                    proptest::collection::vec(any::<prop::sample::Index>(), 1..4),
                    width as usize,
                ),
                proptest::option::of((1u32..=6, 0u32..=3)),
            )
        })
        .prop_map(|(width, bits, fields, is_xor, extras, modulo)| {
            let mut spec = MappingSpec::default();
            let slice_bits: Vec<u32> = (0..width as usize)
                .filter(|&i| !is_xor[i])
                .map(|i| bits[i])
                .collect();
            let modulo = modulo.filter(|&(_, g)| g <= width);
            for i in 0..width as usize {
                let mut field = Field::ALL[fields[i]];
                if modulo.is_some() && field == Field::Channel {
                    field = Field::Row;
                }
                let entry = if is_xor[i] && !slice_bits.is_empty() {
                    let mut xs = vec![bits[i]];
                    for idx in &extras[i] {
                        let b = *idx.get(&slice_bits);
                        if !xs.contains(&b) {
                            xs.push(b);
                        }
                    }
                    if xs.len() == 1 {
                        BitSpec::Bit(bits[i])
                    } else {
                        BitSpec::Xor(xs)
                    }
                } else {
                    BitSpec::Bit(bits[i])
                };
                let list = match field {
                    Field::Offset => &mut spec.offset,
                    Field::Column => &mut spec.column,
                    Field::Channel => &mut spec.channel,
                    Field::Rank => &mut spec.rank,
                    Field::BankGroup => &mut spec.bank_group,
                    Field::Bank => &mut spec.bank,
                    Field::Row => &mut spec.row,
                };
                list.push(entry);
            }
            spec.channel_modulo = modulo.map(|(ways, g)| ChannelModulo {
                ways,
                granule: 1 << g,
            });
            spec
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_valid_mappings_invert(spec in valid_mapping(), a in any::<u64>(), raw in any::<[u32; 7]>()) {
        let m = AddressMapping::new(spec.clone()).map_err(|e| TestCaseError::fail(format!("{e}: {spec:?}")))?;
        let a = a % m.size();
        let c = m.decode(a).unwrap();
        prop_assert_eq!(m.encode(&c).unwrap(), a);

        // Coordinates in range for this mapping.
        let mut c = Coordinates::default();
        for (field, r) in Field::ALL.into_iter().zip(raw) {
            c.set(field, (u64::from(r) % m.values(field)) as u32);
        }
        let a = m.encode(&c).unwrap();
        prop_assert!(a < m.size());
        prop_assert_eq!(m.decode(a).unwrap(), c);
    }
}
