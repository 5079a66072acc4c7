//! iBuddy's free-block bitmaps: one for frames, from which the orders up
//! to [`DERIVED`] are derived when they are searched, and one per larger
//! order with a summary for search.

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

/// Highest order whose bitmap [`FrameBitmap`] derives from the frames'
/// bits instead of keeping it: a block of order up to 5 lies in one
/// 64-frame word with its buddy, so whether it (and its buddy) is wholly
/// free is a few masks of that word.
pub(crate) const DERIVED: u8 = 5;

/// One bit per frame of a pfn range, and the bitmaps of orders
/// `1..=DERIVED` derived from them: a block is wholly free exactly when
/// every frame in it is, so those bitmaps are a function of these bits
/// and a free writes none of them. What a free does keep is a byte per
/// word, its largest free block, from the *height* of the freed frame
/// (the largest order of an aligned wholly free block holding it inside
/// its word), so searches skip words. Counts of free blocks of these
/// orders are not kept: they are counted from the bits when asked for
/// (statistics, checks).
#[derive(Clone, Debug)]
pub(crate) struct FrameBitmap {
    /// Pfn of bit 0 of word 0; a multiple of 64.
    origin: u64,
    words: Vec<u64>,
    /// `orders[w]`: 1 + the largest order of an aligned wholly free block
    /// inside word `w`, 0 for a word with no free frame ([`word_order`]),
    /// so a search skips words that cannot hold a block of its order
    /// with one byte each, as the stored bitmaps' summaries let it.
    orders: Vec<u8>,
}

/// `word_order` of a wholly free word.
const WHOLE: u8 = 7;

/// 1 + the largest order (up to 6) of an aligned wholly set block of
/// `word`; 0 when no bit is set.
#[inline]
fn word_order(word: u64) -> u8 {
    let mut runs = word;
    let mut order = u8::from(word != 0);
    for k in 1..=6u8 {
        // Bit `p` of `runs`: bits `p..p + 2^k` of `word` are all set.
        runs &= runs >> (1u32 << (k - 1));
        order += u8::from(runs & ALIGNED[k as usize] != 0);
    }
    order
}

/// Bits `0..2^k` set: an aligned block of order `k <= 6` inside a word.
#[inline]
fn block_mask(k: u8) -> u64 {
    u64::MAX >> (64 - (1u32 << k))
}

/// The largest order `h <= 6` such that the aligned block of order `h`
/// holding bit `b` of `word` is wholly set (0 when only bit `b` is; the
/// bit itself must be set), from the nearest clear bits on either side
/// of `b` (a handful of bit scans, no loop over the orders).
#[inline]
fn height(word: u64, b: u32) -> u8 {
    // The smallest aligned block holding bit `b` and a clear bit `p` has
    // order `msb(p ^ b) + 1`, which grows with the distance from `b` on
    // either side: so only the nearest clear bit above and below count.
    let clear = !word;
    let above = clear & (u64::MAX << b);
    let below = clear & !(u64::MAX << b);
    let order_to = |p: u32| (31 - (p ^ b).leading_zeros()) as u8;
    let up = if above != 0 {
        order_to(above.trailing_zeros())
    } else {
        6
    };
    let down = if below != 0 {
        order_to(63 - below.leading_zeros())
    } else {
        6
    };
    up.min(down)
}

/// The aligned blocks of order `k <= 6` wholly set in `word`, each at its
/// first bit (bit `i * 2^k` set when bits `i * 2^k..(i + 1) * 2^k` are).
#[inline]
fn free_blocks(word: u64, k: u8) -> u64 {
    let mut runs = word;
    for i in 0..k {
        // Bit `p`: bits `p..p + 2^(i + 1)` of `word` are all set.
        runs &= runs >> (1u32 << i);
    }
    runs & ALIGNED[k as usize]
}

/// `ALIGNED[k]`: bits `0, 2^k, 2*2^k, ...`.
const ALIGNED: [u64; 7] = {
    let mut table = [0; 7];
    let mut k = 0;
    while k < 7 {
        table[k] = repeat(1 << k, 1);
        k += 1;
    }
    table
};

/// The low `held` bits of every `chunk`-bit chunk of a word.
const fn repeat(chunk: u32, held: u32) -> u64 {
    let low = if held >= 64 {
        u64::MAX
    } else {
        (1u64 << held) - 1
    };
    if chunk >= 64 {
        low
    } else {
        // One bit at the bottom of each chunk, times the low bits.
        (u64::MAX / ((1u64 << chunk) - 1)) * low
    }
}

