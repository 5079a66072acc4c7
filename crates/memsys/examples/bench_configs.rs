//! Where a request's time goes, by configuration: the full model on the
//! bench's saturated random stream (`ddr4-2400`, 2 M requests, half
//! writes) with one feature or the queue length changed at a time, and
//! the basic model; nanoseconds per request of this thread's CPU time,
//! best of 3. The queue lengths show how much of a request's cost grows
//! with the banks the ready scheduler looks at and how much is fixed.
//!
//! `cargo run --release -p nvmos-memsys --example bench_configs`
use nvmos_memsys::{AccessKind, Controller, ControllerConfig, Machine, MemRequest, Scheduler};

/// This thread's CPU time in seconds.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let m = Machine::preset("ddr4-2400").expect("presets load");
    let size = m.memory_bytes();
    let n = 2_000_000u64;
    // The bench's random stream: two requests per memory cycle.
    let mut x = 0x2545_f491_4f6c_dd1du64;
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
