//! Benchmark of the timing model: requests simulated per second, on every
//! preset, for sequential, random (half writes), mixed (two reads to one
//! write) and strided request streams, against a
//! baseline measured in the same run (decoding the same addresses with the
//! byte-wise lookup tables, the least work a timing model must do per
//! request).
//!
//! Two clocks: the calling thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), which does not count the time the thread
//! waited for a core, so it stays honest on a loaded machine, and wall
//! time. Each figure is the median of `rounds` runs. The thread is pinned
//! to one CPU (the last one it may use) so it does not migrate mid-run.
//!
//! Two configurations of the model: `full` ([`ControllerConfig::default`]:
//! ready scheduler, write buffer, refresh, bank groups, rank switching)
//! and `basic` ([`ControllerConfig::basic`]: the blocking model the
//! closed-form tests hold for).
//!
//! `cargo run --release -p nvmos-memsys --example bench [requests] [rounds] [preset|all] [stream]`
use std::time::Instant;

use nvmos_memsys::{AccessKind, BankDecoder, Controller, ControllerConfig, Machine, MemRequest};

mod common;

use common::XorShift;
use nvmos_measure::timer::thread_cpu_seconds as thread_cpu_secs;

/// Pin this thread to the last CPU in its affinity mask; returns it.
fn pin() -> Option<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls only
    // read and write the set passed to them.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return None;
        }
        let cpu = (0..libc::CPU_SETSIZE as usize)
            .rev()
            .find(|&c| libc::CPU_ISSET(c, &set))?;
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        (libc::sched_setaffinity(0, std::mem::size_of_val(&one), &one) == 0).then_some(cpu)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median (CPU seconds, wall seconds) over `rounds` runs of `f`, and the
/// last run's result.
fn measure<T>(rounds: u32, mut f: impl FnMut() -> T) -> (f64, f64, T) {
    let mut cpu = Vec::new();
    let mut wall = Vec::new();
    let mut out = None;
    for _ in 0..rounds {
        let (c, w) = (thread_cpu_secs(), Instant::now());
        let r = std::hint::black_box(f());
        wall.push(w.elapsed().as_secs_f64());
        cpu.push(thread_cpu_secs() - c);
        out = Some(r);
    }
    (median(cpu), median(wall), out.expect("at least one round"))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(4_000_000);
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5).max(1);
    // Optional filters (for profiling one case): a preset and a stream.
    let only_machine = args.next();
    let only_stream = args.next();
    let cpu = pin();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{n} requests per stream, median of {rounds} rounds, pinned to CPU {}, load average {}",
        cpu.map_or("-".to_owned(), |c| c.to_string()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("M/s = million requests per second: per CPU-second of this thread (cpu) and per wall-second (wall)");
    println!(
        "{:<18} {:<7} {:<6} {:>9} {:>9} {:>11} {:>11} {:>7} {:>6} {:>6}",
        "machine",
        "stream",
        "model",
        "model cpu",
        "wall",
        "decode cpu",
        "wall",
        "ratio",
        "hit%",
        "BLP"
    );
    for name in Machine::preset_names() {
        if only_machine
            .as_deref()
            .is_some_and(|o| o != name && o != "all")
        {
            continue;
        }
        let m = Machine::preset(name).expect("presets load");
        let size = m.memory_bytes();
        let mut rng = XorShift(XorShift::SEED);
        let random = common::random(&mut rng, size, n);
        let sequential: Vec<MemRequest> = (0..n)
            .map(|i| MemRequest {
                paddr: (i * 64) % size,
                kind: AccessKind::Read,
                core: 0,
                arrival: i / 2,
            })
            .collect();
        // Mix: random lines, two reads to one write, two per cycle.
        let mix: Vec<MemRequest> = (0..n)
            .map(|i| {
                let x = rng.next();
                MemRequest {
                    paddr: (x % size) & !63,
                    kind: if i % 3 == 2 {
                        AccessKind::Write
                    } else {
                        AccessKind::Read
                    },
                    core: (i % 4) as u32,
                    arrival: i / 2,
                }
            })
            .collect();
        // Strided: one read every 4 KiB + 64 B (a new row, bank or column
        // each time, as the mapping has it), two per cycle.
        let strided: Vec<MemRequest> = (0..n)
            .map(|i| MemRequest {
                paddr: ((i * (4096 + 64)) % size) & !63,
                kind: AccessKind::Read,
                core: 0,
                arrival: i / 2,
            })
            .collect();
        let decoder = BankDecoder::new(&m);
        for (label, requests) in [
            ("seq", &sequential),
            ("random", &random),
            ("mix", &mix),
            ("strided", &strided),
        ] {
            if only_stream.as_deref().is_some_and(|o| o != label) {
                continue;
            }
            let (base_cpu, base_wall, _) = measure(rounds, || {
                requests.iter().fold(0u64, |acc, r| {
                    let b = decoder.decode(r.paddr).expect("inside memory");
                    acc.wrapping_add(u64::from(b.bank ^ b.row))
                })
            });
            for (model, config) in [
                ("full", ControllerConfig::default()),
                ("basic", ControllerConfig::basic()),
            ] {
                let (cpu, wall, report) = measure(rounds, || {
                    let mut mc = Controller::new(&m, config).expect("builds");
                    mc.run(requests.iter().copied())
                        .expect("requests are inside memory")
                });
                let rate = |secs: f64| n as f64 / secs / 1e6;
                println!(
                    "{name:<18} {label:<7} {model:<6} {:>9.1} {:>9.1} {:>11.1} {:>11.1} {:>7.3} {:>6.1} {:>6.2}",
                    rate(cpu),
                    rate(wall),
                    rate(base_cpu),
                    rate(base_wall),
                    rate(cpu) / rate(base_cpu),
                    report.hit_rate * 100.0,
                    report.blp
                );
            }
        }
    }
}
