/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU sampler, user-space half (the BPF half is bpf/cpu.bpf.c).
 *
 * Thread coverage (DESIGN.md's per-CPU option): one cpu-clock event per
 * CPU (pid = -1), each with the BPF program attached, replaces the earlier
 * event-and-ring per thread plus /proc rescans. That design lost most
 * samples of thread pools (the locked-memory budget shrank the per-thread
 * rings, and events were read only when half full) and missed threads
 * living less than the rescan interval. Here the kernel runs the program
 * on every tick of every CPU while sampling is on; for a task that is not
 * a target it returns after one helper call and one hash lookup (99 Hz x
 * CPUs: nothing measurable for neighbours), and while sampling is off the
 * events are disabled. Memory is one ring buffer (BPF memory is charged to
 * the memory cgroup, not to RLIMIT_MEMLOCK; sized from the CPU count, the
 * rate and the stack copy size) and a scratch record per CPU.
 *
 * Records are written without wakeups unless the ring is half full; poll
 * waits on the ring's epoll fd and an eventfd that flush uses to make the
 * poller drain at once, so a window's end sees every sample taken inside
 * it.
 */
#include "cpu.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpu.skel.h"
#include "util/log.h"
#include "util/percpu.h"
#include "util/ringbuf.h"
#include "util/util.h"

/* bpf/cpu.h, the record layout shared with BPF */
#include "../../bpf/cpu.h"

_Static_assert(CPU_NREGS == PP_NREGS, "register count");

/* The automatic ring size holds RING_MS of samples taken at the full rate
 * on every CPU, each with a full stack copy: the consumer drains every
 * 100 ms (and when the ring is half full), so this leaves room for a
 * consumer that falls behind by ~150 ms. It is never above PER_CPU_CAP
 * per CPU (the earlier fixed size; at high rates the ring then holds less
 * time). libbpf maps the data pages twice and the kernel maps them all at
 * once: the ring counts twice its size in the sidecar's RSS, used or not
 * (2 MiB, 4 MiB of RSS, at 99 Hz on 2 CPUs; it was 8 MiB). */
#define MIN_RINGBUF_BYTES (1u << 20)
#define MAX_RINGBUF_BYTES (64u << 20)
#define PER_CPU_CAP (4u << 20)
#define RING_MS 250u
#define SWEEP_NS (1000ull * 1000 * 1000)

struct pp_cpu_sampler {
	struct cpu_bpf *skel;
	struct pp_ringbuf *rb;
	struct pp_cpu_opts opts;
	pp_cpu_sample_fn fn;
	void *ctx;
	uint64_t period_ns;
	int ncpus;
	int *pfds; /* per CPU; -1 where the event could not be opened */
	struct bpf_link **links;
	int epfd, evfd;
	uint64_t last_sweep_ns;

	pthread_mutex_t lock; /* enabled, the perf fds' state, consumed_ns */
	pthread_cond_t drained; /* consumed_ns advanced */
	bool enabled;
	uint64_t consumed_ns; /* every record written before this was delivered */

	atomic_uint_fast64_t samples, malformed, adopted;
	uint64_t events_open, open_errors;
};

/* ---- record decoding (pure) -------------------------------------------- */

int pp_cpu_rec__parse(const void *buf, size_t len, uint64_t weight_ns, struct pp_raw_sample *ret)
{
	struct cpu_rec r;

	if (!buf || !ret || ((uintptr_t)buf & 7) || len < sizeof(r))
		return -EINVAL;
	memcpy(&r, buf, sizeof(r));
	if (r.stack_len > CPU_MAX_STACK || r.stack_len > len - sizeof(r) ||
	    r.n_kernel > CPU_MAX_IPS || r.n_user > CPU_MAX_IPS || r.pid == 0 || r.pid > INT32_MAX ||
	    r.tid == 0 || r.tid > INT32_MAX)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	ret->pid = (pid_t)r.pid;
	ret->tid = (pid_t)r.tid;
	ret->time_ns = r.time_ns;
	ret->weight_ns = weight_ns;
	ret->regs_valid = (r.flags & CPU_F_REGS) != 0;
	memcpy(ret->regs.r, r.regs, sizeof(ret->regs.r));
	if (r.stack_len) {
		ret->stack = (const uint8_t *)buf + sizeof(r);
		ret->stack_len = r.stack_len;
	}
	if (r.n_kernel) {
		ret->kernel_ips = (const uint64_t *)((const uint8_t *)buf +
						     offsetof(struct cpu_rec, kernel_ips));
		ret->n_kernel = r.n_kernel;
	}
	if (r.n_user) {
		ret->user_ips = (const uint64_t *)((const uint8_t *)buf +
						   offsetof(struct cpu_rec, user_ips));
		ret->n_user = r.n_user;
	}
	return 0;
}

/* ---- sampler ------------------------------------------------------------ */

static int on_record(void *ctx, void *data, size_t size)
{
	struct pp_cpu_sampler *s = ctx;
	struct pp_raw_sample rs;

	if (pp_cpu_rec__parse(data, size, s->period_ns, &rs) < 0) {
		s->malformed++;
		return 0;
	}
	if (size >= sizeof(struct cpu_rec) &&
	    (((const struct cpu_rec *)data)->flags & CPU_F_ADOPTED)) {
		s->adopted++;
		pp_dbg("cpu: adopted child %d of %d", (int)rs.pid,
		       (int)((const struct cpu_rec *)data)->parent);
	}
	s->samples++;
	s->fn(s->ctx, &rs);
	return 0;
}

static int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group,
			   unsigned long flags)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

