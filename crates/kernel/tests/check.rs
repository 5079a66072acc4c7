//! The series under mm's own checks, in real guests (see
//! `nvmos_kernel::check`): the KUnit suite under every policy, the mm
//! guest (two zones, 4 vCPUs: compaction, THP, CMA, memory offlining,
//! soft-offline, CPU offlining under load, stress-ng) under every policy
//! on the plain kernel, one policy's workload and mm guest on the debug
//! kernel (KASAN, lockdep, DEBUG_VM, DEBUG_PAGEALLOC, ...), and a kernel
//! report failing a run without leaving its trace. `nvmos kernel check`
//! runs the full matrix on the debug kernel.

use nvmos_kernel::check::{self, Check, Options};
use nvmos_kernel::kbuild::BuildOptions;
use nvmos_kernel::run::{self, Policy, RunOptions};
use nvmos_kernel::KernelError;

fn template() -> RunOptions {
    RunOptions::new(
        BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
        nvmos_kernel::repo_workloads_dir(),
        Policy::Buddy,
        Vec::new(),
    )
}

fn assert_all_passed(c: &Check) {
    let failed: Vec<String> = c
        .failures()
        .iter()
        .map(|i| format!("{} {}: {}", i.policy.name(), i.name, i.detail))
        .collect();
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
}

/// Every policy on the plain kernel, in the two-zone, 4-vCPU guest: each
/// mm check and the KUnit suite (booted with `kunit.enable=1`).
#[test]
fn the_rest_of_mm_and_the_kunit_suite_work_under_every_policy() {
    let mut opts = Options::new(template());
    opts.plain = true;
    opts.workloads.clear();
    opts.stress = false;
    let c = check::check(&opts, &mut |_| {}).unwrap();
    assert_all_passed(&c);
    for policy in Policy::ALL {
        let cases = c
            .items
            .iter()
            .filter(|i| i.policy == policy && i.name.starts_with("kunit nvmos_policy."))
            .count();
        assert!(cases >= 8, "{}: {cases} KUnit cases", policy.name());
        for name in check::MM_CHECKS {
            assert!(
                c.items
                    .iter()
                    .any(|i| i.policy == policy && i.name == format!("mm {name}") && i.passed),
                "{} {name}",
                policy.name()
            );
        }
    }
}

/// The debug kernel (KASAN, lockdep, DEBUG_VM, DEBUG_PAGEALLOC, ...) for
/// one policy: the mm guest, stress-ng included, with no kernel report.
/// (`nvmos kernel check` runs every policy and workload.)
#[test]
fn the_debug_kernel_reports_nothing_for_the_staged_policy() {
    let mut opts = Options::new(template());
    opts.policies = vec![Policy::Lis31Fair];
    opts.workloads.clear();
    opts.mm_mem_mib = 2048;
    opts.mm_cpus = 2;
    opts.stress_s = 10;
    let c = check::check(&opts, &mut |_| {}).unwrap();
    assert_eq!(c.flavour, nvmos_kernel::kbuild::Flavour::Debug);
    assert_all_passed(&c);
}

#[test]
fn a_kernel_report_fails_the_run_and_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.nvt");
    let mut o = template();
    o.policy = Policy::IBuddy;
    o.command = vec!["memstress".to_owned(), "1".to_owned(), "5".to_owned()];
    o.output = Some(out.clone());
    // A second, unknown policy: the kernel reports it on the console
    // (and keeps ibuddy).
    o.extra_cmdline.push("nvmos_policy=bogus".to_owned());
    match run::run(&o, &mut |_| {}) {
        Err(KernelError::GuestProblems { problems, log }) => {
            assert!(
                problems
                    .iter()
                    .any(|l| l.contains("nvmos: unknown nvmos_policy=bogus")),
                "{problems:?}"
            );
            assert!(log.is_file());
        }
        other => panic!("expected the run to fail on the report, got {other:?}"),
    }
    assert!(!out.exists(), "a run with a kernel report left its trace");
}
