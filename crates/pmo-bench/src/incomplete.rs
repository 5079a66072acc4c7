//! A comparison with rows that could not run (PMDK missing, a medium that
//! failed) is incomplete: the benchmarks say so as data, and the front end
//! fails with it rather than showing it only in a table cell.

use crate::heap::HeapBench;
use crate::psync::Psync;

/// The rows of a comparison that have no figure, and why.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{} of {total} rows could not run, so the comparison is incomplete: {}", rows.len(), rows.join("; "))]
pub struct Incomplete {
    /// Each missing row and why ("PMDK on /dev/shm: libpmemobj not found").
    pub rows: Vec<String>,
    /// Rows in the comparison.
    pub total: usize,
}

fn incomplete(rows: Vec<String>, total: usize) -> Option<Incomplete> {
    (!rows.is_empty()).then_some(Incomplete { rows, total })
}

impl Psync {
    /// `None` when every row has its figure.
    pub fn incomplete(&self) -> Option<Incomplete> {
        let rows = self.missing().map(|r| {
            format!(
                "{} on {}: {}",
                r.system,
                r.medium,
                r.missing.as_deref().unwrap_or("no figure")
            )
        });
        let groups = self.groups.iter().filter_map(|g| {
            g.missing
                .as_ref()
                .map(|m| format!("psync_many of {} on {}: {m}", g.objects, g.medium))
        });
        incomplete(
            rows.chain(groups).collect(),
            self.rows.len() + self.groups.len(),
        )
    }
}

impl HeapBench {
    /// `None` when every row ran.
    pub fn incomplete(&self) -> Option<Incomplete> {
        let rows = self
            .rows
            .iter()
            .filter_map(|r| r.missing.as_ref().map(|m| format!("{}: {m}", r.system)));
        incomplete(rows.collect(), self.rows.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_counts_and_names_the_missing_rows() {
        assert_eq!(incomplete(Vec::new(), 4), None);
        let e = incomplete(vec!["PMDK: no libpmemobj".into()], 4).unwrap();
        assert_eq!(
            e.to_string(),
            "1 of 4 rows could not run, so the comparison is incomplete: PMDK: no libpmemobj"
        );
    }
}
