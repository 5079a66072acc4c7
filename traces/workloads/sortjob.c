/* The sort/compress job of `nvmos kernel run`: ROUNDS rounds of filling
   MIB of 64-bit keys from a fixed seed, sorting them with qsort, checking
   the order, and delta + variable-length compressing the sorted keys into
   a second buffer that is then decompressed and compared. Anonymous
   memory of a few sizes, allocated and freed each round.
   Usage: sortjob [MIB] [ROUNDS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x9e3779b97f4a7c15ull;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 64;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    if (mib < 1 || rounds < 1) {
        fprintf(stderr, "usage: sortjob [MIB] [ROUNDS]\n");
        return 2;
    }
    size_t n = (size_t)mib << 17; /* keys of 8 bytes */
    for (int round = 0; round < rounds; round++) {
        uint64_t *keys = malloc(n * sizeof(*keys));
        /* Worst case of the varint code: 10 bytes per key. */
        unsigned char *packed = malloc(n * 10);
        if (!keys || !packed) {
            perror("malloc");
            return 1;
        }
        for (size_t i = 0; i < n; i++)
            keys[i] = next() >> (round * 8);
        qsort(keys, n, sizeof(*keys), cmp);
        for (size_t i = 1; i < n; i++)
            if (keys[i - 1] > keys[i]) {
                fprintf(stderr, "sortjob: not sorted at %zu\n", i);
                return 1;
            }
        size_t out = 0;
        uint64_t prev = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t d = keys[i] - prev;
            prev = keys[i];
            do {
                packed[out++] = (unsigned char)((d & 0x7f) | (d > 0x7f ? 0x80 : 0));
                d >>= 7;
            } while (d);
        }
        size_t in = 0;
        prev = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t d = 0;
            int shift = 0;
            unsigned char c;
            do {
                c = packed[in++];
                d |= (uint64_t)(c & 0x7f) << shift;
                shift += 7;
            } while (c & 0x80);
            prev += d;
            if (prev != keys[i]) {
                fprintf(stderr, "sortjob: key %zu does not round-trip\n", i);
                return 1;
            }
        }
        printf("round %d keys %zu packed %zu bytes (%.2f bytes/key)\n", round, n, out,
               (double)out / (double)n);
        free(packed);
        free(keys);
    }
    return 0;
}
