//! The repository's series as files: the policy cores the differential
//! tests compile are the ones the patches add to `mm/`, the configs name
//! what the debug flavour adds, and the cover letter is not applied.

use nvmos_kernel::kbuild::{Flavour, Series, COVER_LETTER};

#[test]
fn the_series_adds_the_tested_policy_cores_verbatim() {
    let series = Series::load(&nvmos_kernel::repo_kernel_dir(), Flavour::Plain).unwrap();
    series.check_cores().unwrap();
    assert!(series
        .patches
        .iter()
        .all(|p| p.file_name().unwrap() != COVER_LETTER));
}

#[test]
fn the_debug_flavour_merges_its_fragment_after_the_plain_one() {
    let dir = nvmos_kernel::repo_kernel_dir();
    let plain = Series::load(&dir, Flavour::Plain).unwrap();
    let debug = Series::load(&dir, Flavour::Debug).unwrap();
    assert_eq!(plain.configs.len(), 1);
    assert_eq!(debug.configs[0], plain.configs[0]);
    assert!(debug.configs[1].ends_with("config-debug"));
    let v = "6.12.117-1~deb12u1";
    assert_ne!(plain.hash(v).unwrap(), debug.hash(v).unwrap());
    let frag = std::fs::read_to_string(&debug.configs[1]).unwrap();
    for opt in [
        "CONFIG_KASAN=y",
        "CONFIG_PROVE_LOCKING=y",
        "CONFIG_DEBUG_VM=y",
        "CONFIG_LOCK_STAT=y",
    ] {
        assert!(frag.lines().any(|l| l == opt), "{opt}");
    }
}

#[test]
fn a_changed_core_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let src = nvmos_kernel::repo_kernel_dir();
    for sub in ["patches", "policy"] {
        std::fs::create_dir_all(tmp.path().join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), tmp.path().join(sub).join(e.file_name())).unwrap();
        }
    }
    std::fs::copy(src.join("config"), tmp.path().join("config")).unwrap();
    let core = tmp.path().join("policy/ibuddy_core.c");
    let mut text = std::fs::read_to_string(&core).unwrap();
    text.push_str("/* drift */\n");
    std::fs::write(&core, text).unwrap();
    let series = Series::load(tmp.path(), Flavour::Plain).unwrap();
    let err = series.check_cores().unwrap_err().to_string();
    assert!(err.contains("ibuddy_core.c differs"), "{err}");
}
