/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pprof builder, encoder, decoder and checker. The builder keeps flat
 * arrays plus open-addressing hash tables (strings, functions, mappings,
 * locations) and only builds protobuf-c structures at encode time, pointing
 * into its own arrays where the layouts agree.
 */
#include "pprof.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "util/log.h"

/* ---- UTF-8 ---------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	if (c < 0xc2 || c > 0xf4)
		return 0;
	size_t len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (c == 0xe0 && s[1] < 0xa0) /* overlong */
		return 0;
	if (c == 0xed && s[1] > 0x9f) /* surrogates */
		return 0;
	if (c == 0xf0 && s[1] < 0x90) /* overlong */
		return 0;
	if (c == 0xf4 && s[1] > 0x8f) /* > U+10FFFF */
		return 0;
	return len;
}

static bool utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq(s + i, n - i);
		if (!l)
			return false;
		i += l;
	}
	return true;
}

/* malloc'd copy with every invalid byte replaced by U+FFFD; NULL on ENOMEM. */
static char *utf8_repair(const char *str, size_t n, size_t *ret_len)
{
	const unsigned char *s = (const unsigned char *)str;
	if (n > SIZE_MAX / 3 - 1)
		return NULL;
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq(s + i, n - i);
		if (l) {
			memcpy(out + o, s + i, l);
			o += l;
			i += l;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	*ret_len = o;
	return out;
}

/* ---- growable arrays and hash tables --------------------------------- */

static int grow(void **arr, size_t *cap, size_t need, size_t elem, size_t max)
{
	if (need <= *cap)
		return 0;
	if (need > max)
		return -E2BIG;
	size_t c = *cap ? *cap : 16;
	while (c < need)
		c = c > max / 2 ? max : c * 2;
	if (c > SIZE_MAX / elem)
		return -ENOMEM;
	void *n = realloc(*arr, c * elem);
	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = c;
	return 0;
}

struct hslot {
	uint32_t idx1; /* entry index + 1, 0 = empty */
	uint32_t h;
};

struct htab {
	struct hslot *s;
	size_t cap; /* power of two */
	size_t n;
};

typedef bool (*eq_fn)(const struct pp_pprof *p, uint32_t idx, const void *key);

/*
 * Slot holding an entry equal to key, or the empty slot where it belongs;
 * NULL while the table has no storage yet.
 */
static struct hslot *htab_find(const struct htab *t, uint32_t h, eq_fn eq, const struct pp_pprof *p,
			       const void *key)
{
	if (!t->cap)
		return NULL;
	size_t mask = t->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct hslot *s = &t->s[i];
		if (!s->idx1)
			return s;
		if (s->h == h && eq(p, s->idx1 - 1, key))
			return s;
	}
}

/* Makes room for one more entry; call before htab_find when inserting. */
static int htab_reserve(struct htab *t)
{
	if (t->cap && (t->n + 1) * 10 < t->cap * 7)
		return 0;
	size_t cap = t->cap ? t->cap * 2 : 64;
	struct hslot *s = calloc(cap, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->s[i].idx1)
			continue;
		size_t j = t->s[i].h & (cap - 1);
		while (s[j].idx1)
			j = (j + 1) & (cap - 1);
		s[j] = t->s[i];
	}
	free(t->s);
	t->s = s;
	t->cap = cap;
	return 0;
}

static uint32_t hash32(const void *d, size_t n, uint64_t seed)
{
	uint64_t h = pp_hash_bytes(d, n, seed);
	return (uint32_t)(h ^ (h >> 32));
}

/* ---- builder --------------------------------------------------------- */

struct b_func {
	int64_t name, system_name, filename, start_line;
};

struct b_map {
	uint64_t start, limit, offset;
	int64_t file, build_id;
	uint32_t n_locs;
	bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};
#define MAP_KEY_SIZE offsetof(struct b_map, n_locs)

struct b_line {
	uint64_t function_id;
	int64_t line;
};

struct b_loc {
	uint64_t mapping_id, address;
	size_t line_off;
	uint32_t n_lines;
};

struct b_label {
	int64_t key, str, num, num_unit;
};

struct b_sample {
	size_t loc_off, lab_off;
	uint32_t n_locs, n_labs;
};

struct pp_pprof {
	char **strs;
	uint32_t *str_len;
	size_t n_strs, cap_strs, cap_str_len;
	struct htab str_ht;

	struct b_func *funcs;
	size_t n_funcs, cap_funcs;
	struct htab func_ht;

	struct b_map *maps;
	size_t n_maps, cap_maps;
	struct htab map_ht;

	struct b_loc *locs;
	size_t n_locs, cap_locs;
	struct htab loc_ht;
	struct b_line *lines;
	size_t n_lines, cap_lines;

	struct b_sample *samples;
	size_t n_samples, cap_samples;
	uint64_t *sloc;
	size_t n_sloc, cap_sloc;
	int64_t *svals;
	size_t n_svals, cap_svals;
	struct b_label *slabs;
	size_t n_slabs, cap_slabs;