impl FrameBitmap {
    /// A cleared bitmap for frames `first..=last`.
    pub(crate) fn new(first: u64, last: u64) -> FrameBitmap {
        let origin = first & !63;
        FrameBitmap {
            origin,
            words: vec![0; ((last - origin) / 64 + 1) as usize],
            orders: vec![0; ((last - origin) / 64 + 1) as usize],
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

    /// Whether the aligned block of order `k <= 6` with index `block` is
    /// wholly marked; blocks outside the range are not.
    #[inline]
    pub(crate) fn is_free(&self, k: u8, block: u64) -> bool {
        debug_assert!(k <= 6);
        let rel = (block << k).wrapping_sub(self.origin);
        let mask = block_mask(k);
        match self.words.get((rel / 64) as usize) {
            Some(word) => (word >> (rel % 64)) & mask == mask,
            None => false,
        }
    }

    /// Mark `pfn`, which must be in range and unmarked; return its height
    /// (see [`height`]) after: 6 when its word is now wholly marked.
    #[inline]
    pub(crate) fn set(&mut self, pfn: u64) -> u8 {
        self.set_block(pfn, 0)
    }

    /// Clear `pfn`, which must be in range and marked; return its height
    /// before: 6 when its word was wholly marked.
    #[inline]
    pub(crate) fn clear(&mut self, pfn: u64) -> u8 {
        self.clear_block(pfn, 0)
    }

    /// The word, first bit and bits of the aligned block of order `k <= 6`
    /// at `first` (inside one word).
    #[inline]
    fn block_at(&self, first: u64, k: u8) -> (usize, u32, u64) {
        let rel = first - self.origin;
        let b = (rel % 64) as u32;
        ((rel / 64) as usize, b, block_mask(k) << b)
    }

    /// Mark the aligned block of order `k <= 6` at `first` (inside one
    /// word), in range and wholly unmarked; return its height after.
    #[inline]
    pub(crate) fn set_block(&mut self, first: u64, k: u8) -> u8 {
        let (w, b, mask) = self.block_at(first, k);
        let word = &mut self.words[w];
        debug_assert!(*word & mask == 0);
        *word |= mask;
        let h = height(*word, b);
        // Every block completed holds the frames; the largest has order h.
        let order = &mut self.orders[w];
        *order = (*order).max(h + 1);
        h
    }

    /// Clear the aligned block of order `k <= 6` at `first` (inside one
    /// word), in range and wholly marked; return its height before.
    #[inline]
    pub(crate) fn clear_block(&mut self, first: u64, k: u8) -> u8 {
        let (w, b, mask) = self.block_at(first, k);
        let word = &mut self.words[w];
        debug_assert!(*word & mask == mask);
        let h = height(*word, b);
        *word &= !mask;
        // Only blocks holding these frames are gone: the word's largest is
        // unchanged unless it was one of them.
        let order = &mut self.orders[w];
        if h + 1 >= *order {
            *order = word_order(*word);
        }
        h
    }

    /// Mark every frame of `from..to`, which must be in range and
    /// unmarked, and note each word's largest free block.
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
        self.refresh_orders();
    }

    /// Note each word's largest free block from its bits.
    fn refresh_orders(&mut self) {
        for (order, &word) in self.orders.iter_mut().zip(&self.words) {
            *order = word_order(word);
        }
    }

    /// Wholly free aligned blocks of each order up to `DERIVED`
    /// (`[0]`: free frames), counted from the bits: a pass over the
    /// words, for statistics and checks.
    pub(crate) fn counts(&self) -> [u64; DERIVED as usize + 1] {
        let mut counts = [0; DERIVED as usize + 1];
        for &word in &self.words {
            for (k, count) in (0..=DERIVED).zip(counts.iter_mut()) {
                // Most words are wholly free or wholly taken.
                *count += match word {
                    0 => 0,
                    u64::MAX => 64 >> k,
                    _ => u64::from(free_blocks(word, k).count_ones()),
                };
            }
        }
        counts
    }

    /// Work out each word's largest free block again; compare with what
    /// is kept.
    pub(crate) fn consistent(&self) -> Result<(), &'static str> {
        if self
            .orders
            .iter()
            .zip(&self.words)
            .any(|(&order, &word)| order != word_order(word))
        {
            return Err("kept largest free block of some word disagrees with its bits");
        }
        Ok(())
    }

