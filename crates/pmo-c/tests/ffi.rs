//! The C interface's rules, called as C would: NULL arguments, bad
//! enumeration values and out-of-range accesses come back as codes with a
//! message naming the argument; data written and psynced through the
//! interface is there after a reopen; the last error is per thread.

use std::ffi::{c_void, CStr, CString};
use std::ptr::{null, null_mut};

use nvmos_pmo_c::*;
use NvmosPmoStatus as S;

fn last_error() -> String {
    // SAFETY: the library returns a NUL-terminated string valid until the
    // next failing call on this thread.
    unsafe { CStr::from_ptr(nvmos_pmo_last_error()) }
        .to_str()
        .unwrap()
        .to_string()
}

const KEY: &[u8] = b"a long passphrase";
const FAST: NvmosPmoKdf = NvmosPmoKdf {
    m_cost_kib: 8,
    t_cost: 1,
    p_cost: 1,
};

struct Fixture {
    _dir: tempfile::TempDir,
    path: CString,
    pool: *mut NvmosPmoPool,
}

fn pool_with_object(name: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = CString::new(dir.path().join("pool").to_str().unwrap()).unwrap();
    let mut pool = null_mut();
    let name = CString::new(name).unwrap();
    // SAFETY: valid strings and out-pointers throughout.
    unsafe {
        assert_eq!(
            nvmos_pmo_pool_create(path.as_ptr(), 4 << 20, null(), &mut pool),
            S::Ok
        );
        assert_eq!(
            nvmos_pmo_pcreate(
                pool,
                name.as_ptr(),
                3 * 4096,
                KEY.as_ptr(),
                KEY.len(),
                &FAST
            ),
            S::Ok
        );
    }
    Fixture {
        _dir: dir,
        path,
        pool,
    }
}

#[test]
fn null_and_bad_arguments_are_codes_with_messages() {
    let f = pool_with_object("obj");
    let name = c"obj";
    let mut a = null_mut();
    // SAFETY: every pointer is valid or deliberately NULL.
    unsafe {
        assert_eq!(
            nvmos_pmo_pool_open(null(), 1, null(), &mut null_mut()),
            S::NullArgument
        );
        assert_eq!(last_error(), "argument path is NULL");
        assert_eq!(
            nvmos_pmo_pool_open(f.path.as_ptr(), 1, null(), null_mut()),
            S::NullArgument
        );
        assert_eq!(last_error(), "argument out is NULL");
        assert_eq!(
            nvmos_pmo_pool_open(f.path.as_ptr(), 7, null(), &mut null_mut()),
            S::InvalidArgument
        );
        assert!(
            last_error().starts_with("access 7 is not"),
            "{}",
            last_error()
        );
        assert_eq!(
            nvmos_pmo_pcreate(null(), name.as_ptr(), 4096, null(), 0, null()),
            S::NullArgument
        );
        assert_eq!(last_error(), "argument pool is NULL");
        assert_eq!(
            nvmos_pmo_attach(f.pool, name.as_ptr(), 1, null(), 5, 2, 0, &mut a),
            S::InvalidArgument
        );
        assert_eq!(last_error(), "argument key is NULL but key_len is 5");
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                name.as_ptr(),
                2,
                KEY.as_ptr(),
                KEY.len(),
                2,
                0,
                &mut a
            ),
            S::InvalidArgument
        );
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                name.as_ptr(),
                1,
                KEY.as_ptr(),
                KEY.len(),
                9,
                0,
                &mut a
            ),
            S::InvalidArgument
        );
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                name.as_ptr(),
                1,
                KEY.as_ptr(),
                KEY.len(),
                2,
                4,
                &mut a
            ),
            S::InvalidArgument
        );
        assert_eq!(
            last_error(),
            "mode dram-cache takes no prediction depth, 4 given"
        );
        let bad = [0xffu8, 0];
        assert_eq!(
            nvmos_pmo_pdestroy(f.pool, bad.as_ptr().cast(), null(), 0),
            S::InvalidArgument
        );
        assert_eq!(last_error(), "argument name is not UTF-8");
        // Errors of the pool come through with their own codes.
        assert_eq!(
            nvmos_pmo_attach(f.pool, c"nope".as_ptr(), 1, null(), 0, 0, 0, &mut a),
            S::UnknownObject
        );
        assert_eq!(last_error(), "no object named \"nope\" in the pool");
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                name.as_ptr(),
                1,
                b"wrong passphrase".as_ptr(),
                16,
                2,
                0,
                &mut a
            ),
            S::WrongKey
        );
        assert_eq!(
            nvmos_pmo_attach(f.pool, name.as_ptr(), 1, null(), 0, 1, 0, &mut a),
            S::BadKey
        );
        assert_eq!(
            nvmos_pmo_pcreate(f.pool, name.as_ptr(), 4096, null(), 0, null()),
            S::ObjectExists
        );
        assert_eq!(
            nvmos_pmo_pool_create(f.path.as_ptr(), 4 << 20, null(), &mut null_mut()),
            S::PoolExists
        );
        assert!(a.is_null(), "out-parameters are written only on success");
        assert_eq!(nvmos_pmo_detach(null_mut()), S::NullArgument);
        assert_eq!(nvmos_pmo_psync(null(), null_mut()), S::NullArgument);
        nvmos_pmo_pool_close(null_mut());
        nvmos_pmo_pool_close(f.pool);
    }
}

