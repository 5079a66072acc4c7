//! `nvmos kernel build`: the pinned Linux source, the series, a small
//! configuration, a cache keyed by their hash.
//!
//! Cache layout under [`BuildOptions::cache`]:
//!
//! - `linux-<version>/src`: the source package unpacked once, never changed;
//! - `linux-<version>/work`: a hard-linked copy the series is applied to
//!   and built in. The patches applied are kept in `work/.nvmos-applied`
//!   and reversed before the next series goes on, so a change to the
//!   policy code rebuilds only what it touches;
//! - `linux-<version>/out/<hash>/bzImage`: one kernel per series + config
//!   hash, written to a temporary folder and renamed when complete.
//!
//! A lock file serializes builds of one cache between processes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::{KernelError, Progress, Result};

/// The Debian source package the series is written against.
pub const SOURCE_PACKAGE: &str = "linux-source-6.12";
/// Its version the series was made and tested on (`dpkg-query -W`).
pub const PINNED_VERSION: &str = "6.12.117-1~deb12u1";
/// The policy cores in `kernel/policy/` the build copies into `mm/`: the
/// same files the differential test compiles for user space.
pub const CORE_FILES: [&str; 4] = [
    "ibuddy_core.c",
    "ibuddy_core.h",
    "adaptive_core.c",
    "adaptive_core.h",
];
/// Where the package puts its tarball.
pub const SOURCE_TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";

/// Where and how to build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// The repository's `kernel/` folder: `config`, `patches/`, `policy/`.
    pub kernel_dir: PathBuf,
    /// The cache folder (outside the repository).
    pub cache: PathBuf,
    /// The source tarball.
    pub source: PathBuf,
    /// `make -j`.
    pub jobs: u32,
}

impl BuildOptions {
    /// The repository's series with the default cache, source and 2 jobs.
    pub fn new(kernel_dir: impl Into<PathBuf>) -> BuildOptions {
        BuildOptions {
            kernel_dir: kernel_dir.into(),
            cache: default_cache(),
            source: PathBuf::from(SOURCE_TARBALL),
            jobs: 2,
        }
    }
}

/// `$XDG_CACHE_HOME/nvmos/kernel`, else `~/.cache/nvmos/kernel`.
pub fn default_cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("nvmos").join("kernel")
}

/// A built kernel.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Built {
    /// The bootable image.
    pub bzimage: PathBuf,
    /// Hash of source version, config, patches and policy core.
    pub hash: String,
    /// Whether it came from the cache.
    pub cached: bool,
    /// Wall-clock seconds this call took.
    pub seconds: f64,
    /// Whether the work tree had to be created (a cold build).
    pub cold: bool,
    /// The source package version built from.
    pub source_version: String,
    /// The build's `make` output.
    pub log: PathBuf,
}

/// The files of the series, in the order they are applied.
#[derive(Clone, Debug)]
pub struct Series {
    /// `patches/*.patch`, sorted by name.
    pub patches: Vec<PathBuf>,
    /// The policy cores in `policy/` ([`CORE_FILES`]), copied into `mm/`.
    pub core: Vec<PathBuf>,
    /// The config fragment.
    pub config: PathBuf,
}

impl Series {
    /// Read the series from `kernel_dir`.
    pub fn load(kernel_dir: &Path) -> Result<Series> {
        let pdir = kernel_dir.join("patches");
        let mut patches: Vec<PathBuf> = fs::read_dir(&pdir)
            .map_err(|e| KernelError::io("reading the series folder", &pdir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "patch"))
            .collect();
        patches.sort();
        if patches.is_empty() {
            return Err(KernelError::Option(format!(
                "no *.patch in {}",
                pdir.display()
            )));
        }
        let core = CORE_FILES
            .iter()
            .map(|f| kernel_dir.join("policy").join(f))
            .collect();
        Ok(Series {
            patches,
            core,
            config: kernel_dir.join("config"),
        })
    }

    fn files(&self) -> impl Iterator<Item = &PathBuf> {
        self.patches
            .iter()
            .chain(&self.core)
            .chain(std::iter::once(&self.config))
    }

