// SPDX-License-Identifier: GPL-2.0
/*
 * Adaptive-Buddy (Panwar and Gopinath): see adaptive_core.h.
 */
#include "adaptive_core.h"
#include "ibuddy_core.h"

#define AD_ORDERS (AD_MAX_ORDER + 1)

static inline u64 ad_align8(u64 n)
{
	return (n + 7) & ~(u64)7;
}

static u32 ad_nbanks(u64 start, u64 end, u64 bank_frames)
{
	u64 base = start & ~(bank_frames - 1);

	return (u32)((end - base + bank_frames - 1) / bank_frames);
}

u64 ad_core_bytes(u64 start, u64 end, u64 bank_frames)
{
	u64 n = end - start, nb = ad_nbanks(start, end, bank_frames);

	return ad_align8(n * sizeof(u32)) * 2 + ad_align8(n) +
	       ad_align8(nb * sizeof(struct ad_bank)) +
	       ad_align8((AD_PARKED + nb) * AD_ORDERS * sizeof(struct ad_list));
}

static inline struct ad_list *ad_list(struct ad_core *c, u32 slot, unsigned int order)
{
	return &c->lists[(u64)slot * AD_ORDERS + order];
}

static inline u32 ad_index_bank(const struct ad_core *c, u32 i)
{
	return (u32)((c->start + i - c->base) / c->bank_frames);
}

u32 ad_bank_of(const struct ad_core *c, u64 pfn)
{
	return ad_index_bank(c, (u32)(pfn - c->start));
}

/* Indices [*lo, *hi) of bank b inside the range. */
static void ad_bank_range(const struct ad_core *c, u32 b, u32 *lo, u32 *hi)
{
	u64 s = c->base + (u64)b * c->bank_frames, e = s + c->bank_frames;

	if (s < c->start)
		s = c->start;
	if (e > c->end)
		e = c->end;
	*lo = (u32)(s - c->start);
	*hi = (u32)(e - c->start);
}

/* Free-block lists: links in c->next/c->prev, by frame index. */

static void ad_push_front(struct ad_core *c, struct ad_list *l, u32 i)
{
	c->prev[i] = AD_NIL;
	c->next[i] = l->head;
	if (l->head == AD_NIL)
		l->tail = i;
	else
		c->prev[l->head] = i;
	l->head = i;
	l->len++;
}

static void ad_push_back(struct ad_core *c, struct ad_list *l, u32 i)
{
	c->next[i] = AD_NIL;
	c->prev[i] = l->tail;
	if (l->tail == AD_NIL)
		l->head = i;
	else
		c->next[l->tail] = i;
	l->tail = i;
	l->len++;
}

static void ad_remove(struct ad_core *c, struct ad_list *l, u32 i)
{
	u32 p = c->prev[i], n = c->next[i];

	if (p == AD_NIL)
		l->head = n;
	else
		c->next[p] = n;
	if (n == AD_NIL)
		l->tail = p;
	else
		c->prev[n] = p;
	l->len--;
}

static void ad_append(struct ad_core *c, struct ad_list *to, struct ad_list *from)
{
	if (from->head == AD_NIL)
		return;
	if (to->tail == AD_NIL) {
		to->head = from->head;
	} else {
		c->next[to->tail] = from->head;
		c->prev[from->head] = to->tail;
	}
	to->tail = from->tail;
	to->len += from->len;
	from->head = AD_NIL;
	from->tail = AD_NIL;
	from->len = 0;
}

/* Bank lists by role: links in the banks themselves. */

static void ad_role_push_front(struct ad_core *c, struct ad_list *l, u32 b)
{
	c->banks[b].prev = AD_NIL;
	c->banks[b].next = l->head;
	if (l->head == AD_NIL)
		l->tail = b;
	else
		c->banks[l->head].prev = b;
	l->head = b;
	l->len++;
}

static void ad_role_push_back(struct ad_core *c, struct ad_list *l, u32 b)
{
	c->banks[b].next = AD_NIL;
	c->banks[b].prev = l->tail;
	if (l->tail == AD_NIL)
		l->head = b;
	else
		c->banks[l->tail].next = b;
	l->tail = b;
	l->len++;
}

static void ad_role_remove(struct ad_core *c, struct ad_list *l, u32 b)
{
	u32 p = c->banks[b].prev, n = c->banks[b].next;

	if (p == AD_NIL)
		l->head = n;
	else
		c->banks[p].next = n;
	if (n == AD_NIL)
		l->tail = p;
	else
		c->banks[n].prev = p;
	l->len--;
}

