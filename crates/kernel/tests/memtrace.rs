//! The memory-trace plugin: its cache against nvmos's Rust model on the
//! host, and in a guest the exact count of a program's accesses, the
//! trace `nvmos memsys run` replays, and the refusal of a window never
//! opened.
//!
//! The guest tests build the kernel into the cache when it is absent and
//! boot under TCG (the plugin needs it), a few seconds each.

use std::path::Path;
use std::process::{Command, Stdio};

use nvmos_kernel::kbuild::BuildOptions;
use nvmos_kernel::memtrace::{self, MemTrace, MemTraceReport};
use nvmos_kernel::run::{run, Policy, RunOptions};
use nvmos_memsys::trace::{self, TraceFormat};
use nvmos_memsys::{AccessKind, Machine};
use nvmos_sim::banks::{Llc, LlcSpec};
use rand::{Rng, SeedableRng};

/// `pagetouch`'s window (traces/workloads/pagetouch.c).
const WINDOW: u64 = 0x7e00_0000_0000;

fn options(policy: Policy, command: &[&str]) -> RunOptions {
    RunOptions::new(
        BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
        nvmos_kernel::repo_workloads_dir(),
        policy,
        command.iter().map(|s| s.to_string()).collect(),
    )
}

/// What the Rust model says the plugin must write for `accesses`
/// (vcpu, time, paddr, write): per vCPU, a dirty victim's WRITE then the
/// fill's READ at the access's time; merged by time, then vCPU.
fn expected(accesses: &[(u32, u64, u64, bool)], spec: LlcSpec) -> (Vec<(u64, bool, u64)>, u64) {
    let mut llc = Llc::new(spec).unwrap();
    let mut per_vcpu: Vec<Vec<(u64, bool, u64)>> = vec![Vec::new(); 4];
    let mut hits = 0;
    for &(vcpu, time, paddr, write) in accesses {
        let (hit, victim) = llc.access(paddr / 64, write);
        hits += u64::from(hit);
        if let Some(v) = victim {
            per_vcpu[vcpu as usize].push((v * 64, true, time));
        }
        if !hit {
            per_vcpu[vcpu as usize].push((paddr / 64 * 64, false, time));
        }
    }
    // (time, vCPU, index in its list): the plugin's merge order.
    let mut order: Vec<(u64, usize, usize)> = Vec::new();
    for (v, list) in per_vcpu.iter().enumerate() {
        for (i, r) in list.iter().enumerate() {
            order.push((r.2, v, i));
        }
    }
    order.sort_unstable();
    (
        order.into_iter().map(|(_, v, i)| per_vcpu[v][i]).collect(),
        hits,
    )
}

#[test]
fn the_plugins_cache_writes_what_the_rust_model_misses_and_evicts() {
    let cache = tempfile::tempdir().unwrap();
    let driver = memtrace::host_driver(cache.path()).unwrap();
    let spec = LlcSpec {
        bytes: 8 << 10,
        ways: 4,
    };
    let (insn_ps, tck_ps) = (1000, 833);
    for seed in 0..4u64 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut clock = [0u64; 4];
        let mut accesses = Vec::new();
        for _ in 0..20_000 {
            let vcpu = rng.gen_range(0..3u32);
            clock[vcpu as usize] += rng.gen_range(0..5u64);
            // 64 KiB of lines, 8-byte aligned: eight times the cache, so
            // sets fill, evict and write back.
            let paddr = rng.gen_range(0..8192u64) * 8;
            accesses.push((vcpu, clock[vcpu as usize], paddr, rng.gen_bool(0.3)));
        }
        let input: String = accesses
            .iter()
            .map(|&(v, t, a, w)| format!("{v} {t} {a:#x} {}\n", if w { 'W' } else { 'R' }))
            .collect();
        let out = cache.path().join(format!("t{seed}.trace"));
        let stats = cache.path().join(format!("t{seed}.stats"));
        let mut child = Command::new(&driver)
            .arg(format!("out={}", out.display()))
            .arg(format!("stats={}", stats.display()))
            .arg(format!("llc_bytes={}", spec.bytes))
            .arg(format!("llc_ways={}", spec.ways))
            .arg(format!("insn_ps={insn_ps}"))
            .arg(format!("tck_ps={tck_ps}"))
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        let report =
            MemTraceReport::parse(&std::fs::read_to_string(&stats).unwrap(), &stats).unwrap();
        report.check_complete(&stats).unwrap();
        let (want, hits) = expected(&accesses, spec);
        let parsed = trace::parse(
            std::io::BufReader::new(std::fs::File::open(&out).unwrap()),
            TraceFormat::Dramsim3,
        )
        .unwrap();
        let got: Vec<(u64, bool, u64)> = parsed
            .requests
            .iter()
            .map(|r| (r.paddr, r.kind == AccessKind::Write, r.arrival))
            .collect();
        let want: Vec<(u64, bool, u64)> = want
            .into_iter()
            .map(|(a, w, t)| (a, w, t * insn_ps / tck_ps))
            .collect();
        assert_eq!(parsed.late, 0, "seed {seed}: the trace is in cycle order");
        assert_eq!(got.len(), want.len(), "seed {seed}");
        assert_eq!(got, want, "seed {seed}");
        assert_eq!(report.hits, hits, "seed {seed}");
        assert_eq!(report.records, want.len() as u64);
        assert!(report.writebacks > 0 && report.hits > 0, "seed {seed}");
        assert_eq!(report.accesses(), accesses.len() as u64);
    }
}

