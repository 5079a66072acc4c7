//! Swap devices: SCM, NAND flash behind a log-block FTL, DRAM and a disk.
//!
//! A [`Device`] serves one request at a time and says how long it took;
//! it counts writes per 4 KiB page of the swap area on every kind of
//! device (the lifetime table's input).
//!
//! # NAND and the seed's simulation method
//!
//! Seed 003 ("Performance Simulation Method") charges a NAND write its
//! transfer and program time plus a *block merge* that depends on the
//! inter-request distance (IRD) of the write stream:
//!
//! - sequential (IRD = 0): no merge (the log block is switched in whole);
//! - full random (IRD ≥ block size): a merge for every request;
//! - partial random (0 < IRD < block size): a merge every N requests.
//!
//! The seed does not say what N is. We take the number of requests that
//! land in one block before the stream leaves it: a request of `s` bytes
//! followed by a gap of `d` bytes advances `s + d`, so
//! `N = max(1, floor(block / (s + d)))`. The IRD of a write is the
//! distance from the end of the previous write to its start (absolute
//! value). Reads do not touch the log blocks.
//!
//! Read time: `ceil(p / planes) · tR + p · tTrans` for `p` 8 KiB pages;
//! write time: `p · tTrans + ceil(p / planes) · tProg` (+ merges). The
//! block is `pages_per_block · page_size` (SLC 512 KiB, MLC 1 MiB).

use serde::{Deserialize, Serialize};

use crate::SwapError;

/// Bytes in a page of the swap area (and of memory).
pub const PAGE_SIZE: u64 = 4096;

/// One million bytes: device bandwidths are in decimal MB/s, as the seed
/// and vendors give them.
pub const MB: f64 = 1e6;

/// Direction of a request.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dir {
    /// Swap-in.
    Read,
    /// Swap-out.
    Write,
}

/// What a device is made of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeviceKind {
    /// A byte-addressable memory updated in place (SCM, DRAM): latency
    /// plus size over bandwidth.
    Memory {
        /// Read bandwidth, MB/s.
        read_mb_s: f64,
        /// Write bandwidth, MB/s.
        write_mb_s: f64,
        /// Fixed time per read request, ns.
        read_latency_ns: f64,
        /// Fixed time per write request, ns.
        write_latency_ns: f64,
    },
    /// NAND flash behind a log-block FTL (see the module documentation).
    Nand {
        /// Page read time tR, µs.
        t_read_us: f64,
        /// Page program time tProg, µs.
        t_prog_us: f64,
        /// Page transfer time tTrans, µs.
        t_trans_us: f64,
        /// Pages per erase block.
        pages_per_block: u32,
        /// Time of one block merge, µs.
        merge_us: f64,
        /// Flash page size, bytes.
        page_bytes: u64,
        /// Planes per chip (pages programmed or read in parallel).
        planes: u32,
    },
    /// A rotating disk: a seek and half a rotation unless the request
    /// starts where the previous one ended, then size over bandwidth.
    Disk {
        /// Average seek time, µs.
        seek_us: f64,
        /// Time of one rotation, µs.
        rotation_us: f64,
        /// Media transfer rate, MB/s.
        mb_s: f64,
    },
}

/// A named device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// Its name (the preset's name for presets).
    pub name: String,
    /// Where write endurance is known: program/erase or write cycles a
    /// cell survives.
    pub endurance: Option<f64>,
    /// The model.
    pub kind: DeviceKind,
}

/// The names of [`DeviceSpec::preset`].
pub const PRESETS: [&str; 6] = ["SCM-133", "SCM-400", "SLC", "MLC", "DRAM", "HDD"];

