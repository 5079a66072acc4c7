//! `POff<T>`: a structure linked with relocatable pointers, written with
//! the object attached at one address, reads back whole with the object at
//! another; every refusal (another object's offset, out of bounds,
//! misaligned, null, read-only) is an error, never a wild access.

use std::sync::Arc;

use nvmos_pmo::attach::mem_backing::MemBacking;
use nvmos_pmo::{
    Attachment, CacheIdentity, KdfParams, Mode, POff, POffError, PPtr, PageBacking, Perm, Pool,
};

/// A MemBacking whose object id does not depend on where it is attached
/// (MemBacking's own id is its base address), as a pool object's does not.
struct Relocated {
    inner: MemBacking,
    id: u64,
}

impl PageBacking for Relocated {
    fn page_size(&self) -> usize {
        self.inner.page_size()
    }
    fn page_count(&self) -> usize {
        self.inner.page_count()
    }
    fn base_address(&self) -> usize {
        self.inner.base_address()
    }
    fn encrypted(&self) -> bool {
        self.inner.encrypted()
    }
    fn read_page(&self, i: usize, out: &mut [u8]) -> Result<(), nvmos_pmo::BackingError> {
        self.inner.read_page(i, out)
    }
    fn stage_page(&self, i: usize, data: &[u8]) -> Result<(), nvmos_pmo::BackingError> {
        self.inner.stage_page(i, data)
    }
    fn commit(&self) -> Result<(), nvmos_pmo::BackingError> {
        self.inner.commit()
    }
    fn cache_identity(&self) -> CacheIdentity {
        CacheIdentity {
            pool: 0x9e3779b97f4a7c15,
            object: self.id,
            version: 0,
            open: 0,
        }
    }
}

#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Root {
    head: POff<Node>,
    /// The same head as an absolute pointer, to show it does not relocate.
    head_abs: PPtr<Node>,
    len: u64,
}

#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Node {
    value: u64,
    next: POff<Node>,
}

const ID: u64 = 0x0123_4567_89ab_cdef;
const PAGES: usize = 4;

fn attach(base: usize, contents: Option<&[u8]>, perm: Perm) -> Attachment {
    let inner = match contents {
        Some(bytes) => MemBacking::with_contents(base, bytes, true),
        None => MemBacking::new(base, PAGES, true),
    };
    Attachment::attach(
        Arc::new(Relocated { inner, id: ID }),
        perm,
        Mode::DecryptAtFault,
    )
    .expect("attach")
}

/// A list of `values` pushed front to back, nodes spread over the pages.
fn build(a: &mut Attachment, values: &[u64]) {
    let mut head = POff::null();
    for (i, &value) in values.iter().enumerate() {
        // Node i on page 1 + i % 3 at 32 * i: spread over three pages.
        let at = 4096 * (i % 3 + 1) + 32 * i;
        let node = a.poff::<Node>(at);
        a.set_off(node, Node { value, next: head }).unwrap();
        head = node;
    }
    let root = Root {
        head,
        head_abs: a.pptr(head.offset() as usize),
        len: values.len() as u64,
    };
    a.set_off(a.poff(0), root).unwrap();
}

fn walk(a: &Attachment) -> Vec<u64> {
    let root: Root = a.get_off(a.poff(0)).unwrap();
    let mut out = Vec::new();
    let mut p = root.head;
    while !p.is_null() {
        let ptr = a.resolve(p).unwrap();
        let addr = ptr as usize;
        assert!(addr >= a.as_ptr() as usize && addr < a.as_ptr() as usize + a.len());
        let node = a.get_off(p).unwrap();
        out.push(node.value);
        p = node.next;
        assert!(out.len() as u64 <= root.len, "cycle");
    }
    out
}

