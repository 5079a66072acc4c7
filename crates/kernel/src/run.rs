//! `nvmos kernel run`: boot the patched kernel under QEMU with a policy,
//! run a workload from a small initramfs, and bring out the guest's
//! `kmem:mm_page_alloc/free` trace, its machine description and the
//! policy's counters.
//!
//! The guest is QEMU's microvm; it writes everything it reports to a raw
//! virtio disk, as sections `==nvmos:NAME==` closed by `==nvmos:end==`; a
//! serial port is its console, which the watchdog watches: a guest whose console stays
//! silent for `stall_s` seconds (it prints a heartbeat every 5 s of guest
//! time), or that runs past `timeout_s`, is killed and the run fails.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use nvmos_trace::{
    machine, Event, Format, MachineInfo, NvtWriter, SourceCounts, TextReader, TraceHeader,
};
use sha2::{Digest, Sha256};

use crate::kbuild::{self, require_tool, tail_of, BuildOptions, Built, FileLock};
use crate::memtrace::{self, MemTrace, MemTraceReport};
use crate::{cpio::Cpio, KernelError, Progress, Result};

/// The order-0 page-frame policy the guest boots with (`nvmos_policy=`).
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Linux's buddy allocator with its pcp lists, unchanged.
    Buddy,
    /// iBuddy: every free frame in a per-zone space, least recently freed first.
    IBuddy,
    /// Lazy iBuddy with per-CPU bypass lists of one frame.
    Lis1,
    /// Lazy iBuddy with per-CPU bypass lists of 31 frames.
    Lis31,
    /// The fair lazy iBuddy: per-CPU staged lists refilled 31 frames at a
    /// time from the space's least recently freed end, frees given back
    /// 31 at a time (nvmos-frames' `PcpPolicy::LIS_31_FAIR`).
    #[serde(rename = "lis31-fair")]
    Lis31Fair,
    /// Seed 004's Adaptive-Buddy: kernel and user pools of banks.
    Adaptive,
    /// Adaptive-Buddy with the seed's migration: every
    /// `nvmos_migrate_ms=` (1000 by default) a pass moves the movable
    /// pages out of the emptiest banks in use, up to the break point, so
    /// that those banks go offline.
    #[serde(rename = "adaptive-migrate")]
    AdaptiveMigrate,
    /// Seed 002's M³: each frame's colour is its DRAM bank
    /// (`nvmos_m3_shift=`, `nvmos_m3_colours=`; DDR4-2400's by default),
    /// each CPU draws its frames at random from its own share of the
    /// colours (nvmos-frames' `M3` with `M3Policy::PARTITIONED`).
    M3,
}

impl Policy {
    /// The series' placements: every policy but [`Policy::AdaptiveMigrate`],
    /// which places as [`Policy::Adaptive`] does and moves pages after.
    pub const ALL: [Policy; 6] = [
        Policy::Buddy,
        Policy::IBuddy,
        Policy::Lis1,
        Policy::Lis31,
        Policy::Lis31Fair,
        Policy::Adaptive,
    ];

    /// Every policy of the series.
    pub const EVERY: [Policy; 8] = [
        Policy::Buddy,
        Policy::IBuddy,
        Policy::Lis1,
        Policy::Lis31,
        Policy::Lis31Fair,
        Policy::Adaptive,
        Policy::AdaptiveMigrate,
        Policy::M3,
    ];

    /// The boot parameter's value.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Buddy => "buddy",
            Policy::IBuddy => "ibuddy",
            Policy::Lis1 => "lis1",
            Policy::Lis31 => "lis31",
            Policy::Lis31Fair => "lis31-fair",
            Policy::Adaptive => "adaptive",
            Policy::AdaptiveMigrate => "adaptive-migrate",
            Policy::M3 => "m3",
        }
    }

    /// Parse a boot-parameter value.
    pub fn parse(name: &str) -> Result<Policy> {
        Policy::EVERY
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| KernelError::UnknownPolicy {
                name: name.to_owned(),
            })
    }
}

/// The static workloads the initramfs ships (`traces/workloads/*.c`).
pub const WORKLOADS: [&str; 6] = [
    "memstress",
    "filejob",
    "sortjob",
    "compilejob",
    "sparsejob",
    "pressurejob",
];

/// The guest command line the study runs for a shipped workload.
pub fn workload_command(name: &str) -> Result<Vec<String>> {
    let args: &[&str] = match name {
        // A 1 MiB working set mapped, touched and unmapped 500 times:
        // 128,000 frames each way, each of the set's frames reused by a
        // policy that hands back what was just freed.
        "memstress" => &["memstress", "1", "500"],
        // 1 MiB of page-cache files written, read back and deleted, 500
        // times.
        "filejob" => &["filejob", "/tmp/files", "1", "500"],
        // 32 MiB of keys sorted and packed, twice.
        "sortjob" => &["sortjob", "32", "2"],
        // The compile-like job: 50 sources built 3 times, each by a
        // fork + exec of busybox gzip, then linked in anonymous memory.
        "compilejob" => &["compilejob", "/tmp/build", "50", "3"],
        // 768 MiB touched in 1 MiB chunks, all but one chunk in 16 freed,
        // the rest held for 20 s of guest time: every bank the job filled
        // left a sixteenth full (seed 004's case for migration).
        "sparsejob" => &["sparsejob", "768", "16", "20"],
        // Kernel pages placed in a memory whose free frames are
        // scattered: 1200 MiB of anonymous memory mapped with every other
        // 1 MiB chunk then freed, and while it is held, 300 sleeping
        // processes (page tables, kernel stacks, slab) and the compile
        // job. Seed 004 says Buddy spreads such pages over many banks.
        "pressurejob" => &[
            "sh",
            "-c",
            "sparsejob 1200 2 15 > /tmp/sparse.log & SP=$!; \
             while ! grep -q 'sparsejob sparse' /tmp/sparse.log; do usleep 100000; done; \
             for i in $(seq 300); do sleep 8 & done; \
             compilejob /tmp/build 50 3 && wait $SP && wait",
        ],
        _ => {
            return Err(KernelError::UnknownWorkload {
                name: name.to_owned(),
            })
        }
    };
    Ok(args.iter().map(|s| s.to_string()).collect())
}

/// Which QEMU accelerator to use.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Accel {
    /// KVM when `/dev/kvm` opens and a KVM guest has not failed in this
    /// process; TCG otherwise, and after a KVM guest fails to start.
    Auto,
    /// Software emulation only.
    Tcg,
}

/// How to run one guest.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The kernel to build (or find in the cache).
    pub build: BuildOptions,
    /// `traces/workloads`, whose `*.c` are compiled into the initramfs.
    pub workloads_dir: PathBuf,
    /// The policy booted.
    pub policy: Policy,
    /// Guest memory in MiB.
    pub mem_mib: u64,
    /// Guest CPUs.
    pub cpus: u32,
    /// The command the guest runs (in `/tmp`), e.g. `["memstress", "256", "2"]`.
    pub command: Vec<String>,
    /// Where to write the trace as `.nvt`; none keeps it in memory only.
    pub output: Option<PathBuf>,
    /// Longest wall-clock run, seconds.
    pub timeout_s: u64,
    /// Longest console silence, seconds.
    pub stall_s: u64,
    /// Accelerator.
    pub accel: Accel,
    /// Trace ring buffer per guest CPU, KiB.
    pub buffer_kb: u32,
    /// The QEMU program (a name looked up on PATH, or a path).
    pub qemu: PathBuf,
    /// Bank size in MiB (`nvmos_bank_mib=`): the unit of the per-bank
    /// counters under every policy and of `adaptive`'s pools; a power of
    /// two, at least 4.
    pub bank_mib: u64,
    /// A `/init` of the caller's instead of the traced workload run (see
    /// [`boot_guest`] for what it must do); `None` for [`run`].
    pub init: Option<String>,
    /// More files for the initramfs: (path in the guest, host file).
    pub files: Vec<(String, PathBuf)>,
    /// Share the host's root filesystem read-only with the guest over
    /// virtio-9p, mount tag [`HOST_ROOT_TAG`]: the guest can then mount it
    /// (`mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose
    /// hostroot /mnt`) and run host programs in a chroot.
    pub share_host_root: bool,
    /// QEMU's `-cpu` model; `None` keeps QEMU's default (`qemu64` under
    /// TCG), which every run of the kernel study used. `max` gives a TCG
    /// guest every instruction set QEMU emulates, which host programs run
    /// over [`RunOptions::share_host_root`] may need (numpy's baseline is
    /// x86-64-v2: `qemu64` has no SSSE3 and numpy dies with SIGILL).
    pub cpu_model: Option<String>,
    /// More kernel command-line options (after the policy's and the
    /// flavour's), e.g. `cma=64M`.
    pub extra_cmdline: Vec<String>,
    /// More QEMU arguments, e.g. `-icount shift=0` or a TCG `-plugin`.
    /// TCG-only arguments need [`Accel::Tcg`].
    pub extra_qemu_args: Vec<String>,
    /// Sample `nvmos_policy` every this many milliseconds of guest time
    /// while the workload runs ([`Run::timeline`]); `None` takes no
    /// samples. Each sample walks every frame of the guest and forks a
    /// `usleep`, whose page allocations are traced with the workload's.
    pub sample_ms: Option<u64>,
    /// Hot-page migration (`nvmos_hot_ms=` and its knobs); `None` leaves
    /// it off. The run then reports its counters and the guest's wear per
    /// frame ([`Run::hot`]).
    pub hot: Option<HotMigrate>,
    /// Record the guest's memory accesses through a cache model as a
    /// memory-request trace ([`crate::memtrace`]); needs TCG, which it
    /// forces. `None` records nothing.
    pub mem_trace: Option<MemTrace>,
}

