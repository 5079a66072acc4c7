//! The page of the frame allocators beside LLFree: made from bench-peers'
//! record by `nvmos reproduce --only peers --peers-from DIR`, refused
//! when the record is not one or would be misread, when the options come
//! without `--only peers`, and when the benchmark would run without an
//! LLFree checkout.

use std::path::Path;

mod reproduce_common;
use reproduce_common::nvmos;

/// A record `bench-peers --cpu-time --rounds 2 --patterns rand --alloc
/// LLFree,iBuddy,LiS-31 --json` wrote on this machine (figures rounded).
const RECORD: &str = r#"{"cells": [
 {"allocators": [{"alloc_ns": [33.2, 33.1], "free_ns": [28.3, 27.9], "name": "LLFree"},
   {"alloc_ns": [18.0, 19.4], "free_ns": [25.1, 25.0], "name": "iBuddy"},
   {"alloc_ns": [21.3, 22.2], "free_ns": [38.6, 37.7], "name": "LiS-31"}],
  "paired": false, "pattern": "rand", "threads": 1},
 {"allocators": [{"alloc_ns": [32.6, 33.0], "free_ns": [86.7, 71.3], "name": "LLFree"},
   {"alloc_ns": [18.2, 17.3], "free_ns": [154.6, 154.1], "name": "iBuddy"},
   {"alloc_ns": [20.0, 21.3], "free_ns": [97.6, 88.7], "name": "LiS-31"}],
  "paired": false, "pattern": "rand", "threads": 2}],
 "clock": "cpu", "cores": 2, "frames": 1048576, "huge_pages": false,
 "llfree_rev": "441c8d1335b1bd820688e72f50f26004657f9363", "memory_gib": 4,
 "rounds": 2, "seed": 42, "tool": "bench-peers"}"#;

#[test]
fn the_peers_page_is_made_from_the_record_and_holds_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    std::fs::write(runs.join("peers.json"), RECORD).unwrap();
    let out = dir.path().join("out");
    let o = nvmos(
        dir.path(),
        &[
            "reproduce",
            "--only",
            "peers",
            "--peers-from",
            "runs",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let page = std::fs::read_to_string(out.join("peers.md")).unwrap();
    assert!(page.contains("commit `441c8d1335b1`"), "{page}");
    // iBuddy's frees at 1 thread: 25.1/28.3 and 25.0/27.9, median 0.89.
    assert!(page.contains("0.89× (0.89–0.90)"), "{page}");
    // LiS-31 at 2 threads: 97.6/86.7 = 1.13 and 88.7/71.3 = 1.24: missed.
    assert!(page.contains("LiS-31: shuffled frees"), "{page}");
    assert!(page.contains("MISSED"), "{page}");
    assert!(out.join("data/peers.json").is_file());
}

#[test]
fn a_bad_record_or_a_missing_checkout_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let peers = |extra: &[&str]| {
        let mut a = vec!["reproduce", "--only", "peers", "--out", out];
        a.extend_from_slice(extra);
        nvmos(dir.path(), &a)
    };

    // No record in the folder.
    let o = peers(&["--peers-from", "runs"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("peers.json: missing"), "{err}");

    // A record with a round missing for one allocator: refused, naming
    // the file, the cell and the allocator; nothing written.
    let short = RECORD.replacen("[25.1, 25.0]", "[25.1]", 1);
    std::fs::write(runs.join("peers.json"), short).unwrap();
    let o = peers(&["--peers-from", "runs"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("peers.json: rand at 1 threads, iBuddy: 1 free_ns figures for 2 rounds"),
        "{err}"
    );
    // Not bench-peers' JSON at all.
    std::fs::write(runs.join("peers.json"), "{\"rows\": []}").unwrap();
    let o = peers(&["--peers-from", "runs"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not `crates/frames/bench-peers/run.sh --json` output"),
        "{err}"
    );
    assert!(!Path::new(out).join("peers.md").exists());

    // Running the benchmark needs an LLFree checkout.
    let o = peers(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("--llfree-source DIR"), "{err}");
    // The options mean nothing without --only peers.
    let o = nvmos(
        dir.path(),
        &["reproduce", "--only", "evaluate", "--peers-from", "runs"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("only with --only peers"));
}
