//! Data-driven tables: one list of [`Column`]s applied to a slice of
//! serde-serialisable rows renders the terminal table ([`TextTable`]), the
//! page table ([`HtmlTable`], number cells carrying the `data-` attributes
//! the browser tests read) and CSV, so a study page is its column list and
//! a few lines, not three hand-written loops that can drift apart.
//!
//! Each row is turned into JSON once (`serde_json::to_value`); a column
//! names the value it shows by a dotted path into it (`"wear.max"`,
//! `"devices.0.swap_in_s"`, `""` for the whole row), and says how the
//! terminal prints it ([`Format`]). On the page a number column prints the
//! value with [`format_value`](crate::format_value) in a cell whose
//! attributes are the table's [`Key`]s then `data-field="<path>"`, so a
//! test can find the number in the JSON; a value that is not a number
//! (NaN is `null` in JSON) is shown as the terminal shows it, without
//! attributes, unless the table asks [`Columns::keep_nan`].
//!
//! ```
//! use nvmos_report::columns::{Column, Columns, Key};
//! #[derive(serde::Serialize)]
//! struct Row { name: &'static str, wear: Wear }
//! #[derive(serde::Serialize)]
//! struct Wear { max: u64, mean: f64 }
//! let rows = [Row { name: "buddy", wear: Wear { max: 12, mean: 1.5 } }];
//! let table = Columns::new([
//!     Column::text("allocator", "name"),
//!     Column::number("max", "wear.max"),
//!     Column::number("mean", "wear.mean").fixed(2),
//! ])
//! .key(Key::constant("data-list", "runs"))
//! .key(Key::index("data-row"));
//! assert_eq!(table.text(&rows)?, "allocator  max  mean\nbuddy       12  1.50\n");
//! let html = table.html(&rows)?.render();
//! assert!(html.contains("<td data-list=\"runs\" data-row=\"0\" data-field=\"wear.mean\">1.500</td>"));
//! assert_eq!(table.csv(&rows)?, "allocator,max,mean\nbuddy,12,1.5\n");
//! # Ok::<(), nvmos_report::Error>(())
//! ```

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::page::{Cell, Html, HtmlTable};
use crate::{format_value, Error, TextTable};

/// How the terminal (and CSV, for [`Format::Custom`]) prints a value.
/// `null` (NaN in JSON, `None`) prints "-" in every built-in format.
#[derive(Clone)]
pub enum Format {
    /// Strings as they are, other values as JSON writes them.
    Plain,
    /// [`format_value`](crate::format_value).
    Value,
    /// A fixed number of decimals.
    Fixed(usize),
    /// Anything else: given the value at the column's path.
    Custom(Arc<dyn Fn(&Value) -> String>),
}

impl fmt::Debug for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Format::Plain => f.write_str("Plain"),
            Format::Value => f.write_str("Value"),
            Format::Fixed(d) => write!(f, "Fixed({d})"),
            Format::Custom(_) => f.write_str("Custom"),
        }
    }
}

impl Format {
    fn apply(&self, v: &Value) -> String {
        match (self, v) {
            (Format::Custom(f), v) => f(v),
            (_, Value::Null) => "-".into(),
            (Format::Plain, Value::String(s)) => s.clone(),
            (Format::Value, Value::Number(n)) => n.as_f64().map_or("-".into(), format_value),
            (&Format::Fixed(d), Value::Number(n)) => {
                n.as_f64().map_or("-".into(), |x| format!("{x:.d$}"))
            }
            (_, v) => v.to_string(),
        }
    }
}

/// Where a column's value comes from.
#[derive(Clone)]
enum Source {
    /// A dotted path into the row's JSON.
    Path(String),
    /// Computed from the row's JSON (a ratio of two fields).
    Derived(Arc<dyn Fn(&Value) -> Value>),
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Path(p) => write!(f, "Path({p:?})"),
            Source::Derived(_) => f.write_str("Derived"),
        }
    }
}

/// Which outputs show a column.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Show {
    All,
    Terminal,
    Files,
}

