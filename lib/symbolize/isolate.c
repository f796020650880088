// SPDX-License-Identifier: Apache-2.0
/*
 * Isolated symbolization: the helper process and podprof's side of it
 * (see isolate.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <dirent.h>
#include <unistd.h>

#include "isolate.h"
#include "sym-internal.h"
#include "util/log.h"
#include "util/util.h"

#define HELPER_FD 3
#define DEFAULT_TIMEOUT_MS 30000
#define MAX_OPENS_PER_REQUEST 32
#define MAX_REFUSED 4096
#define BACKOFF_MIN_NS 100000000ull /* 100 ms */
#define BACKOFF_MAX_NS 30000000000ull /* 30 s */
#define HEALTHY_NS 60000000000ull /* a helper that ran this long restarts at once */
#define EXIT_RECYCLE 3 /* the helper used half its CPU budget and left */
#define STR_NULL 0xffffffffu
#define N_ARGS 7 /* the helper's arguments after PP_SYMISO_HELPER_ARG */
#define READY_OWN_UID 1u /* M_READY flags: it runs as helper_uid */

enum msg_type {
	M_RESOLVE = PP_SYMISO_M_RESOLVE,
	M_JIT = PP_SYMISO_M_JIT,
	M_OPEN = PP_SYMISO_M_OPEN,
	M_OPEN_REPLY = PP_SYMISO_M_OPEN_REPLY,
	M_RESULT = PP_SYMISO_M_RESULT,
	M_READY = PP_SYMISO_M_READY,
};

#define RES_HAS_FUNCTION 1u
#define RES_HAS_FILE 2u
#define RES_HAS_LINE 4u
#define RES_HAS_INLINE 8u

#define MAP_SHARED_F 1u
#define MAP_DELETED_F 2u
#define MAP_SPECIAL_F 4u

/* ---------- framing ---------- */

struct wr {
	uint8_t *p;
	size_t cap, len;
	bool bad;
};

struct rd {
	const uint8_t *p;
	size_t left;
	bool bad;
};

static void put(struct wr *w, const void *d, size_t n)
{
	if (w->bad || n > w->cap - w->len) {
		w->bad = true;
		return;
	}
	if (n)
		memcpy(w->p + w->len, d, n);
	w->len += n;
}

static void put32(struct wr *w, uint32_t v)
{
	put(w, &v, sizeof(v));
}

static void put64(struct wr *w, uint64_t v)
{
	put(w, &v, sizeof(v));
}

static void put_str(struct wr *w, const char *s, size_t max)
{
	if (!s) {
		put32(w, STR_NULL);
		return;
	}
	size_t n = strnlen(s, max);
	put32(w, (uint32_t)n);
	put(w, s, n);
}

static void get(struct rd *r, void *d, size_t n)
{
	if (r->bad || n > r->left) {
		r->bad = true;
		memset(d, 0, n);
		return;
	}
	memcpy(d, r->p, n);
	r->p += n;
	r->left -= n;
}

static uint32_t get32(struct rd *r)
{
	uint32_t v;
	get(r, &v, sizeof(v));
	return v;
}

static uint64_t get64(struct rd *r)
{
	uint64_t v;
	get(r, &v, sizeof(v));
	return v;
}

/* A string of at most max bytes, no NUL inside; *ret NULL for a null string. */
static void get_str(struct rd *r, size_t max, char **ret)
{
	*ret = NULL;
	uint32_t n = get32(r);
	if (r->bad || n == STR_NULL)
		return;
	if (n > max || n > r->left || memchr(r->p, '\0', n)) {
		r->bad = true;
		return;
	}
	*ret = strndup((const char *)r->p, n);
	if (!*ret) {
		r->bad = true;
		return;
	}
	r->p += n;
	r->left -= n;
}

static void put_map(struct wr *w, const struct pp_map *m)
{
	put64(w, m->start);
	put64(w, m->end);
	put64(w, m->offset);
	put32(w, m->prot);
	put32(w, (m->shared ? MAP_SHARED_F : 0) | (m->deleted ? MAP_DELETED_F : 0) |
			 (m->special ? MAP_SPECIAL_F : 0));
	put32(w, m->dev_major);
	put32(w, m->dev_minor);
	put64(w, m->inode);
	put_str(w, m->path, PATH_MAX);
}

/* m->path is allocated (free it). */
static void get_map(struct rd *r, struct pp_map *m)
{
	memset(m, 0, sizeof(*m));
	m->start = get64(r);
	m->end = get64(r);
	m->offset = get64(r);
	m->prot = get32(r);
	uint32_t fl = get32(r);
	m->shared = fl & MAP_SHARED_F;
	m->deleted = fl & MAP_DELETED_F;
	m->special = fl & MAP_SPECIAL_F;
	m->dev_major = get32(r);
	m->dev_minor = get32(r);
	m->inode = get64(r);
	get_str(r, PATH_MAX - 1, &m->path);
	if (m->start >= m->end)
		r->bad = true;
}

static void put_stats(struct wr *w, const struct pp_symbolizer_stats *st)
{
	put64(w, st->files_loaded);
	put64(w, st->files_evicted);
	put64(w, st->files_failed);
	put64(w, st->cache_bytes);
	put64(w, st->lookups);
	put64(w, st->jit_reloads_deferred);
	put64(w, st->dwarf_refused);
	put64(w, st->names_bounded);
}

static void get_stats(struct rd *r, struct pp_symbolizer_stats *st)
{
	st->files_loaded = get64(r);
	st->files_evicted = get64(r);
	st->files_failed = get64(r);
	st->cache_bytes = get64(r);
	st->lookups = get64(r);
	st->jit_reloads_deferred = get64(r);
	st->dwarf_refused = get64(r);
	st->names_bounded = get64(r);
}

