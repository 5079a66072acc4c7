//! The patched kernel boots under QEMU with each policy and runs a
//! workload to completion: no oops, BUG or WARNING on its console, no
//! event lost, the policy really active (its counters moved), the trace
//! out as .nvt with the guest's machine header.
//!
//! These build the kernel into the cache when it is absent (a cold build
//! took 6.3 min here on 2 shared cores; a rebuild after a change to the
//! policy core well under a minute) and boot under TCG, where a boot takes
//! a few seconds.

use nvmos_kernel::kbuild::{self, BuildOptions};
use nvmos_kernel::run::{run, Policy, RunOptions};
use nvmos_kernel::KernelError;
use nvmos_trace::{EventSource, NvtReader};

fn options(policy: Policy, command: &[&str]) -> RunOptions {
    RunOptions::new(
        BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
        nvmos_kernel::repo_workloads_dir(),
        policy,
        command.iter().map(|s| s.to_string()).collect(),
    )
}

#[test]
fn every_policy_boots_runs_a_workload_and_its_counters_move() {
    let dir = tempfile::tempdir().unwrap();
    for policy in Policy::ALL {
        let mut opts = options(policy, &["memstress", "64", "1"]);
        let out = dir.path().join(format!("{}.nvt", policy.name()));
        opts.output = Some(out.clone());
        let r = run(&opts, &mut |_| {}).unwrap_or_else(|e| panic!("{}: {e}", policy.name()));
        let name = policy.name();
        assert_eq!(r.workload_status, 0, "{name}");
        assert_eq!(r.counts.lost_events, 0, "{name}");
        assert_eq!(r.counters.policy, name);
        // 64 MiB touched then freed: 16,384 frames each way at least.
        assert!(
            r.event_count >= 2 * 16_384,
            "{name}: {} events",
            r.event_count
        );
        assert_eq!(r.machine.cpus, 2);
        assert!(r.machine.memory_bytes > 1 << 30);
        let delta = |k: &str| r.counters.get(k) - r.counters_before.get(k);
        match policy {
            Policy::Buddy => {
                // The spaces are never set up: Linux's own allocator ran.
                assert_eq!(r.counters.get("seeded_frames"), 0, "{name}");
                assert_eq!(r.counters.get("alloc_single_frames"), 0, "{name}");
            }
            Policy::Adaptive => {
                assert!(r.counters.get("seeded_frames") > 400_000, "{name}");
                // memstress's pages are movable: the user pool served them.
                let user = delta("alloc_user_pool_frames");
                assert!(user >= 16_384, "{name}: {user} frames from the user pool");
                assert!(delta("alloc_kernel_pool_frames") > 0, "{name}");
                assert_eq!(delta("alloc_linux_frames"), 0, "{name}");
                assert!(r.counters.get("adaptive_kernel_banks") >= 1, "{name}");
                assert!(
                    r.counters.get("bank_adds") >= 1,
                    "{name}: no bank taken on demand"
                );
                // Every bank line names its pool, and the core's offline
                // banks hold no page in use by the kernel's own count.
                assert!(r.counters.banks.iter().all(|b| b.pool != "-"), "{name}");
                for b in r.counters.banks.iter().filter(|b| b.pool == "offline") {
                    assert_eq!(
                        b.used, 0,
                        "{name}: offline bank {} has pages in use",
                        b.bank
                    );
                }
            }
            _ => {
                assert!(r.counters.get("seeded_frames") > 400_000, "{name}");
                let single = delta("alloc_single_frames") + delta("alloc_lazy_frames");
                assert!(
                    single >= 16_384,
                    "{name}: {single} order-0 frames by the policy"
                );
                // Linux's buddy served nothing while the space had frames.
                assert_eq!(delta("alloc_linux_frames"), 0, "{name}");
                assert!(delta("bitmap_coalesces") > 0, "{name}");
            }
        }
        if matches!(policy, Policy::Lis1 | Policy::Lis31 | Policy::Lis31Fair) {
            assert!(delta("alloc_lazy_frames") > 0, "{name}: bypass list unused");
        } else {
            assert_eq!(r.counters.get("alloc_lazy_frames"), 0, "{name}");
        }
        // The .nvt holds the same events and the guest's machine.
        let mut reader = NvtReader::open(&out).unwrap();
        let machine = reader.trace_header().machine.clone().unwrap();
        assert_eq!(machine, r.machine);
        let n = reader.by_ref().count() as u64;
        assert_eq!(n, r.event_count);
        assert_eq!(reader.counts().lost_events, 0);
    }
}

