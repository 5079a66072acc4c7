#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>
/* Two rounds: allocate and touch 2 GiB in 64 MiB chunks, 100 ms apart,
   then free it all and rest a second. Paced so that the tracefs reader
   keeps up with the page faults. */
int main(void) {
    for (int round = 0; round < 2; round++) {
        enum { CHUNKS = 32 };
        char *p[CHUNKS];
        for (int i = 0; i < CHUNKS; i++) {
            p[i] = malloc(64 << 20);
            memset(p[i], i + round, 64 << 20);
            usleep(100000);
        }
        long sum = 0;
        for (int i = 0; i < CHUNKS; i++) sum += p[i][12345];
        for (int i = 0; i < CHUNKS; i++) free(p[i]);
        printf("round %d %ld\n", round, sum);
        sleep(1);
    }
    return 0;
}
