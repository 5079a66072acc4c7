//! psync throughput of a persistent memory object, one core, against
//! PMDK's libpmemobj on the same medium in the same run (`nvmos bench
//! psync`).
//!
//! Each run sweeps an object sequentially, staging `pages_per_psync` 4 KiB
//! pages and psyncing them, after one untimed pass that writes every page
//! once (first-touch faults out of the way). Media: a pool file in
//! `/dev/shm` treated as persistent memory (cache-line write-back and a
//! fence; PMDK with `PMEM_IS_PMEM_FORCE=1` does the same), and a pool file
//! on disk (`msync`; PMDK uses `msync` there too). PMDK's program
//! (`crates/pmo-bench/pmdk_psync.c`) is compiled with `cc -lpmemobj` in
//! the run; when it cannot be (no `cc`, no libpmemobj), its rows are in
//! the result with `missing` saying why, and the ratio checks against it
//! are unmet with the reason: never left out.
//!
//! Beside it, `psync_many` of N objects against N single psyncs in the
//! same run ([`GroupRow`]): N encrypted objects, a few pages each per
//! commit, microseconds per object with one psync each and with one group
//! commit of all of them, on both media.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use nvmos_measure::stats::median_index;
use nvmos_pmo::{KdfParams, Perm, Pool, StateCommit};
use nvmos_sim::study::{Bound, Check, Progress, Scale, Study};
use serde::{Deserialize, Serialize};

use crate::{BenchError, Context};

type Result<T, E = BenchError> = std::result::Result<T, E>;

const PAGE: usize = 4096;
const PMDK_SOURCE: &str = include_str!("../pmdk_psync.c");

/// nvmos's psync throughput target with encryption.
pub const TARGET_GIB_PER_S: f64 = 2.0;

/// What to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PsyncOptions {
    /// Object size in bytes.
    pub object_bytes: u64,
    /// Bytes psynced per timed run on persistent memory.
    pub pmem_bytes: u64,
    /// Bytes psynced per timed run on disk.
    pub disk_bytes: u64,
    /// Pages per psync (PMDK: per transaction).
    pub pages_per_psync: usize,
    /// Runs per row; the median is reported.
    pub rounds: u32,
    /// Directory standing for persistent memory.
    pub pmem_dir: PathBuf,
    /// Directory on a disk file system; `None`: the system's temporary
    /// directory.
    pub disk_dir: Option<PathBuf>,
    /// The CPU everything runs on.
    pub cpu: usize,
    /// `psync_many` against single psyncs: for each N here, N encrypted
    /// objects get `group_pages` new pages each per commit, committed by
    /// N psyncs or by one `psync_many`, on each medium. Empty: not run.
    pub group_objects: Vec<usize>,
    /// Pages staged in each object per commit, for `group_objects`.
    pub group_pages: usize,
    /// Commits per timed run, for `group_objects`.
    pub group_commits: usize,
}

impl Default for PsyncOptions {
    /// The full run: a 64 MiB object, 1 GiB per run on `/dev/shm`, 64 MiB
    /// on disk, 64 pages per psync, median of 3.
    fn default() -> Self {
        PsyncOptions {
            object_bytes: 64 << 20,
            pmem_bytes: 1 << 30,
            disk_bytes: 64 << 20,
            pages_per_psync: 64,
            rounds: 3,
            pmem_dir: PathBuf::from("/dev/shm"),
            disk_dir: None,
            cpu: 0,
            group_objects: vec![2, 8],
            group_pages: 4,
            group_commits: 40,
        }
    }
}

impl PsyncOptions {
    /// The options at `scale`: `Quick` is 256 MiB per run on persistent
    /// memory, 8 MiB on disk, one round.
    pub fn at(scale: Scale) -> Self {
        match scale {
            Scale::Full => Self::default(),
            Scale::Quick => PsyncOptions {
                pmem_bytes: 256 << 20,
                disk_bytes: 8 << 20,
                rounds: 1,
                group_commits: 10,
                ..Self::default()
            },
        }
    }

    /// The disk directory the run uses.
    pub fn disk_dir(&self) -> PathBuf {
        self.disk_dir.clone().unwrap_or_else(std::env::temp_dir)
    }

    /// Refuse options that cannot run, naming the field.
    pub fn check(&self) -> Result<()> {
        if self.pages_per_psync == 0 || self.object_bytes < (self.pages_per_psync * PAGE) as u64 {
            return Err(BenchError::Options(format!(
                "object_bytes: the object ({} bytes) must hold at least one psync of {} pages",
                self.object_bytes, self.pages_per_psync
            )));
        }
        if self.rounds == 0 {
            return Err(BenchError::Options("rounds: at least 1".into()));
        }
        if let Some(n) = self
            .group_objects
            .iter()
            .find(|&&n| !(2..=nvmos_pmo::layout::MAX_GROUP).contains(&n))
        {
            return Err(BenchError::Options(format!(
                "group_objects: {n} is outside 2..={} (what one psync_many commits)",
                nvmos_pmo::layout::MAX_GROUP
            )));
        }
        if !self.group_objects.is_empty()
            && (self.group_pages == 0
                || self.group_pages > GROUP_OBJECT_PAGES
                || self.group_commits == 0)
        {
            return Err(BenchError::Options(format!(
                "group_pages: 1..={GROUP_OBJECT_PAGES} pages and group_commits at least 1 (got {} and {})",
                self.group_pages, self.group_commits
            )));
        }
        Ok(())
    }

