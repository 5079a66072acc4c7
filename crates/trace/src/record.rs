//! The tracefs recorder: runs a command while streaming the kernel's
//! page-allocation events into a `.nvt` file.
//!
//! # What it changes, and the promise to undo it
//!
//! Recording changes global kernel state: `tracing_on`, `current_tracer`
//! (set to `nop` if another tracer runs), `buffer_size_kb`, the `enable`
//! file of the three `kmem` events, the ring buffer's contents (cleared),
//! and the tracefs mount (mounted at `/sys/kernel/tracing` if it was not
//! mounted anywhere). Every file is read before it is first written, and
//! [`record`] writes the saved values back and unmounts what it mounted on
//! every path out: success, the command's failure, a failure to start it,
//! Ctrl-C (SIGINT or SIGTERM, forwarded to the command), and — through a
//! drop guard — a panic. The contents of the ring buffer cannot be given
//! back. A `buffer_size_kb` of `7 (expanded: 1408)` (buffers never used
//! since boot) cannot be un-used: it is restored as what the kernel reports
//! for a write of `1408` (it rounds to whole sub-buffers: `1410` on 4 KiB
//! pages), and every restored file is read back and compared.
//!
//! Without root, nothing is touched: [`TraceError::NotRoot`].
//!
//! # Streaming
//!
//! A reader thread reads `trace_pipe` (non-blocking, sleeping briefly when
//! it is empty), parses it with the ftrace importer and writes blocks with
//! [`NvtWriter`] while the command runs. When the command exits, tracing is
//! switched off and the thread reads until the pipe is empty twice in a
//! row after that, so every event recorded is in the file.
//!
//! The trace is system-wide: the kernel's allocator serves every process,
//! and a replay needs all its allocations and frees, not only the
//! command's.
//!
//! # Writes
//!
//! With [`RecordOptions::write_interval`], a sampler thread reads the
//! soft-dirty bits of the command's process tree every interval (see
//! [`crate::softdirty`] for the method and what it cannot see) and sends
//! each sample's written frames to the reader thread, which merges them
//! with the kernel's events in time order as [`Op::Write`] events. For a
//! common clock `trace_clock` is set to `mono` (and restored) while
//! recording with writes. The header's [`TraceHeader::writes`] holds the
//! interval and the sampler's counts; such a file is `.nvt` version 2.

use std::collections::VecDeque;
use std::ffi::{CString, OsString};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, ErrorKind, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::event::{Event, Op};
use crate::nvt::{NvtWriter, DEFAULT_LEVEL};
use crate::output::Output;
use crate::softdirty::Batch;
use crate::source::{Format, SourceCounts, TraceHeader, WriteSampling};
use crate::text::TextReader;
use crate::TraceError;

/// The events recorded, as `events/` paths under tracefs.
pub const EVENTS: [&str; 3] = [
    "kmem/mm_page_alloc",
    "kmem/mm_page_free",
    "kmem/mm_page_free_batched",
];

/// Where tracefs is mounted when nobody mounted it.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// How to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Ring-buffer size per CPU, KiB. Bigger buffers lose fewer events
    /// when the command allocates faster than the reader keeps up.
    pub buffer_kb_per_cpu: u64,
    /// zstd level of the `.nvt` blocks.
    pub zstd_level: i32,
    /// How long the reader sleeps when `trace_pipe` is empty.
    pub poll_interval: Duration,
    /// Sample the command's writes every this often (`None`: no write
    /// sampling).
    pub write_interval: Option<Duration>,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            buffer_kb_per_cpu: 64 * 1024,
            zstd_level: DEFAULT_LEVEL,
            poll_interval: Duration::from_millis(10),
            write_interval: None,
        }
    }
}

/// How the recorded command ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChildExit {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
}

impl ChildExit {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// What a recording produced.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecordSummary {
    /// Events written.
    pub events: u64,
    /// Events the kernel lost (ring-buffer overruns and drops).
    pub lost_events: u64,
    /// Bytes of the `.nvt` file.
    pub bytes: u64,
    /// How the command ended.
    pub exit: ChildExit,
    /// Whether Ctrl-C (SIGINT/SIGTERM) stopped the recording.
    pub interrupted: bool,
    /// Wall-clock time from starting the command to its exit, ns.
    pub wall_ns: u64,
    /// Whether the recorder mounted tracefs (and unmounted it again).
    pub mounted_tracefs: bool,
    /// The header written to the file (final counts).
    pub header: TraceHeader,
}