	int64_t (*types)[2];
	size_t n_types, cap_types;
	int64_t period_type[2];
	bool has_period_type;
	int64_t period;
	int64_t default_type;
	int64_t time_nanos, duration_nanos;
	int64_t *comments;
	size_t n_comments, cap_comments;

	/* scratch for add_location */
	struct b_line *tmp_lines;
	size_t cap_tmp_lines;
};

struct str_key {
	const char *s;
	size_t len;
};

static bool str_eq(const struct pp_pprof *p, uint32_t idx, const void *key)
{
	const struct str_key *k = key;
	return p->str_len[idx] == k->len && memcmp(p->strs[idx], k->s, k->len) == 0;
}

/* String table index of s (NULL = ""), or -errno. */
static int64_t intern(struct pp_pprof *p, const char *s)
{
	if (!s || !*s)
		return 0;
	size_t len = strlen(s);
	_cleanup_free_ char *fixed = NULL;
	if (!utf8_valid(s, len)) {
		fixed = utf8_repair(s, len, &len);
		if (!fixed)
			return -ENOMEM;
		s = fixed;
	}
	if (len > UINT32_MAX)
		return -E2BIG;
	struct str_key k = { s, len };
	uint32_t h = hash32(s, len, 0x5354);
	struct hslot *slot = htab_find(&p->str_ht, h, str_eq, p, &k);
	if (slot && slot->idx1)
		return slot->idx1 - 1;
	int r = htab_reserve(&p->str_ht);
	if (r < 0)
		return r;
	r = grow((void **)&p->strs, &p->cap_strs, p->n_strs + 1, sizeof(*p->strs),
		 PP_PPROF_MAX_ENTRIES);
	if (r < 0)
		return r;
	r = grow((void **)&p->str_len, &p->cap_str_len, p->n_strs + 1, sizeof(*p->str_len),
		 PP_PPROF_MAX_ENTRIES);
	if (r < 0)
		return r;
	char *copy;
	if (fixed) {
		copy = fixed;
		fixed = NULL;
	} else {
		copy = strdup(s);
		if (!copy)
			return -ENOMEM;
	}
	slot = htab_find(&p->str_ht, h, str_eq, p, &k);
	p->strs[p->n_strs] = copy;
	p->str_len[p->n_strs] = (uint32_t)len;
	slot->idx1 = (uint32_t)p->n_strs + 1;
	slot->h = h;
	p->str_ht.n++;
	return (int64_t)p->n_strs++;
}

struct pp_pprof *pp_pprof__new(void)
{
	struct pp_pprof *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	/* string_table[0] == "" */
	p->strs = malloc(16 * sizeof(*p->strs));
	p->str_len = malloc(16 * sizeof(*p->str_len));
	if (!p->strs || !p->str_len)
		goto fail;
	p->cap_strs = p->cap_str_len = 16;
	p->strs[0] = strdup("");
	if (!p->strs[0])
		goto fail;
	p->str_len[0] = 0;
	p->n_strs = 1;
	/* "" is never looked up (intern short-circuits it), so it is not hashed. */
	return p;
fail:
	free(p->strs);
	free(p->str_len);
	free(p);
	errno = ENOMEM;
	return NULL;
}

void pp_pprof__free(struct pp_pprof *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_strs; i++)
		free(p->strs[i]);
	free(p->strs);
	free(p->str_len);
	free(p->str_ht.s);
	free(p->funcs);
	free(p->func_ht.s);
	free(p->maps);
	free(p->map_ht.s);
	free(p->locs);
	free(p->loc_ht.s);
	free(p->lines);
	free(p->samples);
	free(p->sloc);
	free(p->svals);
	free(p->slabs);
	free(p->types);
	free(p->comments);
	free(p->tmp_lines);
	free(p);
}

int pp_pprof__add_sample_type(struct pp_pprof *p, const char *type, const char *unit)
{
	if (!p || !type || !*type || strchr(type, '-'))
		return -EINVAL;
	if (p->n_samples)
		return -EBUSY;
	int r = grow((void **)&p->types, &p->cap_types, p->n_types + 1, sizeof(*p->types), 64);
	if (r < 0)
		return r;
	int64_t t = intern(p, type);
	if (t < 0)
		return (int)t;
	int64_t u = intern(p, unit);
	if (u < 0)
		return (int)u;
	p->types[p->n_types][0] = t;
	p->types[p->n_types][1] = u;
	p->n_types++;
	return 0;
}

int pp_pprof__set_period(struct pp_pprof *p, const char *type, const char *unit, int64_t period)
{
	if (!p)
		return -EINVAL;
	int64_t t = intern(p, type);
	if (t < 0)
		return (int)t;
	int64_t u = intern(p, unit);
	if (u < 0)
		return (int)u;
	p->period_type[0] = t;
	p->period_type[1] = u;
	p->has_period_type = true;
	p->period = period;
	return 0;
}