/// The series' hot-page migration, as booted: a pass every `ms`
/// milliseconds counts dirty PTEs as writes and moves the pages written
/// in `threshold` passes to the least worn of `candidates` frames, copies
/// within `budget_pct` percent of the writes. `threshold` 0 counts
/// without moving: the baseline with the same sampling.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HotMigrate {
    /// Period of the passes, ms (10..=3600000).
    pub ms: u32,
    /// Passes a page was written in since it came before it moves
    /// (0..=2^20; 0: count only).
    pub threshold: u32,
    /// Copies at most, percent of the writes counted (1..=100).
    pub budget_pct: u32,
    /// Frames asked of the allocator per move (1..=16).
    pub candidates: u32,
}

impl HotMigrate {
    /// The kernel's defaults at period `ms`: hot after 4 passes, 5 %,
    /// 4 candidates.
    pub fn new(ms: u32) -> HotMigrate {
        HotMigrate {
            ms,
            threshold: 4,
            budget_pct: 5,
            candidates: 4,
        }
    }

    /// Counting only, at period `ms`.
    pub fn counting(ms: u32) -> HotMigrate {
        HotMigrate {
            threshold: 0,
            ..HotMigrate::new(ms)
        }
    }

    /// Refuses what the kernel would refuse (it keeps its default, with
    /// an error on the console, rather than fail).
    pub fn check(&self) -> std::result::Result<(), String> {
        let bad = |what: &str, v: u32, lo: u32, hi: u32| {
            Err(format!(
                "hot-page migration {what} {v} is not in {lo}..={hi}"
            ))
        };
        if !(10..=3_600_000).contains(&self.ms) {
            return bad("period (ms)", self.ms, 10, 3_600_000);
        }
        if self.threshold > 1 << 20 {
            return bad("threshold", self.threshold, 0, 1 << 20);
        }
        if !(1..=100).contains(&self.budget_pct) {
            return bad("budget (%)", self.budget_pct, 1, 100);
        }
        if !(1..=16).contains(&self.candidates) {
            return bad("candidates", self.candidates, 1, 16);
        }
        Ok(())
    }

    /// The kernel command-line options.
    pub fn cmdline(&self) -> Vec<String> {
        vec![
            format!("nvmos_hot_ms={}", self.ms),
            format!("nvmos_hot_threshold={}", self.threshold),
            format!("nvmos_hot_budget_pct={}", self.budget_pct),
            format!("nvmos_hot_candidates={}", self.candidates),
        ]
    }
}

/// What hot-page migration reported at the end of a run.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HotReport {
    /// The settings booted.
    pub settings: HotMigrate,
    /// debugfs `nvmos_hot`: `hot_passes`, `hot_writes`, `hot_moved`, ...
    pub counters: BTreeMap<String, u64>,
    /// debugfs `nvmos_wear`: (pfn, writes counted plus copies received)
    /// for every frame with any, in pfn order.
    pub wear: Vec<(u64, u32)>,
}

impl HotReport {
    /// A counter, 0 when absent.
    pub fn get(&self, key: &str) -> u64 {
        self.counters.get(key).copied().unwrap_or(0)
    }

    /// Parse the two debugfs files.
    pub fn parse(
        settings: HotMigrate,
        counters: &str,
        wear: &str,
    ) -> std::result::Result<HotReport, String> {
        let mut c = BTreeMap::new();
        for (i, line) in counters.lines().enumerate() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                [] => {}
                [k, v] => {
                    let v = v
                        .parse()
                        .map_err(|_| format!("nvmos_hot line {}: {line:?}", i + 1))?;
                    c.insert((*k).to_owned(), v);
                }
                _ => return Err(format!("nvmos_hot line {}: {line:?}", i + 1)),
            }
        }
        if !c.contains_key("hot_passes") {
            return Err("nvmos_hot has no hot_passes: hot-page migration did not start".into());
        }
        let mut out = Vec::new();
        for (i, line) in wear.lines().enumerate() {
            let bad = || format!("nvmos_wear line {}: {line:?}", i + 1);
            let mut w = line.split_whitespace();
            let (Some(pfn), Some(n), None) = (w.next(), w.next(), w.next()) else {
                if line.trim().is_empty() {
                    continue;
                }
                return Err(bad());
            };
            let pfn: u64 = pfn.parse().map_err(|_| bad())?;
            if out.last().is_some_and(|&(p, _)| p >= pfn) {
                return Err(format!("{}: not in pfn order", bad()));
            }
            out.push((pfn, n.parse().map_err(|_| bad())?));
        }
        Ok(HotReport {
            settings,
            counters: c,
            wear: out,
        })
    }
}

/// QEMU's `-icount` options ([`RunOptions::use_icount`]): one nanosecond
/// per instruction, and guest time does not follow the host's while the
/// guest idles.
pub const ICOUNT_OPTIONS: &str = "shift=0,sleep=off";

/// The virtio-9p mount tag of [`RunOptions::share_host_root`].
pub const HOST_ROOT_TAG: &str = "hostroot";

/// Where [`boot_guest`]'s data disk keeps raw files: byte offset 512 MiB of
/// the 1 GiB disk, past the sections a custom `/init` writes at its start.
pub const DISK_FILE_OFFSET: u64 = 512 << 20;

/// The default bank: 128 MiB, 16 banks in the 2 GiB guest.
pub const DEFAULT_BANK_MIB: u64 = 128;

impl RunOptions {
    /// A run of `command` under `policy` with 2 GiB, 2 CPUs, TCG or KVM.
    pub fn new(
        build: BuildOptions,
        workloads_dir: PathBuf,
        policy: Policy,
        command: Vec<String>,
    ) -> Self {
        RunOptions {
            build,
            workloads_dir,
            policy,
            mem_mib: 2048,
            cpus: 2,
            command,
            output: None,
            timeout_s: 900,
            stall_s: 180,
            accel: Accel::Auto,
            buffer_kb: 32768,
            qemu: PathBuf::from("qemu-system-x86_64"),
            bank_mib: DEFAULT_BANK_MIB,
            init: None,
            files: Vec::new(),
            share_host_root: false,
            cpu_model: None,
            extra_cmdline: Vec::new(),
            extra_qemu_args: Vec::new(),
            sample_ms: None,
            hot: None,
            mem_trace: None,
        }
    }

    /// Run the guest under `-icount` [`ICOUNT_OPTIONS`], which only TCG
    /// has: guest time is then instructions, the same on every host.
    pub fn use_icount(&mut self) {
        self.accel = Accel::Tcg;
        self.extra_qemu_args
            .extend(["-icount".to_owned(), ICOUNT_OPTIONS.to_owned()]);
    }

    /// Whether [`RunOptions::use_icount`] was called.
    pub fn uses_icount(&self) -> bool {
        self.extra_qemu_args
            .windows(2)
            .any(|w| w[0] == "-icount" && w[1] == ICOUNT_OPTIONS)
    }
}

/// One bank of the guest in one zone, from `nvmos_policy` in debugfs.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Bank {
    /// Bank number (pfn / frames per bank).
    pub bank: u64,
    /// Zone name.
    pub zone: String,
    /// Frames in use.
    pub used: u64,
    /// Of those, frames neither on an LRU list nor movable: kernel pages,
    /// which keep the bank from being powered down (seed 004).
    pub pinned: u64,
    /// Under `adaptive`, the pool the bank is in (`kernel`, `user`) or
    /// `offline`; `-` under the other policies.
    pub pool: String,
}

/// The policy's counters in `nvmos_policy` in debugfs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    /// The policy the guest reports it runs.
    pub policy: String,
    /// Named counters (frames per path, coalesces, ...).
    pub values: BTreeMap<String, u64>,
    /// Per bank.
    pub banks: Vec<Bank>,
}

impl Counters {
    /// Parse the file's text.
    pub fn parse(text: &str) -> std::result::Result<Counters, String> {
        let mut c = Counters::default();
        for (i, line) in text.lines().enumerate() {
            let w: Vec<&str> = line.split_whitespace().collect();
            let bad = || format!("line {}: {line:?}", i + 1);
            match w.as_slice() {
                [] => {}
                ["policy", p] => c.policy = (*p).to_owned(),
                ["bank", n, zone, used, pinned, pool] => c.banks.push(Bank {
                    bank: n.parse().map_err(|_| bad())?,
                    zone: (*zone).to_owned(),
                    used: used.parse().map_err(|_| bad())?,
                    pinned: pinned.parse().map_err(|_| bad())?,
                    pool: (*pool).to_owned(),
                }),
                [k, v] => {
                    c.values
                        .insert((*k).to_owned(), v.parse().map_err(|_| bad())?);
                }
                _ => return Err(bad()),
            }
        }
        if c.policy.is_empty() {
            return Err("no `policy` line".to_owned());
        }
        Ok(c)
    }

    /// A counter, 0 when absent.
    pub fn get(&self, key: &str) -> u64 {
        self.values.get(key).copied().unwrap_or(0)
    }

    /// Banks (by number: a bank crossing a zone edge counts once) holding
    /// at least one pinned frame.
    pub fn pinned_banks(&self) -> usize {
        self.distinct(|b| b.pinned > 0)
    }

