//! The machine files in `peers/` that run nvmos on a peer simulator's
//! traces: they load, and they map and time as the peer configuration they
//! stand for.

use nvmos_memsys::{Coordinates, Machine, Technology};

#[path = "../examples/ramulator_addr/mod.rs"]
mod ramulator_addr;
use ramulator_addr::for_ramulator;

fn ramulator2() -> Machine {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/peers/ramulator2-ddr4-2400.toml"
    );
    Machine::load(path).unwrap_or_else(|e| panic!("{e}"))
}

fn dramsim3() -> Machine {
    Machine::preset("ddr4-2400-dramsim3").unwrap()
}

fn bank_row_column(c: Coordinates) -> (u32, u32, u32, u32, u32, u32, u32) {
    (
        c.channel,
        c.rank,
        c.bank_group,
        c.bank,
        c.row,
        c.column,
        c.offset,
    )
}

#[test]
fn ramulator2_machine_is_the_dramsim3_geometry_with_ramulators_timings() {
    let (r, d) = (ramulator2(), dramsim3());
    assert_eq!(r.organisation(), d.organisation());
    assert_eq!(r.memory_bytes(), d.memory_bytes());
    // Ramulator 2's DDR4_2400U and the secondary timings its DDR4 spec
    // derives (nCS 2, nRFC ceil(360 ns / 833 ps), nREFI ceil(7.8 us /
    // 833 ps)); everything else as DRAMSim3's DDR4_8Gb_x8_2400.ini.
    let mut want = *d.timing(Technology::Dram).unwrap();
    want.tck_ps = 833;
    want.rtrs = 2;
    want.rfc = 433;
    want.refi = 9364;
    assert_eq!(r.timing(Technology::Dram), Some(&want));
}

#[test]
fn ramulator2_machine_maps_as_ro_ba_ra_co_ch() {
    // From bit 6 up: 7 column bits, rank, 2 bank-group bits, 2 bank bits,
    // row; nvmos counts the column in 8-byte units.
    let m = ramulator2();
    let at = |bit: u32| bank_row_column(m.decode(1 << bit).unwrap());
    assert_eq!(at(6), (0, 0, 0, 0, 0, 8, 0));
    assert_eq!(at(12), (0, 0, 0, 0, 0, 512, 0));
    assert_eq!(at(13), (0, 1, 0, 0, 0, 0, 0));
    assert_eq!(at(14), (0, 0, 1, 0, 0, 0, 0));
    assert_eq!(at(15), (0, 0, 2, 0, 0, 0, 0));
    assert_eq!(at(16), (0, 0, 0, 1, 0, 0, 0));
    assert_eq!(at(17), (0, 0, 0, 2, 0, 0, 0));
    assert_eq!(at(18), (0, 0, 0, 0, 1, 0, 0));
    assert_eq!(at(33), (0, 0, 0, 0, 1 << 15, 0, 0));
}

#[test]
fn gen_traces_ramulator_addresses_reach_the_same_cells_as_dramsim3s() {
    let (r, d) = (ramulator2(), dramsim3());
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut addrs: Vec<u64> = (0..20_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % d.memory_bytes()
        })
        .collect();
    // gen_traces's strided stream, and the first and last bytes.
    addrs.extend((0..5_000u64).map(|i| i * (8192 + 64) % d.memory_bytes()));
    addrs.extend([0, d.memory_bytes() - 1]);
    for a in addrs {
        let ra = for_ramulator(a);
        assert_eq!(
            bank_row_column(r.decode(ra).unwrap()),
            bank_row_column(d.decode(a).unwrap()),
            "{a:#x} -> {ra:#x}"
        );
    }
}
