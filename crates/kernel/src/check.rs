//! `nvmos kernel check` and `nvmos kernel test`: the series under mm's own
//! checks.
//!
//! For every policy, on the debug kernel ([`Flavour::Debug`]: DEBUG_VM,
//! PROVE_LOCKING, DEBUG_PAGEALLOC, DEBUG_LIST, PAGE_OWNER, KASAN, KFENCE):
//!
//! - every workload of the kernel study, traced as [`run::run`] traces it
//!   (a kernel report fails the run);
//! - one *mm* guest (by default 5 GiB, so two zones, DMA32 and Normal, and
//!   4 vCPUs) booted with `kunit.enable=1` and a CMA area, whose `/init`
//!   ([`mm_init_script`]) checks the rest of mm: the free-frame counts of
//!   `/proc/buddyinfo` against `MemFree`, soft-offline of a free frame,
//!   transparent huge pages, a CMA allocation while memory is held,
//!   offlining and onlining a memory block (the space shrinks and grows),
//!   compaction, a vCPU taken offline under load (its bypass list
//!   drained), and `stress-ng`'s vm, brk, mmap, fork and page-fault
//!   stressors through the host's root shared over virtio-9p. The KUnit
//!   suite of the series runs at its boot; its KTAP is read off the
//!   console ([`kunit_results`]).
//!
//! Every check is an [`Item`]: passed or not, with what was seen. The
//! guest's console is scanned for kernel reports ([`run::console_problems`])
//! after each boot; any report fails that boot's item.

use std::time::Instant;

use crate::kbuild::{self, Flavour};
use crate::run::{self, Policy, RunOptions};
use crate::{KernelError, Progress, Result};

/// What to check.
#[derive(Clone, Debug)]
pub struct Options {
    /// The template of every guest: build options (its flavour is set to
    /// debug unless [`Options::plain`]), workloads, QEMU.
    pub run: RunOptions,
    /// Policies to check.
    pub policies: Vec<Policy>,
    /// Workloads of the kernel study ([`run::workload_command`]) to run
    /// traced under each policy.
    pub workloads: Vec<String>,
    /// Boot the mm guest of each policy.
    pub mm: bool,
    /// Run `stress-ng` in the mm guest (needs `stress-ng` on the host).
    pub stress: bool,
    /// How long stress-ng runs, seconds.
    pub stress_s: u32,
    /// The mm guest's memory, MiB (more than 4 GiB gives it a Normal zone).
    pub mm_mem_mib: u64,
    /// The mm guest's vCPUs.
    pub mm_cpus: u32,
    /// Check the plain kernel instead of the debug one.
    pub plain: bool,
}

impl Options {
    /// Every policy, the study's four workloads, the mm guest with
    /// stress-ng, 5 GiB and 4 vCPUs, on the debug kernel.
    pub fn new(run: RunOptions) -> Options {
        Options {
            run,
            policies: Policy::ALL.to_vec(),
            workloads: ["memstress", "filejob", "sortjob", "compilejob"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            mm: true,
            stress: true,
            stress_s: 20,
            mm_mem_mib: 5120,
            mm_cpus: 4,
            plain: false,
        }
    }
}

impl Options {
    /// The kernel checked: debug unless [`Options::plain`].
    fn flavour(&self) -> Flavour {
        if self.plain {
            Flavour::Plain
        } else {
            Flavour::Debug
        }
    }
}

/// What every boot of a check reports: its console's kernel reports (one
/// item) and the KUnit suite's cases read off the console (one item each;
/// one failed item when the suite printed nothing).
fn boot_items(policy: Policy, guest: &run::GuestRun, seconds: f64) -> Vec<Item> {
    let item = |name: String, passed: bool, detail: String, seconds: f64| Item {
        policy,
        name,
        passed,
        detail,
        seconds,
    };
    let log = guest.console_log.display();
    let problems = run::console_problems(&guest.console);
    let mut items = vec![item(
        "console".to_owned(),
        problems.is_empty(),
        if problems.is_empty() {
            format!("no kernel report ({log})")
        } else {
            format!("{} ({log})", problems.join(" | "))
        },
        seconds,
    )];
    let cases: Vec<(String, bool)> = kunit_results(&guest.console)
        .into_iter()
        .filter(|(n, _)| n.starts_with("nvmos_policy."))
        .collect();
    if cases.is_empty() {
        items.push(item(
            "kunit nvmos_policy".to_owned(),
            false,
            format!("no KTAP result of the nvmos_policy suite on the console ({log})"),
            0.0,
        ));
    }
    items.extend(
        cases
            .into_iter()
            .map(|(name, ok)| item(format!("kunit {name}"), ok, String::new(), 0.0)),
    );
    items
}

/// One check under one policy.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Item {
    /// The policy booted.
    pub policy: Policy,
    /// `workload NAME`, `mm NAME` (a check of the mm guest), `kunit NAME`
    /// (a KUnit case) or `console` (the boot's kernel reports).
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// What was seen: the check's figures, or why it failed.
    pub detail: String,
    /// Host seconds of the boot it belongs to (0 for items of a boot
    /// already counted).
    pub seconds: f64,
}