/// Markup for a page cell, given the whole row (a name with a warning).
type Markup = Arc<dyn Fn(&Value) -> Option<Html>>;

/// One column: its header, the value it shows and how.
#[derive(Clone)]
pub struct Column {
    header: String,
    source: Source,
    format: Format,
    number: bool,
    left: bool,
    field: Option<String>,
    show: Show,
    markup: Option<Markup>,
    timing: bool,
}

impl fmt::Debug for Column {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Column")
            .field("header", &self.header)
            .field("source", &self.source)
            .field("format", &self.format)
            .field("field", &self.field)
            .finish_non_exhaustive()
    }
}

impl Column {
    /// A text column, left-aligned, printed as it is.
    pub fn text(header: impl Into<String>, path: impl Into<String>) -> Self {
        Column {
            header: header.into(),
            source: Source::Path(path.into()),
            format: Format::Plain,
            number: false,
            left: true,
            field: None,
            show: Show::All,
            markup: None,
            timing: false,
        }
    }

    /// A number column: right-aligned, [`format_value`](crate::format_value)
    /// in the terminal, a `data-field="<path>"` cell on the page.
    pub fn number(header: impl Into<String>, path: impl Into<String>) -> Self {
        Column {
            number: true,
            left: false,
            format: Format::Value,
            ..Column::text(header, path)
        }
    }

    /// A right-aligned figure that is not a JSON number on the page (a
    /// count with a unit, "3/16").
    pub fn figure(header: impl Into<String>, path: impl Into<String>) -> Self {
        Column {
            left: false,
            ..Column::text(header, path)
        }
    }

    /// A number computed from the row (its JSON), right-aligned; on the
    /// page printed like a number but without `data-` attributes, since it
    /// is not in the JSON.
    pub fn derived(header: impl Into<String>, f: impl Fn(&Value) -> Value + 'static) -> Self {
        Column {
            source: Source::Derived(Arc::new(f)),
            ..Column::number(header, "")
        }
    }

    /// Print with `decimals` decimals in the terminal.
    pub fn fixed(self, decimals: usize) -> Self {
        self.format(Format::Fixed(decimals))
    }

    /// Print through `f` in the terminal (and as a figure on the page).
    pub fn with(self, f: impl Fn(&Value) -> String + 'static) -> Self {
        self.format(Format::Custom(Arc::new(f)))
    }

    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// Name the number `data-field="field"` on the page instead of its
    /// path (a derived number gets attributes only with a field), and head
    /// its CSV column with `field`.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Only in the terminal table (a figure the page shows elsewhere).
    pub fn terminal_only(mut self) -> Self {
        self.show = Show::Terminal;
        self
    }

    /// Only on the page and in CSV (too wide for a terminal).
    pub fn files_only(mut self) -> Self {
        self.show = Show::Files;
        self
    }

    /// On the page, the cell is `f(row)` where that is `Some` (a name
    /// with a warning beside it).
    pub fn markup(mut self, f: impl Fn(&Value) -> Option<Html> + 'static) -> Self {
        self.markup = Some(Arc::new(f));
        self
    }

    /// A timing: a figure that differs from run to run, left out of
    /// [`Columns::deterministic`] tables.
    pub fn timing(mut self) -> Self {
        self.timing = true;
        self
    }

    fn value<'a>(&self, row: &'a Value) -> std::borrow::Cow<'a, Value> {
        match &self.source {
            Source::Path(p) => std::borrow::Cow::Borrowed(lookup(row, p)),
            Source::Derived(f) => std::borrow::Cow::Owned(f(row)),
        }
    }
}

/// The value at a dotted path (`"a.b.0"`); `null` where there is none.
pub fn lookup<'a>(row: &'a Value, path: &str) -> &'a Value {
    if path.is_empty() {
        return row;
    }
    path.split('.')
        .try_fold(row, |v, part| match v {
            Value::Object(m) => m.get(part),
            Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        })
        .unwrap_or(&Value::Null)
}

