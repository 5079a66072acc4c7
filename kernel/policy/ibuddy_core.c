// SPDX-License-Identifier: GPL-2.0
/*
 * iBuddy (Choi, NVRAMOS 2011): individual frame management with a
 * dual-meaning bitmap, frames reused least recently freed first, splitting
 * and coalescing only for multi-frame requests; and the bypass lazy list.
 *
 * The reference is the nvmos project's user-space IBuddy with one buddy
 * space, and PerCpu with PcpPolicy::Bypass: the same request sequence
 * gets the same frames from both (the differential test checks it).
 * See ibuddy_core.h for the interface and the invariants.
 */
#include "ibuddy_core.h"

/* Two halves of a parent block are bits 2m and 2m + 1 of one word. */
#define IB_EVEN_BITS 0x5555555555555555ull

static inline u64 ib_words(u64 start, u64 end, unsigned int k)
{
	u64 origin = (start >> k) & ~63ull;

	return (((end - 1) >> k) - origin) / 64 + 1;
}

u64 ib_space_bytes(u64 start, u64 end)
{
	u64 n = end - start;
	u64 bytes = ((2 * n * sizeof(u32)) + 7) & ~7ull;
	unsigned int k;

	for (k = 0; k <= IB_MAX_ORDER; k++)
		bytes += ib_words(start, end, k) * sizeof(u64);
	return bytes;
}

void ib_space_init(struct ib_space *s, u64 start, u64 end, void *mem)
{
	u64 n = end - start, i;
	char *p = mem;
	unsigned int k;

	s->start = start;
	s->end = end;
	s->next = (u32 *)p;
	s->prev = s->next + n;
	p += ((2 * n * sizeof(u32)) + 7) & ~7ull;
	for (i = 0; i < n; i++) {
		s->next[i] = IB_NIL;
		s->prev[i] = IB_NIL;
	}
	s->head = IB_NIL;
	s->tail = IB_NIL;
	for (k = 0; k <= IB_MAX_ORDER; k++) {
		struct ib_level *l = &s->level[k];

		l->origin = (start >> k) & ~63ull;
		l->nwords = ib_words(start, end, k);
		l->words = (u64 *)p;
		l->count = 0;
		for (i = 0; i < l->nwords; i++)
			l->words[i] = 0;
		p += l->nwords * sizeof(u64);
		s->cursor[k] = start >> k;
	}
	s->next_level = -1;
	s->stats = (struct ib_stats){ 0 };
}

/* Word and mask of block b, or 0 when b lies outside the level. */
static inline u64 *ib_word(const struct ib_level *l, u64 b, u64 *mask)
{
	u64 rel, w;

	if (b < l->origin)
		return 0;
	rel = b - l->origin;
	w = rel / 64;
	if (w >= l->nwords)
		return 0;
	*mask = 1ull << (rel % 64);
	return &l->words[w];
}

static inline int ib_get(const struct ib_level *l, u64 b)
{
	u64 mask, *w = ib_word(l, b, &mask);

	return w && (*w & mask);
}

/* Mark block b, which lies inside the level and is not marked. */
static inline void ib_set(struct ib_level *l, u64 b)
{
	u64 mask, *w = ib_word(l, b, &mask);

	*w |= mask;
	l->count++;
}

static inline int ib_test_and_clear(struct ib_level *l, u64 b)
{
	u64 mask, *w = ib_word(l, b, &mask);

	if (!w || !(*w & mask))
		return 0;
	*w &= ~mask;
	l->count--;
	return 1;
}

static inline void ib_push_back(struct ib_space *s, u32 i)
{
	s->prev[i] = s->tail;
	s->next[i] = IB_NIL;
	if (s->tail == IB_NIL)
		s->head = i;
	else
		s->next[s->tail] = i;
	s->tail = i;
}

static inline void ib_unlink(struct ib_space *s, u32 i)
{
	if (s->prev[i] == IB_NIL)
		s->head = s->next[i];
	else
		s->next[s->prev[i]] = s->next[i];
	if (s->next[i] == IB_NIL)
		s->tail = s->prev[i];
	else
		s->prev[s->next[i]] = s->prev[i];
	s->next[i] = IB_NIL;
	s->prev[i] = IB_NIL;
}

/*
 * The block of order `from` at pfn has just become free: mark its
 * ancestors free while their other halves are, and raise the next
 * allocation level (the iBuddy talk's Algorithm 2, lines 13-14).
 */
static void ib_coalesce_up(struct ib_space *s, u64 pfn, unsigned int from)
{
	unsigned int k = from;

	while (k < IB_MAX_ORDER && ib_get(&s->level[k], (pfn >> k) ^ 1)) {
		k++;
		ib_set(&s->level[k], pfn >> k);
		s->stats.coalesces++;
	}
	if ((int)k > s->next_level)
		s->next_level = k;
}

/*
 * The block of order from - 1 at pfn is no longer free: clear its
 * ancestors' bits while set, then lower the next allocation level past
 * orders left without a free block (Algorithm 1, lines 18-19).
 */
