/* SPDX-License-Identifier: Apache-2.0 */
/* Memory headroom of a process: RLIMIT_AS and its memory cgroup (headroom.h). */
#include "headroom.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "procfs/procfs.h"
#include "util/util.h"

#define MIB (1024.0 * 1024.0)
#define NO_LIMIT (1ull << 60)
#define SMALL_FILE (64u << 10) /* memory.max, memory.stat, /proc/PID/cgroup, limits */
#define MOUNTINFO_MAX (4u << 20)

uint64_t pp_headroom__cg_margin(uint64_t limit)
{
	return PP_MAX(PP_HEADROOM_CG_MARGIN_MIN, limit / 100 * PP_HEADROOM_CG_MARGIN_PCT);
}

/* RLIMIT_AS: VmSize + bytes + margin must stay under the soft limit. */
static int as_check(pid_t pid, uint64_t bytes, char *reason, size_t n)
{
	_cleanup_free_ char *lim_text = NULL, *st = NULL;
	char p[64];
	const char *l;
	size_t len = 0;
	unsigned long long lim = 0, vm_kb = 0;

	snprintf(p, sizeof(p), "/proc/%d/limits", (int)pid);
	if (pp_read_file(p, SMALL_FILE, &lim_text, &len) < 0)
		return 0;
	l = strstr(lim_text, "Max address space");
	if (!l || sscanf(l + 17, " %llu", &lim) != 1 || !lim)
		return 0; /* "unlimited" */
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	l = NULL;
	if (pp_read_file(p, 1 << 20, &st, &len) == 0)
		l = strstr(st, "\nVmSize:");
	if (!l || sscanf(l + 8, " %llu", &vm_kb) != 1 || vm_kb > UINT64_MAX / 2048) {
		snprintf(reason, n,
			 "its address-space limit (RLIMIT_AS) is set and its size is unknown");
		return -ENOMEM;
	}
	if (vm_kb * 1024 + bytes + PP_HEADROOM_AS_MARGIN <= lim)
		return 0;
	snprintf(reason, n,
		 "its address-space limit (RLIMIT_AS) is too close: %.1f MiB free under %.1f MiB; "
		 "the agent needs %.1f MiB + %llu MiB margin",
		 vm_kb * 1024 < lim ? (double)(lim - vm_kb * 1024) / MIB : 0.0, (double)lim / MIB,
		 (double)bytes / MIB, PP_HEADROOM_AS_MARGIN >> 20);
	return -ENOMEM;
}

