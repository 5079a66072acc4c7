//! What the `reproduce*` tests share: running the binary in a folder.

use std::path::Path;
use std::process::{Command, Output};

/// `nvmos ARGS` run in `dir`, its output collected.
pub fn nvmos(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running nvmos")
}