fn mem_trace(dir: &Path, pages: u64) -> MemTrace {
    let mut m = MemTrace::for_machine(dir.join("mem.trace"), "ddr4-2400").unwrap();
    m.watch = Some((WINDOW, pages * 4096));
    m
}

#[test]
fn a_program_touching_n_pages_k_times_is_counted_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (n, k) = (300u64, 7u64);
    let mut opts = options(
        Policy::Buddy,
        &["pagetouch", &n.to_string(), &k.to_string()],
    );
    opts.mem_mib = 512;
    opts.cpus = 2;
    opts.mem_trace = Some(mem_trace(dir.path(), n + 16));
    let r = run(&opts, &mut |_| {}).unwrap();
    assert_eq!(r.workload_status, 0);
    let m = r.mem_trace.expect("a mem trace report");
    let w = m.watch.expect("the watched window's counts");
    // Every store of the program, and nothing else, in its window.
    assert_eq!(w.accesses, n * k, "{m:?}");
    assert_eq!(w.pages, n, "{m:?}");
    assert_eq!(w.frames, n, "{m:?}");
    assert_eq!((w.min_per_page, w.max_per_page), (k, k), "{m:?}");
    assert_eq!(w.remapped, 0);
    assert_eq!((m.starts, m.stops), (1, 1));
    assert_eq!(m.dropped, 0);
    assert!(m.stores >= n * k && m.loads > 0);
    // Helper accesses QEMU reports under another instruction's index are
    // few (exception and interrupt deliveries), and retimed rather than
    // written out of order.
    assert!(m.retimed * 1000 < m.accesses(), "{m:?}");
    // The trace is what the report says, in order, inside the guest's
    // memory, and the timing model takes it.
    let machine = Machine::preset("ddr4-2400").unwrap();
    let parsed = trace::parse(
        std::io::BufReader::new(std::fs::File::open(&m.output).unwrap()),
        TraceFormat::Dramsim3,
    )
    .unwrap();
    assert_eq!(parsed.requests.len() as u64, m.records);
    assert_eq!(parsed.late, 0);
    let writes = parsed
        .requests
        .iter()
        .filter(|r| r.kind == AccessKind::Write)
        .count() as u64;
    assert_eq!(writes, m.writebacks);
    assert!(parsed.requests.iter().all(|r| r.paddr < 512 << 20));
    let stats = trace::run(&machine, Default::default(), &parsed).unwrap();
    assert_eq!(stats.requests, m.records);
    assert!(stats.blp > 0.0 && stats.busy_blp >= stats.blp);
}

#[test]
fn a_window_never_opened_is_refused_and_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(Policy::Buddy, &["pagetouch", "8", "1"]);
    opts.mem_mib = 512;
    let mut m = mem_trace(dir.path(), 8);
    // The command does not run nvmos-mark, so nothing opens the window.
    m.marked_by_command = true;
    opts.mem_trace = Some(m.clone());
    let err = run(&opts, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("0 start"), "{err}");
    assert!(!m.output.exists());
    // Nor the plugin's unaccepted file beside it.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_machine_without_a_cache_is_refused_by_name() {
    let err = MemTrace::for_machine("x".into(), "xeon-3ch")
        .unwrap_err()
        .to_string();
    assert!(err.contains("xeon-3ch") && err.contains("[llc]"), "{err}");
}
