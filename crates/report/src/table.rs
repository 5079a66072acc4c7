//! Terminal tables for the CLI (comfy-table): no borders, two spaces
//! between columns, the first column left-aligned and the others
//! right-aligned (numbers line up on their last digit) unless told.

use comfy_table::{presets::NOTHING, Cell, CellAlignment, ContentArrangement, Table};

/// A text table under construction.
///
/// ```
/// use nvmos_report::TextTable;
/// let mut t = TextTable::new(["allocator", "ns"]);
/// t.row(["a", "1"]).row(["long", "12345"]);
/// assert_eq!(t.render(), "allocator     ns\na              1\nlong       12345\n");
/// ```
#[derive(Clone, Debug, Default)]
pub struct TextTable {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    left: Vec<usize>,
}

impl TextTable {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        TextTable {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            left: vec![0],
        }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    /// Left-align column `c` too (a text column such as "access").
    pub fn left(&mut self, c: usize) -> &mut Self {
        self.left.push(c);
        self
    }

    /// The table as lines ending in '\n', without trailing spaces. Rows
    /// shorter than the header are padded with empty cells.
    pub fn render(&self) -> String {
        let mut t = Table::new();
        t.load_preset(NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled);
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let cells = |row: &[String]| -> Vec<Cell> {
            (0..columns)
                .map(|c| {
                    let align = if self.left.contains(&c) {
                        CellAlignment::Left
                    } else {
                        CellAlignment::Right
                    };
                    Cell::new(row.get(c).map_or("", String::as_str)).set_alignment(align)
                })
                .collect()
        };
        t.set_header(cells(&self.header));
        for r in &self.rows {
            t.add_row(cells(r));
        }
        for c in 0..columns {
            if let Some(col) = t.column_mut(c) {
                col.set_cell_alignment(if self.left.contains(&c) {
                    CellAlignment::Left
                } else {
                    CellAlignment::Right
                });
            }
        }
        // comfy-table pads each cell with one space on each side; drop the
        // outer ones and the trailing padding of every line.
        let mut out = String::new();
        for line in t.to_string().lines() {
            let line = line.strip_prefix(' ').unwrap_or(line);
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_align_right_and_text_left() {
        let mut t = TextTable::new(["allocator", "access", "GB/s"]);
        t.left(1)
            .row(["buddy", "sequential", "12.5"])
            .row(["M3", "random", "3.25"]);
        assert_eq!(
            t.render(),
            "allocator  access      GB/s\nbuddy      sequential  12.5\nM3         random      3.25\n"
        );
    }

    #[test]
    fn ragged_rows_are_padded() {
        let mut t = TextTable::new(["a", "b", "c"]);
        t.row(["x"]);
        assert_eq!(t.render(), "a  b  c\nx\n");
    }
}
