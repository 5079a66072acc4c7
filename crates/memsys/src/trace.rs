//! Request traces in the formats of the peer simulators, and a run of the
//! timing model over one with the statistics DRAMSim3 prints.
//!
//! - **DRAMSim3** (`dramsim3main -t FILE`): one request a line,
//!   `0x<address> <type> <cycle>`: the type `READ` (or `read`, `P_MEM_RD`,
//!   `P_FETCH`) or `WRITE` (or `write`, `P_MEM_WR`, `BOFF`, DRAMSim3's
//!   write types); the cycle is the earliest the request may reach the
//!   controller. DRAMSim3's front end offers requests in file order, so a
//!   cycle earlier than the previous line's waits for it: such lines are
//!   counted ([`Trace::late`]) and arrive with the previous one.
//! - **Ramulator 2** (its `LoadStoreTrace` front end): `LD <address>` or
//!   `ST <address>`, the address decimal or `0x` hex. The trace has no
//!   times: request `i` arrives at cycle `i`, each waiting until the
//!   controller takes it. [`FrontEnd::Offered`] runs it as Ramulator's
//!   front end does with a clock ratio: a request offered every `N`
//!   cycles, the next only after the last was taken.
//!
//! Blank lines and lines starting with `#` are skipped (and counted); any
//! other line that does not parse is an error naming the line.
//!
//! ```
//! use nvmos_memsys::trace::{self, TraceFormat};
//! use nvmos_memsys::{ControllerConfig, Machine};
//!
//! let text = "0x0 READ 0\n0x40 READ 20\n0x80 WRITE 40\n";
//! let t = trace::parse(text.as_bytes(), TraceFormat::Dramsim3)?;
//! assert_eq!(t.requests.len(), 3);
//! let m = Machine::preset("ddr4-2400-dramsim3")?;
//! let stats = trace::run(&m, ControllerConfig::default(), &t)?;
//! assert_eq!((stats.reads, stats.writes), (2, 1));
//! assert_eq!(stats.read_row_hits, 1); // the second read finds the row open
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::BufRead;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::bank::{AccessKind, RowOutcome};
use crate::controller::{Controller, ControllerConfig, ControllerError, MemRequest};
use crate::Machine;

/// A trace file format.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// `0x<address> READ|WRITE <cycle>`.
    Dramsim3,
    /// `LD|ST <address>`, one request offered a cycle.
    Ramulator,
}

impl FromStr for TraceFormat {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, TraceError> {
        match s {
            "dramsim3" => Ok(Self::Dramsim3),
            "ramulator" | "ramulator2" => Ok(Self::Ramulator),
            other => Err(TraceError::Format(other.to_owned())),
        }
    }
}

/// Why a trace could not be read or run.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// An unknown format name.
    #[error("unknown trace format {0:?}: dramsim3 or ramulator")]
    Format(String),
    /// A front end offering requests every 0 cycles.
    #[error("a front end offers a request every 1 or more cycles, not 0")]
    ZeroGap,
    /// The file could not be read.
    #[error("reading the trace, line {line}: {source}")]
    Io {
        /// Line being read (1-based).
        line: u64,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A line that does not parse.
    #[error("trace line {line}: {why}: {text:?}")]
    Line {
        /// Line number (1-based).
        line: u64,
        /// What is wrong.
        why: &'static str,
        /// The line.
        text: String,
    },
    /// The controller refused a request (an address beyond the machine).
    #[error("trace line {line}: {source}")]
    Request {
        /// Line number (1-based).
        line: u64,
        /// The refusal.
        #[source]
        source: ControllerError,
    },
    /// The configuration cannot build a controller.
    #[error(transparent)]
    Controller(#[from] ControllerError),
}

/// A parsed trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The requests, in file order, arrivals non-decreasing.
    pub requests: Vec<MemRequest>,
    /// The line each request came from (1-based).
    pub lines: Vec<u64>,
    /// Blank and comment lines skipped.
    pub skipped: u64,
    /// DRAMSim3 lines whose cycle was earlier than the line before's
    /// (they arrive with it).
    pub late: u64,
}

