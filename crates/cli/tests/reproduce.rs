//! The book's generated results are current, and the check that says so
//! can fail: `nvmos reproduce --check` on the repository's own book, and
//! on copies of it with one number edited.

use std::path::{Path, PathBuf};
use std::process::Output;

mod reproduce_common;
use reproduce_common::nvmos;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every deterministic figure of the book's results pages is what the
/// pipeline gives on the shipped traces (the `--quick` subset: the wear
/// page in full, the scaled studies where committed at that scale), and
/// every page, README's table and the CLI reference render from their
/// committed data. On failure the message names each file and line; run
/// `nvmos reproduce --install` after a change that moves a figure.
#[test]
fn the_book_is_what_the_pipeline_produces() {
    let o = nvmos(&repo(), &["reproduce", "--check", "--quick"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("the book's results are current"), "{out}");
    // The wear page is re-run, not only re-rendered.
    assert!(!out.contains(" 0 deterministic sections"), "{out}");
}

/// A copy of the book in a temporary folder: the results pages and their
/// data, the CLI reference and README.
fn copy_of_the_book() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let from = repo();
    for dir in ["docs/src/results/data", "docs/src/reference"] {
        std::fs::create_dir_all(tmp.path().join(dir)).unwrap();
    }
    let mut files = vec![
        PathBuf::from("README.md"),
        "docs/src/reference/cli.md".into(),
    ];
    for dir in ["docs/src/results", "docs/src/results/data"] {
        for e in std::fs::read_dir(from.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                files.push(p.strip_prefix(&from).unwrap().to_path_buf());
            }
        }
    }
    for f in files {
        std::fs::copy(from.join(&f), tmp.path().join(&f)).unwrap();
    }
    tmp
}

/// Change the last digit of the `nth` generated line of `page` that has
/// a digit (in README, only the lines of its generated table).
fn edit_one_digit(page: &Path, nth: usize) -> bool {
    let text = std::fs::read_to_string(page).unwrap();
    let mut seen = 0;
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let generated = if page.ends_with("README.md") {
        let begin = lines
            .iter()
            .position(|l| l.contains("results table begins"))
            .unwrap();
        let end = lines
            .iter()
            .position(|l| l.contains("results table ends"))
            .unwrap();
        begin + 1..end
    } else {
        0..lines.len()
    };
    for line in lines[generated].iter_mut() {
        // Not the stamp (the date, commit and load) nor the comment: the
        // figures of the page.
        if line.starts_with('*') || line.starts_with("<!--") {
            continue;
        }
        if let Some(i) = line.rfind(|c: char| c.is_ascii_digit()) {
            if seen == nth {
                let d = line.as_bytes()[i] - b'0';
                let new = char::from(b'0' + (d + 1) % 10);
                line.replace_range(i..i + 1, &new.to_string());
                std::fs::write(page, lines.join("\n") + "\n").unwrap();
                return true;
            }
            seen += 1;
        }
    }
    false
}

/// Editing any single number of any results page, of README's table or
/// of the CLI reference makes the check fail and name the file.
#[test]
fn an_edited_number_fails_the_check() {
    let repo = repo();
    let results = repo.join("docs/src/results");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(&repo).unwrap().to_path_buf())
        .collect();
    pages.sort();
    assert!(pages.len() >= 6, "results pages: {pages:?}");
    pages.push("README.md".into());
    pages.push("docs/src/reference/cli.md".into());
    let mut edited = 0;
    for page in &pages {
        // A number near the top and one further down.
        for nth in [0, 7] {
            let book = copy_of_the_book();
            let clean = nvmos(book.path(), &["reproduce", "--check", "--data-only"]);
            assert!(clean.status.success(), "the copy itself: {}", text(&clean));
            if !edit_one_digit(&book.path().join(page), nth) {
                continue;
            }
            edited += 1;
            let o = nvmos(book.path(), &["reproduce", "--check", "--data-only"]);
            assert!(
                !o.status.success(),
                "{} edited: {}",
                page.display(),
                text(&o)
            );
            let err = String::from_utf8_lossy(&o.stderr);
            let name = page.file_name().unwrap().to_string_lossy();
            assert!(err.contains(&*name), "{} edited: {err}", page.display());
        }
    }
    // Every page has a number near its top, most one further down too.
    assert!(
        edited > pages.len(),
        "only {edited} edits in {} pages",
        pages.len()
    );
}

/// A book with no results data is refused by name, not passed.
#[test]
fn a_missing_book_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let o = nvmos(tmp.path(), &["reproduce", "--check", "--data-only"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("docs/src/results/data"),
        "{}",
        text(&o)
    );
}