int pp_pprof__set_default_sample_type(struct pp_pprof *p, const char *type)
{
	if (!p)
		return -EINVAL;
	int64_t t = intern(p, type);
	if (t < 0)
		return (int)t;
	p->default_type = t;
	return 0;
}

void pp_pprof__set_time(struct pp_pprof *p, int64_t time_nanos, int64_t duration_nanos)
{
	if (!p)
		return;
	p->time_nanos = time_nanos;
	p->duration_nanos = duration_nanos;
}

int pp_pprof__add_comment(struct pp_pprof *p, const char *comment)
{
	if (!p || !comment)
		return -EINVAL;
	int r = grow((void **)&p->comments, &p->cap_comments, p->n_comments + 1,
		     sizeof(*p->comments), 4096);
	if (r < 0)
		return r;
	int64_t c = intern(p, comment);
	if (c < 0)
		return (int)c;
	p->comments[p->n_comments++] = c;
	return 0;
}

static bool map_eq(const struct pp_pprof *p, uint32_t idx, const void *key)
{
	return memcmp(&p->maps[idx], key, MAP_KEY_SIZE) == 0;
}

uint64_t pp_pprof__add_mapping(struct pp_pprof *p, const struct pp_pprof_mapping *m)
{
	if (!p || !m) {
		errno = EINVAL;
		return 0;
	}
	struct b_map k;
	memset(&k, 0, sizeof(k));
	int64_t f = intern(p, m->file);
	int64_t b = f < 0 ? f : intern(p, m->build_id);
	if (b < 0) {
		errno = (int)-b;
		return 0;
	}
	k.start = m->start;
	k.limit = m->limit;
	k.offset = m->offset;
	k.file = f;
	k.build_id = b;
	uint32_t h = hash32(&k, MAP_KEY_SIZE, 0x4d4150);
	struct hslot *slot = htab_find(&p->map_ht, h, map_eq, p, &k);
	if (slot && slot->idx1)
		return slot->idx1;
	int r = htab_reserve(&p->map_ht);
	if (!r)
		r = grow((void **)&p->maps, &p->cap_maps, p->n_maps + 1, sizeof(*p->maps),
			 PP_PPROF_MAX_ENTRIES);
	if (r < 0) {
		errno = -r;
		return 0;
	}
	k.has_functions = k.has_filenames = k.has_line_numbers = k.has_inline_frames = true;
	p->maps[p->n_maps] = k;
	slot = htab_find(&p->map_ht, h, map_eq, p, &k);
	slot->idx1 = (uint32_t)p->n_maps + 1;
	slot->h = h;
	p->map_ht.n++;
	return ++p->n_maps;
}

static bool func_eq(const struct pp_pprof *p, uint32_t idx, const void *key)
{
	return memcmp(&p->funcs[idx], key, sizeof(struct b_func)) == 0;
}

/* Function id (>= 1) or -errno. */
static int64_t add_function(struct pp_pprof *p, const struct pp_pprof_line *l)
{
	struct b_func k;
	int64_t r;

	if ((r = intern(p, l->function)) < 0)
		return r;
	k.name = r;
	if (l->system_name) {
		if ((r = intern(p, l->system_name)) < 0)
			return r;
		k.system_name = r;
	} else {
		k.system_name = k.name;
	}
	if ((r = intern(p, l->file)) < 0)
		return r;
	k.filename = r;
	k.start_line = l->start_line;
	uint32_t h = hash32(&k, sizeof(k), 0x46554e43);
	struct hslot *slot = htab_find(&p->func_ht, h, func_eq, p, &k);
	if (slot && slot->idx1)
		return slot->idx1;
	int e = htab_reserve(&p->func_ht);
	if (!e)
		e = grow((void **)&p->funcs, &p->cap_funcs, p->n_funcs + 1, sizeof(*p->funcs),
			 PP_PPROF_MAX_ENTRIES);
	if (e < 0)
		return e;
	p->funcs[p->n_funcs] = k;
	slot = htab_find(&p->func_ht, h, func_eq, p, &k);
	slot->idx1 = (uint32_t)p->n_funcs + 1;
	slot->h = h;
	p->func_ht.n++;
	return (int64_t)++p->n_funcs;
}

struct loc_key {
	uint64_t mapping_id, address;
	const struct b_line *lines;
	size_t n_lines;
};

static bool loc_eq(const struct pp_pprof *p, uint32_t idx, const void *key)
{
	const struct loc_key *k = key;
	const struct b_loc *l = &p->locs[idx];
	return l->mapping_id == k->mapping_id && l->address == k->address &&
	       l->n_lines == k->n_lines &&
	       (!k->n_lines ||
		memcmp(&p->lines[l->line_off], k->lines, k->n_lines * sizeof(*k->lines)) == 0);
}

