//! `kernel wis`: will-it-scale test cases with nvmos' harness in the
//! guest. The test cases here are small stand-ins written for these tests
//! in will-it-scale's interface (`testcase_description`, `testcase()`, the
//! optional `testcase_prepare()` and `testcase_cleanup()`), so the tests
//! need no will-it-scale checkout.

use std::path::Path;

use nvmos_kernel::kbuild::BuildOptions;
use nvmos_kernel::run::{Policy, RunOptions};
use nvmos_kernel::wis::{self, Options, Wis};
use nvmos_kernel::KernelError;

/// Sixteen anonymous pages mapped, each touched (an operation), unmapped.
const PAGE_FAULT1: &str = r#"
#include <stdlib.h>
#include <sys/mman.h>

char *testcase_description = "stand-in: 16 anonymous pages faulted in";

void testcase(unsigned long long *iterations, unsigned long nr)
{
	(void)nr;
	for (;;) {
		char *p = mmap(NULL, 16 * 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			abort();
		for (int i = 0; i < 16; i++) {
			p[i * 4096] = 1;
			(*iterations)++;
		}
		munmap(p, 16 * 4096);
	}
}
"#;

/// A private mapping of a file that `testcase_prepare` makes (and
/// `testcase_cleanup` removes): without the harness calling them, the
/// tasks abort.
const PAGE_FAULT2: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define FILE_NAME "/tmp/nvmos-wis-stand-in"
#define SIZE (16 * 4096)

char *testcase_description = "stand-in: a private file mapping faulted in";

void testcase_prepare(unsigned long nr_tasks)
{
	int fd = open(FILE_NAME, O_RDWR | O_CREAT | O_TRUNC, 0600);

	(void)nr_tasks;
	if (fd < 0 || ftruncate(fd, SIZE))
		abort();
	close(fd);
}

void testcase_cleanup(void)
{
	unlink(FILE_NAME);
}

void testcase(unsigned long long *iterations, unsigned long nr)
{
	int fd = open(FILE_NAME, O_RDWR);

	(void)nr;
	if (fd < 0)
		abort();
	for (;;) {
		char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED)
			abort();
		for (int i = 0; i < SIZE; i += 4096) {
			p[i] = 1;
			(*iterations)++;
		}
		munmap(p, SIZE);
	}
}
"#;

/// 1 MiB mapped and unmapped untouched.
const MMAP1: &str = r#"
#include <stdlib.h>
#include <sys/mman.h>

char *testcase_description = "stand-in: 1 MiB mapped and unmapped";

void testcase(unsigned long long *iterations, unsigned long nr)
{
	(void)nr;
	for (;;) {
		void *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			abort();
		munmap(p, 1 << 20);
		(*iterations)++;
	}
}
"#;

/// A test case whose tasks die at once.
const CRASH: &str = r#"
#include <stdlib.h>

char *testcase_description = "stand-in: aborts";

void testcase(unsigned long long *iterations, unsigned long nr)
{
	(void)iterations;
	(void)nr;
	abort();
}
"#;

/// A will-it-scale-shaped folder with `tests/NAME.c` for each of `tests`.
fn checkout(tests: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    for (name, text) in tests {
        std::fs::write(dir.path().join(format!("tests/{name}.c")), text).unwrap();
    }
    dir
}

fn options(source: &Path) -> Options {
    let run = RunOptions::new(
        BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
        nvmos_kernel::repo_workloads_dir(),
        Policy::Buddy,
        Vec::new(),
    );
    let mut o = Options::new(run, source.to_owned());
    o.warmup_ms = 200;
    o.interval_ms = 200;
    o.samples = 3;
    o
}

