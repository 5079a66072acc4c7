//! The guest's memory accesses, as memory requests: a QEMU TCG plugin
//! (`tcg/nvmos_memtrace.c`) records every load and store's physical
//! address while the workload runs, filters them through a model of the
//! machine's last-level cache, and writes the line fills and dirty
//! writebacks as a DRAMSim3 trace that `nvmos memsys run` replays.
//!
//! The guest marks the window with the 9-byte NOPs the plugin watches
//! for, executed by `/bin/nvmos-mark start|stop` (compiled into the
//! initramfs). Timing assumptions (one instruction per `insn_ps`, idle
//! vCPUs resuming at the furthest vCPU's time, the cache seeing accesses
//! in host order) are in the plugin's header and in [`MemTraceReport`].

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use nvmos_memsys::{Machine, Technology};

use crate::{KernelError, Result};

/// The plugin's source, compiled on first use into the cache.
const PLUGIN_SOURCE: &str = include_str!("../tcg/nvmos_memtrace.c");

/// The header every plugin of nvmos includes: QEMU's plugin API as it
/// uses it and the guest's marker instruction.
const PLUGIN_API: (&str, &str) = (
    "nvmos_plugin_api.h",
    include_str!("../tcg/nvmos_plugin_api.h"),
);

/// The marker program's source: the guest runs it to open and close the
/// recorded window.
const MARK_SOURCE: &str = r#"/* nvmos-mark start|stop: the NOPs nvmos_memtrace opens and closes its window at. */
#include <string.h>
int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "start"))
		asm volatile(".byte 0x66,0x0f,0x1f,0x84,0x00,0x00,0x03,0x56,0x4e");
	else if (argc == 2 && !strcmp(argv[1], "stop"))
		asm volatile(".byte 0x66,0x0f,0x1f,0x84,0x00,0x01,0x03,0x56,0x4e");
	else
		return 2;
	return 0;
}
"#;

/// The guest path of the marker program.
pub const MARK_PROGRAM: &str = "/bin/nvmos-mark";

/// What the plugin records and how it times it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemTrace {
    /// Where the trace goes (DRAMSim3 text, sorted by cycle).
    pub output: PathBuf,
    /// The machine preset whose cache and memory clock are modelled.
    pub machine: String,
    /// Last-level cache bytes (0: no cache, every access a request).
    pub llc_bytes: u64,
    /// Its ways.
    pub llc_ways: u32,
    /// The memory clock period, picoseconds (the machine's DRAM tCK).
    pub tck_ps: u64,
    /// Picoseconds one guest instruction takes (1000: 1 ns, as
    /// `-icount shift=0`).
    pub insn_ps: u64,
    /// Requests kept at most; more are counted as dropped and the run is
    /// refused.
    pub max_records: u64,
    /// Also count, per 4 KiB page, the accesses to this window of virtual
    /// addresses `(start, bytes)`.
    pub watch: Option<(u64, u64)>,
    /// The command opens and closes the window itself with
    /// [`MARK_PROGRAM`]; otherwise the guest's `/init` opens it right
    /// before the command and closes it right after.
    pub marked_by_command: bool,
}

impl MemTrace {
    /// Record into `output` with the cache and the memory clock of the
    /// preset `machine` (e.g. `ddr4-2400`). Refuses a machine without an
    /// `[llc]` or without DRAM timings.
    pub fn for_machine(output: PathBuf, machine: &str) -> Result<MemTrace> {
        let m = Machine::preset(machine).map_err(|e| KernelError::Option(e.to_string()))?;
        let llc = m.llc().ok_or_else(|| {
            KernelError::Option(format!(
                "machine {machine} names no last-level cache ([llc] in its preset): \
                 the trace needs one to filter accesses (ddr4-2400 has one)"
            ))
        })?;
        let tck_ps = m
            .timing(Technology::Dram)
            .map(|t| u64::from(t.tck_ps))
            .ok_or_else(|| KernelError::Option(format!("machine {machine} has no DRAM timings")))?;
        Ok(MemTrace {
            output,
            machine: machine.to_owned(),
            llc_bytes: llc.bytes,
            llc_ways: llc.ways,
            tck_ps,
            insn_ps: 1000,
            max_records: 200_000_000,
            watch: None,
            marked_by_command: false,
        })
    }

