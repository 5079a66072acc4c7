//! Requests per second of the timing model (a quick look; `nvmos bench
//! memsys` is the benchmark).
use std::time::Instant;

use nvmos_memsys::{AccessKind, Controller, ControllerConfig, Machine, MemRequest};

fn main() {
    let n = 5_000_000u64;
    for name in Machine::preset_names() {
        let m = Machine::preset(name).unwrap();
        let size = m.memory_bytes();
        let mut x = 88172645463325252u64;
        let random: Vec<MemRequest> = (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                MemRequest {
                    paddr: (x % size) & !63,
                    kind: AccessKind::Read,
                    core: (i % 4) as u32,
                    arrival: i / 2,
                }
            })
            .collect();
        let seq: Vec<MemRequest> = (0..n)
            .map(|i| MemRequest {
                paddr: i * 64,
                kind: AccessKind::Read,
                core: 0,
                arrival: 0,
            })
            .collect();
        let d = nvmos_memsys::BankDecoder::new(&m);
        let t = Instant::now();
        let mut acc = 0u64;
        for r in &random {
            let b = d.decode(r.paddr).unwrap();
            acc = acc.wrapping_add(u64::from(b.bank ^ b.row));
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "{name:16} decode  {:6.1} M req/s ({acc})",
            n as f64 / s / 1e6
        );
        for (label, reqs) in [("seq", &seq), ("random", &random)] {
            let mut mc = Controller::new(&m, ControllerConfig::default()).unwrap();
            let t = Instant::now();
            let r = mc.run(reqs.iter().copied()).unwrap();
            let s = t.elapsed().as_secs_f64();
            println!(
                "{name:16} {label:7} {:6.1} M req/s  hit {:.3} blp {:.2}",
                n as f64 / s / 1e6,
                r.hit_rate,
                r.blp
            );
        }
    }
}
