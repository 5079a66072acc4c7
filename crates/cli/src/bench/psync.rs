//! `nvmos bench psync`: psync throughput of a persistent memory object,
//! one core, against PMDK's libpmemobj on the same medium in the same run.
//!
//! Each run sweeps an object sequentially, staging `pages_per_psync` 4 KiB
//! pages and psyncing them, after one untimed pass that writes every page
//! once (first-touch faults out of the way). Media: a pool file in
//! `/dev/shm` treated as persistent memory (cache-line write-back and a
//! fence; PMDK with `PMEM_IS_PMEM_FORCE=1` does the same), and a pool file
//! on disk (`msync`; PMDK uses `msync` there too). PMDK's program
//! (`crates/pmo/bench/pmdk_psync.c`) is compiled with `cc -lpmemobj` when
//! the library is installed; otherwise its rows say why they are missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use nvmos_pmo::{KdfParams, Perm, Pool};
use serde::Serialize;

use nvmos_measure::stats::median_index;

const PAGE: usize = 4096;
const PMDK_SOURCE: &str = include_str!("../../../pmo/bench/pmdk_psync.c");

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
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
    /// Directory on a disk file system.
    pub disk_dir: PathBuf,
    /// The CPU everything runs on.
    pub cpu: usize,
}

/// One row: a system on a medium.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Which system and setting.
    pub system: String,
    /// "pmem (/dev/shm)" or "disk".
    pub medium: String,
    /// Median GiB per wall-clock second over the rounds; `None` when it could not run.
    pub gib_per_s: Option<f64>,
    /// Median GiB per CPU second.
    pub gib_per_cpu_s: Option<f64>,
    /// Every round.
    pub rounds: Vec<Sample>,
    /// Why there is no figure, or a remark.
    pub note: Option<String>,
}

/// The benchmark's result.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The settings.
    pub config: Config,
    /// The rows.
    pub rows: Vec<Row>,
    /// nvmos psync with AES-256-GCM over PMDK's undo-logged transaction,
    /// per medium: by wall time and by CPU time.
    pub ratios: Vec<(String, Option<f64>, Option<f64>)>,
    /// Load average when the run started (the machine may be shared).
    pub loadavg: Option<String>,
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
            bail!("pinning to CPU {cpu}: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One timed nvmos run: returns GiB/s.
fn nvmos_run(cfg: &Config, dir: &Path, bytes: u64, encrypted: bool) -> Result<Sample> {
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
        let t0 = Instant::now();
        let c0 = thread_cpu_s();
        for k in 0..psyncs {
            for j in 0..per {
                let page = (k * per + j) % pages;
                obj.stage(page, &buf[j * PAGE..(j + 1) * PAGE])?;
                buf[j * PAGE] ^= k as u8;
            }
            obj.psync()?;
        }
        let secs = t0.elapsed().as_secs_f64();
        let cpu = thread_cpu_s() - c0;
        let b = (psyncs * per * PAGE) as u64;
        Ok::<Sample, anyhow::Error>(Sample {
            wall: gib(b, secs),
            cpu: gib(b, cpu),
        })
    })();
    let _ = std::fs::remove_file(&path);
    result
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
    let c0 = thread_cpu_s();
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
            .map_err(|_| anyhow::anyhow!("AES-GCM refused a 4 KiB page"))?;
        sink ^= tag.as_ref()[0];
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_s() - c0;
    std::hint::black_box(sink);
    let b = (pages * PAGE) as u64;
    Ok(Sample {
        wall: gib(b, secs),
        cpu: gib(b, cpu),
    })
}