static void encode_frames(struct wr *w, int rc, const struct pp_sym_result *r, size_t first,
			  const struct pp_symbolizer_stats *st)
{
	size_t n = rc == 0 && r ? r->n - first : 0;
	uint32_t fl = 0;
	if (n) {
		fl |= r->has_function ? RES_HAS_FUNCTION : 0;
		fl |= r->has_file ? RES_HAS_FILE : 0;
		fl |= r->has_line ? RES_HAS_LINE : 0;
		fl |= r->has_inline && n > 1 ? RES_HAS_INLINE : 0;
	}
	put32(w, M_RESULT);
	put32(w, (uint32_t)(n ? 0 : (rc < 0 ? rc : -ENOENT)));
	put32(w, fl);
	put32(w, (uint32_t)n);
	put_stats(w, st);
	for (size_t i = first; n && i < r->n; i++) {
		const struct pp_sym_frame *f = &r->frames[i];
		put32(w, f->line);
		put32(w, f->start_line);
		put_str(w, f->function ? f->function : "?", PP_SYMISO_MAX_STR);
		put_str(w, f->system_name, PP_SYMISO_MAX_STR);
		put_str(w, f->file, PP_SYMISO_MAX_STR);
	}
}

int pp_symiso__encode_result(int rc, const struct pp_sym_result *r,
			     const struct pp_symbolizer_stats *st, uint8_t *buf, size_t cap,
			     size_t *ret_len)
{
	struct pp_symbolizer_stats zero = { 0 };
	if (!st)
		st = &zero;
	if (rc == 0 && (!r || !r->n))
		rc = -ENOENT;
	/* Too many frames or too long: keep the outermost (the physical function). */
	size_t first = rc == 0 && r->n > PP_SYMISO_MAX_FRAMES ? r->n - PP_SYMISO_MAX_FRAMES : 0;
	for (;;) {
		struct wr w = { .p = buf, .cap = cap };
		encode_frames(&w, rc, r, first, st);
		if (!w.bad) {
			*ret_len = w.len;
			return 0;
		}
		if (rc != 0 || first + 1 >= r->n)
			return -EMSGSIZE;
		first++;
	}
}

int pp_symiso__decode_result(const uint8_t *buf, size_t len, int *ret_rc, struct pp_sym_result *ret,
			     struct pp_symbolizer_stats *ret_stats)
{
	struct rd r = { .p = buf, .left = len };
	struct pp_sym_result res = { 0 };
	struct pp_symbolizer_stats st;

	memset(ret, 0, sizeof(*ret));
	if (get32(&r) != M_RESULT)
		return -EBADMSG;
	int32_t rc = (int32_t)get32(&r);
	uint32_t fl = get32(&r);
	uint32_t n = get32(&r);
	get_stats(&r, &st);
	if (r.bad || rc > 0 || rc < -4095 || (rc == 0) != (n > 0) || n > PP_SYMISO_MAX_FRAMES ||
	    (fl & ~(RES_HAS_FUNCTION | RES_HAS_FILE | RES_HAS_LINE | RES_HAS_INLINE)))
		return -EBADMSG;
	if (n) {
		res.frames = calloc(n, sizeof(*res.frames));
		if (!res.frames)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < n && !r.bad; i++) {
		struct pp_sym_frame *f = &res.frames[i];
		res.n = i + 1;
		f->line = get32(&r);
		f->start_line = get32(&r);
		get_str(&r, PP_SYMISO_MAX_STR, &f->function);
		get_str(&r, PP_SYMISO_MAX_STR, &f->system_name);
		get_str(&r, PP_SYMISO_MAX_STR, &f->file);
		if (!f->function)
			r.bad = true;
	}
	if (r.bad || r.left) {
		pp_sym_result__free(&res);
		return -EBADMSG;
	}
	res.has_function = fl & RES_HAS_FUNCTION;
	res.has_file = fl & RES_HAS_FILE;
	res.has_line = fl & RES_HAS_LINE;
	res.has_inline = fl & RES_HAS_INLINE;
	*ret_rc = rc;
	*ret = res;
	if (ret_stats)
		*ret_stats = st;
	return 0;
}

/* ---------- messages with fds ---------- */

/* One message; *ret_fd gets a passed fd (or -1). Returns length, 0 on EOF, -errno. */
static ssize_t recv_msg(int fd, uint8_t *buf, size_t cap, int *ret_fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	ssize_t n;

	*ret_fd = -1;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	int bad = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*ret_fd < 0 && !i)
				*ret_fd = f;
			else {
				close(f);
				bad = 1;
			}
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		bad = 1;
	if (bad) {
		if (*ret_fd >= 0)
			close(*ret_fd);
		*ret_fd = -1;
		return -EBADMSG;
	}
	return n;
}

