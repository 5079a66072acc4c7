//! `nvmos pmo …`: persistent memory objects at a shell. Every subcommand
//! but `pool create` works on the pool named by `--pool`. Keys come from
//! `--key-file` or a prompt on the terminal, never from the command line;
//! a key given for a plain object is an error, never silently dropped.
//! Every pool is checked against the state store (`--state-dir`) for
//! rollback at open, and every commit recorded there. A pool once
//! protected by a store is refused without it, unless
//! `--allow-missing-state` is given; every output then says so (a warning
//! on standard error, a `state_missing` field in JSON).

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nvmos_pages::pmo as pages;
use nvmos_pmo::{tools, Access, KdfParams, KeyBytes, Perm, Pool, PoolOptions};

use crate::units;

#[derive(Args, Debug)]
pub struct PmoArgs {
    /// The pool file (every subcommand but `pool create`).
    #[arg(long, value_name = "PATH", global = true)]
    pool: Option<PathBuf>,

    /// Read the object's key from this file (one trailing newline is
    /// dropped; at least 8 bytes must remain). Without it, the key is asked
    /// for on the terminal when the object is encrypted.
    #[arg(long, value_name = "PATH", global = true)]
    key_file: Option<PathBuf>,

    /// The state store: per-pool and per-object epochs kept outside the
    /// pool, so a rolled-back pool or object is refused. Default
    /// $XDG_STATE_HOME/nvmos, else ~/.local/state/nvmos.
    #[arg(long, value_name = "DIR", global = true)]
    state_dir: Option<PathBuf>,

    /// Open a pool even when the state store that protects it is missing
    /// (deleted or emptied, another pool's record, another HOME): nothing
    /// read is then protected against rollback, and every output says so
    /// (a warning on standard error; in JSON a `state_missing` field, an
    /// array wrapped as {"state_missing": ..., "result": [...]}). `repair
    /// --accept-rollback` binds the pool to the store in use instead.
    #[arg(long, global = true)]
    allow_missing_state: bool,

    /// Print results as JSON.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: PmoCommand,
}

#[derive(Subcommand, Debug)]
enum PmoCommand {
    /// Pool files.
    Pool {
        #[command(subcommand)]
        pool: PoolCommand,
    },
    /// List the pool's objects.
    Ls,
    /// Create an object (pcreate), zero-filled, sealed under a key unless
    /// --plain.
    Create {
        /// The object's name.
        name: String,
        /// Its size, with its unit: 64KiB, 16MiB, or 16frames (4 KiB pages).
        #[arg(long, value_parser = parse_pages)]
        size: u64,
        /// Store the object without encryption (integrity of the root and
        /// page table only; no key).
        #[arg(long)]
        plain: bool,
        /// Argon2id memory cost in KiB for stretching the key.
        #[arg(long, default_value_t = KdfParams::default().m_cost)]
        kdf_memory: u32,
        /// Argon2id passes.
        #[arg(long, default_value_t = KdfParams::default().t_cost)]
        kdf_passes: u32,
    },
    /// Write a file's bytes into the object from offset 0, then psync.
    Write {
        /// The object's name.
        name: String,
        /// The file (`-` for standard input).
        file: PathBuf,
        /// If another process is writing the object, wait for it instead of failing.
        #[arg(long)]
        wait: bool,
    },
    /// Write several objects at once, all or nothing (psync_many): each
    /// FILE's bytes into object NAME from offset 0, one group commit.
    PsyncMany {
        /// NAME FILE pairs.
        #[arg(required = true, num_args = 2.., value_names = ["NAME", "FILE"])]
        pairs: Vec<String>,
        /// If another process is writing an object, wait for it instead of failing.
        #[arg(long)]
        wait: bool,
    },
    /// Write the whole object to standard output.
    Read {
        /// The object's name.
        name: String,
    },
    /// Show an object's bytes as a hex dump (offset, 16 bytes, ASCII), as
    /// pmempool dump; identical lines are folded into one `*`.
    Dump {
        /// The object's name.
        name: String,
        /// First byte shown.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Bytes shown (default: to the end of the object).
        #[arg(long)]
        length: Option<u64>,
    },
    /// Objects with their size, encryption, epoch and pages written; with
    /// --stats also each object's heap (allocated and free bytes and
    /// blocks, largest free block, fragmentation) where a heap is
    /// formatted in it and the key (--key-file) opens it.
    Info {
        /// Only this object.
        name: Option<String>,
        /// Open each object and report its heap.
        #[arg(long)]
        stats: bool,
    },
    /// Check the key, the root (MAC and epoch), every page-table page and
    /// every page; fails if anything does not check.
    Verify {
        /// The object's name.
        name: String,
    },
    /// Delete the object (pdestroy) and give its frames back.
    #[command(alias = "rm")]
    Destroy {
        /// The object's name.
        name: String,
    },
    /// Check the whole pool without keys (as pmempool check): directory
    /// records, roots, page tables, plain objects' pages, frame claims and
    /// the state store. Lists every damaged or conflicting object
    /// (quarantined); exits non-zero if any.
    Check,
    /// Repair (as pmempool repair): keep every intact object, leave every
    /// quarantined one untouched, clear incomplete or damaged stale
    /// directory records, zero every free frame.
    Repair {
        /// You restored this pool (or an object in it) from an older copy
        /// on purpose: re-base the state store's epochs to the pool's, so
        /// it opens again. Every change is listed. Without this flag a
        /// rolled-back pool is refused (see `check`).
        #[arg(long)]
        accept_rollback: bool,
    },
}