    /// Progress steps of a run: the rows, then the group runs.
    pub fn steps(&self) -> u64 {
        ROWS + 2 * STORE_SETTINGS.len() as u64 * self.group_objects.len() as u64
    }
}

/// Pages of each object in the `psync_many` runs.
const GROUP_OBJECT_PAGES: usize = 64;

/// `psync_many` of N objects against N single psyncs on one medium.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GroupRow {
    /// The medium.
    pub medium: String,
    /// Objects committed together.
    pub objects: usize,
    /// With a state store (in the disk directory), and how psync's
    /// records reached it: its crash-safe update (write, fsync, rename,
    /// folder fsync) once per psync and once per psync_many, or deferred
    /// to the committer thread. `None`: no store.
    pub state_commit: Option<StateCommit>,
    /// Pages staged in each object per commit.
    pub pages_per_object: usize,
    /// Median microseconds per object (staging and commit) with one psync
    /// per object.
    pub single_us_per_object: Option<f64>,
    /// Median microseconds per object with one psync_many of all of them.
    pub many_us_per_object: Option<f64>,
    /// Every round: (single, many) microseconds per object.
    pub rounds: Vec<(f64, f64)>,
    /// Why there is no figure.
    pub missing: Option<String>,
}

impl GroupRow {
    /// Single psyncs' time over psync_many's (above 1: psync_many is faster).
    pub fn speedup(&self) -> Option<f64> {
        Some(self.single_us_per_object? / self.many_us_per_object?)
    }
}

/// One row: a system on a medium.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// Which system and setting.
    pub system: String,
    /// "pmem (/dev/shm)" or "disk (...)".
    pub medium: String,
    /// Median GiB per wall-clock second over the rounds; `None` when it
    /// could not run (`missing` says why).
    pub gib_per_s: Option<f64>,
    /// Median GiB per CPU second.
    pub gib_per_cpu_s: Option<f64>,
    /// Every round that ran.
    pub rounds: Vec<Sample>,
    /// Why there is no figure: the row is missing, not left out.
    pub missing: Option<String>,
}

/// Encrypted nvmos psync over PMDK's undo-logged transaction on a medium.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ratio {
    /// The medium.
    pub medium: String,
    /// By wall time; `None` when a row is missing.
    pub wall: Option<f64>,
    /// By CPU time.
    pub cpu: Option<f64>,
    /// Sealing on every CPU (the all-CPUs row) over PMDK, by wall time.
    pub all_cpus_wall: Option<f64>,
    /// The same by CPU time (every thread's CPU time counted).
    pub all_cpus_cpu: Option<f64>,
}

/// The benchmark's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Psync {
    /// The settings.
    pub options: PsyncOptions,
    /// The rows.
    pub rows: Vec<Row>,
    /// nvmos psync with AES-256-GCM over PMDK's undo-logged transaction,
    /// per medium.
    pub ratios: Vec<Ratio>,
    /// psync_many against single psyncs (no state store, encrypted
    /// objects), per medium and group size.
    pub groups: Vec<GroupRow>,
    /// The target and the comparison with PMDK, held against this run.
    pub checks: Vec<Check>,
    /// Load average when the run started (the machine may be shared).
    pub loadavg: String,
}

impl Psync {
    /// The rows without a figure.
    pub fn missing(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.gib_per_s.is_none())
    }
}

impl Study for Psync {
    type Options = PsyncOptions;
    type Output = Psync;
    type Error = BenchError;
    const NAME: &'static str = "bench-psync";

    fn options(scale: Scale) -> PsyncOptions {
        PsyncOptions::at(scale)
    }

    fn run(options: &PsyncOptions, progress: &mut dyn FnMut(Progress)) -> Result<Psync> {
        run(options, progress)
    }
}

fn gib(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / (1u64 << 30) as f64
}

fn pin(cpu: usize) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t with one bit set, for this thread; the
    // PMDK child process inherits it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("pinning to CPU {cpu}"));
        }
    }
    Ok(())
}

/// Every CPU, for this thread (the run is pinned to one otherwise).
fn unpin() -> Result<()> {
    // SAFETY: a zeroed cpu_set_t with every online CPU's bit set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        for cpu in 0..cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error()).context("unpinning");
        }
    }
    Ok(())
}

