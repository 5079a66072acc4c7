//! Per-frame metadata shared by the buddy allocators: intrusive list links
//! and a state byte, 12 bytes a frame (Linux's `struct page` is 64).
//!
//! Frames are named by their index inside the zone or space that owns the
//! array, a `u32`, so a link costs 4 bytes instead of a pointer's 8.

use crate::error::ensure;
use crate::{AllocError, Order, Pfn, ValidationError};
use alloc::vec::Vec;

/// "No frame": the end of a list.
pub(crate) const NIL: u32 = u32::MAX;

/// What the allocator knows of one frame.
///
/// Invariant kept by both buddies: every frame is either the head of a
/// block (free or allocated, with its order) or a `Tail` inside one, so a
/// free can be checked exactly: the frame must be an allocated head of the
/// same order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct FrameState(u8);

const ORDER_MASK: u8 = 0x0f;
const KIND_MASK: u8 = 0x30;
const KIND_TAIL: u8 = 0x00;
const KIND_FREE: u8 = 0x10;
const KIND_ALLOC: u8 = 0x20;
/// Set once the frame has been handed out as the head of a block, and
/// never cleared: it tells a double free from a free of a frame that was
/// never allocated.
const EVER_ALLOCATED: u8 = 0x80;

/// The kind of a frame, decoded from its state byte.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Inside a block whose head is another frame.
    Tail,
    /// Head of a free block of this order.
    Free(Order),
    /// Head of an allocated block of this order.
    Allocated(Order),
}

impl FrameState {
    pub(crate) const TAIL: FrameState = FrameState(KIND_TAIL);

    #[inline]
    pub(crate) fn kind(self) -> Kind {
        // The order bits are only ever written from an `Order`.
        let order = Order::new(self.0 & ORDER_MASK).unwrap_or(Order::ZERO);
        match self.0 & KIND_MASK {
            KIND_FREE => Kind::Free(order),
            KIND_ALLOC => Kind::Allocated(order),
            _ => Kind::Tail,
        }
    }

    /// Whether this frame heads an allocated block of exactly `order`: the
    /// check every free makes, one compare.
    #[inline]
    pub(crate) fn is_allocated(self, order: Order) -> bool {
        self.0 & !EVER_ALLOCATED == KIND_ALLOC | order.get()
    }

    /// Whether this frame was ever handed out as the head of a block.
    #[inline]
    pub(crate) fn ever_allocated(self) -> bool {
        self.0 & EVER_ALLOCATED != 0
    }

    #[inline]
    pub(crate) fn set_tail(&mut self) {
        self.0 &= EVER_ALLOCATED;
    }

    #[inline]
    pub(crate) fn set_free(&mut self, order: Order) {
        self.0 = (self.0 & EVER_ALLOCATED) | KIND_FREE | order.get();
    }

    #[inline]
    pub(crate) fn set_allocated(&mut self, order: Order) {
        self.0 = EVER_ALLOCATED | KIND_ALLOC | order.get();
    }
}

/// Links and state of one frame.
#[derive(Copy, Clone, Debug)]
#[repr(C)]
pub(crate) struct FrameMeta {
    pub(crate) prev: u32,
    pub(crate) next: u32,
    pub(crate) state: FrameState,
}

impl FrameMeta {
    pub(crate) const UNLINKED_TAIL: FrameMeta = FrameMeta {
        prev: NIL,
        next: NIL,
        state: FrameState::TAIL,
    };
}

/// A doubly linked list threaded through a `[FrameMeta]`: O(1) push at
/// either end, pop at the front, and removal of any member.
#[derive(Copy, Clone, Debug)]
pub(crate) struct FrameList {
    head: u32,
    tail: u32,
    len: u64,
}

impl FrameList {
    pub(crate) const EMPTY: FrameList = FrameList {
        head: NIL,
        tail: NIL,
        len: 0,
    };

    /// Records `0..n`, each with `state`, linked in order, and the list
    /// of them: built in one pass over the records, the cost of building
    /// a large space (a replay builds its allocator once per run).
    pub(crate) fn in_order(state: FrameState, n: u32) -> (Vec<FrameMeta>, FrameList) {
        let meta = (0..n)
            .map(|i| FrameMeta {
                prev: if i == 0 { NIL } else { i - 1 },
                next: if i + 1 == n { NIL } else { i + 1 },
                state,
            })
            .collect();
        let list = if n == 0 {
            FrameList::EMPTY
        } else {
            FrameList {
                head: 0,
                tail: n - 1,
                len: u64::from(n),
            }
        };
        (meta, list)
    }

