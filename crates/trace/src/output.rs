//! Output files written whole or not at all.
//!
//! Every command that writes a file writes it through [`Output`]: a
//! temporary file in the destination's folder (so the final rename stays
//! on one filesystem and is atomic), renamed over the destination only by
//! [`Output::commit`]. A command that fails, panics or is killed before
//! that leaves the destination as it was: no truncated trace, no 0-byte
//! file, and an existing file of that name untouched. An output that is
//! one of the command's inputs (the same path, a symlink to it or a hard
//! link) is refused before anything is written: [`refuse_same_file`].

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::TraceError;

/// A file being written; it appears at its path on [`commit`](Output::commit).
#[derive(Debug)]
pub struct Output {
    path: PathBuf,
    temp: tempfile::NamedTempFile,
}

impl Output {
    /// Starts writing `path`, after checking it is none of `inputs`.
    /// Nothing appears at `path` until [`commit`](Output::commit).
    pub fn create(path: impl AsRef<Path>, inputs: &[&Path]) -> Result<Output, TraceError> {
        let path = path.as_ref();
        for input in inputs {
            refuse_same_file(input, path)?;
        }
        if path.is_dir() {
            return Err(TraceError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory"),
            ));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let temp = tempfile::Builder::new()
            .prefix(&format!(
                ".{}.",
                path.file_name()
                    .map_or_else(|| "out".into(), |n| n.to_string_lossy())
            ))
            .suffix(".part")
            .tempfile_in(dir)
            .map_err(|e| TraceError::io(path, e))?;
        Ok(Output {
            path: path.to_owned(),
            temp,
        })
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file, e.g. for its length.
    pub fn file(&self) -> &File {
        self.temp.as_file()
    }

    /// Flushes, syncs and renames the temporary over the destination.
    pub fn commit(mut self) -> Result<(), TraceError> {
        self.temp
            .flush()
            .and_then(|()| self.temp.as_file().sync_all())
            .map_err(|e| TraceError::io(&self.path, e))?;
        // A temporary file is private (0600); the output is readable by
        // all, as `File::create` makes it under the usual umask (022).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            self.temp
                .as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
                .map_err(|e| TraceError::io(&self.path, e))?;
        }
        let path = self.path;
        self.temp
            .persist(&path)
            .map_err(|e| TraceError::io(&path, e.error))?;
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.temp.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.temp.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.temp.flush()
    }
}

/// Refuses `output` when it is `input`: the same path, a symlink to it, a
/// hard link (same device and inode). An output that does not exist yet is
/// never the input.
pub fn refuse_same_file(input: &Path, output: &Path) -> Result<(), TraceError> {
    let Ok(out_meta) = std::fs::metadata(output) else {
        return Ok(());
    };
    let in_meta = std::fs::metadata(input).map_err(|e| TraceError::io(input, e))?;
    if same_file(&in_meta, &out_meta) {
        return Err(TraceError::SameFile {
            input: input.to_owned(),
            output: output.to_owned(),
        });
    }
    Ok(())
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_appears_before_commit_and_a_dropped_output_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.nvt");
        std::fs::write(&path, b"old").unwrap();
        let mut out = Output::create(&path, &[]).unwrap();
        out.write_all(b"new, half").unwrap();
        drop(out);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut out = Output::create(&path, &[]).unwrap();
        out.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_input_is_refused_by_path_symlink_and_hard_link() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.txt");
        std::fs::write(&input, b"data").unwrap();
        let sym = dir.path().join("sym.nvt");
        std::os::unix::fs::symlink(&input, &sym).unwrap();
        let hard = dir.path().join("hard.nvt");
        std::fs::hard_link(&input, &hard).unwrap();
        let dotted = dir.path().join(".").join("in.txt");
        for out in [&input, &sym, &hard, &dotted] {
            let e = Output::create(out, &[&input]).unwrap_err();
            assert!(matches!(e, TraceError::SameFile { .. }), "{e}");
            assert!(e.to_string().contains("in.txt"), "{e}");
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"data");
        assert!(Output::create(dir.path().join("new.nvt"), &[&input]).is_ok());
    }
}
