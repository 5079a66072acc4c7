//! `nvmos bench psync` (`nvmos_pmo_bench::psync`, psync against PMDK's
//! libpmemobj): its table.

use std::fmt::Write as _;

use nvmos_pmo_bench::psync::Psync;
use nvmos_report::TextTable;

/// A page of the object, bytes.
const PAGE: u64 = 4096;

/// `bytes` in MiB when whole, else in KiB (a small object, a quick run's
/// disk total): never rounded down to 0 MiB.
pub(crate) fn size(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
    }
}

/// The table people read.
pub fn table(r: &Psync) -> String {
    let c = &r.options;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "psync throughput, one core (CPU {}), {} KiB pages, {} pages per psync, object {}; median of {} runs",
        c.cpu,
        PAGE / 1024,
        c.pages_per_psync,
        size(c.object_bytes),
        c.rounds
    );
    let _ = writeln!(s, "load average at start: {}", r.loadavg);
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    let mut t = TextTable::new([
        "system",
        "medium",
        "GiB/s",
        "GiB/cpu-s",
        "runs (GiB/s wall/cpu)",
    ]);
    t.left(1).left(4);
    for row in &r.rows {
        let runs: Vec<String> = row
            .rounds
            .iter()
            .map(|v| format!("{:.3}/{:.3}", v.wall, v.cpu))
            .collect();
        let mut runs = runs.join(" ");
        if let Some(why) = &row.missing {
            let _ = write!(
                runs,
                "{}(missing: {why})",
                if runs.is_empty() { "" } else { "  " }
            );
        }
        t.row([
            row.system.clone(),
            row.medium.clone(),
            fmt(row.gib_per_s),
            fmt(row.gib_per_cpu_s),
            runs,
        ]);
    }
    s.push_str(&t.render());
    for ratio in &r.ratios {
        let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
        let _ = writeln!(
            s,
            "nvmos psync with AES-256-GCM / PMDK undo-log tx on {}: {} by wall time, {} by CPU time; sealing on all CPUs: {} by wall time, {} by CPU time",
            ratio.medium,
            x(ratio.wall),
            x(ratio.cpu),
            x(ratio.all_cpus_wall),
            x(ratio.all_cpus_cpu)
        );
    }
    for g in &r.groups {
        let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1} us"));
        let why = g
            .missing
            .as_ref()
            .map_or(String::new(), |m| format!(" (missing: {m})"));
        let _ = writeln!(
            s,
            "psync_many of {} objects on {}: {} per object, {} psyncs {} (speedup {}), {} pages per object, {}{why}",
            g.objects,
            g.medium,
            us(g.many_us_per_object),
            g.objects,
            us(g.single_us_per_object),
            g.speedup().map_or("-".into(), |x| format!("{x:.2}x")),
            g.pages_per_object,
            match g.state_commit {
                None => "no state store",
                Some(nvmos_pmo::StateCommit::Deferred) => "state store, deferred records",
                Some(nvmos_pmo::StateCommit::EveryPsync) => "state store, every psync durable",
            }
        );
    }
    s.push('\n');
    s.push_str(&crate::checks::checks_text(&r.checks));
    s
}