#[derive(Subcommand, Debug)]
enum PoolCommand {
    /// Create a pool file (never overwrites one).
    Create {
        /// The new pool file (on a DAX file system or /dev/shm for
        /// persistent memory; any file system otherwise).
        path: PathBuf,
        /// Its size, with its unit: 64MiB, 1GiB, or 16384frames (4 KiB frames).
        #[arg(long, value_parser = parse_pages)]
        size: u64,
    },
    /// The pool: size, free frames, medium, objects.
    Info,
}

fn parse_pages(text: &str) -> Result<u64, String> {
    units::parse_memory(text).map(|frames| frames * units::FRAME_BYTES)
}

pub fn run(args: PmoArgs) -> Result<()> {
    if let PmoCommand::Pool {
        pool: PoolCommand::Create { path, size },
    } = &args.command
    {
        let opts = PoolOptions {
            state_dir: Some(state_dir(args.state_dir.as_deref())?),
            ..PoolOptions::default()
        };
        let info = Pool::create_with(path, *size, opts)?.info();
        let out = Output {
            json: args.json,
            state_missing: None,
        };
        return show(&out, &info, || pages::pool_created_text(path, &info));
    }
    let path = args
        .pool
        .clone()
        .context("--pool PATH is needed (the pool file to work on)")?;
    let access = match args.command {
        PmoCommand::Ls
        | PmoCommand::Read { .. }
        | PmoCommand::Dump { .. }
        | PmoCommand::Info { .. }
        | PmoCommand::Verify { .. }
        | PmoCommand::Check
        | PmoCommand::Pool { .. } => Access::ReadOnly,
        _ => Access::ReadWrite,
    };
    let accept = matches!(
        args.command,
        PmoCommand::Repair {
            accept_rollback: true
        }
    );
    let opts = PoolOptions {
        state_dir: Some(state_dir(args.state_dir.as_deref())?),
        // check reports a disagreement with the store (a missing store
        // included) instead of refusing. So does repair --accept-rollback,
        // which then re-bases the store (or binds the pool to it anew).
        tolerate_state_mismatch: accept || matches!(args.command, PmoCommand::Check),
        allow_missing_state: args.allow_missing_state || accept,
        // One command, at most one commit, then the process ends and waits
        // for the store anyway: waiting inside psync lets a failed store
        // write fail the command before it reports success.
        state_commit: nvmos_pmo::StateCommit::EveryPsync,
        ..PoolOptions::default()
    };
    let pool = Pool::open_with(&path, access, opts).map_err(|e| match e {
        nvmos_pmo::PmoError::PoolRolledBack { .. } => anyhow::anyhow!(
            "{e}; if you restored the pool on purpose, accept it with `nvmos pmo --pool {} repair --accept-rollback`",
            path.display()
        ),
        nvmos_pmo::PmoError::StateMissing { .. } => anyhow::anyhow!(
            "{e}; point --state-dir (or HOME, XDG_STATE_HOME) at that store, or, if it is lost for good, bind the pool to the store in use with `nvmos pmo --pool {} repair --accept-rollback` (or open it unprotected with --allow-missing-state)",
            path.display()
        ),
        e => e.into(),
    })?;
    let mut out = Output {
        json: args.json,
        state_missing: pool.state_missing(),
    };
    if let Some(why) = &out.state_missing {
        if !accept {
            eprintln!("warning: {why}");
        }
    }
    let key_file = args.key_file.as_deref();
    match &args.command {
        PmoCommand::Pool { .. } => {
            let info = pool.info();
            show(&out, &info, || pages::pool_text(&info))?;
        }
        PmoCommand::Ls => {
            let objects = pool.list();
            show(&out, &objects, || pages::ls_text(&objects))?;
        }
        PmoCommand::Create {
            name,
            size,
            plain,
            kdf_memory,
            kdf_passes,
        } => {
            let key = if *plain {
                if key_file.is_some() {
                    bail!("--plain stores object {name:?} without encryption: drop --key-file, or drop --plain to seal it under the key");
                }
                None
            } else {
                let k = key_for(key_file, name, true)?;
                if let Some(why) = nvmos_pmo::crypto::passphrase_weakness(&k) {
                    eprintln!("warning: the key for {name:?} looks weak: {why}");
                }
                Some(k)
            };
            let kdf = KdfParams {
                m_cost: *kdf_memory,
                t_cost: *kdf_passes,
                p_cost: 1,
            };
            let info = pool.pcreate_with(name, *size, key.as_deref(), kdf)?;
            show(&out, &info, || pages::created_text(&info))?;
        }
        PmoCommand::Write { name, file, wait } => {
            let key = key_for_object(&pool, key_file, name)?;
            let mut bytes = Vec::new();
            if file.as_os_str() == "-" {
                std::io::stdin()
                    .read_to_end(&mut bytes)
                    .context("reading standard input")?;
            } else {
                bytes =
                    std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            }
            let epoch = tools::write_object(&pool, name, &bytes, file, key.as_deref(), *wait)?;
            if args.json {
                let line = serde_json::json!({"name": name, "bytes": bytes.len(), "epoch": epoch});
                println!("{}", out.mark(line));
            } else {
                eprintln!("wrote {} bytes to {name} (epoch {epoch})", bytes.len());
            }
        }
        PmoCommand::PsyncMany { pairs, wait } => {
            if pairs.len() % 2 != 0 {
                bail!(
                    "psync-many takes NAME FILE pairs, got {} arguments",
                    pairs.len()
                );
            }
            let mut items = Vec::new();
            for p in pairs.chunks(2) {
                let key = key_for_object(&pool, args.key_file.as_deref(), &p[0])?;
                let bytes = std::fs::read(&p[1]).with_context(|| format!("reading {}", p[1]))?;
                items.push((p[0].as_str(), key, bytes));
            }
            let refs: Vec<_> = items
                .iter()
                .map(|(n, k, b)| (*n, k.as_deref(), &b[..]))
                .collect();
            let epochs = pool.write_many(&refs, nvmos_pmo::AttachOptions { wait: *wait })?;
            for ((name, _, bytes), epoch) in items.iter().zip(epochs) {
                let line = serde_json::json!({"name": name, "bytes": bytes.len(), "epoch": epoch});
                if args.json {
                    println!("{}", out.mark(line));
                } else {
                    eprintln!("wrote {} bytes to {name} (epoch {epoch})", bytes.len());
                }
            }
        }
        PmoCommand::Read { name } => {
            let key = key_for_object(&pool, key_file, name)?;
            let bytes = pool
                .open_object(name, Perm::Read, key.as_deref())?
                .read_all()?;
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes).context("writing standard output")?;
            out.flush().context("writing standard output")?;
        }
        PmoCommand::Dump {
            name,
            offset,
            length,
        } => {
            let key = key_for_object(&pool, key_file, name)?;
            let dump = tools::dump(&pool, name, key.as_deref(), *offset, *length)?;
            let mut out = std::io::stdout().lock();
            out.write_all(dump.as_bytes())
                .context("writing standard output")?;
        }
        PmoCommand::Info { name, stats } => {
            let key = match (key_file, *stats) {
                (Some(f), true) => Some(nvmos_pmo::read_key_file(f).map_err(anyhow::Error::msg)?),
                _ => None,
            };
            let rows = tools::info(&pool, name.as_deref(), *stats, key.as_deref())?;
            // Through a `Value`: the keys in the order the JSON always had.
            show(&out, &serde_json::to_value(&rows)?, || {
                pages::info_text(&rows)
            })?;
        }
        PmoCommand::Verify { name } => {
            let key = key_for_object(&pool, key_file, name)?;
            let report = pool.verify(name, key.as_deref())?;
            show(&out, &report, || pages::verify_text(name, &report))?;
            if !report.ok() {
                bail!(
                    "object {name:?}: {} pages failed verification",
                    report.bad_pages.len()
                );
            }
        }
        PmoCommand::Check => {
            let report = pool.check_report();
            // Findings read partly from zero pages do not count.
            if let Some(t) = &report.truncated {
                bail!("{t}");
            }
            show(&out, &report, || pages::check_text(&report))?;
            if !report.ok() {
                bail!(
                    "pool {}: {} damaged objects, {} state-store disagreements (see above)",
                    report.path.display(),
                    report.objects.iter().filter(|o| !o.ok).count(),
                    report.state_mismatches.len()
                );
            }
        }
        PmoCommand::Repair { accept_rollback } => {
            let accepted = if *accept_rollback {
                Some(pool.accept_rollback()?)
            } else {
                None
            };
            // Accepting binds the pool to the store in use.
            out.state_missing = pool.state_missing();
            let r = pool.repair()?;
            let json = serde_json::json!({"accepted_rollback": accepted, "repair": r});
            show(&out, &json, || pages::repair_text(accepted.as_ref(), &r))?;
        }
        PmoCommand::Destroy { name } => {
            let key = key_for_object(&pool, key_file, name)?;
            pool.pdestroy(name, key.as_deref())?;
            if !args.json {
                println!("destroyed {name}");
            } else {
                println!("{}", out.mark(serde_json::json!({"destroyed": name})));
            }
        }
    }
    Ok(())
}

