/*
 * pagetouch N K: maps N pages at a fixed virtual address, then stores one
 * byte into each page K times over (page after page, K rounds), so a
 * memory-access recorder watching that window must count exactly N x K
 * stores over N pages and N frames. The pages are populated (and zeroed
 * by the kernel through its own mapping) before the first round.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* The window nvmos's memory-trace test watches. */
#define WINDOW 0x7e0000000000UL
#define PAGE 4096UL

int main(int argc, char **argv)
{
	unsigned long n, k, p, r;
	volatile unsigned char *buf;

	if (argc != 3 || (n = strtoul(argv[1], NULL, 0)) == 0 || (k = strtoul(argv[2], NULL, 0)) == 0) {
		fprintf(stderr, "usage: pagetouch PAGES ROUNDS\n");
		return 2;
	}
	buf = mmap((void *)WINDOW, n * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_POPULATE, -1, 0);
	if (buf == MAP_FAILED || buf != (volatile unsigned char *)WINDOW) {
		perror("pagetouch: mmap");
		return 1;
	}
	for (r = 0; r < k; r++)
		for (p = 0; p < n; p++)
			buf[p * PAGE + (r * 64) % PAGE] = (unsigned char)r;
	printf("pagetouch %lu pages %lu rounds\n", n, k);
	return 0;
}