impl DeviceSpec {
    /// A preset by name (case-insensitive): the seed's SCM-133 and SCM-400
    /// ("SCM parameters": read 133 or 400 MB/s, write 40 MB/s; the seed
    /// gives no latency, so none is added; endurance 10^6 from its
    /// lifetime table), its SLC and MLC NAND ("NAND parameters"; endurance
    /// 100K and 10K), and for reference DRAM (DDR2-800, the seed's board:
    /// 6400 MB/s peak, 60 ns) and a 7200 rpm disk (8.5 ms seek, 8.33 ms
    /// rotation, 100 MB/s).
    pub fn preset(name: &str) -> Option<DeviceSpec> {
        let memory = |read_mb_s, write_mb_s, lat| DeviceKind::Memory {
            read_mb_s,
            write_mb_s,
            read_latency_ns: lat,
            write_latency_ns: lat,
        };
        let nand = |t_read_us, t_prog_us, pages_per_block, merge_us| DeviceKind::Nand {
            t_read_us,
            t_prog_us,
            t_trans_us: 20.0,
            pages_per_block,
            merge_us,
            page_bytes: 8192,
            planes: 4,
        };
        let (name, endurance, kind) = match name.to_ascii_uppercase().as_str() {
            "SCM-133" => ("SCM-133", Some(1e6), memory(133.0, 40.0, 0.0)),
            "SCM-400" => ("SCM-400", Some(1e6), memory(400.0, 40.0, 0.0)),
            "SLC" => ("SLC", Some(1e5), nand(50.0, 500.0, 64, 43_000.0)),
            "MLC" => ("MLC", Some(1e4), nand(80.0, 1300.0, 128, 187_000.0)),
            "DRAM" => ("DRAM", None, memory(6400.0, 6400.0, 60.0)),
            "HDD" => (
                "HDD",
                None,
                DeviceKind::Disk {
                    seek_us: 8500.0,
                    rotation_us: 8333.0,
                    mb_s: 100.0,
                },
            ),
            _ => return None,
        };
        Some(DeviceSpec {
            name: name.into(),
            endurance,
            kind,
        })
    }

    /// An SCM like the seed's with another write speed, given as 4 KiB
    /// random-write IOPS (the x axis of the seed's congestion figure).
    pub fn scm_with_write_iops(read_mb_s: f64, write_iops: f64) -> DeviceSpec {
        DeviceSpec {
            name: format!("SCM {:.0}K IOPS", write_iops / 1000.0),
            endurance: Some(1e6),
            kind: DeviceKind::Memory {
                read_mb_s,
                write_mb_s: write_iops * PAGE_SIZE as f64 / MB,
                read_latency_ns: 0.0,
                write_latency_ns: 0.0,
            },
        }
    }

    /// Checks every field: bandwidths and times positive and finite, page
    /// and block sizes non-zero.
    pub fn validate(&self) -> Result<(), SwapError> {
        let bad = |field: &'static str, reason: String| SwapError::BadDevice {
            device: self.name.clone(),
            field,
            reason,
        };
        let positive = |field: &'static str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(bad(field, format!("must be a positive number, not {v}")))
            }
        };
        let non_negative = |field: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(bad(field, format!("must be zero or more, not {v}")))
            }
        };
        if let Some(e) = self.endurance {
            positive("endurance", e)?;
        }
        match self.kind {
            DeviceKind::Memory {
                read_mb_s,
                write_mb_s,
                read_latency_ns,
                write_latency_ns,
            } => {
                positive("read_mb_s", read_mb_s)?;
                positive("write_mb_s", write_mb_s)?;
                non_negative("read_latency_ns", read_latency_ns)?;
                non_negative("write_latency_ns", write_latency_ns)?;
            }
            DeviceKind::Nand {
                t_read_us,
                t_prog_us,
                t_trans_us,
                pages_per_block,
                merge_us,
                page_bytes,
                planes,
            } => {
                positive("t_read_us", t_read_us)?;
                positive("t_prog_us", t_prog_us)?;
                non_negative("t_trans_us", t_trans_us)?;
                non_negative("merge_us", merge_us)?;
                if pages_per_block == 0 {
                    return Err(bad("pages_per_block", "must be at least 1".into()));
                }
                if page_bytes == 0 {
                    return Err(bad("page_bytes", "must be at least 1".into()));
                }
                if planes == 0 {
                    return Err(bad("planes", "must be at least 1".into()));
                }
            }
            DeviceKind::Disk {
                seek_us,
                rotation_us,
                mb_s,
            } => {
                non_negative("seek_us", seek_us)?;
                non_negative("rotation_us", rotation_us)?;
                positive("mb_s", mb_s)?;
            }
        }
        Ok(())
    }
}

