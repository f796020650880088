/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU sampler: software cpu-clock perf events with a fixed period.
 *
 * Thread coverage (choice (a) of DESIGN.md): one event per thread
 * (pid = tid, cpu = -1), and every ~100 ms a rescan of /proc/PID/task adds
 * events for new threads, closes those of exited threads, and adopts child
 * processes found in /proc/PID/task/TID/children. Why this and not per-CPU
 * events with a BPF filter: it needs no CAP_BPF and no BPF program on the
 * scheduler's sampling path of every process on the node (a per-CPU event
 * samples *all* tasks and the filter runs for each), and its cost scales
 * with the target's threads only. Its limit: a thread is sampled from the
 * first rescan after its birth, so threads living less than ~100 ms are
 * mostly missed. Per-task events cannot use perf's inherit flag instead:
 * the kernel refuses to mmap inherited per-task events.
 *
 * Each event has its own ring (the kernel cannot redirect per-task events
 * of different tasks into one ring), read in pp_cpu_sampler__poll.
 */
#include "cpu.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "procfs/procfs.h"
#include "util/log.h"
#include "util/util.h"

#define MAX_EVENTS 4096
#define MAX_PROCS 1024
#define RESCAN_NS (100ull * 1000 * 1000)
#define SCRATCH_SIZE 65536

/* ---- record parsing (pure) --------------------------------------------- */

struct cursor {
	const uint8_t *p;
	size_t left;
};

static int take(struct cursor *c, size_t n, const uint8_t **ret)
{
	if (n > c->left)
		return -EINVAL;
	*ret = c->p;
	c->p += n;
	c->left -= n;
	return 0;
}

static int take_u64(struct cursor *c, uint64_t *ret)
{
	const uint8_t *p;

	if (take(c, 8, &p) < 0)
		return -EINVAL;
	memcpy(ret, p, 8);
	return 0;
}

static bool is_context_marker(uint64_t v)
{
	return v >= (uint64_t)PERF_CONTEXT_MAX;
}

/* Split a callchain into kernel and user runs, markers dropped. */
static void split_callchain(const uint64_t *ips, size_t nr, struct pp_raw_sample *s)
{
	size_t i = 0;

	while (i < nr) {
		uint64_t ctx = ips[i++];
		size_t start = i;

		if (!is_context_marker(ctx))
			continue; /* not expected: entries before any marker */
		while (i < nr && !is_context_marker(ips[i]))
			i++;
		if (ctx == (uint64_t)PERF_CONTEXT_KERNEL && !s->kernel_ips) {
			s->kernel_ips = ips + start;
			s->n_kernel = i - start;
		} else if (ctx == (uint64_t)PERF_CONTEXT_USER && !s->user_ips) {
			s->user_ips = ips + start;
			s->n_user = i - start;
		}
	}
}