impl RecordSummary {
    /// Bytes per event; 0 for an empty trace.
    pub fn bytes_per_event(&self) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            self.bytes as f64 / self.events as f64
        }
    }
}

/// Records `command` (program and arguments) into `out`. See the module
/// documentation for what is changed and restored.
///
/// The command's failure is not an error: the trace is complete, and
/// [`RecordSummary::exit`] says how it ended.
pub fn record(
    command: &[OsString],
    out: &Path,
    opts: &RecordOptions,
) -> Result<RecordSummary, TraceError> {
    let Some(program) = command.first() else {
        return Err(TraceError::Spawn {
            command: String::new(),
            source: std::io::Error::new(ErrorKind::InvalidInput, "no command given"),
        });
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(TraceError::NotRoot { euid });
    }
    let command_text = command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    let machine = crate::machine::current()?;
    let header = TraceHeader {
        machine: Some(machine),
        command: command_text.clone(),
        start_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()
            .map(|d| d.as_nanos() as u64),
        source: "record".into(),
        events: 0,
        counts: SourceCounts::default(),
        writes: opts.write_interval.map(|i| WriteSampling {
            interval_ns: i.as_nanos() as u64,
            ..WriteSampling::default()
        }),
    };
    if let Some(interval) = opts.write_interval {
        if interval.is_zero() {
            return Err(TraceError::WriteSampling(
                "the write interval must be longer than 0".into(),
            ));
        }
        crate::softdirty::check_support()?;
    }
    // The output first: a bad path fails before anything is changed. It
    // appears at `out` only once the trace is complete (also after Ctrl-C:
    // the events up to then are a complete trace); an error leaves nothing.
    let writer = NvtWriter::with_level(
        BufWriter::with_capacity(1 << 20, Output::create(out, &[])?),
        out,
        header,
        opts.zstd_level,
    )?;

    let mut tracefs = Tracefs::find_or_mount()?;
    let result = run(&mut tracefs, program, command, &command_text, writer, opts);
    let restored = tracefs.restore();
    let mut summary = result?;
    restored?;
    summary.mounted_tracefs = tracefs.mounted;
    Ok(summary)
}

