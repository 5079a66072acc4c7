//! The workloads of [`crate::pmo`] (`nvmos bench pmo`): seed 001's microbenchmarks (2D
//! convolution, LU decomposition, Gaussian elimination, tiled matrix
//! multiplication; PolyBench/Rodinia formulations) computing in place in
//! attached PMOs, a small file-server-like workload over many PMOs, and
//! Filebench's web server, web proxy and varmail personalities
//! ([`filebench`]).
//!
//! Every workload runs one PMO session: build its objects (sealed with
//! AES-256-GCM unless the mode is `plain`; not timed), then, timed: attach,
//! compute, psync the outputs, detach. The kernels touch every page of
//! every object they attach, so every page the predictor installs is used
//! there; the file server knows the pages each operation touches and counts
//! predicted pages used and wasted exactly.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use nvmos_pmo::attach::mem_backing::{MemBacking, Protection, PAGE_SIZE};
use nvmos_pmo::attach::{cache, AttachStats, Attachment, Mode, Perm, Tuning};
use nvmos_pmo::PageBacking;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::{BenchError, Context};

pub mod filebench;
use filebench::Personality;

type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Where a workload's objects live: one 4 GiB slot per object.
const REGION: usize = 0x6100_0000_0000;
const SLOT: usize = 1 << 32;

fn slot(i: usize) -> usize {
    REGION + i * SLOT
}

/// The workloads, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Conv2d,
    Lu,
    Gauss,
    MatMul,
    FileServer,
    WebServer,
    WebProxy,
    VarMail,
}

impl Workload {
    pub const ALL: [Workload; 8] = [
        Workload::Conv2d,
        Workload::Lu,
        Workload::Gauss,
        Workload::MatMul,
        Workload::FileServer,
        Workload::WebServer,
        Workload::WebProxy,
        Workload::VarMail,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Conv2d => "conv2d",
            Workload::Lu => "lu",
            Workload::Gauss => "gauss",
            Workload::MatMul => "matmul",
            Workload::FileServer => "fileserver",
            Workload::WebServer => Personality::WebServer.name(),
            Workload::WebProxy => Personality::WebProxy.name(),
            Workload::VarMail => Personality::VarMail.name(),
        }
    }

    /// The Filebench personality this workload runs, for the three of
    /// [`filebench`] (the file server predates them and keeps its own flow).
    pub fn personality(self) -> Option<Personality> {
        match self {
            Workload::WebServer => Some(Personality::WebServer),
            Workload::WebProxy => Some(Personality::WebProxy),
            Workload::VarMail => Some(Personality::VarMail),
            _ => None,
        }
    }

    /// Kernels whose first touches sweep their objects in address order.
    pub fn sequential(self) -> bool {
        matches!(self, Workload::Conv2d | Workload::Lu | Workload::Gauss)
    }
}

impl std::str::FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Workload::ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
                format!(
                    "unknown workload '{s}' (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// Problem sizes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sizes {
    /// 2D convolution: images of 256 × 1024 `f32`, this many of them.
    pub conv_images: usize,
    /// LU decomposition of an n × n `f64` matrix.
    pub lu_n: usize,
    /// Gaussian elimination of an n × (n + 1) `f64` augmented matrix.
    pub gauss_n: usize,
    /// Tiled multiplication of n × n `f32` matrices, tile 16.
    pub matmul_n: usize,
    /// File server: files, operations.
    pub files: usize,
    pub file_ops: usize,
    /// Filebench personalities: files in the set, flows run.
    pub filebench_files: usize,
    pub filebench_flows: usize,
}

impl Sizes {
    /// The largest sizes at which the full sweep (every configuration,
    /// three rounds) finishes in about half an hour on 2 cores; the
    /// talk's are larger (LU 6144, Gaussian elimination 18432, about
    /// 6·10^12 operations, matmul 4096), except conv2d's single image.
    pub fn full() -> Sizes {
        Sizes {
            conv_images: 32,
            lu_n: 1536,
            gauss_n: 1536,
            matmul_n: 1024,
            files: 400,
            file_ops: 3000,
            filebench_files: 400,
            filebench_flows: 600,
        }
    }

    pub fn quick() -> Sizes {
        Sizes {
            conv_images: 8,
            lu_n: 384,
            gauss_n: 384,
            matmul_n: 192,
            files: 100,
            file_ops: 600,
            filebench_files: 100,
            filebench_flows: 120,
        }
    }

