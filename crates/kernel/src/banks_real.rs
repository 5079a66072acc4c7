//! Seed 002's claim on real programs: each program runs in a guest under
//! each page-frame policy of the kernel, its memory accesses are recorded
//! through the machine's last-level cache ([`crate::memtrace`]), and the
//! recording goes through nvmos's timing model of that machine. The
//! placement is the kernel's own: the physical addresses in a recording
//! are the frames the booted policy handed out.
//!
//! What the replay can and cannot say: the requests arrive when the guest
//! made them (open loop), so placement changes how long each request takes
//! (row hits, conflicts, banks working in parallel) but not when the next
//! one is issued. The figures are therefore per request: bank-level
//! parallelism, row-hit rate, mean read latency, and the read time (reads
//! × their mean latency from arrival: how long a core that waits for each
//! miss would wait in all). Each program's runs under different policies
//! are different executions (threads interleave differently), so their
//! request counts differ a little; the tables give them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use nvmos_memsys::trace::{self as memtrace_replay, TraceFormat, TraceStats};
use nvmos_memsys::{ControllerConfig, Machine};
use nvmos_sim::study::{Bound, Check};

use crate::memtrace::{MemTrace, MemTraceReport, MARK_PROGRAM};
use crate::run::{self, Policy, RunOptions, HOST_ROOT_TAG};
use crate::{KernelError, Progress, Result};

/// A real program from the host's Debian packages, run in the guest from
/// the host's root (shared read-only) on a corpus the guest makes first.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Program {
    /// GNU sort on two threads (`sort --parallel=2`), coreutils.
    Sort,
    /// xz compressing on two threads (`xz -T2 -3`), xz-utils.
    Xz,
    /// sqlite3 building, indexing and querying a table, sqlite3.
    Sqlite3,
    /// numpy sorting and multiplying arrays, OpenBLAS on two threads,
    /// python3-numpy.
    Numpy,
}

impl Program {
    /// Every program, in table order.
    pub const ALL: [Program; 4] = [Program::Sort, Program::Xz, Program::Sqlite3, Program::Numpy];

    /// Its name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Program::Sort => "sort",
            Program::Xz => "xz",
            Program::Sqlite3 => "sqlite3",
            Program::Numpy => "numpy",
        }
    }

    /// By name.
    pub fn parse(s: &str) -> Result<Program> {
        Program::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                KernelError::Option(format!(
                    "unknown program {s:?}: one of sort, xz, sqlite3, numpy"
                ))
            })
    }

    /// The host program and the Debian package it comes from.
    fn host_program(self) -> (&'static str, &'static str) {
        match self {
            Program::Sort => ("/usr/bin/sort", "coreutils"),
            Program::Xz => ("/usr/bin/xz", "xz-utils"),
            Program::Sqlite3 => ("/usr/bin/sqlite3", "sqlite3"),
            Program::Numpy => ("/usr/bin/python3", "python3-numpy"),
        }
    }

    /// Refuses a program the host cannot run in the guest, naming the
    /// package that brings it.
    pub fn check_host(self) -> Result<()> {
        let (path, package) = self.host_program();
        let missing = || KernelError::ToolMissing {
            tool: path.to_owned(),
            hint: format!(
                "the {} program runs the host's; apt-get install {package}",
                self.name()
            ),
        };
        if !Path::new(path).is_file() {
            return Err(missing());
        }
        if self == Program::Numpy {
            let ok = Command::new(path)
                .args(["-c", "import numpy"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if !ok {
                return Err(missing());
            }
        }
        Ok(())
    }

    /// The command, run in the chroot of the host's root with `/tmp` the
    /// guest's.
    fn work(self) -> &'static str {
        match self {
            Program::Sort => "sort --parallel=2 -S 64M /tmp/corpus -o /tmp/sorted",
            Program::Xz => "xz -T2 -3 -c /tmp/corpus > /tmp/corpus.xz",
            Program::Sqlite3 => "sqlite3 /tmp/t.db < /tmp/t.sql > /tmp/t.out",
            Program::Numpy => "OPENBLAS_NUM_THREADS=2 python3 /tmp/job.py",
        }
    }

    /// Whether it needs QEMU's `-cpu max` (numpy's baseline is
    /// x86-64-v2, which TCG's default `qemu64` lacks).
    fn needs_max_cpu(self) -> bool {
        self == Program::Numpy
    }
}