static int parse_sample(struct cursor *c, const struct pp_perf_fmt *fmt, struct pp_perf_rec *ret)
{
	const uint64_t known = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
			       PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_ID |
			       PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
			       PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_REGS_USER |
			       PERF_SAMPLE_STACK_USER;
	uint64_t st = fmt->sample_type, v;
	struct pp_raw_sample *s = &ret->sample;
	const uint8_t *p;

	if (st & ~known)
		return -ENOTSUP;
	if ((st & PERF_SAMPLE_IDENTIFIER) && take_u64(c, &v) < 0)
		return -EINVAL;
	if ((st & PERF_SAMPLE_IP) && take_u64(c, &ret->ip) < 0)
		return -EINVAL;
	if (st & PERF_SAMPLE_TID) {
		uint32_t pt[2];
		if (take(c, 8, &p) < 0)
			return -EINVAL;
		memcpy(pt, p, 8);
		s->pid = (pid_t)pt[0];
		s->tid = (pid_t)pt[1];
	}
	if ((st & PERF_SAMPLE_TIME) && take_u64(c, &s->time_ns) < 0)
		return -EINVAL;
	if ((st & PERF_SAMPLE_ADDR) && take_u64(c, &v) < 0)
		return -EINVAL;
	if ((st & PERF_SAMPLE_ID) && take_u64(c, &v) < 0)
		return -EINVAL;
	if ((st & PERF_SAMPLE_STREAM_ID) && take_u64(c, &v) < 0)
		return -EINVAL;
	if ((st & PERF_SAMPLE_CPU) && take_u64(c, &v) < 0)
		return -EINVAL;
	if ((st & PERF_SAMPLE_PERIOD) && take_u64(c, &v) < 0)
		return -EINVAL;
	if (st & PERF_SAMPLE_CALLCHAIN) {
		uint64_t nr;
		if (take_u64(c, &nr) < 0 || nr > c->left / 8 || take(c, nr * 8, &p) < 0)
			return -EINVAL;
		/* p is 8-aligned: the record is, and every field before is a multiple of 8. */
		split_callchain((const uint64_t *)(const void *)p, nr, s);
	}
	if (st & PERF_SAMPLE_RAW) {
		uint32_t size;
		if (take(c, 4, &p) < 0)
			return -EINVAL;
		memcpy(&size, p, 4);
		if (take(c, size, &p) < 0)
			return -EINVAL;
		/* u32 size + data is padded to 8 bytes by the kernel */
		size_t pad = (8 - ((4 + (size_t)size) & 7)) & 7;
		if (take(c, pad, &p) < 0)
			return -EINVAL;
	}
	if (st & PERF_SAMPLE_REGS_USER) {
		uint64_t abi;
		if (take_u64(c, &abi) < 0)
			return -EINVAL;
		if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
			size_t nregs = (size_t)__builtin_popcountll(fmt->regs_mask);
			if (take(c, nregs * 8, &p) < 0)
				return -EINVAL;
			uint64_t regs[64];
			memcpy(regs, p, nregs * 8);
			pp_regs__from_perf(&s->regs, regs, fmt->regs_mask);
			s->regs_valid = abi == PERF_SAMPLE_REGS_ABI_64;
		}
	}
	if (st & PERF_SAMPLE_STACK_USER) {
		uint64_t size, dyn;
		if (take_u64(c, &size) < 0)
			return -EINVAL;
		if (size) {
			if (size > c->left || take(c, size, &p) < 0 || take_u64(c, &dyn) < 0)
				return -EINVAL;
			s->stack = p;
			s->stack_len = (size_t)PP_MIN(dyn, size);
		}
	}
	if (!s->regs_valid) {
		s->stack = NULL;
		s->stack_len = 0;
	}
	return 0;
}

int pp_perf__parse_record(const void *buf, size_t len, const struct pp_perf_fmt *fmt,
			  struct pp_perf_rec *ret)
{
	struct perf_event_header h;
	struct pp_perf_rec r;
	struct cursor c;
	int err;

	if (!buf || !fmt || !ret || len < sizeof(h))
		return -EINVAL;
	memcpy(&h, buf, sizeof(h));
	if (h.size != len)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	r.type = h.type;
	c.p = (const uint8_t *)buf + sizeof(h);
	c.left = len - sizeof(h);
	switch (h.type) {
	case PERF_RECORD_SAMPLE:
		err = parse_sample(&c, fmt, &r);
		if (err < 0)
			return err;
		break;
	case PERF_RECORD_LOST: {
		uint64_t id;
		if (take_u64(&c, &id) < 0 || take_u64(&c, &r.lost) < 0)
			return -EINVAL;
		break;
	}
	default:
		break;
	}
	*ret = r;
	return 0;
}

int pp_perf_ring__next(const uint8_t *data, uint64_t ring_size, uint64_t head, uint64_t tail,
		       uint8_t *scratch, const uint8_t **ret)
{
	struct perf_event_header h;
	uint64_t avail = head - tail;

	if (!data || !ret || ring_size == 0 || (ring_size & (ring_size - 1)))
		return -EINVAL;
	if (head == tail)
		return 0;
	if (avail > ring_size || avail < sizeof(h))
		return -EINVAL;
	uint64_t off = tail & (ring_size - 1);
	uint64_t first = PP_MIN(ring_size - off, sizeof(h));
	memcpy(&h, data + off, first);
	if (first < sizeof(h))
		memcpy((uint8_t *)&h + first, data, sizeof(h) - first);
	if (h.size < sizeof(h) || h.size > avail || (h.size & 7))
		return -EINVAL;
	if (off + h.size <= ring_size) {
		*ret = data + off;
	} else {
		if (!scratch)
			return -EINVAL;
		uint64_t part = ring_size - off;
		memcpy(scratch, data + off, part);
		memcpy(scratch + part, data, h.size - part);
		*ret = scratch;
	}
	return h.size;
}

/* ---- sampler ----------------------------------------------------------- */

struct ev {
	pid_t pid, tid;
	int fd;
	uint8_t *base;
	size_t mmap_len;
	bool seen;
};

struct proc {
	pid_t pid;
	pid_t parent; /* 0: added by the caller; else adopted child of */
};

