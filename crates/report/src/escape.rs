//! The one HTML escaper. Everything that comes from data (trace names,
//! allocator names, workload descriptions, titles) goes through [`escape`]
//! before it reaches a page or an SVG, in text and in attribute values alike.

/// Escape `&`, `<`, `>`, `"` and `'` so that `s` is safe as HTML or SVG
/// text and inside an attribute value quoted with either `"` or `'`.
///
/// ```
/// assert_eq!(nvmos_report::escape("a<b & \"c\" 'd'"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;");
/// ```
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_the_five_characters() {
        assert_eq!(escape("&"), "&amp;");
        assert_eq!(escape("<"), "&lt;");
        assert_eq!(escape(">"), "&gt;");
        assert_eq!(escape("\""), "&quot;");
        assert_eq!(escape("'"), "&#39;");
        assert_eq!(
            escape("<script>alert('x')</script>"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
        );
    }

    #[test]
    fn leaves_everything_else_alone() {
        assert_eq!(
            escape("Linux (as recorded) · µs ×1.81"),
            "Linux (as recorded) · µs ×1.81"
        );
        assert_eq!(escape(""), "");
    }

    #[test]
    fn escapes_ampersands_once() {
        // An already-escaped entity is data too: its & is escaped again, so
        // the page shows exactly the text it was given.
        assert_eq!(escape("&amp;"), "&amp;amp;");
    }
}
