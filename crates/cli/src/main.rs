//! The `nvmos` binary: the tool ([`nvmos::main_from`]) with huge pages for
//! its big blocks.

use std::process::ExitCode;

/// Transparent huge pages for the big blocks (the allocators' per-frame
/// tables): a third less system time in `evaluate`, same answers.
#[global_allocator]
static ALLOC: nvmos_trace::table::HugePageAlloc = nvmos_trace::table::HugePageAlloc;

fn main() -> ExitCode {
    ExitCode::from(nvmos::main_from(std::env::args_os()))
}
