//! Importers for text traces: ftrace (`trace`, `trace_pipe`) and
//! `perf script` output of the `kmem:mm_page_alloc`, `kmem:mm_page_free`
//! and `kmem:mm_page_free_batched` tracepoints.
//!
//! Both print one event a line with the same shape, which is all this
//! parser relies on:
//!
//! ```text
//! ftrace:  COMM-PID [CPU] FLAGS TIMESTAMP: EVENT: FIELDS
//!          (FLAGS, the irqs-off/need-resched columns, only with irq-info)
//! perf:    COMM PID [CPU] TIMESTAMP: kmem:EVENT: FIELDS
//! ```
//!
//! COMM may contain spaces, so a line is cut at its CPU field, the first
//! ` [digits]`. The fields of our events, from their `print fmt`:
//!
//! ```text
//! mm_page_alloc:        page=%p pfn=0x%lx order=%d migratetype=%d gfp_flags=%s
//! mm_page_free:         page=%p pfn=0x%lx order=%d
//! mm_page_free_batched: page=%p pfn=0x%lx order=0
//! ```
//!
//! # Policies (each counted in [`SourceCounts`], never silent)
//!
//! - **Failed allocations** print `page=0000000000000000 pfn=0x0` (the
//!   kernel's pfn -1): counted, not yielded.
//! - **Batched frees are traced twice** by the kernel: `free_pages_prepare`
//!   fires `mm_page_free` for every folio, then `free_unref_folios` fires
//!   `mm_page_free_batched` for the same page (with `order=0` whatever the
//!   folio's order). A batched free whose pfn matches one of the last
//!   [`RECENT_FREES`] `mm_page_free`s on the same CPU is a duplicate: counted,
//!   not yielded. An unmatched one is yielded as an order-0 free.
//! - **Migratetypes**: the tracepoint prints the requested type,
//!   `gfp_migratetype(gfp)`, which is 0 unmovable, 1 movable or 2
//!   reclaimable. Older kernels printed the pageblock's type, which can
//!   also be 3 (`MIGRATE_HIGHATOMIC`, reserves for high-priority atomic,
//!   hence unmovable, kernel allocations: yielded as unmovable) or 4
//!   (`MIGRATE_CMA`, which only serves movable allocations: yielded as
//!   movable). Anything else (5 `MIGRATE_ISOLATE`, negative) is an error.
//! - **Timestamps** `secs.frac` (microseconds by default, up to nanosecond
//!   digits) or a bare integer (`trace_clock` counters, taken as ns) become
//!   `time_ns` relative to the first line of our events; an earlier
//!   timestamp (out-of-order CPU buffers) becomes 0 and is counted in
//!   `early_timestamps`. Every event stamped earlier than the event before
//!   it is counted in `time_reversals`, on the timestamps as printed: a
//!   time of 0 cannot show that it went back from another 0.
//! - **Lost events**: `CPU:N [LOST n EVENTS]` lines are added to
//!   `lost_events`, and so are the events the `trace` file's
//!   `# entries-in-buffer/entries-written: IN/WRITTEN` header line says
//!   the ring buffer overwrote before they were read (`WRITTEN - IN`).
//! - **Other events** are counted by name in `skipped`; `#` comment lines
//!   and blank lines are ignored. Any other line is an error.
//!
//! # Two scanners, one answer
//!
//! Each line goes first through a fast byte scanner (memchr to find the
//! CPU field, no UTF-8 decoding, no allocation), which answers only for
//! plain-ASCII lines of the usual shape whose fields all parse; every
//! other line (bytes beyond ASCII, `[LOST]` lines, anything malformed)
//! goes to the straightforward `str` reference scanner, which is the one
//! source of every line error. A property test holds the two to the same
//! answers; [`TextReader::reference_scanner`] runs the reference alone.

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use nvmos_frames::{MigrateType, Order, Pfn, MAX_ORDER};

use crate::event::{Event, Op};
use crate::source::{EventSource, Format, SourceCounts, TraceHeader};
use crate::{TraceError, MAX_CPUS, MAX_PFN};

/// How many recent `mm_page_free` pfns per CPU a `mm_page_free_batched`
/// is matched against. The kernel frees a batch of at most 31 folios
/// (`PAGEVEC_SIZE`) between the two tracepoints; the margin covers frees
/// from interrupts in between.
pub const RECENT_FREES: usize = 128;

/// A reader of ftrace or `perf script` text, yielding [`Event`]s.
pub struct TextReader<R> {
    input: R,
    path: PathBuf,
    format: Format,
    /// A line that does not lie whole in the input's buffer, copied.
    buf: Vec<u8>,
    state: LineState,
    done: bool,
}

/// What the reader knows between lines: apart from the input, so a line
/// is parsed where it lies in the input's buffer.
struct LineState {
    line_no: u64,
    first_ts: Option<u64>,
    /// The timestamp of the last event yielded, as printed.
    last_ts: Option<u64>,
    counts: SourceCounts,
    /// Per CPU, the pfns of the last `RECENT_FREES` `mm_page_free`s, newest
    /// at the back.
    recent_frees: Vec<VecDeque<u64>>,
    /// Scan every line with the reference scanner only.
    reference: bool,
}

impl<R: BufRead> TextReader<R> {
    /// A reader of `input`; `path` names it in errors, `format` is
    /// [`Format::Ftrace`] or [`Format::Perf`] (both parse the same way; the
    /// format is reported by [`EventSource::format`]).
    pub fn new(input: R, path: impl AsRef<Path>, format: Format) -> TextReader<R> {
        TextReader {
            input,
            path: path.as_ref().to_owned(),
            format,
            buf: Vec::with_capacity(256),
            state: LineState {
                line_no: 0,
                first_ts: None,
                last_ts: None,
                counts: SourceCounts::default(),
                recent_frees: Vec::new(),
                reference: false,
            },
            done: false,
        }
    }

