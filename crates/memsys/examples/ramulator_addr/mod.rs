//! The address rearrangement between DRAMSim3's and Ramulator 2's mappings
//! of the `ddr4-2400-dramsim3` geometry, shared by the gen_traces example
//! and the peer-machine test (`tests/peer_machines.rs`).

/// `addr` (DRAMSim3's `rochrababgco`: column bits 6..=12, bank group
/// 13..=14, bank 15..=16, rank 17, row 18..) rearranged for Ramulator 2's
/// `RoBaRaCoCh` (column 6..=12, rank 13, bank group 14..=15, bank
/// 16..=17, row 18..).
pub fn for_ramulator(addr: u64) -> u64 {
    let low = addr & ((1 << 13) - 1);
    let bg = addr >> 13 & 3;
    let ba = addr >> 15 & 3;
    let ra = addr >> 17 & 1;
    let row = addr >> 18;
    low | ra << 13 | bg << 14 | ba << 16 | row << 18
}