/// The recording proper, between saving and restoring the state.
fn run(
    tracefs: &mut Tracefs,
    program: &OsString,
    command: &[OsString],
    command_text: &[String],
    writer: NvtWriter<BufWriter<Output>>,
    opts: &RecordOptions,
) -> Result<RecordSummary, TraceError> {
    tracefs.set("tracing_on", "0")?;
    if tracefs.read("current_tracer")? != "nop" {
        tracefs.set("current_tracer", "nop")?;
    }
    if opts.write_interval.is_some() {
        // Sampled writes carry CLOCK_MONOTONIC times.
        tracefs.set("trace_clock", "mono")?;
    }
    tracefs.set("buffer_size_kb", &opts.buffer_kb_per_cpu.to_string())?;
    for event in EVENTS {
        tracefs.set(&format!("events/{event}/enable"), "1")?;
    }
    // Clearing the buffer also resets the per-CPU loss counters; read them
    // anyway so a kernel that does not reset them is not misreported.
    tracefs.clear()?;
    let lost_before = tracefs.lost_events()?;

    let pipe_path = tracefs.root.join("trace_pipe");
    let pipe = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&pipe_path)
        .map_err(|e| TraceError::io(&pipe_path, e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (writes_tx, writes_rx) = std::sync::mpsc::channel::<(Batch, u64)>();
    let writes_rx = opts.write_interval.map(|_| writes_rx);
    // Dropped (below, or moved into the sampler) before the reader is
    // joined: the reader's last merge waits for every sender to be gone.
    let mut writes_tx = Some(writes_tx);
    let reader = {
        let pipe = TracePipe {
            file: pipe,
            stop: Arc::clone(&stop),
            empty_after_stop: false,
            poll: opts.poll_interval,
        };
        thread::Builder::new()
            .name("nvmos-trace-pipe".into())
            .spawn(move || stream(pipe, pipe_path, writer, writes_rx))
            .map_err(|e| TraceError::io("trace_pipe reader thread", e))?
    };

    let interrupted = Arc::new(AtomicBool::new(false));
    let signals = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]
        .into_iter()
        .filter_map(|sig| signal_hook::flag::register(sig, Arc::clone(&interrupted)).ok())
        .collect::<Vec<_>>();

    let started = Instant::now();
    let stop_sampler = Arc::new(AtomicBool::new(false));
    let mut sampler = None;
    let outcome = match tracefs.set("tracing_on", "1") {
        Err(e) => Err(e),
        Ok(()) => match Command::new(program).args(&command[1..]).spawn() {
            Err(source) => Err(TraceError::Spawn {
                command: command_text.join(" "),
                source,
            }),
            Ok(child) => {
                if let (Some(interval), Some(tx)) = (opts.write_interval, writes_tx.take()) {
                    let (pid, stop) = (child.id(), Arc::clone(&stop_sampler));
                    sampler = Some(
                        thread::Builder::new()
                            .name("nvmos-write-sampler".into())
                            .spawn(move || crate::softdirty::sample(pid, interval, stop, tx))
                            .map_err(|e| TraceError::io("write sampler thread", e)),
                    );
                }
                wait(child, &interrupted)
            }
        },
    };
    let wall_ns = started.elapsed().as_nanos() as u64;
    // The sampler ends (and drops its sender) before the reader drains.
    drop(writes_tx);
    stop_sampler.store(true, Ordering::Release);
    let sampled = sampler.map(|s| {
        s.and_then(|h| {
            h.join()
                .map_err(|_| TraceError::Restore("the write sampler panicked".into()))
        })
    });

    // Stop the events first, then let the reader drain what is left.
    let off = tracefs.write("tracing_on", "0");
    stop.store(true, Ordering::Release);
    let streamed = reader
        .join()
        .unwrap_or_else(|_| Err(TraceError::Restore("the trace_pipe reader panicked".into())));
    for id in signals {
        signal_hook::low_level::unregister(id);
    }
    let lost_after = tracefs.lost_events();
    let (exit, interrupted) = outcome?;
    off?;
    let (mut writer, mut counts) = streamed?;
    let lost = lost_after?.saturating_sub(lost_before);
    // `[LOST n EVENTS]` lines report the same overruns the counters do.
    counts.lost_events = counts.lost_events.max(lost);
    writer.header_mut().counts = counts;
    if let Some(sampled) = sampled {
        writer.header_mut().writes = Some(sampled?);
    }
    let mut header = writer.header_mut().clone();
    header.events = writer.events();
    let (file, written) = writer.finish()?;
    let path = file.get_ref().path().to_owned();
    file.into_inner()
        .map_err(|e| TraceError::io(path, e.into_error()))?
        .commit()?;
    Ok(RecordSummary {
        events: written.events,
        lost_events: header.counts.lost_events,
        bytes: written.bytes,
        exit,
        interrupted,
        wall_ns,
        mounted_tracefs: false,
        header,
    })
}