/* flags: MSG_DONTWAIT where the peer may not be reading (podprof's side). */
static int send_msg(int fd, const void *buf, size_t len, int pass_fd, int flags)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (pass_fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/* ---------- the helper ---------- */

struct helper {
	int fd;
	struct pp_symbolizer *sym;
	uint64_t churn; /* files loaded + evicted + failed as of the last trim */
	uint8_t buf[PP_SYMISO_MAX_MSG];
	uint8_t obuf[PP_SYMISO_MAX_MSG];
};

/* Ask podprof for a file: the request in buf[0..len). fd or -errno. */
static int helper_ask(struct helper *h, struct wr *w)
{
	if (w->bad)
		return -ENAMETOOLONG;
	if (send_msg(h->fd, w->p, w->len, -1, 0) < 0)
		_exit(1); /* podprof is gone */
	uint8_t rbuf[16];
	int fd;
	ssize_t n = recv_msg(h->fd, rbuf, sizeof(rbuf), &fd);
	if (n <= 0)
		_exit(1);
	struct rd r = { .p = rbuf, .left = (size_t)n };
	uint32_t type = get32(&r);
	int32_t err = (int32_t)get32(&r);
	if (r.bad || type != M_OPEN_REPLY || (err == 0) != (fd >= 0)) {
		if (fd >= 0)
			close(fd);
		_exit(1);
	}
	return err == 0 ? fd : (err < 0 ? err : -EIO);
}

/*
 * The helper names what it wants, never where it is: podprof derives the
 * file from the request it is serving (the pid and map are not sent).
 */
static int helper_open_mapped(void *ctx, pid_t pid, const struct pp_map *m)
{
	struct helper *h = ctx;
	uint8_t b[16];
	struct wr w = { .p = b, .cap = sizeof(b) };
	(void)pid, (void)m;
	put32(&w, M_OPEN);
	put32(&w, PP_SYMISO_OPEN_MAPPED);
	return helper_ask(h, &w);
}

static int helper_open_debug_id(void *ctx, pid_t pid, const uint8_t *id, size_t id_len)
{
	struct helper *h = ctx;
	uint8_t b[16 + PP_BUILD_ID_MAX];
	struct wr w = { .p = b, .cap = sizeof(b) };
	(void)pid;
	if (id_len > PP_BUILD_ID_MAX)
		return -ENOENT;
	put32(&w, M_OPEN);
	put32(&w, PP_SYMISO_OPEN_DEBUG_ID);
	put32(&w, (uint32_t)id_len);
	put(&w, id, id_len);
	return helper_ask(h, &w);
}

static int helper_open_debuglink(void *ctx, pid_t pid, const char *mapped_path, const char *name,
				 unsigned cand)
{
	struct helper *h = ctx;
	uint8_t b[32 + 256];
	struct wr w = { .p = b, .cap = sizeof(b) };
	(void)pid, (void)mapped_path;
	put32(&w, M_OPEN);
	put32(&w, PP_SYMISO_OPEN_DEBUGLINK);
	put32(&w, cand);
	put_str(&w, name, 255);
	return helper_ask(h, &w);
}

static int helper_open_perf_map(void *ctx, pid_t pid)
{
	struct helper *h = ctx;
	uint8_t b[16];
	struct wr w = { .p = b, .cap = sizeof(b) };
	(void)pid;
	put32(&w, M_OPEN);
	put32(&w, PP_SYMISO_OPEN_PERF_MAP);
	return helper_ask(h, &w);
}

#if defined(__x86_64__)
#define AUDIT_ARCH_NATIVE AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_NATIVE AUDIT_ARCH_AARCH64
#endif

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + (i) * sizeof(uint64_t))

/*
 * Allowed (what libelf, libdw, libiberty and glibc were seen to call under
 * strace): reading the fds given (read, pread, lseek, fstat, fcntl
 * F_GETFD), memory (mmap, munmap, mremap, mprotect, brk, madvise), futex,
 * signals returning, time, getrusage, sysinfo, exit; write on stderr only;
 * sendmsg/recvmsg on the socket only. Anything else (open, readlink of
 * /proc/self/fd by libdw, socket, kill, execve...) fails with EPERM;
 * another architecture's calls kill the helper.
 */
static int install_seccomp(void)
{
#ifndef AUDIT_ARCH_NATIVE
	return -ENOTSUP;
#else
	static const int allow[] = {
		SYS_read,	  SYS_pread64,
		SYS_lseek,	  SYS_close,
		SYS_fstat,	  SYS_mmap,
		SYS_munmap,	  SYS_mremap,
		SYS_mprotect,	  SYS_brk,
		SYS_madvise,	  SYS_futex,
		SYS_exit,	  SYS_exit_group,
		SYS_rt_sigreturn, SYS_rt_sigprocmask,
		SYS_getrusage,	  SYS_clock_gettime,
		SYS_gettid,	  SYS_getpid,
		SYS_sched_yield,  SYS_restart_syscall,
		SYS_getrandom,	  SYS_sysinfo, /* glibc's qsort sizes its buffer with it */
		SYS_sigaltstack, /* ASan's runtime asks for it */
	};
	struct {
		int nr;
		unsigned arg;
		uint32_t val;
	} cond[] = {
		{ SYS_write, 0, 2 },
		{ SYS_sendmsg, 0, HELPER_FD },
		{ SYS_recvmsg, 0, HELPER_FD },
		{ SYS_newfstatat, 3, AT_EMPTY_PATH }, /* fstat(fd) as glibc makes it */
		{ SYS_fcntl, 1, F_GETFD }, /* libelf checks the fd it is given */
	};
	struct sock_filter f[4 + 2 * ARRAY_SIZE(allow) + 5 * ARRAY_SIZE(cond) + 1];
	size_t n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_NATIVE, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	for (size_t i = 0; i < ARRAY_SIZE(allow); i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)allow[i],
						      0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	}
	for (size_t i = 0; i < ARRAY_SIZE(cond); i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
						      (uint32_t)cond[i].nr, 0, 4);
		f[n++] =
			(struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(cond[i].arg));
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, cond[i].val, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		f[n++] = (struct sock_filter)BPF_STMT(
			BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
					      SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
	struct sock_fprog prog = { .len = (unsigned short)n, .filter = f };
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
		return -errno;
	return 0;
#endif
}

