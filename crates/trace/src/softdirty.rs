//! Write sampling for `nvmos record --writes`: which physical frames the
//! recorded process tree wrote, every few milliseconds, from the kernel's
//! soft-dirty bits.
//!
//! # The method
//!
//! Every interval, for each process of the recorded tree (the command and
//! every descendant, found by their parent pid in `/proc/PID/stat`), the
//! sampler reads `/proc/PID/pagemap` over the process's *writable*
//! mappings (`/proc/PID/maps`), keeps every present page whose soft-dirty
//! bit (55) is set, takes its frame from bits 0–54 (readable as root),
//! and then writes `4` to `/proc/PID/clear_refs`, which clears the bits and
//! write-protects the pages so that the next write to each sets its bit
//! again. A frame seen in several processes in one sample (shared memory,
//! copy-on-write not yet broken) is one write event. Each event carries
//! the `CLOCK_MONOTONIC` time (µs) just after its process was read; the
//! recorder sets tracefs's `trace_clock` to `mono` so the kernel's
//! allocation events share that clock, and merges the two streams in time
//! order.
//!
//! # What it cannot see
//!
//! - **Writes by the kernel**: zeroing a page on allocation, page-cache
//!   fills from disk (`read()`), writes through `write()` into the page
//!   cache, DMA, kernel-internal data (slab, page tables). Soft-dirty is
//!   set by user-space writes through page tables only.
//! - **Other processes** (page cache written by another process, daemons
//!   outside the tree), and frames the tree writes only through a file
//!   descriptor.
//! - **How many times** a frame was written within one interval: at most
//!   one event per frame per sample, so counts are a lower bound that
//!   saturates at one per interval.
//! - **Writes between the read and the clear** of a process (the bit set
//!   after pagemap was read is cleared unseen), and **writes between a
//!   clear and a free** (a page written and then unmapped before the next
//!   sample: its bit goes with its page table entry).
//! - **Processes that exit between samples** lose their writes since the
//!   last sample (a process that exits while being read is counted in
//!   [`WriteSampling::processes_vanished`]).
//! - **Huge pages**: a transparent huge page has one soft-dirty bit, so a
//!   write to any byte of it marks all 512 frames as written.
//! - **New and grown mappings** report every present page soft-dirty until
//!   the next clear (the kernel marks such a mapping soft-dirty as a
//!   whole, and a new `mmap` next to an old one grows it). In a mapping
//!   that changed since the previous sample only frames that were not
//!   present then are taken as written: a real write to an older page of
//!   it in that interval is missed ([`WriteSampling::remarked`]), and a
//!   page only read since it appeared counts as written once. The shared
//!   zero page is recognised and skipped ([`WriteSampling::zero_page`]),
//!   the huge zero page is not.
//! - **Swapped-out pages** are written but held by no frame
//!   ([`WriteSampling::swapped`]).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::source::WriteSampling;
use crate::TraceError;

const PRESENT: u64 = 1 << 63;
const SWAPPED: u64 = 1 << 62;
const SOFT_DIRTY: u64 = 1 << 55;
const PFN_MASK: u64 = (1 << 55) - 1;
/// Pagemap entries read at a time.
const CHUNK: usize = 8192;

/// One sample's writes: `(CLOCK_MONOTONIC time in ns, rounded down to a
/// microsecond, pfn)`, in time then pfn order. The sampler sends each with
/// its watermark: the time before which no later write will be stamped.
pub type Batch = Vec<(u64, u64)>;

/// `CLOCK_MONOTONIC` now, ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Whether this kernel can sample writes, checked on the recorder itself
/// before anything is changed: `clear_refs` must be writable, pagemap
/// must show frame numbers (root), and a page written in a fresh mapping
/// must read soft-dirty (the kernel marks new mappings soft-dirty; a
/// kernel built without `CONFIG_MEM_SOFT_DIRTY` never sets the bit, and
/// `clear_refs` accepts `4` there without doing anything, so only this
/// probe tells).
pub fn check_support() -> Result<(), TraceError> {
    let unsupported = |why: String| TraceError::WriteSampling(why);
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/clear_refs")
        .map_err(|e| unsupported(format!("/proc/self/clear_refs: {e}")))?;
    let pagemap = File::open("/proc/self/pagemap")
        .map_err(|e| unsupported(format!("/proc/self/pagemap: {e}")))?;
    // SAFETY: a fresh private anonymous mapping of one page, written once,
    // read through pagemap and unmapped; nothing else refers to it.
    let entry = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(unsupported(format!(
                "mmap of a probe page: {}",
                std::io::Error::last_os_error()
            )));
        }
        std::ptr::write_volatile(p as *mut u8, 1);
        let mut entry = [0u8; 8];
        let read = pagemap.read_exact_at(&mut entry, p as u64 / 4096 * 8);
        libc::munmap(p, 4096);
        read.map_err(|e| unsupported(format!("/proc/self/pagemap: {e}")))?;
        u64::from_le_bytes(entry)
    };
    if entry & PRESENT == 0 || entry & PFN_MASK == 0 {
        return Err(unsupported(
            "/proc/self/pagemap shows no frame numbers (needs CAP_SYS_ADMIN)".into(),
        ));
    }
    if entry & SOFT_DIRTY == 0 {
        return Err(unsupported(format!(
            "this kernel ({}) does not track soft-dirty bits: a page just written reads clean in /proc/self/pagemap (built without CONFIG_MEM_SOFT_DIRTY?)",
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "?".into())
        )));
    }
    Ok(())
}

