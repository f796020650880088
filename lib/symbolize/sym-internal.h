/* SPDX-License-Identifier: Apache-2.0 */
/* Shared between the symbolizer's source files; not part of the interface. */
#ifndef PODPROF_SYM_INTERNAL_H
#define PODPROF_SYM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "symbolize.h"

/*
 * One result with a single frame named `name` (mangled or not: it is
 * demangled here). has_function as given. 0 or -ENOMEM (ret untouched).
 */
int pp_sym__result_one(struct pp_sym_result *ret, const char *name, bool has_function);

/*
 * Opens path inside the root of pid (RESOLVE_IN_ROOT, so absolute symlinks
 * stay inside the target's root); pid 0 means podprof's own root. Regular
 * files only (-EINVAL otherwise), never blocks on a FIFO. Returns fd or -errno.
 */
int pp_sym__open_in_root(pid_t pid, const char *path);

/* Kernel symbols and perf maps (kernel.c), owned by the symbolizer. */
struct pp_ksyms;
struct pp_jitmaps;
void pp_ksyms__free(struct pp_ksyms *k);
void pp_jitmaps__free(struct pp_jitmaps *j);
/* Both called with the symbolizer's lock held; *k / *j created on demand. */
int pp_ksyms__resolve(struct pp_ksyms **k, uint64_t addr, struct pp_sym_result *ret);
int pp_jitmaps__resolve(struct pp_jitmaps **j, pid_t pid, uint64_t addr, struct pp_sym_result *ret);
uint64_t pp_ksyms__bytes(const struct pp_ksyms *k);
uint64_t pp_jitmaps__bytes(const struct pp_jitmaps *j);
uint64_t pp_jitmaps__reloads_deferred(const struct pp_jitmaps *j);

#endif
