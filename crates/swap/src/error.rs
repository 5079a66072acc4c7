//! What can go wrong building the model, reading a trace or recording.
//!
//! Every variant names what it is about: the device and field of a bad
//! preset, the setting of a bad configuration, the file and line of a
//! malformed trace, the file and byte offset of damaged compressed data.

use std::path::PathBuf;

/// An error from the paging model, a trace reader or the recorder.
#[derive(Debug, thiserror::Error)]
pub enum SwapError {
    /// A device description that cannot model a device (zero or negative
    /// bandwidth, zero pages per block, ...).
    #[error("device {device}: field `{field}` {reason}")]
    BadDevice {
        /// The device's name.
        device: String,
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// A paging-system setting that cannot work (a memory limit at or
    /// below the watermarks, a swap area smaller than a cluster, ...).
    #[error("configuration: `{field}` {reason}")]
    BadConfig {
        /// The setting at fault.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// Nothing could be reclaimed and no writeback is in flight: the
    /// workload does not fit in memory plus swap.
    #[error("out of memory at reference {reference}: {reason}")]
    OutOfMemory {
        /// Index of the page reference being served.
        reference: u64,
        /// Why reclaim could not free a frame.
        reason: String,
    },

    /// A line of a lackey or swap block trace that does not parse.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong, naming the field.
        message: String,
    },

    /// A compressed trace whose zstd data is damaged or cut short: a
    /// frame that is incomplete, does not decode, or fails its content
    /// checksum, or bytes that are not a frame.
    #[error("{}: damaged at offset {offset}: {what}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// Byte offset in the (compressed) file of the frame at fault.
        offset: u64,
        /// What is wrong.
        what: String,
    },

    /// A zstd frame without a content checksum: damage to it would decode
    /// to a different trace without any error, so it is not read.
    #[error("{}: the zstd frame at offset {offset} has no content checksum, so damage to it would go unnoticed; re-encode it with one: `zstd -dc FILE | zstd -19 -o NEW.swt.zst` (the zstd tool writes a checksum unless told --no-check)", path.display())]
    NoChecksum {
        /// The file.
        path: PathBuf,
        /// Byte offset of the frame.
        offset: u64,
    },

    /// Reading or writing a file failed.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },

    /// Recording needs root.
    #[error("record-swap needs root (it creates a swap file, a memory cgroup and enables tracepoints); effective uid is {euid}")]
    NotRoot {
        /// The effective user id.
        euid: u32,
    },

    /// The recorder cannot work on this system (no memory cgroup, the swap
    /// file's filesystem is not on a plain block device, ...).
    #[error("record-swap: {0}")]
    Unsupported(String),

    /// A step of the recorder's set-up failed.
    #[error("record-swap: {step}: {message}")]
    Setup {
        /// The step.
        step: &'static str,
        /// What happened.
        message: String,
    },

    /// SIGINT or SIGTERM arrived during set-up, before the command ran;
    /// everything created was removed again.
    #[error("record-swap: interrupted during set-up ({step}); everything created was removed")]
    InterruptedSetup {
        /// The step reached.
        step: &'static str,
    },

    /// Putting the system back failed: names what is left behind.
    #[error("record-swap: could not restore the system: {0}")]
    Restore(String),

    /// The tracefs side of a recording failed.
    #[error(transparent)]
    Trace(#[from] nvmos_trace::TraceError),
}

impl SwapError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SwapError::Io {
            path: path.into(),
            source,
        }
    }
}
