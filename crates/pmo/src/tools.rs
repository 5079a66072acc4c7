//! The operations of the pmo shell (`nvmos pmo …`) that are more than one
//! call on a [`Pool`]: writing a file's bytes into an object, the hex
//! dump, `info --stats` (each object with its heap's statistics). They
//! return data (serde) or a typed [`ToolError`]; the front end parses its
//! arguments, asks for keys and prints. Error messages name the shell's
//! options (`--offset`) where an option is what was wrong.
//!
//! ```
//! use nvmos_pmo::tools;
//! let dump = tools::hex_dump(b"nvmos\0\0\0", 0);
//! assert_eq!(dump, "00000000  6e 76 6d 6f 73 00 00 00                          |nvmos...|\n00000008\n");
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::heap::{Heap, HeapStats};
use crate::{AttachOptions, ObjectInfo, Perm, PmoError, Pool};

/// What the shell's operations can refuse, besides the pool's own errors.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The pool refused (wrong key, no such object, damaged, ...).
    #[error(transparent)]
    Pmo(#[from] PmoError),
    /// The bytes to write do not fit in the object.
    #[error("{} is {bytes} bytes; object {name:?} holds {size}", from.display())]
    TooLarge {
        /// Where the bytes came from.
        from: PathBuf,
        /// How many there are.
        bytes: u64,
        /// The object.
        name: String,
        /// Its size.
        size: u64,
    },
    /// A dump asked to start past the object's end.
    #[error("--offset {offset}: object {name:?} has {size} bytes")]
    OffsetPastEnd {
        /// The offset asked for.
        offset: u64,
        /// The object.
        name: String,
        /// Its size.
        size: u64,
    },
    /// `info NAME` named no object of the pool.
    #[error("no object named {name:?} in {}", pool.display())]
    NoSuchObject {
        /// The name given.
        name: String,
        /// The pool's file.
        pool: PathBuf,
    },
}

/// Write `bytes` (read from `from`, named in errors) into object `name`
/// from offset 0 and psync; returns the object's new epoch. The size is
/// checked before attaching: attaching for writing commits a nonce
/// reservation, and a refused write changes nothing. `wait`: wait for
/// another writer of the object instead of failing.
pub fn write_object(
    pool: &Pool,
    name: &str,
    bytes: &[u8],
    from: &Path,
    key: Option<&[u8]>,
    wait: bool,
) -> Result<u64, ToolError> {
    if let Some(o) = pool.list().into_iter().find(|o| o.name == name) {
        if bytes.len() as u64 > o.size {
            return Err(ToolError::TooLarge {
                from: from.to_owned(),
                bytes: bytes.len() as u64,
                name: name.to_owned(),
                size: o.size,
            });
        }
    }
    let h = pool.open_object_with(name, Perm::Write, key, AttachOptions { wait })?;
    h.write_at(0, bytes)?;
    h.psync()?;
    Ok(h.epoch())
}

/// Object `name`'s bytes from `offset`, `length` of them (to the end when
/// `None`, or when the object ends first), as [`hex_dump`] shows them.
pub fn dump(
    pool: &Pool,
    name: &str,
    key: Option<&[u8]>,
    offset: u64,
    length: Option<u64>,
) -> Result<String, ToolError> {
    let bytes = pool.open_object(name, Perm::Read, key)?.read_all()?;
    let size = bytes.len() as u64;
    if offset > size {
        return Err(ToolError::OffsetPastEnd {
            offset,
            name: name.to_owned(),
            size,
        });
    }
    let end = length.map_or(size, |l| offset.saturating_add(l).min(size));
    Ok(hex_dump(&bytes[offset as usize..end as usize], offset))
}

/// `pmempool dump`'s hex format: offset, 16 bytes in hex, their ASCII; a
/// run of lines equal to the one before is shown once as `*`; the last
/// line is the offset after the end. `base` is the offset of `bytes[0]`.
pub fn hex_dump(bytes: &[u8], base: u64) -> String {
    let mut out = String::new();
    let mut previous: Option<&[u8]> = None;
    let mut folded = false;
    for (i, line) in bytes.chunks(16).enumerate() {
        if previous == Some(line) && line.len() == 16 {
            if !folded {
                out.push_str("*\n");
                folded = true;
            }
            continue;
        }
        folded = false;
        previous = Some(line);
        let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = line
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "{:08x}  {:<47}  |{ascii}|",
            base + 16 * i as u64,
            hex.join(" ")
        );
    }
    let _ = writeln!(out, "{:08x}", base + bytes.len() as u64);
    out
}

