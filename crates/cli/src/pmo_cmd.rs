//! `nvmos pmo …`: persistent memory objects at a shell. Every subcommand
//! but `pool create` works on the pool named by `--pool`. Keys come from
//! `--key-file` or a prompt on the terminal, never from the command line.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nvmos_pmo::{Access, KdfParams, Perm, Pool};

use crate::units;

#[derive(Args, Debug)]
pub struct PmoArgs {
    /// The pool file (every subcommand but `pool create`).
    #[arg(long, value_name = "PATH", global = true)]
    pool: Option<PathBuf>,

    /// Read the object's key from this file (one trailing newline is
    /// dropped). Without it, the key is asked for on the terminal.
    #[arg(long, value_name = "PATH", global = true)]
    key_file: Option<PathBuf>,

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
        /// Its size: 64KiB, 16MiB, ... or a number of 4 KiB pages.
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
    },
    /// Write the whole object to standard output.
    Read {
        /// The object's name.
        name: String,
    },
    /// Check the key, the root (MAC and epoch), every page-table page and
    /// every page; fails if anything does not check.
    Verify {
        /// The object's name.
        name: String,
    },
    /// Delete the object (pdestroy) and give its frames back.
    Destroy {
        /// The object's name.
        name: String,
    },
}

#[derive(Subcommand, Debug)]
enum PoolCommand {
    /// Create a pool file (never overwrites one).
    Create {
        /// The new pool file (on a DAX file system or /dev/shm for
        /// persistent memory; any file system otherwise).
        path: PathBuf,
        /// Its size: 64MiB, 1GiB, ... or a number of 4 KiB frames.
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
        let pool = Pool::create(path, *size)?;
        let info = pool.info();
        if args.json {
            println!("{}", serde_json::to_string_pretty(&info)?);
        } else {
            println!(
                "created pool {} ({} bytes, {} data frames, durability {:?})",
                path.display(),
                info.size,
                info.data_frames,
                info.durability
            );
        }
        return Ok(());
    }
    let path = args
        .pool
        .clone()
        .context("--pool PATH is needed (the pool file to work on)")?;
    let access = match args.command {
        PmoCommand::Ls
        | PmoCommand::Read { .. }
        | PmoCommand::Verify { .. }
        | PmoCommand::Pool { .. } => Access::ReadOnly,
        _ => Access::ReadWrite,
    };
    let pool = Pool::open(&path, access)?;
    match &args.command {
        PmoCommand::Pool { .. } => {
            let info = pool.info();
            if args.json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                println!(
                    "pool {}: {} bytes, {} of {} data frames free, durability {:?}, {} objects",
                    info.path.display(),
                    info.size,
                    info.free_frames,
                    info.data_frames,
                    info.durability,
                    info.objects.len()
                );
            }
        }
        PmoCommand::Ls => {
            let objects = pool.list();
            if args.json {
                println!("{}", serde_json::to_string_pretty(&objects)?);
            } else {
                println!(
                    "{:<24} {:>12} {:>9} {:>7} {:>8} {:>16}",
                    "NAME", "BYTES", "ENCRYPTED", "EPOCH", "WRITTEN", "ADDRESS"
                );
                for o in objects {
                    println!(
                        "{:<24} {:>12} {:>9} {:>7} {:>8} {:>#16x}",
                        o.name,
                        o.size,
                        if o.encrypted { "yes" } else { "no" },
                        o.epoch,
                        o.pages_written,
                        o.base_address
                    );
                }
            }
        }
        PmoCommand::Create {
            name,
            size,
            plain,
            kdf_memory,
            kdf_passes,
        } => {
            let key = if *plain {
                None
            } else {
                Some(key_for(args.key_file.as_deref(), name, true)?)
            };
            let kdf = KdfParams {
                m_cost: *kdf_memory,
                t_cost: *kdf_passes,
                p_cost: 1,
            };
            let info = pool.pcreate_with(name, *size, key.as_deref(), kdf)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                println!(
                    "created {} ({} bytes, {}, at {:#x})",
                    info.name,
                    info.size,
                    if info.encrypted {
                        "encrypted"
                    } else {
                        "not encrypted"
                    },
                    info.base_address
                );
            }
        }
        PmoCommand::Write { name, file } => {
            let key = key_if_encrypted(&pool, args.key_file.as_deref(), name)?;
            let mut bytes = Vec::new();
            if file.as_os_str() == "-" {
                std::io::stdin()
                    .read_to_end(&mut bytes)
                    .context("reading standard input")?;
            } else {
                bytes =
                    std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            }
            // Checked before attaching: attaching for writing commits a
            // nonce reservation, and a refused write should change nothing.
            if let Some(o) = pool.list().into_iter().find(|o| o.name == *name) {
                if bytes.len() as u64 > o.size {
                    bail!(
                        "{} is {} bytes; object {name:?} holds {}",
                        file.display(),
                        bytes.len(),
                        o.size
                    );
                }
            }
            let h = pool.open_object(name, Perm::Write, key.as_deref())?;
            h.write_at(0, &bytes)?;
            h.psync()?;
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({"name": name, "bytes": bytes.len(), "epoch": h.epoch()})
                );
            } else {
                eprintln!(
                    "wrote {} bytes to {name} (epoch {})",
                    bytes.len(),
                    h.epoch()
                );
            }
        }
        PmoCommand::Read { name } => {
            let key = key_if_encrypted(&pool, args.key_file.as_deref(), name)?;
            let h = pool.open_object(name, Perm::Read, key.as_deref())?;
            let bytes = h.read_all()?;
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes).context("writing standard output")?;
            out.flush().context("writing standard output")?;
        }
        PmoCommand::Verify { name } => {
            let key = key_if_encrypted(&pool, args.key_file.as_deref(), name)?;
            let report = pool.verify(name, key.as_deref())?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                for (page, err) in &report.bad_pages {
                    println!("page {page}: {err}");
                }
                println!(
                    "{name}: root (epoch {}) and {} page-table pages authentic; {} of {} pages checked ({} written), {} failed",
                    report.epoch,
                    report.tables,
                    report.pages,
                    report.pages,
                    report.pages_written,
                    report.bad_pages.len()
                );
            }
            if !report.ok() {
                bail!(
                    "object {name:?}: {} pages failed verification",
                    report.bad_pages.len()
                );
            }
        }
        PmoCommand::Destroy { name } => {
            let key = key_if_encrypted(&pool, args.key_file.as_deref(), name)?;
            pool.pdestroy(name, key.as_deref())?;
            if !args.json {
                println!("destroyed {name}");
            } else {
                println!("{}", serde_json::json!({"destroyed": name}));
            }
        }
    }
    Ok(())
}

