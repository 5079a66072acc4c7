//! `nvmos memsys run` (`nvmos_memsys::trace`: a DRAMSim3 or Ramulator 2
//! request trace through the timing model): the statistics DRAMSim3
//! prints and the latency distribution ([`stats_text`]).

use std::fmt::Write as _;

use nvmos_memsys::trace::{Latency, TraceStats};
use nvmos_memsys::{ControllerConfig, Machine};

/// A line into the text being built (writing to a `String` cannot fail).
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// The run of `trace` on `machine` under `config`: a heading, the lines
/// skipped or late, DRAMSim3's statistics and the latency percentiles.
pub fn stats_text(
    trace: &str,
    machine: &Machine,
    config: &ControllerConfig,
    s: &TraceStats,
) -> String {
    let mut out = String::new();
    let tck_ns = machine
        .timing(machine.zones()[0].technology)
        .map_or(0.0, |t| f64::from(t.tck_ps) / 1000.0);
    outln!(
        out,
        "{} on {} ({:?} scheduler, write buffer {}, refresh {}, bank groups {})",
        trace,
        s.machine,
        config.scheduler,
        config.write_queue_depth,
        if config.refresh { "on" } else { "off" },
        if config.bank_groups { "on" } else { "off" },
    );
    if s.skipped_lines + s.late_lines > 0 {
        outln!(out,
            "lines skipped (blank, #): {}; lines whose cycle went backwards (served with the line before): {}",
            s.skipped_lines, s.late_lines
        );
    }
    let pct = |n: u64, of: u64| {
        if of == 0 {
            0.0
        } else {
            100.0 * n as f64 / of as f64
        }
    };
    outln!(out, "num_cycles             {:>12}", s.cycles);
    outln!(out, "num_reads_done         {:>12}", s.reads);
    outln!(out, "num_writes_done        {:>12}", s.writes);
    outln!(
        out,
        "num_read_row_hits      {:>12}  ({:.2} % of reads)",
        s.read_row_hits,
        pct(s.read_row_hits, s.reads)
    );
    outln!(
        out,
        "num_write_row_hits     {:>12}  ({:.2} % of writes)",
        s.write_row_hits,
        pct(s.write_row_hits, s.writes)
    );
    outln!(
        out,
        "row_hit_rate           {:>11.2} %",
        100.0 * s.row_hit_rate
    );
    outln!(
        out,
        "row_miss_rate          {:>11.2} %  (row closed)",
        100.0 * s.row_miss_rate
    );
    outln!(
        out,
        "row_conflict_rate      {:>11.2} %  (another row open)",
        100.0 * s.row_conflict_rate
    );
    outln!(
        out,
        "bank_level_parallelism {:>12.2}  (mean banks busy over the run; {:.2} while any is)",
        s.blp,
        s.busy_blp
    );
    outln!(out, "total_memory_time      {:>12.0} ns", s.total_ns);
    outln!(out, "num_act_cmds           {:>12}", s.activates);
    outln!(out, "num_ref_cmds           {:>12}", s.refreshes);
    outln!(out, "average_bandwidth      {:>12.3} GB/s", s.bandwidth_gbs);
    let row = |out: &mut String, name: &str, l: &Latency| {
        outln!(
            out,
            "{name:<22} {:>12.2} cycles ({:.2} ns)  p50 {}  p90 {}  p99 {}  max {}  (n = {})",
            l.mean,
            l.mean * tck_ns,
            l.p50,
            l.p90,
            l.p99,
            l.max,
            l.count
        )
    };
    row(&mut out, "average_read_latency", &s.read_latency);
    row(
        &mut out,
        "  from trace arrival",
        &s.read_latency_from_arrival,
    );
    row(&mut out, "average_write_latency", &s.write_latency);
    out
}
