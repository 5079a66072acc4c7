//! Markdown for the book: tables whose cells are escaped so that no value
//! can break the table's layout.

/// A cell's text made safe inside a Markdown table: `|` escaped, line
/// breaks folded to spaces, and an empty cell shown as a space.
pub fn cell(text: &str) -> String {
    let folded: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let escaped = folded.replace('|', "\\|");
    if escaped.trim().is_empty() {
        " ".into()
    } else {
        escaped
    }
}

/// A Markdown table: `header`, then `rows`; column `i` left-aligned where
/// `left[i]` (text) and right-aligned otherwise (numbers). A row shorter
/// than the header is padded with empty cells.
///
/// ```
/// let t = nvmos_report::markdown::table(
///     &["allocator".into(), "max".into()],
///     &[true, false],
///     &[vec!["buddy".into(), "12".into()]],
/// );
/// assert_eq!(t, "| allocator | max |\n|:--|--:|\n| buddy | 12 |\n");
/// ```
pub fn table(header: &[String], left: &[bool], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let line = |cells: &mut dyn Iterator<Item = String>| {
        let cells: Vec<String> = cells.collect();
        format!("| {} |\n", cells.join(" | "))
    };
    out.push_str(&line(&mut header.iter().map(|h| cell(h))));
    out.push('|');
    for i in 0..header.len() {
        out.push_str(if left.get(i).copied().unwrap_or(false) {
            ":--|"
        } else {
            "--:|"
        });
    }
    out.push('\n');
    for row in rows {
        let mut cells = (0..header.len()).map(|i| cell(row.get(i).map_or("", String::as_str)));
        out.push_str(&line(&mut cells));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_or_a_line_break_in_a_value_cannot_break_the_table() {
        let t = table(
            &["a".into(), "b".into()],
            &[true, true],
            &[
                vec!["x|y".into(), "two\nlines".into()],
                vec!["short".into()],
            ],
        );
        assert_eq!(
            t,
            "| a | b |\n|:--|:--|\n| x\\|y | two lines |\n| short |   |\n"
        );
    }
}
