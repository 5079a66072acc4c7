//! Swap block traces: the requests a swap device saw.
//!
//! One text line per event, zstd-compressed on disk (`.swt.zst`), with
//! `# key: value` header lines first:
//!
//! ```text
//! # nvmos swap trace 1
//! # command: sh -c ...
//! R 1200345 65536 32768 python3
//! W 1300999 1048576 131072 kswapd0
//! T 1400000 9960 100000 VMSCAN_THROTTLE_WRITEBACK
//! ```
//!
//! `R`/`W`: time (ns since the start), byte offset in the swap area,
//! size in bytes, the task that issued it. `T`: reclaim was throttled
//! (Linux's `mm_vmscan_throttled`, the successor of 2.6.32's congestion
//! wait): time, µs slept, µs timeout, reason. The model writes the same
//! format, so recorded and modelled traffic go through one analysis.
//!
//! `# lost_events: N` (written by the recorder) is how many events the
//! kernel lost while recording: their requests are missing, and every
//! output of the swap study counts them.
//!
//! # Damage
//!
//! A trace is written as one zstd frame with zstd's content checksum, and
//! read only when it is whole and undamaged: a frame that is cut short,
//! does not decode or fails its checksum is an error naming the file and
//! the frame's byte offset. A frame without a checksum is refused too (a
//! flipped bit in it would decode to other numbers without any error),
//! with how to re-encode it. Every line ends with a newline, so a plain
//! text trace cut inside its last record is refused as well; plain text
//! has no other check.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::device::Dir;
use crate::SwapError;

/// The first header line.
pub const MAGIC: &str = "# nvmos swap trace 1";

/// The largest swap area a trace without a `# swap_bytes:` header line may
/// address (64 GiB). A recorded trace names its swap size; offsets in one
/// that does not are held to this, so a corrupt offset cannot make a
/// device model allocate per-page counters for petabytes.
pub const MAX_SWAP_BYTES_UNHEADED: u64 = 64 << 30;

/// One request to the swap device.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwapRequest {
    /// When it was issued, ns since the start of the trace.
    pub time_ns: u64,
    /// Swap-in or swap-out.
    pub dir: Dir,
    /// Byte offset in the swap area.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
}

/// Reclaim throttled (congestion wait).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttle {
    /// When, ns since the start.
    pub time_ns: u64,
    /// How long it slept, µs.
    pub delayed_us: u64,
    /// Its timeout, µs.
    pub timeout_us: u64,
    /// Why (Linux's reason flags).
    pub reason: String,
}

/// A whole trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwapTrace {
    /// Header keys and values.
    pub header: BTreeMap<String, String>,
    /// Requests in time order.
    pub requests: Vec<SwapRequest>,
    /// Throttling events in time order.
    pub throttles: Vec<Throttle>,
    /// The issuing task of each request (same index), where recorded.
    pub tasks: Vec<String>,
    /// Phase marks: (time ns, name); a phase runs to the next mark.
    pub phases: Vec<(u64, String)>,
}

impl SwapTrace {
    /// The requests between the mark named `name` and the next mark.
    pub fn phase_requests(&self, name: &str) -> Option<&[SwapRequest]> {
        let i = self.phases.iter().position(|(_, n)| n == name)?;
        let from = self.phases[i].0;
        let to = self.phases.get(i + 1).map_or(u64::MAX, |p| p.0);
        let a = self.requests.partition_point(|r| r.time_ns < from);
        let b = self.requests.partition_point(|r| r.time_ns < to);
        Some(&self.requests[a..b])
    }
}

