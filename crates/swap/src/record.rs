//! `record-swap`: real Linux swap traffic, from the kernel's block
//! tracepoints.
//!
//! Runs a command in a memory cgroup with a byte limit, with a swap file
//! of our own as the system's preferred swap area, and records every
//! request the block layer issues to that file's blocks
//! (`block:block_rq_issue`: direction, size, offset in the swap file,
//! time) and every reclaim throttle (`vmscan:mm_vmscan_throttled`, the
//! successor of 2.6.32's congestion wait) into a [`SwapTrace`].
//!
//! # Offsets: FIEMAP on a swap file
//!
//! A swap file's blocks are mapped once at `swapon`, and swap I/O goes
//! straight to the disk under the filesystem. We ask the filesystem for
//! the file's extents (`FS_IOC_FIEMAP`) after `swapon` (the kernel pins
//! them from then on), filter `block_rq_issue` to the disk holding the
//! file (a tracefs filter on `dev`), and map each request's sector back
//! to a byte offset in the file; requests outside the file (other I/O on
//! the same disk) are dropped. This measures the real disk's request
//! queue (its scheduler and merging); a dedicated loop device would be
//! simpler to map but adds the loop driver's own queue between swap and
//! the disk. Filesystems not on a plain disk or partition (device-mapper,
//! tmpfs, overlay) are refused.
//!
//! # Memory cgroup
//!
//! cgroup v2 when its hierarchy has the memory controller (`memory.max`,
//! `memory.swap.max`), else cgroup v1's memory controller
//! (`memory.limit_in_bytes`, `memory.memsw.limit_in_bytes` when swap
//! accounting is on). The cgroup is a child of this process's own
//! cgroup (v1) or of the v2 root.
//!
//! # What it changes, and the promise to undo it
//!
//! It creates the swap file (fallocate, a swap header written as `mkswap`
//! does, `swapon` at the highest priority), the cgroup, and changes
//! tracefs files (saved first, as the kmem recorder does). On every path
//! out — success, the command's failure, a failed step, SIGINT/SIGTERM at
//! any point (set-up included: signal handlers are installed first) and a
//! panic (drop guards) — it kills what is left in the cgroup, removes the
//! cgroup, `swapoff`s and deletes the swap file, and restores tracefs.
//! Without root it changes nothing: [`SwapError::NotRoot`].

use std::ffi::{CString, OsString};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nvmos_trace::record::{ChildExit, Tracefs};
use serde::{Deserialize, Serialize};

use crate::blocktrace::{SwapRequest, SwapTrace, Throttle};
use crate::device::Dir;
use crate::SwapError;

/// Prefix of the swap files and cgroups the recorder creates (tests look
/// for leftovers by it).
pub const NAME_PREFIX: &str = "nvmos-swap-";

/// How to record.
#[derive(Clone, Debug)]
pub struct RecordSwapOptions {
    /// The cgroup's memory limit, bytes.
    pub limit_bytes: u64,
    /// The swap file's size, bytes.
    pub swap_bytes: u64,
    /// Where the swap file goes (a directory on a disk-backed filesystem).
    pub swap_dir: PathBuf,
    /// Ring-buffer size per CPU, KiB.
    pub buffer_kb_per_cpu: u64,
}

impl Default for RecordSwapOptions {
    fn default() -> Self {
        RecordSwapOptions {
            limit_bytes: 64 << 20,
            swap_bytes: 512 << 20,
            swap_dir: std::env::temp_dir(),
            buffer_kb_per_cpu: 16 * 1024,
        }
    }
}

/// What a recording produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordSwapSummary {
    /// Read requests (swap-ins).
    pub reads: u64,
    /// Write requests (swap-outs).
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Reclaim throttle events.
    pub throttles: u64,
    /// Requests to the disk outside the swap file (dropped).
    pub other_requests: u64,
    /// Events the kernel lost.
    pub lost_events: u64,
    /// How the command ended.
    pub exit: ChildExit,
    /// Whether SIGINT/SIGTERM stopped it.
    pub interrupted: bool,
    /// Command's wall time, ns.
    pub wall_ns: u64,
    /// "v1" or "v2".
    pub cgroup: String,
    /// Extents of the swap file.
    pub extents: usize,
}

