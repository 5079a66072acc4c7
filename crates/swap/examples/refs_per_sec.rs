//! Benchmark: page references per second through the paging model on one
//! core, against a baseline measured in the same run (setting the
//! accessed and dirty bits in a flat byte table, the least a model must
//! do per reference).
//!
//! `cargo run --release -p nvmos-swap --example refs_per_sec [-- traces/swap/lackey_kv.lackey.zst]`

use std::hint::black_box;
use std::time::Instant;

use nvmos_swap::workload::{pc_scenario, PcScenario, PAGE_MASK, REF_WRITE};
use nvmos_swap::{lackey, run_workload, DeviceSpec, SwapConfig, Workload};

fn baseline(w: &Workload) -> f64 {
    let mut table = vec![0u8; w.pages as usize];
    let t = Instant::now();
    for &r in &w.refs {
        let i = (r & PAGE_MASK) as usize;
        table[i] |= 1 | (((r & REF_WRITE) >> 30) as u8);
    }
    black_box(&table);
    w.refs.len() as f64 / t.elapsed().as_secs_f64()
}

fn model(w: &Workload, memory_pages: u64, swap_pages: u32) -> (f64, u64) {
    let cfg = SwapConfig {
        memory_pages,
        swap_pages,
        record_requests: false,
        ..SwapConfig::default()
    };
    let t = Instant::now();
    let r = run_workload(&cfg, &DeviceSpec::preset("SCM-400").unwrap(), w).expect("the model runs");
    let secs = t.elapsed().as_secs_f64();
    (
        w.refs.len() as f64 / secs,
        r.stats.major_faults + r.stats.minor_faults,
    )
}

fn main() {
    let lackey_path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "traces/swap/lackey_kv.lackey.zst".into());
    let mut rows = Vec::new();
    match lackey::read_lackey(std::path::Path::new(&lackey_path)) {
        Ok(w) => {
            let mem = (u64::from(w.pages) / 2).max(1024);
            rows.push((
                w.name.clone(),
                w.clone(),
                mem,
                (w.anon_pages() * 2 + 1024) as u32,
            ));
        }
        Err(e) => eprintln!("skipping the lackey trace: {e}"),
    }
    let s = PcScenario {
        scale: 0.25,
        aging_rounds: 4,
        seed: 3,
    };
    let pc = pc_scenario(&s);
    rows.push((
        pc.name.clone(),
        pc,
        s.memory_pages(),
        s.memory_pages() as u32,
    ));
    println!("workload                refs        faults   model M refs/s   baseline M refs/s   model/baseline");
    for (name, w, mem, swap) in rows {
        // Best of three of each, interleaved, so both see the same machine.
        let mut best_m: f64 = 0.0;
        let mut best_b: f64 = 0.0;
        let mut faults = 0;
        for _ in 0..3 {
            let (m, f) = model(&w, mem, swap);
            best_m = best_m.max(m);
            faults = f;
            best_b = best_b.max(baseline(&w));
        }
        println!(
            "{name:<22} {:>10} {faults:>10} {:>16.1} {:>19.1} {:>15.3}",
            w.refs.len(),
            best_m / 1e6,
            best_b / 1e6,
            best_m / best_b
        );
    }
}
