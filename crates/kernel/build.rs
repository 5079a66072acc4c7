//! Compiles the kernel's policy cores (`kernel/policy/ibuddy_core.c`,
//! `adaptive_core.c` and `m3_core.c`, the very files the kernel build
//! copies into `mm/`) against their user-space shim, with small
//! harnesses, so the differential tests can drive them.
fn main() {
    let policy = "../../kernel/policy";
    for f in [
        "ibuddy_core.c",
        "ibuddy_core.h",
        "adaptive_core.c",
        "adaptive_core.h",
        "m3_core.c",
        "m3_core.h",
        "ibuddy_shim.h",
    ] {
        println!("cargo:rerun-if-changed={policy}/{f}");
    }
    println!("cargo:rerun-if-changed=csrc/harness.c");
    println!("cargo:rerun-if-changed=csrc/adaptive_harness.c");
    println!("cargo:rerun-if-changed=csrc/m3_harness.c");
    cc::Build::new()
        .file(format!("{policy}/ibuddy_core.c"))
        .file("csrc/harness.c")
        .file(format!("{policy}/adaptive_core.c"))
        .file("csrc/adaptive_harness.c")
        .file(format!("{policy}/m3_core.c"))
        .file("csrc/m3_harness.c")
        .include(policy)
        .flag_if_supported("-std=gnu11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("nvmos_ibuddy_core");
}
