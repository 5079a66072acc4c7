//! Recount who pins the banks in a finished kernel study's runs, from the
//! run folders its `kernel.json` names (each guest's `data.img`):
//! memblock's frames, the trace buffers', and the kernel pages the policy
//! placed; per run, then medians per workload and policy.
//!
//! `cargo run -p nvmos-kernel --example pins -- DIR/kernel.json`, or
//! `... --example pins -- --bank-mib 16 RUN_DIR...` for single
//! `nvmos kernel run`s (their folders in the cache's `runs/`).

use std::collections::BTreeMap;
use std::path::Path;

use nvmos_kernel::run::read_guest_counters;
use nvmos_kernel::study::Pins;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: pins DIR/kernel.json | pins --bank-mib N RUN_DIR...";
    let (bank_mib, runs) = match args.as_slice() {
        [path] => {
            let study: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
            let bank_mib = study["bank_mib"]
                .as_u64()
                .ok_or("kernel.json: no bank_mib")?;
            let runs = study["runs"]
                .as_array()
                .ok_or("kernel.json: no runs")?
                .clone();
            (bank_mib, runs)
        }
        [flag, mib, dirs @ ..] if flag == "--bank-mib" && !dirs.is_empty() => {
            let runs = dirs
                .iter()
                .map(|d| {
                    let name = Path::new(d)
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy();
                    serde_json::json!({
                        "policy": name.split('-').next().unwrap_or("?"),
                        "workload": "-",
                        "run": 0,
                        "console_log": Path::new(d).join("console.log"),
                    })
                })
                .collect();
            (mib.parse()?, runs)
        }
        _ => return Err(usage.into()),
    };
    println!(
        "{:<9} {:<10} {:>3} {:>6} {:>6} {:>9} {:>6} {:>8} {:>7} {:>9} {:>8} {:>7} {:>9}",
        "policy",
        "workload",
        "run",
        "pinned",
        "placed",
        "untraced",
        "added",
        "added-ut",
        "memblk",
        "memblk-fr",
        "tbuf-fr",
        "pin-fr",
        "ring-MiB"
    );
    let mut cells: BTreeMap<(String, String), Vec<(usize, Pins)>> = BTreeMap::new();
    for r in &runs {
        let field = |k: &str| {
            r[k].as_str()
                .map(str::to_owned)
                .ok_or(format!("run: no {k}"))
        };
        let (policy, workload) = (field("policy")?, field("workload")?);
        let log = field("console_log")?;
        let dir = Path::new(&log)
            .parent()
            .ok_or("console_log has no folder")?;
        let g = read_guest_counters(dir, bank_mib)?;
        let p = Pins::of_guest(&g);
        let pinned = g.end.pinned_banks();
        println!(
            "{:<9} {:<10} {:>3} {:>6} {:>6} {:>9} {:>6} {:>8} {:>7} {:>9} {:>8} {:>7} {:>9.1}",
            policy,
            workload,
            r["run"],
            pinned,
            p.placed_banks,
            p.untraced_banks,
            p.added_banks,
            p.added_untraced_banks,
            p.reserved_only_banks,
            p.reserved_frames,
            p.trace_buffer_frames,
            p.pinned_frames,
            g.ring_bytes.iter().copied().max().unwrap_or(0) as f64 / f64::from(1 << 20)
        );
        cells
            .entry((workload, policy))
            .or_default()
            .push((pinned, p));
    }
    println!("\nmedians per workload and policy (banks of {bank_mib} MiB):");
    println!(
        "{:<10} {:<9} {:>6} {:>6} {:>9} {:>6} {:>8}",
        "workload", "policy", "pinned", "placed", "untraced", "added", "added-ut"
    );
    for ((workload, policy), v) in &cells {
        let m =
            |f: &dyn Fn(&(usize, Pins)) -> usize| median(v.iter().map(|x| f(x) as f64).collect());
        println!(
            "{:<10} {:<9} {:>6} {:>6} {:>9} {:>6} {:>8}",
            workload,
            policy,
            m(&|x| x.0),
            m(&|x| x.1.placed_banks),
            m(&|x| x.1.untraced_banks),
            m(&|x| x.1.added_banks),
            m(&|x| x.1.added_untraced_banks)
        );
    }
    Ok(())
}
