//! The committed `include/nvmos_pmo.h` is exactly what cbindgen generates
//! from `src/lib.rs` now (build.rs writes it into OUT_DIR at every build).
//! After changing the interface, rewrite the copy with
//! `NVMOS_PMO_C_BLESS=1 cargo test -p nvmos-pmo-c --test header`.

use std::path::Path;

const GENERATED: &str = include_str!(concat!(env!("OUT_DIR"), "/nvmos_pmo.h"));

#[test]
fn committed_header_matches_cbindgen() {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/nvmos_pmo.h");
    if std::env::var_os("NVMOS_PMO_C_BLESS").is_some() {
        let dir = committed.parent().unwrap();
        let tmp = tempfile::NamedTempFile::new_in(dir).unwrap();
        std::fs::write(tmp.path(), GENERATED).unwrap();
        tmp.persist(&committed).unwrap();
    }
    let text = std::fs::read_to_string(&committed)
        .unwrap_or_else(|e| panic!("reading {}: {e}", committed.display()));
    assert!(
        text == GENERATED,
        "{} differs from what cbindgen generates from src/lib.rs; rerun with NVMOS_PMO_C_BLESS=1 to rewrite it",
        committed.display()
    );
    // Every function of the interface is declared.
    for f in [
        "nvmos_pmo_pool_create",
        "nvmos_pmo_pool_open",
        "nvmos_pmo_pool_close",
        "nvmos_pmo_pcreate",
        "nvmos_pmo_pdestroy",
        "nvmos_pmo_attach",
        "nvmos_pmo_base",
        "nvmos_pmo_read",
        "nvmos_pmo_write",
        "nvmos_pmo_psync",
        "nvmos_pmo_psync_many",
        "nvmos_pmo_detach",
        "nvmos_pmo_object_id",
        "nvmos_pmo_off",
        "nvmos_pmo_resolve",
        "nvmos_pmo_strerror",
        "nvmos_pmo_last_error",
    ] {
        assert!(
            text.contains(&format!("{f}(")),
            "{f} missing from the header"
        );
    }
}
