//! The mapping engine end to end, on the volatile sealed `MemBacking`:
//! faults resolve with the right data in every mode, dirty pages are found
//! exactly, psync/detach/attach keeps the data and the absolute pointers,
//! a failed integrity check fails the access and surfaces as an error, and
//! bad attaches are refused.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nvmos_pmo::attach::mem_backing::{MemBacking, PAGE_SIZE};
use nvmos_pmo::attach::predict::PredictorKind;
use nvmos_pmo::attach::{cache, AttachError, Attachment, Mode, Perm};
use rand::{Rng, SeedableRng};

/// A distinct fixed address per test, so tests run in parallel in one
/// process without sharing ranges.
fn base(test: usize) -> usize {
    0x5000_0000_0000 + test * 0x1_0000_0000
}

fn pattern(pages: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    (0..pages * PAGE_SIZE).map(|_| rng.gen()).collect()
}

fn all_modes() -> Vec<Mode> {
    let mut modes = vec![Mode::DecryptAtFault, Mode::DramCache];
    for predictor in [
        PredictorKind::Stream,
        PredictorKind::Stride,
        PredictorKind::Markov,
        PredictorKind::Adaptive,
    ] {
        for depth in [0, 1, 8] {
            modes.push(Mode::Predict { predictor, depth });
        }
    }
    modes
}

#[test]
fn faults_resolve_with_the_right_data_in_every_mode() {
    let pages = 40;
    let data = pattern(pages, 1);
    let plain = Arc::new(MemBacking::with_contents(base(1), &data, false));
    let a = Attachment::attach(plain, Perm::Read, Mode::Plain).unwrap();
    assert_eq!(a.as_ptr() as usize, base(1));
    assert_eq!(a.as_slice(), &data[..]);
    assert_eq!(a.stats().pages_decrypted, 0);
    a.detach().unwrap();

    for (i, mode) in all_modes().into_iter().enumerate() {
        let b = base(2) + i * 0x100_0000;
        cache::evict(b);
        let sealed = Arc::new(MemBacking::with_contents(b, &data, true));
        // Touch pages out of order too, so predictors see a non-trivial stream.
        let a = Attachment::attach(sealed.clone(), Perm::Read, mode).unwrap();
        for p in [7, 3, 39, 0] {
            assert_eq!(
                a.as_slice()[p * PAGE_SIZE..(p + 1) * PAGE_SIZE],
                data[p * PAGE_SIZE..(p + 1) * PAGE_SIZE],
                "{mode:?} page {p}"
            );
        }
        assert_eq!(a.as_slice(), &data[..], "{mode:?}");
        let s = a.detach().unwrap();
        // Every page arrived once: by its fault or by prediction, both for
        // a late prediction (the page faulted while being installed).
        assert_eq!(
            s.faults + s.predicted,
            pages as u64 + s.predicted_late,
            "{mode:?}: {s:?}"
        );
        assert!(
            s.pages_decrypted >= pages as u64,
            "{mode:?}: every page decrypted once"
        );
        cache::evict(b);
    }
}

#[test]
fn plain_mode_refuses_a_sealed_object() {
    let sealed = Arc::new(MemBacking::new(base(3), 2, true));
    let e = Attachment::attach(sealed, Perm::Read, Mode::Plain).unwrap_err();
    assert!(e.to_string().contains("without encryption"), "{e}");
}