    /// `pick_from`'s look at word `w` of the derived bitmap of order
    /// `1 <= k <= DERIVED` (its bit `b` stands for block `base + b`, as in
    /// a [`LevelBitmap`] over blocks `first >> k..=last >> k` of `new`'s
    /// range), bits `blocks`: worked out on the frames' words under it,
    /// with each block at its first frame's bit, so nothing is gathered.
    /// A block and its sibling lie in one frames' word.
    fn pick_derived(
        &self,
        k: u8,
        base: u64,
        w: usize,
        blocks: core::ops::Range<u32>,
    ) -> (Option<u64>, Option<u64>) {
        let (offset, words) = self.sources(k, w);
        if blocks.start >= blocks.end {
            return (None, None);
        }
        // Mostly free memory: when every frame under the word is free,
        // every block is, each with its sibling, so none is an exact fit.
        if words.len() == 1 << k && self.orders[words.clone()].iter().all(|&o| o == WHOLE) {
            return (None, Some(base + u64::from(blocks.start)));
        }
        let per_word = 64u32 >> k;
        let mut marked = None;
        for (j, s) in (offset as u32..).zip(words) {
            // This frames' word holds blocks `j * per_word..` of `w`.
            let lo = blocks.start.saturating_sub(j * per_word);
            let hi = blocks.end.saturating_sub(j * per_word).min(per_word);
            if lo >= hi || self.orders[s] <= k {
                continue;
            }
            let all = free_blocks(self.words[s], k);
            let bits = all & range_mask(lo << k..hi << k);
            if bits == 0 {
                continue;
            }
            let pairs = all & (all >> (1u32 << k)) & ALIGNED[k as usize + 1];
            let exact = bits & !(pairs | (pairs << (1u32 << k)));
            let at = |bits: u64| base + u64::from(j * per_word + (bits.trailing_zeros() >> k));
            if exact != 0 {
                return (Some(at(exact)), Some(marked.unwrap_or_else(|| at(bits))));
            }
            marked.get_or_insert(at(bits));
        }
        (None, marked)
    }

    /// The frames' words under word `w` of the derived bitmap of order
    /// `k`: the range of them this bitmap has, and the position of the
    /// first among the `2^k` it covers (the others lie outside the range).
    #[inline]
    fn sources(&self, k: u8, w: usize) -> (u64, core::ops::Range<usize>) {
        let start = self.source_base(k) + ((w as i64) << k);
        let from = start.max(0);
        let to = (start + (1 << k)).min(self.words.len() as i64).max(from);
        ((from - start) as u64, from as usize..to as usize)
    }

    /// Index of the frames' word under word 0 of the derived bitmap of
    /// order `k` (0 or below: that word may begin before this bitmap).
    #[inline]
    fn source_base(&self, k: u8) -> i64 {
        let level_origin = (self.origin >> k) & !63;
        // Frames `level_origin << k` on: a multiple of 64, as `origin` is.
        ((level_origin << k) as i64 - self.origin as i64) / 64
    }

    /// The words of the derived bitmap of order `k` in `from..to` that may
    /// have a marked bit (one of their frames' words holds a block of
    /// order `k`), ascending, found from the words' largest blocks eight
    /// bytes at a time.
    fn holding(&self, k: u8, from: usize, to: usize) -> impl Iterator<Item = usize> + '_ {
        let base = self.source_base(k);
        let source =
            move |w: usize| (base + ((w as i64) << k)).clamp(0, self.words.len() as i64) as usize;
        let end = source(to);
        let mut next = from;
        core::iter::from_fn(move || {
            if next >= to {
                return None;
            }
            let s = self.next_holding(k, source(next), end)?;
            let w = ((s as i64 - base) >> k) as usize;
            next = w + 1;
            Some(w)
        })
    }

    /// The first of the frames' words `from..to` holding a block of order
    /// `k`.
    fn next_holding(&self, k: u8, from: usize, to: usize) -> Option<usize> {
        let orders = &self.orders[..to];
        let head = from.next_multiple_of(8).min(to);
        if let Some(i) = orders[from..head].iter().position(|&o| o > k) {
            return Some(from + i);
        }
        // A byte above `k` carries into its top bit when `127 - k` is
        // added (bytes are at most 7, so no byte carries into the next).
        const ONES: u64 = 0x0101_0101_0101_0101;
        let bias = ONES * u64::from(0x7f - k);
        let (chunks, tail) = orders[head..].as_chunks::<8>();
        for (c, chunk) in chunks.iter().enumerate() {
            let over = (u64::from_le_bytes(*chunk) + bias) & (ONES << 7);
            if over != 0 {
                return Some(head + 8 * c + (over.trailing_zeros() / 8) as usize);
            }
        }
        let rest = to - tail.len();
        tail.iter().position(|&o| o > k).map(|i| rest + i)
    }

    /// [`LevelBitmap::find_from`] on the derived bitmap of order
    /// `1 <= k <= DERIVED`: the same block that bitmap would give.
    pub(crate) fn find_from(&self, k: u8, cursor: u64, patience: usize) -> Option<u64> {
        debug_assert!((1..=DERIVED).contains(&k));
        let level_origin = (self.origin >> k) & !63;
        let last = (self.origin + 64 * self.words.len() as u64 - 1) >> k;
        let words = ((last - level_origin) / 64 + 1) as usize;
        pick_from(
            level_origin,
            words,
            cursor,
            patience,
            |from, to| self.holding(k, from, to),
            |w, blocks| self.pick_derived(k, level_origin + 64 * w as u64, w, blocks),
        )
    }

    /// Address of the first word (bit 0 stands for frame `first & !63`
    /// of `new`); the words never move.
    pub(crate) fn words_addr(&self) -> usize {
        self.words.as_ptr() as usize
    }

    /// Bytes of memory used.
    pub(crate) fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// The search of [`LevelBitmap::find_from`] over `words` words of a
