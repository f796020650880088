/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel symbols (/proc/kallsyms) and JIT symbols (/tmp/perf-PID.map).
 * Called with the symbolizer's lock held.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "sym-internal.h"
#include "util/util.h"

#define KALLSYMS_MAX_BYTES ((size_t)256 << 20)
#define KALLSYMS_RETRY_NS (10ull * 1000000000ull)
#define KSYM_LAST_SPAN 0x100000ull /* the last symbol covers at most 1 MiB */

#define JIT_MAX_BYTES ((size_t)64 << 20)
#define JIT_MAX_ENTRIES 2000000u
#define JIT_MAX_MAPS 32u
#define JIT_STAT_NS (1000000000ull) /* re-stat a perf map at most once a second */
/*
 * A changed perf map is read again (the whole file, up to JIT_MAX_BYTES)
 * at most JIT_RELOAD_BURST times in a row, then once a second: a JIT that
 * appends all the time while lookups miss would otherwise cost a full
 * re-read per miss. Skipped reloads are counted (jit_reloads_deferred).
 */
#define JIT_RELOAD_BURST 3u
#define JIT_RELOAD_NS (1000000000ull)

/*
 * Text symbols only, sorted, as 32-bit offsets from the lowest address
 * (kernel text, BPF programs and modules lie within 2 GiB of each other on
 * x86-64 and arm64), 4 bytes a symbol. Names are kept in blocks of
 * KSYM_BLOCK consecutive symbols, each block's NUL-separated names
 * deflated on its own (zlib): ~3 MB of names take ~0.7 MB, and a lookup
 * inflates one block of ~2 KB. About 1.2 MB for 120,000 symbols. Loaded at
 * the first kernel address (kernel stacks come only from CPU and off-CPU
 * windows).
 */
#define KSYM_BLOCK 64u
#define KSYM_ZBITS 13 /* deflate window: 8 KiB (a block is ~2 KB) */

/* a symbol while parsing, before its address is made relative */
struct ksym_tmp {
	uint64_t addr;
	uint32_t name;
};

struct pp_ksyms {
	uint32_t *off; /* n addresses - base, sorted */
	size_t n;
	uint64_t base;
	uint32_t *blk; /* n_blk + 1 offsets into z: block i is z[blk[i]..blk[i+1]) */
	size_t n_blk;
	uint8_t *z;
	size_t z_len;
	char *raw; /* one inflated block (raw_cap bytes), the lookups' scratch */
	size_t raw_cap;
	z_stream inf; /* raw inflate, reset per lookup */
	bool inf_ready;
	uint64_t failed_at; /* last failed load (no privilege), 0 when loaded */
};

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym_tmp *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static bool is_text_type(char t)
{
	return t == 't' || t == 'T' || t == 'w' || t == 'W';
}

/* One kallsyms line ("ADDR TYPE NAME[\t[MOD]]", NUL-terminated, newline
 * removed) appended to v/names. 1 if it is not a text symbol, 2 if its
 * address is zero (no privilege), 0 appended, <0 error. */
static int ksyms_line(char *line, struct ksym_tmp **v, size_t *n, size_t *cap, struct pp_buf *names)
{
	char *sp = strchr(line, ' ');
	if (!sp || sp[1] == '\0' || sp[2] != ' ')
		return 1;
	*sp = '\0';
	char type = sp[1];
	char *name = sp + 3, *mod = strchr(name, '\t');
	if (mod)
		*mod++ = '\0';
	uint64_t addr;
	if (pp_parse_u64(line, 16, 0, UINT64_MAX, &addr) < 0)
		return 1;
	if (!addr)
		return 2;
	if (!is_text_type(type) || !*name)
		return 1;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 65536;
		struct ksym_tmp *nv = reallocarray(*v, nc, sizeof(**v));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	size_t off = names->len;
	if (names->len > UINT32_MAX - 1024)
		return -E2BIG;
	int r;
	/* modules: "name [mod]" (kallsyms prints the module as "[mod]") */
	if (mod && *mod)
		r = pp_buf_printf(names, "%s %s", name, mod);
	else
		r = pp_buf_puts(names, name);
	if (r == 0)
		r = pp_buf_append(names, "", 1);
	if (r < 0)
		return r;
	(*v)[*n].addr = addr;
	(*v)[*n].name = (uint32_t)off;
	(*n)++;
	return 0;
}