/// Waits for the command; on Ctrl-C, forwards SIGINT unless the command
/// exits by itself first (a terminal already sent it the same signal, and
/// a second one can cut its own clean-up short).
fn wait(
    mut child: std::process::Child,
    interrupted: &AtomicBool,
) -> Result<(ChildExit, bool), TraceError> {
    let mut seen: Option<Instant> = None;
    let mut forwarded = false;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let exit = ChildExit {
                    code: status.code(),
                    signal: status.signal(),
                };
                return Ok((exit, seen.is_some()));
            }
            Ok(None) => {}
            Err(e) => return Err(TraceError::io("the recorded command", e)),
        }
        if interrupted.load(Ordering::Relaxed) {
            let since = *seen.get_or_insert_with(Instant::now);
            if !forwarded && since.elapsed() > Duration::from_millis(100) {
                // SAFETY: kill with a pid we own (not yet reaped) and a
                // valid signal number.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
                forwarded = true;
            }
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// The reader thread: parse `trace_pipe` into the writer until the pipe
/// ends. After an error it keeps draining the pipe so the ring buffer does
/// not fill up while the command runs, and reports the first error.
fn stream(
    pipe: TracePipe,
    path: PathBuf,
    mut writer: NvtWriter<BufWriter<Output>>,
    writes: Option<Receiver<(Batch, u64)>>,
) -> Result<(NvtWriter<BufWriter<Output>>, SourceCounts), TraceError> {
    let mut reader = TextReader::new(
        BufReader::with_capacity(1 << 20, pipe),
        &path,
        Format::Ftrace,
    );
    let mut merge = writes.map(WriteMerge::new);
    let mut error = None;
    while let Some(event) = reader.next() {
        let pushed = event.and_then(|e| match merge.as_mut() {
            Some(m) => {
                let first = reader.first_timestamp_ns().unwrap_or(0);
                m.event(&mut writer, first, e)
            }
            None => writer.push(e),
        });
        if let Err(e) = pushed {
            error = Some(e);
            break;
        }
    }
    if let (None, Some(m)) = (&error, merge.as_mut()) {
        // The sampler has ended: take everything it sent, in order.
        let first = reader.first_timestamp_ns();
        if let Err(e) = m.finish(&mut writer, first) {
            error = Some(e);
        }
    }
    let mut counts = reader.counts_mut().clone();
    if let Some(m) = &merge {
        counts.early_timestamps += m.early;
    }
    if let Some(e) = error {
        let _ = std::io::copy(&mut reader.into_inner(), &mut std::io::sink());
        return Err(e);
    }
    Ok((writer, counts))
}

/// Merges the sampler's writes with the kernel's events in time order.
///
/// A kernel event may be read before the sample that covers its time has
/// been sent (the reader keeps up with `trace_pipe` within its poll
/// interval; a sample is sent when its scan ends), so kernel events wait
/// here until the sampler's *watermark* passes them: with each batch the
/// sampler sends the time before which it will never stamp a write again.
/// Events the kernel itself delivers late (per-CPU buffers) are counted as
/// out-of-order timestamps by every consumer, as without writes.
struct WriteMerge {
    rx: Receiver<(Batch, u64)>,
    /// `(CLOCK_MONOTONIC ns, pfn)` in time order.
    writes: VecDeque<(u64, u64)>,
    /// Kernel events waiting for the watermark, with their absolute times.
    events: VecDeque<(u64, Event)>,
    /// No write still to come is stamped before this.
    watermark: u64,
    /// Writes sampled before the first kernel event (written at time 0).
    early: u64,
}

impl WriteMerge {
    fn new(rx: Receiver<(Batch, u64)>) -> WriteMerge {
        WriteMerge {
            rx,
            writes: VecDeque::new(),
            events: VecDeque::new(),
            watermark: 0,
            early: 0,
        }
    }

    /// Takes what the sampler sent; `wait`: until it has ended.
    fn receive(&mut self, wait: bool) {
        loop {
            let got = if wait {
                self.rx.recv().ok()
            } else {
                self.rx.try_recv().ok()
            };
            let Some((batch, watermark)) = got else { break };
            self.writes.extend(batch);
            self.watermark = self.watermark.max(watermark);
        }
        if wait {
            self.watermark = u64::MAX;
        }
    }

    /// A kernel event at `first + e.time_ns`: queued, then everything the
    /// watermark allows is written.
    fn event<W: std::io::Write>(
        &mut self,
        writer: &mut NvtWriter<W>,
        first: u64,
        e: Event,
    ) -> Result<(), TraceError> {
        self.events.push_back((first + e.time_ns, e));
        self.receive(false);
        self.flush(writer, first)
    }

    /// After the sampler ended: everything, in order. `first`: the first
    /// kernel event's time, when there was one.
    fn finish<W: std::io::Write>(
        &mut self,
        writer: &mut NvtWriter<W>,
        first: Option<u64>,
    ) -> Result<(), TraceError> {
        self.receive(true);
        let first = first
            .or_else(|| self.writes.front().map(|&(t, _)| t))
            .unwrap_or(0);
        self.flush(writer, first)?;
        self.push_writes(writer, first, u64::MAX)
    }

    fn flush<W: std::io::Write>(
        &mut self,
        writer: &mut NvtWriter<W>,
        first: u64,
    ) -> Result<(), TraceError> {
        while let Some(&(at, e)) = self.events.front() {
            if at > self.watermark {
                break;
            }
            self.push_writes(writer, first, at)?;
            self.events.pop_front();
            writer.push(e)?;
        }
        Ok(())
    }

    /// Writes every pending write stamped at or before `until`.
    fn push_writes<W: std::io::Write>(
        &mut self,
        writer: &mut NvtWriter<W>,
        first: u64,
        until: u64,
    ) -> Result<(), TraceError> {
        while let Some(&(t, pfn)) = self.writes.front() {
            if t > until {
                break;
            }
            self.writes.pop_front();
            let time_ns = t.checked_sub(first).unwrap_or_else(|| {
                self.early += 1;
                0
            });
            writer.push(Event {
                time_ns,
                cpu: 0,
                op: Op::Write,
                pfn: nvmos_frames::Pfn(pfn),
                order: nvmos_frames::Order::ZERO,
            })?;
        }
        Ok(())
    }
}

/// `trace_pipe` opened non-blocking, read as a stream that ends once the
/// recorder stopped tracing and the pipe is empty.
struct TracePipe {
    file: File,
    stop: Arc<AtomicBool>,
    /// Whether the pipe was found empty once since `stop` was seen. One
    /// empty read after `stop` is not enough: events written before
    /// tracing was switched off may have arrived since the read before.
    empty_after_stop: bool,
    poll: Duration,
}

impl Read for TracePipe {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.file.read(buf) {
                Ok(n) if n > 0 => {
                    self.empty_after_stop = false;
                    return Ok(n);
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if self.stop.load(Ordering::Acquire) {
                if self.empty_after_stop {
                    return Ok(0);
                }
                self.empty_after_stop = true;
            } else {
                thread::sleep(self.poll);
            }
        }
    }
}

/// The mounted tracefs and the values of every file changed in it: every
/// file written through [`Tracefs::set`] is read first and written back by
/// [`Tracefs::restore`] (also on drop, so a panic restores too). Shared by
/// the recorders (this one and `nvmos-swap`'s block recorder).
pub struct Tracefs {
    /// Where tracefs is mounted.
    pub root: PathBuf,
    /// Whether we mounted it (and unmount it on restore).
    pub mounted: bool,
    /// Files in the order first written, with their values before.
    saved: Vec<(String, String)>,
    restored: bool,
}

impl Tracefs {
    /// Finds tracefs in `/proc/mounts`, or mounts it at [`TRACEFS`].
    pub fn find_or_mount() -> Result<Tracefs, TraceError> {
        let mounts = std::fs::read_to_string("/proc/mounts")
            .map_err(|e| TraceError::io("/proc/mounts", e))?;
        if let Some(root) = tracefs_mount(&mounts) {
            return Ok(Tracefs {
                root,
                mounted: false,
                saved: Vec::new(),
                restored: false,
            });
        }
        let target = CString::new(TRACEFS).expect("no NUL");
        let fstype = CString::new("tracefs").expect("no NUL");
        let source = CString::new("nodev").expect("no NUL");
        // SAFETY: valid NUL-terminated strings; no data argument.
        let rc = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(TraceError::NoTracefs {
                reason: format!(
                    "not mounted, and mounting it at {TRACEFS} failed: {}",
                    std::io::Error::last_os_error()
                ),
            });
        }
        let fs = Tracefs {
            root: PathBuf::from(TRACEFS),
            mounted: true,
            saved: Vec::new(),
            restored: false,
        };
        if !fs.root.join("trace_pipe").exists() {
            let mut fs = fs;
            let _ = fs.restore();
            return Err(TraceError::NoTracefs {
                reason: format!("{TRACEFS} has no trace_pipe after mounting"),
            });
        }
        Ok(fs)
    }

    /// Reads a file, trimmed.
    pub fn read(&self, file: &str) -> Result<String, TraceError> {
        let path = self.root.join(file);
        std::fs::read_to_string(&path)
            .map(|s| s.trim().to_owned())
            .map_err(|e| TraceError::io(path, e))
    }

    /// Writes without saving (for files already saved).
    pub fn write(&self, file: &str, value: &str) -> Result<(), TraceError> {
        let path = self.root.join(file);
        std::fs::write(&path, value).map_err(|e| TraceError::io(path, e))
    }

    /// Saves `file`'s value the first time, then writes `value`.
    ///
    /// The value saved is one that reads back as itself once written, so
    /// [`restore`](Tracefs::restore) can check every file. That needs care
    /// for `buffer_size_kb` of never-used buffers, `7 (expanded: 1408)`:
    /// the kernel rounds a size up to whole sub-buffers (1408 KiB reads
    /// back as 1410 on 4 KiB pages), and expanded buffers cannot be
    /// un-expanded. So the expanded size is written first and what the
    /// kernel reports for it is saved: that is the value restored. The
    /// write only does early what `value`'s write does anyway.
    pub fn set(&mut self, file: &str, value: &str) -> Result<(), TraceError> {
        if !self.saved.iter().any(|(f, _)| f == file) {
            let raw = self.read(file)?;
            let mut old = restorable(file, &raw);
            if file == "buffer_size_kb" && old != raw {
                self.write(file, &old)?;
                old = self.read(file)?;
            }
            self.saved.push((file.to_owned(), old));
        }
        self.write(file, value)
    }

    /// Empties the ring buffer (opening `trace` for writing with truncation).
    pub fn clear(&self) -> Result<(), TraceError> {
        let path = self.root.join("trace");
        OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .map(drop)
            .map_err(|e| TraceError::io(path, e))
    }

    /// Events lost so far over all CPUs: overruns (overwritten before they
    /// were read), commit overruns and dropped events.
    pub fn lost_events(&self) -> Result<u64, TraceError> {
        let dir = self.root.join("per_cpu");
        let entries = std::fs::read_dir(&dir).map_err(|e| TraceError::io(&dir, e))?;
        let mut lost = 0;
        for entry in entries {
            let entry = entry.map_err(|e| TraceError::io(&dir, e))?;
            if !entry.file_name().as_bytes().starts_with(b"cpu") {
                continue;
            }
            let path = entry.path().join("stats");
            let text = std::fs::read_to_string(&path).map_err(|e| TraceError::io(&path, e))?;
            lost += parse_lost(&text);
        }
        Ok(lost)
    }

    /// Writes every saved value back, newest first, and unmounts what was
    /// mounted. Tries everything even after a failure, and names what it
    /// could not restore.
    pub fn restore(&mut self) -> Result<(), TraceError> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let mut failures = Vec::new();
        for (file, value) in self.saved.iter().rev() {
            if let Err(e) = self.write(file, value) {
                failures.push(format!("{file} (should be {value:?}): {e}"));
                continue;
            }
            // Read back: a value the kernel silently changed (rounded,
            // refused) is a failure to restore, not a success.
            match self.read(file) {
                Ok(now) if restorable(file, &now) == *value => {}
                Ok(now) => failures.push(format!("{file} reads {now:?} after writing {value:?}")),
                Err(e) => failures.push(format!("{file} (should be {value:?}): {e}")),
            }
        }
        if self.mounted {
            let target = CString::new(self.root.as_os_str().as_bytes()).expect("no NUL");
            // SAFETY: a valid NUL-terminated path.
            if unsafe { libc::umount2(target.as_ptr(), 0) } != 0 {
                failures.push(format!(
                    "unmounting {}: {}",
                    self.root.display(),
                    std::io::Error::last_os_error()
                ));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(TraceError::Restore(failures.join("; ")))
        }
    }
}

