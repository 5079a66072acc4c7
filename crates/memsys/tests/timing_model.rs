//! The timing model against closed-form results, and the assertion mode
//! over random request streams on every preset.

use nvmos_memsys::{
    AccessKind, Controller, ControllerConfig, Coordinates, Machine, MemRequest, PagePolicy,
    Scheduler,
};
use proptest::prelude::*;

fn read(paddr: u64, arrival: u64) -> MemRequest {
    MemRequest {
        paddr,
        kind: AccessKind::Read,
        core: 0,
        arrival,
    }
}

fn checked(policy: PagePolicy, queue_depth: usize) -> ControllerConfig {
    ControllerConfig {
        policy,
        queue_depth,
        check: true,
        ..ControllerConfig::basic()
    }
}

/// Cache lines in one row of one channel.
fn lines_per_row(m: &Machine) -> u64 {
    m.organisation().row_bytes() / 64
}

/// A single sequential stream, touching one line in every `stride`, finds
/// its row open except on the first line it touches in each row: the
/// row-hit rate is 1 - (lines per request) / (lines per row).
#[test]
fn sequential_stream_hit_rate_is_one_minus_lines_per_request_over_lines_per_row() {
    for name in ["ddr4-2400", "xeon-3ch", "coffeelake-xor", "pcm-lee2009"] {
        let m = Machine::preset(name).unwrap();
        for stride in [1u64, 2, 4] {
            let mut mc = Controller::new(&m, checked(PagePolicy::Open, 32)).unwrap();
            let requests = 60_000;
            let r = mc
                .run((0..requests).map(|i| read(i * stride * 64, 0)))
                .unwrap();
            let expected = 1.0 - stride as f64 / lines_per_row(&m) as f64;
            assert!(
                (r.hit_rate - expected).abs() < 0.005,
                "{name} stride {stride}: hit rate {} expected {expected}",
                r.hit_rate
            );
            mc.verify().unwrap();
        }
    }
}

/// Uniformly random requests over B banks, each to one of R rows, served
/// first come first served (queue of one) under the open-page policy.
/// Request i finds its bank closed if none of the i before it went there,
/// probability (1 - 1/B)^i, and otherwise another row open with
/// probability (R - 1)/R. Over N requests the conflict rate is
///
///   conflicts / N = (R - 1)/R * (1 - B/N * (1 - (1 - 1/B)^N)).
#[test]
fn random_requests_over_b_banks_conflict_as_the_closed_form_says() {
    for (name, rows) in [("ddr4-2400", 4u32), ("xeon-3ch", 2), ("pcm-lee2009", 8)] {
        let m = Machine::preset(name).unwrap();
        let org = *m.organisation();
        let b = org.total_banks() as f64;
        let n = 30_000u64;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let requests: Vec<_> = (0..n)
            .map(|_| {
                let r = next();
                let bank = (r % org.total_banks() as u64) as u32;
                let per_rank = org.bank_groups * org.banks;
                let per_channel = org.ranks * per_rank;
                let c = Coordinates {
                    channel: bank / per_channel,
                    rank: bank % per_channel / per_rank,
                    bank_group: bank % per_rank / org.banks,
                    bank: bank % org.banks,
                    row: (r >> 32) as u32 % rows,
                    column: ((r >> 40) as u32 % org.columns) & !7,
                    offset: 0,
                };
                read(m.encode(&c).unwrap(), 0)
            })
            .collect();
        let mut mc = Controller::new(&m, checked(PagePolicy::Open, 1)).unwrap();
        let r = mc.run(requests.iter().copied()).unwrap();
        let rr = f64::from(rows);
        let nf = n as f64;
        let expected = (rr - 1.0) / rr * (1.0 - b / nf * (1.0 - (1.0 - 1.0 / b).powf(nf)));
        assert!(
            (r.conflict_rate - expected).abs() < 0.02,
            "{name}: conflict rate {} expected {expected}",
            r.conflict_rate
        );
        mc.verify().unwrap();

        // FR-FCFS with a deeper queue serves queued hits first, so it
        // conflicts less than first come first served.
        let mut mc = Controller::new(&m, checked(PagePolicy::Open, 32)).unwrap();
        let deep = mc.run(requests.iter().copied()).unwrap();
        assert!(
            deep.conflict_rate < r.conflict_rate - 0.05,
            "{name}: FR-FCFS {} vs FCFS {}",
            deep.conflict_rate,
            r.conflict_rate
        );
        mc.verify().unwrap();
    }
}

/// A random request stream: addresses in a few hot rows of a region or
/// anywhere, reads and writes, non-decreasing arrivals, several cores.
fn stream(size: u64) -> impl Strategy<Value = Vec<MemRequest>> {
    prop::collection::vec(
        (
            any::<u64>(),
            0u32..3,
            any::<bool>(),
            0u64..60,
            0u32..4,
            any::<bool>(),
        ),
        1..400,
    )
    .prop_map(move |items| {
        let mut arrival = 0;
        items
            .into_iter()
            .map(|(a, region, write, gap, core, burst)| {
                // Region 0: 1 MiB (rows shared often); 1: 64 MiB; 2: all.
                let span = match region {
                    0 => 1 << 20,
                    1 => 64 << 20,
                    _ => size,
                }
                .min(size);
                if !burst {
                    arrival += gap;
                }
                MemRequest {
                    paddr: (a % span) & !63,
                    kind: if write {
                        AccessKind::Write
                    } else {
                        AccessKind::Read
                    },
                    core,
                    arrival,
                }
            })
            .collect()
    })
}