/// bitmap: `candidates(from, to)` lists the words of `from..to` that may
/// be non-empty (all of them, or by a summary); `pick(w, blocks)` looks
/// at word `w`'s bits `blocks` (a range within `0..64`) and gives the
/// first marked block there whose sibling is not marked (an exact fit),
/// and the first marked block, as absolute block numbers.
fn pick_from<I: Iterator<Item = usize>>(
    origin: u64,
    words: usize,
    cursor: u64,
    patience: usize,
    candidates: impl Fn(usize, usize) -> I,
    mut pick: impl FnMut(usize, core::ops::Range<u32>) -> (Option<u64>, Option<u64>),
) -> Option<u64> {
    let rel = cursor.saturating_sub(origin);
    let (w0, b0) = if rel / 64 < words as u64 {
        ((rel / 64) as usize, (rel % 64) as u32)
    } else {
        (0, 0)
    };
    // The cursor's word from the cursor on, the words after it, the
    // words before it, and last the cursor's word below the cursor.
    let first = (w0, b0..64);
    let after = candidates(w0 + 1, words).map(|w| (w, 0..64));
    let before = candidates(0, w0).map(|w| (w, 0..64));
    let last = (w0, 0..b0);
    let mut fallback = None;
    let mut looked = 0;
    for (w, blocks) in core::iter::once(first)
        .chain(after)
        .chain(before)
        .chain(core::iter::once(last))
    {
        let (exact, marked) = pick(w, blocks);
        let Some(marked) = marked else {
            continue;
        };
        if exact.is_some() {
            return exact;
        }
        fallback.get_or_insert(marked);
        looked += 1;
        if looked >= patience {
            break;
        }
    }
    fallback
}

