//! Banks and their row buffers: which row each bank has open, and when a
//! request to it can have its data.
//!
//! This is the per-bank part of the timing model only: one request at a
//! time per bank, served as soon as the bank's own timing allows. It has
//! no request queues, no scheduler and no data-bus contention between the
//! banks of a channel; those build on it.
//!
//! # Commands and constraints
//!
//! A request to row `r` of a bank needs, by what the bank holds:
//!
//! - **hit** (`r` open): a column command (read or write);
//! - **miss** (bank closed): ACT, then the column command `tRCD` later;
//! - **conflict** (another row open): PRE, ACT `tRP` later, then the
//!   column command `tRCD` after that.
//!
//! Data arrives `tCL` after the column command and occupies the bus for
//! `tBURST` = burst length / 2 cycles. A PRE may not come before `tRAS`
//! after its row's ACT, nor before `tWR` after the end of a write's data.
//! Two column commands to one bank are at least `tBURST` apart.
//!
//! Simplifications, to revisit with the full model: writes use `tCL` as
//! their column latency (no separate `tCWL`); a read lets its row close
//! once its burst has left the column (`tRTP` is not modelled); refresh is
//! not modelled. For PCM, `tRP` is charged on every precharge, dirty or
//! not, as Ramulator's PCM model does with Lee et al.'s timings.

use serde::{Deserialize, Serialize};

use crate::timing::Timing;

/// When a bank closes its row.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PagePolicy {
    /// Leave the row open after an access, betting on a hit next.
    Open,
    /// Precharge as soon as the access allows (auto-precharge): every
    /// access is a miss, never a conflict.
    Closed,
}

/// A read or a write.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessKind {
    /// Read.
    Read,
    /// Write.
    Write,
}

/// What a request found in its bank's row buffer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowOutcome {
    /// Its row was open.
    Hit,
    /// The bank was closed (precharged).
    Miss,
    /// Another row was open and had to be closed first.
    Conflict,
}

impl Timing {
    /// Cycles from a request reaching an idle, ready bank to the end of its
    /// data, by what it finds there: hit `tCL + tBURST`, miss
    /// `tRCD + tCL + tBURST`, conflict `tRP + tRCD + tCL + tBURST`.
    pub fn unloaded_latency(&self, outcome: RowOutcome) -> u32 {
        let column = self.cl + self.burst_cycles();
        match outcome {
            RowOutcome::Hit => column,
            RowOutcome::Miss => self.rcd + column,
            RowOutcome::Conflict => self.rp + self.rcd + column,
        }
    }
}

/// How a request was served: cycles are absolute, on the bank's clock.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    /// What it found.
    pub outcome: RowOutcome,
    /// When its column command was issued.
    pub column_at: u64,
    /// When its last data beat left (reads) or was written (writes).
    pub done_at: u64,
}

/// One bank: its open row and the earliest cycle each command may issue.
///
/// Invariant: `open_row.is_some()` exactly when the last command that
/// changed the row buffer was an ACT, and then `pre_ok_at >= act_at + tRAS`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankState {
    open_row: Option<u32>,
    /// Earliest ACT (tRP after the last PRE).
    act_ok_at: u64,
    /// Earliest PRE (tRAS after ACT, tWR after write data).
    pre_ok_at: u64,
    /// Earliest column command (tRCD after ACT, tBURST after the last one).
    col_ok_at: u64,
}

impl BankState {
    /// A closed, idle bank.
    pub fn new() -> Self {
        Self::default()
    }

    /// The row open in the row buffer, if any.
    pub fn open_row(&self) -> Option<u32> {
        self.open_row
    }

    /// What a request to `row` would find now.
    pub fn outcome(&self, row: u32) -> RowOutcome {
        match self.open_row {
            Some(open) if open == row => RowOutcome::Hit,
            Some(_) => RowOutcome::Conflict,
            None => RowOutcome::Miss,
        }
    }

    /// Serve a request for `row` arriving at cycle `now`: issue the
    /// commands it needs as early as the bank's timing allows, and update
    /// the bank.
    pub fn access(
        &mut self,
        now: u64,
        row: u32,
        kind: AccessKind,
        t: &Timing,
        policy: PagePolicy,
    ) -> Served {
        let (rp, rcd, ras) = (u64::from(t.rp), u64::from(t.rcd), u64::from(t.ras));
        let burst = u64::from(t.burst_cycles());
        let outcome = self.outcome(row);
        let activate = |bank: &mut Self, at: u64| {
            bank.open_row = Some(row);
            bank.pre_ok_at = at + ras;
            bank.col_ok_at = bank.col_ok_at.max(at + rcd);
        };
        match outcome {
            RowOutcome::Hit => {}
            RowOutcome::Miss => activate(self, now.max(self.act_ok_at)),
            RowOutcome::Conflict => {
                let pre = now.max(self.pre_ok_at);
                activate(self, (pre + rp).max(self.act_ok_at));
            }
        }
        let column_at = now.max(self.col_ok_at);
        let done_at = column_at + u64::from(t.cl) + burst;
        self.col_ok_at = column_at + burst;
        self.pre_ok_at = self.pre_ok_at.max(match kind {
            AccessKind::Read => column_at + burst,
            AccessKind::Write => done_at + u64::from(t.wr),
        });
        if policy == PagePolicy::Closed {
            self.open_row = None;
            self.act_ok_at = self.pre_ok_at + rp;
        }
        Served {
            outcome,
            column_at,
            done_at,
        }
    }
}

