//! The memory controller timing model: per-bank request queues, FR-FCFS
//! scheduling, command timing per bank, rank and channel, and data-bus
//! contention; event-driven, one scheduling decision per request.
//!
//! # What it models
//!
//! Each channel has a bounded queue of `queue_depth` requests, kept as one
//! queue per bank. The scheduler is first-ready first-come-first-served
//! (Rixner et al., ISCA 2000): when the channel can take its next column
//! command it picks, among the requests queued by then, the oldest that
//! hits its bank's open row, or failing that the oldest request. The
//! chosen request's commands are then placed as early as every timing
//! constraint allows:
//!
//! - **bank**: ACT→RD/WR `tRCD`, ACT→PRE `tRAS`, PRE→ACT `tRP`, RD→PRE
//!   `tRTP`, end of write data→PRE `tWR`;
//! - **rank**: ACT→ACT `tRRD`, at most four ACTs in `tFAW`, RD/WR→RD/WR
//!   `tCCD`, end of write data→RD `tWTR`;
//! - **channel**: one data burst (`burst_length / 2` cycles) on the bus at
//!   a time, data `tCL` after a read and `tCWL` after a write, two cycles
//!   of bus turnaround from read data to write data (JEDEC's
//!   `RL + tCCD + 2 - WL` read-to-write spacing), one column command per
//!   cycle.
//!
//! Column commands of a channel issue in the order the scheduler picks
//! requests; a bank's PRE and ACT for a picked request may issue before
//! the column command of an earlier pick to another bank (as soon as the
//! request is queued and the bank and rank allow), which is how banks work
//! in parallel. Under the open-page policy a row stays open until a
//! request for another row needs the bank; under the closed-page policy
//! every column command is followed by a precharge as soon as `tRAS`,
//! `tRTP` or `tWR` allow (auto-precharge).
//!
//! PCM is the same state machine with Lee et al.'s timings: the array read
//! is `tRCD`, and the slow array write happens when a row closes, as the
//! long `tRP`.
//!
//! Not modelled: refresh, the rank-to-rank switching gap, bank-group
//! (`_L`) variants of `tCCD`/`tRRD`/`tWTR` (one value per rank), the
//! command bus for ACT and PRE (they may share a cycle with other
//! commands), write queues drained in batches (writes are scheduled like
//! reads).
//!
//! # Time
//!
//! Everything is in cycles of the memory clock `tCK`. The model is event
//! driven: it does not tick; each decision jumps to the time the channel
//! can next issue a column command, so its cost is per request, not per
//! cycle.
//!
//! # Assertion mode
//!
//! With [`ControllerConfig::check`] every command issued is recorded, and
//! [`Controller::verify`] replays them through an independent checker
//! ([`crate::checker`]) that knows nothing of how they were scheduled and
//! reports the first timing constraint any pair of commands breaks.

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

/// How the controller runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerConfig {
    /// Open- or closed-page policy.
    pub policy: PagePolicy,
    /// Requests each channel's queue holds (1 is first-come first-served).
    pub queue_depth: usize,
    /// Record every command for [`Controller::verify`].
    pub check: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            policy: PagePolicy::Open,
            queue_depth: 32,
            check: false,
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
    #[error("queue_depth must be at least 1 and below 2^32 - 1")]
    QueueDepth,
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
    /// What it found in its bank's row buffer.
    pub outcome: RowOutcome,
    /// When it arrived.
    pub arrival: u64,
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
    /// First arrival to last data, cycles.
    pub total_cycles: u64,
    /// The same in nanoseconds.
    pub total_ns: f64,
    /// Bytes moved per second of modelled time, in GB/s (10^9 B/s).
    pub bandwidth_gbs: f64,
    /// Per core, indexed by core.
    pub cores: Vec<CoreLatency>,
}

// Layout of the queues. Each channel owns a fixed array of `queue_depth`
// slots, allocated once; a queued request lives in one slot until it is
// picked. Slots are threaded on two intrusive doubly linked lists: the
// channel's arrival-order list (oldest first, so the FCFS fallback is its
// head) and its bank's queue (also oldest first). Both unlink in O(1), so
// neither submitting nor picking allocates or searches a queue. Each bank
// also keeps its first queued row hit, and each channel a bitmask of the
// banks that have one, so FR-FCFS looks at one candidate per such bank
// instead of walking queues.

#[derive(Clone, Debug)]
struct BankQ {
    open_row: u32,
    /// Oldest and youngest slot of this bank's queue, or `NIL`.
    head: u32,
    tail: u32,
    /// The oldest queued slot whose row is `open_row`, or `NIL`.
    /// Invariant: `NIL` exactly when `hits == 0`.
    first_hit: u32,
    /// How many queued slots hit `open_row`.
    hits: u32,
    act_ok: u64,
    pre_ok: u64,
    col_ok: u64,
    /// Union of busy intervals, accumulated: end of the last one.
    busy_until: u64,
    busy: u64,
}

