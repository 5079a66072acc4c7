/* SPDX-License-Identifier: GPL-2.0 */
/* What ibuddy_core.c and adaptive_core.c take from the kernel, for the user-space differential test. */
#ifndef _NVMOS_IBUDDY_SHIM_H
#define _NVMOS_IBUDDY_SHIM_H
#include <stdint.h>
typedef uint8_t u8;
typedef uint32_t u32;
typedef uint64_t u64;
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#endif