    /// Banks holding at least one frame in use.
    pub fn used_banks(&self) -> usize {
        self.distinct(|b| b.used > 0)
    }

    /// Banks of the guest.
    pub fn bank_count(&self) -> usize {
        self.distinct(|_| true)
    }

    /// Pinned frames per bank number (zones summed).
    pub fn pinned_by_bank(&self) -> BTreeMap<u64, u64> {
        let mut m = BTreeMap::new();
        for b in &self.banks {
            *m.entry(b.bank).or_insert(0) += b.pinned;
        }
        m
    }

    fn distinct(&self, keep: impl Fn(&Bank) -> bool) -> usize {
        let set: std::collections::BTreeSet<u64> = self
            .banks
            .iter()
            .filter(|b| keep(b))
            .map(|b| b.bank)
            .collect();
        set.len()
    }
}

/// What one guest run produced.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Run {
    /// The policy booted.
    pub policy: Policy,
    /// The guest command.
    pub command: Vec<String>,
    /// The kernel booted.
    pub kernel: Built,
    /// `kvm` or `tcg`.
    pub accel: String,
    /// Host seconds from QEMU's start to the guest's init.
    pub boot_s: f64,
    /// Host seconds for the whole run.
    pub total_s: f64,
    /// The workload's exit status in the guest.
    pub workload_status: i32,
    /// The guest's machine.
    pub machine: MachineInfo,
    /// Events traced during the workload.
    pub event_count: u64,
    /// What the trace reader skipped or remapped, and events lost.
    pub counts: SourceCounts,
    /// `nvmos_policy` in debugfs before the workload.
    pub counters_before: Counters,
    /// `nvmos_policy` in debugfs after the trace buffers were sized (they
    /// are allocated through the page-frame policy, as kernel pages,
    /// between `counters_before` and this).
    pub counters_traced: Counters,
    /// `nvmos_policy` in debugfs after it.
    pub counters: Counters,
    /// `/proc/kpageflags` right after `counters`, summed per bank.
    pub page_flags: PageFlagBanks,
    /// `zone->lock` acquisitions during the workload, from `/proc/lock_stat`
    /// (the debug kernel's CONFIG_LOCK_STAT); `None` on the plain kernel.
    pub zone_lock_acquisitions: Option<u64>,
    /// `nvmos_policy` sampled while the workload ran
    /// ([`RunOptions::sample_ms`]), oldest first; empty without sampling.
    pub timeline: Vec<Counters>,
    /// Order-0 allocations in the trace.
    pub order0_allocations: u64,
    /// The guest's console log.
    pub console_log: PathBuf,
    /// The `.nvt` written, if asked.
    pub output: Option<PathBuf>,
    /// Hot-page migration's counters and the wear per frame, when it was
    /// booted ([`RunOptions::hot`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot: Option<HotReport>,
    /// What the memory-trace plugin recorded ([`RunOptions::mem_trace`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_trace: Option<MemTraceReport>,
    /// The events, for the study.
    #[serde(skip)]
    pub events: Vec<Event>,
}

const KVM_UNKNOWN: u8 = 0;
const KVM_BROKEN: u8 = 2;
static KVM: AtomicU8 = AtomicU8::new(KVM_UNKNOWN);

/// What identifies a KVM verdict: the host kernel and QEMU asked.
fn kvm_key(qemu: &Path) -> String {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{} {}\n", release.trim(), qemu.display())
}

/// KVM is tried when `/dev/kvm` opens and no KVM guest failed before on
/// this host kernel with this QEMU (in this process, or as remembered in
/// `verdict`, a file in the cache).
fn kvm_usable(verdict: &Path, qemu: &Path) -> bool {
    KVM.load(Ordering::Relaxed) != KVM_BROKEN
        && fs::read_to_string(verdict).ok().as_deref() != Some(kvm_key(qemu).as_str())
        && fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .is_ok()
}

/// A static busybox (the guest has no dynamic loader).
fn static_busybox() -> Result<PathBuf> {
    let hint = "apt-get install busybox-static";
    let path = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .map_or_else(|| require_tool("busybox", hint), Ok)?;
    let bytes = fs::read(&path).map_err(|e| KernelError::io("reading", &path, e))?;
    if has_interpreter(&bytes) {
        return Err(KernelError::ToolMissing {
            tool: "a static busybox".to_owned(),
            hint: format!("{} is dynamically linked; {hint}", path.display()),
        });
    }
    Ok(path)
}

/// Whether an ELF64 executable names a dynamic loader (a `PT_INTERP`
/// program header); anything that is not ELF64 counts as dynamic.
fn has_interpreter(elf: &[u8]) -> bool {
    let u16_at = |o: usize| {
        elf.get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
    };
    if !elf.starts_with(b"\x7fELF\x02\x01") {
        return true;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return true;
    };
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        elf.get(at..at + 4) == Some(&[3, 0, 0, 0][..])
    })
}

