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

use nvmos_pmo::attach::mem_backing::{MemBacking, PAGE_SIZE};
use nvmos_pmo::attach::{cache, AttachStats, Attachment, Mode, Perm};
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
    pub fn full() -> Sizes {
        Sizes {
            conv_images: 32,
            lu_n: 768,
            gauss_n: 768,
            matmul_n: 384,
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
            Workload::WebServer | Workload::WebProxy | Workload::VarMail => w
                .personality()
                .expect("a personality")
                .describe(self.filebench_files, self.filebench_flows),
        }
    }
}

const CONV_NI: usize = 256;
const CONV_NJ: usize = 1024;
const MATMUL_TILE: usize = 16;

/// One measured session.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Session {
    /// Wall time of the timed part.
    pub ns: u64,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<filebench::FileIo>,
}

fn add(total: &mut AttachStats, s: &AttachStats) {
    total.faults += s.faults;
    total.wp_faults += s.wp_faults;
    total.pages_decrypted += s.pages_decrypted;
    total.pages_read += s.pages_read;
    total.cache_hits += s.cache_hits;
    total.predicted += s.predicted;
    total.predicted_seen_used += s.predicted_seen_used;
    total.predicted_late += s.predicted_late;
    total.predicted_skipped += s.predicted_skipped;
    total.handler_ns += s.handler_ns;
    total.worker_ns += s.worker_ns;
    total.psyncs += s.psyncs;
    total.pages_synced += s.pages_synced;
    total.psync_ns += s.psync_ns;
    total.failed_pages += s.failed_pages;
}

/// Attachments of one session and their accounting.
struct Run {
    mode: Mode,
    session: Session,
}

impl Run {
    fn new(mode: Mode) -> Run {
        Run {
            mode,
            session: Session::default(),
        }
    }

    fn attach(&self, object: &Arc<MemBacking>, perm: Perm) -> Result<Attachment> {
        Attachment::attach(object.clone(), perm, self.mode)
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
        add(&mut self.session.stats, &stats);
        Ok(())
    }
}

fn backing(base: usize, bytes: &[u8], mode: Mode) -> Arc<MemBacking> {
    cache::evict(base);
    Arc::new(MemBacking::with_contents(base, bytes, mode != Mode::Plain))
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// View an attachment as `T`s.
///
/// # Safety
/// `T` is `f32` or `f64`: every bit pattern is valid, and the mapping is
/// page aligned.
unsafe fn view<T>(a: &Attachment) -> &[T] {
    std::slice::from_raw_parts(a.as_ptr() as *const T, a.len() / std::mem::size_of::<T>())
}

/// # Safety
/// As [`view`]; `a` is writable.
unsafe fn view_mut<T>(a: &mut Attachment) -> &mut [T] {
    let len = a.len() / std::mem::size_of::<T>();
    let ptr = a
        .as_mut_slice()
        .expect("a writable attachment")
        .as_mut_ptr();
    std::slice::from_raw_parts_mut(ptr as *mut T, len)
}

/// Run workload `w` once in `mode`.
pub fn run(w: Workload, sizes: &Sizes, mode: Mode, seed: u64) -> Result<Session> {
    match w {
        Workload::Conv2d => conv2d(sizes.conv_images, mode, seed),
        Workload::Lu => lu(sizes.lu_n, mode, seed),
        Workload::Gauss => gauss(sizes.gauss_n, mode, seed),
        Workload::MatMul => matmul(sizes.matmul_n, mode, seed),
        Workload::FileServer => fileserver(sizes.files, sizes.file_ops, mode, seed),
        Workload::WebServer | Workload::WebProxy | Workload::VarMail => filebench::run(
            w.personality().expect("a personality"),
            sizes.filebench_files,
            sizes.filebench_flows,
            mode,
            seed,
        ),
    }
}

fn conv2d(images: usize, mode: Mode, seed: u64) -> Result<Session> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let n = images * CONV_NI * CONV_NJ;
    let input: Vec<f32> = (0..n).map(|_| rng.gen::<f32>()).collect();
    let inp = backing(slot(0), &f32_bytes(&input), mode);
    let out = backing(slot(1), &vec![0u8; n * 4], mode);
    drop(input);
    let mut run = Run::new(mode);
    let start = Instant::now();
    let a = run.attach(&inp, Perm::Read)?;
    let mut b = run.attach(&out, Perm::Write)?;
    let checksum;
    {
        // SAFETY: f32 views of page-aligned mappings.
        let (x, y) = unsafe { (view::<f32>(&a), view_mut::<f32>(&mut b)) };
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
        checksum = y.iter().step_by(997).map(|&v| v as f64).sum();
    }
    run.detach(a, None)?;
    run.detach(b, None)?;
    run.session.ns = start.elapsed().as_nanos() as u64;
    run.session.checksum = checksum;
    Ok(run.session)
}

