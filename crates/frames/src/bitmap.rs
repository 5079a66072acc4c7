//! iBuddy's free-block bitmaps: a plain one for frames, and one per
//! larger order with a summary for search.

use alloc::vec;
use alloc::vec::Vec;

/// One bit per aligned block of one order over a pfn range, with a summary
/// holding one bit per non-zero word so a search skips empty stretches 64
/// words at a time.
///
/// Bit positions are absolute modulo 64: bit `b` of word `w` stands for
/// block `origin + 64 * w + b` with `origin` a multiple of 64, so the two
/// halves of a parent block are always bits `2m` and `2m + 1` of one word.
#[derive(Clone, Debug)]
pub(crate) struct LevelBitmap {
    /// Block index (pfn >> order) of bit 0 of word 0; a multiple of 64.
    origin: u64,
    words: Vec<u64>,
    summary: Vec<u64>,
    /// Set bits.
    count: u64,
}

/// One bit per frame of a pfn range: the order-0 level, which is never
/// searched (single frames come off the free list), so it keeps neither a
/// summary nor a count.
#[derive(Clone, Debug)]
pub(crate) struct FrameBitmap {
    /// Pfn of bit 0 of word 0; a multiple of 64.
    origin: u64,
    words: Vec<u64>,
}

impl FrameBitmap {
    /// A cleared bitmap for frames `first..=last`.
    pub(crate) fn new(first: u64, last: u64) -> FrameBitmap {
        let origin = first & !63;
        FrameBitmap {
            origin,
            words: vec![0; ((last - origin) / 64 + 1) as usize],
        }
    }

    /// Whether `pfn` is marked; frames outside the range are not.
    #[inline]
    pub(crate) fn get(&self, pfn: u64) -> bool {
        let rel = pfn.wrapping_sub(self.origin);
        match self.words.get((rel / 64) as usize) {
            Some(word) => word & (1 << (rel % 64)) != 0,
            None => false,
        }
    }

    /// Mark `pfn`, which must be in range.
    #[inline]
    pub(crate) fn set(&mut self, pfn: u64) {
        let rel = pfn - self.origin;
        self.words[(rel / 64) as usize] |= 1 << (rel % 64);
    }

    /// Mark `pfn`, which must be in range, and return whether its buddy
    /// (`pfn ^ 1`, in the same word) is marked, as 0 or 1.
    #[inline]
    pub(crate) fn set_and_buddy(&mut self, pfn: u64) -> u64 {
        let rel = pfn - self.origin;
        let word = &mut self.words[(rel / 64) as usize];
        *word |= 1 << (rel % 64);
        (*word >> ((rel % 64) ^ 1)) & 1
    }

    /// Mark every frame of `from..to`, which must be in range.
    pub(crate) fn set_range(&mut self, from: u64, to: u64) {
        let mut pfn = from;
        while pfn < to {
            let rel = pfn - self.origin;
            let bit = rel % 64;
            let n = (64 - bit).min(to - pfn);
            let mask = if n == 64 {
                !0
            } else {
                ((1u64 << n) - 1) << bit
            };
            self.words[(rel / 64) as usize] |= mask;
            pfn += n;
        }
    }

    /// Clear `pfn`, which must be in range.
    #[inline]
    pub(crate) fn clear(&mut self, pfn: u64) {
        let rel = pfn - self.origin;
        self.words[(rel / 64) as usize] &= !(1 << (rel % 64));
    }

    /// Address of the first word (bit 0 stands for frame `first & !63`
    /// of `new`); the words never move.
    pub(crate) fn words_addr(&self) -> usize {
        self.words.as_ptr() as usize
    }

    /// Marked frames.
    pub(crate) fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Bytes of memory used.
    pub(crate) fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

const EVEN_BITS: u64 = 0x5555_5555_5555_5555;

impl LevelBitmap {
    /// A cleared bitmap for blocks `first..=last`.
    pub(crate) fn new(first: u64, last: u64) -> LevelBitmap {
        let origin = first & !63;
        let words = ((last - origin) / 64 + 1) as usize;
        LevelBitmap {
            origin,
            words: vec![0; words],
            summary: vec![0; words.div_ceil(64)],
            count: 0,
        }
    }

    #[inline]
    fn position(&self, block: u64) -> Option<(usize, u64)> {
        let rel = block.checked_sub(self.origin)?;
        let w = (rel / 64) as usize;
        (w < self.words.len()).then_some((w, 1 << (rel % 64)))
    }