/// What a device did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Time spent serving reads, ns.
    pub read_ns: u64,
    /// Time spent serving writes, ns (merges included).
    pub write_ns: u64,
    /// NAND block merges.
    pub merges: u64,
    /// Discarded (trimmed) bytes.
    pub discard_bytes: u64,
}

/// A device being driven: its model, the FTL's state, statistics and
/// per-page write counts.
#[derive(Clone, Debug)]
pub struct Device {
    spec: DeviceSpec,
    /// End (bytes) of the previous write, for the IRD.
    prev_write_end: Option<u64>,
    /// End of the previous request of either direction (disk seeks).
    prev_end: Option<u64>,
    /// Partial-random writes since the last merge.
    partial_run: u64,
    stats: DeviceStats,
    /// Writes per 4 KiB page of the swap area, indexed by offset / 4 KiB.
    writes_per_page: Vec<u32>,
}

impl Device {
    /// A fresh device; the spec is validated first.
    pub fn new(spec: DeviceSpec) -> Result<Device, SwapError> {
        spec.validate()?;
        Ok(Device {
            spec,
            prev_write_end: None,
            prev_end: None,
            partial_run: 0,
            stats: DeviceStats::default(),
            writes_per_page: Vec::new(),
        })
    }

    /// The description.
    pub fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    /// What it did so far.
    pub fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    /// Writes per 4 KiB page, indexed by page offset in the swap area.
    pub fn writes_per_page(&self) -> &[u32] {
        &self.writes_per_page
    }

    /// Serves one request of `len` bytes at byte `offset` of the swap
    /// area; returns its service time in ns.
    pub fn service(&mut self, dir: Dir, offset: u64, len: u64) -> u64 {
        let len = len.max(1);
        let ns = match (&self.spec.kind, dir) {
            (
                DeviceKind::Memory {
                    read_mb_s,
                    read_latency_ns,
                    ..
                },
                Dir::Read,
            ) => read_latency_ns + len as f64 / (read_mb_s * MB) * 1e9,
            (
                DeviceKind::Memory {
                    write_mb_s,
                    write_latency_ns,
                    ..
                },
                Dir::Write,
            ) => write_latency_ns + len as f64 / (write_mb_s * MB) * 1e9,
            (
                &DeviceKind::Nand {
                    t_read_us,
                    t_prog_us,
                    t_trans_us,
                    pages_per_block,
                    merge_us,
                    page_bytes,
                    planes,
                },
                dir,
            ) => {
                let pages = len.div_ceil(page_bytes);
                let rounds = pages.div_ceil(u64::from(planes)) as f64;
                match dir {
                    Dir::Read => (rounds * t_read_us + pages as f64 * t_trans_us) * 1e3,
                    Dir::Write => {
                        let block = u64::from(pages_per_block) * page_bytes;
                        let merges = self.merges_for(offset, len, block);
                        self.stats.merges += merges;
                        (pages as f64 * t_trans_us + rounds * t_prog_us + merges as f64 * merge_us)
                            * 1e3
                    }
                }
            }
            (
                &DeviceKind::Disk {
                    seek_us,
                    rotation_us,
                    mb_s,
                },
                _,
            ) => {
                let positioning = if self.prev_end == Some(offset) {
                    0.0
                } else {
                    seek_us + rotation_us / 2.0
                };
                positioning * 1e3 + len as f64 / (mb_s * MB) * 1e9
            }
        };
        let ns = ns.round() as u64;
        self.prev_end = Some(offset + len);
        match dir {
            Dir::Read => {
                self.stats.reads += 1;
                self.stats.read_bytes += len;
                self.stats.read_ns += ns;
            }
            Dir::Write => {
                self.stats.writes += 1;
                self.stats.write_bytes += len;
                self.stats.write_ns += ns;
                self.prev_write_end = Some(offset + len);
                let first = (offset / PAGE_SIZE) as usize;
                let last = ((offset + len - 1) / PAGE_SIZE) as usize;
                if self.writes_per_page.len() <= last {
                    self.writes_per_page.resize(last + 1, 0);
                }
                for count in &mut self.writes_per_page[first..=last] {
                    *count += 1;
                }
            }
        }
        ns
    }

