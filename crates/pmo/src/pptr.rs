//! Typed pointers stored inside an object.
//!
//! An object is attached at the same virtual address every time (its
//! `base_address`), so a pointer into it can be stored as a plain absolute
//! address and stays valid across restarts, as the seed intends for
//! pointer-rich data. [`PPtr<T>`] is that address with a type: 8 bytes,
//! `#[repr(transparent)]`, 0 for null, so structures holding it can live
//! in the object as they are (`#[repr(C)]` nodes of a list or a B-tree).
//!
//! ```
//! use nvmos_pmo::PPtr;
//! #[repr(C)]
//! struct Node { value: u64, next: PPtr<Node> }
//! let base = 0x2000_0000_0000usize;            // the object's base_address
//! let size = 1 << 20;                          // its size
//! let second = PPtr::<Node>::from_offset(base, 64);
//! assert_eq!(second.offset_in(base, size), Some(64));
//! assert!(PPtr::<Node>::null().is_null());
//! // An address outside the object, or misaligned for Node, is refused.
//! assert_eq!(PPtr::<Node>::from_offset(base, size).offset_in(base, size), None);
//! assert_eq!(PPtr::<Node>::from_offset(base, 3).offset_in(base, size), None);
//! ```

use std::marker::PhantomData;

/// An absolute address of a `T` inside an object attached at its fixed base.
#[repr(transparent)]
pub struct PPtr<T> {
    addr: u64,
    _t: PhantomData<*const T>,
}

// SAFETY: a PPtr is an integer; dereferencing it is unsafe and the
// caller's business.
unsafe impl<T> Send for PPtr<T> {}
unsafe impl<T> Sync for PPtr<T> {}

impl<T> Clone for PPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PPtr<T> {}
impl<T> PartialEq for PPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.addr == other.addr
    }
}
impl<T> Eq for PPtr<T> {}
impl<T> std::fmt::Debug for PPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PPtr({:#x})", self.addr)
    }
}
impl<T> Default for PPtr<T> {
    fn default() -> Self {
        Self::null()
    }
}

impl<T> PPtr<T> {
    /// The null pointer (address 0).
    pub const fn null() -> Self {
        PPtr {
            addr: 0,
            _t: PhantomData,
        }
    }
    /// Whether it is null.
    pub const fn is_null(self) -> bool {
        self.addr == 0
    }
    /// The pointer to byte `offset` of an object attached at `base`.
    pub const fn from_offset(base: usize, offset: usize) -> Self {
        PPtr {
            addr: (base + offset) as u64,
            _t: PhantomData,
        }
    }
    /// The pointer to `ptr` (which must point into an attached object to be
    /// meaningful after a restart).
    pub fn from_ptr(ptr: *const T) -> Self {
        PPtr {
            addr: ptr as usize as u64,
            _t: PhantomData,
        }
    }
    /// The stored address.
    pub const fn addr(self) -> u64 {
        self.addr
    }
    /// Its byte offset inside an object of `size` bytes at `base`, if a
    /// whole, aligned `T` lies there; `None` for null, out-of-object or
    /// misaligned pointers (such as ones read from a damaged object).
    pub fn offset_in(self, base: usize, size: usize) -> Option<usize> {
        let addr = usize::try_from(self.addr).ok()?;
        let off = addr.checked_sub(base)?;
        let end = off.checked_add(std::mem::size_of::<T>())?;
        (!self.is_null() && end <= size && addr % std::mem::align_of::<T>() == 0).then_some(off)
    }
    /// The raw pointer, checked against the object's bounds.
    pub fn get(self, base: usize, size: usize) -> Option<*mut T> {
        self.offset_in(base, size)
            .map(|_| self.addr as usize as *mut T)
    }
    /// A shared reference.
    ///
    /// # Safety
    /// The object must be attached at `base` with `size` bytes, and a valid
    /// `T` must live there for `'a`, not written meanwhile.
    pub unsafe fn as_ref<'a>(self, base: usize, size: usize) -> Option<&'a T> {
        // SAFETY: bounds and alignment checked by `get`; validity is the caller's.
        self.get(base, size).map(|p| unsafe { &*p })
    }
    /// A mutable reference.
    ///
    /// # Safety
    /// As [`PPtr::as_ref`], and no other reference to that `T` exists for `'a`.
    pub unsafe fn as_mut<'a>(self, base: usize, size: usize) -> Option<&'a mut T> {
        // SAFETY: as above.
        self.get(base, size).map(|p| unsafe { &mut *p })
    }
}
