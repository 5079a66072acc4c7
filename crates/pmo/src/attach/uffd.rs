//! A thin, safe-where-possible layer over the userfaultfd(2) ioctls the fault
//! engine needs. `libc` has the system call number but not the uapi structs of
//! `<linux/userfaultfd.h>`, and the `userfaultfd` crate cannot install a page
//! write-protected in the same ioctl (`UFFDIO_COPY_MODE_WP`) nor poison one
//! (`UFFDIO_POISON`), both of which soundness here depends on; so the few
//! structs are declared below, laid out as the kernel's uapi header lays them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const UFFDIO: u64 = 0xAA;
const UFFD_API: u64 = 0xAA;

const fn iowr(nr: u64, size: usize) -> u64 {
    (3 << 30) | ((size as u64) << 16) | (UFFDIO << 8) | nr
}
const fn ior(nr: u64, size: usize) -> u64 {
    (2 << 30) | ((size as u64) << 16) | (UFFDIO << 8) | nr
}

#[repr(C)]
#[derive(Default)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioWriteProtect {
    range: UffdioRange,
    mode: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioPoison {
    range: UffdioRange,
    mode: u64,
    updated: i64,
}

const UFFDIO_API: u64 = iowr(0x3F, std::mem::size_of::<UffdioApi>());
const UFFDIO_REGISTER: u64 = iowr(0x00, std::mem::size_of::<UffdioRegister>());
const UFFDIO_WAKE: u64 = ior(0x02, std::mem::size_of::<UffdioRange>());
const UFFDIO_COPY: u64 = iowr(0x03, std::mem::size_of::<UffdioCopy>());
const UFFDIO_WRITEPROTECT: u64 = iowr(0x06, std::mem::size_of::<UffdioWriteProtect>());
const UFFDIO_POISON: u64 = iowr(0x08, std::mem::size_of::<UffdioPoison>());

/// `UFFD_FEATURE_PAGEFAULT_FLAG_WP`: write-protect faults are reported.
pub const FEATURE_WP: u64 = 1 << 0;
/// `UFFD_FEATURE_POISON` (Linux 6.6): `UFFDIO_POISON` makes a page raise
/// SIGBUS (as a memory error does) on every later access.
pub const FEATURE_POISON: u64 = 1 << 14;
/// `UFFD_FEATURE_WP_ASYNC` (Linux 6.7): the kernel resolves write-protect
/// faults itself (it lifts the protection and lets the write go on), with
/// no message and no round trip through the handler; `PAGEMAP_SCAN` then
/// finds the pages written since they were protected.
pub const FEATURE_WP_ASYNC: u64 = 1 << 15;

const REGISTER_MODE_MISSING: u64 = 1 << 0;
const REGISTER_MODE_WP: u64 = 1 << 1;
const COPY_MODE_WP: u64 = 1 << 1;
const WRITEPROTECT_MODE_WP: u64 = 1 << 0;

/// `UFFD_EVENT_PAGEFAULT`.
pub const EVENT_PAGEFAULT: u8 = 0x12;
/// The access was a write.
pub const PAGEFAULT_FLAG_WRITE: u64 = 1 << 0;
/// The fault is a write to a write-protected page (not a missing page).
pub const PAGEFAULT_FLAG_WP: u64 = 1 << 1;

/// One `struct uffd_msg` (32 bytes), page-fault view of its union.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct Msg {
    pub event: u8,
    reserved1: u8,
    reserved2: u16,
    reserved3: u32,
    pub flags: u64,
    pub address: u64,
    feat: u64,
}

/// How `copy` ended.
pub enum CopyOutcome {
    /// The page is now mapped with our contents.
    Installed,
    /// A page was already mapped there (another path installed it first);
    /// the bytes before it were copied (a run stops at the first mapped
    /// page).
    Exists { copied: usize },
}

/// An open userfaultfd with its API handshake done.
pub struct Uffd {
    fd: OwnedFd,
    /// Features the kernel granted (`FEATURE_*`).
    pub features: u64,
    /// Whether the descriptor only sees faults from user mode.
    pub user_mode_only: bool,
}