uint64_t pp_pprof__add_location_ex(struct pp_pprof *p, uint64_t mapping_id, uint64_t address,
				   const struct pp_pprof_line *lines, size_t n_lines,
				   const struct pp_pprof_loc_info *info)
{
	int r;

	if (!p || (n_lines && !lines) || (address == 0 && n_lines == 0) || mapping_id > p->n_maps ||
	    n_lines > UINT32_MAX) {
		errno = EINVAL;
		return 0;
	}
	r = grow((void **)&p->tmp_lines, &p->cap_tmp_lines, n_lines, sizeof(*p->tmp_lines),
		 PP_PPROF_MAX_ENTRIES);
	if (r < 0)
		goto fail;
	bool all_files = true, all_lines = true;
	for (size_t i = 0; i < n_lines; i++) {
		if (!lines[i].function || !*lines[i].function) {
			r = -EINVAL;
			goto fail;
		}
		int64_t f = add_function(p, &lines[i]);
		if (f < 0) {
			r = (int)f;
			goto fail;
		}
		p->tmp_lines[i].function_id = (uint64_t)f;
		p->tmp_lines[i].line = lines[i].line;
		all_files &= lines[i].file && *lines[i].file;
		all_lines &= lines[i].line > 0;
	}

	struct loc_key k = { mapping_id, address, p->tmp_lines, n_lines };
	uint64_t hk[2] = { mapping_id, address };
	uint32_t h = hash32(hk, sizeof(hk), n_lines);
	if (n_lines)
		h ^= hash32(p->tmp_lines, n_lines * sizeof(*p->tmp_lines), 0x4c4f43);
	struct hslot *slot = htab_find(&p->loc_ht, h, loc_eq, p, &k);
	uint64_t id;
	if (slot && slot->idx1) {
		id = slot->idx1;
	} else {
		r = htab_reserve(&p->loc_ht);
		if (!r)
			r = grow((void **)&p->locs, &p->cap_locs, p->n_locs + 1, sizeof(*p->locs),
				 PP_PPROF_MAX_ENTRIES);
		if (!r)
			r = grow((void **)&p->lines, &p->cap_lines, p->n_lines + n_lines,
				 sizeof(*p->lines), PP_PPROF_MAX_REFS);
		if (r < 0)
			goto fail;
		struct b_loc *l = &p->locs[p->n_locs];
		l->mapping_id = mapping_id;
		l->address = address;
		l->line_off = p->n_lines;
		l->n_lines = (uint32_t)n_lines;
		if (n_lines)
			memcpy(&p->lines[p->n_lines], p->tmp_lines, n_lines * sizeof(*p->lines));
		p->n_lines += n_lines;
		slot = htab_find(&p->loc_ht, h, loc_eq, p, &k);
		slot->idx1 = (uint32_t)p->n_locs + 1;
		slot->h = h;
		p->loc_ht.n++;
		id = ++p->n_locs;
	}

	if (mapping_id) {
		struct b_map *m = &p->maps[mapping_id - 1];
		bool hf = n_lines > 0 && (!info || info->has_function);
		m->n_locs++;
		m->has_functions &= hf;
		m->has_filenames &= hf && all_files && (!info || info->has_file);
		m->has_line_numbers &= hf && all_lines && (!info || info->has_line);
		m->has_inline_frames &= hf && (!info || info->has_inline);
	}
	return id;
fail:
	errno = -r;
	return 0;
}

uint64_t pp_pprof__add_location(struct pp_pprof *p, uint64_t mapping_id, uint64_t address,
				const struct pp_pprof_line *lines, size_t n_lines)
{
	return pp_pprof__add_location_ex(p, mapping_id, address, lines, n_lines, NULL);
}

int pp_pprof__add_sample(struct pp_pprof *p, const uint64_t *loc_ids, size_t n_locs,
			 const int64_t *values, size_t n_values,
			 const struct pp_pprof_label *labels, size_t n_labels)
{
	int r;

	if (!p || n_values != p->n_types || (n_values && !values) || (n_locs && !loc_ids) ||
	    (n_labels && !labels) || n_locs > UINT32_MAX || n_labels > UINT32_MAX)
		return -EINVAL;
	size_t nz = 0;
	for (size_t i = 0; i < n_locs; i++) {
		if (loc_ids[i] > p->n_locs)
			return -EINVAL;
		nz += loc_ids[i] != 0;
	}
	for (size_t i = 0; i < n_labels; i++)
		if (!labels[i].key || !*labels[i].key)
			return -EINVAL;
	r = grow((void **)&p->samples, &p->cap_samples, p->n_samples + 1, sizeof(*p->samples),
		 PP_PPROF_MAX_SAMPLES);
	if (!r)
		r = grow((void **)&p->sloc, &p->cap_sloc, p->n_sloc + nz, sizeof(*p->sloc),
			 PP_PPROF_MAX_REFS);
	if (!r)
		r = grow((void **)&p->svals, &p->cap_svals, p->n_svals + n_values,
			 sizeof(*p->svals), PP_PPROF_MAX_REFS);
	if (!r)
		r = grow((void **)&p->slabs, &p->cap_slabs, p->n_slabs + n_labels,
			 sizeof(*p->slabs), PP_PPROF_MAX_REFS);
	if (r < 0)
		return r;
	/*
	 * Intern label strings first: nothing is committed until they succeed.
	 * A string label with an empty value carries nothing and is dropped
	 * (it would otherwise read as the numeric label 0).
	 */
	struct b_label *bl = &p->slabs[p->n_slabs];
	size_t nl = 0;
	for (size_t i = 0; i < n_labels; i++) {
		if (labels[i].str && !*labels[i].str)
			continue;
		int64_t k = intern(p, labels[i].key), s = 0, u = 0;
		if (k >= 0 && labels[i].str)
			s = intern(p, labels[i].str);
		if (k >= 0 && s >= 0 && !labels[i].str)
			u = intern(p, labels[i].num_unit);
		if (k < 0 || s < 0 || u < 0)
			return (int)(k < 0 ? k : s < 0 ? s : u);
		bl[nl].key = k;
		bl[nl].str = s;
		bl[nl].num = labels[i].str ? 0 : labels[i].num;
		bl[nl].num_unit = u;
		nl++;
	}
	struct b_sample *s = &p->samples[p->n_samples++];
	s->loc_off = p->n_sloc;
	s->n_locs = (uint32_t)nz;
	s->lab_off = p->n_slabs;
	s->n_labs = (uint32_t)nl;
	for (size_t i = 0; i < n_locs; i++)
		if (loc_ids[i])
			p->sloc[p->n_sloc++] = loc_ids[i];
	if (n_values)
		memcpy(&p->svals[p->n_svals], values, n_values * sizeof(*values));
	p->n_svals += n_values;
	p->n_slabs += nl;
	return 0;
}