impl Drop for Tracefs {
    /// The last resort for a panic between saving and restoring.
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// The value to write back to restore what `file` read as `value`.
fn restorable(file: &str, value: &str) -> String {
    if file == "buffer_size_kb" {
        // "7 (expanded: 1408)": never-used buffers; restore the size they
        // would expand to.
        if let Some(expanded) = value
            .split("expanded:")
            .nth(1)
            .map(|s| s.trim().trim_end_matches(')').trim())
        {
            return expanded.to_owned();
        }
    }
    if file == "trace_clock" {
        // "[local] global counter ...": the bracketed one is in force.
        if let Some(current) = value
            .split_whitespace()
            .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        {
            return current.to_owned();
        }
    }
    if file.ends_with("/filter") && value == "none" {
        // No filter reads "none"; writing "0" clears one.
        return "0".to_owned();
    }
    if file.ends_with("/enable") {
        // "1*": enabled but soft-disabled by a trigger; the trigger keeps
        // its own state.
        return value.trim_end_matches('*').to_owned();
    }
    value.to_owned()
}

/// The mount point of tracefs in `/proc/mounts` text, preferring
/// [`TRACEFS`].
fn tracefs_mount(mounts: &str) -> Option<PathBuf> {
    let points: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (_, point, fstype) = (f.next()?, f.next()?, f.next()?);
            (fstype == "tracefs").then(|| PathBuf::from(unescape_mount(point)))
        })
        .collect();
    points
        .iter()
        .find(|p| p.as_path() == Path::new(TRACEFS))
        .or(points.first())
        .cloned()
}