fn parse_address(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Read a trace of `format` from `input`.
pub fn parse(mut input: impl BufRead, format: TraceFormat) -> Result<Trace, TraceError> {
    let mut t = Trace::default();
    let mut last = 0u64;
    // One buffer for every line (`BufRead::lines` allocates a String per
    // line); a line is what `lines` gives: without its `\n` or `\r\n`.
    let mut buf = String::new();
    let mut n = 0u64;
    loop {
        n += 1;
        buf.clear();
        match input.read_line(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(source) => return Err(TraceError::Io { line: n, source }),
        }
        let line = match buf.strip_suffix('\n') {
            Some(l) => l.strip_suffix('\r').unwrap_or(l),
            None => &buf,
        };
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            t.skipped += 1;
            continue;
        }
        let bad = |why| TraceError::Line {
            line: n,
            why,
            text: line.to_owned(),
        };
        let mut words = text.split_ascii_whitespace();
        let (paddr, kind, arrival) = match format {
            TraceFormat::Dramsim3 => {
                let (Some(a), Some(k), Some(c), None) =
                    (words.next(), words.next(), words.next(), words.next())
                else {
                    return Err(bad("expected `0x<address> READ|WRITE <cycle>`"));
                };
                // DRAMSim3 reads the address as hex, with or without 0x.
                let hex = a.strip_prefix("0x").or_else(|| a.strip_prefix("0X"));
                let paddr = u64::from_str_radix(hex.unwrap_or(a), 16)
                    .map_err(|_| bad("address is not hexadecimal"))?;
                let kind = match k {
                    "READ" | "read" | "P_MEM_RD" | "P_FETCH" => AccessKind::Read,
                    "WRITE" | "write" | "P_MEM_WR" | "BOFF" => AccessKind::Write,
                    _ => return Err(bad("type is not READ or WRITE")),
                };
                let cycle: u64 = c.parse().map_err(|_| bad("cycle is not a number"))?;
                if cycle < last {
                    t.late += 1;
                }
                last = last.max(cycle);
                (paddr, kind, last)
            }
            TraceFormat::Ramulator => {
                let (Some(k), Some(a), None) = (words.next(), words.next(), words.next()) else {
                    return Err(bad("expected `LD|ST <address>`"));
                };
                let kind = match k {
                    "LD" => AccessKind::Read,
                    "ST" => AccessKind::Write,
                    _ => return Err(bad("type is not LD or ST")),
                };
                let paddr = parse_address(a).ok_or_else(|| bad("address is not a number"))?;
                (paddr, kind, t.requests.len() as u64)
            }
        };
        t.requests.push(MemRequest {
            paddr,
            kind,
            core: 0,
            arrival,
        });
        t.lines.push(n);
    }
    Ok(t)
}

/// Quantiles of a latency distribution, cycles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Requests measured.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// The longest.
    pub max: u64,
}

impl Latency {
    fn of(mut v: Vec<u64>) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        v.sort_unstable();
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        Self {
            count: v.len() as u64,
            mean: v.iter().sum::<u64>() as f64 / v.len() as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: *v.last().expect("not empty"),
        }
    }
}

/// What a trace run measured: DRAMSim3's statistics and the latency of
/// every request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceStats {
    /// Machine.
    pub machine: String,
    /// Requests served.
    pub requests: u64,
    /// Reads served (DRAMSim3 `num_reads_done`).
    pub reads: u64,
    /// Writes served (`num_writes_done`).
    pub writes: u64,
    /// Reads that found their row open (`num_read_row_hits`).
    pub read_row_hits: u64,
    /// Writes that found their row open (`num_write_row_hits`).
    pub write_row_hits: u64,
    /// Row hits / requests.
    pub row_hit_rate: f64,
    /// ACT commands for requests (`num_act_cmds` less refresh).
    pub activates: u64,
    /// All-bank refreshes due over the run, every rank (`num_ref_cmds`).
    pub refreshes: u64,
    /// First arrival to last data, cycles.
    pub cycles: u64,
    /// The same in nanoseconds: the total memory time.
    #[serde(default)]
    pub total_ns: f64,
    /// Requests that found their bank's row closed (an activate only).
    #[serde(default)]
    pub row_miss_rate: f64,
    /// Requests that found another row open (precharge and activate).
    #[serde(default)]
    pub row_conflict_rate: f64,
    /// Bank-level parallelism: the mean number of banks busy over the run.
    #[serde(default)]
    pub blp: f64,
    /// The mean number of banks busy while at least one is.
    #[serde(default)]
    pub busy_blp: f64,
    /// Bytes moved per second of modelled time over those cycles, GB/s
    /// (`average_bandwidth`).
    pub bandwidth_gbs: f64,
    /// Read latency from entering the controller's queue to the end of its
    /// data, cycles, as DRAMSim3 counts `average_read_latency`.
    pub read_latency: Latency,
    /// Read latency from the trace's arrival cycle (adds the wait for a
    /// free queue slot), cycles.
    pub read_latency_from_arrival: Latency,
    /// Write latency from entering the queue to the end of its data.
    pub write_latency: Latency,
    /// Trace lines skipped (blank, comments).
    pub skipped_lines: u64,
    /// DRAMSim3 lines whose cycle went backwards (served with the line
    /// before).
    pub late_lines: u64,
}

/// Run `trace` through a controller for `machine` with `config`.
pub fn run(
    machine: &Machine,
    config: ControllerConfig,
    trace: &Trace,
) -> Result<TraceStats, TraceError> {
    run_with(machine, config, trace, FrontEnd::Timed)
}

