/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /proc/PID/maps parsing and the safe resolution of the file behind a
 * mapping (map_files first, then /proc/PID/root/<path> with a dev/inode
 * check).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <unistd.h>

#include "procfs.h"
#include "procfs-internal.h"
#include "util/log.h"
#include "util/util.h"

#define DELETED_SUFFIX " (deleted)"

/*
 * One maps line is "start-end perms offset major:minor inode [padding path]".
 * The fixed part is under 100 bytes and the kernel prints at most PATH_MAX
 * bytes of path (plus escapes and the deleted suffix), so longer lines are
 * garbage.
 */
#define MAPS_MAX_LINE (PATH_MAX * 4 + 128)

/* Parse 1..max_digits hex digits at *p (no 0x). Advances *p. */
static int parse_hex(const char **p, const char *end, unsigned max_digits, uint64_t *ret)
{
	const char *s = *p;
	uint64_t v = 0;
	unsigned n = 0;

	while (s < end) {
		unsigned d;
		char c = *s;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			break;
		if (++n > max_digits)
			return -ERANGE;
		v = (v << 4) | d;
		s++;
	}
	if (n == 0)
		return -EINVAL;
	*p = s;
	*ret = v;
	return 0;
}

static int parse_dec(const char **p, const char *end, uint64_t *ret)
{
	const char *s = *p;
	uint64_t v = 0;
	unsigned n = 0;

	while (s < end && *s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
		s++;
		n++;
	}
	if (n == 0)
		return -EINVAL;
	*p = s;
	*ret = v;
	return 0;
}