/// An attribute every number cell of a row carries before `data-field`.
#[derive(Clone, Debug)]
pub enum Key {
    /// The same value on every row (`data-list="runs"`).
    Constant(String, String),
    /// The row's index in the slice (`data-row="3"`).
    Index(String),
    /// A value of the row (`data-alloc="<name>"`).
    Field(String, String),
    /// The JSON pointer of the cell's own number: the prefix, the row's
    /// index, the column's path (`data-json="/traces/0/rows/3/wear/max"`);
    /// written after `data-field`.
    Pointer(String, String),
}

impl Key {
    pub fn constant(attr: impl Into<String>, value: impl Into<String>) -> Self {
        Key::Constant(attr.into(), value.into())
    }
    pub fn index(attr: impl Into<String>) -> Self {
        Key::Index(attr.into())
    }
    pub fn field(attr: impl Into<String>, path: impl Into<String>) -> Self {
        Key::Field(attr.into(), path.into())
    }
    pub fn pointer(attr: impl Into<String>, prefix: impl Into<String>) -> Self {
        Key::Pointer(attr.into(), prefix.into())
    }
}

/// A table definition: columns and the keys of its page cells.
#[derive(Clone, Debug, Default)]
pub struct Columns {
    columns: Vec<Column>,
    keys: Vec<Key>,
    keep_nan: bool,
}

impl Columns {
    pub fn new(columns: impl IntoIterator<Item = Column>) -> Self {
        Columns {
            columns: columns.into_iter().collect(),
            keys: Vec::new(),
            keep_nan: false,
        }
    }

    /// On the page, a number column's `null` (NaN, ±inf in the study) is
    /// a "NaN" cell with its attributes, for tests that read every cell,
    /// instead of a bare "-".
    pub fn keep_nan(mut self) -> Self {
        self.keep_nan = true;
        self
    }

    pub fn key(mut self, key: Key) -> Self {
        self.keys.push(key);
        self
    }

    /// Add a column (a per-device column built in a loop).
    pub fn push(&mut self, column: Column) -> &mut Self {
        self.columns.push(column);
        self
    }

    /// Add columns.
    pub fn extend(&mut self, columns: impl IntoIterator<Item = Column>) -> &mut Self {
        self.columns.extend(columns);
        self
    }

    fn values<R: Serialize>(rows: &[R]) -> Result<Vec<Value>, Error> {
        rows.iter()
            .map(|r| serde_json::to_value(r).map_err(Error::Json))
            .collect()
    }

    /// The terminal table.
    pub fn text_table<R: Serialize>(&self, rows: &[R]) -> Result<TextTable, Error> {
        let columns: Vec<&Column> = self.shown(Show::Terminal).collect();
        let mut t = TextTable::new(columns.iter().map(|c| c.header.clone()));
        for (i, c) in columns.iter().enumerate() {
            if c.left {
                t.left(i);
            }
        }
        for row in Self::values(rows)? {
            t.row(columns.iter().map(|c| c.format.apply(&c.value(&row))));
        }
        Ok(t)
    }

    fn shown(&self, output: Show) -> impl Iterator<Item = &Column> {
        self.columns
            .iter()
            .filter(move |c| c.show == Show::All || c.show == output)
    }

    /// The same table without its [`Column::timing`] columns: what the
    /// same options give on any machine.
    pub fn deterministic(mut self) -> Self {
        self.columns.retain(|c| !c.timing);
        self
    }

    /// The terminal table as Markdown (the book's results pages): the
    /// same columns and formats, text columns left-aligned and the others
    /// right-aligned.
    pub fn markdown<R: Serialize>(&self, rows: &[R]) -> Result<String, Error> {
        let columns: Vec<&Column> = self.shown(Show::Terminal).collect();
        let header: Vec<String> = columns.iter().map(|c| c.header.clone()).collect();
        let left: Vec<bool> = columns.iter().map(|c| c.left).collect();
        let cells: Vec<Vec<String>> = Self::values(rows)?
            .iter()
            .map(|row| {
                columns
                    .iter()
                    .map(|c| c.format.apply(&c.value(row)))
                    .collect()
            })
            .collect();
        Ok(crate::markdown::table(&header, &left, &cells))
    }