    #[inline]
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The first member, if any.
    #[inline]
    pub(crate) fn front(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// The last member, if any.
    #[inline]
    pub(crate) fn back(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    #[inline]
    pub(crate) fn push_front(&mut self, meta: &mut [FrameMeta], i: u32) {
        meta[i as usize].prev = NIL;
        meta[i as usize].next = self.head;
        if self.head == NIL {
            self.tail = i;
        } else {
            meta[self.head as usize].prev = i;
        }
        self.head = i;
        self.len += 1;
    }

    #[inline]
    pub(crate) fn push_back(&mut self, meta: &mut [FrameMeta], i: u32) {
        meta[i as usize].next = NIL;
        meta[i as usize].prev = self.tail;
        if self.tail == NIL {
            self.head = i;
        } else {
            meta[self.tail as usize].next = i;
        }
        self.tail = i;
        self.len += 1;
    }

    #[inline]
    pub(crate) fn pop_front(&mut self, meta: &mut [FrameMeta]) -> Option<u32> {
        let i = self.head;
        if i == NIL {
            return None;
        }
        let next = meta[i as usize].next;
        self.head = next;
        if next == NIL {
            self.tail = NIL;
        } else {
            meta[next as usize].prev = NIL;
        }
        self.len -= 1;
        Some(i)
    }

    /// Move every member of `other` to the back of this list, in order,
    /// leaving `other` empty: O(1), two links rewritten.
    #[inline]
    pub(crate) fn append(&mut self, meta: &mut [FrameMeta], other: &mut FrameList) {
        if other.head == NIL {
            return;
        }
        if self.tail == NIL {
            self.head = other.head;
        } else {
            meta[self.tail as usize].next = other.head;
            meta[other.head as usize].prev = self.tail;
        }
        self.tail = other.tail;
        self.len += other.len;
        *other = FrameList::EMPTY;
    }

    /// Unlink `i`, which must be a member.
    #[inline]
    pub(crate) fn remove(&mut self, meta: &mut [FrameMeta], i: u32) {
        let FrameMeta { prev, next, .. } = meta[i as usize];
        if prev == NIL {
            self.head = next;
        } else {
            meta[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            meta[next as usize].prev = prev;
        }
        self.len -= 1;
    }

    /// Walk the list checking its links, calling `visit` on each member.
    pub(crate) fn check(
        &self,
        meta: &[FrameMeta],
        name: &dyn core::fmt::Display,
        mut visit: impl FnMut(u32) -> Result<(), ValidationError>,
    ) -> Result<(), ValidationError> {
        let mut prev = NIL;
        let mut cur = self.head;
        let mut seen = 0u64;
        while cur != NIL {
            ensure!(
                (cur as usize) < meta.len(),
                "{name}: link to frame index {cur} beyond the array"
            );
            ensure!(
                seen < self.len,
                "{name}: longer than its length {} (a cycle?)",
                self.len
            );
            ensure!(
                meta[cur as usize].prev == prev,
                "{name}: frame index {cur} has prev {} but follows {prev}",
                meta[cur as usize].prev
            );
            visit(cur)?;
            seen += 1;
            prev = cur;
            cur = meta[cur as usize].next;
        }
        ensure!(
            seen == self.len,
            "{name}: {seen} members but length {}",
            self.len
        );
        ensure!(
            self.tail == prev,
            "{name}: tail {} but last member {prev}",
            self.tail
        );
        Ok(())
    }
}

/// Whether the block at `pfn` (inside the buddy zone starting at
/// `zone_start`, aligned for `order`) is allocated with exactly `order`,
/// and if not, which error a free of it gets: `WrongOrder` for a block
/// allocated with another order, `DoubleFree` for a frame freed since it
/// was last allocated, `NotAllocated` otherwise (never allocated, or a
/// tail frame of an allocated block). `state_at` reads a frame's state.
/// Shared by every buddy that keeps `FrameState`s (`Buddy`, `BankBuddy`).
pub(crate) fn check_block_free(
    state_at: impl Fn(Pfn) -> FrameState,
    zone_start: Pfn,
    pfn: Pfn,
    order: Order,
) -> Result<(), AllocError> {
    let state = state_at(pfn);
    if state.is_allocated(order) {
        return Ok(());
    }
    let freed_before = |pfn| {
        if state.ever_allocated() {
            AllocError::DoubleFree { pfn, order }
        } else {
            AllocError::NotAllocated { pfn, order }
        }
    };
    match state.kind() {
        Kind::Allocated(allocated) if allocated == order => Ok(()),
        Kind::Allocated(allocated) => Err(AllocError::WrongOrder {
            pfn,
            order,
            allocated,
        }),
        Kind::Free(_) => Err(freed_before(pfn)),
        Kind::Tail => {
            // Find the block the frame lies in: its head is the first head
            // met aligning the pfn down order by order.
            for o in Order::all().skip(1) {
                let head = pfn.0 & !(o.frames() - 1);
                if head < zone_start.0 {
                    break;
                }
                match state_at(Pfn(head)).kind() {
                    Kind::Tail => continue,
                    Kind::Free(_) => return Err(freed_before(pfn)),
                    Kind::Allocated(_) => break,
                }
            }
            Err(AllocError::NotAllocated { pfn, order })
        }
    }
}