/// How results are printed: JSON or text, and whether the pool was opened
/// without the state store it names (every JSON output then says so).
struct Output {
    json: bool,
    state_missing: Option<String>,
}

impl Output {
    /// `value` with the `state_missing` field when the store is missing:
    /// added to an object, or an object made to hold it and the value.
    fn mark(&self, value: serde_json::Value) -> serde_json::Value {
        let Some(why) = &self.state_missing else {
            return value;
        };
        match value {
            serde_json::Value::Object(mut map) => {
                map.insert("state_missing".into(), why.as_str().into());
                serde_json::Value::Object(map)
            }
            other => serde_json::json!({"state_missing": why, "result": other}),
        }
    }
}

/// Print `value` as pretty JSON when `out.json`, else the text `text` makes.
fn show<T: serde::Serialize>(out: &Output, value: &T, text: impl FnOnce() -> String) -> Result<()> {
    if out.json && out.state_missing.is_some() {
        let value = out.mark(serde_json::to_value(value)?);
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else if out.json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print!("{}", text());
    }
    Ok(())
}

fn state_dir(given: Option<&Path>) -> Result<PathBuf> {
    match given {
        Some(d) => Ok(d.to_owned()),
        None => nvmos_pmo::state::default_dir().context(
            "no state store folder: give --state-dir DIR (neither XDG_STATE_HOME nor HOME is set)",
        ),
    }
}