#[test]
fn bytes_written_and_psynced_are_there_after_reopen() {
    let f = pool_with_object("data");
    let name = c"data";
    let mut a = null_mut();
    let msg = b"persistent hello";
    // SAFETY: valid handles, buffers and out-pointers.
    unsafe {
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                name.as_ptr(),
                1,
                KEY.as_ptr(),
                KEY.len(),
                3,
                4,
                &mut a
            ),
            S::Ok
        );
        let (mut base, mut len) = (null_mut::<c_void>(), 0usize);
        assert_eq!(nvmos_pmo_base(a, &mut base, &mut len), S::Ok);
        assert_eq!(len, 3 * 4096);
        let mut id = 0;
        assert_eq!(nvmos_pmo_object_id(a, &mut id), S::Ok);
        assert_ne!(id, 0);
        // Across a page boundary, through the call and through the mapping.
        assert_eq!(
            nvmos_pmo_write(a, 4090, msg.as_ptr().cast(), msg.len()),
            S::Ok
        );
        *(base as *mut u8).add(2 * 4096) = 0x5a;
        assert_eq!(
            nvmos_pmo_write(a, (len - 4) as u64, msg.as_ptr().cast(), msg.len()),
            S::OutOfRange
        );
        assert_eq!(
            nvmos_pmo_write(a, u64::MAX, msg.as_ptr().cast(), 1),
            S::OutOfRange
        );
        assert_eq!(nvmos_pmo_write(a, 0, null(), 0), S::NullArgument);
        let mut pages = 0u64;
        assert_eq!(nvmos_pmo_psync(a, &mut pages), S::Ok);
        assert_eq!(pages, 3);
        assert_eq!(nvmos_pmo_detach(a), S::Ok);
        nvmos_pmo_pool_close(f.pool);

        let mut pool = null_mut();
        assert_eq!(
            nvmos_pmo_pool_open(f.path.as_ptr(), 0, null(), &mut pool),
            S::Ok
        );
        let mut r = null_mut();
        assert_eq!(
            nvmos_pmo_attach(
                pool,
                name.as_ptr(),
                1,
                KEY.as_ptr(),
                KEY.len(),
                1,
                0,
                &mut r
            ),
            S::ReadOnly
        );
        assert_eq!(
            nvmos_pmo_attach(
                pool,
                name.as_ptr(),
                0,
                KEY.as_ptr(),
                KEY.len(),
                1,
                0,
                &mut r
            ),
            S::Ok
        );
        let mut back = [0u8; 16];
        assert_eq!(nvmos_pmo_read(r, 4090, back.as_mut_ptr().cast(), 16), S::Ok);
        assert_eq!(&back, msg);
        assert_eq!(
            nvmos_pmo_read(r, 2 * 4096, back.as_mut_ptr().cast(), 1),
            S::Ok
        );
        assert_eq!(back[0], 0x5a);
        assert_eq!(nvmos_pmo_write(r, 0, msg.as_ptr().cast(), 1), S::ReadOnly);
        assert_eq!(last_error(), "the object is attached read-only");
        assert_eq!(
            nvmos_pmo_pdestroy(pool, name.as_ptr(), KEY.as_ptr(), KEY.len()),
            S::ReadOnly
        );
        assert_eq!(nvmos_pmo_detach(r), S::Ok);
        nvmos_pmo_pool_close(pool);
    }
}

