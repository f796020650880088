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
	const char *file;           /* may be NULL */
	const char *build_id;       /* lowercase hex, may be NULL */
};

struct pp_pprof_line {
	const char *function;       /* demangled name (required) */
	const char *system_name;    /* NULL = same as function */
	const char *file;           /* NULL = unknown */
	int64_t line;               /* 0 = unknown */
	int64_t start_line;
};

struct pp_pprof_label {
	const char *key;
	const char *str;            /* string label, or NULL for a numeric one */
	int64_t num;
	const char *num_unit;       /* e.g. "bytes"; may be NULL */
};

struct pp_pprof *pp_pprof__new(void);
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
 * 0 when the location is not representable (address 0 with no lines) or on
 * ENOMEM. mapping_id 0 = none. lines[0] is the innermost inlined function.
 * has_functions etc. of the mapping are cleared if a location lacks them.
 */
uint64_t pp_pprof__add_location(struct pp_pprof *p, uint64_t mapping_id, uint64_t address,
				const struct pp_pprof_line *lines, size_t n_lines);
/* loc_ids[0] is the leaf; zero ids are skipped. n_values must equal the number of sample types. */
int pp_pprof__add_sample(struct pp_pprof *p, const uint64_t *loc_ids, size_t n_locs,
			 const int64_t *values, size_t n_values, const struct pp_pprof_label *labels,
			 size_t n_labels);

/* Serialize (gzip-compressed when gzip is true) and append to out. */
int pp_pprof__encode(struct pp_pprof *p, bool gzip, struct pp_buf *out);
void pp_pprof__free(struct pp_pprof *p);

/*
 * Decoding, for tests and tools: a decoded profile accepts gzip or raw
 * bytes. pp_pprof_check verifies every rule of PPROF-COMPAT.md §2 and writes
 * the first violation into err.
 */
struct _Perftools__Profiles__Profile;
typedef struct _Perftools__Profiles__Profile pp_pprof_profile;
int pp_pprof_decode(const void *buf, size_t len, pp_pprof_profile **ret);
int pp_pprof_check(const pp_pprof_profile *prof, char *err, size_t errlen);
void pp_pprof_profile__free(pp_pprof_profile *prof);

/* gzip helpers (zlib), appended to out; inflate bounded by max_out. */
int pp_gzip(const void *in, size_t len, struct pp_buf *out);
int pp_gunzip(const void *in, size_t len, size_t max_out, struct pp_buf *out);

#endif
