//! The assertion mode's checker: given every command a controller issued,
//! verify every timing constraint between commands to the same bank, rank
//! and channel.
//!
//! It is written apart from the scheduler on purpose: it sorts the
//! commands by time and walks them with its own state, so a scheduler bug
//! cannot hide behind shared code. The rules, by scope:
//!
//! - bank: ACT only to a closed bank, PRE only to an open one, RD/WR only
//!   to the open row; ACT→RD/WR ≥ `tRCD`, ACT→PRE ≥ `tRAS`, PRE→ACT ≥
//!   `tRP`, RD→PRE ≥ `tRTP`, WR→PRE ≥ `tCWL + tBURST + tWR`;
//! - bank group: ACT→ACT ≥ `tRRD_L`, RD/WR→RD/WR ≥ `tCCD_L`, WR→RD ≥
//!   `tCWL + tBURST + tWTR` (`tWTR` is `tWTR_L`);
//! - rank: ACT→ACT ≥ `tRRD`, five ACTs span ≥ `tFAW` (when not 0),
//!   RD/WR→RD/WR ≥ `tCCD`, WR→RD ≥ `tCWL + tBURST + tWTR_S`; REF only
//!   when every bank of the rank is closed, ≥ `tRP` after their last PRE,
//!   and no ACT in the rank until `tRFC` after it;
//! - channel: one column command per cycle, data bursts never overlap,
//!   bursts of different ranks are `tRTRS` apart, and write data starts at
//!   least the turnaround after read data ends.
//!
//! A `_L`/`_S` timing of 0 in the [`Timing`] means the one-value timing
//! applies to both.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::controller::READ_TO_WRITE_TURNAROUND;
use crate::timing::Timing;

/// A DRAM command.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CommandKind {
    /// Activate: open a row.
    Activate,
    /// Precharge: close the open row.
    Precharge,
    /// Column read.
    Read,
    /// Column write.
    Write,
    /// All-bank refresh of the rank of `bank`.
    Refresh,
}

/// One command as issued.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// Cycle.
    pub at: u64,
    /// Which command.
    pub kind: CommandKind,
    /// Dense bank index.
    pub bank: u32,
    /// The row it concerns (for PRE, the row of the request that caused
    /// it; not checked).
    pub row: u32,
}

/// How dense bank indices group into ranks and channels.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Banks in the machine.
    pub banks: u32,
    /// Banks per rank.
    pub banks_per_rank: u32,
    /// Banks per channel.
    pub banks_per_channel: u32,
    /// Banks per bank group.
    pub banks_per_group: u32,
}

/// A broken constraint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Violation {
    /// The command that broke it.
    pub command: Command,
    /// The rule, e.g. `"tRCD"`.
    pub rule: &'static str,
    /// The earliest cycle the rule allowed.
    pub allowed_from: u64,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.command;
        write!(
            f,
            "{:?} to bank {} (row {}) at cycle {} breaks {}: allowed from cycle {}",
            c.kind, c.bank, c.row, c.at, self.rule, self.allowed_from
        )
    }
}

#[derive(Clone, Default)]
struct BankCheck {
    open: Option<u32>,
    act: Option<u64>,
    pre: Option<u64>,
    last_read: Option<u64>,
    last_write: Option<u64>,
    /// End of the last refresh of its rank.
    refreshed_until: Option<u64>,
}

#[derive(Clone, Default)]
struct RankCheck {
    acts: Vec<u64>,
    last_col: Option<u64>,
    last_write: Option<u64>,
}

#[derive(Clone, Default)]
struct GroupCheck {
    last_act: Option<u64>,
    last_col: Option<u64>,
    last_write: Option<u64>,
}

#[derive(Clone, Default)]
struct ChannelCheck {
    last_col: Option<u64>,
    data_end: u64,
    /// Rank of the last burst.
    data_rank: Option<u32>,
    read_end: Option<u64>,
}