/// Compile `dir/*.c` with `cc -static -O2` into the cache, once per content.
fn compile_workloads(dir: &Path, cache: &Path) -> Result<Vec<(String, PathBuf)>> {
    require_tool("cc", "apt-get install gcc libc6-dev")?;
    let mut sources: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| KernelError::io("reading the workloads folder", dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    let mut h = Sha256::new();
    for s in &sources {
        h.update(s.file_name().unwrap_or_default().as_encoded_bytes());
        h.update(fs::read(s).map_err(|e| KernelError::io("reading", s, e))?);
    }
    let out = cache
        .join("workloads")
        .join(kbuild::hex(&h.finalize()[..8]));
    fs::create_dir_all(&out).map_err(|e| KernelError::io("creating", &out, e))?;
    let mut bins = Vec::new();
    for s in &sources {
        let name = s
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let bin = out.join(&name);
        if !bin.is_file() {
            cc_into(&["-static", "-O2", "-Wall"], s, &bin)?;
        }
        bins.push((name, bin));
    }
    Ok(bins)
}

/// `cc FLAGS -o OUT SRC`, into `OUT.tmp` renamed to `OUT` on success, so
/// a cache never holds a half-written program; on failure the compiler's
/// output is kept in `OUT.log` and its last lines are in the error.
pub(crate) fn cc_into(flags: &[&str], src: &Path, out: &Path) -> Result<()> {
    cc_sources_into(flags, &[src], out)
}

/// [`cc_into`] with several sources linked into one program.
pub(crate) fn cc_sources_into(flags: &[&str], srcs: &[&Path], out: &Path) -> Result<()> {
    let tmp = out.with_extension("tmp");
    let log = out.with_extension("log");
    let o = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .args(srcs)
        .output()
        .map_err(|e| KernelError::io("running cc on", srcs.first().copied().unwrap_or(out), e))?;
    if !o.status.success() {
        kbuild::write_atomic(&log, &o.stderr)?;
        let names: Vec<String> = srcs.iter().map(|s| s.display().to_string()).collect();
        return Err(KernelError::Command {
            what: format!("cc {} {}", flags.join(" "), names.join(" ")),
            status: o.status.to_string(),
            log: log.clone(),
            tail: tail_of(&log, 10),
        });
    }
    fs::rename(&tmp, out).map_err(|e| KernelError::io("renaming", &tmp, e))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// How every guest `/init` of nvmos starts (busybox sh): busybox's applets
/// on PATH, proc, sysfs and devtmpfs mounted (`/dev/vda` is the data
/// disk its report goes to).
pub const GUEST_PRELUDE: &str = "#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
";

/// The end of every guest's `/init`: its sections, each a name and the
/// shell command that prints its body, written to the data disk and
/// closed by `==nvmos:end==` (what [`boot_guest`] reads), then
/// `nvmos-guest-done` and the reboot that ends QEMU.
pub fn guest_finish(sections: &[(&str, &str)]) -> String {
    let mut out = String::from("{\n");
    for (name, body) in sections {
        out.push_str(&format!("echo \"==nvmos:{name}==\"; {body}\n"));
    }
    out.push_str("echo \"==nvmos:end==\"\n} > /dev/vda\nsync\necho nvmos-guest-done\nreboot -f\n");
    out
}

/// The line that ends each sample of [`RunOptions::sample_ms`].
const SAMPLE_END: &str = "nvmos-sample-end";

/// The samples of the `timeline` section, oldest first; a sample cut off
/// (no end line) is refused, as is a sample without a `time_ns` line.
pub fn parse_timeline(text: &str) -> std::result::Result<Vec<Counters>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.trim().is_empty() {
        let Some(end) = rest.find(&format!("{SAMPLE_END}\n")) else {
            return Err(format!(
                "sample {} has no end line {SAMPLE_END:?}",
                out.len() + 1
            ));
        };
        let c =
            Counters::parse(&rest[..end]).map_err(|e| format!("sample {}: {e}", out.len() + 1))?;
        if !c.values.contains_key("time_ns") {
            return Err(format!("sample {}: no time_ns line", out.len() + 1));
        }
        out.push(c);
        rest = &rest[end + SAMPLE_END.len() + 1..];
    }
    Ok(out)
}

/// The guest's `/init`.
fn init_script(opts: &RunOptions) -> String {
    let mut cmd: Vec<String> = opts.command.iter().map(|a| shell_quote(a)).collect();
    if opts
        .mem_trace
        .as_ref()
        .is_some_and(|m| !m.marked_by_command)
    {
        // The recorded window is the command's run, its status kept.
        cmd.insert(0, format!("{} start;", memtrace::MARK_PROGRAM));
        cmd.push(format!(
            "; status=$?; {} stop; (exit $status)",
            memtrace::MARK_PROGRAM
        ));
    }
    format!(
        r#"{prelude}mount -t tmpfs -o size=75% tmp /tmp
mount -t tracefs nodev /sys/kernel/tracing
mount -t debugfs nodev /sys/kernel/debug
(while :; do sleep 5; echo nvmos-heartbeat; done) &
T=/sys/kernel/tracing
P=/sys/kernel/debug/nvmos_policy
cat $P > /tmp/.counters-before
echo 0 > $T/tracing_on
echo {buffer} > $T/buffer_size_kb
echo 0 > $T/options/overwrite
echo > $T/trace
cat $P > /tmp/.counters-traced
for e in mm_page_alloc mm_page_free mm_page_free_batched; do echo 1 > $T/events/kmem/$e/enable; done
# The debug kernel counts lock acquisitions (CONFIG_LOCK_STAT): from zero, during the workload only.
if [ -e /proc/lock_stat ]; then echo 0 > /proc/lock_stat; echo 1 > /proc/sys/kernel/lock_stat; fi
echo nvmos-guest-start
echo 1 > $T/tracing_on
: > /tmp/.timeline
SAMPLER=
if [ -n "{sample_us}" ]; then
  (while [ ! -e /tmp/.sampling-done ]; do cat $P >> /tmp/.timeline; echo {sample_end} >> /tmp/.timeline; usleep {sample_us}; done) &
  SAMPLER=$!
fi
cd /tmp
{cmd}
status=$?
touch /tmp/.sampling-done
if [ -n "$SAMPLER" ]; then wait $SAMPLER; fi
echo 0 > $T/tracing_on
: > /tmp/.lockstat
if [ -e /proc/lock_stat ]; then echo 0 > /proc/sys/kernel/lock_stat; grep -F 'zone->lock' /proc/lock_stat > /tmp/.lockstat; fi
cd /
echo nvmos-workload-exit $status
cat $P > /tmp/.counters-end
dd if=/proc/kpageflags of=/dev/vda bs=1M seek={kpf_mib} 2> /dev/null
wc -c < /proc/kpageflags > /tmp/.kpageflags
{finish}"#,
        prelude = GUEST_PRELUDE,
        buffer = opts.buffer_kb,
        cmd = cmd.join(" "),
        kpf_mib = KPAGEFLAGS_AT >> 20,
        sample_us = opts
            .sample_ms
            .map_or(String::new(), |ms| (ms * 1000).to_string()),
        sample_end = SAMPLE_END,
        finish = guest_finish(&[
            // Stopped first, so that the counters and the wear agree.
            ("hot", "if [ -e /sys/kernel/debug/nvmos_hot ]; then echo stop > /sys/kernel/debug/nvmos_hot; cat /sys/kernel/debug/nvmos_hot; fi"),
            ("wear", "cat /sys/kernel/debug/nvmos_wear 2> /dev/null"),
            ("status", "echo $status"),
            ("osrelease", "cat /proc/sys/kernel/osrelease"),
            ("cpus", "grep -c ^processor /proc/cpuinfo"),
            ("zoneinfo", "cat /proc/zoneinfo"),
            ("meminfo", "cat /proc/meminfo"),
            ("iomem", "cat /proc/iomem"),
            ("counters_before", "cat /tmp/.counters-before"),
            ("counters_traced", "cat /tmp/.counters-traced"),
            ("counters", "cat /tmp/.counters-end"),
            ("timeline", "cat /tmp/.timeline"),
            ("kpageflags", "cat /tmp/.kpageflags"),
            ("stats", "for c in $T/per_cpu/cpu*; do cat $c/stats; done"),
            ("lock_stat", "cat /tmp/.lockstat"),
            ("trace", "cat $T/trace"),
        ]),
    )
}

fn initramfs(opts: &RunOptions, busybox: &Path, bins: &[(String, PathBuf)]) -> Result<Vec<u8>> {
    let mut c = Cpio::new();
    for d in ["bin", "dev", "proc", "sys", "tmp", "mnt"] {
        c.dir(d);
    }
    c.char_dev("dev/console", 5, 1);
    let init = opts.init.clone().unwrap_or_else(|| init_script(opts));
    c.file("init", 0o755, init.as_bytes());
    let bb = fs::read(busybox).map_err(|e| KernelError::io("reading", busybox, e))?;
    c.file("bin/busybox", 0o755, &bb);
    for (name, bin) in bins {
        let bytes = fs::read(bin).map_err(|e| KernelError::io("reading", bin, e))?;
        c.file(&format!("bin/{name}"), 0o755, &bytes);
    }
    for (to, from) in &opts.files {
        let to = to.trim_start_matches('/');
        if to.is_empty() || to.split('/').any(|p| p == ".." || p.is_empty()) {
            return Err(KernelError::Option(format!(
                "initramfs path {to:?}: a relative path without `..`"
            )));
        }
        let bytes = fs::read(from).map_err(|e| KernelError::io("reading", from, e))?;
        let mut dir = String::new();
        for part in to
            .split('/')
            .collect::<Vec<_>>()
            .split_last()
            .map_or(&[][..], |x| x.1)
        {
            dir = if dir.is_empty() {
                part.to_string()
            } else {
                format!("{dir}/{part}")
            };
            c.dir(&dir);
        }
        c.file(to, 0o755, &bytes);
    }
    Ok(c.finish())
}

/// Where on the data disk the guest copies `/proc/kpageflags` (past the
/// text report, which starts at 0 and ends at its first NUL byte).
const KPAGEFLAGS_AT: u64 = 1 << 30;

/// `/proc/kpageflags` bits (Documentation/admin-guide/mm/pagemap.rst).
const KPF_SLAB: u64 = 1 << 7;
const KPF_PGTABLE: u64 = 1 << 26;
const KPF_RESERVED: u64 = 1 << 32;

/// Frames per bank of one kind, from the guest's `/proc/kpageflags` at the
/// end of the workload.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PageFlagBanks {
    /// Frames `/proc/kpageflags` described.
    pub frames: u64,
    /// Per bank number: frames with `PG_reserved`, which memblock kept
    /// before the page allocator existed (the memmap, the kernel image,
    /// the initial page tables, firmware ranges): placed by no policy.
    pub reserved: BTreeMap<u64, u64>,
    /// Per bank number: slab frames (placed by the page-frame policy).
    pub slab: BTreeMap<u64, u64>,
    /// Per bank number: page-table frames (placed by the policy).
    pub pgtable: BTreeMap<u64, u64>,
}

impl PageFlagBanks {
    /// Sum the flags of `bytes` (one little-endian u64 per frame from
    /// frame 0) per bank of `bank_frames`.
    pub fn parse(bytes: &[u8], bank_frames: u64) -> std::result::Result<Self, String> {
        if !bytes.len().is_multiple_of(8) || bank_frames == 0 {
            return Err(format!(
                "{} bytes: not whole 8-byte entries (or no bank size)",
                bytes.len()
            ));
        }
        let mut p = PageFlagBanks::default();
        for (pfn, w) in bytes.chunks_exact(8).enumerate() {
            let flags = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            let bank = pfn as u64 / bank_frames;
            for (bit, map) in [
                (KPF_RESERVED, &mut p.reserved),
                (KPF_SLAB, &mut p.slab),
                (KPF_PGTABLE, &mut p.pgtable),
            ] {
                if flags & bit != 0 {
                    *map.entry(bank).or_insert(0) += 1;
                }
            }
            p.frames += 1;
        }
        Ok(p)
    }
}

/// The policy's counters at three moments and the frames' flags at the
/// end, as a guest wrote them to its data disk.
#[derive(Clone, Debug)]
pub struct GuestCounters {
    /// `nvmos_policy` in debugfs before the trace buffers were sized.
    pub before: Counters,
    /// After they were sized, before the workload.
    pub traced: Counters,
    /// After the workload.
    pub end: Counters,
    /// `/proc/kpageflags` right after `end`, per bank.
    pub page_flags: PageFlagBanks,
    /// Bytes each CPU's trace ring buffer held at the end (`bytes:` of
    /// its `stats`), in CPU order: what the buffers had to hold.
    pub ring_bytes: Vec<u64>,
}

/// Read [`GuestCounters`] back from a finished run's folder (the
/// `data.img` beside its `console.log`), e.g. to recount a study's runs.
/// `bank_mib` is used when the guest did not report its bank size.
pub fn read_guest_counters(run_dir: &Path, bank_mib: u64) -> Result<GuestCounters> {
    let disk = run_dir.join("data.img");
    let sec = sections(&disk)?;
    guest_counters(&disk, &sec, bank_mib)
}