    /// Hash of `version` and every file's name and contents.
    pub fn hash(&self, version: &str) -> Result<String> {
        let mut h = Sha256::new();
        h.update(version.as_bytes());
        for f in self.files() {
            let bytes = fs::read(f).map_err(|e| KernelError::io("reading", f, e))?;
            h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
        }
        Ok(hex(&h.finalize()[..12]))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fail with [`KernelError::ToolMissing`] unless `tool` is on PATH.
pub fn require_tool(tool: &str, hint: &str) -> Result<PathBuf> {
    if tool.contains('/') {
        let p = PathBuf::from(tool);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(KernelError::ToolMissing {
                tool: tool.to_owned(),
                hint: hint.to_owned(),
            })
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .ok_or_else(|| KernelError::ToolMissing {
            tool: tool.to_owned(),
            hint: hint.to_owned(),
        })
}

/// The installed version of the source package, or "unknown".
fn source_version() -> String {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", SOURCE_PACKAGE])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Run `cmd` in `dir` with its output appended to `log`.
fn run_logged(what: &str, cmd: &mut Command, dir: &Path, log: &Path) -> Result<()> {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| KernelError::io("opening the build log", log, e))?;
    let err = out
        .try_clone()
        .map_err(|e| KernelError::io("opening the build log", log, e))?;
    let status = cmd
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| KernelError::io("starting", PathBuf::from(what), e))?;
    if status.success() {
        return Ok(());
    }
    Err(KernelError::Command {
        what: what.to_owned(),
        status: status.to_string(),
        log: log.to_owned(),
        tail: tail_of(log, 15),
    })
}

/// The last `n` lines of a file, each indented, with a leading newline.
pub(crate) fn tail_of(path: &Path, n: usize) -> String {
    let text = fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].iter().map(|l| format!("\n  {l}")).collect()
}

/// An exclusive lock on `path` (created if missing), held while alive.
pub(crate) struct FileLock {
    _file: fs::File,
}

impl FileLock {
    pub(crate) fn take(path: &Path) -> Result<FileLock> {
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| KernelError::io("opening the lock", path, e))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on an open descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(KernelError::io(
                "locking",
                path,
                std::io::Error::last_os_error(),
            ));
        }
        Ok(FileLock { _file: f })
    }
}

/// The cache folder of one source version.
fn version_dir(opts: &BuildOptions, version: &str) -> PathBuf {
    let safe: String = version
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    opts.cache.join(format!("linux-{safe}"))
}

/// Unpack the source tarball into `vdir/src` once.
fn ensure_source(opts: &BuildOptions, vdir: &Path, log: &Path) -> Result<PathBuf> {
    let src = vdir.join("src");
    if src.join("Makefile").is_file() {
        return Ok(src);
    }
    let tmp = vdir.join("src.tmp");
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).map_err(|e| KernelError::io("creating", &tmp, e))?;
    run_logged(
        "unpacking the kernel source",
        Command::new("tar")
            .arg("-xf")
            .arg(&opts.source)
            .arg("--strip-components=1"),
        &tmp,
        log,
    )?;
    fs::rename(&tmp, &src).map_err(|e| KernelError::io("renaming", &tmp, e))?;
    Ok(src)
}

/// The work tree: a hard-linked copy of `src` (patch(1) and the build
/// write new files, so `src` stays pristine).
fn ensure_work(vdir: &Path, src: &Path, log: &Path) -> Result<(PathBuf, bool)> {
    let work = vdir.join("work");
    if work.join("Makefile").is_file() {
        return Ok((work, false));
    }
    let tmp = vdir.join("work.tmp");
    let _ = fs::remove_dir_all(&tmp);
    run_logged(
        "copying the source into the work tree",
        Command::new("cp").arg("-al").arg(src).arg(&tmp),
        vdir,
        log,
    )?;
    fs::rename(&tmp, &work).map_err(|e| KernelError::io("renaming", &tmp, e))?;
    Ok((work, true))
}

const APPLIED: &str = ".nvmos-applied";