static void ib_uncoalesce_up(struct ib_space *s, u64 pfn, unsigned int from)
{
	unsigned int k = from;

	while (k <= IB_MAX_ORDER && ib_test_and_clear(&s->level[k], pfn >> k))
		k++;
	while (s->next_level >= 0 && s->level[s->next_level].count == 0)
		s->next_level--;
}

/*
 * A marked block at or after `cursor`, wrapping round, preferring one whose
 * sibling is unmarked (an exact fit that keeps larger free blocks whole);
 * after `patience` non-empty words, the first marked block seen. Word
 * order: the cursor's word from the cursor on, the words after it, the
 * words before it, the cursor's word below the cursor.
 */
static u64 ib_find_from(const struct ib_level *l, u64 cursor, unsigned int patience)
{
	u64 rel = cursor > l->origin ? cursor - l->origin : 0;
	u64 w0 = 0, b0 = 0, step, fallback = IB_NONE;
	unsigned int looked = 0;

	if (rel / 64 < l->nwords) {
		w0 = rel / 64;
		b0 = rel % 64;
	}
	for (step = 0; step < l->nwords + 1; step++) {
		u64 w, mask, bits, all, pairs, exact, base;

		if (step == 0) {
			w = w0;
			mask = ~0ull << b0;
		} else if (step < l->nwords) {
			/* after w0, then before it */
			w = (w0 + step) % l->nwords;
			mask = ~0ull;
			if (w == w0)
				continue;
		} else {
			w = w0;
			mask = ~(~0ull << b0);
		}
		bits = l->words[w] & mask;
		if (!bits)
			continue;
		all = l->words[w];
		pairs = all & (all >> 1) & IB_EVEN_BITS;
		exact = bits & ~(pairs | (pairs << 1));
		base = l->origin + 64 * w;
		if (exact)
			return base + __builtin_ctzll(exact);
		if (fallback == IB_NONE)
			fallback = base + __builtin_ctzll(bits);
		if (++looked >= patience)
			break;
	}
	return fallback;
}

void ib_seed(struct ib_space *s, u64 pfn, unsigned int order)
{
	u64 p;

	for (p = pfn; p < pfn + (1ull << order); p++)
		ib_set(&s->level[0], p);
}

void ib_seed_done(struct ib_space *s)
{
	struct ib_level *l0 = &s->level[0];
	unsigned int k;
	u64 w, b;

	for (w = 0; w < l0->nwords; w++) {
		u64 bits = l0->words[w];

		while (bits) {
			u64 pfn = l0->origin + 64 * w + __builtin_ctzll(bits);

			ib_push_back(s, (u32)(pfn - s->start));
			bits &= bits - 1;
		}
	}
	for (k = 1; k <= IB_MAX_ORDER; k++) {
		struct ib_level *l = &s->level[k];
		u64 first = l->origin, last = l->origin + 64 * l->nwords;

		for (b = first; b < last; b++)
			if (ib_get(&s->level[k - 1], 2 * b) &&
			    ib_get(&s->level[k - 1], 2 * b + 1))
				ib_set(l, b);
	}
	s->next_level = -1;
	for (k = 0; k <= IB_MAX_ORDER; k++)
		if (s->level[k].count)
			s->next_level = k;
}

/* Coalesce: take a wholly free block of order k off the free list. */
static u64 ib_alloc_block(struct ib_space *s, unsigned int k)
{
	u64 block, first, pfn, b;
	unsigned int level;

	if (s->next_level < (int)k)
		return IB_NONE;
	block = ib_find_from(&s->level[k], s->cursor[k], IB_FIT_PATIENCE);
	if (block == IB_NONE)
		return IB_NONE;
	s->cursor[k] = block + 1;
	first = block << k;
	for (pfn = first; pfn < first + (1ull << k); pfn++) {
		ib_unlink(s, (u32)(pfn - s->start));
		ib_test_and_clear(&s->level[0], pfn);
	}
	for (level = 1; level <= k; level++)
		for (b = first >> level; b < (first >> level) + (1ull << (k - level)); b++)
			ib_test_and_clear(&s->level[level], b);
	ib_uncoalesce_up(s, first, k + 1);
	return first;
}

u64 ib_alloc(struct ib_space *s, unsigned int order)
{
	u64 pfn;
	u32 i;

	if (order == 0) {
		i = s->head;
		if (i == IB_NIL) {
			s->stats.alloc_failed++;
			return IB_NONE;
		}
		ib_unlink(s, i);
		pfn = s->start + i;
		ib_test_and_clear(&s->level[0], pfn);
		ib_uncoalesce_up(s, pfn, 1);
		s->stats.alloc_single++;
		return pfn;
	}
	if (order > IB_MAX_ORDER) {
		s->stats.alloc_failed++;
		return IB_NONE;
	}
	pfn = ib_alloc_block(s, order);
	if (pfn == IB_NONE) {
		s->stats.alloc_failed++;
		return IB_NONE;
	}
	s->stats.alloc_blocks++;
	s->stats.alloc_block_frames += 1ull << order;
	return pfn;
}