fn guest_counters(
    disk: &Path,
    sec: &BTreeMap<String, Vec<u8>>,
    bank_mib: u64,
) -> Result<GuestCounters> {
    let text = |name: &str| -> Result<String> {
        sec.get(name)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .ok_or_else(|| KernelError::GuestOutput {
                path: disk.to_owned(),
                what: format!("no {name} section"),
            })
    };
    let parse_err = |what: &str, e: String| KernelError::GuestOutput {
        path: disk.to_owned(),
        what: format!("{what}: {e}"),
    };
    let before =
        Counters::parse(&text("counters_before")?).map_err(|e| parse_err("counters_before", e))?;
    let traced =
        Counters::parse(&text("counters_traced")?).map_err(|e| parse_err("counters_traced", e))?;
    let end = Counters::parse(&text("counters")?).map_err(|e| parse_err("counters", e))?;
    let kpf_report = text("kpageflags")?;
    let kpf_len = wc_bytes(&kpf_report).ok_or_else(|| {
        parse_err(
            "kpageflags",
            format!("wc -c reported no byte count: {:?}", kpf_report.trim()),
        )
    })?;
    let mut f = fs::File::open(disk).map_err(|e| KernelError::io("opening", disk, e))?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(KPAGEFLAGS_AT))
        .map_err(|e| KernelError::io("seeking in", disk, e))?;
    let mut bytes = vec![0u8; kpf_len as usize];
    f.read_exact(&mut bytes)
        .map_err(|e| KernelError::io("reading kpageflags from", disk, e))?;
    let bank_mib = match end.get("bank_mib") {
        0 => bank_mib,
        reported => reported,
    };
    let page_flags = PageFlagBanks::parse(&bytes, bank_mib << (20 - 12))
        .map_err(|e| parse_err("kpageflags", e))?;
    let ring_bytes = text("stats")?
        .lines()
        .filter_map(|l| l.strip_prefix("bytes:"))
        .map(|v| v.trim().parse::<u64>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| parse_err("stats", e.to_string()))?;
    Ok(GuestCounters {
        before,
        traced,
        end,
        page_flags,
        ring_bytes,
    })
}

/// `zone->lock`'s acquisitions in `/proc/lock_stat`'s line for it (the
/// eighth figure: con-bounces, contentions, four wait times, acq-bounces,
/// acquisitions); `None` when the kernel has no lock statistics (no line).
fn zone_lock_acquisitions(text: &str) -> std::result::Result<Option<u64>, String> {
    let Some(line) = text
        .lines()
        .find(|l| l.trim_start().starts_with("&zone->lock:"))
    else {
        return Ok(None);
    };
    let figures: Vec<&str> = line
        .split_once(':')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    figures
        .get(7)
        .and_then(|f| f.parse().ok())
        .map(Some)
        .ok_or_else(|| format!("no acquisitions figure in {line:?}"))
}

/// The byte count `wc -c` reports.
fn wc_bytes(report: &str) -> Option<u64> {
    report.trim().parse().ok()
}

/// Console lines that mean the kernel is not well: an oops, `BUG:` (KASAN,
/// KFENCE, sleeping in atomic context, bad page state and more begin so),
/// `WARNING:` (lockdep's splats, `WARN_ON`), a `VM_BUG_ON` (`kernel BUG
/// at`), a bad page, a free the policy refused, a boot parameter it could
/// not take.
pub const PROBLEMS: [&str; 14] = [
    "Oops",
    "BUG:",
    "BUG at",
    "WARNING:",
    "Kernel panic",
    "Call Trace:",
    "general protection fault",
    "Bad page",
    "KASAN",
    "KFENCE",
    "UBSAN",
    "nvmos: unknown",
    "nvmos: bad",
    "page allocation failure",
];

/// The console's problem lines (see [`PROBLEMS`]), each with a line of
/// context on either side, in order; empty on a clean run.
pub fn console_problems(console: &str) -> Vec<String> {
    let lines: Vec<&str> = console.lines().collect();
    let mut out = Vec::new();
    let mut last_shown = None;
    for (i, l) in lines.iter().enumerate() {
        if !PROBLEMS.iter().any(|p| l.contains(p)) {
            continue;
        }
        let from = i
            .saturating_sub(1)
            .max(last_shown.map_or(0, |s: usize| s + 1));
        let to = (i + 1).min(lines.len() - 1);
        for line in &lines[from..=to] {
            out.push((*line).to_owned());
        }
        last_shown = Some(to);
    }
    out
}

struct Guest {
    accel: &'static str,
    boot_s: f64,
    console: String,
}

/// The guest kernel's command line: console, the policy, the flavour's
/// debug options, then [`RunOptions::extra_cmdline`].
fn cmdline(opts: &RunOptions) -> String {
    let mut line = format!(
        "console=ttyS0 panic=-1 reboot=t nvmos_policy={} nvmos_bank_mib={}",
        opts.policy.name(),
        opts.bank_mib
    );
    let hot = opts.hot.map(|h| h.cmdline()).unwrap_or_default();
    for o in opts
        .build
        .flavour
        .cmdline()
        .iter()
        .copied()
        .chain(hot.iter().map(String::as_str))
        .chain(opts.extra_cmdline.iter().map(String::as_str))
    {
        line.push(' ');
        line.push_str(o);
    }
    line
}

/// Boot once; return the console when QEMU exited by itself.
fn boot(
    opts: &RunOptions,
    dir: &Path,
    kernel: &Path,
    use_kvm: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Guest> {
    let console = dir.join("console.log");
    let disk = dir.join("data.img");
    let _ = fs::remove_file(&console);
    let f = fs::File::create(&disk).map_err(|e| KernelError::io("creating", &disk, e))?;
    // The report's text from offset 0; `/proc/kpageflags` (8 bytes a
    // frame, holes included) at KPAGEFLAGS_AT. A sparse file.
    f.set_len(KPAGEFLAGS_AT + 2 * (opts.mem_mib << 11) + (1 << 30))
        .map_err(|e| KernelError::io("sizing", &disk, e))?;
    drop(f);
    let accel = if use_kvm { "kvm" } else { "tcg" };
    let mut cmd = Command::new(&opts.qemu);
    // microvm: qboot's MP table names every CPU without ACPI, and the
    // virtio-mmio disk is announced on the kernel command line by QEMU.
    cmd.args(["-M", "microvm,acpi=off", "-accel", accel])
        .args(["-m", &format!("{}M", opts.mem_mib)])
        .args(["-smp", &opts.cpus.to_string()])
        .args(opts.cpu_model.iter().flat_map(|m| ["-cpu", m.as_str()]))
        .args(["-display", "none", "-monitor", "none", "-no-reboot"])
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(dir.join("initramfs.cpio"))
        .args(["-append", &cmdline(opts)])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .arg("-drive")
        .arg(format!(
            "id=data,file={},format=raw,if=none",
            disk.display()
        ))
        .args(["-device", "virtio-blk-device,drive=data"])
        .args(&opts.extra_qemu_args);
    if opts.share_host_root {
        // multidevs=remap: the host's /proc, /sys, /dev... are other
        // file systems whose inode numbers collide with each other's (each
        // root is inode 1); without it the guest takes /proc for /sys.
        cmd.arg("-fsdev")
            .arg(format!(
                "local,id={HOST_ROOT_TAG},path=/,security_model=none,readonly=on,multidevs=remap"
            ))
            .arg("-device")
            .arg(format!(
                "virtio-9p-device,fsdev={HOST_ROOT_TAG},mount_tag={HOST_ROOT_TAG}"
            ));
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(
        fs::File::create(dir.join("qemu.err"))
            .map_err(|e| KernelError::io("creating", dir.join("qemu.err"), e))?,
    );
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| KernelError::io("starting", PathBuf::from("qemu-system-x86_64"), e))?;
    let mut last_len = 0u64;
    let mut last_change = Instant::now();
    let mut boot_s = None;
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| KernelError::io("waiting for", PathBuf::from("qemu"), e))?
        {
            let text =
                String::from_utf8_lossy(&fs::read(&console).unwrap_or_default()).into_owned();
            if boot_s.is_none() && text.contains("nvmos-guest-start") {
                boot_s = Some(started.elapsed().as_secs_f64());
            }
            if !status.success() && !text.contains("nvmos-guest-done") {
                let err = fs::read_to_string(dir.join("qemu.err")).unwrap_or_default();
                return Err(KernelError::Guest {
                    what: format!("QEMU ({accel}) exited with {status}: {}", err.trim()),
                    log: console,
                });
            }
            return Ok(Guest {
                accel,
                boot_s: boot_s.unwrap_or(f64::NAN),
                console: text,
            });
        }
        std::thread::sleep(Duration::from_millis(200));
        let len = fs::metadata(&console).map(|m| m.len()).unwrap_or(0);
        if len != last_len {
            last_len = len;
            last_change = Instant::now();
            if boot_s.is_none() {
                let text = fs::read(&console).unwrap_or_default();
                if text.windows(17).any(|w| w == b"nvmos-guest-start") {
                    boot_s = Some(started.elapsed().as_secs_f64());
                    progress(Progress::Step(format!(
                        "guest booted ({accel}, {:.1} s); running {}",
                        started.elapsed().as_secs_f64(),
                        opts.command.join(" ")
                    )));
                }
            }
        }
        let silent = last_change.elapsed().as_secs();
        let total = started.elapsed().as_secs();
        // A KVM guest that fails here hangs without a word: give it 20 s
        // to print anything and 90 s to reach init before falling back.
        if use_kvm && boot_s.is_none() && ((last_len == 0 && total > 20) || total > 90) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(KernelError::Guest {
                what: format!("KVM guest did not start within {total} s; killed"),
                log: console,
            });
        }
        if silent > opts.stall_s || total > opts.timeout_s {
            let _ = child.kill();
            let _ = child.wait();
            return Err(KernelError::Guest {
                what: if silent > opts.stall_s {
                    format!("stopped responding: console silent for {silent} s; killed")
                } else {
                    format!("ran past the {} s timeout; killed", opts.timeout_s)
                },
                log: console,
            });
        }
    }
}