/// Take the previously applied series off the work tree.
fn revert_series(work: &Path, log: &Path) -> Result<()> {
    let dir = work.join(APPLIED);
    if !dir.is_dir() {
        return Ok(());
    }
    let mut patches: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| KernelError::io("reading", &dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .collect();
    patches.sort();
    for p in patches.iter().rev() {
        run_logged(
            &format!("reverting {}", p.display()),
            Command::new("patch")
                .args(["-p1", "-R", "-s", "--no-backup-if-mismatch", "-i"])
                .arg(p),
            work,
            log,
        )?;
    }
    for f in CORE_FILES {
        let _ = fs::remove_file(work.join("mm").join(f));
    }
    fs::remove_dir_all(&dir).map_err(|e| KernelError::io("removing", &dir, e))
}

fn apply_series(series: &Series, work: &Path, log: &Path) -> Result<()> {
    let dir = work.join(APPLIED);
    fs::create_dir_all(&dir).map_err(|e| KernelError::io("creating", &dir, e))?;
    for p in &series.patches {
        run_logged(
            &format!("applying {}", p.display()),
            Command::new("patch")
                .args(["-p1", "-s", "--no-backup-if-mismatch", "-i"])
                .arg(p),
            work,
            log,
        )?;
        let name = p.file_name().unwrap_or_default();
        fs::copy(p, dir.join(name)).map_err(|e| KernelError::io("copying", p, e))?;
    }
    for f in &series.core {
        let to = work.join("mm").join(f.file_name().unwrap_or_default());
        fs::copy(f, &to).map_err(|e| KernelError::io("copying the policy core", f, e))?;
    }
    Ok(())
}

/// `make tinyconfig`, merge the fragment, and check every option it sets
/// stuck (Kconfig drops options whose dependencies are missing).
fn configure(series: &Series, work: &Path, log: &Path) -> Result<()> {
    run_logged(
        "make tinyconfig",
        Command::new("make").arg("tinyconfig"),
        work,
        log,
    )?;
    run_logged(
        "merging the config fragment",
        Command::new("scripts/kconfig/merge_config.sh")
            .args(["-m", ".config"])
            .arg(&series.config),
        work,
        log,
    )?;
    run_logged(
        "make olddefconfig",
        Command::new("make").arg("olddefconfig"),
        work,
        log,
    )?;
    let frag = fs::read_to_string(&series.config)
        .map_err(|e| KernelError::io("reading", &series.config, e))?;
    let cfg_path = work.join(".config");
    let cfg =
        fs::read_to_string(&cfg_path).map_err(|e| KernelError::io("reading", &cfg_path, e))?;
    for line in frag.lines().map(str::trim) {
        let wanted = if line.starts_with("CONFIG_") {
            line.to_owned()
        } else if let Some(opt) = line
            .strip_prefix("# ")
            .and_then(|l| l.strip_suffix(" is not set"))
        {
            // Off may also mean absent.
            if cfg.lines().any(|l| l.starts_with(&format!("{opt}="))) {
                return Err(KernelError::Option(format!(
                    "{}: {opt} is set though the fragment turns it off",
                    series.config.display()
                )));
            }
            continue;
        } else {
            continue;
        };
        if !cfg.lines().any(|l| l == wanted) {
            return Err(KernelError::Option(format!(
                "{}: `{wanted}` did not survive olddefconfig (a dependency is missing)",
                series.config.display()
            )));
        }
    }
    Ok(())
}

/// Build the kernel of the series in `opts.kernel_dir`, or find it in the
/// cache.
pub fn build(opts: &BuildOptions, progress: &mut dyn FnMut(Progress)) -> Result<Built> {
    let started = Instant::now();
    let series = Series::load(&opts.kernel_dir)?;
    if !opts.source.is_file() {
        return Err(KernelError::SourceMissing {
            path: opts.source.clone(),
        });
    }
    let version = source_version();
    let hash = series.hash(&version)?;
    let vdir = version_dir(opts, &version);
    let out = vdir.join("out").join(&hash);
    let bzimage = out.join("bzImage");
    let done = |cached, cold| Built {
        bzimage: bzimage.clone(),
        hash: hash.clone(),
        cached,
        cold,
        seconds: started.elapsed().as_secs_f64(),
        source_version: version.clone(),
        log: out.join("build.log"),
    };
    if bzimage.is_file() {
        return Ok(done(true, false));
    }
    for (tool, hint) in [
        ("make", "apt-get install make"),
        ("gcc", "apt-get install gcc"),
        ("patch", "apt-get install patch"),
        ("flex", "apt-get install flex"),
        ("bison", "apt-get install bison"),
        ("bc", "apt-get install bc"),
        ("perl", "apt-get install perl"),
    ] {
        require_tool(tool, hint)?;
    }
    fs::create_dir_all(&vdir).map_err(|e| KernelError::io("creating", &vdir, e))?;
    let _lock = FileLock::take(&vdir.join("lock"))?;
    if bzimage.is_file() {
        // Another process built it while we waited.
        return Ok(done(true, false));
    }
    let log = vdir.join(format!("build-{hash}.log"));
    let _ = fs::remove_file(&log);
    progress(Progress::Step(format!(
        "building kernel {hash} ({SOURCE_PACKAGE} {version}); log {}",
        log.display()
    )));
    let src = ensure_source(opts, &vdir, &log)?;
    let (work, cold) = ensure_work(&vdir, &src, &log)?;
    revert_series(&work, &log)?;
    apply_series(&series, &work, &log)?;
    let cfg_hash = {
        let bytes =
            fs::read(&series.config).map_err(|e| KernelError::io("reading", &series.config, e))?;
        hex(&Sha256::digest(&bytes)[..12])
    };
    let stamp = work.join(".nvmos-config");
    if fs::read_to_string(&stamp).ok().as_deref() != Some(cfg_hash.as_str()) {
        configure(&series, &work, &log)?;
        fs::write(&stamp, &cfg_hash).map_err(|e| KernelError::io("writing", &stamp, e))?;
    }
    run_logged(
        "make bzImage",
        Command::new("nice")
            .args(["-n", "10", "make"])
            .arg(format!("-j{}", opts.jobs.max(1)))
            .arg("bzImage"),
        &work,
        &log,
    )?;
    let tmp = vdir.join("out").join(format!("{hash}.tmp"));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).map_err(|e| KernelError::io("creating", &tmp, e))?;
    let image = work.join("arch/x86/boot/bzImage");
    fs::copy(&image, tmp.join("bzImage")).map_err(|e| KernelError::io("copying", &image, e))?;
    fs::copy(&log, tmp.join("build.log")).map_err(|e| KernelError::io("copying", &log, e))?;
    fs::rename(&tmp, &out).map_err(|e| KernelError::io("renaming", &tmp, e))?;
    Ok(done(false, cold))
}

