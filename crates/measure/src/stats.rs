//! Summary statistics over per-request samples.

/// Mean, spread and order statistics of a set of samples (timer ticks).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Samples summarised.
    pub count: u64,
    /// Arithmetic mean; 0 for no samples.
    pub mean: f64,
    /// Population standard deviation (divides by `count`: the samples are
    /// every request of the cell, not a sample of them).
    pub sd: f64,
    /// Median, by nearest rank.
    pub p50: u64,
    /// 99th percentile, by nearest rank.
    pub p99: u64,
    /// Largest sample.
    pub max: u64,
}

/// Summarise `samples`, sorting them in place.
pub fn summarize(samples: &mut [u64]) -> Summary {
    if samples.is_empty() {
        return Summary::default();
    }
    samples.sort_unstable();
    let n = samples.len() as f64;
    // Sum in u128: 2^20 samples of 2^40 ticks would overflow u64.
    let mean = samples.iter().map(|&s| u128::from(s)).sum::<u128>() as f64 / n;
    let variance = samples
        .iter()
        .map(|&s| (s as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    Summary {
        count: samples.len() as u64,
        mean,
        sd: variance.sqrt(),
        p50: percentile(samples, 50.0),
        p99: percentile(samples, 99.0),
        max: samples[samples.len() - 1],
    }
}

/// The `p`th percentile of ascending `sorted` by nearest rank: the
/// smallest sample with at least `p`% of the samples at or below it.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    assert!(!sorted.is_empty(), "percentile of no samples");
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The index of the median of `values` (the lower one for an even count).
pub fn median_index(values: &[f64]) -> Option<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    order.get((values.len().max(1) - 1) / 2).copied()
}

/// The median of `values` (the mean of the two middle ones for an even
/// count); `None` for none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_none() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn summary_of_known_data() {
        // Mean 5, population variance 4: the textbook example.
        let mut data = [2, 4, 4, 4, 5, 5, 7, 9];
        let s = summarize(&mut data);
        assert_eq!(s.count, 8);
        assert_eq!(s.mean, 5.0);
        assert_eq!(s.sd, 2.0);
        assert_eq!(s.p50, 4);
        assert_eq!(s.p99, 9);
        assert_eq!(s.max, 9);
        assert_eq!(data, [2, 4, 4, 4, 5, 5, 7, 9], "sorted in place");
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 50.0), 50);
        assert_eq!(percentile(&sorted, 99.0), 99);
        assert_eq!(percentile(&sorted, 100.0), 100);
        assert_eq!(percentile(&sorted, 0.0), 1);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[1, 2, 3], 50.0), 2);
    }

    #[test]
    fn empty_and_single_samples() {
        assert_eq!(summarize(&mut []), Summary::default());
        let s = summarize(&mut [42]);
        assert_eq!((s.mean, s.sd, s.p50, s.p99, s.max), (42.0, 0.0, 42, 42, 42));
    }

    #[test]
    fn median_index_picks_the_middle_value() {
        assert_eq!(median_index(&[3.0, 1.0, 2.0]), Some(2));
        assert_eq!(median_index(&[5.0]), Some(0));
        assert_eq!(median_index(&[4.0, 1.0, 3.0, 2.0]), Some(3));
        assert_eq!(median_index(&[]), None);
    }
}
