/* The sparse-memory job: memory used, then mostly freed, leaving a few
 * pages in every bank it touched.
 *
 * `sparsejob MIB KEEP HOLD_S`: map MIB of anonymous memory in 1 MiB
 * chunks and touch every page; unmap every chunk but one in KEEP; hold
 * the kept chunks for HOLD_S seconds, touching them once a second; then
 * unmap them too. The phase lines it prints ("grown", "sparse", "held",
 * "freed") come with the guest's CLOCK_MONOTONIC, so a timeline of the
 * run can be cut into its phases.
 *
 * Under a policy that fills banks one after the other (Adaptive-Buddy),
 * the kept chunks leave each bank the job used a KEEPth full: nothing
 * can go offline until the pages move (seed 004's migration), which is
 * what the hold gives a periodic migration pass time to do. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void phase(const char *name, long value)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	printf("sparsejob %s %ld at %lld ns\n", name, value,
	       (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 0;
	long keep = argc > 2 ? atol(argv[2]) : 0;
	long hold = argc > 3 ? atol(argv[3]) : -1;
	const size_t chunk = 1 << 20;

	if (argc != 4 || mib < 1 || mib > 64 * 1024 || keep < 2 || keep > mib || hold < 0) {
		fprintf(stderr, "usage: sparsejob MIB (1..65536) KEEP (2..MIB) HOLD_S (0..)\n");
		return 2;
	}
	char **p = calloc(mib, sizeof(*p));
	long page = sysconf(_SC_PAGESIZE);

	if (!p)
		return 1;
	for (long i = 0; i < mib; i++) {
		p[i] = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
		if (p[i] == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		for (size_t off = 0; off < chunk; off += page)
			p[i][off] = (char)(i + off / page);
	}
	phase("grown", mib);
	long kept = 0;

	for (long i = 0; i < mib; i++) {
		if (i % keep == 0) {
			kept++;
			continue;
		}
		if (munmap(p[i], chunk) != 0) {
			perror("munmap");
			return 1;
		}
		p[i] = NULL;
	}
	phase("sparse", kept);
	long sum = 0;

	for (long s = 0; s < hold; s++) {
		sleep(1);
		for (long i = 0; i < mib; i += keep)
			for (size_t off = 0; off < chunk; off += page)
				sum += p[i][off]++;
	}
	phase("held", hold);
	for (long i = 0; i < mib; i += keep)
		if (munmap(p[i], chunk) != 0) {
			perror("munmap");
			return 1;
		}
	phase("freed", sum & 0xff);
	free(p);
	return 0;
}
