/*
 * phashmap: a persistent hash map in an encrypted nvmos PMO, from C.
 *
 *   phashmap POOL KEY_FILE put KEY VALUE
 *   phashmap POOL KEY_FILE get KEY
 *   phashmap POOL KEY_FILE del KEY
 *   phashmap POOL KEY_FILE list
 *
 * The first run creates the pool and an object "map" sealed under the
 * passphrase in KEY_FILE (one trailing newline dropped, as every nvmos
 * entry point does). Each run is a separate process: it attaches the
 * object at its fixed address, works on the table in place through the
 * mapping, and makes a change durable with one psync (all or nothing: a
 * crash leaves the map as before the command or after it).
 *
 * The environment variable PHASHMAP_KDF="M_KIB,PASSES,LANES" sets the
 * Argon2id cost of the new object's key (default: the library's, 19 MiB,
 * 2 passes, 1 lane); every later attach pays the cost chosen here. Tests
 * use a cheap one.
 *
 * Exit status: 0 done; 1 key not in the map (get, del) or map full (put);
 * 64 usage; 100 + the nvmos status code when the library refuses (for
 * example 112 for a wrong passphrase), with the library's message on
 * stderr.
 *
 * Build (see crates/pmo-c/tests/c_example.rs, which does this):
 *   cc -std=c11 -Wall -Wextra -I crates/pmo-c/include phashmap.c \
 *      -L target/debug -lnvmos_pmo_c -Wl,-rpath,target/debug -o phashmap
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nvmos_pmo.h"

#define MAGIC UINT64_C(0x6e766d6f7370686d) /* "nvmosphm" */
#define BUCKETS 1024u
#define KEY_MAX 47u
#define VALUE_MAX 183u
#define POOL_SIZE (UINT64_C(8) << 20)

enum { EMPTY = 0, FULL = 1, DELETED = 2 };

/* Open addressing with linear probing; DELETED slots (tombstones) keep
 * probe chains intact. 256 bytes per bucket. */
struct bucket {
    uint32_t state;
    uint32_t key_len;
    uint32_t value_len;
    uint32_t reserved;
    uint64_t hash;
    char key[KEY_MAX + 1];
    char value[VALUE_MAX + 1];
};

struct map {
    uint64_t magic;
    uint64_t count;
    uint64_t tombstones;
    uint64_t buckets;
    struct bucket table[BUCKETS];
};

_Static_assert(sizeof(struct bucket) == 256, "bucket layout");

static int fail(const char *what, NvmosPmoStatus st) {
    fprintf(stderr, "phashmap: %s: %s (code %d): %s\n", what, nvmos_pmo_strerror(st), (int)st,
            nvmos_pmo_last_error());
    return 100 + (int)st;
}

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* The bucket holding `key`, or NULL. */
static struct bucket *find(struct map *m, const char *key, size_t n, uint64_t h) {
    for (uint64_t i = 0; i < m->buckets; i++) {
        struct bucket *b = &m->table[(h + i) % m->buckets];
        if (b->state == EMPTY)
            return NULL;
        if (b->state == FULL && b->hash == h && b->key_len == n && memcmp(b->key, key, n) == 0)
            return b;
    }
    return NULL;
}

/* Read the passphrase: the whole file, one trailing newline dropped. */
static int read_key(const char *path, char *buf, size_t cap, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t n = fread(buf, 1, cap, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "phashmap: %s: unreadable or longer than %zu bytes\n", path, cap - 1);
        return -1;
    }
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    *len = n;
    return 0;
}