fn key_if_encrypted(pool: &Pool, key_file: Option<&Path>, name: &str) -> Result<Option<Vec<u8>>> {
    match pool.list().into_iter().find(|o| o.name == name) {
        Some(o) if o.encrypted => Ok(Some(key_for(key_file, name, false)?)),
        // Unknown names are reported by the pool itself.
        _ => Ok(None),
    }
}

fn key_for(key_file: Option<&Path>, name: &str, confirm: bool) -> Result<Vec<u8>> {
    let mut key = match key_file {
        Some(path) => {
            let mut k = std::fs::read(path)
                .with_context(|| format!("reading the key file {}", path.display()))?;
            if k.ends_with(b"\n") {
                k.pop();
                if k.ends_with(b"\r") {
                    k.pop();
                }
            }
            k
        }
        None => {
            if !std::io::stdin().is_terminal() {
                bail!("object {name:?} needs a key: give --key-file PATH (there is no terminal to ask on)");
            }
            let k = rpassword::prompt_password(format!("key for {name}: "))
                .context("reading the key from the terminal")?;
            if confirm {
                let again = rpassword::prompt_password(format!("key for {name} (again): "))
                    .context("reading the key from the terminal")?;
                if again != k {
                    bail!("the two keys differ");
                }
            }
            k.into_bytes()
        }
    };
    if key.is_empty() {
        bail!("the key for {name:?} is empty");
    }
    key.shrink_to_fit();
    Ok(key)
}