#[test]
fn ibuddy_in_the_kernel_spreads_allocations_that_buddy_concentrates() {
    // The file job under both: iBuddy's most allocated frame must be
    // allocated fewer times than buddy's (the study measures by how much).
    let mut max = Vec::new();
    for policy in [Policy::Buddy, Policy::IBuddy] {
        let r = run(
            &options(policy, &["filejob", "/tmp/f", "32", "3"]),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(r.workload_status, 0);
        let zones = nvmos_sim::evaluate::recorded_zones(&r.machine);
        let map = nvmos_frames::ZoneMap::new(&zones).unwrap();
        let events = r
            .events
            .iter()
            .map(|e| Ok::<_, std::convert::Infallible>(*e));
        let (_, wear) =
            nvmos_sim::as_recorded(map, events, nvmos_sim::WriteModel::default()).unwrap();
        max.push(wear.summary(1).max);
    }
    assert!(
        max[1] < max[0],
        "ibuddy max {} vs buddy max {}",
        max[1],
        max[0]
    );
}

/// adaptive-migrate in a guest: the sparse job leaves its banks a
/// sixteenth full, and the periodic pass moves those pages out so that
/// banks go offline while the job still holds its memory; the timeline
/// sampled on the way shows it (plain adaptive keeps the sparse banks).
#[test]
fn adaptive_migrate_empties_the_banks_a_sparse_job_leaves() {
    let mut opts = options(Policy::AdaptiveMigrate, &["sparsejob", "256", "16", "4"]);
    opts.cpus = 1;
    opts.use_icount();
    opts.sample_ms = Some(500);
    let r = run(&opts, &mut |_| {}).unwrap();
    assert_eq!(r.workload_status, 0);
    assert_eq!(r.counters.policy, "adaptive-migrate");
    let delta = |k: &str| r.counters.get(k) - r.counters_before.get(k);
    let moved = delta("migrate_moved_frames");
    // Each 128 MiB bank the job filled keeps 8 MiB: 2,048 frames.
    assert!(moved >= 2048, "{moved} frames moved");
    assert!(moved > delta("migrate_failed_frames"));
    assert!(delta("migrate_emptied_banks") >= 1);
    assert!(delta("migrate_passes") >= 3);
    assert!(r.counters.get("migrate_task_ns") > 0);
    // Every moved frame was given a home by the core's migration target
    // (a retried page may be given more than one).
    assert!(delta("migrate_target_frames") >= moved);
    // The timeline: banks in use fall while the job holds its memory.
    let t = &r.timeline;
    assert!(t.len() >= 6, "{} samples", t.len());
    assert!(t
        .windows(2)
        .all(|w| w[0].get("time_ns") < w[1].get("time_ns")));
    let peak = t.iter().map(|c| c.used_banks()).max().unwrap();
    let late = t[t.len() / 2..]
        .iter()
        .map(|c| c.used_banks())
        .min()
        .unwrap();
    assert!(late < peak, "banks in use: peak {peak}, late {late}");
}

#[test]
fn hot_page_migration_counts_every_write_and_moves_within_its_budget() {
    use nvmos_kernel::levelling::Measured;
    use nvmos_kernel::run::HotMigrate;
    let mut figures = Vec::new();
    for hot in [HotMigrate::counting(50), HotMigrate::new(50)] {
        let mut opts = options(Policy::IBuddy, &["memstress", "512", "2"]);
        // One vCPU: under -icount, QEMU's round robin can starve a
        // second vCPU's timers (Measured::of refuses such a run).
        opts.cpus = 1;
        opts.use_icount();
        opts.hot = Some(hot);
        let r = run(&opts, &mut |_| {}).unwrap();
        assert_eq!(r.workload_status, 0);
        let report = r.hot.as_ref().expect("a hot-page report");
        assert_eq!(report.settings, hot);
        assert_eq!(report.get("hot_threshold"), u64::from(hot.threshold));
        assert_eq!(report.get("hot_stopped"), 1);
        assert!(report.get("hot_passes") >= 20, "{:?}", report.counters);
        // Measured::of refuses wear that does not add up to the writes
        // counted plus the pages copied.
        let m = Measured::of(1, &r).unwrap();
        // 512 MiB written twice: every page dirty in some pass.
        assert!(m.writes >= 131_072, "{m:?}");
        if hot.threshold == 0 {
            assert_eq!((m.copies, m.hot), (0, 0), "{m:?}");
        } else {
            assert!(m.copies > 0, "{m:?}");
            assert!(
                m.copies * 100 <= m.writes * u64::from(hot.budget_pct),
                "{m:?}"
            );
        }
        figures.push(m);
    }
    // The pages memstress keeps writing moved: the most worn frame took
    // fewer writes.
    assert!(figures[1].max < figures[0].max, "{figures:?}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let e = Policy::parse("slab").unwrap_err().to_string();
    assert!(
        e.contains("unknown policy \"slab\"") && e.contains("adaptive"),
        "{e}"
    );
    let mut opts = options(Policy::Adaptive, &["memstress"]);
    opts.bank_mib = 100;
    let e = run(&opts, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("--bank-mib 100"), "{e}");
    for (hot, says) in [
        (
            nvmos_kernel::run::HotMigrate {
                candidates: 99,
                ..nvmos_kernel::run::HotMigrate::new(50)
            },
            "candidates 99",
        ),
        (nvmos_kernel::run::HotMigrate::new(5), "period (ms) 5"),
    ] {
        let mut opts = options(Policy::IBuddy, &["memstress"]);
        opts.hot = Some(hot);
        let e = run(&opts, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    }

    let mut build = BuildOptions::new(nvmos_kernel::repo_kernel_dir());
    build.source = "/nonexistent/linux-source-6.12.tar.xz".into();
    let e = kbuild::build(&build, &mut |_| {}).unwrap_err();
    assert!(matches!(e, KernelError::SourceMissing { .. }), "{e}");
    assert!(
        e.to_string().contains("apt-get install linux-source-6.12"),
        "{e}"
    );

    let mut opts = options(Policy::IBuddy, &["memstress", "64", "1"]);
    opts.qemu = "/nonexistent/qemu-system-x86_64".into();
    let e = run(&opts, &mut |_| {}).unwrap_err();
    assert!(matches!(e, KernelError::ToolMissing { .. }), "{e}");
    assert!(e.to_string().contains("qemu-system-x86"), "{e}");

    let e = nvmos_kernel::run::workload_command("kernbench")
        .unwrap_err()
        .to_string();
    assert!(e.contains("kernbench") && e.contains("memstress"), "{e}");

    let mut opts = options(Policy::IBuddy, &["memstress"]);
    opts.cpus = 0;
    assert!(run(&opts, &mut |_| {})
        .unwrap_err()
        .to_string()
        .contains("--cpus 0"));
}

#[test]
fn m3_draws_each_cpus_frames_from_its_own_banks() {
    let mut opts = options(Policy::M3, &["memstress", "64", "1"]);
    opts.output = None;
    let r = run(&opts, &mut |_| {}).unwrap();
    assert_eq!(r.workload_status, 0);
    assert_eq!(r.counts.lost_events, 0);
    assert_eq!(r.counters.policy, "m3");
    let delta = |k: &str| r.counters.get(k) - r.counters_before.get(k);
    assert!(r.counters.get("seeded_frames") > 400_000);
    assert!(delta("alloc_single_frames") >= 16_384);
    assert_eq!(delta("alloc_linux_frames"), 0);
    // Two CPUs, 32 colours of pfn bits 1..5 (the boot defaults): CPU 0
    // draws from colours 0..16, CPU 1 from 16..32, and neither ran out.
    assert_eq!(
        (
            r.counters.get("m3_colours"),
            r.counters.get("m3_shift"),
            r.counters.get("m3_partition")
        ),
        (32, 1, 1)
    );
    assert_eq!(delta("alloc_borrowed_frames"), 0);
    let (mut own, mut other) = (0u64, 0u64);
    for e in &r.events {
        if matches!(e.op, nvmos_trace::Op::Alloc(_)) && e.order.get() == 0 && e.cpu < 2 {
            let colour = (e.pfn.0 >> 1) & 31;
            if colour / 16 == u64::from(e.cpu) {
                own += 1;
            } else {
                other += 1;
            }
        }
    }
    // The trace names the CPU its tracepoint fired on; a task moved
    // between the draw and the tracepoint is the only way to another
    // CPU's colours.
    assert!(own >= 16_384, "{own} frames of the CPU's own colours");
    assert!(
        other * 100 <= own,
        "{other} order-0 frames of another CPU's colours against {own} of its own"
    );
}