/// A finished check.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Check {
    /// The kernel checked.
    pub kernel: String,
    /// Plain or debug.
    pub flavour: Flavour,
    /// Every item, by policy in the order checked.
    pub items: Vec<Item>,
    /// Host seconds in all.
    pub seconds: f64,
}

impl Check {
    /// The items that did not hold.
    pub fn failures(&self) -> Vec<&Item> {
        self.items.iter().filter(|i| !i.passed).collect()
    }
}

/// The checks the mm guest's `/init` makes, in order; each prints
/// `check NAME ok|fail DETAIL`. A check missing from its output fails.
pub const MM_CHECKS: [&str; 9] = [
    "zones",
    "counts_add_up",
    "soft_offline",
    "thp",
    "cma",
    "memory_offline",
    "compaction",
    "cpu_offline",
    "counts_add_up_after",
];

/// The mm guest's `/init` for `policy` (busybox sh). `stress` adds the
/// `stress` check (stress-ng for `stress_s` seconds in a chroot of the
/// host's root); 0 leaves it out.
pub fn mm_init_script(policy: Policy, stress_s: u32) -> String {
    let stress = stress_s > 0;
    let nvmos = policy != Policy::Buddy;
    let lazy = matches!(policy, Policy::Lis1 | Policy::Lis31 | Policy::Lis31Fair);
    format!(
        r#"{prelude}mount -t tmpfs -o size=25% tmp /tmp
mount -t debugfs nodev /sys/kernel/debug
(while :; do sleep 5; echo nvmos-heartbeat; done) &
P=/sys/kernel/debug/nvmos_policy
R=/tmp/results
NVMOS={nvmos}
LAZY={lazy}
: > $R
echo nvmos-guest-start
verdict() {{ echo "check $1 $2 $3" >> $R; echo "nvmos-check $1 $2 $3"; }}
counter() {{ awk -v k="$1" '$1 == k {{ print $2 }}' $P; }}
vmstat() {{ awk -v k="$1" '$1 == k {{ print $2 }}' /proc/vmstat; }}
# The smallest of ten |MemFree - what buddyinfo counts free|, KiB, once
# the system has settled for two seconds, each with the per-CPU vmstat
# differentials folded into MemFree first (stat_refresh): unfolded, they
# are up to a threshold of frames per CPU and zone away from the lists.
# MemFree against buddyinfo: NR_FREE_PAGES lags by the per-CPU vmstat
# deltas (folded by stat_refresh) and moves while deferred frees (RCU,
# after a fork storm) still run, so wait until MemFree settles, then read
# both files in one awk, back to back, and keep the closest of ten.
memfree() {{ awk '/^MemFree:/ {{ print $2 }}' /proc/meminfo; }}
free_gap() {{
  sleep 2
  prev=$(memfree)
  for i in $(seq 1 30); do
    sleep 1
    echo 1 > /proc/sys/vm/stat_refresh
    now=$(memfree)
    step=$((now - prev)); [ $step -lt 0 ] && step=$((-step))
    [ $step -le 64 ] && break
    prev=$now
  done
  best=
  for i in 1 2 3 4 5 6 7 8 9 10; do
    echo 1 > /proc/sys/vm/stat_refresh
    d=$(awk '/^MemFree:/ {{ a = $2 }} /zone/ {{ m = 4; for (i = 5; i <= NF; i++) {{ s += $i * m; m *= 2 }} }} END {{ d = a - s; if (d < 0) d = -d; printf "%d", d }}' /proc/meminfo /proc/buddyinfo)
    if [ -z "$best" ] || [ $d -lt $best ]; then best=$d; fi
  done
  echo $best
}}
counts_add_up() {{
  d=$(free_gap)
  if [ $d -le 512 ]; then verdict $1 ok "MemFree-buddyinfo=${{d}}KiB"; else verdict $1 fail "MemFree-buddyinfo=${{d}}KiB"; fi
}}

zones=$(grep -c "zone" /proc/buddyinfo)
verdict zones ok "populated=$zones $(awk '/zone/ {{ printf "%s ", $4 }}' /proc/buddyinfo)"
counts_add_up counts_add_up

# Under an nvmos policy the frame is one the space holds: memory failure
# has it handed back to the buddy lists (handed_back_frames grows).
h0=$(counter handed_back_frames)
out=$(mmcheck softoffline 2>&1); st=$?
h1=$(counter handed_back_frames)
if [ $st -eq 0 ] && {{ [ $NVMOS = false ] || [ "$h1" -gt "$h0" ]; }}; then
  verdict soft_offline ok "$(echo $out) handed_back+$((h1 - h0))"
else
  verdict soft_offline fail "status=$st $(echo $out) handed_back+$((${{h1:-0}} - ${{h0:-0}}))"
fi

t0=$(vmstat thp_fault_alloc)
out=$(mmcheck thp 64 2>&1); st=$?
t1=$(vmstat thp_fault_alloc)
if [ $st -eq 0 ]; then verdict thp ok "$(echo $out) thp_fault_alloc+$((t1 - t0))"; else verdict thp fail "status=$st $(echo $out)"; fi

C=/sys/kernel/debug/cma/reserved
if [ -d $C ]; then
  mmcheck hold 1024 60 > /dev/null &
  holder=$!
  sleep 5
  u0=$(cat $C/used)
  if echo 4096 > $C/alloc; then
    u1=$(cat $C/used)
    echo 4096 > $C/free
    u2=$(cat $C/used)
    if [ $((u1 - u0)) -ge 4096 ]; then verdict cma ok "used $u0->$u1->$u2 pages"; else verdict cma fail "used $u0->$u1"; fi
  else
    verdict cma fail "allocating 4096 pages from $C failed"
  fi
  kill $holder; wait $holder 2>/dev/null
else
  verdict cma fail "no CMA area in debugfs (cma= on the command line?)"
fi

s0=$(counter space_free_frames)
n=$(ls -d /sys/devices/system/memory/memory* | wc -l)
off=
for i in $(seq $((n / 2)) $((n - 1))) $(seq $((n / 2 - 1)) -1 1); do
  b=/sys/devices/system/memory/memory$i
  [ -e $b/state ] || continue
  [ "$(cat $b/state)" = online ] || continue
  if echo offline > $b/state 2>/dev/null; then off=$b; break; fi
done
if [ -z "$off" ]; then
  verdict memory_offline fail "no memory block went offline"
else
  s1=$(counter space_free_frames)
  if echo online > $off/state; then
    s2=$(counter space_free_frames)
    if [ $NVMOS = false ] || {{ [ $s1 -lt $s0 ] && [ $s2 -gt $s1 ]; }}; then
      verdict memory_offline ok "$(basename $off) space_free_frames $s0->$s1->$s2"
    else
      verdict memory_offline fail "$(basename $off) space_free_frames $s0->$s1->$s2 (the space must shrink, then grow)"
    fi
  else
    verdict memory_offline fail "$(basename $off) did not come back online"
  fi
fi

m0=$(vmstat compact_migrate_scanned); f0=$(vmstat compact_free_scanned)
if echo 1 > /proc/sys/vm/compact_memory; then
  m1=$(vmstat compact_migrate_scanned); f1=$(vmstat compact_free_scanned)
  if [ $m1 -gt $m0 ] && [ $f1 -gt $f0 ]; then
    verdict compaction ok "migrate_scanned+$((m1 - m0)) free_scanned+$((f1 - f0)) handed_back=$(counter handed_back_frames)"
  else
    verdict compaction fail "migrate_scanned+$((m1 - m0)) free_scanned+$((f1 - f0))"
  fi
else
  verdict compaction fail "writing compact_memory failed"
fi

memstress 1 100000 > /dev/null &
load=$!
sleep 3
c=/sys/devices/system/cpu/cpu1/online
if echo 0 > $c; then
  sleep 2
  listed=$(counter lazy_cpu1)
  echo 1 > $c
  if [ $LAZY = false ] || [ "$listed" = 0 ]; then
    verdict cpu_offline ok "cpu1 offline: lazy_cpu1=${{listed:-none}} lazy_drained=$(counter lazy_drained_frames)"
  else
    verdict cpu_offline fail "cpu1 offline still lists $listed frames"
  fi
else
  verdict cpu_offline fail "cpu1 would not go offline"
fi
kill $load; wait $load 2>/dev/null
counts_add_up counts_add_up_after

if [ {stress} = true ]; then
  mkdir -p /mnt
  mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose {tag} /mnt
  mount -t proc proc /mnt/proc
  mount -t sysfs sys /mnt/sys
  mount --bind /dev /mnt/dev
  mount -t tmpfs -o size=512M tmp /mnt/tmp
  chroot /mnt stress-ng --vm 2 --vm-bytes 128M --brk 1 --mmap 1 --mmap-bytes 64M --fork 2 --fault 1 --timeout {stress_s}s --temp-path /tmp --metrics-brief > /tmp/stress.out 2>&1
  st=$?
  if [ $st -eq 0 ]; then verdict stress ok "$(tail -n 8 /tmp/stress.out | tr '\n' ' ')"; else verdict stress fail "status=$st $(tail -n 8 /tmp/stress.out | tr '\n' ' ')"; fi
  counts_add_up counts_add_up_after_stress
fi

{finish}"#,
        prelude = run::GUEST_PRELUDE,
        finish = run::guest_finish(&[
            ("results", "cat $R"),
            ("counters", "cat $P"),
            ("buddyinfo", "cat /proc/buddyinfo"),
            ("pagetypeinfo", "cat /proc/pagetypeinfo"),
            ("meminfo", "cat /proc/meminfo"),
        ]),
        stress = stress,
        stress_s = stress_s,
        tag = run::HOST_ROOT_TAG,
    )
}

