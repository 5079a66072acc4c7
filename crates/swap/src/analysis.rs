//! Request-stream analysis: the seed's size and inter-request-distance
//! (IRD) distributions, and replaying a recorded stream on device models.

use serde::{Deserialize, Serialize};

use crate::blocktrace::SwapRequest;
use crate::device::{Device, DeviceSpec, Dir, PAGE_SIZE};
use crate::SwapError;

/// Upper bounds (bytes, inclusive) of the size buckets; the last bucket
/// takes everything larger.
pub const SIZE_BUCKETS: [u64; 9] = [
    4096,
    8192,
    16384,
    32768,
    65536,
    131_072,
    262_144,
    524_288,
    u64::MAX,
];

/// Upper bounds (bytes, inclusive) of the IRD buckets: 0 is sequential;
/// 1 MiB is a swap cluster.
pub const IRD_BUCKETS: [u64; 7] = [0, 4096, 32768, 262_144, 1 << 20, 16 << 20, u64::MAX];

/// A histogram over fixed buckets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Bucket labels.
    pub labels: Vec<String>,
    /// Counts per bucket.
    pub counts: Vec<u64>,
}

impl Histogram {
    fn new(bounds: &[u64], label: impl Fn(usize, u64) -> String) -> Histogram {
        Histogram {
            labels: bounds
                .iter()
                .enumerate()
                .map(|(i, &b)| label(i, b))
                .collect(),
            counts: vec![0; bounds.len()],
        }
    }

    /// All counts.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Percent per bucket.
    pub fn percent(&self) -> Vec<f64> {
        let t = self.total().max(1) as f64;
        self.counts.iter().map(|&c| c as f64 * 100.0 / t).collect()
    }
}

fn size_label(i: usize, b: u64) -> String {
    if b == u64::MAX {
        format!(">{}K", SIZE_BUCKETS[i - 1] / 1024)
    } else {
        format!("{}K", b / 1024)
    }
}

fn ird_label(i: usize, b: u64) -> String {
    match b {
        0 => "0 (seq)".into(),
        u64::MAX => format!(">{}M", IRD_BUCKETS[i - 1] >> 20),
        b if b >= 1 << 20 => format!("≤{}M", b >> 20),
        b => format!("≤{}K", b / 1024),
    }
}

fn bucket(bounds: &[u64], v: u64) -> usize {
    bounds
        .iter()
        .position(|&b| v <= b)
        .unwrap_or(bounds.len() - 1)
}

/// Distributions of one direction of a stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Distributions {
    /// Requests.
    pub requests: u64,
    /// Bytes.
    pub bytes: u64,
    /// Request sizes.
    pub size: Histogram,
    /// Distance from the end of the previous request of the same
    /// direction to the start of this one.
    pub ird: Histogram,
    /// Percent of requests of 4 KiB.
    pub small_percent: f64,
    /// Percent of requests not sequential (IRD > 0).
    pub random_percent: f64,
    /// Mean request size, bytes.
    pub mean_size: f64,
}

/// Sizes and IRDs of the reads and of the writes of a stream.
pub fn distributions(requests: &[SwapRequest]) -> (Distributions, Distributions) {
    let one = |dir: Dir| {
        let mut d = Distributions {
            size: Histogram::new(&SIZE_BUCKETS, size_label),
            ird: Histogram::new(&IRD_BUCKETS, ird_label),
            ..Default::default()
        };
        let mut prev_end: Option<u64> = None;
        let mut small = 0;
        let mut random = 0;
        for r in requests.iter().filter(|r| r.dir == dir) {
            d.requests += 1;
            d.bytes += r.size;
            d.size.counts[bucket(&SIZE_BUCKETS, r.size)] += 1;
            small += u64::from(r.size <= PAGE_SIZE);
            if let Some(end) = prev_end {
                let ird = r.offset.abs_diff(end);
                d.ird.counts[bucket(&IRD_BUCKETS, ird)] += 1;
                random += u64::from(ird > 0);
            }
            prev_end = Some(r.offset + r.size);
        }
        let n = d.requests.max(1) as f64;
        d.small_percent = small as f64 * 100.0 / n;
        d.random_percent = random as f64 * 100.0 / (d.requests.saturating_sub(1).max(1)) as f64;
        d.mean_size = d.bytes as f64 / n;
        d
    };
    (one(Dir::Read), one(Dir::Write))
}

