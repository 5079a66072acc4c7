//! Memory technologies and their timing parameters.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The technology behind a range of page frames.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Technology {
    /// DRAM: symmetric reads and writes, refreshed, no wear.
    Dram,
    /// Phase-change memory: slow array writes, worn out by writes.
    Pcm,
}

impl Technology {
    /// Its key in a preset's `[timing]` table.
    pub fn name(self) -> &'static str {
        match self {
            Technology::Dram => "dram",
            Technology::Pcm => "pcm",
        }
    }
}

impl fmt::Display for Technology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Timing parameters of one technology, in clock cycles of the memory
/// bus clock `tCK`, named as JEDEC names them.
///
/// For PCM the row buffer sits in front of a slow array: following Lee et
/// al. (ISCA 2009), reading the array into the row buffer is `tRCD` and
/// writing a dirty row buffer back to the array happens at precharge, so
/// PCM's slow writes show up as a long `tRP`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// Clock period in picoseconds.
    #[serde(rename = "tCK_ps")]
    pub tck_ps: u32,
    /// Activate to read/write: opening a row.
    #[serde(rename = "tRCD")]
    pub rcd: u32,
    /// Read command to first data (CAS latency).
    #[serde(rename = "tCL")]
    pub cl: u32,
    /// Precharge: closing a row (for PCM, writing it back).
    #[serde(rename = "tRP")]
    pub rp: u32,
    /// Activate to precharge: the least time a row stays open.
    #[serde(rename = "tRAS")]
    pub ras: u32,
    /// Write recovery: end of write data to precharge.
    #[serde(rename = "tWR")]
    pub wr: u32,
    /// Transfers per burst (8 for DDR3/DDR4 BL8).
    pub burst_length: u32,
    /// Write command to first write data (CAS write latency).
    #[serde(rename = "tCWL")]
    pub cwl: u32,
    /// Read command to precharge of the same bank.
    #[serde(rename = "tRTP")]
    pub rtp: u32,
    /// End of write data to a read command in the same rank (write-to-read
    /// turnaround).
    #[serde(rename = "tWTR")]
    pub wtr: u32,
    /// Column command to column command in the same rank.
    #[serde(rename = "tCCD")]
    pub ccd: u32,
    /// Activate to activate of another bank in the same rank.
    #[serde(rename = "tRRD")]
    pub rrd: u32,
    /// Four-activate window: at most four ACTs to a rank within any `tFAW`
    /// cycles; 0 where the technology has no such limit (Lee et al.'s PCM
    /// as Ramulator encodes it).
    #[serde(rename = "tFAW")]
    pub faw: u32,
    /// Column command to column command in the same bank group
    /// (`tCCD_L`); 0 where the technology has no bank groups, and then
    /// `tCCD` applies between any two banks. With bank groups, `tCCD` is
    /// `tCCD_S` (other bank group).
    #[serde(rename = "tCCD_L", default, skip_serializing_if = "is_zero")]
    pub ccd_l: u32,
    /// Activate to activate in the same bank group (`tRRD_L`); 0: `tRRD`
    /// everywhere. With bank groups, `tRRD` is `tRRD_S`.
    #[serde(rename = "tRRD_L", default, skip_serializing_if = "is_zero")]
    pub rrd_l: u32,
    /// End of write data to a read in another bank group (`tWTR_S`); 0:
    /// `tWTR` everywhere. With bank groups, `tWTR` is `tWTR_L`.
    #[serde(rename = "tWTR_S", default, skip_serializing_if = "is_zero")]
    pub wtr_s: u32,
    /// Rank-to-rank switch: idle cycles on the data bus between bursts of
    /// different ranks (`tRTRS`); 0 where not given.
    #[serde(rename = "tRTRS", default, skip_serializing_if = "is_zero")]
    pub rtrs: u32,
    /// Average refresh interval per rank (`tREFI`); 0: not refreshed
    /// (PCM, or a preset that leaves refresh out).
    #[serde(rename = "tREFI", default, skip_serializing_if = "is_zero")]
    pub refi: u32,
    /// All-bank refresh cycle time (`tRFC`): a rank's banks stay closed
    /// this long after its REF. Required when `tREFI` is given.
    #[serde(rename = "tRFC", default, skip_serializing_if = "is_zero")]
    pub rfc: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// Why a timing table was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// A parameter that must be positive is zero.
    #[error("timing.{technology}.{field} must be greater than zero")]
    Zero {
        /// Technology.
        technology: Technology,
        /// Parameter as written in the preset.
        field: &'static str,
    },
    /// A row must stay open at least until it can be read.
    #[error("timing.{technology}.tRAS = {ras} is shorter than timing.{technology}.tRCD = {rcd}: a row must stay open at least until it can be read")]
    RasShorterThanRcd {
        /// Technology.
        technology: Technology,
        /// tRAS.
        ras: u32,
        /// tRCD.
        rcd: u32,
    },
    /// Four ACTs cannot fit in a window shorter than the gap between two.
    #[error("timing.{technology}.tFAW = {faw} is shorter than timing.{technology}.tRRD = {rrd} (use 0 for no four-activate window)")]
    FawShorterThanRrd {
        /// Technology.
        technology: Technology,
        /// tFAW.
        faw: u32,
        /// tRRD.
        rrd: u32,
    },
    /// A refresh interval needs a refresh cycle time, shorter than it.
    #[error("timing.{technology}.tREFI = {refi} needs 0 < tRFC < tREFI (tRFC = {rfc})")]
    Refresh {
        /// Technology.
        technology: Technology,
        /// tREFI.
        refi: u32,
        /// tRFC.
        rfc: u32,
    },
    /// A same-bank-group (`_L`) timing shorter than its other-group one.
    #[error(
        "timing.{technology}.{field} = {long} is shorter than its other-bank-group value {short}"
    )]
    LongShorterThanShort {
        /// Technology.
        technology: Technology,
        /// Parameter as written in the preset.
        field: &'static str,
        /// The `_L` value.
        long: u32,
        /// The `_S` value.
        short: u32,
    },
    /// DDR moves two transfers a clock, so a burst is an even number.
    #[error(
        "timing.{technology}.burst_length = {burst_length} must be even (two transfers per clock)"
    )]
    OddBurst {
        /// Technology.
        technology: Technology,
        /// The burst length.
        burst_length: u32,
    },
}