struct pp_cpu_sampler {
	pthread_mutex_t lock;
	struct pp_cpu_opts opts;
	pp_cpu_sample_fn fn;
	void *ctx;
	int epfd;
	struct ev *evs;
	size_t n_evs, cap_evs;
	struct proc *procs;
	size_t n_procs, cap_procs;
	bool enabled;
	bool exclude_kernel; /* set after EACCES on a kernel-inclusive event */
	uint64_t last_scan_ns;
	uint64_t period_ns;
	size_t ring_pages;
	size_t page_size;
	struct pp_perf_fmt fmt;
	struct pp_cpu_stats stats;
	uint8_t *scratch;
};

static int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group,
			   unsigned long flags)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

struct pp_cpu_sampler *pp_cpu_sampler__new(const struct pp_cpu_opts *opts, pp_cpu_sample_fn fn,
					   void *ctx)
{
	struct pp_cpu_sampler *s;
	long pg = sysconf(_SC_PAGESIZE);

	if (!opts || !fn || opts->frequency_hz == 0 || opts->frequency_hz > 100000 ||
	    (opts->stack_bytes & 7) || opts->stack_bytes > 65528 ||
	    (opts->ring_pages & (opts->ring_pages - 1)) || opts->ring_pages > 4096) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->opts = *opts;
	s->fn = fn;
	s->ctx = ctx;
	s->page_size = pg > 0 ? (size_t)pg : 4096;
	s->period_ns = 1000000000ull / opts->frequency_hz;
	if (opts->ring_pages) {
		s->ring_pages = opts->ring_pages;
	} else {
		/* about 4 samples of (stack + registers + callchain), at least 8 pages */
		size_t want = 4 * ((size_t)opts->stack_bytes + 2048) / s->page_size;
		s->ring_pages = 8;
		while (s->ring_pages < want && s->ring_pages < 256)
			s->ring_pages *= 2;
	}
	s->fmt.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			     PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	if (opts->kernel_callchain || opts->user_callchain)
		s->fmt.sample_type |= PERF_SAMPLE_CALLCHAIN;
	s->fmt.regs_mask = pp_regs__perf_mask();
	s->scratch = aligned_alloc(8, SCRATCH_SIZE);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!s->scratch || s->epfd < 0 || pthread_mutex_init(&s->lock, NULL) != 0) {
		int e = s->scratch ? errno : ENOMEM;
		if (s->epfd >= 0)
			close(s->epfd);
		free(s->scratch);
		free(s);
		errno = e ? e : ENOMEM;
		return NULL;
	}
	return s;
}

static int open_event(struct pp_cpu_sampler *s, pid_t pid, pid_t tid)
{
	struct perf_event_attr attr;
	struct ev e = { .pid = pid, .tid = tid, .fd = -1 };
	int fd, r;

	if (s->n_evs >= MAX_EVENTS)
		return -E2BIG;
	if (s->n_evs == s->cap_evs) {
		size_t nc = s->cap_evs ? s->cap_evs * 2 : 64;
		struct ev *nv = realloc(s->evs, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		s->evs = nv;
		s->cap_evs = nc;
	}

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.sample_period = s->period_ns;
	attr.sample_type = s->fmt.sample_type;
	attr.sample_regs_user = s->fmt.regs_mask;
	attr.sample_stack_user = s->opts.stack_bytes;
	attr.exclude_callchain_user = !s->opts.user_callchain;
	attr.exclude_callchain_kernel = !s->opts.kernel_callchain;
	attr.exclude_hv = 1;
	attr.exclude_kernel = s->exclude_kernel;
	attr.disabled = !s->enabled;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	attr.watermark = 1;
	attr.wakeup_watermark = (uint32_t)(s->ring_pages * s->page_size / 2);

	fd = perf_event_open(&attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EPERM) && !attr.exclude_kernel) {
		/* perf_event_paranoid forbids kernel samples: user time only from now on. */
		attr.exclude_kernel = 1;
		attr.exclude_callchain_kernel = 1;
		fd = perf_event_open(&attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd >= 0)
			s->exclude_kernel = true;
	}
	if (fd < 0)
		return -errno;
	e.fd = fd;

	for (size_t pages = s->ring_pages; pages >= 1; pages /= 2) {
		size_t len = (pages + 1) * s->page_size;
		void *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (b != MAP_FAILED) {
			e.base = b;
			e.mmap_len = len;
			break;
		}
		if (errno != EPERM && errno != ENOMEM)
			break;
	}
	if (!e.base) {
		r = -errno;
		close(fd);
		return r ? r : -ENOMEM;
	}
	struct epoll_event ee = { .events = EPOLLIN, .data.u64 = 0 };
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ee) < 0) {
		r = -errno;
		munmap(e.base, e.mmap_len);
		close(fd);
		return r;
	}
	e.seen = true;
	s->evs[s->n_evs++] = e;
	s->stats.events_open++;
	return 0;
}