/// One KUnit case's verdict from the console's KTAP: `(suite.case, ok)`,
/// and the suites' own lines as `(suite, ok)`. A `# SKIP` counts as not ok:
/// a test never skips silently.
pub fn kunit_results(console: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut suite: Option<String> = None;
    for raw in console.lines() {
        // Strip a printk timestamp.
        let line = match raw.trim_start().strip_prefix('[') {
            Some(rest) => rest.split_once(']').map_or(raw, |(_, r)| r),
            None => raw,
        };
        let nested = line.starts_with("    ");
        let t = line.trim();
        if let Some(name) = t.strip_prefix("# Subtest: ") {
            suite = Some(name.trim().to_owned());
            continue;
        }
        let (ok, rest) = if let Some(r) = t.strip_prefix("not ok ") {
            (false, r)
        } else if let Some(r) = t.strip_prefix("ok ") {
            (true, r)
        } else {
            continue;
        };
        // "N name [# SKIP reason]"
        let Some((_, name)) = rest.split_once(' ') else {
            continue;
        };
        let (name, directive) = match name.split_once(" # ") {
            Some((n, d)) => (n.trim(), Some(d)),
            None => (name.trim(), None),
        };
        let skipped = directive.is_some_and(|d| d.trim_start().starts_with("SKIP"));
        let full = match (&suite, nested) {
            (Some(s), true) => format!("{s}.{name}"),
            _ => name.to_owned(),
        };
        out.push((full, ok && !skipped));
    }
    out
}

