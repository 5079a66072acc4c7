//! What the recorder tests (`record`, `record-swap`) share with
//! `nvmos-trace`'s: the machine-wide lock of tests that touch kernel
//! state, the can-it-run check, tracefs mounting and snapshots. One file,
//! included from there.

#[path = "../../../trace/tests/kernel_state/mod.rs"]
mod kernel_state;
#[allow(unused_imports)]
pub use kernel_state::*;
