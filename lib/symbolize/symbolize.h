/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbolizer: runtime addresses of a target's mappings -> function names,
 * source files, lines and inline chains, from the target's own ELF files
 * (opened through pp_proc__open_mapped), separate debug files (build id
 * path and .gnu_debuglink, in the target's root first, then podprof's),
 * /proc/kallsyms for kernel addresses, and /tmp/perf-PID.map for JIT code.
 *
 * Loaded files are cached by build id (dev+inode when there is none),
 * bounded by cache_bytes (least recently used evicted; an entry in use is
 * never evicted, so one file larger than the cache is loaded, used and
 * dropped). Estimated size per file: symbol table + names + the DWARF
 * sections libdw reads into memory; a file whose DWARF alone exceeds half
 * of cache_bytes is used for symbols only. A file that cannot be opened or
 * parsed is remembered as failed for 30 s.
 *
 * Thread-safe: one lock for the cache, kallsyms and perf maps; loading
 * happens outside it, and each file has its own lock around libdw.
 *
 * Rules: the runtime address becomes a file offset (addr - m->start +
 * m->offset), then an ELF virtual address through the PT_LOAD segment
 * holding that offset (PIE, non-PIE, shared objects and static binaries
 * alike). Symbols: FUNC/IFUNC (and sized NOTYPE in executable sections)
 * of .symtab, else the debug file's .symtab, else .dynsym; among aliases
 * GLOBAL > WEAK > LOCAL, then fewer leading underscores. A symbol covers
 * [value, value+size); a zero-size symbol covers up to the next symbol or
 * the end of its section. Nothing covering the address gives
 * "<basename>+0x<file offset>" with has_function false, never the nearest
 * preceding symbol. With DWARF, frame names are the DWARF names (linkage
 * name demangled, else DW_AT_name) like eu-addr2line; file names are made
 * absolute with the CU's comp_dir but not normalized.
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
	char *function; /* demangled; never NULL: "libc.so.6+0x1234" when no symbol covers the address */
	char *system_name; /* mangled (or same as function) */
	char *file; /* source file or NULL */
	uint32_t line; /* 0 = unknown */
	uint32_t start_line; /* 0 = unknown */
};

struct pp_sym_result {
	struct pp_sym_frame *frames; /* innermost inlined function first, physical function last */
	size_t n; /* >= 1 on success */
	bool has_function; /* a real symbol was found */
	bool has_file, has_line, has_inline;
};

struct pp_symbolizer_opts {
	uint64_t cache_bytes; /* 0 = default 64 MiB */
	bool no_dwarf; /* symbols only, skip file:line/inlines */
};

struct pp_symbolizer *pp_symbolizer__new(const struct pp_symbolizer_opts *opts);

/*
 * Resolve addr (an absolute address in pid's address space, inside mapping
 * m; -EINVAL outside it). build_id may be NULL. Special mappings: [vdso]
 * gets the fallback name, the others -ENOENT. Writes caller-owned frames into *ret (free with
 * pp_sym_result__free). -ENOENT if the file cannot be opened at all (the
 * result is then still filled with the "file+0xoff" fallback name and 0
 * is returned if m has a path; -ENOENT only for anonymous memory).
 */
int pp_symbolizer__resolve(struct pp_symbolizer *s, pid_t pid, const struct pp_map *m,
			   const uint8_t *build_id, size_t build_id_len, uint64_t addr,
			   struct pp_sym_result *ret);

/*
 * Kernel address from /proc/kallsyms (readable only with enough privilege;
 * all-zero addresses mean none, retried every 10 s). -ENOENT if unknown.
 * Text symbols only; a symbol covers up to the next one. Module symbols
 * are named "name [module]".
 */
int pp_symbolizer__resolve_kernel(struct pp_symbolizer *s, uint64_t addr,
				  struct pp_sym_result *ret);

/*
 * JIT code from /tmp/perf-PID.map inside the target's root (PID as the
 * target sees itself: the last NSpid). Lines "START SIZE name" in hex; a
 * later line wins over an overlapping earlier one. The file is re-read when
 * its size/mtime/inode changed, checked at most once a second and on a
 * miss. Capped at 64 MiB / 2M entries per file, 32 processes. -ENOENT if
 * unknown.
 */
int pp_symbolizer__resolve_jit(struct pp_symbolizer *s, pid_t pid, uint64_t addr,
			       struct pp_sym_result *ret);