impl Timing {
    /// Check the parameters for consistency.
    pub fn validate(&self, technology: Technology) -> Result<(), TimingError> {
        for (field, value) in [
            ("tCK_ps", self.tck_ps),
            ("tRCD", self.rcd),
            ("tCL", self.cl),
            ("tRP", self.rp),
            ("tRAS", self.ras),
            ("tWR", self.wr),
            ("burst_length", self.burst_length),
            ("tCWL", self.cwl),
            ("tRTP", self.rtp),
            ("tWTR", self.wtr),
            ("tCCD", self.ccd),
            ("tRRD", self.rrd),
        ] {
            if value == 0 {
                return Err(TimingError::Zero { technology, field });
            }
        }
        if self.ras < self.rcd {
            return Err(TimingError::RasShorterThanRcd {
                technology,
                ras: self.ras,
                rcd: self.rcd,
            });
        }
        if self.faw != 0 && self.faw < self.rrd {
            return Err(TimingError::FawShorterThanRrd {
                technology,
                faw: self.faw,
                rrd: self.rrd,
            });
        }
        if self.refi != 0 && (self.rfc == 0 || self.rfc >= self.refi) {
            return Err(TimingError::Refresh {
                technology,
                refi: self.refi,
                rfc: self.rfc,
            });
        }
        for (field, long, short) in [
            ("tCCD_L", self.ccd_l, self.ccd),
            ("tRRD_L", self.rrd_l, self.rrd),
            ("tWTR", self.wtr, self.wtr_s),
        ] {
            if long != 0 && short != 0 && long < short {
                return Err(TimingError::LongShorterThanShort {
                    technology,
                    field,
                    long,
                    short,
                });
            }
        }
        if self.burst_length & 1 == 1 {
            return Err(TimingError::OddBurst {
                technology,
                burst_length: self.burst_length,
            });
        }
        Ok(())
    }

    /// Cycles the data bus is busy with one burst (`tBURST`): double data
    /// rate, two transfers a clock.
    pub fn burst_cycles(&self) -> u32 {
        self.burst_length / 2
    }

    /// `tCCD_L`, `tRRD_L` and `tWTR_S` as the controller uses them: with
    /// `bank_groups` off or a value of 0 (no bank groups), the one-value
    /// `tCCD`, `tRRD`, `tWTR`.
    pub fn bank_group_timings(&self, bank_groups: bool) -> (u32, u32, u32) {
        let or = |v: u32, one: u32| if bank_groups && v != 0 { v } else { one };
        (
            or(self.ccd_l, self.ccd),
            or(self.rrd_l, self.rrd),
            or(self.wtr_s, self.wtr),
        )
    }

