//! Measures how fast `.nvt` files are read on one core:
//! `cargo run --release -p nvmos-trace --example read_speed -- FILE.nvt...`
//! Reads each file a few times and prints the best events per second, by
//! wall-clock time and by the thread's CPU time (the figure that does not
//! depend on what else the machine runs).

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `--chunks`: read with `NvtReader::next_chunk` instead of the iterator.
    let bulk = std::env::args_os().any(|a| a == "--chunks");
    for path in std::env::args_os().skip(1).filter(|a| a != "--chunks") {
        let mut best = f64::INFINITY;
        let mut best_cpu = f64::INFINITY;
        let mut events = 0u64;
        let mut checksum = 0u64;
        for _ in 0..5 {
            let start = Instant::now();
            let cpu_start = thread_cpu_seconds();
            events = 0;
            if bulk {
                let mut reader = nvmos_trace::NvtReader::open(&path)?;
                while let Some(chunk) = reader.next_chunk() {
                    for event in chunk? {
                        checksum = touch(checksum, event);
                        events += 1;
                    }
                }
            } else {
                for event in nvmos_trace::NvtReader::open(&path)? {
                    checksum = touch(checksum, &event?);
                    events += 1;
                }
            }
            best = best.min(start.elapsed().as_secs_f64());
            best_cpu = best_cpu.min(thread_cpu_seconds() - cpu_start);
        }
        let bytes = std::fs::metadata(&path)?.len();
        println!(
            "{}: {events} events, {:.2} bytes/event, read in {:.3} s: {:.1} M events/s wall, {:.1} M events/s CPU time (checksum {checksum:x})",
            std::path::Path::new(&path).display(),
            bytes as f64 / events.max(1) as f64,
            best,
            events as f64 / best / 1e6,
            events as f64 / best_cpu / 1e6
        );
    }
    Ok(())
}

/// Touches every field so nothing is optimised away.
fn touch(checksum: u64, event: &nvmos_trace::Event) -> u64 {
    checksum
        .wrapping_add(event.pfn.get() ^ event.time_ns)
        .wrapping_add(u64::from(event.cpu) + u64::from(event.order.get()))
}

/// CPU time of this thread, seconds.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}
