/*
 * The PMDK baseline of `nvmos bench psync`: libpmemobj committing 4 KiB
 * pages in transactions of N pages, sweeping an object sequentially, one
 * thread. Each page is snapshotted into the undo log (pmemobj_tx_add_range)
 * and overwritten; TX_END flushes and commits, as a libpmemobj program
 * makes a page update durable. Built with -DNO_SNAPSHOT, the ranges are
 * only flushed at commit, not logged (POBJ_XADD_NO_SNAPSHOT).
 *
 * usage: pmdk_psync POOL OBJECT_BYTES TOTAL_BYTES PAGES_PER_TX
 * prints: "<bytes committed> <seconds> <CPU seconds of the process>"
 *
 * On tmpfs, PMEM_IS_PMEM_FORCE=1 in the environment makes libpmem treat
 * the mapping as persistent memory (cache-line flushes and a fence); on a
 * disk file libpmemobj uses msync.
 *
 * Built by `nvmos bench psync` with `cc -O2 ... -lpmemobj` when
 * libpmemobj is installed (Debian: libpmemobj-dev); not part of any test.
 */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 4096

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s POOL OBJECT_BYTES TOTAL_BYTES PAGES_PER_TX\n", argv[0]);
		return 2;
	}
	const char *path = argv[1];
	size_t obj = strtoull(argv[2], NULL, 10);
	size_t total = strtoull(argv[3], NULL, 10);
	size_t per_tx = strtoull(argv[4], NULL, 10);
	size_t pages = obj / PAGE;
	if (pages < per_tx || per_tx == 0) {
		fprintf(stderr, "object of %zu pages, transactions of %zu\n", pages, per_tx);
		return 2;
	}
	/* The object, its undo logs, and room to spare. */
	size_t pool_size = obj + obj / 2 + (64u << 20);
	PMEMobjpool *pop = pmemobj_create(path, "nvmos-psync", pool_size, 0600);
	if (pop == NULL) {
		fprintf(stderr, "pmemobj_create %s: %s\n", path, pmemobj_errormsg());
		return 1;
	}
	PMEMoid root = pmemobj_root(pop, obj);
	if (OID_IS_NULL(root)) {
		fprintf(stderr, "pmemobj_root: %s\n", pmemobj_errormsg());
		return 1;
	}
	char *base = pmemobj_direct(root);
	char *buf = malloc(per_tx * PAGE);
	for (size_t i = 0; i < per_tx * PAGE; i++)
		buf[i] = (char)(i * 131 + (i >> 12));

	size_t txs = total / (per_tx * PAGE);
	/* One untimed pass over the object: first-touch faults out of the way. */
	for (size_t k = 0; k < pages / per_tx; k++)
		pmemobj_memset_persist(pop, base + k * per_tx * PAGE, 0, per_tx * PAGE);

	int failed = 0;
	double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	for (size_t k = 0; k < txs; k++) {
		TX_BEGIN(pop) {
			for (size_t j = 0; j < per_tx; j++) {
				size_t page = (k * per_tx + j) % pages;
#ifdef NO_SNAPSHOT
				/* Flushed at commit, not logged: not atomic for the
				 * overwritten bytes; an upper bound on libpmemobj. */
				pmemobj_tx_xadd_range(root, page * PAGE, PAGE, POBJ_XADD_NO_SNAPSHOT);
#else
				pmemobj_tx_add_range(root, page * PAGE, PAGE);
#endif
				memcpy(base + page * PAGE, buf + j * PAGE, PAGE);
				buf[j * PAGE] ^= (char)k;
			}
		} TX_ONABORT {
			failed = 1;
		} TX_END
		if (failed) {
			fprintf(stderr, "transaction %zu aborted: %s\n", k, pmemobj_errormsg());
			return 1;
		}
	}
	double t1 = clock_s(CLOCK_MONOTONIC), c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	printf("%zu %.9f %.9f\n", txs * per_tx * PAGE, t1 - t0, c1 - c0);
	pmemobj_close(pop);
	free(buf);
	return 0;
}
