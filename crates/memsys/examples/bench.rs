//! Benchmark of the timing model: requests simulated per second of host
//! time, on every preset, for a sequential and a random request stream,
//! against a baseline measured in the same run (decoding the same
//! addresses with the byte-wise lookup tables, the least work a timing
//! model must do per request).
//!
//! `cargo run --release -p nvmos-memsys --example bench [requests]`
use std::time::Instant;

use nvmos_memsys::{AccessKind, BankDecoder, Controller, ControllerConfig, Machine, MemRequest};

fn best_of<T>(rounds: u32, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::MAX;
    let mut out = None;
    for _ in 0..rounds {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (best, out.expect("at least one round"))
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4_000_000);
    println!(
        "{n} requests per stream, best of 3 rounds; M/s = million requests per second of host time"
    );
    println!(
        "{:<16} {:<7} {:>10} {:>12} {:>8} {:>7} {:>6}",
        "machine", "stream", "model M/s", "decode M/s", "ratio", "hit%", "BLP"
    );
    for name in Machine::preset_names() {
        let m = Machine::preset(name).expect("presets load");
        let size = m.memory_bytes();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        // Random: four cores' requests, two arriving per memory cycle
        // (saturating the controller, so queues stay full).
        let random: Vec<MemRequest> = (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
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
            .collect();
        let sequential: Vec<MemRequest> = (0..n)
            .map(|i| MemRequest {
                paddr: (i * 64) % size,
                kind: AccessKind::Read,
                core: 0,
                arrival: i / 2,
            })
            .collect();
        let decoder = BankDecoder::new(&m);
        for (label, requests) in [("seq", &sequential), ("random", &random)] {
            let (base, sum) = best_of(3, || {
                requests.iter().fold(0u64, |acc, r| {
                    let b = decoder.decode(r.paddr).expect("inside memory");
                    acc.wrapping_add(u64::from(b.bank ^ b.row))
                })
            });
            std::hint::black_box(sum);
            let (secs, report) = best_of(3, || {
                let mut mc = Controller::new(&m, ControllerConfig::default()).expect("builds");
                mc.run(requests.iter().copied())
                    .expect("requests are inside memory")
            });
            let model = n as f64 / secs / 1e6;
            let decode = n as f64 / base / 1e6;
            println!(
                "{name:<16} {label:<7} {model:>10.1} {decode:>12.1} {:>8.3} {:>7.1} {:>6.2}",
                model / decode,
                report.hit_rate * 100.0,
                report.blp
            );
        }
    }
}