/* ---- encode ---------------------------------------------------------- */

struct enc {
	Perftools__Profiles__ValueType *vt, **vtp, period_type;
	Perftools__Profiles__Sample *s, **sp;
	Perftools__Profiles__Label *lab, **labp;
	Perftools__Profiles__Mapping *m, **mp;
	Perftools__Profiles__Location *loc, **locp;
	Perftools__Profiles__Line *ln, **lnp;
	Perftools__Profiles__Function *f, **fp;
};

static void enc_free(struct enc *e)
{
	free(e->vt);
	free(e->vtp);
	free(e->s);
	free(e->sp);
	free(e->lab);
	free(e->labp);
	free(e->m);
	free(e->mp);
	free(e->loc);
	free(e->locp);
	free(e->ln);
	free(e->lnp);
	free(e->f);
	free(e->fp);
}

#define ALLOC_N(ptr, n) ((ptr) = calloc((n) ? (n) : 1, sizeof(*(ptr))))

static int build_msg(struct pp_pprof *p, struct enc *e, Perftools__Profiles__Profile *msg)
{
	if (!ALLOC_N(e->vt, p->n_types) || !ALLOC_N(e->vtp, p->n_types) ||
	    !ALLOC_N(e->s, p->n_samples) || !ALLOC_N(e->sp, p->n_samples) ||
	    !ALLOC_N(e->lab, p->n_slabs) || !ALLOC_N(e->labp, p->n_slabs) ||
	    !ALLOC_N(e->m, p->n_maps) || !ALLOC_N(e->mp, p->n_maps) ||
	    !ALLOC_N(e->loc, p->n_locs) || !ALLOC_N(e->locp, p->n_locs) ||
	    !ALLOC_N(e->ln, p->n_lines) || !ALLOC_N(e->lnp, p->n_lines) ||
	    !ALLOC_N(e->f, p->n_funcs) || !ALLOC_N(e->fp, p->n_funcs))
		return -ENOMEM;

	for (size_t i = 0; i < p->n_types; i++) {
		perftools__profiles__value_type__init(&e->vt[i]);
		e->vt[i].type = p->types[i][0];
		e->vt[i].unit = p->types[i][1];
		e->vtp[i] = &e->vt[i];
	}
	for (size_t i = 0; i < p->n_slabs; i++) {
		perftools__profiles__label__init(&e->lab[i]);
		e->lab[i].key = p->slabs[i].key;
		e->lab[i].str = p->slabs[i].str;
		e->lab[i].num = p->slabs[i].num;
		e->lab[i].num_unit = p->slabs[i].num_unit;
		e->labp[i] = &e->lab[i];
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		Perftools__Profiles__Sample *s = &e->s[i];
		const struct b_sample *b = &p->samples[i];
		perftools__profiles__sample__init(s);
		s->n_location_id = b->n_locs;
		s->location_id = b->n_locs ? &p->sloc[b->loc_off] : NULL;
		s->n_value = p->n_types;
		s->value = p->n_types ? &p->svals[i * p->n_types] : NULL;
		s->n_label = b->n_labs;
		s->label = b->n_labs ? &e->labp[b->lab_off] : NULL;
		e->sp[i] = s;
	}
	for (size_t i = 0; i < p->n_maps; i++) {
		Perftools__Profiles__Mapping *m = &e->m[i];
		const struct b_map *b = &p->maps[i];
		bool used = b->n_locs > 0;
		perftools__profiles__mapping__init(m);
		m->id = i + 1;
		m->memory_start = b->start;
		m->memory_limit = b->limit;
		m->file_offset = b->offset;
		m->filename = b->file;
		m->build_id = b->build_id;
		m->has_functions = used && b->has_functions;
		m->has_filenames = used && b->has_filenames;
		m->has_line_numbers = used && b->has_line_numbers;
		m->has_inline_frames = used && b->has_inline_frames;
		e->mp[i] = m;
	}
	for (size_t i = 0; i < p->n_lines; i++) {
		perftools__profiles__line__init(&e->ln[i]);
		e->ln[i].function_id = p->lines[i].function_id;
		e->ln[i].line = p->lines[i].line;
		e->lnp[i] = &e->ln[i];
	}
	for (size_t i = 0; i < p->n_locs; i++) {
		Perftools__Profiles__Location *l = &e->loc[i];
		const struct b_loc *b = &p->locs[i];
		perftools__profiles__location__init(l);
		l->id = i + 1;
		l->mapping_id = b->mapping_id;
		l->address = b->address;
		l->n_line = b->n_lines;
		l->line = b->n_lines ? &e->lnp[b->line_off] : NULL;
		e->locp[i] = l;
	}
	for (size_t i = 0; i < p->n_funcs; i++) {
		Perftools__Profiles__Function *f = &e->f[i];
		perftools__profiles__function__init(f);
		f->id = i + 1;
		f->name = p->funcs[i].name;
		f->system_name = p->funcs[i].system_name;
		f->filename = p->funcs[i].filename;
		f->start_line = p->funcs[i].start_line;
		e->fp[i] = f;
	}

	perftools__profiles__profile__init(msg);
	msg->n_sample_type = p->n_types;
	msg->sample_type = e->vtp;
	msg->n_sample = p->n_samples;
	msg->sample = e->sp;
	msg->n_mapping = p->n_maps;
	msg->mapping = e->mp;
	msg->n_location = p->n_locs;
	msg->location = e->locp;
	msg->n_function = p->n_funcs;
	msg->function = e->fp;
	msg->n_string_table = p->n_strs;
	msg->string_table = p->strs;
	msg->time_nanos = p->time_nanos;
	msg->duration_nanos = p->duration_nanos;
	if (p->has_period_type) {
		perftools__profiles__value_type__init(&e->period_type);
		e->period_type.type = p->period_type[0];
		e->period_type.unit = p->period_type[1];
		msg->period_type = &e->period_type;
	}
	msg->period = p->period;
	msg->n_comment = p->n_comments;
	msg->comment = p->comments;
	msg->default_sample_type = p->default_type;
	return 0;
}