/// CPU seconds of the whole process (every sealing thread).
fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// One timed nvmos run on all CPUs: each psync's pages are sealed in
/// parallel (`ObjectHandle::stage_many`, as an attachment's psync of many
/// dirty pages does) by a pool of one thread per CPU; per-CPU-second
/// figures count every thread of the process.
fn nvmos_run_parallel(cfg: &PsyncOptions, dir: &Path, bytes: u64) -> Result<Sample> {
    unpin()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| BenchError::Inconsistent(format!("starting {threads} sealing threads: {e}")));
    let r = pool.and_then(|pool| pool.install(|| nvmos_run(cfg, dir, bytes, true, true)));
    pin(cfg.cpu)?;
    r
}

/// One timed nvmos run: returns GiB/s.
fn nvmos_run(
    cfg: &PsyncOptions,
    dir: &Path,
    bytes: u64,
    encrypted: bool,
    parallel: bool,
) -> Result<Sample> {
    let path = dir.join(format!("nvmos-bench-psync-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let result = (|| {
        let pool_size = (cfg.object_bytes * 2 + (16 << 20)).next_multiple_of(PAGE as u64);
        let pool = Pool::create(&path, pool_size)?;
        let key: Option<&[u8]> = encrypted.then_some(b"benchmark key");
        pool.pcreate_with("bench", cfg.object_bytes, key, KdfParams::default())?;
        let obj = pool.open_object("bench", Perm::Write, key)?;
        let pages = (cfg.object_bytes as usize) / PAGE;
        let per = cfg.pages_per_psync;
        let mut buf = vec![0u8; per * PAGE];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i * 131 + (i >> 12)) as u8;
        }
        // Untimed pass: every page written once.
        for k in 0..pages / per {
            for j in 0..per {
                obj.stage(k * per + j, &buf[j * PAGE..(j + 1) * PAGE])?;
            }
            obj.psync()?;
        }
        let psyncs = (bytes as usize / (per * PAGE)).max(1);
        let cpu_now = if parallel {
            process_cpu_seconds
        } else {
            nvmos_measure::timer::thread_cpu_seconds
        };
        let t0 = Instant::now();
        let c0 = cpu_now();
        for k in 0..psyncs {
            // Each psync's pages are staged as one batch, as an
            // attachment's psync stages its dirty pages.
            let batch: Vec<(usize, &[u8])> = (0..per)
                .map(|j| ((k * per + j) % pages, &buf[j * PAGE..(j + 1) * PAGE]))
                .collect();
            if parallel {
                obj.stage_many(&batch)?;
            } else {
                obj.stage_pages(&batch)?;
            }
            for j in 0..per {
                buf[j * PAGE] ^= k as u8;
            }
            obj.psync()?;
        }
        let secs = t0.elapsed().as_secs_f64();
        let cpu = cpu_now() - c0;
        let b = (psyncs * per * PAGE) as u64;
        Ok::<Sample, nvmos_pmo::PmoError>(Sample {
            wall: gib(b, secs),
            cpu: gib(b, cpu),
        })
    })();
    let _ = std::fs::remove_file(&path);
    result.with_context(|| format!("nvmos psync on {}", dir.display()))
}

