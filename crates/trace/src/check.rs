//! What a trace needs of the machine replaying it, and a check that
//! refuses a smaller one at the first event that does not fit.
//!
//! Text traces (ftrace, `perf script`) carry no machine header, so the
//! memory and CPU count a replay needs are inferred from the events:
//! the highest frame any block touches plus one, and the highest CPU
//! number plus one ([`Needs`]). An explicit memory or CPU count smaller
//! than that would silently drop writes (frames outside the replayed
//! zones) or fold CPUs together, so [`Checked`] turns the first event
//! beyond it into an error naming the pfn or CPU and the line (text) or
//! event number (`.nvt`).

use std::path::{Path, PathBuf};

use crate::event::Event;
use crate::info::TraceInfo;
use crate::source::{EventSource, Format, SourceCounts, TraceHeader};
use crate::TraceError;

/// The smallest machine a trace fits: every block's frames below
/// `frames`, every CPU below `cpus`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Needs {
    /// The highest frame any block touches, plus one (4 KiB frames).
    pub frames: u64,
    /// The highest CPU number, plus one.
    pub cpus: u32,
}

impl Needs {
    /// From a summary; `None` for a trace without events.
    pub fn of(info: &TraceInfo) -> Option<Needs> {
        Some(Needs {
            frames: info.pfn_max? + 1,
            cpus: info.cpus.keys().next_back()? + 1,
        })
    }
}

/// An explicit machine to hold a trace to: `None` means "not given".
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Frames of memory (pfns `0..frames`).
    pub frames: Option<u64>,
    /// CPUs.
    pub cpus: Option<u32>,
}

/// A source whose events are checked against [`Limits`]: the first event
/// beyond them ends it with [`TraceError::BeyondMachine`].
pub struct Checked<S> {
    inner: S,
    path: PathBuf,
    limits: Limits,
    index: u64,
    failed: bool,
}

impl<S: EventSource> Checked<S> {
    /// Checks `inner` (named `path` in errors) against `limits`.
    pub fn new(inner: S, path: impl AsRef<Path>, limits: Limits) -> Checked<S> {
        Checked {
            inner,
            path: path.as_ref().to_owned(),
            limits,
            index: 0,
            failed: false,
        }
    }

    /// Where the event being checked is, for an error: built only when
    /// one is reported (a string per event would cost more than the check).
    fn at(&self) -> String {
        match self.inner.line() {
            Some(line) => format!(":{line}"),
            None => format!(": event #{}", self.index),
        }
    }

    #[inline]
    fn check(&self, e: &Event) -> Result<(), TraceError> {
        let end = e.pfn.get() + e.order.frames();
        if let Some(frames) = self.limits.frames {
            if end > frames {
                return Err(TraceError::BeyondMachine {
                    path: self.path.clone(),
                    at: self.at(),
                    what: format!(
                        "pfn {:#x} (order {}) ends at frame {end:#x}, beyond the {frames} frames ({} MiB) of memory asked for; this trace needs more memory",
                        e.pfn.get(),
                        e.order.get(),
                        frames.saturating_mul(4096) >> 20
                    ),
                });
            }
        }
        if let Some(cpus) = self.limits.cpus {
            if e.cpu >= cpus {
                return Err(TraceError::BeyondMachine {
                    path: self.path.clone(),
                    at: self.at(),
                    what: format!(
                        "CPU {} is beyond the {cpus} CPUs asked for; this trace needs at least {}",
                        e.cpu,
                        e.cpu + 1
                    ),
                });
            }
        }
        Ok(())
    }
}

impl<S: EventSource> Iterator for Checked<S> {
    type Item = Result<Event, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.inner.next()?;
        let item = item.and_then(|e| self.check(&e).map(|()| e));
        self.index += 1;
        self.failed = item.is_err();
        Some(item)
    }
}

impl<S: EventSource> EventSource for Checked<S> {
    fn format(&self) -> Format {
        self.inner.format()
    }

    fn header(&self) -> Option<&TraceHeader> {
        self.inner.header()
    }

    fn counts(&self) -> SourceCounts {
        self.inner.counts()
    }

    fn line(&self) -> Option<u64> {
        self.inner.line()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TextReader;

    const TEXT: &str = "\
# tracer: nop
 a-1 [000] ..... 1.0: mm_page_alloc: page=1 pfn=0x100 order=0 migratetype=1 gfp_flags=X
 a-1 [003] ..... 1.1: mm_page_alloc: page=1 pfn=0x200 order=2 migratetype=1 gfp_flags=X
 a-1 [001] ..... 1.2: mm_page_free: page=1 pfn=0x200 order=2
";

    fn reader() -> TextReader<&'static [u8]> {
        TextReader::new(TEXT.as_bytes(), "t.txt", Format::Ftrace)
    }

    #[test]
    fn needs_are_the_highest_frame_and_cpu_plus_one() {
        let info = TraceInfo::from_source(&mut reader()).unwrap();
        assert_eq!(
            Needs::of(&info),
            Some(Needs {
                frames: 0x204,
                cpus: 4
            })
        );
    }

    #[test]
    fn enough_passes_and_too_little_names_the_line() {
        let ok = Limits {
            frames: Some(0x204),
            cpus: Some(4),
        };
        let events: Result<Vec<_>, _> = Checked::new(reader(), "t.txt", ok).collect();
        assert_eq!(events.unwrap().len(), 3);

        let small = Limits {
            frames: Some(0x203),
            cpus: None,
        };
        let err = Checked::new(reader(), "t.txt", small)
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.txt:3: pfn 0x200 (order 2)"), "{err}");

        let few = Limits {
            frames: None,
            cpus: Some(2),
        };
        let err = Checked::new(reader(), "t.txt", few)
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.txt:3: CPU 3 is beyond the 2 CPUs"),
            "{err}"
        );
    }
}