    /// Refuses what the plugin cannot do.
    pub fn check(&self) -> Result<()> {
        if self.llc_bytes != 0
            && (self.llc_ways == 0 || !self.llc_bytes.is_multiple_of(u64::from(self.llc_ways) * 64))
        {
            return Err(KernelError::Option(format!(
                "mem trace: llc bytes {} must be a multiple of ways ({}) x 64",
                self.llc_bytes, self.llc_ways
            )));
        }
        if self.tck_ps == 0 || self.insn_ps == 0 || self.max_records == 0 {
            return Err(KernelError::Option(
                "mem trace: tck_ps, insn_ps and max_records must be positive".into(),
            ));
        }
        if let Some((_, len)) = self.watch {
            if len == 0 || len > 1 << 36 {
                return Err(KernelError::Option(format!(
                    "mem trace: a watch window of {len} bytes (1 byte to 64 GiB)"
                )));
            }
        }
        Ok(())
    }

    /// The plugin's arguments, with its statistics going to `stats`.
    pub fn plugin_args(&self, so: &Path, stats: &Path) -> String {
        let mut a = format!(
            "{},out={},stats={},llc_bytes={},llc_ways={},insn_ps={},tck_ps={},max_records={}",
            so.display(),
            tmp_of(&self.output).display(),
            stats.display(),
            self.llc_bytes,
            self.llc_ways,
            self.insn_ps,
            self.tck_ps,
            self.max_records
        );
        if let Some((start, len)) = self.watch {
            a.push_str(&format!(",watch={start:#x}:{len:#x}"));
        }
        a
    }
}

/// Where the plugin writes before the run is accepted: the output is
/// renamed into place only once its statistics check out.
pub(crate) fn tmp_of(output: &Path) -> PathBuf {
    let mut name = output.file_name().unwrap_or_default().to_os_string();
    name.push(".plugin");
    output.with_file_name(name)
}

/// The plugin's files beside an output (`OUT.plugin` and its own
/// `.tmp`), removed on drop: a run that fails or is refused leaves no
/// trace behind, whole or torn.
pub(crate) struct Unaccepted {
    paths: [PathBuf; 2],
}

impl Unaccepted {
    pub(crate) fn new(output: &Path) -> Unaccepted {
        let tmp = tmp_of(output);
        let mut torn = tmp.clone().into_os_string();
        torn.push(".tmp");
        Unaccepted {
            paths: [tmp, PathBuf::from(torn)],
        }
    }
}

impl Drop for Unaccepted {
    fn drop(&mut self) {
        for p in &self.paths {
            // Best effort: absent once accepted (renamed to the output).
            let _ = fs::remove_file(p);
        }
    }
}

/// Per page of the watched window.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watch {
    /// Accesses to the window.
    pub accesses: u64,
    /// Pages of it accessed.
    pub pages: u64,
    /// Distinct frames that backed them (first frame of each page).
    pub frames: u64,
    /// Fewest accesses to a page accessed.
    pub min_per_page: u64,
    /// Most.
    pub max_per_page: u64,
    /// Accesses to a page that another frame had backed before.
    pub remapped: u64,
}