impl SwapTrace {
    /// Reads a trace, zstd-compressed or plain.
    ///
    /// A compressed trace must be whole and undamaged: every zstd frame
    /// complete and carrying a content checksum, which must match
    /// ([`SwapError::Damaged`], [`SwapError::NoChecksum`]). Plain text
    /// has no checksum; there only a last line cut short is noticed.
    pub fn read(path: &Path) -> Result<SwapTrace, SwapError> {
        // The compressed file is held whole (the parsed trace is several
        // times larger) so that its frames are checked for completeness
        // and a checksum before a line is parsed.
        let bytes = std::fs::read(path).map_err(|e| SwapError::io(path, e))?;
        if !(bytes.starts_with(&ZSTD_MAGIC) || skippable_frame(&bytes)) {
            return Self::parse(&bytes[..], path);
        }
        let mut frames = Frames {
            path,
            data: &bytes,
            frames: zstd_frames(&bytes, path)?.into_iter(),
            current: None,
            failed: None,
        };
        let parsed = Self::parse(BufReader::new(&mut frames), path);
        if let Some(damage) = frames.failed.take() {
            return Err(damage);
        }
        match parsed {
            Ok(trace) => Ok(trace),
            Err(e) => {
                // A line that does not parse may be damage that the
                // frame's checksum, checked only at the frame's end,
                // shows: then that is the error to report.
                if std::io::copy(&mut frames, &mut std::io::sink()).is_err() {
                    if let Some(damage) = frames.failed.take() {
                        return Err(damage);
                    }
                }
                Err(e)
            }
        }
    }

