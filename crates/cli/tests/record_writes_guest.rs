//! `nvmos record --writes` on its real write path, inside a guest whose
//! kernel tracks soft-dirty bits.
//!
//! This machine's kernel lacks `CONFIG_MEM_SOFT_DIRTY`, so the root test
//! in `nvmos-trace` (`records_writes_of_frames_it_allocated`) checks only
//! the refusal here. This one boots the repository's kernel (built with
//! soft-dirty, `kernel/config`) under QEMU with the host's root shared
//! read-only over virtio-9p, and runs this build's `nvmos record --writes`
//! in a chroot of it on a small program that writes a known number of
//! pages again and again. It checks that the recording succeeded (not the
//! refusal), that the header names the 10 ms interval, and that the
//! writes land on frames allocated in the trace: every page of the
//! program's buffer at least once.
//!
//! It builds the kernel into the cache when it is absent (minutes) and
//! boots under KVM when that works, else TCG. Without QEMU, a C compiler
//! or a static busybox it skips with a message, and fails under `CI=1`.

use std::path::Path;
use std::process::Command;

use nvmos_kernel::kbuild::BuildOptions;
use nvmos_kernel::run::{boot_guest, Policy, RunOptions, DISK_FILE_OFFSET, HOST_ROOT_TAG};
use nvmos_trace::{BlockTracker, Effect, EventSource, NvtReader};

/// Pages the writer maps and writes in every round.
const PAGES: usize = 2048;

const WRITER: &str = r#"
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
/* Maps PAGES pages and writes one byte of each, ROUNDS times, 20 ms apart. */
int main(void)
{
    size_t pages = PAGES;
    volatile char *p = mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (int r = 0; r < 25; r++) {
        for (size_t i = 0; i < pages; i++)
            p[i * 4096] = (char)(r + 1);
        usleep(20000);
    }
    printf("wrote %zu pages 25 times\n", pages);
    return 0;
}
"#;

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

fn on_path(tool: &str) -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join(tool).is_file())
}

/// The guest's `/init`: mount the host's root, chroot into it with its own
/// /proc, /sys and /dev, and a scratch tmpfs at /dev/nvmos-scratch (under
/// the guest's own devtmpfs, so it never hides a host path a checkout can
/// sit under, /tmp included), record the writer, and bring the trace out
/// at `DISK_FILE_OFFSET` of the data disk with its size and the
/// recorder's summary as sections.
fn init(nvmos: &Path, writer: &Path) -> String {
    let seek = DISK_FILE_OFFSET >> 20;
    format!(
        r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
(while :; do sleep 5; echo nvmos-heartbeat; done) &
H=/mnt
mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,ro {tag} $H || echo "9p mount failed"
mount -t proc proc $H/proc
mount -t sysfs sys $H/sys
mount -t devtmpfs dev $H/dev
S=/dev/nvmos-scratch
mkdir -p $H$S
mount -t tmpfs scratch $H$S
echo nvmos-guest-start
chroot $H env TMPDIR=$S {nvmos} record --writes --write-interval 10 --json -o $S/w.nvt -- {writer} > $H$S/rec.json 2> $H$S/rec.err
status=$?
echo "record exited $status"
cat $H$S/rec.err
size=0
if [ -f $H$S/w.nvt ]; then
  size=$(wc -c < $H$S/w.nvt)
  dd if=$H$S/w.nvt of=/dev/vda bs=1048576 seek={seek} 2>/dev/null
fi
{{
echo "==nvmos:status=="; echo $status
echo "==nvmos:nvt_size=="; echo $size
echo "==nvmos:record_json=="; cat $H$S/rec.json
echo "==nvmos:record_err=="; cat $H$S/rec.err
echo "==nvmos:end=="
}} > /dev/vda
sync
echo nvmos-guest-done
reboot -f
"#,
        tag = HOST_ROOT_TAG,
        nvmos = nvmos.display(),
        writer = writer.display(),
    )
}

