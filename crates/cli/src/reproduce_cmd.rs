//! `nvmos reproduce`: the results pipeline. Runs every study the book
//! publishes (`nvmos_sim::reproduce`), writes each results page's data
//! (`data/<page>.json`) and Markdown (`nvmos_pages::results`), and, with
//! `--install`, puts them into the book and README's table between its
//! markers; with `--check`, holds the committed pages to their data and to
//! a fresh run instead of writing anything.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use nvmos_pages::results::{self, Body, PageData, ResultsPage, Stamp};
use nvmos_report::{write_atomic, OutputDir};
use nvmos_sim::reproduce::{self, Options};
use nvmos_sim::study::Scale;

/// README's generated table lies between these two lines.
pub const README_BEGIN: &str =
    "<!-- nvmos reproduce: results table begins (generated; do not edit) -->";
/// See [`README_BEGIN`].
pub const README_END: &str = "<!-- nvmos reproduce: results table ends -->";

/// `nvmos reproduce`.
#[derive(clap::Args, Debug)]
pub struct ReproduceArgs {
    /// The small versions of the studies that have one (minutes in all;
    /// their figures are not the seeds'); the wear study on the traces is
    /// the same at both scales.
    #[arg(long)]
    pub quick: bool,
    /// Folder written: `data/<page>.json`, `<page>.md`, `index.md` and
    /// `readme-table.md`.
    #[arg(long, default_value = "nvmos-results")]
    pub out: PathBuf,
    /// Folder of traces: every file in it is replayed.
    #[arg(long, default_value = "traces")]
    pub traces: PathBuf,
    /// Alternating runs of every timing (at least 2; the book's are 5).
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
    /// Leave out the timings (only deterministic results).
    #[arg(long)]
    pub no_timings: bool,
    /// Run only these pages' studies (evaluate, levelling, banks,
    /// banks-real, power, swap, timings, kernel, hot-migrate, pmo, psync, peers); `--install` then replaces only those
    /// pages and keeps the others, and README's table only with
    /// `evaluate`.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "PAGE",
        conflicts_with = "check"
    )]
    pub only: Vec<String>,
    /// With `--only kernel`: make the kernel page from `bench.json`,
    /// `systime.json` and `kernel.json` in this folder (written by `nvmos
    /// kernel bench --json`, `nvmos kernel systime --json` and `nvmos
    /// kernel study --policies buddy,adaptive,adaptive-migrate --workloads
    /// sparsejob,pressurejob,filejob --runs 2 --cpus 1 --icount --bank-mib
    /// 16 --out`), and `wis.json` (written by `nvmos kernel wis --json`)
    /// instead of running them.
    #[arg(long, value_name = "DIR")]
    pub kernel_from: Option<PathBuf>,
    /// With `--only hot-migrate`: make the page of hot-page migration in
    /// the kernel from `levelling.json` in this folder (written by `nvmos
    /// kernel levelling --json`) instead of running it.
    #[arg(long, value_name = "DIR")]
    pub hot_from: Option<PathBuf>,
    /// With `--only banks-real`: make the page of seed 002 on real
    /// programs from `banks-real.json` and `banks.json` in this folder
    /// (written by `nvmos study banks --real --out DIR`) instead of
    /// running it.
    #[arg(long, value_name = "DIR")]
    pub banks_real_from: Option<PathBuf>,
    /// With `--only pmo`: make the persistent-memory-object page from
    /// `pmo.json` and `scaling.json` in this folder (written by `nvmos
    /// bench pmo --out DIR` and `nvmos bench scaling --json`) instead of
    /// running them.
    #[arg(long, value_name = "DIR")]
    pub pmo_from: Option<PathBuf>,
    /// With `--only psync`: make the page of psync beside PMDK from
    /// `psync.json` in this folder (written by `nvmos bench psync --json >
    /// DIR/psync.json`) instead of running it.
    #[arg(long, value_name = "DIR")]
    pub psync_from: Option<PathBuf>,
    /// With `--only peers`: make the page of the frame allocators beside
    /// LLFree from `peers.json` in this folder (written by
    /// `crates/frames/bench-peers/run.sh --cpu-time --rounds 5 --json
    /// DIR/peers.json`) instead of running it.
    #[arg(long, value_name = "DIR")]
    pub peers_from: Option<PathBuf>,
    /// With `--only peers` and no `--peers-from`: the LLFree checkout
    /// (luhsra/llfree-rs) that `crates/frames/bench-peers` is built
    /// against and run beside (required then: nvmos does not ship LLFree;
    /// the source tree nvmos was built from must be present).
    #[arg(long, value_name = "DIR", conflicts_with = "peers_from")]
    pub llfree_source: Option<PathBuf>,
    /// With `--only kernel` and no `--kernel-from`: the will-it-scale
    /// checkout `nvmos kernel wis` compiles its tests from (required
    /// then: nvmos does not ship will-it-scale).
    #[arg(long, value_name = "DIR", conflicts_with = "kernel_from")]
    pub wis_source: Option<PathBuf>,
    /// Rows of the wear study replayed at once (threads); default: every
    /// core. The deterministic results do not depend on it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// Also install what was written into the book (`--docs`), its CLI
    /// reference and README's results table (`--readme`).
    #[arg(long, conflicts_with = "check")]
    pub install: bool,
    /// Write nothing: check that every committed results page renders
    /// from its committed data, that the CLI reference and README's table
    /// are current, and that a fresh run of the deterministic studies
    /// (at `--quick` scale if given, no timings) gives the committed
    /// figures. Exits 1 naming every difference.
    #[arg(long)]
    pub check: bool,
    /// With `--check`: hold the pages to their data, README's table and
    /// the CLI reference only, without running the studies (seconds).
    #[arg(long, requires = "check")]
    pub data_only: bool,
    /// The book's folder (`src/results` and `src/reference` below it).
    #[arg(long, default_value = "docs")]
    pub docs: PathBuf,
    /// The README whose results table is generated.
    #[arg(long, default_value = "README.md")]
    pub readme: PathBuf,
    /// Write only the CLI reference (`<docs>/src/reference/cli.md`),
    /// running no study: after a change to the command line.
    #[arg(long, conflicts_with_all = ["check", "install"])]
    pub reference_only: bool,
}