void ad_init(struct ad_core *c, u64 start, u64 end, u64 bank_frames, void *mem)
{
	u64 n = end - start, k;
	char *p = mem;
	u32 b, lo, hi;

	c->start = start;
	c->end = end;
	c->bank_frames = bank_frames;
	c->base = start & ~(bank_frames - 1);
	c->nbanks = ad_nbanks(start, end, bank_frames);
	c->next = (u32 *)p;
	p += ad_align8(n * sizeof(u32));
	c->prev = (u32 *)p;
	p += ad_align8(n * sizeof(u32));
	c->state = (u8 *)p;
	p += ad_align8(n);
	c->banks = (struct ad_bank *)p;
	p += ad_align8(c->nbanks * sizeof(struct ad_bank));
	c->lists = (struct ad_list *)p;
	for (k = 0; k < n; k++) {
		c->next[k] = AD_NIL;
		c->prev[k] = AD_NIL;
		c->state[k] = 0;
	}
	for (k = 0; k < (u64)(AD_PARKED + c->nbanks) * AD_ORDERS; k++) {
		c->lists[k].head = AD_NIL;
		c->lists[k].tail = AD_NIL;
		c->lists[k].len = 0;
	}
	for (k = 0; k < 3; k++) {
		c->roles[k].head = AD_NIL;
		c->roles[k].tail = AD_NIL;
		c->roles[k].len = 0;
	}
	for (k = 0; k < AD_ORDERS; k++)
		c->nr_blocks[k] = 0;
	for (b = 0; b < c->nbanks; b++) {
		ad_bank_range(c, b, &lo, &hi);
		c->banks[b].frames = hi - lo;
		c->banks[b].free = 0;
		c->banks[b].home = AD_PARKED + b;
		c->banks[b].role = AD_OFFLINE;
		c->banks[b].isolated = 0;
		ad_role_push_back(c, &c->roles[AD_OFFLINE], b);
	}
	c->stats = (struct ad_stats){ 0 };
}

/* Put a free block on its bank's home list (at the front, as buddy does). */
static void ad_push_free(struct ad_core *c, u32 i, unsigned int order)
{
	u32 b = ad_index_bank(c, i);

	c->state[i] = order + 1;
	ad_push_front(c, ad_list(c, c->banks[b].home, order), i);
	c->nr_blocks[order]++;
}

static void ad_take(struct ad_core *c, struct ad_list *l, u32 i, unsigned int order)
{
	ad_remove(c, l, i);
	c->state[i] = 0;
	c->nr_blocks[order]--;
}

void ad_seed(struct ad_core *c, u64 pfn, unsigned int order)
{
	u32 i = (u32)(pfn - c->start);

	ad_push_free(c, i, order);
	c->banks[ad_index_bank(c, i)].free += 1ULL << order;
}

/* A bank may go offline only when whole and all free. */
static inline int ad_bank_empty(const struct ad_core *c, u32 b)
{
	return c->banks[b].frames == c->bank_frames &&
	       c->banks[b].free == c->bank_frames;
}

/* Move bank b's free blocks from its pool onto its parked lists. */
static void ad_park(struct ad_core *c, u32 b)
{
	u32 from = c->banks[b].home, to = AD_PARKED + b, i, lo, hi;

	if (from == to)
		return;
	ad_bank_range(c, b, &lo, &hi);
	for (i = lo; i < hi;) {
		if (c->state[i]) {
			unsigned int o = c->state[i] - 1;

			ad_remove(c, ad_list(c, from, o), i);
			ad_push_back(c, ad_list(c, to, o), i);
			i += 1U << o;
		} else {
			i++;
		}
	}
	c->banks[b].home = to;
}

/* Splice bank b's parked blocks onto pool's lists. */
static void ad_unpark(struct ad_core *c, u32 b, u32 pool)
{
	u32 from = AD_PARKED + b;
	unsigned int o;

	/* An isolated bank stays parked until its isolation ends. */
	if (c->banks[b].home != from || c->banks[b].isolated)
		return;
	for (o = 0; o < AD_ORDERS; o++)
		ad_append(c, ad_list(c, pool, o), ad_list(c, from, o));
	c->banks[b].home = pool;
}

static void ad_set_role(struct ad_core *c, u32 b, enum ad_role role)
{
	enum ad_role old = c->banks[b].role;

	if (old == role)
		return;
	ad_role_remove(c, &c->roles[old], b);
	/* Kernel banks return to the low end of the offline list, user banks to the high end. */
	if (role == AD_OFFLINE && old == AD_KERNEL)
		ad_role_push_front(c, &c->roles[AD_OFFLINE], b);
	else
		ad_role_push_back(c, &c->roles[role], b);
	c->banks[b].role = role;
	if (role == AD_OFFLINE) {
		ad_park(c, b);
		c->stats.bank_releases++;
	} else {
		ad_unpark(c, b, role == AD_KERNEL ? 0 : 1);
		if (old == AD_OFFLINE)
			c->stats.bank_adds++;
	}
}

