/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Between maps.c (the resolution itself, run on whichever thread calls)
 * and bounded.c (which runs it on an opener thread under a deadline).
 * Not part of the module's interface.
 */
#ifndef PODPROF_PROCFS_INTERNAL_H
#define PODPROF_PROCFS_INTERNAL_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "procfs.h"

/* The unbounded versions of pp_proc__open_mapped_ex, the resolution
 * behind pp_proc__mapped_path_ex / pp_proc__mapped_stat, and
 * pp_proc__open_in_root. They may wait as long as the file system does. */
int pp_proc__open_mapped_raw(pid_t pid, const struct pp_map *m, unsigned flags);
int pp_proc__resolve_mapped_raw(pid_t pid, const struct pp_map *m, unsigned flags, char *buf,
				size_t n, struct stat *ret_st);
int pp_proc__open_in_root_raw(pid_t pid, const char *path, int flags, uint64_t resolve);

#endif