/// Run it.
pub fn run(args: ReproduceArgs, cli: clap::Command) -> Result<()> {
    let scale = crate::study::scale(args.quick);
    let mut options = Options::new(scale, &args.traces);
    options.runs = args.runs;
    options.jobs = args.jobs.map(|j| j as usize);
    if args.no_timings {
        options.timings = None;
    }
    if args.check {
        return check(&args, options, cli);
    }
    if args.reference_only {
        let reference = args.docs.join("src/reference/cli.md");
        write_atomic(&reference, cli_reference(cli).as_bytes(), &[])?;
        println!("wrote the CLI reference into {}", reference.display());
        return Ok(());
    }
    if !args.only.is_empty() {
        if let Some(bad) = args
            .only
            .iter()
            .find(|p| !results::PAGE_ORDER.contains(&p.as_str()))
        {
            bail!(
                "--only {bad}: no such page (pages: {})",
                results::PAGE_ORDER.join(", ")
            );
        }
        let has = |p: &str| args.only.iter().any(|o| o == p);
        let at = |p: &str| if has(p) { Some(scale) } else { None };
        options.evaluate = has("evaluate");
        (
            options.levelling,
            options.banks,
            options.power,
            options.swap,
        ) = (at("levelling"), at("banks"), at("power"), at("swap"));
        if !has("timings") || args.no_timings {
            options.timings = None;
        }
    }
    let kernel = args.only.iter().any(|o| o == "kernel");
    let pmo = args.only.iter().any(|o| o == "pmo");
    let peers = args.only.iter().any(|o| o == "peers");
    let psync = args.only.iter().any(|o| o == "psync");
    if args.psync_from.is_some() && !psync {
        bail!("--psync-from: only with --only psync");
    }
    if (args.peers_from.is_some() || args.llfree_source.is_some()) && !peers {
        bail!("--peers-from and --llfree-source: only with --only peers");
    }
    if peers && args.peers_from.is_none() && args.llfree_source.is_none() {
        bail!(
            "--only peers runs nvmos's allocators beside LLFree, which nvmos does not ship: give an llfree-rs checkout with --llfree-source DIR, or make the page from bench-peers' JSON with --peers-from DIR"
        );
    }
    if args.pmo_from.is_some() && !pmo {
        bail!("--pmo-from: only with --only pmo");
    }
    let hot = args.only.iter().any(|o| o == "hot-migrate");
    if args.hot_from.is_some() && !hot {
        bail!("--hot-from: only with --only hot-migrate");
    }
    let banks_real = args.only.iter().any(|o| o == "banks-real");
    if args.banks_real_from.is_some() && !banks_real {
        bail!("--banks-real-from: only with --only banks-real");
    }
    if args.kernel_from.is_some() && !kernel {
        bail!("--kernel-from: only with --only kernel");
    }
    if args.wis_source.is_some() && !kernel {
        bail!("--wis-source: only with --only kernel");
    }
    if kernel && args.kernel_from.is_none() && args.wis_source.is_none() {
        bail!(
            "--only kernel runs the kernel measurements, and `nvmos kernel wis` needs a will-it-scale checkout: give it with --wis-source DIR, or make the page from the tools' JSON with --kernel-from DIR"
        );
    }
    let stamp = stamp()?;
    let mut made = Vec::new();
    if args.only.is_empty()
        || args
            .only
            .iter()
            .any(|o| !OWN_RUN_PAGES.contains(&o.as_str()))
    {
        let run = crate::with_progress(0, |p| reproduce::run(&options, p))
            .context("running the results pipeline")?;
        made = results::pages(&run)?;
    }
    if kernel {
        made.push(kernel_page(
            args.kernel_from.as_deref(),
            args.wis_source.as_deref(),
        )?);
    }
    if hot {
        made.push(hot_migrate_page(args.hot_from.as_deref())?);
    }
    if banks_real {
        made.push(banks_real_page(args.banks_real_from.as_deref())?);
    }
    if pmo {
        made.push(pmo_page(args.pmo_from.as_deref())?);
    }
    if psync {
        made.push(psync_page(args.psync_from.as_deref())?);
    }
    if peers {
        made.push(peers_page(
            args.peers_from.as_deref(),
            args.llfree_source.as_deref(),
            args.runs,
        )?);
    }
    let pages = data(made, &stamp);
    write_pages(&args.out, &pages)?;
    let table = readme_table(&pages).ok();
    if let Some(table) = &table {
        OutputDir::create(&args.out, &[])?.write("readme-table.md", table.as_bytes())?;
    }
    if args.install {
        let results_dir = args.docs.join("src/results");
        write_pages(&results_dir, &pages)?;
        let reference = args.docs.join("src/reference/cli.md");
        write_atomic(&reference, cli_reference(cli).as_bytes(), &[])?;
        if let Some(table) = &table {
            let readme = read(&args.readme)?;
            write_atomic(
                &args.readme,
                with_table(&readme, table, &args.readme)?.as_bytes(),
                &[],
            )?;
        }
        println!(
            "installed {} pages into {} and the CLI reference into {}{}",
            pages.len(),
            results_dir.display(),
            reference.display(),
            if table.is_some() {
                format!("; the table into {}", args.readme.display())
            } else {
                String::new()
            }
        );
    }
    println!("{}", results::index(&pages));
    println!("written to {}", args.out.display());
    Ok(())
}

