// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * nvmos_memtrace: a QEMU TCG plugin that records the guest's physical
 * memory accesses, filters them through a model of a shared last-level
 * cache, and writes what reaches memory (line fills and dirty writebacks)
 * as a DRAMSim3 trace that `nvmos memsys run` replays.
 *
 * What is recorded: every load and store of every vCPU (kernel and user
 * space alike) between the guest's start and stop markers. A marker is
 * the 9-byte NOP `66 0f 1f 84 00 <disp32>` with the displacement
 * 0x4e56XXXX that nvmos_tcg.c also uses; codes 0x0300 (start) and 0x0301
 * (stop). Accesses to I/O memory have no RAM address and are counted,
 * not recorded.
 *
 * Time: each vCPU counts its own instructions (a callback per translation
 * block adds the block's length; an access's time is the count at its
 * block's start plus its index in the block). One instruction takes
 * insn_ps picoseconds (1000 by default: 1 ns, as `-icount shift=0`), and
 * a request's cycle is that time over the memory clock's tck_ps. A vCPU
 * that went idle resumes at the largest count of any vCPU, so time a
 * vCPU spent halted is not lost; time when every vCPU was idle is not in
 * the trace. The cache sees accesses in the order the host ran them,
 * which under multi-threaded TCG is close to, not exactly, guest time.
 * QEMU 7.2 also runs an instruction's memory callbacks for the accesses
 * of helpers that run after it (exception and interrupt delivery onto
 * the kernel stack, iret), with that instruction's index, which may
 * belong to an earlier instruction or block: such an access takes the
 * vCPU's latest time instead, is counted as retimed, and so each vCPU's
 * requests stay in time order.
 *
 * The cache: llc_bytes over llc_ways ways of 64-byte lines, LRU,
 * write-back and write-allocate (a store that misses fills the line and
 * dirties it). A miss is a READ of its line at the access's time; a dirty
 * victim is a WRITE at the same time. llc_bytes=0 turns the cache off:
 * then every access is a request of its line. An access that straddles
 * two lines touches both when both are in one page (their physical
 * addresses are then contiguous); one that straddles two pages touches
 * only its first line and is counted.
 *
 * Output: out=PATH, the trace, sorted by cycle (each vCPU's requests are
 * buffered, then merged at exit; equal times go vCPU by vCPU, and one
 * vCPU's in the order it made them); stats=PATH, one "key value" line per
 * counter. Both are written to PATH.tmp and renamed, and the stats end
 * with "complete 1" so a reader can tell a finished file from a torn one.
 * At most max_records requests are kept; the rest are counted as
 * dropped. watch=START:LEN (hex virtual addresses) also counts, per
 * 4 KiB page of that window, the accesses made to it and the frames that
 * backed it, which is how a test checks the counts exactly.
 *
 * The plugin API of QEMU 7.2 (plugin API version 1) and the marker are
 * in nvmos_plugin_api.h, shared with nvmos_tcg.c.
 *
 * Built with -DNVMOS_MEMTRACE_HOST it is a host program instead: it reads
 * "vcpu time paddr R|W" lines on stdin and runs them through the same
 * cache and output, which is how the cache is tested against nvmos's
 * Rust model.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#define MAX_VCPUS 64
#define LINE_SHIFT 6
#define PAGE_SHIFT 12
#define LOCK_STRIPES 1024
#define CODE_START 0x0300
#define CODE_STOP 0x0301

/* One request to memory: the line's address with bit 0 set for a write,
 * and the time in instructions. */
struct request {
	uint64_t line_w;
	uint64_t time;
};

struct vcpu {
	uint64_t count;    /* instructions, up to the end of the current block */
	uint64_t tb_start; /* count at the start of the current block */
	uint64_t base;     /* count when recording started */
	uint64_t end;      /* count when recording stopped */
	uint64_t executed; /* instructions run while recording */
	struct request *reqs;
	uint64_t n, cap;
	/* Counters, each touched only by its own vCPU's thread. */
	uint64_t loads, stores, io, hits, misses, writebacks, split, page_cross, dropped;
	uint64_t last_time; /* time of the vCPU's latest recorded access */
	uint64_t retimed;   /* accesses whose instruction index was not theirs */
	bool seen;
};

struct way {
	uint64_t tag; /* line address + 1; 0: invalid */
	uint64_t used; /* the set's clock at the last access (LRU) */
	bool dirty;
};

static struct vcpu vcpus[MAX_VCPUS];
static struct way *ways;      /* sets x llc_ways */
static uint64_t *set_clock;   /* per set */
static pthread_mutex_t stripes[LOCK_STRIPES];
static uint64_t llc_bytes = 8u << 20;
static uint64_t llc_ways = 16;
static uint64_t llc_sets;
static uint64_t insn_ps = 1000;
static uint64_t tck_ps = 833;
static uint64_t max_records = 200000000;
static uint64_t records_total; /* across vCPUs, approximate while running */
static volatile int recording;
static uint64_t starts, stops;
static char *out_path, *stats_path;

/* The watched window: per page, accesses and the first frame seen. */
static uint64_t watch_start, watch_len;
static uint64_t *watch_count;
static uint64_t *watch_frame; /* frame + 1; 0: not seen */
static uint64_t watch_remapped; /* accesses whose page had moved frames */

static uint64_t parse_u64(const char *s, bool *ok)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (end == s || *end != '\0')
		*ok = false;
	return v;
}

static int setup(void)
{
	uint64_t i;

	for (i = 0; i < LOCK_STRIPES; i++)
		pthread_mutex_init(&stripes[i], NULL);
	if (llc_bytes) {
		if (!llc_ways || llc_bytes % (llc_ways << LINE_SHIFT))
			return -1;
		llc_sets = llc_bytes / (llc_ways << LINE_SHIFT);
		ways = calloc(llc_sets * llc_ways, sizeof(*ways));
		set_clock = calloc(llc_sets, sizeof(*set_clock));
		if (!ways || !set_clock)
			return -1;
	}
	if (watch_len) {
		uint64_t pages = (watch_len + (1u << PAGE_SHIFT) - 1) >> PAGE_SHIFT;

		watch_count = calloc(pages, sizeof(*watch_count));
		watch_frame = calloc(pages, sizeof(*watch_frame));
		if (!watch_count || !watch_frame)
			return -1;
	}
	return 0;
}

static void push(struct vcpu *v, uint64_t line, bool write, uint64_t time)
{
	if (__atomic_load_n(&records_total, __ATOMIC_RELAXED) >= max_records) {
		v->dropped++;
		return;
	}
	if (v->n == v->cap) {
		uint64_t cap = v->cap ? v->cap * 2 : 1 << 16;
		struct request *r = realloc(v->reqs, cap * sizeof(*r));

		if (!r) {
			v->dropped++;
			return;
		}
		v->reqs = r;
		v->cap = cap;
	}
	v->reqs[v->n].line_w = (line << LINE_SHIFT) | (write ? 1 : 0);
	v->reqs[v->n].time = time;
	v->n++;
	__atomic_fetch_add(&records_total, 1, __ATOMIC_RELAXED);
}

/* One access to one line through the cache. The set's stripe lock makes
 * the look-up, the fill and the victim one step, so two vCPUs never fill
 * the same way. */
static void access_line(struct vcpu *v, uint64_t line, bool write, uint64_t time)
{
	uint64_t set, i, victim = 0, oldest = UINT64_MAX;
	struct way *w;
	pthread_mutex_t *lock;

	if (!llc_bytes) {
		v->misses++;
		push(v, line, write, time);
		return;
	}
	set = line % llc_sets;
	w = &ways[set * llc_ways];
	lock = &stripes[set % LOCK_STRIPES];
	pthread_mutex_lock(lock);
	set_clock[set]++;
	for (i = 0; i < llc_ways; i++) {
		if (w[i].tag == line + 1) {
			w[i].used = set_clock[set];
			w[i].dirty |= write;
			pthread_mutex_unlock(lock);
			v->hits++;
			return;
		}
		/* An invalid way (used 0) is the oldest of all. */
		if (w[i].used < oldest) {
			oldest = w[i].used;
			victim = i;
		}
	}
	if (w[victim].tag && w[victim].dirty) {
		v->writebacks++;
		push(v, w[victim].tag - 1, true, time);
	}
	w[victim].tag = line + 1;
	w[victim].used = set_clock[set];
	w[victim].dirty = write;
	pthread_mutex_unlock(lock);
	v->misses++;
	push(v, line, false, time);
}

static void record(struct vcpu *v, uint64_t paddr, uint64_t vaddr, unsigned size, bool write,
		   uint64_t time)
{
	uint64_t first = paddr >> LINE_SHIFT;
	uint64_t last = (paddr + size - 1) >> LINE_SHIFT;

	if (write)
		v->stores++;
	else
		v->loads++;
	if (watch_len && vaddr - watch_start < watch_len) {
		uint64_t page = (vaddr - watch_start) >> PAGE_SHIFT;
		uint64_t frame = (paddr >> PAGE_SHIFT) + 1;
		uint64_t seen = 0;

		__atomic_fetch_add(&watch_count[page], 1, __ATOMIC_RELAXED);
		if (!__atomic_compare_exchange_n(&watch_frame[page], &seen, frame, false,
						 __ATOMIC_RELAXED, __ATOMIC_RELAXED) &&
		    seen != frame)
			__atomic_fetch_add(&watch_remapped, 1, __ATOMIC_RELAXED);
	}
	access_line(v, first, write, time);
	if (last != first) {
		if ((paddr >> PAGE_SHIFT) == ((paddr + size - 1) >> PAGE_SHIFT)) {
			v->split++;
			access_line(v, last, write, time);
		} else {
			v->page_cross++;
		}
	}
}

/* Every vCPU's time starts at 0 when recording starts; another vCPU's
 * count is read while it runs, so its origin is off by the instructions
 * it ran meanwhile (a block at most). A second start is counted and
 * otherwise ignored, so one window is recorded. */
static void start_recording(void)
{
	uint64_t i;

	starts++;
	if (recording || stops)
		return;
	for (i = 0; i < MAX_VCPUS; i++)
		vcpus[i].base = __atomic_load_n(&vcpus[i].count, __ATOMIC_RELAXED);
	__atomic_store_n(&recording, 1, __ATOMIC_RELEASE);
}

static void stop_recording(void)
{
	uint64_t i;

	stops++;
	if (!recording)
		return;
	__atomic_store_n(&recording, 0, __ATOMIC_RELEASE);
	for (i = 0; i < MAX_VCPUS; i++)
		vcpus[i].end = __atomic_load_n(&vcpus[i].count, __ATOMIC_RELAXED);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Writes the merged trace and the stats; 0 on success. */
static int finish(void)
{
	FILE *out, *st;
	char *tmp;
	uint64_t total = 0, i, j, n = 0, idx[MAX_VCPUS] = { 0 };
	uint64_t sum[10] = { 0 }, instructions = 0, span = 0, vcpus_seen = 0;
	int err = 0;

	tmp = malloc(strlen(out_path) + 5);
	if (!tmp)
		return -1;
	sprintf(tmp, "%s.tmp", out_path);
	out = fopen(tmp, "w");
	if (!out) {
		free(tmp);
		return -1;
	}
	/* A vCPU's count only grows (blocks add their length, a resync
	 * moves it forward), so its requests are in time order: merge. */
	for (i = 0; i < MAX_VCPUS; i++)
		total += vcpus[i].n;
	fprintf(out,
		"# nvmos memtrace: DRAMSim3 format, one request per 64-byte line; "
		"llc_bytes %" PRIu64 " llc_ways %" PRIu64 " insn_ps %" PRIu64 " tck_ps %" PRIu64
		"\n",
		llc_bytes, llc_ways, insn_ps, tck_ps);
	for (n = 0; n < total; n++) {
		struct vcpu *best = NULL;
		uint64_t b = 0;

		for (i = 0; i < MAX_VCPUS; i++) {
			struct vcpu *v = &vcpus[i];

			if (idx[i] < v->n && (!best || v->reqs[idx[i]].time < best->reqs[idx[b]].time)) {
				best = v;
				b = i;
			}
		}
		{
			struct request r = best->reqs[idx[b]++];
			unsigned __int128 ps = (unsigned __int128)r.time * insn_ps;

			if (fprintf(out, "0x%" PRIx64 " %s %" PRIu64 "\n", r.line_w & ~(uint64_t)1,
				    (r.line_w & 1) ? "WRITE" : "READ", (uint64_t)(ps / tck_ps)) < 0)
				err = -1;
		}
	}
	if (fflush(out) != 0 || fclose(out) != 0)
		err = -1;
	if (!err && rename(tmp, out_path) != 0)
		err = -1;
	free(tmp);
	if (err)
		return err;

	tmp = malloc(strlen(stats_path) + 5);
	if (!tmp)
		return -1;
	sprintf(tmp, "%s.tmp", stats_path);
	st = fopen(tmp, "w");
	if (!st) {
		free(tmp);
		return -1;
	}
	for (i = 0; i < MAX_VCPUS; i++) {
		struct vcpu *v = &vcpus[i];
		uint64_t c[10] = { v->loads,	  v->stores, v->io,	    v->hits,
				   v->misses,	  v->writebacks, v->split, v->page_cross,
				   v->dropped, v->retimed };

		for (j = 0; j < 10; j++)
			sum[j] += c[j];
		if (v->seen) {
			uint64_t until = recording ? v->count : v->end;

			vcpus_seen++;
			instructions += v->executed;
			span = until - v->base > span ? until - v->base : span;
		}
	}
	fprintf(st, "loads %" PRIu64 "\nstores %" PRIu64 "\nio %" PRIu64 "\nhits %" PRIu64
		    "\nmisses %" PRIu64 "\nwritebacks %" PRIu64 "\nsplit %" PRIu64
		    "\npage_cross %" PRIu64 "\ndropped %" PRIu64 "\nretimed %" PRIu64 "\n",
		sum[0], sum[1], sum[2], sum[3], sum[4], sum[5], sum[6], sum[7], sum[8], sum[9]);
	fprintf(st, "records %" PRIu64 "\nstarts %" PRIu64 "\nstops %" PRIu64
		    "\nvcpus %" PRIu64 "\ninstructions %" PRIu64 "\nspan %" PRIu64
		    "\nllc_bytes %" PRIu64 "\nllc_ways %" PRIu64 "\ninsn_ps %" PRIu64
		    "\ntck_ps %" PRIu64 "\n",
		total, starts, stops, vcpus_seen, instructions, span, llc_bytes, llc_ways, insn_ps,
		tck_ps);
	if (watch_len) {
		uint64_t pages = (watch_len + (1u << PAGE_SHIFT) - 1) >> PAGE_SHIFT;
		uint64_t acc = 0, touched = 0, lo = UINT64_MAX, hi = 0, frames = 0;
		uint64_t *f = calloc(pages, sizeof(*f));

		for (i = 0; i < pages; i++) {
			if (!watch_count[i])
				continue;
			acc += watch_count[i];
			touched++;
			lo = watch_count[i] < lo ? watch_count[i] : lo;
			hi = watch_count[i] > hi ? watch_count[i] : hi;
			if (f)
				f[frames++] = watch_frame[i];
		}
		uint64_t distinct = 0;

		if (!f) {
			err = -1;
		} else {
			qsort(f, frames, sizeof(*f), cmp_u64);
			for (i = 0; i < frames; i++)
				distinct += !i || f[i] != f[i - 1];
			free(f);
		}
		fprintf(st, "watch_accesses %" PRIu64 "\nwatch_pages %" PRIu64
			    "\nwatch_frames %" PRIu64 "\nwatch_min_per_page %" PRIu64
			    "\nwatch_max_per_page %" PRIu64 "\nwatch_remapped %" PRIu64 "\n",
			acc, touched, distinct, touched ? lo : 0, hi, watch_remapped);
	}
	fprintf(st, "complete 1\n");
	if (fflush(st) != 0 || fclose(st) != 0)
		err = -1;
	if (!err && rename(tmp, stats_path) != 0)
		err = -1;
	free(tmp);
	return err;
}

static bool parse_args(int argc, char **argv)
{
	bool ok = true;
	int i;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strncmp(a, "out=", 4))
			out_path = strdup(a + 4);
		else if (!strncmp(a, "stats=", 6))
			stats_path = strdup(a + 6);
		else if (!strncmp(a, "llc_bytes=", 10))
			llc_bytes = parse_u64(a + 10, &ok);
		else if (!strncmp(a, "llc_ways=", 9))
			llc_ways = parse_u64(a + 9, &ok);
		else if (!strncmp(a, "insn_ps=", 8))
			insn_ps = parse_u64(a + 8, &ok);
		else if (!strncmp(a, "tck_ps=", 7))
			tck_ps = parse_u64(a + 7, &ok);
		else if (!strncmp(a, "max_records=", 12))
			max_records = parse_u64(a + 12, &ok);
		else if (!strncmp(a, "watch=", 6)) {
			char *colon = strchr(a + 6, ':');
			char *start;

			if (!colon)
				return false;
			start = strndup(a + 6, (size_t)(colon - (a + 6)));
			if (!start)
				return false;
			watch_start = parse_u64(start, &ok);
			watch_len = parse_u64(colon + 1, &ok);
			free(start);
		} else {
			return false;
		}
	}
	return ok && out_path && stats_path && insn_ps && tck_ps;
}