#[derive(Clone, Debug, Default)]
struct RankQ {
    act_ok: u64,
    /// The last four ACTs, ring; `faw_n` counts ACTs up to four.
    faw: [u64; 4],
    faw_i: usize,
    faw_n: usize,
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
            older: NIL,
            younger: NIL,
            bank_older: NIL,
            bank_younger: NIL,
        }
    }
}

#[derive(Clone, Debug)]
struct ChannelQ {
    slots: Vec<Slot>,
    /// Free slots, a stack (capacity `queue_depth`, never reallocated).
    free: Vec<u32>,
    /// Oldest and youngest queued slot, or `NIL`.
    oldest: u32,
    youngest: u32,
    len: usize,
    /// Local banks with at least one queued hit.
    hit_banks: Vec<u64>,
    last_col: u64,
    /// When the last decision's slot freed (its column command).
    freed_at: u64,
    bus_free: u64,
    last_read_end: u64,
}

/// The memory controller timing model of one machine. See the module
/// documentation.
#[derive(Clone, Debug)]
pub struct Controller {
    timing: Timing,
    policy: PagePolicy,
    depth: usize,
    decoder: BankDecoder,
    banks_per_channel: u32,
    banks_per_rank: u32,
    /// log2 of the two above (both are powers of two: bit-mapped fields).
    bpc_shift: u32,
    bpr_shift: u32,
    banks: Vec<BankQ>,
    ranks: Vec<RankQ>,
    channels: Vec<ChannelQ>,
    next_id: u64,
    // Statistics.
    rows: RowStats,
    reads: u64,
    first_arrival: Option<u64>,
    last_done: u64,
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
        let technology = machine.zones()[0].technology;
        if machine.zones().iter().any(|z| z.technology != technology) {
            return Err(ControllerError::MixedTechnology {
                machine: machine.name().to_owned(),
            });
        }
        let timing = *machine
            .timing(technology)
            .expect("a checked machine has timings for its zones");
        let org = machine.organisation();
        let decoder = BankDecoder::new(machine);
        let banks_per_channel = decoder.banks_per_channel();
        let banks_per_rank = org.bank_groups * org.banks;
        let bank = BankQ {
            open_row: CLOSED,
            head: NIL,
            tail: NIL,
            first_hit: NIL,
            hits: 0,
            act_ok: 0,
            pre_ok: 0,
            col_ok: 0,
            busy_until: 0,
            busy: 0,
        };
        // Slot numbers are u32 with NIL reserved.
        let depth = u32::try_from(config.queue_depth)
            .ok()
            .filter(|&d| d < NIL)
            .ok_or(ControllerError::QueueDepth)?;
        let channel = ChannelQ {
            slots: vec![Slot::default(); config.queue_depth],
            free: (0..depth).rev().collect(),
            oldest: NIL,
            youngest: NIL,
            len: 0,
            hit_banks: vec![0; (banks_per_channel as usize).div_ceil(64)],
            last_col: 0,
            freed_at: 0,
            bus_free: 0,
            last_read_end: 0,
        };
        Ok(Self {
            timing,
            policy: config.policy,
            depth: config.queue_depth,
            banks_per_channel,
            banks_per_rank,
            bpc_shift: banks_per_channel.trailing_zeros(),
            bpr_shift: banks_per_rank.trailing_zeros(),
            banks: vec![bank; org.total_banks()],
            ranks: vec![RankQ::default(); (org.channels * org.ranks) as usize],
            channels: vec![channel; org.channels as usize],
            decoder,
            next_id: 0,
            rows: RowStats::default(),
            reads: 0,
            first_arrival: None,
            last_done: 0,
            cores: Vec::new(),
            bytes_per_request: u64::from(org.bytes_per_column) * u64::from(timing.burst_length),
            commands: config.check.then(Vec::new),
        })
    }

    /// The timings in use.
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

    /// Whether `channel`'s queue has room for another request.
    #[inline]
    pub fn has_space(&self, channel: usize) -> bool {
        self.channels[channel].len < self.depth
    }

    /// When `channel` next picks a request, if it has any queued: the
    /// later of its last column command and its oldest request's arrival.
    #[inline]
    pub fn decision_time(&self, channel: usize) -> Option<u64> {
        let ch = &self.channels[channel];
        if ch.oldest == NIL {
            return None;
        }
        Some(ch.last_col.max(ch.slots[ch.oldest as usize].entered))
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
    fn submit_with(
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
        // The request enters the queue when it arrives, or, if the queue
        // is full then, when a decision frees a slot.
        let mut entered = req.arrival;
        while let Some(t) = self.decision_time(c) {
            if t < req.arrival {
                done(self.decide_at(c, t));
            } else if self.channels[c].len == self.depth {
                done(self.decide_at(c, t));
                entered = entered.max(self.channels[c].freed_at);
            } else {
                break;
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.first_arrival.get_or_insert(req.arrival);
        let bank = &mut self.banks[at.bank as usize];
        let ch = &mut self.channels[c];
        let s = ch.free.pop().expect("the queue has room");
        ch.slots[s as usize] = Slot {
            id,
            arrival: req.arrival,
            entered,
            row: at.row,
            bank: at.bank,
            core: req.core,
            kind: req.kind,
            older: ch.youngest,
            younger: NIL,
            bank_older: bank.tail,
            bank_younger: NIL,
        };
        // Append to the channel's arrival order and to the bank's queue.
        match ch.youngest {
            NIL => ch.oldest = s,
            y => ch.slots[y as usize].younger = s,
        }
        ch.youngest = s;
        match bank.tail {
            NIL => bank.head = s,
            t => ch.slots[t as usize].bank_younger = s,
        }
        bank.tail = s;
        ch.len += 1;
        if bank.open_row == at.row {
            bank.hits += 1;
            if bank.first_hit == NIL {
                bank.first_hit = s;
            }
            let local = (at.bank & (self.banks_per_channel - 1)) as usize;
            ch.hit_banks[local / 64] |= 1 << (local % 64);
        }
        Ok(id)
    }

    /// Make the next decision on the channel that decides first; `None`
    /// when every queue is empty.
    pub fn decide_next(&mut self) -> Option<Completion> {
        let (c, _) = self.next_decision()?;
        Some(self.decide(c))
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

    /// Pick a request on channel `c` (which must have one) and issue its
    /// commands.
    fn decide(&mut self, c: usize) -> Completion {
        let now = self.decision_time(c).expect("decide on a non-empty queue");
        self.decide_at(c, now)
    }

    /// [`Controller::decide`] with `now` the channel's decision time.
    #[inline(always)]
    fn decide_at(&mut self, c: usize, now: u64) -> Completion {
        let first_bank = c * self.banks_per_channel as usize;
        // FR-FCFS: the oldest queued hit (each bank's candidate is its
        // first queued hit), else the oldest request.
        let ch = &self.channels[c];
        let mut pick = NIL;
        let mut pick_id = u64::MAX;
        for (w, &word) in ch.hit_banks.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let local = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let s = self.banks[first_bank + local].first_hit;
                let slot = &ch.slots[s as usize];
                if slot.entered <= now && slot.id < pick_id {
                    pick = s;
                    pick_id = slot.id;
                }
            }
        }
        let s = if pick == NIL { ch.oldest } else { pick };
        let slot = ch.slots[s as usize];
        let kind = slot.kind;
        self.unlink(c, s, &slot);
        let (outcome, col, data_end, start) = self.issue(c, &slot, kind, now);
        self.channels[c].freed_at = col;
        if outcome != RowOutcome::Hit || self.policy == PagePolicy::Closed {
            // The open row changed: recount the bank's queued hits.
            self.refresh_hits(c, slot.bank);
        } else if self.banks[slot.bank as usize].hits == 0 {
            let local = (slot.bank & (self.banks_per_channel - 1)) as usize;
            self.channels[c].hit_banks[local / 64] &= !(1 << (local % 64));
        }

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
        Completion {
            id: slot.id,
            core: slot.core,
            outcome,
            arrival: slot.arrival,
            done: data_end,
        }
    }

    /// Take slot `s` (a copy of it in `slot`) off its bank's queue and
    /// the channel's arrival order, keeping the bank's hit count and first
    /// hit, and free it.
    #[inline(always)]
    fn unlink(&mut self, c: usize, s: u32, slot: &Slot) {
        let ch = &mut self.channels[c];
        let bank = &mut self.banks[slot.bank as usize];
        match slot.bank_older {
            NIL => bank.head = slot.bank_younger,
            o => ch.slots[o as usize].bank_younger = slot.bank_younger,
        }
        match slot.bank_younger {
            NIL => bank.tail = slot.bank_older,
            y => ch.slots[y as usize].bank_older = slot.bank_older,
        }
        if slot.row == bank.open_row {
            bank.hits -= 1;
            if bank.first_hit == s {
                // The next hit is younger than this one.
                let mut next = slot.bank_younger;
                if bank.hits == 0 {
                    next = NIL;
                }
                while next != NIL && ch.slots[next as usize].row != bank.open_row {
                    next = ch.slots[next as usize].bank_younger;
                }
                bank.first_hit = next;
            }
        }
        match slot.older {
            NIL => ch.oldest = slot.younger,
            o => ch.slots[o as usize].younger = slot.younger,
        }
        match slot.younger {
            NIL => ch.youngest = slot.older,
            y => ch.slots[y as usize].older = slot.older,
        }
        ch.free.push(s);
        ch.len -= 1;
    }

    /// Recount a bank's queued hits after its open row may have changed.
    fn refresh_hits(&mut self, c: usize, bank_index: u32) {
        let ch = &mut self.channels[c];
        let bank = &mut self.banks[bank_index as usize];
        let open = bank.open_row;
        bank.hits = 0;
        bank.first_hit = NIL;
        let mut s = bank.head;
        while s != NIL {
            let slot = &ch.slots[s as usize];
            if slot.row == open {
                if bank.first_hit == NIL {
                    bank.first_hit = s;
                }
                bank.hits += 1;
            }
            s = slot.bank_younger;
        }
        let local = (bank_index & (self.banks_per_channel - 1)) as usize;
        if bank.hits > 0 {
            ch.hit_banks[local / 64] |= 1 << (local % 64);
        } else {
            ch.hit_banks[local / 64] &= !(1 << (local % 64));
        }
    }

    /// Place the commands of `slot`, picked at `now`, as early as every
    /// constraint allows. Returns (outcome, column command time, end of
    /// data, first command time).
    #[inline(always)]
    fn issue(
        &mut self,
        c: usize,
        slot: &Slot,
        kind: AccessKind,
        now: u64,
    ) -> (RowOutcome, u64, u64, u64) {
        let t = self.timing;
        let (rcd, rp, ras) = (u64::from(t.rcd), u64::from(t.rp), u64::from(t.ras));
        let burst = u64::from(t.burst_cycles());
        let rank_index = (slot.bank >> self.bpr_shift) as usize;
        let bank = &mut self.banks[slot.bank as usize];
        let rank = &mut self.ranks[rank_index];
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
        let outcome = match bank.open_row {
            CLOSED => RowOutcome::Miss,
            r if r == slot.row => RowOutcome::Hit,
            _ => RowOutcome::Conflict,
        };
        let mut start = u64::MAX;
        if outcome != RowOutcome::Hit {
            let mut act_from = slot.entered.max(bank.act_ok);
            if outcome == RowOutcome::Conflict {
                let pre = slot.entered.max(bank.pre_ok);
                log(pre, CommandKind::Precharge);
                start = pre;
                act_from = act_from.max(pre + rp);
            }
            let mut act = act_from.max(rank.act_ok);
            if t.faw != 0 && rank.faw_n == 4 {
                // The oldest of the last four ACTs.
                act = act.max(rank.faw[rank.faw_i] + u64::from(t.faw));
            }
            log(act, CommandKind::Activate);
            start = start.min(act);
            bank.open_row = slot.row;
            bank.col_ok = bank.col_ok.max(act + rcd);
            bank.pre_ok = bank.pre_ok.max(act + ras);
            rank.act_ok = act + u64::from(t.rrd);
            rank.faw[rank.faw_i] = act;
            rank.faw_i = (rank.faw_i + 1) % 4;
            rank.faw_n = (rank.faw_n + 1).min(4);
        }
        let latency = u64::from(match kind {
            AccessKind::Read => t.cl,
            AccessKind::Write => t.cwl,
        });
        // The data may start once the bus is free (after read data, write
        // data also waits for the turnaround).
        let mut bus_from = ch.bus_free;
        if kind == AccessKind::Write {
            bus_from = bus_from.max(ch.last_read_end + u64::from(READ_TO_WRITE_TURNAROUND));
        }
        let mut col = now
            .max(slot.entered)
            .max(bank.col_ok)
            .max(rank.col_ok)
            .max(ch.last_col + 1)
            .max(bus_from.saturating_sub(latency));
        if kind == AccessKind::Read {
            col = col.max(rank.read_ok);
        }
        log(
            col,
            match kind {
                AccessKind::Read => CommandKind::Read,
                AccessKind::Write => CommandKind::Write,
            },
        );
        start = start.min(col);
        let data_end = col + latency + burst;
        rank.col_ok = col + u64::from(t.ccd);
        ch.last_col = col;
        ch.bus_free = data_end;
        match kind {
            AccessKind::Read => {
                ch.last_read_end = data_end;
                bank.pre_ok = bank.pre_ok.max(col + u64::from(t.rtp));
            }
            AccessKind::Write => {
                rank.read_ok = data_end + u64::from(t.wtr);
                bank.pre_ok = bank.pre_ok.max(data_end + u64::from(t.wr));
            }
        }
        if self.policy == PagePolicy::Closed {
            let pre = bank.pre_ok;
            log(pre, CommandKind::Precharge);
            bank.open_row = CLOSED;
            bank.act_ok = pre + rp;
        }
        (outcome, col, data_end, start)
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
            total_cycles: total,
            total_ns,
            bandwidth_gbs: if total == 0 {
                0.0
            } else {
                (requests * self.bytes_per_request) as f64 / total_ns
            },
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
