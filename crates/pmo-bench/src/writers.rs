//! Concurrent writers (`nvmos bench writers`): aggregate psync throughput
//! of N processes each writing its own object of one pool, against one
//! process (nvmos's target: two processes ≥ 1.6× one).
//!
//! Each writer is a forked process with its own open of the pool: it
//! attaches its object for writing, writes every page once untimed (first
//! frames and arenas out of the way), reports ready, waits for the common
//! start, then stages `pages_per_psync` pages and psyncs, sweeping its
//! object, for `bytes_per_writer`. The aggregate is all writers' bytes over
//! the wall time from the common start to the last writer's end. Rows run
//! without a state store (the pool alone) and with one (every psync also
//! rewrites and `fsync`s the store's file: [`nvmos_pmo::state`]).

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use nvmos_pmo::{Access, KdfParams, Perm, Pool, PoolOptions};
use nvmos_sim::study::{Bound, Check, Progress, Scale, Study};
use serde::{Deserialize, Serialize};

use crate::{BenchError, Context};

type Result<T, E = BenchError> = std::result::Result<T, E>;

const PAGE: usize = 4096;
/// nvmos's target: two writers' aggregate over one writer's.
pub const TARGET_SPEEDUP: f64 = 1.6;

/// What to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WritersOptions {
    /// Writer process counts, one row each (the first is the baseline).
    pub processes: Vec<usize>,
    /// Each writer's object, bytes.
    pub object_bytes: u64,
    /// Bytes each writer psyncs in a timed run.
    pub bytes_per_writer: u64,
    /// Pages per psync.
    pub pages_per_psync: usize,
    /// Runs per row; the median aggregate is reported.
    pub rounds: u32,
    /// Objects sealed with AES-256-GCM.
    pub encrypted: bool,
    /// Directory of the pool (`/dev/shm` stands for persistent memory).
    pub dir: PathBuf,
    /// Run the rows with a state store as well (in the system's temporary
    /// directory, a disk file system here).
    pub state_store: bool,
}

impl Default for WritersOptions {
    /// 1 and 2 writers, 16 MiB objects, 256 MiB per writer, 64 pages per
    /// psync, AES-256-GCM, `/dev/shm`, with and without a state store,
    /// median of 3.
    fn default() -> Self {
        WritersOptions {
            processes: vec![1, 2],
            object_bytes: 16 << 20,
            bytes_per_writer: 256 << 20,
            pages_per_psync: 64,
            rounds: 3,
            encrypted: true,
            dir: PathBuf::from("/dev/shm"),
            state_store: true,
        }
    }
}

impl WritersOptions {
    /// `Quick`: 64 MiB per writer, one round.
    pub fn at(scale: Scale) -> Self {
        match scale {
            Scale::Full => Self::default(),
            Scale::Quick => WritersOptions {
                bytes_per_writer: 64 << 20,
                rounds: 1,
                ..Self::default()
            },
        }
    }

    /// Refuse options that cannot run, naming the field.
    pub fn check(&self) -> Result<()> {
        if self.processes.is_empty() || self.processes.contains(&0) {
            return Err(BenchError::Options(
                "processes: at least one count, each at least 1".into(),
            ));
        }
        if self.pages_per_psync == 0 || self.object_bytes < (self.pages_per_psync * PAGE) as u64 {
            return Err(BenchError::Options(format!(
                "object_bytes: the object ({} bytes) must hold at least one psync of {} pages",
                self.object_bytes, self.pages_per_psync
            )));
        }
        if self.rounds == 0 {
            return Err(BenchError::Options("rounds: at least 1".into()));
        }
        Ok(())
    }
}

/// One writer's timed run.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct WriterSample {
    /// Bytes psynced.
    pub bytes: u64,
    /// Its wall-clock seconds.
    pub wall_s: f64,
    /// Its CPU seconds (the writing thread).
    pub cpu_s: f64,
}