/*
 * Every capability gone (the bounding set only where CAP_SETPCAP allows),
 * and, between the bounding set (which needs CAP_SETPCAP) and the rest
 * (which a change of uid clears anyway), the real and effective uid and
 * every gid set to uid (no supplementary groups). *ret_own_uid: whether the ids
 * changed (it takes CAP_SETUID and CAP_SETGID, and uid mapped in podprof's
 * user namespace); without them the helper stays podprof's uid, and only
 * non-dumpable.
 */
static int drop_privileges(uint32_t uid, bool *ret_own_uid)
{
	*ret_own_uid = false;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (int c = 0; c < 64; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno == EINVAL)
			break;
	if (uid) {
		/*
		 * gid first: setresgid needs the CAP_SETGID that setresuid drops.
		 * The saved uid stays podprof's: podprof (which keeps no CAP_KILL)
		 * can still kill a helper that hangs, as can any process of
		 * podprof's uid (a denial of names, nothing more). ptrace,
		 * pidfd_getfd and /proc/PID/{root,fd,mem} need the caller's uid
		 * to equal all three, and a non-dumpable target besides. The
		 * seccomp filter keeps the helper from taking the saved uid back.
		 */
		uid_t saved = getuid();
		bool ok = (setgroups(0, NULL) == 0 || errno == EPERM) &&
			  setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) == 0 &&
			  setresuid((uid_t)uid, (uid_t)uid, saved) == 0;
		uid_t r, e, sv;
		*ret_own_uid = ok && getresuid(&r, &e, &sv) == 0 && r == uid && e == uid;
		/* a change of credentials sets dumpable to fs.suid_dumpable: again */
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	}
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	for (int i = 0; i < 2; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return -EPERM;
	return 0;
}

/*
 * Nothing of podprof's but the socket (and stdio): podprof closes the rest
 * with close_range before exec, which an older kernel or a container's
 * seccomp profile may refuse; then /proc/self/fd is walked here.
 */
static void close_inherited(void)
{
	if (syscall(SYS_close_range, HELPER_FD + 1, ~0u, 0) == 0)
		return;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	int self = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		uint64_t fd;
		if (pp_parse_u64(e->d_name, 10, HELPER_FD + 1, INT_MAX, &fd) == 0 &&
		    (int)fd != self)
			close((int)fd);
	}
	closedir(d);
}

static int set_limit(int res, uint64_t v)
{
	struct rlimit rl = { .rlim_cur = v, .rlim_max = v };
	return setrlimit(res, &rl) < 0 ? -errno : 0;
}

static uint64_t cpu_used_s(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec;
}

static void helper_serve(struct helper *h, uint64_t cpu_seconds)
{
	for (;;) {
		int pfd;
		ssize_t n = recv_msg(h->fd, h->buf, sizeof(h->buf), &pfd);
		if (n <= 0)
			return; /* podprof closed its end (or a broken message: leave) */
		if (pfd >= 0) {
			close(pfd);
			return;
		}
		struct rd r = { .p = h->buf, .left = (size_t)n };
		uint32_t type = get32(&r);
		pid_t pid = (pid_t)get32(&r);
		uint64_t addr = get64(&r);
		struct pp_sym_result res = { 0 };
		int rc = -EINVAL;
		if (type == M_RESOLVE) {
			struct pp_map m;
			uint8_t bid[PP_BUILD_ID_MAX];
			get_map(&r, &m);
			uint32_t bl = get32(&r);
			if (bl > PP_BUILD_ID_MAX)
				r.bad = true;
			else
				get(&r, bid, bl);
			if (!r.bad)
				rc = pp_symbolizer__resolve(h->sym, pid, &m, bl ? bid : NULL, bl,
							    addr, &res);
			free(m.path);
		} else if (type == M_JIT && !r.bad) {
			rc = pp_symbolizer__resolve_jit(h->sym, pid, addr, &res);
		} else {
			return;
		}
		struct pp_symbolizer_stats st;
		pp_symbolizer__stats(h->sym, &st);
		size_t len;
		if (pp_symiso__encode_result(rc, &res, &st, h->obuf, sizeof(h->obuf), &len) < 0)
			pp_symiso__encode_result(-EMSGSIZE, NULL, &st, h->obuf, sizeof(h->obuf),
						 &len);
		pp_sym_result__free(&res);
		if (send_msg(h->fd, h->obuf, len, -1, 0) < 0)
			return;
		/* A file loaded (its parse's temporary memory) or evicted (its tables,
		 * its DWARF): give the freed pages back, so the cache budget bounds
		 * the helper's RSS and not only what it holds. A few hundred us, after
		 * the answer; requests that load nothing do not trim. */
		uint64_t churn = st.files_loaded + st.files_evicted + st.files_failed;
		if (churn != h->churn) {
			h->churn = churn;
#ifdef __GLIBC__
			malloc_trim(0);
#endif
		}
		if (cpu_seconds && cpu_used_s() * 2 >= cpu_seconds)
			_exit(EXIT_RECYCLE);
	}
}