static void ksyms_clear(struct pp_ksyms *k)
{
	if (k->inf_ready)
		inflateEnd(&k->inf);
	k->inf_ready = false;
	free(k->off);
	free(k->blk);
	free(k->z);
	free(k->raw);
	k->off = k->blk = NULL;
	k->z = NULL;
	k->raw = NULL;
	k->n = k->n_blk = k->z_len = k->raw_cap = 0;
}

/* Sorted tmp -> k's compact table and deflated name blocks; symbols more
 * than 4 GiB above the lowest are left out. */
static int ksyms_compact(struct pp_ksyms *k, struct ksym_tmp *v, size_t n, struct pp_buf *names)
{
	struct pp_buf raw = { .max = KALLSYMS_MAX_BYTES }, z = { .max = KALLSYMS_MAX_BYTES };
	size_t keep = 0, raw_cap = 1;
	uint32_t *off = NULL, *blk = NULL;
	int r = -ENOMEM;

	qsort(v, n, sizeof(*v), ksym_cmp);
	while (keep < n && v[keep].addr - v[0].addr <= UINT32_MAX)
		keep++;
	size_t n_blk = (keep + KSYM_BLOCK - 1) / KSYM_BLOCK;
	off = calloc(keep, sizeof(*off));
	blk = calloc(n_blk + 1, sizeof(*blk));
	if (!off || !blk)
		goto fail;
	for (size_t i = 0; i < keep; i++)
		off[i] = (uint32_t)(v[i].addr - v[0].addr);
	/* one raw deflate stream reset per block: compress2 would set up (and clear) 256 KiB
	 * of state for each of ~2,000 blocks (0.6 s); a 8 KiB window is enough for ~2 KB */
	z_stream zs = { 0 };
	if (deflateInit2(&zs, 6, Z_DEFLATED, -KSYM_ZBITS, 3, Z_DEFAULT_STRATEGY) != Z_OK)
		goto fail;
	for (size_t b = 0; b < n_blk; b++) {
		pp_buf_reset(&raw);
		for (size_t i = b * KSYM_BLOCK; i < keep && i < (b + 1) * KSYM_BLOCK; i++) {
			const char *nm = names->data + v[i].name;
			r = pp_buf_append(&raw, nm, strlen(nm) + 1);
			if (r < 0)
				break;
		}
		size_t zl = r < 0 ? 0 : deflateBound(&zs, raw.len);
		if (r == 0)
			r = pp_buf_reserve(&z, zl);
		if (r == 0 && deflateReset(&zs) != Z_OK)
			r = -ENOMEM;
		if (r == 0) {
			zs.next_in = (Bytef *)raw.data;
			zs.avail_in = (uInt)raw.len;
			zs.next_out = (Bytef *)z.data + z.len;
			zs.avail_out = (uInt)zl;
			if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
				r = -ENOMEM;
		}
		if (r == 0 && z.len + (zl - zs.avail_out) > UINT32_MAX)
			r = -E2BIG;
		if (r < 0) {
			deflateEnd(&zs);
			goto fail;
		}
		raw_cap = PP_MAX(raw_cap, raw.len);
		z.len += zl - zs.avail_out;
		blk[b + 1] = (uint32_t)z.len;
	}
	deflateEnd(&zs);
	char *scratch = malloc(raw_cap);
	if (!scratch) {
		r = -ENOMEM;
		goto fail;
	}
	/* the exact size: pp_buf grows by doubling */
	uint8_t *zd = realloc(z.data, z.len ? z.len : 1);
	if (zd)
		z.data = (char *)zd;
	ksyms_clear(k);
	k->off = off;
	k->n = keep;
	k->base = v[0].addr;
	k->blk = blk;
	k->n_blk = n_blk;
	k->z_len = z.len;
	k->z = (uint8_t *)pp_buf_steal(&z, NULL);
	k->raw = scratch;
	k->raw_cap = raw_cap;
	/* in place: zlib's state points back at its z_stream */
	memset(&k->inf, 0, sizeof(k->inf));
	k->inf_ready = inflateInit2(&k->inf, -KSYM_ZBITS) == Z_OK;
	pp_buf_free(&raw);
	return 0;
fail:
	free(off);
	free(blk);
	pp_buf_free(&raw);
	pp_buf_free(&z);
	return r;
}

/* The name of symbol i, inflated into k->raw; NULL if its block does not
 * inflate to what was deflated. */