/// One round of a row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Round {
    /// All writers' bytes over the wall time from the common start to the
    /// last writer's end, GiB/s.
    pub aggregate_gib_per_s: f64,
    /// Each writer.
    pub writers: Vec<WriterSample>,
}

/// A row: N writers, with or without a state store.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WritersRow {
    /// Writer processes.
    pub processes: usize,
    /// With a state store.
    pub state_store: bool,
    /// Median aggregate GiB/s over the rounds.
    pub aggregate_gib_per_s: f64,
    /// Median over rounds of all writers' bytes per CPU second summed over
    /// writers (GiB per CPU second).
    pub gib_per_cpu_s: f64,
    /// Every round.
    pub rounds: Vec<Round>,
}

/// The result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Writers {
    /// The settings.
    pub options: WritersOptions,
    /// The rows.
    pub rows: Vec<WritersRow>,
    /// Each row's aggregate over the first process count's, same store.
    pub speedups: Vec<(usize, bool, f64)>,
    /// The target, held against this run.
    pub checks: Vec<Check>,
    /// Cores online (the speed-up cannot exceed it).
    pub cpus: usize,
    /// Load average at the start (the machine may be shared).
    pub loadavg: String,
}

/// `nvmos bench writers`.
pub struct WritersBench;

impl Study for WritersBench {
    type Options = WritersOptions;
    type Output = Writers;
    type Error = BenchError;
    const NAME: &'static str = "bench-writers";

    fn options(scale: Scale) -> WritersOptions {
        WritersOptions::at(scale)
    }

    fn run(options: &WritersOptions, progress: &mut dyn FnMut(Progress)) -> Result<Writers> {
        run(options, progress)
    }
}

fn median(v: &[f64]) -> f64 {
    nvmos_measure::stats::median(v).unwrap_or(f64::NAN)
}

