//! `nvmos kernel build`: the pinned Linux source, the series, a small
//! configuration, a cache keyed by their hash.
//!
//! Cache layout under [`BuildOptions::cache`]:
//!
//! - `linux-<version>/src`: the source package unpacked once, never changed;
//! - `linux-<version>/work` (the plain flavour) and `work-debug` (the
//!   debug flavour, [`Flavour::Debug`]): hard-linked copies the series is
//!   applied to and built in, one per flavour so that switching between
//!   them rebuilds nothing. The patches applied are kept in
//!   `.nvmos-applied` and reversed before the next series goes on, so a
//!   change to the policy code rebuilds only what it touches;
//! - `linux-<version>/out/<hash>/bzImage`: one kernel per flavour + series
//!   + config hash, written to a temporary folder and renamed when complete.
//!
//! A lock file serializes builds of one cache between processes.

use std::collections::BTreeMap;
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
/// The policy cores in `kernel/policy/`: the files the differential tests
/// compile for user space, which the series adds to `mm/` verbatim
/// ([`Series::check_cores`] holds the two to each other).
pub const CORE_FILES: [&str; 6] = [
    "ibuddy_core.c",
    "ibuddy_core.h",
    "adaptive_core.c",
    "adaptive_core.h",
    "m3_core.c",
    "m3_core.h",
];
/// Where the package puts its tarball.
pub const SOURCE_TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";

/// Which kernel of the series: the plain one the studies measure, or the
/// same series with mm's debugging checks (`kernel/config-debug` merged
/// after `kernel/config`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavour {
    /// `kernel/config` alone.
    #[default]
    Plain,
    /// Plus `kernel/config-debug`: DEBUG_VM, PROVE_LOCKING, LOCK_STAT,
    /// DEBUG_PAGEALLOC, DEBUG_LIST, PAGE_OWNER, KASAN, KFENCE.
    Debug,
}

impl Flavour {
    /// `plain` or `debug`.
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Plain => "plain",
            Flavour::Debug => "debug",
        }
    }

    /// Options for the kernel command line this flavour wants at boot:
    /// the debug checks that are off unless asked for.
    pub fn cmdline(self) -> &'static [&'static str] {
        match self {
            Flavour::Plain => &[],
            Flavour::Debug => &["debug_pagealloc=on", "page_owner=on"],
        }
    }

    fn work_dir(self) -> &'static str {
        match self {
            Flavour::Plain => "work",
            Flavour::Debug => "work-debug",
        }
    }
}

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
    /// Plain or debug kernel.
    pub flavour: Flavour,
}