/// The kernel page, from the kernel tools' JSON in `from`, or by running
/// them with their defaults (`nvmos kernel wis` on the will-it-scale
/// checkout `wis_source`).
fn kernel_page(from: Option<&Path>, wis_source: Option<&Path>) -> Result<ResultsPage> {
    use nvmos_kernel::{bench, run::Policy, run::RunOptions, study, systime, wis};
    let (b, s, k, w): (bench::Bench, systime::SysTime, study::Study, wis::Wis) = match from {
        Some(dir) => (
            json(&dir.join("bench.json"), "nvmos kernel bench --json")?,
            json(&dir.join("systime.json"), "nvmos kernel systime --json")?,
            json(
                &dir.join("kernel.json"),
                "nvmos kernel study --policies buddy,adaptive,adaptive-migrate \
                 --workloads sparsejob,pressurejob,filejob --runs 2 --cpus 1 --icount \
                 --bank-mib 16 --out",
            )?,
            json(&dir.join("wis.json"), "nvmos kernel wis --json")?,
        ),
        None => {
            let Some(wis_source) = wis_source else {
                bail!("the kernel page needs --kernel-from DIR or --wis-source DIR");
            };
            let run = || {
                RunOptions::new(
                    nvmos_kernel::kbuild::BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
                    nvmos_kernel::repo_workloads_dir(),
                    Policy::Buddy,
                    Vec::new(),
                )
            };
            let progress = &mut crate::kernel_cmd::progress;
            // First: a will-it-scale checkout that is not one fails in
            // seconds, not after the others' hours.
            let w = wis::wis(&wis::Options::new(run(), wis_source.to_owned()), progress)?;
            let b = bench::bench(&bench::Options::new(run()), progress)?;
            let s = systime::systime(&systime::Options::new(run()), progress)?;
            let k = study::run_study(&study::Options::banks(run()), progress)?;
            (b, s, k, w)
        }
    };
    Ok(results::kernel_page(&b, &s, &k, &w)?)
}