    /// Set one workload's size from `NAME=N`: conv2d's image count, lu's,
    /// gauss's and matmul's n, fileserver's file count.
    pub fn set(&mut self, spec: &str) -> Result<(), String> {
        let bad = || format!("size {spec:?}: expected NAME=N with N ≥ 1 (conv2d=8, lu=1536, ...)");
        let (name, n) = spec.split_once('=').ok_or_else(bad)?;
        let n: usize = n.trim().parse().map_err(|_| bad())?;
        if n == 0 {
            return Err(bad());
        }
        let field = match name.parse::<Workload>()? {
            Workload::Conv2d => &mut self.conv_images,
            Workload::Lu => &mut self.lu_n,
            Workload::Gauss => &mut self.gauss_n,
            Workload::MatMul => &mut self.matmul_n,
            Workload::FileServer => &mut self.files,
            Workload::WebServer | Workload::WebProxy | Workload::VarMail => {
                &mut self.filebench_files
            }
        };
        *field = n;
        Ok(())
    }

    /// Refuse sizes whose objects do not fit the benchmark's 4 GiB
    /// address slots, naming the workload.
    pub fn check(&self) -> Result<(), String> {
        let largest = [
            (
                "conv2d",
                self.conv_images.checked_mul(CONV_NI * CONV_NJ * 4),
            ),
            (
                "lu",
                self.lu_n
                    .checked_mul(self.lu_n)
                    .and_then(|x| x.checked_mul(8)),
            ),
            (
                "gauss",
                self.gauss_n
                    .checked_mul(self.gauss_n + 1)
                    .and_then(|x| x.checked_mul(8)),
            ),
            (
                "matmul",
                self.matmul_n
                    .checked_mul(self.matmul_n)
                    .and_then(|x| x.checked_mul(4)),
            ),
        ];
        for (name, bytes) in largest {
            if !bytes.is_some_and(|b| (1..=SLOT).contains(&b)) {
                return Err(format!(
                    "sizes: a {name} object must be 1 byte to 4 GiB ({bytes:?} bytes)"
                ));
            }
        }
        if self.files == 0 || self.files > 4096 {
            return Err("sizes: files must be 1 to 4096".into());
        }
        Ok(())
    }

    /// What a workload computes, with its sizes.
    pub fn describe(&self, w: Workload) -> String {
        let mib = |bytes: usize| bytes as f64 / (1 << 20) as f64;
        match w {
            Workload::Conv2d => format!(
                "3×3 convolution of {} images of 256×1024 f32 (in and out: {:.0} MiB each)",
                self.conv_images,
                mib(self.conv_images * CONV_NI * CONV_NJ * 4)
            ),
            Workload::Lu => format!(
                "LU decomposition, {n}×{n} f64 in place ({:.1} MiB)",
                mib(self.lu_n * self.lu_n * 8),
                n = self.lu_n
            ),
            Workload::Gauss => format!(
                "Gaussian elimination and back substitution, {n}×{} f64 ({:.1} MiB)",
                self.gauss_n + 1,
                mib(self.gauss_n * (self.gauss_n + 1) * 8),
                n = self.gauss_n
            ),
            Workload::MatMul => format!(
                "tiled matrix multiplication, {n}×{n} f32, tile {MATMUL_TILE} (A, B, C: {:.2} MiB each)",
                mib(self.matmul_n * self.matmul_n * 4),
                n = self.matmul_n
            ),
            Workload::FileServer => format!(
                "{} files of 4–128 KiB, {} operations: 60% whole-file reads, 30% overwrites of 1–8 pages with psync, 10% delete and re-create; Zipf(1) popularity",
                self.files, self.file_ops
            ),
            Workload::WebServer => Personality::WebServer.describe(self.filebench_files, self.filebench_flows),
            Workload::WebProxy => Personality::WebProxy.describe(self.filebench_files, self.filebench_flows),
            Workload::VarMail => Personality::VarMail.describe(self.filebench_files, self.filebench_flows),
        }
    }
}

const CONV_NI: usize = 256;
const CONV_NJ: usize = 1024;
const MATMUL_TILE: usize = 16;

/// One measured session.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Session {
    /// Wall time of the timed part.
    pub ns: u64,
    /// Of which attaching the objects (kernels; 0 for the file server).
    pub attach_ns: u64,
    /// Of which the computation, faults included (kernels).
    pub compute_ns: u64,
    /// Of which psync and detach (kernels).
    pub sync_ns: u64,
    /// Counters summed over every attachment of the session.
    pub stats: AttachStats,
    /// Predicted pages the workload touched.
    pub predicted_used: u64,
    /// Predicted pages the workload never touched.
    pub predicted_wasted: u64,
    /// A result of the computation, so it cannot be optimised away and
    /// modes can be checked to agree.
    pub checksum: f64,
    /// File operations and bytes, for the Filebench personalities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<filebench::FileIo>,
}