    /// Whether block `block` is marked; blocks outside the range are not.
    #[inline]
    pub(crate) fn get(&self, block: u64) -> bool {
        match self.position(block) {
            Some((w, mask)) => self.words[w] & mask != 0,
            None => false,
        }
    }

    /// Mark `block`, which must be in range and unmarked.
    #[inline]
    pub(crate) fn set(&mut self, block: u64) {
        let (w, mask) = self.position(block).expect("block in range");
        debug_assert!(self.words[w] & mask == 0);
        if self.words[w] == 0 {
            self.summary[w / 64] |= 1 << (w % 64);
        }
        self.words[w] |= mask;
        self.count += 1;
    }

    /// Mark `block`, which must be in range, if `set` is 1 (it must be
    /// unmarked then; `set` is 0 or 1), and return whether its buddy
    /// (`block ^ 1`, in the same word) is marked, as 0 or 1, and-ed with
    /// `set`. Without a branch on `set`: a free's coalescing climbs on
    /// whether buddies are free, a coin toss in random frees that a
    /// branch predictor loses, and each level's word is read whatever
    /// `set` is, so the reads of successive levels overlap.
    #[inline]
    pub(crate) fn set_if_and_buddy(&mut self, block: u64, set: u64) -> u64 {
        debug_assert!(set <= 1);
        let rel = block - self.origin;
        let w = (rel / 64) as usize;
        let was = self.words[w];
        debug_assert!(set == 0 || was & (1 << (rel % 64)) == 0);
        let now = was | (set << (rel % 64));
        self.words[w] = now;
        self.summary[w / 64] |= (u64::from(was == 0) & set) << (w % 64);
        self.count += set;
        set & (now >> ((rel % 64) ^ 1))
    }

    /// Mark every block of `from..to`, which must be in range and
    /// unmarked: [`set`](Self::set) for each, a word at a time.
    pub(crate) fn set_range(&mut self, from: u64, to: u64) {
        let mut block = from;
        while block < to {
            let (w, _) = self.position(block).expect("block in range");
            let bit = (block - self.origin) % 64;
            let n = (64 - bit).min(to - block);
            let mask = if n == 64 {
                !0
            } else {
                ((1u64 << n) - 1) << bit
            };
            debug_assert!(self.words[w] & mask == 0);
            if self.words[w] == 0 {
                self.summary[w / 64] |= 1 << (w % 64);
            }
            self.words[w] |= mask;
            self.count += n;
            block += n;
        }
    }

    /// Clear `block` if it is marked; return whether it was.
    #[inline]
    pub(crate) fn test_and_clear(&mut self, block: u64) -> bool {
        let Some((w, mask)) = self.position(block) else {
            return false;
        };
        if self.words[w] & mask == 0 {
            return false;
        }
        self.words[w] &= !mask;
        if self.words[w] == 0 {
            self.summary[w / 64] &= !(1 << (w % 64));
        }
        self.count -= 1;
        true
    }

    /// Marked blocks.
    #[inline]
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Bytes of memory used.
    pub(crate) fn bytes(&self) -> usize {
        (self.words.len() + self.summary.len()) * 8
    }

    /// A marked block at or after block `cursor`, wrapping round to the
    /// start, preferring one whose sibling is unmarked (an exact fit that
    /// leaves the larger free blocks whole). Looks at up to `patience`
    /// non-empty words for an exact fit before taking the first marked
    /// block it saw. Starting where the last search ended (next fit) hands
    /// blocks out round the whole range instead of reusing the lowest.
    pub(crate) fn find_from(&self, cursor: u64, patience: usize) -> Option<u64> {
        let rel = cursor.saturating_sub(self.origin);
        let (w0, b0) = if rel / 64 < self.words.len() as u64 {
            ((rel / 64) as usize, rel % 64)
        } else {
            (0, 0)
        };
        // The cursor's word from the cursor on, the words after it, the
        // words before it, and last the cursor's word below the cursor.
        let first = (w0, !0u64 << b0);
        let after = self
            .nonempty_words(w0 + 1, self.words.len())
            .map(|w| (w, !0));
        let before = self.nonempty_words(0, w0).map(|w| (w, !0));
        let last = (w0, !(!0u64 << b0));
        let mut fallback = None;
        let mut looked = 0;
        for (w, mask) in core::iter::once(first)
            .chain(after)
            .chain(before)
            .chain(core::iter::once(last))
        {
            let bits = self.words[w] & mask;
            if bits == 0 {
                continue;
            }
            // A pair with both halves marked is a free parent block.
            let all = self.words[w];
            let pairs = all & (all >> 1) & EVEN_BITS;
            let exact = bits & !(pairs | (pairs << 1));
            let base = self.origin + 64 * w as u64;
            if exact != 0 {
                return Some(base + exact.trailing_zeros() as u64);
            }
            fallback.get_or_insert(base + bits.trailing_zeros() as u64);
            looked += 1;
            if looked >= patience {
                break;
            }
        }
        fallback
    }