int main(int argc, char **argv) {
    const char *usage = "usage: phashmap POOL KEY_FILE (put KEY VALUE | get KEY | del KEY | list)\n";
    if (argc < 4) {
        fputs(usage, stderr);
        return 64;
    }
    const char *pool_path = argv[1], *cmd = argv[3];
    int is_put = !strcmp(cmd, "put"), is_get = !strcmp(cmd, "get"), is_del = !strcmp(cmd, "del"),
        is_list = !strcmp(cmd, "list");
    if (!((is_put && argc == 6) || ((is_get || is_del) && argc == 5) || (is_list && argc == 4))) {
        fputs(usage, stderr);
        return 64;
    }
    const char *key = argc > 4 ? argv[4] : "";
    size_t key_len = strlen(key);
    const char *value = is_put ? argv[5] : "";
    size_t value_len = strlen(value);
    if (key_len == 0 || key_len > KEY_MAX) {
        if (!is_list) {
            fprintf(stderr, "phashmap: key must be 1 to %u bytes, %zu given\n", KEY_MAX, key_len);
            return 64;
        }
    }
    if (value_len > VALUE_MAX) {
        fprintf(stderr, "phashmap: value must be at most %u bytes, %zu given\n", VALUE_MAX,
                value_len);
        return 64;
    }
    char pass[1024];
    size_t pass_len;
    if (read_key(argv[2], pass, sizeof pass, &pass_len))
        return 64;

    NvmosPmoPool *pool = NULL;
    NvmosPmoStatus st;
    struct stat sb;
    if (stat(pool_path, &sb) == 0) {
        st = nvmos_pmo_pool_open(pool_path,
                                 is_get || is_list ? NVMOS_PMO_ACCESS_READ_ONLY
                                                   : NVMOS_PMO_ACCESS_READ_WRITE,
                                 NULL, &pool);
        if (st)
            return fail("opening the pool", st);
    } else {
        st = nvmos_pmo_pool_create(pool_path, POOL_SIZE, NULL, &pool);
        if (st)
            return fail("creating the pool", st);
        NvmosPmoKdf kdf;
        const NvmosPmoKdf *cost = NULL;
        const char *env = getenv("PHASHMAP_KDF");
        if (env) {
            char end;
            if (sscanf(env, "%u,%u,%u%c", &kdf.m_cost_kib, &kdf.t_cost, &kdf.p_cost, &end) != 3) {
                fprintf(stderr, "phashmap: PHASHMAP_KDF=%s: expected M_KIB,PASSES,LANES\n", env);
                nvmos_pmo_pool_close(pool);
                remove(pool_path);
                return 64;
            }
            cost = &kdf;
        }
        st = nvmos_pmo_pcreate(pool, "map", sizeof(struct map), (const uint8_t *)pass, pass_len,
                               cost);
        if (st) {
            /* The pool is this run's own: leave no pool without its map. */
            nvmos_pmo_pool_close(pool);
            remove(pool_path);
            return fail("creating object map", st);
        }
    }
    uint32_t perm = is_get || is_list ? NVMOS_PMO_PERM_READ : NVMOS_PMO_PERM_WRITE;
    NvmosPmoAttachment *a = NULL;
    st = nvmos_pmo_attach(pool, "map", perm, (const uint8_t *)pass, pass_len,
                          NVMOS_PMO_MODE_DRAM_CACHE, 0, &a);
    memset(pass, 0, sizeof pass);
    if (st) {
        nvmos_pmo_pool_close(pool);
        return fail("attaching object map", st);
    }
    void *base;
    size_t len;
    st = nvmos_pmo_base(a, &base, &len);
    if (st || len < sizeof(struct map)) {
        nvmos_pmo_detach(a);
        nvmos_pmo_pool_close(pool);
        if (st)
            return fail("mapping", st);
        fprintf(stderr, "phashmap: object map is %zu bytes, the table needs %zu\n", len,
                sizeof(struct map));
        return 2;
    }
    /* The table lives in the object at its fixed address. */
    struct map *m = base;
    int rc = 0;
    int changed = 0;
    if (m->magic != MAGIC) {
        if (m->magic != 0) {
            fprintf(stderr, "phashmap: object map holds something else (magic %#llx)\n",
                    (unsigned long long)m->magic);
            rc = 2;
            goto out;
        }
        if (!is_put) { /* a new, empty map: nothing to find */
            if (!is_list) {
                fprintf(stderr, "phashmap: %s: not found\n", key);
                rc = 1;
            }
            goto out;
        }
        m->magic = MAGIC;
        m->count = 0;
        m->tombstones = 0;
        m->buckets = BUCKETS;
    } else if (m->buckets != BUCKETS || m->count + m->tombstones > BUCKETS) {
        fprintf(stderr, "phashmap: corrupt header (%llu buckets, %llu entries, %llu tombstones)\n",
                (unsigned long long)m->buckets, (unsigned long long)m->count,
                (unsigned long long)m->tombstones);
        rc = 2;
        goto out;
    }
    uint64_t h = fnv1a(key, key_len);
    if (is_get) {
        struct bucket *b = find(m, key, key_len, h);
        if (!b) {
            fprintf(stderr, "phashmap: %s: not found\n", key);
            rc = 1;
        } else {
            printf("%.*s\n", (int)b->value_len, b->value);
        }
    } else if (is_list) {
        for (uint64_t i = 0; i < m->buckets; i++) {
            struct bucket *b = &m->table[i];
            if (b->state == FULL)
                printf("%.*s=%.*s\n", (int)b->key_len, b->key, (int)b->value_len, b->value);
        }
    } else if (is_del) {
        struct bucket *b = find(m, key, key_len, h);
        if (!b) {
            fprintf(stderr, "phashmap: %s: not found\n", key);
            rc = 1;
        } else {
            b->state = DELETED;
            m->count--;
            m->tombstones++;
            changed = 1;
            printf("deleted %s; %llu entries\n", key, (unsigned long long)m->count);
        }
    } else { /* put */
        struct bucket *b = find(m, key, key_len, h);
        if (!b) {
            /* The first free slot on the probe path (a tombstone or an
             * empty bucket). */
            for (uint64_t i = 0; i < m->buckets; i++) {
                struct bucket *c = &m->table[(h + i) % m->buckets];
                if (c->state != FULL) {
                    b = c;
                    break;
                }
            }
            if (!b) {
                fprintf(stderr, "phashmap: the map is full (%u entries)\n", BUCKETS);
                rc = 1;
                goto out;
            }
            if (b->state == DELETED)
                m->tombstones--;
            m->count++;
            b->hash = h;
            b->key_len = (uint32_t)key_len;
            memset(b->key, 0, sizeof b->key);
            memcpy(b->key, key, key_len);
            b->state = FULL;
        }
        b->value_len = (uint32_t)value_len;
        memset(b->value, 0, sizeof b->value);
        memcpy(b->value, value, value_len);
        changed = 1;
        printf("put %s; %llu entries\n", key, (unsigned long long)m->count);
    }
out:
    if (changed) {
        uint64_t pages = 0;
        st = nvmos_pmo_psync(a, &pages);
        if (st) {
            nvmos_pmo_detach(a);
            nvmos_pmo_pool_close(pool);
            return fail("psync", st);
        }
    }
    st = nvmos_pmo_detach(a);
    NvmosPmoStatus closed = nvmos_pmo_pool_close(pool);
    if (st)
        return fail("detach", st);
    if (closed)
        return fail("closing the pool", closed);
    return rc;
}
