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

#[cfg(test)]
mod tests {
    use super::*;

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