/// A diagonally dominant matrix, so elimination without pivoting is stable.
fn dominant(n: usize, cols: usize, rng: &mut SmallRng) -> Vec<f64> {
    let mut m: Vec<f64> = (0..n * cols).map(|_| rng.gen::<f64>()).collect();
    for i in 0..n {
        m[i * cols + i] += n as f64;
    }
    m
}

fn lu(n: usize, mode: Mode, seed: u64) -> Result<Session> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let obj = backing(slot(0), &f64_bytes(&dominant(n, n, &mut rng)), mode);
    let mut run = Run::new(mode);
    let start = Instant::now();
    let mut a = run.attach(&obj, Perm::Write)?;
    let checksum;
    {
        // SAFETY: an f64 view of a page-aligned mapping.
        let m = unsafe { view_mut::<f64>(&mut a) };
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
        checksum = (0..n).map(|i| m[i * n + i]).sum();
    }
    run.detach(a, None)?;
    run.session.ns = start.elapsed().as_nanos() as u64;
    run.session.checksum = checksum;
    Ok(run.session)
}

fn gauss(n: usize, mode: Mode, seed: u64) -> Result<Session> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let cols = n + 1;
    let obj = backing(slot(0), &f64_bytes(&dominant(n, cols, &mut rng)), mode);
    let xobj = backing(slot(1), &vec![0u8; n * 8], mode);
    let mut run = Run::new(mode);
    let start = Instant::now();
    let mut a = run.attach(&obj, Perm::Write)?;
    let mut xa = run.attach(&xobj, Perm::Write)?;
    let checksum;
    {
        // SAFETY: f64 views of page-aligned mappings.
        let (m, x) = unsafe { (view_mut::<f64>(&mut a), view_mut::<f64>(&mut xa)) };
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
        checksum = x[..n].iter().sum();
    }
    run.detach(a, None)?;
    run.detach(xa, None)?;
    run.session.ns = start.elapsed().as_nanos() as u64;
    run.session.checksum = checksum;
    Ok(run.session)
}

fn matmul(n: usize, mode: Mode, seed: u64) -> Result<Session> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let a0: Vec<f32> = (0..n * n).map(|_| rng.gen::<f32>()).collect();
    let b0: Vec<f32> = (0..n * n).map(|_| rng.gen::<f32>()).collect();
    let ao = backing(slot(0), &f32_bytes(&a0), mode);
    let bo = backing(slot(1), &f32_bytes(&b0), mode);
    let co = backing(slot(2), &vec![0u8; n * n * 4], mode);
    let mut run = Run::new(mode);
    let start = Instant::now();
    let a = run.attach(&ao, Perm::Read)?;
    let b = run.attach(&bo, Perm::Read)?;
    let mut c = run.attach(&co, Perm::Write)?;
    let checksum;
    {
        // SAFETY: f32 views of page-aligned mappings.
        let (x, y, z) = unsafe { (view::<f32>(&a), view::<f32>(&b), view_mut::<f32>(&mut c)) };
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
        checksum = z[..n * n].iter().step_by(97).map(|&v| v as f64).sum();
    }
    run.detach(a, None)?;
    run.detach(b, None)?;
    run.detach(c, None)?;
    run.session.ns = start.elapsed().as_nanos() as u64;
    run.session.checksum = checksum;
    Ok(run.session)
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

fn fileserver(files: usize, ops: usize, mode: Mode, seed: u64) -> Result<Session> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let new_file = |rng: &mut SmallRng, i: usize| {
        let pages = rng.gen_range(1..=32usize);
        let bytes: Vec<u8> = (0..pages * PAGE_SIZE).map(|_| rng.gen()).collect();
        backing(slot(i), &bytes, mode)
    };
    let mut table: Vec<Arc<MemBacking>> = (0..files).map(|i| new_file(&mut rng, i)).collect();
    let cdf = zipf_cdf(files);
    // The operation sequence is drawn before timing, the same in every mode.
    let plan: Vec<(usize, f64, u64)> = (0..ops)
        .map(|_| {
            let u: f64 = rng.gen();
            let f = cdf.partition_point(|&c| c < u).min(files - 1);
            (f, rng.gen::<f64>(), rng.gen::<u64>())
        })
        .collect();
    let mut run = Run::new(mode);
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
            table[f] = new_file(&mut rng, f);
        }
    }
    run.session.ns = start.elapsed().as_nanos() as u64;
    run.session.checksum = checksum;
    for i in 0..files {
        cache::evict(slot(i));
    }
    Ok(run.session)
}
