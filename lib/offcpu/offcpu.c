/* SPDX-License-Identifier: Apache-2.0 */
/*
 * User-space half of the off-CPU tracer (see offcpu.h for what is counted
 * and bpf/offcpu.bpf.c for how). Records arrive in a BPF ring buffer
 * written without wakeups (one wakeup costs about as much as the record);
 * pp_offcpu__poll sleeps on the ring's epoll fd for the timeout, which only
 * ends early when BPF finds the ring half full, then drains it.
 */
#include "offcpu.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "offcpu.skel.h"
#include "util/log.h"
#include "util/percpu.h"
#include "util/ringbuf.h"
#include "util/util.h"

/* bpf/offcpu.h, the record layout shared with BPF */
#include "../../bpf/offcpu.h"

#define DEFAULT_STACK_BYTES 16384u
#define DEFAULT_RINGBUF_BYTES (8u << 20)
#define MIN_RINGBUF_BYTES (256u << 10)
#define MAX_RINGBUF_BYTES (256u << 20)
#define DEFAULT_MAX_RATE 1000u
#define MAX_THREAD_KEYS 32768u

_Static_assert(OFFCPU_NREGS == PP_NREGS, "register count");

struct pp_offcpu {
	struct offcpu_bpf *skel;
	struct pp_ringbuf *rb;
	struct pp_offcpu_opts opts;
	pp_offcpu_event_fn fn;
	void *ctx;
	int ncpus;
	pthread_mutex_t lock; /* serializes remove_process sweeps and enable */
	atomic_uint_fast64_t events;
	/* sys_enter, sys_exit, sched_switch: attached only while enabled */
	struct bpf_link *links[3];
	bool enabled;
};

static void deliver(struct pp_offcpu *o, struct pp_offcpu_event *ev)
{
	o->fn(o->ctx, ev);
	o->events++;
	if (ev->kind == PP_OFFCPU_MUTEX && o->opts.futex_in_block) {
		ev->kind = PP_OFFCPU_BLOCK;
		o->fn(o->ctx, ev);
		o->events++;
	}
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct pp_offcpu *o = ctx;
	struct pp_offcpu_event ev = { 0 };
	struct offcpu_rec rec;

	if (size < sizeof(rec))
		return 0;
	memcpy(&rec, data, sizeof(rec));
	if (rec.stack_len > size - sizeof(rec) || rec.kind < OFFCPU_REC_BLOCK ||
	    rec.kind > OFFCPU_REC_THREAD_CREATE)
		return 0;

	ev.kind = (enum pp_offcpu_kind)rec.kind;
	ev.pid = (pid_t)rec.pid;
	ev.tid = (pid_t)rec.tid;
	ev.new_tid = (pid_t)rec.new_tid;
	ev.delay_ns = rec.delay_ns;
	ev.syscall_nr = (long)rec.syscall_nr;
	ev.count = 1;
	ev.delay_scaled_ns = (double)rec.delay_ns;
	if ((rec.flags & OFFCPU_F_SAMPLED) && rec.delay_ns && o->opts.sample_ns > rec.delay_ns) {
		ev.count = (double)o->opts.sample_ns / (double)rec.delay_ns;
		ev.delay_scaled_ns = (double)o->opts.sample_ns;
	}
	if (rec.kind == OFFCPU_REC_THREAD_CREATE)
		ev.delay_scaled_ns = 0;
	ev.regs_valid = rec.flags & OFFCPU_F_REGS;
	memcpy(ev.regs.r, rec.regs, sizeof(ev.regs.r));
	ev.stack = (const uint8_t *)data + sizeof(rec);
	ev.stack_len = rec.stack_len;
	deliver(o, &ev);
	return 0;
}

static bool is_pow2(unsigned v)
{
	return v && !(v & (v - 1));
}