    /// This reader with the fast line scanner turned off: every line goes
    /// through the straightforward `str`-based reference scanner the fast
    /// one is checked against (same events, counts and errors, only
    /// slower). For benchmarks and tests.
    pub fn reference_scanner(mut self) -> TextReader<R> {
        self.state.reference = true;
        self
    }

    /// The counts so far, as a mutable reference (the recorder adds the
    /// ring buffer's lost events).
    pub fn counts_mut(&mut self) -> &mut SourceCounts {
        &mut self.state.counts
    }

    /// The input, to read what is left of it.
    pub fn into_inner(self) -> R {
        self.input
    }

    /// The absolute timestamp (ns, in the trace's clock) that event times
    /// are relative to: the first event's; `None` before it.
    pub fn first_timestamp_ns(&self) -> Option<u64> {
        self.state.first_ts
    }

    /// The line number of the last line read.
    pub fn line(&self) -> u64 {
        self.state.line_no
    }

    fn error(&self, message: String) -> TraceError {
        TraceError::Parse {
            path: self.path.clone(),
            line: self.state.line_no,
            message,
        }
    }
}

impl LineState {
    /// One line: the fast scanner where it can decide, the reference one
    /// (which the fast one agrees with) for everything else, errors
    /// included.
    fn parse_bytes(&mut self, line: &[u8]) -> Result<Option<Event>, String> {
        if self.reference {
            return self.parse_reference(line);
        }
        match scan_fast(line) {
            Some(scanned) => self.apply(scanned),
            None => self.parse_reference(line),
        }
    }

    fn parse_reference(&mut self, line: &[u8]) -> Result<Option<Event>, String> {
        match std::str::from_utf8(line) {
            Ok(line) => self.apply(scan_reference(line)?),
            Err(_) => self.apply(scan_reference(&String::from_utf8_lossy(line))?),
        }
    }

    /// The reader's policies on one scanned line.
    fn apply(&mut self, line: Scanned<'_>) -> Result<Option<Event>, String> {
        let (event, name, kind, cpu, ts_ns, fields) = match line {
            Scanned::Nothing => return Ok(None),
            Scanned::Lost(lost) => {
                self.counts.lost_events += lost;
                return Ok(None);
            }
            Scanned::Other(event) => {
                // Counting by name allocates only for the first line of each.
                if let Some(n) = self.counts.skipped.get_mut(event) {
                    *n += 1;
                } else {
                    self.counts.skipped.insert(event.to_owned(), 1);
                }
                return Ok(None);
            }
            Scanned::Ours {
                event,
                kind,
                cpu,
                ts_ns,
                fields,
            } => {
                let name = event.strip_prefix("kmem:").unwrap_or(event);
                (event, name, kind, cpu, ts_ns, fields)
            }
        };
        let _ = event;
        if cpu >= MAX_CPUS {
            return Err(format!(
                "cpu {} is out of range (at most {})",
                cpu,
                MAX_CPUS - 1
            ));
        }
        let first = *self.first_ts.get_or_insert(ts_ns);
        let time_ns = match ts_ns.checked_sub(first) {
            Some(t) => t,
            None => {
                self.counts.early_timestamps += 1;
                0
            }
        };

        let pfn = fields.pfn;
        let op = match kind {
            Kind::Alloc => {
                let failed = pfn == u64::MAX || (pfn == 0 && fields.page_is_null());
                let mt = fields
                    .migratetype
                    .ok_or_else(|| format!("{name} without migratetype="))?;
                if failed {
                    self.counts.failed_allocs += 1;
                    return Ok(None);
                }
                Op::Alloc(self.migratetype(mt)?)
            }
            Kind::Free | Kind::Batched => Op::Free,
        };
        let order_num = fields.order;
        if order_num > u64::from(MAX_ORDER) {
            return Err(format!(
                "{name} of order {order_num}: orders go up to {MAX_ORDER}"
            ));
        }
        let order = Order::new(order_num as u8).expect("checked against MAX_ORDER");
        if pfn >= MAX_PFN || pfn + order.frames() > MAX_PFN {
            return Err(format!(
                "{name} of pfn {pfn:#x} order {order_num}: beyond the 52-bit frame space"
            ));
        }
        if !Pfn(pfn).is_aligned(order) {
            return Err(format!(
                "{name} of pfn {pfn:#x} order {order_num}: a block of order {order_num} must start at a multiple of {} frames",
                order.frames()
            ));
        }
        let cpu_index = cpu as usize;
        match kind {
            Kind::Free => {
                if self.recent_frees.len() <= cpu_index {
                    self.recent_frees.resize_with(cpu_index + 1, VecDeque::new);
                }
                let recent = &mut self.recent_frees[cpu_index];
                if recent.len() == RECENT_FREES {
                    recent.pop_front();
                }
                recent.push_back(pfn);
            }
            Kind::Batched => {
                let recent = self.recent_frees.get_mut(cpu_index);
                let hit = recent
                    .as_ref()
                    .and_then(|r| r.iter().rposition(|&p| p == pfn));
                if let (Some(recent), Some(i)) = (recent, hit) {
                    recent.remove(i);
                    self.counts.batched_duplicates += 1;
                    return Ok(None);
                }
                self.counts.batched_unmatched += 1;
            }
            Kind::Alloc => {}
        }
        // Counted on the timestamps as printed: the yielded times cannot
        // show all of these (see the module documentation).
        if self.last_ts.is_some_and(|last| ts_ns < last) {
            self.counts.time_reversals += 1;
        }
        self.last_ts = Some(ts_ns);
        Ok(Some(Event {
            time_ns,
            cpu,
            op,
            pfn: Pfn(pfn),
            order,
        }))
    }

