// SPDX-License-Identifier: GPL-2.0
/*
 * M3 (Choi, Noh and Lee, NVRAMOS 2012): single frames at random over the
 * colours (banks), optionally partitioned among the CPUs.
 *
 * The reference is the nvmos project's user-space M3 over one zone: every
 * draw of its generator is made here in the same order and every colour
 * array changes the same way, so the same request sequence gets the same
 * frames from both (the differential test checks it). See m3_core.h for
 * the interface and the invariants.
 */
#include "m3_core.h"

static inline u64 m3_align8(u64 n)
{
	return (n + 7) & ~7ull;
}

/*
 * Words of the order-k bitmap of a core of n frames, wherever it starts:
 * its blocks (start >> k) .. ((end - 1) >> k) are at most (n >> k) + 2.
 */
static inline u64 m3_words(u64 n, unsigned int k)
{
	return ((n >> k) + 2 + 63) / 64;
}

u64 m3_core_bytes(u64 frames, u32 colours)
{
	u64 bytes = m3_align8(frames) + 2 * m3_align8(frames * sizeof(u32)) +
		    2 * m3_align8((u64)colours * sizeof(u32));
	unsigned int k;

	for (k = 1; k <= M3_MAX_ORDER; k++)
		bytes += m3_words(frames, k) * sizeof(u64);
	return bytes;
}

/* The xorshift64 generator (Marsaglia's 13, 7, 17), as the reference's. */
static inline u64 m3_next(struct m3_core *c)
{
	u64 x = c->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	c->rng = x;
	return x;
}

/* The order-k bitmaps: bit b of full[k] is the block (start >> k) + b. */

static inline u64 m3_block(const struct m3_core *c, unsigned int k, u64 pfn)
{
	return (pfn >> k) - (c->start >> k);
}

static inline int m3_test(const struct m3_core *c, unsigned int k, u64 pfn)
{
	u64 b = m3_block(c, k, pfn);

	return (c->full[k][b / 64] >> (b % 64)) & 1;
}

static inline void m3_set(struct m3_core *c, unsigned int k, u64 pfn)
{
	u64 b = m3_block(c, k, pfn);

	c->full[k][b / 64] |= 1ull << (b % 64);
	c->nr_full[k]++;
}

static inline void m3_clear(struct m3_core *c, unsigned int k, u64 pfn)
{
	u64 b = m3_block(c, k, pfn);

	c->full[k][b / 64] &= ~(1ull << (b % 64));
	c->nr_full[k]--;
}

/* Whether the order-k block holding pfn (inside the range) lies wholly inside it. */
static inline int m3_inside(const struct m3_core *c, unsigned int k, u64 pfn)
{
	u64 head = pfn & ~((1ull << k) - 1);

	return head >= c->start && c->end - head >= (1ull << k);
}

/* Whether the order-k block holding pfn, inside the range, is wholly free. */
static inline int m3_whole(const struct m3_core *c, unsigned int k, u64 pfn)
{
	return k ? m3_test(c, k, pfn) : c->state[pfn - c->start] == M3_FREE;
}

/*
 * Frame pfn became free: set the bit of every block it completes. A block
 * is whole when both halves are, so the climb stops at the first order
 * whose other half is not.
 */
static void m3_climb_free(struct m3_core *c, u64 pfn)
{
	unsigned int k;

	for (k = 1; k <= M3_MAX_ORDER; k++) {
		if (!m3_inside(c, k, pfn) || !m3_whole(c, k - 1, pfn ^ (1ull << (k - 1))))
			break;
		m3_set(c, k, pfn);
	}
}

/*
 * Frame pfn is no longer free: clear the bit of every block that was
 * whole with it. A block that was not whole has no whole parent, so the
 * climb stops at the first clear bit.
 */
static void m3_climb_used(struct m3_core *c, u64 pfn)
{
	unsigned int k;

	for (k = 1; k <= M3_MAX_ORDER; k++) {
		if (!m3_inside(c, k, pfn) || !m3_test(c, k, pfn))
			break;
		m3_clear(c, k, pfn);
	}
}

/* Append frame i to its colour's array. */
static inline void m3_list(struct m3_core *c, u32 i)
{
	u32 col = m3_colour(c, c->start + i);

	c->pos[i] = c->len[col];
	c->slots[c->base[col] + c->len[col]] = i;
	c->len[col]++;
	c->free_count++;
}