/// The page of seed 002 on real programs, from `nvmos study banks --real
/// --out`'s JSON in `from`, or by running it with its defaults.
fn banks_real_page(from: Option<&Path>) -> Result<ResultsPage> {
    use nvmos_sim::banks_study::{Banks, BanksOutput};
    use nvmos_sim::study::{Scale, Study};
    let (real, synthetic): (nvmos_kernel::banks_real::BanksReal, BanksOutput) = match from {
        Some(dir) => {
            let mut real: nvmos_kernel::banks_real::BanksReal = json(
                &dir.join("banks-real.json"),
                "nvmos study banks --real --out",
            )?;
            real.rederive();
            (
                real,
                json(&dir.join("banks.json"), "nvmos study banks --real --out")?,
            )
        }
        None => {
            let mut options = Banks::options(Scale::Full);
            options.machine = "ddr4-2400".into();
            let synthetic = Banks::run(&options, &mut |_| {})?;
            let run = nvmos_kernel::run::RunOptions::new(
                nvmos_kernel::kbuild::BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
                nvmos_kernel::repo_workloads_dir(),
                nvmos_kernel::run::Policy::Buddy,
                Vec::new(),
            );
            let opts = nvmos_kernel::banks_real::Options::new(
                run,
                nvmos_kernel::kbuild::default_cache().join("banks-real"),
            );
            let real =
                nvmos_kernel::banks_real::banks_real(&opts, &mut crate::kernel_cmd::progress)?;
            (real, synthetic)
        }
    };
    Ok(results::banks_real_page(&real, &synthetic)?)
}

/// The page of hot-page migration in the kernel, from `nvmos kernel
/// levelling`'s JSON in `from`, or by running it with its defaults.
fn hot_migrate_page(from: Option<&Path>) -> Result<ResultsPage> {
    use nvmos_kernel::{levelling, run::Policy, run::RunOptions};
    let l: levelling::Levelling = match from {
        Some(dir) => json(&dir.join("levelling.json"), "nvmos kernel levelling --json")?,
        None => {
            let mut run = RunOptions::new(
                nvmos_kernel::kbuild::BuildOptions::new(nvmos_kernel::repo_kernel_dir()),
                nvmos_kernel::repo_workloads_dir(),
                Policy::IBuddy,
                Vec::new(),
            );
            run.use_icount();
            levelling::levelling(
                &levelling::Options::new(run),
                &mut crate::kernel_cmd::progress,
            )?
        }
    };
    Ok(results::hot_migrate_page(&l)?)
}

/// Pages made by their own tools (or from those tools' JSON), not by the
/// shared run of `reproduce::run`: an `--only` of these alone skips it.
const OWN_RUN_PAGES: [&str; 6] = [
    "kernel",
    "pmo",
    "psync",
    "hot-migrate",
    "banks-real",
    "peers",
];

