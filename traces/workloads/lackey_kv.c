/* A small key-value store for the lackey fixture (`traces/lackey_kv.lackey.zst`):
 * a chained hash table of 256-byte records over 12 MiB, filled, then
 * queried with a skewed (hot/cold) key mix, then a quarter of the records
 * deleted and reinserted (the heap is reused), then a scan of all of it.
 * Built statically (`gcc -O2 -static`) so the trace is the program, not
 * the dynamic loader. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#define RECORDS 49152u /* 12 MiB of 256-byte records */
#define BUCKETS 16384u

struct rec { struct rec *next; uint64_t key; char val[240]; };

static struct rec *table[BUCKETS];
static uint64_t state = 88172645463325252ull;
static uint64_t rnd(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }
static uint32_t h(uint64_t k) { return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 50) % BUCKETS; }

static struct rec *get(uint64_t k) {
    for (struct rec *r = table[h(k)]; r; r = r->next) if (r->key == k) return r;
    return NULL;
}

static void put(struct rec *r, uint64_t k) {
    r->key = k; memset(r->val, (int)(k & 0x7f), 16);
    r->next = table[h(k)]; table[h(k)] = r;
}

static void del(uint64_t k) {
    for (struct rec **p = &table[h(k)]; *p; p = &(*p)->next)
        if ((*p)->key == k) { *p = (*p)->next; return; }
}

int main(void) {
    struct rec *heap = malloc(sizeof(struct rec) * RECORDS);
    if (!heap) return 1;
    for (uint32_t i = 0; i < RECORDS; i++) put(&heap[i], i);
    uint64_t sum = 0;
    /* 150k lookups: 90% to a hot tenth of the keys. */
    for (uint32_t q = 0; q < 150000; q++) {
        uint64_t k = (rnd() % 10 < 9) ? rnd() % (RECORDS / 10) : rnd() % RECORDS;
        struct rec *r = get(k);
        if (r) { sum += (uint8_t)r->val[0]; if (q % 8 == 0) r->val[1]++; }
    }
    /* Delete and reinsert a quarter (cold keys move to new slots). */
    for (uint32_t i = 0; i < RECORDS / 4; i++) {
        uint64_t k = RECORDS / 2 + i;
        del(k);
        put(&heap[k], k + RECORDS);
    }
    /* Scan everything once. */
    for (uint32_t i = 0; i < RECORDS; i++) sum += (uint8_t)heap[i].val[2];
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}
