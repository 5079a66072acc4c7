//! Output files: CSV through the `csv` crate, pretty JSON through
//! serde_json, and every file written atomically (a temporary file in the
//! same folder, then a rename), never over one of the run's inputs.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Error;

/// CSV text: the header, then one record per row (fields quoted as RFC
/// 4180 says when they hold commas, quotes or line breaks).
///
/// ```
/// let csv = nvmos_report::csv_text(&["trace", "allocator"], [vec!["a,b".to_string(), "x".into()]]).unwrap();
/// assert_eq!(csv, "trace,allocator\n\"a,b\",x\n");
/// ```
pub fn csv_text<R, F>(header: &[&str], rows: impl IntoIterator<Item = R>) -> Result<String, Error>
where
    R: IntoIterator<Item = F>,
    F: AsRef<[u8]>,
{
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record(header).map_err(Error::Csv)?;
    for row in rows {
        w.write_record(row).map_err(Error::Csv)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| Error::Csv(e.into_error().into()))?;
    String::from_utf8(bytes).map_err(|e| {
        Error::Csv(::csv::Error::from(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e,
        )))
    })
}

/// CSV text from serializable records (the header from the first record's
/// field names).
pub fn csv_records<T: Serialize>(records: impl IntoIterator<Item = T>) -> Result<String, Error> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    for r in records {
        w.serialize(r).map_err(Error::Csv)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| Error::Csv(e.into_error().into()))?;
    String::from_utf8(bytes).map_err(|e| {
        Error::Csv(::csv::Error::from(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e,
        )))
    })
}

/// Pretty JSON with a final newline.
pub fn json_text<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    Ok(serde_json::to_string_pretty(value).map_err(Error::Json)? + "\n")
}

/// Write `bytes` to `path` atomically: a temporary file in the same
/// folder, flushed, then renamed over `path`, so a reader sees the old
/// file or the whole new one, never half. Refuses (without touching
/// anything) when `path` is one of `inputs` (same file by path or, on
/// Unix, by device and inode). The file is made readable by all (0644),
/// as `std::fs::write` would under the usual umask.
pub fn write_atomic(path: &Path, bytes: &[u8], inputs: &[&Path]) -> Result<(), Error> {
    // The project's one output mechanism (`nvmos_trace::Output`), so the
    // CLI's reports, traces and presets keep one rule.
    let from_trace = |e: nvmos_trace::TraceError| match e {
        nvmos_trace::TraceError::SameFile { input, output } => Error::WouldOverwriteInput {
            path: output,
            input,
        },
        nvmos_trace::TraceError::Io { path, source } => Error::Io { path, source },
        other => Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(other.to_string()),
        },
    };
    let mut out = nvmos_trace::Output::create(path, inputs).map_err(from_trace)?;
    out.write_all(bytes).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    out.commit().map_err(from_trace)
}

/// A report folder: created on open, every file written into it
/// atomically, never over an input of the run, and held by this run alone.
///
/// Each file is atomic on its own, but a run writes several; two runs
/// writing one folder at once would leave a mix of both. So the folder is
/// locked (`flock` on the folder itself, no lock file left behind) from
/// [`create`](OutputDir::create) until the last clone is dropped, and a
/// second run — another process — is refused while the first holds it.
/// The lock dies with the process, so a killed run never leaves the folder
/// locked. Within one process every `OutputDir` of a folder shares the
/// lock.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let out = nvmos_report::OutputDir::create(dir.path(), &[]).unwrap();
/// let path = out.write_json("results.json", &[1, 2]).unwrap();
/// assert_eq!(std::fs::read_to_string(path).unwrap(), "[\n  1,\n  2\n]\n");
/// ```
#[derive(Clone, Debug)]
pub struct OutputDir {
    dir: PathBuf,
    inputs: Vec<PathBuf>,
    /// The open folder holding the lock; shared by clones.
    _lock: std::sync::Arc<std::fs::File>,
}

/// The folders this process holds, by canonical path: a second
/// `OutputDir` of one folder in one process shares the first's lock
/// (`flock` would refuse a second open file description).
fn held_folders(
) -> &'static std::sync::Mutex<std::collections::HashMap<PathBuf, std::sync::Weak<std::fs::File>>> {
    static HELD: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<PathBuf, std::sync::Weak<std::fs::File>>>,
    > = std::sync::OnceLock::new();
    HELD.get_or_init(Default::default)
}

/// Locks `dir` for this process, or says who holds it.
fn lock_folder(dir: &Path) -> Result<std::sync::Arc<std::fs::File>, Error> {
    let io = |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    let canonical = dir.canonicalize().map_err(io)?;
    let mut held = held_folders().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(lock) = held.get(&canonical).and_then(std::sync::Weak::upgrade) {
        return Ok(lock);
    }
    let file = std::fs::File::open(&canonical).map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(Error::FolderBusy {
                path: dir.to_path_buf(),
            })
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
    }
    let lock = std::sync::Arc::new(file);
    held.retain(|_, weak| weak.strong_count() > 0);
    held.insert(canonical, std::sync::Arc::downgrade(&lock));
    Ok(lock)
}

