//! The memory controller timing model: per-bank request queues, FR-FCFS
//! scheduling, write buffering, refresh, command timing per bank, bank
//! group, rank and channel, and data-bus contention; event-driven, one
//! scheduling decision per request.
//!
//! # What it models
//!
//! Each channel has a bounded queue of `queue_depth` requests, kept as one
//! queue per bank, and (with [`ControllerConfig::write_queue_depth`] > 0)
//! a separate write buffer of that many writes, also kept per bank. Two
//! schedulers ([`Scheduler`]):
//!
//! - **ready** (the default): first-ready first-come-first-served over
//!   *ready* commands (Rixner et al., ISCA 2000, as DRAMSim3 and
//!   Ramulator 2 implement it). Each bank offers one candidate, its oldest
//!   queued row hit or else its oldest request; the channel serves, at
//!   the earliest cycle any candidate's column command can issue, the
//!   candidate that can issue then, row hits before misses, then the
//!   oldest. A busy bank (`tRC`, `tRP`, `tFAW`) therefore stalls only its
//!   own requests.
//! - **blocking** (the basic model, [`ControllerConfig::basic`]):
//!   when the channel can take its next column command it picks the oldest
//!   queued hit, or failing that the oldest request, and issues strictly
//!   in that order, so a busy bank holds up every later request.
//!
//! With a write buffer, reads are served while it holds fewer than
//! `write_high` writes; then writes are drained until `write_low` remain
//! (and writes are served whenever no read is queued), so the data bus
//! turns around (`tWTR`) once per batch rather than once per write
//! (Ramulator 2's watermarks: 0.8 and 0.2 of the buffer).
//!
//! The chosen request's commands are placed as early as every timing
//! constraint allows:
//!
//! - **bank**: ACT→RD/WR `tRCD`, ACT→PRE `tRAS`, PRE→ACT `tRP`, RD→PRE
//!   `tRTP`, end of write data→PRE `tWR`;
//! - **bank group** (with [`ControllerConfig::bank_groups`] and a timing
//!   that gives them): `tCCD_L`, `tRRD_L`, `tWTR_L` within a bank group,
//!   the `_S` values between groups;
//! - **rank**: ACT→ACT `tRRD`, at most four ACTs in `tFAW`, RD/WR→RD/WR
//!   `tCCD`, end of write data→RD `tWTR`; all-bank refresh every `tREFI`
//!   (staggered over the ranks of a channel, as DRAMSim3's
//!   `RANK_LEVEL_STAGGERED`), which precharges every bank and keeps the
//!   rank closed for `tRFC` (with [`ControllerConfig::refresh`] and a
//!   timing that gives `tREFI`);
//! - **channel**: one data burst (`burst_length / 2` cycles) on the bus at
//!   a time, data `tCL` after a read and `tCWL` after a write, two cycles
//!   of bus turnaround from read data to write data (JEDEC's
//!   `RL + tCCD + 2 - WL` read-to-write spacing), `tRTRS` idle cycles
//!   between bursts of different ranks (with
//!   [`ControllerConfig::rank_switch`]), one column command per cycle.
//!
//! Column commands of a channel issue in the order the scheduler picks
//! requests; a bank's PRE and ACT for a picked request may issue before
//! the column command of an earlier pick to another bank (as soon as the
//! request is queued and the bank and rank allow), which is how banks work
//! in parallel. Under the open-page policy a row stays open until a
//! request for another row needs the bank (or a refresh closes it); under
//! the closed-page policy every column command is followed by a precharge
//! as soon as `tRAS`, `tRTP` or `tWR` allow (auto-precharge).
//!
//! PCM is the same state machine with Lee et al.'s timings: the array read
//! is `tRCD`, and the slow array write happens when a row closes, as the
//! long `tRP`.
//!
//! Not modelled: the command bus for ACT, PRE and REF (they may share a
//! cycle with another command; column commands are one per cycle), reads
//! served from the write buffer (DRAMSim3 forwards a read that matches a
//! buffered write), per-bank refresh, power-down.
//!
//! # Time
//!
//! Everything is in cycles of the memory clock `tCK`. The model is event
//! driven: it does not tick; each decision jumps to the time the channel
//! can next issue a column command, so its cost is per request, not per
//! cycle. A refresh due before a decision is applied first.
//!
//! # Assertion mode
//!
//! With [`ControllerConfig::check`] every command issued is recorded, and
//! [`Controller::verify`] replays them through an independent checker
//! ([`crate::checker`]) that knows nothing of how they were scheduled and
//! reports the first timing constraint any pair of commands breaks.

use std::cell::Cell;

use serde::{Deserialize, Serialize};

use crate::bank::{AccessKind, PagePolicy, RowOutcome, RowStats};
use crate::checker::{self, Command, CommandKind, Layout, Violation};
use crate::lookup::BankDecoder;
use crate::timing::Timing;
use crate::Machine;

/// Bus turnaround from the end of read data to the start of write data,
/// in cycles (JEDEC DDR3/DDR4: read-to-write command spacing
/// `RL + tCCD + 2 tCK - WL`).
pub const READ_TO_WRITE_TURNAROUND: u32 = 2;

/// No row open.
const CLOSED: u32 = u32::MAX;

/// End of an intrusive list of slots.
const NIL: u32 = u32::MAX;

/// No command of this kind planned.
const NONE: u64 = u64::MAX;

/// How the channel picks the next request to serve.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    /// FR-FCFS over requests whose column command can issue soonest: a
    /// busy bank holds up only its own requests.
    Ready,
    /// FR-FCFS over queued requests in strict order: the oldest hit, else
    /// the oldest request, whether its bank is ready or not.
    Blocking,
}

/// How the controller runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerConfig {
    /// Open- or closed-page policy.
    pub policy: PagePolicy,
    /// Requests each channel's queue holds (1 is first-come first-served);
    /// with a write buffer, reads only.
    pub queue_depth: usize,
    /// Record every command for [`Controller::verify`].
    pub check: bool,
    /// Ready (non-blocking) or blocking FR-FCFS.
    pub scheduler: Scheduler,
    /// Writes each channel buffers apart from the reads; 0: writes share
    /// the request queue and are scheduled like reads. Needs the ready
    /// scheduler.
    pub write_queue_depth: usize,
    /// Buffered writes at which the channel starts draining them.
    pub write_high: usize,
    /// Buffered writes at which draining stops (while reads wait).
    pub write_low: usize,
    /// Refresh every rank every `tREFI` for `tRFC`, where the timing gives
    /// them.
    pub refresh: bool,
    /// Same-bank-group `_L` timings, where the timing gives them.
    pub bank_groups: bool,
    /// `tRTRS` between data bursts of different ranks, where given.
    pub rank_switch: bool,
}

impl Default for ControllerConfig {
    /// The full model: ready FR-FCFS, a 32-request queue and a 32-write
    /// buffer per channel drained between Ramulator 2's watermarks (0.8
    /// and 0.2 of it), refresh, bank groups and rank switching on (each
    /// only where the machine's timing gives its parameters).
    fn default() -> Self {
        Self {
            policy: PagePolicy::Open,
            queue_depth: 32,
            check: false,
            scheduler: Scheduler::Ready,
            write_queue_depth: 32,
            write_high: 26,
            write_low: 6,
            refresh: true,
            bank_groups: true,
            rank_switch: true,
        }
    }
}

impl ControllerConfig {
    /// The basic model: blocking FR-FCFS, reads and writes in one
    /// 32-request queue, no refresh, one `tCCD`/`tRRD`/`tWTR` per rank, no
    /// rank-switch gap. The closed-form tests hold for it.
    pub fn basic() -> Self {
        Self {
            scheduler: Scheduler::Blocking,
            write_queue_depth: 0,
            write_high: 0,
            write_low: 0,
            refresh: false,
            bank_groups: false,
            rank_switch: false,
            ..Self::default()
        }
    }
}

/// Why a controller could not be built or a request taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    /// Zones of different technologies: one controller models one.
    #[error("machine {machine:?} mixes DRAM and PCM zones; the timing model takes one technology per machine")]
    MixedTechnology {
        /// The machine's name.
        machine: String,
    },
    /// A queue of no requests, or of more than slot numbers can name.
    #[error("queue_depth must be at least 1 and below 2^31")]
    QueueDepth,
    /// Write-buffer watermarks that cannot work.
    #[error("write buffer of {depth}: needs 0 <= write_low ({low}) < write_high ({high}) <= write_queue_depth, and the ready scheduler")]
    WriteBuffer {
        /// write_queue_depth.
        depth: usize,
        /// write_high.
        high: usize,
        /// write_low.
        low: usize,
    },
    /// A request beyond the mapped memory.
    #[error("request for physical address {paddr:#x} lies beyond the {size:#x} bytes mapped")]
    Beyond {
        /// The address.
        paddr: u64,
        /// Bytes mapped.
        size: u64,
    },
}

/// One cache-line request.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemRequest {
    /// Physical address.
    pub paddr: u64,
    /// Read or write.
    pub kind: AccessKind,
    /// The core that issued it (for per-core latency).
    pub core: u32,
    /// When it reaches the controller, in memory cycles. Requests must be
    /// submitted in non-decreasing arrival order per channel.
    pub arrival: u64,
}

/// A request served.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completion {
    /// The number [`Controller::submit`] gave the request.
    pub id: u64,
    /// Its core.
    pub core: u32,
    /// Read or write.
    pub kind: AccessKind,
    /// What it found in its bank's row buffer.
    pub outcome: RowOutcome,
    /// When it arrived.
    pub arrival: u64,
    /// When it entered the controller's queue (later than `arrival` when
    /// the queue was full): DRAMSim3 counts latency from here.
    pub entered: u64,
    /// When its last data beat moved.
    pub done: u64,
}

/// Latency of one core's requests.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CoreLatency {
    /// Requests served.
    pub requests: u64,
    /// Mean arrival-to-data latency, cycles.
    pub mean_cycles: f64,
    /// The longest, cycles.
    pub max_cycles: u64,
    /// Mean latency in nanoseconds.
    pub mean_ns: f64,
}

