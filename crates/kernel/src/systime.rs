//! `nvmos kernel systime`: the system time of real programs under each
//! policy, in the shape of seed 004's Tables 3 and 4 (user and system
//! time, buddy against Adaptive-Buddy) and of seed 000's caveat that the
//! total execution time is what a user sees.
//!
//! Each guest boots one policy under `-icount shift=0` and runs every
//! program in turn under busybox `time -p`: the guest's clock then counts
//! instructions (one nanosecond each), so `real`, `user` and `sys` are
//! guest instruction time, not the host's, and do not depend on the
//! host's load. `user` and `sys` are the kernel's tick-sampled process
//! times (`/proc/<pid>/stat` utime and stime, summed over the program's
//! waited-for children), at a resolution of one tick (10 ms of guest
//! time, 10^7 instructions, at HZ=100).
//!
//! The programs: the guest's own workloads (the compile, file and sort
//! jobs) and programs from the host's Debian packages run in a chroot of
//! the host's root shared over virtio-9p: gzip and xz on a generated
//! corpus (`seq 1 N`, the same bytes on every machine) and sqlite3 on a
//! fixed SQL script.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::run::{self, Accel, Policy, RunOptions};
use crate::{KernelError, Progress, Result};

/// A program the study runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Program {
    /// The compile-like job: 50 sources built 3 times by fork + exec of
    /// busybox gzip, linked in anonymous memory.
    Compilejob,
    /// 1 MiB of page-cache files written, read back and deleted, 500 times.
    Filejob,
    /// 32 MiB of keys sorted and packed, twice.
    Sortjob,
    /// The host's gzip -6 on the corpus.
    Gzip,
    /// The host's xz -1 on the corpus, one thread.
    Xz,
    /// The host's sqlite3 on [`SQL`].
    Sqlite3,
}

impl Program {
    /// Every program, in table order.
    pub const ALL: [Program; 6] = [
        Program::Compilejob,
        Program::Filejob,
        Program::Sortjob,
        Program::Gzip,
        Program::Xz,
        Program::Sqlite3,
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Program::Compilejob => "compilejob",
            Program::Filejob => "filejob",
            Program::Sortjob => "sortjob",
            Program::Gzip => "gzip",
            Program::Xz => "xz",
            Program::Sqlite3 => "sqlite3",
        }
    }

    /// Parse a name.
    pub fn parse(name: &str) -> Result<Program> {
        Program::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                KernelError::Option(format!(
                    "unknown program {name:?}: the study runs {}",
                    Program::ALL.map(Program::name).join(", ")
                ))
            })
    }

    /// Whether it runs from the host's root (needs the 9p share).
    fn runs_on_host(self) -> bool {
        matches!(self, Program::Gzip | Program::Xz | Program::Sqlite3)
    }

    /// The shell command the guest times.
    fn command(self) -> Result<String> {
        let host = |cmd: &str| {
            format!("chroot $H /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp /bin/sh -c '{cmd}'")
        };
        Ok(match self {
            Program::Compilejob | Program::Filejob | Program::Sortjob => {
                run::workload_command(self.name())?.join(" ")
            }
            Program::Gzip => host("gzip -6 -c /tmp/corpus > /tmp/corpus.gz"),
            Program::Xz => host("xz -1 -T1 -c /tmp/corpus > /tmp/corpus.xz"),
            Program::Sqlite3 => host("sqlite3 /tmp/t.db < /tmp/t.sql > /tmp/t.out"),
        })
    }
}

/// The SQL sqlite3 runs: 200 000 rows inserted, indexed, queried,
/// updated, deleted in part and vacuumed. Deterministic (no random
/// functions), so every run does the same work.
pub const SQL: &str = "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
INSERT INTO t SELECT x, (x * 7919) % 100003, printf('%08x%08x', (x * 2654435761) % 4294967296, x) FROM c;
CREATE INDEX tk ON t(k);
SELECT count(*), sum(k) FROM t WHERE k BETWEEN 1000 AND 50000;
SELECT k % 100, count(*), max(v) FROM t GROUP BY k % 100 ORDER BY 2 DESC LIMIT 5;
UPDATE t SET v = v || 'x' WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
VACUUM;
SELECT count(*) FROM t;
";

/// Lines of the corpus gzip and xz compress (`seq 1 N`: 13.9 MB at the
/// default).
pub const CORPUS_LINES: u64 = 2_000_000;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// How every guest boots; the policy, `/init` and QEMU arguments are
    /// set per guest.
    pub run: RunOptions,
    /// Policies; `buddy` is the baseline of the overheads.
    pub policies: Vec<Policy>,
    /// Programs, each run once per guest.
    pub programs: Vec<Program>,
    /// Guests per policy.
    pub runs: u32,
}