int pp_symiso__helper_main(int argc, char **argv)
{
	static struct helper h;
	uint64_t v[N_ARGS] = { 0 };

	/*
	 * Before anything else: while dumpable, a process of the same uid
	 * could read its memory, take its socket (pidfd_getfd) or walk
	 * /proc/PID/root and /proc/PID/fd. (Until drop_privileges it is
	 * protected by podprof's capabilities, which the application lacks.)
	 */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (argc != 2 + N_ARGS || strcmp(argv[1], PP_SYMISO_HELPER_ARG))
		return 2;
	for (int i = 0; i < N_ARGS; i++)
		if (pp_parse_u64(argv[2 + i], 10, 0, UINT64_MAX, &v[i]) < 0)
			return 2;
	if (v[6] > UINT32_MAX - 1)
		return 2;
	uint64_t memory_mib = v[0], cpu_seconds = v[1];
	pp_log_setup((enum pp_log_level)PP_MIN(v[4], (uint64_t)PP_LOG_DEBUG),
		     v[5] ? PP_LOG_JSON : PP_LOG_TEXT);
	prctl(PR_SET_NAME, "podprof-sym", 0, 0, 0);

	struct stat sb;
	if (fstat(HELPER_FD, &sb) < 0 || !S_ISSOCK(sb.st_mode))
		return 2;
	close_inherited();
	bool own_uid;
	int r = drop_privileges((uint32_t)v[6], &own_uid);
	if (r < 0) {
		pp_dbg("symbolizer helper: cannot drop capabilities: %s", strerror(-r));
		return 2;
	}
	set_limit(RLIMIT_CORE, 0);
	set_limit(RLIMIT_FSIZE, 0);
	set_limit(RLIMIT_NPROC, 0);
#ifndef __SANITIZE_ADDRESS__ /* ASan reserves terabytes of address space */
	if (memory_mib && set_limit(RLIMIT_AS, memory_mib << 20) < 0)
		return 2;
#endif
	if (cpu_seconds && set_limit(RLIMIT_CPU, cpu_seconds) < 0)
		return 2;

	struct pp_symbolizer_opts so = { .cache_bytes = v[2], .no_dwarf = v[3] != 0 };
	h.fd = HELPER_FD;
	h.sym = pp_symbolizer__new(&so);
	if (!h.sym)
		return 2;
	static const struct pp_sym_opener opener = {
		.open_mapped = helper_open_mapped,
		.open_debug_id = helper_open_debug_id,
		.open_debuglink = helper_open_debuglink,
		.open_perf_map = helper_open_perf_map,
		.ctx = &h,
	};
	pp_sym__set_opener(&opener);
	/* warm what would otherwise be set up lazily past the filter */
	free(pp_demangle("_Z1fv"));
	r = install_seccomp();
	if (r < 0) {
		pp_dbg("symbolizer helper: cannot install the seccomp filter: %s", strerror(-r));
		return 2;
	}
	uint32_t ready[2] = { M_READY, own_uid ? READY_OWN_UID : 0 };
	if (send_msg(HELPER_FD, ready, sizeof(ready), -1, 0) < 0)
		_exit(1);
	helper_serve(&h, cpu_seconds);
	/* _exit: no atexit work (and no leak check) past the filter */
	_exit(0);
}

/* ---------- podprof's side ---------- */

struct refkey {
	uint8_t bid_len;
	uint8_t bid[PP_BUILD_ID_MAX];
	uint32_t maj, min;
	uint64_t ino;
	pid_t jit_pid; /* a perf map: its pid */
};

struct pp_symiso {
	pthread_mutex_t lock;
	struct pp_symiso_opts o;
	char args[N_ARGS][24];
	int fd;
	_Atomic pid_t pid;
	uint64_t started_ns, next_spawn_ns, backoff_ns;
	uint64_t last_req_ns; /* the last request sent (or the start) */
	bool started_once;
	bool idle_ending; /* reap: the helper is ended for idleness, not a failure */
	bool idle_ended; /* none runs because it was idle: the next request starts one */
	struct pp_symiso_stats st; /* st.sym: the helpers that are gone, summed */
	struct pp_symbolizer_stats cur; /* the running helper's, from its last answer */
	struct refkey *refused;
	size_t n_refused;
	/* st and cur as of the last request: read without waiting for one */
	pthread_mutex_t pub_lock;
	struct pp_symiso_stats pub;
	uint8_t buf[PP_SYMISO_MAX_MSG];
};

/* Lock held: the counters as they are now, for pp_symiso__stats. */
static void publish(struct pp_symiso *s)
{
	struct pp_symiso_stats p = s->st;
	p.sym.files_loaded += s->cur.files_loaded;
	p.sym.files_evicted += s->cur.files_evicted;
	p.sym.files_failed += s->cur.files_failed;
	p.sym.cache_bytes = s->cur.cache_bytes;
	p.sym.lookups += s->cur.lookups;
	p.sym.jit_reloads_deferred += s->cur.jit_reloads_deferred;
	p.sym.dwarf_refused += s->cur.dwarf_refused;
	p.sym.names_bounded += s->cur.names_bounded;
	pthread_mutex_lock(&s->pub_lock);
	s->pub = p;
	pthread_mutex_unlock(&s->pub_lock);
}

enum end { END_CRASH, END_RECYCLE, END_KILLED };
static enum end reap(struct pp_symiso *s, bool kill_it);

