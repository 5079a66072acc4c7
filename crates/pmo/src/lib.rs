//! `nvmos-pmo`: persistent memory objects (seed 001, PD-LOaPP) as a library
//! real programs use. This part is the mapping engine: an object is attached
//! at its fixed virtual address, its pages arrive through userfaultfd
//! faults (verified and decrypted on the way in), writes are tracked with
//! userfaultfd write protection, and `psync` seals the dirty pages back
//! through the object's [`backing::PageBacking`]. Four modes per attach: no
//! encryption, decrypt at fault, DRAM as cache, DRAM cache with stream,
//! stride or Markov prediction of depth N.
//!
//! ```no_run
//! use std::sync::Arc;
//! use nvmos_pmo::attach::{mem_backing::MemBacking, predict::PredictorKind, Attachment, Mode, Perm};
//!
//! // A volatile sealed object of 64 pages that always lives at 0x6000_0000_0000.
//! let object = Arc::new(MemBacking::new(0x6000_0000_0000, 64, true));
//! let mode = Mode::Predict { predictor: PredictorKind::Stream, depth: 8 };
//! let mut a = Attachment::attach(object.clone(), Perm::ReadWrite, mode)?;
//! a.as_mut_slice().unwrap()[0] = 1;
//! a.psync()?;
//! a.detach()?;
//! # Ok::<(), nvmos_pmo::attach::AttachError>(())
//! ```

pub mod attach;
pub mod backing;

pub use attach::{AttachError, AttachStats, Attachment, Mode, Perm};
pub use backing::PageBacking;
