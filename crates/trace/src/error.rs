//! What can go wrong reading, writing or recording a trace.
//!
//! Every variant names the file it is about and, where the trouble is in
//! the file's content, the line (text traces) or byte offset (`.nvt`), so a
//! user can look at the spot. Parsers return these instead of panicking on
//! any input.

use std::path::PathBuf;

/// An error from a trace source, the `.nvt` writer or the recorder.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading or writing a file failed.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },

    /// A line of an ftrace or `perf script` text trace is not what the
    /// format says (only lines of our three events are checked; other
    /// events are counted as skipped).
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong with the line.
        message: String,
    },

    /// The file does not start with the `.nvt` magic bytes.
    #[error("{}: not an .nvt trace: bad magic bytes at offset {offset}", path.display())]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// Where the magic was expected.
        offset: u64,
    },

    /// The `.nvt` file is of a format version this build cannot read.
    #[error("{}: .nvt format version {found} at offset {offset} is not supported (this build reads versions 1 to {supported})", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// Where the version field is.
        offset: u64,
        /// The version in the file.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },

    /// A block, the header or the trailer does not match its checksum.
    #[error("{}: checksum mismatch in the {what} at offset {offset} (stored {stored:#010x}, computed {computed:#010x})", path.display())]
    Checksum {
        /// The file.
        path: PathBuf,
        /// Start of the damaged part.
        offset: u64,
        /// Which part: header, block, trailer.
        what: &'static str,
        /// The checksum stored in the file.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },

    /// The file ends before a complete header, block or trailer.
    #[error("{}: truncated: {what} at offset {offset}", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Where the missing part starts.
        offset: u64,
        /// What is missing.
        what: String,
    },

    /// Checksums matched but the content is impossible (a writer bug or a
    /// forged file).
    #[error("{}: corrupt .nvt at offset {offset}: {what}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Start of the part that is wrong.
        offset: u64,
        /// What is wrong.
        what: String,
    },

    /// The file is none of the formats this crate reads.
    #[error("{}: not a trace: {reason}", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// Why detection failed.
        reason: String,
    },

    /// An event cannot be written (e.g. its pfn is outside the frame space).
    #[error("{}: cannot write event #{index}: {reason}", path.display())]
    BadEvent {
        /// The file being written.
        path: PathBuf,
        /// 0-based index of the event in the trace.
        index: u64,
        /// What is wrong.
        reason: String,
    },

    /// An event lies beyond the memory or CPUs a replay was asked to use
    /// (the first such event; `at` is `:LINE` for text traces, `: event
    /// #N` for `.nvt`).
    #[error("{}{at}: {what}", path.display())]
    BeyondMachine {
        /// The trace.
        path: PathBuf,
        /// Where in it.
        at: String,
        /// The pfn or CPU and the limit.
        what: String,
    },

    /// The output is one of the inputs (the same path, a symlink or a hard
    /// link): writing it would destroy the input. Nothing was written.
    #[error("{}: the output is the input {} (the same file); nothing was written", output.display(), input.display())]
    SameFile {
        /// The input.
        input: PathBuf,
        /// The output asked for.
        output: PathBuf,
    },

    /// The output path exists and is not a regular file (a device node,
    /// a FIFO, a socket): replacing it by renaming a file over it would
    /// destroy it, so nothing was written.
    #[error("{}: the output is a {kind}, not a regular file; nothing was written (write to standard output with `-`)", path.display())]
    NotARegularFile {
        /// The output asked for.
        path: PathBuf,
        /// What it is: "character device", "FIFO", ...
        kind: &'static str,
    },

    /// Recording needs root (tracefs is root-only). Nothing was changed.
    #[error("recording page-allocation events needs root (effective uid {euid}); run it with sudo. Nothing was changed.")]
    NotRoot {
        /// The effective user id.
        euid: u32,
    },

    /// tracefs is not mounted and could not be mounted.
    #[error("tracefs is not available: {reason}. Nothing was changed.")]
    NoTracefs {
        /// Why.
        reason: String,
    },

    /// The command to record could not be started.
    #[error("cannot start {command:?}")]
    Spawn {
        /// The command line.
        command: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },

    /// Restoring the tracing state failed; the message lists what is left
    /// changed so the user can fix it by hand.
    #[error("could not restore the tracing state: {0}")]
    Restore(String),

    /// `--writes` was asked for but this kernel cannot sample writes
    /// (no soft-dirty support, or pagemap hides frame numbers).
    #[error("cannot sample writes: {0}")]
    WriteSampling(String),

    /// Recording is not supported on this operating system.
    #[error("recording needs Linux tracefs")]
    Unsupported,
}

impl TraceError {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> TraceError {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }
}
