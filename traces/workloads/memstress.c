/* The memory-stress job.
 *
 * `memstress [MIB] [ROUNDS]`: ROUNDS rounds of mapping MIB of anonymous
 * memory, touching every page, reading it back and unmapping it, so every
 * round allocates and frees MIB of page frames (and the page tables that
 * map them) through the page allocator.
 *
 * Defaults (`memstress` alone): two rounds of 2 GiB in 64 MiB chunks,
 * 100 ms apart, a second's rest after each round; paced so that a host
 * tracefs reader keeps up with the page faults (traces/memstress.nvt).
 * With MIB below 64, one chunk per round and no pacing: the QEMU guests of
 * `nvmos kernel run` cycle a small working set hundreds of times
 * (`memstress 1 500`), so each frame can be reused many times, the case
 * where allocation policies differ in wear.
 *
 * mmap/munmap, not malloc/free: glibc's malloc raises its mmap threshold
 * after the first free of a large block and would then keep the memory
 * mapped between rounds, so the kernel would never see it freed. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 2048;
	long rounds = argc > 2 ? atol(argv[2]) : 2;
	if (mib < 1 || (mib > 64 && mib % 64 != 0) || mib > 64 * 1024 || rounds < 1) {
		fprintf(stderr, "usage: memstress [MIB (1..64, or a multiple of 64)] [ROUNDS]\n");
		return 2;
	}
	int paced = mib >= 64;
	long chunk_mib = paced ? 64 : mib;
	long chunks = mib / chunk_mib;
	size_t chunk = (size_t)chunk_mib << 20;
	char **p = malloc(chunks * sizeof(*p));
	if (!p)
		return 1;
	long page = sysconf(_SC_PAGESIZE);
	for (long round = 0; round < rounds; round++) {
		for (long i = 0; i < chunks; i++) {
			p[i] = mmap(NULL, chunk, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p[i] == MAP_FAILED) {
				perror("mmap");
				return 1;
			}
			for (size_t off = 0; off < chunk; off += page)
				p[i][off] = (char)(i + round + off / page);
			if (paced)
				usleep(100000);
		}
		long sum = 0;
		for (long i = 0; i < chunks; i++)
			for (size_t off = 0; off < chunk; off += page)
				sum += p[i][off];
		for (long i = 0; i < chunks; i++)
			if (munmap(p[i], chunk) != 0) {
				perror("munmap");
				return 1;
			}
		if (paced) {
			printf("round %ld %ld\n", round, sum);
			sleep(1);
		} else if (round + 1 == rounds) {
			printf("rounds %ld of %ld MiB, last sum %ld\n", rounds, mib, sum);
		}
	}
	free(p);
	return 0;
}