/// The persistent-memory-object page, from the benchmarks' JSON in
/// `from`, or by running them at full scale (tens of minutes).
fn pmo_page(from: Option<&Path>) -> Result<ResultsPage> {
    use nvmos_pmo_bench::pmo::{self, PmoBench};
    use nvmos_pmo_bench::scaling::{self, ScalingBench};
    use nvmos_sim::study::Study;
    let (b, s) = match from {
        Some(dir) => (
            json(&dir.join("pmo.json"), "nvmos bench pmo --out DIR")?,
            json(&dir.join("scaling.json"), "nvmos bench scaling --json")?,
        ),
        None => {
            let o = PmoBench::options(Scale::Full);
            let b = crate::with_progress(o.steps(), |p| pmo::run(&o, p))?;
            let o = ScalingBench::options(Scale::Full);
            let s = crate::with_progress(0, |p| scaling::run(&o, p))?;
            (b, s)
        }
    };
    Ok(results::pmo_page(&b, &s)?)
}

/// The page of psync beside PMDK, from `psync.json` in `from` or by
/// running `nvmos bench psync` at full size (a few minutes). A run with a
/// row missing its figure (no C compiler, no libpmemobj) is refused, as
/// `nvmos bench psync` fails on it: a page must not publish half a
/// comparison.
fn psync_page(from: Option<&Path>) -> Result<ResultsPage> {
    use nvmos_pmo_bench::psync::{self, Psync};
    use nvmos_sim::study::Study;
    const TOOL: &str = "nvmos bench psync --json";
    let (run, source): (Psync, String) = match from {
        Some(dir) => {
            let path = dir.join("psync.json");
            (json(&path, TOOL)?, path.display().to_string())
        }
        None => {
            let o = Psync::options(Scale::Full);
            let run = crate::with_progress(o.steps(), |p| psync::run(&o, p))?;
            (run, "the psync run".to_string())
        }
    };
    if let Some(why) = run.incomplete() {
        bail!("{source}: {why}");
    }
    if run.rows.is_empty() {
        bail!("{source}: no rows");
    }
    Ok(results::psync_page(&run)?)
}

/// The page of the frame allocators beside LLFree: from `peers.json` in
/// `from`, or by building and running `crates/frames/bench-peers` (of
/// the source tree this binary was built from) against the LLFree
/// checkout `llfree`, `runs` rounds a cell on CPU time.
fn peers_page(from: Option<&Path>, llfree: Option<&Path>, runs: u32) -> Result<ResultsPage> {
    use nvmos_pages::peers::PeerRun;
    const TOOL: &str = "crates/frames/bench-peers/run.sh --json";
    // The record, and what to call it in an error.
    let (run, source): (PeerRun, String) = match (from, llfree) {
        (Some(dir), _) => {
            let path = dir.join("peers.json");
            (json(&path, TOOL)?, path.display().to_string())
        }
        (None, Some(llfree)) => {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../frames/bench-peers/run.sh");
            if !script.is_file() {
                bail!(
                    "{}: missing; --llfree-source builds bench-peers from the nvmos source tree this binary was built from (or give --peers-from DIR)",
                    script.display()
                );
            }
            // bench-peers writes its record whole (a temporary, renamed);
            // it is read once and removed.
            let path =
                std::env::temp_dir().join(format!("nvmos-peers-{}.json", std::process::id()));
            let status = std::process::Command::new("bash")
                .arg(&script)
                .args(["--cpu-time", "--rounds", &runs.to_string(), "--json"])
                .arg(&path)
                .env("LLFREE_DIR", llfree)
                .status()
                .with_context(|| format!("running {}", script.display()))?;
            let run = if status.success() {
                json(&path, TOOL)
            } else {
                Err(anyhow::anyhow!("{} failed ({status})", script.display()))
            };
            let _ = std::fs::remove_file(&path);
            (
                run?,
                format!("bench-peers' record of its run beside {}", llfree.display()),
            )
        }
        (None, None) => bail!("the peers page needs --peers-from DIR or --llfree-source DIR"),
    };
    run.validate()
        .map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    Ok(results::peers_page(&run)?)
}