void ad_seed_done(struct ad_core *c)
{
	u32 b;

	for (b = 0; b < c->nbanks; b++)
		if (!ad_bank_empty(c, b))
			ad_set_role(c, b, AD_KERNEL);
	c->stats.bank_adds = 0;
}

static int ad_list_fits(struct ad_core *c, u32 slot, unsigned int order)
{
	unsigned int o;

	for (o = order; o < AD_ORDERS; o++)
		if (ad_list(c, slot, o)->len)
			return 1;
	return 0;
}

/* Split the block at i (off its list) from cur down to order, upper halves back. */
static void ad_split(struct ad_core *c, u32 i, unsigned int cur, unsigned int order)
{
	while (cur > order) {
		cur--;
		ad_push_free(c, i + (1U << cur), cur);
	}
}

/* The smallest free block of at least order on slot's lists, split down; AD_NIL when none. */
static u32 ad_take_from_list(struct ad_core *c, u32 slot, unsigned int order)
{
	unsigned int o;

	for (o = order; o < AD_ORDERS; o++) {
		struct ad_list *l = ad_list(c, slot, o);
		u32 i = l->head;

		if (i == AD_NIL)
			continue;
		ad_take(c, l, i, o);
		ad_split(c, i, o, order);
		return i;
	}
	return AD_NIL;
}

/* The first offline bank (from the back for user requests) with a block of order. */
static u32 ad_find_offline(struct ad_core *c, unsigned int order, int from_back)
{
	struct ad_list *l = &c->roles[AD_OFFLINE];
	u32 b = from_back ? l->tail : l->head;

	while (b != AD_NIL) {
		if (!c->banks[b].isolated && c->banks[b].free >= (1ULL << order) &&
		    ad_list_fits(c, c->banks[b].home, order))
			return b;
		b = from_back ? c->banks[b].prev : c->banks[b].next;
	}
	return AD_NIL;
}

u64 ad_alloc(struct ad_core *c, unsigned int order, int kernel)
{
	u32 pool = kernel ? 0 : 1, i, b;
	u64 n = 1ULL << order;

	if (order > AD_MAX_ORDER) {
		c->stats.alloc_failed++;
		return AD_NONE;
	}
	i = ad_take_from_list(c, pool, order);
	if (i == AD_NIL) {
		/* Capacity on demand: bring in an offline bank from this side's end. */
		b = ad_find_offline(c, order, !kernel);
		if (b != AD_NIL)
			i = ad_take_from_list(c, AD_PARKED + b, order);
	}
	if (i == AD_NIL) {
		i = ad_take_from_list(c, 1 - pool, order);
		if (i != AD_NIL)
			c->stats.fallback_frames += n;
	}
	if (i == AD_NIL) {
		c->stats.alloc_failed++;
		return AD_NONE;
	}
	b = ad_index_bank(c, i);
	c->banks[b].free -= n;
	if (c->banks[b].role == AD_OFFLINE)
		ad_set_role(c, b, kernel ? AD_KERNEL : AD_USER);
	if (kernel)
		c->stats.alloc_kernel_frames += n;
	else
		c->stats.alloc_user_frames += n;
	return c->start + i;
}

u64 ad_free_block_of(const struct ad_core *c, u64 pfn, unsigned int *order)
{
	unsigned int o;

	if (pfn < c->start || pfn >= c->end)
		return AD_NONE;
	for (o = 0; o <= AD_MAX_ORDER; o++) {
		u64 head = pfn & ~((1ULL << o) - 1);

		if (head < c->start)
			break;
		if (c->state[head - c->start] > o) {
			/* A free block starting at head; it holds pfn when long enough. */
			if (pfn - head < (1ULL << (c->state[head - c->start] - 1))) {
				*order = c->state[head - c->start] - 1;
				return head;
			}
		}
	}
	return AD_NONE;
}

/* Why freeing (pfn, order) would be wrong, or IB_FREE_OK. */
static int ad_check_free(const struct ad_core *c, u64 pfn, unsigned int order)
{
	u64 n = 1ULL << order, p;
	unsigned int o;
	u32 b;

	if (order > AD_MAX_ORDER || (pfn & (n - 1)) || pfn < c->start ||
	    pfn >= c->end || c->end - pfn < n)
		return IB_FREE_OUTSIDE;
	b = ad_bank_of(c, pfn);
	if (ad_bank_of(c, pfn + n - 1) != b)
		return IB_FREE_OUTSIDE;
	/* A free block starting inside the block, or one holding its first frame. */
	for (p = pfn; p < pfn + n; p++)
		if (c->state[p - c->start])
			return IB_FREE_DOUBLE;
	if (ad_free_block_of(c, pfn, &o) != AD_NONE)
		return IB_FREE_DOUBLE;
	return IB_FREE_OK;
}