static int expect(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

/*
 * Parse one line (without its newline) into m. The path is returned as
 * (offset into line, length) so the caller can copy it into its arena.
 */
static int parse_line(const char *line, size_t len, struct pp_map *m, size_t *ret_path_off,
		      size_t *ret_path_len)
{
	const char *p = line, *end = line + len;
	uint64_t major, minor;
	int r;

	memset(m, 0, sizeof(*m));
	if ((r = parse_hex(&p, end, 16, &m->start)) < 0 || (r = expect(&p, end, '-')) < 0 ||
	    (r = parse_hex(&p, end, 16, &m->end)) < 0 || (r = expect(&p, end, ' ')) < 0)
		return -EINVAL;
	if (m->start >= m->end)
		return -EINVAL;

	if (end - p < 5)
		return -EINVAL;
	if (p[0] == 'r')
		m->prot |= PP_PROT_R;
	else if (p[0] != '-')
		return -EINVAL;
	if (p[1] == 'w')
		m->prot |= PP_PROT_W;
	else if (p[1] != '-')
		return -EINVAL;
	if (p[2] == 'x')
		m->prot |= PP_PROT_X;
	else if (p[2] != '-')
		return -EINVAL;
	if (p[3] == 's')
		m->shared = true;
	else if (p[3] != 'p')
		return -EINVAL;
	p += 4;
	if (expect(&p, end, ' ') < 0)
		return -EINVAL;

	if (parse_hex(&p, end, 16, &m->offset) < 0 || expect(&p, end, ' ') < 0)
		return -EINVAL;
	/* The kernel prints MAJOR (12 bits) and MINOR (20 bits) as %02x. */
	if (parse_hex(&p, end, 8, &major) < 0 || expect(&p, end, ':') < 0 ||
	    parse_hex(&p, end, 8, &minor) < 0 || expect(&p, end, ' ') < 0)
		return -EINVAL;
	m->dev_major = (uint32_t)major;
	m->dev_minor = (uint32_t)minor;
	if (parse_dec(&p, end, &m->inode) < 0)
		return -EINVAL;
	if (p < end && *p != ' ')
		return -EINVAL;
	while (p < end && *p == ' ')
		p++;

	*ret_path_off = (size_t)(p - line);
	*ret_path_len = (size_t)(end - p);
	return 0;
}

static int map_cmp(const void *a, const void *b)
{
	const struct pp_map *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* Entries being collected, line by line (whole text or streamed). */
struct maps_builder {
	struct pp_map *v;
	size_t n, cap, bad;
	struct pp_buf strings;
	bool sorted;
	size_t last_path; /* arena offset + 1 of the previous entry's path, 0: none */
	size_t last_plen;
};

/* Adds one line (no '\n'). -E2BIG past PP_MAPS_MAX entries. */
static int builder_line(struct maps_builder *b, const char *p, size_t ll)
{
	size_t poff, plen;
	struct pp_map m;
	int r;

	if (ll == 0)
		return 0;
	if (ll > MAPS_MAX_LINE || parse_line(p, ll, &m, &poff, &plen) < 0) {
		b->bad++;
		return 0;
	}
	if (b->n >= PP_MAPS_MAX)
		return -E2BIG;
	if (plen > 0) {
		const char *path = p + poff;
		if (path[0] != '/') {
			/* [heap], [vdso], [anon:x], anon_inode:[perf_event], ... */
			m.special = true;
		} else if (plen > strlen(DELETED_SUFFIX) &&
			   memcmp(path + plen - strlen(DELETED_SUFFIX), DELETED_SUFFIX,
				  strlen(DELETED_SUFFIX)) == 0) {
			m.deleted = true;
			plen -= strlen(DELETED_SUFFIX);
		}
		if (memchr(path, '\0', plen)) {
			b->bad++;
			return 0;
		}
		/* Store the arena offset + 1 in the pointer for now; fixed up at
		 * the end. Runs of one file (a mapping split by protections)
		 * share one copy of its path. */
		if (b->last_path && b->last_plen == plen &&
		    memcmp(b->strings.data + b->last_path - 1, path, plen) == 0) {
			m.path = (char *)(uintptr_t)b->last_path;
		} else {
			m.path = (char *)(uintptr_t)(b->strings.len + 1);
			if ((r = pp_buf_append(&b->strings, path, plen)) < 0 ||
			    (r = pp_buf_append(&b->strings, "", 1)) < 0)
				return r;
			b->last_path = (uintptr_t)m.path;
			b->last_plen = plen;
		}
	}
	if (b->n == b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 64;
		struct pp_map *nv = realloc(b->v, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		b->v = nv;
		b->cap = ncap;
	}
	if (b->n > 0 && map_cmp(&b->v[b->n - 1], &m) > 0)
		b->sorted = false;
	b->v[b->n++] = m;
	return 0;
}

static void builder_free(struct maps_builder *b)
{
	free(b->v);
	pp_buf_free(&b->strings);
}

/* Moves the entries into ret (one allocation) and frees the builder. */
static int builder_finish(struct maps_builder *b, struct pp_maps *ret, size_t *ret_bad)
{
	struct pp_map *v;
	size_t n = b->n, bad = b->bad;

	/* One allocation: the array, then the path strings. */
	{
		size_t arr = n * sizeof(*v);
		char *block = malloc(arr + b->strings.len + 1);
		if (!block) {
			builder_free(b);
			return -ENOMEM;
		}
		memcpy(block + arr, b->strings.data ? b->strings.data : "", b->strings.len);
		block[arr + b->strings.len] = '\0';
		v = (struct pp_map *)(void *)block;
		for (size_t i = 0; i < n; i++) {
			v[i] = b->v[i];
			if (b->v[i].path)
				v[i].path = block + arr + ((uintptr_t)b->v[i].path - 1);
		}
	}
	bool sorted = b->sorted;
	builder_free(b);

	if (!sorted)
		qsort(v, n, sizeof(*v), map_cmp);
	/*
	 * maps is read in several chunks; a process changing its mappings
	 * meanwhile can make entries repeat or overlap. Keep the first of any
	 * overlapping run so pp_maps__find stays well defined.
	 */
	{
		size_t w = 0;
		for (size_t i = 0; i < n; i++) {
			if (w > 0 && v[i].start < v[w - 1].end) {
				bad++;
				continue;
			}
			v[w++] = v[i];
		}
		n = w;
	}

	ret->v = v;
	ret->n = n;
	if (ret_bad)
		*ret_bad = bad;
	return 0;
}

int pp_maps__parse(const char *buf, size_t len, struct pp_maps *ret, size_t *ret_bad)
{
	struct maps_builder b = { .strings = { .max = (size_t)1 << 31 }, .sorted = true };
	const char *p = buf, *end = buf + len;
	int r;

	if (!ret || (!buf && len))
		return -EINVAL;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		r = builder_line(&b, p, (size_t)(le - p));
		if (r < 0) {
			builder_free(&b);
			return r;
		}
		p = le + 1;
	}
	return builder_finish(&b, ret, ret_bad);
}

static _Atomic uint64_t maps_truncated;
static _Atomic size_t maps_keep = PP_MAPS_KEEP, maps_read_bytes = PP_MAPS_READ_BYTES;

void pp_maps__set_caps(size_t entries, size_t bytes)
{
	if (entries)
		atomic_store(&maps_keep, entries < PP_MAPS_MAX ? entries : PP_MAPS_MAX);
	if (bytes)
		atomic_store(&maps_read_bytes, bytes);
}

void pp_maps__caps(size_t *entries, size_t *bytes)
{
	if (entries)
		*entries = atomic_load(&maps_keep);
	if (bytes)
		*bytes = atomic_load(&maps_read_bytes);
}

uint64_t pp_maps__truncated_total(void)
{
	return atomic_load(&maps_truncated);
}

/*
 * Reads maps through a fixed buffer, a line at a time: the text is never
 * held whole. Stops at the caps (pp_maps__set_caps; PP_MAPS_KEEP entries
 * and PP_MAPS_READ_BYTES bytes by default).
 */
int pp_maps__read_ex(pid_t pid, struct pp_maps *ret, struct pp_maps_read_info *info)
{
	struct maps_builder b = { .strings = { .max = (size_t)1 << 31 }, .sorted = true };
	struct pp_maps_read_info in = { 0 };
	const size_t bufsz = MAPS_MAX_LINE + 65536;
	const size_t keep = atomic_load(&maps_keep), max_bytes = atomic_load(&maps_read_bytes);
	_cleanup_close_ int fd = -1;
	char path[64], *buf = NULL;
	size_t have = 0;
	int r = 0;

	if (pid <= 0 || (!ret && !info))
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(bufsz);
	if (!buf)
		return -ENOMEM;
	in.hash = 1;
	for (;;) {
		ssize_t k = 0;
		bool eof = false;

		if (in.bytes < max_bytes) {
			size_t want = bufsz - have;
			if (want > max_bytes - in.bytes)
				want = max_bytes - in.bytes;
			k = read(fd, buf + have, want);
			if (k < 0) {
				if (errno == EINTR)
					continue;
				r = -errno;
				goto out;
			}
			eof = k == 0;
		}
		if (!eof && in.bytes + (size_t)k >= max_bytes) {
			/* Cut: anything after the last complete line is dropped. */
			char probe;
			in.bytes += (size_t)k;
			have += (size_t)k;
			if (read(fd, &probe, 1) == 1)
				in.truncated = true;
			eof = true;
		} else {
			in.bytes += (size_t)k;
			have += (size_t)k;
		}
		/* Every complete line in buf (and the tail at the end of the file). */
		size_t off = 0;
		while (off < have) {
			char *nl = memchr(buf + off, '\n', have - off);
			size_t ll;
			if (!nl) {
				if (!eof && have - off < bufsz)
					break;
				if (!eof) { /* a line longer than the buffer: garbage */
					b.bad++;
					off = have;
					break;
				}
				if (in.truncated)
					break;
				ll = have - off;
			} else {
				ll = (size_t)(nl - (buf + off));
			}
			/* The cap counts lines, so a hash-only read cuts where a
			 * parsing one does. */
			if (ll > 0 && in.kept >= keep) {
				in.truncated = true;
				eof = true;
				break;
			}
			in.hash = pp_hash_bytes(buf + off, ll, in.hash);
			if (ret) {
				r = builder_line(&b, buf + off, ll);
				if (r < 0)
					goto out;
			}
			in.kept += ll > 0;
			off += ll + (nl ? 1 : 0);
		}
		if (eof)
			break;
		memmove(buf, buf + off, have - off);
		have -= off;
	}
	if (in.truncated)
		atomic_fetch_add(&maps_truncated, 1);
	free(buf);
	buf = NULL;
	r = ret ? builder_finish(&b, ret, NULL) : 0;
	if (r == 0 && info)
		*info = in;
	return r;
out:
	free(buf);
	builder_free(&b);
	return r;
}

int pp_maps__read(pid_t pid, struct pp_maps *ret)
{
	return pp_maps__read_ex(pid, ret, NULL);
}

const struct pp_map *pp_maps__find(const struct pp_maps *maps, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!maps || !maps->v)
		return NULL;
	hi = maps->n;
	/* First entry with start > addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (maps->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	if (addr < maps->v[lo - 1].end)
		return &maps->v[lo - 1];
	return NULL;
}

void pp_maps__free(struct pp_maps *maps)
{
	if (!maps)
		return;
	free(maps->v); /* paths live in the same block */
	maps->v = NULL;
	maps->n = 0;
}

/* ---- resolving the file behind a mapping ---- */

static bool stat_matches(const struct stat *st, const struct pp_map *m)
{
	return (uint64_t)st->st_ino == m->inode && major(st->st_dev) == m->dev_major &&
	       minor(st->st_dev) == m->dev_minor;
}

static int map_files_path(pid_t pid, const struct pp_map *m, char *buf, size_t n)
{
	/* The kernel names entries "%lx-%lx": lowercase hex, no 0x, no padding. */
	int k = snprintf(buf, n, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, m->start,
			 m->end);
	if (k < 0 || (size_t)k >= n)
		return -ENAMETOOLONG;
	return 0;
}

int pp_proc__openat_in_root(int rootfd, const char *path, int flags, uint64_t resolve)
{
	if (rootfd < 0 || !path || path[0] != '/')
		return -EINVAL;
	while (*path == '/')
		path++;
	struct open_how how = {
		/* openat2 refuses O_PATH with other flags than these */
		.flags = (uint64_t)(flags | O_CLOEXEC | (flags & O_PATH ? 0 : O_NOCTTY)),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | resolve,
	};
	/* "/" itself: "." of the root */
	int fd = (int)syscall(SYS_openat2, rootfd, *path ? path : ".", &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

int pp_proc__open_in_root_raw(pid_t pid, const char *path, int flags, uint64_t resolve)
{
	char root[64];

	if (pid <= 0 || !path || path[0] != '/')
		return -EINVAL;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	/* the one magic link followed on purpose: podprof's /proc to the target's root */
	_cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	return pp_proc__openat_in_root(rfd, path, flags, resolve);
}

/* No "." or ".." component: the path means the same in any resolution. */
static bool plain_path(const char *p)
{
	while (*p) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
	}
	return true;
}

int pp_proc__root_path(pid_t pid, const char *path, char *buf, size_t n)
{
	int k;

	if (pid <= 0 || !path || path[0] != '/' || !buf)
		return -EINVAL;
	k = snprintf(buf, n, "/proc/%d/root%s", (int)pid, path);
	if (k < 0 || (size_t)k >= n)
		return -ENAMETOOLONG;
	return 0;
}

#ifndef PROCMAP_QUERY
/* Linux 6.11 uapi (linux/fs.h); declared here for older headers. */
struct procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR(0x9f, 17, struct procmap_query)
#endif

/* dev/inode of our own mapping at addr, from /proc/self/maps. */
static int self_map_identity(uint64_t addr, uint32_t *ret_major, uint32_t *ret_minor,
			     uint64_t *ret_ino)
{
	_cleanup_close_ int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	struct procmap_query q = { .size = sizeof(q), .query_addr = addr };

	if (fd < 0)
		return -errno;
	if (ioctl(fd, PROCMAP_QUERY, &q) == 0) {
		if (q.vma_start != addr)
			return -ESTALE;
		*ret_major = q.dev_major;
		*ret_minor = q.dev_minor;
		*ret_ino = q.inode;
		return 0;
	}
	if (errno != ENOTTY && errno != EINVAL && errno != EOPNOTSUPP)
		return -errno;

	/* Kernels before 6.11: parse the text. */
	struct pp_maps maps = { 0 };
	int r = pp_maps__read_ex(getpid(), &maps, NULL);
	if (r < 0)
		return r;
	const struct pp_map *m = pp_maps__find(&maps, addr);
	if (!m || m->start != addr) {
		r = -ESTALE;
	} else {
		*ret_major = m->dev_major;
		*ret_minor = m->dev_minor;
		*ret_ino = m->inode;
		r = 0;
	}
	pp_maps__free(&maps);
	return r;
}

/*
 * Stacking file systems (overlayfs, the usual container root) show the
 * backing file's dev/inode in maps while stat on the path reports the
 * overlay's. Mapping the opened file in our own process tells which inode
 * the kernel really maps for it, which is what the target has mapped and
 * what a uprobe on this path attaches to (the kernel resolves it the same way).
 */
static int fd_maps_to(int fd, const struct pp_map *m)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint32_t maj = 0, min = 0;
	uint64_t ino = 0;
	void *p;
	int r;

	p = mmap(NULL, (size_t)(pg > 0 ? pg : 4096), PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return -ESTALE;
	r = self_map_identity((uint64_t)(uintptr_t)p, &maj, &min, &ino);
	munmap(p, (size_t)(pg > 0 ? pg : 4096));
	if (r < 0)
		return r == -ESTALE ? r : -ESTALE;
	if (ino == m->inode && maj == m->dev_major && min == m->dev_minor)
		return 0;
	return -ESTALE;
}

/* Does the opened fd hold the mapping's inode? 0 or -ESTALE. */
/*
 * Paths under the target's root are the target's to choose: it can swap a
 * mapped library for a FIFO (an open for reading would wait for a writer
 * for ever) or a device. O_NONBLOCK makes such an open return at once, and
 * check_fd then refuses what is not the mapped inode (for regular files the
 * flag changes nothing).
 */
#define OPEN_TARGET (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

static int check_fd(int fd, const struct pp_map *m, bool allow_stacked)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (stat_matches(&st, m))
		return 0;
	if (allow_stacked && S_ISREG(st.st_mode))
		return fd_maps_to(fd, m);
	return -ESTALE;
}

static bool mappable(const struct pp_map *m)
{
	return m && m->path && !m->special && m->path[0] == '/' && m->inode != 0;
}

int pp_proc__open_mapped_raw(pid_t pid, const struct pp_map *m, unsigned flags)
{
	char path[PATH_MAX + 64];
	int fd, r, first = -ENOENT;

	if (pid <= 0 || !m)
		return -EINVAL;
	if (!mappable(m))
		return -ENOENT;

	if (!(flags & PP_RESOLVE_NO_MAP_FILES)) {
		r = map_files_path(pid, m, path, sizeof(path));
		if (r < 0)
			return r;
		fd = open(path, OPEN_TARGET);
		if (fd >= 0) {
			/*
			 * A mismatch means the range was remapped since maps was read, or a
			 * stacked file system (map_files reopens the overlay path, whose
			 * stat shows the overlay's device): check_fd tells them apart.
			 */
			r = check_fd(fd, m, true);
			if (r == 0)
				return fd;
			close(fd);
			first = r;
		} else {
			first = -errno;
			pp_dbg("procfs: open %s: %s", path, strerror(errno));
		}
	}

	if (m->deleted)
		return first == -ENOENT ? -ENOENT : first;
	if (flags & PP_RESOLVE_NO_ROOT)
		return first;

	fd = pp_proc__open_in_root_raw(pid, m->path, OPEN_TARGET, 0);
	if (fd < 0)
		return fd;
	r = check_fd(fd, m, true);
	if (r < 0) {
		pp_dbg("procfs: %s in pid %d's root is not the mapped inode %" PRIu64, m->path,
		       (int)pid, m->inode);
		close(fd);
		return r;
	}
	return fd;
}

static _Atomic unsigned open_budget = PP_OPEN_BUDGET;
static _Atomic uint64_t open_budget_hits;

void pp_proc__set_open_budget(unsigned opens)
{
	if (opens)
		atomic_store(&open_budget, opens);
}

void pp_open_budget__init(struct pp_open_budget *b)
{
	b->left = atomic_load(&open_budget);
	b->spent = false;
}

bool pp_open_budget__take(struct pp_open_budget *b)
{
	if (b->left) {
		b->left--;
		return true;
	}
	if (!b->spent)
		atomic_fetch_add(&open_budget_hits, 1);
	b->spent = true;
	return false;
}

uint64_t pp_open_budget__hits(void)
{
	return atomic_load(&open_budget_hits);
}

/*
 * The resolution of pp_proc__open_mapped_ex without keeping the file open:
 * the path the kernel can follow for it (buf, when not NULL) and its stat
 * (ret_st, when not NULL).
 */
int pp_proc__resolve_mapped_raw(pid_t pid, const struct pp_map *m, unsigned flags, char *buf,
				size_t n, struct stat *ret_st)
{
	char path[PATH_MAX + 64];
	struct stat st;
	int r, first = -ENOENT;

	if (pid <= 0 || !m || (buf && n == 0))
		return -EINVAL;
	if (!mappable(m))
		return -ENOENT;

	if (!(flags & PP_RESOLVE_NO_MAP_FILES)) {
		r = map_files_path(pid, m, path, sizeof(path));
		if (r < 0)
			return r;
		/* a link the kernel made to the mapped file: followed on purpose */
		if (stat(path, &st) == 0) {
			r = 0;
			if (!stat_matches(&st, m)) {
				_cleanup_close_ int fd = open(path, OPEN_TARGET);
				r = fd < 0 ? -errno : check_fd(fd, m, true);
			}
			if (r == 0) {
				if (buf && strlen(path) >= n)
					return -ENAMETOOLONG;
				if (buf)
					strcpy(buf, path);
				if (ret_st)
					*ret_st = st;
				return 0;
			}
			first = r;
		} else {
			first = -errno;
		}
	}
	if (m->deleted)
		return first;
	if (flags & PP_RESOLVE_NO_ROOT)
		return first;

	/*
	 * The path is handed to others (the kernel, for a uprobe) who resolve
	 * it as plain "/proc/PID/root/<path>": it is only returned when that
	 * resolution cannot differ from the one checked here (no symlink, no
	 * "." or ".." on the way; a race with the target remains, see procfs.h).
	 */
	if (buf && !plain_path(m->path))
		return -ENOENT;
	if (buf) {
		r = pp_proc__root_path(pid, m->path, path, sizeof(path));
		if (r < 0)
			return r;
	}
	_cleanup_close_ int pfd =
		pp_proc__open_in_root_raw(pid, m->path, O_PATH, buf ? RESOLVE_NO_SYMLINKS : 0);
	if (pfd < 0)
		return pfd == -ELOOP ? -ENOENT : pfd;
	if (fstat(pfd, &st) < 0)
		return -errno;
	if (!stat_matches(&st, m)) {
		/* Maybe a stacked file system: check what the kernel maps for it. */
		if (!S_ISREG(st.st_mode))
			return -ESTALE;
		_cleanup_close_ int fd = pp_proc__open_in_root_raw(pid, m->path, OPEN_TARGET,
								   buf ? RESOLVE_NO_SYMLINKS : 0);
		if (fd < 0)
			return fd;
		r = check_fd(fd, m, true);
		if (r < 0)
			return r;
	}
	if (buf && strlen(path) >= n)
		return -ENAMETOOLONG;
	if (buf)
		strcpy(buf, path);
	if (ret_st)
		*ret_st = st;
	return 0;
}