impl OutputDir {
    /// Create `dir` (and its parents) if needed; `inputs` are the files
    /// the run read (traces, machine files), which it will not overwrite.
    pub fn create(dir: &Path, inputs: &[&Path]) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let lock = lock_folder(dir)?;
        Ok(OutputDir {
            dir: dir.to_path_buf(),
            inputs: inputs.iter().map(|p| p.to_path_buf()).collect(),
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Write `name` in the folder; returns its path.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, Error> {
        let path = self.dir.join(name);
        let inputs: Vec<&Path> = self.inputs.iter().map(PathBuf::as_path).collect();
        write_atomic(&path, bytes, &inputs)?;
        Ok(path)
    }

    /// The navigation bar for the study page `own` about to be written
    /// here: the [`STUDY_PAGES`](crate::page::STUDY_PAGES) already in the
    /// folder and `own`, in their usual order. A page links only to pages
    /// that exist; one written later into the same folder is linked from
    /// pages written after it (each command rewrites only its own page).
    pub fn nav(&self, own: &str) -> Vec<crate::page::NavLink> {
        crate::page::STUDY_PAGES
            .iter()
            .filter(|l| l.href == own || self.dir.join(l.href).is_file())
            .copied()
            .collect()
    }

    /// Write `value` as pretty JSON.
    pub fn write_json<T: Serialize + ?Sized>(
        &self,
        name: &str,
        value: &T,
    ) -> Result<PathBuf, Error> {
        self.write(name, json_text(value)?.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_held_by_another_open_is_refused_and_one_process_shares_its_lock() {
        let dir = tempfile::tempdir().unwrap();
        let out = OutputDir::create(dir.path(), &[]).unwrap();
        // Another process's lock, as flock sees it: another open file
        // description of the folder.
        let other = std::fs::File::open(dir.path()).unwrap();
        assert!(other.try_lock().is_err(), "the folder is not locked");
        drop(other);
        let again = OutputDir::create(dir.path(), &[]).unwrap();
        drop(out);
        drop(again);
        let other = std::fs::File::open(dir.path()).unwrap();
        other.try_lock().unwrap();
        let e = OutputDir::create(dir.path(), &[]).unwrap_err();
        assert!(matches!(e, Error::FolderBusy { .. }), "{e}");
        assert!(
            e.to_string().contains(&dir.path().display().to_string()),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let rows = vec![
            vec!["Linux (as recorded)".to_string(), "1".into()],
            vec!["a,b".into(), "say \"hi\"".into()],
            vec!["two\nlines".into(), "".into()],
        ];
        let csv = csv_text(&["allocator", "note"], rows).unwrap();
        assert_eq!(
            csv,
            "allocator,note\nLinux (as recorded),1\n\"a,b\",\"say \"\"hi\"\"\"\n\"two\nlines\",\n"
        );
    }

    #[test]
    fn csv_records_from_structs() {
        #[derive(Serialize)]
        struct R<'a> {
            trace: &'a str,
            writes: u64,
        }
        let csv = csv_records([R {
            trace: "t,1",
            writes: 3,
        }])
        .unwrap();
        assert_eq!(csv, "trace,writes\n\"t,1\",3\n");
    }

    #[test]
    fn writes_atomically_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let out = OutputDir::create(&dir.path().join("a/b"), &[]).unwrap();
        let p = out.write("x.html", b"one").unwrap();
        out.write("x.html", b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        // No temporary file left behind.
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o644
            );
        }
    }

    #[test]
    fn nav_lists_the_study_pages_in_the_folder_and_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let out = OutputDir::create(dir.path(), &[]).unwrap();
        let hrefs = |own| out.nav(own).iter().map(|l| l.href).collect::<Vec<_>>();
        assert_eq!(hrefs("index.html"), ["index.html"]);
        out.write("swap.html", b"x").unwrap();
        out.write("results.json", b"{}").unwrap();
        std::fs::create_dir(dir.path().join("pmo.html")).unwrap(); // not a page
        assert_eq!(hrefs("index.html"), ["index.html", "swap.html"]);
        assert_eq!(hrefs("banks.html"), ["banks.html", "swap.html"]);
    }

    #[test]
    fn refuses_to_overwrite_an_input() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("trace.nvt");
        std::fs::write(&input, b"trace").unwrap();
        let out = OutputDir::create(dir.path(), &[&input]).unwrap();
        let e = out.write("trace.nvt", b"oops").unwrap_err();
        assert!(e.to_string().contains("trace.nvt"), "{e}");
        assert_eq!(std::fs::read(&input).unwrap(), b"trace");
        // Also through another path to the same file.
        let e = write_atomic(&dir.path().join("./trace.nvt"), b"x", &[&input]).unwrap_err();
        assert!(matches!(e, Error::WouldOverwriteInput { .. }));
        #[cfg(unix)]
        {
            let link = dir.path().join("hard");
            std::fs::hard_link(&input, &link).unwrap();
            assert!(write_atomic(&link, b"x", &[&input]).is_err());
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"trace");
    }

    #[test]
    fn io_errors_name_the_file_once() {
        let e = write_atomic(Path::new("/nonexistent-nvmos-dir/x.json"), b"x", &[]).unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("/nonexistent-nvmos-dir/x.json"), "{shown}");
        // The OS error is the source, not repeated in the message.
        assert!(!shown.contains("os error"), "{shown}");
        assert!(std::error::Error::source(&e).is_some());
    }
}