#[test]
fn strerror_names_every_code_and_last_error_is_per_thread() {
    for code in 0..=24 {
        let status = NvmosPmoStatus::from_code(code).expect("codes 0..=24 exist");
        assert_eq!(status as i32, code);
        // SAFETY: a static NUL-terminated string.
        let s = unsafe { CStr::from_ptr(nvmos_pmo_strerror(code)) };
        assert_ne!(s.to_str().unwrap(), "unknown status code", "code {code}");
    }
    for code in [-1, 25, i32::MAX] {
        assert!(NvmosPmoStatus::from_code(code).is_none());
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(nvmos_pmo_strerror(code)) };
        assert_eq!(s.to_str().unwrap(), "unknown status code");
    }
    // NULL is refused.
    assert_eq!(nvmos_pmo_detach(null_mut()), S::NullArgument);
    let here = last_error();
    assert_eq!(here, "argument attachment is NULL");
    std::thread::spawn(|| assert_eq!(last_error(), ""))
        .join()
        .unwrap();
    assert_eq!(last_error(), here);
}

#[test]
fn relocatable_offsets_resolve_only_in_their_object() {
    let f = pool_with_object("one");
    let mut a = null_mut();
    let mut b = null_mut();
    // SAFETY: valid handles, buffers and out-pointers.
    unsafe {
        assert_eq!(
            nvmos_pmo_pcreate(f.pool, c"two".as_ptr(), 4096, null(), 0, null()),
            S::Ok
        );
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                c"one".as_ptr(),
                1,
                KEY.as_ptr(),
                KEY.len(),
                2,
                0,
                &mut a
            ),
            S::Ok
        );
        assert_eq!(
            nvmos_pmo_attach(f.pool, c"two".as_ptr(), 1, null(), 0, 0, 0, &mut b),
            S::Ok
        );
        let (mut base, mut len) = (null_mut::<c_void>(), 0usize);
        assert_eq!(nvmos_pmo_base(a, &mut base, &mut len), S::Ok);
        let mut off = NvmosPmoOff::default();
        let at = (base as *mut u8).add(4096 + 16);
        assert_eq!(nvmos_pmo_off(a, at.cast(), &mut off), S::Ok);
        assert_eq!(off.offset, 4096 + 16);
        let mut id = 0;
        assert_eq!(nvmos_pmo_object_id(a, &mut id), S::Ok);
        assert_eq!(off.object, id);
        let mut p = null_mut();
        assert_eq!(nvmos_pmo_resolve(a, off, 8, 8, &mut p), S::Ok);
        assert_eq!(p as *mut u8, at);
        assert_eq!(nvmos_pmo_resolve(b, off, 8, 8, &mut p), S::WrongObject);
        assert_eq!(nvmos_pmo_resolve(a, off, 8, 32, &mut p), S::InvalidArgument);
        assert_eq!(nvmos_pmo_resolve(a, off, 8, 3, &mut p), S::InvalidArgument);
        assert_eq!(
            nvmos_pmo_resolve(
                a,
                NvmosPmoOff {
                    object: id,
                    offset: len as u64 - 4
                },
                8,
                1,
                &mut p
            ),
            S::OutOfRange
        );
        assert_eq!(
            nvmos_pmo_resolve(a, NvmosPmoOff::default(), 1, 1, &mut p),
            S::InvalidArgument
        );
        assert_eq!(last_error(), "null POff");
        assert_eq!(
            nvmos_pmo_off(a, (base as *const u8).add(len).cast(), &mut off),
            S::OutOfRange
        );
        assert_eq!(nvmos_pmo_detach(a), S::Ok);
        assert_eq!(nvmos_pmo_detach(b), S::Ok);
        nvmos_pmo_pool_close(f.pool);
    }
}

/// A pool truncated under an open through the C API: the
/// next call that reads it returns `NVMOS_PMO_STATUS_TRUNCATED` with a
/// message naming the pool and offset (not a SIGBUS).
#[test]
fn a_pool_truncated_while_open_is_the_truncated_status() {
    let f = pool_with_object("obj");
    let path = f.path.to_str().unwrap().to_string();
    // Write every page once, so the object has page tables in the pool.
    // SAFETY: valid pool, strings, key, buffer and out-pointers.
    unsafe {
        let mut w = null_mut();
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                c"obj".as_ptr(),
                1,
                KEY.as_ptr(),
                KEY.len(),
                1,
                0,
                &mut w
            ),
            S::Ok
        );
        let data = [7u8; 3 * 4096];
        assert_eq!(
            nvmos_pmo_write(w, 0, data.as_ptr().cast(), data.len()),
            S::Ok
        );
        assert_eq!(nvmos_pmo_detach(w), S::Ok);
    }
    // Through another open file description, as another process would
    // (no child process: one spawned here would hold, until its exec, the
    // descriptors and so the pool locks of the tests running beside).
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(36864)
        .unwrap();
    let mut a = null_mut();
    // SAFETY: valid pool, strings, key and out-pointer.
    unsafe {
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                c"obj".as_ptr(),
                0,
                KEY.as_ptr(),
                KEY.len(),
                1,
                0,
                &mut a
            ),
            S::Truncated
        );
        nvmos_pmo_pool_close(f.pool);
    }
    let e = last_error();
    assert!(
        e.starts_with(&format!(
            "pool {path} was truncated to 36864 bytes while open (it is 4194304 bytes): access at offset "
        )),
        "{e}"
    );
}

