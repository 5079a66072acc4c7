//! The built-in presets: they load, their mappings invert, and they say
//! what their sources say.

use nvmos_memsys::{Coordinates, Field, LoadError, Machine, MachineError, Technology};
use proptest::prelude::*;

const KB: u64 = 1024;
const MB: u64 = 1024 * KB;

fn preset(name: &str) -> Machine {
    Machine::preset(name).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_preset_loads_and_covers_its_zones() {
    let names = Machine::preset_names();
    assert_eq!(names.len(), 5);
    for name in names {
        let m = preset(name);
        assert_eq!(m.name(), name);
        let last = m.zones().last().unwrap();
        assert!(last.end_pfn * m.page_size() <= m.memory_bytes(), "{name}");
        assert_eq!(
            m.organisation().total_banks() as u64
                * u64::from(m.organisation().rows)
                * m.organisation().row_bytes(),
            m.memory_bytes(),
            "{name}: the organisation's capacity is the mapped size"
        );
    }
}

#[test]
fn machines_serialize_back_to_the_same_machine() {
    for name in Machine::preset_names() {
        let m = preset(name);
        let text = toml::to_string(&m).unwrap();
        assert_eq!(
            Machine::from_toml_str(&text, "round trip").unwrap(),
            m,
            "{text}"
        );
    }
}

// ---- The seed's Xeon ------------------------------------------------------

#[test]
fn xeon_spreads_a_frame_over_three_channels_by_cache_line() {
    let m = preset("xeon-3ch");
    for frame in [0u64, 1, 2, 77, 3000] {
        let base = frame * 4096;
        let channels: Vec<u32> = (0..64)
            .map(|l| m.decode(base + l * 64).unwrap().channel)
            .collect();
        // Frames are 64 lines, not a multiple of 3: each frame starts where
        // the previous one left off in the rotation.
        let first = ((base / 64) % 3) as u32;
        for (l, &ch) in channels.iter().enumerate() {
            assert_eq!(ch, (first + l as u32) % 3, "frame {frame} line {l}");
        }
        // All bytes of a line stay on one channel.
        assert_eq!(m.decode(base + 63).unwrap().channel, first);
    }
    assert_eq!(
        (0..4)
            .map(|l| m.decode(l * 64).unwrap().channel)
            .collect::<Vec<_>>(),
        [0, 1, 2, 0]
    );
}

#[test]
fn xeon_changes_bank_every_12_kb_and_rank_every_3_mb() {
    let m = preset("xeon-3ch");
    let d = |a: u64| m.decode(a).unwrap();
    // Within 12 KB every line, on every channel, is in bank 0 of rank 0:
    // three successive frames share a bank on all three channels.
    for a in (0..12 * KB).step_by(64) {
        assert_eq!((d(a).bank, d(a).rank), (0, 0), "{a:#x}");
    }
    for k in 0..8 {
        assert_eq!(d(k * 12 * KB).bank, k as u32);
        assert_eq!(d(k * 12 * KB + 12 * KB - 1).bank, k as u32);
    }
    // After 96 KB the banks start over, still in rank 0.
    assert_eq!((d(96 * KB).bank, d(96 * KB).rank), (0, 0));
    // 32 rounds of 96 KB make 3 MB: then the rank changes.
    for r in 0..4 {
        assert_eq!(d(r * 3 * MB).rank, r as u32);
        assert_eq!(d(r * 3 * MB + 3 * MB - 1).rank, r as u32);
    }
    // 12 MB round robin: back to rank 0, bank 0, a new row.
    let c = d(12 * MB);
    assert_eq!((c.rank, c.bank, c.channel), (0, 0, 0));
    assert_ne!(c.row, d(0).row);
    // Two addresses 12 MB apart collide in the same bank, other row.
    assert_eq!(m.bank_index(&d(5 * KB)), m.bank_index(&d(12 * MB + 5 * KB)));
}

// ---- The XOR preset, by hand ---------------------------------------------

#[test]
fn coffeelake_xor_matches_hand_computed_addresses() {
    let m = preset("coffeelake-xor");
    let at = |bank, row, column| Coordinates {
        bank,
        row,
        column,
        ..Default::default()
    };
    // bank = (a16^a19) | (a15^a18)<<1 | (a14^a17)<<2 | (a6^a13)<<3
    // column = a3 a4 a5 a7 a8 ... a13 (bits 0..9), row = a17...
    let cases: &[(u64, Coordinates)] = &[
        (0x0, at(0, 0, 0)),
        (0x40, at(8, 0, 0)),                // a6: bank bit 3 only
        (0x80, at(0, 0, 8)),                // a7: column bit 3
        (0x2000, at(8, 0, 512)),            // a13: column bit 9 and bank bit 3
        (0x2040, at(0, 0, 512)),            // a6 ^ a13 cancel
        (0x4000, at(4, 0, 0)),              // a14
        (0x10000, at(1, 0, 0)),             // a16
        (0x20000, at(4, 1, 0)),             // a17: row bit 0 and bank bit 2
        (0x24000, at(0, 1, 0)),             // a14 ^ a17 cancel
        (0x80000, at(1, 4, 0)),             // a19: row bit 2 and bank bit 0
        (0x1_0000_0000, at(0, 1 << 15, 0)), // a32: top row bit (assumed)
    ];
    for &(a, c) in cases {
        assert_eq!(m.decode(a).unwrap(), c, "decode {a:#x}");
        assert_eq!(m.encode(&c).unwrap(), a, "encode {c:?}");
    }
    // Same row, different bank: the classic "same bank, different row"
    // conflict needs a17 and a14 together.
    assert_eq!(m.decode(0x7).unwrap().offset, 7);
}

#[test]
fn ddr4_slices_row_bank_rank_column() {
    let m = preset("ddr4-2400");
    let d = |a: u64| m.decode(a).unwrap();
    // One 8 KB row holds 128 consecutive cache lines.
    assert_eq!(d(8 * KB - 1).column, 1023);
    assert_eq!((d(8 * KB).rank, d(8 * KB).column), (1, 0));
    assert_eq!(d(16 * KB).bank_group, 1);
    assert_eq!(d(64 * KB).bank, 1);
    assert_eq!(d(256 * KB).row, 1);
    assert_eq!(m.timing(Technology::Dram).unwrap().cl, 17);
}

// ---- Round trips ----------------------------------------------------------

fn coords_for(m: &Machine) -> impl Strategy<Value = Coordinates> {
    let o = *m.organisation();
    (
        0..o.channels,
        0..o.ranks,
        0..o.bank_groups,
        0..o.banks,
        0..o.rows,
        0..o.columns,
        0..o.bytes_per_column,
    )
        .prop_map(
            |(channel, rank, bank_group, bank, row, column, offset)| Coordinates {
                channel,
                rank,
                bank_group,
                bank,
                row,
                column,
                offset,
            },
        )
}

fn machine_and_coords() -> impl Strategy<Value = (Machine, Coordinates)> {
    (0usize..4).prop_flat_map(|which| {
        let m = preset(Machine::preset_names()[which]);
        (Just(m.clone()), coords_for(&m))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn presets_encode_decode_is_identity(which in 0usize..4, a in any::<u64>()) {
        let m = preset(Machine::preset_names()[which]);
        let a = a % m.memory_bytes();
        let c = m.decode(a).unwrap();
        prop_assert_eq!(m.encode(&c).unwrap(), a);
    }

    #[test]
    fn presets_decode_encode_is_identity((m, c) in machine_and_coords()) {
        let a = m.encode(&c).unwrap();
        prop_assert!(a < m.memory_bytes());
        prop_assert_eq!(m.decode(a).unwrap(), c);
    }
}

#[test]
fn addresses_beyond_memory_and_coordinates_beyond_the_organisation_are_refused() {
    let m = preset("xeon-3ch");
    assert!(m.decode(m.memory_bytes()).is_err());
    let c = Coordinates {
        bank: 8,
        ..Default::default()
    };
    let e = m.encode(&c).unwrap_err();
    assert!(e.to_string().contains("bank = 8"), "{e}");
    let _ = Field::Bank;
}

// ---- Bad input ------------------------------------------------------------

fn ddr4_with(edit: impl FnOnce(String) -> String) -> Result<Machine, LoadError> {
    let text = edit(Machine::preset_toml("ddr4-2400").unwrap().to_owned());
    Machine::from_toml_str(&text, "edited.toml")
}

#[test]
fn toml_syntax_errors_name_the_file_line_and_column() {
    let e = ddr4_with(|t| t.replace("ranks = 2", "ranks = = 2")).unwrap_err();
    assert!(matches!(e, LoadError::Parse { .. }));
    let msg = e.to_string();
    assert!(msg.starts_with("edited.toml: "), "{msg}");
    assert!(msg.contains("line"), "{msg}");
}

#[test]
fn unknown_keys_are_refused_by_name() {
    let e = ddr4_with(|t| t.replace("ranks = 2", "ranks = 2\nrankz = 2")).unwrap_err();
    assert!(e.to_string().contains("rankz"), "{e}");
    let e = ddr4_with(|t| t.replace("tCL = 17", "tCL = 17\ntCAS = 12")).unwrap_err();
    assert!(e.to_string().contains("tCAS"), "{e}");
    // A missing timing is named too.
    let e = ddr4_with(|t| t.replace("tCWL = 12\n", "")).unwrap_err();
    assert!(e.to_string().contains("tCWL"), "{e}");
}

#[test]
fn inconsistent_geometry_is_refused_naming_both_fields() {
    let e = ddr4_with(|t| t.replace("banks = 4", "banks = 8")).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            LoadError::Invalid {
                source: MachineError::Geometry {
                    mapping: Field::Bank,
                    ..
                },
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("edited.toml")
            && msg.contains("mapping.bank")
            && msg.contains("organisation.banks"),
        "{msg}"
    );
}

#[test]
fn bad_mappings_in_files_are_refused() {
    // Overlap: the rank bit is also a column bit.
    let e = ddr4_with(|t| t.replace("rank = [13]", "rank = [12]")).unwrap_err();
    assert!(
        e.to_string()
            .contains("address bit 12 is used as a slice bit twice"),
        "{e}"
    );
    // Hole: bit 13 left unmapped.
    let e = ddr4_with(|t| t.replace("rank = [13]", "rank = [34]")).unwrap_err();
    assert!(e.to_string().contains("address bit 13 is unmapped"), "{e}");
}

#[test]
fn inconsistent_timings_and_zones_are_refused() {
    let e = ddr4_with(|t| t.replace("tRAS = 39", "tRAS = 10")).unwrap_err();
    assert!(e.to_string().contains("tRAS"), "{e}");
    let e = ddr4_with(|t| t.replace("end_pfn = 4194304", "end_pfn = 4194305")).unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Invalid {
                source: MachineError::ZoneBeyondMemory { .. },
                ..
            }
        ),
        "{e}"
    );
    let e = ddr4_with(|t| {
        t.replace(
            "start_pfn = 4096, end_pfn = 1048576",
            "start_pfn = 4000, end_pfn = 1048576",
        )
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Invalid {
                source: MachineError::ZoneOverlap { .. },
                ..
            }
        ),
        "{e}"
    );
    let e = ddr4_with(|t| {
        t.replace(
            "end_pfn = 4194304, technology = \"dram\"",
            "end_pfn = 4194304, technology = \"pcm\"",
        )
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Invalid {
                source: MachineError::NoTiming { .. },
                ..
            }
        ),
        "{e}"
    );
    let e = ddr4_with(|t| t.replace("page_size = 4096", "page_size = 4000")).unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Invalid {
                source: MachineError::PageSize { .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn files_load_and_their_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("pcm.toml");
    std::fs::write(&good, Machine::preset_toml("pcm-lee2009").unwrap()).unwrap();
    assert_eq!(Machine::load(&good).unwrap(), preset("pcm-lee2009"));

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\npage_size = \"big\"\n").unwrap();
    let e = Machine::load(&bad).unwrap_err();
    assert!(e.to_string().contains("bad.toml"), "{e}");

    let missing = dir.path().join("missing.toml");
    assert!(matches!(Machine::load(&missing), Err(LoadError::Io { .. })));
    assert!(matches!(
        Machine::preset("nope"),
        Err(LoadError::UnknownPreset { .. })
    ));
}
