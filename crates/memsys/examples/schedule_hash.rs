//! Hash of every completion (id, outcome, end of data) and of the report
//! for fixed request streams on every preset: run before and after a
//! change to the model to show its answers did not move.
//!
//! `cargo run --release -p nvmos-memsys --example schedule_hash [basic|full]`
use std::hash::{Hash, Hasher};

use nvmos_memsys::{AccessKind, Controller, ControllerConfig, Machine, MemRequest, PagePolicy};

fn main() {
    let which = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "basic".to_owned());
    let base = match which.as_str() {
        "basic" => ControllerConfig::basic(),
        "full" => ControllerConfig::default(),
        other => {
            eprintln!("unknown configuration {other:?}: basic or full");
            std::process::exit(2);
        }
    };
    for name in Machine::preset_names() {
        let m = Machine::preset(name).expect("presets load");
        let size = m.memory_bytes();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let n = 200_000u64;
        let random: Vec<MemRequest> = (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                MemRequest {
                    paddr: (x % size) & !63,
                    kind: if x & 24 == 0 {
                        AccessKind::Write
                    } else {
                        AccessKind::Read
                    },
                    core: (i % 4) as u32,
                    arrival: i * 3 / 2,
                }
            })
            .collect();
        let hot: Vec<MemRequest> = random
            .iter()
            .map(|r| MemRequest {
                paddr: r.paddr % (1 << 22),
                ..*r
            })
            .collect();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for requests in [&random, &hot] {
            for policy in [PagePolicy::Open, PagePolicy::Closed] {
                for depth in [1usize, 8, 32] {
                    let config = ControllerConfig {
                        policy,
                        queue_depth: depth,
                        ..base
                    };
                    let mut mc = Controller::new(&m, config).expect("builds");
                    let mut done = Vec::new();
                    for &r in requests.iter() {
                        mc.submit(r, &mut done).expect("inside memory");
                    }
                    mc.drain(&mut done);
                    for c in &done {
                        (c.id, c.outcome, c.done).hash(&mut h);
                    }
                    let r = mc.report();
                    (r.rows.hits, r.rows.misses, r.rows.conflicts, r.total_cycles).hash(&mut h);
                    r.blp.to_bits().hash(&mut h);
                }
            }
        }
        println!("{name:<16} {which} {:016x}", h.finish());
    }
}
