//! Where a request's time goes, by configuration: the full model on the
//! bench's saturated random stream (`ddr4-2400`, 2 M requests, half
//! writes) with one feature or the queue length changed at a time, and
//! the basic model; nanoseconds per request of this thread's CPU time,
//! best of 3. The queue lengths show how much of a request's cost grows
//! with the banks the ready scheduler looks at and how much is fixed.
//!
//! `cargo run --release -p nvmos-memsys --example bench_configs [-- NAME]`
//! (with a name, only the configurations whose name contains it: for
//! profiling one)
use nvmos_memsys::{AccessKind, Controller, ControllerConfig, Machine, MemRequest, Scheduler};

mod common;

use common::XorShift;
use nvmos_measure::timer::thread_cpu_seconds as thread_cpu_secs;

fn main() {
    let m = Machine::preset("ddr4-2400").expect("presets load");
    let size = m.memory_bytes();
    let n = 2_000_000u64;
    let only = std::env::args().nth(1);
    // The bench's random stream.
    let random = common::random(&mut XorShift(XorShift::SEED), size, n);
    let reads: Vec<MemRequest> = random
        .iter()
        .map(|r| MemRequest {
            kind: AccessKind::Read,
            ..*r
        })
        .collect();
    let full = ControllerConfig::default();
    let queues = |depth: usize, writes: usize| ControllerConfig {
        queue_depth: depth,
        write_queue_depth: writes,
        write_high: writes * 4 / 5,
        write_low: writes / 5,
        ..full
    };
    let configs: [(&str, ControllerConfig, &[MemRequest]); 10] = [
        ("full", full, &random),
        ("full, reads only", full, &reads),
        (
            "no refresh",
            ControllerConfig {
                refresh: false,
                ..full
            },
            &random,
        ),
        (
            "no bank groups",
            ControllerConfig {
                bank_groups: false,
                ..full
            },
            &random,
        ),
        ("no write buffer", queues(32, 0), &random),
        ("queues of 8", queues(8, 8), &random),
        ("queues of 4", queues(4, 4), &random),
        ("queue of 1, no write buffer", queues(1, 0), &random),
        ("basic", ControllerConfig::basic(), &random),
        (
            "basic, ready scheduler",
            ControllerConfig {
                scheduler: Scheduler::Ready,
                ..ControllerConfig::basic()
            },
            &random,
        ),
    ];
    println!("ddr4-2400, random stream, {n} requests, best of 3, ns per request of CPU time");
    for (name, config, requests) in configs {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let mut best = f64::MAX;
        for _ in 0..3 {
            let start = thread_cpu_secs();
            let mut mc = Controller::new(&m, config).expect("builds");
            std::hint::black_box(mc.run(requests.iter().copied()).expect("inside memory"));
            best = best.min(thread_cpu_secs() - start);
        }
        println!(
            "{name:<28} {:6.1} ns  {:5.1} M requests per CPU-second",
            best / n as f64 * 1e9,
            n as f64 / best / 1e6
        );
    }
}