    fn migratetype(&mut self, mt: i64) -> Result<MigrateType, String> {
        let kind = match mt {
            0 => return Ok(MigrateType::Unmovable),
            1 => return Ok(MigrateType::Movable),
            2 => return Ok(MigrateType::Reclaimable),
            3 => MigrateType::Unmovable,
            4 => MigrateType::Movable,
            _ => {
                return Err(format!(
                "migratetype {mt} is impossible for an allocation (0 unmovable, 1 movable, 2 reclaimable; 3 highatomic, 4 cma)"
            ))
            }
        };
        *self
            .counts
            .remapped_migratetypes
            .entry(mt as i32)
            .or_default() += 1;
        Ok(kind)
    }
}

impl<R: BufRead> Iterator for TextReader<R> {
    type Item = Result<Event, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            // A line that lies whole in the input's buffer is parsed there;
            // one across the buffer's end (or the last, without a newline)
            // is copied first.
            let in_place = match self.input.fill_buf() {
                Ok(avail) => memchr::memchr(b'\n', avail).map(|i| {
                    self.state.line_no += 1;
                    (i + 1, self.state.parse_bytes(&avail[..=i]))
                }),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.done = true;
                    return Some(Err(TraceError::io(&self.path, e)));
                }
            };
            let parsed = match in_place {
                Some((len, parsed)) => {
                    self.input.consume(len);
                    parsed
                }
                None => {
                    self.buf.clear();
                    match self.input.read_until(b'\n', &mut self.buf) {
                        Ok(0) => {
                            self.done = true;
                            return None;
                        }
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            self.done = true;
                            return Some(Err(TraceError::io(&self.path, e)));
                        }
                    }
                    self.state.line_no += 1;
                    self.state.parse_bytes(&self.buf)
                }
            };
            match parsed {
                Ok(Some(event)) => return Some(Ok(event)),
                Ok(None) => {}
                Err(message) => {
                    self.done = true;
                    return Some(Err(self.error(message)));
                }
            }
        }
    }
}

impl<R: BufRead> EventSource for TextReader<R> {
    fn format(&self) -> Format {
        self.format
    }

    fn header(&self) -> Option<&TraceHeader> {
        None
    }

    fn counts(&self) -> SourceCounts {
        self.state.counts.clone()
    }

    fn line(&self) -> Option<u64> {
        Some(self.state.line_no)
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    Alloc,
    Free,
    Batched,
}

/// What one line says, before the reader's policies (the same from the
/// fast and the reference scanner).
#[derive(Debug, PartialEq, Eq)]
enum Scanned<'a> {
    /// Blank, or a comment.
    Nothing,
    /// `CPU:N [LOST n EVENTS]`, or the ring buffer's overwritten entries
    /// from `# entries-in-buffer/entries-written:`: that many events lost.
    Lost(u64),
    /// An event line of another event, by its name as printed.
    Other(&'a str),
    /// One of our events.
    Ours {
        /// As printed: `mm_page_alloc` or `kmem:mm_page_alloc`.
        event: &'a str,
        kind: Kind,
        cpu: u32,
        ts_ns: u64,
        fields: Fields<'a>,
    },
}

/// The common part of an event line.
struct LineHead<'a> {
    cpu: u32,
    ts_ns: u64,
    /// The event name as printed: `mm_page_alloc` (ftrace) or
    /// `kmem:mm_page_alloc` (perf).
    event: &'a str,
    fields: &'a str,
}

/// The event name of an event line, as printed, or `None` when the line is
/// not one.
pub(crate) fn event_token(line: &str) -> Option<&str> {
    split_line(line).ok().map(|h| h.event)
}

/// The `trace` file's header line with the ring buffer's entry counts:
/// `# entries-in-buffer/entries-written: 8604/99999   #P:2`. The kernel
/// prints the entries still in the buffer and all entries written; the
/// difference was overwritten before anyone read it.
const ENTRIES: &str = "entries-in-buffer/entries-written:";

/// The entries lost from what follows [`ENTRIES`]: `IN/WRITTEN ...`, or
/// `None` when it does not read (or says more are in the buffer than
/// were written).
fn entries_lost(counts: &str) -> Option<u64> {
    let (in_buffer, written) = counts.split_ascii_whitespace().next()?.split_once('/')?;
    let (in_buffer, written) = (in_buffer.parse::<u64>().ok()?, written.parse::<u64>().ok()?);
    written.checked_sub(in_buffer)
}

/// The reference scanner: straightforward `str` handling of any line
/// (lossily decoded when it is not UTF-8). Every error a text trace can
/// raise about a line's shape comes from here.
fn scan_reference(line: &str) -> Result<Scanned<'_>, String> {
    let line = line.trim_end_matches(['\n', '\r']);
    let trimmed = line.trim_start();
    if trimmed.starts_with('#') {
        if let Some((_, counts)) = trimmed.split_once(ENTRIES) {
            return entries_lost(counts).map(Scanned::Lost).ok_or_else(|| {
                format!("cannot read `{ENTRIES} IN/WRITTEN` (entries written at least as many as in the buffer) in {trimmed:?}")
            });
        }
        return Ok(Scanned::Nothing);
    }
    if trimmed.is_empty() {
        return Ok(Scanned::Nothing);
    }
    if trimmed.starts_with("CPU:") && trimmed.contains("[LOST ") {
        let lost = trimmed
            .split("[LOST ")
            .nth(1)
            .and_then(|s| s.split_ascii_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| format!("cannot read the count of lost events in {trimmed:?}"))?;
        return Ok(Scanned::Lost(lost));
    }
    let head = split_line(trimmed)?;
    let name = head.event.strip_prefix("kmem:").unwrap_or(head.event);
    let Some(kind) = kind_of(name) else {
        return Ok(Scanned::Other(head.event));
    };
    Ok(Scanned::Ours {
        event: head.event,
        kind,
        cpu: head.cpu,
        ts_ns: head.ts_ns,
        fields: Fields::parse(head.fields, name)?,
    })
}