#[test]
fn records_writes_in_a_soft_dirty_guest_on_frames_it_allocated() {
    let what = "recording writes in a QEMU guest";
    let missing: Vec<&str> = ["qemu-system-x86_64", "cc", "busybox"]
        .into_iter()
        .filter(|t| !on_path(t))
        .collect();
    if !missing.is_empty() {
        assert!(
            !in_ci(),
            "{what}: {missing:?} not installed; CI must run it"
        );
        eprintln!("SKIPPED {what}: {missing:?} not installed (an error under CI)");
        return;
    }
    // The writer (static) and a copy of this build's nvmos, under the
    // host's /tmp as a checkout under /tmp would have them: the guest sees
    // them through the share, /tmp included.
    let scratch = tempfile::Builder::new()
        .prefix("nvmos-record-writes-guest.")
        .tempdir_in("/tmp")
        .unwrap();
    let tmp = scratch.path().to_path_buf();
    let src = tmp.join("writer.c");
    std::fs::write(&src, WRITER.replace("PAGES;", &format!("{PAGES};"))).unwrap();
    let writer = tmp.join("writer");
    let out = Command::new("cc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(&writer)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nvmos = tmp.join("nvmos");
    std::fs::copy(env!("CARGO_BIN_EXE_nvmos"), &nvmos).unwrap();
    let nvmos = std::fs::canonicalize(&nvmos).unwrap();
    let writer = std::fs::canonicalize(&writer).unwrap();
    assert!(nvmos.starts_with("/tmp") && writer.starts_with("/tmp"));
    let mut opts = RunOptions::new(
        BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
        nvmos_kernel::repo_workloads_dir(),
        Policy::Buddy,
        Vec::new(),
    );
    opts.init = Some(init(&nvmos, &writer));
    opts.share_host_root = true;
    opts.cpus = 2;
    opts.timeout_s = 1800;
    let guest = boot_guest(&opts, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
    let section = |name: &str| {
        String::from_utf8_lossy(
            guest
                .sections
                .get(name)
                .unwrap_or_else(|| panic!("no {name} section")),
        )
        .trim()
        .to_owned()
    };
    let log = guest.console_log.display().to_string();
    // The real write path, not the refusal: the recorder succeeded.
    assert_eq!(
        section("status"),
        "0",
        "nvmos record failed in the guest: {} (console {log})",
        section("record_err")
    );
    // The writer's own line comes first on the recorder's stdout.
    let json = section("record_json");
    let start = json.find("\n{").map_or(0, |i| i + 1);
    let summary: serde_json::Value =
        serde_json::from_str(&json[start..]).unwrap_or_else(|e| panic!("summary: {e}: {json}"));
    let size: u64 = section("nvt_size").parse().unwrap();
    assert!(size > 0, "no trace came out (console {log})");
    let nvt = tmp.join("guest.nvt");
    std::fs::write(&nvt, guest.disk_file(size).unwrap()).unwrap();

    let mut reader = NvtReader::open(&nvt).unwrap();
    let header = reader.header().unwrap().clone();
    let sampling = header.writes.clone().expect("a write-sampling header");
    assert_eq!(sampling.interval_ns, 10_000_000);
    assert!(sampling.samples > 0, "{sampling:?}");
    assert_eq!(
        summary["header"]["writes"]["writes"].as_u64(),
        Some(sampling.writes),
        "{summary}"
    );
    let kernel = header.machine.as_ref().map(|m| m.kernel.clone());
    assert!(
        kernel.as_deref().is_some_and(|k| k.starts_with("6.12")),
        "recorded in the guest: {kernel:?}"
    );
    let mut tracker = BlockTracker::new();
    let (mut writes, mut on_allocated) = (0u64, 0u64);
    let mut frames = std::collections::HashSet::new();
    for e in reader.by_ref() {
        let e = e.unwrap();
        if let Effect::Written(block) = tracker.step(&e) {
            writes += 1;
            if block.is_some() {
                on_allocated += 1;
                frames.insert(e.pfn.0);
            }
        }
    }
    assert_eq!(reader.counts().lost_events, 0);
    assert_eq!(writes, sampling.writes);
    // Every page of the buffer was faulted in (allocated) during the
    // recording and written in every round: each of its frames carries at
    // least one sampled write, and the writes land on allocated frames.
    assert!(
        frames.len() >= PAGES,
        "{} distinct allocated frames written; the writer wrote {PAGES} ({sampling:?})",
        frames.len()
    );
    assert!(
        on_allocated * 100 >= writes * 95,
        "{on_allocated} of {writes} writes on frames allocated in the trace"
    );
    // More than one sample saw the buffer: rounds are 20 ms apart.
    assert!(
        writes >= 3 * PAGES as u64,
        "{writes} writes for {PAGES} pages written 25 times ({sampling:?})"
    );
}