/// What a run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ControllerReport {
    /// Requests served.
    pub requests: u64,
    /// Of which reads.
    pub reads: u64,
    /// Row-buffer outcomes.
    pub rows: RowStats,
    /// Hits / requests.
    pub hit_rate: f64,
    /// Misses (closed bank) / requests.
    pub miss_rate: f64,
    /// Conflicts (another row open) / requests.
    pub conflict_rate: f64,
    /// Bank-level parallelism: the mean number of banks busy over the run
    /// (a bank is busy from a request's first command to the end of its
    /// data).
    pub blp: f64,
    /// Bank-level parallelism while the memory works: the mean number of
    /// banks busy over the cycles in which at least one is. Unlike
    /// [`ControllerReport::blp`] it does not fall when a program computes
    /// between its requests.
    #[serde(default)]
    pub busy_blp: f64,
    /// First arrival to last data, cycles.
    pub total_cycles: u64,
    /// The same in nanoseconds.
    pub total_ns: f64,
    /// Bytes moved per second of modelled time, in GB/s (10^9 B/s).
    pub bandwidth_gbs: f64,
    /// All-bank refreshes due over the run (every rank, cycle 0 to the
    /// last data).
    pub refreshes: u64,
    /// Per core, indexed by core.
    pub cores: Vec<CoreLatency>,
}

// Layout of the queues. Each channel owns a fixed array of slots
// (`queue_depth` for reads, or for everything without a write buffer, and
// `write_queue_depth` more for buffered writes), allocated once; a queued
// request lives in one slot until it is picked. Slots are threaded on
// intrusive doubly linked lists: its bank's queue of its class (reads, or
// buffered writes; oldest first) and, for the blocking scheduler only,
// the channel's arrival-order list (oldest first, so its fallback is the
// head; the ready scheduler never reads it and does not keep it). Both
// unlink in O(1), so neither submitting nor picking allocates or searches
// a queue. Each bank queue also keeps its first queued row hit, and (for
// the blocking scheduler) each channel a bitmask of the banks that have
// one, so FR-FCFS looks at one candidate per such bank instead of
// walking queues.
//
// The ready scheduler's per-decision work is one pass over the channel's
// queued banks: each bank's candidate (`Cand`: its bank-only earliest
// column cycle, miss flag and id as one key, and which group and rank
// gates apply to it) sits in a dense per-channel array indexed by the
// bank's number in the channel. What a bank group allows is kept as four
// numbers per group (`ChannelQ::group_shared`: read or write, hit or
// miss), rewritten by the command that changes the group; what the
// channel and each rank allow is combined once per pick into four numbers
// per rank (`ChannelQ::shared`). So a candidate's cycle is two table
// reads and two maxima, and its (cycle, miss, id) order one 128-bit
// compare. A new request is compared against the cached pick with the
// same gates computed for it alone (`cand_col`). The answers are pinned
// by `tests/schedule.rs` (every command's cycle, on every preset,
// recorded before this layout).

/// Reads (and writes, without a write buffer).
const READS: usize = 0;
/// Buffered writes.
const WRITES: usize = 1;

#[derive(Copy, Clone, Debug)]
struct List {
    /// Oldest and youngest slot, or `NIL`.
    head: u32,
    tail: u32,
    /// The oldest queued slot whose row is the bank's open row, or `NIL`.
    /// Invariant: `NIL` exactly when `hits == 0`.
    first_hit: u32,
    /// How many queued slots hit the open row.
    hits: u32,
}

impl List {
    /// Recount `hits` and `first_hit` for open row `open`, walking the
    /// queue (oldest first) through `slots`' bank links.
    #[inline(always)]
    fn recount_hits(&mut self, slots: &[Slot], open: u32) {
        self.hits = 0;
        self.first_hit = NIL;
        let mut s = self.head;
        while s != NIL {
            let slot = &slots[s as usize];
            if slot.row == open {
                if self.first_hit == NIL {
                    self.first_hit = s;
                }
                self.hits += 1;
            }
            s = slot.bank_younger;
        }
    }
}

/// The ready scheduler's candidate of one bank in one class (its first
/// queued hit, else its oldest request), with what of its column
/// command's earliest cycle depends on the bank alone: kept up to date
/// whenever the candidate or the bank changes, so a decision only adds
/// its group's gates (`ChannelQ::group_shared`), its rank's and the
/// channel's (`ChannelQ::shared`). Kept per channel in an array indexed
/// by the bank's number within the channel, so a decision reads them in
/// order from a few cache lines.
#[derive(Copy, Clone, Debug)]
struct Cand {
    /// The candidate's earliest column command as far as its own arrival
    /// and its bank allow (`tRCD` after the ACT the bank allows).
    local: u64,
    /// Its tie-break: `MISS_BIT` when it needs an ACT (a miss or a
    /// conflict), or'd with its id.
    key: u64,
    /// Its slot, or `NIL`.
    slot: u32,
    /// Its bank group within the channel, read or write, miss or hit, as
    /// `group << 2 | read << 1 | miss`: an index into
    /// `ChannelQ::group_shared`.
    gsel: u16,
    /// The same with its rank within the channel in place of the group:
    /// an index into `ChannelQ::shared`.
    rsel: u16,
}

/// The miss flag in a candidate's key: misses after hits at the same
/// cycle, then the oldest (ids are below 2^63).
const MISS_BIT: u64 = 1 << 63;

impl Cand {
    /// Make slot `s` (`slot`, queued at `bank`) this candidate: its
    /// earliest column command as far as its arrival and its bank allow
    /// (`rcd`, `rp`: the timings), its tie-break and its selector flags.
    #[inline(always)]
    fn set_to(&mut self, s: u32, slot: &Slot, bank: &BankQ, rcd: u64, rp: u64) {
        let from = slot.entered.max(bank.col_ok);
        let (local, miss) = match bank.row_steps(slot, rp) {
            (RowOutcome::Hit, ..) => (from, false),
            (_, _, act) => (from.max(act + rcd), true),
        };
        let flags = u16::from(slot.kind == AccessKind::Read) << 1 | u16::from(miss);
        self.slot = s;
        self.key = slot.id | if miss { MISS_BIT } else { 0 };
        self.local = local;
        self.gsel = (self.gsel & !3) | flags;
        self.rsel = (self.rsel & !3) | flags;
    }

    #[inline(always)]
    fn miss(&self) -> bool {
        self.key & MISS_BIT != 0
    }

    #[inline(always)]
    fn id(&self) -> u64 {
        self.key & !MISS_BIT
    }

    #[inline(always)]
    fn read(&self) -> bool {
        self.gsel & 2 != 0
    }
}

/// What a rank's state allows its banks' candidates, kept up to date
/// whenever it changes (every ACT and column command on it): the earliest
/// column command of a write (`[0]`) and of a read (`[1]`) as far as
/// `tCCD` and `tWTR` allow, and the earliest column command after an ACT
/// as far as `tRRD` and `tFAW` allow (the ACT's earliest cycle plus
/// `tRCD`). A bank group's (`_L` timings) is kept in the same terms in
/// `ChannelQ::group_shared`.
#[derive(Copy, Clone, Debug, Default)]
struct RankGate {
    col: [u64; 2],
    act_col: u64,
}

impl RankGate {
    /// Recompute from `rank` after a command on it. `act`: the command
    /// included an ACT. The ACT gate (`tRRD`, `tFAW`) reads only what an
    /// ACT writes, so without one it is kept (builds with debug
    /// assertions check that it still holds).
    #[inline(always)]
    fn update(&mut self, rank: &RankQ, t: &Timing, act: bool) {
        let act_col = || {
            let mut act = rank.act_ok;
            if t.faw != 0 && rank.faw_n == 4 {
                act = act.max(rank.faw[rank.faw_i] + u64::from(t.faw));
            }
            act + u64::from(t.rcd)
        };
        self.col = [rank.col_ok, rank.col_ok.max(rank.read_ok)];
        if act {
            self.act_col = act_col();
        } else {
            debug_assert_eq!(
                self.act_col,
                act_col(),
                "the rank's ACT gate moved without an ACT"
            );
        }
    }
}

impl GroupQ {
    /// This group's four gates in `ChannelQ::group_shared` terms (write
    /// or read column command, hit or after an ACT), after a command on
    /// it.
    #[inline(always)]
    fn shared_gates(&self, rcd: u64, shared: &mut [u64]) {
        let (write_col, read_col) = (self.col_ok, self.col_ok.max(self.read_ok));
        let act_col = self.act_ok + rcd;
        shared[0] = write_col;
        shared[1] = write_col.max(act_col);
        shared[2] = read_col;
        shared[3] = read_col.max(act_col);
    }
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
    first_hit: NIL,
    hits: 0,
};

#[derive(Clone, Debug)]
struct BankQ {
    open_row: u32,
    q: [List; 2],
    act_ok: u64,
    pre_ok: u64,
    col_ok: u64,
    /// Union of busy intervals, accumulated: end of the last one.
    busy_until: u64,
    busy: u64,
}

/// Cycles from a column command to its data: `CL` for a read, `CWL` for
/// a write.
#[inline(always)]
fn data_latency(t: &Timing, kind: AccessKind) -> u64 {
    u64::from(match kind {
        AccessKind::Read => t.cl,
        AccessKind::Write => t.cwl,
    })
}

impl BankQ {
    /// What serving `slot` here takes before its column command, as far
    /// as the bank allows: the row outcome, the `PRE` cycle (`NONE` but
    /// for a conflict) and the earliest `ACT` (`NONE` for a hit; the
    /// rank's and group's gates come on top). `rp`: `tRP`.
    #[inline(always)]
    fn row_steps(&self, slot: &Slot, rp: u64) -> (RowOutcome, u64, u64) {
        match self.open_row {
            CLOSED => (RowOutcome::Miss, NONE, slot.entered.max(self.act_ok)),
            r if r == slot.row => (RowOutcome::Hit, NONE, NONE),
            _ => {
                let pre = slot.entered.max(self.pre_ok);
                let act = slot.entered.max(self.act_ok).max(pre + rp);
                (RowOutcome::Conflict, pre, act)
            }
        }
    }
}

