/* User-space owner of one ib_space and one ib_lazy: allocates their memory
 * and hands the Rust side opaque pointers (src/policy_core.rs). Not part
 * of the kernel. */
#include <stdlib.h>
#include "ibuddy_core.h"

struct ib_harness {
	struct ib_space space;
	struct ib_lazy lazy;
	struct ib_staged staged;
	void *mem;
};

/* A space over [start, end) with every frame free, and a lazy list of cap frames. */
struct ib_harness *ib_harness_new(u64 start, u64 end, u32 cap)
{
	struct ib_harness *h = malloc(sizeof(*h));
	u64 pfn;

	if (!h)
		return NULL;
	h->mem = malloc(ib_space_bytes(start, end));
	if (!h->mem) {
		free(h);
		return NULL;
	}
	ib_space_init(&h->space, start, end, h->mem);
	for (pfn = start; pfn < end; pfn++)
		ib_seed(&h->space, pfn, 0);
	ib_seed_done(&h->space);
	ib_lazy_init(&h->lazy, cap);
	ib_staged_init(&h->staged, IB_LAZY_MAX);
	return h;
}

/* Make the harness's CPU list a staged (lis31-fair) list of batch frames. */
void ib_harness_stage(struct ib_harness *h, u32 batch)
{
	ib_lazy_init(&h->lazy, 0);
	ib_staged_init(&h->staged, batch);
}

struct ib_staged *ib_harness_staged(struct ib_harness *h)
{
	return &h->staged;
}

void ib_harness_drop(struct ib_harness *h)
{
	free(h->mem);
	free(h);
}

struct ib_space *ib_harness_space(struct ib_harness *h)
{
	return &h->space;
}

struct ib_lazy *ib_harness_lazy(struct ib_harness *h)
{
	return &h->lazy;
}

int ib_harness_next_level(const struct ib_harness *h)
{
	return h->space.next_level;
}

u64 ib_harness_coalesces(const struct ib_harness *h)
{
	return h->space.stats.coalesces;
}