#[test]
fn a_list_written_at_one_address_reads_back_at_another() {
    let (base_a, base_b) = (0x5a10_0000_0000usize, 0x5b20_0000_0000usize);
    let values = [11, 22, 33, 44, 55];
    let mut a = attach(base_a, None, Perm::Write);
    assert_eq!(a.object_id(), ID);
    build(&mut a, &values);
    assert_eq!(walk(&a), [55, 44, 33, 22, 11]);
    a.psync().unwrap();
    let bytes = a.as_slice().to_vec();
    a.detach().unwrap();

    // The same bytes, now attached elsewhere (as another process, or a
    // copy of the object, would see them).
    let b = attach(base_b, Some(&bytes), Perm::Read);
    assert_eq!(b.as_ptr() as usize, base_b);
    assert_eq!(walk(&b), [55, 44, 33, 22, 11]);
    // The absolute pointer written at A points outside B: refused.
    let root: Root = b.get_off(b.poff(0)).unwrap();
    assert!(b.get(root.head_abs).is_none());
    assert_eq!(
        b.resolve(root.head).unwrap() as usize,
        base_b + root.head.offset() as usize
    );
    // poff_of gives back the POff of a resolved pointer.
    assert_eq!(b.poff_of(b.resolve(root.head).unwrap()).unwrap(), root.head);
}

#[test]
fn refusals_are_errors() {
    let base = 0x5c30_0000_0000usize;
    let mut a = attach(base, None, Perm::Write);
    let len = a.len();
    assert_eq!(a.resolve(POff::<u64>::null()), Err(POffError::Null));
    assert_eq!(
        a.get_off(POff::<u64>::new(ID ^ 1, 0)),
        Err(POffError::OtherObject {
            expected: ID,
            found: ID ^ 1
        })
    );
    assert_eq!(
        a.resolve(a.poff::<u64>(len - 4)),
        Err(POffError::OutOfBounds {
            offset: (len - 4) as u64,
            size: 8,
            len
        })
    );
    assert!(matches!(
        a.resolve(POff::<u64>::new(ID, u64::MAX)),
        Err(POffError::OutOfBounds { .. })
    ));
    assert_eq!(
        a.set_off(a.poff::<u64>(12), 7),
        Err(POffError::Misaligned {
            offset: 12,
            align: 8
        })
    );
    // The last whole u64 is fine.
    a.set_off(a.poff::<u64>(len - 8), 7).unwrap();
    assert_eq!(a.get_off(a.poff::<u64>(len - 8)), Ok(7));
    assert!(matches!(
        a.poff_of((base + len) as *const u64),
        Err(POffError::NotInObject { .. })
    ));
    a.psync().unwrap();
    let bytes = a.as_slice().to_vec();
    drop(a);
    let mut r = attach(base, Some(&bytes), Perm::Read);
    assert_eq!(r.set_off(r.poff::<u64>(0), 1), Err(POffError::ReadOnly));
    assert_eq!(r.get_off(r.poff::<u64>(len - 8)), Ok(7));
}

#[test]
fn pool_objects_refuse_each_others_offsets_and_keep_theirs_across_attaches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    let pool = Pool::create(&path, 4 << 20).unwrap();
    let key = Some(&b"a long passphrase"[..]);
    for name in ["x", "y"] {
        pool.pcreate_with(name, 16 << 10, key, KdfParams::INSECURE_FAST)
            .unwrap();
    }
    let mut x = pool.attach("x", Perm::Write, key, Mode::DramCache).unwrap();
    let mut y = pool.attach("y", Perm::Write, key, Mode::DramCache).unwrap();
    assert_ne!(x.object_id(), y.object_id());
    build(&mut x, &[1, 2, 3]);
    let px: POff<Root> = x.poff(0);
    assert!(matches!(y.get_off(px), Err(POffError::OtherObject { .. })));
    // A POff into x stored in y resolves only through x.
    y.set_off(y.poff::<POff<Root>>(64), px).unwrap();
    let stored = y.get_off(y.poff::<POff<Root>>(64)).unwrap();
    assert_eq!(stored, px);
    assert_eq!(x.get_off(stored).unwrap().len, 3);
    x.detach().unwrap();
    y.detach().unwrap();
    drop(pool);

    let pool = Pool::open(&path, nvmos_pmo::Access::ReadOnly).unwrap();
    let x = pool
        .attach("x", Perm::Read, key, Mode::DecryptAtFault)
        .unwrap();
    assert_eq!(walk(&x), [3, 2, 1]);
    let y = pool
        .attach("y", Perm::Read, key, Mode::DecryptAtFault)
        .unwrap();
    assert_eq!(y.get_off(y.poff::<POff<Root>>(64)).unwrap(), px);
}
