/* SPDX-License-Identifier: GPL-2.0 */
/*
 * iBuddy (Jongmoo Choi, "Operating System Supports for SCM as Main Memory
 * Systems (Focusing on iBuddy)", NVRAMOS 2011) as a pure data structure: one buddy space of
 * individually managed frames, a free list in the order frames were freed
 * (least recently freed first), a dual-meaning bitmap per order, and the
 * bypass lazy list of lazy iBuddy (LiS-1, LiS-31).
 *
 * The file knows nothing of struct page, zones or locks: it works on pfns
 * and on memory its caller hands it, so the same ibuddy_core.c is built
 * into mm/ of the kernel and, against a small shim, into a user-space
 * differential test that checks it frame by frame against the nvmos
 * project's reference allocators (its IBuddy and PerCpu).
 *
 * Locking is the caller's: in the kernel a space is protected by its
 * zone->lock and a lazy list by disabled interrupts on its CPU.
 */
#ifndef _NVMOS_IBUDDY_CORE_H
#define _NVMOS_IBUDDY_CORE_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/compiler.h>
#else
#include "ibuddy_shim.h"
#endif

/* Largest order a space coalesces: Linux's MAX_PAGE_ORDER, nvmos' MAX_ORDER. */
#define IB_MAX_ORDER 10
/* Non-empty bitmap words a block search looks at for an exact fit. */
#define IB_FIT_PATIENCE 16
/* End of a free list; also "no frame". */
#define IB_NIL 0xffffffffu
/* Longest bypass list (LiS-31's cap). */
#define IB_LAZY_MAX 31

/* One level of the dual-meaning bitmap: bit b of word w is block origin + 64 w + b. */
struct ib_level {
	u64 origin;		/* block index of bit 0 of word 0; a multiple of 64 */
	u64 nwords;
	u64 *words;
	u64 count;		/* set bits */
};

struct ib_stats {
	u64 alloc_single;	/* order-0 allocations off the free list */
	u64 alloc_blocks;	/* multi-frame allocations (coalesced from the bitmap) */
	u64 alloc_block_frames;
	u64 free_single;	/* order-0 frees appended to the free list */
	u64 free_blocks;	/* multi-frame frees split onto the free list */
	u64 free_block_frames;
	u64 coalesces;		/* bits set at orders >= 1 by frees climbing the bitmap */
	u64 alloc_failed;	/* requests this space could not serve */
	u64 taken_frames;	/* free frames taken out by ib_take_frame */
};

/*
 * One buddy space: frames [start, end).
 *
 * Invariants: the free list holds exactly the frames whose order-0 bit is
 * set, each once; a bit at order k > 0 is set exactly when both halves are
 * set at order k - 1 and the block lies inside the space; next_level is
 * the highest order with a set bit (-1 when nothing is free).
 */
struct ib_space {
	u64 start, end;
	u32 *next, *prev;	/* free-list links by index pfn - start */
	u32 head, tail;
	struct ib_level level[IB_MAX_ORDER + 1];
	int next_level;
	u64 cursor[IB_MAX_ORDER + 1];	/* next-fit start per order (k >= 1) */
	struct ib_stats stats;
};

/* The bypass lazy list of one CPU: a ring of at most cap frames, oldest first. */
struct ib_lazy {
	u32 cap;
	u32 head;
	u32 len;
	u64 pfn[IB_LAZY_MAX];
};

/* Bytes of the arrays a space over [start, end) needs (see ib_space_init). */
u64 ib_space_bytes(u64 start, u64 end);
/*
 * Lay a space over [start, end) out in mem (ib_space_bytes(start, end)
 * bytes, 8-byte aligned), nothing free. Frames become free by ib_seed and
 * ib_seed_done, or by ib_free.
 */