/// The frame of the shared zero page: what a read of a fresh anonymous
/// page maps.
fn zero_page_pfn() -> Option<u64> {
    // SAFETY: a fresh private anonymous mapping of one page, read once and
    // unmapped; nothing else refers to it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return None;
        }
        std::ptr::read_volatile(p as *const u8);
        let mut entry = [0u8; 8];
        let pfn = File::open("/proc/self/pagemap")
            .and_then(|f| f.read_exact_at(&mut entry, p as u64 / 4096 * 8))
            .ok()
            .map(|()| u64::from_le_bytes(entry))
            .filter(|e| e & PRESENT != 0)
            .map(|e| e & PFN_MASK);
        libc::munmap(p, 4096);
        pfn
    }
}

/// The recorded process tree: the root and every process whose parent is
/// in it, found by scanning `/proc`.
struct Tree {
    members: Vec<u32>,
    /// Pids seen and known not to descend from the root.
    outside: HashSet<u32>,
    ever: HashSet<u32>,
}

impl Tree {
    fn new(root: u32) -> Tree {
        Tree {
            members: vec![root],
            outside: HashSet::new(),
            ever: HashSet::from([root]),
        }
    }

    /// Adds the descendants born since the last call (a process keeps its
    /// place once found, even when reparented after its parent exits).
    fn update(&mut self) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        let mut parents: HashMap<u32, u32> = HashMap::new();
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if self.ever.contains(&pid) || self.outside.contains(&pid) {
                continue;
            }
            if let Some(ppid) = parent_of(pid) {
                parents.insert(pid, ppid);
            }
        }
        // Parents before children, whatever the pid order.
        loop {
            let before = self.members.len();
            parents.retain(|&pid, &mut ppid| {
                if self.ever.contains(&ppid) {
                    self.members.push(pid);
                    self.ever.insert(pid);
                    false
                } else {
                    true
                }
            });
            if self.members.len() == before {
                break;
            }
        }
        self.outside.extend(parents.keys());
    }
}

/// The parent pid in `/proc/PID/stat` (after the command name, which may
/// hold spaces and parentheses: the last `)` ends it).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The writable mappings of `pid` as page ranges `[start, end)`.
fn writable_ranges(pid: u32) -> std::io::Result<Vec<(u64, u64)>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(maps
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (range, perms) = (f.next()?, f.next()?);
            if perms.as_bytes().get(1) != Some(&b'w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(end, 16).ok()?;
            Some((start / 4096, end / 4096))
        })
        .collect())
}

/// Reads one process: its written frames, then clears its bits. `Err`
/// when it vanished (or could not be read).
/// What the sampler remembers of a process from its previous sample.
#[derive(Default)]
struct Previous {
    /// Its writable mappings then.
    ranges: Vec<(u64, u64)>,
    /// The frames present in them then, sorted.
    present: Vec<u64>,
}

/// Reads one process: its written frames, then clears its bits. `Err`
/// when it vanished (or could not be read).
///
/// The kernel marks a new *or grown* mapping soft-dirty as a whole
/// (`VM_SOFTDIRTY`): after a new `mmap` merges with its neighbour, every
/// page of the merged mapping reads soft-dirty until the next clear. So in
/// a mapping that is not exactly one of the previous sample's, a dirty
/// page whose frame was already present then is not taken as written
/// ([`WriteSampling::remarked`]); frames new since then are.
fn sample_process(
    pid: u32,
    zero_pfn: Option<u64>,
    previous: &mut Previous,
    buf: &mut Vec<u8>,
    out: &mut Vec<u64>,
    counts: &mut WriteSampling,
) -> std::io::Result<()> {
    let ranges = writable_ranges(pid)?;
    let pagemap = File::open(format!("/proc/{pid}/pagemap"))?;
    let mut present = Vec::with_capacity(previous.present.len());
    for &(start, end) in &ranges {
        let remarked = !previous.ranges.contains(&(start, end));
        let mut page = start;
        while page < end {
            let n = ((end - page) as usize).min(CHUNK);
            buf.resize(n * 8, 0);
            let got = read_at_full(&pagemap, buf, page * 8)?;
            for entry in buf[..got / 8 * 8].chunks_exact(8) {
                let e = u64::from_le_bytes(entry.try_into().expect("8 bytes"));
                if e & PRESENT != 0 {
                    present.push(e & PFN_MASK);
                }
                let Some(pfn) = classify(e, zero_pfn, counts) else {
                    continue;
                };
                if remarked && previous.present.binary_search(&pfn).is_ok() {
                    counts.remarked += 1;
                } else {
                    out.push(pfn);
                }
            }
            if got < n * 8 {
                break; // the mapping went away under us
            }
            page += n as u64;
        }
    }
    std::fs::write(format!("/proc/{pid}/clear_refs"), "4")?;
    present.sort_unstable();
    *previous = Previous { ranges, present };
    Ok(())
}

