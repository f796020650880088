/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pprof profile builder and decoder (perftools.profiles.Profile through
 * protobuf-c, gzip through zlib). The builder enforces PPROF-COMPAT.md §2 by
 * construction: string_table[0] == "", ids 1..N in order, one value per
 * sample type, no address-0 location without lines, has_* mapping flags
 * computed from the locations, strings made valid UTF-8.
 *
 * Not thread-safe; one builder per request.
 */
#ifndef PODPROF_PPROF_H
#define PODPROF_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

struct pp_pprof;

struct pp_pprof_mapping {
	uint64_t start, limit, offset;
	const char *file; /* may be NULL */
	const char *build_id; /* lowercase hex, may be NULL */
};

struct pp_pprof_line {
	const char *function; /* demangled name (required) */
	const char *system_name; /* NULL = same as function */
	const char *file; /* NULL = unknown */
	int64_t line; /* 0 = unknown */
	int64_t start_line;
};

struct pp_pprof_label {
	const char *key;
	const char *str; /* string label, or NULL for a numeric one */
	int64_t num;
	const char *num_unit; /* e.g. "bytes"; may be NULL */
};

/* Caps on what one builder holds; past them adds fail with E2BIG. */
#define PP_PPROF_MAX_ENTRIES (1u << 26) /* strings, functions, mappings, locations */
#define PP_PPROF_MAX_SAMPLES (1u << 26)
#define PP_PPROF_MAX_REFS (1ull << 30) /* total location ids / labels / values */
/* Largest inflated profile pp_pprof_decode accepts. */
#define PP_PPROF_MAX_DECODED (512u << 20)

/* NULL with errno = ENOMEM. Free with pp_pprof__free (accepts NULL). */
struct pp_pprof *pp_pprof__new(void);
/*
 * String arguments are copied (invalid UTF-8 replaced by U+FFFD). Sample
 * type names must not contain '-' (-EINVAL). Return 0 or -errno.
 */
/* Values of every sample follow the order of these calls. */
int pp_pprof__add_sample_type(struct pp_pprof *p, const char *type, const char *unit);
int pp_pprof__set_period(struct pp_pprof *p, const char *type, const char *unit, int64_t period);
int pp_pprof__set_default_sample_type(struct pp_pprof *p, const char *type);
void pp_pprof__set_time(struct pp_pprof *p, int64_t time_nanos, int64_t duration_nanos);
int pp_pprof__add_comment(struct pp_pprof *p, const char *comment);

/* Returns the mapping id (>= 1), deduplicated on all fields, or 0 on ENOMEM. The first added is mapping 1. */
uint64_t pp_pprof__add_mapping(struct pp_pprof *p, const struct pp_pprof_mapping *m);
/*
 * Returns the location id (>= 1, deduplicated on mapping+address+lines) or
 * 0 with errno set: EINVAL when the location is not representable (address 0
 * with no lines, unknown mapping_id, a line without function), ENOMEM, E2BIG
 * (table cap). mapping_id 0 = none. lines[0] is the innermost inlined
 * function. Equivalent to pp_pprof__add_location_ex() with info NULL.
 */
uint64_t pp_pprof__add_location(struct pp_pprof *p, uint64_t mapping_id, uint64_t address,
				const struct pp_pprof_line *lines, size_t n_lines);

/*
 * What symbolization found for one location. The has_* flags of a mapping
 * are true only when the mapping has at least one location and every
 * location added to it (including repeated adds of a deduplicated one) has
 * the flag:
 *   has_functions     = info->has_function and n_lines > 0
 *   has_filenames     = has_functions, info->has_file, every line has a file
 *   has_line_numbers  = has_functions, info->has_line, every line has line > 0
 *   has_inline_frames = has_functions and info->has_inline (inline expansion
 *                       was done for this address, e.g. DWARF was available)
 * has_function must be false for fallback names such as "libc.so.6+0x1234",
 * so that `go tool pprof` still tries to symbolize that mapping itself.
 * With info NULL every has_X/has_function is assumed true and only the
 * checks on the lines apply.
 */
struct pp_pprof_loc_info {
	bool has_function, has_file, has_line, has_inline;
};
uint64_t pp_pprof__add_location_ex(struct pp_pprof *p, uint64_t mapping_id, uint64_t address,
				   const struct pp_pprof_line *lines, size_t n_lines,
				   const struct pp_pprof_loc_info *info);
/*
 * loc_ids[0] is the leaf; zero ids are skipped, unknown ids are -EINVAL.
 * n_values must equal the number of sample types (-EINVAL otherwise), and
 * no sample type may be added after the first sample (-EBUSY). A label has
 * a key and either str (string label; "" drops the label) or num (+ optional
 * num_unit).
 * Samples are not merged: aggregate before adding. Returns 0 or -errno
 * (-ENOMEM, -E2BIG past the caps below).
 */
int pp_pprof__add_sample(struct pp_pprof *p, const uint64_t *loc_ids, size_t n_locs,
			 const int64_t *values, size_t n_values,
			 const struct pp_pprof_label *labels, size_t n_labels);

/*
 * Serialize (gzip-compressed when gzip is true) and append to out. -EINVAL
 * without any sample type; -E2BIG past out->max (out is then unchanged).
 * The builder stays usable (more samples may be added and encoded again).
 */
int pp_pprof__encode(struct pp_pprof *p, bool gzip, struct pp_buf *out);
void pp_pprof__free(struct pp_pprof *p);

/*
 * Decoding, for tests and tools: pp_pprof_decode accepts gzip (1f 8b) or raw
 * protobuf bytes, inflating at most PP_PPROF_MAX_DECODED; returns 0,
 * -EBADMSG (not a profile), -EFBIG or -ENOMEM; *ret is freed with
 * pp_pprof_profile__free (accepts NULL). Include "profile.pb-c.h" to read
 * the fields.
 * pp_pprof_check verifies every rule of PPROF-COMPAT.md §2 that can be
 * checked on the message and writes the first violation (naming the rule)
 * into err: returns 0 or -EINVAL.
 */
struct Perftools__Profiles__Profile; /* protobuf-c 1.4 struct tag, from profile.pb-c.h */
typedef struct Perftools__Profiles__Profile pp_pprof_profile;
int pp_pprof_decode(const void *buf, size_t len, pp_pprof_profile **ret);
int pp_pprof_check(const pp_pprof_profile *prof, char *err, size_t errlen);
void pp_pprof_profile__free(pp_pprof_profile *prof);

/*
 * gzip helpers (zlib), appended to out (out unchanged on error). pp_gunzip
 * inflates one gzip member; more than max_out bytes of output is -EFBIG,
 * corrupt or truncated input -EBADMSG.
 */
int pp_gzip(const void *in, size_t len, struct pp_buf *out);
int pp_gunzip(const void *in, size_t len, size_t max_out, struct pp_buf *out);

#endif