/// What the plugin counted. Every access between the markers is a load
/// or a store; an I/O access has no RAM address and is counted in `io`,
/// not recorded; `hits + misses` are the lines looked up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemTraceReport {
    /// The machine modelled.
    pub machine: String,
    /// The trace written.
    pub output: PathBuf,
    /// Its size in bytes.
    pub trace_bytes: u64,
    /// Loads recorded.
    pub loads: u64,
    /// Stores recorded.
    pub stores: u64,
    /// Accesses to I/O memory: counted, not recorded.
    pub io: u64,
    /// Cache hits.
    pub hits: u64,
    /// Cache misses: each a READ request (write-allocate).
    pub misses: u64,
    /// Dirty lines evicted: each a WRITE request.
    pub writebacks: u64,
    /// Accesses that straddled two lines of one page (both looked up).
    pub split: u64,
    /// Accesses that straddled two pages (only the first line looked up).
    pub page_cross: u64,
    /// Requests over `max_records`, not written.
    pub dropped: u64,
    /// Accesses QEMU reported with another instruction's index (those of
    /// helpers such as exception delivery), timed at the vCPU's previous
    /// access instead.
    #[serde(default)]
    pub retimed: u64,
    /// Requests written.
    pub records: u64,
    /// Start markers seen (the first opens the window).
    pub starts: u64,
    /// Stop markers seen (the first closes it).
    pub stops: u64,
    /// vCPUs that ran.
    pub vcpus: u64,
    /// Guest instructions run in the window, all vCPUs.
    pub instructions: u64,
    /// The window's length in instructions of the furthest vCPU.
    pub span: u64,
    /// The cache modelled, bytes (0: none).
    pub llc_bytes: u64,
    /// Its ways.
    pub llc_ways: u64,
    /// Picoseconds an instruction takes.
    pub insn_ps: u64,
    /// The memory clock, picoseconds.
    pub tck_ps: u64,
    /// The watched window's counts, if one was watched.
    pub watch: Option<Watch>,
}

impl MemTraceReport {
    /// Accesses recorded: loads and stores.
    pub fn accesses(&self) -> u64 {
        self.loads + self.stores
    }

    /// Misses per access looked up.
    pub fn miss_rate(&self) -> f64 {
        let looked = self.hits + self.misses;
        if looked == 0 {
            0.0
        } else {
            self.misses as f64 / looked as f64
        }
    }

    /// Parse the plugin's statistics file. Refuses a file without its
    /// closing `complete 1` (the plugin did not finish) or a key missing.
    pub fn parse(text: &str, path: &Path) -> Result<MemTraceReport> {
        let bad = |what: String| KernelError::GuestOutput {
            path: path.to_owned(),
            what,
        };
        let mut kv = std::collections::BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let (k, v) = line
                .split_once(' ')
                .ok_or_else(|| bad(format!("line {}: {line:?} is not `key value`", i + 1)))?;
            let v: u64 = v
                .parse()
                .map_err(|_| bad(format!("line {}: {v:?} is not a count", i + 1)))?;
            kv.insert(k.to_owned(), v);
        }
        if kv.get("complete") != Some(&1) {
            return Err(bad("no `complete 1`: the plugin did not finish".into()));
        }
        let get = |k: &str| {
            kv.get(k)
                .copied()
                .ok_or_else(|| bad(format!("no {k:?} counter")))
        };
        let watch = if kv.contains_key("watch_accesses") {
            Some(Watch {
                accesses: get("watch_accesses")?,
                pages: get("watch_pages")?,
                frames: get("watch_frames")?,
                min_per_page: get("watch_min_per_page")?,
                max_per_page: get("watch_max_per_page")?,
                remapped: get("watch_remapped")?,
            })
        } else {
            None
        };
        Ok(MemTraceReport {
            machine: String::new(),
            output: PathBuf::new(),
            trace_bytes: 0,
            loads: get("loads")?,
            stores: get("stores")?,
            io: get("io")?,
            hits: get("hits")?,
            misses: get("misses")?,
            writebacks: get("writebacks")?,
            split: get("split")?,
            page_cross: get("page_cross")?,
            dropped: get("dropped")?,
            retimed: get("retimed")?,
            records: get("records")?,
            starts: get("starts")?,
            stops: get("stops")?,
            vcpus: get("vcpus")?,
            instructions: get("instructions")?,
            span: get("span")?,
            llc_bytes: get("llc_bytes")?,
            llc_ways: get("llc_ways")?,
            insn_ps: get("insn_ps")?,
            tck_ps: get("tck_ps")?,
            watch,
        })
    }

    /// Refuses a recording that is not the whole window: no start or no
    /// stop marker, requests dropped, or counts that disagree
    /// (`misses + writebacks` must be the requests written).
    pub fn check_complete(&self, stats: &Path) -> Result<()> {
        let bad = |what: String| KernelError::GuestOutput {
            path: stats.to_owned(),
            what,
        };
        if self.starts == 0 || self.stops == 0 {
            return Err(bad(format!(
                "{} start and {} stop markers: the window was not opened and closed \
                 (did the workload run {MARK_PROGRAM}?)",
                self.starts, self.stops
            )));
        }
        if self.dropped > 0 {
            return Err(bad(format!(
                "{} requests dropped over the limit of {}: a shorter workload or a larger \
                 limit",
                self.dropped, self.records
            )));
        }
        if self.misses + self.writebacks != self.records {
            return Err(bad(format!(
                "{} misses + {} writebacks but {} requests written",
                self.misses, self.writebacks, self.records
            )));
        }
        Ok(())
    }
}

