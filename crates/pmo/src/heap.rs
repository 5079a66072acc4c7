//! A persistent heap inside one object: `palloc(size, type_num)`,
//! `pfree`, `prealloc`, a root block, and iteration over allocated blocks
//! by type — libpmemobj's `pmemobj_alloc`/`free`/`realloc`/`root`/
//! `POBJ_FOREACH_TYPE`, for a PMO.
//!
//! The heap manages a byte region (an attached object's memory,
//! [`Attachment::as_mut_slice`](crate::Attachment::as_mut_slice)) and keeps
//! **all its metadata in that region**: the header, every block's header
//! and the free lists. So the heap is sealed, verified and rolled back
//! with the object's data, and it is **crash-consistent with psync by
//! construction**: an allocation (or free) is durable exactly when the
//! psync that contains its metadata writes commits, and a crash before
//! that psync leaves the heap as of the previous one, with the block
//! unallocated — there is no separate allocator log to replay.
//!
//! # Layout
//!
//! All integers little-endian. Offsets are from the region's start (for a
//! heap formatted over a whole object: object offsets, which is what
//! [`POff`](crate::POff) holds).
//!
//! ```text
//! 0     header (256 B): magic "NVMOSHP1", version, header size, the
//!       length formatted over, root offset and size, allocated
//!       payload bytes and block count, 24 free-list heads
//! 256   blocks tiling the region to its 16-byte-aligned end:
//!       [ size | ALLOC | PREV_ALLOC ] [ type_num u32 | check u32 ] payload …
//!       a free block's payload holds next/prev free (in 16-byte units,
//!       u32) and its last 8 bytes its size (the boundary tag).
//! ```
//!
//! Invariants (checked by [`Heap::check`]): blocks tile the region
//! exactly; sizes are multiples of 16 and at least 32; no two free blocks
//! are adjacent (frees coalesce); every block's PREV_ALLOC bit says
//! whether the block before it is allocated (the first block's is set);
//! every free block is on exactly the free list of its size class, the
//! lists doubly linked; every header's check word matches its offset,
//! size and flags, so a stray pointer handed to `pfree` is refused rather
//! than freeing garbage; the header's counters match the blocks.
//!
//! Size classes: block sizes 32–256 in 16-byte steps (15 exact classes,
//! any block on the list fits, O(1)), then powers of two to 64 KiB and one
//! class above (first fit within the class, then the head of any larger
//! class). A request is served from the smallest class that can hold it,
//! and a block larger than needed by at least 32 bytes is split.
//!
//! ```
//! use nvmos_pmo::heap::Heap;
//! let mut object = vec![0u8; 64 << 10];
//! let mut heap = Heap::format(&mut object)?;
//! let root = heap.root(64)?; // created once, found again after reopening
//! let a = heap.palloc(100, 7)?;
//! heap.bytes_mut(a)?[..5].copy_from_slice(b"hello");
//! let b = heap.palloc(3000, 8)?;
//! heap.pfree(b)?;
//! assert!(heap.pfree(b).is_err()); // double free: refused, heap unchanged
//! let heap = Heap::open(&mut object)?;
//! assert_eq!(heap.blocks_of_type(7).collect::<Result<Vec<_>, _>>()?.len(), 1);
//! assert_eq!(heap.root_block().map(|r| r.offset), Some(root));
//! # Ok::<(), nvmos_pmo::heap::HeapError>(())
//! ```

use serde::Serialize;

/// The header's magic.
pub const MAGIC: [u8; 8] = *b"NVMOSHP1";
/// This heap format's version.
pub const VERSION: u32 = 1;
/// Bytes of the heap header; the first block starts here.
pub const HEADER_SIZE: u64 = 256;
/// Bytes of a block header; a block's payload starts here.
pub const BLOCK_HEADER: u64 = 16;
/// Every block's size and offset are multiples of this.
pub const ALIGN: u64 = 16;
/// The smallest block: header, two free-list links and the boundary tag.
pub const MIN_BLOCK: u64 = 32;
/// Number of free-list size classes.
pub const CLASSES: usize = 24;
/// The largest region a heap can manage (free-list links are u32 counts
/// of 16-byte units).
pub const MAX_REGION: u64 = (u32::MAX as u64) * ALIGN;

const ALLOC: u64 = 1;
const PREV_ALLOC: u64 = 2;
const FLAGS: u64 = ALLOC | PREV_ALLOC;

// Header fields.
const H_VERSION: u64 = 8;
const H_HEADER_SIZE: u64 = 12;
const H_LEN: u64 = 16;
const H_ROOT: u64 = 24;
const H_ROOT_SIZE: u64 = 32;
const H_ALLOC_BYTES: u64 = 40;
const H_ALLOC_BLOCKS: u64 = 48;
const H_LISTS: u64 = 56;