/// How a session's objects are protected in `mode`, with integrity
/// verification (`iv`: GCM's tag, or a plain object's hashes) or without
/// (CTR, or plain): the same cipher either way.
pub fn protection(mode: Mode, iv: bool) -> Protection {
    match (mode, iv) {
        (Mode::Plain, false) => Protection::Plain,
        (Mode::Plain, true) => Protection::Hashed,
        (_, false) => Protection::Encrypted,
        (_, true) => Protection::Sealed,
    }
}

/// Attachments of one session and their accounting.
struct Run {
    mode: Mode,
    tuning: Tuning,
    protection: Protection,
    session: Session,
}

impl Run {
    fn new(mode: Mode, tuning: Tuning, iv: bool) -> Run {
        Run {
            mode,
            tuning,
            protection: protection(mode, iv),
            session: Session::default(),
        }
    }

    /// A new object of this session's protection at `base`.
    fn backing(&self, base: usize, bytes: &[u8]) -> Arc<MemBacking> {
        cache::evict(base);
        Arc::new(MemBacking::protected_with_contents(
            base,
            bytes,
            self.protection,
        ))
    }

    /// A new object of `pages` zero pages.
    fn empty(&self, base: usize, pages: usize) -> Arc<MemBacking> {
        cache::evict(base);
        Arc::new(MemBacking::protected(base, pages, self.protection))
    }

    fn attach(&self, object: &Arc<MemBacking>, perm: Perm) -> Result<Attachment> {
        Attachment::attach_tuned(object.clone(), perm, self.mode, self.tuning)
            .with_context(|| format!("attaching a benchmark object in mode {}", self.mode.label()))
    }