/* Lock held. fork + exec of podprof as the helper. */
static int spawn(struct pp_symiso *s)
{
	int sv[2];
	char *argv[] = { "podprof-sym", PP_SYMISO_HELPER_ARG, s->args[0], s->args[1], s->args[2],
			 s->args[3],	s->args[4],	      s->args[5], s->args[6], NULL };
	char *envp[] = { NULL };
	const char *exe = s->o.exe ? s->o.exe : "/proc/self/exe";

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (pid == 0) {
		/* async-signal-safe calls only until execve */
		sigset_t all;
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		if (sv[1] == HELPER_FD) {
			int fl = fcntl(HELPER_FD, F_GETFD);
			fcntl(HELPER_FD, F_SETFD, fl & ~FD_CLOEXEC);
		} else if (dup2(sv[1], HELPER_FD) < 0) {
			_exit(127);
		}
		syscall(SYS_close_range, HELPER_FD + 1, ~0u, 0);
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		execve(exe, argv, envp);
		_exit(127);
	}
	close(sv[1]);
	s->fd = sv[0];
	atomic_store(&s->pid, pid);
	s->started_ns = s->last_req_ns = pp_now_mono_ns();
	if (s->started_once && !s->idle_ended)
		s->st.restarts++;
	s->started_once = true;
	s->idle_ended = false;
	/* it says when it is confined and serving (an exec or a confinement
	 * that fails shows here, not as lost requests) */
	uint64_t timeout_ms = s->o.timeout_ms ? s->o.timeout_ms : DEFAULT_TIMEOUT_MS;
	struct pollfd p = { .fd = s->fd, .events = POLLIN };
	uint8_t b[16];
	int pfd = -1, pr;
	do
		pr = poll(&p, 1, (int)PP_MIN(timeout_ms, 10000ull));
	while (pr < 0 && errno == EINTR);
	ssize_t n = pr > 0 ? recv_msg(s->fd, b, sizeof(b), &pfd) : -ETIMEDOUT;
	uint32_t ready[2] = { 0, 0 };
	if (n == (ssize_t)sizeof(ready))
		memcpy(ready, b, sizeof(ready));
	if (pfd >= 0)
		close(pfd);
	if (ready[0] != M_READY || (ready[1] & ~READY_OWN_UID)) {
		reap(s, true);
		return n < 0 ? (int)n : -EIO;
	}
	s->st.shared_uid = !(ready[1] & READY_OWN_UID);
	return 0;
}

/* Lock held: the helper is gone or must go. Returns how it ended. */

static enum end ended(struct pp_symiso *s, int status, bool killed);

static enum end reap(struct pp_symiso *s, bool kill_it)
{
	pid_t pid = atomic_load(&s->pid);
	int status = 0;

	if (pid <= 0)
		return END_KILLED;
	if (kill_it)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return ended(s, status, kill_it);
}

/* Lock held: the helper's exit status collected; its counters folded in. */
static enum end ended(struct pp_symiso *s, int status, bool killed)
{
	enum end e = END_CRASH;

	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	atomic_store(&s->pid, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_RECYCLE)
		e = END_RECYCLE;
	/* fold its counters into the sum (cache_bytes is a gauge: gone with it) */
	s->st.sym.files_loaded += s->cur.files_loaded;
	s->st.sym.files_evicted += s->cur.files_evicted;
	s->st.sym.files_failed += s->cur.files_failed;
	s->st.sym.lookups += s->cur.lookups;
	s->st.sym.jit_reloads_deferred += s->cur.jit_reloads_deferred;
	s->st.sym.dwarf_refused += s->cur.dwarf_refused;
	s->st.sym.names_bounded += s->cur.names_bounded;
	memset(&s->cur, 0, sizeof(s->cur));
	uint64_t now = pp_now_mono_ns();
	if (s->idle_ending) {
		s->idle_ending = false;
		s->idle_ended = true;
		s->st.idle_ends++;
		s->next_spawn_ns = now;
		return END_RECYCLE;
	}
	if (e == END_RECYCLE) {
		s->st.recycled++;
		s->next_spawn_ns = now;
		return e;
	}
	s->st.crashes++;
	if (now - s->started_ns >= HEALTHY_NS)
		s->backoff_ns = 0;
	else
		s->backoff_ns = s->backoff_ns ? PP_MIN(s->backoff_ns * 2, BACKOFF_MAX_NS)
					      : BACKOFF_MIN_NS;
	s->next_spawn_ns = now + s->backoff_ns;
	return e;
}

/* Lock held: a running helper, started if the backoff allows. */
static int ensure(struct pp_symiso *s)
{
	if (s->fd >= 0)
		return 0;
	if (pp_now_mono_ns() < s->next_spawn_ns)
		return -EAGAIN;
	int r = spawn(s);
	if (r < 0) {
		s->next_spawn_ns = pp_now_mono_ns() + BACKOFF_MAX_NS;
		return r;
	}
	return 0;
}

static bool refused(struct pp_symiso *s, const struct refkey *k)
{
	for (size_t i = 0; i < s->n_refused; i++) {
		const struct refkey *x = &s->refused[i];
		if (k->jit_pid || x->jit_pid) {
			if (k->jit_pid == x->jit_pid)
				return true;
			continue;
		}
		if (k->bid_len && x->bid_len) {
			if (k->bid_len == x->bid_len && !memcmp(k->bid, x->bid, k->bid_len))
				return true;
			continue;
		}
		if (!k->bid_len && !x->bid_len && k->maj == x->maj && k->min == x->min &&
		    k->ino == x->ino)
			return true;
	}
	return false;
}

static void refuse(struct pp_symiso *s, const struct refkey *k)
{
	if (refused(s, k))
		return;
	s->st.files_refused++;
	if (s->n_refused >= MAX_REFUSED)
		return; /* counted; the oldest stay */
	if (!s->refused) {
		s->refused = calloc(MAX_REFUSED, sizeof(*s->refused));
		if (!s->refused)
			return;
	}
	s->refused[s->n_refused++] = *k;
}

/* What podprof knows of the request it is serving; the only source of paths. */
struct req {
	pid_t pid;
	const struct pp_map *m; /* NULL for a perf map request */
};