    /// Events the recording lost (`# lost_events:`, checked to be a whole
    /// number when the trace is parsed), 0 when the header does not say.
    /// Their requests are missing from the trace.
    pub fn lost_events(&self) -> u64 {
        self.header
            .get("lost_events")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// The swap size the trace was recorded with (`# swap_bytes:`), if
    /// it names one.
    pub fn swap_bytes(&self) -> Option<u64> {
        self.header.get("swap_bytes")?.parse().ok()
    }

    /// Parses the text form; `path` names the source in errors.
    ///
    /// Every request must lie inside the swap area: `offset + size` must
    /// not overflow and must not pass the recorded `# swap_bytes:` (or
    /// [`MAX_SWAP_BYTES_UNHEADED`] without one). An empty input (a 0-byte
    /// file) is an error, not a trace of nothing.
    pub fn parse(input: impl BufRead, path: &Path) -> Result<SwapTrace, SwapError> {
        let mut trace = SwapTrace::default();
        let mut last_time = 0u64;
        // Line of each request, to name it if a `swap_bytes` line after it
        // shows it out of range.
        let mut request_lines: Vec<u64> = Vec::new();
        let mut lines_read = 0u64;
        let mut input = input;
        let mut buf = String::new();
        loop {
            buf.clear();
            let line_no = lines_read + 1;
            let err = |message: String| SwapError::Parse {
                path: path.to_owned(),
                line: line_no,
                message,
            };
            match input.read_line(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(err(format!("unreadable: {e}"))),
            }
            lines_read += 1;
            if line_no == 1 && buf.trim() != MAGIC {
                return Err(err(format!("expected the header line `{MAGIC}`")));
            }
            // Every line written ends with a newline: a last line without
            // one is a record cut short (`W 2 8192 40` for `W 2 8192 4096`).
            let Some(line) = buf.strip_suffix('\n') else {
                return Err(err(
                    "truncated: the last line ends without a newline, so the file was cut short"
                        .into(),
                ));
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix('#') {
                if let Some((k, v)) = rest.split_once(':') {
                    let (k, v) = (k.trim(), v.trim());
                    // Every output of a study counts the lost events, so
                    // a value that is not a count is refused here.
                    if k == "lost_events" && v.parse::<u64>().is_err() {
                        return Err(err(format!(
                            "header `lost_events`: '{v}' is not a whole number"
                        )));
                    }
                    trace.header.insert(k.to_owned(), v.to_owned());
                }
                continue;
            }
            let mut f = line.split_whitespace();
            let kind = f.next().unwrap_or_default();
            let mut num = |name: &str| -> Result<u64, SwapError> {
                let text = f
                    .next()
                    .ok_or_else(|| err(format!("field `{name}` is missing")))?;
                text.parse::<u64>()
                    .map_err(|_| err(format!("field `{name}`: '{text}' is not a whole number")))
            };
            match kind {
                "R" | "W" => {
                    let time_ns = num("time_ns")?;
                    let offset = num("offset")?;
                    let size = num("size")?;
                    if size == 0 {
                        return Err(err("field `size`: a request of 0 bytes".into()));
                    }
                    let end = offset.checked_add(size).ok_or_else(|| {
                        err(format!(
                            "fields `offset` {offset} + `size` {size} overflow 64 bits"
                        ))
                    })?;
                    let (limit, what) = match trace.header.get("swap_bytes") {
                        Some(v) => (
                            v.parse::<u64>().map_err(|_| {
                                err(format!("header `swap_bytes`: '{v}' is not a whole number"))
                            })?,
                            "the recorded swap size (`# swap_bytes:`)",
                        ),
                        None => (
                            MAX_SWAP_BYTES_UNHEADED,
                            "64 GiB, the most a trace without a `# swap_bytes:` line may address",
                        ),
                    };
                    if end > limit {
                        return Err(err(format!(
                            "fields `offset` {offset} + `size` {size}: the request ends at byte {end}, beyond {what} of {limit} bytes"
                        )));
                    }
                    request_lines.push(line_no);
                    if time_ns < last_time {
                        return Err(err(format!(
                            "field `time_ns`: {time_ns} is before the previous event's {last_time}"
                        )));
                    }
                    last_time = time_ns;
                    let task = f.collect::<Vec<_>>().join(" ");
                    trace.requests.push(SwapRequest {
                        time_ns,
                        dir: if kind == "R" { Dir::Read } else { Dir::Write },
                        offset,
                        size,
                    });
                    trace.tasks.push(task);
                }
                "P" => {
                    let time_ns = num("time_ns")?;
                    let name = f.collect::<Vec<_>>().join(" ");
                    if name.is_empty() {
                        return Err(err("field `name` is missing".into()));
                    }
                    trace.phases.push((time_ns, name));
                }
                "T" => {
                    let time_ns = num("time_ns")?;
                    let delayed_us = num("delayed_us")?;
                    let timeout_us = num("timeout_us")?;
                    let reason = f.collect::<Vec<_>>().join(" ");
                    trace.throttles.push(Throttle {
                        time_ns,
                        delayed_us,
                        timeout_us,
                        reason,
                    });
                }
                other => return Err(err(format!("field `kind`: '{other}' is not R, W, T or P"))),
            }
        }
        if lines_read == 0 {
            return Err(SwapError::Parse {
                path: path.to_owned(),
                line: 1,
                message: format!("the file is empty: expected the header line `{MAGIC}`"),
            });
        }
        // A `swap_bytes` line after some requests: check those too.
        if let Some(v) = trace.header.get("swap_bytes") {
            let limit: u64 = v.parse().map_err(|_| SwapError::Parse {
                path: path.to_owned(),
                line: 0,
                message: format!("header `swap_bytes`: '{v}' is not a whole number"),
            })?;
            if let Some((r, &line)) = trace
                .requests
                .iter()
                .zip(&request_lines)
                .find(|(r, _)| r.offset + r.size > limit)
            {
                return Err(SwapError::Parse {
                    path: path.to_owned(),
                    line,
                    message: format!(
                        "fields `offset` {} + `size` {}: the request ends beyond the recorded swap size (`# swap_bytes:`) of {limit} bytes",
                        r.offset, r.size
                    ),
                });
            }
        }
        Ok(trace)
    }

    /// Writes the text form.
    pub fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "{MAGIC}")?;
        for (k, v) in &self.header {
            writeln!(out, "# {k}: {}", v.replace('\n', " "))?;
        }
        for (i, r) in self.requests.iter().enumerate() {
            let d = if r.dir == Dir::Read { 'R' } else { 'W' };
            let task = self.tasks.get(i).map(String::as_str).unwrap_or("");
            writeln!(out, "{d} {} {} {} {task}", r.time_ns, r.offset, r.size)?;
        }
        for (t, name) in &self.phases {
            writeln!(out, "P {t} {name}")?;
        }
        for t in &self.throttles {
            writeln!(
                out,
                "T {} {} {} {}",
                t.time_ns, t.delayed_us, t.timeout_us, t.reason
            )?;
        }
        Ok(())
    }