    /// The terminal table, rendered.
    pub fn text<R: Serialize>(&self, rows: &[R]) -> Result<String, Error> {
        Ok(self.text_table(rows)?.render())
    }

    /// The page table.
    pub fn html<R: Serialize>(&self, rows: &[R]) -> Result<HtmlTable, Error> {
        let mut t = HtmlTable::new(self.shown(Show::Files).map(|c| c.header.clone()));
        for (i, row) in Self::values(rows)?.iter().enumerate() {
            let keys: Vec<(String, String)> = self
                .keys
                .iter()
                .filter_map(|k| match k {
                    Key::Constant(a, v) => Some((a.clone(), v.clone())),
                    Key::Index(a) => Some((a.clone(), i.to_string())),
                    Key::Field(a, p) => Some((a.clone(), Format::Plain.apply(lookup(row, p)))),
                    Key::Pointer(..) => None,
                })
                .collect();
            let cells = self.shown(Show::Files).map(|c| {
                if let Some(html) = c.markup.as_ref().and_then(|f| f(row)) {
                    return Cell::Html(html);
                }
                let v = c.value(row);
                let x = match v.as_f64() {
                    None if self.keep_nan && c.number && v.is_null() => Some(f64::NAN),
                    x => x,
                };
                match (x, &c.source) {
                    (Some(x), Source::Derived(_)) if c.field.is_none() => Cell::number(x, &[]),
                    (Some(x), source) if c.number => {
                        let path = match source {
                            Source::Path(p) => p.as_str(),
                            Source::Derived(_) => "",
                        };
                        let field = c.field.as_deref().unwrap_or(path);
                        let mut attrs: Vec<(String, String)> = keys.clone();
                        attrs.push(("data-field".into(), field.into()));
                        for k in self.keys.iter().filter(|_| !path.is_empty()) {
                            if let Key::Pointer(a, prefix) = k {
                                let p = format!("{prefix}/{i}/{}", path.replace('.', "/"));
                                attrs.push((a.clone(), p));
                            }
                        }
                        let attrs: Vec<(&str, &str)> = attrs
                            .iter()
                            .map(|(a, v)| (a.as_str(), v.as_str()))
                            .collect();
                        Cell::number(x, &attrs)
                    }
                    _ if c.left => Cell::text(c.format.apply(&v)),
                    _ => Cell::figure(c.format.apply(&v)),
                }
            });
            t.row(cells.collect());
        }
        Ok(t)
    }