/* Free frame i: the reference's push_free. */
static void m3_push(struct m3_core *c, u32 i)
{
	m3_list(c, i);
	c->state[i] = M3_FREE;
	m3_climb_free(c, c->start + i);
}

/*
 * Take free frame i off its colour's array: the last entry moves into its
 * slot (the reference's swap_remove). The caller sets its state.
 */
static void m3_unlink(struct m3_core *c, u32 i)
{
	u32 col = m3_colour(c, c->start + i), p = c->pos[i];
	u32 *a = c->slots + c->base[col];
	u32 last = a[--c->len[col]];

	a[p] = last;
	c->pos[last] = p;
	c->pos[i] = M3_NOWHERE;
	c->free_count--;
	m3_climb_used(c, c->start + i);
}

void m3_init(struct m3_core *c, u64 start, u64 end, u32 cpus, u32 colours,
	     u32 shift, int partition, u64 seed, void *mem)
{
	u64 n = end - start, i, w;
	char *p = mem;
	unsigned int k;
	u32 col, sum = 0;

	c->start = start;
	c->end = end;
	c->cpus = cpus;
	c->colours = colours;
	c->shift = shift;
	c->partition = partition;
	/* xorshift needs a non-zero state. */
	c->rng = seed | 1;
	c->free_count = 0;
	c->state = (u8 *)p;
	p += m3_align8(n);
	c->pos = (u32 *)p;
	p += m3_align8(n * sizeof(u32));
	c->slots = (u32 *)p;
	p += m3_align8(n * sizeof(u32));
	c->base = (u32 *)p;
	p += m3_align8((u64)colours * sizeof(u32));
	c->len = (u32 *)p;
	p += m3_align8((u64)colours * sizeof(u32));
	c->nr_full[0] = 0;
	for (k = 1; k <= M3_MAX_ORDER; k++) {
		c->full[k] = (u64 *)p;
		for (w = 0; w < m3_words(n, k); w++)
			c->full[k][w] = 0;
		p += m3_words(n, k) * sizeof(u64);
		c->nr_full[k] = 0;
	}
	for (col = 0; col < colours; col++)
		c->len[col] = 0;
	for (i = 0; i < n; i++) {
		c->state[i] = M3_LOOSE;
		c->pos[i] = M3_NOWHERE;
		c->len[m3_colour(c, start + i)]++;
	}
	/* Each colour's array has room for all its frames; colours in order. */
	for (col = 0; col < colours; col++) {
		c->base[col] = sum;
		sum += c->len[col];
		c->len[col] = 0;
	}
	c->stats = (struct m3_stats){ 0 };
}

void m3_seed(struct m3_core *c, u64 pfn, unsigned int order)
{
	u32 i = (u32)(pfn - c->start), f;

	for (f = i; f < i + (1u << order); f++)
		c->state[f] = M3_FREE;
}

void m3_seed_done(struct m3_core *c)
{
	u32 n = (u32)(c->end - c->start), i;
	unsigned int k;

	/* Ascending, so each array is in pfn order, as the reference starts. */
	for (i = 0; i < n; i++)
		if (c->state[i] == M3_FREE)
			m3_list(c, i);
	/* The bitmaps bottom up: a block inside the range is whole when both halves are. */
	for (k = 1; k <= M3_MAX_ORDER; k++) {
		u64 size = 1ull << k, head = (c->start + size - 1) & ~(size - 1);

		for (; head + size <= c->end; head += size)
			if (m3_whole(c, k - 1, head) && m3_whole(c, k - 1, head + size / 2))
				m3_set(c, k, head);
	}
}

void m3_colours_of(const struct m3_core *c, u32 cpu, u32 *first, u32 *end)
{
	u64 n = c->cpus, k = c->colours;

	if (!c->partition) {
		*first = 0;
		*end = c->colours;
		return;
	}
	/* Colour j belongs to CPU j * n / k: CPU cpu's first is ceil(cpu * k / n). */
	*first = (u32)(((u64)cpu * k + n - 1) / n);
	*end = (u32)(((u64)(cpu + 1) * k + n - 1) / n);
}