/// `/proc/mounts` escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount(s: &str) -> OsString {
    use std::os::unix::ffi::OsStringExt;
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c));
        if b[i] == b'\\' && octal {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    OsString::from_vec(out)
}

/// Lost events in one `per_cpu/cpuN/stats` file.
fn parse_lost(stats: &str) -> u64 {
    stats
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            matches!(key.trim(), "overrun" | "commit overrun" | "dropped events")
                .then(|| value.trim().parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_events_merge_in_time_order() {
        use nvmos_frames::{MigrateType, Order, Pfn};
        let (tx, rx) = std::sync::mpsc::channel();
        let mut m = WriteMerge::new(rx);
        let header = TraceHeader {
            writes: Some(WriteSampling::default()),
            ..TraceHeader::default()
        };
        let mut w = NvtWriter::new(Vec::new(), "t.nvt", header).unwrap();
        let ev = |t: u64, pfn: u64| Event {
            time_ns: t,
            cpu: 1,
            op: Op::Alloc(MigrateType::Movable),
            pfn: Pfn(pfn),
            order: Order::ZERO,
        };
        let first = 1_000;
        // Events at 1000 and 1050 arrive before the sample stamped 1040
        // (the watermark is still 0): they wait.
        m.event(&mut w, first, ev(0, 1)).unwrap();
        m.event(&mut w, first, ev(50, 2)).unwrap();
        assert_eq!(w.events(), 0);
        tx.send((vec![(990, 7), (1_040, 8)], 1_045)).unwrap();
        // The next event releases what the watermark covers: 990 (before
        // the first event: time 0) and 1000; 1050 waits, and 1040 with it
        // (a write goes out just before the first event after it).
        m.event(&mut w, first, ev(100, 3)).unwrap();
        assert_eq!(w.events(), 2);
        tx.send((vec![(1_060, 9)], 1_070)).unwrap();
        drop(tx);
        m.finish(&mut w, Some(first)).unwrap();
        assert_eq!(m.early, 1);
        let (bytes, _) = w.finish().unwrap();
        let got: Vec<(u64, u64, bool)> =
            crate::NvtReader::new(std::io::Cursor::new(bytes), "t.nvt")
                .unwrap()
                .map(|e| e.map(|e| (e.time_ns, e.pfn.0, e.op == Op::Write)))
                .collect::<Result<_, _>>()
                .unwrap();
        assert_eq!(
            got,
            [
                (0, 7, true),
                (0, 1, false),
                (40, 8, true),
                (50, 2, false),
                (60, 9, true),
                (100, 3, false)
            ]
        );
    }

    #[test]
    fn lost_from_stats() {
        let stats = "entries: 0\noverrun: 12\ncommit overrun: 1\nbytes: 0\noldest event ts:     0.000000\nnow ts:  1191.941504\ndropped events: 3\nread events: 0\n";
        assert_eq!(parse_lost(stats), 16);
    }

    #[test]
    fn mounts() {
        let m = "sysfs /sys sysfs rw 0 0\nnodev /sys/kernel/debug/tracing tracefs rw 0 0\nnodev /sys/kernel/tracing tracefs rw 0 0\n";
        assert_eq!(tracefs_mount(m), Some(PathBuf::from(TRACEFS)));
        let m = "nodev /mnt/my\\040trace tracefs rw 0 0\n";
        assert_eq!(tracefs_mount(m), Some(PathBuf::from("/mnt/my trace")));
        assert_eq!(tracefs_mount("sysfs /sys sysfs rw 0 0\n"), None);
    }

    #[test]
    fn restorable_values() {
        assert_eq!(restorable("buffer_size_kb", "7 (expanded: 1408)"), "1408");
        assert_eq!(restorable("buffer_size_kb", "65536"), "65536");
        assert_eq!(restorable("events/kmem/mm_page_free/enable", "1*"), "1");
        assert_eq!(restorable("tracing_on", "1"), "1");
        assert_eq!(
            restorable("events/block/block_rq_issue/filter", "none"),
            "0"
        );
        assert_eq!(restorable("trace_clock", "[local] global mono"), "local");
    }
}