    /// CSV: a header (each column's [`field`](Column::field), else its
    /// header), then each row; numbers at full precision (Rust's shortest
    /// round-trip form) unless the column prints through
    /// [`Format::Custom`]; `null` empty.
    pub fn csv<R: Serialize>(&self, rows: &[R]) -> Result<String, Error> {
        let records = Self::values(rows)?
            .iter()
            .map(|row| {
                self.shown(Show::Files)
                    .map(|c| match (&c.format, c.value(row).as_ref()) {
                        (Format::Custom(f), v) => f(v),
                        (_, Value::String(s)) => s.clone(),
                        (_, Value::Null) => String::new(),
                        (_, Value::Number(n)) if n.is_f64() => {
                            n.as_f64().map_or(String::new(), |x| x.to_string())
                        }
                        (_, v) => v.to_string(),
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>();
        let header: Vec<&str> = self
            .shown(Show::Files)
            .map(|c| c.field.as_deref().unwrap_or(&c.header))
            .collect();
        crate::csv_text(&header, &records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        name: &'static str,
        v: f64,
        n: u64,
        list: Vec<f64>,
    }

    fn rows() -> Vec<Row> {
        vec![
            Row {
                name: "a<b",
                v: 1.23456,
                n: 3,
                list: vec![0.5, 2.0],
            },
            Row {
                name: "c",
                v: f64::NAN,
                n: 40,
                list: vec![],
            },
        ]
    }

    fn table() -> Columns {
        Columns::new([
            Column::text("name", "name"),
            Column::number("v", "v"),
            Column::figure("n/v", "")
                .with(|r| format!("{}/{}", r["n"], r["list"].as_array().map_or(0, Vec::len))),
            Column::number("second", "list.1").fixed(1),
            Column::derived("2n", |r| (r["n"].as_f64().unwrap_or(0.0) * 2.5).into()).fixed(1),
        ])
        .key(Key::field("data-alloc", "name"))
    }

    #[test]
    fn the_terminal_prints_every_format_and_dashes_for_null() {
        assert_eq!(
            table().text(&rows()).unwrap(),
            "name      v   n/v  second     2n\na<b   1.235   3/2     2.0    7.5\nc         -  40/0       -  100.0\n"
        );
    }

    #[test]
    fn page_numbers_carry_keys_and_field_and_nan_has_no_attributes() {
        let html = table().html(&rows()).unwrap().render();
        assert!(html.contains("<td class=\"text\">a&lt;b</td>"), "{html}");
        assert!(html.contains("<td data-alloc=\"a&lt;b\" data-field=\"v\">1.235</td>"));
        assert!(html.contains("<td data-alloc=\"a&lt;b\" data-field=\"list.1\">2</td>"));
        assert!(html.contains("<td>3/2</td>"));
        assert!(
            html.contains("<td>7.500</td>"),
            "a derived number has no attributes"
        );
        assert!(html.contains("<td>-</td>"), "NaN is a dash, not a number");
        assert!(!html.contains("data-alloc=\"c\" data-field=\"v\""));
    }

    #[test]
    fn csv_keeps_full_precision_and_empties_null() {
        assert_eq!(
            table().csv(&rows()).unwrap(),
            "name,v,n/v,second,2n\na<b,1.23456,3/2,2,7.5\nc,,40/0,,100\n"
        );
    }

    #[test]
    fn outputs_pick_their_columns_and_markup_replaces_a_cell() {
        let t = Columns::new([
            Column::text("name", "name").markup(|r| {
                (r["n"].as_u64() > Some(10)).then(|| Html::new().text("big ").markup("<b>!</b>"))
            }),
            Column::number("v", "v").terminal_only(),
            Column::derived("n", |r| r["n"].clone())
                .field("count")
                .files_only(),
        ])
        .key(Key::field("data-alloc", "name"));
        assert_eq!(
            t.text(&rows()).unwrap(),
            "name      v\na<b   1.235\nc         -\n"
        );
        assert_eq!(t.csv(&rows()).unwrap(), "name,count\na<b,3\nc,40\n");
        let html = t.html(&rows()).unwrap().render();
        assert!(
            html.contains("<td class=\"text\">big <b>!</b></td>"),
            "{html}"
        );
        assert!(html.contains("<td data-alloc=\"a&lt;b\" data-field=\"count\">3</td>"));
        assert!(!html.contains("1.235"));
    }

    #[test]
    fn pointers_name_each_number_and_kept_nan_keeps_its_attributes() {
        let t = Columns::new([
            Column::text("name", "name"),
            Column::number("second", "list.1"),
        ])
        .key(Key::pointer("data-json", "/x/rows"))
        .keep_nan();
        let html = t.html(&rows()).unwrap().render();
        assert!(
            html.contains("<td data-field=\"list.1\" data-json=\"/x/rows/0/list/1\">2</td>"),
            "{html}"
        );
        assert!(
            html.contains("<td data-field=\"list.1\" data-json=\"/x/rows/1/list/1\">NaN</td>"),
            "{html}"
        );
    }

    #[test]
    fn lookup_walks_objects_and_arrays() {
        let v = serde_json::json!({"a": {"b": [1, {"c": 2}]}});
        assert_eq!(lookup(&v, "a.b.1.c"), &serde_json::json!(2));
        assert_eq!(lookup(&v, "a.x"), &Value::Null);
        assert_eq!(lookup(&v, ""), &v);
    }
}
