/* SPDX-License-Identifier: GPL-2.0 */
/*
 * M3, the bank-aware allocator of Jongmoo Choi (with Sam H. Noh and
 * Donghee Lee), "Parallelism Issues on Modern Memory Architecture (OS
 * Perspective)", NVRAMOS 2012 Fall, as a pure data structure. Frames
 * handed out one after another by the buddy allocator are consecutive,
 * so the pages of programs running side by side land on the same few
 * DRAM banks and their accesses collide in the row buffers. M3 hands
 * single frames out at random over the banks, and can give each CPU
 * banks of its own so that CPUs do not share them.
 *
 * The core does not know the DRAM address mapping: every frame has a
 * colour, (pfn >> shift) & (colours - 1), and the caller picks shift and
 * colours so that a colour is a bank (or a rank and bank). Each colour has
 * an array of its free frames in no particular order, so a random free
 * frame of a colour is taken in O(1): the last entry moves into the
 * taken one's slot. A single frame comes from a random colour of the
 * CPU's and is a random frame of that colour. Partitioned, CPU k of n
 * owns colours ceil(k * colours / n) up to ceil((k + 1) * colours / n)
 * and borrows from every colour when its own are used up; shared, every
 * CPU draws from every colour. A block of higher order is looked for
 * around a few random free frames of the CPU's colours, then as the
 * lowest wholly free aligned block of the range.
 *
 * This is the nvmos project's user-space M3 (nvmos-frames) over one zone,
 * draw for draw: the same xorshift64 generator, the same draws in the
 * same order, the same lists, so a differential test checks that both
 * hand out the same frames. Three things are added for the kernel:
 *
 * - Frames are handed to the core free (m3_seed) rather than all being
 *   free at the start; m3_seed_done lists them in ascending pfn order,
 *   which is where the reference starts when every frame is seeded.
 * - A frame the core did not hand out (in use when the zone was handed
 *   over, or taken out by m3_take_block) is "loose": it can be freed at
 *   any order, as Linux frees such frames. A block the core handed out is
 *   freed at its order; the kernel also frees pieces of allocated blocks
 *   (split_page(), a THP split, an order above pageblock_order freed as
 *   pageblocks), for which m3_loosen makes the blocks loose first.
 * - The wholly free aligned blocks of every order are kept in a bitmap
 *   per order (a bit is set exactly when the block lies inside the range
 *   and all its frames are free). The reference has no such structure.
 *   It gives the page allocator an exact highest free order for its
 *   watermark check (one too low would send high-order requests to
 *   reclaim and compaction while a block is free; one too high, to a
 *   search that fails) and buddy-like free block counts for
 *   /proc/buddyinfo, and it finds the reference's "lowest wholly free
 *   aligned block" by looking for a set bit rather than by walking
 *   frames. It costs a climb per frame freed or taken, which stops at
 *   the first order whose block is not wholly free.
 *
 * Invariants: a frame is free (state M3_FREE) exactly when it is in its
 * colour's array at the position pos[] records; free_count is the
 * arrays' total; an allocated block is aligned, inside the range, a head
 * (M3_HEAD + order) followed by 2^order - 1 tails (M3_TAIL); no tail is
 * outside such a block; for k >= 1, nr_full[k] counts the set bits of
 * full[k], and a bit is set exactly when its block is wholly free and
 * inside the range.
 *
 * Locking is the caller's: in the kernel a core is protected by its
 * zone->lock. m3_frame_free and the block counts may be read without it
 * (a snapshot).
 */
#ifndef _NVMOS_M3_CORE_H
#define _NVMOS_M3_CORE_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/compiler.h>
#else
#include "ibuddy_shim.h"
#endif
#include "ibuddy_core.h"

/* Largest order (Linux's MAX_PAGE_ORDER). */
#define M3_MAX_ORDER 10
/* Most colours: more than the banks times ranks of any one channel. */
#define M3_MAX_COLOURS 256
/* Random free frames whose aligned block a higher-order request tries first. */
#define M3_BLOCK_PROBES 8
/* No position: the frame is on no colour's array. */
#define M3_NOWHERE 0xffffffffu
/* The reference's default seed ("m3_alloc"). */
#define M3_DEFAULT_SEED 0x6d335f616c6c6f63ull

/* A frame's state. */
enum m3_state {
	M3_FREE,	/* on its colour's array */
	M3_LOOSE,	/* in use, not handed out by the core: freed at any order */
	M3_TAIL,	/* in a block the core handed out, not its first frame */
	M3_HEAD,	/* M3_HEAD + order: first frame of a block the core handed out */
};