#[derive(Clone, Debug, Default)]
struct RankQ {
    /// tRRD(_S) after the last ACT.
    act_ok: u64,
    /// The last four ACTs, ring; `faw_n` counts ACTs up to four.
    faw: [u64; 4],
    faw_i: usize,
    faw_n: usize,
    /// tCCD(_S) after the last column command.
    col_ok: u64,
    /// tWTR(_S) after the last write data.
    read_ok: u64,
    /// When the next all-bank refresh is due.
    next_ref: u64,
}

/// Same-bank-group gates (`_L` timings); equal to the rank's without bank
/// groups.
#[derive(Copy, Clone, Debug, Default)]
struct GroupQ {
    act_ok: u64,
    col_ok: u64,
    read_ok: u64,
}

#[derive(Copy, Clone, Debug)]
struct Slot {
    id: u64,
    arrival: u64,
    /// When it entered the queue (after waiting for space).
    entered: u64,
    row: u32,
    bank: u32,
    core: u32,
    kind: AccessKind,
    /// `READS` or `WRITES`: which queue it is in.
    class: u8,
    /// Arrival-order list links.
    older: u32,
    younger: u32,
    /// Bank-queue links.
    bank_older: u32,
    bank_younger: u32,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            id: 0,
            arrival: 0,
            entered: 0,
            row: 0,
            bank: 0,
            core: 0,
            kind: AccessKind::Read,
            class: 0,
            older: NIL,
            younger: NIL,
            bank_older: NIL,
            bank_younger: NIL,
        }
    }
}

/// The ready scheduler's next pick of a channel, cached between changes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Pick {
    /// Its column command's cycle.
    col: u64,
    /// Row hit first, then oldest.
    miss: bool,
    id: u64,
    slot: u32,
    class: u8,
}

impl Pick {
    fn key(&self) -> (u64, bool, u64) {
        (self.col, self.miss, self.id)
    }
}

/// The cached pick of a channel, `None` when stale, `Some(None)` when
/// nothing is queued, kept field by field (plain scalar stores and loads:
/// it is written and read back within a few dozen instructions).
#[derive(Clone, Debug, Default)]
struct PickCache {
    /// 0: stale; 1: nothing queued; 2: the fields below.
    state: Cell<u8>,
    col: Cell<u64>,
    id: Cell<u64>,
    slot: Cell<u32>,
    class: Cell<u8>,
    miss: Cell<bool>,
}

impl PickCache {
    #[inline(always)]
    fn get(&self) -> Option<Option<Pick>> {
        match self.state.get() {
            0 => None,
            1 => Some(None),
            _ => Some(Some(Pick {
                col: self.col.get(),
                miss: self.miss.get(),
                id: self.id.get(),
                slot: self.slot.get(),
                class: self.class.get(),
            })),
        }
    }

    #[inline(always)]
    fn set(&self, pick: Option<Option<Pick>>) {
        match pick {
            None => self.state.set(0),
            Some(None) => self.state.set(1),
            Some(Some(p)) => {
                self.state.set(2);
                self.col.set(p.col);
                self.miss.set(p.miss);
                self.id.set(p.id);
                self.slot.set(p.slot);
                self.class.set(p.class);
            }
        }
    }
}

#[derive(Clone, Debug)]
struct ChannelQ {
    slots: Vec<Slot>,
    /// Free slots per class, stacks (never reallocated).
    free: [Vec<u32>; 2],
    /// Queued requests per class.
    len: [usize; 2],
    /// Oldest and youngest queued slot, or `NIL`.
    oldest: u32,
    youngest: u32,
    /// Local banks with at least one queued hit, per class (kept for the
    /// blocking scheduler only).
    hit_banks: [Vec<u64>; 2],
    /// Local banks with a queued request, per class (ready scheduler).
    queued_banks: [Vec<u64>; 2],
    /// Each local bank's candidate, per class (ready scheduler).
    cands: [Vec<Cand>; 2],
    /// Scratch of the ready scheduler's pick: per rank of the channel,
    /// read or write, miss or hit (`Cand::rsel`), the earliest column
    /// cycle its rank and the channel allow, computed once per pick.
    shared: Vec<Cell<u64>>,
    /// Per bank group of the channel, read or write, miss or hit
    /// (`Cand::gsel`), the earliest column cycle the group allows (its
    /// `tCCD_L` and `tWTR_L`, and for a miss its `tRRD_L` plus `tRCD`),
    /// rewritten by every command on the group; a pick's candidate adds
    /// its `local`, this and its rank's `shared`.
    group_shared: Vec<u64>,
    last_col: u64,
    /// When the last decision that freed a slot of each class freed it
    /// (its column command).
    freed_at: [u64; 2],
    bus_free: u64,
    last_read_end: u64,
    /// The rank of the last data burst, or `NIL`.
    last_rank: u32,
    /// Draining the write buffer.
    draining: bool,
    /// The earliest `next_ref` of the channel's ranks (`u64::MAX`
    /// without refresh).
    next_ref: u64,
    /// The ready scheduler's next pick: `None` when stale, `Some(None)`
    /// when nothing is queued.
    next: PickCache,
}

/// Where a picked request's commands go.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Plan {
    outcome: RowOutcome,
    /// PRE and ACT cycles, or `NONE`.
    pre: u64,
    act: u64,
    col: u64,
    data_end: u64,
}

/// The memory controller timing model of one machine. See the module
/// documentation.
#[derive(Clone, Debug)]
pub struct Controller {
    /// The timings as the model applies them: `_L`/`_S` filled in (equal
    /// without bank groups), `tRTRS` and `tREFI` zero when off.
    timing: Timing,
    /// `tCCD_L`, `tRRD_L`, `tWTR_S` in effect.
    ccd_l: u64,
    rrd_l: u64,
    wtr_s: u64,
    policy: PagePolicy,
    scheduler: Scheduler,
    /// Queue depth per class.
    depth: [usize; 2],
    buffered: bool,
    write_high: usize,
    write_low: usize,
    decoder: BankDecoder,
    banks_per_channel: u32,
    banks_per_rank: u32,
    ranks_per_channel: u32,
    bank_groups: u32,
    /// Bank groups per channel (ranks times groups per rank).
    groups_per_channel: usize,
    /// log2 of banks per channel, per rank and per group (all powers of
    /// two: bit-mapped fields).
    bpc_shift: u32,
    bpr_shift: u32,
    bpg_shift: u32,
    banks: Vec<BankQ>,
    ranks: Vec<RankQ>,
    groups: Vec<GroupQ>,
    /// Per rank, what it allows (ready scheduler).
    rank_gates: Vec<RankGate>,
    channels: Vec<ChannelQ>,
    next_id: u64,
    // Statistics.
    rows: RowStats,
    reads: u64,
    first_arrival: Option<u64>,
    /// When the last request submitted entered its queue.
    last_entered: u64,
    last_done: u64,
    /// Cycles in which at least one bank was busy (the union of the banks'
    /// busy spans, requests taken in the order they were scheduled), and
    /// the end of the latest span counted.
    any_busy: u64,
    any_busy_until: u64,
    cores: Vec<(u64, u64, u64)>,
    bytes_per_request: u64,
    commands: Option<Vec<Command>>,
}

