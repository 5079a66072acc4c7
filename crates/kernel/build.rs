//! Compiles the kernel's iBuddy core (`kernel/policy/ibuddy_core.c`, the
//! very file the kernel build copies into `mm/`) against its user-space
//! shim, with a small harness, so the differential test can drive it.
fn main() {
    let policy = "../../kernel/policy";
    for f in ["ibuddy_core.c", "ibuddy_core.h", "ibuddy_shim.h"] {
        println!("cargo:rerun-if-changed={policy}/{f}");
    }
    println!("cargo:rerun-if-changed=csrc/harness.c");
    cc::Build::new()
        .file(format!("{policy}/ibuddy_core.c"))
        .file("csrc/harness.c")
        .include(policy)
        .flag_if_supported("-std=gnu11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("nvmos_ibuddy_core");
}
