//! A linked list built with absolute pointers in a pool object survives
//! closing the pool and mapping the object again (the seed's pointer-rich
//! data without a file behind it), in every attach mode, and a second run
//! of the example program in a new process sees what the first psynced.

use std::process::Command;

use nvmos_pmo::attach::predict::PredictorKind;
use nvmos_pmo::{Access, KdfParams, Mode, PPtr, Perm, Pool};

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Node {
    value: u64,
    next: PPtr<Node>,
}

#[test]
fn pointers_stay_valid_across_reopen_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    let key = b"list key";
    {
        let pool = Pool::create(&path, 8 << 20).unwrap();
        pool.pcreate_with("list", 256 << 10, Some(key), KdfParams::INSECURE_FAST)
            .unwrap();
        let mut a = pool
            .attach("list", Perm::Write, Some(key), Mode::DecryptAtFault)
            .unwrap();
        // 100 nodes spread over every page, each pointing at the previous.
        let mut head = PPtr::<Node>::null();
        for i in 0..100u64 {
            let p = a.pptr::<Node>(8 + (i as usize * 2600) % (250 << 10) / 16 * 16);
            assert!(a.set(
                p,
                Node {
                    value: i,
                    next: head
                }
            ));
            head = p;
        }
        assert!(a.set(a.pptr::<PPtr<Node>>(0), head));
        a.detach().unwrap();
    }
    let modes = [
        Mode::DecryptAtFault,
        Mode::DramCache,
        Mode::Predict {
            predictor: PredictorKind::Stream,
            depth: 8,
        },
    ];
    for mode in modes {
        let pool = Pool::open(&path, Access::ReadOnly).unwrap();
        let a = pool.attach("list", Perm::Read, Some(key), mode).unwrap();
        let mut p = a.get(a.pptr::<PPtr<Node>>(0)).unwrap();
        let mut seen = Vec::new();
        while !p.is_null() {
            let node = a.get(p).expect("a pointer inside the object");
            seen.push(node.value);
            p = node.next;
        }
        assert_eq!(seen, (0..100).rev().collect::<Vec<_>>(), "{mode:?}");
        // A pointer outside the object is refused, not followed.
        assert_eq!(
            a.get(PPtr::<Node>::from_offset(a.as_ptr() as usize, a.len())),
            None
        );
        drop(a);
    }
}

#[test]
fn the_example_program_keeps_its_list_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("plist.pool");
    let key = dir.path().join("key");
    std::fs::write(&key, "a long passphrase").unwrap();
    // `cargo test` builds the examples beside the test binaries.
    let exe = std::env::current_exe().unwrap();
    let example = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/plist");
    assert!(example.exists(), "{} not built", example.display());
    let run = |args: &[&str]| {
        let out = Command::new(&example)
            .arg(&pool)
            .arg(&key)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["push", "1"]);
    run(&["push", "2"]);
    run(&["push", "3"]);
    assert_eq!(run(&["list"]).trim(), "3 2 1");
    // Pop frees the node's heap block; a push reuses the space.
    assert_eq!(run(&["pop"]).trim(), "3");
    run(&["push", "4"]);
    assert_eq!(run(&["list"]).trim(), "4 2 1");
    std::fs::write(&key, "the wrong passphrase").unwrap();
    let out = Command::new(&example)
        .arg(&pool)
        .arg(&key)
        .arg("list")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("wrong key"), "{stderr}");
}