impl Controller {
    /// A controller for `machine`, all banks closed and idle at cycle 0.
    pub fn new(machine: &Machine, config: ControllerConfig) -> Result<Self, ControllerError> {
        if config.queue_depth == 0 {
            return Err(ControllerError::QueueDepth);
        }
        let buffered = config.write_queue_depth > 0;
        if buffered
            && (config.write_low >= config.write_high
                || config.write_high > config.write_queue_depth
                || config.scheduler != Scheduler::Ready)
        {
            return Err(ControllerError::WriteBuffer {
                depth: config.write_queue_depth,
                high: config.write_high,
                low: config.write_low,
            });
        }
        let technology = machine.zones()[0].technology;
        if machine.zones().iter().any(|z| z.technology != technology) {
            return Err(ControllerError::MixedTechnology {
                machine: machine.name().to_owned(),
            });
        }
        let mut timing = *machine
            .timing(technology)
            .expect("a checked machine has timings for its zones");
        let (ccd_l, rrd_l, wtr_s) = timing.bank_group_timings(config.bank_groups);
        timing.ccd_l = ccd_l;
        timing.rrd_l = rrd_l;
        timing.wtr_s = wtr_s;
        if !config.rank_switch {
            timing.rtrs = 0;
        }
        if !config.refresh {
            timing.refi = 0;
            timing.rfc = 0;
        }
        let org = machine.organisation();
        let decoder = BankDecoder::new(machine);
        let banks_per_channel = decoder.banks_per_channel();
        let banks_per_rank = org.bank_groups * org.banks;
        let bank = BankQ {
            open_row: CLOSED,
            q: [EMPTY; 2],
            act_ok: 0,
            pre_ok: 0,
            col_ok: 0,
            busy_until: 0,
            busy: 0,
        };
        // Slot numbers are u32 with NIL reserved.
        let total = config.queue_depth + config.write_queue_depth;
        let total32 = u32::try_from(total)
            .ok()
            .filter(|&d| d < 1 << 31)
            .ok_or(ControllerError::QueueDepth)?;
        let reads = config.queue_depth as u32;
        let words = (banks_per_channel as usize).div_ceil(64);
        let channel = ChannelQ {
            slots: vec![Slot::default(); total],
            free: [(0..reads).rev().collect(), (reads..total32).rev().collect()],
            len: [0; 2],
            oldest: NIL,
            youngest: NIL,
            hit_banks: [vec![0; words], vec![0; words]],
            queued_banks: [vec![0; words], vec![0; words]],
            cands: [Vec::new(), Vec::new()],
            shared: Vec::new(),
            group_shared: Vec::new(),
            last_col: 0,
            freed_at: [0; 2],
            bus_free: 0,
            last_read_end: 0,
            last_rank: NIL,
            draining: false,
            next_ref: u64::MAX,
            next: PickCache::default(),
        };
        let ranks_per_channel = org.ranks;
        let bpr_shift = banks_per_rank.trailing_zeros();
        let bpg_shift = org.banks.trailing_zeros();
        let mut channels = vec![channel; org.channels as usize];
        for (c, ch) in channels.iter_mut().enumerate() {
            let first = c as u32 * banks_per_channel;
            let cands: Vec<Cand> = (first..first + banks_per_channel)
                .map(|b| Cand {
                    local: 0,
                    key: 0,
                    slot: NIL,
                    gsel: (((b - first) >> bpg_shift) << 2 | 2) as u16,
                    rsel: (((b - first) >> bpr_shift) << 2 | 2) as u16,
                })
                .collect();
            ch.cands = [cands.clone(), cands];
            ch.shared = vec![Cell::new(0); 4 * org.ranks as usize];
            // No command yet: column commands at once, after an ACT tRCD.
            ch.group_shared = (0..4 * org.ranks * org.bank_groups)
                .map(|i| if i & 1 == 0 { 0 } else { u64::from(timing.rcd) })
                .collect();
        }
        let groups = (org.channels * org.ranks * org.bank_groups) as usize;
        let rank_gates = vec![
            RankGate {
                col: [0; 2],
                act_col: u64::from(timing.rcd),
            };
            (org.channels * org.ranks) as usize
        ];
        let mut ranks = vec![RankQ::default(); (org.channels * org.ranks) as usize];
        if timing.refi != 0 {
            // Staggered: rank i of R refreshes first at tREFI (i + 1) / R.
            for (i, r) in ranks.iter_mut().enumerate() {
                let local = (i as u64 % u64::from(ranks_per_channel)) + 1;
                r.next_ref = u64::from(timing.refi) * local / u64::from(ranks_per_channel);
            }
            for (ch, rs) in channels
                .iter_mut()
                .zip(ranks.chunks(ranks_per_channel as usize))
            {
                ch.next_ref = rs.iter().map(|r| r.next_ref).min().unwrap_or(u64::MAX);
            }
        }
        Ok(Self {
            timing,
            ccd_l: u64::from(ccd_l),
            rrd_l: u64::from(rrd_l),
            wtr_s: u64::from(wtr_s),
            policy: config.policy,
            scheduler: config.scheduler,
            depth: [config.queue_depth, config.write_queue_depth],
            buffered,
            write_high: config.write_high,
            write_low: config.write_low,
            banks_per_channel,
            banks_per_rank,
            ranks_per_channel,
            bank_groups: org.bank_groups,
            groups_per_channel: (org.ranks * org.bank_groups) as usize,
            bpc_shift: banks_per_channel.trailing_zeros(),
            bpr_shift,
            bpg_shift,
            banks: vec![bank; org.total_banks()],
            ranks,
            groups: vec![GroupQ::default(); groups],
            rank_gates,
            channels,
            decoder,
            next_id: 0,
            rows: RowStats::default(),
            reads: 0,
            first_arrival: None,
            last_entered: 0,
            last_done: 0,
            any_busy: 0,
            any_busy_until: 0,
            cores: Vec::new(),
            bytes_per_request: u64::from(org.bytes_per_column) * u64::from(timing.burst_length),
            commands: config.check.then(Vec::new),
        })
    }

    /// The timings in use (`_L`/`_S`, `tRTRS` and refresh as configured).
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// Bytes one request moves: one burst.
    pub fn bytes_per_request(&self) -> u64 {
        self.bytes_per_request
    }

    /// The channel `paddr` is in.
    #[inline]
    pub fn channel_of(&self, paddr: u64) -> Result<usize, ControllerError> {
        self.decoder
            .decode(paddr)
            .map(|l| (l.bank >> self.bpc_shift) as usize)
            .ok_or(ControllerError::Beyond {
                paddr,
                size: self.decoder.size(),
            })
    }

    /// Which queue a request of `kind` goes to.
    #[inline(always)]
    fn class_of(&self, kind: AccessKind) -> usize {
        if self.buffered && kind == AccessKind::Write {
            WRITES
        } else {
            READS
        }
    }

    /// Whether `channel`'s queue (and write buffer, if any) has room for
    /// another request of either kind.
    #[inline]
    pub fn has_space(&self, channel: usize) -> bool {
        let ch = &self.channels[channel];
        ch.len[READS] < self.depth[READS] && (!self.buffered || ch.len[WRITES] < self.depth[WRITES])
    }

    /// Whether `channel` has room for another request of `kind`.
    #[inline]
    pub fn has_space_for(&self, channel: usize, kind: AccessKind) -> bool {
        let class = self.class_of(kind);
        self.channels[channel].len[class] < self.depth[class]
    }

    /// When `channel` next picks a request, if it has any queued. Blocking:
    /// the later of its last column command and its oldest request's
    /// arrival. Ready: the cycle of the column command it will issue.
    #[inline]
    pub fn decision_time(&self, channel: usize) -> Option<u64> {
        match self.scheduler {
            Scheduler::Blocking => {
                let ch = &self.channels[channel];
                if ch.oldest == NIL {
                    return None;
                }
                Some(ch.last_col.max(ch.slots[ch.oldest as usize].entered))
            }
            Scheduler::Ready => self.ready_pick(channel).map(|p| p.col),
        }
    }

    /// When the last request submitted entered its channel's queue: its
    /// arrival, or later if the queue was full then (0 before any).
    pub fn last_entered(&self) -> u64 {
        self.last_entered
    }

    /// The channel that decides next and when.
    pub fn next_decision(&self) -> Option<(usize, u64)> {
        (0..self.channels.len())
            .filter_map(|c| self.decision_time(c).map(|t| (c, t)))
            .min_by_key(|&(c, t)| (t, c))
    }

    /// Queue a request. First the request's channel makes every decision
    /// due before the request arrives, and, while its queue is full, the
    /// decisions that make room (the request then enters the queue when
    /// the slot frees). Completions of those decisions go to `done`.
    /// Returns the request's id.
    #[inline]
    pub fn submit(
        &mut self,
        req: MemRequest,
        done: &mut Vec<Completion>,
    ) -> Result<u64, ControllerError> {
        self.submit_with(req, |c| done.push(c))
    }