#ifndef NVMOS_MEMTRACE_HOST

#include "nvmos_plugin_api.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* A vCPU's time since recording started of an access by the instruction
 * at idx in the running block. An index that does not fit the block's
 * instructions, or a time before the vCPU's previous access, was not the
 * access's own (see "Time" above): it takes the previous access's time
 * and is counted. Invariant: a vCPU's times never decrease. */
static uint64_t now(struct vcpu *v, uint64_t idx)
{
	uint64_t t = v->tb_start + idx;

	t = t > v->base ? t - v->base : 0;
	if (v->tb_start + idx >= v->count || t < v->last_time) {
		v->retimed++;
		return v->last_time;
	}
	v->last_time = t;
	return t;
}

static void on_tb_exec(unsigned int vcpu_index, void *userdata)
{
	struct vcpu *v = &vcpus[vcpu_index % MAX_VCPUS];
	uint64_t n = (uintptr_t)userdata;

	v->tb_start = v->count;
	__atomic_store_n(&v->count, v->count + n, __ATOMIC_RELAXED);
	v->seen = true;
	if (recording)
		v->executed += n;
}

static void on_mem(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
		   void *userdata)
{
	struct vcpu *v = &vcpus[vcpu_index % MAX_VCPUS];
	struct qemu_plugin_hwaddr *hw;

	if (!recording)
		return;
	hw = qemu_plugin_get_hwaddr(info, vaddr);
	if (!hw || qemu_plugin_hwaddr_is_io(hw)) {
		v->io++;
		return;
	}
	record(v, qemu_plugin_hwaddr_phys_addr(hw), vaddr, 1u << qemu_plugin_mem_size_shift(info),
	       qemu_plugin_mem_is_store(info), now(v, (uintptr_t)userdata));
}

