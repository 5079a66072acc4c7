//! A folder of traces: which files in it are traces.

use std::path::{Path, PathBuf};

use crate::TraceError;

/// The trace files in `dir`, sorted: every file but hidden ones and
/// Markdown (`README.md`); possibly none. Subfolders (such as
/// `traces/swap/`) are not descended into. The one rule every command and
/// study that takes a trace folder uses.
pub fn trace_files_in(dir: &Path) -> Result<Vec<PathBuf>, TraceError> {
    let io = |e| TraceError::io(dir, e);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_file() && !name.starts_with('.') && !name.ends_with(".md") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// A trace folder's files, sorted: the traces, and the files that are none
/// of the formats (by their first bytes, as [`crate::open`] tells them
/// apart), which a study of the folder skips and counts.
#[derive(Clone, Debug, Default)]
pub struct TraceFolder {
    /// Files that are traces (or claim to be: a damaged `.nvt` is here,
    /// and fails when read).
    pub traces: Vec<PathBuf>,
    /// Files that are not traces at all.
    pub not_traces: Vec<PathBuf>,
}

/// [`trace_files_in`], with the files that are not traces set apart; or,
/// when `path` is a file, that one trace (whatever it holds: a file named
/// on its own is read, and fails with its own error if it is no trace).
pub fn scan_trace_folder(path: &Path) -> Result<TraceFolder, TraceError> {
    use std::io::Read;
    if path.is_file() {
        return Ok(TraceFolder {
            traces: vec![path.to_owned()],
            not_traces: Vec::new(),
        });
    }
    let dir = path;
    let mut folder = TraceFolder::default();
    for path in trace_files_in(dir)? {
        let mut head = Vec::with_capacity(64 * 1024);
        std::fs::File::open(&path)
            .and_then(|f| f.take(64 * 1024).read_to_end(&mut head))
            .map_err(|e| TraceError::io(&path, e))?;
        if crate::source::detect(&head).is_some() {
            folder.traces.push(path);
        } else {
            folder.not_traces.push(path);
        }
    }
    Ok(folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_traces_are_set_apart() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
        std::fs::write(dir.path().join("empty"), "").unwrap();
        std::fs::write(dir.path().join("t.txt"), "# tracer: nop\n").unwrap();
        let folder = scan_trace_folder(dir.path()).unwrap();
        let names = |v: &[PathBuf]| -> Vec<String> {
            v.iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(&folder.traces), ["t.txt"]);
        assert_eq!(names(&folder.not_traces), ["empty", "notes.txt"]);
        let one = scan_trace_folder(&dir.path().join("notes.txt")).unwrap();
        assert_eq!(names(&one.traces), ["notes.txt"]);
        assert!(one.not_traces.is_empty());
    }

    #[test]
    fn hidden_files_markdown_and_folders_are_not_traces() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.nvt", "a.txt", ".hidden", "README.md"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("swap")).unwrap();
        let names: Vec<_> = trace_files_in(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["a.txt", "b.nvt"]);
        let missing = dir.path().join("nope");
        let e = trace_files_in(&missing).unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
    }
}