    /// [`Controller::submit`] handing each completion to `done`: `run`
    /// drops them without storing them.
    #[inline(always)]
    pub fn submit_with(
        &mut self,
        req: MemRequest,
        mut done: impl FnMut(Completion),
    ) -> Result<u64, ControllerError> {
        let at = self
            .decoder
            .decode(req.paddr)
            .ok_or(ControllerError::Beyond {
                paddr: req.paddr,
                size: self.decoder.size(),
            })?;
        let c = (at.bank >> self.bpc_shift) as usize;
        let class = self.class_of(req.kind);
        // The request enters the queue when it arrives, or, if the queue
        // is full then, when a decision frees a slot.
        let mut entered = req.arrival;
        loop {
            // No decision comes before the channel's last column command
            // (the ready scheduler's come after it), so with room in the
            // queue and the request arriving by then, none is due first:
            // the pick need not be computed here (the next decision
            // computes it once, the new request included).
            let ch = &self.channels[c];
            let earliest = ch.last_col + u64::from(self.scheduler == Scheduler::Ready);
            if ch.len[class] < self.depth[class] && req.arrival <= earliest {
                break;
            }
            let Some(t) = self.decision_time(c) else {
                break;
            };
            if t < req.arrival {
                if let Some(x) = self.decide_at(c, t) {
                    done(x);
                }
            } else if self.channels[c].len[class] == self.depth[class] {
                if let Some(x) = self.decide_at(c, t) {
                    done(x);
                }
                if self.channels[c].len[class] < self.depth[class] {
                    entered = entered.max(self.channels[c].freed_at[class]);
                }
            } else {
                break;
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.first_arrival.get_or_insert(req.arrival);
        self.last_entered = entered;
        let local = (at.bank & (self.banks_per_channel - 1)) as usize;
        let bank = &mut self.banks[at.bank as usize];
        let ch = &mut self.channels[c];
        let s = ch.free[class].pop().expect("the queue has room");
        let list = &mut bank.q[class];
        ch.slots[s as usize] = Slot {
            id,
            arrival: req.arrival,
            entered,
            row: at.row,
            bank: at.bank,
            core: req.core,
            kind: req.kind,
            class: class as u8,
            older: ch.youngest,
            younger: NIL,
            bank_older: list.tail,
            bank_younger: NIL,
        };
        // Append to the channel's arrival order (the blocking scheduler's
        // fallback; the ready scheduler does not look at it) and to the
        // bank's queue.
        if self.scheduler == Scheduler::Blocking {
            match ch.youngest {
                NIL => ch.oldest = s,
                y => ch.slots[y as usize].younger = s,
            }
            ch.youngest = s;
        }
        let was_empty = list.head == NIL;
        let old_head = list.head;
        match list.tail {
            NIL => list.head = s,
            t => ch.slots[t as usize].bank_younger = s,
        }
        list.tail = s;
        let before = ch.len;
        ch.len[class] += 1;
        ch.queued_banks[class][local / 64] |= 1 << (local % 64);
        let mut new_candidate = was_empty;
        if bank.open_row == at.row {
            list.hits += 1;
            if list.first_hit == NIL {
                list.first_hit = s;
                new_candidate = true;
            }
            if self.scheduler == Scheduler::Blocking {
                ch.hit_banks[class][local / 64] |= 1 << (local % 64);
            }
        }
        if self.scheduler == Scheduler::Ready {
            if new_candidate {
                self.update_candidate(c, at.bank, class);
            }
            self.ready_submitted(c, s, class, before, new_candidate, old_head);
        }
        Ok(id)
    }

    /// Keep the ready scheduler's cached pick of channel `c` true after
    /// slot `s` was queued: only the new slot can beat it, unless the
    /// class served changed or the new slot displaced the pick as its
    /// bank's candidate.
    #[inline(always)]
    fn ready_submitted(
        &self,
        c: usize,
        s: u32,
        class: usize,
        before: [usize; 2],
        new_candidate: bool,
        old_head: u32,
    ) {
        let ch = &self.channels[c];
        let Some(Some(pick)) = ch.next.get() else {
            ch.next.set(None);
            return;
        };
        if self.serving(ch.draining, before) != self.serving(ch.draining, ch.len) {
            ch.next.set(None);
            return;
        }
        if !new_candidate || usize::from(pick.class) != class {
            return;
        }
        if old_head != NIL && old_head == pick.slot {
            // A new first hit replaced the pick as its bank's candidate.
            ch.next.set(None);
            return;
        }
        // The new slot is its bank's candidate now.
        let local = (ch.slots[s as usize].bank & (self.banks_per_channel - 1)) as usize;
        let entry = &ch.cands[class][local];
        let cand = Pick {
            col: self.cand_col(c, ch, entry),
            miss: entry.miss(),
            id: entry.id(),
            slot: s,
            class: class as u8,
        };
        debug_assert_eq!(cand, self.candidate(c, s, &ch.slots[s as usize]));
        if cand.key() < pick.key() {
            ch.next.set(Some(Some(cand)));
        }
    }

    /// The column cycle of a bank's candidate `cand` on channel `ch` as
    /// things stand: its bank part, its group's and rank's gates and the
    /// channel's (the scan in [`Controller::ready_pick`] for one bank).
    #[inline(always)]
    fn cand_col(&self, c: usize, ch: &ChannelQ, cand: &Cand) -> u64 {
        let t = &self.timing;
        let group = (c * self.groups_per_channel) as u32 + u32::from(cand.gsel >> 2);
        let rank = group >> (self.bpr_shift - self.bpg_shift);
        let (read, miss) = (cand.read(), cand.miss());
        let mut from = ch.bus_free;
        if ch.last_rank != rank && ch.last_rank != NIL {
            from += u64::from(t.rtrs);
        }
        let latency = if read {
            t.cl
        } else {
            from = from.max(ch.last_read_end + u64::from(READ_TO_WRITE_TURNAROUND));
            t.cwl
        };
        let rank_gate = &self.rank_gates[rank as usize];
        let mut col = cand
            .local
            .max(ch.last_col + 1)
            .max(from.saturating_sub(u64::from(latency)))
            .max(ch.group_shared[usize::from(cand.gsel)])
            .max(rank_gate.col[usize::from(read)]);
        if miss {
            col = col.max(rank_gate.act_col);
        }
        col
    }

    /// Which class the channel serves given its draining flag and queue
    /// lengths: writes while draining (until `write_low` are left, if a
    /// read waits), from `write_high` on, and whenever no read waits.
    #[inline(always)]
    fn serving(&self, draining: bool, len: [usize; 2]) -> usize {
        if !self.buffered || len[WRITES] == 0 {
            return READS;
        }
        let drain = len[READS] == 0
            || len[WRITES] >= self.write_high
            || (draining && len[WRITES] > self.write_low);
        if drain {
            WRITES
        } else {
            READS
        }
    }

    /// The pick of slot `s` (`slot`) as it stands.
    #[inline(always)]
    fn candidate(&self, c: usize, s: u32, slot: &Slot) -> Pick {
        let plan = self.plan(c, slot, 0);
        Pick {
            col: plan.col,
            miss: plan.outcome != RowOutcome::Hit,
            id: slot.id,
            slot: s,
            class: slot.class,
        }
    }

    /// Recompute bank `bank_index`'s candidate in `class` and the part of
    /// its earliest column command that depends on the bank alone (the
    /// bank part of [`Controller::plan`]).
    #[inline(always)]
    fn update_candidate(&mut self, c: usize, bank_index: u32, class: usize) {
        let t = &self.timing;
        let bank = &self.banks[bank_index as usize];
        let list = &bank.q[class];
        let s = if list.hits > 0 {
            list.first_hit
        } else {
            list.head
        };
        let local_bank = (bank_index & (self.banks_per_channel - 1)) as usize;
        if s == NIL {
            self.channels[c].cands[class][local_bank].slot = NIL;
            return;
        }
        let ch = &mut self.channels[c];
        ch.cands[class][local_bank].set_to(
            s,
            &ch.slots[s as usize],
            bank,
            u64::from(t.rcd),
            u64::from(t.rp),
        );
    }

    /// After a ready decision on bank `bank_index`: recount its queued hits
    /// in each class when its open row changed (`recount`, as
    /// [`Controller::refresh_hits`]) and recompute its candidates (as
    /// [`Controller::update_candidate`]), in one pass over the classes. A
    /// class with nothing queued at the bank keeps its stale candidate:
    /// only queued banks' candidates are read, and a bank's first request
    /// computes its candidate when it is queued.
    #[inline(always)]
    fn settle_bank(&mut self, c: usize, bank_index: u32, recount: bool) {
        let t = &self.timing;
        let (rcd, rp) = (u64::from(t.rcd), u64::from(t.rp));
        let local_bank = (bank_index & (self.banks_per_channel - 1)) as usize;
        let classes = if self.buffered { 2 } else { 1 };
        let ch = &mut self.channels[c];
        let bank = &mut self.banks[bank_index as usize];
        let open = bank.open_row;
        for class in 0..classes {
            let list = &mut bank.q[class];
            if list.head == NIL {
                continue;
            }
            if recount {
                list.recount_hits(&ch.slots, open);
            }
            let s = if list.hits > 0 {
                list.first_hit
            } else {
                list.head
            };
            ch.cands[class][local_bank].set_to(s, &ch.slots[s as usize], bank, rcd, rp);
        }
    }

    /// The ready scheduler's next pick on channel `c`, from the cache or
    /// by looking at every bank's candidate.
    #[inline(always)]
    fn ready_pick(&self, c: usize) -> Option<Pick> {
        if let Some(p) = self.channels[c].next.get() {
            return p;
        }
        self.compute_pick(c)
    }

    /// [`Controller::ready_pick`] when the cached pick is stale: look at
    /// every queued bank's candidate, and cache the pick. (Out of line:
    /// the cached case, every other call, costs no call.)
    #[inline(never)]
    fn compute_pick(&self, c: usize) -> Option<Pick> {
        let ch = &self.channels[c];
        let class = self.serving(ch.draining, ch.len);
        let first_bank = c * self.banks_per_channel as usize;
        let cands = &ch.cands[class];
        let queued = &ch.queued_banks[class];
        // At most one queued bank, and which? (No popcount: the default
        // x86-64 target has no POPCNT instruction, and its software
        // fallback cost more than this whole test.) `one` is the only
        // queued bank, or past the channel's banks when none is.
        let (one, many) = if let [w] = queued[..] {
            // Up to 64 banks a channel (every preset): one word.
            (w.trailing_zeros() as usize, w & w.wrapping_sub(1) != 0)
        } else {
            let mut seen = 0u64;
            let mut many = false;
            let mut one = 64 * queued.len();
            for (i, &w) in queued.iter().enumerate() {
                many |= (w & w.wrapping_sub(1)) != 0 || (w != 0 && seen != 0);
                if w != 0 {
                    one = i * 64 + w.trailing_zeros() as usize;
                }
                seen |= w;
            }
            (one, many)
        };
        // The pick is the least (column cycle, miss, id); ids are unique
        // and below 2^63, so one 128-bit key orders them.
        let mut best_key = u128::MAX;
        let mut best = NIL as usize;
        if !many {
            // One candidate (a sequential stream's usual case): its gates
            // directly.
            if let Some(cand) = cands.get(one) {
                let col = self.cand_col(c, ch, cand);
                best_key = (u128::from(col) << 64) | u128::from(cand.key);
                best = one;
            }
        } else {
            self.shared_gates(c, class);
            let shared = &ch.shared[..];
            let group_shared = &ch.group_shared[..];
            for (w, &word) in queued.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    let local = w * 64 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    let cand = &cands[local];
                    debug_assert!(
                        usize::from(cand.gsel) < group_shared.len()
                            && usize::from(cand.rsel) < shared.len()
                    );
                    // SAFETY: a candidate's `gsel` and `rsel` index its
                    // group's and rank's entries, which both tables have
                    // (4 per group and per rank of the channel, built in
                    // `Controller::new`, never resized).
                    let (group_gate, rank_gate) = unsafe {
                        (
                            *group_shared.get_unchecked(usize::from(cand.gsel)),
                            shared.get_unchecked(usize::from(cand.rsel)).get(),
                        )
                    };
                    let col = cand.local.max(group_gate).max(rank_gate);
                    let key = (u128::from(col) << 64) | u128::from(cand.key);
                    if key < best_key {
                        best_key = key;
                        best = local;
                    }
                }
            }
        }
        let best = (best != NIL as usize).then(|| {
            let cand = &cands[best];
            let pick = Pick {
                col: (best_key >> 64) as u64,
                miss: cand.miss(),
                id: cand.id(),
                slot: cand.slot,
                class: class as u8,
            };
            debug_assert_eq!(
                pick,
                self.candidate(c, cand.slot, &ch.slots[cand.slot as usize]),
                "the cached candidate of bank {} is stale",
                first_bank + best
            );
            pick
        });
        ch.next.set(Some(best));
        best
    }

    /// Fill channel `c`'s `shared` gates: what the channel and each rank
    /// allow a candidate, per rank, read or write, miss or hit
    /// (`Cand::rsel`), for the kinds `class` holds.
    #[inline(always)]
    fn shared_gates(&self, c: usize, class: usize) {
        let ch = &self.channels[c];
        let t = &self.timing;
        // The channel's gates, by same rank as the last burst or not, and
        // read or write (as `plan` computes them).
        let after = ch.last_col + 1;
        let bus = |switch: bool, read: bool| {
            let mut from = ch.bus_free + if switch { u64::from(t.rtrs) } else { 0 };
            let latency = if read {
                t.cl
            } else {
                from = from.max(ch.last_read_end + u64::from(READ_TO_WRITE_TURNAROUND));
                t.cwl
            };
            after.max(from.saturating_sub(u64::from(latency)))
        };
        // With a write buffer each class holds one kind.
        let (first_kind, kinds) = if !self.buffered {
            (0, 2)
        } else if class == READS {
            (1, 1)
        } else {
            (0, 1)
        };
        let first_rank = c * self.ranks_per_channel as usize;
        let shared = &ch.shared[..];
        for r in 0..self.ranks_per_channel as usize {
            let rank_gate = &self.rank_gates[first_rank + r];
            let switch = ch.last_rank != (first_rank + r) as u32 && ch.last_rank != NIL;
            for read in first_kind..first_kind + kinds {
                let hit = bus(switch, read == 1).max(rank_gate.col[read]);
                let i = r << 2 | read << 1;
                shared[i].set(hit);
                shared[i | 1].set(hit.max(rank_gate.act_col));
            }
        }
    }

