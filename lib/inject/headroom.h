/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory headroom of a process before podprof maps memory into it (the
 * injected agent's image, data and ring; a preloaded agent's ring): the
 * charge must never make the process's own allocations fail or get it
 * OOM-killed.
 *
 * Limits checked, the smallest headroom wins:
 * - RLIMIT_AS (the soft limit, /proc/PID/limits) against VmSize
 *   (/proc/PID/status). Margin PP_HEADROOM_AS_MARGIN: one glibc malloc
 *   arena reserves 64 MiB of address space at once. A limit with an
 *   unreadable size is refused (nothing tells it is safe).
 * - Its memory cgroup (/proc/PID/cgroup; the v1 memory hierarchy when one
 *   is mounted, else the v2 one) and every ancestor that can be read:
 *   v2 memory.max and memory.high (above it the process is throttled and
 *   reclaimed hard), v1 memory.limit_in_bytes, and the target level's v1
 *   hierarchical_memory_limit (memory.stat: the smallest of its
 *   ancestors', covering those that cannot be read). Usage is the working
 *   set as the kubelet counts it: memory.current / memory.usage_in_bytes
 *   minus the inactive file pages (memory.stat inactive_file, v1
 *   total_inactive_file), which the kernel reclaims before it OOM-kills;
 *   a full page cache alone does not refuse. Margin: the larger of
 *   PP_HEADROOM_CG_MARGIN_MIN and PP_HEADROOM_CG_MARGIN_PCT percent of
 *   that limit (a process's usage moves by a few percent between the
 *   check and the mapping; a 10% band is where kubelets and autoscalers
 *   consider a container at its limit anyway).
 *
 * Where cgroup files are read: through the target's root
 * (/proc/PID/root + the cgroup mount its /proc/PID/mountinfo names), so a
 * podprof whose own /sys/fs/cgroup shows only its cgroup (a Kubernetes
 * sidecar) still sees the target's; a level not visible there is read in
 * podprof's own mount (its /proc/self/mountinfo). A level readable in
 * neither, or a file that does not parse, is unknown and allowed; "max" or
 * a value of at least 2^60 is no limit. Every file is read with a size cap.
 *
 * Nothing here logs or keeps state; thread-safe.
 */
#ifndef PODPROF_HEADROOM_H
#define PODPROF_HEADROOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PP_HEADROOM_AS_MARGIN (64ull << 20)
#define PP_HEADROOM_CG_MARGIN_MIN (32ull << 20)
#define PP_HEADROOM_CG_MARGIN_PCT 10

/*
 * May `bytes` more be mapped into pid? 0 when yes or unknown; -ENOMEM
 * when not, with reason (size n, n > 0) saying which limit, how much is
 * free, and what is needed, e.g. "memory cgroup /podprof-test: 5.1 MiB
 * free under its 64.0 MiB limit; the agent needs 7.0 MiB + 32 MiB
 * margin". reason is left as it was on 0.
 */
int pp_headroom__check(pid_t pid, uint64_t bytes, char *reason, size_t n);

/* The margin kept under a cgroup limit of `limit` bytes. */
uint64_t pp_headroom__cg_margin(uint64_t limit);

/*
 * /proc/PID/cgroup text: the cgroup of the memory controller, the v1 line
 * naming "memory" among its controllers if any (*ret_v2 false), else the
 * v2 line "0::PATH" (*ret_v2 true). The path is copied to ret_path (size
 * n). 0, -ENOENT (neither), -ENAMETOOLONG.
 */
int pp_headroom__parse_cgroup(const char *text, bool *ret_v2, char *ret_path, size_t n);

/*
 * /proc/PID/mountinfo text: the first mount of that hierarchy (v2: type
 * cgroup2; v1: type cgroup with "memory" among its super options): its
 * root (the cgroup mounted there, as the reader's cgroup namespace names
 * it) to ret_root (size rn) and its mount point, unescaped, to ret_mnt
 * (size mn). 0, -ENOENT, -ENAMETOOLONG.
 */
int pp_headroom__parse_mountinfo(const char *text, bool v2, char *ret_root, size_t rn,
				 char *ret_mnt, size_t mn);

#endif