void ad_take_block(struct ad_core *c, u64 pfn, unsigned int order)
{
	u32 i = (u32)(pfn - c->start), b = ad_index_bank(c, i);
	u64 n = 1ULL << order;

	ad_take(c, ad_list(c, c->banks[b].home, order), i, order);
	c->banks[b].free -= n;
	c->stats.taken_frames += n;
	if (c->banks[b].role == AD_OFFLINE)
		ad_set_role(c, b, AD_KERNEL);
}

u64 ad_nr_free_blocks(const struct ad_core *c, unsigned int order)
{
	return order > AD_MAX_ORDER ? 0 : READ_ONCE(c->nr_blocks[order]);
}

int ad_free(struct ad_core *c, u64 pfn, unsigned int order)
{
	u32 i, b, lo, hi, slot;
	u64 n = 1ULL << order;
	int bad = ad_check_free(c, pfn, order);

	if (bad)
		return bad;
	i = (u32)(pfn - c->start);
	b = ad_index_bank(c, i);
	slot = c->banks[b].home;
	ad_bank_range(c, b, &lo, &hi);
	while (order < AD_MAX_ORDER) {
		u64 bpfn = (c->start + i) ^ (1ULL << order);
		u32 buddy;

		/* Buddies merge only inside the bank. */
		if (bpfn < c->start + lo || bpfn + (1ULL << order) > c->start + hi)
			break;
		buddy = (u32)(bpfn - c->start);
		if (c->state[buddy] != (u8)(order + 1))
			break;
		ad_take(c, ad_list(c, slot, order), buddy, order);
		if (buddy < i)
			i = buddy;
		order++;
	}
	ad_push_free(c, i, order);
	c->banks[b].free += n;
	c->stats.free_frames += n;
	if (ad_bank_empty(c, b))
		ad_set_role(c, b, AD_OFFLINE);
	return IB_FREE_OK;
}

int ad_free_block_at(const struct ad_core *c, u64 pfn)
{
	if (pfn < c->start || pfn >= c->end)
		return 0;
	return c->state[pfn - c->start];
}

int ad_max_free_order(const struct ad_core *c)
{
	int o;

	for (o = AD_MAX_ORDER; o >= 0; o--)
		if (c->nr_blocks[o])
			return o;
	return -1;
}

u32 ad_migration_candidates(const struct ad_core *c, const u8 *pinned, u32 *out)
{
	u32 n = 0, b, i, j, k = 0;
	u64 room = 0, held = 0;

	/* The banks in use into out by (free descending, bank): an insertion sort, few banks. */
	for (b = 0; b < c->nbanks; b++) {
		if (c->banks[b].free == c->banks[b].frames)
			continue;
		room += c->banks[b].free;
		for (i = n; i > 0 && c->banks[out[i - 1]].free < c->banks[b].free; i--)
			out[i] = out[i - 1];
		out[i] = b;
		n++;
	}
	/* The break point; candidates are compacted to the front of out in order. */
	for (j = 0; j < n; j++) {
		const struct ad_bank *bank = &c->banks[out[j]];
		u64 used = bank->frames - bank->free;

		if (pinned[out[j]] || bank->frames != c->bank_frames)
			continue;
		if (held + used > room - bank->free)
			break;
		held += used;
		room -= bank->free;
		out[k++] = out[j];
	}
	return k;
}

void ad_isolate_bank(struct ad_core *c, u32 b)
{
	c->banks[b].isolated = 1;
	ad_park(c, b);
	c->stats.isolated_banks++;
}

int ad_end_isolation(struct ad_core *c, u32 b)
{
	c->banks[b].isolated = 0;
	if (c->banks[b].role == AD_OFFLINE) {
		c->stats.emptied_banks++;
		return 1;
	}
	ad_unpark(c, b, c->banks[b].role == AD_KERNEL ? 0 : 1);
	return 0;
}

u64 ad_alloc_migration_target(struct ad_core *c, unsigned int order)
{
	u64 n = 1ULL << order;
	u32 i, b;

	if (order > AD_MAX_ORDER)
		return AD_NONE;
	i = ad_take_from_list(c, 1, order);
	if (i == AD_NIL)
		i = ad_take_from_list(c, 0, order);
	if (i == AD_NIL)
		return AD_NONE;
	b = ad_index_bank(c, i);
	c->banks[b].free -= n;
	c->stats.migration_target_frames += n;
	return c->start + i;
}