/// The `check NAME ok|fail DETAIL` lines of the mm guest's results.
fn parse_results(text: &str) -> Vec<(String, bool, String)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("check ")?;
            let mut it = rest.splitn(3, ' ');
            let name = it.next()?.to_owned();
            let ok = it.next()? == "ok";
            Some((name, ok, it.next().unwrap_or("").trim().to_owned()))
        })
        .collect()
}

/// Run the mm guest of `policy`: its checks, the KUnit suite, the console.
fn mm_guest(opts: &Options, policy: Policy, progress: &mut dyn FnMut(Progress)) -> Vec<Item> {
    let started = Instant::now();
    let mut o = opts.run.clone();
    o.policy = policy;
    o.mem_mib = opts.mm_mem_mib;
    o.cpus = opts.mm_cpus;
    o.init = Some(mm_init_script(
        policy,
        if opts.stress { opts.stress_s.max(1) } else { 0 },
    ));
    o.command = vec!["mmcheck".to_owned()];
    o.share_host_root = opts.stress;
    o.extra_cmdline
        .extend(["kunit.enable=1".to_owned(), "cma=64M".to_owned()]);
    let item = |name: &str, passed: bool, detail: String, seconds: f64| Item {
        policy,
        name: name.to_owned(),
        passed,
        detail,
        seconds,
    };
    let guest = match run::boot_guest(&o, progress) {
        Ok(g) => g,
        Err(e) => {
            return vec![item(
                "mm",
                false,
                e.to_string(),
                started.elapsed().as_secs_f64(),
            )]
        }
    };
    let mut items = boot_items(policy, &guest, started.elapsed().as_secs_f64());
    let results = guest
        .sections
        .get("results")
        .map(|b| parse_results(&String::from_utf8_lossy(b)))
        .unwrap_or_default();
    let mut expected: Vec<&str> = MM_CHECKS.to_vec();
    if opts.stress {
        expected.extend(["stress", "counts_add_up_after_stress"]);
    }
    for name in expected {
        let found = results.iter().find(|(n, _, _)| n == name);
        items.push(match found {
            Some((_, ok, detail)) => item(&format!("mm {name}"), *ok, detail.clone(), 0.0),
            None => item(
                &format!("mm {name}"),
                false,
                "the guest did not report this check".to_owned(),
                0.0,
            ),
        });
    }
    items
}