static const char *ksym_name(struct pp_ksyms *k, size_t i)
{
	size_t b = i / KSYM_BLOCK;
	if (!k->inf_ready || inflateReset(&k->inf) != Z_OK)
		return NULL;
	k->inf.next_in = k->z + k->blk[b];
	k->inf.avail_in = k->blk[b + 1] - k->blk[b];
	k->inf.next_out = (Bytef *)k->raw;
	k->inf.avail_out = (uInt)k->raw_cap;
	if (inflate(&k->inf, Z_FINISH) != Z_STREAM_END)
		return NULL;
	size_t rl = k->raw_cap - k->inf.avail_out;
	const char *p = k->raw, *end = k->raw + rl;
	for (size_t j = b * KSYM_BLOCK; j < i; j++) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul)
			return NULL;
		p = nul + 1;
	}
	if (p >= end || !memchr(p, '\0', (size_t)(end - p)))
		return NULL;
	return p;
}

/* Reads kallsyms line by line (no copy of the whole ~5 MiB text). -ENOENT
 * when every address is zero (no privilege). */
static int ksyms_load(struct pp_ksyms *k, const char *path)
{
	struct pp_buf names = { .max = KALLSYMS_MAX_BYTES };
	struct ksym_tmp *v = NULL;
	size_t n = 0, cap = 0, total = 0;
	bool nonzero = false;
	char line[512];
	int r = 0;

	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		size_t ll = strlen(line);
		total += ll;
		if (total > KALLSYMS_MAX_BYTES) {
			r = -EFBIG;
			goto out;
		}
		if (ll && line[ll - 1] != '\n' && !feof(f)) {
			/* longer than any symbol line: skip the rest of it */
			int c;
			while ((c = fgetc(f)) != EOF && c != '\n')
				total++;
			continue;
		}
		if (ll && line[ll - 1] == '\n')
			line[--ll] = '\0';
		if (!ll)
			continue;
		r = ksyms_line(line, &v, &n, &cap, &names);
		if (r < 0)
			goto out;
		if (r != 2)
			nonzero = true;
		r = 0;
	}
	if (ferror(f)) {
		r = -EIO;
		goto out;
	}
	if (!nonzero || n == 0) {
		r = -ENOENT;
		goto out;
	}
	r = ksyms_compact(k, v, n, &names);
out:
	fclose(f);
	free(v);
	pp_buf_free(&names);
	return r;
}

void pp_ksyms__free(struct pp_ksyms *k)
{
	if (!k)
		return;
	ksyms_clear(k);
	free(k);
}

uint64_t pp_ksyms__bytes(const struct pp_ksyms *k)
{
	return k ? k->n * sizeof(*k->off) + (k->n_blk + 1) * sizeof(*k->blk) + k->z_len + k->raw_cap
		 : 0;
}

int pp_ksyms__resolve(struct pp_ksyms **kp, uint64_t addr, struct pp_sym_result *ret)
{
	struct pp_ksyms *k = *kp;
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k)
			return -ENOMEM;
		*kp = k;
	}
	if (k->n == 0) {
		uint64_t now = pp_now_mono_ns();
		if (k->failed_at && now - k->failed_at < KALLSYMS_RETRY_NS)
			return -ENOENT;
		int r = ksyms_load(k, "/proc/kallsyms");
		if (r < 0) {
			k->failed_at = now ? now : 1;
			pp_dbg("symbolize: /proc/kallsyms unusable: %s", strerror(-r));
			return -ENOENT;
		}
		k->failed_at = 0;
#ifdef __GLIBC__
		/* the parse's ~6 MB of temporary arrays are free now: give them back */
		malloc_trim(0);
#endif
	}
	if (addr < k->base || addr - k->base > UINT32_MAX)
		return -ENOENT;
	uint32_t off = (uint32_t)(addr - k->base);
	/* last symbol at or below the address */
	size_t lo = 0, hi = k->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->off[mid] <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	uint64_t end = lo < k->n ? k->off[lo] : (uint64_t)k->off[lo - 1] + KSYM_LAST_SPAN;
	if (off >= end)
		return -ENOENT;
	const char *name = ksym_name(k, lo - 1);
	if (!name)
		return -ENOENT;
	return pp_sym__result_one(ret, name, true);
}

/* ---- perf maps ---- */

struct jsym {
	uint64_t start, size;
	uint32_t name;
	uint32_t seq; /* line number: a later line wins over an earlier overlapping one */
};

struct jitmap {
	pid_t pid;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	uint64_t checked_at;
	unsigned reload_tokens; /* JIT_RELOAD_BURST bucket, one more per JIT_RELOAD_NS */
	uint64_t tokens_at;
	bool present;
	struct jsym *v;
	size_t n;
	char *names;
	size_t names_len;
	uint64_t used; /* LRU clock */
};

