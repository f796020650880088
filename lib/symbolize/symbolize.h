/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbolizer: runtime addresses of a target's mappings -> function names,
 * source files, lines and inline chains, from the target's own ELF files
 * (opened through pp_proc__open_mapped), separate debug files (build id
 * path and .gnu_debuglink, in the target's root first, then podprof's),
 * /proc/kallsyms for kernel addresses, and /tmp/perf-PID.map for JIT code.
 *
 * Loaded files are cached by build id (dev+inode when there is none),
 * bounded by cache_bytes (least recently used evicted). Thread-safe: one
 * internal lock.
 */
#ifndef PODPROF_SYMBOLIZE_H
#define PODPROF_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procfs/procfs.h"

struct pp_symbolizer;

struct pp_sym_frame {
	char *function;     /* demangled; never NULL: "libc.so.6+0x1234" when no symbol covers the address */
	char *system_name;  /* mangled (or same as function) */
	char *file;         /* source file or NULL */
	uint32_t line;      /* 0 = unknown */
	uint32_t start_line;/* 0 = unknown */
};

struct pp_sym_result {
	struct pp_sym_frame *frames; /* innermost inlined function first, physical function last */
	size_t n;                    /* >= 1 on success */
	bool has_function;           /* a real symbol was found */
	bool has_file, has_line, has_inline;
};

struct pp_symbolizer_opts {
	uint64_t cache_bytes;        /* 0 = default 64 MiB */
	bool no_dwarf;               /* symbols only, skip file:line/inlines */
};

struct pp_symbolizer *pp_symbolizer__new(const struct pp_symbolizer_opts *opts);

/*
 * Resolve addr (an absolute address in pid's address space, inside mapping
 * m). build_id may be NULL. Writes caller-owned frames into *ret (free with
 * pp_sym_result__free). -ENOENT if the file cannot be opened at all (the
 * result is then still filled with the "file+0xoff" fallback name and 0
 * is returned if m has a path; -ENOENT only for anonymous memory).
 */
int pp_symbolizer__resolve(struct pp_symbolizer *s, pid_t pid, const struct pp_map *m,
			   const uint8_t *build_id, size_t build_id_len, uint64_t addr,
			   struct pp_sym_result *ret);

/* Kernel address from /proc/kallsyms (readable only with enough privilege). -ENOENT if unknown. */
int pp_symbolizer__resolve_kernel(struct pp_symbolizer *s, uint64_t addr, struct pp_sym_result *ret);

/* JIT code from /tmp/perf-PID.map inside the target's root. -ENOENT if unknown. */
int pp_symbolizer__resolve_jit(struct pp_symbolizer *s, pid_t pid, uint64_t addr,
			       struct pp_sym_result *ret);

/* Demangle C++ (Itanium) and Rust names; returns a malloc'd string or NULL if not mangled. */
char *pp_demangle(const char *name);

struct pp_symbolizer_stats {
	uint64_t files_loaded, files_evicted, files_failed, cache_bytes, lookups;
};
void pp_symbolizer__stats(struct pp_symbolizer *s, struct pp_symbolizer_stats *ret);

void pp_sym_result__free(struct pp_sym_result *r);
void pp_symbolizer__free(struct pp_symbolizer *s);

#endif