/// What `checkpatch.pl` said about one file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckResult {
    /// The patch or source file.
    pub file: PathBuf,
    /// Errors reported.
    pub errors: u32,
    /// Warnings reported.
    pub warnings: u32,
    /// Its output.
    pub output: String,
}

/// Run the kernel's `checkpatch.pl` on every patch of the series and, as
/// files, on the policy core.
pub fn check(opts: &BuildOptions, progress: &mut dyn FnMut(Progress)) -> Result<Vec<CheckResult>> {
    let series = Series::load(&opts.kernel_dir)?;
    if !opts.source.is_file() {
        return Err(KernelError::SourceMissing {
            path: opts.source.clone(),
        });
    }
    require_tool("perl", "apt-get install perl")?;
    let vdir = version_dir(opts, &source_version());
    fs::create_dir_all(&vdir).map_err(|e| KernelError::io("creating", &vdir, e))?;
    let src = {
        let _lock = FileLock::take(&vdir.join("lock"))?;
        ensure_source(opts, &vdir, &vdir.join("unpack.log"))?
    };
    let script = src.join("scripts/checkpatch.pl");
    let mut results = Vec::new();
    for (file, as_file) in series
        .patches
        .iter()
        .map(|p| (p, false))
        .chain(series.core.iter().map(|p| (p, true)))
    {
        progress(Progress::Step(format!("checkpatch {}", file.display())));
        let mut cmd = Command::new("perl");
        cmd.arg(&script)
            .args(["--no-tree", "--terse", "--show-types"]);
        if as_file {
            cmd.arg("-f");
        }
        let out = cmd
            .arg(file)
            .current_dir(&src)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| KernelError::io("running", &script, e))?;
        let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&out.stderr));
        let count = |kind: &str| {
            output
                .lines()
                .filter(|l| l.contains(&format!(": {kind}:")))
                .count() as u32
        };
        results.push(CheckResult {
            file: file.clone(),
            errors: count("ERROR"),
            warnings: count("WARNING"),
            output,
        });
    }
    Ok(results)
}

/// Write `bytes` to `path` whole or not at all (`nvmos_trace::Output`).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut out = nvmos_trace::Output::create(path, &[])?;
    out.write_all(bytes)
        .map_err(|e| KernelError::io("writing", path, e))?;
    out.commit()?;
    Ok(())
}