/// The key for an existing object: from --key-file whenever one is given
/// (the pool refuses a key for a plain object: it is never dropped), else
/// a prompt when the object is encrypted, else none.
fn key_for_object(pool: &Pool, key_file: Option<&Path>, name: &str) -> Result<Option<KeyBytes>> {
    if key_file.is_some() {
        return Ok(Some(key_for(key_file, name, false)?));
    }
    match pool.list().into_iter().find(|o| o.name == name) {
        Some(o) if o.encrypted => Ok(Some(key_for(None, name, false)?)),
        // Unknown names and plain objects are handled by the pool itself.
        _ => Ok(None),
    }
}

fn key_for(key_file: Option<&Path>, name: &str, confirm: bool) -> Result<KeyBytes> {
    let key = match key_file {
        // The library's one key-file rule (also the plist example's).
        Some(path) => nvmos_pmo::read_key_file(path).map_err(anyhow::Error::msg)?,
        None => {
            if !std::io::stdin().is_terminal() {
                bail!("object {name:?} needs a key: give --key-file PATH (there is no terminal to ask on)");
            }
            let k = zeroize::Zeroizing::new(
                rpassword::prompt_password(format!("key for {name}: "))
                    .context("reading the key from the terminal")?,
            );
            if confirm {
                let again = zeroize::Zeroizing::new(
                    rpassword::prompt_password(format!("key for {name} (again): "))
                        .context("reading the key from the terminal")?,
                );
                if *again != *k {
                    bail!("the two keys differ");
                }
            }
            KeyBytes::new(k.as_bytes().to_vec())
        }
    };
    if key.len() < nvmos_pmo::MIN_KEY_LEN {
        bail!(
            "the key for {name:?} is {} bytes; at least {} are needed",
            key.len(),
            nvmos_pmo::MIN_KEY_LEN
        );
    }
    Ok(key)
}