int pp_pprof__encode(struct pp_pprof *p, bool gzip, struct pp_buf *out)
{
	struct enc e = { 0 };
	Perftools__Profiles__Profile msg;
	int r;

	if (!p || !out || p->n_types == 0)
		return -EINVAL;
	r = build_msg(p, &e, &msg);
	if (r < 0)
		goto out;
	size_t sz = perftools__profiles__profile__get_packed_size(&msg);
	if (!gzip) {
		r = pp_buf_reserve(out, sz);
		if (r < 0)
			goto out;
		size_t n =
			perftools__profiles__profile__pack(&msg, (uint8_t *)out->data + out->len);
		out->len += n;
		out->data[out->len] = '\0';
		r = 0;
	} else {
		uint8_t *tmp = malloc(sz ? sz : 1);
		if (!tmp) {
			r = -ENOMEM;
			goto out;
		}
		size_t n = perftools__profiles__profile__pack(&msg, tmp);
		r = pp_gzip(tmp, n, out);
		free(tmp);
	}
out:
	enc_free(&e);
	return r;
}

/* ---- gzip ------------------------------------------------------------ */

#define ZCHUNK (256u << 10)

int pp_gzip(const void *in, size_t len, struct pp_buf *out)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (!out || (len && !in))
		return -EINVAL;
	/* Level 1 like Go's runtime/pprof: profiles are served while the client waits. */
	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	size_t start = out->len;
	const unsigned char *src = in;
	size_t left = len;
	int r = 0, zr;
	do {
		if (!z.avail_in && left) {
			z.next_in = (unsigned char *)src;
			z.avail_in = left > ZCHUNK * 64 ? ZCHUNK * 64 : (uInt)left;
			src += z.avail_in;
			left -= z.avail_in;
		}
		r = pp_buf_reserve(out, ZCHUNK);
		if (r < 0)
			break;
		z.next_out = (unsigned char *)out->data + out->len;
		z.avail_out = ZCHUNK;
		zr = deflate(&z, left || z.avail_in ? Z_NO_FLUSH : Z_FINISH);
		if (zr == Z_STREAM_ERROR) {
			r = -EIO;
			break;
		}
		out->len += ZCHUNK - z.avail_out;
	} while (zr != Z_STREAM_END);
	deflateEnd(&z);
	if (r < 0)
		out->len = start;
	if (out->data)
		out->data[out->len] = '\0';
	return r;
}