/* Deliver every record in ev's ring. Returns the number of samples delivered. */
static int drain(struct pp_cpu_sampler *s, struct ev *e)
{
	struct perf_event_mmap_page *mp = (void *)e->base;
	uint64_t data_off = mp->data_offset, data_size = mp->data_size;
	int delivered = 0;

	if (data_off == 0) {
		data_off = s->page_size;
		data_size = e->mmap_len - s->page_size;
	}
	if (data_off > e->mmap_len || data_size > e->mmap_len - data_off)
		return 0;

	uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = mp->data_tail;
	const uint8_t *data = e->base + data_off;

	while (tail != head) {
		const uint8_t *rec;
		struct pp_perf_rec pr;
		int len = pp_perf_ring__next(data, data_size, head, tail, s->scratch, &rec);

		if (len <= 0) {
			s->stats.lost++; /* corrupt ring: skip what is there */
			tail = head;
			break;
		}
		if (pp_perf__parse_record(rec, (size_t)len, &s->fmt, &pr) == 0) {
			switch (pr.type) {
			case PERF_RECORD_SAMPLE:
				pr.sample.weight_ns = s->period_ns;
				s->stats.samples++;
				s->fn(s->ctx, &pr.sample);
				delivered++;
				break;
			case PERF_RECORD_LOST:
				s->stats.lost += pr.lost;
				break;
			case PERF_RECORD_THROTTLE:
				s->stats.throttled++;
				break;
			default:
				break;
			}
		}
		tail += (uint64_t)len;
	}
	__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
	return delivered;
}

static void close_event(struct pp_cpu_sampler *s, size_t i)
{
	struct ev *e = &s->evs[i];

	drain(s, e);
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, e->fd, NULL);
	munmap(e->base, e->mmap_len);
	close(e->fd);
	s->evs[i] = s->evs[--s->n_evs];
	if (s->stats.events_open)
		s->stats.events_open--;
}

static struct proc *find_proc(struct pp_cpu_sampler *s, pid_t pid)
{
	for (size_t i = 0; i < s->n_procs; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	return NULL;
}

static int add_proc(struct pp_cpu_sampler *s, pid_t pid, pid_t parent)
{
	if (s->n_procs >= MAX_PROCS)
		return -E2BIG;
	if (s->n_procs == s->cap_procs) {
		size_t nc = s->cap_procs ? s->cap_procs * 2 : 16;
		struct proc *nv = realloc(s->procs, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		s->procs = nv;
		s->cap_procs = nc;
	}
	s->procs[s->n_procs++] = (struct proc){ pid, parent };
	return 0;
}

static void drop_proc(struct pp_cpu_sampler *s, pid_t pid)
{
	for (size_t i = 0; i < s->n_evs;)
		if (s->evs[i].pid == pid)
			close_event(s, i);
		else
			i++;
	for (size_t i = 0; i < s->n_procs; i++)
		if (s->procs[i].pid == pid) {
			s->procs[i] = s->procs[--s->n_procs];
			break;
		}
	/* Adopted children go with their parent. */
	for (size_t i = 0; i < s->n_procs;)
		if (s->procs[i].parent == pid)
			drop_proc(s, s->procs[i].pid), i = 0;
		else
			i++;
}

/* Children listed in /proc/PID/task/TID/children, adopted as processes. */
static void adopt_children(struct pp_cpu_sampler *s, pid_t pid, pid_t tid)
{
	char path[80];
	_cleanup_free_ char *buf = NULL;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)tid);
	if (pp_read_file(path, 1 << 16, &buf, &len) < 0 || !buf)
		return;
	char *save = NULL;
	for (char *tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
		uint64_t child;
		if (pp_parse_u64(tok, 10, 1, INT32_MAX, &child) < 0)
			continue;
		if (!find_proc(s, (pid_t)child) && add_proc(s, (pid_t)child, pid) == 0)
			pp_dbg("cpu: adopted child %d of %d", (int)child, (int)pid);
	}
}