struct pp_offcpu *pp_offcpu__new(const struct pp_offcpu_opts *opts, pp_offcpu_event_fn fn,
				 void *ctx)
{
	struct pp_offcpu *o;
	struct stat st;
	int r;

	if (!fn) {
		errno = EINVAL;
		return NULL;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	if (opts)
		o->opts = *opts;
	if (!o->opts.stack_bytes)
		o->opts.stack_bytes = DEFAULT_STACK_BYTES;
	o->opts.stack_bytes = PP_MIN(o->opts.stack_bytes, (unsigned)OFFCPU_MAX_STACK);
	if (!o->opts.ringbuf_bytes)
		o->opts.ringbuf_bytes = DEFAULT_RINGBUF_BYTES;
	if (!is_pow2(o->opts.ringbuf_bytes) || o->opts.ringbuf_bytes < MIN_RINGBUF_BYTES ||
	    o->opts.ringbuf_bytes > MAX_RINGBUF_BYTES) {
		free(o);
		errno = EINVAL;
		return NULL;
	}
	if (!o->opts.max_rate)
		o->opts.max_rate = DEFAULT_MAX_RATE;
	o->fn = fn;
	o->ctx = ctx;
	pthread_mutex_init(&o->lock, NULL);

	if (stat("/proc/self/ns/pid", &st) < 0) {
		r = -errno;
		pp_dbg("offcpu: stat /proc/self/ns/pid: %s", strerror(errno));
		goto fail;
	}
	o->ncpus = libbpf_num_possible_cpus();
	if (o->ncpus <= 0) {
		r = o->ncpus < 0 ? o->ncpus : -EINVAL;
		goto fail;
	}

	o->skel = offcpu_bpf__open();
	if (!o->skel) {
		r = -errno;
		pp_dbg("offcpu: open BPF object: %s", strerror(errno));
		goto fail;
	}
	o->skel->rodata->pidns_dev = st.st_dev;
	o->skel->rodata->pidns_ino = st.st_ino;
	o->skel->rodata->min_block_ns = o->opts.min_block_ns;
	o->skel->rodata->sample_ns = o->opts.sample_ns;
	o->skel->rodata->stack_bytes = o->opts.stack_bytes;
	o->skel->rodata->rate_cap = o->opts.max_rate;
	o->skel->rodata->ringbuf_bytes = o->opts.ringbuf_bytes;
	r = bpf_map__set_max_entries(o->skel->maps.scratch, (uint32_t)o->ncpus);
	if (!r)
		r = bpf_map__set_max_entries(o->skel->maps.rb, o->opts.ringbuf_bytes);
	if (r)
		goto fail;
	/* The per-syscall and per-switch programs wait for pp_offcpu__enable. */
	bpf_program__set_autoattach(o->skel->progs.offcpu_sys_enter, false);
	bpf_program__set_autoattach(o->skel->progs.offcpu_sys_exit, false);
	bpf_program__set_autoattach(o->skel->progs.offcpu_sched_switch, false);
	r = offcpu_bpf__load(o->skel);
	if (r) {
		pp_dbg("offcpu: load BPF programs: %s", strerror(-r));
		goto fail;
	}
	r = offcpu_bpf__attach(o->skel);
	if (r) {
		pp_dbg("offcpu: attach raw tracepoints: %s", strerror(-r));
		goto fail;
	}
	o->rb = pp_ringbuf__new(bpf_map__fd(o->skel->maps.rb), o->opts.ringbuf_bytes, on_record, o);
	if (!o->rb) {
		r = -errno;
		goto fail;
	}
	return o;
fail:
	pp_offcpu__free(o);
	errno = r < 0 ? -r : EINVAL;
	return NULL;
}

int pp_offcpu__add_process(struct pp_offcpu *o, pid_t pid)
{
	struct offcpu_target v = { 0 };
	uint32_t key = (uint32_t)pid;

	if (!o || pid <= 0)
		return -EINVAL;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return -ESRCH;
	if (bpf_map_update_elem(bpf_map__fd(o->skel->maps.targets), &key, &v, BPF_NOEXIST) < 0) {
		if (errno == EEXIST)
			return 0;
		return errno == E2BIG ? -ENOSPC : -errno;
	}
	return 0;
}

/* Forget the in-flight syscalls of the threads of tgid (every thread: 0). */
static void sweep_threads(struct pp_offcpu *o, uint32_t tgid)
{
	int fd = bpf_map__fd(o->skel->maps.threads);
	uint32_t *keys, key, next;
	size_t n = 0, i;
	bool first = true;

	keys = malloc(MAX_THREAD_KEYS * sizeof(*keys));
	if (!keys)
		return;
	while (n < MAX_THREAD_KEYS && bpf_map_get_next_key(fd, first ? NULL : &key, &next) == 0) {
		struct offcpu_thread t;

		first = false;
		key = next;
		if (bpf_map_lookup_elem(fd, &key, &t) == 0 && (!tgid || t.tgid == tgid))
			keys[n++] = key;
	}
	for (i = 0; i < n; i++)
		bpf_map_delete_elem(fd, &keys[i]);
	free(keys);
}

int pp_offcpu__remove_process(struct pp_offcpu *o, pid_t pid)
{
	uint32_t key = (uint32_t)pid;
	int r = 0;

	if (!o || pid <= 0)
		return -EINVAL;
	if (bpf_map_delete_elem(bpf_map__fd(o->skel->maps.targets), &key) < 0)
		r = -errno;
	pthread_mutex_lock(&o->lock);
	sweep_threads(o, key);
	pthread_mutex_unlock(&o->lock);
	return r;
}

static void detach_all(struct pp_offcpu *o)
{
	for (size_t i = 0; i < ARRAY_SIZE(o->links); i++) {
		bpf_link__destroy(o->links[i]);
		o->links[i] = NULL;
	}
}

int pp_offcpu__enable(struct pp_offcpu *o, bool on)
{
	int r = 0;

	if (!o)
		return -EINVAL;
	pthread_mutex_lock(&o->lock);
	if (on == o->enabled)
		goto out;
	if (on) {
		/* sys_exit and sched_switch first: a thread entered after them is complete. */
		struct bpf_program *progs[3] = { o->skel->progs.offcpu_sys_exit,
						 o->skel->progs.offcpu_sched_switch,
						 o->skel->progs.offcpu_sys_enter };
		for (size_t i = 0; i < ARRAY_SIZE(progs); i++) {
			o->links[i] = bpf_program__attach(progs[i]);
			if (!o->links[i]) {
				r = -errno;
				pp_dbg("offcpu: attach %s: %s", bpf_program__name(progs[i]),
				       strerror(errno));
				detach_all(o);
				goto out;
			}
		}
	} else {
		detach_all(o);
		/* Syscalls entered while attached never see their exit. */
		sweep_threads(o, 0);
	}
	o->enabled = on;
out:
	pthread_mutex_unlock(&o->lock);
	return r;
}

bool pp_offcpu__enabled(struct pp_offcpu *o)
{
	return o && o->enabled;
}

int pp_offcpu__poll(struct pp_offcpu *o, int timeout_ms)
{
	int r, n;

	if (!o)
		return -EINVAL;
	if (timeout_ms > 0) {
		/* Returns early only when BPF forced a wakeup (ring half full). */
		r = pp_ringbuf__poll(o->rb, timeout_ms);
		if (r < 0)
			return r;
	} else {
		r = 0;
	}
	n = pp_ringbuf__consume(o->rb);
	if (n < 0)
		return n;
	return r + n;
}

void pp_offcpu__stats(struct pp_offcpu *o, struct pp_offcpu_stats *ret)
{
	uint64_t sums[OFFCPU_CNT__MAX] = { 0 };

	memset(ret, 0, sizeof(*ret));
	if (!o)
		return;
	ret->events = o->events;
	for (uint32_t k = 0; k < OFFCPU_CNT__MAX; k++)
		sums[k] = pp_percpu_sum(bpf_map__fd(o->skel->maps.counters), k, o->ncpus);
	ret->drops = sums[OFFCPU_CNT_RINGBUF_FULL] + sums[OFFCPU_CNT_RATE_CAP] +
		     sums[OFFCPU_CNT_THREADS_FULL];
	ret->stack_errors = sums[OFFCPU_CNT_STACK_ERR];
	ret->exited = sums[OFFCPU_CNT_EXITED];
}

void pp_offcpu__free(struct pp_offcpu *o)
{
	if (!o)
		return;
	pp_ringbuf__free(o->rb);
	detach_all(o);
	offcpu_bpf__destroy(o->skel);
	pthread_mutex_destroy(&o->lock);
	free(o);
}
