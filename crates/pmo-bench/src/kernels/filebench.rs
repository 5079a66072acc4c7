//! Filebench's web server, web proxy and varmail personalities (seed 001's
//! Figure 4) over PMOs: one object per file, attach for open, detach for
//! close, psync for fsync.
//!
//! The flows follow Filebench's `webserver.f`, `webproxy.f` and
//! `varmail.f` (one thread; the file sets are scaled down, see
//! [`Personality::describe`]):
//!
//! - **web server**: open, read the whole file, close, for 10 files; then
//!   append to one shared log file.
//! - **web proxy**: delete a file, create it, append to it, close; then
//!   open, read whole, close, for 5 files.
//! - **varmail**: delete a file; create, append, fsync, close; open a
//!   file, read it whole, append, fsync, close; open a file, read it
//!   whole, close.
//!
//! What a PMO changes and the flows keep explicit:
//! - A PMO has a fixed size, so a file is an object with room for appends
//!   ([`FILE_CAPACITY_PAGES`]; the log: enough for every append of the
//!   run). The file's length is kept by the benchmark, as a file system
//!   keeps it in the inode. An append that would pass the capacity starts
//!   the file over at length 0 (a log rotation); rotations are counted.
//! - A PMO has no page cache to write back later: closing a written file
//!   detaches it, and detach psyncs. So every append is durable at its
//!   close, where Filebench's web server and web proxy leave appends in
//!   the page cache; varmail's explicit fsync is a psync before the close.
//! - Files are picked uniformly, as Filebench picks from a file set.
//!   Sizes are 1–8 pages (mean 18 KiB; Filebench: gamma-distributed, mean
//!   16 KiB); appends 1–4 pages (mean 10 KiB; Filebench: mean 16 KiB,
//!   here smaller so a file of the set does not fill at once).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use nvmos_pmo::attach::mem_backing::{MemBacking, PAGE_SIZE};
use nvmos_pmo::attach::{cache, Attachment, Perm};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{slot, Result, Run, Session};

/// Room of each file of the set, in pages: its largest initial size (8)
/// plus appends.
pub const FILE_CAPACITY_PAGES: usize = 24;

/// Filebench personalities beside the file server of [`super`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Personality {
    WebServer,
    WebProxy,
    VarMail,
}

impl Personality {
    pub fn describe(self, files: usize, flows: usize) -> String {
        let flow = match self {
            Personality::WebServer => {
                "each: 10 × (open, read whole, close), append 1–4 pages to a shared log (psync at close)"
            }
            Personality::WebProxy => {
                "each: delete, create, append 1–4 pages, close (psync); 5 × (open, read whole, close)"
            }
            Personality::VarMail => {
                "each: delete; create, append, psync, close; open, read whole, append, psync, close; open, read whole, close"
            }
        };
        format!(
            "Filebench {} over PMOs: {files} files of 1–8 pages (room for {FILE_CAPACITY_PAGES}), {flows} flows, {flow}; uniform file choice",
            self.name()
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Personality::WebServer => "webserver",
            Personality::WebProxy => "webproxy",
            Personality::VarMail => "varmail",
        }
    }
}

/// One file of the set: its object and its length in pages.
struct File {
    object: Arc<MemBacking>,
    len: usize,
}

/// Drawn before timing, identical in every mode.
struct Plan {
    /// Per flow: the random words its steps consume, in order.
    flows: Vec<[u64; 8]>,
    /// Initial lengths and contents seeds of the set.
    initial: Vec<(usize, u64)>,
}

fn plan(files: usize, flows: usize, seed: u64) -> Plan {
    let mut rng = SmallRng::seed_from_u64(seed);
    let initial = (0..files)
        .map(|_| (rng.gen_range(1..=8usize), rng.gen::<u64>()))
        .collect();
    let flows = (0..flows).map(|_| rng.gen::<[u64; 8]>()).collect();
    Plan { flows, initial }
}