impl Options {
    /// Every policy and program, 3 runs, on the given guest.
    pub fn new(run: RunOptions) -> Options {
        Options {
            run,
            policies: Policy::ALL.to_vec(),
            programs: Program::ALL.to_vec(),
            runs: 3,
        }
    }
}

/// One program's times in one guest, guest seconds (instruction time).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Times {
    /// Elapsed.
    pub real: f64,
    /// User time (ticks).
    pub user: f64,
    /// System time (ticks).
    pub sys: f64,
}

/// A mean and its spread over the runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one run).
    pub sd: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    fn of(v: &[f64]) -> Spread {
        let n = v.len() as f64;
        if v.is_empty() {
            return Spread::default();
        }
        let mean = v.iter().sum::<f64>() / n;
        let sd = if v.len() > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Spread {
            mean,
            sd,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// One program under one policy, over the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The program.
    pub program: Program,
    /// The policy.
    pub policy: Policy,
    /// Every run's times.
    pub runs: Vec<Times>,
    /// Elapsed, guest seconds.
    pub real: Spread,
    /// User time, guest seconds.
    pub user: Spread,
    /// System time, guest seconds.
    pub sys: Spread,
    /// `sys / buddy's sys - 1`, percent, of the means; `None` for buddy
    /// or when buddy did not run.
    pub sys_overhead_pct: Option<f64>,
    /// The same for the elapsed time: what the user sees.
    pub real_overhead_pct: Option<f64>,
}

/// The study's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SysTime {
    /// The kernel's cache hash.
    pub kernel: String,
    /// Guests per policy.
    pub runs: u32,
    /// vCPUs of every guest.
    pub cpus: u32,
    /// Guest memory, MiB.
    pub mem_mib: u64,
    /// Rows: every program under every policy.
    pub rows: Vec<Row>,
    /// Host seconds.
    pub seconds: f64,
}

/// The guest's `/init`.
fn init_script(opts: &Options) -> Result<String> {
    let mut runs = String::new();
    for &p in &opts.programs {
        runs.push_str(&format!(
            "echo 'nvmos-systime {name}'\ncd /tmp\ntime -p -o /tmp/{name}.time {cmd} > /tmp/{name}.out 2>&1; rc=$?\ncd /\necho \"program={name} status=$rc $(tr '\\n' ' ' < /tmp/{name}.time)\" >> /tmp/systime\n",
            name = p.name(),
            cmd = p.command()?,
        ));
    }
    let host = opts.programs.iter().any(|p| p.runs_on_host());
    let prepare = if host {
        format!(
            r#"H=/mnt
mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,ro {tag} $H || echo "nvmos-systime: 9p mount failed"
mount -t proc proc $H/proc
mount -t devtmpfs dev $H/dev
mount -t tmpfs -o size=50% tmp $H/tmp
seq 1 {lines} > $H/tmp/corpus
cat > $H/tmp/t.sql <<'NVMOS_SQL'
{sql}NVMOS_SQL
"#,
            tag = run::HOST_ROOT_TAG,
            lines = CORPUS_LINES,
            sql = SQL,
        )
    } else {
        String::new()
    };
    Ok(format!(
        r#"{prelude}mount -t tmpfs -o size=25% tmp /tmp
(while :; do sleep 5; echo nvmos-heartbeat; done) &
{prepare}: > /tmp/systime
echo nvmos-guest-start
{runs}{finish}"#,
        prelude = run::GUEST_PRELUDE,
        finish = run::guest_finish(&[("systime", "cat /tmp/systime")]),
    ))
}

/// One guest's `systime` section: per program, its times. Refuses a
/// missing program, a failed one, or a line without the three times.
fn parse_section(text: &str, programs: &[Program]) -> std::result::Result<Vec<Times>, String> {
    let mut by_name: BTreeMap<&str, &str> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("program=") {
            let name = rest.split_whitespace().next().unwrap_or("");
            by_name.insert(name, line);
        }
    }
    programs
        .iter()
        .map(|p| {
            let line = by_name
                .get(p.name())
                .ok_or_else(|| format!("{}: no result", p.name()))?;
            let words: Vec<&str> = line.split_whitespace().collect();
            let status = words
                .iter()
                .find_map(|w| w.strip_prefix("status="))
                .unwrap_or("?");
            if status != "0" {
                return Err(format!("{}: exited with status {status}: {line}", p.name()));
            }
            let value = |key: &str| -> std::result::Result<f64, String> {
                words
                    .iter()
                    .position(|w| *w == key)
                    .and_then(|i| words.get(i + 1))
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(|| format!("{}: no {key} time in {line:?}", p.name()))
            };
            Ok(Times {
                real: value("real")?,
                user: value("user")?,
                sys: value("sys")?,
            })
        })
        .collect()
}