impl BuildOptions {
    /// The repository's series with the default cache, source and 2 jobs.
    pub fn new(kernel_dir: impl Into<PathBuf>) -> BuildOptions {
        BuildOptions {
            kernel_dir: kernel_dir.into(),
            cache: default_cache(),
            source: PathBuf::from(SOURCE_TARBALL),
            jobs: 2,
            flavour: Flavour::Plain,
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
    /// Plain or debug.
    pub flavour: Flavour,
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

/// The cover letter `git format-patch --cover-letter` writes: no change.
pub const COVER_LETTER: &str = "0000-cover-letter.patch";

/// The files of the series, in the order they are applied.
#[derive(Clone, Debug)]
pub struct Series {
    /// `patches/*.patch` but the cover letter, sorted by name.
    pub patches: Vec<PathBuf>,
    /// The policy cores in `policy/` ([`CORE_FILES`]), which the patches
    /// add to `mm/`.
    pub core: Vec<PathBuf>,
    /// The config fragments, merged in order: `config`, then for the
    /// debug flavour `config-debug`.
    pub configs: Vec<PathBuf>,
    /// Which flavour the fragments make.
    pub flavour: Flavour,
    /// A prefix of the series ([`Series::prefix`]): Kconfig symbols a
    /// later patch adds are not asked for.
    pub partial: bool,
}

impl Series {
    /// Read the series from `kernel_dir`, with the config of `flavour`.
    pub fn load(kernel_dir: &Path, flavour: Flavour) -> Result<Series> {
        let pdir = kernel_dir.join("patches");
        let mut patches: Vec<PathBuf> = fs::read_dir(&pdir)
            .map_err(|e| KernelError::io("reading the series folder", &pdir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "patch"))
            .filter(|p| p.file_name().is_some_and(|n| n != COVER_LETTER))
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
        let mut configs = vec![kernel_dir.join("config")];
        if flavour == Flavour::Debug {
            configs.push(kernel_dir.join("config-debug"));
        }
        Ok(Series {
            patches,
            core,
            configs,
            flavour,
            partial: false,
        })
    }

    fn files(&self) -> impl Iterator<Item = &PathBuf> {
        self.patches.iter().chain(&self.configs)
    }

    /// The first `n` patches only (a build test of each patch on its own).
    pub fn prefix(&self, n: usize) -> Series {
        Series {
            patches: self.patches[..n.min(self.patches.len())].to_vec(),
            partial: n < self.patches.len(),
            ..self.clone()
        }
    }

    /// Fail unless every file of `policy/` is what the series adds to
    /// `mm/`, byte for byte: the differential tests test the kernel's code.
    pub fn check_cores(&self) -> Result<()> {
        let texts = self
            .patches
            .iter()
            .map(|p| fs::read_to_string(p).map_err(|e| KernelError::io("reading", p, e)))
            .collect::<Result<Vec<_>>>()?;
        let added = files_added(&texts.iter().map(String::as_str).collect::<Vec<_>>())
            .map_err(|e| KernelError::Option(format!("reading the series: {e}")))?;
        for core in &self.core {
            let name = core.file_name().unwrap_or_default().to_string_lossy();
            let want = fs::read_to_string(core).map_err(|e| KernelError::io("reading", core, e))?;
            match added.get(&format!("mm/{name}")) {
                Some(got) if *got == want => {}
                Some(_) => {
                    return Err(KernelError::Option(format!(
                        "{} differs from the mm/{name} the series adds",
                        core.display()
                    )))
                }
                None => {
                    return Err(KernelError::Option(format!(
                        "no patch of the series adds mm/{name} ({})",
                        core.display()
                    )))
                }
            }
        }
        Ok(())
    }

    /// Hash of `version`, the flavour and every file's name and contents.
    pub fn hash(&self, version: &str) -> Result<String> {
        let mut h = Sha256::new();
        h.update(version.as_bytes());
        if self.flavour != Flavour::Plain {
            // The plain kernel's hash stays what it was before flavours.
            h.update(self.flavour.name().as_bytes());
        }
        for f in self.files() {
            let bytes = fs::read(f).map_err(|e| KernelError::io("reading", f, e))?;
            h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
        }
        Ok(hex(&h.finalize()[..12]))
    }
}

/// The files a series of unified diffs creates (`--- /dev/null`), by path,
/// with their contents after every patch: later patches' hunks on a
/// created file are applied too (their context checked). A hunk that does
/// not apply is an error naming the file.
pub fn files_added(patches: &[&str]) -> std::result::Result<BTreeMap<String, String>, String> {
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for patch in patches {
        let lines: Vec<&str> = patch.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let Some(old) = lines[i].strip_prefix("--- ") else {
                i += 1;
                continue;
            };
            let Some(new) = lines.get(i + 1).and_then(|l| l.strip_prefix("+++ b/")) else {
                i += 1;
                continue;
            };
            let path = new.split('\t').next().unwrap_or(new).to_owned();
            let created = old.starts_with("/dev/null") || old.starts_with("a/dev/null");
            i += 2;
            if created {
                files.insert(path.clone(), Vec::new());
            }
            let Some(content) = files.get_mut(&path) else {
                continue;
            };
            // Hunks: "@@ -a,b +c,d @@", then ' ', '-', '+' lines.
            let mut out: Vec<String> = Vec::new();
            let mut at = 0usize;
            while i < lines.len() && lines[i].starts_with("@@") {
                let start: usize = lines[i]
                    .split_whitespace()
                    .nth(1)
                    .and_then(|r| r.trim_start_matches('-').split(',').next())
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| format!("{path}: bad hunk header {:?}", lines[i]))?;
                let begin = start.saturating_sub(1).max(at);
                out.extend(content[at..begin.min(content.len())].iter().cloned());
                at = begin;
                i += 1;
                while i < lines.len() {
                    let l = lines[i];
                    if let Some(t) = l.strip_prefix('+') {
                        out.push(t.to_owned());
                    } else if let Some(t) = l.strip_prefix('-').or_else(|| l.strip_prefix(' ')) {
                        if content.get(at).map(String::as_str) != Some(t) {
                            return Err(format!(
                                "{path}: a hunk does not apply at line {}",
                                at + 1
                            ));
                        }
                        if l.starts_with(' ') {
                            out.push(t.to_owned());
                        }
                        at += 1;
                    } else if l.is_empty() && content.get(at).is_some_and(String::is_empty) {
                        // An empty context line whose space was stripped.
                        out.push(String::new());
                        at += 1;
                    } else if !l.starts_with("\\") {
                        break;
                    }
                    i += 1;
                }
            }
            out.extend(content[at.min(content.len())..].iter().cloned());
            *content = out;
        }
    }
    Ok(files
        .into_iter()
        .map(|(p, ls)| {
            let mut text = ls.join("\n");
            text.push('\n');
            (p, text)
        })
        .collect())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
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
fn ensure_work(vdir: &Path, src: &Path, flavour: Flavour, log: &Path) -> Result<(PathBuf, bool)> {
    let work = vdir.join(flavour.work_dir());
    if work.join("Makefile").is_file() {
        return Ok((work, false));
    }
    let tmp = vdir.join(format!("{}.tmp", flavour.work_dir()));
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
    // Copies of the policy cores not made by a patch would make the next
    // series' patches refuse to create them.
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
    Ok(())
}

/// `make tinyconfig`, merge the fragments, and check every option they
/// set stuck (Kconfig drops options whose dependencies are missing). A
/// later fragment overrides an earlier one, so an option is checked
/// against the last fragment that names it. `partial`: a prefix of the
/// series, whose tree may not define every symbol yet (see
/// [`check_config`]).
fn configure(series: &Series, work: &Path, log: &Path, partial: bool) -> Result<()> {
    run_logged(
        "make tinyconfig",
        Command::new("make").arg("tinyconfig"),
        work,
        log,
    )?;
    run_logged(
        "merging the config fragments",
        Command::new("scripts/kconfig/merge_config.sh")
            .args(["-m", ".config"])
            .args(&series.configs),
        work,
        log,
    )?;
    run_logged(
        "make olddefconfig",
        Command::new("make").arg("olddefconfig"),
        work,
        log,
    )?;
    check_config(series, work, partial)
}

/// Check the work tree's `.config` has every option of the fragments. A
/// tree changes under a kept `.config` (another prefix of the series, a
/// patch adding a Kconfig symbol), and `make` then quietly drops what no
/// longer fits, so this runs before every build. With `partial`, an
/// option whose symbol no Kconfig file of the tree defines is not asked
/// for: a later patch adds it.
fn check_config(series: &Series, work: &Path, partial: bool) -> Result<()> {
    let cfg_path = work.join(".config");
    let cfg =
        fs::read_to_string(&cfg_path).map_err(|e| KernelError::io("reading", &cfg_path, e))?;
    let mut wanted_by: Vec<(String, String, PathBuf)> = Vec::new();
    for path in &series.configs {
        let frag = fs::read_to_string(path).map_err(|e| KernelError::io("reading", path, e))?;
        for line in frag.lines().map(str::trim) {
            let opt = if let Some(o) = line
                .strip_prefix("# ")
                .and_then(|l| l.strip_suffix(" is not set"))
            {
                o
            } else if line.starts_with("CONFIG_") {
                line.split('=').next().unwrap_or(line)
            } else {
                continue;
            };
            wanted_by.retain(|(o, _, _)| o != opt);
            wanted_by.push((opt.to_owned(), line.to_owned(), path.clone()));
        }
    }
    for (opt, line, path) in &wanted_by {
        if let Err(e) = check_option(&cfg, line, path) {
            let name = opt.strip_prefix("CONFIG_").unwrap_or(opt);
            if partial && !kconfig_defines(work, name)? {
                continue;
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Whether a `Kconfig*` file of the tree defines `config NAME`.
fn kconfig_defines(work: &Path, name: &str) -> Result<bool> {
    let status = Command::new("grep")
        .args(["-rqx", "--include=Kconfig*", "-e"])
        .arg(format!("\\(menu\\)\\?config {name}"))
        .arg(".")
        .current_dir(work)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| KernelError::io("running grep in", work, e))?;
    Ok(status.success())
}

/// Whether the final `.config` has what the fragment line asks.
fn check_option(cfg: &str, line: &str, fragment: &Path) -> Result<()> {
    if let Some(opt) = line
        .strip_prefix("# ")
        .and_then(|l| l.strip_suffix(" is not set"))
    {
        // Off may also mean absent.
        if cfg.lines().any(|l| l.starts_with(&format!("{opt}="))) {
            return Err(KernelError::Option(format!(
                "{}: {opt} is set though the fragment turns it off",
                fragment.display()
            )));
        }
        return Ok(());
    }
    if !cfg.lines().any(|l| l == line) {
        return Err(KernelError::Option(format!(
            "{}: `{line}` did not survive olddefconfig (a dependency is missing)",
            fragment.display()
        )));
    }
    Ok(())
}

/// Build the kernel of the series in `opts.kernel_dir`, or find it in the
/// cache.
pub fn build(opts: &BuildOptions, progress: &mut dyn FnMut(Progress)) -> Result<Built> {
    let series = Series::load(&opts.kernel_dir, opts.flavour)?;
    series.check_cores()?;
    build_series(opts, &series, progress)
}

/// Build the series one patch more at a time: the first patch alone, the
/// first two, ... up to the whole series, each a kernel of its own in the
/// cache (a bisectable series builds at every step). Stops at the first
/// prefix that fails, naming its last patch.
pub fn build_each_patch(
    opts: &BuildOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<Built>> {
    let series = Series::load(&opts.kernel_dir, opts.flavour)?;
    series.check_cores()?;
    let mut built = Vec::new();
    for n in 1..=series.patches.len() {
        let prefix = series.prefix(n);
        let last = prefix.patches[n - 1].clone();
        progress(Progress::Step(format!(
            "patch {n}/{}: {}",
            series.patches.len(),
            last.display()
        )));
        match build_series(opts, &prefix, progress) {
            Ok(b) => built.push(b),
            Err(e) => {
                return Err(KernelError::Option(format!(
                    "the series does not build up to {}: {e}",
                    last.display()
                )))
            }
        }
    }
    Ok(built)
}

fn build_series(
    opts: &BuildOptions,
    series: &Series,
    progress: &mut dyn FnMut(Progress),
) -> Result<Built> {
    let started = Instant::now();
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
        flavour: opts.flavour,
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
        "building the {} kernel {hash} ({SOURCE_PACKAGE} {version}); log {}",
        opts.flavour.name(),
        log.display()
    )));
    let src = ensure_source(opts, &vdir, &log)?;
    let (work, cold) = ensure_work(&vdir, &src, opts.flavour, &log)?;
    revert_series(&work, &log)?;
    apply_series(series, &work, &log)?;
    let cfg_hash = {
        let mut h = Sha256::new();
        for c in &series.configs {
            h.update(fs::read(c).map_err(|e| KernelError::io("reading", c, e))?);
        }
        hex(&h.finalize()[..12])
    };
    let stamp = work.join(".nvmos-config");
    let partial = series.partial;
    let configured = fs::read_to_string(&stamp).ok().as_deref() == Some(cfg_hash.as_str())
        && check_config(series, &work, partial).is_ok();
    if !configured {
        let _ = fs::remove_file(&stamp);
        configure(series, &work, &log, partial)?;
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
    let series = Series::load(&opts.kernel_dir, Flavour::Plain)?;
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
            .args(["--no-tree", "--strict", "--terse", "--show-types"]);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_files_are_read_back_from_a_series() {
        let first = "\
--- a/mm/Makefile\t2026-01-01
+++ b/mm/Makefile\t2026-01-01
@@ -1,1 +1,2 @@
 obj-y += a.o
+obj-y += b.o
--- /dev/null\t1970-01-01
+++ b/mm/b.c\t2026-01-01
@@ -0,0 +1,4 @@
+int b;
+
+int c;
+int d;
";
        let second = "\
diff --git a/mm/b.c b/mm/b.c
--- a/mm/b.c
+++ b/mm/b.c
@@ -2,3 +2,3 @@
 
-int c;
+long c;
 int d;
";
        let added = files_added(&[first, second]).unwrap();
        assert_eq!(added.len(), 1, "{added:?}");
        assert_eq!(added["mm/b.c"], "int b;\n\nlong c;\nint d;\n");
        let bad = second.replace(" int d;", " int e;");
        assert!(files_added(&[first, &bad]).unwrap_err().contains("mm/b.c"));
    }
}