fn ioctl<T>(fd: RawFd, request: u64, arg: &mut T) -> io::Result<()> {
    // SAFETY: `arg` is a live, exclusively borrowed struct laid out as the
    // kernel expects for `request` (the request number encodes its size).
    let rc = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Uffd {
    /// Open a non-blocking, close-on-exec userfaultfd and ask for `wanted`
    /// features; features in `optional` are asked for only if the kernel
    /// offers them. Faults from kernel mode (a `write(2)` from the mapping)
    /// are handled too when allowed; when the kernel refuses that to this
    /// process (`vm.unprivileged_userfaultfd = 0` without CAP_SYS_PTRACE) the
    /// descriptor falls back to `UFFD_USER_MODE_ONLY`.
    pub fn open(wanted: u64, optional: u64) -> io::Result<Uffd> {
        let base = libc::O_CLOEXEC | libc::O_NONBLOCK;
        let (raw, user_mode_only) = match Self::syscall(base) {
            Ok(fd) => (fd, false),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                (Self::syscall(base | 1 /* UFFD_USER_MODE_ONLY */)?, true)
            }
            Err(e) => return Err(e),
        };
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Ask what the kernel offers (a zero-feature handshake is final, so
        // probe on a scratch descriptor), then open for real.
        let offered = {
            let mut api = UffdioApi {
                api: UFFD_API,
                ..Default::default()
            };
            ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api)?;
            api.features
        };
        drop(fd);
        if offered & wanted != wanted {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "the kernel lacks userfaultfd features {:#x}",
                    wanted & !offered
                ),
            ));
        }
        let flags = base | if user_mode_only { 1 } else { 0 };
        let raw = Self::syscall(flags)?;
        // SAFETY: as above.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features: wanted | (optional & offered),
            ioctls: 0,
        };
        ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api)?;
        Ok(Uffd {
            fd,
            features: api.features,
            user_mode_only,
        })
    }

    fn syscall(flags: i32) -> io::Result<RawFd> {
        // SAFETY: userfaultfd(2) takes only flags and returns a descriptor.
        let rc = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc as RawFd)
        }
    }

    /// Register `[start, start + len)` for missing-page faults, and for
    /// write-protect faults too when `wp`.
    pub fn register(&self, start: usize, len: usize, wp: bool) -> io::Result<()> {
        let mut reg = UffdioRegister {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: REGISTER_MODE_MISSING | if wp { REGISTER_MODE_WP } else { 0 },
            ioctls: 0,
        };
        ioctl(self.fd.as_raw_fd(), UFFDIO_REGISTER, &mut reg)
    }

    /// `UFFDIO_COPY` one page from `src` to `dst`, write-protected when `wp`
    /// (atomically: no write can slip in between mapping and protecting), and
    /// wake any thread waiting on it.
    ///
    /// # Safety
    /// `src` must be readable for `len` bytes; `dst` must lie in a range
    /// registered on this descriptor.
    pub unsafe fn copy(
        &self,
        dst: usize,
        src: *const u8,
        len: usize,
        wp: bool,
    ) -> io::Result<CopyOutcome> {
        let mut c = UffdioCopy {
            dst: dst as u64,
            src: src as u64,
            len: len as u64,
            mode: if wp { COPY_MODE_WP } else { 0 },
            copy: 0,
        };
        match ioctl(self.fd.as_raw_fd(), UFFDIO_COPY, &mut c) {
            Ok(()) => Ok(CopyOutcome::Installed),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(CopyOutcome::Exists {
                copied: usize::try_from(c.copy).unwrap_or(0),
            }),
            Err(e) => Err(e),
        }
    }

    /// Write-protect (`protect`) or unprotect `[start, start + len)`;
    /// unprotecting wakes threads waiting on a write-protect fault there.
    pub fn write_protect(&self, start: usize, len: usize, protect: bool) -> io::Result<()> {
        let mut wp = UffdioWriteProtect {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: if protect { WRITEPROTECT_MODE_WP } else { 0 },
        };
        ioctl(self.fd.as_raw_fd(), UFFDIO_WRITEPROTECT, &mut wp)
    }

    /// Mark `[start, start + len)` poisoned: every access raises SIGBUS
    /// (BUS_MCEERR_AR, as an uncorrectable memory error does) until the
    /// range is unmapped; waiting threads are woken to take it.
    pub fn poison(&self, start: usize, len: usize) -> io::Result<()> {
        let mut p = UffdioPoison {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: 0,
            updated: 0,
        };
        ioctl(self.fd.as_raw_fd(), UFFDIO_POISON, &mut p)
    }

    /// Wake threads waiting on faults in `[start, start + len)`.
    pub fn wake(&self, start: usize, len: usize) -> io::Result<()> {
        let mut r = UffdioRange {
            start: start as u64,
            len: len as u64,
        };
        ioctl(self.fd.as_raw_fd(), UFFDIO_WAKE, &mut r)
    }

    /// Read pending fault messages into `out` without blocking; returns how
    /// many were read (0 when none are pending).
    pub fn read(&self, out: &mut [Msg]) -> io::Result<usize> {
        let bytes = std::mem::size_of_val(out);
        // SAFETY: `out` is writable for `bytes` bytes and `Msg` is plain data.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), out.as_mut_ptr().cast(), bytes) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize / std::mem::size_of::<Msg>())
    }

    /// The raw descriptor, for poll(2).
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// `struct pm_scan_arg` of `<linux/fs.h>` (Linux 6.7).
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

