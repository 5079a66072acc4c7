//! `Pool::psync_many`: several objects committed all or nothing.
//!
//! Crash injection as in `crash.rs`: a child process writes the next
//! generation of two or three objects and commits them with one
//! `psync_many`, killed with SIGKILL at a named step of the group commit
//! (group record body written, group record durable, after each slot
//! flip, before and after retiring the group record) or at its k-th
//! persisted write. Afterwards every object must equal, byte for byte,
//! its old generation or its new one, and all objects of the group the
//! same one: old before the group record is durable, new from then on
//! (rolled forward at open). The pool opens strictly against its state
//! store after every kill. Then: a damaged or forged group record
//! quarantines the objects it names (never a silent roll-forward), two
//! opens commit disjoint groups at the same time, and bad groups are
//! refused with errors naming the object.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nvmos_pmo::layout::{GroupRecord, GroupState, GROUP_AT, MAX_GROUP, PAGE};
use nvmos_pmo::{
    Access, CrashPoint, CrashStep, KdfParams, Mode, Perm, PmoError, Pool, PoolOptions,
};
use rand::{Rng, SeedableRng};

const KEY: &[u8] = b"group key";
const CHILD_ENV: &str = "NVMOS_PSM_CHILD";

/// The objects: name, key, pages ("a" spans two page-table pages).
const OBJECTS: [(&str, Option<&[u8]>, usize); 3] =
    [("a", Some(KEY), 160), ("b", None, 12), ("c", Some(KEY), 40)];

fn touched(g: u64, pages: usize, salt: u64) -> Vec<usize> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(g * 7919 + pages as u64 + salt * 31);
    let mut v: Vec<usize> = (0..5).map(|_| rng.gen_range(1..pages)).collect();
    v.push(0);
    v.sort_unstable();
    v.dedup();
    v
}

fn content(g: u64, page: usize, salt: u64) -> Vec<u8> {
    let mut v = vec![0u8; PAGE];
    let mut rng = rand::rngs::SmallRng::seed_from_u64(g << 24 | (page as u64) << 4 | salt);
    rng.fill(&mut v[..]);
    if page == 0 {
        v[..8].copy_from_slice(&g.to_le_bytes());
    }
    v
}

fn image(g: u64, pages: usize, salt: u64) -> Vec<u8> {
    let mut img = vec![0u8; pages * PAGE];
    for gen in 1..=g {
        for p in touched(gen, pages, salt) {
            img[p * PAGE..(p + 1) * PAGE].copy_from_slice(&content(gen, p, salt));
        }
    }
    img
}

fn salt(k: usize) -> u64 {
    k as u64 + 1
}

fn stage_generation(h: &nvmos_pmo::ObjectHandle, k: usize, g: u64) {
    let pages = OBJECTS[k].2;
    for p in touched(g, pages, salt(k)) {
        h.stage(p, &content(g, p, salt(k))).unwrap();
    }
}

fn generation_of(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().unwrap())
}

fn state_dir(pool: &Path) -> PathBuf {
    pool.with_extension("state")
}

fn with_state(pool: &Path) -> PoolOptions {
    PoolOptions {
        state_dir: Some(state_dir(pool)),
        ..PoolOptions::default()
    }
}

/// A pool with the three objects at generation 1 (single psyncs).
fn setup(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_dir_all(state_dir(path));
    let pool = Pool::create_with(path, 4 << 20, with_state(path)).unwrap();
    for (k, (name, key, pages)) in OBJECTS.into_iter().enumerate() {
        pool.pcreate_with(name, (pages * PAGE) as u64, key, KdfParams::INSECURE_FAST)
            .unwrap();
        let h = pool.open_object(name, Perm::Write, key).unwrap();
        stage_generation(&h, k, 1);
        h.psync().unwrap();
    }
}

fn step_name(step: Option<CrashStep>) -> String {
    match step {
        None => "none".into(),
        Some(CrashStep::GroupBodyWritten) => "body".into(),
        Some(CrashStep::GroupDurable) => "durable".into(),
        Some(CrashStep::Flipped(k)) => format!("flip{k}"),
        Some(CrashStep::BeforeRetire) => "before_retire".into(),
        Some(CrashStep::Retired) => "retired".into(),
    }
}