/* Opens the per-CPU events with the program attached, disabled. Returns
 * the number opened; *ret_err is the first error. */
static int open_events(struct pp_cpu_sampler *s, int *ret_err)
{
	struct perf_event_attr attr;
	bool exclude_kernel = false;
	int opened = 0;

	*ret_err = 0;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		int fd, e;

		memset(&attr, 0, sizeof(attr));
		attr.size = sizeof(attr);
		attr.type = PERF_TYPE_SOFTWARE;
		attr.config = PERF_COUNT_SW_CPU_CLOCK;
		attr.sample_period = s->period_ns;
		attr.disabled = 1;
		attr.exclude_hv = 1;
		attr.exclude_kernel = exclude_kernel;
		fd = perf_event_open(&attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0 && (errno == EACCES || errno == EPERM) && !exclude_kernel) {
			/* perf_event_paranoid forbids kernel samples: user time only. */
			attr.exclude_kernel = 1;
			fd = perf_event_open(&attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
			if (fd >= 0)
				exclude_kernel = true;
		}
		if (fd < 0) {
			e = errno;
			if (e != ENODEV && !*ret_err) /* ENODEV: CPU offline */
				*ret_err = e;
			s->open_errors += e != ENODEV;
			continue;
		}
		s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.cpu_sample, fd);
		if (!s->links[cpu]) {
			e = errno;
			close(fd);
			if (!*ret_err)
				*ret_err = e;
			s->open_errors++;
			continue;
		}
		/* Attaching enables the event; sampling starts with enable(). */
		ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
		s->pfds[cpu] = fd;
		opened++;
	}
	s->events_open = (uint64_t)opened;
	return opened;
}