#[test]
fn psync_many_commits_both_and_refuses_bad_groups_by_code() {
    let f = pool_with_object("one");
    let two = c"two";
    let mut a = null_mut();
    let mut b = null_mut();
    let mut r = null_mut();
    // SAFETY: valid handles, buffers and out-pointers.
    unsafe {
        assert_eq!(
            nvmos_pmo_pcreate(f.pool, two.as_ptr(), 4096, KEY.as_ptr(), KEY.len(), &FAST),
            S::Ok
        );
        for (name, perm, out) in [(c"one", 1, &mut a), (c"two", 1, &mut b)] {
            assert_eq!(
                nvmos_pmo_attach(
                    f.pool,
                    name.as_ptr(),
                    perm,
                    KEY.as_ptr(),
                    KEY.len(),
                    1,
                    0,
                    out
                ),
                S::Ok
            );
        }
        assert_eq!(nvmos_pmo_write(a, 0, b"AAAA".as_ptr().cast(), 4), S::Ok);
        assert_eq!(nvmos_pmo_write(b, 0, b"BB".as_ptr().cast(), 2), S::Ok);
        let twice = [a as *const NvmosPmoAttachment, a];
        assert_eq!(
            nvmos_pmo_psync_many(f.pool, twice.as_ptr(), 2, null_mut()),
            S::InvalidArgument
        );
        assert!(
            last_error().contains("\"one\" is given twice"),
            "{}",
            last_error()
        );
        let with_null = [a as *const NvmosPmoAttachment, null()];
        assert_eq!(
            nvmos_pmo_psync_many(f.pool, with_null.as_ptr(), 2, null_mut()),
            S::NullArgument
        );
        assert!(last_error().contains("attachments[1]"), "{}", last_error());
        assert_eq!(
            nvmos_pmo_psync_many(f.pool, null(), 1, null_mut()),
            S::NullArgument
        );
        let both = [a as *const NvmosPmoAttachment, b];
        let mut pages = [0u64; 2];
        assert_eq!(
            nvmos_pmo_psync_many(f.pool, both.as_ptr(), 2, pages.as_mut_ptr()),
            S::Ok
        );
        assert_eq!(pages, [1, 1]);
        assert_eq!(nvmos_pmo_detach(a), S::Ok);
        assert_eq!(nvmos_pmo_detach(b), S::Ok);
        // A read-only attachment cannot be in a group.
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                c"two".as_ptr(),
                0,
                KEY.as_ptr(),
                KEY.len(),
                1,
                0,
                &mut r
            ),
            S::Ok
        );
        let ro = [r as *const NvmosPmoAttachment];
        assert_eq!(
            nvmos_pmo_psync_many(f.pool, ro.as_ptr(), 1, null_mut()),
            S::ReadOnly
        );
        let mut back = [0u8; 2];
        assert_eq!(nvmos_pmo_read(r, 0, back.as_mut_ptr().cast(), 2), S::Ok);
        assert_eq!(&back, b"BB");
        assert_eq!(nvmos_pmo_detach(r), S::Ok);
        nvmos_pmo_pool_close(f.pool);
    }
}