fn parse_step(s: &str) -> Option<CrashStep> {
    match s {
        "none" => None,
        "body" => Some(CrashStep::GroupBodyWritten),
        "durable" => Some(CrashStep::GroupDurable),
        "before_retire" => Some(CrashStep::BeforeRetire),
        "retired" => Some(CrashStep::Retired),
        f => Some(CrashStep::Flipped(
            f.strip_prefix("flip").unwrap().parse().unwrap(),
        )),
    }
}

/// Child: the next generation of the first `n` objects, one psync_many.
#[test]
fn psync_many_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return; // Only does something when a crash test runs it.
    };
    let env = |k: &str| std::env::var(k).unwrap();
    let n: usize = env("NVMOS_PSM_N").parse().unwrap();
    let opts = PoolOptions {
        crash: CrashPoint {
            after_persists: env("NVMOS_PSM_AFTER").parse().unwrap(),
            at: parse_step(&env("NVMOS_PSM_STEP")),
        },
        ..with_state(Path::new(&path))
    };
    let pool = Pool::open_with(Path::new(&path), Access::ReadWrite, opts).unwrap();
    let mut handles = Vec::new();
    for (k, (name, key, _)) in OBJECTS.into_iter().enumerate().take(n) {
        let h = pool.open_object(name, Perm::Write, key).unwrap();
        let mut page = vec![0u8; PAGE];
        h.read(0, &mut page).unwrap();
        stage_generation(&h, k, generation_of(&page) + 1);
        handles.push(h);
    }
    let refs: Vec<&nvmos_pmo::ObjectHandle> = handles.iter().collect();
    pool.psync_many_handles(&refs).unwrap();
    // With NVMOS_PSM_LOOP: keep committing groups until killed.
    while std::env::var_os("NVMOS_PSM_LOOP").is_some() {
        let mut page = vec![0u8; PAGE];
        handles[0].read(0, &mut page).unwrap();
        let g = generation_of(&page) + 1;
        for (k, h) in handles.iter().enumerate() {
            stage_generation(h, k, g);
        }
        pool.psync_many_handles(&refs).unwrap();
    }
}

fn spawn_child(path: &Path, n: usize, step: Option<CrashStep>, after: u64) -> bool {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "psync_many_child", "--test-threads=1"])
        .env(CHILD_ENV, path)
        .env("NVMOS_PSM_N", n.to_string())
        .env("NVMOS_PSM_STEP", step_name(step))
        .env("NVMOS_PSM_AFTER", after.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    status.success()
}

/// Every object's generation, each checked to be exactly that generation
/// byte for byte; the pool opened (for writing: a crashed group is rolled
/// forward) strictly against the state store, its allocator and `check`
/// clean.
fn generations(path: &Path, access: Access) -> [u64; 3] {
    let pool = Pool::open_with(path, access, with_state(path))
        .unwrap_or_else(|e| panic!("reopening after a crash: {e}"));
    pool.check().unwrap();
    let report = pool.check_report();
    assert!(report.ok(), "{report:?}");
    let mut gens = [0; 3];
    for (k, (name, key, pages)) in OBJECTS.into_iter().enumerate() {
        let bytes = pool
            .open_object(name, Perm::Read, key)
            .unwrap()
            .read_all()
            .unwrap();
        let g = generation_of(&bytes);
        assert!(
            bytes == image(g, pages, salt(k)),
            "object {name} is not exactly generation {g}"
        );
        gens[k] = g;
    }
    gens
}