/// What must be undone, undone in reverse on restore or drop.
#[derive(Default)]
struct Cleanup {
    cgroup: Option<PathBuf>,
    swap_file: Option<PathBuf>,
    swap_on: bool,
    done: bool,
}

impl Cleanup {
    fn restore(&mut self) -> Result<(), SwapError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut failures = Vec::new();
        if let Some(cg) = self.cgroup.take() {
            if let Err(e) = remove_cgroup(&cg) {
                failures.push(format!("cgroup {}: {e}", cg.display()));
            }
        }
        if let Some(file) = self.swap_file.take() {
            if self.swap_on {
                let c = CString::new(file.as_os_str().as_bytes()).expect("no NUL in a path");
                // SAFETY: a valid NUL-terminated path.
                if unsafe { libc::swapoff(c.as_ptr()) } != 0 {
                    failures.push(format!(
                        "swapoff {}: {} (the file is left in place; run swapoff on it)",
                        file.display(),
                        std::io::Error::last_os_error()
                    ));
                    return Err(SwapError::Restore(failures.join("; ")));
                }
                self.swap_on = false;
            }
            if let Err(e) = std::fs::remove_file(&file) {
                if e.kind() != ErrorKind::NotFound {
                    failures.push(format!("removing {}: {e}", file.display()));
                }
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(SwapError::Restore(failures.join("; ")))
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// Kills every process left in the cgroup and removes it.
fn remove_cgroup(cg: &Path) -> std::io::Result<()> {
    let kill = cg.join("cgroup.kill");
    if kill.exists() {
        let _ = std::fs::write(&kill, "1");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<i32> = procs
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            match std::fs::remove_dir(cg) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => {}
            }
        } else {
            for pid in pids {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other("processes in it would not die"));
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Interrupt flags, checked between set-up steps.
struct Signals {
    flag: Arc<AtomicBool>,
    ids: Vec<signal_hook::SigId>,
}

impl Signals {
    fn install() -> Signals {
        let flag = Arc::new(AtomicBool::new(false));
        let ids = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]
            .into_iter()
            .filter_map(|s| signal_hook::flag::register(s, Arc::clone(&flag)).ok())
            .collect();
        Signals { flag, ids }
    }

    fn check(&self, step: &'static str) -> Result<(), SwapError> {
        if self.flag.load(Ordering::Relaxed) {
            Err(SwapError::InterruptedSetup { step })
        } else {
            Ok(())
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

fn setup_err(step: &'static str) -> impl Fn(std::io::Error) -> SwapError {
    move |e| SwapError::Setup {
        step,
        message: e.to_string(),
    }
}

/// Records `command` into `out`. See the module documentation.
pub fn record_swap(
    command: &[OsString],
    out: &Path,
    opts: &RecordSwapOptions,
) -> Result<RecordSwapSummary, SwapError> {
    if command.is_empty() {
        return Err(SwapError::Setup {
            step: "command",
            message: "no command given".into(),
        });
    }
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(SwapError::NotRoot { euid });
    }
    if opts.limit_bytes < (4 << 20) {
        return Err(SwapError::BadConfig {
            field: "limit",
            reason: format!("{} bytes is less than 4 MiB", opts.limit_bytes),
        });
    }
    if opts.swap_bytes < (1 << 20) {
        return Err(SwapError::BadConfig {
            field: "swap-size",
            reason: format!("{} bytes is less than 1 MiB", opts.swap_bytes),
        });
    }
    let signals = Signals::install();
    // The output first: a bad path fails before anything is changed. The
    // probe (a temporary beside `out`) is removed at once: the trace
    // appears at `out` only when complete (`SwapTrace::write`).
    drop(nvmos_trace::Output::create(out, &[])?);
    let mut cleanup = Cleanup::default();
    let mut tracefs: Option<Tracefs> = None;
    let result = run(command, out, opts, &signals, &mut cleanup, &mut tracefs);
    // Undo in reverse: cgroup and swap first, then tracing.
    let restored = cleanup.restore();
    let traced = tracefs.as_mut().map_or(Ok(()), |t| t.restore());
    let summary = result?;
    restored?;
    traced?;
    Ok(summary)
}

fn run(
    command: &[OsString],
    out: &Path,
    opts: &RecordSwapOptions,
    signals: &Signals,
    cleanup: &mut Cleanup,
    tracefs_slot: &mut Option<Tracefs>,
) -> Result<RecordSwapSummary, SwapError> {
    let pid = std::process::id();
    // 1. The cgroup.
    signals.check("before the cgroup")?;
    let (cg, version) = make_cgroup(pid, opts, cleanup)?;
    signals.check("cgroup created")?;

    // 2. The swap file.
    let swap_path = opts.swap_dir.join(format!(".{NAME_PREFIX}{pid}.swap"));
    let meta = std::fs::metadata(&opts.swap_dir).map_err(|e| SwapError::io(&opts.swap_dir, e))?;
    let (disk, part_start) = disk_of(meta.dev())?;
    create_swap_file(&swap_path, opts.swap_bytes, cleanup)?;
    signals.check("swap file created")?;
    let c = CString::new(swap_path.as_os_str().as_bytes()).expect("no NUL in a path");
    // Highest priority, so our file takes the swap traffic.
    const SWAP_FLAG_PREFER: libc::c_int = 0x8000;
    let flags = SWAP_FLAG_PREFER | 32767;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::swapon(c.as_ptr(), flags) } != 0 {
        return Err(SwapError::Setup {
            step: "swapon",
            message: format!(
                "{}: {}",
                swap_path.display(),
                std::io::Error::last_os_error()
            ),
        });
    }
    cleanup.swap_on = true;
    signals.check("swap enabled")?;
    let extents = fiemap(&swap_path)?;

    // 3. Tracing.
    let tracefs = tracefs_slot.insert(Tracefs::find_or_mount()?);
    tracefs.set("tracing_on", "0")?;
    if tracefs.read("current_tracer")? != "nop" {
        tracefs.set("current_tracer", "nop")?;
    }
    tracefs.set("trace_clock", "mono")?;
    tracefs.set("buffer_size_kb", &opts.buffer_kb_per_cpu.to_string())?;
    let kdev = (u64::from(disk.0) << 20) | u64::from(disk.1);
    tracefs.set(
        "events/block/block_rq_issue/filter",
        &format!("dev == {kdev}"),
    )?;
    tracefs.set("events/block/block_rq_issue/enable", "1")?;
    // A requeued request is issued again: the second issue is the one
    // that reaches the device.
    tracefs.set(
        "events/block/block_rq_requeue/filter",
        &format!("dev == {kdev}"),
    )?;
    tracefs.set("events/block/block_rq_requeue/enable", "1")?;
    let throttle_event = tracefs
        .root
        .join("events/vmscan/mm_vmscan_throttled/enable")
        .exists();
    if throttle_event {
        tracefs.set("events/vmscan/mm_vmscan_throttled/enable", "1")?;
    }
    tracefs.clear()?;
    let lost_before = tracefs.lost_events()?;
    signals.check("tracing set up")?;

    let pipe_path = tracefs.root.join("trace_pipe");
    let pipe = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&pipe_path)
        .map_err(|e| SwapError::io(&pipe_path, e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = Arc::clone(&stop);
        thread::Builder::new()
            .name("nvmos-swap-pipe".into())
            .spawn(move || read_pipe(pipe, &stop))
            .map_err(setup_err("trace_pipe reader thread"))?
    };

    // 4. The command, in the cgroup.
    let procs = CString::new(cg.join("cgroup.procs").as_os_str().as_bytes()).expect("no NUL");
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]);
    // SAFETY: the closure only calls async-signal-safe functions (open,
    // write, close) on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
            libc::close(fd);
            if ok {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let t0 = mono_ns();
    let started = Instant::now();
    let outcome = match tracefs.write("tracing_on", "1") {
        Err(e) => Err(SwapError::from(e)),
        Ok(()) => match cmd.spawn() {
            Err(e) => Err(SwapError::Setup {
                step: "starting the command",
                message: format!("{}: {e}", command[0].to_string_lossy()),
            }),
            Ok(child) => Ok(wait(child, &signals.flag, &cg)),
        },
    };
    let wall_ns = started.elapsed().as_nanos() as u64;
    let off = tracefs.write("tracing_on", "0");
    stop.store(true, Ordering::Release);
    let lines = reader
        .join()
        .map_err(|_| SwapError::Restore("the trace_pipe reader panicked".into()))?;
    let lost = tracefs.lost_events()?.saturating_sub(lost_before);
    let (exit, interrupted) = outcome??;
    off?;
    let lines = lines.map_err(|e| SwapError::io(&pipe_path, e))?;

    // 5. Map and write.
    let mut trace = SwapTrace::default();
    let mut other = 0u64;
    let mut requeued: Vec<(u64, usize)> = Vec::new();
    let mut requeues = 0u64;
    for line in &lines {
        match parse_line(line) {
            Some(Event::Requeue { sector }) => {
                // Drop the issue that was requeued (the latest of its sector).
                if let Some(i) = trace_index_of(&requeued, sector) {
                    trace.requests[i].size = 0;
                    requeues += 1;
                }
            }
            Some(Event::Phase { ts_ns, name }) => {
                trace.phases.push((ts_ns.saturating_sub(t0), name));
            }
            Some(Event::Request {
                ts_ns,
                dir,
                sector,
                bytes,
                task,
            }) => {
                let phys = (sector.saturating_sub(part_start)) * 512;
                match to_file_offset(&extents, phys) {
                    Some(offset) if offset >= page_size() => {
                        requeued.retain(|&(s, _)| s != sector);
                        requeued.push((sector, trace.requests.len()));
                        if requeued.len() > 4096 {
                            requeued.remove(0);
                        }
                        trace.requests.push(SwapRequest {
                            time_ns: ts_ns.saturating_sub(t0),
                            dir,
                            offset,
                            size: bytes,
                        });
                        trace.tasks.push(task);
                    }
                    _ => other += 1,
                }
            }
            Some(Event::Throttle(mut t)) => {
                t.time_ns = t.time_ns.saturating_sub(t0);
                trace.throttles.push(t);
            }
            None => {}
        }
    }
    // Requeued issues were marked with size 0.
    let keep: Vec<bool> = trace.requests.iter().map(|r| r.size > 0).collect();
    let mut k = keep.iter();
    trace.requests.retain(|_| *k.next().expect("same length"));
    let mut k = keep.iter();
    trace.tasks.retain(|_| *k.next().expect("same length"));
    // Sort by time (per-CPU buffers interleave); stable for equal times.
    let mut order: Vec<usize> = (0..trace.requests.len()).collect();
    order.sort_by_key(|&i| trace.requests[i].time_ns);
    trace.requests = order.iter().map(|&i| trace.requests[i]).collect();
    trace.tasks = order.iter().map(|&i| trace.tasks[i].clone()).collect();
    trace.throttles.sort_by_key(|t| t.time_ns);
    trace.phases.sort_by_key(|p| p.0);
    let h = &mut trace.header;
    h.insert(
        "command".into(),
        command
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
    );
    h.insert("limit_bytes".into(), opts.limit_bytes.to_string());
    h.insert("swap_bytes".into(), opts.swap_bytes.to_string());
    h.insert("cgroup".into(), version.clone());
    h.insert("disk".into(), format!("{}:{}", disk.0, disk.1));
    h.insert("extents".into(), extents.len().to_string());
    h.insert("kernel".into(), kernel_release());
    h.insert("lost_events".into(), lost.to_string());
    h.insert("requeues".into(), requeues.to_string());
    h.insert("wall_ns".into(), wall_ns.to_string());
    h.insert(
        "start_unix_s".into(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs().saturating_sub(wall_ns / 1_000_000_000))
            .unwrap_or(0)
            .to_string(),
    );
    trace.write(out)?;
    let count = |d: Dir| trace.requests.iter().filter(|r| r.dir == d).count() as u64;
    let bytes = |d: Dir| {
        trace
            .requests
            .iter()
            .filter(|r| r.dir == d)
            .map(|r| r.size)
            .sum()
    };
    Ok(RecordSwapSummary {
        reads: count(Dir::Read),
        writes: count(Dir::Write),
        read_bytes: bytes(Dir::Read),
        write_bytes: bytes(Dir::Write),
        throttles: trace.throttles.len() as u64,
        other_requests: other,
        lost_events: lost,
        exit,
        interrupted,
        wall_ns,
        cgroup: version,
        extents: extents.len(),
    })
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Waits for the command; on Ctrl-C forwards SIGINT, and kills the
/// cgroup if it is still running 5 s later.
fn wait(
    mut child: std::process::Child,
    flag: &AtomicBool,
    cg: &Path,
) -> Result<(ChildExit, bool), SwapError> {
    let mut seen: Option<Instant> = None;
    let mut forwarded = false;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return Ok((
                    ChildExit {
                        code: status.code(),
                        signal: status.signal(),
                    },
                    seen.is_some(),
                ))
            }
            Ok(None) => {}
            Err(e) => return Err(SwapError::io("the recorded command", e)),
        }
        if flag.load(Ordering::Relaxed) {
            let since = *seen.get_or_insert_with(Instant::now);
            if !forwarded && since.elapsed() > Duration::from_millis(100) {
                // SAFETY: a pid we own, not yet reaped.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
                forwarded = true;
            }
            if since.elapsed() > Duration::from_secs(5) {
                let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap_or_default();
                for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Reads `trace_pipe` until told to stop and it is empty twice.
fn read_pipe(mut pipe: File, stop: &AtomicBool) -> std::io::Result<Vec<String>> {
    let mut data = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut empty_after_stop = false;
    loop {
        match pipe.read(&mut buf) {
            Ok(n) if n > 0 => {
                data.extend_from_slice(&buf[..n]);
                empty_after_stop = false;
                continue;
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if stop.load(Ordering::Acquire) {
            if empty_after_stop {
                break;
            }
            empty_after_stop = true;
        } else {
            thread::sleep(Duration::from_millis(10));
        }
    }
    Ok(BufReader::new(&data[..])
        .lines()
        .map_while(Result::ok)
        .collect())
}

fn trace_index_of(issued: &[(u64, usize)], sector: u64) -> Option<usize> {
    issued
        .iter()
        .rev()
        .find(|&&(s, _)| s == sector)
        .map(|&(_, i)| i)
}

enum Event {
    Requeue {
        sector: u64,
    },
    Phase {
        ts_ns: u64,
        name: String,
    },
    Request {
        ts_ns: u64,
        dir: Dir,
        sector: u64,
        bytes: u64,
        task: String,
    },
    Throttle(Throttle),
}

/// The timestamp (seconds with a fraction) before `: event:`.
fn timestamp_ns(prefix: &str) -> Option<u64> {
    let ts = prefix.split_whitespace().last()?;
    let (s, frac) = ts.split_once('.')?;
    let s: u64 = s.parse().ok()?;
    let digits = frac.len().min(9);
    let f: u64 = frac[..digits].parse().ok()?;
    Some(s * 1_000_000_000 + f * 10u64.pow(9 - digits as u32))
}

/// Parses one `trace_pipe` line of our two events.
fn parse_line(line: &str) -> Option<Event> {
    if let Some(i) = line.find(": block_rq_requeue: ") {
        let rest = &line[i + ": block_rq_requeue: ".len()..];
        let after_cmd = &rest[rest.find(')')? + 1..];
        let sector: u64 = after_cmd.split_whitespace().next()?.parse().ok()?;
        return Some(Event::Requeue { sector });
    }
    if let Some(i) = line.find(": tracing_mark_write: nvmos-phase ") {
        let ts_ns = timestamp_ns(&line[..i])?;
        let name = line[i + ": tracing_mark_write: nvmos-phase ".len()..]
            .trim()
            .to_owned();
        return Some(Event::Phase { ts_ns, name });
    }
    if let Some(i) = line.find(": block_rq_issue: ") {
        let ts_ns = timestamp_ns(&line[..i])?;
        let rest = &line[i + ": block_rq_issue: ".len()..];
        let mut f = rest.split_whitespace();
        let _dev = f.next()?;
        let rwbs = f.next()?;
        let dir = if rwbs.contains('D') || rwbs.contains('F') {
            return None;
        } else if rwbs.contains('W') {
            Dir::Write
        } else if rwbs.contains('R') {
            Dir::Read
        } else {
            return None;
        };
        let bytes: u64 = f.next()?.parse().ok()?;
        let after_cmd = &rest[rest.find(')')? + 1..];
        let mut g = after_cmd.split_whitespace();
        let sector: u64 = g.next()?.parse().ok()?;
        if g.next()? != "+" {
            return None;
        }
        let nr: u64 = g.next()?.parse().ok()?;
        let bytes = if bytes == 0 { nr * 512 } else { bytes };
        let task = rest
            .rfind('[')
            .map(|a| rest[a + 1..].trim_end_matches(']').to_owned())
            .unwrap_or_default();
        if bytes == 0 {
            return None;
        }
        return Some(Event::Request {
            ts_ns,
            dir,
            sector,
            bytes,
            task,
        });
    }
    if let Some(i) = line.find(": mm_vmscan_throttled: ") {
        let time_ns = timestamp_ns(&line[..i])?;
        let rest = &line[i + ": mm_vmscan_throttled: ".len()..];
        let field = |k: &str| {
            rest.split_whitespace()
                .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        };
        return Some(Event::Throttle(Throttle {
            time_ns,
            timeout_us: field("usec_timeout")?.parse().ok()?,
            // The kernel's format spells it "usect_delayed".
            delayed_us: field("usect_delayed")
                .or_else(|| field("usec_delayed"))?
                .parse()
                .ok()?,
            reason: field("reason").unwrap_or("").to_owned(),
        }));
    }
    None
}

/// An extent of the swap file: logical and physical byte offsets.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Extent {
    logical: u64,
    physical: u64,
    length: u64,
}

fn to_file_offset(extents: &[Extent], phys: u64) -> Option<u64> {
    extents
        .iter()
        .find(|e| phys >= e.physical && phys < e.physical + e.length)
        .map(|e| e.logical + (phys - e.physical))
}

/// The disk (major, minor) holding a filesystem on `dev`, and the
/// partition's first sector on it.
fn disk_of(dev: u64) -> Result<((u32, u32), u64), SwapError> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major == 0 {
        return Err(SwapError::Unsupported(format!(
            "the swap directory's filesystem (device {major}:{minor}) is not on a block device; pass --swap-dir on a disk-backed filesystem"
        )));
    }
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if sys.join("dm").exists() || sys.join("md").exists() {
        return Err(SwapError::Unsupported(format!(
            "the swap directory is on {major}:{minor}, a device-mapper or md device: its requests cannot be mapped to the disk"
        )));
    }
    if sys.join("partition").exists() {
        let start: u64 = std::fs::read_to_string(sys.join("start"))
            .map_err(|e| SwapError::io(sys.join("start"), e))?
            .trim()
            .parse()
            .map_err(|_| SwapError::Unsupported(format!("{}: unreadable start", sys.display())))?;
        let parent = std::fs::read_to_string(sys.join("../dev"))
            .map_err(|e| SwapError::io(sys.join("../dev"), e))?;
        let (ma, mi) = parent
            .trim()
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(|| SwapError::Unsupported(format!("{}: unreadable dev", sys.display())))?;
        Ok(((ma, mi), start))
    } else {
        Ok(((major, minor), 0))
    }
}

/// Creates the cgroup with its limits.
fn make_cgroup(
    pid: u32,
    opts: &RecordSwapOptions,
    cleanup: &mut Cleanup,
) -> Result<(PathBuf, String), SwapError> {
    let mounts =
        std::fs::read_to_string("/proc/mounts").map_err(|e| SwapError::io("/proc/mounts", e))?;
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| SwapError::io("/proc/self/cgroup", e))?;
    let name = format!("{NAME_PREFIX}{pid}");
    // cgroup v2 with the memory controller at its root.
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 3 && f[2] == "cgroup2" {
            let root = PathBuf::from(f[1]);
            let controllers =
                std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                let cg = root.join(&name);
                std::fs::create_dir(&cg).map_err(|e| SwapError::io(&cg, e))?;
                cleanup.cgroup = Some(cg.clone());
                std::fs::write(cg.join("memory.max"), opts.limit_bytes.to_string())
                    .map_err(|e| SwapError::io(cg.join("memory.max"), e))?;
                let swap_max = cg.join("memory.swap.max");
                if swap_max.exists() {
                    std::fs::write(&swap_max, opts.swap_bytes.to_string())
                        .map_err(|e| SwapError::io(&swap_max, e))?;
                }
                return Ok((cg, "v2".into()));
            }
        }
    }
    // cgroup v1's memory controller, under our own cgroup.
    let mount = mounts.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() >= 4 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "memory"))
            .then(|| PathBuf::from(f[1]))
    });
    let Some(mount) = mount else {
        return Err(SwapError::Unsupported(
            "no memory cgroup: neither cgroup v2 with the memory controller nor cgroup v1's memory hierarchy is mounted".into(),
        ));
    };
    let own_path = own
        .lines()
        .find_map(|l| {
            let mut p = l.splitn(3, ':');
            let (_, ctl, path) = (p.next()?, p.next()?, p.next()?);
            ctl.split(',')
                .any(|c| c == "memory")
                .then(|| path.trim_start_matches('/').to_owned())
        })
        .unwrap_or_default();
    let cg = mount.join(own_path).join(&name);
    std::fs::create_dir(&cg).map_err(|e| SwapError::io(&cg, e))?;
    cleanup.cgroup = Some(cg.clone());
    let limit = cg.join("memory.limit_in_bytes");
    std::fs::write(&limit, opts.limit_bytes.to_string()).map_err(|e| SwapError::io(&limit, e))?;
    let memsw = cg.join("memory.memsw.limit_in_bytes");
    if memsw.exists() {
        std::fs::write(&memsw, (opts.limit_bytes + opts.swap_bytes).to_string())
            .map_err(|e| SwapError::io(&memsw, e))?;
    }
    Ok((cg, "v1".into()))
}

