//! Baselines for the fault path, measured the same way the engine's first
//! touches are: a plain kernel page fault on anonymous memory, and the bare
//! userfaultfd round trip (fault message to a handler thread, `UFFDIO_COPY`
//! of a ready page, wake-up) with no opening, no bookkeeping. `nvmos bench
//! pmo` prints the attach and first-touch cost per page beside these.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::uffd::{Msg, Uffd};

/// One measured sweep of first touches.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FirstTouch {
    /// Pages touched (one read of a byte each, in address order).
    pub pages: usize,
    /// Wall time of the whole sweep.
    pub ns: u64,
}

impl FirstTouch {
    /// Nanoseconds per page.
    pub fn ns_per_page(&self) -> f64 {
        self.ns as f64 / self.pages.max(1) as f64
    }
}

const PAGE: usize = 4096;

fn map(pages: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh anonymous mapping, checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            pages * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: our mapping; 4 KiB pages, as the engine uses.
    unsafe { libc::madvise(p, pages * PAGE, libc::MADV_NOHUGEPAGE) };
    Ok(p.cast())
}

fn sweep(p: *mut u8, pages: usize, write: bool) -> u64 {
    let start = Instant::now();
    for i in 0..pages {
        // SAFETY: inside our mapping of `pages` pages.
        unsafe {
            let at = p.add(i * PAGE);
            if write {
                std::ptr::write_volatile(at, 1);
            } else {
                std::ptr::read_volatile(at);
            }
        }
    }
    start.elapsed().as_nanos() as u64
}

/// A plain anonymous page fault: the kernel allocates and zeroes a page.
/// Each page is written (a read would map the shared zero page).
pub fn kernel_first_touch(pages: usize) -> io::Result<FirstTouch> {
    let p = map(pages)?;
    let ns = sweep(p, pages, true);
    // SAFETY: our mapping.
    unsafe { libc::munmap(p.cast(), pages * PAGE) };
    Ok(FirstTouch { pages, ns })
}

/// The raw userfaultfd round trip: each first read is a missing-page fault
/// resolved by a handler thread with `UFFDIO_COPY` of a ready page.
pub fn uffd_first_touch(pages: usize) -> io::Result<FirstTouch> {
    let p = map(pages)?;
    let len = pages * PAGE;
    let result = (|| {
        let u = Arc::new(Uffd::open(0, 0)?);
        u.register(p as usize, len, false)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (hu, hstop) = (u.clone(), stop.clone());
        let handler = std::thread::spawn(move || {
            let src = vec![7u8; PAGE];
            let mut msgs = [Msg::default(); 16];
            let mut fd = libc::pollfd {
                fd: hu.raw(),
                events: libc::POLLIN,
                revents: 0,
            };
            while !hstop.load(Ordering::Acquire) {
                // SAFETY: one valid pollfd; a short timeout to see `stop`.
                unsafe { libc::poll(&mut fd, 1, 10) };
                let n = hu.read(&mut msgs).unwrap_or(0);
                for m in &msgs[..n] {
                    let at = m.address as usize & !(PAGE - 1);
                    // SAFETY: `src` is a readable page; `at` is registered.
                    let _ = unsafe { hu.copy(at, src.as_ptr(), PAGE, false) };
                }
            }
        });
        let ns = sweep(p, pages, false);
        stop.store(true, Ordering::Release);
        let _ = handler.join();
        Ok(FirstTouch { pages, ns })
    })();
    // SAFETY: our mapping, no longer touched.
    unsafe { libc::munmap(p.cast(), len) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_baselines_touch_every_page() {
        let k = kernel_first_touch(64).unwrap();
        assert_eq!(k.pages, 64);
        let u = uffd_first_touch(64).unwrap();
        assert_eq!(u.pages, 64);
        assert!(u.ns > 0 && k.ns > 0);
    }
}