#[test]
fn dirty_pages_are_found_exactly_and_staged_exactly() {
    let pages = 256;
    for (i, mode) in [
        Mode::DecryptAtFault,
        Mode::DramCache,
        Mode::Predict {
            predictor: PredictorKind::Stream,
            depth: 8,
        },
    ]
    .into_iter()
    .enumerate()
    {
        let b = base(4) + i * 0x100_0000;
        let object = Arc::new(MemBacking::with_contents(b, &pattern(pages, 2), true));
        let mut a = Attachment::attach(object.clone(), Perm::Write, mode).unwrap();
        // Read everything first, so writes hit clean mapped pages
        // (write-protect faults), then write a first-touch page or two
        // (missing-page write faults) too.
        let mut sum = 0u64;
        for p in 0..pages - 10 {
            sum += a.as_slice()[p * PAGE_SIZE] as u64;
        }
        std::hint::black_box(sum);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7 + i as u64);
        let k = 37;
        let mut chosen = BTreeSet::new();
        while chosen.len() < k {
            chosen.insert(rng.gen_range(0..pages));
        }
        let slice = a.as_mut_slice().unwrap();
        for &p in &chosen {
            let off = p * PAGE_SIZE + rng.gen_range(0..PAGE_SIZE);
            slice[off] = slice[off].wrapping_add(1);
        }
        let expected: Vec<usize> = chosen.iter().copied().collect();
        assert_eq!(a.dirty_pages(), expected, "{mode:?}");
        let synced = a.psync().unwrap();
        assert_eq!(synced.pages, k as u64);
        assert_eq!(
            object.last_commit(),
            expected,
            "{mode:?}: exactly those pages staged"
        );
        assert!(a.dirty_pages().is_empty());
        // Re-protected: writing one of them again makes it dirty again, alone.
        a.as_mut_slice().unwrap()[expected[0] * PAGE_SIZE] ^= 0xff;
        assert_eq!(a.dirty_pages(), vec![expected[0]]);
        a.psync().unwrap();
        assert_eq!(object.last_commit(), vec![expected[0]]);
        // Nothing written: psync commits nothing.
        a.psync().unwrap();
        assert!(object.last_commit().is_empty());
        drop(a);
        cache::evict(b);
    }
}

#[test]
fn psync_detach_attach_sees_the_data_and_pointers_stay_valid() {
    let pages = 32;
    for (i, mode) in all_modes().into_iter().enumerate() {
        let b = base(5) + i * 0x100_0000;
        cache::evict(b);
        let object = Arc::new(MemBacking::new(b, pages, true));
        let mut a = Attachment::attach(object.clone(), Perm::Write, mode).unwrap();
        // A linked list through the object with absolute pointers: node k at
        // page 3k holds its value and the address of node k + 1.
        let base_ptr = a.as_ptr();
        let slice = a.as_mut_slice().unwrap();
        for k in 0..10usize {
            let at = 3 * k * PAGE_SIZE;
            let next = if k < 9 {
                base_ptr as usize + 3 * (k + 1) * PAGE_SIZE
            } else {
                0
            };
            slice[at..at + 8].copy_from_slice(&(k as u64 * 1000).to_le_bytes());
            slice[at + 8..at + 16].copy_from_slice(&(next as u64).to_le_bytes());
        }
        a.psync().unwrap();
        // Written after the psync and dropped without one: lost, as in a crash.
        a.as_mut_slice().unwrap()[PAGE_SIZE] = 99;
        drop(a);
        // A different mode for the second attach, to cross cache and no cache.
        let again = if i % 2 == 0 {
            Mode::DecryptAtFault
        } else {
            Mode::DramCache
        };
        let a = Attachment::attach(object.clone(), Perm::Read, again).unwrap();
        assert_eq!(a.as_ptr(), base_ptr, "attached at the same address");
        let mut node = base_ptr as usize;
        let mut values = Vec::new();
        while node != 0 {
            // SAFETY: the pointers point inside the attached object.
            let value = unsafe { std::ptr::read(node as *const u64) };
            node = unsafe { std::ptr::read((node + 8) as *const u64) } as usize;
            values.push(value);
        }
        assert_eq!(
            values,
            (0..10).map(|k| k * 1000).collect::<Vec<u64>>(),
            "{mode:?}"
        );
        assert_eq!(
            a.as_slice()[PAGE_SIZE],
            0,
            "{mode:?}: unsynced write is gone"
        );
        a.detach().unwrap();
        cache::evict(b);
    }
}

