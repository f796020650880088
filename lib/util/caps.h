/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Capabilities: read the effective set, and give up every capability
 * podprof does not use once it runs.
 */
#ifndef PODPROF_CAPS_H
#define PODPROF_CAPS_H

#include <stdint.h>

/* Bit numbers (linux/capability.h). */
#define PP_CAP_DAC_READ_SEARCH 2
#define PP_CAP_SETGID 6
#define PP_CAP_SETUID 7
#define PP_CAP_SETPCAP 8
#define PP_CAP_SYS_PTRACE 19
#define PP_CAP_SYS_ADMIN 21
#define PP_CAP_SYSLOG 34
#define PP_CAP_PERFMON 38
#define PP_CAP_BPF 39
#define PP_CAP_CHECKPOINT_RESTORE 40
#define PP_CAP_LAST 40

/* Effective set as a bit mask. 0 or -errno. */
int pp_caps__effective(uint64_t *ret);

/*
 * Keep only the capabilities in keep (bit mask) in the effective,
 * permitted and inheritable sets, and drop the others from the bounding
 * set (when CAP_SETPCAP allows). *ret_kept = what remains effective.
 * 0 or -errno (nothing is changed on error).
 */
int pp_caps__restrict(uint64_t keep, uint64_t *ret_kept);

/* "CAP_BPF,CAP_PERFMON,..." for the bits of mask, into buf. */
void pp_caps__format(uint64_t mask, char *buf, unsigned long n);

#endif