/// Run the study.
pub fn systime(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<SysTime> {
    if opts.policies.is_empty() || opts.programs.is_empty() || opts.runs == 0 {
        return Err(KernelError::Option(
            "kernel systime needs a policy, a program and a run".into(),
        ));
    }
    let started = Instant::now();
    let built = crate::kbuild::build(&opts.run.build, progress)?;
    let init = init_script(opts)?;
    let mut times: BTreeMap<(Policy, Program), Vec<Times>> = BTreeMap::new();
    let total = opts.policies.len() * opts.runs as usize;
    let mut done = 0;
    // Runs outermost: a drift of the host over the study spreads over
    // every policy rather than landing on one.
    for run_no in 1..=opts.runs {
        for &policy in &opts.policies {
            progress(Progress::Run {
                done,
                total,
                label: format!("{} run {run_no}", policy.name()),
            });
            done += 1;
            let mut o = opts.run.clone();
            o.policy = policy;
            o.accel = Accel::Tcg;
            o.command = vec!["systime".to_owned()];
            o.init = Some(init.clone());
            o.share_host_root = opts.programs.iter().any(|p| p.runs_on_host());
            // The host's programs are built for x86-64-v2 and up.
            o.cpu_model = Some("max".to_owned());
            o.extra_qemu_args = vec!["-icount".to_owned(), "shift=0".to_owned()];
            let guest = run::boot_guest(&o, progress)?;
            let text = guest
                .sections
                .get("systime")
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            let parsed =
                parse_section(&text, &opts.programs).map_err(|what| KernelError::GuestOutput {
                    path: guest.console_log.clone(),
                    what: format!("{} run {run_no}: {what}", policy.name()),
                })?;
            guest.discard();
            for (&p, t) in opts.programs.iter().zip(parsed) {
                times.entry((policy, p)).or_default().push(t);
            }
        }
    }
    let mut rows = Vec::new();
    for &program in &opts.programs {
        let base = times.get(&(Policy::Buddy, program)).map(|t| {
            (
                Spread::of(&t.iter().map(|x| x.sys).collect::<Vec<_>>()).mean,
                Spread::of(&t.iter().map(|x| x.real).collect::<Vec<_>>()).mean,
            )
        });
        for &policy in &opts.policies {
            let runs = times.remove(&(policy, program)).unwrap_or_default();
            let spread = |f: fn(&Times) -> f64| Spread::of(&runs.iter().map(f).collect::<Vec<_>>());
            let (real, user, sys) = (spread(|t| t.real), spread(|t| t.user), spread(|t| t.sys));
            let over = |mine: f64, base: f64| {
                (policy != Policy::Buddy && base > 0.0).then(|| 100.0 * (mine / base - 1.0))
            };
            rows.push(Row {
                program,
                policy,
                sys_overhead_pct: base.and_then(|(bs, _)| over(sys.mean, bs)),
                real_overhead_pct: base.and_then(|(_, br)| over(real.mean, br)),
                runs,
                real,
                user,
                sys,
            });
        }
    }
    Ok(SysTime {
        kernel: built.hash,
        runs: opts.runs,
        cpus: opts.run.cpus,
        mem_mib: opts.run.mem_mib,
        rows,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guests_times_parse_and_a_failed_or_missing_program_is_refused() {
        let text = "program=gzip status=0 real 12.50 user 11.02 sys 0.40 \n\
                    program=sortjob status=0 real 3.00 user 2.00 sys 0.90 \n";
        let t = parse_section(text, &[Program::Sortjob, Program::Gzip]).unwrap();
        assert_eq!(
            t[1],
            Times {
                real: 12.5,
                user: 11.02,
                sys: 0.4
            }
        );
        assert!(parse_section(text, &[Program::Xz]).is_err());
        let failed = text.replace("gzip status=0", "gzip status=1");
        assert!(parse_section(&failed, &[Program::Gzip]).is_err());
        let short = "program=gzip status=0 real 12.50 user 11.02\n";
        assert!(parse_section(short, &[Program::Gzip]).is_err());
    }

    #[test]
    fn spreads_are_sample_deviations() {
        let s = Spread::of(&[1.0, 2.0, 3.0]);
        assert_eq!((s.mean, s.sd, s.min, s.max), (2.0, 1.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[5.0]).sd, 0.0);
    }

    #[test]
    fn every_program_has_a_command_and_names_parse() {
        for p in Program::ALL {
            assert!(!p.command().unwrap().is_empty());
            assert_eq!(Program::parse(p.name()).unwrap(), p);
        }
        assert!(Program::parse("make").is_err());
    }
}