/* What the helper asks for, derived from req. fd or -errno (any reason). */
static int derive_open(const struct req *q, struct rd *r)
{
	uint32_t kind = get32(r);

	if (r->bad || q->pid <= 0)
		return -ENOENT;
	switch (kind) {
	case PP_SYMISO_OPEN_MAPPED:
		if (r->left || !q->m)
			return -ENOENT;
		return pp_proc__open_mapped(q->pid, q->m);
	case PP_SYMISO_OPEN_DEBUG_ID: {
		uint8_t id[PP_BUILD_ID_MAX];
		uint32_t n = get32(r);
		if (r->bad || n == 0 || n > PP_BUILD_ID_MAX || n != r->left || !q->m)
			return -ENOENT;
		get(r, id, n);
		/* any build id: the file opened must carry it (the dwz common file
		 * has its own), and only .build-id paths are built */
		return pp_sym__open_debug_id_direct(q->pid, id, n);
	}
	case PP_SYMISO_OPEN_DEBUGLINK: {
		uint32_t cand = get32(r);
		char *name;
		get_str(r, 255, &name);
		int fd = -ENOENT;
		if (!r->bad && !r->left && q->m && q->m->path && pp_sym__debuglink_name_ok(name))
			fd = pp_sym__open_debuglink_direct(q->pid, q->m->path, name, cand);
		free(name);
		return fd;
	}
	case PP_SYMISO_OPEN_PERF_MAP:
		if (r->left)
			return -ENOENT;
		return pp_sym__open_perf_map_direct(q->pid);
	default:
		return -ENOENT;
	}
}

/*
 * Lock held: open what the helper asks for, derived from the request being
 * served. Whatever the reason (refused, malformed, missing, not the mapped
 * inode, not a regular file) the answer is the same -ENOENT: no oracle.
 */
static int serve_open(struct pp_symiso *s, const uint8_t *b, size_t len, const struct req *q)
{
	struct rd r = { .p = b, .left = len };
	get32(&r);
	int fd = derive_open(q, &r);
	if (fd < 0)
		s->st.opens_refused++;
	uint8_t rb[8];
	struct wr w = { .p = rb, .cap = sizeof(rb) };
	put32(&w, M_OPEN_REPLY);
	put32(&w, (uint32_t)(fd >= 0 ? 0 : -ENOENT));
	int e = send_msg(s->fd, rb, w.len, fd, MSG_DONTWAIT);
	if (fd >= 0)
		close(fd);
	return e;
}

/* Lock held: one request (buf[0..len)), answered into ret. */
static int call(struct pp_symiso *s, size_t len, const struct req *q, const struct refkey *key,
		struct pp_sym_result *ret)
{
	uint64_t timeout_ns =
		(uint64_t)(s->o.timeout_ms ? s->o.timeout_ms : DEFAULT_TIMEOUT_MS) * 1000000ull;
	int r;

	/* A helper that died between requests (or recycled itself) is not this file's fault. */
	for (int attempt = 0;; attempt++) {
		r = ensure(s);
		if (r < 0)
			return r;
		r = send_msg(s->fd, s->buf, len, -1, MSG_DONTWAIT);
		if (r == 0)
			break;
		reap(s, true); /* (killing one that already exited changes nothing) */
		if (attempt)
			return -EIO;
	}
	s->st.requests++;
	s->last_req_ns = pp_now_mono_ns();
	uint64_t deadline = pp_now_mono_ns() + timeout_ns;
	unsigned opens = 0;
	uint8_t *rb = malloc(PP_SYMISO_MAX_MSG);
	if (!rb) {
		reap(s, true);
		return -ENOMEM;
	}
	for (;;) {
		uint64_t now = pp_now_mono_ns();
		int ms = now >= deadline ? 0
					 : (int)PP_MIN((deadline - now + 999999) / 1000000, 60000);
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		int pr = ms ? poll(&p, 1, ms) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0 && pp_now_mono_ns() < deadline)
			continue;
		if (pr <= 0) {
			s->st.timeouts++;
			reap(s, true);
			refuse(s, key);
			r = -ETIMEDOUT;
			break;
		}
		int pfd;
		ssize_t n = recv_msg(s->fd, rb, PP_SYMISO_MAX_MSG, &pfd);
		if (pfd >= 0)
			close(pfd);
		uint32_t type = 0;
		if (n >= 4)
			memcpy(&type, rb, 4);
		if (n > 0 && type == M_OPEN && opens++ < MAX_OPENS_PER_REQUEST) {
			if (serve_open(s, rb, (size_t)n, q) == 0)
				continue;
		} else if (n > 0 && type == M_RESULT) {
			int rc;
			struct pp_symbolizer_stats st;
			if (pp_symiso__decode_result(rb, (size_t)n, &rc, ret, &st) == 0) {
				s->cur = st;
				r = rc;
				break;
			}
		}
		/* EOF (it died), or a message it should not have sent: it goes */
		/* (a helper that closed its socket may still run: killed) */
		if (reap(s, true) == END_RECYCLE) {
			r = -ECONNRESET; /* it left at its CPU budget before reading: send again */
			break;
		}
		refuse(s, key);
		r = -EIO;
		break;
	}
	free(rb);
	return r;
}

static int fallback(struct pp_sym_result *ret, const struct pp_map *m, uint64_t addr)
{
	char name[256];
	const char *b = strrchr(m->path, '/');
	snprintf(name, sizeof(name), "%s+0x%" PRIx64, b ? b + 1 : m->path,
		 addr - m->start + m->offset);
	return pp_sym__result_one(ret, name, false);
}

