//! Typed pointers stored inside an object: [`PPtr<T>`], an absolute
//! address valid at the object's fixed attach address, and [`POff<T>`], an
//! (object id, offset) pair valid at any attach address and only in its
//! own object.
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

/// Why a [`POff`] does not resolve in an attachment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum POffError {
    /// The null offset (object id 0).
    #[error("null POff")]
    Null,
    /// The offset belongs to another object.
    #[error("POff of object {found:#018x} resolved in object {expected:#018x}")]
    OtherObject {
        /// The attached object's id.
        expected: u64,
        /// The id the POff holds.
        found: u64,
    },
    /// A whole `T` does not fit at the offset.
    #[error(
        "POff at offset {offset} with a {size}-byte target lies outside the {len}-byte object"
    )]
    OutOfBounds {
        /// The offset.
        offset: u64,
        /// `size_of::<T>()`.
        size: usize,
        /// Bytes in the object.
        len: usize,
    },
    /// The offset is not a multiple of `T`'s alignment.
    #[error("POff at offset {offset} is misaligned for a target aligned to {align} bytes")]
    Misaligned {
        /// The offset.
        offset: u64,
        /// `align_of::<T>()`.
        align: usize,
    },
    /// A store through a POff into an attachment that is not writable.
    #[error("store through a POff into a read-only attachment")]
    ReadOnly,
    /// A raw pointer that does not point into the attachment.
    #[error("address {addr:#x} is not inside the object at {base:#x}..{end:#x}")]
    NotInObject {
        /// The address.
        addr: usize,
        /// The object's first byte.
        base: usize,
        /// One past its last.
        end: usize,
    },
}

/// A relocatable typed pointer: the id of the object a `T` lives in and
/// its byte offset there. Unlike [`PPtr`] it does not depend on the
/// object's attach address: it resolves wherever the object is mapped, and
/// only in that object (an attachment checks the id, the bounds and the
/// alignment; see [`Attachment::resolve`](crate::Attachment::resolve)).
/// 16 bytes, `#[repr(C)]`, so structures holding it can live in the
/// object as they are. Object id 0 is null: a pool draws object ids at
/// random from all 2^64 values at pcreate, so an object has id 0 with
/// probability 2^-64 (its POffs would then read as null). It is what
/// libpmemobj calls `PMEMoid`.
///
/// ```
/// use nvmos_pmo::pptr::{POff, POffError};
/// #[repr(C)]
/// struct Node { value: u64, next: POff<Node> }
/// let id = 0x1234_5678_9abc_def0;          // the object's id
/// let p = POff::<Node>::new(id, 64);
/// assert_eq!(p.check(id, 4096), Ok(64));
/// assert!(POff::<Node>::null().is_null());
/// // Another object's offset, one past the end, or misaligned: refused.
/// assert!(matches!(p.check(7, 4096), Err(POffError::OtherObject { .. })));
/// assert!(matches!(POff::<Node>::new(id, 4090).check(id, 4096), Err(POffError::OutOfBounds { .. })));
/// assert!(matches!(POff::<Node>::new(id, 3).check(id, 4096), Err(POffError::Misaligned { .. })));
/// ```
#[repr(C)]
pub struct POff<T> {
    object: u64,
    offset: u64,
    _t: PhantomData<*const T>,
}

// SAFETY: a POff is two integers; resolving it goes through an attachment.
unsafe impl<T> Send for POff<T> {}
unsafe impl<T> Sync for POff<T> {}

impl<T> Clone for POff<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for POff<T> {}
impl<T> PartialEq for POff<T> {
    fn eq(&self, other: &Self) -> bool {
        self.object == other.object && self.offset == other.offset
    }
}
impl<T> Eq for POff<T> {}
impl<T> std::hash::Hash for POff<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.object.hash(state);
        self.offset.hash(state);
    }
}
impl<T> std::fmt::Debug for POff<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "POff({:#018x}+{:#x})", self.object, self.offset)
    }
}
impl<T> Default for POff<T> {
    fn default() -> Self {
        Self::null()
    }
}

impl<T> POff<T> {
    /// The null offset (object id 0).
    pub const fn null() -> Self {
        POff {
            object: 0,
            offset: 0,
            _t: PhantomData,
        }
    }
    /// Byte `offset` of object `object` (0 gives null whatever the offset).
    pub const fn new(object: u64, offset: u64) -> Self {
        POff {
            object,
            offset: if object == 0 { 0 } else { offset },
            _t: PhantomData,
        }
    }
    /// Whether it is null.
    pub const fn is_null(self) -> bool {
        self.object == 0
    }
    /// The object id it belongs to.
    pub const fn object(self) -> u64 {
        self.object
    }
    /// Its byte offset in the object.
    pub const fn offset(self) -> u64 {
        self.offset
    }
    /// The same place seen as another type (for untyped roots and casts).
    pub const fn cast<U>(self) -> POff<U> {
        POff {
            object: self.object,
            offset: self.offset,
            _t: PhantomData,
        }
    }
    /// Its offset as a `usize`, if a whole, aligned `T` lies there in
    /// object `object` of `len` bytes: what resolving it in that object
    /// checks. (Alignment of the offset is alignment of the address, since
    /// objects are attached at page-aligned addresses.)
    pub fn check(self, object: u64, len: usize) -> Result<usize, POffError> {
        if self.is_null() {
            return Err(POffError::Null);
        }
        if self.object != object {
            return Err(POffError::OtherObject {
                expected: object,
                found: self.object,
            });
        }
        let size = std::mem::size_of::<T>();
        let out = || POffError::OutOfBounds {
            offset: self.offset,
            size,
            len,
        };
        let off = usize::try_from(self.offset).map_err(|_| out())?;
        if off.checked_add(size).is_none_or(|end| end > len) {
            return Err(out());
        }
        let align = std::mem::align_of::<T>();
        if off % align != 0 {
            return Err(POffError::Misaligned {
                offset: self.offset,
                align,
            });
        }
        Ok(off)
    }
}
