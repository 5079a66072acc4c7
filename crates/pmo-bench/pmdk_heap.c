/*
 * The PMDK baseline of `nvmos bench heap`: libpmemobj's atomic allocator
 * (pmemobj_alloc / pmemobj_free, each durable on return) driven by the same
 * operation sequence as nvmos's heap: allocations of 64..4096 bytes (always
 * while fewer than LIVE_MAX/2 blocks are live, then half the time) and
 * frees of a random live block, the live set capped, the live blocks'
 * handles kept in the root object (as a real program keeps them). Then the
 * fragmentation probe: the largest single allocation that still succeeds,
 * found by bisection.
 *
 * usage: pmdk_heap POOL POOL_BYTES OPS LIVE_MAX SEED
 * prints: "<ops> <seconds> <cpu seconds> <allocs> <frees> <failed allocs>
 *          <live bytes asked> <largest allocatable> <curr_allocated>"
 *
 * The sequence generator is xorshift64* seeded with SEED, the same as
 * nvmos's side, so both run exactly the same operations.
 *
 * Built by `nvmos bench heap` with `cc -O2 ... -lpmemobj` when libpmemobj
 * is installed (Debian: libpmemobj-dev); not part of any test.
 */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t state;
static uint64_t next_rand(void)
{
	state ^= state >> 12;
	state ^= state << 25;
	state ^= state >> 27;
	return state * 0x2545F4914F6CDD1DULL;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s POOL POOL_BYTES OPS LIVE_MAX SEED\n", argv[0]);
		return 2;
	}
	const char *path = argv[1];
	size_t pool_bytes = strtoull(argv[2], NULL, 10);
	uint64_t ops = strtoull(argv[3], NULL, 10);
	uint64_t live_max = strtoull(argv[4], NULL, 10);
	state = strtoull(argv[5], NULL, 10) | 1;
	PMEMobjpool *pop = pmemobj_create(path, "nvmos-heap", pool_bytes, 0600);
	if (pop == NULL) {
		fprintf(stderr, "pmemobj_create %s: %s\n", path, pmemobj_errormsg());
		return 1;
	}
	int enabled = 1;
	pmemobj_ctl_set(pop, "stats.enabled", &enabled);
	PMEMoid root = pmemobj_root(pop, live_max * sizeof(PMEMoid));
	if (OID_IS_NULL(root)) {
		fprintf(stderr, "pmemobj_root: %s\n", pmemobj_errormsg());
		return 1;
	}
	PMEMoid *slots = pmemobj_direct(root);
	uint64_t *sizes = calloc(live_max, sizeof(uint64_t));
	uint64_t live = 0, allocs = 0, frees = 0, failed = 0, live_bytes = 0;
	double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	for (uint64_t i = 0; i < ops; i++) {
		uint64_t r = next_rand();
		if (live < live_max && (live < live_max / 2 || (r & 1) == 0)) {
			uint64_t size = 64 + (r >> 8) % 4033;
			if (pmemobj_alloc(pop, &slots[live], size, 1, NULL, NULL) != 0) {
				failed++;
				continue;
			}
			sizes[live] = size;
			live_bytes += size;
			live++;
			allocs++;
		} else {
			uint64_t k = (r >> 8) % live;
			pmemobj_free(&slots[k]);
			live_bytes -= sizes[k];
			live--;
			if (k != live) {
				/* The moved handle is persisted as a program would. */
				slots[k] = slots[live];
				sizes[k] = sizes[live];
				pmemobj_persist(pop, &slots[k], sizeof(PMEMoid));
			}
			frees++;
		}
	}
	double secs = clock_s(CLOCK_MONOTONIC) - t0;
	double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
	/* The largest single allocation that still succeeds. */
	uint64_t lo = 0, hi = pool_bytes;
	while (lo + 64 < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		PMEMoid probe;
		if (pmemobj_alloc(pop, &probe, mid, 2, NULL, NULL) == 0) {
			pmemobj_free(&probe);
			lo = mid;
		} else {
			hi = mid;
		}
	}
	uint64_t curr = 0;
	pmemobj_ctl_get(pop, "stats.heap.curr_allocated", &curr);
	printf("%llu %.9f %.9f %llu %llu %llu %llu %llu %llu\n", (unsigned long long)ops, secs, cpu,
	       (unsigned long long)allocs, (unsigned long long)frees, (unsigned long long)failed,
	       (unsigned long long)live_bytes, (unsigned long long)lo, (unsigned long long)curr);
	pmemobj_close(pop);
	free(sizes);
	return 0;
}
