//! `kernel systime`: a guest workload and a host program (over the 9p
//! share) timed under two policies in guest instruction time, with the
//! overheads against buddy.

use nvmos_kernel::kbuild::BuildOptions;
use nvmos_kernel::run::{Policy, RunOptions};
use nvmos_kernel::systime::{self, Program};

#[test]
fn systime_times_a_guest_job_and_a_host_program_under_two_policies() {
    let run = RunOptions::new(
        BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
        nvmos_kernel::repo_workloads_dir(),
        Policy::Buddy,
        Vec::new(),
    );
    let mut opts = systime::Options::new(run);
    opts.policies = vec![Policy::Buddy, Policy::Adaptive];
    opts.programs = vec![Program::Compilejob, Program::Gzip];
    opts.runs = 1;
    let s = systime::systime(&opts, &mut |_| {}).unwrap();
    assert_eq!(s.rows.len(), 4);
    for r in &s.rows {
        let what = format!("{} {}", r.program.name(), r.policy.name());
        assert_eq!(r.runs.len(), 1, "{what}");
        let t = &r.runs[0];
        // Both programs do real work in user space.
        assert!(t.real > 0.05 && t.user > 0.0, "{what}: {t:?}");
        // One thread at a time each (compilejob waits for each child):
        // its CPU time fits in the elapsed time, give or take a tick of
        // each.
        assert!(t.user + t.sys <= t.real + 0.03, "{what}: {t:?}");
    }
    // The overheads are adaptive's against buddy's, of the means; none
    // for buddy itself, and none for a base of zero (a short program may
    // spend no whole tick in the kernel: its system time reads 0).
    for program in [Program::Compilejob, Program::Gzip] {
        let row = |p: Policy| {
            s.rows
                .iter()
                .find(|r| r.program == program && r.policy == p)
                .unwrap()
        };
        let (buddy, adaptive) = (row(Policy::Buddy), row(Policy::Adaptive));
        let what = program.name();
        assert_eq!(buddy.sys_overhead_pct, None, "{what}");
        assert_eq!(buddy.real_overhead_pct, None, "{what}");
        let expect = |mine: f64, base: f64| (base > 0.0).then(|| 100.0 * (mine / base - 1.0));
        assert_eq!(
            adaptive.sys_overhead_pct,
            expect(adaptive.runs[0].sys, buddy.runs[0].sys),
            "{what}"
        );
        assert_eq!(
            adaptive.real_overhead_pct,
            expect(adaptive.runs[0].real, buddy.runs[0].real),
            "{what}"
        );
        // Elapsed time is never zero: its overhead is always there.
        assert!(adaptive.real_overhead_pct.is_some(), "{what}");
    }
}