    /// Indices of the non-empty words in `from..to`, by the summary.
    fn nonempty_words(&self, from: usize, to: usize) -> impl Iterator<Item = usize> + '_ {
        let summary = &self.summary;
        (from / 64..to.div_ceil(64).min(summary.len())).flat_map(move |s| {
            let mut pending = summary[s];
            if s == from / 64 {
                pending &= !0u64 << (from % 64);
            }
            if s == to / 64 {
                pending &= !(!0u64 << (to % 64));
            }
            core::iter::from_fn(move || {
                if pending == 0 {
                    return None;
                }
                let w = s * 64 + pending.trailing_zeros() as usize;
                pending &= pending - 1;
                Some(w)
            })
        })
    }

    /// Recount the bits and rebuild the summary; compare with what is kept.
    pub(crate) fn consistent(&self) -> Result<(), &'static str> {
        let mut count = 0;
        for (w, &bits) in self.words.iter().enumerate() {
            count += u64::from(bits.count_ones());
            let marked = self.summary[w / 64] & (1 << (w % 64)) != 0;
            if marked != (bits != 0) {
                return Err("summary bit disagrees with its word");
            }
        }
        if count != self.count {
            return Err("kept count disagrees with the bits");
        }
        Ok(())
    }

    /// Every marked block, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().enumerate().flat_map(move |(w, &bits)| {
            let base = self.origin + 64 * w as u64;
            let mut pending = bits;
            core::iter::from_fn(move || {
                if pending == 0 {
                    return None;
                }
                let b = pending.trailing_zeros() as u64;
                pending &= pending - 1;
                Some(base + b)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_and_count() {
        let mut b = LevelBitmap::new(70, 300);
        assert!(!b.get(69) && !b.get(5000));
        b.set(70);
        b.set(299);
        assert!(b.get(70) && b.get(299));
        assert_eq!(b.count(), 2);
        assert!(b.test_and_clear(70));
        assert!(!b.test_and_clear(70));
        assert!(!b.test_and_clear(1_000_000));
        assert_eq!(b.count(), 1);
        b.consistent().unwrap();
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![299]);
    }

    #[test]
    fn frame_ranges_set_exactly() {
        let mut b = FrameBitmap::new(60, 300);
        b.set_range(61, 200);
        assert_eq!(b.count(), 139);
        assert!(!b.get(60) && b.get(61) && b.get(127) && b.get(199) && !b.get(200));
    }

    #[test]
    fn find_prefers_a_block_whose_sibling_is_taken() {
        let mut b = LevelBitmap::new(0, 1023);
        // 4 and 5 form a free parent; 9 stands alone.
        for block in [4, 5, 9] {
            b.set(block);
        }
        assert_eq!(b.find_from(0, 8), Some(9));
        b.test_and_clear(9);
        assert_eq!(b.find_from(0, 8), Some(4));
        b.test_and_clear(4);
        b.test_and_clear(5);
        assert_eq!(b.find_from(0, 8), None);
        b.set(900);
        assert_eq!(b.find_from(0, 8), Some(900));
    }

    #[test]
    fn find_from_goes_round_from_the_cursor() {
        let mut b = LevelBitmap::new(0, 1023);
        for block in [3, 70, 200, 201, 700] {
            b.set(block);
        }
        assert_eq!(b.find_from(4, 8), Some(70));
        assert_eq!(
            b.find_from(71, 8),
            Some(700),
            "an exact fit beats the pair at 200"
        );
        assert_eq!(b.find_from(701, 8), Some(3), "wraps round");
        assert_eq!(b.find_from(3, 8), Some(3), "the cursor's own block counts");
        assert_eq!(
            b.find_from(5000, 8),
            Some(3),
            "a cursor past the end starts over"
        );
        // Only a pair left, below the cursor in the cursor's word.
        for block in [3, 70, 700] {
            b.test_and_clear(block);
        }
        assert_eq!(b.find_from(202, 8), Some(200));
    }
}