    /// `cycles` in nanoseconds.
    pub fn ns(&self, cycles: u32) -> f64 {
        f64::from(cycles) * f64::from(self.tck_ps) / 1000.0
    }
}

/// The timing table of each technology a machine has.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timings {
    /// DRAM timings, if the machine has DRAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram: Option<Timing>,
    /// PCM timings, if the machine has PCM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcm: Option<Timing>,
}

impl Timings {
    /// The timings of `technology`, if given.
    pub fn get(&self, technology: Technology) -> Option<&Timing> {
        match technology {
            Technology::Dram => self.dram.as_ref(),
            Technology::Pcm => self.pcm.as_ref(),
        }
    }
}

/// Timings the unit tests of this crate share.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::Timing;

    /// DDR4-2400 17-17-17 (JESD79-4), as the `ddr4-2400` preset.
    pub(crate) const DDR4: Timing = Timing {
        tck_ps: 833,
        rcd: 17,
        cl: 17,
        rp: 17,
        ras: 39,
        wr: 18,
        burst_length: 8,
        cwl: 12,
        rtp: 9,
        wtr: 9,
        ccd: 4,
        rrd: 4,
        faw: 26,
        ccd_l: 0,
        rrd_l: 0,
        wtr_s: 0,
        rtrs: 0,
        refi: 0,
        rfc: 0,
    };

    /// Lee et al. 2009 PCM, as the `pcm-lee2009` preset.
    pub(crate) const PCM: Timing = Timing {
        tck_ps: 2500,
        rcd: 22,
        cl: 5,
        rp: 60,
        ras: 22,
        wr: 6,
        burst_length: 8,
        cwl: 5,
        rtp: 3,
        wtr: 3,
        ccd: 4,
        rrd: 2,
        faw: 0,
        ccd_l: 0,
        rrd_l: 0,
        wtr_s: 0,
        rtrs: 0,
        refi: 0,
        rfc: 0,
    };
}

#[cfg(test)]
mod tests {
    use super::fixtures::{DDR4, PCM};
    use super::*;

    #[test]
    fn fixtures_are_the_presets_timings() {
        let preset = |name| crate::Machine::preset(name).unwrap();
        assert_eq!(preset("ddr4-2400").timing(Technology::Dram), Some(&DDR4));
        assert_eq!(preset("pcm-lee2009").timing(Technology::Pcm), Some(&PCM));
    }

    #[test]
    fn inconsistent_timings_are_refused_by_name() {
        assert_eq!(DDR4.validate(Technology::Dram), Ok(()));
        let e = Timing { ras: 10, ..DDR4 }
            .validate(Technology::Dram)
            .unwrap_err();
        assert!(matches!(
            e,
            TimingError::RasShorterThanRcd {
                ras: 10,
                rcd: 17,
                ..
            }
        ));
        assert!(e.to_string().contains("timing.dram.tRAS"), "{e}");
        let e = Timing { tck_ps: 0, ..DDR4 }
            .validate(Technology::Pcm)
            .unwrap_err();
        assert_eq!(
            e,
            TimingError::Zero {
                technology: Technology::Pcm,
                field: "tCK_ps"
            }
        );
        let e = Timing { faw: 3, ..DDR4 }
            .validate(Technology::Dram)
            .unwrap_err();
        assert!(e.to_string().contains("timing.dram.tFAW = 3"), "{e}");
        assert_eq!(Timing { faw: 0, ..DDR4 }.validate(Technology::Dram), Ok(()));
        let e = Timing { cwl: 0, ..DDR4 }
            .validate(Technology::Dram)
            .unwrap_err();
        assert!(e.to_string().contains("tCWL"), "{e}");
        let e = Timing {
            burst_length: 7,
            ..DDR4
        }
        .validate(Technology::Dram)
        .unwrap_err();
        assert!(matches!(
            e,
            TimingError::OddBurst {
                burst_length: 7,
                ..
            }
        ));
    }

    #[test]
    fn burst_and_ns() {
        assert_eq!(DDR4.burst_cycles(), 4);
        assert!((DDR4.ns(DDR4.cl) - 14.161).abs() < 1e-9);
    }
}