fn machine_and_stream() -> impl Strategy<Value = (Machine, Vec<MemRequest>)> {
    (0usize..Machine::preset_names().len()).prop_flat_map(|i| {
        let m = Machine::preset(Machine::preset_names()[i]).unwrap();
        let size = m.memory_bytes();
        (Just(m), stream(size))
    })
}

/// Every switch of the full model, drawn at random.
fn full_config() -> impl Strategy<Value = ControllerConfig> {
    (
        any::<bool>(),
        1usize..40,
        prop_oneof![Just(0usize), 2usize..40],
        any::<[bool; 3]>(),
        any::<u8>(),
    )
        .prop_map(|(closed, depth, writes, [refresh, groups, switch], w)| {
            let high = if writes == 0 {
                0
            } else {
                1 + usize::from(w) % writes
            };
            ControllerConfig {
                policy: if closed {
                    PagePolicy::Closed
                } else {
                    PagePolicy::Open
                },
                queue_depth: depth,
                check: true,
                scheduler: Scheduler::Ready,
                write_queue_depth: writes,
                write_high: high,
                write_low: if high == 0 { 0 } else { usize::from(w) % high },
                refresh,
                bank_groups: groups,
                rank_switch: switch,
            }
        })
}

/// Requests spread over a long time, so that refreshes fall among them.
fn spread(requests: Vec<MemRequest>) -> Vec<MemRequest> {
    requests
        .into_iter()
        .map(|r| MemRequest {
            arrival: r.arrival * 97,
            ..r
        })
        .collect()
}

/// The checks every run must pass: no broken constraint, every request
/// served once, none sooner than a row hit could be.
fn check_run(
    m: &Machine,
    config: ControllerConfig,
    requests: &[MemRequest],
) -> Result<(), TestCaseError> {
    let mut mc = Controller::new(m, config).unwrap();
    let mut done = Vec::new();
    for &req in requests {
        mc.submit(req, &mut done).unwrap();
    }
    mc.drain(&mut done);
    if let Err(v) = mc.verify() {
        return Err(TestCaseError::fail(format!("{} {config:?}: {v}", m.name())));
    }
    prop_assert_eq!(done.len(), requests.len());
    let mut ids: Vec<u64> = done.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    prop_assert!(ids.iter().enumerate().all(|(i, &id)| id == i as u64));
    let t = *mc.timing();
    for c in &done {
        let req = requests[c.id as usize];
        let fastest = u64::from(
            match req.kind {
                AccessKind::Read => t.cl,
                AccessKind::Write => t.cwl,
            } + t.burst_cycles(),
        );
        prop_assert!(c.done >= c.entered + fastest);
        prop_assert!(c.entered >= c.arrival);
        prop_assert_eq!(c.arrival, req.arrival);
        prop_assert_eq!(c.kind, req.kind);
    }
    let r = mc.report();
    prop_assert_eq!(r.requests, requests.len() as u64);
    prop_assert_eq!(r.cores.iter().map(|c| c.requests).sum::<u64>(), r.requests);
    if config.policy == PagePolicy::Closed {
        prop_assert_eq!(r.rows.hits + r.rows.conflicts, 0);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Assertion mode, full model: whatever the stream and whichever
    /// switches are on (ready scheduler, write buffer and watermarks,
    /// refresh, bank groups, rank switching), no two commands break a
    /// timing constraint and every request is served once.
    #[test]
    fn the_checker_never_fires_on_the_full_model(
        (m, requests) in machine_and_stream(),
        config in full_config(),
        slow in any::<bool>(),
    ) {
        let requests = if slow { spread(requests) } else { requests };
        check_run(&m, config, &requests)?;
    }

    /// Assertion mode: whatever the stream, policy and queue depth, no two
    /// commands break a timing constraint, every request completes once,
    /// and none completes sooner than a row hit could.
    #[test]
    fn the_checker_never_fires(
        (m, requests) in machine_and_stream(),
        closed in any::<bool>(),
        depth in 1usize..40,
    ) {
        let policy = if closed { PagePolicy::Closed } else { PagePolicy::Open };
        check_run(&m, checked(policy, depth), &requests)?;
        let mut mc = Controller::new(&m, checked(policy, depth)).unwrap();
        let mut done = Vec::new();
        for &req in &requests {
            mc.submit(req, &mut done).unwrap();
        }
        mc.drain(&mut done);
        if let Err(v) = mc.verify() {
            return Err(TestCaseError::fail(format!("{}: {v}", m.name())));
        }
        prop_assert_eq!(done.len(), requests.len());
        let mut ids: Vec<u64> = done.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        prop_assert!(ids.iter().enumerate().all(|(i, &id)| id == i as u64));
        let t = *mc.timing();
        for c in &done {
            let req = requests[c.id as usize];
            let fastest = u64::from(match req.kind {
                AccessKind::Read => t.cl,
                AccessKind::Write => t.cwl,
            } + t.burst_cycles());
            prop_assert!(c.done >= c.arrival + fastest);
            prop_assert_eq!(c.arrival, req.arrival);
        }
        let r = mc.report();
        prop_assert_eq!(r.requests, requests.len() as u64);
        prop_assert_eq!(r.cores.iter().map(|c| c.requests).sum::<u64>(), r.requests);
        if closed {
            prop_assert_eq!(r.rows.hits + r.rows.conflicts, 0);
        }
    }
}