/// Contents of a file's page: a function of the file's seed and the page,
/// so every mode reads the same bytes.
fn page_bytes(seed: u64, page: usize) -> [u8; PAGE_SIZE] {
    let mut rng = SmallRng::seed_from_u64(seed ^ (page as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut b = [0u8; PAGE_SIZE];
    rng.fill(&mut b[..]);
    b
}

/// The state of one run: the file set (the web server's log, when there
/// is one, after it), and the accounting.
struct Set {
    run: Run,
    files: Vec<File>,
    checksum: f64,
    bytes_read: u64,
    bytes_written: u64,
    rotations: u64,
    ops: u64,
}

impl Set {
    /// A new, empty file in slot `i` with room for `capacity` pages.
    fn create(&self, i: usize, capacity: usize) -> File {
        File {
            object: self.run.empty(slot(i), capacity),
            len: 0,
        }
    }

    /// Open, read whole, close.
    fn read_whole(&mut self, i: usize) -> Result<()> {
        let (object, len) = {
            let f = &self.files[i];
            (f.object.clone(), f.len)
        };
        let a = self.run.attach(&object, Perm::Read)?;
        // The file's length, as a file system knows it: read-ahead stops
        // at the end of the file, not of the room for appends.
        a.set_extent(len);
        let bytes = &a.as_slice()[..len * PAGE_SIZE];
        let sum: u64 = bytes.iter().step_by(64).map(|&b| b as u64).sum();
        self.checksum += sum as f64;
        self.bytes_read += bytes.len() as u64;
        let touched: BTreeSet<usize> = (0..len).collect();
        self.run.detach(a, Some(&touched))?;
        self.ops += 1;
        Ok(())
    }

    /// Append `pages` pages (contents from `seed`) to an attached file;
    /// returns the pages written. Starts the file over when it is full.
    fn append(&mut self, a: &mut Attachment, i: usize, pages: usize, seed: u64) -> Vec<usize> {
        let capacity = a.len() / PAGE_SIZE;
        let f = &mut self.files[i];
        let mut rotated = false;
        if f.len + pages > capacity {
            f.len = 0;
            rotated = true;
        }
        let first = f.len;
        f.len += pages;
        let s = a.as_mut_slice().expect("a writable attachment");
        for p in first..first + pages {
            s[p * PAGE_SIZE..(p + 1) * PAGE_SIZE].copy_from_slice(&page_bytes(seed, p));
        }
        self.rotations += rotated as u64;
        self.bytes_written += (pages * PAGE_SIZE) as u64;
        self.ops += 1;
        (first..first + pages).collect()
    }

    /// Open for writing, optionally read whole first, append, optionally
    /// psync (fsync), close (detach psyncs).
    fn open_append(
        &mut self,
        i: usize,
        read_first: bool,
        pages: usize,
        seed: u64,
        fsync: bool,
    ) -> Result<()> {
        let object = self.files[i].object.clone();
        let mut a = self.run.attach(&object, Perm::Write)?;
        a.set_extent(self.files[i].len);
        let mut touched = BTreeSet::new();
        if read_first {
            let len = self.files[i].len;
            let bytes = &a.as_slice()[..len * PAGE_SIZE];
            let sum: u64 = bytes.iter().step_by(64).map(|&b| b as u64).sum();
            self.checksum += sum as f64;
            self.bytes_read += bytes.len() as u64;
            touched.extend(0..len);
            self.ops += 1;
        }
        touched.extend(self.append(&mut a, i, pages, seed));
        if fsync {
            use crate::Context;
            a.psync().context("fsync (psync) of a Filebench file")?;
            self.ops += 1;
        }
        self.run.detach(a, Some(&touched))?;
        Ok(())
    }

    /// Delete file `i` and create it empty.
    fn recreate(&mut self, i: usize) {
        self.files[i] = self.create(i, FILE_CAPACITY_PAGES);
        self.ops += 2;
    }
}

/// Run `p` once in `mode` over `files` files and `flows` flows.
pub(super) fn run(
    p: Personality,
    files: usize,
    flows: usize,
    run: Run,
    seed: u64,
) -> Result<Session> {
    let plan = plan(files, flows, seed);
    let mut set = Set {
        run,
        files: Vec::with_capacity(files),
        checksum: 0.0,
        bytes_read: 0,
        bytes_written: 0,
        rotations: 0,
        ops: 0,
    };
    // The file set, built before timing (Filebench preallocates it too).
    for (i, &(len, s)) in plan.initial.iter().enumerate() {
        let mut bytes = Vec::with_capacity(FILE_CAPACITY_PAGES * PAGE_SIZE);
        for page in 0..len {
            bytes.extend_from_slice(&page_bytes(s, page));
        }
        bytes.resize(FILE_CAPACITY_PAGES * PAGE_SIZE, 0);
        set.files.push(File {
            object: set.run.backing(slot(i), &bytes),
            len,
        });
    }
    if p == Personality::WebServer {
        // Room for every append of the run: no rotation of the log.
        let log = set.create(files, flows * 4);
        set.files.push(log);
    }
    let pick = |w: u64| (w % files as u64) as usize;
    let pages = |w: u64| 1 + ((w >> 32) % 4) as usize;
    let start = Instant::now();
    for w in &plan.flows {
        match p {
            Personality::WebServer => {
                for &word in w {
                    set.read_whole(pick(word))?;
                }
                // Filebench reads 10 files a flow; two more from the
                // remaining words, shifted so they differ from the first.
                set.read_whole(pick(w[0] >> 16))?;
                set.read_whole(pick(w[1] >> 16))?;
                set.open_append(files, false, pages(w[2]), w[3], false)?;
            }
            Personality::WebProxy => {
                let f = pick(w[0]);
                set.recreate(f);
                set.open_append(f, false, pages(w[0]), w[1], false)?;
                for &word in &w[2..7] {
                    set.read_whole(pick(word))?;
                }
            }
            Personality::VarMail => {
                let f = pick(w[0]);
                set.recreate(f);
                set.open_append(f, false, pages(w[0]), w[1], true)?;
                set.open_append(pick(w[2]), true, pages(w[2]), w[3], true)?;
                set.read_whole(pick(w[4]))?;
            }
        }
    }
    let mut session = set.run.session;
    session.ns = start.elapsed().as_nanos() as u64;
    session.checksum = set.checksum;
    session.io = Some(FileIo {
        ops: set.ops,
        bytes_read: set.bytes_read,
        bytes_written: set.bytes_written,
        rotations: set.rotations,
    });
    for i in 0..=files {
        cache::evict(slot(i));
    }
    Ok(session)
}

/// What a Filebench personality did in one session: Filebench's own
/// figures (operations, bandwidth) come from these and the session's time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FileIo {
    /// File operations (open-read-close counts one read; create and
    /// delete count one each; append, fsync one each).
    pub ops: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Appends that found their file full and started it over.
    pub rotations: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_pmo::attach::predict::PredictorKind;
    use nvmos_pmo::attach::{Mode, Tuning};

    fn session(mode: Mode) -> Run {
        Run::new(mode, Tuning::default(), true)
    }

    /// Objects live at fixed addresses (the slots): one test at a time.
    static SLOTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn slots() -> std::sync::MutexGuard<'static, ()> {
        SLOTS.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn every_mode_reads_the_same_bytes_and_counts_its_io() {
        let _slots = slots();
        for p in [
            Personality::WebServer,
            Personality::WebProxy,
            Personality::VarMail,
        ] {
            let plain = run(p, 12, 20, session(Mode::Plain), 7).unwrap();
            let enc = run(p, 12, 20, session(Mode::DecryptAtFault), 7).unwrap();
            assert_eq!(plain.checksum.to_bits(), enc.checksum.to_bits(), "{p:?}");
            assert!(plain.checksum > 0.0, "{p:?} read nothing");
            let io = plain.io.unwrap();
            assert_eq!(io, enc.io.unwrap(), "{p:?}");
            assert!(io.bytes_read > 0 && io.bytes_written > 0, "{p:?}: {io:?}");
            // Every append psyncs at close: at least one psync per flow.
            assert!(plain.stats.psyncs >= 20, "{p:?}: {:?}", plain.stats.psyncs);
        }
    }

    #[test]
    fn varmail_counts_its_operations() {
        let _slots = slots();
        let s = run(Personality::VarMail, 3, 40, session(Mode::Plain), 1).unwrap();
        // Per flow: delete + create (2), append + fsync (2), read + append
        // + fsync (3), read (1).
        assert_eq!(s.io.unwrap().ops, 40 * 8);
        // Two psyncs per flow for the fsyncs, plus one per written close
        // (with nothing left to sync) and per read-only close.
        assert!(s.stats.psyncs >= 40 * 2, "{:?}", s.stats.psyncs);
    }

    #[test]
    fn prediction_stops_at_the_end_of_each_file() {
        let _slots = slots();
        for predictor in [PredictorKind::Stream, PredictorKind::Adaptive] {
            let mode = Mode::Predict {
                predictor,
                depth: 64,
            };
            let s = run(Personality::WebServer, 12, 30, session(mode), 3).unwrap();
            // Files of 1–8 pages in objects of 24: a predictor blind to
            // the length would install up to 23 pages past it per read.
            assert!(s.stats.predicted > 0, "{predictor:?}: {:?}", s.stats);
            assert_eq!(s.predicted_wasted, 0, "{predictor:?}: {:?}", s.stats);
            assert!(s.stats.predicted_past_extent > 0, "{predictor:?}");
        }
    }

    #[test]
    fn an_append_past_the_room_starts_the_file_over() {
        let _slots = slots();
        let mut set = Set {
            run: session(Mode::Plain),
            files: Vec::new(),
            checksum: 0.0,
            bytes_read: 0,
            bytes_written: 0,
            rotations: 0,
            ops: 0,
        };
        let file = set.create(0, 4);
        set.files.push(file);
        set.open_append(0, false, 3, 11, false).unwrap();
        assert_eq!((set.files[0].len, set.rotations), (3, 0));
        set.open_append(0, false, 3, 12, false).unwrap();
        assert_eq!((set.files[0].len, set.rotations), (3, 1));
        // What is there is the second append's first page.
        set.read_whole(0).unwrap();
        let a = set
            .run
            .attach(&set.files[0].object.clone(), Perm::Read)
            .unwrap();
        assert_eq!(&a.as_slice()[..PAGE_SIZE], &page_bytes(12, 0)[..]);
        set.run.detach(a, None).unwrap();
        cache::evict(slot(0));
    }
}