/*
 * A random non-empty colour of [first, end), probing on from a random one
 * (one draw whenever the range is not empty); M3_NOWHERE when none.
 */
static u32 m3_pick_colour(struct m3_core *c, u32 first, u32 end)
{
	u32 n = end - first, f, k;

	if (!n)
		return M3_NOWHERE;
	f = (u32)(m3_next(c) % n);
	for (k = 0; k < n; k++) {
		u32 col = first + (f + k) % n;

		if (c->len[col])
			return col;
	}
	return M3_NOWHERE;
}

/* A random free frame of a random colour of the CPU's, else of any colour. */
static u64 m3_alloc_single(struct m3_core *c, u32 first, u32 end)
{
	u32 col = m3_pick_colour(c, first, end), i;

	if (col == M3_NOWHERE) {
		col = m3_pick_colour(c, 0, c->colours);
		if (col == M3_NOWHERE)
			return IB_NONE;
		c->stats.alloc_borrowed++;
	}
	i = c->slots[c->base[col] + (u32)(m3_next(c) % c->len[col])];
	m3_unlink(c, i);
	c->state[i] = M3_HEAD;
	c->stats.alloc_single++;
	return c->start + i;
}

/* Hand out the wholly free block (head, order): frames unlinked in ascending order. */
static void m3_take(struct m3_core *c, u64 head, unsigned int order)
{
	u32 i = (u32)(head - c->start), f;

	for (f = i; f < i + (1u << order); f++) {
		m3_unlink(c, f);
		c->state[f] = M3_TAIL;
	}
	c->state[i] = M3_HEAD + order;
	c->stats.alloc_blocks++;
	c->stats.alloc_block_frames += 1ull << order;
}

/*
 * A block of order >= 1: the aligned block around a few random free
 * frames of the CPU's colours, then the lowest wholly free aligned block
 * of the range (the reference walks the frames to it; its bit is the
 * first set one).
 */
static u64 m3_alloc_block(struct m3_core *c, unsigned int order, u32 first, u32 end)
{
	u64 blocks = ((c->end - 1) >> order) - (c->start >> order) + 1, w, pfn;
	u32 col, t;

	for (t = 0; t < M3_BLOCK_PROBES; t++) {
		col = m3_pick_colour(c, first, end);
		if (col == M3_NOWHERE)
			break;
		pfn = c->start + c->slots[c->base[col] + (u32)(m3_next(c) % c->len[col])];
		if (m3_inside(c, order, pfn) && m3_test(c, order, pfn)) {
			pfn &= ~((1ull << order) - 1);
			c->stats.block_probe_hits++;
			m3_take(c, pfn, order);
			return pfn;
		}
	}
	for (w = 0; w < (blocks + 63) / 64; w++) {
		u64 bits = c->full[order][w];

		if (!bits)
			continue;
		pfn = ((c->start >> order) + 64 * w + __builtin_ctzll(bits)) << order;
		m3_take(c, pfn, order);
		return pfn;
	}
	return IB_NONE;
}

u64 m3_alloc(struct m3_core *c, unsigned int order, u32 cpu)
{
	u32 first, end;
	u64 pfn;

	if (order > M3_MAX_ORDER) {
		c->stats.alloc_failed++;
		return IB_NONE;
	}
	m3_colours_of(c, cpu % c->cpus, &first, &end);
	if (!order)
		/* Draws even when nothing is free, as the reference does. */
		pfn = m3_alloc_single(c, first, end);
	else if (c->free_count < (1ull << order))
		pfn = IB_NONE;
	else
		pfn = m3_alloc_block(c, order, first, end);
	if (pfn == IB_NONE)
		c->stats.alloc_failed++;
	return pfn;
}

/* Whether (pfn, order) is an aligned block wholly inside the range. */
static int m3_block_ok(const struct m3_core *c, u64 pfn, unsigned int order)
{
	u64 n;

	if (order > M3_MAX_ORDER)
		return 0;
	n = 1ull << order;
	return !(pfn & (n - 1)) && pfn >= c->start && pfn < c->end && c->end - pfn >= n;
}

