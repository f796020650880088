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
 * Every file the symbolizer reads is opened through these, which go to the
 * opener set by pp_sym__set_opener (symbolize.h) when there is one, else to
 * the _direct versions. fd or -errno.
 */
int pp_sym__open_mapped(pid_t pid, const struct pp_map *m);
int pp_sym__open_debug_id(pid_t pid, const uint8_t *id, size_t id_len);
int pp_sym__open_debuglink(pid_t pid, const char *mapped_path, const char *name, unsigned cand);
int pp_sym__open_perf_map(pid_t pid);

#define OWN_DEBUG_DIR PP_SYM_OWN_DEBUG_DIR
/* /tmp/perf-PID.map in pid's root, PID as the target sees itself (kernel.c). */
int pp_sym__open_perf_map_direct(pid_t pid);

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
