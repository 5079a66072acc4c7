#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>
/* Two rounds: allocate and touch 2 GiB in 64 MiB chunks, 100 ms apart,
   then free it all and rest a second. Paced so that the tracefs reader
   keeps up with the page faults. `memstress MIB ROUNDS` touches MIB
   (a multiple of 64) per round instead, as the QEMU guests of
   `nvmos kernel run` do with their smaller memory. */
int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 2048;
    int rounds = argc > 2 ? atoi(argv[2]) : 2;
    if (mib < 64 || mib % 64 != 0 || mib > 64 * 1024 || rounds < 1) {
        fprintf(stderr, "usage: memstress [MIB (a multiple of 64)] [ROUNDS]\n");
        return 2;
    }
    int chunks = (int)(mib / 64);
    char **p = malloc(chunks * sizeof(*p));
    if (!p) return 1;
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < chunks; i++) {
            p[i] = malloc(64 << 20);
            if (!p[i]) { perror("malloc"); return 1; }
            memset(p[i], i + round, 64 << 20);
            usleep(100000);
        }
        long sum = 0;
        for (int i = 0; i < chunks; i++) sum += p[i][12345];
        for (int i = 0; i < chunks; i++) free(p[i]);
        printf("round %d %ld\n", round, sum);
        sleep(1);
    }
    free(p);
    return 0;
}
