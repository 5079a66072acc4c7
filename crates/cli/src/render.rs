//! Laying out terminal text: columns of rows for the commands that do not
//! use `nvmos_report::TextTable` yet.

use std::fmt::Write as _;

/// Lay out rows in columns: the first left-aligned, the rest right.
pub(crate) fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        for (c, text) in row.iter().enumerate() {
            if c == 0 {
                let _ = write!(out, "{text:<w$}", w = widths[0]);
            } else {
                let _ = write!(out, "  {text:>w$}", w = widths[c]);
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["a".to_string(), "1".to_string()],
            vec!["long".to_string(), "12345".to_string()],
        ];
        assert_eq!(align(&rows), "a         1\nlong  12345\n");
    }
}