struct pp_jitmaps {
	struct jitmap m[JIT_MAX_MAPS];
	size_t n;
	uint64_t clock;
	uint64_t reloads_deferred;
};

static void jitmap_clear(struct jitmap *m)
{
	free(m->v);
	free(m->names);
	memset(m, 0, sizeof(*m));
}

void pp_jitmaps__free(struct pp_jitmaps *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++)
		jitmap_clear(&j->m[i]);
	free(j);
}

uint64_t pp_jitmaps__reloads_deferred(const struct pp_jitmaps *j)
{
	return j ? j->reloads_deferred : 0;
}

uint64_t pp_jitmaps__bytes(const struct pp_jitmaps *j)
{
	uint64_t b = 0;
	if (!j)
		return 0;
	for (size_t i = 0; i < j->n; i++)
		b += j->m[i].n * sizeof(struct jsym) + j->m[i].names_len;
	return b;
}

static int jsym_cmp(const void *a, const void *b)
{
	const struct jsym *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* "START SIZE name" lines, hex numbers with or without 0x. Bad lines are skipped. */
static int jit_parse(struct jitmap *m, const char *buf, size_t len)
{
	struct pp_buf names = { .max = JIT_MAX_BYTES };
	struct jsym *v = NULL;
	size_t n = 0, cap = 0;
	const char *p = buf, *end = buf + len;
	uint32_t seq = 0;

	while (p < end && n < JIT_MAX_ENTRIES) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *l = p;
		p = nl ? nl + 1 : end;
		seq++;
		char num[2][24];
		const char *q = l;
		bool ok = true;
		for (int f = 0; f < 2 && ok; f++) {
			const char *s0 = q;
			while (q < le && *q != ' ')
				q++;
			size_t nl2 = (size_t)(q - s0);
			if (nl2 == 0 || nl2 >= sizeof(num[f]) || q >= le) {
				ok = false;
				break;
			}
			memcpy(num[f], s0, nl2);
			num[f][nl2] = '\0';
			q++;
		}
		if (!ok)
			continue;
		uint64_t start, size;
		const char *a = num[0], *b = num[1];
		if (!strncmp(a, "0x", 2))
			a += 2;
		if (!strncmp(b, "0x", 2))
			b += 2;
		if (pp_parse_u64(a, 16, 0, UINT64_MAX, &start) < 0 ||
		    pp_parse_u64(b, 16, 1, UINT64_MAX - start, &size) < 0)
			continue;
		size_t namelen = (size_t)(le - q);
		if (namelen > 0 && q[namelen - 1] == '\r')
			namelen--;
		if (namelen == 0 || names.len > UINT32_MAX - namelen - 1)
			continue;
		if (pp_grow(&v, &cap, n + 1, sizeof(*v), 256) < 0)
			goto nomem;
		size_t off = names.len;
		if (pp_buf_append(&names, q, namelen) < 0 || pp_buf_append(&names, "", 1) < 0)
			break; /* name space exhausted: keep what we have */
		v[n++] = (struct jsym){
			.start = start, .size = size, .name = (uint32_t)off, .seq = seq
		};
	}
	if (n)
		qsort(v, n, sizeof(*v), jsym_cmp);
	free(m->v);
	free(m->names);
	m->v = v;
	m->n = n;
	m->names_len = names.len;
	m->names = n ? pp_buf_steal(&names, NULL) : NULL;
	pp_buf_free(&names);
	return 0;
nomem:
	free(v);
	pp_buf_free(&names);
	return -ENOMEM;
}

/* The pid the target sees itself as (last NSpid field), or pid. */
static pid_t ns_pid(pid_t pid)
{
	char path[64];
	_cleanup_free_ char *buf = NULL;
	size_t len;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (pp_read_file(path, 1 << 20, &buf, &len) < 0)
		return pid;
	const char *l = strstr(buf, "\nNSpid:");
	if (!l)
		return pid;
	l += 7;
	const char *e = strchr(l, '\n');
	size_t ll = e ? (size_t)(e - l) : strlen(l);
	const char *last = NULL;
	for (size_t i = 0; i < ll; i++)
		if ((l[i] == '\t' || l[i] == ' ') && i + 1 < ll && l[i + 1] != '\t' &&
		    l[i + 1] != ' ')
			last = l + i + 1;
	if (!last)
		return pid;
	char num[24];
	size_t nl = (size_t)(l + ll - last);
	if (nl >= sizeof(num))
		return pid;
	memcpy(num, last, nl);
	num[nl] = '\0';
	uint64_t v;
	if (pp_parse_u64(num, 10, 1, INT32_MAX, &v) < 0)
		return pid;
	return (pid_t)v;
}