/* Why freeing (pfn, order) would be wrong, or IB_FREE_OK. */
static enum ib_free_result m3_check_free(const struct m3_core *c, u64 pfn,
					 unsigned int order)
{
	u32 i, f;
	int loose = 1;

	if (!m3_block_ok(c, pfn, order))
		return IB_FREE_OUTSIDE;
	i = (u32)(pfn - c->start);
	for (f = i; f < i + (1u << order); f++) {
		if (c->state[f] == M3_FREE)
			return IB_FREE_DOUBLE;
		if (c->state[f] != M3_LOOSE)
			loose = 0;
	}
	/* A head's tails follow it: the block is exactly one the core handed out. */
	if (loose || c->state[i] == M3_HEAD + order)
		return IB_FREE_OK;
	return IB_FREE_OUTSIDE;
}

enum ib_free_result m3_free(struct m3_core *c, u64 pfn, unsigned int order)
{
	enum ib_free_result bad = m3_check_free(c, pfn, order);
	u32 i, f;

	if (bad != IB_FREE_OK)
		return bad;
	i = (u32)(pfn - c->start);
	if (c->state[i] == M3_LOOSE)
		c->stats.free_loose_frames += 1ull << order;
	for (f = i; f < i + (1u << order); f++)
		m3_push(c, f);
	if (order) {
		c->stats.free_blocks++;
		c->stats.free_block_frames += 1ull << order;
	} else {
		c->stats.free_single++;
	}
	return IB_FREE_OK;
}

int m3_loosen(struct m3_core *c, u64 pfn, unsigned int order)
{
	u32 i, f, h, end;

	if (!m3_block_ok(c, pfn, order))
		return 0;
	i = (u32)(pfn - c->start);
	end = i + (1u << order);
	for (f = i; f < end; f++)
		if (c->state[f] == M3_FREE)
			return 0;
	/* The block holding the first frame may start before it. */
	for (h = i; h > 0 && c->state[h] == M3_TAIL; h--)
		;
	for (f = h; f < end;) {
		u8 s = c->state[f];

		if (s >= M3_HEAD) {
			u32 stop = f + (1u << (s - M3_HEAD));

			for (; f < stop; f++)
				c->state[f] = M3_LOOSE;
			c->stats.loosened_blocks++;
		} else {
			f++;
		}
	}
	return 1;
}

int m3_frame_free(const struct m3_core *c, u64 pfn)
{
	if (pfn < c->start || pfn >= c->end)
		return 0;
	return READ_ONCE(c->state[pfn - c->start]) == M3_FREE;
}

int m3_take_block(struct m3_core *c, u64 pfn, unsigned int order)
{
	u32 i, f;

	if (!m3_block_ok(c, pfn, order))
		return 0;
	i = (u32)(pfn - c->start);
	for (f = i; f < i + (1u << order); f++)
		if (c->state[f] != M3_FREE)
			return 0;
	for (f = i; f < i + (1u << order); f++) {
		m3_unlink(c, f);
		c->state[f] = M3_LOOSE;
	}
	c->stats.taken_frames += 1ull << order;
	return 1;
}

u64 m3_free_frames(const struct m3_core *c)
{
	return READ_ONCE(c->free_count);
}

u32 m3_colour_free(const struct m3_core *c, u32 colour)
{
	return colour < c->colours ? READ_ONCE(c->len[colour]) : 0;
}

/* Wholly free aligned blocks of order k: set bits, or free frames for order 0. */
static inline u64 m3_whole_blocks(const struct m3_core *c, unsigned int k)
{
	return k ? READ_ONCE(c->nr_full[k]) : READ_ONCE(c->free_count);
}

u64 m3_nr_free_blocks(const struct m3_core *c, unsigned int order)
{
	u64 whole, halves;

	if (order > M3_MAX_ORDER)
		return 0;
	whole = m3_whole_blocks(c, order);
	if (order == M3_MAX_ORDER)
		return whole;
	/* Every whole block of order + 1 holds two whole halves. */
	halves = 2 * m3_whole_blocks(c, order + 1);
	/* A reader without the lock may see the two counts mid-update. */
	return whole > halves ? whole - halves : 0;
}

int m3_max_free_order(const struct m3_core *c)
{
	int k;

	for (k = M3_MAX_ORDER; k >= 0; k--)
		if (m3_whole_blocks(c, k))
			return k;
	return -1;
}