/// Why a heap operation failed. After any error the heap is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeapError {
    /// The region holds no heap (no magic at its start).
    #[error("no heap in this object (no heap header at offset 0; format it first)")]
    NotFormatted,
    /// A heap of another format version.
    #[error("heap format version {found}, this nvmos reads version {VERSION}")]
    Version {
        /// The version found.
        found: u32,
    },
    /// The region cannot hold a heap, or is not the one formatted.
    #[error("region of {len} bytes: {why}")]
    Region {
        /// The region's length.
        len: u64,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A zero-byte allocation.
    #[error("zero-byte allocation")]
    ZeroSize,
    /// No free block can hold the request.
    #[error(
        "out of heap space: {requested} bytes asked, the largest free block holds {largest_free}"
    )]
    OutOfSpace {
        /// Payload bytes asked for.
        requested: u64,
        /// Payload bytes the largest free block could hold.
        largest_free: u64,
    },
    /// The offset is not the payload of an allocated block.
    #[error("offset {offset}: {why}")]
    InvalidOffset {
        /// The offset given.
        offset: u64,
        /// Why it is not a block.
        why: &'static str,
    },
    /// The block at this offset is already free.
    #[error("double free of the block at offset {offset}")]
    DoubleFree {
        /// The payload offset.
        offset: u64,
    },
    /// The heap's metadata is inconsistent (a bug, or bytes written over
    /// the heap's metadata through a stray pointer).
    #[error("heap metadata corrupt at offset {offset}: {what}")]
    Corrupt {
        /// Where.
        offset: u64,
        /// What is wrong.
        what: String,
    },
}

/// One allocated block, as iteration and lookups report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Block {
    /// Offset of the payload (what `palloc` returned).
    pub offset: u64,
    /// Usable payload bytes (at least what was asked for).
    pub size: u64,
    /// The type number given to `palloc`.
    pub type_num: u32,
}

/// Space accounting, as `nvmos pmo info --stats` prints it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct HeapStats {
    /// Bytes the heap manages (the region, header included).
    pub region_bytes: u64,
    /// Allocated blocks (root included).
    pub allocated_blocks: u64,
    /// Payload bytes of allocated blocks.
    pub allocated_bytes: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Payload bytes free blocks could hold.
    pub free_bytes: u64,
    /// Payload bytes of the largest free block.
    pub largest_free: u64,
    /// Bytes of metadata: the heap header and block headers.
    pub metadata_bytes: u64,
    /// External fragmentation: 1 − largest free / all free (0 when the
    /// free space is one block or there is none).
    pub fragmentation: f64,
}

/// A heap over a byte region. See the module docs for the layout and
/// invariants.
///
/// `M` is the region: `&mut [u8]` (an attachment's
/// [`as_mut_slice`](crate::Attachment::as_mut_slice)) to allocate, `&[u8]`
/// ([`as_slice`](crate::Attachment::as_slice), a read-only attachment) to
/// look up and iterate.
pub struct Heap<M> {
    mem: M,
    /// The 16-byte-aligned end of the blocks.
    end: u64,
}

fn class_of(size: u64) -> usize {
    debug_assert!(size >= MIN_BLOCK && size.is_multiple_of(ALIGN));
    if size <= 256 {
        (size / ALIGN - 2) as usize
    } else {
        // (256, 512] → 15, (512, 1 KiB] → 16, … (32, 64 KiB] → 22, above → 23.
        let log = 64 - (size - 1).leading_zeros() as usize; // ceil(log2(size))
        (15 + log - 9).min(CLASSES - 1)
    }
}

/// The block size serving `payload` bytes.
fn block_size(payload: u64) -> Option<u64> {
    let size = payload.checked_add(BLOCK_HEADER + ALIGN - 1)? & !(ALIGN - 1);
    Some(size.max(MIN_BLOCK))
}

fn check_word(offset: u64, word0: u64, type_num: u32) -> u32 {
    let x = offset.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ word0.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ u64::from(type_num).wrapping_mul(0x1656_67B1_9E37_79F9);
    ((x >> 32) ^ x) as u32 ^ 0x5EA1_ED00
}

impl<M: AsRef<[u8]> + AsMut<[u8]>> Heap<M> {
    /// Format `mem` as an empty heap (overwriting its first bytes: the
    /// header and one free block spanning the rest).
    pub fn format(mut mem: M) -> Result<Self, HeapError> {
        let len = mem.as_ref().len() as u64;
        if len > MAX_REGION {
            return Err(HeapError::Region {
                len,
                why: "larger than a heap can manage (64 GiB)",
            });
        }
        let end = len & !(ALIGN - 1);
        if end < HEADER_SIZE + MIN_BLOCK {
            return Err(HeapError::Region {
                len,
                why: "too small for a heap (header and one block: 288 bytes)",
            });
        }
        mem.as_mut()[..HEADER_SIZE as usize].fill(0);
        let mut heap = Heap { mem, end };
        heap.mem.as_mut()[..8].copy_from_slice(&MAGIC);
        heap.put32(H_VERSION, VERSION);
        heap.put32(H_HEADER_SIZE, HEADER_SIZE as u32);
        heap.put(H_LEN, len);
        let first = HEADER_SIZE;
        heap.write_free(first, end - first, true);
        heap.push_free(first, end - first)?;
        Ok(heap)
    }

    /// Open the heap in `mem`, or format it if `mem` is a fresh object
    /// (its first 256 bytes all zero). Anything else that is not a heap
    /// is refused, never formatted over.
    pub fn open_or_format(mem: M) -> Result<Self, HeapError> {
        let fresh = mem
            .as_ref()
            .get(..HEADER_SIZE as usize)
            .is_some_and(|h| h.iter().all(|&b| b == 0));
        if fresh {
            Heap::format(mem)
        } else {
            Heap::open(mem)
        }
    }
}