#[inline]
fn kind_of(name: &str) -> Option<Kind> {
    match name {
        "mm_page_alloc" => Some(Kind::Alloc),
        "mm_page_free" => Some(Kind::Free),
        "mm_page_free_batched" => Some(Kind::Batched),
        _ => None,
    }
}

/// Cuts an event line into CPU, timestamp, event name and fields.
fn split_line(line: &str) -> Result<LineHead<'_>, String> {
    let (cpu, rest) = find_cpu(line).ok_or("no [CPU] field: not an ftrace or perf event line")?;
    let (first, rest) = next_token(rest);
    let (ts_token, rest) = match parse_ts_token(first) {
        Some(_) => (first, rest),
        // The irqs-off/need-resched/... flags column stands before the time.
        None => next_token(rest),
    };
    let ts_ns = parse_ts_token(ts_token)
        .ok_or_else(|| format!("no timestamp after the CPU field (found {ts_token:?})"))?;
    let (event, fields) = next_token(rest);
    let event = event
        .strip_suffix(':')
        .filter(|e| !e.is_empty())
        .ok_or_else(|| format!("no event name after the timestamp (found {event:?})"))?;
    Ok(LineHead {
        cpu,
        ts_ns,
        event,
        fields,
    })
}

// The fast scanner. It decides only lines it is sure of: pure ASCII
// without vertical tabs (so ASCII whitespace is all the whitespace there
// is, as the reference's `trim_start` sees it), blank, comment or event
// lines of the usual shape whose fields parse. Anything else — `[LOST]`
// lines, bytes beyond ASCII, a malformed field, a missing timestamp —
// returns `None` and goes to the reference scanner, which produces the
// error. So the two agree by construction wherever the fast one answers
// (a property test holds them to it), and errors have one source.

#[inline]
fn is_space(b: u8) -> bool {
    // `u8::is_ascii_whitespace`: space, \t, \n, \x0c, \r.
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0c' | b'\r')
}

/// Whether `line` is pure ASCII without a vertical tab, eight bytes at a
/// time.
#[inline]
fn plain_ascii(line: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const ONES: u64 = 0x0101_0101_0101_0101;
    const VT: u64 = 0x0b0b_0b0b_0b0b_0b0b;
    let mut chunks = line.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        let x = w ^ VT;
        // A zero byte of `x` (a vertical tab in `w`) or a high bit in `w`.
        if (w | (x.wrapping_sub(ONES) & !x)) & HIGH != 0 {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| b < 0x80 && b != 0x0b)
}

/// The next token of `s` (after any whitespace) and the rest after it.
/// `s` is ASCII (the fast scanner checked its line).
#[inline(always)]
fn next_token_bytes(s: &[u8]) -> (&[u8], &[u8]) {
    let start = s.iter().position(|&b| !is_space(b)).unwrap_or(s.len());
    let s = &s[start..];
    s.split_at(token_end(s))
}

/// Where the first whitespace byte of ASCII `s` is (`s.len()` if none),
/// eight bytes at a time: tokens run to 40 bytes (`gfp_flags=`), and a
/// byte loop spent a third of the fast scanner's time here.
#[inline(always)]
fn token_end(s: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while let Some(&word) = s[i..].first_chunk::<8>() {
        let w = u64::from_le_bytes(word);
        // The high bit of each byte below 0x21 (every whitespace byte
        // is one), exact for ASCII bytes up to the first one flagged:
        // only that one is read.
        let below = w.wrapping_sub(ONES * 0x21) & !w & HIGH;
        if below != 0 {
            let at = i + below.trailing_zeros() as usize / 8;
            if is_space(s[at]) {
                return at;
            }
            // Another control byte, part of the token (rare): the bytes
            // above it may be flagged by the borrow, so go on byte by byte.
            return at + 1 + bytes_to_space(&s[at + 1..]);
        }
        i += 8;
    }
    i + bytes_to_space(&s[i..])
}

/// Bytes before the first whitespace byte of `s` (`s.len()` if none).
#[inline]
fn bytes_to_space(s: &[u8]) -> usize {
    s.iter().position(|&b| is_space(b)).unwrap_or(s.len())
}