struct pp_cpu_sampler *pp_cpu_sampler__new(const struct pp_cpu_opts *opts, pp_cpu_sample_fn fn,
					   void *ctx)
{
	struct pp_cpu_sampler *s;
	struct stat st;
	int r, err = 0;

	if (!opts || !fn || opts->frequency_hz == 0 || opts->frequency_hz > 100000 ||
	    (opts->stack_bytes & 7) || opts->stack_bytes > CPU_MAX_STACK ||
	    (opts->ringbuf_bytes && (opts->ringbuf_bytes & (opts->ringbuf_bytes - 1))) ||
	    opts->ringbuf_bytes > MAX_RINGBUF_BYTES) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->opts = *opts;
	s->fn = fn;
	s->ctx = ctx;
	s->epfd = s->evfd = -1;
	s->period_ns = 1000000000ull / opts->frequency_hz;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->drained, NULL);

	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0) {
		r = s->ncpus < 0 ? s->ncpus : -EINVAL;
		goto fail;
	}
	if (!s->opts.ringbuf_bytes) {
		uint64_t rec = sizeof(struct cpu_rec) + opts->stack_bytes + 8;
		uint64_t want = (uint64_t)s->ncpus * opts->frequency_hz * rec * RING_MS / 1000;
		want = PP_MIN(want, (uint64_t)s->ncpus * PER_CPU_CAP);
		s->opts.ringbuf_bytes = MIN_RINGBUF_BYTES;
		while (s->opts.ringbuf_bytes < want && s->opts.ringbuf_bytes < MAX_RINGBUF_BYTES)
			s->opts.ringbuf_bytes *= 2;
	}
	s->pfds = malloc((size_t)s->ncpus * sizeof(*s->pfds));
	s->links = calloc((size_t)s->ncpus, sizeof(*s->links));
	if (!s->pfds || !s->links) {
		r = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < s->ncpus; i++)
		s->pfds[i] = -1;
	if (stat("/proc/self/ns/pid", &st) < 0) {
		r = -errno;
		goto fail;
	}

	s->skel = cpu_bpf__open();
	if (!s->skel) {
		r = -errno;
		goto fail;
	}
	s->skel->rodata->pidns_dev = st.st_dev;
	s->skel->rodata->pidns_ino = st.st_ino;
	s->skel->rodata->stack_bytes = opts->stack_bytes;
	s->skel->rodata->kernel_stacks = opts->kernel_callchain;
	s->skel->rodata->user_callchain = opts->user_callchain;
	s->skel->rodata->follow_children = !opts->no_children;
	s->skel->rodata->ringbuf_bytes = s->opts.ringbuf_bytes;
	r = bpf_map__set_max_entries(s->skel->maps.scratch, (uint32_t)s->ncpus);
	if (!r)
		r = bpf_map__set_max_entries(s->skel->maps.rb, s->opts.ringbuf_bytes);
	if (!r && opts->no_children)
		r = bpf_program__set_autoload(s->skel->progs.cpu_fork, false);
	if (!r)
		r = cpu_bpf__load(s->skel);
	if (r) {
		pp_dbg("cpu: load BPF program: %s", strerror(-r));
		goto fail;
	}
	if (!opts->no_children) {
		s->skel->links.cpu_fork = bpf_program__attach(s->skel->progs.cpu_fork);
		if (!s->skel->links.cpu_fork) {
			r = -errno;
			pp_dbg("cpu: attach sched_process_fork: %s", strerror(errno));
			goto fail;
		}
	}
	s->skel->links.cpu_exit = bpf_program__attach(s->skel->progs.cpu_exit);
	if (!s->skel->links.cpu_exit) {
		r = -errno;
		pp_dbg("cpu: attach sched_process_exit: %s", strerror(errno));
		goto fail;
	}
	if (open_events(s, &err) == 0) {
		r = err ? -err : -ENODEV;
		pp_dbg("cpu: no per-CPU cpu-clock event: %s", strerror(-r));
		goto fail;
	}
	s->rb = pp_ringbuf__new(bpf_map__fd(s->skel->maps.rb), s->opts.ringbuf_bytes, on_record, s);
	if (!s->rb) {
		r = -errno;
		goto fail;
	}
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->epfd < 0 || s->evfd < 0) {
		r = -errno;
		goto fail;
	}
	struct epoll_event ee = { .events = EPOLLIN, .data.u32 = 0 };
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, pp_ringbuf__epoll_fd(s->rb), &ee) < 0) {
		r = -errno;
		goto fail;
	}
	ee.data.u32 = 1;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ee) < 0) {
		r = -errno;
		goto fail;
	}
	return s;
fail:
	pp_cpu_sampler__free(s);
	errno = r < 0 ? -r : EINVAL;
	return NULL;
}

int pp_cpu_sampler__add_process(struct pp_cpu_sampler *s, pid_t pid)
{
	struct cpu_target t = { 0 };
	uint32_t key = (uint32_t)pid;

	if (!s || pid <= 0)
		return -EINVAL;
	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.targets), &key, &t, BPF_ANY) < 0)
		return errno == E2BIG || errno == ENOMEM ? -E2BIG : -errno;
	return 0;
}

typedef bool (*target_pred)(uint32_t pid, const struct cpu_target *t, uint32_t arg);

/* The pids in "targets" for which pred holds, into out (up to max; out may
 * be NULL to count them all). */
static size_t targets_where(struct pp_cpu_sampler *s, target_pred pred, uint32_t arg, uint32_t *out,
			    size_t max)
{
	int fd = bpf_map__fd(s->skel->maps.targets);
	uint32_t key, next;
	struct cpu_target t;
	void *prev = NULL;
	size_t n = 0;

	while ((!out || n < max) && bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (bpf_map_lookup_elem(fd, &next, &t) == 0 && pred(next, &t, arg)) {
			if (out)
				out[n] = next;
			n++;
		}
		key = next;
		prev = &key;
	}
	return n;
}

static bool adopted_by(uint32_t pid, const struct cpu_target *t, uint32_t parent)
{
	return t->parent == parent;
}

/* An adopted child that exited: its pid could be reused by an unrelated
 * process (added processes are the caller's to remove). */
static bool adopted_and_gone(uint32_t pid, const struct cpu_target *t, uint32_t unused)
{
	return t->parent && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static bool any_target(uint32_t pid, const struct cpu_target *t, uint32_t unused)
{
	return true;
}

/* Deletes the targets adopted through parent (and theirs). */
static void remove_children(struct pp_cpu_sampler *s, uint32_t parent, int depth)
{
	uint32_t found[256];
	size_t n = targets_where(s, adopted_by, parent, found, ARRAY_SIZE(found));

	for (size_t i = 0; i < n; i++) {
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.targets), &found[i]);
		if (depth < 8)
			remove_children(s, found[i], depth + 1);
	}
}