/// Where a guest's frames come from: a kernel policy and the boot
/// parameters it runs with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// `nvmos_policy=`.
    pub policy: Policy,
    /// More kernel parameters, e.g. `nvmos_m3_partition=0`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boot: Vec<String>,
}

impl Placement {
    /// The parameter that turns M³'s partition off.
    const M3_SHARED: &'static str = "nvmos_m3_partition=0";

    /// A policy with its defaults.
    pub fn of(policy: Policy) -> Placement {
        Placement {
            policy,
            boot: Vec::new(),
        }
    }

    /// M³ with every CPU drawing from every colour: random placement over
    /// the banks, without the partition.
    pub fn m3_shared() -> Placement {
        Placement {
            policy: Policy::M3,
            boot: vec![Self::M3_SHARED.into()],
        }
    }

    /// Its name in tables: the policy's, `m3-shared`, or the policy's
    /// with its parameters.
    pub fn name(&self) -> String {
        if self.boot.is_empty() {
            self.policy.name().to_owned()
        } else if *self == Placement::m3_shared() {
            "m3-shared".to_owned()
        } else {
            format!("{} {}", self.policy.name(), self.boot.join(" "))
        }
    }

    /// A policy's name (`nvmos_policy=`), or `m3-shared`.
    pub fn parse(s: &str) -> Result<Placement> {
        if s == "m3-shared" {
            Ok(Placement::m3_shared())
        } else {
            Policy::parse(s).map(Placement::of)
        }
    }

    /// Whether this is buddy as Linux has it.
    pub fn is_buddy(&self) -> bool {
        *self == Placement::of(Policy::Buddy)
    }
}

/// The SQL sqlite3 runs: rows inserted, indexed, queried and updated;
/// deterministic, so every run does the same work.
const SQL: &str = "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 60000)
INSERT INTO t SELECT x, (x * 7919) % 100003, printf('%08x%08x', (x * 2654435761) % 4294967296, x) FROM c;
CREATE INDEX tk ON t(k);
SELECT count(*), sum(k) FROM t WHERE k BETWEEN 1000 AND 60000;
UPDATE t SET v = upper(v) WHERE k % 3 = 0;
SELECT k, count(*) FROM t GROUP BY k % 97 ORDER BY 2 DESC LIMIT 3;
";

/// The numpy job: a sort and a matrix product, seeded.
const NUMPY_JOB: &str = "import numpy as np
rng = np.random.default_rng(2012)
a = rng.random(1_000_000)
a.sort()
m = rng.random((320, 320))
print(float((m @ m.T).sum() + a[::1000].sum()))
";

/// The guest's command for `program`: mount the host's root, make the
/// corpus (outside the recorded window), open the window, run, close it.
pub fn guest_command(program: Program, corpus_lines: u64) -> Vec<String> {
    let script = format!(
        r#"H=/mnt
mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,ro {HOST_ROOT_TAG} $H || exit 90
mount -t proc proc $H/proc && mount -t devtmpfs dev $H/dev && mount -t tmpfs -o size=50% tmp $H/tmp || exit 91
awk 'BEGIN {{ srand(2012); for (i = 0; i < {corpus_lines}; i++) printf "%d %d %s\n", int(rand() * 1000000000), i, "nvmos-corpus-line" }}' > $H/tmp/corpus || exit 92
cat > $H/tmp/t.sql <<'NVMOS_SQL'
{SQL}NVMOS_SQL
cat > $H/tmp/job.py <<'NVMOS_PY'
{NUMPY_JOB}NVMOS_PY
{MARK_PROGRAM} start
chroot $H /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp /bin/sh -c '{work}'
status=$?
{MARK_PROGRAM} stop
exit $status"#,
        work = program.work()
    );
    vec!["sh".into(), "-c".into(), script]
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// How every guest boots (memory, vCPUs, kernel); placement, command,
    /// host share and memory trace are set per guest.
    pub run: RunOptions,
    /// The placements; the first is the one recorded twice and run
    /// without the plugin.
    pub placements: Vec<Placement>,
    /// The programs.
    pub programs: Vec<Program>,
    /// The machine preset whose cache filters the accesses and whose
    /// memory replays them.
    pub machine: String,
    /// Lines of the corpus sort and xz read.
    pub corpus_lines: u64,
    /// Also run each program once without the plugin (under the first
    /// placement) for the plugin's overhead.
    pub overhead: bool,
    /// Record each program twice under the first placement: the difference
    /// between the two runs is the noise floor every comparison sits on.
    pub repeat_first: bool,
    /// Where the recordings are kept (`PROGRAM-POLICY.trace`).
    pub traces: PathBuf,
}

