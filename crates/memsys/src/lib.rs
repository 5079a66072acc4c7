//! # nvmos-memsys: the machine every study runs on
//!
//! One [`Machine`] description shared by every nvmos study: the page size,
//! the zones and the [`Technology`] (DRAM or PCM) behind each range of
//! page frames, how the memory is organised (channels, ranks, bank groups,
//! banks, rows, columns), the [`AddressMapping`] from physical addresses to
//! those [`Coordinates`], and per-technology [`Timing`]s.
//!
//! Where the OS puts a page frame decides which banks its cache lines land
//! in, and so how often cores collide in a bank's row buffer (seed 002).
//! The mapping is what connects the two, and it is given the way reverse
//! engineering finds it: bit slices plus XOR functions of address bits,
//! and a modulo channel interleave for channel counts that are not a power
//! of two. A mapping is checked when it is loaded to be invertible:
//! [`AddressMapping::decode`] and [`AddressMapping::encode`] are inverse
//! over the whole mapped range.
//!
//! Machines are written in TOML. Five presets are built in (see
//! [`Machine::preset_names`]): `xeon-3ch` (the seed's Xeon), `ddr4-2400`,
//! `coffeelake-xor` (a published Intel XOR bank mapping), `pcm-lee2009`
//! (PCM timings from Lee et al., ISCA 2009) and `ddr4-2400-dramsim3`
//! (DRAMSim3's `DDR4_8Gb_x8_2400.ini`, with bank groups and refresh);
//! each file says where its numbers come from. [`Machine::load`] reads any other file.
//!
//! [`bank`] holds the per-bank part of the timing model: each bank's open
//! row ([`BankState`]) under an open- or closed-page [`PagePolicy`], and
//! when a request's data is done given `tRCD`/`tCL`/`tRP`/`tRAS`/`tWR`
//! ([`BankState::access`], [`Timing::unloaded_latency`]).
//!
//! [`controller`] is the whole timing model: per-bank request queues under
//! a bounded queue per channel, FR-FCFS scheduling (row hits first, then
//! the oldest), every command timing per bank, rank and channel, data-bus
//! contention with read/write turnaround; event driven, one decision per
//! request, and an assertion mode whose [`checker`] verifies every timing
//! constraint between the commands issued. [`lookup`] decodes addresses to
//! banks with byte-wise lookup tables for it.
//!
//! [`trace`] reads DRAMSim3 and Ramulator 2 request traces and runs them
//! through the controller with the statistics DRAMSim3 prints.
//!
//! [`power`] is the memory power model of seed 004: per-bank power states
//! (Read/Write, Active-Idle, Self-Refresh, Deep-Power-Down) from the
//! seed's relative table or from published IDD currents (DDR4, LPDDR4),
//! and the energy of banks up and down over time plus migration copies.
//!
//! [`probe`] is seed 002's analysing program for real hardware: bank
//! functions from row-conflict timing (DRAMA), on the model or the machine.
//!
//! ```
//! use nvmos_memsys::{Coordinates, Machine, Technology};
//!
//! let xeon = Machine::preset("xeon-3ch")?;
//! // Consecutive cache lines of a frame go round the three channels...
//! let channels: Vec<u32> = (0..4).map(|line| xeon.decode(line * 64).unwrap().channel).collect();
//! assert_eq!(channels, [0, 1, 2, 0]);
//! // ...and the bank changes every 12 KB.
//! assert_eq!(xeon.decode(12 * 1024)?.bank, 1);
//!
//! // encode is decode's inverse.
//! let c = Coordinates { channel: 2, rank: 3, bank: 5, row: 100, column: 7, ..Default::default() };
//! assert_eq!(xeon.decode(xeon.encode(&c)?)?, c);
//!
//! let pcm = Machine::preset("pcm-lee2009")?;
//! assert_eq!(pcm.technology_of(0), Some(Technology::Pcm));
//! assert!(pcm.timing(Technology::Pcm).unwrap().rp > pcm.timing(Technology::Pcm).unwrap().rcd);
//!
//! // The timing model: a sequential read stream hits the open row.
//! use nvmos_memsys::{AccessKind, Controller, ControllerConfig, MemRequest};
//! let ddr4 = Machine::preset("ddr4-2400")?;
//! let mut mc = Controller::new(&ddr4, ControllerConfig::default())?;
//! let stream = (0..1024u64).map(|line| MemRequest { paddr: line * 64, kind: AccessKind::Read, core: 0, arrival: 0 });
//! let report = mc.run(stream)?;
//! assert_eq!(report.rows.hits, 1024 - 8); // 128 lines per 8 KB row
//! assert_eq!(mc.verify(), Ok(0)); // assertion mode is off by default
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod bank;
pub mod checker;
pub mod controller;
mod error;
pub mod lookup;
mod machine;
pub mod mapping;
pub mod power;
pub mod probe;
mod timing;
pub mod trace;

pub use bank::{AccessKind, BankState, PagePolicy, RowOutcome, RowStats, Served};
pub use controller::{
    Completion, Controller, ControllerConfig, ControllerError, ControllerReport, CoreLatency,
    MemRequest, Scheduler,
};
pub use error::{LoadError, MachineError};
pub use lookup::{BankDecoder, BankRow};
pub use machine::{Llc, Machine, MachineSpec, Organisation, Zone};
pub use mapping::{
    AddressError, AddressMapping, BitSpec, ChannelModulo, Coordinates, Field, MappingError,
    MappingSpec,
};
pub use timing::{Technology, Timing, TimingError, Timings};