#[test]
fn detach_psyncs_and_the_cache_follows_writes_from_any_mode() {
    let b = base(6);
    cache::evict(b);
    let object = Arc::new(MemBacking::new(b, 8, true));
    // Fill the DRAM cache with the zero pages.
    let a = Attachment::attach(object.clone(), Perm::Read, Mode::DramCache).unwrap();
    assert!(a.as_slice().iter().all(|&x| x == 0));
    a.detach().unwrap();
    // A decrypt-at-fault writer changes page 2; detach psyncs.
    let mut w = Attachment::attach(object.clone(), Perm::Write, Mode::DecryptAtFault).unwrap();
    w.as_mut_slice().unwrap()[2 * PAGE_SIZE + 5] = 77;
    let s = w.detach().unwrap();
    assert_eq!(s.pages_synced, 1);
    // The cache serves every page, with the new contents, decrypting none.
    let r = Attachment::attach(object.clone(), Perm::Read, Mode::DramCache).unwrap();
    assert_eq!(r.as_slice()[2 * PAGE_SIZE + 5], 77);
    assert!(r
        .as_slice()
        .iter()
        .enumerate()
        .all(|(i, &x)| x == 0 || i == 2 * PAGE_SIZE + 5));
    let s = r.detach().unwrap();
    assert_eq!(s.pages_decrypted, 0, "{s:?}");
    assert_eq!(s.cache_hits, 8, "{s:?}");
    // Decrypt-at-fault decrypts every page again on every attach.
    let r = Attachment::attach(object, Perm::Read, Mode::DecryptAtFault).unwrap();
    assert_eq!(r.as_slice().iter().filter(|&&x| x == 77).count(), 1);
    assert_eq!(r.detach().unwrap().pages_decrypted, 8);
    cache::evict(b);
}

#[test]
fn the_predictor_installs_pages_before_they_are_touched() {
    let b = base(7);
    cache::evict(b);
    let pages = 64;
    let data = pattern(pages, 3);
    let object = Arc::new(MemBacking::with_contents(b, &data, true));
    let a = Attachment::attach(
        object,
        Perm::Read,
        Mode::Predict {
            predictor: PredictorKind::Stream,
            depth: 8,
        },
    )
    .unwrap();
    assert_eq!(a.as_slice()[0], data[0]);
    // Wait (bounded) for the worker to install pages 1..=8.
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.resident_pages() < 9 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.resident_pages(), 9);
    assert_eq!(a.predicted_pages(), (1..=8).collect::<Vec<_>>());
    // Touching them faults no more.
    for p in 1..=8 {
        assert_eq!(a.as_slice()[p * PAGE_SIZE + 1], data[p * PAGE_SIZE + 1]);
    }
    let s = a.stats();
    assert_eq!(s.faults, 1, "{s:?}");
    assert_eq!(s.predicted, 8);
    assert_eq!(s.pages_decrypted, 9);
    drop(a);
    cache::evict(b);
}

#[test]
fn a_write_to_a_predicted_page_is_seen_as_used_and_dirty() {
    let b = base(8);
    cache::evict(b);
    let object = Arc::new(MemBacking::new(b, 16, true));
    let mut a = Attachment::attach(
        object.clone(),
        Perm::Write,
        Mode::Predict {
            predictor: PredictorKind::Stream,
            depth: 4,
        },
    )
    .unwrap();
    std::hint::black_box(a.as_slice()[0]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.resident_pages() < 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.resident_pages(), 5);
    a.as_mut_slice().unwrap()[3 * PAGE_SIZE] = 1;
    // Written with the value it had: not a change.
    a.as_mut_slice().unwrap()[2 * PAGE_SIZE] = 0;
    assert_eq!(
        a.dirty_pages(),
        vec![3],
        "a predicted page is dirty when it changed"
    );
    assert_eq!(
        a.stats().wp_faults,
        0,
        "predicted pages are installed writable"
    );
    a.psync().unwrap();
    assert_eq!(object.last_commit(), vec![3]);
    let s = a.stats();
    assert_eq!(s.predicted_seen_used, 1);
    assert_eq!(a.predicted_pages(), vec![1, 2, 4]);
    // After psync they are tracked like every page: a write faults (or,
    // with asynchronous write-protection, psync's scan finds it).
    a.as_mut_slice().unwrap()[4 * PAGE_SIZE] = 1;
    let s = a.stats();
    let expected_faults = if s.pagemap_scans > 0 { 0 } else { 1 };
    assert_eq!(s.wp_faults, expected_faults, "{s:?}");
    assert_eq!(a.dirty_pages(), vec![4]);
    a.detach().unwrap();
    assert_eq!(object.last_commit(), vec![4]);
    cache::evict(b);
}