impl Options {
    /// Every program under buddy, ibuddy, lis31, adaptive, m3 and
    /// m3-shared, on 2 vCPUs and 1 GiB, through ddr4-2400, with buddy
    /// recorded twice and the overhead runs.
    pub fn new(mut run: RunOptions, traces: PathBuf) -> Options {
        run.cpus = 2;
        run.mem_mib = 1024;
        Options {
            run,
            placements: vec![
                Placement::of(Policy::Buddy),
                Placement::of(Policy::IBuddy),
                Placement::of(Policy::Lis31),
                Placement::of(Policy::Adaptive),
                Placement::of(Policy::M3),
                Placement::m3_shared(),
            ],
            programs: Program::ALL.to_vec(),
            machine: "ddr4-2400".into(),
            corpus_lines: 200_000,
            overhead: true,
            repeat_first: true,
            traces,
        }
    }
}

fn first_run() -> u32 {
    1
}

/// One program under one placement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The program.
    pub program: Program,
    /// The placement booted.
    pub placement: Placement,
    /// 1, or 2 for the first placement's second recording
    /// ([`Options::repeat_first`]).
    #[serde(default = "first_run")]
    pub run: u32,
    /// Host seconds of the guest (boot to power-off).
    pub host_s: f64,
    /// What the plugin recorded.
    pub recorded: MemTraceReport,
    /// The timing model's figures for the recording.
    pub memory: TraceStats,
    /// Mean read latency from arrival, ns.
    pub read_latency_ns: f64,
    /// Reads × their mean latency from arrival, ms: the time a core that
    /// waits for every miss would wait.
    pub read_time_ms: f64,
}

/// The plugin's cost on one program: the same guest with and without it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// The program.
    pub program: Program,
    /// The placement of both runs.
    pub placement: Placement,
    /// Host seconds without the plugin.
    pub plain_s: f64,
    /// Host seconds with it.
    pub traced_s: f64,
    /// `traced_s / plain_s`.
    pub ratio: f64,
    /// Accesses the plugin looked up.
    pub accesses: u64,
    /// Bytes of its trace.
    pub trace_bytes: u64,
    /// Requests in it.
    pub requests: u64,
}

/// A placement against buddy on one program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersusBuddy {
    /// The program.
    pub program: Program,
    /// The placement.
    pub placement: Placement,
    /// Its run (2: buddy's second recording against its first, the
    /// noise floor).
    #[serde(default = "first_run")]
    pub run: u32,
    /// Its busy BLP over buddy's.
    pub blp_ratio: f64,
    /// Its mean read latency over buddy's.
    pub latency_ratio: f64,
    /// Its read time over buddy's (below 1: faster).
    pub read_time_ratio: f64,
}

/// The study's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BanksReal {
    /// The machine.
    pub machine: String,
    /// Guest vCPUs.
    pub cpus: u32,
    /// Guest memory, MiB.
    pub mem_mib: u64,
    /// Corpus lines.
    pub corpus_lines: u64,
    /// Every program under every placement, program-major.
    pub cells: Vec<Cell>,
    /// Each placement against buddy, where both ran.
    pub versus_buddy: Vec<VersusBuddy>,
    /// The plugin's overhead per program.
    pub overhead: Vec<Overhead>,
    /// The seed's claim, per program: bank-aware placement (M³) gives
    /// shorter read time than buddy.
    pub checks: Vec<Check>,
    /// Host seconds for the whole study.
    pub seconds: f64,
}