/*
 * Demangle C++ (Itanium, via libiberty, bounded work) and legacy Rust names
 * (hash dropped, $..$ escapes decoded); returns a malloc'd string or NULL if
 * not mangled. Rust v0 (_R...) names, names over 4096 bytes and names whose
 * demangled form is too long (over PP_DEMANGLE_MAX_OUTPUT, or over 64 KiB
 * before shortening) are left alone (NULL).
 */
#define PP_DEMANGLE_MAX_OUTPUT 1024
/* Names that hit those bounds: shown without parameters (over 64 KiB with
 * them) or left mangled (process-wide count). */
uint64_t pp_demangle_bounded(void);
char *pp_demangle(const char *name);
/* A C++ name demangled with parameters (__cxa_demangle's form) as go tool
 * pprof shows it: no return type, parameters, qualifiers or template
 * arguments (the rules are in demangle.c). Returns a new string, NULL if out
 * of memory. */
char *pp_cxx_short_name(const char *full);

struct pp_symbolizer_stats {
	uint64_t files_loaded, files_evicted, files_failed, cache_bytes, lookups;
	uint64_t jit_reloads_deferred; /* changed perf maps not read again yet (rate limit) */
	uint64_t dwarf_refused; /* files whose DWARF would take over half the cache: symbols only */
	uint64_t names_bounded; /* process-wide: names that hit the demangler's bounds */
};
void pp_symbolizer__stats(struct pp_symbolizer *s, struct pp_symbolizer_stats *ret);

/*
 * Where the symbolizer's files come from. It never names a path itself:
 * it asks for "the mapped file", "the debug file of build id X", "the
 * .gnu_debuglink file N, candidate k" or "the perf map", and the opener
 * derives the path. By default the symbolizer opens them itself (the
 * _direct functions below); the isolated helper process (isolate.h) sets
 * an opener that asks the privileged process, which derives the paths
 * from its own request and ignores what the helper cannot be trusted with.
 * Process-wide; set once, before any symbolizer is used. Each function
 * returns an fd (owned by the caller) or -errno.
 */
struct pp_sym_opener {
	int (*open_mapped)(void *ctx, pid_t pid, const struct pp_map *m);
	int (*open_debug_id)(void *ctx, pid_t pid, const uint8_t *id, size_t id_len);
	int (*open_debuglink)(void *ctx, pid_t pid, const char *mapped_path, const char *name,
			      unsigned cand);
	int (*open_perf_map)(void *ctx, pid_t pid);
	void *ctx;
};
void pp_sym__set_opener(const struct pp_sym_opener *o);

/* podprof's own debug files: nothing outside it is opened in podprof's root. */
#define PP_SYM_OWN_DEBUG_DIR "/usr/lib/debug"

/*
 * Opens path inside the root of pid (pid > 0; pp_proc__open_in_root: "..",
 * absolute symlinks and magic links stay inside the target's root).
 * Regular files only (-ENOENT otherwise), never blocks on a FIFO. fd or
 * -errno.
 */
int pp_sym__open_in_root_direct(pid_t pid, const char *path);

/*
 * The debug file of build id (1..PP_BUILD_ID_MAX bytes):
 * /usr/lib/debug/.build-id/xx/yyyy.debug in pid's root (pid > 0), then
 * under podprof's own /usr/lib/debug; the first whose build id is id. fd
 * or -ENOENT.
 */
int pp_sym__open_debug_id_direct(pid_t pid, const uint8_t *id, size_t id_len);

/*
 * Candidate cand of the .gnu_debuglink name (a plain file name:
 * pp_sym__debuglink_name_ok) of the file mapped as mapped_path = DIR/base:
 * 0 DIR/name (not the file itself), 1 DIR/.debug/name, 2
 * /usr/lib/debug/DIR/name in pid's root, 3 the same under podprof's own
 * /usr/lib/debug (which it cannot leave). Regular files, contents not
 * checked (the caller checks the CRC or build id). fd or -ENOENT.
 */
#define PP_SYM_DEBUGLINK_CANDIDATES 4u
int pp_sym__open_debuglink_direct(pid_t pid, const char *mapped_path, const char *name,
				  unsigned cand);
/* 1..255 bytes, no '/', not "." or "..". */
bool pp_sym__debuglink_name_ok(const char *name);

void pp_sym_result__free(struct pp_sym_result *r);
void pp_symbolizer__free(struct pp_symbolizer *s);

#endif