/// Run every row.
pub fn run(cfg: &WritersOptions, progress: &mut dyn FnMut(Progress)) -> Result<Writers> {
    cfg.check()?;
    let loadavg = crate::loadavg();
    let stores: Vec<bool> = if cfg.state_store {
        vec![false, true]
    } else {
        vec![false]
    };
    let total = (stores.len() * cfg.processes.len()) as u64 * cfg.rounds as u64;
    let mut done = 0;
    let mut rows = Vec::new();
    for &store in &stores {
        for &n in &cfg.processes {
            let mut rounds = Vec::new();
            for r in 0..cfg.rounds {
                progress(Progress {
                    done,
                    total,
                    step: format!(
                        "{n} writer(s), {} state store, round {}",
                        if store { "with" } else { "no" },
                        r + 1
                    ),
                });
                done += 1;
                rounds.push(one_round(cfg, n, store)?);
            }
            let agg: Vec<f64> = rounds.iter().map(|r| r.aggregate_gib_per_s).collect();
            let cpu: Vec<f64> = rounds
                .iter()
                .map(|r| {
                    let b: u64 = r.writers.iter().map(|w| w.bytes).sum();
                    let c: f64 = r.writers.iter().map(|w| w.cpu_s).sum();
                    b as f64 / c / (1u64 << 30) as f64
                })
                .collect();
            rows.push(WritersRow {
                processes: n,
                state_store: store,
                aggregate_gib_per_s: median(&agg),
                gib_per_cpu_s: median(&cpu),
                rounds,
            });
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut speedups = Vec::new();
    let mut checks = Vec::new();
    for &store in &stores {
        let of = |n: usize| {
            rows.iter()
                .find(|r| r.processes == n && r.state_store == store)
                .map(|r| r.aggregate_gib_per_s)
        };
        let base_n = cfg.processes[0];
        let Some(base) = of(base_n) else { continue };
        for &n in &cfg.processes[1..] {
            let Some(v) = of(n) else { continue };
            let s = v / base;
            speedups.push((n, store, s));
            if base_n == 1 && n == 2 {
                checks.push(
                    Check::new(
                        format!(
                            "two processes writing different objects of one pool ({} state store): aggregate psync throughput over one process",
                            if store { "with a" } else { "no" }
                        ),
                        "nvmos target: concurrent writers of one pool",
                        s,
                        "x",
                        Bound::AtLeast(TARGET_SPEEDUP),
                    )
                    .detail(format!(
                        "{v:.3} GiB/s against {base:.3} GiB/s; {cpus} CPUs online, load average {loadavg} at the start"
                    )),
                );
            }
        }
    }
    Ok(Writers {
        options: cfg.clone(),
        rows,
        speedups,
        checks,
        cpus,
        loadavg,
    })
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two fds we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("creating a pipe");
    }
    // SAFETY: both fds are new and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn one_round(cfg: &WritersOptions, n: usize, store: bool) -> Result<Round> {
    let dir = tempfile::tempdir_in(&cfg.dir)
        .with_context(|| format!("creating a temporary directory in {}", cfg.dir.display()))?;
    let state = tempfile::tempdir().context("creating the state store's directory")?;
    let path = dir.path().join("writers.pool");
    let opts = PoolOptions {
        state_dir: store.then(|| state.path().to_owned()),
        ..PoolOptions::default()
    };
    let key: Option<&[u8]> = cfg.encrypted.then_some(b"benchmark key");
    {
        let pool_size =
            (n as u64 * cfg.object_bytes * 2 + (32 << 20)).next_multiple_of(PAGE as u64);
        let pool = Pool::create_with(&path, pool_size, opts.clone())
            .with_context(|| format!("creating {}", path.display()))?;
        for i in 0..n {
            pool.pcreate_with(
                &format!("w{i}"),
                cfg.object_bytes,
                key,
                KdfParams::default(),
            )
            .context("creating the writers' objects")?;
        }
        // Closed before the fork: a child must not share this open's locks.
    }
    let mut children = Vec::new();
    for i in 0..n {
        let (ready_r, ready_w) = pipe()?;
        let (go_r, go_w) = pipe()?;
        // SAFETY: the child runs only the writer below (its own pool open,
        // no lock another thread of ours may hold) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("forking a writer");
        }
        if pid == 0 {
            drop(ready_r);
            drop(go_w);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                writer(cfg, &path, &opts, &format!("w{i}"), key, &ready_w, &go_r)
            }));
            let line = match r {
                Ok(Ok(s)) => format!("ok {} {} {}\n", s.bytes, s.wall_s, s.cpu_s),
                Ok(Err(e)) => format!("err {}\n", nvmos_pmo::error_chain(&e).replace('\n', " ")),
                Err(_) => "err the writer panicked\n".to_string(),
            };
            let _ = write_all(&ready_w, line.as_bytes());
            // SAFETY: leave without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        drop(ready_w);
        drop(go_r);
        children.push((pid, ready_r, go_w));
    }
    let result = (|| {
        for (_, ready, _) in &children {
            let line = read_line(ready)?;
            if line != "ready" {
                return Err(BenchError::Inconsistent(format!("a writer failed: {line}")));
            }
        }
        let t0 = Instant::now();
        for (_, _, go) in &children {
            write_all(go, b"g").context("starting a writer")?;
        }
        let mut writers = Vec::new();
        for (_, ready, _) in &children {
            let line = read_line(ready)?;
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                ["ok", b, w, c] => writers.push(WriterSample {
                    bytes: b.parse().context("a writer's bytes")?,
                    wall_s: w.parse().context("a writer's seconds")?,
                    cpu_s: c.parse().context("a writer's CPU seconds")?,
                }),
                _ => return Err(BenchError::Inconsistent(format!("a writer failed: {line}"))),
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        let bytes: u64 = writers.iter().map(|w| w.bytes).sum();
        Ok(Round {
            aggregate_gib_per_s: bytes as f64 / wall / (1u64 << 30) as f64,
            writers,
        })
    })();
    for (pid, _, _) in &children {
        let mut st = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(*pid, &mut st, 0) };
    }
    result
}

