//! What the timing-model benchmarks share (`bench`, `bench_configs`):
//! their random stream. Not an example itself (cargo builds only
//! `examples/*.rs` and `examples/*/main.rs`).

use nvmos_memsys::{AccessKind, MemRequest};

/// xorshift64: the benchmarks' one source of addresses, so a stream is
/// the same in every run and in both programs.
pub struct XorShift(pub u64);

impl XorShift {
    /// The seed both benchmarks start from.
    pub const SEED: u64 = 0x2545_f491_4f6c_dd1d;

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// The saturating random stream: `n` random lines of a `size`-byte
/// memory, half writes (bit 3 of the draw), four cores' requests, two
/// arriving per memory cycle, so queues stay full.
pub fn random(rng: &mut XorShift, size: u64, n: u64) -> Vec<MemRequest> {
    (0..n)
        .map(|i| {
            let x = rng.next();
            MemRequest {
                paddr: (x % size) & !63,
                kind: if x & 8 == 0 {
                    AccessKind::Read
                } else {
                    AccessKind::Write
                },
                core: (i % 4) as u32,
                arrival: i / 2,
            }
        })
        .collect()
}