/// The sections the guest wrote to its data disk.
fn sections(disk: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut f = fs::File::open(disk).map_err(|e| KernelError::io("opening", disk, e))?;
    let mut data = Vec::new();
    // The guest writes a prefix of the disk; read up to the first NUL
    // block, a little past the end marker.
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| KernelError::io("reading", disk, e))?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        if let Some(z) = chunk.iter().position(|&b| b == 0) {
            data.extend_from_slice(&chunk[..z]);
            break;
        }
        data.extend_from_slice(chunk);
    }
    let bad = |what: String| KernelError::GuestOutput {
        path: disk.to_owned(),
        what,
    };
    let end = find(&data, b"==nvmos:end==\n")
        .ok_or_else(|| bad("no end marker: the guest's report is incomplete".to_owned()))?;
    let data = &data[..end];
    let mut out = BTreeMap::new();
    let mut at = 0;
    while at < data.len() {
        let rest = &data[at..];
        if !rest.starts_with(b"==nvmos:") {
            return Err(bad(format!("expected a section marker at byte {at}")));
        }
        let eol = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad("unterminated marker".to_owned()))?;
        let name = String::from_utf8_lossy(&rest[8..eol])
            .trim_end_matches("==")
            .to_owned();
        let body_start = at + eol + 1;
        // An empty section: the next marker follows at once.
        let next = if data[body_start..].starts_with(b"==nvmos:") {
            body_start
        } else {
            find(&data[body_start..], b"\n==nvmos:")
                .map(|i| body_start + i + 1)
                .unwrap_or(data.len())
        };
        out.insert(name, data[body_start..next].to_vec());
        at = next;
    }
    Ok(out)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Lost events from the per-CPU `stats` files: overruns and drops.
fn lost_events(stats: &str) -> u64 {
    stats
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "overrun" | "dropped events")
                .then(|| v.trim().parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

/// A guest that ran to its end: what [`boot_guest`] returns.
#[derive(Clone, Debug)]
pub struct GuestRun {
    /// The kernel booted.
    pub kernel: Built,
    /// `kvm` or `tcg`.
    pub accel: &'static str,
    /// Host seconds from QEMU's start to `nvmos-guest-start`.
    pub boot_s: f64,
    /// The console's text.
    pub console: String,
    /// The console log file.
    pub console_log: PathBuf,
    /// The data disk (1 GiB, raw).
    pub disk: PathBuf,
    /// The `==nvmos:NAME==` sections at the start of the data disk.
    pub sections: BTreeMap<String, Vec<u8>>,
    /// What the memory-trace plugin counted, its trace renamed into place
    /// ([`RunOptions::mem_trace`]).
    pub mem_trace: Option<MemTraceReport>,
}

impl GuestRun {
    /// Remove the run's folder (its 2 GiB sparse disk, initramfs and
    /// logs) once its output has been read and checked. A run that fails
    /// keeps it for its logs, as does every run not discarded.
    pub fn discard(self) {
        if let Some(dir) = self.disk.parent() {
            // Best effort: a folder left behind only takes space.
            let _ = fs::remove_dir_all(dir);
        }
    }

    /// `len` bytes the guest wrote at [`DISK_FILE_OFFSET`] of its data
    /// disk (`dd of=/dev/vda bs=1M seek=512`): how a custom `/init` brings
    /// a binary file out.
    pub fn disk_file(&self, len: u64) -> Result<Vec<u8>> {
        use std::io::{Seek, SeekFrom};
        if len > (1 << 30) - DISK_FILE_OFFSET {
            return Err(KernelError::GuestOutput {
                path: self.disk.clone(),
                what: format!("a file of {len} bytes does not fit past {DISK_FILE_OFFSET}"),
            });
        }
        let mut f =
            fs::File::open(&self.disk).map_err(|e| KernelError::io("opening", &self.disk, e))?;
        f.seek(SeekFrom::Start(DISK_FILE_OFFSET))
            .map_err(|e| KernelError::io("seeking in", &self.disk, e))?;
        let mut buf = vec![0u8; len as usize];
        f.read_exact(&mut buf)
            .map_err(|e| KernelError::io("reading", &self.disk, e))?;
        Ok(buf)
    }
}

/// Check the options, build (or find) the kernel, make the initramfs and
/// boot it until the guest powers off. The guest's `/init` is
/// [`RunOptions::init`] when given, else the traced workload run of
/// [`run`]. A custom `/init` runs as busybox `sh` (`/bin/busybox`, the
/// static workloads in `/bin`, [`RunOptions::files`] where it asked) and
/// must echo `nvmos-guest-start` when it starts its work, a line at least
/// every [`RunOptions::stall_s`] seconds, write its sections to
/// `/dev/vda` ending with `==nvmos:end==`, echo `nvmos-guest-done`, and
/// `reboot -f`. Fails when the guest did not get to `nvmos-guest-done`.
pub fn boot_guest(opts: &RunOptions, progress: &mut dyn FnMut(Progress)) -> Result<GuestRun> {
    if opts.command.is_empty() && opts.init.is_none() {
        return Err(KernelError::Option("no workload command given".to_owned()));
    }
    if !(1..=64).contains(&opts.cpus) {
        return Err(KernelError::Option(format!(
            "--cpus {}: between 1 and 64",
            opts.cpus
        )));
    }
    if !opts.bank_mib.is_power_of_two() || !(4..=65536).contains(&opts.bank_mib) {
        return Err(KernelError::Option(format!(
            "--bank-mib {}: a power of two from 4 to 65536",
            opts.bank_mib
        )));
    }
    if !(256..=65536).contains(&opts.mem_mib) {
        return Err(KernelError::Option(format!(
            "--mem {} MiB: between 256 MiB and 64 GiB",
            opts.mem_mib
        )));
    }
    if let Some(h) = &opts.hot {
        h.check().map_err(KernelError::Option)?;
    }
    let qemu = opts.qemu.to_string_lossy();
    require_tool(&qemu, "apt-get install qemu-system-x86")?;
    let busybox = static_busybox()?;
    if let Some(m) = &opts.mem_trace {
        m.check()?;
    }
    let kernel = kbuild::build(&opts.build, progress)?;
    let bins = compile_workloads(&opts.workloads_dir, &opts.build.cache)?;
    let runs = opts.build.cache.join("runs");
    fs::create_dir_all(&runs).map_err(|e| KernelError::io("creating", &runs, e))?;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{}-", opts.policy.name()))
        .tempdir_in(&runs)
        .map_err(|e| KernelError::io("creating a run folder in", &runs, e))?
        .keep();
    let mem_stats = dir.join("memtrace.stats");
    // Whatever the plugin wrote beside the output and was not accepted
    // goes when this run ends, failed or refused; an accepted trace has
    // been renamed away by then.
    let _unaccepted = opts
        .mem_trace
        .as_ref()
        .map(|m| memtrace::Unaccepted::new(&m.output));
    // Every guest has the marker program, so a command that marks its
    // window runs the same with or without the plugin (its NOPs cost
    // nothing unwatched).
    let mut with_marker = opts.clone();
    with_marker.files.push((
        memtrace::MARK_PROGRAM.to_owned(),
        memtrace::mark_program(&opts.build.cache)?,
    ));
    if let Some(m) = &opts.mem_trace {
        with_marker.accel = Accel::Tcg;
        let so = memtrace::plugin(&opts.build.cache)?;
        with_marker
            .extra_qemu_args
            .extend(["-plugin".to_owned(), m.plugin_args(&so, &mem_stats)]);
    }
    let opts = &with_marker;
    let image = initramfs(opts, &busybox, &bins)?;
    // One guest at a time per cache: two TCG guests on two cores would
    // only slow each other and the other builds.
    let _lock = FileLock::take(&runs.join("lock"))?;
    prune_runs(&runs);
    // Written under the lock, after the prune: a run waiting for the lock
    // holds nothing in its folder yet.
    let cpio = dir.join("initramfs.cpio");
    kbuild::write_atomic(&cpio, &image)?;
    let verdict = runs.join("kvm-broken");
    let use_kvm = opts.accel == Accel::Auto && kvm_usable(&verdict, &opts.qemu);
    let kvm_failed = || {
        KVM.store(KVM_BROKEN, Ordering::Relaxed);
        // Best effort: without it the next process probes KVM again.
        let _ = fs::write(&verdict, kvm_key(&opts.qemu));
    };
    let guest = match boot(opts, &dir, &kernel.bzimage, use_kvm, progress) {
        Ok(g) if use_kvm && !g.console.contains("nvmos-guest-start") => {
            kvm_failed();
            boot(opts, &dir, &kernel.bzimage, false, progress)?
        }
        Err(e) if use_kvm => {
            kvm_failed();
            progress(Progress::Step(format!(
                "KVM guest failed ({e}); falling back to TCG"
            )));
            boot(opts, &dir, &kernel.bzimage, false, progress)?
        }
        other => other?,
    };
    // The initramfs is made again from the options by every run; only
    // the logs and the data disk say what this one did.
    let _ = fs::remove_file(&cpio);
    let console = dir.join("console.log");
    if !guest.console.contains("nvmos-guest-done") {
        return Err(KernelError::Guest {
            what: format!(
                "did not finish the run (no nvmos-guest-done); last lines:{}",
                tail_of(&console, 12)
            ),
            log: console,
        });
    }
    let disk = dir.join("data.img");
    let sections = sections(&disk)?;
    let mem_trace = match &opts.mem_trace {
        Some(m) => Some(accept_mem_trace(m, &mem_stats)?),
        None => None,
    };
    Ok(GuestRun {
        kernel,
        accel: guest.accel,
        boot_s: guest.boot_s,
        console: guest.console,
        console_log: console,
        disk,
        sections,
        mem_trace,
    })
}

/// Run folders whose data disk is kept: the newest, which are the ones
/// whose owners may still be reading them (one guest runs at a time, and
/// a caller reads its disk right after its guest stops).
const RUN_DISKS_KEPT: usize = 8;
/// Run folders kept at all, for their console logs, which results and
/// errors name.
const RUN_FOLDERS_KEPT: usize = 256;

/// Bound what finished runs leave in the cache: a run not discarded keeps
/// its folder for its logs, and its data disk (sparse, but holding what
/// the guest wrote) for the newest [`RUN_DISKS_KEPT`] folders only. Only
/// the folders of runs that booted (a console log) count: a run waiting
/// for the lock has an empty folder, left alone. Called with the runs
/// lock held. Best effort: a folder that cannot be read or removed only
/// takes space.
fn prune_runs(runs: &Path) {
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    let mut folders: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| e.path().join("console.log").exists())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    folders.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (i, (_, dir)) in folders.iter().enumerate() {
        if i >= RUN_FOLDERS_KEPT {
            let _ = fs::remove_dir_all(dir);
        } else if i >= RUN_DISKS_KEPT {
            let _ = fs::remove_file(dir.join("data.img"));
            let _ = fs::remove_file(dir.join("initramfs.cpio"));
        }
    }
}