    /// Detach `a` (psync included), counting predicted pages against the
    /// pages the workload touched (`None`: every page).
    fn detach(&mut self, a: Attachment, touched: Option<&BTreeSet<usize>>) -> Result<()> {
        // psync first: it finds which predicted pages were written (seen
        // used); the rest are judged against what the workload touched.
        a.psync().context("psync of a benchmark object")?;
        let unseen = a.predicted_pages();
        let stats = a.detach().context("detaching a benchmark object")?;
        let used_unseen = match touched {
            None => unseen.len() as u64,
            Some(t) => unseen.iter().filter(|p| t.contains(p)).count() as u64,
        };
        self.session.predicted_used += stats.predicted_seen_used + used_unseen;
        self.session.predicted_wasted += unseen.len() as u64 - used_unseen;
        self.session.stats.add(&stats);
        Ok(())
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Run workload `w` once in `mode`, the fault path tuned by `tuning`, its
/// objects with integrity verification or without (`iv`, see
/// [`protection`]).
pub fn run(
    w: Workload,
    sizes: &Sizes,
    mode: Mode,
    iv: bool,
    tuning: Tuning,
    seed: u64,
) -> Result<Session> {
    let run = Run::new(mode, tuning, iv);
    if let Some(p) = w.personality() {
        let (files, flows) = (sizes.filebench_files, sizes.filebench_flows);
        return filebench::run(p, files, flows, run, seed);
    }
    match w {
        Workload::FileServer => fileserver(sizes.files, sizes.file_ops, run, seed),
        _ => kernel(&Input::new(w, sizes, seed), run),
    }
}

/// The kernel of workload `w` on ordinary, already resident memory: no
/// object, no fault, no psync. Returns the compute time and the checksum,
/// which must equal every mode's. The floor under every mode's compute
/// phase: what no fault path can go below. `None` for the file server and
/// the Filebench personalities, which have no compute phase apart from
/// their objects.
pub fn in_dram(w: Workload, sizes: &Sizes, seed: u64) -> Result<Option<(u64, f64)>> {
    let input = Input::new(w, sizes, seed);
    if input.objects.is_empty() {
        return Ok(None);
    }
    // Page-aligned, as an attached object is (a heap `Vec` starts 16 bytes
    // into a page, which splits every 64-byte tile row of matmul over two
    // cache lines), and resident before timing: every page written once.
    let mut buffers = input
        .objects
        .iter()
        .map(|o| PageAligned::new(o))
        .collect::<std::io::Result<Vec<_>>>()
        .context("mapping memory for the kernel's run on DRAM")?;
    let mut slices: Vec<&mut [u8]> = buffers.iter_mut().map(|b| b.bytes()).collect();
    let start = Instant::now();
    let checksum = compute(input.w, input.n, &mut slices);
    Ok(Some((start.elapsed().as_nanos() as u64, checksum)))
}

/// Anonymous page-aligned memory holding a copy of some bytes.
struct PageAligned {
    ptr: *mut u8,
    len: usize,
    map_len: usize,
}

impl PageAligned {
    fn new(bytes: &[u8]) -> std::io::Result<PageAligned> {
        let map_len = bytes.len().div_ceil(PAGE_SIZE).max(1) * PAGE_SIZE;
        // SAFETY: a fresh private anonymous mapping, checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `map_len >= bytes.len()` writable bytes, not overlapping.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.cast(), bytes.len()) };
        Ok(PageAligned {
            ptr: ptr.cast(),
            len: bytes.len(),
            map_len,
        })
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: our mapping of at least `len` bytes, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PageAligned {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no longer borrowed.
        unsafe { libc::munmap(self.ptr.cast(), self.map_len) };
    }
}

/// A kernel's objects before the run (not timed): their bytes and whether
/// each is written.
struct Input {
    w: Workload,
    n: usize,
    objects: Vec<Vec<u8>>,
    writable: Vec<bool>,
}

impl Input {
    fn new(w: Workload, sizes: &Sizes, seed: u64) -> Input {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (n, objects, writable) = match w {
            Workload::Conv2d => {
                let n = sizes.conv_images;
                let len = n * CONV_NI * CONV_NJ;
                let input: Vec<f32> = (0..len).map(|_| rng.gen::<f32>()).collect();
                (
                    n,
                    vec![f32_bytes(&input), vec![0u8; len * 4]],
                    vec![false, true],
                )
            }
            Workload::Lu => {
                let n = sizes.lu_n;
                (n, vec![f64_bytes(&dominant(n, n, &mut rng))], vec![true])
            }
            Workload::Gauss => {
                let n = sizes.gauss_n;
                let m = f64_bytes(&dominant(n, n + 1, &mut rng));
                (n, vec![m, vec![0u8; n * 8]], vec![true, true])
            }
            Workload::MatMul => {
                let n = sizes.matmul_n;
                let a0: Vec<f32> = (0..n * n).map(|_| rng.gen::<f32>()).collect();
                let b0: Vec<f32> = (0..n * n).map(|_| rng.gen::<f32>()).collect();
                let objects = vec![f32_bytes(&a0), f32_bytes(&b0), vec![0u8; n * n * 4]];
                (n, objects, vec![false, false, true])
            }
            // The file workloads build their own objects as they go.
            Workload::FileServer | Workload::WebServer | Workload::WebProxy | Workload::VarMail => {
                (0, Vec::new(), Vec::new())
            }
        };
        Input {
            w,
            n,
            objects,
            writable,
        }
    }
}

/// One PMO session of a kernel: build its objects (not timed), then,
/// timed: attach every object, compute, psync and detach each.
fn kernel(input: &Input, mut run: Run) -> Result<Session> {
    let objects: Vec<Arc<MemBacking>> = input
        .objects
        .iter()
        .enumerate()
        .map(|(i, bytes)| run.backing(slot(i), bytes))
        .collect();
    let start = Instant::now();
    let mut attached = Vec::new();
    for (o, &w) in objects.iter().zip(&input.writable) {
        attached.push(run.attach(o, if w { Perm::Write } else { Perm::Read })?);
    }
    let t_compute = Instant::now();
    let checksum = {
        let mut slices: Vec<&mut [u8]> = attached
            .iter_mut()
            .map(|a| {
                // SAFETY: the attachment's mapping lives as long as `a`;
                // read-only ones are only read by `compute` (their flag).
                unsafe { std::slice::from_raw_parts_mut(a.as_ptr(), a.len()) }
            })
            .collect();
        for (s, bytes) in slices.iter_mut().zip(&input.objects) {
            *s = &mut std::mem::take(s)[..bytes.len()];
        }
        compute(input.w, input.n, &mut slices)
    };
    let t_sync = Instant::now();
    for a in attached {
        run.detach(a, None)?;
    }
    let end = Instant::now();
    run.session.ns = (end - start).as_nanos() as u64;
    run.session.attach_ns = (t_compute - start).as_nanos() as u64;
    run.session.compute_ns = (t_sync - t_compute).as_nanos() as u64;
    run.session.sync_ns = (end - t_sync).as_nanos() as u64;
    run.session.checksum = checksum;
    for i in 0..objects.len() {
        cache::evict(slot(i));
    }
    Ok(run.session)
}

/// View bytes as `T`s.
fn cast<T>(bytes: &mut [u8]) -> &mut [T] {
    assert_eq!(bytes.as_ptr() as usize % std::mem::align_of::<T>(), 0);
    // SAFETY: `T` is f32 or f64 (every bit pattern valid), the pointer is
    // aligned (checked) and the length rounded down.
    unsafe {
        std::slice::from_raw_parts_mut(
            bytes.as_mut_ptr().cast(),
            bytes.len() / std::mem::size_of::<T>(),
        )
    }
}

/// The computation of kernel `w` on its objects, in their order; returns
/// its checksum. The same code runs on attached objects and on DRAM.
fn compute(w: Workload, n: usize, objects: &mut [&mut [u8]]) -> f64 {
    match (w, objects) {
        (Workload::Conv2d, [x, y]) => conv2d(n, cast(x), cast(y)),
        (Workload::Lu, [m]) => lu(n, cast(m)),
        (Workload::Gauss, [m, x]) => gauss(n, cast(m), cast(x)),
        (Workload::MatMul, [x, y, z]) => matmul(n, cast(x), cast(y), cast(z)),
        _ => unreachable!("Input::new gives each kernel its objects"),
    }
}

fn conv2d(images: usize, x: &[f32], y: &mut [f32]) -> f64 {
    // PolyBench 2DCONV's coefficients.
    let (c11, c12, c13) = (0.2f32, -0.3f32, 0.4f32);
    let (c21, c22, c23) = (0.5f32, 0.6f32, 0.7f32);
    let (c31, c32, c33) = (-0.8f32, -0.9f32, 0.10f32);
    for img in 0..images {
        let o = img * CONV_NI * CONV_NJ;
        let x = &x[o..o + CONV_NI * CONV_NJ];
        let y = &mut y[o..o + CONV_NI * CONV_NJ];
        // Border rows keep the input, so every output page is written.
        y[..CONV_NJ].copy_from_slice(&x[..CONV_NJ]);
        for i in 1..CONV_NI - 1 {
            let (up, mid, down) = (
                &x[(i - 1) * CONV_NJ..i * CONV_NJ],
                &x[i * CONV_NJ..(i + 1) * CONV_NJ],
                &x[(i + 1) * CONV_NJ..(i + 2) * CONV_NJ],
            );
            let row = &mut y[i * CONV_NJ..(i + 1) * CONV_NJ];
            row[0] = mid[0];
            row[CONV_NJ - 1] = mid[CONV_NJ - 1];
            for j in 1..CONV_NJ - 1 {
                row[j] = c11 * up[j - 1]
                    + c21 * up[j]
                    + c31 * up[j + 1]
                    + c12 * mid[j - 1]
                    + c22 * mid[j]
                    + c32 * mid[j + 1]
                    + c13 * down[j - 1]
                    + c23 * down[j]
                    + c33 * down[j + 1];
            }
        }
        let last = (CONV_NI - 1) * CONV_NJ;
        y[last..].copy_from_slice(&x[last..]);
    }
    y.iter().step_by(997).map(|&v| v as f64).sum()
}

/// A diagonally dominant matrix, so elimination without pivoting is stable.
fn dominant(n: usize, cols: usize, rng: &mut SmallRng) -> Vec<f64> {
    let mut m: Vec<f64> = (0..n * cols).map(|_| rng.gen::<f64>()).collect();
    for i in 0..n {
        m[i * cols + i] += n as f64;
    }
    m
}

fn lu(n: usize, m: &mut [f64]) -> f64 {
    // PolyBench lu (Doolittle, in place, no pivoting).
    for k in 0..n {
        let pivot = m[k * n + k];
        for j in k + 1..n {
            m[k * n + j] /= pivot;
        }
        let (top, rest) = m.split_at_mut((k + 1) * n);
        let row_k = &top[k * n..];
        for i in k + 1..n {
            let row_i = &mut rest[(i - k - 1) * n..(i - k) * n];
            let f = row_i[k];
            for j in k + 1..n {
                row_i[j] -= f * row_k[j];
            }
        }
    }
    (0..n).map(|i| m[i * n + i]).sum()
}

fn gauss(n: usize, m: &mut [f64], x: &mut [f64]) -> f64 {
    let cols = n + 1;
    // Rodinia gaussian: forward elimination, then back substitution.
    for k in 0..n {
        let (top, rest) = m.split_at_mut((k + 1) * cols);
        let row_k = &top[k * cols..];
        for i in k + 1..n {
            let row_i = &mut rest[(i - k - 1) * cols..(i - k) * cols];
            let f = row_i[k] / row_k[k];
            for j in k..cols {
                row_i[j] -= f * row_k[j];
            }
        }
    }
    for i in (0..n).rev() {
        let mut s = m[i * cols + n];
        for j in i + 1..n {
            s -= m[i * cols + j] * x[j];
        }
        x[i] = s / m[i * cols + i];
    }
    x[..n].iter().sum()
}

fn matmul(n: usize, x: &[f32], y: &[f32], z: &mut [f32]) -> f64 {
    let t = MATMUL_TILE;
    for ii in (0..n).step_by(t) {
        for kk in (0..n).step_by(t) {
            for jj in (0..n).step_by(t) {
                for i in ii..(ii + t).min(n) {
                    for k in kk..(kk + t).min(n) {
                        let aik = x[i * n + k];
                        let brow = &y[k * n + jj..k * n + (jj + t).min(n)];
                        let crow = &mut z[i * n + jj..i * n + (jj + t).min(n)];
                        for (cv, bv) in crow.iter_mut().zip(brow) {
                            *cv += aik * bv;
                        }
                    }
                }
            }
        }
    }
    z[..n * n].iter().step_by(97).map(|&v| v as f64).sum()
}

/// Zipf(1) over `n` items: the cumulative distribution to sample from.
fn zipf_cdf(n: usize) -> Vec<f64> {
    let weights: Vec<f64> = (1..=n).map(|k| 1.0 / k as f64).collect();
    let total: f64 = weights.iter().sum();
    let mut acc = 0.0;
    weights
        .iter()
        .map(|w| {
            acc += w / total;
            acc
        })
        .collect()
}

fn fileserver(files: usize, ops: usize, mut run: Run, seed: u64) -> Result<Session> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let new_file = |run: &Run, rng: &mut SmallRng, i: usize| {
        let pages = rng.gen_range(1..=32usize);
        let bytes: Vec<u8> = (0..pages * PAGE_SIZE).map(|_| rng.gen()).collect();
        run.backing(slot(i), &bytes)
    };
    let mut table: Vec<Arc<MemBacking>> = (0..files).map(|i| new_file(&run, &mut rng, i)).collect();
    let cdf = zipf_cdf(files);
    // The operation sequence is drawn before timing, the same in every mode.
    let plan: Vec<(usize, f64, u64)> = (0..ops)
        .map(|_| {
            let u: f64 = rng.gen();
            let f = cdf.partition_point(|&c| c < u).min(files - 1);
            (f, rng.gen::<f64>(), rng.gen::<u64>())
        })
        .collect();
    let mut checksum = 0.0;
    let start = Instant::now();
    for (f, kind, r) in plan {
        let pages = table[f].page_count();
        if kind < 0.6 {
            let a = run.attach(&table[f], Perm::Read)?;
            let sum: u64 = a.as_slice().iter().step_by(64).map(|&b| b as u64).sum();
            checksum += sum as f64;
            run.detach(a, None)?;
        } else if kind < 0.9 {
            let len = 1 + (r % 8) as usize;
            let first = ((r >> 8) as usize) % pages;
            let last = (first + len).min(pages);
            let mut a = run.attach(&table[f], Perm::Write)?;
            {
                let s = a.as_mut_slice().expect("writable");
                for p in first..last {
                    s[p * PAGE_SIZE..(p + 1) * PAGE_SIZE].fill((r >> 16) as u8 ^ p as u8);
                }
            }
            let touched: BTreeSet<usize> = (first..last).collect();
            run.detach(a, Some(&touched))?;
        } else {
            // Delete and re-create: a new object (new contents, new size)
            // at the same address; its DRAM cache goes with the old one.
            let mut rng = SmallRng::seed_from_u64(r);
            table[f] = new_file(&run, &mut rng, f);
        }
    }
    run.session.ns = start.elapsed().as_nanos() as u64;
    run.session.checksum = checksum;
    for i in 0..files {
        cache::evict(slot(i));
    }
    Ok(run.session)
}