fn pool_file(tag: &str) -> (Option<tempfile::TempDir>, PathBuf) {
    // /dev/shm stands for persistent memory (cache-line flushes); a
    // folder on disk takes the msync path.
    let shm = Path::new("/dev/shm");
    if tag.starts_with("shm") && shm.is_dir() {
        let p = shm.join(format!("nvmos-psm-{tag}-{}", std::process::id()));
        return (None, p);
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("pool");
    (Some(d), p)
}

fn cleanup(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_dir_all(state_dir(path));
}

/// The group word of the group commit area, read from the file.
fn group_word(path: &Path) -> u64 {
    let b = std::fs::read(path).unwrap();
    u64::from_le_bytes(b[GROUP_AT..GROUP_AT + 8].try_into().unwrap())
}

fn named_steps(n: usize, tag: &str) {
    let (_dir, path) = pool_file(tag);
    setup(&path);
    let mut gens = [1u64; 3];
    let mut steps = vec![CrashStep::GroupBodyWritten, CrashStep::GroupDurable];
    steps.extend((1..=n).map(CrashStep::Flipped));
    steps.extend([CrashStep::BeforeRetire, CrashStep::Retired]);
    for step in steps {
        assert!(
            !spawn_child(&path, n, Some(step), 0),
            "the child was not killed at {step:?}"
        );
        let committed = !matches!(step, CrashStep::GroupBodyWritten);
        let now = generations(&path, Access::ReadWrite);
        for k in 0..3 {
            let want = gens[k] + u64::from(committed && k < n);
            assert_eq!(
                now[k], want,
                "killed at {step:?}: object {} at generation {}, expected {want} (all {n} objects old before the group record is durable, all new after)",
                OBJECTS[k].0, now[k]
            );
        }
        assert_eq!(group_word(&path), 0, "the group record is settled at open");
        gens = now;
    }
    // And a run that is not killed commits all of them.
    assert!(spawn_child(&path, n, None, 0));
    let now = generations(&path, Access::ReadWrite);
    for k in 0..3 {
        assert_eq!(now[k], gens[k] + u64::from(k < n));
    }
    cleanup(&path);
}

#[test]
fn killed_at_every_step_two_objects_are_all_old_or_all_new() {
    named_steps(2, "shm-steps2");
}

#[test]
fn killed_at_every_step_three_objects_are_all_old_or_all_new() {
    named_steps(3, "shm-steps3");
}

#[test]
fn killed_at_every_step_on_an_msync_pool() {
    named_steps(3, "disk-steps3");
}

/// Kill at every persisted write of a psync_many (torn group records, torn
/// flips, the state store's update), 2 and 3 objects.
#[test]
fn killed_at_every_persist_point_objects_are_all_old_or_all_new() {
    for n in [2, 3] {
        let (_dir, path) = pool_file(&format!("shm-persist{n}"));
        setup(&path);
        let mut gens = [1u64; 3];
        let (mut old, mut new) = (0, 0);
        let mut k = 1;
        loop {
            let finished = spawn_child(&path, n, None, k);
            let now = generations(&path, Access::ReadWrite);
            let moved: Vec<bool> = (0..n).map(|i| now[i] == gens[i] + 1).collect();
            for i in 0..n {
                assert!(
                    now[i] == gens[i] || now[i] == gens[i] + 1,
                    "k={k}: object {} at generation {}, was {}",
                    OBJECTS[i].0,
                    now[i],
                    gens[i]
                );
            }
            assert!(
                moved.iter().all(|&m| m) || moved.iter().all(|&m| !m),
                "k={k}: a mix of old and new objects: {now:?} from {gens:?}"
            );
            for i in n..3 {
                assert_eq!(now[i], gens[i], "object outside the group changed");
            }
            if finished {
                assert!(moved[0], "a finished run committed");
                break;
            }
            if moved[0] {
                new += 1;
            } else {
                old += 1;
            }
            gens = now;
            k += 1;
            assert!(k < 400, "the child never finished");
        }
        assert!(
            old > 0 && new > 0,
            "kills before ({old}) and after ({new}) the commit point"
        );
        cleanup(&path);
    }
}

/// Killed at random times while committing group after group (on disk,
/// the msync path): every group whole, never a mix.
#[test]
fn killed_at_random_times_groups_stay_whole() {
    let (_dir, path) = pool_file("disk-random");
    setup(&path);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
    let mut gens = [1u64; 3];
    for _ in 0..24 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "psync_many_child", "--test-threads=1"])
            .env(CHILD_ENV, &path)
            .env("NVMOS_PSM_N", "3")
            .env("NVMOS_PSM_STEP", "none")
            .env("NVMOS_PSM_AFTER", "0")
            .env("NVMOS_PSM_LOOP", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(
            rng.gen_range(5_000..150_000),
        ));
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGKILL);
        }
        child.wait().unwrap();
        let now = generations(&path, Access::ReadWrite);
        assert!(
            now[0] >= gens[0] && now.iter().all(|&g| g == now[0]),
            "a mix of generations {now:?} (before {gens:?})"
        );
        gens = now;
    }
    assert!(gens[0] > 3, "only {} generations committed", gens[0]);
    cleanup(&path);
}

