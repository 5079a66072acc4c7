//! A `newc` cpio archive, the format the kernel unpacks as an initramfs.

/// An archive being written in memory.
#[derive(Default)]
pub struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

/// File type bits of `mode`.
pub const S_IFDIR: u32 = 0o040000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Character device.
pub const S_IFCHR: u32 = 0o020000;

impl Cpio {
    /// An empty archive.
    pub fn new() -> Cpio {
        Cpio::default()
    }

    fn header(&mut self, name: &str, mode: u32, size: usize, rdev: (u32, u32)) {
        self.ino += 1;
        let fields = [
            self.ino,
            mode,
            0,
            0,
            if mode & S_IFDIR != 0 { 2 } else { 1 },
            0,
            size as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0,
        ];
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    /// A directory (parents first).
    pub fn dir(&mut self, name: &str) {
        self.header(name, S_IFDIR | 0o755, 0, (0, 0));
    }

    /// A regular file with permission bits `perm`.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.header(name, S_IFREG | perm, data.len(), (0, 0));
        self.buf.extend_from_slice(data);
        self.pad();
    }

    /// A character device node.
    pub fn char_dev(&mut self, name: &str, major: u32, minor: u32) {
        self.header(name, S_IFCHR | 0o600, 0, (major, minor));
    }

    /// Close the archive and return its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.header("TRAILER!!!", 0, 0, (0, 0));
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_layout() {
        let mut c = Cpio::new();
        c.dir("bin");
        c.file("init", 0o755, b"#!/bin/sh\n");
        let bytes = c.finish();
        assert!(bytes.starts_with(b"070701"));
        assert_eq!(bytes.len() % 4, 0);
        // The file's header: mode field (second) is a regular file, 0755.
        let at = bytes.windows(5).position(|w| w == b"init\0").unwrap();
        let header = &bytes[at - 110..at];
        assert_eq!(&header[14..22], b"000081ed");
        assert_eq!(&header[54..62], b"0000000a", "size");
        assert!(bytes.windows(11).any(|w| w == b"TRAILER!!!\0"));
    }
}