/// A page that fails its check: the access fails (here a kernel-mode read
/// via write(2), which gets EFAULT; a user access gets SIGBUS, checked in a
/// child process below) and the error names the page.
#[test]
fn a_failed_check_fails_the_access_and_is_returned_naming_the_page() {
    for (i, mode) in [
        Mode::DecryptAtFault,
        Mode::DramCache,
        Mode::Predict {
            predictor: PredictorKind::Stream,
            depth: 2,
        },
    ]
    .into_iter()
    .enumerate()
    {
        let b = base(9) + i * 0x100_0000;
        cache::evict(b);
        let object = Arc::new(MemBacking::with_contents(b, &pattern(4, 4), true));
        object.tamper(2, 1234);
        let a = Attachment::attach(object.clone(), Perm::Write, mode).unwrap();
        let mut fds = [0; 2];
        // SAFETY: plain pipe(2) and write(2) calls on our own descriptors.
        unsafe { assert_eq!(libc::pipe(fds.as_mut_ptr()), 0) };
        let n = unsafe { libc::write(fds[1], a.as_ptr().add(2 * PAGE_SIZE).cast(), 16) };
        let errno = std::io::Error::last_os_error().raw_os_error();
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert_eq!(n, -1, "{mode:?}: the read of a tampered page must fail");
        assert_eq!(errno, Some(libc::EFAULT));
        let e = a.fault_error().expect("the failure is recorded");
        let text = e.to_string();
        assert!(
            text.contains("page 2") && text.contains(&format!("{b:#x}")),
            "{text}"
        );
        assert!(matches!(e, AttachError::FaultFailed { page: 2, .. }));
        // Other pages still work; psync refuses while the failure stands.
        assert_eq!(
            a.as_slice()[PAGE_SIZE..PAGE_SIZE + 4],
            pattern(4, 4)[PAGE_SIZE..PAGE_SIZE + 4]
        );
        assert!(matches!(
            a.psync(),
            Err(AttachError::FaultFailed { page: 2, .. })
        ));
        assert!(matches!(
            a.detach(),
            Err(AttachError::FaultFailed { page: 2, .. })
        ));
        assert_eq!(object.commits(), 0, "nothing committed");
        cache::evict(b);
    }
}

const CHILD_ENV: &str = "NVMOS_PMO_SIGBUS_CHILD";

#[test]
fn sigbus_child() {
    // Runs only as the child of the test below: touch a tampered page.
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let b = base(10);
    let object = Arc::new(MemBacking::with_contents(b, &[5u8; 2 * PAGE_SIZE], true));
    object.tamper(1, 9);
    let a = Attachment::attach(object, Perm::Read, Mode::DecryptAtFault).unwrap();
    let v = std::hint::black_box(a.as_slice()[PAGE_SIZE]);
    // Reaching here means the program saw data from a tampered page.
    println!("read {v}");
    std::process::exit(0);
}

#[test]
fn a_user_access_to_a_tampered_page_gets_sigbus() {
    use std::os::unix::process::ExitStatusExt;
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "sigbus_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGBUS), "{out:?}");
}

