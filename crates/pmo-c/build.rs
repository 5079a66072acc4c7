//! Generate `nvmos_pmo.h` from `src/lib.rs` with cbindgen into OUT_DIR.
//! The committed copy, `include/nvmos_pmo.h`, is what C users include;
//! `tests/header.rs` fails when it differs from this output (run it with
//! `NVMOS_PMO_C_BLESS=1` to rewrite the copy).

use std::path::PathBuf;

fn main() {
    let dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=src/lib.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("reading cbindgen.toml: {e}"));
    // Parse only our source (no `cargo metadata` from inside the build).
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen on src/lib.rs: {e}"))
        .write_to_file(out.join("nvmos_pmo.h"));
}
