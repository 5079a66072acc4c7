//! Boot the repository's kernel under QEMU with a `/init` of your own and
//! the host's root filesystem shared read-only (virtio-9p, tag
//! `hostroot`), and bring out what the guest wrote: each `==nvmos:NAME==`
//! section of its data disk as `OUT/NAME`, and, when the guest names a
//! size in an `out_size` section, that many bytes from
//! `nvmos_kernel::run::DISK_FILE_OFFSET` of the disk as `OUT/out.tar`.
//!
//! `cargo run -p nvmos-kernel --example guest_init -- INIT.sh OUT [MEM_MIB] [CPUS]`
//!
//! In `INIT.sh`, `@REPO@` becomes the repository's root and `@NVMOS@` the
//! environment's `NVMOS` (default `@REPO@/target/release/nvmos`), `@MODE@`
//! the environment's `MODE` (default `traces`). `QEMU_CPU` chooses QEMU's
//! `-cpu` model (default QEMU's own; the numpy job needs `max`). With
//! `traces/workloads/writes_guest_9p_init.sh` it records the shipped
//! workloads compile, files and numpy with sampled writes
//! (`traces/README.md`).

use std::path::PathBuf;

use nvmos_kernel::kbuild::BuildOptions;
use nvmos_kernel::run::{boot_guest, Accel, Policy, RunOptions};
use nvmos_kernel::Progress;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        return Err("usage: guest_init INIT.sh OUT [MEM_MIB] [CPUS]".into());
    }
    let repo = std::fs::canonicalize(nvmos_kernel::repo_kernel_dir().join(".."))?;
    let nvmos = std::env::var("NVMOS")
        .unwrap_or_else(|_| repo.join("target/release/nvmos").display().to_string());
    let init = std::fs::read_to_string(&args[0])
        .map_err(|e| format!("{}: {e}", args[0]))?
        .replace("@REPO@", &repo.display().to_string())
        .replace("@NVMOS@", &nvmos)
        .replace(
            "@MODE@",
            &std::env::var("MODE").unwrap_or_else(|_| "traces".to_owned()),
        );
    let out = PathBuf::from(&args[1]);
    std::fs::create_dir_all(&out)?;
    let mut opts = RunOptions::new(
        BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
        nvmos_kernel::repo_workloads_dir(),
        Policy::Buddy,
        Vec::new(),
    );
    opts.init = Some(init);
    opts.share_host_root = true;
    opts.accel = Accel::Tcg;
    opts.timeout_s = 4 * 3600;
    opts.stall_s = 900;
    opts.cpu_model = std::env::var("QEMU_CPU").ok();
    if let Some(m) = args.get(2) {
        opts.mem_mib = m.parse()?;
    }
    if let Some(c) = args.get(3) {
        opts.cpus = c.parse()?;
    }
    let guest = boot_guest(&opts, &mut |p| {
        if let Progress::Step(s) = p {
            eprintln!("{s}");
        }
    })?;
    eprintln!(
        "kernel {} ({}), boot {:.1} s, console {}",
        guest.kernel.hash,
        guest.accel,
        guest.boot_s,
        guest.console_log.display()
    );
    for (name, bytes) in &guest.sections {
        write_whole(&out.join(name), bytes)?;
    }
    if let Some(size) = guest.sections.get("out_size") {
        let size: u64 = String::from_utf8_lossy(size).trim().parse()?;
        write_whole(&out.join("out.tar"), &guest.disk_file(size)?)?;
        eprintln!("out.tar: {size} bytes");
    }
    Ok(())
}

/// Whole or not at all: a failed run leaves no half-written `out.tar`
/// (whose traces are copied into `traces/`).
fn write_whole(path: &std::path::Path, bytes: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
    use std::io::Write as _;
    let mut f = nvmos_trace::Output::create(path, &[])?;
    f.write_all(bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.commit()?;
    Ok(())
}
