//! Replay and parsing speed: events per second replaying the largest
//! shipped `.nvt` trace through every registry allocator, in one pass
//! over the file with the stream engine, `replay::run` (decoding, tracking and wear
//! counting, building the allocator and summarising included) and as a
//! row of `nvmos evaluate` over the trace resolved once (building and
//! summarising included, decoding and matching not: "resolve .nvt" is
//! that once-per-trace cost), the same row with no events (what every
//! row costs whatever the trace's length), the decoder on its own,
//! and lines per second parsing ftrace text made from the same events,
//! with the fast line scanner and with the reference scanner it is
//! checked against (the ratio is measured in the same run).
//!
//! ```text
//! cargo run --release -p nvmos-sim --example replay_speed [TRACE.nvt] [RUNS] [ALLOCATOR...]
//! ```
//!
//! Without a trace, the largest `.nvt` in `traces/`; without allocators,
//! every one. Prints the median of `RUNS` (default 3) runs of each (a run
//! repeats its pass until it has taken 0.25 s, the clock's ticks being
//! 4 ms here), per second of the thread's own CPU time (Linux's
//! `/proc/thread-self/schedstat`: on a shared machine, a figure per core
//! that other processes' load does not dilute; wall time elsewhere).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use nvmos_frames::sync::SpinYield;
use nvmos_sim::evaluate::{
    study_allocator, study_allocator_resolved, study_as_recorded, study_as_recorded_resolved,
    StudyOptions,
};
use nvmos_sim::replay::Resolved;
use nvmos_sim::AllocatorKind;
use nvmos_trace::{Event, EventSource, Format, NvtReader, Op, TextReader};

/// As in the `nvmos` binary: huge pages for the allocators' tables.
#[global_allocator]
static ALLOC: nvmos_trace::table::HugePageAlloc = nvmos_trace::table::HugePageAlloc;

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let trace = match args.next() {
        Some(path) => PathBuf::from(path),
        None => largest_trace(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../traces"
        )))?,
    };
    let runs: usize = args.next().map_or(Ok(3), |r| r.parse())?.max(1);
    let kinds = args
        .map(|name| name.parse::<AllocatorKind>())
        .collect::<Result<Vec<_>, _>>()?;
    let kinds = if kinds.is_empty() {
        AllocatorKind::ALL.to_vec()
    } else {
        kinds
    };
    let clock = if cpu_ns().is_some() {
        "thread CPU time"
    } else {
        "wall time"
    };
    let header = NvtReader::open(&trace)?
        .header()
        .cloned()
        .ok_or("the trace has no header")?;
    let expected = header.events;
    let machine = header
        .machine
        .ok_or("the trace does not describe its machine")?;
    let options = StudyOptions::default();
    // As in `nvmos evaluate`: a row's freed tables serve the next row.
    let _keep = nvmos_trace::table::KeepFreed::new(nvmos_sim::evaluate::KEEP_FREED_BYTES);
    println!(
        "trace {}, median of {runs} runs, rates per second of {clock}",
        trace.display()
    );

    // Decoding alone.
    let (events, decode) = median(runs, || {
        timed(|| {
            let mut n = 0u64;
            for e in NvtReader::open(&trace)? {
                e?;
                n += 1;
            }
            Ok(n)
        })
    })?;
    println!("{events} events");
    println!(
        "{:<22} {:>8.1} M events/s",
        "decode .nvt",
        rate(events, decode)
    );

    // The recorded placement: decoding, the tracker, wear counting.
    let (_, recorded) = median(runs, || {
        timed(|| {
            Ok(
                study_as_recorded(&machine, NvtReader::open(&trace)?, &options)?
                    .stats
                    .events,
            )
        })
    })?;
    println!(
        "{:<22} {:>8.1} M events/s",
        "Linux (as recorded)",
        rate(events, recorded)
    );
    // What `nvmos evaluate` does once per trace: decode and match.
    let (_, resolve) = median(runs, || {
        timed(|| {
            // As `evaluate` does: tables sized from the header's count.
            let resolved = Resolved::of_expecting(NvtReader::open(&trace)?, expected)?
                .ok_or("too many live blocks")?;
            Ok(resolved.len() as u64)
        })
    })?;
    println!(
        "{:<22} {:>8.1} M events/s (decode and match, once per trace in evaluate)",
        "resolve .nvt",
        rate(events, resolve)
    );
    let resolved = Resolved::of_expecting(NvtReader::open(&trace)?, expected)?
        .ok_or("too many live blocks")?;
    let (_, recorded_resolved) = median(runs, || {
        timed(|| {
            Ok(study_as_recorded_resolved::<std::convert::Infallible>(
                &machine, &resolved, &options,
            )?
            .stats
            .events)
        })
    })?;
    println!(
        "{:<22} {:>8.1} M events/s resolved",
        "Linux (as recorded)",
        rate(events, recorded_resolved)
    );
    for kind in kinds {
        // One pass over the `.nvt` file, as `nvmos replay` does ...
        let (_, secs) = median(runs, || {
            timed(|| {
                let row = study_allocator::<SpinYield, _, _>(
                    kind,
                    &machine,
                    NvtReader::open(&trace)?,
                    &options,
                )?;
                Ok(row.stats.events)
            })
        })?;
        // ... and a row of `nvmos evaluate`, over the trace resolved once.
        let (_, resolved_secs) = median(runs, || {
            timed(|| {
                let row = study_allocator_resolved::<SpinYield, std::convert::Infallible>(
                    kind, &machine, &resolved, &options,
                )?;
                Ok(row.stats.events)
            })
        })?;
        // ... and the same row with no events: building the allocator
        // and the wear counter over the machine, and summarising.
        let (_, empty_secs) = median(runs, || {
            timed(|| {
                let none = std::iter::empty::<Result<Event, std::convert::Infallible>>();
                let row = study_allocator::<SpinYield, _, _>(kind, &machine, none, &options)?;
                Ok(row.stats.events)
            })
        })?;
        println!(
            "{:<22} {:>8.1} M events/s; resolved {:>6.1} M events/s; {:.1} ms of a row with no events",
            kind.name(),
            rate(events, secs),
            rate(events, resolved_secs),
            empty_secs * 1e3
        );
        std::io::stdout().flush()?;
    }

    // Text parsing, of ftrace lines made from the trace's first events.
    let text = ftrace_text(NvtReader::open(&trace)?, 2_000_000)?;
    let lines = text.iter().filter(|&&b| b == b'\n').count() as u64;
    let parse = |reference: bool| {
        median(runs, || {
            timed(|| {
                let mut reader = TextReader::new(&text[..], "bench.txt", Format::Ftrace);
                if reference {
                    reader = reader.reference_scanner();
                }
                let mut n = 0u64;
                for e in reader {
                    e?;
                    n += 1;
                }
                Ok(n)
            })
        })
    };
    let (_, fast) = parse(false)?;
    let (_, reference) = parse(true)?;
    println!(
        "{:<22} {:>8.1} M lines/s ({lines} lines, {:.0} bytes a line)",
        "text, fast scanner",
        rate(lines, fast),
        text.len() as f64 / lines as f64
    );
    println!(
        "{:<22} {:>8.1} M lines/s (fast: {:.2}x)",
        "text, reference",
        rate(lines, reference),
        reference / fast
    );
    Ok(())
}