/// Build the PMDK program (both variants) in `dir`.
fn build_pmdk(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let src = dir.join("pmdk_psync.c");
    std::fs::write(&src, PMDK_SOURCE).context("writing the PMDK program")?;
    let mut out = Vec::new();
    for (name, flags) in [
        ("pmdk_undo", &[][..]),
        ("pmdk_nosnap", &["-DNO_SNAPSHOT"][..]),
    ] {
        let exe = dir.join(name);
        let o = Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(&src)
            .args(flags)
            .arg("-lpmemobj")
            .output()
            .context(
                "running cc (install a C compiler and libpmemobj-dev for the PMDK baseline)",
            )?;
        if !o.status.success() {
            bail!(
                "cc -lpmemobj failed (is libpmemobj-dev installed?): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        out.push(exe);
    }
    Ok((out[0].clone(), out[1].clone()))
}

fn pmdk_run(exe: &Path, cfg: &Config, dir: &Path, bytes: u64, force_pmem: bool) -> Result<Sample> {
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
        bail!(
            "PMDK program failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let mut f = text.split_whitespace();
    let (Some(b), Some(s), Some(c)) = (f.next(), f.next(), f.next()) else {
        bail!("PMDK program printed {text:?}");
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
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    /// GiB per wall-clock second.
    pub wall: f64,
    /// GiB per CPU second of the measuring thread (PMDK: process).
    pub cpu: f64,
}

fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn row(system: &str, medium: &str, rounds: u32, mut f: impl FnMut() -> Result<Sample>) -> Row {
    let mut values: Vec<Sample> = Vec::new();
    for _ in 0..rounds {
        match f() {
            Ok(v) => values.push(v),
            Err(e) => {
                return Row {
                    system: system.into(),
                    medium: medium.into(),
                    gib_per_s: None,
                    gib_per_cpu_s: None,
                    rounds: values,
                    note: Some(format!("{e:#}")),
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
        note: None,
    }
}

/// Run every row; `on_row` is told each row's name before it runs.
pub fn run(cfg: &Config, on_row: &mut dyn FnMut(&str)) -> Result<Report> {
    if cfg.object_bytes < (cfg.pages_per_psync * PAGE) as u64 || cfg.pages_per_psync == 0 {
        bail!(
            "the object ({} bytes) must hold at least one psync of {} pages",
            cfg.object_bytes,
            cfg.pages_per_psync
        );
    }
    pin(cfg.cpu)?;
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.trim().to_string());
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let pmdk = build_pmdk(tmp.path());
    let media = [
        (
            format!("pmem ({})", cfg.pmem_dir.display()),
            &cfg.pmem_dir,
            cfg.pmem_bytes,
            true,
        ),
        (
            format!("disk ({})", cfg.disk_dir.display()),
            &cfg.disk_dir,
            cfg.disk_bytes,
            false,
        ),
    ];
    let mut rows = Vec::new();
    let mut ratios = Vec::new();
    on_row("AES-256-GCM seal only");
    rows.push(row(
        "AES-256-GCM seal only (ceiling)",
        "cache",
        cfg.rounds,
        || seal_only(cfg.pmem_bytes),
    ));
    for (medium, dir, bytes, pmem) in &media {
        type Measure<'a> = Box<dyn Fn() -> Result<Sample> + 'a>;
        let systems: [(&str, Measure); 4] = [
            (
                "nvmos psync, AES-256-GCM",
                Box::new(|| nvmos_run(cfg, dir, *bytes, true)),
            ),
            (
                "nvmos psync, no encryption",
                Box::new(|| nvmos_run(cfg, dir, *bytes, false)),
            ),
            (
                "PMDK libpmemobj tx (undo log)",
                Box::new(|| match &pmdk {
                    Ok((undo, _)) => pmdk_run(undo, cfg, dir, *bytes, *pmem),
                    Err(e) => bail!("{e:#}"),
                }),
            ),
            (
                "PMDK libpmemobj tx (no snapshot)",
                Box::new(|| match &pmdk {
                    Ok((_, nosnap)) => pmdk_run(nosnap, cfg, dir, *bytes, *pmem),
                    Err(e) => bail!("{e:#}"),
                }),
            ),
        ];
        let first = rows.len();
        for (name, f) in systems.iter() {
            on_row(&format!("{name} on {medium}"));
            rows.push(row(name, medium, cfg.rounds, f));
        }
        let ratio = |f: fn(&Row) -> Option<f64>| match (f(&rows[first]), f(&rows[first + 2])) {
            (Some(a), Some(b)) => Some(a / b),
            _ => None,
        };
        ratios.push((
            medium.clone(),
            ratio(|r| r.gib_per_s),
            ratio(|r| r.gib_per_cpu_s),
        ));
    }
    Ok(Report {
        config: cfg.clone(),
        rows,
        ratios,
        loadavg,
    })
}

/// The table people read.
pub fn table(r: &Report) -> String {
    use std::fmt::Write;
    let c = &r.config;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "psync throughput, one core (CPU {}), {} KiB pages, {} pages per psync, object {} MiB; median of {} runs",
        c.cpu,
        PAGE / 1024,
        c.pages_per_psync,
        c.object_bytes >> 20,
        c.rounds
    );
    if let Some(l) = &r.loadavg {
        let _ = writeln!(s, "load average at start: {l}");
    }
    let _ = writeln!(
        s,
        "{:<34} {:<20} {:>7} {:>11}  runs (GiB/s wall/cpu)",
        "system", "medium", "GiB/s", "GiB/cpu-s"
    );
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    for row in &r.rows {
        let runs: Vec<String> = row
            .rounds
            .iter()
            .map(|v| format!("{:.3}/{:.3}", v.wall, v.cpu))
            .collect();
        let _ = writeln!(
            s,
            "{:<34} {:<20} {:>7} {:>11}  {}{}",
            row.system,
            row.medium,
            fmt(row.gib_per_s),
            fmt(row.gib_per_cpu_s),
            runs.join(" "),
            row.note
                .as_ref()
                .map_or(String::new(), |n| format!("  ({n})"))
        );
    }
    for (medium, wall, cpu) in &r.ratios {
        let x = |v: &Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
        let _ = writeln!(
            s,
            "nvmos psync with AES-256-GCM / PMDK undo-log tx on {medium}: {} by wall time, {} by CPU time",
            x(wall),
            x(cpu)
        );
    }
    s
}

/// `nvmos bench psync` options.
#[derive(clap::Args, Debug)]
pub struct PsyncArgs {
    /// Object size: 64MiB, ... or a number of 4 KiB pages.
    #[arg(long, default_value = "64MiB", value_parser = crate::units::parse_memory)]
    object: u64,
    /// Bytes psynced per timed run on persistent memory [default: 1GiB, 256MiB with --quick].
    #[arg(long, value_parser = crate::units::parse_memory)]
    pmem_total: Option<u64>,
    /// Bytes psynced per timed run on disk [default: 64MiB, 8MiB with --quick].
    #[arg(long, value_parser = crate::units::parse_memory)]
    disk_total: Option<u64>,
    /// Pages per psync (and per PMDK transaction).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pages: u64,
    /// Runs per row; the median is reported [default: 3, 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Directory standing for persistent memory.
    #[arg(long, default_value = "/dev/shm")]
    pmem_dir: PathBuf,
    /// Directory on a disk file system [default: the system's temporary directory].
    #[arg(long)]
    disk_dir: Option<PathBuf>,
    /// The CPU to run on.
    #[arg(long, default_value_t = 0)]
    cpu: usize,
    /// Smaller and faster (explicit options still win).
    #[arg(long)]
    quick: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `nvmos bench psync` and print its table (or JSON).
pub fn main(args: &PsyncArgs) -> Result<()> {
    let (pmem, disk, rounds) = if args.quick {
        (256u64 << 20, 8u64 << 20, 1)
    } else {
        (1u64 << 30, 64u64 << 20, 3)
    };
    let frames = |f: Option<u64>, d: u64| f.map_or(d, |f| f * PAGE as u64);
    let cfg = Config {
        object_bytes: args.object * PAGE as u64,
        pmem_bytes: frames(args.pmem_total, pmem),
        disk_bytes: frames(args.disk_total, disk),
        pages_per_psync: args.pages as usize,
        rounds: args.rounds.unwrap_or(rounds),
        pmem_dir: args.pmem_dir.clone(),
        disk_dir: args.disk_dir.clone().unwrap_or_else(std::env::temp_dir),
        cpu: args.cpu,
    };
    let bar = crate::progress_bar(9);
    let report = run(&cfg, &mut |name| {
        bar.set_message(name.to_string());
        bar.inc(1);
    });
    bar.finish_and_clear();
    let report = report?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
    }
    // A row without a figure (PMDK missing, a medium that failed) makes
    // the comparison incomplete: say so with a failing exit, not only in
    // a table cell.
    let missing: Vec<String> = report
        .rows
        .iter()
        .filter(|r| r.gib_per_s.is_none())
        .map(|r| {
            format!(
                "{} on {}: {}",
                r.system,
                r.medium,
                r.note.as_deref().unwrap_or("no figure")
            )
        })
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "{} of {} rows could not run, so the comparison is incomplete: {}",
            missing.len(),
            report.rows.len(),
            missing.join("; ")
        );
    }
    Ok(())
}