    /// The merges the seed's method charges to a write at `offset`.
    fn merges_for(&mut self, offset: u64, len: u64, block: u64) -> u64 {
        let Some(prev) = self.prev_write_end else {
            // The first write opens a fresh log block.
            return 0;
        };
        let ird = offset.abs_diff(prev);
        if ird == 0 {
            0
        } else if ird >= block {
            self.partial_run = 0;
            1
        } else {
            let n = (block / (len + ird)).max(1);
            self.partial_run += 1;
            if self.partial_run >= n {
                self.partial_run = 0;
                1
            } else {
                0
            }
        }
    }

    /// Records a discard (TRIM) of `len` bytes: freed space the FTL no
    /// longer copies. Takes no time in the model.
    pub fn discard(&mut self, len: u64) {
        self.stats.discard_bytes += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_validate_and_zero_bandwidth_is_refused() {
        for name in PRESETS {
            DeviceSpec::preset(name).unwrap().validate().unwrap();
        }
        let mut spec = DeviceSpec::preset("SCM-400").unwrap();
        if let DeviceKind::Memory { write_mb_s, .. } = &mut spec.kind {
            *write_mb_s = 0.0;
        }
        let err = Device::new(spec).unwrap_err().to_string();
        assert!(
            err.contains("SCM-400") && err.contains("write_mb_s"),
            "{err}"
        );
    }

    #[test]
    fn scm_times_follow_bandwidth() {
        let mut d = Device::new(DeviceSpec::preset("SCM-400").unwrap()).unwrap();
        // 4 KiB at 400 MB/s: 10.24 µs, the seed's "SCM read 10 us".
        assert_eq!(d.service(Dir::Read, 0, 4096), 10_240);
        // 4 KiB at 40 MB/s: 102.4 µs, about 10K IOPS.
        assert_eq!(d.service(Dir::Write, 0, 4096), 102_400);
        d.service(Dir::Write, 0, 8192);
        assert_eq!(d.writes_per_page(), &[2, 1]);
    }

    #[test]
    fn nand_merges_follow_the_inter_request_distance() {
        let slc = DeviceSpec::preset("SLC").unwrap();
        let mut d = Device::new(slc.clone()).unwrap();
        // Sequential 32 KiB writes: 4 flash pages, one round on 4 planes.
        let one = d.service(Dir::Write, 0, 32768);
        assert_eq!(one, (4.0 * 20.0 + 500.0) as u64 * 1000);
        for i in 1..10 {
            assert_eq!(d.service(Dir::Write, i * 32768, 32768), one);
        }
        assert_eq!(d.stats().merges, 0);
        // Full random: IRD at least the 512 KiB block, a merge each time.
        let mut d = Device::new(slc.clone()).unwrap();
        d.service(Dir::Write, 0, 4096);
        for i in 1..=5u64 {
            d.service(Dir::Write, (i * 10) << 20, 4096);
        }
        assert_eq!(d.stats().merges, 5);
        // Partial random: 4 KiB writes 60 KiB apart, N = 512 / 64 = 8.
        let mut d = Device::new(slc).unwrap();
        let mut off = 0;
        for _ in 0..=32 {
            d.service(Dir::Write, off, 4096);
            off += 4096 + 61_440;
        }
        assert_eq!(d.stats().merges, 4);
    }

    #[test]
    fn disk_seeks_unless_sequential() {
        let mut d = Device::new(DeviceSpec::preset("HDD").unwrap()).unwrap();
        let first = d.service(Dir::Write, 0, 4096);
        let next = d.service(Dir::Write, 4096, 4096);
        assert!(first > next * 100);
    }
}