/// An object as `info` shows it: its directory entry and, with `--stats`,
/// its heap.
#[derive(Clone, Debug, Serialize)]
pub struct InfoRow {
    /// The object's directory entry.
    pub object: ObjectInfo,
    /// `None` (JSON `null`) when the heap was not asked for.
    pub heap: Option<HeapReport>,
}

/// An object's heap: its statistics, or why there are none.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum HeapReport {
    /// The heap's space accounting, checked.
    Stats(HeapStats),
    /// No heap to report: `{"none": why}` (encrypted and no key, no heap
    /// formatted in it, damaged, or the object would not open).
    None {
        /// Why.
        none: String,
    },
}

/// The pool's objects (only `name` when given: an error if there is no
/// such object), each with its heap when `stats` (opened with `key` where
/// the object is encrypted).
pub fn info(
    pool: &Pool,
    name: Option<&str>,
    stats: bool,
    key: Option<&[u8]>,
) -> Result<Vec<InfoRow>, ToolError> {
    let objects: Vec<ObjectInfo> = pool
        .list()
        .into_iter()
        .filter(|o| name.is_none_or(|n| n == o.name))
        .collect();
    if let (Some(n), true) = (name, objects.is_empty()) {
        return Err(ToolError::NoSuchObject {
            name: n.to_owned(),
            pool: pool.info().path,
        });
    }
    Ok(objects
        .into_iter()
        .map(|o| InfoRow {
            heap: stats.then(|| heap_report(pool, &o, key)),
            object: o,
        })
        .collect())
}

/// Object `o`'s heap statistics, or why there are none.
pub fn heap_report(pool: &Pool, o: &ObjectInfo, key: Option<&[u8]>) -> HeapReport {
    let none = |why: String| HeapReport::None { none: why };
    let key = if o.encrypted {
        match key {
            Some(k) => Some(k),
            None => return none("encrypted; give --key-file to open it".into()),
        }
    } else {
        None
    };
    let bytes = match pool
        .open_object(&o.name, Perm::Read, key)
        .and_then(|h| h.read_all())
    {
        Ok(b) => b,
        Err(e) => return none(format!("{e}")),
    };
    if !Heap::<&[u8]>::is_formatted(&bytes) {
        return none("no heap formatted in it".into());
    }
    match Heap::open(&bytes[..]).and_then(|h| h.check()) {
        Ok(s) => HeapReport::Stats(s),
        Err(e) => none(format!("heap damaged: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_equal_lines_is_shown_once_as_a_star() {
        let mut bytes = vec![0u8; 64];
        bytes.extend_from_slice(b"nvmos pmo tools!");
        let dump = hex_dump(&bytes, 0x100);
        let zeros = "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00";
        assert_eq!(
            dump,
            format!(
                "00000100  {zeros}  |................|\n*\n\
                 00000140  6e 76 6d 6f 73 20 70 6d 6f 20 74 6f 6f 6c 73 21  |nvmos pmo tools!|\n\
                 00000150\n"
            )
        );
    }

    #[test]
    fn write_refuses_more_bytes_than_the_object_holds_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool");
        let opts = crate::PoolOptions {
            state_dir: Some(dir.path().join("state")),
            ..crate::PoolOptions::default()
        };
        let pool = Pool::create_with(&path, 4 << 20, opts).unwrap();
        pool.pcreate("obj", 4096, None).unwrap();
        let epoch = pool.list()[0].epoch;
        let e = write_object(&pool, "obj", &[1; 4097], Path::new("in"), None, false)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "in is 4097 bytes; object \"obj\" holds 4096");
        assert_eq!(pool.list()[0].epoch, epoch);
        let epoch = write_object(&pool, "obj", b"abc", Path::new("in"), None, false).unwrap();
        assert_eq!(pool.list()[0].epoch, epoch);
        assert_eq!(
            &dump(&pool, "obj", None, 0, Some(3)).unwrap()[..16],
            "00000000  61 62 "
        );
        let e = dump(&pool, "obj", None, 5000, None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--offset 5000: object \"obj\" has 4096 bytes");
        let rows = info(&pool, Some("obj"), true, None).unwrap();
        assert!(
            matches!(&rows[0].heap, Some(HeapReport::None { none }) if none == "no heap formatted in it")
        );
        let e = info(&pool, Some("nope"), false, None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("no object named \"nope\" in "), "{e}");
    }
}