int pp_cpu_sampler__remove_process(struct pp_cpu_sampler *s, pid_t pid)
{
	uint32_t key = (uint32_t)pid;

	if (!s || pid <= 0)
		return -EINVAL;
	/* The entry may be gone already (removed in BPF when the process
	 * exited): its adopted children are removed all the same. */
	int r = bpf_map_delete_elem(bpf_map__fd(s->skel->maps.targets), &key) < 0 ? -ENOENT : 0;
	remove_children(s, key, 0);
	return r;
}

static void sweep(struct pp_cpu_sampler *s)
{
	uint32_t gone[256];
	size_t n = targets_where(s, adopted_and_gone, 0, gone, ARRAY_SIZE(gone));

	for (size_t i = 0; i < n; i++)
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.targets), &gone[i]);
}

int pp_cpu_sampler__enable(struct pp_cpu_sampler *s, bool on)
{
	int r = 0;

	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (s->enabled != on) {
		for (int i = 0; i < s->ncpus; i++)
			if (s->pfds[i] >= 0 &&
			    ioctl(s->pfds[i], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE,
				  0) < 0)
				r = -errno;
		s->enabled = on;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

int pp_cpu_sampler__poll(struct pp_cpu_sampler *s, int timeout_ms)
{
	struct epoll_event evs[2];
	uint64_t now, v;
	int n, r;

	if (!s)
		return -EINVAL;
	n = epoll_wait(s->epfd, evs, ARRAY_SIZE(evs), timeout_ms > 0 ? timeout_ms : 0);
	if (n < 0 && errno != EINTR)
		return -errno;
	for (int i = 0; i < n; i++)
		if (evs[i].data.u32 == 1)
			(void)!read(s->evfd, &v, sizeof(v));
	/* Everything committed before now is in the ring: drain it all (the
	 * ring's own wakeup comes only when it is half full). */
	now = pp_now_mono_ns();
	r = pp_ringbuf__consume(s->rb);
	pthread_mutex_lock(&s->lock);
	s->consumed_ns = now;
	pthread_cond_broadcast(&s->drained);
	pthread_mutex_unlock(&s->lock);
	if (now - s->last_sweep_ns >= SWEEP_NS) {
		s->last_sweep_ns = now;
		sweep(s);
	}
	return r;
}

int pp_cpu_sampler__flush(struct pp_cpu_sampler *s, int timeout_ms)
{
	uint64_t t, one = 1;
	struct timespec until;
	int r = 0;

	if (!s)
		return -EINVAL;
	t = pp_now_mono_ns();
	until = pp_realtime_in_ms(timeout_ms);
	(void)!write(s->evfd, &one, sizeof(one));
	pthread_mutex_lock(&s->lock);
	while (s->consumed_ns <= t && r == 0)
		r = pthread_cond_timedwait(&s->drained, &s->lock, &until);
	pthread_mutex_unlock(&s->lock);
	return r ? -ETIMEDOUT : 0;
}

static uint64_t counter(struct pp_cpu_sampler *s, uint32_t idx)
{
	return pp_percpu_sum(bpf_map__fd(s->skel->maps.counters), idx, s->ncpus);
}

void pp_cpu_sampler__stats(struct pp_cpu_sampler *s, struct pp_cpu_stats *ret)
{
	if (!s || !ret)
		return;
	memset(ret, 0, sizeof(*ret));
	ret->samples = s->samples;
	ret->lost = counter(s, CPU_CNT_RINGBUF_FULL) + s->malformed;
	ret->stack_errors = counter(s, CPU_CNT_STACK_ERR);
	ret->adopt_errors = counter(s, CPU_CNT_TARGETS_FULL) + counter(s, CPU_CNT_CHILDREN_FULL);
	ret->adopted = s->adopted;
	ret->exited = counter(s, CPU_CNT_EXITED);
	ret->events_open = s->events_open;
	ret->open_errors = s->open_errors;
	ret->targets = targets_where(s, any_target, 0, NULL, 0);
	uint64_t written = counter(s, CPU_CNT_SAMPLES), done = s->samples + s->malformed;
	ret->queued = written > done ? written - done : 0;
}

void pp_cpu_sampler__free(struct pp_cpu_sampler *s)
{
	if (!s)
		return;
	for (int i = 0; s->links && i < s->ncpus; i++)
		bpf_link__destroy(s->links[i]);
	for (int i = 0; s->pfds && i < s->ncpus; i++)
		if (s->pfds[i] >= 0)
			close(s->pfds[i]);
	pp_ringbuf__free(s->rb);
	cpu_bpf__destroy(s->skel);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->evfd >= 0)
		close(s->evfd);
	pthread_cond_destroy(&s->drained);
	pthread_mutex_destroy(&s->lock);
	free(s->links);
	free(s->pfds);
	free(s);
}