#[test]
fn attaching_over_a_taken_range_is_refused() {
    let b = base(11);
    // SAFETY: an anonymous mapping of our own at a fixed free address.
    let p = unsafe {
        libc::mmap(
            b as *mut libc::c_void,
            PAGE_SIZE,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    assert_eq!(p as usize, b);
    // The object's range overlaps the mapping at its fourth page.
    let object = Arc::new(MemBacking::new(b - 3 * PAGE_SIZE, 8, true));
    let e = Attachment::attach(object.clone(), Perm::Write, Mode::DecryptAtFault).unwrap_err();
    assert!(matches!(e, AttachError::RangeTaken { .. }), "{e}");
    assert!(e.to_string().contains("already mapped"), "{e}");
    unsafe { libc::munmap(p, PAGE_SIZE) };
    // Once free it attaches.
    Attachment::attach(object, Perm::Write, Mode::DecryptAtFault)
        .unwrap()
        .detach()
        .unwrap();
}

#[test]
fn attaching_twice_is_refused() {
    let b = base(12);
    let object = Arc::new(MemBacking::new(b, 4, true));
    let a = Attachment::attach(object.clone(), Perm::Write, Mode::DecryptAtFault).unwrap();
    for perm in [Perm::Write, Perm::Read] {
        let e = Attachment::attach(object.clone(), perm, Mode::DecryptAtFault).unwrap_err();
        assert!(
            matches!(
                e,
                AttachError::AlreadyAttached {
                    perm: Perm::Write,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("already attached"), "{e}");
    }
    a.detach().unwrap();
    Attachment::attach(object, Perm::Write, Mode::DecryptAtFault)
        .unwrap()
        .detach()
        .unwrap();
}

#[test]
fn a_read_only_attachment_has_no_writable_view() {
    let object = Arc::new(MemBacking::new(base(13), 2, true));
    let mut a = Attachment::attach(object.clone(), Perm::Read, Mode::DecryptAtFault).unwrap();
    assert!(a.as_mut_slice().is_none());
    assert_eq!(a.psync().unwrap().pages, 0);
    a.detach().unwrap();
    assert_eq!(object.commits(), 0);
}

#[test]
fn bad_objects_are_refused() {
    let e = Attachment::attach(
        Arc::new(MemBacking::new(base(14) + 100, 2, true)),
        Perm::Read,
        Mode::DecryptAtFault,
    )
    .unwrap_err();
    assert!(e.to_string().contains("multiple of the page size"), "{e}");
    let e = Attachment::attach(
        Arc::new(MemBacking::new(base(14), 0, true)),
        Perm::Read,
        Mode::DecryptAtFault,
    )
    .unwrap_err();
    assert!(e.to_string().contains("no pages"), "{e}");
    let e = Attachment::attach(
        Arc::new(MemBacking::new(base(14), 2, true)),
        Perm::Read,
        Mode::Predict {
            predictor: PredictorKind::Markov,
            depth: 5000,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("depth"), "{e}");
}

#[test]
fn attachments_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Attachment>();
    let object = Arc::new(MemBacking::with_contents(
        base(15),
        &[3u8; 3 * PAGE_SIZE],
        true,
    ));
    let mut a = Attachment::attach(object.clone(), Perm::Write, Mode::DramCache).unwrap();
    let a = std::thread::spawn(move || {
        a.as_mut_slice().unwrap()[PAGE_SIZE] = 4;
        a
    })
    .join()
    .unwrap();
    assert_eq!(a.as_slice()[PAGE_SIZE..PAGE_SIZE + 2], [4, 3]);
    a.detach().unwrap();
    assert_eq!(object.last_commit(), vec![1]);
    cache::evict(base(15));
}

#[test]
fn markov_learns_an_object_s_fault_order_across_attaches() {
    let b = base(16);
    cache::evict(b);
    let pages = 32;
    let data = pattern(pages, 5);
    let object = Arc::new(MemBacking::with_contents(b, &data, true));
    let order = [9usize, 2, 27, 14, 5, 30, 1];
    let mode = Mode::Predict {
        predictor: PredictorKind::Markov,
        depth: 2,
    };
    // First attach: the chain learns the order; nothing to predict yet.
    let a = Attachment::attach(object.clone(), Perm::Read, mode).unwrap();
    for &p in &order {
        std::hint::black_box(a.as_slice()[p * PAGE_SIZE]);
    }
    assert_eq!(a.detach().unwrap().predicted, 0);
    // The second attach still faults (the DRAM cache serves the faults
    // without decrypting); its first fault predicts the learnt successors.
    let a = Attachment::attach(object.clone(), Perm::Read, mode).unwrap();
    std::hint::black_box(a.as_slice()[9 * PAGE_SIZE]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.resident_pages() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.predicted_pages(), vec![2, 27]);
    assert_eq!(
        a.as_slice()[27 * PAGE_SIZE..28 * PAGE_SIZE],
        data[27 * PAGE_SIZE..28 * PAGE_SIZE]
    );
    a.detach().unwrap();
    cache::evict(b);
}

#[test]
fn threads_faulting_at_once_get_the_right_data_and_each_page_opens_once() {
    let pages = 256;
    let data = Arc::new(pattern(pages, 6));
    for (i, mode) in [
        Mode::DecryptAtFault,
        Mode::Predict {
            predictor: PredictorKind::Stream,
            depth: 4,
        },
    ]
    .into_iter()
    .enumerate()
    {
        let b = base(17) + i * 0x100_0000;
        cache::evict(b);
        let object = Arc::new(MemBacking::with_contents(b, &data, true));
        let a = Arc::new(Attachment::attach(object, Perm::Read, mode).unwrap());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (a, data) = (a.clone(), data.clone());
                std::thread::spawn(move || {
                    let mut order: Vec<usize> = (0..pages).collect();
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                    for k in (1..order.len()).rev() {
                        order.swap(k, rng.gen_range(0..=k));
                    }
                    for p in order {
                        let r = p * PAGE_SIZE..(p + 1) * PAGE_SIZE;
                        assert_eq!(a.as_slice()[r.clone()], data[r], "page {p}");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = a.stats();
        assert_eq!(s.pages_decrypted, pages as u64, "{mode:?}: {s:?}");
        Arc::into_inner(a).unwrap().detach().unwrap();
        cache::evict(b);
    }
}

#[test]
fn hot_pages_stay_writable_and_every_write_still_reaches_a_psync() {
    // DRAM-cache modes track pages written in an interval by comparison
    // at the next psync instead of write-protect faults.
    let pages = 64;
    let b = base(20);
    cache::evict(b);
    let object = Arc::new(MemBacking::with_contents(b, &pattern(pages, 20), true));
    // Synchronous write-protection: the handler serves write faults.
    let sync_wp = nvmos_pmo::attach::Tuning {
        async_wp: false,
        ..Default::default()
    };
    let mut a =
        Attachment::attach_tuned(object.clone(), Perm::Write, Mode::DramCache, sync_wp).unwrap();
    let mut sum = 0u64;
    for p in 0..pages {
        sum += a.as_slice()[p * PAGE_SIZE] as u64;
    }
    std::hint::black_box(sum);
    // First interval: pages installed writable, compared at psync.
    a.as_mut_slice().unwrap()[5 * PAGE_SIZE + 1] ^= 1;
    a.psync().unwrap();
    assert_eq!(object.last_commit(), vec![5]);
    let s0 = a.stats();
    assert_eq!(s0.wp_faults, 0);
    assert_eq!(s0.pages_kept_writable, 1, "{s0:?}");
    // Page 5 stays writable: writing it again takes no fault and is synced.
    a.as_mut_slice().unwrap()[5 * PAGE_SIZE + 2] ^= 1;
    // Page 9 was compared unchanged and protected: its write faults.
    a.as_mut_slice().unwrap()[9 * PAGE_SIZE] ^= 1;
    let s1 = a.stats();
    assert_eq!(s1.wp_faults, 1, "only page 9 faults");
    a.psync().unwrap();
    assert_eq!(object.last_commit(), vec![5, 9]);
    // Page 5 unchanged in this interval: compared, found clean, protected.
    a.as_mut_slice().unwrap()[9 * PAGE_SIZE] ^= 2;
    a.psync().unwrap();
    assert_eq!(object.last_commit(), vec![9]);
    a.as_mut_slice().unwrap()[5 * PAGE_SIZE] ^= 4;
    assert_eq!(a.stats().wp_faults, 2, "page 5 went back to fault tracking");
    // A write that restores a page's committed bytes commits nothing:
    // the object's state is exactly what the cache frame holds.
    a.as_mut_slice().unwrap()[5 * PAGE_SIZE] ^= 4;
    a.psync().unwrap();
    let expect: Vec<usize> = vec![5, 9];
    let committed = object.last_commit();
    assert!(
        committed.iter().all(|p| expect.contains(p)),
        "{committed:?}"
    );
    let bytes = a.as_slice().to_vec();
    a.detach().unwrap();
    cache::evict(b);
    let again = Attachment::attach(object, Perm::Read, Mode::DecryptAtFault).unwrap();
    assert_eq!(again.as_slice(), &bytes[..], "every write reached a psync");
}

#[test]
fn tuned_fault_paths_give_the_same_data() {
    use nvmos_pmo::attach::Tuning;
    let pages = 700;
    let data = pattern(pages, 21);
    for (i, tuning) in [
        Tuning {
            spin_us: 50,
            workers: 1,
            run_pages: 16,
            fault_around: 0,
            async_wp: true,
        },
        Tuning {
            spin_us: 0,
            workers: 2,
            run_pages: 512,
            fault_around: 0,
            async_wp: true,
        },
        Tuning {
            spin_us: 20,
            workers: 3,
            run_pages: 1,
            fault_around: 64,
            async_wp: false,
        },
        Tuning {
            spin_us: 0,
            workers: 1,
            run_pages: 64,
            fault_around: 512,
            async_wp: true,
        },
    ]
    .into_iter()
    .enumerate()
    {
        let b = base(21) + i * 0x100_0000;
        cache::evict(b);
        let object = Arc::new(MemBacking::with_contents(b, &data, true));
        let mode = Mode::Predict {
            predictor: PredictorKind::Stream,
            depth: 512,
        };
        let perm = if i % 2 == 0 { Perm::Read } else { Perm::Write };
        let mut a = Attachment::attach_tuned(object.clone(), perm, mode, tuning).unwrap();
        assert_eq!(a.as_slice(), &data[..], "{tuning:?}");
        if let Some(w) = a.as_mut_slice() {
            w[3 * PAGE_SIZE] ^= 1;
            w[650 * PAGE_SIZE + 9] ^= 1;
            a.psync().unwrap();
            assert_eq!(object.last_commit(), vec![3, 650], "{tuning:?}");
        }
        if tuning.fault_around == 512 {
            assert!(a.stats().faults <= 3, "{:?}", a.stats());
        }
        let s = a.detach().unwrap();
        assert_eq!(
            s.faults + s.predicted - s.predicted_late,
            pages as u64,
            "{tuning:?}: {s:?}"
        );
        assert!(s.pages_copied >= pages as u64 - s.predicted_late);
        assert!(s.copy_ioctls >= 1 && s.handler_wakeups >= 1, "{s:?}");
        if tuning.spin_us == 0 {
            assert_eq!(s.handler_spin_hits, 0);
        }
        cache::evict(b);
    }
    let bad = Tuning {
        workers: 0,
        ..Tuning::default()
    };
    let object = Arc::new(MemBacking::with_contents(
        base(22),
        &data[..PAGE_SIZE],
        true,
    ));
    let e = Attachment::attach_tuned(object, Perm::Read, Mode::DramCache, bad).unwrap_err();
    assert!(e.to_string().contains("workers 0"), "{e}");
}

#[test]
fn asynchronous_write_protection_finds_exactly_the_written_pages() {
    // Where the kernel has UFFD_FEATURE_WP_ASYNC (Linux 6.7), writes to
    // clean pages cost no fault message; psync's PAGEMAP_SCAN finds them.
    let pages = 300;
    for (i, mode) in [
        Mode::DecryptAtFault,
        Mode::DramCache,
        Mode::Predict {
            predictor: PredictorKind::Stream,
            depth: 64,
        },
    ]
    .into_iter()
    .enumerate()
    {
        let b = base(23) + i * 0x100_0000;
        cache::evict(b);
        let object = Arc::new(MemBacking::with_contents(b, &pattern(pages, 23), true));
        let mut a = Attachment::attach(object.clone(), Perm::Write, mode).unwrap();
        let mut sum = 0u64;
        for p in 0..pages - 5 {
            sum += a.as_slice()[p * PAGE_SIZE + 7] as u64;
        }
        std::hint::black_box(sum);
        let chosen = [0usize, 1, 2, 77, 78, 200, 297, 299];
        for round in 0..3u8 {
            let w = a.as_mut_slice().unwrap();
            for &p in &chosen[round as usize..] {
                w[p * PAGE_SIZE + 100 + round as usize] ^= 0x5a;
            }
            let expect: Vec<usize> = chosen[round as usize..].to_vec();
            assert_eq!(a.dirty_pages(), expect, "{mode:?} round {round}");
            a.psync().unwrap();
            assert_eq!(object.last_commit(), expect, "{mode:?} round {round}");
            assert!(a.dirty_pages().is_empty(), "{mode:?}: protected again");
        }
        let s = a.stats();
        let supported = s.pagemap_scans > 0;
        if std::env::var_os("CI").is_some() || supported {
            assert!(supported, "this kernel lacks UFFD_FEATURE_WP_ASYNC: {s:?}");
            assert_eq!(
                s.wp_faults, 0,
                "{mode:?}: no write fault reached the handler"
            );
        } else {
            eprintln!("UFFD_FEATURE_WP_ASYNC missing: the synchronous path was tested");
        }
        let bytes = a.as_slice().to_vec();
        a.detach().unwrap();
        cache::evict(b);
        let again = Attachment::attach(object, Perm::Read, Mode::DecryptAtFault).unwrap();
        assert_eq!(again.as_slice(), &bytes[..], "{mode:?}");
    }
}

#[test]
fn adaptive_prediction_installs_nothing_for_scattered_touches_and_stops_at_the_extent() {
    let b = base(24);
    cache::evict(b);
    let pages = 512;
    let data = pattern(pages, 5);
    let object = Arc::new(MemBacking::with_contents(b, &data, true));
    let mode = Mode::Predict {
        predictor: PredictorKind::Adaptive,
        depth: 64,
    };
    // Scattered touches (never two neighbours, never the first page):
    // nothing is predicted, so nothing is installed that the program
    // does not use.
    let a = Attachment::attach(object.clone(), Perm::Read, mode).unwrap();
    let order: Vec<usize> = (0..pages / 4)
        .map(|i| (i * 37 % (pages / 4)) * 4 + 2)
        .collect();
    for &p in &order {
        assert_eq!(a.as_slice()[p * PAGE_SIZE], data[p * PAGE_SIZE], "page {p}");
    }
    let s = a.detach().unwrap();
    assert_eq!(s.predicted, 0, "{s:?}");
    assert_eq!(s.faults, order.len() as u64, "{s:?}");
    cache::evict(b);

    // A sequential read of the first 100 pages with the extent set there,
    // the worker let finish after each touch: faults at 0 (the first
    // page starts a stream: window 8), then just past each window as it
    // doubles (9, 26, 59); the last window (64) is clipped at page 99.
    let a = Attachment::attach(object, Perm::Read, mode).unwrap();
    a.set_extent(100);
    for p in 0..100 {
        assert_eq!(
            a.as_slice()[p * PAGE_SIZE + 3],
            data[p * PAGE_SIZE + 3],
            "page {p}"
        );
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let before = a.resident_pages();
            std::thread::sleep(Duration::from_millis(5));
            if a.resident_pages() == before || Instant::now() > deadline {
                break;
            }
        }
    }
    let s = a.stats();
    assert_eq!(a.resident_pages(), 100, "nothing past the extent: {s:?}");
    assert_eq!((s.faults, s.predicted), (4, 96), "{s:?}");
    assert_eq!(s.predicted_past_extent, 124 - 100, "{s:?}");
    a.detach().unwrap();
    cache::evict(b);
}