int pp_gunzip(const void *in, size_t len, size_t max_out, struct pp_buf *out)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (!out || (len && !in))
		return -EINVAL;
	if (inflateInit2(&z, 31) != Z_OK)
		return -ENOMEM;
	size_t start = out->len;
	const unsigned char *src = in;
	size_t left = len;
	int r = 0, zr = Z_OK;
	while (zr != Z_STREAM_END) {
		if (!z.avail_in) {
			if (!left) {
				r = -EBADMSG; /* truncated */
				break;
			}
			z.next_in = (unsigned char *)src;
			z.avail_in = left > ZCHUNK * 64 ? ZCHUNK * 64 : (uInt)left;
			src += z.avail_in;
			left -= z.avail_in;
		}
		size_t produced = out->len - start;
		if (produced > max_out) {
			r = -EFBIG;
			break;
		}
		/* One byte past max_out tells "exactly max_out" from "more". */
		size_t room = max_out - produced >= ZCHUNK ? ZCHUNK : max_out - produced + 1;
		r = pp_buf_reserve(out, room);
		if (r < 0)
			break;
		z.next_out = (unsigned char *)out->data + out->len;
		z.avail_out = (uInt)room;
		zr = inflate(&z, Z_NO_FLUSH);
		out->len += room - z.avail_out;
		if (zr == Z_NEED_DICT || zr == Z_DATA_ERROR || zr == Z_STREAM_ERROR) {
			r = -EBADMSG;
			break;
		}
		if (zr == Z_MEM_ERROR) {
			r = -ENOMEM;
			break;
		}
		if (out->len - start > max_out) {
			r = -EFBIG;
			break;
		}
		if (zr == Z_BUF_ERROR && !z.avail_in && !left) {
			r = -EBADMSG;
			break;
		}
	}
	inflateEnd(&z);
	if (r < 0)
		out->len = start;
	if (out->data)
		out->data[out->len] = '\0';
	return r;
}

/* ---- decode and check ------------------------------------------------ */

int pp_pprof_decode(const void *buf, size_t len, pp_pprof_profile **ret)
{
	struct pp_buf raw = { 0 };
	const uint8_t *data = buf;
	int r;

	if (!ret || (len && !buf))
		return -EINVAL;
	if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
		r = pp_gunzip(buf, len, PP_PPROF_MAX_DECODED, &raw);
		if (r < 0) {
			pp_buf_free(&raw);
			return r;
		}
		data = (const uint8_t *)raw.data;
		len = raw.len;
	}
	Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, len, data);
	pp_buf_free(&raw);
	if (!p)
		return -EBADMSG;
	*ret = p;
	return 0;
}