struct m3_stats {
	u64 alloc_single;	/* order-0 frames handed out */
	u64 alloc_borrowed;	/* of those, from outside the CPU's colours */
	u64 alloc_blocks;	/* blocks of order >= 1 handed out */
	u64 alloc_block_frames;
	u64 block_probe_hits;	/* of those blocks, found around a random free frame */
	u64 alloc_failed;	/* requests the core could not serve */
	u64 free_single;	/* order-0 frees */
	u64 free_blocks;	/* frees of order >= 1 */
	u64 free_block_frames;
	u64 free_loose_frames;	/* frames of those frees the core had not handed out */
	u64 loosened_blocks;	/* allocated blocks m3_loosen made loose */
	u64 taken_frames;	/* free frames taken out by m3_take_block */
};

/* One zone's M3: frames [start, end). */
struct m3_core {
	u64 start, end;
	u32 cpus, colours, shift;
	int partition;
	u64 rng;		/* xorshift64 state, never 0 */
	u64 free_count;
	u8 *state;		/* per frame (index pfn - start), enum m3_state */
	u32 *pos;		/* per frame: its slot in its colour's array, or M3_NOWHERE */
	u32 *slots;		/* colour c's array: len[c] entries from slots[base[c]] */
	u32 *base, *len;	/* per colour */
	u64 *full[M3_MAX_ORDER + 1];	/* order k >= 1: bit b is block (start >> k) + b */
	u64 nr_full[M3_MAX_ORDER + 1];	/* order k >= 1: bits set in full[k] */
	struct m3_stats stats;
};

/* Bytes of the arrays a core needs for a zone of that many frames and colours. */
u64 m3_core_bytes(u64 frames, u32 colours);
/*
 * Lay a core over [start, end) out in mem (m3_core_bytes(end - start,
 * colours) bytes, 8-byte aligned), every frame loose (in use). colours is
 * a power of two up to M3_MAX_COLOURS, cpus at least 1; partition gives
 * each CPU colours of its own; seed starts the generator.
 */
void m3_init(struct m3_core *c, u64 start, u64 end, u32 cpus, u32 colours,
	     u32 shift, int partition, u64 seed, void *mem);
/* Mark the block (pfn, order), inside the range, free before m3_seed_done. */
void m3_seed(struct m3_core *c, u64 pfn, unsigned int order);
/* List the seeded frames, each colour in ascending pfn order. */
void m3_seed_done(struct m3_core *c);
/* The colours cpu (below cpus) draws from first: [*first, *end). */
void m3_colours_of(const struct m3_core *c, u32 cpu, u32 *first, u32 *end);
/* The colour of frame pfn. */
static inline u32 m3_colour(const struct m3_core *c, u64 pfn)
{
	return (u32)(pfn >> c->shift) & (c->colours - 1);
}

/* Allocate an aligned block of 2^order frames for cpu; IB_NONE when none. */
u64 m3_alloc(struct m3_core *c, unsigned int order, u32 cpu);
/*
 * Free the block (pfn, order): IB_FREE_OK, or, the core left unchanged,
 * IB_FREE_DOUBLE when a frame of it is free, IB_FREE_OUTSIDE when it is
 * misaligned, larger than M3_MAX_ORDER or not wholly inside the range, or
 * not a block this core handed out with that order (nor wholly loose).
 */
enum ib_free_result m3_free(struct m3_core *c, u64 pfn, unsigned int order);
/*
 * Make every block the core handed out that overlaps (pfn, order) loose,
 * for a caller that frees pieces of it. 1 when (pfn, order) is aligned,
 * inside the range and has no free frame, so that m3_free(pfn, order)
 * now succeeds; 0, and nothing changed, otherwise.
 */
int m3_loosen(struct m3_core *c, u64 pfn, unsigned int order);
/* Whether frame pfn is free in the core (0 outside the range). */
int m3_frame_free(const struct m3_core *c, u64 pfn);
/*
 * Take the wholly free block (pfn, order) out of the core, for a caller
 * that hands it elsewhere; its frames become loose. 1 when taken; 0, and
 * nothing changed, when it is not wholly free and inside the range.
 */
int m3_take_block(struct m3_core *c, u64 pfn, unsigned int order);
/* Free frames. */
u64 m3_free_frames(const struct m3_core *c);
/* Free frames of a colour. */
u32 m3_colour_free(const struct m3_core *c, u32 colour);
/*
 * Wholly free aligned blocks of exactly order that are not half of a
 * wholly free block of order + 1: what buddy free lists would hold for
 * the same free frames.
 */
u64 m3_nr_free_blocks(const struct m3_core *c, unsigned int order);
/* Highest order with a wholly free aligned block, -1 when nothing is free. */
int m3_max_free_order(const struct m3_core *c);

#endif /* _NVMOS_M3_CORE_H */