/// A read-only open sees a crashed group rolled forward without writing;
/// the next open for writing completes it and says so.
#[test]
fn a_read_only_open_sees_a_crashed_group_rolled_forward() {
    let (_dir, path) = pool_file("shm-ro");
    setup(&path);
    assert!(!spawn_child(&path, 3, Some(CrashStep::Flipped(1)), 0));
    let before = std::fs::read(&path).unwrap();
    assert_ne!(group_word(&path), 0, "the group record is pending");
    assert_eq!(generations(&path, Access::ReadOnly), [2, 2, 2]);
    assert!(
        std::fs::read(&path).unwrap() == before,
        "a read-only open wrote the pool"
    );
    let pool = Pool::open_with(&path, Access::ReadWrite, with_state(&path)).unwrap();
    let notes = pool.check_report().notes;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("rolled forward") && n.contains("2 of its record flips")),
        "{notes:?}"
    );
    drop(pool);
    assert_eq!(group_word(&path), 0);
    assert_eq!(generations(&path, Access::ReadWrite), [2, 2, 2]);
    cleanup(&path);
}

/// A pool whose 2-object group crashed after its first flip, and the
/// group area's bytes.
fn pending_group(tag: &str) -> (Option<tempfile::TempDir>, PathBuf, Vec<u8>) {
    let (dir, path) = pool_file(tag);
    setup(&path);
    assert!(!spawn_child(&path, 2, Some(CrashStep::Flipped(1)), 0));
    let b = std::fs::read(&path).unwrap();
    (dir, path, b[GROUP_AT..PAGE].to_vec())
}

fn write_group_area(path: &Path, area: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(area, GROUP_AT as u64).unwrap();
}

fn assert_quarantined_by_group(path: &Path, names: &[&str], what: &str) {
    for access in [Access::ReadOnly, Access::ReadWrite] {
        let pool = Pool::open_with(path, access, with_state(path)).unwrap();
        for (name, key, _) in OBJECTS {
            let r = pool.open_object(name, Perm::Read, key);
            if names.contains(&name) {
                match r {
                    Err(PmoError::Quarantined { reason, .. }) => {
                        assert!(reason.contains(what), "{name}: {reason}")
                    }
                    other => panic!("{name} not quarantined: {other:?}"),
                }
            } else {
                r.unwrap();
            }
        }
        assert!(!pool.check_report().ok());
    }
}

#[test]
fn a_damaged_group_record_quarantines_its_objects() {
    let (_dir, path, mut area) = pending_group("shm-tamper1");
    // One bit of the first entry's record (its root hash).
    area[64 + 8 + 44] ^= 1;
    write_group_area(&path, &area);
    assert_quarantined_by_group(&path, &["a", "b"], "group commit record");
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(&path)).unwrap();
    let report = pool.check_report();
    assert!(
        report
            .group_record
            .as_deref()
            .is_some_and(|g| g.contains("hash mismatch")),
        "{report:?}"
    );
    drop(pool);
    // Left as it is: nothing that cannot be verified is changed.
    assert_eq!(
        std::fs::read(&path).unwrap()[GROUP_AT..PAGE],
        area[..],
        "the damaged group record was changed"
    );
    cleanup(&path);
}

