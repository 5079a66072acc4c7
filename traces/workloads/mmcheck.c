/*
 * mmcheck: the guest-side half of `nvmos kernel check`'s tests of the rest
 * of mm under a page-frame policy. Each subcommand prints what it found as
 * "name value" lines and exits 0 when the check holds.
 *
 *   mmcheck thp MIB          fault MIB of anonymous memory madvised for
 *                            transparent huge pages; holds when some of it
 *                            is backed by huge pages (AnonHugePages > 0)
 *   mmcheck hold MIB SECONDS touch MIB of anonymous memory and keep it for
 *                            SECONDS (movable pages for CMA and offlining
 *                            to migrate)
 *   mmcheck softoffline      soft-offline a free frame from the middle of
 *                            memory through sysfs; holds when the frame is
 *                            then marked HWPOISON. A free frame is one
 *                            /proc/kpageflags marks KPF_BUDDY: the kernel
 *                            sets it for a frame on a buddy free list and,
 *                            through is_free_buddy_page(), for a frame an
 *                            nvmos space holds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define KPF_SLAB 7
#define KPF_BUDDY 10
#define KPF_HWPOISON 19
#define KPF_NOPAGE 20
#define KPF_OFFLINE 23
#define KPF_PGTABLE 26
#define KPF_RESERVED 32

static int read_u64_at(const char *path, uint64_t index, uint64_t *out)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = pread(fd, out, 8, (off_t)(index * 8));
	close(fd);
	return n == 8 ? 0 : -1;
}

static long anon_huge_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static char *map_touched(size_t bytes, int huge)
{
	size_t align = 2UL << 20;
	char *raw = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p;

	if (raw == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
	if (huge && madvise(p, bytes, MADV_HUGEPAGE)) {
		perror("madvise(MADV_HUGEPAGE)");
		exit(2);
	}
	for (size_t i = 0; i < bytes; i += 4096)
		p[i] = (char)i;
	return p;
}

static int thp(long mib)
{
	long kib;

	map_touched((size_t)mib << 20, 1);
	kib = anon_huge_kib();
	printf("thp_anon_huge_kib %ld\n", kib);
	return kib > 0 ? 0 : 1;
}

static int hold(long mib, long seconds)
{
	map_touched((size_t)mib << 20, 0);
	printf("held_mib %ld\n", mib);
	fflush(stdout);
	sleep((unsigned int)seconds);
	return 0;
}

static int softoffline(void)
{
	uint64_t total, pfn, flags, count;
	struct stat st;
	const uint64_t bad = (1ULL << KPF_SLAB) | (1ULL << KPF_HWPOISON) |
			     (1ULL << KPF_NOPAGE) | (1ULL << KPF_OFFLINE) |
			     (1ULL << KPF_PGTABLE) | (1ULL << KPF_RESERVED);
	int tries = 0, refused = 0;

	/* Every frame up to the highest pfn (holes included), 8 bytes each. */
	if (stat("/proc/kpageflags", &st) || st.st_size == 0) {
		/* procfs reports size 0: count by reading to the end. */
		int fd = open("/proc/kpageflags", O_RDONLY);
		uint64_t buf[4096];
		ssize_t n;

		total = 0;
		if (fd < 0) {
			perror("mmcheck: /proc/kpageflags");
			return 2;
		}
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			total += (uint64_t)n / 8;
		close(fd);
	} else {
		total = (uint64_t)st.st_size / 8;
	}
	for (pfn = total / 4; pfn < total && tries < 1024; pfn += 97) {
		char buf[64];
		int fd;
		ssize_t n;

		if (read_u64_at("/proc/kpageflags", pfn, &flags) ||
		    read_u64_at("/proc/kpagecount", pfn, &count)) {
			fprintf(stderr, "mmcheck: reading /proc/kpageflags or kpagecount at pfn %#llx: %s\n",
				(unsigned long long)pfn, strerror(errno));
			return 2;
		}
		if (count != 0 || (flags & bad) || !(flags & (1ULL << KPF_BUDDY)))
			continue;
		tries++;
		fd = open("/sys/devices/system/memory/soft_offline_page", O_WRONLY);
		if (fd < 0) {
			perror("mmcheck: /sys/devices/system/memory/soft_offline_page");
			return 2;
		}
		snprintf(buf, sizeof(buf), "%#llx", (unsigned long long)(pfn * 4096));
		n = write(fd, buf, strlen(buf));
		close(fd);
		if (n < 0) {
			/*
			 * Not free after all (a tail frame of a block allocated
			 * without __GFP_COMP has no count either): try the next.
			 */
			refused++;
			continue;
		}
		if (read_u64_at("/proc/kpageflags", pfn, &flags))
			return 2;
		printf("soft_offline_pfn %#llx\nhwpoison %d\nrefused_before %d\n",
		       (unsigned long long)pfn, !!(flags & (1ULL << KPF_HWPOISON)), refused);
		return flags & (1ULL << KPF_HWPOISON) ? 0 : 1;
	}
	fprintf(stderr, "mmcheck: no free frame soft-offlined after %d tries\n", tries);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "thp"))
		return thp(atol(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold(atol(argv[2]), atol(argv[3]));
	if (argc == 2 && !strcmp(argv[1], "softoffline"))
		return softoffline();
	fprintf(stderr, "usage: mmcheck thp MIB | hold MIB SECONDS | softoffline\n");
	return 2;
}