/// Creates the swap file: allocated blocks, the swap header as `mkswap`
/// writes it (version 1, last page, no bad pages, SWAPSPACE2).
fn create_swap_file(path: &Path, bytes: u64, cleanup: &mut Cleanup) -> Result<(), SwapError> {
    let page = page_size();
    let pages = bytes / page;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| SwapError::io(path, e))?;
    cleanup.swap_file = Some(path.to_owned());
    // SAFETY: a valid open fd.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, (pages * page) as libc::off_t) };
    if rc != 0 {
        return Err(SwapError::Setup {
            step: "fallocate",
            message: format!("{}: {}", path.display(), std::io::Error::last_os_error()),
        });
    }
    let mut header = vec![0u8; page as usize];
    header[1024..1028].copy_from_slice(&1u32.to_ne_bytes());
    header[1028..1032].copy_from_slice(&((pages - 1) as u32).to_ne_bytes());
    // A random UUID, as mkswap gives.
    let uuid: [u8; 16] = rand::random();
    header[1036..1052].copy_from_slice(&uuid);
    let magic = b"SWAPSPACE2";
    header[page as usize - magic.len()..].copy_from_slice(magic);
    f.write_all(&header).map_err(|e| SwapError::io(path, e))?;
    f.sync_all().map_err(|e| SwapError::io(path, e))?;
    Ok(())
}