const PAGEMAP_SCAN: u64 =
    (3 << 30) | ((std::mem::size_of::<PmScanArg>() as u64) << 16) | (0x66 << 8) | 16;
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
const PAGE_IS_WRITTEN: u64 = 1 << 1;

/// `/proc/self/pagemap`, for `PAGEMAP_SCAN`.
pub struct Pagemap(OwnedFd);

impl Pagemap {
    pub fn open() -> io::Result<Pagemap> {
        let f = std::fs::File::open("/proc/self/pagemap")?;
        Ok(Pagemap(f.into()))
    }

    /// The runs of pages in `[start, end)` written since they were last
    /// write-protected (in a range registered for asynchronous
    /// write-protection), as `(first address, end address)`; with
    /// `protect`, each found page is write-protected again in the same
    /// walk (atomically per page: a write after that is found next time).
    /// Returns how many ioctls it took.
    pub fn written(
        &self,
        start: usize,
        end: usize,
        protect: bool,
        out: &mut Vec<(usize, usize)>,
    ) -> io::Result<u64> {
        let mut regions = [PageRegion::default(); 256];
        let mut at = start as u64;
        let mut calls = 0;
        while at < end as u64 {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags: PM_SCAN_CHECK_WPASYNC | if protect { PM_SCAN_WP_MATCHING } else { 0 },
                start: at,
                end: end as u64,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                category_mask: PAGE_IS_WRITTEN,
                return_mask: PAGE_IS_WRITTEN,
                ..Default::default()
            };
            // SAFETY: `arg` is laid out as the kernel's pm_scan_arg and
            // `vec` points at `vec_len` writable page_regions.
            let n = unsafe { libc::ioctl(self.0.as_raw_fd(), PAGEMAP_SCAN as _, &mut arg) };
            calls += 1;
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            for r in &regions[..n as usize] {
                out.push((r.start as usize, r.end as usize));
            }
            if arg.walk_end <= at {
                break;
            }
            at = arg.walk_end;
        }
        Ok(calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_have_the_uapi_sizes() {
        // Sizes are part of the ioctl numbers; a wrong one is EINVAL/ENOTTY.
        assert_eq!(std::mem::size_of::<Msg>(), 32);
        assert_eq!(std::mem::size_of::<UffdioApi>(), 24);
        assert_eq!(std::mem::size_of::<UffdioRegister>(), 32);
        assert_eq!(std::mem::size_of::<UffdioCopy>(), 40);
        assert_eq!(std::mem::size_of::<UffdioWriteProtect>(), 24);
        assert_eq!(std::mem::size_of::<UffdioPoison>(), 32);
        assert_eq!(std::mem::size_of::<PmScanArg>(), 96);
        assert_eq!(std::mem::size_of::<PageRegion>(), 24);
        assert_eq!(PAGEMAP_SCAN, 0xc060_6610);
        // Spot-check against <linux/userfaultfd.h>'s values.
        assert_eq!(UFFDIO_API, 0xc018_aa3f);
        assert_eq!(UFFDIO_REGISTER, 0xc020_aa00);
        assert_eq!(UFFDIO_COPY, 0xc028_aa03);
        assert_eq!(UFFDIO_WAKE, 0x8010_aa02);
    }
}