#[test]
fn a_group_record_forged_for_another_pool_is_refused() {
    let (_dir, path, area) = pending_group("shm-tamper2");
    let GroupState::Valid(mut g) = GroupRecord::classify(&area) else {
        panic!("the pending group record is not intact");
    };
    // A consistent record (its hash recomputed: the hash stops accidents,
    // as a directory record's CRC does) bound to another pool.
    g.pool_id ^= 0x55;
    let mut forged = g.encode();
    forged.resize(area.len(), 0);
    write_group_area(&path, &forged);
    assert_quarantined_by_group(&path, &["a", "b"], "bound to pool");
    cleanup(&path);
}

#[test]
fn a_group_record_that_does_not_fit_its_slots_quarantines_the_misfit() {
    let (_dir, path, area) = pending_group("shm-tamper3");
    let GroupState::Valid(mut g) = GroupRecord::classify(&area) else {
        panic!("the pending group record is not intact");
    };
    // "b" (not flipped yet) is given an epoch its records cannot precede.
    let e = g.entries.iter_mut().find(|e| e.slot == 1).unwrap();
    e.record.seq += 5;
    let mut forged = g.encode();
    forged.resize(area.len(), 0);
    write_group_area(&path, &forged);
    assert_quarantined_by_group(&path, &["b"], "group commit record");
    cleanup(&path);
}

/// Two opens of one pool (as two processes would) commit disjoint groups
/// at the same time; both always commit.
#[test]
fn two_opens_commit_disjoint_groups_at_once() {
    let (_dir, path) = pool_file("disk-conc");
    let pool = Pool::create_with(&path, 8 << 20, with_state(&path)).unwrap();
    let names = [["p", "q"], ["r", "s"]];
    for n in names.iter().flatten() {
        pool.pcreate_with(n, 16 * PAGE as u64, Some(KEY), KdfParams::INSECURE_FAST)
            .unwrap();
    }
    drop(pool);
    let rounds = 12u64;
    std::thread::scope(|sc| {
        for (t, pair) in names.iter().enumerate() {
            let path = path.clone();
            sc.spawn(move || {
                let pool = Pool::open_with(&path, Access::ReadWrite, with_state(&path)).unwrap();
                let hs: Vec<_> = pair
                    .iter()
                    .map(|n| pool.open_object(n, Perm::Write, Some(KEY)).unwrap())
                    .collect();
                for g in 1..=rounds {
                    for (i, h) in hs.iter().enumerate() {
                        let mut page = vec![(t * 2 + i) as u8; PAGE];
                        page[..8].copy_from_slice(&g.to_le_bytes());
                        h.stage((g % 16) as usize, &page).unwrap();
                    }
                    pool.psync_many_handles(&[&hs[0], &hs[1]])
                        .unwrap_or_else(|e| panic!("open {t}, round {g}: {e}"));
                }
            });
        }
    });
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(&path)).unwrap();
    pool.check().unwrap();
    assert!(pool.check_report().ok());
    for (t, pair) in names.iter().enumerate() {
        for (i, n) in pair.iter().enumerate() {
            let h = pool.open_object(n, Perm::Read, Some(KEY)).unwrap();
            assert_eq!(h.epoch(), 1 + rounds, "{n}");
            let bytes = h.read_all().unwrap();
            for g in 1..=rounds {
                let p = (g % 16) as usize;
                let page = &bytes[p * PAGE..(p + 1) * PAGE];
                // The last generation that wrote page p.
                let last = (1..=rounds).filter(|x| x % 16 == g % 16).max().unwrap();
                assert_eq!(generation_of(page), last, "{n} page {p}");
                assert!(page[8..].iter().all(|&b| b == (t * 2 + i) as u8));
            }
        }
    }
}

