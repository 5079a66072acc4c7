//! Single-thread order-0 fast paths of the allocators seed 000 compares:
//! one frame allocated and freed over and over (`repeat`), and a batch of
//! 1024 allocations followed by 1024 frees, each half timed on its own.
//!
//! `cargo bench -p nvmos-frames --bench fastpath`; the multi-threaded
//! table is `nvmos bench alloc`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use nvmos_frames::{Buddy, FrameAllocator, IBuddy, PcpPolicy, PerCpu, Pfn, Request, Zone};

/// The lock `nvmos bench alloc` uses by default: one CAS to lock, a store
/// to unlock.
type Lock = nvmos_frames::sync::SpinYield;

/// 64 MiB: large enough that a batch never runs the allocator dry.
const FRAMES: u64 = 16 * 1024;
const BATCH: usize = 1024;

fn zones() -> [Zone; 1] {
    [Zone::new(0, FRAMES)]
}

fn lazy<A: FrameAllocator>(inner: A, policy: PcpPolicy) -> PerCpu<A, Lock> {
    PerCpu::new(inner, policy).expect("valid policy")
}

fn buddy() -> Buddy<Lock> {
    Buddy::new(&zones(), 1).expect("valid zones")
}

fn ibuddy() -> IBuddy<Lock> {
    IBuddy::new(&zones(), 1).expect("valid zones")
}

/// Time `BATCH` allocations (`alloc_half`) or `BATCH` frees of frames
/// allocated untimed, `iters` times.
fn batch<A: FrameAllocator>(alloc: &A, iters: u64, time_allocs: bool) -> Duration {
    let req = Request::single(0);
    let mut frames: Vec<Pfn> = Vec::with_capacity(BATCH);
    let mut spent = Duration::ZERO;
    for _ in 0..iters {
        let start = Instant::now();
        for _ in 0..BATCH {
            frames.push(alloc.alloc(req).expect("memory for a batch"));
        }
        if time_allocs {
            spent += start.elapsed();
        }
        let start = Instant::now();
        for &pfn in &frames {
            alloc
                .free(black_box(pfn), req)
                .expect("a frame we allocated");
        }
        if !time_allocs {
            spent += start.elapsed();
        }
        frames.clear();
    }
    spent
}

fn bench_one<A: FrameAllocator>(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    alloc: A,
) {
    let req = Request::single(0);
    group.throughput(Throughput::Elements(1));
    group.bench_function(format!("{name}/repeat"), |b| {
        b.iter(|| {
            let pfn = alloc.alloc(req).expect("memory");
            alloc
                .free(black_box(pfn), req)
                .expect("a frame we allocated");
        })
    });
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function(format!("{name}/alloc_1024"), |b| {
        b.iter_custom(|iters| batch(&alloc, iters, true))
    });
    group.bench_function(format!("{name}/free_1024"), |b| {
        b.iter_custom(|iters| batch(&alloc, iters, false))
    });
    alloc
        .validate()
        .expect("invariants hold after the benchmark");
}

fn fastpath(c: &mut Criterion) {
    let mut group = c.benchmark_group("order0");
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1));
    bench_one(&mut group, "buddy", buddy());
    bench_one(&mut group, "LBS-31", lazy(buddy(), PcpPolicy::LBS_31));
    bench_one(&mut group, "iBuddy", ibuddy());
    bench_one(&mut group, "LiS-31", lazy(ibuddy(), PcpPolicy::LIS_31));
    bench_one(
        &mut group,
        "linux-pcp",
        lazy(buddy(), PcpPolicy::LINUX_DEFAULT),
    );
    group.finish();
}

criterion_group!(benches, fastpath);
criterion_main!(benches);
