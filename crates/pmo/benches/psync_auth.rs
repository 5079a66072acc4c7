//! What authentication costs per psync, measured in the psyncs
//! themselves: for N dirty pages of an encrypted object, the psync (seal
//! the N pages with AES-256-GCM, write them, new table pages, root, record
//! flip) against its authentication parts alone — table sealing (SHA-256 of
//! each new table page), root binding (HMAC-SHA-256 of the root body: object
//! id, epoch, pool id, slot, table hashes) and the record's hash of the
//! stored root — timed by the library where psync does them
//! ([`nvmos_pmo::AuthTime`]). Also, in the same run, the same psyncs with
//! the state store (one file write, fsync, rename and folder fsync per
//! commit), which the CLI always uses.
//!
//! ```text
//! cargo bench -p nvmos-pmo --bench psync_auth -- [--pages 1,16,64,256] [--psyncs 400] [--dir /dev/shm]
//! ```
//!
//! Prints one line per (N, state store): median psync µs, median
//! authentication µs, and authentication as a share of psync time (sum over
//! all psyncs of the row). Medians of per-psync samples; rows are
//! interleaved round by round so load changes hit every row alike.

use std::path::{Path, PathBuf};
use std::time::Instant;

use nvmos_pmo::{KdfParams, Perm, Pool, PoolOptions};

const PAGE: usize = 4096;
const KEY: &[u8] = b"benchmark key, not a secret";

struct Args {
    pages: Vec<usize>,
    psyncs: usize,
    dir: PathBuf,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        pages: vec![1, 16, 64, 256],
        psyncs: 400,
        dir: if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        },
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--pages" => {
                a.pages = value("--pages")?
                    .split(',')
                    .map(|p| {
                        p.trim()
                            .parse::<usize>()
                            .ok()
                            .filter(|&n| n > 0)
                            .ok_or(format!("--pages: {p:?} is not a positive number"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--psyncs" => {
                a.psyncs = value("--psyncs")?
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n >= 3)
                    .ok_or("--psyncs needs a number ≥ 3")?
            }
            "--dir" => a.dir = PathBuf::from(value("--dir")?),
            // cargo bench passes --bench to every bench program.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

struct Row {
    pages: usize,
    store: bool,
    psync_ns: Vec<u64>,
    commit_ns: Vec<u64>,
    auth_ns: Vec<u64>,
}

fn median(v: &[u64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s[s.len() / 2] as f64
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let work = tempfile::tempdir_in(&args.dir).expect("a folder for the pools");
    let store = tempfile::tempdir().expect("a folder for the state store");
    let max_pages = *args.pages.iter().max().expect("at least one size");
    // Room for the object twice over (old and new versions) and its tables.
    let object_pages = max_pages.max(64) * 4;
    let pool_bytes = ((object_pages * 3 + 1024) * PAGE) as u64;
    let mut handles = Vec::new();
    let mut rows = Vec::new();
    for &n in &args.pages {
        for with_store in [false, true] {
            let opts = PoolOptions {
                state_dir: with_store.then(|| store.path().to_owned()),
                ..PoolOptions::default()
            };
            let path = work.path().join(format!("pool-{n}-{with_store}"));
            let pool = Pool::create_with(&path, pool_bytes, opts).expect("creating a pool");
            pool.pcreate_with(
                "obj",
                (object_pages * PAGE) as u64,
                Some(KEY),
                KdfParams::INSECURE_FAST,
            )
            .expect("creating the object");
            let h = pool
                .open_object("obj", Perm::Write, Some(KEY))
                .expect("opening the object");
            // One untimed pass writes every page once.
            let page = vec![0x5Au8; PAGE];
            for i in 0..object_pages {
                h.stage(i, &page).expect("staging");
            }
            h.psync().expect("psync");
            handles.push((pool, h));
            rows.push(Row {
                pages: n,
                store: with_store,
                psync_ns: Vec::new(),
                commit_ns: Vec::new(),
                auth_ns: Vec::new(),
            });
        }
    }
    let mut page = vec![0u8; PAGE];
    for round in 0..args.psyncs {
        for (row, (_, h)) in rows.iter_mut().zip(&handles) {
            // N consecutive pages, sweeping the object.
            let first = (round * row.pages) % (object_pages - row.pages + 1);
            page[..8].copy_from_slice(&(round as u64).to_le_bytes());
            let before = h.auth_time();
            let t0 = Instant::now();
            // Staged as one run, as an attachment's psync stages its dirty pages.
            let run: Vec<(usize, &[u8])> =
                (first..first + row.pages).map(|i| (i, &page[..])).collect();
            h.stage_pages(&run).expect("staging");
            let t1 = Instant::now();
            h.psync().expect("psync");
            let t2 = Instant::now();
            let after = h.auth_time();
            assert_eq!(after.psyncs, before.psyncs + 1, "one psync timed");
            row.psync_ns.push((t2 - t0).as_nanos() as u64);
            row.commit_ns.push((t2 - t1).as_nanos() as u64);
            row.auth_ns.push(after.total_ns() - before.total_ns());
        }
    }
    println!(
        "psync of N dirty pages of an AES-256-GCM object, {} psyncs per row, pools in {}, state store in {}",
        args.psyncs,
        args.dir.display(),
        store.path().parent().unwrap_or(store.path()).display()
    );
    println!(
        "{:>5} {:>11} {:>11} {:>12} {:>10} {:>8} {:>11}",
        "N", "state store", "psync µs", "of it commit", "auth µs", "auth %", "auth/page ns"
    );
    for r in &rows {
        let total: u64 = r.psync_ns.iter().sum();
        let auth: u64 = r.auth_ns.iter().sum();
        println!(
            "{:>5} {:>11} {:>11.1} {:>12.1} {:>10.2} {:>7.2}% {:>11.0}",
            r.pages,
            if r.store { "yes" } else { "no" },
            median(&r.psync_ns) / 1e3,
            median(&r.commit_ns) / 1e3,
            median(&r.auth_ns) / 1e3,
            100.0 * auth as f64 / total as f64,
            auth as f64 / (r.psync_ns.len() * r.pages) as f64
        );
    }
    println!("auth = table sealing (SHA-256 per new table page) + root binding (HMAC-SHA-256) + record hash (SHA-256 of the stored root); auth % = sum of auth / sum of psync time over the row's psyncs");
}