#[test]
fn bad_groups_are_refused_naming_the_object() {
    let (_dir, path) = pool_file("disk-refuse");
    setup(&path);
    let (_dir2, other_path) = pool_file("disk-refuse2");
    let other = Pool::create(&other_path, 4 << 20).unwrap();
    other
        .pcreate_with("z", PAGE as u64, None, KdfParams::INSECURE_FAST)
        .unwrap();
    let pool = Pool::open_with(&path, Access::ReadWrite, with_state(&path)).unwrap();
    let a = pool.open_object("a", Perm::Write, Some(KEY)).unwrap();
    let b = pool.open_object("b", Perm::Read, None).unwrap();
    let z = other.open_object("z", Perm::Write, None).unwrap();
    match pool.psync_many_handles(&[&a, &a]) {
        Err(PmoError::DuplicateInGroup { name }) => assert_eq!(name, "a"),
        other => panic!("{other:?}"),
    }
    match pool.psync_many_handles(&[&a, &b]) {
        Err(PmoError::ReadOnly { name }) => assert_eq!(name, "b"),
        other => panic!("{other:?}"),
    }
    match pool.psync_many_handles(&[&a, &z]) {
        Err(e @ PmoError::NotInGroupPool { .. }) => {
            assert!(e.to_string().contains("\"z\""), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // Another open of the same pool file.
    let pool2 = Pool::open_with(&path, Access::ReadWrite, with_state(&path)).unwrap();
    let c = pool2.open_object("c", Perm::Write, Some(KEY)).unwrap();
    match pool.psync_many_handles(&[&a, &c]) {
        Err(e @ PmoError::NotInGroupPool { .. }) => {
            assert!(e.to_string().contains("another open"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    let many: Vec<&nvmos_pmo::ObjectHandle> = (0..=MAX_GROUP).map(|_| &a).collect();
    assert!(matches!(
        pool.psync_many_handles(&many),
        Err(PmoError::GroupTooLarge { .. })
    ));
    // Nothing was committed by the refusals.
    assert_eq!(a.epoch(), 2);
    drop((a, b, c, z, pool2, other));
    let _ = std::fs::remove_file(&other_path);
    cleanup(&path);
}

/// Through mappings: two attachments written by stores, one psync_many.
#[test]
fn attachments_commit_together() {
    let (_dir, path) = pool_file("disk-attach");
    setup(&path);
    let pool = Pool::open_with(&path, Access::ReadWrite, with_state(&path)).unwrap();
    let a = match pool.attach("a", Perm::Write, Some(KEY), Mode::DecryptAtFault) {
        Ok(a) => a,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped (no userfaultfd here): {e}");
            return;
        }
        Err(e) => panic!("attach: {e}"),
    };
    let mut a = a;
    let mut c = pool
        .attach("c", Perm::Write, Some(KEY), Mode::DramCache)
        .unwrap();
    a.as_mut_slice().unwrap()[5 * PAGE..6 * PAGE].fill(0xa5);
    c.as_mut_slice().unwrap()[3 * PAGE + 7] = 0x3c;
    let r = pool
        .attach("b", Perm::Read, None, Mode::DecryptAtFault)
        .unwrap();
    assert!(matches!(
        pool.psync_many(&[&a, &r]),
        Err(PmoError::ReadOnly { .. })
    ));
    assert!(matches!(
        pool.psync_many(&[&c, &c]),
        Err(PmoError::DuplicateInGroup { .. })
    ));
    let stats = pool.psync_many(&[&c, &a]).unwrap();
    assert_eq!((stats[0].pages, stats[1].pages), (1, 1));
    // Nothing dirty any more.
    assert_eq!(pool.psync_many(&[&a, &c]).unwrap()[0].pages, 0);
    drop((a, c, r));
    let h = pool.open_object("a", Perm::Read, Some(KEY)).unwrap();
    assert_eq!(h.epoch(), 3);
    let bytes = h.read_all().unwrap();
    assert!(bytes[5 * PAGE..6 * PAGE].iter().all(|&x| x == 0xa5));
    let h = pool.open_object("c", Perm::Read, Some(KEY)).unwrap();
    assert_eq!(h.epoch(), 3);
    assert_eq!(h.read_all().unwrap()[3 * PAGE + 7], 0x3c);
    drop(h);
    drop(pool);
    cleanup(&path);
}
