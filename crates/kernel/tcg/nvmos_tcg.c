// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * nvmos_tcg: a QEMU TCG plugin that counts each vCPU's guest instructions
 * and, at the guest's marker instructions, writes how many instructions a
 * vCPU executed between two markers.
 *
 * A marker is the 9-byte NOP `66 0f 1f 84 00 <disp32>` whose displacement
 * is 0x4e56XXXX ("NV" and a 16-bit code); compilers pad with the same NOP
 * but a displacement of 0, so no other instruction matches. Codes (the
 * kernel's mm/nvmos_bench.c emits them):
 *
 *   0x0001        a request begins on this vCPU
 *   0x0002/0x0003 an allocation/free request ends: a record is written
 *   0x0100 + p    the vCPU starts pattern p
 *   0x0200        the vCPU leaves its pattern
 *
 * Output (argument out=PATH): binary records of 8 bytes, little-endian,
 * { u8 vcpu, u8 pattern, u8 code, u8 flags, u32 instructions }, flags bit
 * 0 set when the count did not fit in 32 bits (the count is then
 * 0xffffffff). At exit two trailer records follow, { 0xff, 0xff, 0xff,
 * 0xff, u32 records } and { 0xfe, 0xfe, 0xfe, 0xfe, u32 unpaired markers
 * }, so a reader can tell a complete file from a truncated one and count
 * markers that did not pair; the file is written to PATH.tmp and renamed.
 *
 * Counting: a callback per translation block adds the block's length to
 * its vCPU's count before the block runs; a marker's callback reads the
 * count at the block's start plus the marker's index in the block, so a
 * count is exact to the instruction unless the block was left early (an
 * exception mid-block), which the bracketed kernel code does not do.
 *
 * The plugin API of QEMU 7.2 (plugin API version 1) and the marker test
 * are in nvmos_plugin_api.h, shared with nvmos_memtrace.c.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "nvmos_plugin_api.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_VCPUS 64
#define CODE_BEGIN 0x0001
#define CODE_ALLOC 0x0002
#define CODE_FREE 0x0003
#define CODE_PHASE 0x0100
#define CODE_IDLE 0x0200
#define NO_PATTERN 0xff

struct vcpu {
	uint64_t count;    /* instructions, up to the end of the current block */
	uint64_t tb_start; /* count at the start of the current block */
	uint64_t begin;    /* count at the last CODE_BEGIN */
	uint8_t pattern;
	bool open;         /* a CODE_BEGIN awaits its end */
};

static struct vcpu vcpus[MAX_VCPUS];
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static char *out_path;
static char *tmp_path;
static uint64_t records;
static uint64_t unpaired; /* ends without a begin, begins without an end */
static bool write_failed;

/* userdata of a marker: its index in the block (high) and code (low). */
static void *marker_udata(size_t idx, uint32_t code)
{
	return (void *)(uintptr_t)(((uint64_t)idx << 16) | code);
}

static void on_tb_exec(unsigned int vcpu_index, void *userdata)
{
	struct vcpu *v = &vcpus[vcpu_index % MAX_VCPUS];

	v->tb_start = v->count;
	v->count += (uintptr_t)userdata;
}

static void write_record(unsigned int vcpu, uint8_t pattern, uint8_t code, uint64_t n)
{
	uint8_t r[8];
	uint32_t v = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;

	r[0] = (uint8_t)vcpu;
	r[1] = pattern;
	r[2] = code;
	r[3] = n > UINT32_MAX ? 1 : 0;
	memcpy(r + 4, &v, 4); /* x86 hosts: little-endian */
	pthread_mutex_lock(&out_lock);
	if (fwrite(r, 8, 1, out) != 1)
		write_failed = true;
	records++;
	pthread_mutex_unlock(&out_lock);
}

static void on_marker(unsigned int vcpu_index, void *userdata)
{
	struct vcpu *v = &vcpus[vcpu_index % MAX_VCPUS];
	uint64_t u = (uintptr_t)userdata;
	uint32_t code = u & 0xffff;
	uint64_t now = v->tb_start + (u >> 16);

	if (code == CODE_BEGIN) {
		if (v->open)
			unpaired++;
		v->begin = now;
		v->open = true;
	} else if (code == CODE_ALLOC || code == CODE_FREE) {
		if (!v->open) {
			unpaired++;
			return;
		}
		v->open = false;
		/* The begin marker itself is counted, the end marker not. */
		write_record(vcpu_index, v->pattern, (uint8_t)code, now - v->begin - 1);
	} else if (code >= CODE_PHASE && code < CODE_PHASE + NO_PATTERN) {
		v->pattern = (uint8_t)(code - CODE_PHASE);
		v->open = false;
	} else if (code == CODE_IDLE) {
		v->pattern = NO_PATTERN;
		if (v->open)
			unpaired++;
		v->open = false;
	}
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

		if (is_marker(insn, &code))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker,
							       QEMU_PLUGIN_CB_NO_REGS,
							       marker_udata(i, code));
	}
}

static void on_plugin_exit(qemu_plugin_id_t id, void *userdata)
{
	uint8_t trailer[16] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xfe, 0xfe, 0xfe, 0xfe };
	uint32_t n = records > UINT32_MAX ? UINT32_MAX : (uint32_t)records;
	uint32_t u = unpaired > UINT32_MAX ? UINT32_MAX : (uint32_t)unpaired;
	char msg[256];
	uint64_t total = 0;
	int i;

	(void)id;
	(void)userdata;
	for (i = 0; i < MAX_VCPUS; i++)
		total += vcpus[i].count;
	pthread_mutex_lock(&out_lock);
	memcpy(trailer + 4, &n, 4);
	memcpy(trailer + 12, &u, 4);
	if (fwrite(trailer, 16, 1, out) != 1 || fflush(out) != 0)
		write_failed = true;
	if (fclose(out) != 0)
		write_failed = true;
	out = NULL;
	if (!write_failed && rename(tmp_path, out_path) != 0)
		write_failed = true;
	snprintf(msg, sizeof(msg),
		 "nvmos_tcg: %" PRIu64 " records, %" PRIu64 " unpaired markers, %" PRIu64
		 " instructions%s\n",
		 records, unpaired, total, write_failed ? "; WRITING THE OUTPUT FAILED" : "");
	qemu_plugin_outs(msg);
	pthread_mutex_unlock(&out_lock);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
							       const void *info, int argc,
							       char **argv)
{
	int i;

	(void)info;
	for (i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out_path = strdup(argv[i] + 4);
	if (!out_path) {
		qemu_plugin_outs("nvmos_tcg: needs out=PATH\n");
		return -1;
	}
	tmp_path = malloc(strlen(out_path) + 5);
	if (!tmp_path)
		return -1;
	sprintf(tmp_path, "%s.tmp", out_path);
	out = fopen(tmp_path, "wb");
	if (!out) {
		qemu_plugin_outs("nvmos_tcg: cannot create the output file\n");
		return -1;
	}
	for (i = 0; i < MAX_VCPUS; i++)
		vcpus[i].pattern = NO_PATTERN;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
	qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
	return 0;
}