/// Check `commands` (in any order) against `t`. The first violation in
/// time order is the error.
pub fn verify(commands: &[Command], t: &Timing, layout: Layout) -> Result<(), Violation> {
    let mut sorted = commands.to_vec();
    sorted.sort_by_key(|c| c.at);
    let mut banks = vec![BankCheck::default(); layout.banks as usize];
    let ranks_n = layout.banks.div_ceil(layout.banks_per_rank);
    let channels_n = layout.banks.div_ceil(layout.banks_per_channel);
    let mut ranks = vec![RankCheck::default(); ranks_n as usize];
    let mut channels = vec![ChannelCheck::default(); channels_n as usize];
    let mut groups =
        vec![GroupCheck::default(); layout.banks.div_ceil(layout.banks_per_group) as usize];
    let burst = u64::from(t.burst_cycles());
    let (ccd_l, rrd_l, wtr_s) = t.bank_group_timings(true);
    for c in sorted {
        let fail = |rule: &'static str, allowed_from: u64| {
            Err(Violation {
                command: c,
                rule,
                allowed_from,
            })
        };
        let need = |rule: &'static str, from: Option<u64>, gap: u32| match from {
            Some(f) if c.at < f + u64::from(gap) => fail(rule, f + u64::from(gap)),
            _ => Ok(()),
        };
        let rank_index = c.bank / layout.banks_per_rank;
        if c.kind == CommandKind::Refresh {
            let first = (rank_index * layout.banks_per_rank) as usize;
            for b in &mut banks[first..first + layout.banks_per_rank as usize] {
                if b.open.is_some() {
                    return fail("REF to a rank with an open bank", c.at);
                }
                need("tRP", b.pre, t.rp)?;
                need("tRFC", b.refreshed_until, 0)?;
                b.refreshed_until = Some(c.at + u64::from(t.rfc));
            }
            continue;
        }
        let b = &mut banks[c.bank as usize];
        let r = &mut ranks[rank_index as usize];
        let g = &mut groups[(c.bank / layout.banks_per_group) as usize];
        let ch = &mut channels[(c.bank / layout.banks_per_channel) as usize];
        match c.kind {
            CommandKind::Refresh => unreachable!("handled above"),
            CommandKind::Activate => {
                if b.open.is_some() {
                    return fail("ACT to an open bank", c.at);
                }
                need("tRP", b.pre, t.rp)?;
                need("tRFC", b.refreshed_until, 0)?;
                need("tRRD", r.acts.last().copied(), t.rrd)?;
                need("tRRD_L", g.last_act, rrd_l)?;
                g.last_act = Some(c.at);
                if t.faw != 0 && r.acts.len() >= 4 {
                    need("tFAW", Some(r.acts[r.acts.len() - 4]), t.faw)?;
                }
                r.acts.push(c.at);
                if r.acts.len() > 4 {
                    r.acts.remove(0);
                }
                b.open = Some(c.row);
                b.act = Some(c.at);
            }
            CommandKind::Precharge => {
                if b.open.is_none() {
                    return fail("PRE to a closed bank", c.at);
                }
                need("tRAS", b.act, t.ras)?;
                need("tRTP", b.last_read, t.rtp)?;
                need("tWR", b.last_write, t.cwl + t.burst_cycles() + t.wr)?;
                b.open = None;
                b.pre = Some(c.at);
            }
            CommandKind::Read | CommandKind::Write => {
                if b.open != Some(c.row) {
                    return fail("column command to a row that is not open", c.at);
                }
                need("tRCD", b.act, t.rcd)?;
                need("tCCD", r.last_col, t.ccd)?;
                need("tCCD_L", g.last_col, ccd_l)?;
                need("one column command per cycle", ch.last_col, 1)?;
                let read = c.kind == CommandKind::Read;
                if read {
                    need("tWTR", g.last_write, t.cwl + t.burst_cycles() + t.wtr)?;
                    need("tWTR_S", r.last_write, t.cwl + t.burst_cycles() + wtr_s)?;
                }
                let data = c.at + u64::from(if read { t.cl } else { t.cwl });
                if data < ch.data_end {
                    return fail("data bus busy", c.at + (ch.data_end - data));
                }
                let switch = ch.data_rank.is_some_and(|r| r != rank_index);
                if switch && data < ch.data_end + u64::from(t.rtrs) {
                    return fail("tRTRS", c.at + (ch.data_end + u64::from(t.rtrs) - data));
                }
                if !read {
                    if let Some(end) = ch.read_end {
                        let from = end + u64::from(READ_TO_WRITE_TURNAROUND);
                        if data < from {
                            return fail("read-to-write turnaround", c.at + (from - data));
                        }
                    }
                }
                ch.data_end = data + burst;
                ch.data_rank = Some(rank_index);
                ch.last_col = Some(c.at);
                r.last_col = Some(c.at);
                g.last_col = Some(c.at);
                if read {
                    ch.read_end = Some(data + burst);
                    b.last_read = Some(c.at);
                } else {
                    r.last_write = Some(c.at);
                    g.last_write = Some(c.at);
                    b.last_write = Some(c.at);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::fixtures::DDR4;

    const L: Layout = Layout {
        banks: 32,
        banks_per_rank: 16,
        banks_per_channel: 32,
        banks_per_group: 4,
    };

    fn cmd(at: u64, kind: CommandKind, bank: u32, row: u32) -> Command {
        Command {
            at,
            kind,
            bank,
            row,
        }
    }

    #[test]
    fn a_legal_sequence_passes() {
        use CommandKind::*;
        let ok = [
            cmd(0, Activate, 0, 1),
            cmd(4, Activate, 1, 2),
            cmd(17, Read, 0, 1),
            cmd(21, Read, 1, 2),
            cmd(39, Precharge, 0, 1),
            cmd(56, Activate, 0, 3),
        ];
        assert_eq!(verify(&ok, &DDR4, L), Ok(()));
    }

    #[test]
    fn each_broken_rule_is_named() {
        use CommandKind::*;
        let rule = |cmds: &[Command]| verify(cmds, &DDR4, L).unwrap_err().rule;
        assert_eq!(rule(&[cmd(0, Activate, 0, 1), cmd(16, Read, 0, 1)]), "tRCD");
        assert_eq!(
            rule(&[cmd(0, Activate, 0, 1), cmd(38, Precharge, 0, 1)]),
            "tRAS"
        );
        assert_eq!(
            rule(&[
                cmd(0, Activate, 0, 1),
                cmd(39, Precharge, 0, 1),
                cmd(55, Activate, 0, 2)
            ]),
            "tRP"
        );
        assert_eq!(
            rule(&[cmd(0, Activate, 0, 1), cmd(3, Activate, 1, 1)]),
            "tRRD"
        );
        // A fifth ACT inside tFAW = 26 of the first.
        assert_eq!(
            rule(&[
                cmd(0, Activate, 0, 1),
                cmd(4, Activate, 1, 1),
                cmd(8, Activate, 2, 1),
                cmd(12, Activate, 3, 1),
                cmd(25, Activate, 4, 1)
            ]),
            "tFAW"
        );
        assert_eq!(
            rule(&[
                cmd(0, Activate, 0, 1),
                cmd(4, Activate, 1, 1),
                cmd(20, Read, 0, 1),
                cmd(23, Read, 1, 1)
            ]),
            "tCCD"
        );
        assert_eq!(
            rule(&[
                cmd(0, Activate, 0, 1),
                cmd(31, Read, 0, 1),
                cmd(39, Precharge, 0, 1)
            ]),
            "tRTP"
        );
        assert_eq!(
            rule(&[
                cmd(0, Activate, 0, 1),
                cmd(17, Write, 0, 1),
                cmd(40, Precharge, 0, 1)
            ]),
            "tWR"
        );
        assert_eq!(
            rule(&[
                cmd(0, Activate, 0, 1),
                cmd(17, Write, 0, 1),
                cmd(30, Read, 0, 1)
            ]),
            "tWTR"
        );
        // Banks 0 and 16 are in different ranks of one channel: only the
        // data bus and the turnaround tie them.
        assert_eq!(
            rule(&[
                cmd(0, Activate, 0, 1),
                cmd(0, Activate, 16, 1),
                cmd(17, Read, 0, 1),
                cmd(19, Read, 16, 1)
            ]),
            "data bus busy"
        );
        assert_eq!(
            rule(&[
                cmd(0, Activate, 0, 1),
                cmd(0, Activate, 16, 1),
                cmd(17, Read, 0, 1),
                // Read data 34..38; write data at 27 + 12 = 39 < 38 + 2.
                cmd(27, Write, 16, 1)
            ]),
            "read-to-write turnaround"
        );
        assert_eq!(
            rule(&[cmd(0, Activate, 0, 1), cmd(17, Read, 0, 2)]),
            "column command to a row that is not open"
        );
        assert_eq!(rule(&[cmd(0, Precharge, 0, 1)]), "PRE to a closed bank");
    }

    #[test]
    fn bank_group_rank_switch_and_refresh_rules_are_named() {
        use CommandKind::*;
        // DRAMSim3's DDR4_8Gb_x8_2400: tCCD_L 6, tRRD_L 6, tWTR_S 3,
        // tRTRS 1, tRFC 420.
        let t = Timing {
            ccd_l: 6,
            rrd_l: 6,
            wtr_s: 3,
            rtrs: 1,
            refi: 9360,
            rfc: 420,
            ..DDR4
        };
        let rule = |cmds: &[Command]| verify(cmds, &t, L).unwrap_err().rule;
        // Banks 0 and 1 share a bank group (4 banks a group), 0 and 4 not.
        assert_eq!(
            rule(&[cmd(0, Activate, 0, 1), cmd(4, Activate, 1, 1)]),
            "tRRD_L"
        );
        assert_eq!(
            verify(&[cmd(0, Activate, 0, 1), cmd(4, Activate, 4, 1)], &t, L),
            Ok(())
        );
        let two_open = [cmd(0, Activate, 0, 1), cmd(6, Activate, 1, 1)];
        let with = |more: &[Command]| [&two_open[..], more].concat();
        assert_eq!(
            rule(&with(&[cmd(20, Read, 0, 1), cmd(24, Read, 1, 1)])),
            "tCCD_L"
        );
        // Write data ends 17 + 12 + 4 = 33: a read in the same group waits
        // tWTR_L = 9, in another group tWTR_S = 3.
        assert_eq!(
            rule(&with(&[cmd(17, Write, 0, 1), cmd(40, Read, 1, 1)])),
            "tWTR"
        );
        let other_group = [
            cmd(0, Activate, 0, 1),
            cmd(4, Activate, 4, 1),
            cmd(17, Write, 0, 1),
        ];
        assert_eq!(
            verify(&[&other_group[..], &[cmd(36, Read, 4, 1)]].concat(), &t, L),
            Ok(())
        );
        assert_eq!(
            rule(&[&other_group[..], &[cmd(35, Read, 4, 1)]].concat()),
            "tWTR_S"
        );
        // Banks 0 and 16 are in different ranks: bursts 4 + tRTRS apart.
        let ranks = [cmd(0, Activate, 0, 1), cmd(0, Activate, 16, 1)];
        assert_eq!(
            rule(&[&ranks[..], &[cmd(17, Read, 0, 1), cmd(21, Read, 16, 1)]].concat()),
            "tRTRS"
        );
        assert_eq!(
            verify(
                &[&ranks[..], &[cmd(17, Read, 0, 1), cmd(22, Read, 16, 1)]].concat(),
                &t,
                L
            ),
            Ok(())
        );
        // Refresh: every bank of the rank closed, tRP after the PRE, no
        // ACT for tRFC.
        assert_eq!(
            rule(&[cmd(0, Activate, 3, 1), cmd(100, Refresh, 0, 0)]),
            "REF to a rank with an open bank"
        );
        let refreshed = [
            cmd(0, Activate, 3, 1),
            cmd(39, Precharge, 3, 1),
            cmd(56, Refresh, 0, 0),
        ];
        assert_eq!(verify(&refreshed, &t, L), Ok(()));
        assert_eq!(
            rule(&[
                cmd(0, Activate, 3, 1),
                cmd(39, Precharge, 3, 1),
                cmd(55, Refresh, 0, 0)
            ]),
            "tRP"
        );
        assert_eq!(
            rule(&[&refreshed[..], &[cmd(56 + 419, Activate, 5, 1)]].concat()),
            "tRFC"
        );
        // The other rank is not refreshed.
        assert_eq!(
            verify(
                &[&refreshed[..], &[cmd(60, Activate, 16, 1)]].concat(),
                &t,
                L
            ),
            Ok(())
        );
    }
}