    /// Make the next decision on the channel that decides first; `None`
    /// when every queue is empty.
    pub fn decide_next(&mut self) -> Option<Completion> {
        loop {
            let (c, t) = self.next_decision()?;
            if let Some(done) = self.decide_at(c, t) {
                return Some(done);
            }
        }
    }

    /// The data-dependent access pair of seed 002's analysing program (and
    /// of `probe`): on a fresh controller with one request in flight,
    /// `first` and `second` are read alternately, each issued when the one
    /// before it completes, for `rounds` rounds. Returns the latency in
    /// cycles of each access after the first round (which opens the rows),
    /// in order (`first`'s at even indices), and the cycle time in ps.
    pub fn alternating_latencies(
        machine: &Machine,
        first: u64,
        second: u64,
        rounds: u32,
    ) -> Result<(Vec<u64>, u32), ControllerError> {
        let mut mc = Controller::new(
            machine,
            ControllerConfig {
                queue_depth: 1,
                ..ControllerConfig::default()
            },
        )?;
        let mut done = Vec::new();
        let mut out = Vec::with_capacity(2 * rounds as usize);
        let mut t = 0;
        for i in 0..2 * rounds {
            let paddr = if i % 2 == 0 { first } else { second };
            mc.submit(
                MemRequest {
                    paddr,
                    kind: AccessKind::Read,
                    core: 0,
                    arrival: t,
                },
                &mut done,
            )?;
            mc.drain(&mut done);
            let c = done.pop().expect("one request in flight, one completion");
            if i >= 2 {
                out.push(c.done - c.arrival);
            }
            t = c.done;
        }
        Ok((out, mc.timing().tck_ps))
    }

    /// Serve every queued request, completions to `done`.
    pub fn drain(&mut self, done: &mut Vec<Completion>) {
        while let Some(c) = self.decide_next() {
            done.push(c);
        }
    }

    /// Submit every request (in arrival order), serve them all, and report.
    /// Completions are counted in the report and otherwise dropped.
    pub fn run(
        &mut self,
        requests: impl IntoIterator<Item = MemRequest>,
    ) -> Result<ControllerReport, ControllerError> {
        for req in requests {
            self.submit_with(req, |_| ())?;
        }
        while self.decide_next().is_some() {}
        Ok(self.report())
    }

    /// Apply every refresh of channel `c` due by `now`; whether any was.
    #[inline(always)]
    fn refresh_due(&mut self, c: usize, now: u64) -> bool {
        if self.channels[c].next_ref > now {
            return false;
        }
        let first = c * self.ranks_per_channel as usize;
        for r in first..first + self.ranks_per_channel as usize {
            while self.ranks[r].next_ref <= now {
                self.refresh(c, r);
                self.skip_idle_refreshes(c, r, now);
            }
        }
        let ch = &mut self.channels[c];
        ch.next_ref = self.ranks[first..first + self.ranks_per_channel as usize]
            .iter()
            .map(|r| r.next_ref)
            .min()
            .unwrap_or(u64::MAX);
        ch.next.set(None);
        true
    }

    /// Over an idle gap (a request at cycle 10^12, say), refreshes come
    /// due every tREFI with nothing between them; applying them one by one
    /// would take minutes. Once a refresh has left every bank of rank `r`
    /// closed and able to activate by the next one's due time, each later
    /// refresh before `now` does the same thing at its own due time
    /// (REF at due, banks closed until due + tRFC), so all but the last
    /// of them are applied at once: the state after them is the same.
    /// Not with a command log (`check`): the checker sees every command.
    fn skip_idle_refreshes(&mut self, c: usize, r: usize, now: u64) {
        if self.commands.is_some() {
            return;
        }
        let next = self.ranks[r].next_ref;
        let refi = u64::from(self.timing.refi);
        if next > now || refi == 0 {
            return;
        }
        let skip = (now - next) / refi;
        if skip == 0 {
            return;
        }
        let first = r * self.banks_per_rank as usize;
        let banks = first..first + self.banks_per_rank as usize;
        if !self.banks[banks.clone()]
            .iter()
            .all(|b| b.open_row == CLOSED && b.act_ok <= next)
        {
            return;
        }
        let last_due = next + (skip - 1) * refi;
        let rfc = u64::from(self.timing.rfc);
        for b in banks {
            self.banks[b].act_ok = last_due + rfc;
            if self.scheduler == Scheduler::Ready {
                self.settle_bank(c, b as u32, false);
            }
        }
        self.ranks[r].next_ref = next + skip * refi;
    }

    /// One all-bank refresh of rank `r` (global index) on channel `c`:
    /// precharge the open banks as soon as they allow, REF `tRP` after the
    /// last, and keep every bank closed `tRFC` after it.
    #[cold]
    fn refresh(&mut self, c: usize, r: usize) {
        let t = self.timing;
        let (rp, rfc) = (u64::from(t.rp), u64::from(t.rfc));
        let due = self.ranks[r].next_ref;
        let first = r * self.banks_per_rank as usize;
        let mut ref_at = due;
        for b in first..first + self.banks_per_rank as usize {
            let bank = &self.banks[b];
            if bank.open_row != CLOSED {
                let pre = due.max(bank.pre_ok);
                if let Some(log) = self.commands.as_mut() {
                    log.push(Command {
                        at: pre,
                        kind: CommandKind::Precharge,
                        bank: b as u32,
                        row: bank.open_row,
                    });
                }
                ref_at = ref_at.max(pre + rp);
            } else {
                ref_at = ref_at.max(bank.act_ok);
            }
        }
        if let Some(log) = self.commands.as_mut() {
            log.push(Command {
                at: ref_at,
                kind: CommandKind::Refresh,
                bank: first as u32,
                row: 0,
            });
        }
        for b in first..first + self.banks_per_rank as usize {
            let was_open = self.banks[b].open_row != CLOSED;
            let bank = &mut self.banks[b];
            bank.open_row = CLOSED;
            bank.act_ok = ref_at + rfc;
            // The bank closed: as after a decision, its hits are
            // recounted (if a row was open) and its candidates recomputed.
            if self.scheduler == Scheduler::Ready {
                self.settle_bank(c, b as u32, was_open);
            } else if was_open {
                self.refresh_hits(c, b as u32);
            }
        }
        self.ranks[r].next_ref += u64::from(t.refi);
    }

    /// [`Controller::decide`] with `now` the channel's decision time;
    /// `None` when a refresh came due first (the decision moves).
    #[inline(always)]
    fn decide_at(&mut self, c: usize, now: u64) -> Option<Completion> {
        if self.refresh_due(c, now) {
            return None;
        }
        let (s, col) = match self.scheduler {
            Scheduler::Blocking => (self.blocking_pick(c, now), None),
            Scheduler::Ready => {
                let pick = self.ready_pick(c).expect("decide on a non-empty queue");
                let ch = &mut self.channels[c];
                ch.draining = usize::from(pick.class) == WRITES;
                (pick.slot, Some(pick.col))
            }
        };
        let slot = self.channels[c].slots[s as usize];
        let kind = slot.kind;
        self.unlink(c, s, &slot);
        let plan = match col {
            // The pick computed the column cycle (as `plan` does, from
            // the cached gates); only the row part remains.
            Some(col) => self.plan_ready(&slot, col),
            None => self.plan(c, &slot, now),
        };
        debug_assert!(col.is_none() || plan == self.plan(c, &slot, now));
        let start = self.apply(c, &slot, &plan);
        let (outcome, col, data_end) = (plan.outcome, plan.col, plan.data_end);
        self.channels[c].freed_at[usize::from(slot.class)] = col;
        // The open row changed: the bank's queued hits are recounted.
        let recount = outcome != RowOutcome::Hit || self.policy == PagePolicy::Closed;
        if self.scheduler == Scheduler::Ready {
            self.settle_bank(c, slot.bank, recount);
        } else if recount {
            self.refresh_hits(c, slot.bank);
        } else if self.banks[slot.bank as usize].q[usize::from(slot.class)].hits == 0 {
            let local = (slot.bank & (self.banks_per_channel - 1)) as usize;
            self.channels[c].hit_banks[usize::from(slot.class)][local / 64] &= !(1 << (local % 64));
        }
        self.channels[c].next.set(None);

        // Statistics.
        self.rows.record(outcome);
        if kind == AccessKind::Read {
            self.reads += 1;
        }
        let bank = &mut self.banks[slot.bank as usize];
        let from = start.max(bank.busy_until);
        if data_end > from {
            bank.busy += data_end - from;
        }
        bank.busy_until = bank.busy_until.max(data_end);
        let from = start.max(self.any_busy_until);
        if data_end > from {
            self.any_busy += data_end - from;
        }
        self.any_busy_until = self.any_busy_until.max(data_end);
        self.last_done = self.last_done.max(data_end);
        let core = slot.core as usize;
        if self.cores.len() <= core {
            self.cores.resize(core + 1, (0, 0, 0));
        }
        let latency = data_end - slot.arrival;
        let entry = &mut self.cores[core];
        entry.0 += 1;
        entry.1 += latency;
        entry.2 = entry.2.max(latency);
        Some(Completion {
            id: slot.id,
            core: slot.core,
            kind,
            outcome,
            arrival: slot.arrival,
            entered: slot.entered,
            done: data_end,
        })
    }