/* Copy [s, s + len) to out (size n), NUL-terminated. */
static int copy_span(const char *s, size_t len, char *out, size_t n)
{
	if (len >= n)
		return -ENAMETOOLONG;
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

/* Does the comma-separated list [s, e) hold word? */
static bool list_has(const char *s, const char *e, const char *word)
{
	size_t wl = strlen(word);

	while (s < e) {
		const char *c = memchr(s, ',', (size_t)(e - s));
		size_t len = (size_t)((c ? c : e) - s);

		if (len == wl && !memcmp(s, word, wl))
			return true;
		s = c ? c + 1 : e;
	}
	return false;
}

int pp_headroom__parse_cgroup(const char *text, bool *ret_v2, char *ret_path, size_t n)
{
	const char *v2 = NULL, *v2_end = NULL;

	for (const char *l = text; l && *l;) {
		const char *e = strchr(l, '\n'), *c1, *c2;

		if (!e)
			e = l + strlen(l);
		c1 = memchr(l, ':', (size_t)(e - l));
		c2 = c1 ? memchr(c1 + 1, ':', (size_t)(e - c1 - 1)) : NULL;
		if (c2 && c2 == c1 + 1 && c1 - l == 1 && l[0] == '0') {
			v2 = c2 + 1;
			v2_end = e;
		} else if (c2 && list_has(c1 + 1, c2, "memory")) {
			*ret_v2 = false;
			return copy_span(c2 + 1, (size_t)(e - c2 - 1), ret_path, n);
		}
		l = *e ? e + 1 : NULL;
	}
	if (!v2)
		return -ENOENT;
	*ret_v2 = true;
	return copy_span(v2, (size_t)(v2_end - v2), ret_path, n);
}

/* Next space-separated field of [*s, e): its start and length. */
static bool field(const char **s, const char *e, const char **ret, size_t *ret_len)
{
	const char *p = *s, *q;

	while (p < e && *p == ' ')
		p++;
	if (p >= e)
		return false;
	q = memchr(p, ' ', (size_t)(e - p));
	if (!q)
		q = e;
	*ret = p;
	*ret_len = (size_t)(q - p);
	*s = q;
	return true;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static int unescape(const char *s, size_t len, char *out, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '\\' && i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
			c = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
			i += 3;
		}
		if (o + 1 >= n)
			return -ENAMETOOLONG;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

int pp_headroom__parse_mountinfo(const char *text, bool v2, char *ret_root, size_t rn,
				 char *ret_mnt, size_t mn)
{
	for (const char *l = text; l && *l;) {
		const char *e = strchr(l, '\n'), *s = l, *f[5], *dash, *type, *src, *opts;
		size_t fl[5], tl, sl, ol;
		bool ok = true;

		if (!e)
			e = l + strlen(l);
		/* id parent major:minor root mount-point options [optional...] - type source super */
		for (int i = 0; i < 5 && ok; i++)
			ok = field(&s, e, &f[i], &fl[i]);
		dash = ok ? strstr(s, " - ") : NULL;
		if (dash && dash < e) {
			s = dash + 3;
			if (field(&s, e, &type, &tl) && field(&s, e, &src, &sl) &&
			    field(&s, e, &opts, &ol) &&
			    (v2 ? tl == 7 && !memcmp(type, "cgroup2", 7)
				: tl == 6 && !memcmp(type, "cgroup", 6) &&
					     list_has(opts, opts + ol, "memory"))) {
				int r = unescape(f[3], fl[3], ret_root, rn);

				return r < 0 ? r : unescape(f[4], fl[4], ret_mnt, mn);
			}
		}
		l = *e ? e + 1 : NULL;
	}
	return -ENOENT;
}

/* One cgroup hierarchy as a process sees it: where its mount is
 * (prefix + mnt) and which cgroup is mounted there (root). */
struct cg_view {
	bool ok;
	pid_t pid; /* the mounts of pid's root, or podprof's own (0) */
	char root[PATH_MAX];
	char mnt[PATH_MAX];
};

static void view_init(struct cg_view *v, pid_t pid, bool v2)
{
	_cleanup_free_ char *text = NULL;
	char p[64];
	size_t len = 0;

	v->ok = false;
	v->pid = pid;
	if (pid)
		snprintf(p, sizeof(p), "/proc/%d/mountinfo", (int)pid);
	else
		snprintf(p, sizeof(p), "/proc/self/mountinfo");
	if (pp_read_file(p, MOUNTINFO_MAX, &text, &len) < 0)
		return;
	v->ok = pp_headroom__parse_mountinfo(text, v2, v->root, sizeof(v->root), v->mnt,
					     sizeof(v->mnt)) == 0;
}

/* The directory of cgroup `cg` in view v, opened (O_PATH; inside the
 * target's root for a target's view): a readable directory's fd, or
 * -ENOENT (not under its mounted root, or a ".." that would leave it). */
static int view_dir(const struct cg_view *v, const char *cg)
{
	size_t rl = strlen(v->root);
	const char *rest;
	char out[2 * PATH_MAX];
	int fd;

	if (!v->ok)
		return -ENOENT;
	if (!strcmp(v->root, "/"))
		rest = cg;
	else if (!strncmp(cg, v->root, rl) && (cg[rl] == '\0' || cg[rl] == '/'))
		rest = cg + rl;
	else
		return -ENOENT;
	if (strstr(rest, "/..") || strstr(rest, "../"))
		return -ENOENT;
	if ((size_t)snprintf(out, sizeof(out), "%s%s", v->mnt, rest) >= sizeof(out))
		return -ENAMETOOLONG;
	if (v->pid)
		fd = pp_proc__open_in_root(v->pid, out, O_PATH | O_DIRECTORY, 0);
	else
		fd = open(out, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && !v->pid)
		fd = -errno;
	if (fd < 0)
		return fd;
	if (faccessat(fd, ".", R_OK | X_OK, 0) < 0) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

/* name in the cgroup directory dfd, which the lookup cannot leave. */
static int read_in(int dfd, const char *name, char **ret, size_t *ret_len)
{
	char p[64];
	snprintf(p, sizeof(p), "/%s", name);
	_cleanup_close_ int fd = pp_proc__openat_in_root(dfd, p, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return fd;
	return pp_read_fd(fd, SMALL_FILE, ret, ret_len);
}

/* A number file: "max" or a value >= NO_LIMIT is UINT64_MAX. */
static int read_num(int dfd, const char *name, uint64_t *ret)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r;

	r = read_in(dfd, name, &text, &len);
	if (r < 0)
		return r;
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	if (!strcmp(text, "max")) {
		*ret = UINT64_MAX;
		return 0;
	}
	r = pp_parse_u64(text, 10, 0, UINT64_MAX, ret);
	if (r == 0 && *ret >= NO_LIMIT)
		*ret = UINT64_MAX;
	return r;
}

/* A "key value" line of memory.stat text. */
static bool stat_value(const char *text, const char *key, uint64_t *ret)
{
	size_t kl = strlen(key);

	for (const char *l = text; l && *l;) {
		if (!strncmp(l, key, kl) && l[kl] == ' ') {
			unsigned long long v;

			if (sscanf(l + kl, " %llu", &v) != 1)
				return false;
			*ret = v;
			return true;
		}
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	return false;
}

/* The tightest limit found so far. */
struct worst {
	bool found;
	int64_t slack; /* free - need, < 0 */
	char cg[PATH_MAX];
	const char *what;
	uint64_t free, limit, margin;
};

static void consider(struct worst *w, const char *cg, const char *what, uint64_t limit,
		     uint64_t usage, uint64_t bytes)
{
	uint64_t margin, free, need;
	int64_t slack;

	if (limit == UINT64_MAX)
		return;
	margin = pp_headroom__cg_margin(limit);
	free = limit > usage ? limit - usage : 0;
	need = bytes + margin;
	if (free >= need)
		return;
	slack = -(int64_t)PP_MIN(need - free, (uint64_t)INT64_MAX);
	if (w->found && slack >= w->slack)
		return;
	w->found = true;
	w->slack = slack;
	snprintf(w->cg, sizeof(w->cg), "%s", cg);
	w->what = what;
	w->free = free;
	w->limit = limit;
	w->margin = margin;
}

/* Three PATH_MAX-sized records: on the heap, not the caller's stack. */
struct cg_scratch {
	struct cg_view target, self;
	struct worst w;
};

/* One level of the hierarchy, read in the directory dir. */
static void check_level(bool v2, bool leaf, int dir, const char *cg, uint64_t bytes,
			struct worst *w)
{
	_cleanup_free_ char *stat = NULL;
	uint64_t usage = 0, inactive = 0, lim = UINT64_MAX, v;
	size_t len = 0;

	if (read_num(dir, v2 ? "memory.current" : "memory.usage_in_bytes", &usage) < 0)
		return; /* unknown */
	if (read_in(dir, "memory.stat", &stat, &len) == 0 &&
	    stat_value(stat, v2 ? "inactive_file" : "total_inactive_file", &inactive))
		usage = usage > inactive ? usage - inactive : 0;
	if (v2) {
		if (read_num(dir, "memory.max", &lim) == 0)
			consider(w, cg, "limit", lim, usage, bytes);
		if (read_num(dir, "memory.high", &lim) == 0)
			consider(w, cg, "memory.high", lim, usage, bytes);
		return;
	}
	if (read_num(dir, "memory.limit_in_bytes", &lim) == 0)
		consider(w, cg, "limit", lim, usage, bytes);
	if (leaf && stat && stat_value(stat, "hierarchical_memory_limit", &v))
		consider(w, cg, "hierarchical limit", v >= NO_LIMIT ? UINT64_MAX : v, usage, bytes);
}

/* At most max bytes of cg for a reason: its tail after "...". */
static const char *tail(const char *cg, size_t max)
{
	size_t l = strlen(cg);

	return l <= max ? cg : cg + l - max;
}

static int cg_check(pid_t pid, uint64_t bytes, char *reason, size_t n)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ struct cg_scratch *sc = NULL;
	struct cg_view *target, *self;
	char cg[PATH_MAX], dir[PATH_MAX + 64];
	struct worst *w;
	size_t len = 0;
	bool v2 = false;

	snprintf(dir, sizeof(dir), "/proc/%d/cgroup", (int)pid);
	if (pp_read_file(dir, SMALL_FILE, &text, &len) < 0 ||
	    pp_headroom__parse_cgroup(text, &v2, cg, sizeof(cg)) < 0 || cg[0] != '/')
		return 0;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return 0;
	target = &sc->target;
	self = &sc->self;
	w = &sc->w;
	view_init(target, pid, v2);
	view_init(self, 0, v2);
	for (bool leaf = true;; leaf = false) {
		char *slash;

		int dfd = view_dir(target, cg);
		if (dfd < 0)
			dfd = view_dir(self, cg);
		if (dfd >= 0) {
			check_level(v2, leaf, dfd, cg, bytes, w);
			close(dfd);
		}
		if (!strcmp(cg, "/"))
			break;
		slash = strrchr(cg, '/');
		slash[slash == cg ? 1 : 0] = '\0';
		/* "/../x": outside the reader's cgroup namespace; what is
		 * above it has no name there */
		len = strlen(cg);
		if (len >= 3 && !strcmp(cg + len - 3, "/.."))
			break;
	}
	if (!w->found)
		return 0;
	snprintf(reason, n,
		 "memory cgroup %s%s: %.1f MiB free under its %.1f MiB %s; the agent needs %.1f "
		 "MiB "
		 "+ %.0f MiB margin",
		 strlen(w->cg) > 40 ? "..." : "", tail(w->cg, 40), (double)w->free / MIB,
		 (double)w->limit / MIB, w->what, (double)bytes / MIB, (double)w->margin / MIB);
	return -ENOMEM;
}

int pp_headroom__check(pid_t pid, uint64_t bytes, char *reason, size_t n)
{
	int r;

	if (pid <= 0 || !reason || !n)
		return -EINVAL;
	r = as_check(pid, bytes, reason, n);
	return r < 0 ? r : cg_check(pid, bytes, reason, n);
}