/// A handle used after its detach or close (twice detached, psynced after
/// detach, a pool closed twice, or a value that never was a handle) is
/// refused with `StaleHandle` and a message naming the argument; nothing
/// is read through it.
#[test]
fn stale_handles_are_refused_by_code_never_undefined_behaviour() {
    let f = pool_with_object("obj");
    let mut a = null_mut();
    let mut byte = [0u8; 1];
    // SAFETY: live or stale handles from this library, and valid buffers;
    // stale handles are what is tested.
    unsafe {
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                c"obj".as_ptr(),
                1,
                KEY.as_ptr(),
                KEY.len(),
                1,
                0,
                &mut a
            ),
            S::Ok
        );
        assert_eq!(nvmos_pmo_write(a, 0, b"x".as_ptr().cast(), 1), S::Ok);
        assert_eq!(nvmos_pmo_detach(a), S::Ok);
        assert_eq!(nvmos_pmo_detach(a), S::StaleHandle);
        assert_eq!(
            last_error(),
            "argument attachment is not a live attachment handle (already detached, or not from this library)"
        );
        assert_eq!(nvmos_pmo_psync(a, null_mut()), S::StaleHandle);
        assert_eq!(
            nvmos_pmo_read(a, 0, byte.as_mut_ptr().cast(), 1),
            S::StaleHandle
        );
        let stale = [a as *const NvmosPmoAttachment];
        assert_eq!(
            nvmos_pmo_psync_many(f.pool, stale.as_ptr(), 1, null_mut()),
            S::StaleHandle
        );
        assert!(
            last_error().ends_with("(attachments[0])"),
            "{}",
            last_error()
        );
        // A pool handle where an attachment belongs.
        assert_eq!(
            nvmos_pmo_psync(f.pool.cast(), null_mut()),
            S::InvalidArgument
        );
        assert_eq!(
            last_error(),
            "argument attachment is a pool handle, not an attachment handle"
        );
        // Values that were never handles are not dereferenced.
        for bogus in [8usize, 0x1000, usize::MAX, &byte as *const _ as usize] {
            assert_eq!(
                nvmos_pmo_detach(bogus as *mut NvmosPmoAttachment),
                S::StaleHandle
            );
            assert_eq!(
                nvmos_pmo_pool_close(bogus as *mut NvmosPmoPool),
                S::StaleHandle
            );
        }
        assert_eq!(nvmos_pmo_pool_close(f.pool), S::Ok);
        assert_eq!(nvmos_pmo_pool_close(f.pool), S::StaleHandle);
        assert_eq!(
            last_error(),
            "argument pool is not a live pool handle (already closed, or not from this library)"
        );
        let mut b = null_mut();
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                c"obj".as_ptr(),
                0,
                KEY.as_ptr(),
                KEY.len(),
                1,
                0,
                &mut b
            ),
            S::StaleHandle
        );
        assert!(b.is_null(), "no handle is written on failure");
        assert_eq!(nvmos_pmo_pool_close(null_mut()), S::Ok);
        // What was written before the first detach is there.
        let mut pool = null_mut();
        assert_eq!(
            nvmos_pmo_pool_open(f.path.as_ptr(), 0, null(), &mut pool),
            S::Ok
        );
        assert_eq!(
            nvmos_pmo_attach(
                pool,
                c"obj".as_ptr(),
                0,
                KEY.as_ptr(),
                KEY.len(),
                1,
                0,
                &mut b
            ),
            S::Ok
        );
        assert_eq!(nvmos_pmo_read(b, 0, byte.as_mut_ptr().cast(), 1), S::Ok);
        assert_eq!(&byte, b"x");
        assert_eq!(nvmos_pmo_detach(b), S::Ok);
        assert_eq!(nvmos_pmo_pool_close(pool), S::Ok);
    }
}

/// A count no group can hold is refused before any handle is read: a
/// clean status, not a caught panic.
#[test]
fn psync_many_with_an_impossible_count_is_invalid_argument() {
    let f = pool_with_object("obj");
    let mut a = null_mut();
    // SAFETY: a live pool handle and a one-element array; the count is
    // refused before the array is read.
    unsafe {
        assert_eq!(
            nvmos_pmo_attach(
                f.pool,
                c"obj".as_ptr(),
                1,
                KEY.as_ptr(),
                KEY.len(),
                1,
                0,
                &mut a
            ),
            S::Ok
        );
        let one = [a as *const NvmosPmoAttachment];
        for count in [usize::MAX, 1 << 40, 49] {
            assert_eq!(
                nvmos_pmo_psync_many(f.pool, one.as_ptr(), count, null_mut()),
                S::InvalidArgument,
                "count {count}"
            );
            assert_eq!(
                last_error(),
                format!("argument count is {count}; one psync_many commits at most 48 attachments")
            );
        }
        assert_eq!(nvmos_pmo_detach(a), S::Ok);
        assert_eq!(nvmos_pmo_pool_close(f.pool), S::Ok);
    }
}