/// One round of `psync_many` against single psyncs: `n` encrypted
/// objects, each given `group_pages` new pages per commit, committed
/// `group_commits` times by n psyncs, and as often by one psync_many,
/// interleaved. Returns microseconds per object: (single, many), staging
/// included.
fn group_run(
    cfg: &PsyncOptions,
    dir: &Path,
    n: usize,
    store: Option<StateCommit>,
    round: u32,
) -> Result<(f64, f64)> {
    let state = if store.is_some() {
        let d = tempfile::Builder::new()
            .prefix("nvmos-bench-state-")
            .tempdir_in(cfg.disk_dir())
            .context("creating a state store folder")?;
        Some(d)
    } else {
        None
    };
    let path = dir.join(format!("nvmos-bench-group-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let result = (|| {
        let pages = GROUP_OBJECT_PAGES;
        let pool_size = ((n * pages * 3 * PAGE) as u64 + (16 << 20)).next_multiple_of(PAGE as u64);
        let opts = nvmos_pmo::PoolOptions {
            state_dir: state.as_ref().map(|d| d.path().to_path_buf()),
            state_commit: store.unwrap_or_default(),
            ..Default::default()
        };
        let pool = Pool::create_with(&path, pool_size, opts)?;
        let key: &[u8] = b"benchmark key";
        let mut hs = Vec::with_capacity(n);
        for i in 0..n {
            let name = format!("g{i}");
            pool.pcreate_with(
                &name,
                (pages * PAGE) as u64,
                Some(key),
                KdfParams::INSECURE_FAST,
            )?;
            hs.push(pool.open_object(&name, Perm::Write, Some(key))?);
        }
        let mut page = vec![0x5au8; PAGE];
        for h in &hs {
            for p in 0..pages {
                h.stage(p, &page)?;
            }
            h.psync()?;
        }
        let refs: Vec<&nvmos_pmo::ObjectHandle> = hs.iter().collect();
        let mut stage =
            |h: &nvmos_pmo::ObjectHandle, k: usize| -> Result<(), nvmos_pmo::PmoError> {
                for j in 0..cfg.group_pages {
                    page[0] = page[0].wrapping_add(1);
                    h.stage((k * cfg.group_pages + j) % pages, &page)?;
                }
                Ok(())
            };
        // Interleaved commit by commit (the order alternating), so a
        // change in the machine's load falls on both alike.
        let (mut single, mut many) = (0f64, 0f64);
        for k in 0..cfg.group_commits {
            let even = (k + round as usize).is_multiple_of(2);
            for many_turn in [even, !even] {
                let t0 = Instant::now();
                for h in &hs {
                    stage(h, k)?;
                    if !many_turn {
                        h.psync()?;
                    }
                }
                if many_turn {
                    pool.psync_many_handles(&refs)?;
                    many += t0.elapsed().as_secs_f64();
                } else {
                    single += t0.elapsed().as_secs_f64();
                }
            }
        }
        // Deferred records still owed to the store are the open's work
        // too: its end waits for them (not counted in either column, which
        // share it alike).
        pool.sync_state()?;
        let per = 1e6 / (cfg.group_commits * n) as f64;
        let (single, many) = (single * per, many * per);
        Ok::<_, nvmos_pmo::PmoError>((single, many))
    })();
    let _ = std::fs::remove_file(&path);
    result.with_context(|| format!("psync_many of {n} objects on {}", dir.display()))
}

fn group_row(
    cfg: &PsyncOptions,
    medium: &str,
    dir: &Path,
    n: usize,
    store: Option<StateCommit>,
) -> GroupRow {
    let mut rounds = Vec::new();
    let mut missing = None;
    for round in 0..cfg.rounds {
        match group_run(cfg, dir, n, store, round) {
            Ok(r) => rounds.push(r),
            Err(e) => {
                missing = Some(nvmos_pmo::error_chain(&e));
                break;
            }
        }
    }
    let median = |f: fn(&(f64, f64)) -> f64| {
        let v: Vec<f64> = rounds.iter().map(f).collect();
        if missing.is_some() {
            return None;
        }
        median_index(&v).map(|i| v[i])
    };
    GroupRow {
        medium: medium.to_string(),
        objects: n,
        state_commit: store,
        pages_per_object: cfg.group_pages,
        single_us_per_object: median(|r| r.0),
        many_us_per_object: median(|r| r.1),
        rounds,
        missing,
    }
}

/// The cipher alone: AES-256-GCM sealing 4 KiB pages from one buffer into
/// another, both in cache, with the page's associated data: the ceiling
/// for psync with encryption on this core.
fn seal_only(bytes: u64) -> Result<Sample> {
    use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
    let cipher = LessSafeKey::new(
        UnboundKey::new(&AES_256_GCM, &[0x5a; 32]).expect("AES-256 takes a 32-byte key"),
    );
    let src = vec![0x11u8; PAGE];
    let mut dst = vec![0u8; PAGE];
    let pages = (bytes as usize / PAGE).max(1);
    let t0 = Instant::now();
    let c0 = nvmos_measure::timer::thread_cpu_seconds();
    let mut sink = 0u8;
    for v in 0..pages as u64 {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&v.to_le_bytes());
        let mut aad = [0u8; 24];
        aad[16..].copy_from_slice(&v.to_le_bytes());
        // As the pool does: copy the page into the output, seal in place.
        dst.copy_from_slice(&src);
        let tag = cipher
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut dst,
            )
            .map_err(|_| BenchError::Inconsistent("AES-GCM refused a 4 KiB page".into()))?;
        sink ^= tag.as_ref()[0];
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = nvmos_measure::timer::thread_cpu_seconds() - c0;
    std::hint::black_box(sink);
    let b = (pages * PAGE) as u64;
    Ok(Sample {
        wall: gib(b, secs),
        cpu: gib(b, cpu),
    })
}

/// Build the PMDK program (both variants) in `dir`.
fn build_pmdk(dir: &Path) -> Result<[PathBuf; 2]> {
    Ok([
        crate::build_pmdk_program(dir, "pmdk_undo", PMDK_SOURCE, &[])?,
        crate::build_pmdk_program(dir, "pmdk_nosnap", PMDK_SOURCE, &["-DNO_SNAPSHOT"])?,
    ])
}