/// Bits `blocks` (within `0..64`) of a word.
#[inline]
fn range_mask(blocks: core::ops::Range<u32>) -> u64 {
    if blocks.start >= blocks.end {
        return 0;
    }
    let high = if blocks.end >= 64 {
        u64::MAX
    } else {
        (1u64 << blocks.end) - 1
    };
    high & (u64::MAX << blocks.start)
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
        pick_from(
            self.origin,
            self.words.len(),
            cursor,
            patience,
            |from, to| self.nonempty_words(from, to),
            |w, blocks| {
                let all = self.words[w];
                let bits = all & range_mask(blocks);
                // A pair with both halves marked is a free parent block.
                let pairs = all & (all >> 1) & EVEN_BITS;
                let exact = bits & !(pairs | (pairs << 1));
                let base = self.origin + 64 * w as u64;
                let at = |bits: u64| (bits != 0).then(|| base + u64::from(bits.trailing_zeros()));
                (at(exact), at(bits))
            },
        )
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
    #[cfg(test)]
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
        let counts = b.counts();
        assert_eq!(counts[0], 139);
        assert!(!b.get(60) && b.get(61) && b.get(127) && b.get(199) && !b.get(200));
        // Blocks of order 1 inside 61..200: 62..200 in pairs; of order 2:
        // 64..200 in fours; of order 6: 64..128 and 128..192.
        assert_eq!(counts[1], 69);
        assert_eq!(counts[2], (200 - 64) / 4);
        assert_eq!(counts[usize::from(DERIVED)], (200 - 64) >> DERIVED);
        assert!(!b.is_free(6, 0) && b.is_free(6, 1) && b.is_free(6, 2) && !b.is_free(6, 3));
        b.consistent().unwrap();
    }

    /// The stored bitmap of order `k` a set of frames implies, built the
    /// way iBuddy built every level before they were derived: a block's
    /// bit is the AND of its halves'.
    fn eager_level(frames: &[bool], first: u64, k: u8) -> LevelBitmap {
        let last = first + frames.len() as u64 - 1;
        let mut level = LevelBitmap::new(first >> k, last >> k);
        for block in (first >> k)..=(last >> k) {
            let span = (block << k)..((block + 1) << k);
            if span
                .clone()
                .all(|pfn| pfn >= first && pfn <= last && frames[(pfn - first) as usize])
            {
                level.set(block);
            }
        }
        level
    }

    proptest::proptest! {
        /// Counts, block tests and searches of the derived orders agree
        /// with stored bitmaps built from the same frames, whatever order
        /// the frames were set and cleared in.
        #[test]
        fn derived_orders_agree_with_stored_ones(
            first in 0u64..300,
            len in 1u64..5000,
            ops in proptest::collection::vec((0u64..5000, proptest::bool::ANY, 0u8..10), 0..2000),
            cursors in proptest::collection::vec(0u64..6000, 1..6),
            prefill in 0u64..5000,
        ) {
            let mut b = FrameBitmap::new(first, first + len - 1);
            let mut frames = vec![false; len as usize];
            // A free stretch first, so whole words and runs of them occur.
            let filled = prefill.min(len);
            b.set_range(first, first + filled);
            frames[..filled as usize].fill(true);
            for (at, set, order) in ops {
                // Mostly single frames; orders 1 to 6 as whole blocks.
                let k = order.saturating_sub(3);
                let pfn = (first + at % len) >> k << k;
                let span = pfn..pfn + (1 << k);
                if span.start < first || span.end > first + len {
                    continue;
                }
                let index = |pfn: u64| (pfn - first) as usize;
                let height_of = |b: &FrameBitmap| {
                    (0..=6u8).rev().find(|&j| b.is_free(j, pfn >> j)).unwrap()
                };
                if set && span.clone().all(|p| !frames[index(p)]) {
                    let h = b.set_block(pfn, k);
                    span.for_each(|p| frames[index(p)] = true);
                    proptest::prop_assert_eq!(h, height_of(&b));
                } else if !set && span.clone().all(|p| frames[index(p)]) {
                    let expect = height_of(&b);
                    proptest::prop_assert_eq!(b.clear_block(pfn, k), expect);
                    span.for_each(|p| frames[index(p)] = false);
                }
            }
            b.consistent().unwrap();
            for k in 1..=DERIVED {
                let eager = eager_level(&frames, first, k);
                proptest::prop_assert_eq!(b.counts()[k as usize], eager.count());
                for block in (first >> k)..=((first + len - 1) >> k) {
                    proptest::prop_assert_eq!(b.is_free(k, block), eager.get(block));
                }
                for &cursor in &cursors {
                    for patience in [1, 2, 16] {
                        proptest::prop_assert_eq!(
                            b.find_from(k, cursor >> k, patience),
                            eager.find_from(cursor >> k, patience),
                            "order {}, cursor {}, patience {}", k, cursor >> k, patience
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn free_blocks_marks_each_wholly_set_block_at_its_first_bit() {
        // Order 1: pairs (0,1) and (6,7) set; 2 alone is not a pair.
        assert_eq!(free_blocks(0b1100_0111, 1), 0b0100_0001);
        // Order 2: bits 4..8 set, and 60..64.
        assert_eq!(free_blocks(0xF000_0000_0000_00F0, 2), (1 << 60) | (1 << 4));
        assert_eq!(free_blocks(u64::MAX, 5), (1 << 32) | 1);
        assert_eq!(free_blocks(u64::MAX >> 1, 5), 1);
        assert_eq!(free_blocks(0x1234, 0), 0x1234);
        assert_eq!(word_order(u64::MAX), WHOLE);
        assert_eq!(word_order(0), 0);
        assert_eq!(word_order(0b0110), 1, "two frames, no aligned pair");
        assert_eq!(word_order(0b1100), 2, "an aligned pair");
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