    /// The blocking scheduler's pick: the oldest queued hit (each bank's
    /// candidate is its first queued hit), else the oldest request.
    #[inline(always)]
    fn blocking_pick(&self, c: usize, now: u64) -> u32 {
        let first_bank = c * self.banks_per_channel as usize;
        let ch = &self.channels[c];
        let mut pick = NIL;
        let mut pick_id = u64::MAX;
        for (w, &word) in ch.hit_banks[READS].iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let local = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let s = self.banks[first_bank + local].q[READS].first_hit;
                let slot = &ch.slots[s as usize];
                if slot.entered <= now && slot.id < pick_id {
                    pick = s;
                    pick_id = slot.id;
                }
            }
        }
        if pick == NIL {
            ch.oldest
        } else {
            pick
        }
    }

    /// Take slot `s` (a copy of it in `slot`) off its bank's queue and
    /// the channel's arrival order, keeping the bank's hit count and first
    /// hit, and free it.
    #[inline(always)]
    fn unlink(&mut self, c: usize, s: u32, slot: &Slot) {
        let class = usize::from(slot.class);
        let ch = &mut self.channels[c];
        let bank = &mut self.banks[slot.bank as usize];
        let open_row = bank.open_row;
        let list = &mut bank.q[class];
        match slot.bank_older {
            NIL => list.head = slot.bank_younger,
            o => ch.slots[o as usize].bank_younger = slot.bank_younger,
        }
        match slot.bank_younger {
            NIL => list.tail = slot.bank_older,
            y => ch.slots[y as usize].bank_older = slot.bank_older,
        }
        if list.head == NIL {
            let local = (slot.bank & (self.banks_per_channel - 1)) as usize;
            ch.queued_banks[class][local / 64] &= !(1 << (local % 64));
        }
        if slot.row == open_row {
            list.hits -= 1;
            if list.first_hit == s {
                // The next hit is younger than this one.
                let mut next = slot.bank_younger;
                if list.hits == 0 {
                    next = NIL;
                }
                while next != NIL && ch.slots[next as usize].row != open_row {
                    next = ch.slots[next as usize].bank_younger;
                }
                list.first_hit = next;
            }
        }
        if self.scheduler == Scheduler::Blocking {
            match slot.older {
                NIL => ch.oldest = slot.younger,
                o => ch.slots[o as usize].younger = slot.younger,
            }
            match slot.younger {
                NIL => ch.youngest = slot.older,
                y => ch.slots[y as usize].older = slot.older,
            }
        }
        ch.free[class].push(s);
        ch.len[class] -= 1;
    }

    /// Recount a bank's queued hits after its open row may have changed.
    #[inline(always)]
    fn refresh_hits(&mut self, c: usize, bank_index: u32) {
        let local = (bank_index & (self.banks_per_channel - 1)) as usize;
        let ch = &mut self.channels[c];
        let bank = &mut self.banks[bank_index as usize];
        let open = bank.open_row;
        // Buffered writes only with a write buffer; the bitmap of banks
        // with hits only for the blocking scheduler (which has none).
        let classes = if self.buffered { 2 } else { 1 };
        let blocking = self.scheduler == Scheduler::Blocking;
        for (class, list) in bank.q.iter_mut().enumerate().take(classes) {
            list.recount_hits(&ch.slots, open);
            if !blocking {
            } else if list.hits > 0 {
                ch.hit_banks[class][local / 64] |= 1 << (local % 64);
            } else {
                ch.hit_banks[class][local / 64] &= !(1 << (local % 64));
            }
        }
    }

    /// Where the commands of `slot`, picked no earlier than `now`, would
    /// go: as early as every constraint allows. Changes nothing.
    #[inline(always)]
    fn plan(&self, c: usize, slot: &Slot, now: u64) -> Plan {
        let t = &self.timing;
        let (rcd, rp) = (u64::from(t.rcd), u64::from(t.rp));
        let burst = u64::from(t.burst_cycles());
        let rank_index = (slot.bank >> self.bpr_shift) as usize;
        let group_index = (slot.bank >> self.bpg_shift) as usize;
        let bank = &self.banks[slot.bank as usize];
        let rank = &self.ranks[rank_index];
        let group = &self.groups[group_index];
        let ch = &self.channels[c];
        let (outcome, pre, act_from) = bank.row_steps(slot, rp);
        let mut act = NONE;
        let mut col_ok = bank.col_ok;
        if outcome != RowOutcome::Hit {
            let mut a = act_from.max(rank.act_ok).max(group.act_ok);
            if t.faw != 0 && rank.faw_n == 4 {
                // The oldest of the last four ACTs.
                a = a.max(rank.faw[rank.faw_i] + u64::from(t.faw));
            }
            act = a;
            col_ok = col_ok.max(a + rcd);
        }
        let latency = data_latency(t, slot.kind);
        // The data may start once the bus is free (after another rank's
        // data, tRTRS later; after read data, write data also waits for
        // the turnaround).
        let mut bus_from = ch.bus_free;
        if ch.last_rank != rank_index as u32 && ch.last_rank != NIL {
            bus_from += u64::from(t.rtrs);
        }
        if slot.kind == AccessKind::Write {
            bus_from = bus_from.max(ch.last_read_end + u64::from(READ_TO_WRITE_TURNAROUND));
        }
        let mut col = now
            .max(slot.entered)
            .max(col_ok)
            .max(rank.col_ok)
            .max(group.col_ok)
            .max(ch.last_col + 1)
            .max(bus_from.saturating_sub(latency));
        if slot.kind == AccessKind::Read {
            col = col.max(rank.read_ok).max(group.read_ok);
        }
        Plan {
            outcome,
            pre,
            act,
            col,
            data_end: col + latency + burst,
        }
    }

    /// [`Controller::plan`] for the ready scheduler's pick `slot`, whose
    /// column cycle `col` the pick computed: the row part only, with the
    /// rank's ACT gate (`tRRD`, `tFAW`) from its [`RankGate`].
    #[inline(always)]
    fn plan_ready(&self, slot: &Slot, col: u64) -> Plan {
        let t = &self.timing;
        let rcd = u64::from(t.rcd);
        let bank = &self.banks[slot.bank as usize];
        let (outcome, pre, mut act) = bank.row_steps(slot, u64::from(t.rp));
        if outcome != RowOutcome::Hit {
            let rank_act = self.rank_gates[(slot.bank >> self.bpr_shift) as usize].act_col - rcd;
            let group_act = self.groups[(slot.bank >> self.bpg_shift) as usize].act_ok;
            act = act.max(rank_act).max(group_act);
        }
        let latency = data_latency(t, slot.kind);
        Plan {
            outcome,
            pre,
            act,
            col,
            data_end: col + latency + u64::from(t.burst_cycles()),
        }
    }

    /// Issue `plan`'s commands for `slot`: update the bank, its group,
    /// rank and channel. Returns the first command's cycle.
    #[inline(always)]
    fn apply(&mut self, c: usize, slot: &Slot, plan: &Plan) -> u64 {
        let t = &self.timing;
        let (rcd, rp, ras) = (u64::from(t.rcd), u64::from(t.rp), u64::from(t.ras));
        let rank_index = (slot.bank >> self.bpr_shift) as usize;
        let group_index = (slot.bank >> self.bpg_shift) as usize;
        let bank = &mut self.banks[slot.bank as usize];
        let rank = &mut self.ranks[rank_index];
        let group = &mut self.groups[group_index];
        let ch = &mut self.channels[c];
        let mut log = |at: u64, kind: CommandKind| {
            if let Some(commands) = self.commands.as_mut() {
                commands.push(Command {
                    at,
                    kind,
                    bank: slot.bank,
                    row: slot.row,
                });
            }
        };
        let mut start = u64::MAX;
        if plan.pre != NONE {
            log(plan.pre, CommandKind::Precharge);
            start = plan.pre;
        }
        if plan.act != NONE {
            let act = plan.act;
            log(act, CommandKind::Activate);
            start = start.min(act);
            bank.open_row = slot.row;
            bank.col_ok = bank.col_ok.max(act + rcd);
            bank.pre_ok = bank.pre_ok.max(act + ras);
            rank.act_ok = act + u64::from(t.rrd);
            group.act_ok = act + self.rrd_l;
            rank.faw[rank.faw_i] = act;
            rank.faw_i = (rank.faw_i + 1) % 4;
            rank.faw_n = (rank.faw_n + 1).min(4);
        }
        let col = plan.col;
        log(
            col,
            match slot.kind {
                AccessKind::Read => CommandKind::Read,
                AccessKind::Write => CommandKind::Write,
            },
        );
        start = start.min(col);
        let burst = u64::from(t.burst_cycles());
        let data_end = plan.data_end;
        bank.col_ok = col + burst;
        rank.col_ok = col + u64::from(t.ccd);
        group.col_ok = col + self.ccd_l;
        ch.last_col = col;
        ch.bus_free = data_end;
        ch.last_rank = rank_index as u32;
        match slot.kind {
            AccessKind::Read => {
                ch.last_read_end = data_end;
                bank.pre_ok = bank.pre_ok.max(col + u64::from(t.rtp));
            }
            AccessKind::Write => {
                rank.read_ok = rank.read_ok.max(data_end + self.wtr_s);
                group.read_ok = group.read_ok.max(data_end + u64::from(t.wtr));
                bank.pre_ok = bank.pre_ok.max(data_end + u64::from(t.wr));
            }
        }
        if self.policy == PagePolicy::Closed {
            let pre = bank.pre_ok;
            log(pre, CommandKind::Precharge);
            bank.open_row = CLOSED;
            bank.act_ok = pre + rp;
        }
        if self.scheduler == Scheduler::Ready {
            // What the rank and the group now allow (the rank and group
            // part of `plan`'s column cycle).
            self.rank_gates[rank_index].update(rank, t, plan.act != NONE);
            let i = (group_index - c * self.groups_per_channel) << 2;
            group.shared_gates(rcd, &mut ch.group_shared[i..i + 4]);
        }
        start
    }

    /// All-bank refreshes due from cycle 0 to `until`, every rank.
    fn refreshes_until(&self, until: u64) -> u64 {
        let refi = u64::from(self.timing.refi);
        if refi == 0 {
            return 0;
        }
        let r = u64::from(self.ranks_per_channel);
        let per_channel: u64 = (1..=r)
            .map(|i| {
                let first = refi * i / r;
                if until >= first {
                    (until - first) / refi + 1
                } else {
                    0
                }
            })
            .sum();
        per_channel * self.channels.len() as u64
    }

    /// What the run measured so far (served requests only).
    pub fn report(&self) -> ControllerReport {
        let requests = self.rows.total();
        let total = self
            .first_arrival
            .map_or(0, |first| self.last_done.saturating_sub(first));
        let tck_ns = f64::from(self.timing.tck_ps) / 1000.0;
        let rate = |n: u64| {
            if requests == 0 {
                0.0
            } else {
                n as f64 / requests as f64
            }
        };
        let busy: u64 = self.banks.iter().map(|b| b.busy).sum();
        let total_ns = total as f64 * tck_ns;
        ControllerReport {
            requests,
            reads: self.reads,
            rows: self.rows,
            hit_rate: rate(self.rows.hits),
            miss_rate: rate(self.rows.misses),
            conflict_rate: rate(self.rows.conflicts),
            blp: if total == 0 {
                0.0
            } else {
                busy as f64 / total as f64
            },
            busy_blp: if self.any_busy == 0 {
                0.0
            } else {
                busy as f64 / self.any_busy as f64
            },
            total_cycles: total,
            total_ns,
            bandwidth_gbs: if total == 0 {
                0.0
            } else {
                (requests * self.bytes_per_request) as f64 / total_ns
            },
            refreshes: self.refreshes_until(self.last_done),
            cores: self
                .cores
                .iter()
                .map(|&(n, sum, max)| {
                    let mean = if n == 0 { 0.0 } else { sum as f64 / n as f64 };
                    CoreLatency {
                        requests: n,
                        mean_cycles: mean,
                        max_cycles: max,
                        mean_ns: mean * tck_ns,
                    }
                })
                .collect(),
        }
    }

    /// The commands issued so far, in issue order per bank, if recording.
    pub fn commands(&self) -> Option<&[Command]> {
        self.commands.as_deref()
    }

    /// Assertion mode: check every recorded command against every timing
    /// constraint with the independent checker. `Ok(n)` is the number of
    /// commands checked; with recording off, `Ok(0)`.
    pub fn verify(&self) -> Result<usize, Violation> {
        let Some(commands) = &self.commands else {
            return Ok(0);
        };
        let layout = Layout {
            banks: self.banks.len() as u32,
            banks_per_rank: self.banks_per_rank,
            banks_per_channel: self.banks_per_channel,
            banks_per_group: self.banks_per_rank / self.bank_groups,
        };
        checker::verify(commands, &self.timing, layout)?;
        Ok(commands.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(paddr: u64, arrival: u64) -> MemRequest {
        MemRequest {
            paddr,
            kind: AccessKind::Read,
            core: 0,
            arrival,
        }
    }

    #[test]
    fn one_bank_timeline_matches_the_timings() {
        // ddr4-2400: row bits from 18; one bank, rows 0 and 1.
        let m = Machine::preset("ddr4-2400").unwrap();
        let config = ControllerConfig {
            check: true,
            ..Default::default()
        };
        let mut mc = Controller::new(&m, config).unwrap();
        let mut done = Vec::new();
        // Miss: ACT 0, RD 17, data 34..38.
        mc.submit(read(0, 0), &mut done).unwrap();
        // Hit, later: RD at 1000, done 1021.
        mc.submit(read(64, 1000), &mut done).unwrap();
        // Conflict, later: PRE 2000, ACT 2017, RD 2034, done 2055.
        mc.submit(read(1 << 18, 2000), &mut done).unwrap();
        mc.drain(&mut done);
        let got: Vec<_> = done.iter().map(|c| (c.outcome, c.done)).collect();
        assert_eq!(
            got,
            [
                (RowOutcome::Miss, 38),
                (RowOutcome::Hit, 1021),
                (RowOutcome::Conflict, 2055)
            ]
        );
        assert_eq!(mc.verify(), Ok(6));
        let r = mc.report();
        assert_eq!((r.rows.hits, r.rows.misses, r.rows.conflicts), (1, 1, 1));
        assert_eq!(r.total_cycles, 2055);
        // Busy: 0..38, 1000..1021, 2000..2055.
        assert!((r.blp * 2055.0 - (38.0 + 21.0 + 55.0)).abs() < 1e-9);
        // One bank: busy whenever any bank is, whatever the gaps.
        assert!((r.busy_blp - 1.0).abs() < 1e-12, "{}", r.busy_blp);
    }

    #[test]
    fn an_idle_gap_is_skipped_with_the_same_results() {
        // The preset with refresh (tREFI, tRFC).
        let m = Machine::preset("ddr4-2400-dramsim3").unwrap();
        let run = |check: bool, gap: u64, scheduler: Scheduler| {
            let defaults = ControllerConfig::default();
            let config = ControllerConfig {
                check,
                scheduler,
                // The blocking scheduler serves without a write buffer.
                write_queue_depth: if scheduler == Scheduler::Ready {
                    defaults.write_queue_depth
                } else {
                    0
                },
                ..defaults
            };
            let mut mc = Controller::new(&m, config).unwrap();
            let mut done = Vec::new();
            for (i, (a, t)) in [
                (0, 0),
                (1 << 18, 10),
                (64, gap),
                (1 << 19, gap + 3),
                (128, 2 * gap),
            ]
            .into_iter()
            .enumerate()
            {
                let mut r = read(a, t);
                if i % 2 == 1 {
                    r.kind = AccessKind::Write;
                }
                mc.submit(r, &mut done).unwrap();
            }
            mc.drain(&mut done);
            let got: Vec<_> = done.iter().map(|c| (c.id, c.outcome, c.done)).collect();
            let r = mc.report();
            (
                got,
                r.total_cycles,
                r.refreshes,
                r.rows.hits,
                r.rows.conflicts,
            )
        };
        for scheduler in [Scheduler::Blocking, Scheduler::Ready] {
            // The command log turns skipping off: it is the reference.
            let gap = 50_000_017;
            assert_eq!(
                run(true, gap, scheduler),
                run(false, gap, scheduler),
                "{scheduler:?}"
            );
        }
        // A gap of 10^15 cycles: 10^11 refreshes, applied at once.
        let (got, total, refreshes, ..) = run(false, 1_000_000_000_000_000, Scheduler::Ready);
        assert_eq!(got.len(), 5);
        assert!(
            total >= 2_000_000_000_000_000 && refreshes > 100_000_000_000,
            "{total} {refreshes}"
        );
    }

    #[test]
    fn fr_fcfs_serves_a_younger_hit_before_an_older_conflict() {
        let m = Machine::preset("ddr4-2400").unwrap();
        let mut mc = Controller::new(&m, ControllerConfig::default()).unwrap();
        let mut done = Vec::new();
        mc.submit(read(0, 0), &mut done).unwrap(); // opens row 0
        mc.submit(read(1 << 18, 0), &mut done).unwrap(); // row 1: conflict
        mc.submit(read(128, 0), &mut done).unwrap(); // row 0: hit
        mc.drain(&mut done);
        let order: Vec<_> = done.iter().map(|c| (c.id, c.outcome)).collect();
        assert_eq!(
            order,
            [
                (0, RowOutcome::Miss),
                (2, RowOutcome::Hit),
                (1, RowOutcome::Conflict)
            ]
        );
        // With a queue of one, first come first served.
        let config = ControllerConfig {
            queue_depth: 1,
            ..Default::default()
        };
        let mut mc = Controller::new(&m, config).unwrap();
        let mut done = Vec::new();
        for (a, t) in [(0, 0), (1 << 18, 0), (128, 0)] {
            mc.submit(read(a, t), &mut done).unwrap();
        }
        mc.drain(&mut done);
        let ids: Vec<_> = done.iter().map(|c| c.id).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(mc.report().rows.conflicts, 2);
    }

    #[test]
    fn banks_work_in_parallel_but_share_the_bus() {
        // Eight requests to eight banks: one ACT each, tRRD/tFAW apart,
        // bursts back to back on the bus.
        let m = Machine::preset("ddr4-2400").unwrap();
        let config = ControllerConfig {
            check: true,
            ..Default::default()
        };
        let mut mc = Controller::new(&m, config).unwrap();
        let r = mc.run((0..8u64).map(|b| read(b << 14, 0))).unwrap();
        assert_eq!(r.rows.misses, 8);
        assert!(r.blp > 1.5, "{}", r.blp);
        assert!(r.busy_blp >= r.blp, "{} < {}", r.busy_blp, r.blp);
        // Far less than eight serial misses (8 x 38).
        assert!(r.total_cycles < 8 * 38, "{}", r.total_cycles);
        assert!(mc.verify().unwrap() >= 16);
    }

    #[test]
    fn closed_page_never_hits_and_pcm_conflicts_cost_its_slow_precharge() {
        let m = Machine::preset("ddr4-2400").unwrap();
        let config = ControllerConfig {
            policy: PagePolicy::Closed,
            check: true,
            ..Default::default()
        };
        let mut mc = Controller::new(&m, config).unwrap();
        let r = mc.run((0..256u64).map(|l| read(l * 64, 0))).unwrap();
        assert_eq!((r.rows.hits, r.rows.misses), (0, 256));
        mc.verify().unwrap();

        let pcm = Machine::preset("pcm-lee2009").unwrap();
        let mut mc = Controller::new(&pcm, ControllerConfig::default()).unwrap();
        let mut done = Vec::new();
        mc.submit(read(0, 0), &mut done).unwrap();
        mc.submit(read(1 << 17, 1000), &mut done).unwrap();
        mc.drain(&mut done);
        // tRP 60 + tRCD 22 + tCL 5 + tBURST 4.
        assert_eq!(done[1].done - 1000, 91);
    }

    #[test]
    fn bad_requests_and_configs_are_refused() {
        let m = Machine::preset("ddr4-2400").unwrap();
        let config = ControllerConfig {
            queue_depth: 0,
            ..Default::default()
        };
        assert_eq!(
            Controller::new(&m, config).unwrap_err(),
            ControllerError::QueueDepth
        );
        let mut mc = Controller::new(&m, ControllerConfig::default()).unwrap();
        let e = mc
            .submit(read(m.memory_bytes(), 0), &mut Vec::new())
            .unwrap_err();
        assert!(e.to_string().contains("beyond"), "{e}");
        assert_eq!(mc.report().requests, 0);
    }
}