/// Nanoseconds this thread has run on a CPU, where Linux tells.
fn cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// What `f` counts and the seconds it took: thread CPU time where known,
/// else wall time.
fn timed(f: impl FnOnce() -> Result<u64, Error>) -> Result<(u64, f64), Error> {
    let (cpu, wall) = (cpu_ns(), Instant::now());
    let n = f()?;
    let secs = match (cpu, cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => wall.elapsed().as_secs_f64(),
    };
    Ok((n, secs))
}

/// Millions per second.
fn rate(n: u64, secs: f64) -> f64 {
    n as f64 / secs / 1e6
}

/// Least CPU time one run spends: the thread CPU clock read from
/// `schedstat` advances in scheduler ticks on this VM (4 ms), so a single
/// 60-80 ms pass could only be timed to about 6 %.
const MIN_RUN_SECS: f64 = 0.25;

/// The run with the median time of `runs` runs of `f` (count, seconds per
/// pass). A run repeats `f` until it has taken `MIN_RUN_SECS` and
/// reports the mean pass.
fn median(
    runs: usize,
    mut f: impl FnMut() -> Result<(u64, f64), Error>,
) -> Result<(u64, f64), Error> {
    let mut one_run = || -> Result<(u64, f64), Error> {
        let (mut count, mut secs, mut passes) = (0u64, 0f64, 0u32);
        while passes == 0 || secs < MIN_RUN_SECS {
            let (c, s) = f()?;
            count += c;
            secs += s;
            passes += 1;
        }
        Ok((count / u64::from(passes), secs / f64::from(passes)))
    };
    let mut all = (0..runs)
        .map(|_| one_run())
        .collect::<Result<Vec<_>, _>>()?;
    all.sort_by(|a, b| a.1.total_cmp(&b.1));
    Ok(all[all.len() / 2])
}

fn largest_trace(dir: &Path) -> Result<PathBuf, Error> {
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "nvt") {
            let len = std::fs::metadata(&path)?.len();
            if best.as_ref().is_none_or(|(l, _)| len > *l) {
                best = Some((len, path));
            }
        }
    }
    Ok(best
        .ok_or_else(|| format!("no .nvt trace in {}", dir.display()))?
        .1)
}

/// Up to `max` events as ftrace prints them (`trace` with irq-info).
fn ftrace_text(
    events: impl Iterator<Item = Result<Event, nvmos_trace::TraceError>>,
    max: usize,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    for e in events.take(max) {
        let e = e?;
        // A sampled write has no ftrace line: the text corpus holds the
        // allocation events only.
        if matches!(e.op, Op::Write) {
            continue;
        }
        let (secs, micros) = (e.time_ns / 1_000_000_000, e.time_ns % 1_000_000_000 / 1000);
        let pfn = e.pfn.get();
        let order = e.order.get();
        write!(
            out,
            "     kworker/u8:{}-{:<6} [{:03}] ..... {:>5}.{micros:06}: ",
            e.cpu,
            1000 + e.cpu,
            e.cpu,
            secs + 1000
        )?;
        match e.op {
            Op::Alloc(kind) => writeln!(
                out,
                "mm_page_alloc: page={:016x} pfn={pfn:#x} order={order} migratetype={} gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_ZERO",
                pfn.wrapping_mul(0x9e37_79b9),
                kind as u8
            )?,
            Op::Free => writeln!(
                out,
                "mm_page_free: page={:016x} pfn={pfn:#x} order={order}",
                pfn.wrapping_mul(0x9e37_79b9)
            )?,
            Op::Write => unreachable!("skipped above"),
        }
    }
    Ok(out)
}
