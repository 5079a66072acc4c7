//! Write the request streams the book compares with DRAMSim3 and
//! Ramulator 2, in both simulators' trace formats, into a folder:
//! `<stream>.dramsim3.trace` (`0x<addr> READ|WRITE <cycle>`) and
//! `<stream>.ramulator.trace` (`LD|ST <addr>`, no times: saturated).
//!
//! Streams (64-byte requests within the first 16 GiB):
//! The Ramulator 2 traces carry each address rearranged so that Ramulator
//! 2's `RoBaRaCoCh` mapper (column, rank, bank group, bank, row from bit 6
//! up) finds the same rank, bank group, bank, row and column as DRAMSim3's
//! `rochrababgco` (column, bank group, bank, rank, row) finds in the
//! original: the same stream on the same banks in both.
//!
//! - `seq-light`, `rand-light`, `mix-light`: sequential lines, uniformly
//!   random lines, random lines with two reads to one write; one request
//!   every 20 cycles;
//! - `rand-8`: random reads, one every 8 cycles;
//! - `seq-sat`, `rand-sat`, `mix-sat`, `stride-sat`: the same all at cycle
//!   0 (the simulator takes them as fast as its queues allow); `stride`
//!   steps 8 KiB + 64 B, so consecutive requests go to other bank groups,
//!   banks and ranks and each bank reads along one row.
//!
//! `cargo run --release -p nvmos-memsys --example gen_traces DIR [requests]`
use std::io::{BufWriter, Write};
use std::path::Path;

const SIZE: u64 = 16 << 30;

mod ramulator_addr;
use ramulator_addr::for_ramulator;

fn write(dir: &Path, name: &str, stream: &[(u64, bool, u64)]) -> std::io::Result<()> {
    for (suffix, ramulator) in [("dramsim3", false), ("ramulator", true)] {
        let path = dir.join(format!("{name}.{suffix}.trace"));
        let tmp = tempfile::NamedTempFile::new_in(dir)?;
        let mut out = BufWriter::new(tmp);
        for &(addr, write, cycle) in stream {
            if ramulator {
                let addr = for_ramulator(addr);
                writeln!(out, "{} {addr:#x}", if write { "ST" } else { "LD" })?;
            } else {
                let kind = if write { "WRITE" } else { "READ" };
                writeln!(out, "{addr:#x} {kind} {cycle}")?;
            }
        }
        out.into_inner()
            .map_err(|e| e.into_error())?
            .persist(&path)
            .map_err(|e| e.error)?;
        println!("{}", path.display());
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: gen_traces DIR [requests]");
        std::process::exit(2);
    };
    let n: u64 = match args.next().map(|a| a.parse()) {
        None => 500_000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("requests: {e}");
            std::process::exit(2);
        }
    };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let seq: Vec<u64> = (0..n).map(|i| i * 64 % SIZE).collect();
    let random: Vec<u64> = (0..n).map(|_| (rand() % SIZE) & !63).collect();
    // Two reads, then a write.
    let mix: Vec<(u64, bool)> = (0..n)
        .map(|i| ((rand() % SIZE) & !63, i % 3 == 2))
        .collect();
    let stride: Vec<u64> = (0..n).map(|i| i * (8192 + 64) % SIZE).collect();
    let reads = |a: &[u64], gap: u64| -> Vec<(u64, bool, u64)> {
        a.iter()
            .enumerate()
            .map(|(i, &a)| (a, false, i as u64 * gap))
            .collect()
    };
    let mixed = |gap: u64| -> Vec<(u64, bool, u64)> {
        mix.iter()
            .enumerate()
            .map(|(i, &(a, w))| (a, w, i as u64 * gap))
            .collect()
    };
    write(dir, "seq-light", &reads(&seq, 20))?;
    write(dir, "rand-light", &reads(&random, 20))?;
    write(dir, "mix-light", &mixed(20))?;
    write(dir, "rand-8", &reads(&random, 8))?;
    write(dir, "seq-sat", &reads(&seq, 0))?;
    write(dir, "rand-sat", &reads(&random, 0))?;
    write(dir, "mix-sat", &mixed(0))?;
    write(dir, "stride-sat", &reads(&stride, 0))?;
    Ok(())
}
