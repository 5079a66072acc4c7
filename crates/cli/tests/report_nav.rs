//! The navigation bar of a report page links only to pages that are in
//! the report folder: `nvmos evaluate` into a fresh folder writes
//! `index.html` alone, so its bar links nowhere; into a folder where
//! another study's page already is, it links to that page and no other.

use std::path::Path;
use std::process::Command;

fn sample() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data/ftrace_trace.txt")
}

/// Every `href` inside the page's `<nav>`.
fn nav_links(html: &str) -> Vec<String> {
    let Some(start) = html.find("<nav>") else {
        return Vec::new();
    };
    let nav = &html[start..start + html[start..].find("</nav>").expect("</nav>")];
    nav.split("href=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_string())
        .collect()
}

fn evaluate(traces: &Path, out: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .args(["evaluate", "--alloc", "buddy,iBuddy", "--traces"])
        .arg(traces)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "evaluate failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(out.join("index.html")).unwrap()
}

#[test]
fn every_nav_link_of_evaluates_report_points_to_a_file_in_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    std::fs::copy(sample(), traces.join("t.txt")).unwrap();

    // A fresh folder: evaluate writes one page, so there is nothing to
    // link to.
    let fresh = dir.path().join("fresh");
    let html = evaluate(&traces, &fresh);
    for href in nav_links(&html) {
        assert!(
            fresh.join(&href).is_file(),
            "index.html links to {href}, which evaluate did not write"
        );
    }
    assert!(nav_links(&html).is_empty(), "{:?}", nav_links(&html));

    // A folder that already holds the banks study's page: linked, and
    // still nothing that is not there.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("banks.html"), "<!DOCTYPE html>").unwrap();
    let html = evaluate(&traces, &shared);
    assert_eq!(nav_links(&html), ["banks.html"]);
    assert!(html.contains("<span aria-current=\"page\">"));
}
