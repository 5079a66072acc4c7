//! What every study shares: its progress reports.
//!
//! Every study of this crate has one shape: an `Options` (serde, with a
//! `Default` and where it makes sense a `quick()`), a
//! `run(&Options, &mut dyn FnMut(Progress)) -> Result<Study, Error>` and a
//! result that is plain, serialisable data; the CLI parses options,
//! draws `Progress` as a bar and renders the result.

/// How far a study is: `done` of `total` steps, and what runs now.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    /// Steps finished.
    pub done: u64,
    /// Steps in all.
    pub total: u64,
    /// What the next step does ("compile: LiS-31").
    pub step: String,
}