/// How a trace's requests are offered to the controller.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum FrontEnd {
    /// Each request at its arrival cycle as parsed; one that finds its
    /// queue full waits, and the requests after it keep their cycles
    /// (DRAMSim3's trace front end, an open loop).
    #[default]
    Timed,
    /// Ramulator 2's `LoadStoreTrace` front end ticking once every `every`
    /// memory cycles (its clock ratio): at each tick it offers its current
    /// request, and moves to the next only once the controller took it. So
    /// request `i` arrives at the first tick at least `every` cycles after
    /// request `i - 1` entered its queue (ticks at multiples of `every`);
    /// the parsed arrival cycles are ignored. A closed loop: a full queue
    /// delays every request after it. Request 0 arrives at cycle 0.
    Offered {
        /// Memory cycles between two ticks, at least 1.
        every: u64,
    },
}

/// [`run`] with the requests offered as `frontend` says. An `Offered`
/// front end with `every` 0 is refused.
pub fn run_with(
    machine: &Machine,
    config: ControllerConfig,
    trace: &Trace,
    frontend: FrontEnd,
) -> Result<TraceStats, TraceError> {
    if frontend == (FrontEnd::Offered { every: 0 }) {
        return Err(TraceError::ZeroGap);
    }
    let mut mc = Controller::new(machine, config)?;
    let mut read_lat = Vec::with_capacity(trace.requests.len());
    let mut read_arr = Vec::with_capacity(trace.requests.len());
    let mut write_lat = Vec::new();
    let mut s = TraceStats {
        machine: machine.name().to_owned(),
        skipped_lines: trace.skipped,
        late_lines: trace.late,
        ..Default::default()
    };
    let mut record = |c: crate::controller::Completion| {
        let hit = c.outcome == RowOutcome::Hit;
        if c.outcome != RowOutcome::Hit {
            s.activates += 1;
        }
        match c.kind {
            AccessKind::Read => {
                s.reads += 1;
                s.read_row_hits += u64::from(hit);
                read_lat.push(c.done - c.entered);
                read_arr.push(c.done - c.arrival);
            }
            AccessKind::Write => {
                s.writes += 1;
                s.write_row_hits += u64::from(hit);
                write_lat.push(c.done - c.entered);
            }
        }
    };
    for (i, (req, &line)) in trace.requests.iter().zip(&trace.lines).enumerate() {
        let mut req = *req;
        if let FrontEnd::Offered { every } = frontend {
            // The tick the previous request was taken at (a request that
            // found the queue full is retried at every tick until a slot
            // frees), then the next tick.
            req.arrival = if i == 0 {
                0
            } else {
                mc.last_entered().div_ceil(every) * every + every
            };
        }
        mc.submit_with(req, &mut record)
            .map_err(|source| TraceError::Request { line, source })?;
    }
    while let Some(c) = mc.decide_next() {
        record(c);
    }
    let report = mc.report();
    s.requests = report.requests;
    s.row_hit_rate = report.hit_rate;
    s.refreshes = report.refreshes;
    s.cycles = report.total_cycles;
    s.total_ns = report.total_ns;
    s.row_miss_rate = report.miss_rate;
    s.row_conflict_rate = report.conflict_rate;
    s.blp = report.blp;
    s.busy_blp = report.busy_blp;
    s.bandwidth_gbs = report.bandwidth_gbs;
    s.read_latency = Latency::of(read_lat);
    s.read_latency_from_arrival = Latency::of(read_arr);
    s.write_latency = Latency::of(write_lat);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` reads over random-ish lines, as a Ramulator trace (request `i`
    /// at cycle `i`) and as a DRAMSim3 one with request `i` at `i * gap`.
    fn both(n: u64, gap: u64) -> (Trace, Trace) {
        let mut ram = String::new();
        let mut d3 = String::new();
        for i in 0..n {
            let addr = (i * 0x9e37_79b9 % (1 << 30)) & !63;
            ram.push_str(&format!("LD {addr:#x}\n"));
            d3.push_str(&format!("{addr:#x} READ {}\n", i * gap));
        }
        (
            parse(ram.as_bytes(), TraceFormat::Ramulator).unwrap(),
            parse(d3.as_bytes(), TraceFormat::Dramsim3).unwrap(),
        )
    }

    #[test]
    fn an_offered_front_end_is_timed_below_saturation_and_a_closed_loop_above() {
        let m = Machine::preset("ddr4-2400-dramsim3").unwrap();
        let c = ControllerConfig::default();
        // Below saturation every request is taken at its tick: the same
        // run as the timed trace with request i at cycle i * gap.
        let (ram, d3) = both(2000, 100);
        let offered = run_with(&m, c, &ram, FrontEnd::Offered { every: 100 }).unwrap();
        assert_eq!(offered, run(&m, c, &d3).unwrap());
        // Saturated: the timed trace's requests pile up before a full
        // queue, each waiting longer than the last; the closed loop offers
        // the next only when the last was taken, so it waits at most for
        // the next slot to free.
        let (ram, _) = both(20_000, 1);
        let timed = run(&m, c, &ram).unwrap();
        let offered = run_with(&m, c, &ram, FrontEnd::Offered { every: 1 }).unwrap();
        assert_eq!((offered.reads, timed.reads), (20_000, 20_000));
        let wait = |s: &TraceStats| s.read_latency_from_arrival.mean - s.read_latency.mean;
        assert!(wait(&offered) < 20.0, "{}", wait(&offered));
        assert!(wait(&timed) > 1000.0, "{}", wait(&timed));
        assert!(matches!(
            run_with(&m, c, &ram, FrontEnd::Offered { every: 0 }),
            Err(TraceError::ZeroGap)
        ));
    }

    #[test]
    fn both_formats_parse_and_bad_lines_are_named() {
        let t = parse(
            "0x40 READ 5\n\n# note\n80 WRITE 3\n0x100 P_MEM_RD 9\n".as_bytes(),
            TraceFormat::Dramsim3,
        )
        .unwrap();
        let got: Vec<_> = t
            .requests
            .iter()
            .map(|r| (r.paddr, r.kind, r.arrival))
            .collect();
        assert_eq!(
            got,
            [
                (0x40, AccessKind::Read, 5),
                (0x80, AccessKind::Write, 5),
                (0x100, AccessKind::Read, 9)
            ]
        );
        assert_eq!((t.skipped, t.late), (2, 1));
        assert_eq!(t.lines, [1, 4, 5]);

        let t = parse("LD 0x40\nST 4096\n".as_bytes(), TraceFormat::Ramulator).unwrap();
        let got: Vec<_> = t
            .requests
            .iter()
            .map(|r| (r.paddr, r.kind, r.arrival))
            .collect();
        assert_eq!(
            got,
            [(0x40, AccessKind::Read, 0), (4096, AccessKind::Write, 1)]
        );

        for (text, format, why) in [
            ("0x40 READ\n", TraceFormat::Dramsim3, "expected"),
            ("0xzz READ 1\n", TraceFormat::Dramsim3, "hexadecimal"),
            ("0x40 FETCH 1\n", TraceFormat::Dramsim3, "READ or WRITE"),
            ("0x40 READ -1\n", TraceFormat::Dramsim3, "cycle"),
            ("LD 0x40\nLOAD 0x80\n", TraceFormat::Ramulator, "LD or ST"),
            ("LD abc\n", TraceFormat::Ramulator, "number"),
        ] {
            let e = parse(text.as_bytes(), format).unwrap_err().to_string();
            assert!(e.contains(why), "{text:?}: {e}");
            assert!(e.contains("line"), "{e}");
        }
        assert!(matches!(
            "dramsim".parse::<TraceFormat>(),
            Err(TraceError::Format(_))
        ));
    }

    #[test]
    fn run_counts_what_dramsim3_counts_and_refuses_addresses_beyond_memory() {
        let m = Machine::preset("ddr4-2400-dramsim3").unwrap();
        // 256 sequential reads one every 20 cycles: 2 rows of 128 lines.
        let text: String = (0..256u64)
            .map(|i| format!("{:#x} READ {}\n", i * 64, i * 20))
            .collect();
        let t = parse(text.as_bytes(), TraceFormat::Dramsim3).unwrap();
        let no_refresh = ControllerConfig {
            refresh: false,
            ..ControllerConfig::default()
        };
        let s = run(&m, no_refresh, &t).unwrap();
        assert_eq!((s.reads, s.writes, s.requests), (256, 0, 256));
        // Rows are 8 KB: 128 lines; the first line of each row misses.
        assert_eq!((s.read_row_hits, s.activates, s.refreshes), (254, 2, 0));
        // Light load: every hit at tCL + tBURST = 21 cycles.
        assert_eq!(s.read_latency.p50, 21);
        assert_eq!(s.read_latency.count, 256);
        assert_eq!(s.read_latency.max, 38);
        // Rank 0 refreshes at tREFI / 2 = 4680, closing the open row: one
        // more miss, and the read that waits tRFC = 420 for it.
        let s = run(&m, ControllerConfig::default(), &t).unwrap();
        assert_eq!((s.read_row_hits, s.activates, s.refreshes), (253, 3, 1));
        assert!(s.read_latency.max > 400, "{:?}", s.read_latency);

        let beyond = format!("{:#x} READ 0\n", m.memory_bytes());
        let t = parse(beyond.as_bytes(), TraceFormat::Dramsim3).unwrap();
        let e = run(&m, ControllerConfig::default(), &t).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        assert!(e.to_string().contains("beyond"), "{e}");
    }
}