/// A recorded stream served by a device model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceReplay {
    /// The device.
    pub device: String,
    /// Device time of the reads, ns (the seed's method: each request's
    /// service time, summed).
    pub swap_in_ns: u64,
    /// Device time of the writes, ns.
    pub write_busy_ns: u64,
    /// From the first write's issue to the last write's completion, with
    /// requests issued no earlier than recorded (the OS's pace), ns.
    pub swap_out_span_ns: u64,
    /// The same span as recorded (first to last write issue), ns.
    pub recorded_write_span_ns: u64,
    /// NAND merges.
    pub merges: u64,
    /// Writes per 4 KiB page of the swap area.
    #[serde(skip)]
    pub writes_per_page: Vec<u32>,
}

/// Serves `requests` in order on `spec`, each issued at its recorded
/// time or when the device is free, whichever is later.
pub fn replay(requests: &[SwapRequest], spec: &DeviceSpec) -> Result<DeviceReplay, SwapError> {
    let mut device = Device::new(spec.clone())?;
    let mut free_at = 0u64;
    let mut out = DeviceReplay {
        device: spec.name.clone(),
        ..Default::default()
    };
    let mut first_write: Option<u64> = None;
    let mut last_write_issue = 0;
    let mut last_write_done = 0;
    for r in requests {
        let start = r.time_ns.max(free_at);
        let ns = device.service(r.dir, r.offset, r.size);
        free_at = start + ns;
        match r.dir {
            Dir::Read => out.swap_in_ns += ns,
            Dir::Write => {
                first_write.get_or_insert(r.time_ns);
                last_write_issue = r.time_ns;
                last_write_done = free_at;
                out.write_busy_ns += ns;
            }
        }
    }
    if let Some(first) = first_write {
        out.swap_out_span_ns = last_write_done - first;
        out.recorded_write_span_ns = last_write_issue - first;
    }
    out.merges = device.stats().merges;
    out.writes_per_page = device.writes_per_page().to_vec();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: u64, dir: Dir, offset: u64, size: u64) -> SwapRequest {
        SwapRequest {
            time_ns: t,
            dir,
            offset,
            size,
        }
    }

    #[test]
    fn buckets_and_irds() {
        let rs = [
            req(0, Dir::Write, 0, 131_072),
            req(1, Dir::Write, 131_072, 4096),
            req(2, Dir::Write, 10 << 20, 4096),
            req(3, Dir::Read, 0, 32768),
        ];
        let (r, w) = distributions(&rs);
        assert_eq!((r.requests, w.requests), (3 - 2, 3));
        assert_eq!(w.size.counts[0], 2);
        assert_eq!(w.size.counts[5], 1);
        assert_eq!(w.ird.counts[0], 1, "the second write is sequential");
        assert_eq!(w.ird.counts[5], 1, "10 MiB away");
        assert_eq!(r.size.counts[3], 1);
        assert!((w.random_percent - 50.0).abs() < 1e-9);
    }

    #[test]
    fn replay_is_paced_by_the_recording() {
        // Two 4 KiB writes 1 s apart: a fast device finishes each at once,
        // so the span is the recorded second plus one service time.
        let rs = [
            req(0, Dir::Write, 0, 4096),
            req(1_000_000_000, Dir::Write, 4096, 4096),
        ];
        let r = replay(&rs, &DeviceSpec::preset("SCM-400").unwrap()).unwrap();
        assert_eq!(r.swap_out_span_ns, 1_000_000_000 + 102_400);
        assert_eq!(r.recorded_write_span_ns, 1_000_000_000);
        assert_eq!(r.writes_per_page, vec![1, 1]);
    }
}