int pp_sym__open_perf_map_direct(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)ns_pid(pid));
	return pp_sym__open_in_root_direct(pid, path);
}

/* May a changed map be read again now? */
static bool jit_may_reload(struct jitmap *m, uint64_t now)
{
	if (!m->present)
		return true; /* the first load, or the file had gone */
	if (!m->tokens_at || m->reload_tokens >= JIT_RELOAD_BURST) {
		if (!m->tokens_at)
			m->reload_tokens = JIT_RELOAD_BURST;
		m->tokens_at = now;
	}
	uint64_t add = (now - m->tokens_at) / JIT_RELOAD_NS;
	if (add) {
		m->reload_tokens =
			(unsigned)PP_MIN((uint64_t)JIT_RELOAD_BURST, m->reload_tokens + add);
		m->tokens_at += add * JIT_RELOAD_NS;
	}
	return m->reload_tokens > 0;
}

/* 0 unchanged, 1 read again, -EAGAIN changed but not read again (rate), <0 error. */
static int jit_refresh(struct jitmap *m, pid_t pid, uint64_t now)
{
	_cleanup_close_ int fd = pp_sym__open_perf_map(pid);
	if (fd < 0) {
		free(m->v);
		free(m->names);
		m->v = NULL;
		m->names = NULL;
		m->n = m->names_len = 0;
		m->present = false;
		return fd;
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (m->present && st.st_dev == m->dev && st.st_ino == m->ino && st.st_size == m->size &&
	    st.st_mtim.tv_sec == m->mtime.tv_sec && st.st_mtim.tv_nsec == m->mtime.tv_nsec)
		return 0;
	if (!jit_may_reload(m, now))
		return -EAGAIN;
	if (m->present && m->reload_tokens > 0)
		m->reload_tokens--;
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int r = pp_read_fd(fd, JIT_MAX_BYTES, &buf, &len);
	if (r == -EFBIG)
		return r;
	if (r < 0)
		return r;
	r = jit_parse(m, buf, len);
	if (r < 0)
		return r;
	m->present = true;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->size = st.st_size;
	m->mtime = st.st_mtim;
	return 1;
}

static const struct jsym *jit_lookup(const struct jitmap *m, uint64_t addr)
{
	size_t lo = PP_UPPER_BOUND(m->v, m->n, start, addr);
	/* The covering entry from the latest line wins; look back a bounded distance. */
	const struct jsym *best = NULL;
	for (size_t i = lo, k = 0; i > 0 && k < 64; i--, k++) {
		const struct jsym *s = &m->v[i - 1];
		if (addr - s->start < s->size && (!best || s->seq > best->seq))
			best = s;
	}
	return best;
}

int pp_jitmaps__resolve(struct pp_jitmaps **jp, pid_t pid, uint64_t addr, struct pp_sym_result *ret)
{
	struct pp_jitmaps *j = *jp;
	if (!j) {
		j = calloc(1, sizeof(*j));
		if (!j)
			return -ENOMEM;
		*jp = j;
	}
	struct jitmap *m = NULL;
	for (size_t i = 0; i < j->n; i++)
		if (j->m[i].pid == pid)
			m = &j->m[i];
	if (!m) {
		if (j->n < JIT_MAX_MAPS) {
			m = &j->m[j->n++];
		} else {
			m = &j->m[0];
			for (size_t i = 1; i < j->n; i++)
				if (j->m[i].used < m->used)
					m = &j->m[i];
			jitmap_clear(m);
		}
		m->pid = pid;
	}
	m->used = ++j->clock;
	uint64_t now = pp_now_mono_ns();
	bool refreshed = false;
	if (!m->checked_at || now - m->checked_at >= JIT_STAT_NS || !m->present) {
		int r = jit_refresh(m, pid, now);
		m->checked_at = now;
		refreshed = true;
		if (r == -EAGAIN)
			j->reloads_deferred++;
		else if (r < 0)
			pp_dbg("symbolize: perf map of pid %d: %s", (int)pid, strerror(-r));
	}
	const struct jsym *best = jit_lookup(m, addr);
	if (!best && !refreshed) {
		/* new JIT code is usually what a miss means: check the file once more */
		int r = jit_refresh(m, pid, now);
		if (r == 1)
			best = jit_lookup(m, addr);
		else if (r == -EAGAIN)
			j->reloads_deferred++;
		m->checked_at = now;
	}
	if (!best)
		return -ENOENT;
	return pp_sym__result_one(ret, m->names + best->name, true);
}