fn write_all(fd: &OwnedFd, mut b: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    while !b.is_empty() {
        // SAFETY: writing from a live slice to an open fd.
        let n = unsafe { libc::write(fd.as_raw_fd(), b.as_ptr().cast(), b.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        b = &b[n as usize..];
    }
    Ok(())
}

/// One line (without its newline) from a pipe; end of file is an error.
fn read_line(fd: &OwnedFd) -> Result<String> {
    use std::os::fd::AsRawFd;
    let mut out = Vec::new();
    let mut c = 0u8;
    loop {
        // SAFETY: reading one byte into a live byte.
        let n = unsafe { libc::read(fd.as_raw_fd(), (&mut c as *mut u8).cast(), 1) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("reading from a writer");
        }
        if n == 0 {
            return Err(BenchError::Inconsistent(
                "a writer died without reporting".into(),
            ));
        }
        if c == b'\n' {
            return Ok(String::from_utf8_lossy(&out).into_owned());
        }
        out.push(c);
    }
}

/// A writer process's work.
fn writer(
    cfg: &WritersOptions,
    path: &Path,
    opts: &PoolOptions,
    name: &str,
    key: Option<&[u8]>,
    ready: &OwnedFd,
    go: &OwnedFd,
) -> Result<WriterSample> {
    let pool =
        Pool::open_with(path, Access::ReadWrite, opts.clone()).context("opening the pool")?;
    let obj = pool
        .open_object(name, Perm::Write, key)
        .context("attaching the object")?;
    let pages = cfg.object_bytes as usize / PAGE;
    let per = cfg.pages_per_psync;
    let mut buf = vec![0u8; per * PAGE];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i * 131 + (i >> 12)) as u8;
    }
    for k in 0..pages / per {
        for j in 0..per {
            obj.stage(k * per + j, &buf[j * PAGE..(j + 1) * PAGE])
                .context("staging")?;
        }
        obj.psync().context("psync")?;
    }
    write_all(ready, b"ready\n").context("reporting ready")?;
    let _ = read_line_byte(go);
    let psyncs = (cfg.bytes_per_writer as usize / (per * PAGE)).max(1);
    let t0 = Instant::now();
    let c0 = nvmos_measure::timer::thread_cpu_seconds();
    for k in 0..psyncs {
        for j in 0..per {
            let page = (k * per + j) % pages;
            obj.stage(page, &buf[j * PAGE..(j + 1) * PAGE])
                .context("staging")?;
            buf[j * PAGE] ^= k as u8;
        }
        obj.psync().context("psync")?;
    }
    Ok(WriterSample {
        bytes: (psyncs * per * PAGE) as u64,
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: nvmos_measure::timer::thread_cpu_seconds() - c0,
    })
}

/// Wait for the start byte.
fn read_line_byte(fd: &OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut c = 0u8;
    loop {
        // SAFETY: reading one byte into a live byte.
        let n = unsafe { libc::read(fd.as_raw_fd(), (&mut c as *mut u8).cast(), 1) };
        if n >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_writers_run_and_report_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = WritersOptions {
            processes: vec![1, 2],
            object_bytes: 1 << 20,
            bytes_per_writer: 2 << 20,
            pages_per_psync: 16,
            rounds: 1,
            encrypted: true,
            dir: dir.path().to_owned(),
            state_store: true,
        };
        let mut steps = 0;
        let r = run(&cfg, &mut |_| steps += 1).unwrap();
        assert_eq!(steps, 4);
        assert_eq!(r.rows.len(), 4);
        for row in &r.rows {
            for round in &row.rounds {
                assert_eq!(round.writers.len(), row.processes);
                for w in &round.writers {
                    assert_eq!(w.bytes, 2 << 20);
                }
            }
            assert!(row.aggregate_gib_per_s > 0.0);
        }
        assert_eq!(r.checks.len(), 2);
        let e = run(
            &WritersOptions {
                processes: vec![],
                ..cfg
            },
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("processes"), "{e}");
    }
}