/// [`find_cpu`] on bytes; `None` also where the reference would give up.
#[inline]
fn find_cpu_bytes(line: &[u8]) -> Option<(u32, &[u8])> {
    for i in memchr::memchr_iter(b'[', line) {
        if i > 0 && !is_space(line[i - 1]) {
            continue;
        }
        let digits = line[i + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = i + 1 + digits;
        if digits == 0 || line.get(end) != Some(&b']') {
            continue;
        }
        if !line.get(end + 1).is_none_or(|&b| is_space(b)) {
            continue;
        }
        let cpu = digits_value(&line[i + 1..end])?;
        return Some((u32::try_from(cpu).ok()?, &line[end + 1..]));
    }
    None
}

/// A run of ASCII digits as a number; `None` when empty, not all digits,
/// or beyond `u64`.
#[inline]
fn digits_value(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    let mut v = 0u64;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// [`parse_ts_token`] on bytes.
#[inline]
fn ts_bytes(token: &[u8]) -> Option<u64> {
    let ts = token.strip_suffix(b":")?;
    let (secs, frac) = match ts.iter().position(|&b| b == b'.') {
        Some(i) => (&ts[..i], Some(&ts[i + 1..])),
        None => (ts, None),
    };
    let secs = digits_value(secs)?;
    match frac {
        None => Some(secs),
        Some(f) => {
            if f.len() > 9 {
                return None;
            }
            let frac = digits_value(f)?;
            let scale = 10u64.pow(9 - f.len() as u32);
            secs.checked_mul(1_000_000_000)?.checked_add(frac * scale)
        }
    }
}

/// ASCII bytes as a `str` (the caller has checked they are ASCII).
#[inline]
fn ascii(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok()
}

/// [`Fields::parse`] on bytes, `None` on anything it would report.
#[inline]
fn fields_bytes(mut text: &[u8]) -> Option<Fields<'_>> {
    let mut page = None;
    let mut pfn = None;
    let mut order = None;
    let mut migratetype = None;
    loop {
        let (field, rest) = next_token_bytes(text);
        if field.is_empty() {
            break;
        }
        text = rest;
        // A key is what precedes a field's first `=`, and none of ours
        // holds one, so `key=` as a prefix is the reference's
        // `split_once('=')` match. Other fields (`gfp_flags=`, words
        // without `=`) are skipped unread.
        if let Some(value) = field.strip_prefix(b"pfn=") {
            let hex = value.strip_prefix(b"0x")?;
            pfn = Some(hex_value(hex)?);
        } else if let Some(value) = field.strip_prefix(b"order=") {
            order = Some(digits_value(value)?);
        } else if let Some(value) = field.strip_prefix(b"page=") {
            page = Some(value);
        } else if let Some(value) = field.strip_prefix(b"migratetype=") {
            migratetype = Some(match value.strip_prefix(b"-") {
                Some(digits) => 0i64.checked_sub_unsigned(digits_value(digits)?)?,
                None => i64::try_from(digits_value(value)?).ok()?,
            })
        }
    }
    Some(Fields {
        page,
        pfn: pfn?,
        order: order?,
        migratetype,
    })
}

/// Hex digits as a number; `None` when empty, not all hex, or beyond
/// `u64`.
#[inline]
fn hex_value(hex: &[u8]) -> Option<u64> {
    if hex.is_empty() {
        return None;
    }
    let mut v = 0u64;
    for &b in hex {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        if v >> 60 != 0 {
            return None;
        }
        v = v << 4 | u64::from(d);
    }
    Some(v)
}

/// The fast scanner: the line's meaning where it is sure of it, `None`
/// for the reference scanner to decide.
#[inline]
fn scan_fast(line: &[u8]) -> Option<Scanned<'_>> {
    if !plain_ascii(line) {
        return None;
    }
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let start = line[..end]
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(end);
    let trimmed = &line[start..end];
    match trimmed.first() {
        // The ring buffer's entry counts are read by the reference scanner.
        Some(b'#') if memchr::memmem::find(trimmed, ENTRIES.as_bytes()).is_some() => return None,
        None | Some(b'#') => return Some(Scanned::Nothing),
        _ if trimmed.starts_with(b"CPU:") => return None,
        _ => {}
    }
    let (cpu, rest) = find_cpu_bytes(trimmed)?;
    let (first, rest) = next_token_bytes(rest);
    let (ts_ns, rest) = match ts_bytes(first) {
        Some(ts) => (ts, rest),
        None => {
            let (token, rest) = next_token_bytes(rest);
            (ts_bytes(token)?, rest)
        }
    };
    let (event, fields) = next_token_bytes(rest);
    let event = event.strip_suffix(b":").filter(|e| !e.is_empty())?;
    let event = ascii(event)?;
    let name = event.strip_prefix("kmem:").unwrap_or(event);
    let Some(kind) = kind_of(name) else {
        return Some(Scanned::Other(event));
    };
    Some(Scanned::Ours {
        event,
        kind,
        cpu,
        ts_ns,
        fields: fields_bytes(fields)?,
    })
}