impl BanksReal {
    /// Recompute the comparisons with buddy and the checks from the cells
    /// (they are derived from them alone): a JSON of an earlier nvmos
    /// then renders with today's checks.
    pub fn rederive(&mut self) {
        self.versus_buddy = versus_buddy(&self.cells);
        self.checks = checks(&self.versus_buddy);
    }
}

fn replay(machine: &Machine, path: &Path) -> Result<TraceStats> {
    let f = std::fs::File::open(path).map_err(|e| KernelError::io("opening", path, e))?;
    let parsed = memtrace_replay::parse(std::io::BufReader::new(f), TraceFormat::Dramsim3)
        .map_err(|e| KernelError::GuestOutput {
            path: path.to_owned(),
            what: e.to_string(),
        })?;
    memtrace_replay::run(machine, ControllerConfig::default(), &parsed).map_err(|e| {
        KernelError::GuestOutput {
            path: path.to_owned(),
            what: e.to_string(),
        }
    })
}

fn guest(
    opts: &Options,
    program: Program,
    placement: &Placement,
    trace: Option<PathBuf>,
) -> Result<RunOptions> {
    let mut o = opts.run.clone();
    o.policy = placement.policy;
    o.extra_cmdline.extend(placement.boot.iter().cloned());
    o.command = guest_command(program, opts.corpus_lines);
    o.output = None;
    o.share_host_root = true;
    if program.needs_max_cpu() {
        o.cpu_model = Some("max".into());
    }
    o.mem_trace = match trace {
        Some(path) => {
            let mut m = MemTrace::for_machine(path, &opts.machine)?;
            m.marked_by_command = true;
            Some(m)
        }
        None => None,
    };
    Ok(o)
}

fn check_status(r: &run::Run, program: Program, placement: &Placement) -> Result<()> {
    // The kernel keeps its default on a parameter it refuses: a run that
    // did not boot the placement asked for would be mislabelled.
    if placement.policy == Policy::M3 {
        let partitioned = u64::from(!placement.boot.iter().any(|b| b == Placement::M3_SHARED));
        if r.counters.get("m3_partition") != partitioned {
            return Err(KernelError::Guest {
                what: format!(
                    "{} booted with m3_partition {}, not the {} asked for",
                    placement.name(),
                    r.counters.get("m3_partition"),
                    partitioned
                ),
                log: r.console_log.clone(),
            });
        }
    }
    if r.workload_status != 0 {
        return Err(KernelError::Guest {
            what: format!(
                "{} under {} exited with status {}",
                program.name(),
                placement.name(),
                r.workload_status
            ),
            log: r.console_log.clone(),
        });
    }
    Ok(())
}