impl<M: AsRef<[u8]>> Heap<M> {
    /// Open the heap formatted in `mem`, checking its header (the blocks
    /// are checked as they are used, and all at once by [`Heap::check`]).
    pub fn open(mem: M) -> Result<Self, HeapError> {
        let len = mem.as_ref().len() as u64;
        if len < HEADER_SIZE || mem.as_ref()[..8] != MAGIC {
            return Err(HeapError::NotFormatted);
        }
        let heap = Heap {
            end: len & !(ALIGN - 1),
            mem,
        };
        let version = heap.get32(H_VERSION)?;
        if version != VERSION {
            return Err(HeapError::Version { found: version });
        }
        if u64::from(heap.get32(H_HEADER_SIZE)?) != HEADER_SIZE {
            return Err(heap.corrupt(H_HEADER_SIZE, "header size is not 256"));
        }
        let formatted = heap.get(H_LEN)?;
        if formatted != len {
            return Err(HeapError::Region {
                len,
                why: "not the length the heap was formatted over",
            });
        }
        Ok(heap)
    }

    /// Whether `mem` starts with a heap header.
    pub fn is_formatted(mem: &[u8]) -> bool {
        mem.len() as u64 >= HEADER_SIZE && mem[..8] == MAGIC
    }

    // ----- raw access: every read is bounds-checked, so corrupt metadata
    // is an error, never a panic.

    fn corrupt(&self, offset: u64, what: impl Into<String>) -> HeapError {
        HeapError::Corrupt {
            offset,
            what: what.into(),
        }
    }

    fn get(&self, off: u64) -> Result<u64, HeapError> {
        let o = usize::try_from(off).map_err(|_| self.corrupt(off, "offset beyond the region"))?;
        match self.mem.as_ref().get(o..o.wrapping_add(8)) {
            Some(b) => Ok(u64::from_le_bytes(b.try_into().expect("8 bytes"))),
            None => Err(self.corrupt(off, "offset beyond the region")),
        }
    }

    fn get32(&self, off: u64) -> Result<u32, HeapError> {
        let o = usize::try_from(off).map_err(|_| self.corrupt(off, "offset beyond the region"))?;
        match self.mem.as_ref().get(o..o.wrapping_add(4)) {
            Some(b) => Ok(u32::from_le_bytes(b.try_into().expect("4 bytes"))),
            None => Err(self.corrupt(off, "offset beyond the region")),
        }
    }

    // ----- blocks

    /// A block's (size, flags, type), its header checked.
    fn header(&self, block: u64) -> Result<(u64, u64, u32), HeapError> {
        if block < HEADER_SIZE || !block.is_multiple_of(ALIGN) || block + MIN_BLOCK > self.end {
            return Err(self.corrupt(block, "block offset outside the heap"));
        }
        let word0 = self.get(block)?;
        let type_num = self.get32(block + 8)?;
        let check = self.get32(block + 12)?;
        if check != check_word(block, word0, type_num) {
            return Err(self.corrupt(block, "block header check word does not match"));
        }
        let size = word0 & !FLAGS;
        if size < MIN_BLOCK || !size.is_multiple_of(ALIGN) || block + size > self.end {
            return Err(self.corrupt(block, format!("block size {size} out of range")));
        }
        Ok((size, word0 & FLAGS, type_num))
    }

    fn list_head(&self, class: usize) -> Result<u64, HeapError> {
        self.get(H_LISTS + 8 * class as u64)
    }

    fn link(&self, block: u64, which: u64) -> Result<u64, HeapError> {
        Ok(u64::from(self.get32(block + BLOCK_HEADER + 4 * which)?) * ALIGN)
    }

    /// The free block to serve a block of `size`, or None.
    fn find_free(&self, size: u64) -> Result<Option<(u64, u64)>, HeapError> {
        let first = class_of(size);
        let mut steps = 0u64;
        let budget = self.end / MIN_BLOCK + 1; // a cycle in a list is corruption
        for class in first..CLASSES {
            let mut block = self.list_head(class)?;
            // Only the first class, when it is a range class, may hold
            // blocks smaller than the request; every block of a larger
            // class, or of an exact class, fits.
            let may_not_fit = class == first && class >= 15;
            while block != 0 {
                let (bsize, flags, _) = self.header(block)?;
                if flags & ALLOC != 0 {
                    return Err(self.corrupt(block, "allocated block on a free list"));
                }
                if bsize >= size {
                    return Ok(Some((block, bsize)));
                }
                if !may_not_fit {
                    return Err(self.corrupt(block, "free block on the wrong size-class list"));
                }
                steps += 1;
                if steps > budget {
                    return Err(self.corrupt(block, "cycle in a free list"));
                }
                block = self.link(block, 0)?;
            }
        }
        Ok(None)
    }

    fn largest_free(&self) -> Result<u64, HeapError> {
        let mut largest = 0;
        for class in (0..CLASSES).rev() {
            let mut block = self.list_head(class)?;
            let mut steps = 0u64;
            while block != 0 {
                let (s, _, _) = self.header(block)?;
                largest = largest.max(s);
                steps += 1;
                if steps > self.end / MIN_BLOCK + 1 {
                    return Err(self.corrupt(block, "cycle in a free list"));
                }
                block = self.link(block, 0)?;
            }
            if largest != 0 {
                break;
            }
        }
        Ok(largest.saturating_sub(BLOCK_HEADER))
    }