    /// Writes a zstd-compressed file, one frame with a content checksum:
    /// whole or not at all (a temporary beside `path`, renamed when
    /// complete).
    pub fn write(&self, path: &Path) -> Result<(), SwapError> {
        let out = nvmos_trace::Output::create(path, &[])?;
        let mut enc = zstd::Encoder::new(out, 19).map_err(|e| SwapError::io(path, e))?;
        // The content checksum is what lets a reader refuse a damaged
        // file instead of analysing different numbers.
        enc.include_checksum(true)
            .map_err(|e| SwapError::io(path, e))?;
        self.write_text(&mut enc)
            .map_err(|e| SwapError::io(path, e))?;
        enc.finish().map_err(|e| SwapError::io(path, e))?.commit()?;
        Ok(())
    }
}

/// The first bytes of a zstd frame (RFC 8878).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Whether `b` starts with a skippable frame's magic (0x184D2A50 to
/// 0x184D2A5F, little-endian): metadata a decoder passes over.
fn skippable_frame(b: &[u8]) -> bool {
    b.len() >= 4 && b[0] & 0xf0 == 0x50 && b[1..4] == [0x2a, 0x4d, 0x18]
}

/// The zstd frames of `bytes` as (offset, length), checked before any is
/// decoded: each is complete and has a content checksum; skippable frames
/// are passed over; anything else is damage.
fn zstd_frames(bytes: &[u8], path: &Path) -> Result<Vec<(usize, usize)>, SwapError> {
    let mut frames = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let damaged = |what: String| SwapError::Damaged {
            path: path.to_owned(),
            offset: at as u64,
            what,
        };
        if skippable_frame(rest) {
            let size = rest
                .get(4..8)
                .map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")) as usize);
            match size {
                Some(size) if size <= rest.len() - 8 => at += 8 + size,
                _ => {
                    return Err(damaged(
                        "the file ends inside a skippable frame: it was cut short".into(),
                    ))
                }
            }
            continue;
        }
        if !rest.starts_with(&ZSTD_MAGIC) {
            return Err(damaged(format!(
                "expected a zstd frame (bytes 28 b5 2f fd), found {:02x?}",
                &rest[..rest.len().min(4)]
            )));
        }
        // The Frame_Header_Descriptor follows the magic; its bit 2 is the
        // Content_Checksum_flag.
        let Some(&descriptor) = rest.get(4) else {
            return Err(damaged(
                "the file ends inside a zstd frame header: it was cut short".into(),
            ));
        };
        if descriptor & 0x04 == 0 {
            return Err(SwapError::NoChecksum {
                path: path.to_owned(),
                offset: at as u64,
            });
        }
        let len = zstd::zstd_safe::find_frame_compressed_size(rest).map_err(|code| {
            damaged(format!(
                "the zstd frame is incomplete or malformed ({}): the file was cut short or damaged",
                zstd::zstd_safe::get_error_name(code)
            ))
        })?;
        frames.push((at, len));
        at += len;
    }
    Ok(frames)
}

/// The decompressed text of checked frames, one after the other. The
/// first frame that fails to decode (its content checksum included,
/// checked at its end) is kept in `failed` as a [`SwapError::Damaged`]
/// naming its offset, and ends the text with an error.
struct Frames<'a> {
    path: &'a Path,
    data: &'a [u8],
    frames: std::vec::IntoIter<(usize, usize)>,
    current: Option<(usize, zstd::stream::read::Decoder<'static, &'a [u8]>)>,
    failed: Option<SwapError>,
}