/// Run every program under every placement; replay each recording.
pub fn banks_real(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<BanksReal> {
    if opts.placements.is_empty() || opts.programs.is_empty() {
        return Err(KernelError::Option(
            "the real-program banks study needs a placement and a program".into(),
        ));
    }
    if opts.corpus_lines == 0 {
        return Err(KernelError::Option("a corpus of at least one line".into()));
    }
    for p in &opts.programs {
        p.check_host()?;
    }
    let machine = Machine::preset(&opts.machine).map_err(|e| KernelError::Option(e.to_string()))?;
    std::fs::create_dir_all(&opts.traces)
        .map_err(|e| KernelError::io("creating", &opts.traces, e))?;
    let started = Instant::now();
    crate::kbuild::build(&opts.run.build, progress)?;
    let mut cells = Vec::new();
    let mut overhead = Vec::new();
    let mut plan = Vec::new();
    for &program in &opts.programs {
        for (i, placement) in opts.placements.iter().enumerate() {
            plan.push((program, placement, 1));
            if i == 0 && opts.repeat_first {
                plan.push((program, placement, 2));
            }
        }
    }
    for (step, &(program, placement, run_no)) in plan.iter().enumerate() {
        progress(Progress::Step(format!(
            "[{}/{}] {} under {} with the memory trace{}",
            step + 1,
            plan.len(),
            program.name(),
            placement.name(),
            if run_no == 2 { ", again" } else { "" }
        )));
        let path = opts.traces.join(format!(
            "{}-{}-{run_no}.trace",
            program.name(),
            placement.name().replace(' ', "_")
        ));
        let r = run::run(
            &guest(opts, program, placement, Some(path.clone()))?,
            progress,
        )?;
        check_status(&r, program, placement)?;
        let recorded = r.mem_trace.clone().ok_or_else(|| KernelError::Guest {
            what: "no memory-trace report".into(),
            log: r.console_log.clone(),
        })?;
        let memory = replay(&machine, &path)?;
        let tck_ns = f64::from(
            machine
                .timing(nvmos_memsys::Technology::Dram)
                .map_or(0, |t| t.tck_ps),
        ) / 1000.0;
        let read_latency_ns = memory.read_latency_from_arrival.mean * tck_ns;
        cells.push(Cell {
            program,
            placement: placement.clone(),
            run: run_no,
            host_s: r.total_s,
            read_time_ms: memory.reads as f64 * read_latency_ns / 1e6,
            read_latency_ns,
            recorded,
            memory,
        });
        let last_of_program = plan.get(step + 1).is_none_or(|n| n.0 != program);
        if opts.overhead && last_of_program {
            let placement = &opts.placements[0];
            progress(Progress::Step(format!(
                "{} under {} without the plugin",
                program.name(),
                placement.name()
            )));
            let plain = run::run(&guest(opts, program, placement, None)?, progress)?;
            check_status(&plain, program, placement)?;
            let traced = cells
                .iter()
                .find(|c| c.program == program && c.placement == *placement && c.run == 1)
                .expect("the traced run of the first placement");
            overhead.push(Overhead {
                program,
                placement: placement.clone(),
                plain_s: plain.total_s,
                traced_s: traced.host_s,
                ratio: traced.host_s / plain.total_s,
                accesses: traced.recorded.accesses(),
                trace_bytes: traced.recorded.trace_bytes,
                requests: traced.recorded.records,
            });
        }
    }
    let versus_buddy = versus_buddy(&cells);
    let checks = checks(&versus_buddy);
    Ok(BanksReal {
        machine: opts.machine.clone(),
        cpus: opts.run.cpus,
        mem_mib: opts.run.mem_mib,
        corpus_lines: opts.corpus_lines,
        cells,
        versus_buddy,
        overhead,
        checks,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Each cell but buddy's first against buddy's first recording of the
/// same program.
pub fn versus_buddy(cells: &[Cell]) -> Vec<VersusBuddy> {
    let mut out = Vec::new();
    for c in cells
        .iter()
        .filter(|c| !c.placement.is_buddy() || c.run != 1)
    {
        if let Some(b) = cells
            .iter()
            .find(|b| b.program == c.program && b.placement.is_buddy() && b.run == 1)
        {
            out.push(VersusBuddy {
                program: c.program,
                placement: c.placement.clone(),
                run: c.run,
                blp_ratio: c.memory.busy_blp / b.memory.busy_blp,
                latency_ratio: c.read_latency_ns / b.read_latency_ns,
                read_time_ratio: c.read_time_ms / b.read_time_ms,
            });
        }
    }
    out
}

/// Seed 002's claim, per program and M³ placement: M³'s read time below
/// buddy's.
fn checks(versus: &[VersusBuddy]) -> Vec<Check> {
    versus
        .iter()
        .filter(|v| v.placement.policy == Policy::M3)
        .map(|v| {
            let noise = versus
                .iter()
                .find(|n| n.program == v.program && n.placement.is_buddy() && n.run == 2)
                .map_or("buddy was recorded once: no noise floor".to_owned(), |n| {
                    format!(
                        "buddy's second recording: read time {:.3}x, BLP {:.3}x its first (the noise floor)",
                        n.read_time_ratio, n.blp_ratio
                    )
                });
            Check::new(
                format!(
                    "{}: {} read time against buddy's",
                    v.program.name(),
                    if v.placement == Placement::of(Policy::M3) {
                        "M³ (bank-partitioned)".to_owned()
                    } else if v.placement == Placement::m3_shared() {
                        "M³ (shared: random over every bank)".to_owned()
                    } else {
                        format!("M³ ({})", v.placement.name())
                    }
                ),
                "Seed 002: bank-spread placement runs faster",
                v.read_time_ratio,
                "x buddy",
                Bound::AtMost(1.0),
            )
            .detail(format!(
                "BLP while busy {:.3}x, mean read latency {:.3}x buddy's; {noise}",
                v.blp_ratio, v.latency_ratio
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(
        program: Program,
        policy: Policy,
        run: u32,
        blp: f64,
        latency: f64,
        reads: u64,
    ) -> Cell {
        let memory = TraceStats {
            reads,
            busy_blp: blp,
            ..Default::default()
        };
        Cell {
            program,
            placement: Placement::of(policy),
            run,
            host_s: 1.0,
            recorded: MemTraceReport::default(),
            memory,
            read_latency_ns: latency,
            read_time_ms: reads as f64 * latency / 1e6,
        }
    }

    #[test]
    fn every_policy_and_buddys_second_run_are_set_against_buddys_first() {
        let cells = [
            cell(Program::Sort, Policy::Buddy, 1, 2.0, 100.0, 1000),
            cell(Program::Sort, Policy::Buddy, 2, 2.2, 110.0, 1000),
            cell(Program::Sort, Policy::M3, 1, 3.0, 80.0, 1500),
            cell(Program::Xz, Policy::M3, 1, 3.0, 80.0, 1500),
        ];
        let v = versus_buddy(&cells);
        // xz has no buddy run: nothing to set it against.
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].placement.policy, v[0].run), (Policy::Buddy, 2));
        assert!((v[0].latency_ratio - 1.1).abs() < 1e-12);
        assert_eq!((v[1].placement.policy, v[1].run), (Policy::M3, 1));
        assert!((v[1].blp_ratio - 1.5).abs() < 1e-12);
        assert!((v[1].read_time_ratio - 1.2).abs() < 1e-12);
        let c = checks(&v);
        assert_eq!(c.len(), 1);
        assert!(
            !c[0].met,
            "M³'s read time is 1.2x buddy's: the claim is missed"
        );
        assert!(c[0].detail.contains("1.100"), "{}", c[0].detail);
    }

    #[test]
    fn placements_are_named_and_parsed_back() {
        for p in [
            Placement::of(Policy::Buddy),
            Placement::of(Policy::M3),
            Placement::m3_shared(),
        ] {
            assert_eq!(Placement::parse(&p.name()).unwrap(), p);
        }
        assert_eq!(Placement::m3_shared().name(), "m3-shared");
        assert!(Placement::parse("m3-private").is_err());
    }

    #[test]
    fn the_guest_marks_only_the_program_and_names_it() {
        for p in Program::ALL {
            let cmd = guest_command(p, 1234);
            assert_eq!(&cmd[..2], ["sh", "-c"]);
            let script = &cmd[2];
            let start = script.find(&format!("{MARK_PROGRAM} start")).unwrap();
            let work = script.find(p.work()).unwrap();
            let stop = script.find(&format!("{MARK_PROGRAM} stop")).unwrap();
            let corpus = script.find("i < 1234").unwrap();
            assert!(corpus < start && start < work && work < stop, "{script}");
            assert_eq!(Program::parse(p.name()).unwrap(), p);
        }
        let err = Program::parse("stream").unwrap_err().to_string();
        assert!(err.contains("stream") && err.contains("sqlite3"), "{err}");
    }

    #[test]
    fn a_study_without_programs_or_policies_is_refused() {
        let run = RunOptions::new(
            crate::kbuild::BuildOptions::new(crate::repo_kernel_dir()),
            crate::repo_workloads_dir(),
            Policy::Buddy,
            Vec::new(),
        );
        let mut o = Options::new(run, std::env::temp_dir());
        o.programs.clear();
        assert!(banks_real(&o, &mut |_| {}).is_err());
        o.programs = vec![Program::Sort];
        o.corpus_lines = 0;
        assert!(banks_real(&o, &mut |_| {}).is_err());
    }
}