#[test]
fn every_test_runs_under_two_policies_on_two_vcpus() {
    let src = checkout(&[
        ("page_fault1", PAGE_FAULT1),
        ("page_fault2", PAGE_FAULT2),
        ("mmap1", MMAP1),
    ]);
    let mut opts = options(src.path());
    opts.policies = vec![Policy::Buddy, Policy::Lis31];
    // Two vCPUs only (one guest per policy): the one-task path is the
    // failure test's; every guest costs the suite a boot.
    opts.cpus = vec![2];
    let w = wis::wis(&opts, &mut |_| {}).unwrap();
    assert_eq!(w.guests.len(), 2);
    assert_eq!(w.cells.len(), 2 * 3);
    assert_eq!(w.icount_options, wis::ICOUNT_OPTIONS);
    let names: Vec<&str> = w.tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["page_fault1", "page_fault2", "mmap1"]);
    assert_eq!(
        w.tests[1].description,
        "stand-in: a private file mapping faulted in"
    );
    for c in &w.cells {
        let what = format!("{} {} on {} vCPU(s)", c.policy.name(), c.test, c.cpus);
        assert_eq!(c.tasks, c.cpus, "{what}: tasks = vCPUs");
        assert_eq!(c.samples.len(), 3, "{what}");
        for s in &c.samples {
            // Every interval made progress and lasted about what was
            // asked of the guest's clock.
            assert_eq!(s.task_ops.len(), c.tasks as usize, "{what}");
            assert!(s.ops > 0, "{what}: {s:?}");
            assert!((150_000_000..400_000_000).contains(&s.ns), "{what}: {s:?}");
        }
        for s in &c.samples {
            assert_eq!(s.task_ops.iter().sum::<u64>(), s.ops, "{what}: {s:?}");
        }
        assert!(c.ops_per_s.min > 0.0, "{what}: {:?}", c.ops_per_s);
        assert!(c.ops_per_s.min <= c.ops_per_s.median && c.ops_per_s.median <= c.ops_per_s.max);
        assert_eq!(c.vs_buddy.is_some(), c.policy == Policy::Lis31, "{what}");
    }
    // Every task, on either vCPU, made progress in each guest. Not
    // asked of every test case: QEMU 7.2's -icount round-robin can leave
    // one vCPU without a turn for the whole of a short sample run.
    for policy in [Policy::Buddy, Policy::Lis31] {
        for t in 0..2 {
            let done: u64 = w
                .cells
                .iter()
                .filter(|c| c.policy == policy)
                .flat_map(|c| &c.samples)
                .map(|s| s.task_ops[t])
                .sum();
            assert!(done > 0, "{}: task {t} never ran", policy.name());
        }
    }
    // The JSON written by --json reads back the same: every count
    // exactly, every figure to its last digits (serde_json's parser may
    // round a float's last bit).
    let json = serde_json::to_string_pretty(&w).unwrap();
    let back: Wis = serde_json::from_str(&json).unwrap();
    assert_same(&back, &w);
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fn assert_same(a: &Wis, b: &Wis) {
    assert_eq!(
        (
            &a.kernel,
            &a.accel,
            &a.icount_options,
            &a.tests,
            &a.guests.len()
        ),
        (
            &b.kernel,
            &b.accel,
            &b.icount_options,
            &b.tests,
            &b.guests.len()
        )
    );
    assert_eq!(
        (a.mem_mib, a.runs, a.warmup_ms, a.interval_ms, a.samples),
        (b.mem_mib, b.runs, b.warmup_ms, b.interval_ms, b.samples)
    );
    assert_eq!(a.cells.len(), b.cells.len());
    for (x, y) in a.cells.iter().zip(&b.cells) {
        assert_eq!(
            (x.policy, x.cpus, &x.test, x.tasks, &x.samples),
            (y.policy, y.cpus, &y.test, y.tasks, &y.samples)
        );
        let (p, q) = (&x.ops_per_s, &y.ops_per_s);
        for (u, v) in [
            (p.median, q.median),
            (p.min, q.min),
            (p.max, q.max),
            (p.spread_pct, q.spread_pct),
            (x.per_task_ops_per_s, y.per_task_ops_per_s),
        ] {
            assert!(close(u, v), "{x:?} vs {y:?}");
        }
        match (x.vs_buddy, y.vs_buddy) {
            (None, None) => {}
            (Some(u), Some(v)) => assert!(close(u, v)),
            other => panic!("vs_buddy {other:?}"),
        }
    }
}

#[test]
fn a_test_whose_tasks_die_fails_naming_the_test_and_the_guest() {
    let src = checkout(&[("page_fault1", PAGE_FAULT1), ("crash", CRASH)]);
    let mut opts = options(src.path());
    opts.policies = vec![Policy::Buddy];
    opts.cpus = vec![1];
    opts.tests = vec!["page_fault1".into(), "crash".into()];
    let e = wis::wis(&opts, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("buddy on 1 vCPU(s), run 1"), "{e}");
    assert!(e.contains("crash at 1 task(s)"), "{e}");
    assert!(e.contains("killed by signal 6"), "{e}");
}

#[test]
fn a_missing_source_or_test_and_a_test_that_does_not_compile_are_refused() {
    // Refused before any kernel is built or guest booted: a cache of
    // their own, which must hold no kernel afterwards.
    let cache = tempfile::tempdir().unwrap();
    let opts = |src: &Path| {
        let mut o = options(src);
        o.run.build.cache = cache.path().to_owned();
        o
    };
    let e = wis::wis(&opts(Path::new("/nonexistent/will-it-scale")), &mut |_| {}).unwrap_err();
    assert!(matches!(e, KernelError::Option(_)), "{e}");
    assert!(
        e.to_string()
            .contains("--source /nonexistent/will-it-scale: not a folder"),
        "{e}"
    );

    let src = checkout(&[("page_fault1", PAGE_FAULT1), ("mmap1", MMAP1)]);
    let e = wis::wis(&opts(src.path()), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("will-it-scale test page_fault2"), "{e}");
    assert!(e.contains("tests/page_fault2.c does not exist"), "{e}");

    let broken = PAGE_FAULT1.replace("(*iterations)++;", "(*iterations)++ nonsense;");
    let src = checkout(&[("page_fault1", &broken)]);
    let mut o = opts(src.path());
    o.tests = vec!["page_fault1".into()];
    let e = wis::wis(&o, &mut |_| {}).unwrap_err();
    assert!(matches!(e, KernelError::Command { .. }), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("compiling will-it-scale test page_fault1 with nvmos' harness"),
        "{e}"
    );
    assert!(
        e.contains("error:") && e.contains("nonsense"),
        "the compiler's message: {e}"
    );

    // A test case that misses the interface does not link.
    let src = checkout(&[("page_fault1", "int unrelated;\n")]);
    o.source = src.path().to_owned();
    let e = wis::wis(&o, &mut |_| {}).unwrap_err().to_string();
    assert!(
        e.contains("page_fault1") && e.contains("undefined reference"),
        "{e}"
    );

    let built: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(built, ["wis"], "only the compiler's cache was written");
}
