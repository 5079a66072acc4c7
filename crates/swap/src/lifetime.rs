//! Lifetime of a swap device from writes per page (seed 003, "Lifetime
//! Estimation").
//!
//! A page written `w` times in a test of `T` hours wears out after
//! `endurance / w · T` hours. Without wear levelling the most written
//! page decides (`w = max`); with wear levelling over the pages written,
//! the mean does (`w = mean`); with ideal wear levelling over the whole
//! device, the total writes spread over every page of the device.
//!
//! The seed's inputs (2 h, 215,022 writes, max 4, mean 1.32) give its
//! without-wear-levelling row exactly: 10^6 / 4 · 2 h = 500,000 h =
//! 57.1 years, 5.7 for SLC, 0.57 for MLC. Its wear-levelling row is
//! exactly twice that (1,000,000 h; 11.4 y SLC; 1.14 y MLC), i.e. two
//! writes per page, not the stated mean of 1.32 (which gives 3.03× the
//! no-levelling figure: 173.0 / 17.3 / 1.73 y). Its SCM cell then says
//! "1,000,000 (h) = 11.4 (y)": one million hours is 114.2 years, so the
//! year figure is off by ten (it is the SLC figure).

use serde::{Deserialize, Serialize};

/// Hours in a year (365 days), the conversion that gives the seed's
/// 500,000 h = 57.1 y.
pub const HOURS_PER_YEAR: f64 = 8760.0;

/// What a test wrote.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteProfile {
    /// Length of the test, hours.
    pub hours: f64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Page writes.
    pub writes: u64,
    /// Distinct pages written.
    pub written_pages: u64,
    /// Writes to the most written page.
    pub max_writes_per_page: u64,
    /// Writes per written page, mean.
    pub mean_writes_per_page: f64,
    /// Pages of the device, when known (ideal wear levelling).
    pub device_pages: Option<u64>,
}

impl WriteProfile {
    /// The seed's test: 2 h, 880 MB, 215,022 writes to 163,177 pages, max
    /// 4, mean 1.32; a 1 GB swap device.
    pub fn seed() -> WriteProfile {
        WriteProfile {
            hours: 2.0,
            bytes_written: 880_000_000,
            writes: 215_022,
            written_pages: 163_177,
            max_writes_per_page: 4,
            mean_writes_per_page: 1.32,
            device_pages: Some((1u64 << 30) / 4096),
        }
    }

    /// The profile of per-page write counts over a test of `hours`.
    pub fn from_counts(
        counts: &[u32],
        page_bytes: u64,
        hours: f64,
        device_pages: Option<u64>,
    ) -> Self {
        let written = counts.iter().filter(|&&c| c > 0).count() as u64;
        let writes: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        WriteProfile {
            hours,
            bytes_written: writes * page_bytes,
            writes,
            written_pages: written,
            max_writes_per_page: counts.iter().copied().max().unwrap_or(0).into(),
            mean_writes_per_page: if written == 0 {
                0.0
            } else {
                writes as f64 / written as f64
            },
            device_pages,
        }
    }
}

/// One row of the lifetime table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lifetime {
    /// The device (SCM, SLC, MLC).
    pub device: String,
    /// Write cycles a cell survives.
    pub endurance: f64,
    /// Hours without wear levelling (the most written page decides).
    pub hours_without_wl: f64,
    /// Years without wear levelling.
    pub years_without_wl: f64,
    /// Years with wear levelling over the pages written (the mean decides).
    pub years_with_wl: f64,
    /// Years with ideal wear levelling over the whole device, if its size
    /// is known.
    pub years_ideal_wl: Option<f64>,
}

/// The lifetime of a device of `endurance` under `profile`; infinite when
/// nothing was written.
pub fn lifetime(device: &str, endurance: f64, profile: &WriteProfile) -> Lifetime {
    let hours = |w: f64| {
        if w > 0.0 {
            endurance / w * profile.hours
        } else {
            f64::INFINITY
        }
    };
    let h_max = hours(profile.max_writes_per_page as f64);
    Lifetime {
        device: device.into(),
        endurance,
        hours_without_wl: h_max,
        years_without_wl: h_max / HOURS_PER_YEAR,
        years_with_wl: hours(profile.mean_writes_per_page) / HOURS_PER_YEAR,
        years_ideal_wl: profile
            .device_pages
            .filter(|&p| p > 0)
            .map(|p| hours(profile.writes as f64 / p as f64) / HOURS_PER_YEAR),
    }
}

/// The seed's endurance classes: SCM 10^6, SLC 100K, MLC 10K.
pub const ENDURANCES: [(&str, f64); 3] = [("SCM", 1e6), ("SLC", 1e5), ("MLC", 1e4)];

/// The seed's table as printed: device, years without and with wear
/// levelling (SCM's "with" cell as printed, 11.4, beside its 1,000,000 h).
pub const SEED_TABLE: [(&str, f64, f64); 3] =
    [("SCM", 57.1, 11.4), ("SLC", 5.7, 11.4), ("MLC", 0.57, 1.14)];

/// The table for the three endurance classes.
pub fn lifetime_table(profile: &WriteProfile) -> Vec<Lifetime> {
    ENDURANCES
        .iter()
        .map(|&(name, e)| lifetime(name, e, profile))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_inputs_give_the_seed_without_wear_levelling() {
        let rows = lifetime_table(&WriteProfile::seed());
        let round = |v: f64, digits: i32| (v * 10f64.powi(digits)).round() / 10f64.powi(digits);
        assert_eq!(rows[0].hours_without_wl, 500_000.0);
        assert_eq!(round(rows[0].years_without_wl, 1), 57.1);
        assert_eq!(round(rows[1].years_without_wl, 1), 5.7);
        assert_eq!(round(rows[2].years_without_wl, 2), 0.57);
        // With wear levelling over the written pages: mean 1.32.
        assert_eq!(round(rows[0].years_with_wl, 1), 173.0);
        assert_eq!(round(rows[2].years_with_wl, 2), 1.73);
        // The seed's own "with" row is the formula at 2 writes per page.
        let two = WriteProfile {
            mean_writes_per_page: 2.0,
            ..WriteProfile::seed()
        };
        let rows2 = lifetime_table(&two);
        assert_eq!(round(rows2[1].years_with_wl, 1), SEED_TABLE[1].2);
        assert_eq!(round(rows2[2].years_with_wl, 2), SEED_TABLE[2].2);
        assert_eq!(round(rows2[0].years_with_wl, 1), 114.2);
    }

    #[test]
    fn profile_from_counts() {
        let p = WriteProfile::from_counts(&[0, 1, 4, 1, 0], 4096, 2.0, Some(5));
        assert_eq!(
            (p.writes, p.written_pages, p.max_writes_per_page),
            (6, 3, 4)
        );
        assert_eq!(p.mean_writes_per_page, 2.0);
        assert!(
            lifetime("x", 1.0, &WriteProfile::from_counts(&[], 4096, 1.0, None))
                .years_without_wl
                .is_infinite()
        );
    }
}
