/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process identity from /proc: stat, status, exe, cmdline, pid and tid
 * lists, thread names.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procfs.h"
#include "util/util.h"

#define PF_KTHREAD 0x00200000u
#define STAT_MAX_BYTES 4096 /* one stat line is < 1 KiB */
#define STATUS_MAX_BYTES 65536 /* status is ~1.5 KiB; generous for long Groups: lines */
#define PID_LIST_MAX (1u << 22) /* PID_MAX_LIMIT */

/* Reads fd until EOF or max bytes into b; *ret_len: bytes read. */
static int read_all(int fd, char *b, size_t max, size_t *ret_len)
{
	size_t len = 0;

	while (len < max) {
		ssize_t n = read(fd, b + len, max - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*ret_len = len;
	return 0;
}

/* Read at most max bytes of a file (the rest is ignored, not an error). */
static int read_capped(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *b = NULL;
	size_t len = 0;

	if (fd < 0)
		return -errno;
	b = malloc(max + 1);
	if (!b)
		return -ENOMEM;
	int r = read_all(fd, b, max, &len);
	if (r < 0)
		return r;
	b[len] = '\0';
	if (len + 1 < max / 2) {
		/* do not keep a 64 KiB cmdline buffer for a 30-byte command line */
		char *shrunk = realloc(b, len + 1);
		if (shrunk)
			b = shrunk;
	}
	*ret = b;
	b = NULL;
	*ret_len = len;
	return 0;
}

/* Next field of [*p, end): the kernel separates them with exactly one space. */
static int next_field(const char **p, const char *end, const char **ret_s, size_t *ret_n)
{
	const char *s = *p;

	if (s >= end || *s != ' ')
		return -EINVAL;
	s++;
	const char *f = s;
	while (s < end && *s != ' ' && *s != '\n')
		s++;
	if (s == f)
		return -EINVAL;
	*ret_s = f;
	*ret_n = (size_t)(s - f);
	*p = s;
	return 0;
}

static int field_u64(const char *s, size_t n, uint64_t max, uint64_t *ret)
{
	char tmp[32];

	if (n == 0 || n >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	return pp_parse_u64(tmp, 10, 0, max, ret);
}

int pp_proc__parse_stat(const char *buf, size_t len, struct pp_proc_info *ret)
{
	const char *end, *open_paren = NULL, *close_paren = NULL, *p, *f;
	uint64_t pid, ppid = 0, flags = 0, start = 0;
	size_t fn;
	char state = 0;
	int r;

	if (!buf || !ret)
		return -EINVAL;
	end = buf + len;
	open_paren = memchr(buf, '(', len);
	/* comm may hold ')' and spaces: the real end is the last ')'. */
	for (const char *q = end; q > buf; q--) {
		if (q[-1] == ')') {
			close_paren = q - 1;
			break;
		}
	}
	if (!open_paren || !close_paren || close_paren < open_paren || open_paren == buf ||
	    open_paren[-1] != ' ')
		return -EINVAL;

	r = field_u64(buf, (size_t)(open_paren - 1 - buf), INT32_MAX, &pid);
	if (r < 0 || pid == 0)
		return -EINVAL;

	p = close_paren + 1;
	/* Field 3 is state; we are now before it. Fields counted from 3. */
	for (int field = 3; field <= 22; field++) {
		if (next_field(&p, end, &f, &fn) < 0)
			return -EINVAL;
		switch (field) {
		case 3:
			if (fn != 1)
				return -EINVAL;
			state = f[0];
			break;
		case 4:
			if (field_u64(f, fn, INT32_MAX, &ppid) < 0)
				return -EINVAL;
			break;
		case 9:
			if (field_u64(f, fn, UINT32_MAX, &flags) < 0)
				return -EINVAL;
			break;
		case 22:
			if (field_u64(f, fn, UINT64_MAX, &start) < 0)
				return -EINVAL;
			break;
		default:
			break;
		}
	}

	memset(ret, 0, sizeof(*ret));
	ret->pid = (pid_t)pid;
	ret->ppid = (pid_t)ppid;
	ret->state = state;
	ret->start_time = start;
	ret->kernel_thread = (flags & PF_KTHREAD) != 0;
	size_t cl = (size_t)(close_paren - open_paren - 1);
	if (cl >= sizeof(ret->comm))
		cl = sizeof(ret->comm) - 1;
	memcpy(ret->comm, open_paren + 1, cl);
	ret->comm[cl] = '\0';
	return 0;
}

static char *read_exe(pid_t pid)
{
	char path[64], target[PATH_MAX + 1];
	ssize_t n;
	const size_t sl = strlen(" (deleted)");

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return NULL;
	target[n] = '\0';
	if ((size_t)n > sl && strcmp(target + n - sl, " (deleted)") == 0)
		target[n - sl] = '\0';
	return strdup(target);
}

#define CGROUP_MAX_BYTES 65536
#define MOUNTINFO_MAX_BYTES (256u << 10)

static void read_container(pid_t pid, struct pp_proc_info *info)
{
	_cleanup_free_ char *text = NULL;
	char path[64];
	size_t len;

	info->container_id[0] = info->container[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (read_capped(path, CGROUP_MAX_BYTES, &text, &len) == 0 &&
	    pp_proc__parse_cgroup_id(text, len, info->container_id, sizeof(info->container_id)) < 0)
		info->container_id[0] = '\0';
	free(text);
	text = NULL;
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
	if (read_capped(path, MOUNTINFO_MAX_BYTES, &text, &len) == 0 &&
	    pp_proc__parse_container_name(text, len, info->container, sizeof(info->container)) < 0)
		info->container[0] = '\0';
}

/* A whole small file into buf (NUL-terminated); the rest past size-1 is cut. */
static int read_small(const char *path, char *buf, size_t size, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	size_t len = 0;

	if (fd < 0)
		return -errno;
	int r = read_all(fd, buf, size - 1, &len);
	if (r < 0)
		return r;
	buf[len] = '\0';
	*ret_len = len;
	return 0;
}

int pp_proc__read_ident(pid_t pid, struct pp_proc_info *ret)
{
	char stat[STAT_MAX_BYTES], path[64];
	struct pp_proc_info info;
	size_t len = 0;
	int r;

	if (pid <= 0 || !ret)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	r = read_small(path, stat, sizeof(stat), &len);
	if (r < 0)
		return r;
	r = pp_proc__parse_stat(stat, len, &info);
	if (r < 0)
		return r;
	info.exe = read_exe(pid);
	*ret = info;
	return 0;
}

void pp_proc__read_extra(pid_t pid, struct pp_proc_info *info)
{
	char path[64];

	if (pid <= 0 || !info)
		return;
	read_container(pid, info);

	char *cmd = NULL;
	size_t cl = 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (read_capped(path, PP_CMDLINE_MAX, &cmd, &cl) == 0) {
		while (cl > 0 && cmd[cl - 1] == '\0')
			cl--;
		if (cl == 0) {
			free(cmd);
			cmd = NULL;
		} else {
			cmd[cl] = '\0';
		}
	}
	free(info->cmdline);
	info->cmdline = cmd;
	info->cmdline_len = cmd ? cl : 0;
}

int pp_proc__read_info(pid_t pid, struct pp_proc_info *ret)
{
	int r = pp_proc__read_ident(pid, ret);

	if (r < 0)
		return r;
	pp_proc__read_extra(pid, ret);
	return 0;
}

void pp_proc_info__free(struct pp_proc_info *info)
{
	if (!info)
		return;
	free(info->exe);
	free(info->cmdline);
	info->exe = NULL;
	info->cmdline = NULL;
	info->cmdline_len = 0;
}

/* ---- status ---- */

static int status_value(const char *s, size_t n, int base, uint64_t *ret)
{
	char tmp[64];
	size_t i = 0;

	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	size_t j = i;
	while (j < n && s[j] != ' ' && s[j] != '\t')
		j++;
	if (j == i || j - i >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, s + i, j - i);
	tmp[j - i] = '\0';
	return pp_parse_u64(tmp, base, 0, UINT64_MAX, ret);
}

int pp_proc__parse_status(const char *buf, size_t len, struct pp_proc_status *ret)
{
	static const struct {
		const char *key;
		int base;
		size_t off;
	} keys[] = {
		{ "VmRSS", 10, offsetof(struct pp_proc_status, vm_rss_kb) },
		{ "VmSize", 10, offsetof(struct pp_proc_status, vm_size_kb) },
		{ "VmHWM", 10, offsetof(struct pp_proc_status, vm_hwm_kb) },
		{ "VmData", 10, offsetof(struct pp_proc_status, vm_data_kb) },
		{ "VmStk", 10, offsetof(struct pp_proc_status, vm_stk_kb) },
		{ "VmLck", 10, offsetof(struct pp_proc_status, vm_lck_kb) },
		{ "VmSwap", 10, offsetof(struct pp_proc_status, vm_swap_kb) },
		{ "SigBlk", 16, offsetof(struct pp_proc_status, sig_blk) },
		{ "CapEff", 16, offsetof(struct pp_proc_status, cap_eff) },
	};
	struct pp_proc_status st = { 0 };
	const char *p, *end;
	unsigned found = 0;

	if (!buf || !ret)
		return -EINVAL;
	p = buf;
	end = buf + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *colon = memchr(p, ':', (size_t)(le - p));
		uint64_t v;

		if (colon) {
			size_t kl = (size_t)(colon - p);
			const char *val = colon + 1;
			size_t vl = (size_t)(le - val);
			bool done = false;

			for (size_t i = 0; i < ARRAY_SIZE(keys) && !done; i++) {
				if (strlen(keys[i].key) != kl || memcmp(keys[i].key, p, kl) != 0)
					continue;
				done = true;
				if (status_value(val, vl, keys[i].base, &v) == 0) {
					memcpy((char *)&st + keys[i].off, &v, sizeof(v));
					found++;
				}
			}
			if (!done && kl == 7 && memcmp(p, "Threads", 7) == 0) {
				if (status_value(val, vl, 10, &v) == 0 && v <= UINT32_MAX) {
					st.threads = (unsigned)v;
					found++;
				}
			} else if (!done && kl == 3 && memcmp(p, "Uid", 3) == 0) {
				/* real, effective, saved, fs: keep the first (real). */
				if (status_value(val, vl, 10, &v) == 0 && v <= UINT32_MAX) {
					st.uid = (uid_t)v;
					found++;
				}
			}
		}
		p = le + 1;
	}
	if (found == 0)
		return -EINVAL;
	*ret = st;
	return 0;
}

int pp_proc__read_status(pid_t pid, struct pp_proc_status *ret)
{
	_cleanup_free_ char *text = NULL;
	char path[64];
	size_t len;
	int r;

	if (pid <= 0 || !ret)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	r = read_capped(path, STATUS_MAX_BYTES, &text, &len);
	if (r < 0)
		return r;
	return pp_proc__parse_status(text, len, ret);
}

/* ---- lists ---- */

static int list_numeric(const char *dir, pid_t **ret, size_t *ret_n)
{
	DIR *d = opendir(dir); /* glibc opens with O_CLOEXEC */
	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int r = 0;

	if (!d)
		return -errno;
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				r = -errno;
			break;
		}
		uint64_t id;
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		if (pp_parse_u64(de->d_name, 10, 1, INT32_MAX, &id) < 0)
			continue;
		if (n == cap) {
			if (cap >= PID_LIST_MAX) {
				r = -E2BIG;
				break;
			}
			if (pp_grow(&v, &cap, n + 1, sizeof(*v), 256) < 0) {
				r = -ENOMEM;
				break;
			}
		}
		v[n++] = (pid_t)id;
	}
	closedir(d);
	if (r < 0) {
		free(v);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

int pp_proc__list_pids(pid_t **ret, size_t *ret_n)
{
	if (!ret || !ret_n)
		return -EINVAL;
	return list_numeric("/proc", ret, ret_n);
}

int pp_proc__list_tids(pid_t pid, pid_t **ret, size_t *ret_n)
{
	char path[64];

	if (pid <= 0 || !ret || !ret_n)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	return list_numeric(path, ret, ret_n);
}

int pp_proc__thread_name(pid_t pid, pid_t tid, char *buf, size_t n)
{
	_cleanup_free_ char *text = NULL;
	char path[96];
	size_t len;
	int r;

	if (pid <= 0 || tid <= 0 || !buf || n == 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	r = read_capped(path, 256, &text, &len);
	if (r < 0)
		return r;
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\0'))
		len--;
	if (len >= n)
		len = n - 1;
	memcpy(buf, text, len);
	buf[len] = '\0';
	return 0;
}