    /// The allocated block whose payload starts at `offset`.
    fn allocated(&self, offset: u64) -> Result<(u64, u64, u64, u32), HeapError> {
        if !offset.is_multiple_of(ALIGN)
            || offset < HEADER_SIZE + BLOCK_HEADER
            || offset >= self.end
        {
            return Err(HeapError::InvalidOffset {
                offset,
                why: "not a block payload offset of this heap",
            });
        }
        let block = offset - BLOCK_HEADER;
        let (size, flags, t) = self.header(block).map_err(|_| HeapError::InvalidOffset {
            offset,
            why: "no block header there (not an offset palloc returned)",
        })?;
        if flags & ALLOC == 0 {
            return Err(HeapError::DoubleFree { offset });
        }
        Ok((block, size, flags, t))
    }

    /// The root block, if one was created.
    pub fn root_block(&self) -> Option<Block> {
        let offset = self.get(H_ROOT).ok().filter(|&r| r != 0)?;
        let size = self.get(H_ROOT_SIZE).ok()?;
        Some(Block {
            offset,
            size,
            type_num: u32::MAX,
        })
    }

    /// The allocated block whose payload is at `offset`.
    pub fn block(&self, offset: u64) -> Result<Block, HeapError> {
        let (_, size, _, type_num) = self.allocated(offset)?;
        Ok(Block {
            offset,
            size: size - BLOCK_HEADER,
            type_num,
        })
    }

    /// The payload of the allocated block at `offset`.
    pub fn bytes(&self, offset: u64) -> Result<&[u8], HeapError> {
        let b = self.block(offset)?;
        Ok(&self.mem.as_ref()[b.offset as usize..(b.offset + b.size) as usize])
    }

    /// Every allocated block (the root included, as type `u32::MAX`), in
    /// address order.
    pub fn blocks(&self) -> impl Iterator<Item = Result<Block, HeapError>> + '_ {
        let mut at = HEADER_SIZE;
        let mut failed = false;
        std::iter::from_fn(move || loop {
            if failed || at >= self.end {
                return None;
            }
            match self.header(at) {
                Err(e) => {
                    failed = true;
                    return Some(Err(e));
                }
                Ok((size, flags, type_num)) => {
                    let block = at;
                    at += size;
                    if flags & ALLOC != 0 {
                        return Some(Ok(Block {
                            offset: block + BLOCK_HEADER,
                            size: size - BLOCK_HEADER,
                            type_num,
                        }));
                    }
                }
            }
        })
    }

    /// The allocated blocks of one type, in address order
    /// (`POBJ_FOREACH_TYPE`).
    pub fn blocks_of_type(
        &self,
        type_num: u32,
    ) -> impl Iterator<Item = Result<Block, HeapError>> + '_ {
        self.blocks()
            .filter(move |b| b.as_ref().map_or(true, |b| b.type_num == type_num))
    }

    /// Space accounting (walks every block).
    pub fn stats(&self) -> Result<HeapStats, HeapError> {
        let mut s = HeapStats {
            region_bytes: self.mem.as_ref().len() as u64,
            metadata_bytes: HEADER_SIZE,
            ..HeapStats::default()
        };
        let mut at = HEADER_SIZE;
        while at < self.end {
            let (size, flags, _) = self.header(at)?;
            s.metadata_bytes += BLOCK_HEADER;
            if flags & ALLOC != 0 {
                s.allocated_blocks += 1;
                s.allocated_bytes += size - BLOCK_HEADER;
            } else {
                s.free_blocks += 1;
                s.free_bytes += size - BLOCK_HEADER;
                s.largest_free = s.largest_free.max(size - BLOCK_HEADER);
            }
            at += size;
        }
        if s.free_bytes > 0 {
            s.fragmentation = 1.0 - s.largest_free as f64 / s.free_bytes as f64;
        }
        Ok(s)
    }

    /// Check every invariant of the module docs; the first broken one is
    /// the error.
    pub fn check(&self) -> Result<HeapStats, HeapError> {
        let mut at = HEADER_SIZE;
        let mut prev_alloc = true;
        let mut free = Vec::new();
        let (mut bytes, mut blocks) = (0u64, 0u64);
        while at < self.end {
            let (size, flags, _) = self.header(at)?;
            if (flags & PREV_ALLOC != 0) != prev_alloc {
                return Err(self.corrupt(at, "PREV_ALLOC bit disagrees with the block before"));
            }
            let alloc = flags & ALLOC != 0;
            if alloc {
                bytes += size - BLOCK_HEADER;
                blocks += 1;
            } else {
                if !prev_alloc {
                    return Err(self.corrupt(at, "two adjacent free blocks (not coalesced)"));
                }
                if self.get(at + size - 8)? != size {
                    return Err(
                        self.corrupt(at, "free block's boundary tag disagrees with its size")
                    );
                }
                free.push((at, size));
            }
            prev_alloc = alloc;
            at += size;
        }
        if at != self.end {
            return Err(self.corrupt(at, "blocks do not end at the region's end"));
        }
        let mut listed = Vec::new();
        for class in 0..CLASSES {
            let mut block = self.list_head(class)?;
            let mut prev = 0;
            while block != 0 {
                let (size, flags, _) = self.header(block)?;
                if flags & ALLOC != 0 || class_of(size) != class {
                    return Err(self.corrupt(
                        block,
                        format!("block on free list {class} is allocated or of another class"),
                    ));
                }
                if self.link(block, 1)? != prev {
                    return Err(self.corrupt(block, "free list back link broken"));
                }
                listed.push((block, size));
                if listed.len() > free.len() {
                    return Err(self.corrupt(
                        block,
                        "free lists hold more blocks than the heap has free (a cycle?)",
                    ));
                }
                prev = block;
                block = self.link(block, 0)?;
            }
        }
        listed.sort_unstable();
        if listed != free {
            return Err(self.corrupt(
                HEADER_SIZE,
                "free lists do not hold exactly the free blocks",
            ));
        }
        if self.get(H_ALLOC_BYTES)? != bytes || self.get(H_ALLOC_BLOCKS)? != blocks {
            return Err(self.corrupt(
                H_ALLOC_BYTES,
                "header's allocation counters disagree with the blocks",
            ));
        }
        let root = self.get(H_ROOT)?;
        if root != 0 {
            self.allocated(root)
                .map_err(|_| self.corrupt(H_ROOT, "root offset is not an allocated block"))?;
        }
        self.stats()
    }
}