/// The file's extents (`FS_IOC_FIEMAP`).
fn fiemap(path: &Path) -> Result<Vec<Extent>, SwapError> {
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const HEADER: usize = 32;
    const EXTENT: usize = 56;
    const COUNT: usize = 256;
    const FLAG_SYNC: u32 = 1;
    const LAST: u32 = 1;
    const UNMAPPABLE: u32 = 0x2 | 0x4 | 0x8 | 0x100 | 0x200 | 0x400;
    let f = File::open(path).map_err(|e| SwapError::io(path, e))?;
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        // u64 words so the buffer is aligned for the struct.
        let mut buf = vec![0u64; (HEADER + COUNT * EXTENT) / 8];
        buf[0] = start;
        buf[1] = u64::MAX - start;
        let bytes: &mut [u8] =
            // SAFETY: reinterpreting a u64 buffer as bytes of the same length.
            unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8) };
        bytes[16..20].copy_from_slice(&FLAG_SYNC.to_ne_bytes());
        bytes[24..28].copy_from_slice(&(COUNT as u32).to_ne_bytes());
        // SAFETY: the buffer holds a fiemap header and COUNT extents.
        let rc = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP as _, bytes.as_mut_ptr()) };
        if rc != 0 {
            return Err(SwapError::Unsupported(format!(
                "FIEMAP on {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            )));
        }
        let mapped = u32::from_ne_bytes(bytes[20..24].try_into().expect("4 bytes")) as usize;
        if mapped == 0 {
            break;
        }
        let mut last = false;
        for i in 0..mapped {
            let e = &bytes[HEADER + i * EXTENT..HEADER + (i + 1) * EXTENT];
            let word = |o: usize| u64::from_ne_bytes(e[o..o + 8].try_into().expect("8 bytes"));
            let flags = u32::from_ne_bytes(e[40..44].try_into().expect("4 bytes"));
            if flags & UNMAPPABLE != 0 {
                return Err(SwapError::Unsupported(format!(
                    "{}: an extent with flags {flags:#x} has no fixed place on the disk",
                    path.display()
                )));
            }
            let ext = Extent {
                logical: word(0),
                physical: word(8),
                length: word(16),
            };
            start = ext.logical + ext.length;
            out.push(ext);
            last |= flags & LAST != 0;
        }
        if last {
            break;
        }
    }
    if out.is_empty() {
        return Err(SwapError::Unsupported(format!(
            "{}: no extents",
            path.display()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_block_and_throttle_lines() {
        let l = "     kswapd0-45      [001] d..1.  1234.567890: block_rq_issue: 254,0 WS 131072 () 2048 + 256 none,0,0 [kswapd0]";
        match parse_line(l) {
            Some(Event::Request {
                ts_ns,
                dir,
                sector,
                bytes,
                task,
            }) => {
                assert_eq!(ts_ns, 1_234_567_890_000);
                assert_eq!((dir, sector, bytes), (Dir::Write, 2048, 131_072));
                assert_eq!(task, "kswapd0");
            }
            _ => panic!("not parsed"),
        }
        let l = " python3-99 [000] ..... 10.000001: block_rq_issue: 254,0 RA 32768 () 16 + 64 be,0,4 [python3]";
        assert!(matches!(
            parse_line(l),
            Some(Event::Request { dir: Dir::Read, .. })
        ));
        let l = " x-1 [000] ..... 12.25: tracing_mark_write: nvmos-phase aged-1";
        assert!(
            matches!(parse_line(l), Some(Event::Phase { ts_ns: 12_250_000_000, ref name }) if name == "aged-1")
        );
        let l = " k-1 [000] ..... 12.5: block_rq_requeue: 254,0 W 4096 () 77 + 8 none,0,0 [0]";
        assert!(matches!(parse_line(l), Some(Event::Requeue { sector: 77 })));
        let l = " x-1 [000] ..... 10.5: block_rq_issue: 254,0 FF 0 () 0 + 0 none,0,0 [x]";
        assert!(parse_line(l).is_none());
        let l = " p-1 [000] ..... 11.000002: mm_vmscan_throttled: nid=0 usec_timeout=100000 usect_delayed=2000 reason=VMSCAN_THROTTLE_WRITEBACK";
        match parse_line(l) {
            Some(Event::Throttle(t)) => {
                assert_eq!(
                    (t.time_ns, t.timeout_us, t.delayed_us),
                    (11_000_002_000, 100_000, 2000)
                );
            }
            _ => panic!("not parsed"),
        }
    }

    #[test]
    fn extents_map_sectors_back() {
        let ex = [
            Extent {
                logical: 0,
                physical: 1 << 20,
                length: 4096 * 4,
            },
            Extent {
                logical: 4096 * 4,
                physical: 8 << 20,
                length: 4096 * 4,
            },
        ];
        assert_eq!(to_file_offset(&ex, (1 << 20) + 4096), Some(4096));
        assert_eq!(to_file_offset(&ex, (8 << 20) + 8192), Some(4096 * 6));
        assert_eq!(to_file_offset(&ex, 0), None);
    }

    #[test]
    fn refuses_without_root_before_touching_anything() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            return; // Root: covered by the CLI's interrupt test.
        }
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("x.swt.zst");
        let e = record_swap(&["true".into()], &out, &RecordSwapOptions::default()).unwrap_err();
        assert!(matches!(e, SwapError::NotRoot { .. }));
        assert!(!out.exists());
    }
}