void ib_space_init(struct ib_space *s, u64 start, u64 end, void *mem);
/* Mark the aligned block (pfn, order) free before ib_seed_done. */
void ib_seed(struct ib_space *s, u64 pfn, unsigned int order);
/* List the seeded frames in pfn order and build the upper bitmap levels. */
void ib_seed_done(struct ib_space *s);
/* Allocate an aligned block of 2^order frames; IB_NIL-like ~0 when none. */
u64 ib_alloc(struct ib_space *s, unsigned int order);
/*
 * What ib_free and ad_free found wrong with a free: nothing (IB_FREE_OK),
 * a block not aligned to its order, larger than IB_MAX_ORDER or not wholly
 * inside the space (IB_FREE_OUTSIDE), or a frame of it already free
 * (IB_FREE_DOUBLE). A refused free leaves the space exactly as it was.
 */
enum ib_free_result { IB_FREE_OK, IB_FREE_OUTSIDE, IB_FREE_DOUBLE };
/* Free an aligned block of 2^order frames allocated from this space. */
enum ib_free_result ib_free(struct ib_space *s, u64 pfn, unsigned int order);
/*
 * Take frame pfn out of the space when it is free there (for a caller that
 * hands it elsewhere, e.g. back to Linux's buddy lists); 1 when taken.
 */
int ib_take_frame(struct ib_space *s, u64 pfn);
/* Whether frame pfn is free in this space (0 outside it). */
int ib_frame_free(const struct ib_space *s, u64 pfn);
/* Free frames. */
u64 ib_nr_free(const struct ib_space *s);
/*
 * Wholly free aligned blocks of exactly `order` that are not half of a
 * wholly free block of order + 1: what a buddy free list of that order
 * would hold, for /proc/buddyinfo and the OOM report. Lock-free readers get
 * a snapshot.
 */
u64 ib_nr_free_blocks(const struct ib_space *s, unsigned int order);

#define IB_NONE (~(u64)0)

/*
 * The fair lazy list of one CPU (lis31-fair; the nvmos reference's
 * PcpPolicy::Staged with one CPU): allocations come from a staging list
 * refilled `batch` frames at a time from the front of the space (its
 * least recently freed frames), and frees are gathered `batch` at a time
 * and given back to the space together, in the order freed. A freed frame
 * is never handed out again before it went round the space, so iBuddy's
 * reuse order, and its even wear, are kept, while the space's lock is
 * taken once per `batch` allocations and once per `batch` frees.
 *
 * The caller composes the steps (it owns the space's lock): an allocation
 * takes the oldest staged frame; on an empty list it stages up to `batch`
 * frames from ib_alloc(s, 0) and, when that found none and frees are
 * gathered, gives them back (ib_staged_flush) and stages again. A free is
 * gathered; when ib_staged_gather says the gathering is full, the caller
 * gives it back.
 */
struct ib_staged {
	u32 batch;
	u32 head, len;		/* ring of staged frames, oldest first */
	u32 npending;		/* gathered frees, in the order freed */
	u64 list[IB_LAZY_MAX];
	u64 pending[IB_LAZY_MAX];
};

void ib_staged_init(struct ib_staged *st, u32 batch);
/* Take the oldest staged frame: 1 and *pfn, or 0 when none is staged. */
int ib_staged_take(struct ib_staged *st, u64 *pfn);
/* Stage a frame taken from the space (a refill); the list has room. */
void ib_staged_stage(struct ib_staged *st, u64 pfn);
/* Frames a refill stages: batch minus those still staged. */
u32 ib_staged_room(const struct ib_staged *st);
/* Gather a free: 1 when the gathering is now full and must be given back. */
int ib_staged_gather(struct ib_staged *st, u64 pfn);
/* Move the gathered frees to out (IB_LAZY_MAX entries), in the order freed; their count. */
u32 ib_staged_flush(struct ib_staged *st, u64 *out);
/* Move the staged frames to out (IB_LAZY_MAX entries), oldest first; their count. */
u32 ib_staged_unstage(struct ib_staged *st, u64 *out);

void ib_lazy_init(struct ib_lazy *l, u32 cap);
/* Take the oldest frame off the list: 1 and *pfn, or 0 when empty. */
int ib_lazy_take(struct ib_lazy *l, u64 *pfn);
/* Append a frame: 1, or 0 when the list is full (the free bypasses it). */
int ib_lazy_put(struct ib_lazy *l, u64 pfn);

#endif /* _NVMOS_IBUDDY_CORE_H */