fn pmdk_run(
    exe: &Path,
    cfg: &PsyncOptions,
    dir: &Path,
    bytes: u64,
    force_pmem: bool,
) -> Result<Sample> {
    let path = dir.join(format!("nvmos-bench-pmdk-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut cmd = Command::new(exe);
    cmd.arg(&path)
        .arg(cfg.object_bytes.to_string())
        .arg(bytes.to_string())
        .arg(cfg.pages_per_psync.to_string());
    if force_pmem {
        cmd.env("PMEM_IS_PMEM_FORCE", "1");
    } else {
        cmd.env_remove("PMEM_IS_PMEM_FORCE");
    }
    let o = cmd.output().context("running the PMDK program");
    let _ = std::fs::remove_file(&path);
    let o = o?;
    if !o.status.success() {
        return Err(BenchError::Inconsistent(format!(
            "PMDK program failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let mut f = text.split_whitespace();
    let (Some(b), Some(s), Some(c)) = (f.next(), f.next(), f.next()) else {
        return Err(BenchError::Inconsistent(format!(
            "PMDK program printed {text:?}"
        )));
    };
    let b: u64 = b.parse().context("PMDK bytes")?;
    let s: f64 = s.parse().context("PMDK seconds")?;
    let c: f64 = c.parse().context("PMDK CPU seconds")?;
    Ok(Sample {
        wall: gib(b, s),
        cpu: gib(b, c),
    })
}

/// One timed run: GiB per second of wall time and per second of CPU time
/// (the machine may be shared; CPU time leaves out time spent descheduled).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Sample {
    /// GiB per wall-clock second.
    pub wall: f64,
    /// GiB per CPU second of the measuring thread (PMDK: process).
    pub cpu: f64,
}

fn row(
    system: &str,
    medium: &str,
    rounds: u32,
    mut f: impl FnMut() -> Result<Sample, String>,
) -> Row {
    let mut values: Vec<Sample> = Vec::new();
    for _ in 0..rounds {
        match f() {
            Ok(v) => values.push(v),
            Err(why) => {
                return Row {
                    system: system.into(),
                    medium: medium.into(),
                    gib_per_s: None,
                    gib_per_cpu_s: None,
                    rounds: values,
                    missing: Some(why),
                }
            }
        }
    }
    let wall: Vec<f64> = values.iter().map(|s| s.wall).collect();
    let cpu: Vec<f64> = values.iter().map(|s| s.cpu).collect();
    Row {
        system: system.into(),
        medium: medium.into(),
        gib_per_s: median_index(&wall).map(|i| wall[i]),
        gib_per_cpu_s: median_index(&cpu).map(|i| cpu[i]),
        rounds: values,
        missing: None,
    }
}

/// The encrypted nvmos row's name.
pub const NVMOS_AES: &str = "nvmos psync, AES-256-GCM";
/// The encrypted nvmos row sealing on every CPU.
pub const NVMOS_AES_ALL_CPUS: &str = "nvmos psync, AES-256-GCM, sealing on all CPUs";
/// nvmos's target: encrypted psync over PMDK's undo log.
pub const TARGET_OVER_PMDK: f64 = 2.0;
/// PMDK's undo-logged transaction row's name.
pub const PMDK_UNDO: &str = "PMDK libpmemobj tx (undo log)";
/// PMDK's transaction without a snapshot: each byte written once, no log.
pub const PMDK_NO_SNAPSHOT: &str = "PMDK libpmemobj tx (no snapshot)";

/// Rows in all: the cipher alone, then five systems on each of two media.
pub const ROWS: u64 = 11;

/// Run every row, reporting each as it starts. A row that cannot run (no
/// PMDK, a medium that failed) is in the result with `missing` set; only
/// options that cannot run and a failure to pin or make a temporary
/// directory are errors.
pub fn run(cfg: &PsyncOptions, progress: &mut dyn FnMut(Progress)) -> Result<Psync> {
    cfg.check()?;
    pin(cfg.cpu)?;
    let loadavg = crate::loadavg();
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let pmdk = build_pmdk(tmp.path()).map_err(|e| nvmos_pmo::error_chain(&e));
    let disk_dir = cfg.disk_dir();
    let media = [
        (
            format!("pmem ({})", cfg.pmem_dir.display()),
            &cfg.pmem_dir,
            cfg.pmem_bytes,
            true,
        ),
        (
            format!("disk ({})", disk_dir.display()),
            &disk_dir,
            cfg.disk_bytes,
            false,
        ),
    ];
    let mut done = 0;
    let total = cfg.steps();
    let mut step = |what: String| {
        progress(Progress {
            done,
            total,
            step: what,
        });
        done += 1;
    };
    let mut rows = Vec::new();
    let mut ratios = Vec::new();
    step("AES-256-GCM seal only".into());
    rows.push(row(
        "AES-256-GCM seal only (ceiling)",
        "cache",
        cfg.rounds,
        || seal_only(cfg.pmem_bytes).map_err(|e| nvmos_pmo::error_chain(&e)),
    ));
    for (medium, dir, bytes, pmem) in &media {
        type Measure<'a> = Box<dyn Fn() -> Result<Sample, String> + 'a>;
        let pmdk_row = |which: usize| -> Measure {
            let pmdk = &pmdk;
            Box::new(move || match pmdk {
                Ok(exes) => pmdk_run(&exes[which], cfg, dir, *bytes, *pmem)
                    .map_err(|e| nvmos_pmo::error_chain(&e)),
                Err(why) => Err(format!("the PMDK baseline could not be built: {why}")),
            })
        };
        let systems: [(&str, Measure); 5] = [
            (
                NVMOS_AES,
                Box::new(|| {
                    nvmos_run(cfg, dir, *bytes, true, false).map_err(|e| nvmos_pmo::error_chain(&e))
                }),
            ),
            (
                "nvmos psync, no encryption",
                Box::new(|| {
                    nvmos_run(cfg, dir, *bytes, false, false)
                        .map_err(|e| nvmos_pmo::error_chain(&e))
                }),
            ),
            (PMDK_UNDO, pmdk_row(0)),
            (PMDK_NO_SNAPSHOT, pmdk_row(1)),
            (
                NVMOS_AES_ALL_CPUS,
                Box::new(|| {
                    nvmos_run_parallel(cfg, dir, *bytes).map_err(|e| nvmos_pmo::error_chain(&e))
                }),
            ),
        ];
        let first = rows.len();
        for (name, f) in systems.iter() {
            step(format!("{name} on {medium}"));
            rows.push(row(name, medium, cfg.rounds, f));
        }
        let ratio = |f: fn(&Row) -> Option<f64>| match (f(&rows[first]), f(&rows[first + 2])) {
            (Some(a), Some(b)) => Some(a / b),
            _ => None,
        };
        let all_cpus = |f: fn(&Row) -> Option<f64>| match (f(&rows[first + 4]), f(&rows[first + 2]))
        {
            (Some(a), Some(b)) => Some(a / b),
            _ => None,
        };
        ratios.push(Ratio {
            medium: medium.clone(),
            wall: ratio(|r| r.gib_per_s),
            cpu: ratio(|r| r.gib_per_cpu_s),
            all_cpus_wall: all_cpus(|r| r.gib_per_s),
            all_cpus_cpu: all_cpus(|r| r.gib_per_cpu_s),
        });
    }
    let mut groups = Vec::new();
    for (medium, dir, _, _) in &media {
        for (&n, store) in cfg
            .group_objects
            .iter()
            .flat_map(|n| STORE_SETTINGS.map(|store| (n, store)))
        {
            step(format!("psync_many of {n} objects on {medium}"));
            groups.push(group_row(cfg, medium, dir, n, store));
        }
    }
    progress(Progress {
        done: total,
        total,
        step: "done".into(),
    });
    let checks = checks(&rows, &ratios, &groups);
    Ok(Psync {
        options: cfg.clone(),
        rows,
        ratios,
        groups,
        checks,
        loadavg,
    })
}

/// The target (encrypted psync at 2 GiB/s on persistent memory) and the
/// comparison with PMDK's undo log on each medium. A check whose figure
/// could not be measured is unmet, with the reason in its detail.
/// The state store settings each `psync_many` group size is run with.
const STORE_SETTINGS: [Option<StateCommit>; 3] = [
    None,
    Some(StateCommit::Deferred),
    Some(StateCommit::EveryPsync),
];

/// The most a state store may add to a psync: its time over the same
/// psync without a store, by the same run.
const TARGET_STORE_OVERHEAD: f64 = 1.5;

fn checks(rows: &[Row], ratios: &[Ratio], groups: &[GroupRow]) -> Vec<Check> {
    let mut checks = Vec::new();
    let why = |r: &Row| r.missing.clone().unwrap_or_default();
    if let Some(aes) = rows.iter().find(|r| r.system == NVMOS_AES) {
        checks.push(
            Check::new(
                format!(
                    "nvmos psync with AES-256-GCM on {} at least {TARGET_GIB_PER_S} GiB/s",
                    aes.medium
                ),
                "nvmos target: psync with encryption",
                aes.gib_per_s.unwrap_or(f64::NAN),
                "GiB/s",
                Bound::AtLeast(TARGET_GIB_PER_S),
            )
            .detail(match aes.gib_per_s {
                Some(_) => format!(
                    "wall-clock; {} GiB per CPU-second of the measuring thread",
                    aes.gib_per_cpu_s.map_or("-".into(), |v| format!("{v:.3}"))
                ),
                None => format!("not measured: {}", why(aes)),
            }),
        );
    }
    for ratio in ratios {
        let missing: Vec<String> = rows
            .iter()
            .filter(|r| {
                r.medium == ratio.medium && (r.system == NVMOS_AES || r.system == PMDK_UNDO)
            })
            .filter_map(|r| r.missing.as_ref().map(|m| format!("{}: {m}", r.system)))
            .collect();
        checks.push(
            Check::new(
                format!("nvmos psync with AES-256-GCM at least as fast as PMDK's undo-logged transaction (no encryption) on {}", ratio.medium),
                "nvmos target: psync against PMDK in the same run",
                ratio.wall.unwrap_or(f64::NAN),
                "x",
                Bound::AtLeast(1.0),
            )
            .detail(if missing.is_empty() {
                format!(
                    "by wall time; {} by CPU time",
                    ratio.cpu.map_or("-".into(), |v| format!("{v:.2}x"))
                )
            } else {
                format!("not measured: {}", missing.join("; "))
            }),
        );
        let best = [ratio.wall, ratio.all_cpus_wall]
            .into_iter()
            .flatten()
            .fold(f64::NAN, f64::max);
        // What writing each byte once costs on this medium, in the same
        // run: no psync that writes each page once goes faster than
        // PMDK's transaction without a log does.
        let gib = |system: &str| {
            rows.iter()
                .find(|r| r.medium == ratio.medium && r.system == system)
                .and_then(|r| r.gib_per_s)
        };
        let ceiling = match (gib(PMDK_NO_SNAPSHOT), gib(PMDK_UNDO)) {
            (Some(once), Some(undo)) if undo > 0.0 => format!(
                "; PMDK's transaction without a snapshot (each byte written once, no log) is {:.2}x its undo-logged one here, the most any psync that writes each page once can reach",
                once / undo
            ),
            _ => String::new(),
        };
        checks.push(
            Check::new(
                format!("nvmos psync with AES-256-GCM at least {TARGET_OVER_PMDK}x PMDK's undo-logged transaction on {} (one core or sealing on all CPUs)", ratio.medium),
                "nvmos target: psync with encryption against PMDK in the same run",
                best,
                "x",
                Bound::AtLeast(TARGET_OVER_PMDK),
            )
            .detail(format!(
                "by wall time: one core {}, all CPUs {}; per CPU-second: one core {}, all CPUs {}{ceiling}{}",
                fmt_ratio(ratio.wall),
                fmt_ratio(ratio.all_cpus_wall),
                fmt_ratio(ratio.cpu),
                fmt_ratio(ratio.all_cpus_cpu),
                if missing.is_empty() { String::new() } else { format!("; not measured: {}", missing.join("; ")) }
            )),
        );
    }
    // The state store's cost, for single psyncs, per medium and group
    // size: its default (deferred) setting against no store at all.
    for with in groups
        .iter()
        .filter(|g| g.state_commit == Some(StateCommit::Deferred))
    {
        let Some(without) = groups.iter().find(|g| {
            g.medium == with.medium && g.objects == with.objects && g.state_commit.is_none()
        }) else {
            continue;
        };
        let every = groups.iter().find(|g| {
            g.medium == with.medium
                && g.objects == with.objects
                && g.state_commit == Some(StateCommit::EveryPsync)
        });
        let over = |g: &GroupRow| Some(g.single_us_per_object? / without.single_us_per_object?);
        let missing: Vec<String> = [Some(with), Some(without), every]
            .into_iter()
            .flatten()
            .filter_map(|g| g.missing.clone())
            .collect();
        checks.push(
            Check::new(
                format!(
                    "psync with the state store (deferred records) within {TARGET_STORE_OVERHEAD}x of psync without one on {}, {} objects of {} pages",
                    with.medium, with.objects, with.pages_per_object
                ),
                "nvmos target: rollback protection at the cost of a psync",
                over(with).unwrap_or(f64::NAN),
                "x",
                Bound::AtMost(TARGET_STORE_OVERHEAD),
            )
            .detail(if missing.is_empty() {
                format!(
                    "single psyncs, median us per object: {} without a store, {} deferred, {} with every psync's record durable before it returns ({})",
                    fmt_us(without.single_us_per_object),
                    fmt_us(with.single_us_per_object),
                    fmt_us(every.and_then(|g| g.single_us_per_object)),
                    every.and_then(over).map_or("-".into(), |v| format!("{v:.1}x"))
                )
            } else {
                format!("not measured: {}", missing.join("; "))
            }),
        );
    }
    checks
}

fn fmt_us(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("-".into(), |v| format!("{v:.2}x"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_at_scale_round_trip_and_refuse_what_cannot_run() {
        let quick = Psync::options(Scale::Quick);
        assert!(quick.pmem_bytes < PsyncOptions::default().pmem_bytes);
        let json = serde_json::to_string(&quick).unwrap();
        assert_eq!(serde_json::from_str::<PsyncOptions>(&json).unwrap(), quick);
        let bad = PsyncOptions {
            object_bytes: 4096,
            ..quick.clone()
        };
        let err = bad.check().unwrap_err().to_string();
        assert!(err.contains("object_bytes"), "{err}");
        for groups in [vec![1], vec![2, 49]] {
            let bad = PsyncOptions {
                group_objects: groups,
                ..Psync::options(Scale::Quick)
            };
            let err = bad.check().unwrap_err().to_string();
            assert!(err.contains("group_objects"), "{err}");
        }
        assert_eq!(quick.steps(), ROWS + 6 * quick.group_objects.len() as u64);
    }

    #[test]
    fn a_missing_pmdk_row_makes_its_checks_unmet_with_the_reason() {
        let sample = Sample {
            wall: 1.0,
            cpu: 2.0,
        };
        let ok = |system: &str| Row {
            system: system.into(),
            medium: "pmem (x)".into(),
            gib_per_s: Some(sample.wall),
            gib_per_cpu_s: Some(sample.cpu),
            rounds: vec![sample],
            missing: None,
        };
        let mut pmdk = ok(PMDK_UNDO);
        pmdk.gib_per_s = None;
        pmdk.gib_per_cpu_s = None;
        pmdk.missing = Some("cc: not found".into());
        let rows = [ok(NVMOS_AES), pmdk];
        let ratios = [Ratio {
            medium: "pmem (x)".into(),
            wall: None,
            cpu: None,
            all_cpus_wall: None,
            all_cpus_cpu: None,
        }];
        let checks = checks(&rows, &ratios, &[]);
        assert_eq!(checks.len(), 3);
        assert!(!checks[0].met, "1 GiB/s is below the target");
        assert!(!checks[1].met);
        assert!(!checks[2].met, "no ratio measured: unmet");
        for c in &checks[1..] {
            assert!(c.detail.contains("cc: not found"), "{}", c.detail);
        }
    }

    #[test]
    fn the_2x_check_gives_the_one_write_ceiling_of_its_medium() {
        let row = |system: &str, medium: &str, gib: f64| Row {
            system: system.into(),
            medium: medium.into(),
            gib_per_s: Some(gib),
            gib_per_cpu_s: Some(gib),
            rounds: vec![Sample {
                wall: gib,
                cpu: gib,
            }],
            missing: None,
        };
        let rows = [
            row(NVMOS_AES, "pmem (x)", 2.4),
            row(PMDK_UNDO, "pmem (x)", 2.0),
            row(PMDK_NO_SNAPSHOT, "pmem (x)", 3.6),
            row(PMDK_NO_SNAPSHOT, "disk (y)", 0.5),
        ];
        let ratio = |medium: &str| Ratio {
            medium: medium.into(),
            wall: Some(1.2),
            cpu: Some(1.2),
            all_cpus_wall: None,
            all_cpus_cpu: None,
        };
        let checks = checks(&rows, &[ratio("pmem (x)"), ratio("disk (y)")], &[]);
        let twice: Vec<_> = checks
            .iter()
            .filter(|c| c.what.contains("at least 2x"))
            .collect();
        assert_eq!(twice.len(), 2);
        assert!(
            twice[0].detail.contains("without a snapshot") && twice[0].detail.contains("is 1.80x"),
            "{}",
            twice[0].detail
        );
        // No undo-logged row on the disk: no ceiling claimed there.
        assert!(!twice[1].detail.contains("snapshot"), "{}", twice[1].detail);
    }

    #[test]
    fn the_state_store_check_compares_deferred_with_no_store_per_medium_and_size() {
        let group = |objects, state_commit: Option<StateCommit>, single| GroupRow {
            medium: "pmem (x)".into(),
            objects,
            state_commit,
            pages_per_object: 4,
            single_us_per_object: Some(single),
            many_us_per_object: Some(single),
            rounds: vec![(single, single)],
            missing: None,
        };
        let groups = [
            group(2, None, 10.0),
            group(2, Some(StateCommit::Deferred), 14.0),
            group(2, Some(StateCommit::EveryPsync), 700.0),
            group(8, None, 10.0),
            group(8, Some(StateCommit::Deferred), 16.0),
        ];
        let checks = checks(&[], &[], &groups);
        assert_eq!(
            checks.len(),
            2,
            "one per deferred row with a row to compare"
        );
        assert!(checks[0].met, "1.4x is within 1.5x");
        assert!((checks[0].measured - 1.4).abs() < 1e-9);
        assert!(checks[0].detail.contains("70.0x"), "{}", checks[0].detail);
        assert!(!checks[1].met, "1.6x is not");
        let mut missing = groups.clone();
        missing[1].single_us_per_object = None;
        missing[1].missing = Some("disk full".into());
        let checks = checks_of(&missing);
        assert!(!checks[0].met, "a missing row is unmet");
        assert!(
            checks[0].detail.contains("disk full"),
            "{}",
            checks[0].detail
        );
    }

    fn checks_of(groups: &[GroupRow]) -> Vec<Check> {
        checks(&[], &[], groups)
    }
}
