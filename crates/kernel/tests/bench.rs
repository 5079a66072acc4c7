//! The in-kernel allocation benchmark and its instruction-counting TCG
//! plugin: the plugin counts the instructions between two markers exactly
//! (a guest program with a known instruction count between them), and
//! `kernel bench` runs the series' debugfs benchmark under two policies
//! with every request measured.

use std::process::Command;

use nvmos_kernel::bench::{self, parse_records, Pattern};
use nvmos_kernel::kbuild::BuildOptions;
use nvmos_kernel::run::{self, Accel, Policy, RunOptions};

fn options(policy: Policy) -> RunOptions {
    RunOptions::new(
        BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
        nvmos_kernel::repo_workloads_dir(),
        policy,
        vec!["marks".to_owned()],
    )
}

/// A static program that brackets 37 single instructions (an allocation
/// record) and 1 000 (a free record, longer than QEMU's largest
/// translation block, so it spans several) with the kernel benchmark's
/// markers, `argv[1]` times.
const MARKS_C: &str = r#"
#include <stdlib.h>
#define MARK(code) asm volatile(".byte 0x66,0x0f,0x1f,0x84,0x00\n\t.long 0x4e560000 + " #code ::: "memory")
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	MARK(0x0101);
	for (int i = 0; i < n; i++) {
		MARK(1);
		asm volatile(".rept 37\n\tnop\n\t.endr" ::: "memory");
		MARK(2);
		MARK(1);
		asm volatile(".rept 1000\n\tnop\n\t.endr" ::: "memory");
		MARK(3);
	}
	MARK(0x0200);
	return 0;
}
"#;

#[test]
fn the_plugin_counts_the_instructions_between_markers_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("marks.c");
    std::fs::write(&src, MARKS_C).unwrap();
    let bin = dir.path().join("marks");
    let o = Command::new("cc")
        .args(["-static", "-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut opts = options(Policy::Buddy);
    let plugin = bench::plugin(&opts.build.cache).unwrap();
    let records = dir.path().join("records.bin");
    opts.accel = Accel::Tcg;
    opts.files = vec![("bin/marks".to_owned(), bin)];
    opts.extra_qemu_args = vec![
        "-plugin".to_owned(),
        format!("{},out={}", plugin.display(), records.display()),
        "-icount".to_owned(),
        "shift=0".to_owned(),
    ];
    // Two copies at once, one pinned to each vCPU (a request must not
    // move between vCPUs): each vCPU's count is its own.
    opts.init = Some(format!(
        "{}echo nvmos-guest-start\ntaskset 1 marks 500 & taskset 2 marks 500 & wait\n{}",
        run::GUEST_PRELUDE,
        run::guest_finish(&[])
    ));
    run::boot_guest(&opts, &mut |_| {}).unwrap();
    let (records, unpaired) = parse_records(&std::fs::read(&records).unwrap(), &records).unwrap();
    assert_eq!(unpaired, 0);
    for (code, want) in [(2u8, 37u32), (3, 1000)] {
        let mut v: Vec<u32> = records
            .iter()
            .filter(|r| r.code == code && r.pattern == 1)
            .map(|r| r.instructions)
            .collect();
        assert_eq!(v.len(), 1000, "code {code}: one record per request");
        v.sort_unstable();
        // An interrupt taken inside a request adds its handler's
        // instructions to that vCPU; nothing can take any away.
        assert_eq!(v[0], want, "code {code}: the fewest");
        let exact = v.iter().filter(|&&n| n == want).count();
        assert!(exact >= 990, "code {code}: {exact} of 1000 exact; {v:?}");
    }
}

#[test]
fn kernel_bench_measures_every_request_under_two_policies() {
    let mut opts = bench::Options::new(options(Policy::Buddy));
    opts.policies = vec![Policy::Buddy, Policy::Lis31];
    opts.cpus = vec![2];
    opts.count = 2048;
    opts.repeat = 1000;
    opts.mixed = 1000;
    opts.runs = 2;
    opts.user_space = false;
    let b = bench::bench(&opts, &mut |_| {}).unwrap();
    assert_eq!(b.cells.len(), 2 * Pattern::ALL.len() * 2);
    for c in &b.cells {
        let what = format!("{} {} {}", c.policy.name(), c.pattern.name(), c.kind.name());
        let want = match c.pattern {
            Pattern::Bulk | Pattern::Rand => 2 * 2048,
            Pattern::Repeat => 2 * 1000,
            Pattern::Mixed => c.instructions.requests,
        };
        assert_eq!(c.tsc.requests, want, "{what}");
        assert_eq!(c.instructions.requests, want, "{what}");
        assert_eq!(c.tsc.refused, 0, "{what}");
        // No page allocator serves or takes back a page in fewer than 50
        // instructions; under icount the TSC counts at least the request's
        // own instructions.
        assert!(c.instructions.median > 50.0, "{what}: {:?}", c.instructions);
        assert!(c.tsc.mean >= c.instructions.mean, "{what}");
    }
    // mixed: allocations and frees add up to the operations of 2 threads.
    let mixed: u64 = b
        .cells
        .iter()
        .filter(|c| c.pattern == Pattern::Mixed && c.policy == Policy::Buddy)
        .map(|c| c.instructions.requests)
        .sum();
    assert_eq!(mixed, 2 * 1000);
    assert_eq!(b.comparisons.len(), Pattern::ALL.len());
    // Two runs of each guest, their instruction means compared.
    assert!(b.cells.iter().all(|c| c.run_means.len() == 2));
    assert_eq!(b.guests.len(), 2 * 2);
    assert!(b.guests.iter().all(|g| g.unpaired_markers == 0));
}