/// Row-buffer counters.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowStats {
    /// Requests that found their row open.
    pub hits: u64,
    /// Requests that found their bank closed.
    pub misses: u64,
    /// Requests that found another row open.
    pub conflicts: u64,
}

impl RowStats {
    /// Count one outcome.
    pub fn record(&mut self, outcome: RowOutcome) {
        match outcome {
            RowOutcome::Hit => self.hits += 1,
            RowOutcome::Miss => self.misses += 1,
            RowOutcome::Conflict => self.conflicts += 1,
        }
    }

    /// All requests counted.
    pub fn total(&self) -> u64 {
        self.hits + self.misses + self.conflicts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::fixtures::{DDR4, PCM};

    #[test]
    fn unloaded_latencies_follow_the_timings() {
        assert_eq!(DDR4.unloaded_latency(RowOutcome::Hit), 21);
        assert_eq!(DDR4.unloaded_latency(RowOutcome::Miss), 38);
        assert_eq!(DDR4.unloaded_latency(RowOutcome::Conflict), 55);
        // PCM: a conflict pays the 150 ns array write-back.
        assert_eq!(PCM.unloaded_latency(RowOutcome::Conflict), 60 + 22 + 5 + 4);
        assert!((PCM.ns(PCM.unloaded_latency(RowOutcome::Conflict)) - 227.5).abs() < 1e-9);
    }

    #[test]
    fn open_page_hits_misses_and_conflicts() {
        let mut b = BankState::new();
        let read = AccessKind::Read;
        // Closed bank: ACT at 0, RD at 17, data done at 38.
        let s = b.access(0, 5, read, &DDR4, PagePolicy::Open);
        assert_eq!(
            (s.outcome, s.column_at, s.done_at),
            (RowOutcome::Miss, 17, 38)
        );
        assert_eq!(b.open_row(), Some(5));
        // Same row, much later: a hit at the unloaded latency.
        let s = b.access(1000, 5, read, &DDR4, PagePolicy::Open);
        assert_eq!((s.outcome, s.done_at - 1000), (RowOutcome::Hit, 21));
        // Back-to-back hits are tBURST apart.
        let s = b.access(1000, 5, read, &DDR4, PagePolicy::Open);
        assert_eq!(s.column_at, 1004);
        // Another row, much later: a conflict at the unloaded latency.
        let s = b.access(2000, 6, read, &DDR4, PagePolicy::Open);
        assert_eq!((s.outcome, s.done_at - 2000), (RowOutcome::Conflict, 55));
        assert_eq!(b.open_row(), Some(6));
    }

    #[test]
    fn a_conflict_waits_for_tras_and_twr() {
        let mut b = BankState::new();
        // ACT at 0: the row may not close before tRAS = 39.
        b.access(0, 1, AccessKind::Read, &DDR4, PagePolicy::Open);
        let s = b.access(1, 2, AccessKind::Read, &DDR4, PagePolicy::Open);
        // PRE 39, ACT 56, RD 73, done 94.
        assert_eq!(
            (s.outcome, s.column_at, s.done_at),
            (RowOutcome::Conflict, 73, 94)
        );

        // A write's data ends at 38 + 0; the row may close tWR = 18 later.
        let mut b = BankState::new();
        let w = b.access(0, 1, AccessKind::Write, &DDR4, PagePolicy::Open);
        assert_eq!(w.done_at, 38);
        let s = b.access(40, 2, AccessKind::Read, &DDR4, PagePolicy::Open);
        // PRE at 38 + 18 = 56 (after tRAS at 39), ACT 73, RD 90.
        assert_eq!(s.column_at, 56 + 17 + 17);
    }

    #[test]
    fn closed_page_never_conflicts() {
        let mut b = BankState::new();
        let mut stats = RowStats::default();
        for (now, row) in [(0, 1), (0, 1), (500, 2), (500, 1)] {
            let s = b.access(now, row, AccessKind::Read, &DDR4, PagePolicy::Closed);
            stats.record(s.outcome);
            assert_eq!(b.open_row(), None);
        }
        assert_eq!(
            stats,
            RowStats {
                hits: 0,
                misses: 4,
                conflicts: 0
            }
        );
        // The second access to the same row still waits for tRAS + tRP.
        let mut b = BankState::new();
        b.access(0, 1, AccessKind::Read, &DDR4, PagePolicy::Closed);
        let s = b.access(0, 1, AccessKind::Read, &DDR4, PagePolicy::Closed);
        assert_eq!(s.column_at, 39 + 17 + 17);
    }
}
