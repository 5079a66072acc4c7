/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What nvmos's QEMU TCG plugins share: the part of QEMU 7.2's plugin API
 * (plugin API version 1) they call, declared here because Debian ships
 * no qemu-plugin.h, with the types of that version; and the guest's
 * marker instruction.
 *
 * A marker is the 9-byte NOP `66 0f 1f 84 00 <disp32>` whose displacement
 * is 0x4e56XXXX ("NV" and a 16-bit code); compilers pad with the same NOP
 * but a displacement of 0, so no other instruction matches.
 */
#ifndef NVMOS_PLUGIN_API_H
#define NVMOS_PLUGIN_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- QEMU plugin API, version 1 (QEMU 7.2), the part nvmos uses ---- */
typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_plugin_hwaddr;
enum qemu_plugin_cb_flags {
	QEMU_PLUGIN_CB_NO_REGS,
	QEMU_PLUGIN_CB_R_REGS,
	QEMU_PLUGIN_CB_RW_REGS,
};
enum qemu_plugin_mem_rw {
	QEMU_PLUGIN_MEM_R = 1,
	QEMU_PLUGIN_MEM_W,
	QEMU_PLUGIN_MEM_RW,
};
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
					  uint64_t vaddr, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
				      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
				      void *userdata);
void qemu_plugin_register_vcpu_idle_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_resume_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t info, uint64_t vaddr);
bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr);
uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);
/* ---- end of the API ---- */

#define MARK_MAGIC 0x4e560000u

/* Whether `insn` is a marker; its code in *code. */
static inline bool is_marker(const struct qemu_plugin_insn *insn, uint32_t *code)
{
	const uint8_t *d = qemu_plugin_insn_data(insn);
	uint32_t disp;

	if (qemu_plugin_insn_size(insn) != 9 || !d)
		return false;
	if (d[0] != 0x66 || d[1] != 0x0f || d[2] != 0x1f || d[3] != 0x84 || d[4] != 0x00)
		return false;
	memcpy(&disp, d + 5, 4);
	if ((disp & 0xffff0000u) != MARK_MAGIC)
		return false;
	*code = disp & 0xffff;
	return true;
}

#endif