/// The JSON that `tool` writes, read from `path`.
fn json<T: serde::de::DeserializeOwned>(path: &Path, tool: &str) -> Result<T> {
    if !path.exists() {
        bail!("{}: missing; `{tool}` writes it", path.display());
    }
    serde_json::from_str(&read(path)?)
        .with_context(|| format!("{}: not `{tool}` output", path.display()))
}

/// `dir/data/<page>.json`, `dir/<page>.md` and `dir/index.md`.
fn write_pages(dir: &Path, pages: &[PageData]) -> Result<()> {
    let data = OutputDir::create(&dir.join("data"), &[])?;
    let out = OutputDir::create(dir, &[])?;
    for d in pages {
        data.write_json(&format!("{}.json", d.page.stem), d)?;
        out.write(
            &format!("{}.md", d.page.stem),
            results::markdown(d).as_bytes(),
        )?;
    }
    // The index lists every page of the folder, those of earlier runs
    // (`--only`) included.
    let all = committed_pages(&dir.join("data"))?;
    out.write("index.md", results::index(&all).as_bytes())?;
    Ok(())
}

/// Every page's data in `data_dir`, by file name.
fn committed_pages(data_dir: &Path) -> Result<Vec<PageData>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir)
        .with_context(|| format!("reading {}", data_dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", data_dir.display()))?;
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    files
        .iter()
        .map(|file| {
            serde_json::from_str(&read(file)?)
                .with_context(|| format!("{}: not a results page's data", file.display()))
        })
        .collect()
}

/// Every page with the run's stamp.
fn data(pages: Vec<ResultsPage>, stamp: &Stamp) -> Vec<PageData> {
    pages
        .into_iter()
        .map(|page| PageData {
            stamp: stamp.clone(),
            page,
        })
        .collect()
}

fn readme_table(pages: &[PageData]) -> Result<String> {
    let evaluate = pages
        .iter()
        .find(|d| d.page.stem == "evaluate")
        .context("the run has no wear page")?;
    results::readme_table(evaluate).context("the wear page has no headline table")
}

/// Where README's table lies: the byte ranges of its two markers' lines'
/// ends. Fails naming the file when a marker is missing or out of order.
fn markers(readme: &str, path: &Path) -> Result<(usize, usize)> {
    let (Some(begin), Some(end)) = (readme.find(README_BEGIN), readme.find(README_END)) else {
        bail!(
            "{}: no results table markers (a line `{README_BEGIN}` and, after it, `{README_END}`)",
            path.display()
        );
    };
    let start = begin + README_BEGIN.len() + 1;
    if end < start {
        bail!(
            "{}: the results table's end marker comes before its beginning",
            path.display()
        );
    }
    Ok((start, end))
}

/// `readme` with the text between [`README_BEGIN`] and [`README_END`]
/// replaced by `table`.
fn with_table(readme: &str, table: &str, path: &Path) -> Result<String> {
    let (start, end) = markers(readme, path)?;
    Ok(format!("{}{}{}", &readme[..start], table, &readme[end..]))
}

/// The table between README's markers, as committed.
fn table_in(readme: &str, path: &Path) -> Result<String> {
    let (start, end) = markers(readme, path)?;
    Ok(readme[start..end].to_string())
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// `--check`: every difference between the committed book and what the
/// pipeline gives, each named by file and line.
fn check(args: &ReproduceArgs, mut options: Options, cli: clap::Command) -> Result<()> {
    let results_dir = args.docs.join("src/results");
    let mut problems = Vec::new();
    let data_dir = results_dir.join("data");
    let committed = committed_pages(&data_dir)?;
    if committed.is_empty() {
        bail!("{}: no results data to check", data_dir.display());
    }
    // 1. Every page is what its data renders to.
    for d in &committed {
        let page = results_dir.join(format!("{}.md", d.page.stem));
        compare(
            &page.display(),
            &read(&page)?,
            &results::markdown(d),
            "its data renders",
            &mut problems,
        );
    }
    let index = results_dir.join("index.md");
    compare(
        &index.display(),
        &read(&index)?,
        &results::index(&committed),
        "its data renders",
        &mut problems,
    );
    // 2. README's table and the CLI reference are current.
    let readme = read(&args.readme)?;
    compare(
        &args.readme.display(),
        &table_in(&readme, &args.readme)?,
        &readme_table(&committed)?,
        "the wear page's data renders",
        &mut problems,
    );
    let reference = args.docs.join("src/reference/cli.md");
    compare(
        &reference.display(),
        &read(&reference)?,
        &cli_reference(cli),
        "the CLI's help renders",
        &mut problems,
    );
    // 3. A fresh run gives every deterministic figure the pages hold.
    if args.data_only {
        println!(
            "compared {} pages with their data, README's table and the CLI reference (no fresh run: --data-only)",
            committed.len()
        );
        return verdict(&problems);
    }
    // Each committed page's study again, at the scale it was committed
    // at; with --quick, the slow studies committed at full scale are left
    // to a full check.
    let mut not_rerun = Vec::new();
    options.timings = None;
    options.evaluate = false;
    (
        options.levelling,
        options.banks,
        options.power,
        options.swap,
    ) = (None, None, None, None);
    for d in &committed {
        let scale = d.page.scale;
        let slow = args.quick
            && scale == Some(Scale::Full)
            && SLOW_AT_FULL_SCALE.contains(&d.page.stem.as_str());
        if slow {
            not_rerun.push(d.page.stem.clone());
            continue;
        }
        match d.page.stem.as_str() {
            "evaluate" => options.evaluate = true,
            "levelling" => options.levelling = scale,
            "banks" => options.banks = scale,
            "power" => options.power = scale,
            "swap" => options.swap = scale,
            _ => {}
        }
    }
    let run = crate::with_progress(0, |p| reproduce::run(&options, p))
        .context("running the deterministic studies")?;
    let fresh = results::pages(&run)?;
    let mut compared = 0;
    for d in &committed {
        if not_rerun.contains(&d.page.stem) {
            continue;
        }
        let Some(new) = fresh.iter().find(|p| p.stem == d.page.stem) else {
            if d.page.sections.iter().any(|s| s.deterministic) {
                problems.push(format!(
                    "{}: the pipeline no longer makes this page",
                    d.page.stem
                ));
            }
            continue;
        };
        let page = results_dir.join(format!("{}.md", d.page.stem));
        // A section the run makes that the page lacks (a trace added to
        // the folder) is a difference too.
        for n in new.sections.iter().filter(|n| n.deterministic) {
            if !d.page.sections.iter().any(|s| s.heading == n.heading) {
                problems.push(format!(
                    "{}: section `{}`: made by the pipeline, missing from the page",
                    page.display(),
                    n.heading
                ));
            }
        }
        for s in d.page.sections.iter().filter(|s| s.deterministic) {
            match new.sections.iter().find(|n| n.heading == s.heading) {
                None => problems.push(format!(
                    "{}: section `{}`: the pipeline no longer makes it",
                    page.display(),
                    s.heading
                )),
                Some(n) => {
                    compared += 1;
                    let what = format!("{}, section `{}`", page.display(), s.heading);
                    compare(
                        &what,
                        &section_text(s),
                        &section_text(n),
                        "a fresh run gives",
                        &mut problems,
                    );
                }
            }
        }
    }
    println!(
        "compared {} pages with their data, README's table, the CLI reference and {compared} deterministic sections with a fresh run{}",
        committed.len(),
        if not_rerun.is_empty() {
            String::new()
        } else {
            format!(
                "; not re-run with --quick: {} (committed at full scale, which takes many minutes)",
                not_rerun.join(", ")
            )
        }
    );
    verdict(&problems)
}

/// Success, or every problem on standard error and a failure counting them.
fn verdict(problems: &[String]) -> Result<()> {
    if problems.is_empty() {
        println!("the book's results are current");
        return Ok(());
    }
    for p in problems {
        eprintln!("{p}");
    }
    bail!(
        "{} difference{} between the book and the pipeline",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    )
}

/// A section's text and body, as compared.
fn section_text(s: &results::Section) -> String {
    let body = match &s.body {
        Body::Table(t) | Body::Text(t) | Body::Figure(t) => t.clone(),
        Body::Timing(t) => results::timing_table(t),
    };
    format!("{}\n{}", s.text, body)
}

/// Note the first differing line of `committed` and `expected`.
fn compare(
    what: &dyn std::fmt::Display,
    committed: &str,
    expected: &str,
    source: &str,
    problems: &mut Vec<String>,
) {
    if committed == expected {
        return;
    }
    let mut c = committed.lines();
    let mut e = expected.lines();
    let mut line = 1;
    loop {
        match (c.next(), e.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            (a, b) => {
                problems.push(format!(
                    "{what}: line {line}: committed {:?}, but {source} {:?}",
                    a.unwrap_or("(end)"),
                    b.unwrap_or("(end)")
                ));
                return;
            }
        }
    }
}

/// The book's CLI reference: every command's long help, generated from
/// the CLI's own definition.
pub fn cli_reference(cli: clap::Command) -> String {
    let mut out = String::from("# Command-line reference\n\n");
    out.push_str("<!-- Generated from the CLI's definition by `nvmos reproduce --install`: do not edit. -->\n\n");
    out.push_str("Every command of `nvmos`, as `nvmos help COMMAND` prints it; `<checkout>` stands for the folder nvmos was built in.\n\n");
    let mut cli = cli.term_width(100);
    cli.build();
    command_reference(&cli, &mut Vec::new(), &mut out);
    // Some defaults are paths into the checkout the binary was built from
    // (the kernel series, the workloads): the same reference for every
    // checkout.
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let checkout = std::fs::canonicalize(&checkout).unwrap_or(checkout);
    let mut out = out.replace(
        &format!("{}/crates/kernel/../../", checkout.display()),
        "<checkout>/",
    );
    out = out.replace(&format!("{}/", checkout.display()), "<checkout>/");
    out
}

fn command_reference(cmd: &clap::Command, path: &mut Vec<String>, out: &mut String) {
    path.push(cmd.get_name().to_string());
    let name = path.join(" ");
    let level = "#".repeat((path.len() + 1).min(4));
    let _ = writeln!(out, "{level} `{name}`\n");
    let help = cmd.clone().bin_name(&name).render_long_help().to_string();
    let _ = writeln!(out, "```text\n{}\n```\n", help.trim_end());
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        command_reference(sub, path, out);
    }
    path.pop();
}

/// The studies whose full versions take many minutes: `--check --quick`
/// leaves their full-scale pages to a full check (`--check`).
const SLOW_AT_FULL_SCALE: [&str; 2] = ["levelling", "power"];

/// Where and when this run happens.
fn stamp() -> Result<Stamp> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown processor".to_string(), |(_, m)| {
            m.trim().to_string()
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or("unknown kernel".into(), |r| format!("Linux {}", r.trim()));
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
    let commit = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown (not a git checkout)".into(), |o| {
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        });
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the clock is before 1970")?
        .as_secs();
    Ok(Stamp {
        commit,
        date: civil_date(seconds / 86_400),
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        kernel,
        load_average,
        command: "nvmos reproduce".into(),
    })
}

/// `YYYY-MM-DD` of a day counted from 1970-01-01 (proleptic Gregorian).
fn civil_date(days: u64) -> String {
    // Howard Hinnant's days_from_civil, inverted: eras of 400 years.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_784), "2026-11-27");
    }

    #[test]
    fn the_table_goes_between_the_markers_and_nowhere_else() {
        let readme = format!("intro\n{README_BEGIN}\nold\n{README_END}\nrest\n");
        let new = with_table(&readme, "new\n", Path::new("README.md")).unwrap();
        assert_eq!(
            new,
            format!("intro\n{README_BEGIN}\nnew\n{README_END}\nrest\n")
        );
        assert_eq!(table_in(&new, Path::new("README.md")).unwrap(), "new\n");
        let err = with_table("no markers", "x", Path::new("README.md")).unwrap_err();
        assert!(err
            .to_string()
            .contains("README.md: no results table markers"));
    }
}
