/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Adaptive-Buddy (Ashish Panwar and K. Gopinath, "Towards Practical Page
 * Placement for a Green Memory Manager") as a pure data structure: one range of frames
 * cut into banks (PASR segments: contiguous, power-of-two sized, aligned),
 * a buddy system per bank (blocks never straddle a bank edge), and the
 * banks in use merged into two memory pools, one for kernel pages
 * (unmovable and reclaimable) and one for user pages (movable).
 *
 * A pool that cannot serve a request takes an offline bank: the kernel
 * pool the first of the offline list, which starts in bank order (lowest
 * numbered first), the user pool the last (highest numbered first); a
 * bank whose last frame is freed leaves its pool, its free blocks parked
 * on lists of its own, and goes offline (a kernel bank back to the front
 * of the offline list, a user bank to its back). When neither a pool nor
 * an offline bank has room, the request falls back to the other pool, as
 * Linux falls back between migratetypes.
 *
 * Migration, as the paper describes it, is split between the core and
 * its caller: ad_migration_candidates() sorts the banks in use by free
 * frames, emptiest first, and takes the ones holding only movable pages
 * for as long as what they hold fits in the free frames of the banks
 * left (the break point); ad_isolate_bank() parks a candidate so that
 * nothing is allocated from it while its pages are copied out;
 * ad_alloc_migration_target() gives the copies a home in a bank already
 * in a pool, never an offline or isolated one; ad_end_isolation() lets
 * the bank rejoin its pool, or leaves it offline when it was emptied.
 * The caller says which banks hold unmovable pages and moves the pages
 * (in the kernel, with migrate_pages()).
 *
 * This is the nvmos project's user-space BankBuddy with
 * BankPolicy::Adaptive (the reference) step for step, so a differential
 * test checks it frame by frame. Two
 * differences, for the kernel: a bank only partly inside the range (one
 * crossing a zone edge) is always in use and starts in the kernel pool
 * (the paper: "keep memory banks that cross zone boundary in-use"); and
 * frames are handed to the core free (ad_seed) rather than all being free
 * at the start: after ad_seed_done a bank with any frame not seeded is in
 * the kernel pool (at activation only the kernel has allocated memory).
 *
 * Locking is the caller's: in the kernel a core is protected by its
 * zone->lock.
 */
#ifndef _NVMOS_ADAPTIVE_CORE_H
#define _NVMOS_ADAPTIVE_CORE_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/compiler.h>
#else
#include "ibuddy_shim.h"
#endif

/* Largest order (Linux's MAX_PAGE_ORDER). A bank holds at least one such block. */
#define AD_MAX_ORDER 10
#define AD_NIL 0xffffffffu
#define AD_NONE (~(u64)0)

/* Bank roles; pools are the kernel (0) and user (1) list slots. */
enum ad_role { AD_OFFLINE, AD_KERNEL, AD_USER };
/* List slots: 0 kernel pool, 1 user pool, AD_PARKED + b bank b while offline. */
#define AD_PARKED 2

struct ad_list {
	u32 head, tail, len;
};

struct ad_bank {
	u64 frames;		/* frames of the bank inside the range */
	u64 free;
	u32 prev, next;		/* on the list of its role */
	u32 home;		/* list slot its free blocks are on */
	u8 role;
	u8 isolated;		/* a migration candidate: parked, never allocated from */
};

struct ad_stats {
	u64 alloc_kernel_frames;	/* frames handed to kernel requests */
	u64 alloc_user_frames;		/* frames handed to user requests */
	u64 fallback_frames;		/* of those, served by the other pool */
	u64 alloc_failed;		/* requests nothing could serve */
	u64 free_frames;
	u64 bank_adds;			/* offline banks taken into a pool */
	u64 bank_releases;		/* banks gone offline */
	u64 taken_frames;		/* free frames taken out by ad_take_block */
	u64 migration_target_frames;	/* frames handed out by ad_alloc_migration_target */
	u64 isolated_banks;		/* banks ad_isolate_bank parked */
	u64 emptied_banks;		/* of those, offline when their isolation ended */
};

/*
 * Frames [start, end); banks of bank_frames (a power of two, at least
 * 2^AD_MAX_ORDER) aligned on pfn 0, so bank b is
 * [base + b * bank_frames, base + (b + 1) * bank_frames) with base = start
 * rounded down.
 *
 * Invariants: a frame's state is nonzero exactly when it is the first
 * frame of a free block (state = order + 1); every free block is on
 * lists[home of its bank][order] once; bank.free counts its free frames; a
 * bank is offline exactly when it is whole (frames = bank_frames) and all
 * free, and then its blocks are parked (home = AD_PARKED + b); an
 * isolated bank's blocks are parked too, whatever its role, and no
 * allocation takes them.
 */
struct ad_core {
	u64 start, end, base, bank_frames;
	u32 nbanks;
	u32 *next, *prev;	/* free-list links by index pfn - start */
	u8 *state;
	struct ad_bank *banks;
	struct ad_list *lists;	/* (AD_PARKED + nbanks) * (AD_MAX_ORDER + 1) */
	struct ad_list roles[3];	/* banks by role */
	u64 nr_blocks[AD_MAX_ORDER + 1];	/* free blocks per order, all lists */
	struct ad_stats stats;
};

/* Bytes of the arrays a core over [start, end) needs. */
u64 ad_core_bytes(u64 start, u64 end, u64 bank_frames);
/* Lay a core out in mem (8-byte aligned), nothing free, every bank offline. */
void ad_init(struct ad_core *c, u64 start, u64 end, u64 bank_frames, void *mem);
/* Hand the core a free aligned block (inside one bank) before ad_seed_done. */
void ad_seed(struct ad_core *c, u64 pfn, unsigned int order);
/* Banks not whole or not all free join the kernel pool. */
void ad_seed_done(struct ad_core *c);
/*
 * Allocate 2^order frames for a kernel (unmovable/reclaimable) or user
 * request; AD_NONE when none.
 */
u64 ad_alloc(struct ad_core *c, unsigned int order, int kernel);
/*
 * Free a block allocated from this core (or seeded as in use): IB_FREE_OK,
 * or what was wrong with it (ibuddy_core.h's enum ib_free_result), the
 * core left unchanged.
 */
int ad_free(struct ad_core *c, u64 pfn, unsigned int order);
/*
 * The first frame of the free block that holds pfn, and its order in
 * *order; AD_NONE when pfn is not free in the core.
 */
u64 ad_free_block_of(const struct ad_core *c, u64 pfn, unsigned int *order);
/*
 * Take the free block (pfn, order) that ad_free_block_of found out of the
 * core, for a caller that hands it elsewhere; its bank counts the frames
 * as in use (an offline bank joins the kernel pool).
 */
void ad_take_block(struct ad_core *c, u64 pfn, unsigned int order);
/* Free blocks of exactly order on every list (a snapshot for lock-free readers). */
u64 ad_nr_free_blocks(const struct ad_core *c, unsigned int order);
/* Order + 1 when pfn starts a free block, else 0. */
int ad_free_block_at(const struct ad_core *c, u64 pfn);
/* Highest order with a free block, -1 when nothing is free. */
int ad_max_free_order(const struct ad_core *c);
/* Bank of pfn (pfn inside the range). */
u32 ad_bank_of(const struct ad_core *c, u64 pfn);
/*
 * Choose the banks one migration pass empties: pinned[b] is nonzero when
 * bank b holds a page that cannot be moved. The banks in use (some frame
 * allocated) are sorted by free frames, most first, ties by bank number;
 * walking them in that order, a whole, unpinned bank is a candidate while
 * the frames the candidates hold fit in the free frames of the banks in
 * use that are not candidates; the walk stops at the first that does not
 * fit. The candidates go to out (room for nbanks), in that order; returns
 * how many. Changes nothing.
 */
u32 ad_migration_candidates(const struct ad_core *c, const u8 *pinned, u32 *out);
/* Park bank b's free blocks and take it out of allocation until ad_end_isolation. */
void ad_isolate_bank(struct ad_core *c, u32 b);
/*
 * End bank b's isolation: it rejoins the pool of its role, or stays
 * offline when its last frame was freed meanwhile. Returns 1 when it is
 * offline.
 */
int ad_end_isolation(struct ad_core *c, u32 b);
/*
 * 2^order frames for a page being migrated: from the user pool, else the
 * kernel pool; never from an offline or isolated bank (migration must not
 * bring a bank up). AD_NONE when neither pool has room.
 */
u64 ad_alloc_migration_target(struct ad_core *c, unsigned int order);

#endif /* _NVMOS_ADAPTIVE_CORE_H */