/// Sorts one pagemap entry: the frame when it reads written, else
/// `None` (counted when it is one of the skipped kinds).
#[inline]
fn classify(e: u64, zero_pfn: Option<u64>, counts: &mut WriteSampling) -> Option<u64> {
    if e & SOFT_DIRTY == 0 {
        return None;
    }
    if e & PRESENT != 0 {
        let pfn = e & PFN_MASK;
        if Some(pfn) == zero_pfn {
            counts.zero_page += 1;
        } else if pfn != 0 {
            return Some(pfn);
        }
    } else if e & SWAPPED != 0 {
        counts.swapped += 1;
    }
    None
}

fn read_at_full(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The sampler thread's loop: samples `root`'s tree every `interval` until
/// `stop`, sending each sample's writes to `tx`. Returns the counts
/// (`interval_ns` set).
pub fn sample(
    root: u32,
    interval: Duration,
    stop: Arc<AtomicBool>,
    tx: Sender<(Batch, u64)>,
) -> WriteSampling {
    let mut counts = WriteSampling {
        interval_ns: interval.as_nanos() as u64,
        ..WriteSampling::default()
    };
    let zero_pfn = zero_page_pfn();
    let mut tree = Tree::new(root);
    let mut sampled: HashSet<u32> = HashSet::new();
    let mut previous: HashMap<u32, Previous> = HashMap::new();
    let mut buf = Vec::new();
    let mut frames = Vec::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let step = interval.as_nanos() as u64;
    let mut due = monotonic_ns() + step;
    while !stop.load(Ordering::Acquire) {
        let now = monotonic_ns();
        if now < due {
            thread::sleep(Duration::from_nanos((due - now).min(step)));
            continue;
        }
        if now > due + step {
            counts.late_samples += 1;
            due = now;
        }
        due += step;
        counts.samples += 1;
        tree.update();
        seen.clear();
        let mut batch: Batch = Vec::new();
        let mut gone = Vec::new();
        for &pid in &tree.members {
            frames.clear();
            let prev = previous.entry(pid).or_default();
            match sample_process(pid, zero_pfn, prev, &mut buf, &mut frames, &mut counts) {
                Ok(()) => {
                    sampled.insert(pid);
                }
                Err(_) => {
                    counts.processes_vanished += 1;
                    gone.push(pid);
                    continue;
                }
            }
            let t = monotonic_ns() / 1000 * 1000;
            frames.sort_unstable();
            frames.dedup();
            for &pfn in &frames {
                if seen.insert(pfn) {
                    batch.push((t, pfn));
                } else {
                    counts.shared_duplicates += 1;
                }
            }
        }
        tree.members.retain(|p| !gone.contains(p));
        for p in &gone {
            previous.remove(p);
        }
        counts.writes += batch.len() as u64;
        // Every later write is stamped at or after now: the watermark the
        // recorder merges kernel events up to (sent even with no writes).
        let watermark = monotonic_ns() / 1000 * 1000;
        if tx.send((batch, watermark)).is_err() {
            break;
        }
    }
    counts.processes = sampled.len() as u64;
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pagemap_entries_are_sorted_out() {
        let mut out = Vec::new();
        let mut c = WriteSampling::default();
        let zero = Some(0x42);
        for e in [
            PRESENT | SOFT_DIRTY | 0x1234, // written
            PRESENT | 0x1235,              // clean
            PRESENT | SOFT_DIRTY | 0x42,   // the zero page
            SWAPPED | SOFT_DIRTY | 0x99,   // swapped out (offset, not a pfn)
            SOFT_DIRTY,                    // not present, not swapped
            PRESENT | SOFT_DIRTY,          // pfn hidden (not root)
        ] {
            out.extend(classify(e, zero, &mut c));
        }
        assert_eq!(out, vec![0x1234]);
        assert_eq!((c.zero_page, c.swapped), (1, 1));
    }

    #[test]
    fn parent_pid_survives_odd_command_names() {
        // Our own parent, read the way the tree reads everyone's.
        let me = std::process::id();
        // SAFETY: getppid cannot fail.
        let parent = unsafe { libc::getppid() } as u32;
        assert_eq!(parent_of(me), Some(parent));
    }

    #[test]
    fn the_tree_finds_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let mut tree = Tree::new(std::process::id());
        tree.update();
        let found = tree.members.contains(&child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found, "{:?} lacks {}", tree.members, child.id());
    }
}