/* Sync the events of pid with /proc/PID/task. -ESRCH if the process is gone. */
static int scan_proc(struct pp_cpu_sampler *s, pid_t pid)
{
	pid_t *tids = NULL;
	size_t n = 0;
	int r = pp_proc__list_tids(pid, &tids, &n);

	if (r < 0)
		return r == -ENOENT ? -ESRCH : r;
	if (n == 0) {
		free(tids);
		return -ESRCH;
	}
	for (size_t i = 0; i < s->n_evs; i++)
		if (s->evs[i].pid == pid)
			s->evs[i].seen = false;
	int opened = 0, last_err = 0;
	for (size_t t = 0; t < n; t++) {
		bool have = false;
		for (size_t i = 0; i < s->n_evs; i++)
			if (s->evs[i].pid == pid && s->evs[i].tid == tids[t]) {
				s->evs[i].seen = true;
				have = true;
				break;
			}
		if (!have) {
			r = open_event(s, pid, tids[t]);
			if (r < 0 && r != -ESRCH) {
				s->stats.open_errors++;
				last_err = r;
			} else if (r == 0) {
				opened++;
			}
		}
		adopt_children(s, pid, tids[t]);
	}
	free(tids);
	for (size_t i = 0; i < s->n_evs;)
		if (s->evs[i].pid == pid && !s->evs[i].seen)
			close_event(s, i);
		else
			i++;
	bool any = false;
	for (size_t i = 0; i < s->n_evs && !any; i++)
		any = s->evs[i].pid == pid;
	if (!any)
		return last_err ? last_err : -ESRCH;
	return 0;
}

static void rescan(struct pp_cpu_sampler *s)
{
	s->last_scan_ns = pp_now_mono_ns();
	/* Index loop: scan_proc may append adopted children. */
	for (size_t i = 0; i < s->n_procs;) {
		pid_t pid = s->procs[i].pid;
		int r = scan_proc(s, pid);
		if (r == -ESRCH) {
			drop_proc(s, pid);
			i = 0; /* drop_proc reorders the array; rescanning a few is harmless */
			continue;
		}
		i++;
	}
}

int pp_cpu_sampler__add_process(struct pp_cpu_sampler *s, pid_t pid)
{
	int r;

	if (!s || pid <= 0)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	struct proc *p = find_proc(s, pid);
	if (p) {
		p->parent = 0; /* explicitly added now */
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	r = add_proc(s, pid, 0);
	if (r == 0) {
		r = scan_proc(s, pid);
		if (r < 0)
			drop_proc(s, pid);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

int pp_cpu_sampler__remove_process(struct pp_cpu_sampler *s, pid_t pid)
{
	if (!s || pid <= 0)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	bool had = find_proc(s, pid) != NULL;
	if (had)
		drop_proc(s, pid);
	pthread_mutex_unlock(&s->lock);
	return had ? 0 : -ENOENT;
}

int pp_cpu_sampler__enable(struct pp_cpu_sampler *s, bool on)
{
	int r = 0;

	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	s->enabled = on;
	for (size_t i = 0; i < s->n_evs; i++)
		if (ioctl(s->evs[i].fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) < 0)
			r = -errno;
	pthread_mutex_unlock(&s->lock);
	return r;
}

int pp_cpu_sampler__poll(struct pp_cpu_sampler *s, int timeout_ms)
{
	uint64_t deadline;
	int delivered = 0;

	if (!s)
		return -EINVAL;
	if (timeout_ms < 0)
		timeout_ms = 0;
	deadline = pp_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		struct epoll_event evs[16];
		uint64_t now = pp_now_mono_ns();

		pthread_mutex_lock(&s->lock);
		if (now - s->last_scan_ns >= RESCAN_NS)
			rescan(s);
		pthread_mutex_unlock(&s->lock);

		uint64_t left_ms = now < deadline ? (deadline - now + 999999) / 1000000 : 0;
		int wait_ms = (int)PP_MIN(left_ms, RESCAN_NS / 1000000);
		int n = epoll_wait(s->epfd, evs, ARRAY_SIZE(evs), wait_ms);
		if (n < 0 && errno != EINTR)
			return delivered ? delivered : -errno;

		/* Drain every ring: cheap, and rings below the watermark get read too. */
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < s->n_evs; i++)
			delivered += drain(s, &s->evs[i]);
		pthread_mutex_unlock(&s->lock);

		if (delivered > 0 || pp_now_mono_ns() >= deadline)
			return delivered;
	}
}

void pp_cpu_sampler__stats(struct pp_cpu_sampler *s, struct pp_cpu_stats *ret)
{
	if (!s || !ret)
		return;
	pthread_mutex_lock(&s->lock);
	*ret = s->stats;
	ret->events_open = s->n_evs;
	pthread_mutex_unlock(&s->lock);
}

void pp_cpu_sampler__free(struct pp_cpu_sampler *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	while (s->n_evs) {
		struct ev *e = &s->evs[s->n_evs - 1];
		munmap(e->base, e->mmap_len);
		close(e->fd);
		s->n_evs--;
	}
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_destroy(&s->lock);
	close(s->epfd);
	free(s->evs);
	free(s->procs);
	free(s->scratch);
	free(s);
}