enum ib_free_result ib_free(struct ib_space *s, u64 pfn, unsigned int order)
{
	unsigned int level;
	u64 p, b;

	/* Check everything before touching anything: a bad free changes nothing. */
	if (order > IB_MAX_ORDER || (pfn & ((1ull << order) - 1)) ||
	    pfn < s->start || pfn >= s->end || s->end - pfn < (1ull << order))
		return IB_FREE_OUTSIDE;
	for (p = pfn; p < pfn + (1ull << order); p++)
		if (ib_get(&s->level[0], p))
			return IB_FREE_DOUBLE;
	if (order == 0) {
		ib_push_back(s, (u32)(pfn - s->start));
		ib_set(&s->level[0], pfn);
		ib_coalesce_up(s, pfn, 0);
		s->stats.free_single++;
		return IB_FREE_OK;
	}
	/* Split: every frame of the block goes on the free list. */
	for (p = pfn; p < pfn + (1ull << order); p++) {
		ib_push_back(s, (u32)(p - s->start));
		ib_set(&s->level[0], p);
	}
	for (level = 1; level <= order; level++)
		for (b = pfn >> level; b < (pfn >> level) + (1ull << (order - level)); b++)
			ib_set(&s->level[level], b);
	ib_coalesce_up(s, pfn, order);
	s->stats.free_blocks++;
	s->stats.free_block_frames += 1ull << order;
	return IB_FREE_OK;
}

int ib_take_frame(struct ib_space *s, u64 pfn)
{
	if (pfn < s->start || pfn >= s->end || !ib_get(&s->level[0], pfn))
		return 0;
	ib_unlink(s, (u32)(pfn - s->start));
	ib_test_and_clear(&s->level[0], pfn);
	ib_uncoalesce_up(s, pfn, 1);
	s->stats.taken_frames++;
	return 1;
}

int ib_frame_free(const struct ib_space *s, u64 pfn)
{
	return pfn >= s->start && pfn < s->end && ib_get(&s->level[0], pfn);
}

u64 ib_nr_free(const struct ib_space *s)
{
	return s->level[0].count;
}

u64 ib_nr_free_blocks(const struct ib_space *s, unsigned int order)
{
	u64 here, above;

	if (order > IB_MAX_ORDER)
		return 0;
	here = READ_ONCE(s->level[order].count);
	if (order == IB_MAX_ORDER)
		return here;
	/* Each free block of order + 1 accounts for two set bits here. */
	above = 2 * READ_ONCE(s->level[order + 1].count);
	return here > above ? here - above : 0;
}

void ib_lazy_init(struct ib_lazy *l, u32 cap)
{
	l->cap = cap > IB_LAZY_MAX ? IB_LAZY_MAX : cap;
	l->head = 0;
	l->len = 0;
}

int ib_lazy_take(struct ib_lazy *l, u64 *pfn)
{
	if (!l->len)
		return 0;
	*pfn = l->pfn[l->head];
	l->head = (l->head + 1) % IB_LAZY_MAX;
	l->len--;
	return 1;
}

int ib_lazy_put(struct ib_lazy *l, u64 pfn)
{
	if (l->len >= l->cap)
		return 0;
	l->pfn[(l->head + l->len) % IB_LAZY_MAX] = pfn;
	l->len++;
	return 1;
}

void ib_staged_init(struct ib_staged *st, u32 batch)
{
	st->batch = batch < 1 ? 1 : batch > IB_LAZY_MAX ? IB_LAZY_MAX : batch;
	st->head = 0;
	st->len = 0;
	st->npending = 0;
}

int ib_staged_take(struct ib_staged *st, u64 *pfn)
{
	if (!st->len)
		return 0;
	*pfn = st->list[st->head];
	st->head = (st->head + 1) % IB_LAZY_MAX;
	st->len--;
	return 1;
}

void ib_staged_stage(struct ib_staged *st, u64 pfn)
{
	st->list[(st->head + st->len) % IB_LAZY_MAX] = pfn;
	st->len++;
}

u32 ib_staged_room(const struct ib_staged *st)
{
	return st->batch > st->len ? st->batch - st->len : 0;
}

int ib_staged_gather(struct ib_staged *st, u64 pfn)
{
	st->pending[st->npending++] = pfn;
	return st->npending >= st->batch;
}

u32 ib_staged_flush(struct ib_staged *st, u64 *out)
{
	u32 n = st->npending, i;

	for (i = 0; i < n; i++)
		out[i] = st->pending[i];
	st->npending = 0;
	return n;
}

u32 ib_staged_unstage(struct ib_staged *st, u64 *out)
{
	u32 n = 0;
	u64 pfn;

	while (ib_staged_take(st, &pfn))
		out[n++] = pfn;
	return n;
}