void pp_pprof_profile__free(pp_pprof_profile *prof)
{
	if (prof)
		perftools__profiles__profile__free_unpacked(prof, NULL);
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
						      ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

#define STR_OK(x) ((x) >= 0 && (uint64_t)(x) < prof->n_string_table)

int pp_pprof_check(const pp_pprof_profile *prof, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!prof)
		return fail(err, errlen, "no profile");

	/* strings */
	if (prof->n_string_table == 0 || !prof->string_table[0] || prof->string_table[0][0])
		return fail(err, errlen, "string_table[0] must be \"\"");
	for (size_t i = 0; i < prof->n_string_table; i++) {
		const char *s = prof->string_table[i];
		if (!s || !utf8_valid(s, strlen(s)))
			return fail(err, errlen, "string_table[%zu] is not valid UTF-8", i);
	}

	/* sample types */
	if (prof->n_sample_type == 0)
		return fail(err, errlen, "at least one sample_type is required");
	for (size_t i = 0; i < prof->n_sample_type; i++) {
		const Perftools__Profiles__ValueType *vt = prof->sample_type[i];
		if (!STR_OK(vt->type) || !STR_OK(vt->unit))
			return fail(err, errlen, "sample_type[%zu]: string index out of range", i);
		if (strchr(prof->string_table[vt->type], '-'))
			return fail(err, errlen, "sample_type[%zu] name \"%s\" contains '-'", i,
				    prof->string_table[vt->type]);
	}
	if (prof->period_type &&
	    (!STR_OK(prof->period_type->type) || !STR_OK(prof->period_type->unit)))
		return fail(err, errlen, "period_type: string index out of range");
	if (!STR_OK(prof->drop_frames) || !STR_OK(prof->keep_frames))
		return fail(err, errlen, "drop_frames/keep_frames: string index out of range");
	for (size_t i = 0; i < prof->n_comment; i++)
		if (!STR_OK(prof->comment[i]))
			return fail(err, errlen, "comment[%zu]: string index out of range", i);
	if (!STR_OK(prof->default_sample_type))
		return fail(err, errlen, "default_sample_type: string index out of range");
	if (prof->default_sample_type) {
		bool found = false;
		for (size_t i = 0; i < prof->n_sample_type; i++)
			found |= strcmp(prof->string_table[prof->sample_type[i]->type],
					prof->string_table[prof->default_sample_type]) == 0;
		if (!found)
			return fail(err, errlen,
				    "default_sample_type \"%s\" does not name a sample_type",
				    prof->string_table[prof->default_sample_type]);
	}
	if (prof->time_nanos == 0)
		return fail(err, errlen, "time_nanos must be set");
	if (prof->duration_nanos < 0)
		return fail(err, errlen, "duration_nanos is negative");

	/* functions */
	for (size_t i = 0; i < prof->n_function; i++) {
		const Perftools__Profiles__Function *f = prof->function[i];
		if (f->id != i + 1)
			return fail(err, errlen,
				    "function ids must be 1..N in order: function[%zu].id = %llu",
				    i, (unsigned long long)f->id);
		if (!STR_OK(f->name) || !STR_OK(f->system_name) || !STR_OK(f->filename))
			return fail(err, errlen, "function %llu: string index out of range",
				    (unsigned long long)f->id);
	}

	/* mappings */
	for (size_t i = 0; i < prof->n_mapping; i++) {
		const Perftools__Profiles__Mapping *m = prof->mapping[i];
		if (m->id != i + 1)
			return fail(err, errlen,
				    "mapping ids must be 1..N in order: mapping[%zu].id = %llu", i,
				    (unsigned long long)m->id);
		if (!STR_OK(m->filename) || !STR_OK(m->build_id))
			return fail(err, errlen, "mapping %llu: string index out of range",
				    (unsigned long long)m->id);
		if (m->has_inline_frames && !m->has_functions)
			return fail(err, errlen,
				    "mapping %llu: has_inline_frames without has_functions",
				    (unsigned long long)m->id);
		if ((m->has_filenames || m->has_line_numbers) && !m->has_functions)
			return fail(err, errlen,
				    "mapping %llu: has_filenames/has_line_numbers without "
				    "has_functions",
				    (unsigned long long)m->id);
	}

	/* locations */
	for (size_t i = 0; i < prof->n_location; i++) {
		const Perftools__Profiles__Location *l = prof->location[i];
		unsigned long long id = (unsigned long long)l->id;
		if (l->id != i + 1)
			return fail(err, errlen,
				    "location ids must be 1..N in order: location[%zu].id = %llu",
				    i, id);
		if (l->address == 0 && l->n_line == 0)
			return fail(err, errlen, "location %llu has address 0 and no lines", id);
		if (l->mapping_id > prof->n_mapping)
			return fail(err, errlen, "location %llu: mapping_id %llu does not exist",
				    id, (unsigned long long)l->mapping_id);
		const Perftools__Profiles__Mapping *m =
			l->mapping_id ? prof->mapping[l->mapping_id - 1] : NULL;
		if (m && m->has_functions && l->n_line == 0)
			return fail(err, errlen,
				    "location %llu has no lines but mapping %llu has_functions", id,
				    (unsigned long long)m->id);
		for (size_t j = 0; j < l->n_line; j++) {
			const Perftools__Profiles__Line *ln = l->line[j];
			if (ln->function_id == 0 || ln->function_id > prof->n_function)
				return fail(err, errlen,
					    "location %llu line %zu: function_id %llu does not "
					    "exist",
					    id, j, (unsigned long long)ln->function_id);
			const Perftools__Profiles__Function *f =
				prof->function[ln->function_id - 1];
			if (!m)
				continue;
			if (m->has_functions && f->name == 0)
				return fail(err, errlen,
					    "location %llu: function without name but mapping %llu "
					    "has_functions",
					    id, (unsigned long long)m->id);
			if (m->has_filenames && f->filename == 0)
				return fail(err, errlen,
					    "location %llu: function without filename but mapping "
					    "%llu has_filenames",
					    id, (unsigned long long)m->id);
			if (m->has_line_numbers && ln->line <= 0)
				return fail(err, errlen,
					    "location %llu: line without number but mapping %llu "
					    "has_line_numbers",
					    id, (unsigned long long)m->id);
		}
	}

	/* samples */
	for (size_t i = 0; i < prof->n_sample; i++) {
		const Perftools__Profiles__Sample *s = prof->sample[i];
		if (s->n_value != prof->n_sample_type)
			return fail(err, errlen,
				    "sample %zu has %zu values, expected len(sample_type) = %zu", i,
				    s->n_value, prof->n_sample_type);
		for (size_t j = 0; j < s->n_location_id; j++)
			if (s->location_id[j] == 0 || s->location_id[j] > prof->n_location)
				return fail(err, errlen,
					    "sample %zu: location_id %llu does not exist", i,
					    (unsigned long long)s->location_id[j]);
		for (size_t j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *lb = s->label[j];
			if (!STR_OK(lb->key) || !STR_OK(lb->str) || !STR_OK(lb->num_unit))
				return fail(err, errlen,
					    "sample %zu label %zu: string index out of range", i,
					    j);
			if (lb->key == 0)
				return fail(err, errlen, "sample %zu label %zu: empty key", i, j);
		}
	}
	return 0;
}
