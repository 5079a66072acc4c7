/* User-space owner of one ad_core: allocates its memory, seeds it as
 * nvmos-frames' BankBuddy starts (or with some frames in use, as the
 * kernel hands it a zone) and gives the Rust side an opaque pointer
 * (src/policy_core.rs). Not part of the kernel. */
#include <stdlib.h>
#include "adaptive_core.h"

struct ad_harness {
	struct ad_core core;
	void *mem;
};

/*
 * A core over [start, end) with banks of bank_frames; every frame free
 * except [used_start, used_end), carved bank by bank into the largest
 * aligned blocks, ascending (BankBuddy's carving), then ad_seed_done.
 */
struct ad_harness *ad_harness_new(u64 start, u64 end, u64 bank_frames,
				  u64 used_start, u64 used_end)
{
	struct ad_harness *h = malloc(sizeof(*h));
	u64 pfn;

	if (!h)
		return NULL;
	h->mem = malloc(ad_core_bytes(start, end, bank_frames));
	if (!h->mem) {
		free(h);
		return NULL;
	}
	ad_init(&h->core, start, end, bank_frames, h->mem);
	for (pfn = start; pfn < end;) {
		u64 bank_end = (pfn & ~(bank_frames - 1)) + bank_frames;
		unsigned int order = AD_MAX_ORDER;

		if (pfn >= used_start && pfn < used_end) {
			pfn++;
			continue;
		}
		if (bank_end > end)
			bank_end = end;
		while (order > 0 && ((pfn & ((1ULL << order) - 1)) ||
				     pfn + (1ULL << order) > bank_end ||
				     (pfn < used_end && pfn + (1ULL << order) > used_start)))
			order--;
		ad_seed(&h->core, pfn, order);
		pfn += 1ULL << order;
	}
	ad_seed_done(&h->core);
	return h;
}

void ad_harness_drop(struct ad_harness *h)
{
	free(h->mem);
	free(h);
}

struct ad_core *ad_harness_core(struct ad_harness *h)
{
	return &h->core;
}

u32 ad_harness_banks(const struct ad_harness *h)
{
	return h->core.nbanks;
}

/* Bank b's free frames and role (enum ad_role). */
void ad_harness_bank(const struct ad_harness *h, u32 b, u64 *free, int *role)
{
	*free = h->core.banks[b].free;
	*role = h->core.banks[b].role;
}

const struct ad_stats *ad_harness_stats(const struct ad_harness *h)
{
	return &h->core.stats;
}