impl Read for Frames<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.failed.is_some() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "damaged zstd data",
            ));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.current.is_none() {
                let Some((at, len)) = self.frames.next() else {
                    return Ok(0);
                };
                let frame = &self.data[at..at + len];
                let decoder = zstd::stream::read::Decoder::with_buffer(frame)?.single_frame();
                self.current = Some((at, decoder));
            }
            let (at, decoder) = self.current.as_mut().expect("set above");
            match decoder.read(buf) {
                Ok(0) => self.current = None,
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let what = format!("the zstd frame does not decode: {e}");
                    self.failed = Some(SwapError::Damaged {
                        path: self.path.to_owned(),
                        offset: *at as u64,
                        what: what.clone(),
                    });
                    return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, what));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SwapTrace, SwapError> {
        SwapTrace::parse(text.as_bytes(), Path::new("t.swt"))
    }

    #[test]
    fn round_trip() {
        let text = format!("{MAGIC}\n# command: x y\nR 10 4096 32768 a b\nW 20 0 4096 kswapd0\nT 30 100 100000 WRITEBACK\nP 0 clean\nP 15 aged-1\n");
        let t = parse(&text).unwrap();
        assert_eq!(t.requests.len(), 2);
        assert_eq!(t.tasks[0], "a b");
        assert_eq!(t.header["command"], "x y");
        let mut out = Vec::new();
        t.write_text(&mut out).unwrap();
        assert_eq!(parse(std::str::from_utf8(&out).unwrap()).unwrap(), t);
        assert_eq!(t.phase_requests("clean").unwrap().len(), 1);
        assert_eq!(t.phase_requests("aged-1").unwrap().len(), 1);
    }

    #[test]
    fn malformed_lines_name_line_and_field() {
        let e = parse(&format!("{MAGIC}\nR 10 4096\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.swt:2") && e.contains("`size`"), "{e}");
        let e = parse(&format!("{MAGIC}\nR 10 x 4096\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`offset`"), "{e}");
        let e = parse(&format!("{MAGIC}\nQ 1 2 3\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`kind`"), "{e}");
        let e = parse(&format!("{MAGIC}\nW 10 0 4096\nW 5 0 4096\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(":3:") && e.contains("before"), "{e}");
        let e = parse("hello\n").unwrap_err().to_string();
        assert!(e.contains(":1:"), "{e}");
    }

    /// Offsets are checked against the swap size, with no
    /// overflow, no huge allocation and no panic; an empty file is an error.
    #[test]
    fn requests_beyond_the_swap_area_are_refused_with_file_and_line() {
        let gib = 1u64 << 30;
        for (line, what) in [
            (format!("W 10 {} 4096", u64::MAX), "overflow"),
            (format!("W 10 {} 4096", 1u64 << 46), "recorded swap size"),
            (format!("W 10 {} {}", 0, 2 * gib), "recorded swap size"),
            (format!("W 10 {} 4096", gib), "recorded swap size"),
        ] {
            let text = format!("{MAGIC}\n# swap_bytes: {gib}\nR 5 0 4096\n{line}\n");
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.starts_with("t.swt:4: "), "{e}");
            assert!(e.contains(what), "{e} should say {what}");
        }
        // The last byte of the area is fine.
        let text = format!("{MAGIC}\n# swap_bytes: {gib}\nW 5 {} 4096\n", gib - 4096);
        assert_eq!(parse(&text).unwrap().requests.len(), 1);
        // Without a swap_bytes line: 64 GiB at most.
        let text = format!("{MAGIC}\nW 5 {} 4096\n", 1u64 << 46);
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.starts_with("t.swt:2: ") && e.contains("64 GiB"), "{e}");
        // A swap_bytes line after the requests still applies.
        let text = format!("{MAGIC}\nW 5 {} 4096\n# swap_bytes: {gib}\n", 2 * gib);
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.starts_with("t.swt:2: "), "{e}");
        // Empty, plain or compressed.
        let e = parse("").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.swt.zst");
        std::fs::write(&empty, b"").unwrap();
        let e = SwapTrace::read(&empty).unwrap_err().to_string();
        assert!(e.contains("empty.swt.zst:1: the file is empty"), "{e}");
        let zst = dir.path().join("zero.swt.zst");
        let mut enc = zstd::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_checksum(true).unwrap();
        std::fs::write(&zst, enc.finish().unwrap()).unwrap();
        let e = SwapTrace::read(&zst).unwrap_err().to_string();
        assert!(e.contains("the file is empty"), "{e}");
    }
}