/// The plugin's statistics, checked, and its trace renamed into place;
/// a window not opened and closed or requests dropped refuse the run and
/// leave no trace at the output.
fn accept_mem_trace(m: &MemTrace, stats: &Path) -> Result<MemTraceReport> {
    let text = fs::read_to_string(stats).map_err(|e| KernelError::io("reading", stats, e))?;
    let mut report = MemTraceReport::parse(&text, stats)?;
    report.check_complete(stats)?;
    let tmp = memtrace::tmp_of(&m.output);
    report.trace_bytes = fs::metadata(&tmp)
        .map_err(|e| KernelError::io("reading", &tmp, e))?
        .len();
    fs::rename(&tmp, &m.output).map_err(|e| KernelError::io("renaming", &tmp, e))?;
    report.machine = m.machine.clone();
    report.output = m.output.clone();
    Ok(report)
}

/// Boot, run, bring the trace out.
pub fn run(opts: &RunOptions, progress: &mut dyn FnMut(Progress)) -> Result<Run> {
    let started = Instant::now();
    if opts.init.is_some() {
        return Err(KernelError::Option(
            "a custom /init reports no trace: use boot_guest".to_owned(),
        ));
    }
    let guest = boot_guest(opts, progress)?;
    // A kernel that reported a problem gives no trace: its events are not
    // the workload's under a healthy policy.
    let problems = console_problems(&guest.console);
    if !problems.is_empty() {
        return Err(KernelError::GuestProblems {
            problems,
            log: guest.console_log,
        });
    }
    let GuestRun {
        kernel,
        accel,
        boot_s,
        console_log: console,
        disk,
        sections: sec,
        mem_trace,
        ..
    } = guest;
    let text = |name: &str| -> Result<String> {
        sec.get(name)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .ok_or_else(|| KernelError::GuestOutput {
                path: disk.clone(),
                what: format!("no {name} section"),
            })
    };
    let parse_err = |what: &str, e: String| KernelError::GuestOutput {
        path: disk.clone(),
        what: format!("{what}: {e}"),
    };
    let workload_status: i32 = text("status")?
        .trim()
        .parse()
        .map_err(|_| parse_err("status", "not a number".to_owned()))?;
    let cpus: u32 = text("cpus")?
        .trim()
        .parse()
        .map_err(|_| parse_err("cpus", "not a number".to_owned()))?;
    let machine = MachineInfo {
        page_size: 4096,
        memory_bytes: machine::parse_meminfo_total(&text("meminfo")?)
            .map_err(|e| parse_err("meminfo", e))?,
        cpus,
        zones: machine::parse_zoneinfo(&text("zoneinfo")?).map_err(|e| parse_err("zoneinfo", e))?,
        kernel: text("osrelease")?.trim().to_owned(),
        ram: machine::parse_iomem_ram(&text("iomem")?, 4096).map_err(|e| parse_err("iomem", e))?,
    };
    if machine.cpus != opts.cpus {
        return Err(KernelError::Guest {
            what: format!(
                "runs on {} CPUs though QEMU was given {} (the kernel did not bring them up)",
                machine.cpus, opts.cpus
            ),
            log: console,
        });
    }
    let GuestCounters {
        before: counters_before,
        traced: counters_traced,
        end: counters,
        page_flags,
        ..
    } = guest_counters(&disk, &sec, opts.bank_mib)?;
    if counters.policy != opts.policy.name() {
        return Err(KernelError::Guest {
            what: format!(
                "booted with nvmos_policy={} but reports policy {}",
                opts.policy.name(),
                counters.policy
            ),
            log: console,
        });
    }
    let lost = lost_events(&text("stats")?);
    let timeline = parse_timeline(&text("timeline")?).map_err(|e| parse_err("timeline", e))?;
    if opts.sample_ms.is_some() && timeline.is_empty() {
        return Err(parse_err(
            "timeline",
            "sampling was asked for but the guest took no sample".to_owned(),
        ));
    }
    let zone_lock_acquisitions = match sec.get("lock_stat") {
        Some(b) => zone_lock_acquisitions(&String::from_utf8_lossy(b))
            .map_err(|e| parse_err("lock_stat", e))?,
        None => None,
    };
    let trace = sec.get("trace").ok_or_else(|| KernelError::GuestOutput {
        path: disk.clone(),
        what: "no trace section".to_owned(),
    })?;
    let mut reader = TextReader::new(&trace[..], disk.join("trace"), Format::Ftrace);
    let mut events = Vec::new();
    for e in reader.by_ref() {
        events.push(e?);
    }
    let mut counts = nvmos_trace::EventSource::counts(&reader).clone();
    counts.lost_events += lost;
    let hot = match opts.hot {
        Some(settings) => Some(
            HotReport::parse(settings, &text("hot")?, &text("wear")?)
                .map_err(|e| parse_err("hot-page migration", e))?,
        ),
        None => None,
    };
    let output = match &opts.output {
        Some(path) => {
            write_nvt(path, opts, &machine, &counts, &events)?;
            Some(path.clone())
        }
        None => None,
    };
    Ok(Run {
        hot,
        mem_trace,
        policy: opts.policy,
        command: opts.command.clone(),
        kernel,
        accel: accel.to_owned(),
        boot_s,
        total_s: started.elapsed().as_secs_f64(),
        workload_status,
        machine,
        event_count: events.len() as u64,
        counts,
        counters_before,
        counters_traced,
        counters,
        page_flags,
        zone_lock_acquisitions,
        timeline,
        order0_allocations: events
            .iter()
            .filter(|e| matches!(e.op, nvmos_trace::Op::Alloc(_)) && e.order.get() == 0)
            .count() as u64,
        console_log: console,
        output,
        events,
    })
}

