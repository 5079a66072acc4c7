/* User-space owner of one m3_core: allocates its memory, seeds it (every
 * frame free, as nvmos-frames' M3 starts, or with some frames in use, as
 * the kernel hands a zone over) and gives the Rust side an opaque pointer
 * (src/policy_core.rs). Not part of the kernel. */
#include <stdlib.h>
#include "m3_core.h"

struct m3_harness {
	struct m3_core core;
	void *mem;
};

/*
 * A core over [start, end) for cpus CPUs and colours colours of
 * (pfn >> shift) & (colours - 1); every frame free except
 * [used_start, used_end), seeded a frame at a time, then m3_seed_done.
 */
struct m3_harness *m3_harness_new(u64 start, u64 end, u32 cpus, u32 colours,
				  u32 shift, int partition, u64 seed,
				  u64 used_start, u64 used_end)
{
	struct m3_harness *h = malloc(sizeof(*h));
	u64 pfn;

	if (!h)
		return NULL;
	h->mem = malloc(m3_core_bytes(end - start, colours));
	if (!h->mem) {
		free(h);
		return NULL;
	}
	m3_init(&h->core, start, end, cpus, colours, shift, partition, seed, h->mem);
	for (pfn = start; pfn < end; pfn++)
		if (pfn < used_start || pfn >= used_end)
			m3_seed(&h->core, pfn, 0);
	m3_seed_done(&h->core);
	return h;
}

void m3_harness_drop(struct m3_harness *h)
{
	free(h->mem);
	free(h);
}

struct m3_core *m3_harness_core(struct m3_harness *h)
{
	return &h->core;
}

const struct m3_stats *m3_harness_stats(const struct m3_harness *h)
{
	return &h->core.stats;
}