int pp_symiso__resolve(struct pp_symiso *s, pid_t pid, const struct pp_map *m,
		       const uint8_t *build_id, size_t build_id_len, uint64_t addr,
		       struct pp_sym_result *ret)
{
	if (!s || !m || !ret || build_id_len > PP_BUILD_ID_MAX || pid <= 0)
		return -EINVAL;
	if (addr < m->start || addr >= m->end)
		return -EINVAL;
	if (!m->path)
		return -ENOENT;
	if (!build_id)
		build_id_len = 0;
	struct refkey k = { .bid_len = (uint8_t)build_id_len,
			    .maj = m->dev_major,
			    .min = m->dev_minor,
			    .ino = m->inode };
	if (build_id_len)
		memcpy(k.bid, build_id, build_id_len);

	pthread_mutex_lock(&s->lock);
	int r;
	if (refused(s, &k)) {
		r = -EPERM;
	} else {
		struct wr w = { .p = s->buf, .cap = sizeof(s->buf) };
		put32(&w, M_RESOLVE);
		put32(&w, (uint32_t)pid);
		put64(&w, addr);
		put_map(&w, m);
		put32(&w, (uint32_t)build_id_len);
		put(&w, build_id, build_id_len);
		struct req q = { .pid = pid, .m = m };
		r = w.bad ? -ENAMETOOLONG : call(s, w.len, &q, &k, ret);
		if (r == -ECONNRESET)
			r = call(s, w.len, &q, &k, ret);
	}
	bool lost = r == -EPERM || r == -EAGAIN || r == -EIO || r == -ETIMEDOUT || r == -ECONNRESET;
	if (lost)
		s->st.requests_refused++;
	publish(s);
	pthread_mutex_unlock(&s->lock);
	if (r == 0 || r == -ENOMEM || r == -ENOENT)
		return r;
	if (m->special)
		return -ENOENT;
	return fallback(ret, m, addr); /* the helper's answer is lost: "file+0xoff" */
}

int pp_symiso__resolve_jit(struct pp_symiso *s, pid_t pid, uint64_t addr, struct pp_sym_result *ret)
{
	if (!s || !ret || pid <= 0)
		return -EINVAL;
	struct refkey k = { .jit_pid = pid };
	pthread_mutex_lock(&s->lock);
	int r;
	if (refused(s, &k)) {
		r = -EPERM;
		s->st.requests_refused++;
	} else {
		struct wr w = { .p = s->buf, .cap = sizeof(s->buf) };
		put32(&w, M_JIT);
		put32(&w, (uint32_t)pid);
		put64(&w, addr);
		struct req q = { .pid = pid };
		r = call(s, w.len, &q, &k, ret);
		if (r == -ECONNRESET)
			r = call(s, w.len, &q, &k, ret);
		if (r == -EAGAIN || r == -EIO || r == -ETIMEDOUT || r == -ECONNRESET)
			s->st.requests_refused++;
	}
	publish(s);
	pthread_mutex_unlock(&s->lock);
	return r < 0 && r != -ENOMEM ? -ENOENT : r;
}

pid_t pp_symiso__pid(struct pp_symiso *s)
{
	return s ? atomic_load(&s->pid) : 0;
}

void pp_symiso__check(struct pp_symiso *s)
{
	if (!s || pthread_mutex_trylock(&s->lock) != 0)
		return; /* a request is under way: it finds out itself */
	pid_t pid = atomic_load(&s->pid);
	int status;
	if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
		ended(s, status, false);
	} else if (pid > 0 && s->o.idle_seconds &&
		   pp_now_mono_ns() - s->last_req_ns >=
			   (uint64_t)s->o.idle_seconds * 1000000000ull) {
		/* unused: its cache is memory the sidecar holds for nothing */
		s->idle_ending = true;
		reap(s, true);
	}
	if (s->fd < 0 && !s->idle_ended)
		ensure(s);
	publish(s);
	pthread_mutex_unlock(&s->lock);
}

void pp_symiso__stats(struct pp_symiso *s, struct pp_symiso_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!s)
		return;
	pthread_mutex_lock(&s->pub_lock);
	*ret = s->pub;
	pthread_mutex_unlock(&s->pub_lock);
}

struct pp_symiso *pp_symiso__new(const struct pp_symiso_opts *opts)
{
	struct pp_symiso *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->o = *opts;
	s->fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->pub_lock, NULL);
	uint64_t v[N_ARGS] = { opts->memory_mib,
			       opts->cpu_seconds,
			       opts->cache_bytes,
			       opts->no_dwarf,
			       (uint64_t)(opts->log_level < 0 ? 0 : opts->log_level),
			       opts->log_json,
			       opts->helper_uid ? opts->helper_uid : PP_SYMISO_HELPER_UID };
	for (int i = 0; i < N_ARGS; i++)
		snprintf(s->args[i], sizeof(s->args[i]), "%" PRIu64, v[i]);
	pthread_mutex_lock(&s->lock);
	int r = spawn(s);
	publish(s);
	pthread_mutex_unlock(&s->lock);
	if (r < 0) {
		pthread_mutex_destroy(&s->lock);
		pthread_mutex_destroy(&s->pub_lock);
		free(s);
		errno = -r;
		return NULL;
	}
	return s;
}

void pp_symiso__free(struct pp_symiso *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	if (s->fd >= 0) {
		/* EOF makes it leave; it is killed if it does not */
		pid_t pid = atomic_load(&s->pid);
		close(s->fd);
		s->fd = -1;
		int status;
		for (int i = 0; i < 100; i++) {
			pid_t w = waitpid(pid, &status, WNOHANG);
			if (w == pid || (w < 0 && errno != EINTR))
				break;
			usleep(10000);
			if (i == 99) {
				kill(pid, SIGKILL);
				waitpid(pid, &status, 0);
			}
		}
	}
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->pub_lock);
	free(s->refused);
	free(s);
}