impl<M: AsRef<[u8]> + AsMut<[u8]>> Heap<M> {
    /// Callers write only at offsets they have validated.
    fn put(&mut self, off: u64, v: u64) {
        let o = off as usize;
        self.mem.as_mut()[o..o + 8].copy_from_slice(&v.to_le_bytes());
    }

    fn put32(&mut self, off: u64, v: u32) {
        let o = off as usize;
        self.mem.as_mut()[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn write_header(&mut self, block: u64, size: u64, flags: u64, type_num: u32) {
        let word0 = size | flags;
        self.put(block, word0);
        self.put32(block + 8, type_num);
        self.put32(block + 12, check_word(block, word0, type_num));
    }

    /// Write a free block's header and boundary tag (links are set by
    /// `push_free`).
    fn write_free(&mut self, block: u64, size: u64, prev_alloc: bool) {
        let flags = if prev_alloc { PREV_ALLOC } else { 0 };
        self.write_header(block, size, flags, 0);
        self.put(block + size - 8, size);
    }

    fn set_prev_alloc(&mut self, block: u64, prev_alloc: bool) -> Result<(), HeapError> {
        if block >= self.end {
            return Ok(());
        }
        let (size, flags, t) = self.header(block)?;
        let flags = if prev_alloc {
            flags | PREV_ALLOC
        } else {
            flags & !PREV_ALLOC
        };
        self.write_header(block, size, flags, t);
        Ok(())
    }

    fn set_link(&mut self, block: u64, which: u64, to: u64) {
        self.put32(block + BLOCK_HEADER + 4 * which, (to / ALIGN) as u32);
    }

    fn push_free(&mut self, block: u64, size: u64) -> Result<(), HeapError> {
        let class = class_of(size);
        let head = self.list_head(class)?;
        self.set_link(block, 0, head);
        self.set_link(block, 1, 0);
        if head != 0 {
            self.header(head)?;
            self.set_link(head, 1, block);
        }
        self.put(H_LISTS + 8 * class as u64, block);
        Ok(())
    }

    fn unlink_free(&mut self, block: u64, size: u64) -> Result<(), HeapError> {
        let next = self.link(block, 0)?;
        let prev = self.link(block, 1)?;
        if prev == 0 {
            let class = class_of(size);
            if self.list_head(class)? != block {
                return Err(self.corrupt(block, "free block missing from its list"));
            }
            self.put(H_LISTS + 8 * class as u64, next);
        } else {
            self.header(prev)?;
            self.set_link(prev, 0, next);
        }
        if next != 0 {
            self.header(next)?;
            self.set_link(next, 1, prev);
        }
        Ok(())
    }

    fn add_counts(&mut self, bytes: i64, blocks: i64) -> Result<(), HeapError> {
        let b = self.get(H_ALLOC_BYTES)?.wrapping_add_signed(bytes);
        let n = self.get(H_ALLOC_BLOCKS)?.wrapping_add_signed(blocks);
        self.put(H_ALLOC_BYTES, b);
        self.put(H_ALLOC_BLOCKS, n);
        Ok(())
    }

    /// Mark the free block `(block, bsize)` (already unlinked) allocated
    /// with `size`, splitting off the rest when it makes a block.
    fn carve(&mut self, block: u64, bsize: u64, size: u64, type_num: u32) -> Result<(), HeapError> {
        let (_, flags, _) = self.header(block)?;
        let prev = flags & PREV_ALLOC;
        if bsize - size >= MIN_BLOCK {
            self.write_header(block, size, ALLOC | prev, type_num);
            let rest = block + size;
            self.write_free(rest, bsize - size, true);
            self.push_free(rest, bsize - size)?;
        } else {
            self.write_header(block, bsize, ALLOC | prev, type_num);
            self.set_prev_alloc(block + bsize, true)?;
        }
        Ok(())
    }

    // ----- the API

    /// Allocate a block of at least `size` payload bytes, 16-byte aligned,
    /// tagged `type_num`; returns its payload offset. Its contents are
    /// whatever the region held (zero in a fresh object).
    pub fn palloc(&mut self, size: u64, type_num: u32) -> Result<u64, HeapError> {
        if size == 0 {
            return Err(HeapError::ZeroSize);
        }
        let Some(need) = block_size(size).filter(|&s| s <= self.end) else {
            return Err(HeapError::OutOfSpace {
                requested: size,
                largest_free: self.largest_free()?,
            });
        };
        let Some((block, bsize)) = self.find_free(need)? else {
            return Err(HeapError::OutOfSpace {
                requested: size,
                largest_free: self.largest_free()?,
            });
        };
        self.unlink_free(block, bsize)?;
        self.carve(block, bsize, need, type_num)?;
        let (got, _, _) = self.header(block)?;
        self.add_counts((got - BLOCK_HEADER) as i64, 1)?;
        Ok(block + BLOCK_HEADER)
    }

    /// Allocate and zero.
    pub fn pzalloc(&mut self, size: u64, type_num: u32) -> Result<u64, HeapError> {
        let off = self.palloc(size, type_num)?;
        self.bytes_mut(off)?.fill(0);
        Ok(off)
    }

    /// Free the block whose payload is at `offset`, coalescing with free
    /// neighbours. The root block is freed only through [`Heap::free_root`].
    pub fn pfree(&mut self, offset: u64) -> Result<(), HeapError> {
        let (block, size, flags, _) = self.allocated(offset)?;
        if self.get(H_ROOT)? == offset {
            return Err(HeapError::InvalidOffset {
                offset,
                why: "is the root block (use free_root)",
            });
        }
        self.release(block, size, flags)
    }

    fn release(&mut self, block: u64, size: u64, flags: u64) -> Result<(), HeapError> {
        // Validate both neighbours before changing anything, so an error
        // leaves the heap unchanged.
        let next = block + size;
        let next_free = if next < self.end {
            let (nsize, nflags, _) = self.header(next)?;
            (nflags & ALLOC == 0).then_some(nsize)
        } else {
            None
        };
        let prev = if flags & PREV_ALLOC == 0 {
            let psize = self.get(block - 8)?;
            if psize < MIN_BLOCK || !psize.is_multiple_of(ALIGN) || psize > block - HEADER_SIZE {
                return Err(self.corrupt(
                    block - 8,
                    "boundary tag of the free block before is out of range",
                ));
            }
            let p = block - psize;
            let (s, pflags, _) = self.header(p)?;
            if s != psize || pflags & ALLOC != 0 {
                return Err(self.corrupt(p, "the block before is not the free block its tag says"));
            }
            Some((p, psize, pflags))
        } else {
            None
        };
        self.add_counts(-((size - BLOCK_HEADER) as i64), -1)?;
        let mut start = block;
        let mut total = size;
        let mut prev_alloc = true;
        if let Some(nsize) = next_free {
            self.unlink_free(next, nsize)?;
            total += nsize;
        }
        if let Some((p, psize, pflags)) = prev {
            self.unlink_free(p, psize)?;
            start = p;
            total += psize;
            prev_alloc = pflags & PREV_ALLOC != 0;
        }
        if start != block {
            // The freed block's header is now inside the merged free
            // block: leave it marked free (not allocated), so freeing the
            // same offset again is reported as a double free.
            self.write_header(block, size, 0, 0);
        }
        self.write_free(start, total, prev_alloc);
        self.push_free(start, total)?;
        self.set_prev_alloc(start + total, false)
    }

    /// Resize the block at `offset` to hold `size` bytes, in place when it
    /// can (shrinking, or growing into a free block after it), otherwise
    /// by allocating, copying and freeing. Returns the (maybe new) offset;
    /// on error the old block is untouched.
    pub fn prealloc(&mut self, offset: u64, size: u64) -> Result<u64, HeapError> {
        if size == 0 {
            return Err(HeapError::ZeroSize);
        }
        let (block, bsize, flags, type_num) = self.allocated(offset)?;
        let Some(need) = block_size(size).filter(|&s| s <= self.end) else {
            return Err(HeapError::OutOfSpace {
                requested: size,
                largest_free: self.largest_free()?,
            });
        };
        let is_root = self.get(H_ROOT)? == offset;
        let prev = flags & PREV_ALLOC;
        if need <= bsize {
            if bsize - need >= MIN_BLOCK {
                // Shrink: give the tail back (it may merge with a free
                // block after it).
                let tail = block + need;
                let tail_size = bsize - need;
                self.write_header(block, need, ALLOC | prev, type_num);
                self.write_header(tail, tail_size, ALLOC | PREV_ALLOC, 0);
                self.add_counts((tail_size - BLOCK_HEADER) as i64 - tail_size as i64, 1)?;
                self.release(tail, tail_size, ALLOC | PREV_ALLOC)?;
            }
        } else {
            let next = block + bsize;
            let grown = if next < self.end {
                let (nsize, nflags, _) = self.header(next)?;
                (nflags & ALLOC == 0 && bsize + nsize >= need).then_some(nsize)
            } else {
                None
            };
            if let Some(nsize) = grown {
                self.unlink_free(next, nsize)?;
                let total = bsize + nsize;
                self.write_header(block, total, flags, type_num);
                self.set_prev_alloc(block + total, true)?;
                self.add_counts(nsize as i64, 0)?;
                if total - need >= MIN_BLOCK {
                    let tail = block + need;
                    self.write_header(block, need, flags, type_num);
                    self.write_header(tail, total - need, ALLOC | PREV_ALLOC, 0);
                    self.add_counts(
                        -((total - need) as i64) + (total - need - BLOCK_HEADER) as i64,
                        1,
                    )?;
                    self.release(tail, total - need, ALLOC | PREV_ALLOC)?;
                }
            } else {
                let new = self.palloc(size, type_num)?;
                let keep = (bsize - BLOCK_HEADER) as usize;
                let (from, to) = (offset as usize, new as usize);
                self.mem.as_mut().copy_within(from..from + keep, to);
                let (block, bsize, flags, _) = self.allocated(offset)?;
                self.release(block, bsize, flags)?;
                if is_root {
                    self.put(H_ROOT, new);
                    self.put(H_ROOT_SIZE, size);
                }
                return Ok(new);
            }
        }
        if is_root {
            self.put(H_ROOT_SIZE, size);
        }
        Ok(offset)
    }

    /// The root block: created zeroed with `size` bytes on first use,
    /// grown (contents kept) if `size` is larger than it, returned as is
    /// otherwise. Its offset never changes unless it has to grow.
    pub fn root(&mut self, size: u64) -> Result<u64, HeapError> {
        let root = self.get(H_ROOT)?;
        if root == 0 {
            let off = self.pzalloc(size, u32::MAX)?;
            self.put(H_ROOT, off);
            self.put(H_ROOT_SIZE, size);
            return Ok(off);
        }
        let have = self.get(H_ROOT_SIZE)?;
        if size <= have {
            return Ok(root);
        }
        let off = self.prealloc(root, size)?;
        let (o, s) = (off as usize, size as usize);
        self.mem.as_mut()[o + have as usize..o + s].fill(0);
        Ok(off)
    }

    /// Free the root block.
    pub fn free_root(&mut self) -> Result<(), HeapError> {
        let root = self.get(H_ROOT)?;
        if root == 0 {
            return Ok(());
        }
        let (block, size, flags, _) = self.allocated(root)?;
        self.release(block, size, flags)?;
        self.put(H_ROOT, 0);
        self.put(H_ROOT_SIZE, 0);
        Ok(())
    }

    /// The payload of the allocated block at `offset`, writable.
    pub fn bytes_mut(&mut self, offset: u64) -> Result<&mut [u8], HeapError> {
        let b = self.block(offset)?;
        Ok(&mut self.mem.as_mut()[b.offset as usize..(b.offset + b.size) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn classes_cover_sizes_in_order() {
        assert_eq!(class_of(32), 0);
        assert_eq!(class_of(256), 14);
        assert_eq!(class_of(272), 15);
        assert_eq!(class_of(512), 15);
        assert_eq!(class_of(528), 16);
        assert_eq!(class_of(64 << 10), 22);
        assert_eq!(class_of((64 << 10) + 16), 23);
        assert_eq!(class_of(1 << 40), 23);
        let mut last = 0;
        for s in (32..200_000).step_by(16) {
            let c = class_of(s);
            assert!(c >= last && c < CLASSES);
            last = c;
        }
    }

    #[test]
    fn alloc_free_coalesce_back_to_one_block() {
        let mut mem = vec![0u8; 1 << 20];
        let mut h = Heap::format(&mut mem).unwrap();
        let empty = h.check().unwrap();
        assert_eq!(empty.free_blocks, 1);
        let offs: Vec<u64> = (0..100)
            .map(|i| h.palloc(16 + i * 37, i as u32 % 5).unwrap())
            .collect();
        h.check().unwrap();
        for (i, &o) in offs.iter().enumerate() {
            assert_eq!(o % 16, 0);
            assert!(h.block(o).unwrap().size >= 16 + i as u64 * 37);
        }
        // Free every other one, then the rest: everything coalesces.
        for &o in offs.iter().step_by(2) {
            h.pfree(o).unwrap();
        }
        h.check().unwrap();
        for &o in offs.iter().skip(1).step_by(2) {
            h.pfree(o).unwrap();
        }
        let s = h.check().unwrap();
        assert_eq!(s, empty);
    }

    #[test]
    fn bad_frees_are_refused_and_change_nothing() {
        let mut mem = vec![0u8; 64 << 10];
        let mut h = Heap::format(&mut mem).unwrap();
        let a = h.palloc(100, 1).unwrap();
        let b = h.palloc(100, 1).unwrap();
        h.pfree(a).unwrap();
        let before = h.mem.to_vec();
        assert_eq!(h.pfree(a), Err(HeapError::DoubleFree { offset: a }));
        assert!(matches!(
            h.pfree(b + 16),
            Err(HeapError::InvalidOffset { .. })
        ));
        assert!(matches!(
            h.pfree(b + 3),
            Err(HeapError::InvalidOffset { .. })
        ));
        assert!(matches!(h.pfree(0), Err(HeapError::InvalidOffset { .. })));
        assert!(matches!(
            h.pfree(1 << 40),
            Err(HeapError::InvalidOffset { .. })
        ));
        assert_eq!(&h.mem[..], &before[..]);
        assert_eq!(h.palloc(0, 1), Err(HeapError::ZeroSize));
        assert!(matches!(
            h.palloc(1 << 20, 1),
            Err(HeapError::OutOfSpace { .. })
        ));
        assert!(matches!(
            h.palloc(u64::MAX, 1),
            Err(HeapError::OutOfSpace { .. })
        ));
        h.check().unwrap();
    }

    #[test]
    fn scribbled_metadata_is_an_error_not_a_panic() {
        let mut mem = vec![0u8; 64 << 10];
        let a;
        {
            let mut h = Heap::format(&mut mem).unwrap();
            a = h.palloc(200, 3).unwrap();
            h.palloc(200, 3).unwrap();
        }
        // Overwrite a's header with garbage.
        mem[(a - 16) as usize..a as usize].fill(0xAB);
        let mut h = Heap::open(&mut mem).unwrap();
        assert!(matches!(h.pfree(a), Err(HeapError::InvalidOffset { .. })));
        assert!(matches!(h.check(), Err(HeapError::Corrupt { .. })));
        assert!(h.blocks().any(|b| b.is_err()));
        // Not a heap at all.
        let mut zero = vec![0u8; 4096];
        assert!(matches!(
            Heap::open(&mut zero),
            Err(HeapError::NotFormatted)
        ));
        let mut tiny = vec![0u8; 100];
        assert!(matches!(
            Heap::format(&mut tiny),
            Err(HeapError::Region { .. })
        ));
    }

    #[test]
    fn root_persists_and_grows_keeping_contents() {
        let mut mem = vec![0u8; 64 << 10];
        let r = {
            let mut h = Heap::format(&mut mem).unwrap();
            let r = h.root(32).unwrap();
            h.bytes_mut(r).unwrap()[..4].copy_from_slice(b"abcd");
            let _blocker = h.palloc(64, 1).unwrap();
            r
        };
        let mut h = Heap::open(&mut mem).unwrap();
        assert_eq!(h.root(16).unwrap(), r);
        let r2 = h.root(1000).unwrap();
        assert_ne!(r2, r, "a block after it is allocated, so it moves");
        assert_eq!(&h.bytes(r2).unwrap()[..4], b"abcd");
        assert!(h.bytes(r2).unwrap()[32..1000].iter().all(|&b| b == 0));
        assert_eq!(h.root_block().unwrap().offset, r2);
        assert!(h.pfree(r2).is_err());
        h.free_root().unwrap();
        assert!(h.root_block().is_none());
        h.check().unwrap();
    }

    #[test]
    fn prealloc_in_place_and_moving() {
        let mut mem = vec![0u8; 64 << 10];
        let mut h = Heap::format(&mut mem).unwrap();
        let a = h.palloc(100, 9).unwrap();
        h.bytes_mut(a).unwrap().fill(7);
        // Grows in place into the free space after it.
        let a2 = h.prealloc(a, 1000).unwrap();
        assert_eq!(a2, a);
        h.check().unwrap();
        let _b = h.palloc(50, 9).unwrap();
        // Must move now.
        let a3 = h.prealloc(a, 3000).unwrap();
        assert_ne!(a3, a);
        assert!(h.bytes(a3).unwrap()[..100].iter().all(|&b| b == 7));
        assert_eq!(h.block(a3).unwrap().type_num, 9);
        // Shrink in place.
        assert_eq!(h.prealloc(a3, 40).unwrap(), a3);
        h.check().unwrap();
    }

    #[derive(Clone, Debug)]
    enum Op {
        Alloc(u64, u32),
        Free(usize),
        Realloc(usize, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u64..5000, 0u32..4).prop_map(|(s, t)| Op::Alloc(s, t)),
            3 => any::<usize>().prop_map(Op::Free),
            1 => (any::<usize>(), 1u64..6000).prop_map(|(i, s)| Op::Realloc(i, s)),
        ]
    }

    proptest! {
        /// Model check: every live block keeps its bytes, blocks never
        /// overlap, every invariant holds after every step.
        #[test]
        fn heap_matches_a_model(ops in prop::collection::vec(op(), 1..200)) {
            let mut mem = vec![0u8; 128 << 10];
            let mut h = Heap::format(&mut mem).unwrap();
            let mut live: Vec<(u64, u64, u32, u8)> = Vec::new();
            let mut fill = 0u8;
            for op in ops {
                match op {
                    Op::Alloc(size, t) => match h.palloc(size, t) {
                        Ok(off) => {
                            fill = fill.wrapping_add(1);
                            h.bytes_mut(off).unwrap()[..size as usize].fill(fill);
                            live.push((off, size, t, fill));
                        }
                        Err(HeapError::OutOfSpace { largest_free, .. }) => {
                            prop_assert!(largest_free < size);
                        }
                        Err(e) => prop_assert!(false, "{e}"),
                    },
                    Op::Free(i) if !live.is_empty() => {
                        let (off, ..) = live.swap_remove(i % live.len());
                        h.pfree(off).unwrap();
                        prop_assert_eq!(h.pfree(off), Err(HeapError::DoubleFree { offset: off }));
                    }
                    Op::Realloc(i, size) if !live.is_empty() => {
                        let i = i % live.len();
                        let (off, old, t, f) = live[i];
                        match h.prealloc(off, size) {
                            Ok(new) => {
                                let keep = old.min(size) as usize;
                                prop_assert!(h.bytes(new).unwrap()[..keep].iter().all(|&b| b == f));
                                h.bytes_mut(new).unwrap()[..size as usize].fill(f);
                                live[i] = (new, size, t, f);
                            }
                            Err(HeapError::OutOfSpace { .. }) => {
                                prop_assert!(h.bytes(off).unwrap()[..old as usize].iter().all(|&b| b == f));
                            }
                            Err(e) => prop_assert!(false, "{e}"),
                        }
                    }
                    _ => {}
                }
                let stats = h.check().map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(stats.allocated_blocks, live.len() as u64);
            }
            for &(off, size, t, f) in &live {
                let b = h.block(off).unwrap();
                prop_assert_eq!(b.type_num, t);
                prop_assert!(h.bytes(off).unwrap()[..size as usize].iter().all(|&x| x == f));
            }
            let mut seen: Vec<u64> = h.blocks().map(|b| b.unwrap().offset).collect();
            let mut want: Vec<u64> = live.iter().map(|l| l.0).collect();
            seen.sort_unstable();
            want.sort_unstable();
            prop_assert_eq!(seen, want);
        }
    }
}
