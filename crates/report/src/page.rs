//! The one page style: a skeleton with the title, navigation between the
//! study pages, a summary block at the top, then sections of notes, tables
//! and charts; one CSS; one check script that marks each chart rendered.

use std::fmt::Write as _;

use crate::chart::Chart;
use crate::{escape, format_value};

/// The CSS of every page.
pub const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 1em;color:#222;max-width:1100px}\
nav{font-size:14px;margin-bottom:1em}nav a,nav span{margin-right:1.2em}nav span{font-weight:bold}\
section.summary{background:#f6f8fa;border:1px solid #dde;padding:.5em 1em;margin:1em 0}section.summary h2{margin-top:.3em}\
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}\
th:first-child,td:first-child,td.text{text-align:left}th{background:#f3f3f3}\
svg.chart{display:block;margin:1em 0;background:#fff;border:1px solid #eee;width:100%;max-width:760px;height:auto}\
h2{margin-top:2em;border-bottom:1px solid #ddd}.note{color:#555;font-size:13px}\
.table-wrap{overflow-x:auto;width:max-content;max-width:calc(50% + 50vw - 2.5em);margin:1em 0;\
background:linear-gradient(90deg,#fff 30%,#fff0) left/3em 100% no-repeat local,linear-gradient(270deg,#fff 30%,#fff0) right/3em 100% no-repeat local,\
radial-gradient(farthest-side at 0 50%,#0003,#0000) left/1em 100% no-repeat scroll,radial-gradient(farthest-side at 100% 50%,#0003,#0000) right/1em 100% no-repeat scroll #fff}\
.table-wrap table{margin:0}\
.met{color:#060}.missed{color:#a00}pre{font-size:12px;overflow-x:auto}";

/// Marks each `svg.chart` `data-rendered="yes"` once the browser has laid
/// it out with a non-empty box and at least one `.mark` (a data mark), and
/// the body `data-checked="yes"` when done: headless-browser tests read
/// both from the DOM.
pub const CHECK_SCRIPT: &str = "document.querySelectorAll('svg.chart').forEach(function(s){\
var b=s.getBBox();var marks=s.querySelectorAll('.mark').length;\
s.setAttribute('data-marks',String(marks));\
s.setAttribute('data-rendered',(b.width>0&&b.height>0&&marks>0)?'yes':'no');});\
document.body.setAttribute('data-checked','yes');";

/// A link in the navigation bar.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NavLink {
    /// File name in the report folder.
    pub href: &'static str,
    pub label: &'static str,
}

/// The study pages the CLI writes into one report folder, in seed order.
/// Each command writes one of them; pass [`Page::nav`] the ones that are
/// in the folder being written ([`OutputDir::nav`](crate::OutputDir::nav)),
/// never the whole list: a link to a page no command wrote is a dead end.
pub const STUDY_PAGES: [NavLink; 5] = [
    NavLink {
        href: "index.html",
        label: "wear (evaluate, seed 000)",
    },
    NavLink {
        href: "pmo.html",
        label: "PMOs (seed 001)",
    },
    NavLink {
        href: "banks.html",
        label: "banks (seed 002)",
    },
    NavLink {
        href: "swap.html",
        label: "swap (seed 003)",
    },
    NavLink {
        href: "power.html",
        label: "power (seed 004)",
    },
];

/// Trusted HTML: built from escaped text, `'static` markup written in our
/// code, tables and charts. Data never becomes markup without [`escape`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Html(String);

impl Html {
    pub fn new() -> Self {
        Html(String::new())
    }

    /// Text, escaped.
    pub fn text(mut self, s: &str) -> Self {
        self.0.push_str(&escape(s));
        self
    }

    /// Markup written in the program (`<b>`, `<code>`, `<sup>7</sup>`).
    pub fn markup(mut self, s: &'static str) -> Self {
        self.0.push_str(s);
        self
    }

    /// `<tag>text</tag>`, the text escaped; `tag` from the program.
    pub fn tag(mut self, tag: &'static str, s: &str) -> Self {
        let _ = write!(self.0, "<{tag}>{}</{tag}>", escape(s));
        self
    }

    /// A number as [`format_value`] prints it.
    pub fn number(mut self, v: f64) -> Self {
        self.0.push_str(&format_value(v));
        self
    }

    /// A number in a `<b>` carrying `data-` attributes, findable like a
    /// table cell.
    pub fn figure(mut self, v: f64, attrs: &[(&str, &str)]) -> Self {
        self.0.push_str("<b");
        push_attrs(&mut self.0, attrs);
        let _ = write!(self.0, ">{}</b>", format_value(v));
        self
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn push_attrs(out: &mut String, attrs: &[(&str, &str)]) {
    for (name, value) in attrs {
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let name = if ok { name } else { "data-invalid" };
        let _ = write!(out, " {name}=\"{}\"", escape(value));
    }
}

/// A table cell.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// Text, escaped, left-aligned.
    Text(String),
    /// A number printed by [`format_value`] (plus a suffix such as "×"),
    /// right-aligned, with `data-` attributes naming where it comes from in
    /// the page's JSON: `<td data-trace=".." data-alloc=".." data-field="..">`.
    Number {
        value: f64,
        suffix: &'static str,
        attrs: Vec<(String, String)>,
    },
    /// Preformatted, right-aligned text (an integer count, "1.81×", "-").
    Figure(String),
    /// Trusted markup.
    Html(Html),
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Self {
        Cell::Text(s.into())
    }

    /// A number with its `data-` attributes, in the order given.
    pub fn number(value: f64, attrs: &[(&str, &str)]) -> Self {
        Cell::Number {
            value,
            suffix: "",
            attrs: attrs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        }
    }

    pub fn figure(s: impl Into<String>) -> Self {
        Cell::Figure(s.into())
    }

    fn render(&self, out: &mut String) {
        match self {
            Cell::Text(s) => {
                let _ = write!(out, "<td class=\"text\">{}</td>", escape(s));
            }
            Cell::Number {
                value,
                suffix,
                attrs,
            } => {
                out.push_str("<td");
                let a: Vec<(&str, &str)> = attrs
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                push_attrs(out, &a);
                let _ = write!(out, ">{}{}</td>", format_value(*value), escape(suffix));
            }
            Cell::Figure(s) => {
                let _ = write!(out, "<td>{}</td>", escape(s));
            }
            Cell::Html(h) => {
                let _ = write!(out, "<td class=\"text\">{}</td>", h.as_str());
            }
        }
    }
}

/// An HTML table: headings and rows of cells. The first column is the
/// row's name (left-aligned).
#[derive(Clone, Debug, Default)]
pub struct HtmlTable {
    headings: Vec<String>,
    rows: Vec<Vec<Cell>>,
}

impl HtmlTable {
    pub fn new<S: Into<String>>(headings: impl IntoIterator<Item = S>) -> Self {
        HtmlTable {
            headings: headings.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<Cell>) -> &mut Self {
        self.rows.push(cells);
        self
    }

    /// `<div class="table-wrap"><table>…</table></div>`: a table wider
    /// than the text column grows to the right up to the window's edge,
    /// and one wider still scrolls sideways inside its own box, with a
    /// shadow at the edge that has more (the page never widens, and no
    /// column is cut off unseen).
    pub fn render(&self) -> String {
        let mut out = String::from("<div class=\"table-wrap\"><table><tr>");
        for h in &self.headings {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr>");
        for row in &self.rows {
            out.push_str("<tr>");
            for cell in row {
                cell.render(&mut out);
            }
            out.push_str("</tr>");
        }
        out.push_str("</table></div>");
        out
    }
}

/// A page under construction. Everything added is escaped or trusted
/// [`Html`]; [`render`](Page::render) gives the whole document.
///
/// ```
/// use nvmos_report::page::{Cell, HtmlTable, Page, STUDY_PAGES};
/// let mut t = HtmlTable::new(["allocator", "max/mean"]);
/// t.row(vec![Cell::text("iBuddy"), Cell::number(1.25, &[("data-alloc", "iBuddy"), ("data-field", "max_over_mean")])]);
/// let mut page = Page::new("index.html", "nvmos evaluate", "Wear of page-frame allocators");
/// page.nav(&STUDY_PAGES[..1]).summary_table(&t).section("t1", "trace t1").table(&t);
/// let html = page.render();
/// assert!(html.contains("<td data-alloc=\"iBuddy\" data-field=\"max_over_mean\">1.250</td>"));
/// ```
#[derive(Clone, Debug)]
pub struct Page {
    file: String,
    title: String,
    heading: String,
    nav: Vec<NavLink>,
    summary: String,
    body: String,
}

impl Page {
    /// A page written as `file` (its own nav entry is shown unlinked),
    /// with a `<title>` and an `<h1>`.
    pub fn new(
        file: impl Into<String>,
        title: impl Into<String>,
        heading: impl Into<String>,
    ) -> Self {
        Page {
            file: file.into(),
            title: title.into(),
            heading: heading.into(),
            nav: Vec::new(),
            summary: String::new(),
            body: String::new(),
        }
    }

    /// The navigation bar between study pages: give it the pages that
    /// exist beside this one ([`OutputDir::nav`](crate::OutputDir::nav)).
    /// The page's own entry is shown unlinked; a bar with no other page is
    /// not shown.
    pub fn nav(&mut self, links: &[NavLink]) -> &mut Self {
        self.nav = links.to_vec();
        self
    }

    /// A paragraph in the summary block at the top.
    pub fn summary_note(&mut self, html: &Html) -> &mut Self {
        let _ = write!(self.summary, "<p>{}</p>", html.as_str());
        self
    }

    /// A table in the summary block at the top (the figures across traces
    /// or workloads).
    pub fn summary_table(&mut self, table: &HtmlTable) -> &mut Self {
        self.summary.push_str(&table.render());
        self
    }

    /// A new section: `<h2 id=…>`.
    pub fn section(&mut self, id: &str, heading: &str) -> &mut Self {
        let _ = write!(
            self.body,
            "<h2 id=\"{}\">{}</h2>",
            escape(id),
            escape(heading)
        );
        self
    }

    /// A paragraph of notes (smaller, grey).
    pub fn note(&mut self, html: &Html) -> &mut Self {
        let _ = write!(self.body, "<p class=\"note\">{}</p>", html.as_str());
        self
    }

    pub fn table(&mut self, table: &HtmlTable) -> &mut Self {
        self.body.push_str(&table.render());
        self
    }

    pub fn chart(&mut self, chart: &Chart) -> &mut Self {
        self.body.push_str(chart.svg());
        self
    }

    /// Preformatted text (a terminal table), escaped.
    pub fn pre(&mut self, text: &str) -> &mut Self {
        let _ = write!(self.body, "<pre>{}</pre>", escape(text));
        self
    }

    /// Trusted markup.
    pub fn html(&mut self, html: &Html) -> &mut Self {
        self.body.push_str(html.as_str());
        self
    }

    /// The document.
    pub fn render(&self) -> String {
        let mut out = format!(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{STYLE}</style></head><body>",
            escape(&self.title)
        );
        if self.nav.iter().any(|l| l.href != self.file) {
            out.push_str("<nav>");
            for l in &self.nav {
                if l.href == self.file {
                    let _ = write!(
                        out,
                        "<span aria-current=\"page\">{}</span>",
                        escape(l.label)
                    );
                } else {
                    let _ = write!(
                        out,
                        "<a href=\"{}\">{}</a>",
                        escape(l.href),
                        escape(l.label)
                    );
                }
            }
            out.push_str("</nav>");
        }
        let _ = write!(out, "<h1>{}</h1>", escape(&self.heading));
        if !self.summary.is_empty() {
            let _ = write!(
                out,
                "<section class=\"summary\"><h2 id=\"summary\">Summary</h2>{}</section>",
                self.summary
            );
        }
        out.push_str(&self.body);
        let _ = writeln!(out, "<script>{CHECK_SCRIPT}</script></body></html>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_carry_their_attributes_first_as_the_browser_test_reads_them() {
        let mut t = HtmlTable::new(["allocator", "max"]);
        t.row(vec![
            Cell::text("a<b"),
            Cell::number(
                f64::INFINITY,
                &[
                    ("data-trace", "t&1"),
                    ("data-alloc", "a<b"),
                    ("data-field", "max"),
                ],
            ),
        ]);
        let html = t.render();
        assert!(html.contains("<td class=\"text\">a&lt;b</td>"));
        assert!(
            html.contains(
                "<td data-trace=\"t&amp;1\" data-alloc=\"a&lt;b\" data-field=\"max\">inf</td>"
            ),
            "{html}"
        );
    }

    #[test]
    fn page_has_nav_summary_style_and_check_script() {
        let mut p = Page::new("swap.html", "nvmos <swap>", "Swap");
        p.nav(&STUDY_PAGES)
            .summary_note(&Html::new().text("a & b").markup(" <b>bold</b>"))
            .section("s1", "O'Brien")
            .pre("x < y");
        let html = p.render();
        assert!(html.contains("<title>nvmos &lt;swap&gt;</title>"));
        assert!(html.contains("<span aria-current=\"page\">swap (seed 003)</span>"));
        assert!(html.contains("<a href=\"index.html\">"));
        assert!(html.contains("<section class=\"summary\">"));
        assert!(html.contains("<p>a &amp; b <b>bold</b></p>"));
        assert!(html.contains("<h2 id=\"s1\">O&#39;Brien</h2>"));
        assert!(html.contains("<pre>x &lt; y</pre>"));
        assert!(html.contains(STYLE) && html.contains(CHECK_SCRIPT));
        assert!(
            html.find("<section class=\"summary\">") < html.find("<h2 id=\"s1\">"),
            "summary at the top"
        );
    }

    #[test]
    fn every_table_scrolls_in_its_own_box() {
        let mut t = HtmlTable::new((0..40).map(|i| format!("a long column heading {i}")));
        t.row((0..40).map(|i| Cell::number(i as f64, &[])).collect());
        let mut p = Page::new("index.html", "t", "t");
        p.summary_table(&t).section("s", "s").table(&t);
        let html = p.render();
        assert_eq!(html.matches("<table>").count(), 2);
        assert_eq!(
            html.matches("<div class=\"table-wrap\"><table>").count(),
            2,
            "every table in a wrapper"
        );
        assert_eq!(
            html.matches("</table></div>").count(),
            2,
            "closed right after it"
        );
        // The wrapper scrolls sideways and never grows past the window.
        let rule = STYLE.split(".table-wrap{").nth(1).unwrap();
        let rule = &rule[..rule.find('}').unwrap()];
        assert!(rule.contains("overflow-x:auto"), "{rule}");
        assert!(rule.contains("max-width:calc(50% + 50vw"), "{rule}");
    }

    #[test]
    fn nav_shows_only_the_pages_given_and_not_a_lone_page() {
        let mut p = Page::new("index.html", "t", "t");
        p.nav(&STUDY_PAGES[..1]);
        assert!(!p.render().contains("<nav>"), "a bar with only itself");
        p.nav(&[STUDY_PAGES[0], STUDY_PAGES[2]]);
        let html = p.render();
        assert!(html.contains("<nav><span aria-current=\"page\">"));
        assert!(html.contains("<a href=\"banks.html\">"));
        assert!(!html.contains("pmo.html") && !html.contains("swap.html"));
    }

    #[test]
    fn bad_attribute_names_cannot_break_the_tag() {
        let h = Html::new().figure(1.0, &[("data-x\" onload=\"x", "v")]);
        assert_eq!(h.as_str(), "<b data-invalid=\"v\">1</b>");
    }
}
