/* The file job of `nvmos kernel run`: ROUNDS rounds of writing MIB of
   files of 4 KiB to 256 KiB (sizes from a fixed seed) into DIR, reading
   every file back and checking its contents, then deleting them. Every
   file lives in the page cache (the guest's root is tmpfs), so the page
   allocator sees page-cache allocations on write and frees on unlink, as
   in the seed's file-heavy benchmarks (dbench). The QEMU guests of
   `nvmos kernel run` cycle a small set of files hundreds of times
   (`filejob /tmp/files 1 500`) so that frames are reused many times;
   with more than 10 rounds only the last is reported.
   Usage: filejob DIR [MIB] [ROUNDS] */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned long long state = 0x9e3779b97f4a7c15ull;

static unsigned long long next(void)
{
    /* xorshift64*: reproducible sizes without libc's rand state. */
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1dull;
}

static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: filejob DIR [MIB] [ROUNDS]\n");
        return 2;
    }
    const char *dir = argv[1];
    long mib = argc > 2 ? atol(argv[2]) : 256;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    if (mib < 1 || rounds < 1) {
        fprintf(stderr, "filejob: MIB and ROUNDS must be positive\n");
        return 2;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        perror(dir);
        return 1;
    }
    enum { MAX_FILE = 256 << 10 };
    char *buf = malloc(MAX_FILE), *back = malloc(MAX_FILE);
    char path[4096];
    if (!buf || !back) return 1;
    for (int round = 0; round < rounds; round++) {
        long long total = 0;
        int files = 0;
        while (total < (long long)mib << 20) {
            size_t size = 4096 * (1 + next() % (MAX_FILE / 4096));
            memset(buf, 'a' + (files + round) % 26, size);
            snprintf(path, sizeof(path), "%s/f%06d", dir, files);
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || write_all(fd, buf, size) != 0 || close(fd) != 0) {
                perror(path);
                return 1;
            }
            total += (long long)size;
            files++;
        }
        long long checked = 0;
        for (int i = 0; i < files; i++) {
            snprintf(path, sizeof(path), "%s/f%06d", dir, i);
            int fd = open(path, O_RDONLY);
            if (fd < 0) {
                perror(path);
                return 1;
            }
            ssize_t r;
            while ((r = read(fd, back, MAX_FILE)) > 0) {
                for (ssize_t j = 0; j < r; j++)
                    if (back[j] != 'a' + (i + round) % 26) {
                        fprintf(stderr, "filejob: %s corrupt at byte %zd\n", path, j);
                        return 1;
                    }
                checked += r;
            }
            close(fd);
        }
        for (int i = 0; i < files; i++) {
            snprintf(path, sizeof(path), "%s/f%06d", dir, i);
            if (unlink(path) != 0) {
                perror(path);
                return 1;
            }
        }
        if (rounds <= 10 || round + 1 == rounds)
            printf("round %d files %d bytes %lld checked %lld\n", round, files, total, checked);
    }
    free(buf);
    free(back);
    return 0;
}