/// The first ` [digits]` of the line: the CPU number and what follows.
fn find_cpu(line: &str) -> Option<(u32, &str)> {
    let bytes = line.as_bytes();
    let mut from = 0;
    while let Some(i) = line[from..].find('[').map(|i| i + from) {
        from = i + 1;
        if i > 0 && !bytes[i - 1].is_ascii_whitespace() {
            continue;
        }
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = i + 1 + digits;
        if digits == 0 || bytes.get(end) != Some(&b']') {
            continue;
        }
        if !bytes.get(end + 1).is_none_or(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let cpu = line[i + 1..end].parse().ok()?;
        return Some((cpu, &line[end + 1..]));
    }
    None
}

/// The next whitespace-separated token and the rest after it.
fn next_token(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(|c: char| c.is_ascii_whitespace()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

/// `secs.frac:` or `integer:` as nanoseconds.
fn parse_ts_token(token: &str) -> Option<u64> {
    let ts = token.strip_suffix(':')?;
    let (secs, frac) = match ts.split_once('.') {
        Some((s, f)) => (s, Some(f)),
        None => (ts, None),
    };
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    match frac {
        None => Some(secs),
        Some(f) => {
            if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let scale = 10u64.pow(9 - f.len() as u32);
            let frac: u64 = f.parse().ok()?;
            secs.checked_mul(1_000_000_000)?.checked_add(frac * scale)
        }
    }
}

/// The fields of one of our events.
#[derive(Debug, PartialEq, Eq)]
struct Fields<'a> {
    /// As printed (ASCII in the fast scanner's lines; only compared).
    page: Option<&'a [u8]>,
    pfn: u64,
    order: u64,
    migratetype: Option<i64>,
}

impl<'a> Fields<'a> {
    fn parse(text: &'a str, name: &str) -> Result<Fields<'a>, String> {
        let mut page = None;
        let mut pfn = None;
        let mut order = None;
        let mut migratetype = None;
        for field in text.split_ascii_whitespace() {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            match key {
                "page" => page = Some(value.as_bytes()),
                "pfn" => {
                    let hex = value
                        .strip_prefix("0x")
                        .ok_or_else(|| format!("pfn={value} is not 0x-prefixed hex"))?;
                    pfn = Some(
                        u64::from_str_radix(hex, 16)
                            .map_err(|_| format!("pfn={value} is not a hex number"))?,
                    );
                }
                "order" => {
                    order = Some(
                        value
                            .parse::<u64>()
                            .map_err(|_| format!("order={value} is not an order"))?,
                    )
                }
                "migratetype" => {
                    migratetype = Some(
                        value
                            .parse::<i64>()
                            .map_err(|_| format!("migratetype={value} is not a number"))?,
                    )
                }
                _ => {}
            }
        }
        Ok(Fields {
            page,
            pfn: pfn.ok_or_else(|| format!("{name} without pfn="))?,
            order: order.ok_or_else(|| format!("{name} without order="))?,
            migratetype,
        })
    }

    /// Whether `page=` printed a NULL pointer (or is absent, as when a
    /// tool drops it).
    fn page_is_null(&self) -> bool {
        match self.page {
            None => true,
            Some(p) => {
                let p = p.strip_prefix(b"0x").unwrap_or(p);
                matches!(p, b"(nil)" | b"(null)") || (!p.is_empty() && p.iter().all(|&b| b == b'0'))
            }
        }
    }
}

/// The fast scanner against the reference one: wherever the fast one
/// answers, the reference one gives the same answer, and a reader using
/// both gives the same events, counts and errors as the reference alone.
#[cfg(test)]
mod agreement {
    use super::*;
    use proptest::prelude::*;

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            // Well-formed parts, as ftrace and perf print them.
            Just(" ".to_string()),
            Just("   ".to_string()),
            Just("\t".to_string()),
            Just("bash-22527".to_string()),
            Just("lto cgu.07 22699".to_string()),
            "\\[[0-9]{1,4}\\]",
            Just("[000]".to_string()),
            Just(".....".to_string()),
            Just("d..3.".to_string()),
            "[0-9]{1,6}\\.[0-9]{1,10}:",
            "[0-9]{1,21}:",
            Just("mm_page_alloc:".to_string()),
            Just("mm_page_free:".to_string()),
            Just("mm_page_free_batched:".to_string()),
            Just("kmem:mm_page_alloc:".to_string()),
            Just("sched_switch:".to_string()),
            "page=(0x)?[0-9a-f]{0,16}",
            Just("page=(nil)".to_string()),
            "pfn=(0x)?[0-9a-fA-F+]{0,18}",
            "order=[+-]?[0-9]{0,3}",
            "migratetype=[+-]?[0-9]{0,20}",
            Just("gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_ZERO".to_string()),
            Just("#".to_string()),
            Just("CPU:1 [LOST 42 EVENTS]".to_string()),
            Just("[LOST ".to_string()),
            // Malformed and unusual bytes.
            Just("\u{b}".to_string()),
            "[\\x00-\\x1f]{1,3}",
            Just("\u{a0}".to_string()),
            Just("é".to_string()),
            Just("\r".to_string()),
            Just("=".to_string()),
            Just(":".to_string()),
            Just(".".to_string()),
            "\\PC{0,6}",
            "[ -~]{0,6}",
        ]
    }

    /// A line: mostly the shape of an event line, its parts sometimes
    /// swapped, dropped or replaced by anything.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        let shaped = (
            prop_oneof![
                3 => Just(Vec::new()),
                1 => prop::collection::vec(piece(), 0..3),
            ],
            prop::sample::select(vec![" bash-1 ", "  a b-2 ", "x", " "]),
            prop::sample::select(vec!["[000]", "[7]", "[003]", "[99999999999]", "[x]", ""]),
            prop::sample::select(vec![" ..... ", " ", "  d..3.  "]),
            prop::sample::select(vec![
                "1194.629002:",
                "12345:",
                "1.2.3:",
                "x:",
                "1.0123456789:",
            ]),
            prop::sample::select(vec![
                " mm_page_alloc: ",
                " mm_page_free: ",
                " mm_page_free_batched: ",
                " kmem:mm_page_alloc: ",
                " other: ",
                " :",
            ]),
            prop_oneof![
                // Well-formed fields, the usual case.
                3 => (
                    prop::sample::select(vec!["page=0000000000000000", "page=(nil)", "page=ffffea0001", ""]),
                    prop_oneof![0u64..0x10_0000, any::<u64>()],
                    0u64..13,
                    -1i64..6,
                    prop::collection::vec(piece(), 0..2),
                )
                    .prop_map(|(page, pfn, order, mt, extra)| vec![
                        page.to_string(),
                        format!("pfn={pfn:#x}"),
                        format!("order={order}"),
                        format!("migratetype={mt}"),
                        "gfp_flags=GFP_KERNEL".to_string(),
                        extra.concat(),
                    ]),
                1 => prop::collection::vec(piece(), 0..7),
            ],
            prop::sample::select(vec!["", "\n", "\r\n", " \n"]),
        )
            .prop_map(|(pre, comm, cpu, flags, ts, event, fields, end)| {
                let mut s = pre.concat();
                s.push_str(comm);
                s.push_str(cpu);
                s.push_str(flags);
                s.push_str(ts);
                s.push_str(event);
                s.push_str(&fields.join(" "));
                s.push_str(end);
                s.into_bytes()
            });
        prop_oneof![
            6 => shaped,
            2 => prop::collection::vec(piece(), 0..12).prop_map(|p| p.concat().into_bytes()),
            1 => prop::collection::vec(any::<u8>(), 0..64),
        ]
    }

    fn read(text: &[u8], reference: bool) -> (Vec<String>, SourceCounts) {
        read_buffered(std::io::BufReader::new(text), reference)
    }

    fn read_buffered<R: BufRead>(input: R, reference: bool) -> (Vec<String>, SourceCounts) {
        let mut r = TextReader::new(input, "t.txt", Format::Ftrace);
        if reference {
            r = r.reference_scanner();
        }
        let events = r
            .by_ref()
            .map(|e| match e {
                Ok(e) => format!("{e:?}"),
                Err(e) => format!("error: {e}"),
            })
            .collect();
        (events, r.counts())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn token_end_is_the_first_whitespace(s in prop::collection::vec(0u8..0x80, 0..40)) {
            prop_assert_eq!(token_end(&s), bytes_to_space(&s));
        }

        #[test]
        fn fast_answers_are_the_references(line in line()) {
            if let Some(fast) = scan_fast(&line) {
                let text = String::from_utf8(line.clone()).expect("the fast scanner takes ASCII only");
                prop_assert_eq!(Ok(fast), scan_reference(&text));
            }
        }

        #[test]
        fn readers_agree(lines in prop::collection::vec(line(), 1..12)) {
            let mut text = Vec::new();
            for l in &lines {
                text.extend_from_slice(l);
                if !l.ends_with(b"\n") {
                    text.push(b'\n');
                }
            }
            let fast = read(&text, false);
            prop_assert_eq!(&fast, &read(&text, true));
            // Lines across the end of a small buffer are copied, not
            // parsed in place: the same answers.
            let small = std::io::BufReader::with_capacity(17, &text[..]);
            prop_assert_eq!(&fast, &read_buffered(small, false));
        }
    }

    #[test]
    fn the_fast_scanner_takes_the_usual_lines() {
        for line in [
            "            bash-22527   [000] .....  1194.629002: mm_page_alloc: page=00000000990532c6 pfn=0x1f8a3a order=1 migratetype=2 gfp_flags=__GFP_RECLAIMABLE\n",
            "  kworker/u4:1-99     [001]   1194.629010: mm_page_free: page=00000000990532c6 pfn=0x1f8a3a order=1\n",
            "      lto cgu.07 22699 [000]  1213.904670:        kmem:mm_page_alloc: page=0x1ac275 pfn=0x1ac275 order=0 migratetype=1 gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_ZERO|__GFP_COMP\n",
            " a-1 [000] ..... 1.0: sched_switch: prev=a\n",
            "# tracer: nop\n",
        ] {
            let fast = scan_fast(line.as_bytes());
            assert!(fast.is_some(), "{line}");
            assert_eq!(fast, scan_reference(line).ok(), "{line}");
        }
        // Lost events, bytes beyond ASCII and malformed fields go to the
        // reference scanner.
        for line in [
            "CPU:1 [LOST 42 EVENTS]\n",
            "# entries-in-buffer/entries-written: 8604/99999   #P:2\n",
            " é-1 [000] ..... 1.0: mm_page_free: page=0 pfn=0x10 order=0\n",
            " a-1 [000] ..... 1.0: mm_page_free: page=0 pfn=10 order=0\n",
        ] {
            assert_eq!(scan_fast(line.as_bytes()), None, "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Vec<Result<Event, TraceError>>, SourceCounts) {
        let mut r = TextReader::new(text.as_bytes(), "t.txt", Format::Ftrace);
        let events: Vec<_> = r.by_ref().collect();
        (events, r.counts())
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_ts_token("1194.629002:"), Some(1_194_629_002_000));
        assert_eq!(parse_ts_token("1.000000001:"), Some(1_000_000_001));
        assert_eq!(parse_ts_token("12345:"), Some(12345));
        assert_eq!(parse_ts_token("1.2.3:"), None);
        assert_eq!(parse_ts_token("1194.629002"), None);
        assert_eq!(parse_ts_token("1.1234567890:"), None);
    }

    #[test]
    fn ftrace_with_and_without_flags() {
        let text = "\
            bash-22527   [000] .....  1194.629002: mm_page_alloc: page=00000000990532c6 pfn=0x1f8a3a order=1 migratetype=2 gfp_flags=__GFP_RECLAIMABLE
  kworker/u4:1-99     [001]   1194.629010: mm_page_free: page=00000000990532c6 pfn=0x1f8a3a order=1
";
        let (events, counts) = parse(text);
        let events: Vec<Event> = events.into_iter().map(Result::unwrap).collect();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].op, Op::Alloc(MigrateType::Reclaimable));
        assert_eq!(events[0].pfn, Pfn(0x1f8a3a));
        assert_eq!(events[0].order.get(), 1);
        assert_eq!(events[0].time_ns, 0);
        assert_eq!(events[1].op, Op::Free);
        assert_eq!(events[1].cpu, 1);
        assert_eq!(events[1].time_ns, 8_000);
        assert_eq!(counts, SourceCounts::default());
    }

    #[test]
    fn perf_line_with_space_in_comm() {
        let text = "      lto cgu.07 22699 [000]  1213.904670:        kmem:mm_page_alloc: page=0x1ac275 pfn=0x1ac275 order=0 migratetype=1 gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_ZERO|__GFP_COMP\n";
        let (events, _) = parse(text);
        let e = events[0].as_ref().unwrap();
        assert_eq!(e.pfn, Pfn(0x1ac275));
        assert_eq!(e.op, Op::Alloc(MigrateType::Movable));
    }

    #[test]
    fn batched_duplicates_are_dropped() {
        let text = "\
 cat-1 [000] ..... 1.000001: mm_page_free: page=00000000a60eb8ba pfn=0x202dc5 order=0
 cat-1 [000] ..... 1.000002: mm_page_free: page=0000000021969d16 pfn=0x20836b order=0
 cat-1 [000] ...2. 1.000003: mm_page_free_batched: page=00000000a60eb8ba pfn=0x202dc5 order=0
 cat-1 [001] ...2. 1.000003: mm_page_free_batched: page=0000000021969d16 pfn=0x20836b order=0
 cat-1 [000] ...2. 1.000004: mm_page_free_batched: page=0000000021969d16 pfn=0x20836b order=0
 cat-1 [000] ...2. 1.000005: mm_page_free_batched: page=0000000021969d16 pfn=0x20836b order=0
";
        let (events, counts) = parse(text);
        // Two frees; the batched one on CPU 1 has no match there, and the
        // last one's match was used up by the one before.
        assert_eq!(events.len(), 4);
        assert_eq!(counts.batched_duplicates, 2);
        assert_eq!(counts.batched_unmatched, 2);
    }

    #[test]
    fn failed_and_remapped_allocations() {
        let text = "\
 a-1 [000] ..... 1.0: mm_page_alloc: page=0000000000000000 pfn=0x0 order=2 migratetype=0 gfp_flags=GFP_NOWAIT
 a-1 [000] ..... 1.0: mm_page_alloc: page=(nil) pfn=0x0 order=2 migratetype=0 gfp_flags=GFP_NOWAIT
 a-1 [000] ..... 1.0: mm_page_alloc: page=00000000deadbeef pfn=0x10 order=2 migratetype=3 gfp_flags=GFP_ATOMIC
 a-1 [000] ..... 1.0: mm_page_alloc: page=00000000deadbeef pfn=0x20 order=2 migratetype=4 gfp_flags=GFP_ATOMIC
";
        let (events, counts) = parse(text);
        assert_eq!(events.len(), 2);
        assert_eq!(counts.failed_allocs, 2);
        assert_eq!(
            events[0].as_ref().unwrap().op,
            Op::Alloc(MigrateType::Unmovable)
        );
        assert_eq!(
            events[1].as_ref().unwrap().op,
            Op::Alloc(MigrateType::Movable)
        );
        assert_eq!(counts.remapped_migratetypes.get(&3), Some(&1));
        assert_eq!(counts.remapped_migratetypes.get(&4), Some(&1));
    }

    #[test]
    fn bad_lines_name_the_line() {
        for (bad, what) in [
            (
                " a-1 [000] ..... 1.0: mm_page_free: page=0 pfn=0x10 order=11\n",
                "order 11",
            ),
            (
                " a-1 [000] ..... 1.0: mm_page_free: page=0 pfn=0x11 order=1\n",
                "multiple of 2",
            ),
            (
                " a-1 [000] ..... 1.0: mm_page_free: page=0 pfn=10 order=1\n",
                "hex",
            ),
            (
                " a-1 [000] ..... 1.0: mm_page_free: page=0 order=1\n",
                "without pfn",
            ),
            (
                " a-1 [000] ..... 1.0: mm_page_alloc: page=1 pfn=0x10 order=1 migratetype=5\n",
                "migratetype 5",
            ),
            (
                " a-1 [000] ..... 1.0: mm_page_alloc: page=1 pfn=0x10 order=1\n",
                "without migratetype",
            ),
            (
                " a-1 [000] ..... 1.0: mm_page_free: page=1 pfn=0x10000000000000 order=0\n",
                "52-bit",
            ),
            ("garbage\n", "no [CPU]"),
            (
                " a-1 [000] ..... x: mm_page_free: page=1 pfn=0x10 order=0\n",
                "no timestamp",
            ),
        ] {
            let text = format!(" a-1 [000] ..... 1.0: sched_switch: prev=a\n{bad}");
            let (events, _) = parse(&text);
            let err = events.last().unwrap().as_ref().unwrap_err().to_string();
            assert!(err.starts_with("t.txt:2: "), "{err}");
            assert!(err.contains(what), "{err} should mention {what}");
        }
    }

    #[test]
    fn lost_and_skipped() {
        let text = "\
# tracer: nop
CPU:1 [LOST 42 EVENTS]
##### CPU 1 buffer started ####
 a-1 [000] d..3. 1.0: mm_page_alloc_zone_locked: page=1 pfn=0x10 order=0 migratetype=1 percpu_refill=1
 a-1 [000] d..3. 1.0: mm_page_alloc_zone_locked: page=1 pfn=0x10 order=0 migratetype=1 percpu_refill=1

 a-1 [000] ..... 1.0: sched_switch: prev=a
";
        let (events, counts) = parse(text);
        assert!(events.is_empty());
        assert_eq!(counts.lost_events, 42);
        assert_eq!(counts.skipped.get("mm_page_alloc_zone_locked"), Some(&2));
        assert_eq!(counts.skipped.get("sched_switch"), Some(&1));
    }
}