static void on_marker(unsigned int vcpu_index, void *userdata)
{
	(void)vcpu_index;
	if ((uintptr_t)userdata == CODE_START)
		start_recording();
	else if ((uintptr_t)userdata == CODE_STOP)
		stop_recording();
}

/* A vCPU that comes back from idle takes up the time of the vCPU that ran
 * furthest, so the halted stretch is not collapsed into its next block. */
static void on_resume(qemu_plugin_id_t id, unsigned int vcpu_index)
{
	struct vcpu *v = &vcpus[vcpu_index % MAX_VCPUS];
	uint64_t i, furthest = 0;

	(void)id;
	if (!recording)
		return;
	for (i = 0; i < MAX_VCPUS; i++) {
		uint64_t c = __atomic_load_n(&vcpus[i].count, __ATOMIC_RELAXED);

		if (vcpus[i].seen && c > vcpus[i].base && c - vcpus[i].base > furthest)
			furthest = c - vcpus[i].base;
	}
	if (v->count - v->base < furthest)
		__atomic_store_n(&v->count, v->base + furthest, __ATOMIC_RELAXED);
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	size_t i;
	uint32_t code;

	(void)id;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
					     (void *)(uintptr_t)n);
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW, (void *)(uintptr_t)i);
		if (is_marker(insn, &code) && (code == CODE_START || code == CODE_STOP))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker,
							       QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(uintptr_t)code);
	}
}