/// Check every policy: workloads traced on the debug kernel, then the mm
/// guest. Fails only when nothing can run (no kernel, no QEMU); a failed
/// check is an [`Item`] that did not hold.
pub fn check(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Check> {
    let started = Instant::now();
    if opts.policies.is_empty() {
        return Err(KernelError::Option("no policy to check".to_owned()));
    }
    if opts.stress {
        kbuild::require_tool("stress-ng", "apt-get install stress-ng")?;
    }
    let mut base = opts.run.clone();
    base.build.flavour = opts.flavour();
    let built = kbuild::build(&base.build, progress)?;
    let opts = Options {
        run: base,
        ..opts.clone()
    };
    let commands = opts
        .workloads
        .iter()
        .map(|w| run::workload_command(w).map(|c| (w.clone(), c)))
        .collect::<Result<Vec<_>>>()?;
    let total = opts.policies.len() * (commands.len() + usize::from(opts.mm));
    let mut done = 0;
    let mut items = Vec::new();
    for &policy in &opts.policies {
        for (name, command) in &commands {
            progress(Progress::Run {
                done,
                total,
                label: format!("{} {name}", policy.name()),
            });
            done += 1;
            let t = Instant::now();
            let mut o = opts.run.clone();
            o.policy = policy;
            o.command = command.clone();
            o.output = None;
            let (passed, detail) = match run::run(&o, progress) {
                Ok(r) if r.workload_status != 0 => (
                    false,
                    format!("the workload exited with {}", r.workload_status),
                ),
                Ok(r) if r.counts.lost_events > 0 => {
                    (false, format!("{} trace events lost", r.counts.lost_events))
                }
                Ok(r) => (
                    true,
                    format!(
                        "{} events, no kernel report ({})",
                        r.event_count,
                        r.console_log.display()
                    ),
                ),
                Err(e) => (false, e.to_string()),
            };
            items.push(Item {
                policy,
                name: format!("workload {name}"),
                passed,
                detail,
                seconds: t.elapsed().as_secs_f64(),
            });
        }
        if opts.mm {
            progress(Progress::Run {
                done,
                total,
                label: format!("{} mm", policy.name()),
            });
            done += 1;
            items.extend(mm_guest(&opts, policy, progress));
        }
    }
    Ok(Check {
        kernel: built.hash,
        flavour: built.flavour,
        items,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// A guest that only boots: KUnit runs before `/init`.
fn boot_only_init() -> String {
    format!(
        "{}echo nvmos-guest-start\n{}",
        run::GUEST_PRELUDE,
        run::guest_finish(&[])
    )
}

/// `nvmos kernel test`: boot each policy with `kunit.enable=1` and read
/// the series' KUnit suite (`nvmos_policy`) off the console, one item per
/// case plus the console's kernel reports. The flavour is
/// [`Options::plain`]'s (the plain kernel has the suite built in too).
pub fn kunit(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Check> {
    let started = Instant::now();
    if opts.policies.is_empty() {
        return Err(KernelError::Option("no policy to test".to_owned()));
    }
    let mut base = opts.run.clone();
    base.build.flavour = opts.flavour();
    let built = kbuild::build(&base.build, progress)?;
    let mut items = Vec::new();
    for (done, &policy) in opts.policies.iter().enumerate() {
        progress(Progress::Run {
            done,
            total: opts.policies.len(),
            label: format!("{} kunit", policy.name()),
        });
        let t = Instant::now();
        let mut o = base.clone();
        o.policy = policy;
        o.init = Some(boot_only_init());
        o.command = vec!["true".to_owned()];
        o.extra_cmdline.push("kunit.enable=1".to_owned());
        match run::boot_guest(&o, progress) {
            Ok(guest) => items.extend(boot_items(policy, &guest, t.elapsed().as_secs_f64())),
            Err(e) => items.push(Item {
                policy,
                name: "kunit".to_owned(),
                passed: false,
                detail: e.to_string(),
                seconds: t.elapsed().as_secs_f64(),
            }),
        }
    }
    Ok(Check {
        kernel: built.hash,
        flavour: built.flavour,
        items,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ktap_cases_skips_and_failures_are_read() {
        let console = "\
[    1.0] KTAP version 1
[    1.0] 1..1
    KTAP version 1
    # Subtest: nvmos_policy
    # module: nvmos_policy_kunit
    1..3
    ok 1 ib_reuses_least_recently_freed_first
    # ib_takes_frames_out: EXPECTATION FAILED at mm/nvmos_policy_kunit.c:90
    not ok 2 ib_takes_frames_out
    ok 3 ad_hands_blocks_out # SKIP no memory
# nvmos_policy: pass:1 fail:1 skip:1 total:3
not ok 1 nvmos_policy
";
        let r = kunit_results(console);
        assert_eq!(
            r,
            [
                (
                    "nvmos_policy.ib_reuses_least_recently_freed_first".to_owned(),
                    true
                ),
                ("nvmos_policy.ib_takes_frames_out".to_owned(), false),
                ("nvmos_policy.ad_hands_blocks_out".to_owned(), false),
                ("nvmos_policy".to_owned(), false),
            ]
        );
    }

    #[test]
    fn result_lines_are_parsed_and_others_ignored() {
        let r =
            parse_results("check thp ok thp_anon_huge_kib 2048\nnoise\ncheck cma fail no area\n");
        assert_eq!(
            r,
            [
                ("thp".to_owned(), true, "thp_anon_huge_kib 2048".to_owned()),
                ("cma".to_owned(), false, "no area".to_owned()),
            ]
        );
    }

    #[test]
    fn the_mm_script_reports_every_check_it_lists() {
        for policy in Policy::ALL {
            let s = mm_init_script(policy, 20);
            for name in MM_CHECKS.iter().chain(&["stress"]) {
                assert!(
                    s.contains(&format!("verdict {name} "))
                        || s.contains(&format!("counts_add_up {name}")),
                    "{name} missing for {}",
                    policy.name()
                );
            }
        }
    }
}
