//! Laying out terminal text: columns of rows for the commands that build
//! their tables as rows of strings.

/// Lay out rows in columns (the first row is the header): the first
/// column left-aligned, the rest right; through nvmos-report's TextTable.
pub(crate) fn align(rows: &[Vec<String>]) -> String {
    let Some((header, rest)) = rows.split_first() else {
        return String::new();
    };
    let mut t = nvmos_report::TextTable::new(header.clone());
    for r in rest {
        t.row(r.clone());
    }
    t.render()
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