fn write_nvt(
    path: &Path,
    opts: &RunOptions,
    machine: &MachineInfo,
    counts: &SourceCounts,
    events: &[Event],
) -> Result<()> {
    // Whole or not at all: the one output mechanism (a temporary in the
    // same folder, renamed on success).
    let out = nvmos_trace::Output::create(path, &[])?;
    let header = TraceHeader {
        machine: Some(machine.clone()),
        command: opts.command.clone(),
        start_unix_ns: None,
        source: format!(
            "nvmos kernel run --policy {} ({} MiB, {} CPUs, QEMU guest)",
            opts.policy.name(),
            opts.mem_mib,
            opts.cpus
        ),
        events: 0,
        counts: counts.clone(),
        writes: None,
    };
    let mut w = NvtWriter::new(std::io::BufWriter::new(out), path, header)?;
    for e in events {
        w.push(*e)?;
    }
    let (buf, _) = w.finish()?;
    let out = buf
        .into_inner()
        .map_err(|e| KernelError::io("writing", path, e.into_error()))?;
    out.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_runs_keeps_the_newest_disks_and_logs() {
        let runs = tempfile::tempdir().unwrap();
        let total = RUN_FOLDERS_KEPT + 3;
        let now = std::time::SystemTime::now();
        for i in 0..total {
            let dir = runs.path().join(format!("buddy-{i:04}"));
            fs::create_dir(&dir).unwrap();
            for f in ["console.log", "data.img", "initramfs.cpio"] {
                fs::write(dir.join(f), b"x").unwrap();
            }
            // Folder i is i seconds older than folder 0.
            fs::File::open(&dir)
                .unwrap()
                .set_modified(now - Duration::from_secs(i as u64))
                .unwrap();
        }
        fs::write(runs.path().join("lock"), b"").unwrap();
        // A run waiting for the lock, older than every other: its folder
        // is left as it is, and it is not counted.
        let waiting = runs.path().join("buddy-waiting");
        fs::create_dir(&waiting).unwrap();
        fs::File::open(&waiting)
            .unwrap()
            .set_modified(now - Duration::from_secs(10 * total as u64))
            .unwrap();
        prune_runs(runs.path());
        assert!(
            waiting.exists(),
            "a run that has not booted keeps its folder"
        );
        for i in 0..total {
            let dir = runs.path().join(format!("buddy-{i:04}"));
            let has = |f: &str| dir.join(f).exists();
            assert_eq!(dir.exists(), i < RUN_FOLDERS_KEPT, "folder {i}");
            assert_eq!(has("console.log"), i < RUN_FOLDERS_KEPT, "log {i}");
            assert_eq!(has("data.img"), i < RUN_DISKS_KEPT, "disk {i}");
            assert_eq!(has("initramfs.cpio"), i < RUN_DISKS_KEPT, "cpio {i}");
        }
        assert!(runs.path().join("lock").exists(), "files beside are kept");
    }

    #[test]
    fn hot_report_parses_and_refuses_bad_lines() {
        let h = HotMigrate::new(50);
        let r = HotReport::parse(h, "hot_passes 3\nhot_writes 7\n", "5 2\n9 5\n").unwrap();
        assert_eq!((r.get("hot_passes"), r.get("hot_writes")), (3, 7));
        assert_eq!(r.wear, vec![(5, 2), (9, 5)]);
        assert_eq!(r.get("absent"), 0);
        for (counters, wear, says) in [
            ("", "", "did not start"),
            ("hot_passes x\n", "", "nvmos_hot line 1"),
            ("hot_passes 1 2\n", "", "nvmos_hot line 1"),
            ("hot_passes 1\n", "5\n", "nvmos_wear line 1"),
            ("hot_passes 1\n", "9 1\n5 1\n", "not in pfn order"),
            ("hot_passes 1\n", "5 -1\n", "nvmos_wear line 1"),
        ] {
            let e = HotReport::parse(h, counters, wear).unwrap_err();
            assert!(e.contains(says), "{counters:?} {wear:?}: {e}");
        }
        assert!(HotMigrate::new(50).check().is_ok());
        assert!(HotMigrate::counting(10).check().is_ok());
        for bad in [
            HotMigrate::new(9),
            HotMigrate {
                threshold: (1 << 20) + 1,
                ..h
            },
            HotMigrate { budget_pct: 0, ..h },
            HotMigrate {
                candidates: 17,
                ..h
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert_eq!(
            h.cmdline(),
            [
                "nvmos_hot_ms=50",
                "nvmos_hot_threshold=4",
                "nvmos_hot_budget_pct=5",
                "nvmos_hot_candidates=4"
            ]
        );
    }

    #[test]
    fn a_timeline_is_cut_into_samples_and_a_torn_one_refused() {
        let one = "policy adaptive\ntime_ns 5\nbank 0 DMA32 1 0 kernel\n";
        let two = "policy adaptive\ntime_ns 9\nbank 0 DMA32 2 1 kernel\n";
        let text = format!("{one}{SAMPLE_END}\n{two}{SAMPLE_END}\n");
        let t = parse_timeline(&text).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].get("time_ns"), t[1].banks[0].pinned), (5, 1));
        assert!(parse_timeline("").unwrap().is_empty());
        let torn = format!("{one}{SAMPLE_END}\n{two}");
        assert!(parse_timeline(&torn)
            .unwrap_err()
            .contains("sample 2 has no end line"));
        let timeless = format!("policy adaptive\n{SAMPLE_END}\n");
        assert!(parse_timeline(&timeless)
            .unwrap_err()
            .contains("no time_ns"));
        let garbage = format!("policy adaptive\ntime_ns 1\nbank x\n{SAMPLE_END}\n");
        assert!(parse_timeline(&garbage)
            .unwrap_err()
            .starts_with("sample 1: line 3"));
    }

    #[test]
    fn counters_parse_and_refuse_garbage() {
        let c = Counters::parse(
            "policy ibuddy\nalloc_single_frames 12\nbank 0 DMA 1 1 -\nbank 0 DMA32 5 3 -\nbank 1 DMA32 0 0 -\n",
        )
        .unwrap();
        assert_eq!(c.policy, "ibuddy");
        assert_eq!(c.get("alloc_single_frames"), 12);
        assert_eq!(c.pinned_banks(), 1, "bank 0 crosses DMA/DMA32: one bank");
        assert_eq!(c.bank_count(), 2);
        assert!(Counters::parse("policy x\nbank 0 DMA32 5 3\n").is_err());
        assert!(Counters::parse("policy x\nalloc_single_frames many\n").is_err());
        assert!(Counters::parse("alloc 1\n").is_err());
    }

    #[test]
    fn kpageflags_are_summed_per_bank_and_a_torn_file_refused() {
        let mut bytes = Vec::new();
        // Frames 0..8 in banks of 4: 0 reserved, 1 slab, 5 reserved and
        // a page table, 6 buddy (not counted), 7 reserved.
        for flags in [
            KPF_RESERVED,
            KPF_SLAB,
            0,
            0,
            0,
            KPF_RESERVED | KPF_PGTABLE,
            1 << 10,
            KPF_RESERVED,
        ] {
            bytes.extend_from_slice(&flags.to_le_bytes());
        }
        let p = PageFlagBanks::parse(&bytes, 4).unwrap();
        assert_eq!(p.frames, 8);
        assert_eq!(p.reserved, BTreeMap::from([(0, 1), (1, 2)]));
        assert_eq!(p.slab, BTreeMap::from([(0, 1)]));
        assert_eq!(p.pgtable, BTreeMap::from([(1, 1)]));
        assert!(PageFlagBanks::parse(&bytes[..13], 4).is_err());
        assert_eq!(wc_bytes("4194304\n"), Some(4_194_304));
        assert_eq!(wc_bytes("wc: can't open\n"), None);
    }

    #[test]
    fn zone_lock_acquisitions_come_from_lock_stat() {
        let line = "                     &zone->lock:           12             14           0.10           3.20          20.50           1.46             33           5012           0.05          10.00        1000.00           0.20\n";
        assert_eq!(zone_lock_acquisitions(line), Ok(Some(5012)));
        assert_eq!(zone_lock_acquisitions(""), Ok(None));
        assert!(zone_lock_acquisitions("&zone->lock: 1 2").is_err());
    }

    #[test]
    fn lost_events_sum_overruns_and_drops() {
        let stats =
            "entries: 5\noverrun: 2\ncommit overrun: 0\ndropped events: 3\nread events: 0\n";
        assert_eq!(lost_events(stats), 5);
    }

    #[test]
    fn policies_parse() {
        assert_eq!(Policy::parse("lis31").unwrap(), Policy::Lis31);
        assert_eq!(Policy::parse("adaptive").unwrap(), Policy::Adaptive);
        assert_eq!(Policy::parse("lis31-fair").unwrap(), Policy::Lis31Fair);
        let e = Policy::parse("ibudy").unwrap_err().to_string();
        assert!(e.contains("ibudy") && e.contains("lis31"), "{e}");
        for p in Policy::ALL {
            assert!(e.contains(p.name()), "{e} lacks {}", p.name());
        }
    }

    #[test]
    fn static_and_dynamic_executables_are_told_apart() {
        assert!(
            !has_interpreter(&fs::read("/bin/busybox").unwrap())
                || !Path::new("/bin/busybox").exists()
        );
        assert!(
            has_interpreter(&fs::read("/bin/sh").unwrap()),
            "dash is dynamic"
        );
        assert!(has_interpreter(b"#!/bin/sh\n"));
    }

    #[test]
    fn guest_sections_are_read_and_an_incomplete_report_refused() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("data.img");
        let mut bytes =
            b"==nvmos:status==\n0\n==nvmos:trace==\nline 1\nline 2\n==nvmos:end==\n".to_vec();
        bytes.resize(4096, 0);
        fs::write(&disk, &bytes).unwrap();
        let s = sections(&disk).unwrap();
        assert_eq!(s["status"], b"0\n");
        assert_eq!(s["trace"], b"line 1\nline 2\n");
        // An empty section does not swallow the next one.
        let mut bytes = b"==nvmos:json==\n==nvmos:err==\noops\n==nvmos:end==\n".to_vec();
        bytes.resize(4096, 0);
        fs::write(&disk, &bytes).unwrap();
        let s = sections(&disk).unwrap();
        assert_eq!(s["json"], b"");
        assert_eq!(s["err"], b"oops\n");
        // A guest that died mid-report leaves no end marker.
        fs::write(&disk, b"==nvmos:status==\n0\n==nvmos:trace==\nline 1\n\0\0").unwrap();
        let e = sections(&disk).unwrap_err().to_string();
        assert!(e.contains("incomplete"), "{e}");
    }

    #[test]
    fn what_guest_finish_writes_is_what_the_runner_reads() {
        // The script as the guest runs it, with a file for its disk
        // (written in place, as a disk is, not truncated) and no reboot.
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("data.img");
        fs::write(&disk, vec![0u8; 4096]).unwrap();
        let script = guest_finish(&[("a", "echo 1"), ("b", "printf 'x\\ny\\n'"), ("c", "true")])
            .replace("> /dev/vda", &format!("1<> {}", disk.display()))
            .replace("reboot -f", "true");
        let o = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("nvmos-guest-done"));
        let s = sections(&disk).unwrap();
        assert_eq!(s["a"], b"1\n");
        assert_eq!(s["b"], b"x\ny\n");
        assert_eq!(s["c"], b"");
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn shell_quoting_survives_quotes() {
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
