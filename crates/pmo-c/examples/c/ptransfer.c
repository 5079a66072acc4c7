/*
 * ptransfer: two accounts in two encrypted nvmos PMOs, moved together with
 * nvmos_pmo_psync_many (all or nothing), from C.
 *
 *   ptransfer POOL KEY_FILE init AMOUNT      create both, AMOUNT in "from"
 *   ptransfer POOL KEY_FILE move AMOUNT      "from" -= AMOUNT, "to" += AMOUNT
 *   ptransfer POOL KEY_FILE show             print both balances and the sum
 *
 * Each account is its own object. A move changes both through their
 * mappings and commits them with one psync_many: a crash leaves both
 * balances as before the move or both as after it, so the sum never
 * changes. (Two plain psyncs could leave one object moved and the other
 * not.)
 *
 * The passphrase is KEY_FILE's bytes, one trailing newline dropped. The
 * objects' Argon2id cost is the library's lowest accepted (8 KiB, 1 pass):
 * this is an example run by tests, not a key to copy.
 *
 * Exit status: 0 done; 1 not enough in "from"; 64 usage; 100 + the nvmos
 * status code when the library refuses, with its message on stderr.
 *
 * Build (crates/pmo-c/tests/c_example.rs does this):
 *   cc -std=c11 -Wall -Wextra -I crates/pmo-c/include ptransfer.c \
 *      -L target/debug -lnvmos_pmo_c -Wl,-rpath,target/debug -o ptransfer
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvmos_pmo.h"

static int fail(const char *what, NvmosPmoStatus st) {
    fprintf(stderr, "ptransfer: %s: %s (code %d): %s\n", what, nvmos_pmo_strerror(st), (int)st,
            nvmos_pmo_last_error());
    return 100 + (int)st;
}

static int read_key(const char *path, char *buf, size_t cap, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t n = fread(buf, 1, cap, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad)
        return -1;
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    *len = n;
    return 0;
}

static const char *const NAMES[2] = {"from", "to"};

int main(int argc, char **argv) {
    const char *usage = "usage: ptransfer POOL KEY_FILE (init AMOUNT | move AMOUNT | show)\n";
    if (argc < 4) {
        fputs(usage, stderr);
        return 64;
    }
    const char *cmd = argv[3];
    int is_init = !strcmp(cmd, "init"), is_move = !strcmp(cmd, "move"),
        is_show = !strcmp(cmd, "show");
    if (!(((is_init || is_move) && argc == 5) || (is_show && argc == 4))) {
        fputs(usage, stderr);
        return 64;
    }
    uint64_t amount = argc == 5 ? strtoull(argv[4], NULL, 10) : 0;
    char pass[1024];
    size_t pass_len;
    if (read_key(argv[2], pass, sizeof pass, &pass_len))
        return 64;
    const uint8_t *key = (const uint8_t *)pass;

    NvmosPmoPool *pool = NULL;
    NvmosPmoStatus st;
    if (is_init) {
        st = nvmos_pmo_pool_create(argv[1], UINT64_C(4) << 20, NULL, &pool);
        if (st)
            return fail("creating the pool", st);
        NvmosPmoKdf cheap = {8, 1, 1};
        for (int i = 0; i < 2; i++) {
            st = nvmos_pmo_pcreate(pool, NAMES[i], 4096, key, pass_len, &cheap);
            if (st)
                return fail("creating an account", st);
        }
    } else {
        st = nvmos_pmo_pool_open(argv[1],
                                 is_show ? NVMOS_PMO_ACCESS_READ_ONLY : NVMOS_PMO_ACCESS_READ_WRITE,
                                 NULL, &pool);
        if (st)
            return fail("opening the pool", st);
    }
    uint32_t perm = is_show ? NVMOS_PMO_PERM_READ : NVMOS_PMO_PERM_WRITE;
    NvmosPmoAttachment *a[2] = {NULL, NULL};
    uint64_t *balance[2];
    for (int i = 0; i < 2; i++) {
        st = nvmos_pmo_attach(pool, NAMES[i], perm, key, pass_len,
                              NVMOS_PMO_MODE_DECRYPT_AT_FAULT, 0, &a[i]);
        if (st)
            return fail(NAMES[i], st);
        void *base;
        size_t len;
        st = nvmos_pmo_base(a[i], &base, &len);
        if (st)
            return fail("mapping", st);
        balance[i] = (uint64_t *)base;
    }
    memset(pass, 0, sizeof pass);
    int code = 0;
    if (is_init || is_move) {
        if (is_init) {
            *balance[0] = amount;
            *balance[1] = 0;
        } else if (*balance[0] < amount) {
            fprintf(stderr, "ptransfer: only %" PRIu64 " in from\n", *balance[0]);
            code = 1;
        } else {
            *balance[0] -= amount;
            *balance[1] += amount;
        }
        if (code == 0) {
            const NvmosPmoAttachment *both[2] = {a[0], a[1]};
            uint64_t pages[2];
            st = nvmos_pmo_psync_many(pool, both, 2, pages);
            if (st)
                return fail("psync_many", st);
            /* A group of one attachment twice is refused, naming it. */
            const NvmosPmoAttachment *twice[2] = {a[0], a[0]};
            if (nvmos_pmo_psync_many(pool, twice, 2, NULL) != NVMOS_PMO_STATUS_INVALID_ARGUMENT) {
                fputs("ptransfer: a duplicate in psync_many was not refused\n", stderr);
                code = 2;
            }
        }
    }
    printf("from %" PRIu64 " to %" PRIu64 " sum %" PRIu64 "\n", *balance[0], *balance[1],
           *balance[0] + *balance[1]);
    for (int i = 0; i < 2; i++) {
        /* Everything was committed by psync_many: detach's psync has nothing to do. */
        st = nvmos_pmo_detach(a[i]);
        if (st)
            return fail("detaching", st);
    }
    /* A handle ends with its detach: using it again is refused by code,
     * never undefined behaviour. */
    if (nvmos_pmo_psync(a[0], NULL) != NVMOS_PMO_STATUS_STALE_HANDLE) {
        fputs("ptransfer: a detached handle was not refused\n", stderr);
        code = 2;
    }
    st = nvmos_pmo_pool_close(pool);
    if (st)
        return fail("closing the pool", st);
    return code;
}