static void on_plugin_exit(qemu_plugin_id_t id, void *userdata)
{
	char msg[160];
	int err;

	(void)id;
	(void)userdata;
	err = finish();
	snprintf(msg, sizeof(msg), "nvmos_memtrace: %" PRIu64 " requests%s\n", records_total,
		 err ? "; WRITING THE OUTPUT FAILED" : "");
	qemu_plugin_outs(msg);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
							       const void *info, int argc,
							       char **argv)
{
	(void)info;
	if (!parse_args(argc, argv)) {
		qemu_plugin_outs("nvmos_memtrace: needs out=PATH stats=PATH and valid "
				 "llc_bytes= llc_ways= insn_ps= tck_ps= max_records= "
				 "watch=START:LEN\n");
		return -1;
	}
	if (setup() != 0) {
		qemu_plugin_outs("nvmos_memtrace: llc_bytes must be a non-zero multiple of "
				 "llc_ways x 64, and the tables must fit in memory\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
	qemu_plugin_register_vcpu_resume_cb(id, on_resume);
	qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
	return 0;
}

#else /* NVMOS_MEMTRACE_HOST */

/* argv as the plugin's arguments; stdin: "vcpu time paddr R|W" lines,
 * recorded as if between a start and a stop marker. */
int main(int argc, char **argv)
{
	unsigned vcpu;
	uint64_t time, paddr;
	char rw;
	unsigned long line = 0;

	if (!parse_args(argc - 1, argv + 1) || setup() != 0) {
		fprintf(stderr, "nvmos_memtrace: bad arguments\n");
		return 2;
	}
	start_recording();
	while (scanf("%u %" SCNu64 " %" SCNx64 " %c", &vcpu, &time, &paddr, &rw) == 4) {
		struct vcpu *v = &vcpus[vcpu % MAX_VCPUS];

		line++;
		if (time < v->count) {
			fprintf(stderr, "nvmos_memtrace: line %lu: vCPU %u's time went back\n", line,
				vcpu);
			return 2;
		}
		v->seen = true;
		v->executed++;
		v->count = time;
		record(v, paddr, 0, 8, rw == 'W', time);
	}
	if (!feof(stdin)) {
		fprintf(stderr, "nvmos_memtrace: line %lu does not parse\n", line + 1);
		return 2;
	}
	stop_recording();
	return finish() ? 1 : 0;
}

#endif
