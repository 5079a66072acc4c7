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
//! So is an output that exists and is not a regular file (a device node,
//! a FIFO, a socket): renaming over it would replace it. The path `-`
//! means standard output: the bytes are kept in a temporary file and
//! copied to standard output on commit, so a failed run prints nothing.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::TraceError;

/// A file being written; it appears at its path on [`commit`](Output::commit).
#[derive(Debug)]
pub struct Output {
    path: PathBuf,
    temp: tempfile::NamedTempFile,
    /// `-`: copy to standard output on commit instead of renaming.
    to_stdout: bool,
}

/// The path that means standard output.
pub const STDOUT_PATH: &str = "-";

impl Output {
    /// Starts writing `path`, after checking it is none of `inputs`.
    /// Nothing appears at `path` until [`commit`](Output::commit).
    pub fn create(path: impl AsRef<Path>, inputs: &[&Path]) -> Result<Output, TraceError> {
        let path = path.as_ref();
        if path.as_os_str() == STDOUT_PATH {
            let temp = tempfile::Builder::new()
                .prefix(".nvmos-stdout.")
                .tempfile()
                .map_err(|e| TraceError::io(path, e))?;
            return Ok(Output {
                path: path.to_owned(),
                temp,
                to_stdout: true,
            });
        }
        for input in inputs {
            refuse_same_file(input, path)?;
        }
        refuse_special_file(path)?;
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
            to_stdout: false,
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
        if self.to_stdout {
            use std::io::{Seek, SeekFrom};
            let file = self.temp.as_file_mut();
            file.seek(SeekFrom::Start(0))
                .map_err(|e| TraceError::io(&self.path, e))?;
            let mut stdout = std::io::stdout().lock();
            std::io::copy(file, &mut stdout)
                .and_then(|_| stdout.flush())
                .map_err(|e| TraceError::io(&self.path, e))?;
            return Ok(());
        }
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

/// Refuses an existing `output` (followed through symlinks) that is
/// neither a regular file nor a directory (directories get their own
/// error from the caller).
pub fn refuse_special_file(output: &Path) -> Result<(), TraceError> {
    let Ok(meta) = std::fs::metadata(output) else {
        return Ok(());
    };
    let ty = meta.file_type();
    if ty.is_file() || ty.is_dir() {
        return Ok(());
    }
    Err(TraceError::NotARegularFile {
        path: output.to_owned(),
        kind: special_kind(&ty),
    })
}

#[cfg(unix)]
fn special_kind(ty: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ty.is_char_device() {
        "character device"
    } else if ty.is_block_device() {
        "block device"
    } else if ty.is_fifo() {
        "FIFO"
    } else if ty.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: &std::fs::FileType) -> &'static str {
    "special file"
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

    #[test]
    fn device_nodes_and_fifos_are_refused_and_left_alone() {
        use std::os::unix::fs::FileTypeExt;
        let e = Output::create("/dev/null", &[]).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::NotARegularFile {
                    kind: "character device",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("/dev/null") && e.to_string().contains('-'),
            "{e}"
        );
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let e = Output::create(&fifo, &[]).unwrap_err();
        assert!(
            matches!(e, TraceError::NotARegularFile { kind: "FIFO", .. }),
            "{e}"
        );
        let link = dir.path().join("null-link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        assert!(Output::create(&link, &[]).is_err());
        assert!(
            std::fs::read_link(&link).is_ok(),
            "the symlink is left as it was"
        );
    }

    #[test]
    fn dash_leaves_no_file_behind() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::env::current_dir().unwrap();
        let mut out = Output::create("-", &[]).unwrap();
        out.write_all(b"").unwrap();
        out.commit().unwrap();
        assert!(!cwd.join("-").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