/// Compile `source` with `cc FLAGS` once per content (the plugins'
/// shared header included) into `cache/tcg/<hash>/<file>`; its path.
pub(crate) fn compile_cached(
    cache: &Path,
    source: &str,
    stem: &str,
    file: &str,
    flags: &[&str],
) -> Result<PathBuf> {
    crate::kbuild::require_tool("cc", "apt-get install gcc libc6-dev")?;
    let mut h = Sha256::new();
    h.update(PLUGIN_API.1.as_bytes());
    h.update(source.as_bytes());
    h.update(flags.join(" ").as_bytes());
    let hash = crate::kbuild::hex(&h.finalize()[..8]);
    let dir = cache.join("tcg").join(hash);
    let out = dir.join(file);
    if out.is_file() {
        return Ok(out);
    }
    fs::create_dir_all(&dir).map_err(|e| KernelError::io("creating", &dir, e))?;
    // Source and program under names of this process and call, renamed
    // into place whole: two threads or processes compiling at once never
    // see each other's half-written files, and the last rename wins with
    // the same bytes.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let unique = format!(
        "{}-{}-{stem}",
        std::process::id(),
        CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let src = dir.join(format!("{unique}.c"));
    let staged = dir.join(&unique);
    let header = dir.join(PLUGIN_API.0);
    let header_tmp = dir.join(format!("{unique}.h"));
    fs::write(&header_tmp, PLUGIN_API.1).map_err(|e| KernelError::io("writing", &header_tmp, e))?;
    fs::rename(&header_tmp, &header).map_err(|e| KernelError::io("renaming", &header_tmp, e))?;
    fs::write(&src, source).map_err(|e| KernelError::io("writing", &src, e))?;
    let built = crate::run::cc_into(flags, &src, &staged);
    let _ = fs::remove_file(&src);
    built?;
    fs::rename(&staged, &out).map_err(|e| KernelError::io("renaming", &staged, e))?;
    Ok(out)
}

/// The plugin, compiled into the cache once per content; its path.
pub fn plugin(cache: &Path) -> Result<PathBuf> {
    compile_cached(
        cache,
        PLUGIN_SOURCE,
        "nvmos_memtrace",
        "nvmos_memtrace.so",
        &["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-pthread"],
    )
}

/// The plugin's cache and output as a host program that reads
/// `vcpu time paddr R|W` lines: how the cache model is tested.
pub fn host_driver(cache: &Path) -> Result<PathBuf> {
    compile_cached(
        cache,
        PLUGIN_SOURCE,
        "nvmos_memtrace",
        "nvmos_memtrace_host",
        &[
            "-DNVMOS_MEMTRACE_HOST",
            "-O2",
            "-Wall",
            "-Wextra",
            "-pthread",
        ],
    )
}

/// The static marker program for the initramfs.
pub(crate) fn mark_program(cache: &Path) -> Result<PathBuf> {
    compile_cached(
        cache,
        MARK_SOURCE,
        "nvmos-mark",
        "nvmos-mark",
        &["-static", "-O2", "-Wall"],
    )
}
