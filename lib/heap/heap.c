/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Heap tracer, user-space half (the BPF half is bpf/heap.bpf.c).
 *
 * Per process: find its allocator (alloc.c), choose a probe offset per
 * function (x86.c), attach per PID through the path the kernel resolves to
 * the mapped inode. With a uprobe session (kernel >= 6.13) one
 * BPF_LINK_CREATE covers every function and the return part runs only for
 * sampled calls; otherwise one uprobe + one uretprobe per function.
 * libbpf 1.1 has no uprobe.multi/session support, so the link is created
 * with the raw bpf() syscall.
 *
 * Each process gets a slot (cookie bits 8..31: counters index and live
 * table key) and a generation (bits 32..39, also in every event) so stale
 * events of a detached slot are ignored.
 */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/heap.h"
#include "heap.h"
#include "heap.skel.h"
#include "inject/inject.h"
#include "procfs/procfs.h"
#include "util/log.h"
#include "util/percpu.h"
#include "util/ringbuf.h"
#include "util/util.h"

_Static_assert(HEAP_NREGS == PP_NREGS, "register count");

#define ATTACH_UPROBE_SESSION 57 /* BPF_TRACE_UPROBE_SESSION, not in libbpf 1.1 headers */
#define CMD_LINK_CREATE 28 /* BPF_LINK_CREATE */
#define ATTACH_UPROBE_MULTI 48 /* BPF_TRACE_UPROBE_MULTI */

/* Measured cost of one probed call (DESIGN.md): 941 ns per malloc+free
 * pair with a session, 1,249 ns with a uretprobe. */
#define COST_NS_SESSION 900.0 /* per call, as measured under redis (bench/BENCHMARKS.md) */
#define COST_NS_CLASSIC 1100.0
#define COST_NS_SINGLESTEP 15800.0
#define COST_NS_AGENT 3.0 /* per call through the injected agent (bench/BENCHMARKS.md) */
#define COST_NS_SAMPLE 5000.0 /* per sampled allocation: uprobe + stack copy */
#define COST_NS_RING_SAMPLE \
	300.0 /* per sampled allocation in the agent's ring (bench/agentbench) */
#define RING_THREADS 4096 /* the agent's thread slots (agent-abi.h PP_AGENT_THREAD_BITS) */
#define TICK_NS 1000000000ull

enum session_state { SESSION_UNKNOWN = 0, SESSION_YES, SESSION_NO };

/*
 * Locking: t->lock guards the table (procs[], gens, refs, attaching,
 * removed, attach_errors) and is never held across I/O or a ptrace stop.
 * p->op serializes everything done with one process (its pp_inject, links,
 * and the fields below it), slow work included: only that process's
 * attach, detach, tick, dlopen patch and stats take it. t->ops serializes
 * attach and detach (slot choice, t->session, t->attach_reason). Order:
 * t->ops -> p->op -> t->lock. A reference (refs, under t->lock) keeps p
 * allocated while its op lock is used outside the table lock; removed
 * processes are freed by the last reference.
 */
struct heap_proc {
	pid_t pid;
	uint32_t slot, gen;
	unsigned refs; /* under t->lock */
	bool attaching, removed; /* under t->lock: not (or no longer) visible */
	pthread_mutex_t op;
	int pidfd;
	struct pp_heap_allocator alloc;
	struct bpf_link *links[2 * PP_HEAP_NFN];
	unsigned nlinks;
	int session_fd;
	bool session, paused, over_budget, exited;
	double pause_overhead; /* p->overhead when the pause was decided */
	struct pp_inject *inj; /* injected agent, NULL on the uprobe path */
	/* The agent's ring, read by the poll thread without p->op (it holds a
	 * reference); the fields after it are the poll thread's. Freed with p. */
	struct pp_inject_ring *ring;
	pid_t *ring_tids; /* agent thread slot -> tid, from the thread's kernel-path sample */
	uint32_t *ring_tried; /* agent thread slot -> second of the last stack-range lookup */
	uint32_t ring_copy; /* stack copy size last given to the agent */
	uint64_t ring_allocs; /* ALLOC records taken (read racily by stats and tick) */
	uint64_t ring_sampled_last;
	int agent_fds[2]; /* uprobe_multi links on the agent, -1 if none */
	char mode_reason[160];
	uint64_t agent_sampled_last;
	unsigned fallbacks;
	uint64_t last_calls, last_tick_ns;
	double rate, overhead;
};

/*
 * How much stack to copy per sampled allocation of one process slot, sized
 * from how deep the unwinder found its stacks: twice the deepest seen,
 * after FIT_MIN_COMPLETE complete unwinds, never below FIT_MIN_BYTES nor
 * above stack_bytes. A copy found too short goes back to stack_bytes until
 * complete unwinds show the new depth. Touched by the poll
 * thread only (on_record); proc_stats reads copy and shorts racily.
 */
#define FIT_MIN_COMPLETE 16
#define FIT_MIN_BYTES 4096u

struct stack_fit {
	uint32_t tag; /* slot | gen << 24 of the process described */
	uint32_t copy; /* bytes copied now; 0 = stack_bytes */
	uint32_t used_max; /* deepest stack an unwind read */
	uint32_t complete; /* complete unwinds seen (saturating) */
	uint64_t shorts; /* samples whose copy was too short */
};

struct pp_heap_tracer {
	struct pp_heap_opts opts;
	pp_heap_event_fn fn;
	void *ctx;
	struct heap_bpf *skel;
	struct pp_ringbuf *rb;
	int ncpus;
	pthread_mutex_t lock; /* the table: short holds only (see struct heap_proc) */
	pthread_mutex_t ops; /* attach and detach, one at a time */
	struct heap_proc *procs[HEAP_MAX_PROCS];
	uint32_t gens[HEAP_MAX_PROCS];
	/* slot -> (gen << 32 | pid), read without the lock by poll */
	uint64_t slot_ids[HEAP_MAX_PROCS];
	struct stack_fit fit[HEAP_MAX_PROCS];
	enum session_state session;
	bool agent_multi; /* agent programs loaded as uprobe_multi */
	bool ring_busy; /* the last poll took records from an agent's ring (poll thread) */
	char attach_reason[160]; /* why the last attach in heap.mode inject failed */
	char session_reason[160];
	uint64_t events, attach_errors, last_tick_ns;
};

static void exp_table_fill(volatile uint32_t *t)
{
	for (int i = 0; i < HEAP_EXP_TABLE; i++) {
		double u = (i + 0.5) / HEAP_EXP_TABLE;

		t[i] = (uint32_t)(-log(u) * (double)(1u << HEAP_EXP_SHIFT) + 0.5);
	}
}

/* A power of two of at least a page (the kernel's rule for ring buffers), at most 1 GiB. */
uint32_t pp_heap_ring_size(unsigned bytes, uint64_t sample_rate)
{
	uint32_t v = 4096;

	if (!bytes) {
		/* A quarter second of a 1 GiB/s allocation burst, at about
		 * 4 KiB an event (registers and the used part of the stack):
		 * 2^28 / rate events, 2^40 / rate bytes, between 4 and 16 MiB.
		 * The default rate (512 KiB) gets 4 MiB; 64 KiB or less 16. */
		uint64_t want = sample_rate ? (1ull << 40) / sample_rate : UINT64_MAX;
		bytes = (unsigned)PP_MAX(PP_MIN(want, 16ull << 20), 4ull << 20);
	}
	while (v < bytes && v < (1u << 30))
		v <<= 1;
	return v;
}

static int open_load(struct pp_heap_tracer *t, bool with_session)
{
	struct heap_bpf *s = heap_bpf__open();
	struct stat st;
	int r;

	if (!s)
		return -errno;
	s->rodata->sample_rate = t->opts.sample_rate;
	s->rodata->stack_bytes = PP_MIN(t->opts.stack_bytes, (unsigned)HEAP_MAX_STACK);
	if (stat("/proc/self/ns/pid", &st) == 0) {
		s->rodata->ns_dev = st.st_dev;
		s->rodata->ns_ino = st.st_ino;
	}
	exp_table_fill(s->rodata->exp_table);
	bpf_map__set_max_entries(s->maps.live, PP_MAX(t->opts.max_live, 16u));
	bpf_map__set_max_entries(s->maps.scratch, (uint32_t)t->ncpus);
	bpf_map__set_max_entries(s->maps.rb,
				 pp_heap_ring_size(t->opts.ring_bytes, t->opts.sample_rate));
	if (with_session) {
		bpf_program__set_expected_attach_type(s->progs.heap_session,
						      (enum bpf_attach_type)ATTACH_UPROBE_SESSION);
		/* The agent's probes as uprobe_multi links too: perf-event
		 * uprobes need CAP_SYS_ADMIN on some kernels, links only BPF
		 * and PERFMON. */
		bpf_program__set_expected_attach_type(s->progs.heap_agent_alloc,
						      (enum bpf_attach_type)ATTACH_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(s->progs.heap_agent_free,
						      (enum bpf_attach_type)ATTACH_UPROBE_MULTI);
		t->agent_multi = true;
	} else {
		t->agent_multi = false;
		bpf_program__set_autoload(s->progs.heap_session, false);
	}
	r = heap_bpf__load(s);
	if (r) {
		heap_bpf__destroy(s);
		return r < 0 ? r : -EINVAL;
	}
	t->skel = s;
	return 0;
}

static int on_record(void *ctx, void *data, size_t size);

struct pp_heap_tracer *pp_heap_tracer__new(const struct pp_heap_opts *opts, pp_heap_event_fn fn,
					   void *ctx)
{
	struct pp_heap_tracer *t;
	int r;

	if (!opts || !fn) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->opts = *opts;
	if (!t->opts.max_live)
		t->opts.max_live = 65536;
	if (!t->opts.stack_bytes)
		t->opts.stack_bytes = 32768;
	if (t->opts.budget_percent <= 0)
		t->opts.budget_percent = 5;
	t->fn = fn;
	t->ctx = ctx;
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->ops, NULL);
	t->ncpus = libbpf_num_possible_cpus();
	if (t->ncpus <= 0) {
		r = t->ncpus ? t->ncpus : -EINVAL;
		goto fail;
	}
	if (t->opts.no_session) {
		snprintf(t->session_reason, sizeof(t->session_reason), "disabled by option");
		t->session = SESSION_NO;
	}
	r = t->opts.no_session ? -EOPNOTSUPP : open_load(t, true);
	if (r < 0 && !t->opts.no_session) {
		snprintf(t->session_reason, sizeof(t->session_reason),
			 "uprobe session program rejected at load (%s); using uretprobes",
			 strerror(-r));
		t->session = SESSION_NO;
	}
	if (r < 0) {
		r = open_load(t, false);
		if (r < 0)
			goto fail;
	}
	t->rb = pp_ringbuf__new(bpf_map__fd(t->skel->maps.rb),
				bpf_map__max_entries(t->skel->maps.rb), on_record, t);
	if (!t->rb) {
		r = -errno;
		goto fail;
	}
	t->last_tick_ns = pp_now_mono_ns();
	return t;
fail:
	pp_heap_tracer__free(t);
	errno = -r;
	return NULL;
}

static uint32_t stack_full(const struct pp_heap_tracer *t)
{
	return PP_MIN(t->opts.stack_bytes, (uint32_t)HEAP_MAX_STACK);
}

static void stack_fit_update(struct pp_heap_tracer *t, uint32_t tag, size_t copied,
			     const struct pp_heap_stack_use *u)
{
	uint32_t slot = tag & 0xffffff, full = stack_full(t), want = 0;
	struct stack_fit *f = &t->fit[slot];

	if (f->tag != tag) {
		/* a new process in the slot: attach reset its map entry to 0 */
		__atomic_store_n(&f->tag, tag, __ATOMIC_RELAXED);
		__atomic_store_n(&f->copy, 0, __ATOMIC_RELAXED);
		f->used_max = f->complete = 0;
		__atomic_store_n(&f->shorts, 0, __ATOMIC_RELAXED);
	}
	if (u->short_copy) {
		/* the whole stack_bytes at once (the next complete unwinds say how
		 * deep it went); the stack needs more than this copy */
		__atomic_store_n(&f->shorts, f->shorts + 1, __ATOMIC_RELAXED);
		f->used_max = PP_MAX(f->used_max, (uint32_t)PP_MIN(copied, (size_t)full));
	} else if (u->complete) {
		f->used_max = PP_MAX(f->used_max, (uint32_t)PP_MIN(u->used, (size_t)full));
		if (f->complete < UINT32_MAX)
			f->complete++;
	} else {
		return; /* ended for another reason: says nothing about the depth */
	}
	if (!u->short_copy && f->complete >= FIT_MIN_COMPLETE) {
		uint64_t w = ((uint64_t)f->used_max * 2 + 1023) & ~1023ull;
		want = w < FIT_MIN_BYTES ? FIT_MIN_BYTES : w >= full ? 0 : (uint32_t)w;
	}
	if (want == f->copy)
		return;
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.stack_copy), &slot, &want, BPF_ANY) == 0)
		__atomic_store_n(&f->copy, want, __ATOMIC_RELAXED);
}

static struct heap_proc *proc_get(struct pp_heap_tracer *t, pid_t pid);
static void proc_put(struct pp_heap_tracer *t, struct heap_proc *p);

/* A kernel-path sample from an injected process carries the agent's slot
 * of its thread (r8): give that slot the thread's stack range, so that its
 * next samples go into the ring. Once per thread, then at most once a
 * second (a thread sampled on another stack, or a main stack grown down). */
static void ring_discover(struct pp_heap_tracer *t, pid_t pid, pid_t tid, uint64_t slot_addr,
			  uint64_t sp)
{
	struct heap_proc *p = proc_get(t, pid);
	uint32_t now_s = (uint32_t)(pp_now_mono_ns() / 1000000000ull) + 1;
	int idx;

	if (!p)
		return;
	idx = p->ring ? pp_inject__thread_index(p->ring, slot_addr) : -1;
	if (idx >= 0 && idx < RING_THREADS &&
	    (p->ring_tids[idx] != tid || now_s != p->ring_tried[idx])) {
		int r;

		p->ring_tried[idx] = now_s;
		r = pp_inject__thread_stack(p->ring, slot_addr, sp, tid, NULL);
		if (r == 0)
			p->ring_tids[idx] = tid;
		else
			pp_dbg("heap: pid %d: thread %d: no stack range for sp %#llx: %s", (int)pid,
			       (int)tid, (unsigned long long)sp, strerror(-r));
	}
	proc_put(t, p);
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct pp_heap_tracer *t = ctx;
	const struct heap_event_hdr *h = data;
	struct pp_heap_event ev = { 0 };
	struct pp_heap_stack_use use = { 0 };
	uint32_t slot, gen;
	uint64_t id;

	if (size < sizeof(*h))
		return 0;
	slot = h->slot & 0xffffff;
	gen = h->slot >> 24;
	if (slot >= HEAP_MAX_PROCS)
		return 0;
	id = __atomic_load_n(&t->slot_ids[slot], __ATOMIC_ACQUIRE);
	if (!id || (id >> 32) != gen)
		return 0; /* detached since */
	ev.pid = (pid_t)(uint32_t)id;
	ev.tid = (pid_t)h->tid;
	ev.addr = h->addr;
	ev.size = h->size;
	ev.time_ns = h->time_ns;
	if (h->type == HEAP_EV_ALLOC) {
		const struct heap_alloc_event *a = data;

		if (size < offsetof(struct heap_alloc_event, stack) ||
		    a->stack_len > size - offsetof(struct heap_alloc_event, stack))
			return 0;
		ev.type = PP_HEAP_ALLOC;
		ev.regs_valid = a->regs_valid != 0;
		memcpy(ev.regs.r, a->regs, sizeof(ev.regs.r));
		ev.stack = a->stack;
		ev.stack_len = a->stack_len;
		ev.use = &use;
		if (a->regs[8] && a->regs_valid)
			ring_discover(t, ev.pid, ev.tid, a->regs[8], a->regs[7]);
	} else if (h->type == HEAP_EV_FREE) {
		ev.type = PP_HEAP_FREE;
	} else {
		return 0;
	}
	__atomic_store_n(&t->events, t->events + 1, __ATOMIC_RELAXED); /* one writer */
	t->fn(t->ctx, &ev);
	if (use.unwound)
		stack_fit_update(t, h->slot, ev.stack_len, &use);
	return 0;
}

static uint64_t make_cookie(const struct heap_proc *p, int fn)
{
	return (uint64_t)fn | ((uint64_t)p->slot << 8) | ((uint64_t)(p->gen & 0xff) << 32);
}

/* Raw BPF_LINK_CREATE for a uprobe session (the uprobe_multi attr layout). */
struct link_create_umulti {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t umulti_flags;
	uint32_t pid;
	uint32_t pad;
};

static int attach_session(struct pp_heap_tracer *t, struct heap_proc *p)
{
	struct link_create_umulti attr;
	uint64_t offs[PP_HEAP_NFN], cookies[PP_HEAP_NFN];
	unsigned i;
	int fd;

	memset(&attr, 0, sizeof(attr));
	for (i = 0; i < p->alloc.n; i++) {
		offs[i] = p->alloc.fns[i].probe_off;
		cookies[i] = make_cookie(p, p->alloc.fns[i].fn);
	}
	attr.prog_fd = (uint32_t)bpf_program__fd(t->skel->progs.heap_session);
	attr.attach_type = ATTACH_UPROBE_SESSION;
	attr.path = (uint64_t)(uintptr_t)p->alloc.path;
	attr.offsets = (uint64_t)(uintptr_t)offs;
	attr.cookies = (uint64_t)(uintptr_t)cookies;
	attr.cnt = p->alloc.n;
	attr.pid = (uint32_t)p->pid;
	fd = (int)syscall(__NR_bpf, CMD_LINK_CREATE, &attr, sizeof(attr));
	if (fd < 0)
		return -errno;
	p->session_fd = fd;
	return 0;
}

static int attach_classic(struct pp_heap_tracer *t, struct heap_proc *p)
{
	unsigned i;

	for (i = 0; i < p->alloc.n; i++) {
		const struct pp_heap_fn_probe *f = &p->alloc.fns[i];
		LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = make_cookie(p, f->fn));
		struct bpf_link *l;

		l = bpf_program__attach_uprobe_opts(t->skel->progs.heap_entry, p->pid,
						    p->alloc.path, f->probe_off, &o);
		if (!l)
			return -errno;
		p->links[p->nlinks++] = l;
		if (f->fn == HEAP_FN_FREE)
			continue;
		o.retprobe = true;
		l = bpf_program__attach_uprobe_opts(t->skel->progs.heap_return, p->pid,
						    p->alloc.path, f->probe_off, &o);
		if (!l)
			return -errno;
		p->links[p->nlinks++] = l;
	}
	return 0;
}

static int attach_agent(struct pp_heap_tracer *t, struct heap_proc *p)
{
	const char *path = pp_inject__probe_path(p->inj);
	uint64_t offs[2] = { pp_inject__alloc_off(p->inj), pp_inject__free_off(p->inj) };
	struct bpf_program *progs[2] = { t->skel->progs.heap_agent_alloc,
					 t->skel->progs.heap_agent_free };

	for (int i = 0; i < 2; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = make_cookie(p, i ? HEAP_FN_FREE : 0));
		struct bpf_link *l;

		if (t->agent_multi) {
			struct link_create_umulti attr;
			uint64_t cookie = o.bpf_cookie;
			int fd;

			memset(&attr, 0, sizeof(attr));
			attr.prog_fd = (uint32_t)bpf_program__fd(progs[i]);
			attr.attach_type = ATTACH_UPROBE_MULTI;
			attr.path = (uint64_t)(uintptr_t)path;
			attr.offsets = (uint64_t)(uintptr_t)&offs[i];
			attr.cookies = (uint64_t)(uintptr_t)&cookie;
			attr.cnt = 1;
			attr.pid = (uint32_t)p->pid;
			fd = (int)syscall(__NR_bpf, CMD_LINK_CREATE, &attr, sizeof(attr));
			if (fd < 0) {
				int e = -errno;

				pp_dbg("heap: pid %d: uprobe_multi on %s+%#llx: %s", (int)p->pid,
				       path, (unsigned long long)offs[i], strerror(-e));
				return e;
			}
			p->agent_fds[i] = fd;
			continue;
		}
		l = bpf_program__attach_uprobe_opts(progs[i], p->pid, path, offs[i], &o);

		if (!l) {
			int e = -errno;

			pp_dbg("heap: pid %d: uprobe on %s+%#llx: %s", (int)p->pid, path,
			       (unsigned long long)offs[i], strerror(-e));
			return e;
		}
		p->links[p->nlinks++] = l;
	}
	return 0;
}

static void release_links(struct heap_proc *p)
{
	unsigned i;

	for (i = 0; i < p->nlinks; i++)
		bpf_link__destroy(p->links[i]);
	p->nlinks = 0;
	if (p->session_fd >= 0) {
		close(p->session_fd);
		p->session_fd = -1;
	}
	for (int k = 0; k < 2; k++) {
		if (p->agent_fds[k] >= 0)
			close(p->agent_fds[k]);
		p->agent_fds[k] = -1;
	}
}

static bool proc_alive(const struct heap_proc *p)
{
	struct pollfd pfd = { .fd = p->pidfd, .events = POLLIN };

	if (p->pidfd < 0)
		return kill(p->pid, 0) == 0 || errno != ESRCH;
	return poll(&pfd, 1, 0) == 0;
}

static int attach_links(struct pp_heap_tracer *t, struct heap_proc *p)
{
	int r;

	if (t->session != SESSION_NO) {
		r = attach_session(t, p);
		if (r == 0) {
			t->session = SESSION_YES;
			p->session = true;
			return 0;
		}
		if (r == -ESRCH || !proc_alive(p))
			return -ESRCH;
		if (t->session == SESSION_UNKNOWN) {
			t->session = SESSION_NO;
			snprintf(t->session_reason, sizeof(t->session_reason),
				 "uprobe session link rejected (%s); using uretprobes",
				 strerror(-r));
		} else {
			return r; /* worked before: a real error for this process */
		}
	}
	p->session = false;
	r = attach_classic(t, p);
	if (r < 0) {
		release_links(p);
		if (!proc_alive(p))
			return -ESRCH;
	}
	return r;
}

/* With t->lock: the slot of pid's visible entry (attached, not removed), or -1. */
static ssize_t find_proc(struct pp_heap_tracer *t, pid_t pid)
{
	for (size_t i = 0; i < HEAP_MAX_PROCS; i++) {
		const struct heap_proc *p = t->procs[i];

		if (p && p->pid == pid && !p->attaching && !p->removed)
			return (ssize_t)i;
	}
	return -1;
}

static struct heap_proc *proc_new(pid_t pid)
{
	struct heap_proc *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pid = pid;
	p->session_fd = -1;
	p->agent_fds[0] = p->agent_fds[1] = -1;
	p->pidfd = -1;
	pthread_mutex_init(&p->op, NULL);
	return p;
}

/* Injection undone, links and pidfd closed, memory freed; no lock held. */
static void proc_release(struct heap_proc *p)
{
	pp_inject__detach(p->inj);
	p->inj = NULL;
	pp_inject__ring_close(p->ring);
	free(p->ring_tids);
	free(p->ring_tried);
	release_links(p);
	if (p->pidfd >= 0)
		close(p->pidfd);
	pthread_mutex_destroy(&p->op);
	free(p);
}

/* pid's visible entry with a reference taken, or NULL. */
static struct heap_proc *proc_get(struct pp_heap_tracer *t, pid_t pid)
{
	struct heap_proc *p = NULL;
	ssize_t i;

	pthread_mutex_lock(&t->lock);
	i = find_proc(t, pid);
	if (i >= 0) {
		p = t->procs[i];
		p->refs++;
	}
	pthread_mutex_unlock(&t->lock);
	return p;
}

/* Drops a reference; the last one of a removed entry frees it. */
static void proc_put(struct pp_heap_tracer *t, struct heap_proc *p)
{
	bool last;

	pthread_mutex_lock(&t->lock);
	last = --p->refs == 0 && p->removed;
	pthread_mutex_unlock(&t->lock);
	if (last)
		proc_release(p);
}

static void read_counters(struct pp_heap_tracer *t, uint32_t slot, struct heap_proc_counters *ret)
{
	struct heap_proc_counters *v = calloc((size_t)t->ncpus, sizeof(*v));

	memset(ret, 0, sizeof(*ret));
	if (!v)
		return;
	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.counters), &slot, v) == 0) {
		for (int i = 0; i < t->ncpus; i++) {
			ret->mallocs += v[i].mallocs;
			ret->frees += v[i].frees;
			ret->alloc_bytes += v[i].alloc_bytes;
			ret->sampled += v[i].sampled;
		}
	}
	free(v);
}

static void clear_counters(struct pp_heap_tracer *t, uint32_t slot)
{
	struct heap_proc_counters *v = calloc((size_t)t->ncpus, sizeof(*v));

	if (!v)
		return;
	bpf_map_update_elem(bpf_map__fd(t->skel->maps.counters), &slot, v, BPF_ANY);
	free(v);
}

/* Remove the slot's entries from the live table (bounded by its size). */
static void clear_live(struct pp_heap_tracer *t, uint32_t slot)
{
	int fd = bpf_map__fd(t->skel->maps.live);
	struct heap_live_key k, next;
	unsigned budget = PP_MAX(t->opts.max_live, 16u) * 2 + 16;

	if (bpf_map_get_next_key(fd, NULL, &k) < 0)
		return;
	/* the next key is taken before k is deleted: one pass over the table
	 * (restarting after each delete scanned every bucket per entry) */
	while (budget--) {
		int more = bpf_map_get_next_key(fd, &k, &next) == 0;

		if (k.slot == slot)
			bpf_map_delete_elem(fd, &k);
		if (!more)
			break;
		k = next;
	}
}

/* Is path the preloaded agent's file (libpodprof-agent.so)? */
static bool is_agent_file(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	b = b ? b + 1 : path;
	return b && strncmp(b, "libpodprof-agent", 16) == 0;
}

/* heap.mode preload/auto: enable the agent the loader loaded and read its
 * ring. Nothing of the target is stopped, mapped or redirected. */
static int attach_preload(struct pp_heap_tracer *t, struct heap_proc *p)
{
	/* the agent's ring: the BPF ring's size for the same rate (a burst
	 * of samples waits there until podprof reads it) */
	struct pp_inject_opts io = {
		.sample_rate = t->opts.sample_rate,
		.ring_bytes = pp_heap_ring_size(t->opts.ring_bytes, t->opts.sample_rate),
	};
	int r, e = 0;

	r = pp_inject__preload_find(p->pid, &io, &p->inj, p->mode_reason, sizeof(p->mode_reason));
	if (r < 0)
		return r;
	p->ring_tids = calloc(RING_THREADS, sizeof(*p->ring_tids));
	p->ring_tried = calloc(RING_THREADS, sizeof(*p->ring_tried));
	if (p->ring_tids && p->ring_tried)
		p->ring = pp_inject__ring_open(p->inj, stack_full(t), &e);
	else
		e = -ENOMEM;
	if (!p->ring) {
		snprintf(p->mode_reason, sizeof(p->mode_reason),
			 "cannot read the preloaded agent's ring (%s)", strerror(-e));
		pp_inject__unload(p->inj); /* dormant again */
		p->inj = NULL;
		return e ? e : -EIO;
	}
	p->mode_reason[0] = '\0';
	return 0;
}

/* heap.mode inject/auto: map the agent, probe its notification points,
 * then redirect the slots (so no sampled call is missed). On failure the
 * reason is in p->mode_reason and the target is as it was. */
static int attach_inject(struct pp_heap_tracer *t, struct heap_proc *p)
{
	struct pp_inject_opts io = { .sample_rate = t->opts.sample_rate,
				     .allocator_path = p->alloc.map_path };
	int r;

	if (t->opts.mode == PP_HEAP_MODE_UPROBE)
		return -EOPNOTSUPP;
	if (p->alloc.is_static) {
		snprintf(p->mode_reason, sizeof(p->mode_reason), "%s",
			 pp_inject__static_exe(p->pid) ? "static executable"
						       : "allocator linked into the executable");
		return -ENOEXEC;
	}
	r = pp_inject__prepare(p->pid, &io, &p->inj, p->mode_reason, sizeof(p->mode_reason));
	if (r < 0)
		return r;
	r = attach_agent(t, p);
	if (r < 0) {
		snprintf(p->mode_reason, sizeof(p->mode_reason),
			 "cannot probe the agent (%s); injection failed", strerror(-r));
		goto fail;
	}
	/* The ring: without it every sample takes the kernel path (slower,
	 * as complete). */
	p->ring_tids = calloc(RING_THREADS, sizeof(*p->ring_tids));
	p->ring_tried = calloc(RING_THREADS, sizeof(*p->ring_tried));
	if (p->ring_tids && p->ring_tried) {
		int e = 0;

		p->ring = pp_inject__ring_open(p->inj, stack_full(t), &e);
		if (!p->ring)
			pp_warn("heap: pid %d: the agent's ring cannot be read (%s): every sample "
				"takes the uprobe",
				(int)p->pid, strerror(-e));
	}
	r = pp_inject__patch(p->inj);
	if (r < 0) {
		snprintf(p->mode_reason, sizeof(p->mode_reason),
			 "cannot redirect the allocator (%s); injection failed", strerror(-r));
		goto fail;
	}
	p->mode_reason[0] = '\0';
	return 0;
fail:
	release_links(p);
	pp_inject__ring_close(p->ring);
	p->ring = NULL;
	pp_inject__unload(p->inj); /* nothing redirected: leave no trace */
	p->inj = NULL;
	return r;
}

int pp_heap_tracer__attach(struct pp_heap_tracer *t, pid_t pid)
{
	struct heap_proc *p;
	ssize_t slot;
	int r;

	if (!t || pid <= 0)
		return -EINVAL;
	p = proc_new(pid);
	if (!p)
		return -ENOMEM;
	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (p->pidfd < 0 && errno == ESRCH) {
		proc_release(p);
		return -ESRCH;
	}
	r = pp_heap__find_allocator(pid, &p->alloc);
	if (r < 0) {
		proc_release(p);
		return r;
	}
	for (unsigned i = 0; i < p->alloc.n; i++)
		p->fallbacks += !p->alloc.fns[i].emulated;

	pthread_mutex_lock(&t->ops);
	t->attach_reason[0] = '\0';
	/* the slot is reserved (attaching: invisible to stats, tick, detach)
	 * while the slow part runs without the table lock */
	pthread_mutex_lock(&t->lock);
	for (slot = 0; slot < HEAP_MAX_PROCS; slot++)
		if (t->procs[slot] && t->procs[slot]->pid == pid && !t->procs[slot]->removed)
			break;
	if (slot < HEAP_MAX_PROCS) {
		pthread_mutex_unlock(&t->lock);
		pthread_mutex_unlock(&t->ops);
		proc_release(p);
		return -EEXIST;
	}
	for (slot = 0; slot < HEAP_MAX_PROCS && t->procs[slot]; slot++)
		;
	if (slot == HEAP_MAX_PROCS) {
		pthread_mutex_unlock(&t->lock);
		pthread_mutex_unlock(&t->ops);
		proc_release(p);
		return -ENOSPC;
	}
	p->slot = (uint32_t)slot;
	p->gen = (t->gens[slot] + 1) & 0xff;
	t->gens[slot] = p->gen;
	p->attaching = true;
	t->procs[slot] = p;
	pthread_mutex_unlock(&t->lock);

	clear_counters(t, p->slot);
	clear_live(t, p->slot);
	{
		uint32_t full = 0; /* the whole stack_bytes until its stacks are known */

		bpf_map_update_elem(bpf_map__fd(t->skel->maps.stack_copy), &p->slot, &full,
				    BPF_ANY);
	}
	__atomic_store_n(&t->slot_ids[slot], ((uint64_t)p->gen << 32) | (uint32_t)pid,
			 __ATOMIC_RELEASE);
	r = -EOPNOTSUPP;
	if (t->opts.mode == PP_HEAP_MODE_AUTO || t->opts.mode == PP_HEAP_MODE_PRELOAD)
		r = attach_preload(t, p);
	if (r < 0 && t->opts.mode == PP_HEAP_MODE_PRELOAD) {
		snprintf(t->attach_reason, sizeof(t->attach_reason), "%s", p->mode_reason);
	} else if (r == -EAGAIN ||
		   ((r == -ENOENT || r == -EBADMSG) &&
		    (is_agent_file(p->alloc.map_path) || is_agent_file(p->alloc.name)))) {
		/* auto: a preloaded agent (its malloc is the one the process
		 * calls) the loader is still setting up, in a process caught at
		 * its start (not initialised, or its header or data not mapped
		 * yet): never a second agent, nor uprobes, over it; the next
		 * discovery pass tries again. A preloaded agent refused for good
		 * (limits, another version) goes on to the next mode. */
		snprintf(t->attach_reason, sizeof(t->attach_reason), "%s", p->mode_reason);
		r = -EAGAIN;
	} else if (r < 0 && r != -ESRCH) {
		/* auto: why there is no preloaded agent to use, when there is
		 * one (not the common "none"), stays in front of the reason
		 * injection gives */
		char pre[sizeof(p->mode_reason)] = "";

		if (r != -ENOENT && r != -EOPNOTSUPP)
			snprintf(pre, sizeof(pre), "%s", p->mode_reason);
		r = attach_inject(t, p);
		if (r < 0 && pre[0]) {
			char both[2 * sizeof(p->mode_reason) + 32];

			snprintf(both, sizeof(both), "preloaded agent: %s; %s", pre,
				 p->mode_reason);
			snprintf(p->mode_reason, sizeof(p->mode_reason), "%.*s",
				 (int)sizeof(p->mode_reason) - 1, both);
		}
		if (r < 0 && t->opts.mode == PP_HEAP_MODE_INJECT)
			snprintf(t->attach_reason, sizeof(t->attach_reason), "%s", p->mode_reason);
		else if (r < 0 && r != -ESRCH)
			r = attach_links(t, p);
	}
	if (r < 0) {
		__atomic_store_n(&t->slot_ids[slot], 0, __ATOMIC_RELEASE);
		pthread_mutex_lock(&t->lock);
		t->procs[slot] = NULL;
		t->attach_errors++;
		pthread_mutex_unlock(&t->lock);
		pthread_mutex_unlock(&t->ops);
		proc_release(p);
		return r;
	}
	p->last_tick_ns = pp_now_mono_ns();
	pthread_mutex_lock(&t->lock);
	p->attaching = false;
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_unlock(&t->ops);
	pp_dbg("heap: pid %d: %s (%s), %s", (int)pid, p->alloc.name, p->alloc.path,
	       pp_inject__preloaded(p->inj) ? "preloaded agent"
	       : p->inj			    ? "injected agent"
	       : p->session		    ? "uprobe session"
					    : "uretprobe");
	return 0;
}

int pp_heap_tracer__detach(struct pp_heap_tracer *t, pid_t pid)
{
	struct heap_proc *p;
	ssize_t i;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->ops);
	pthread_mutex_lock(&t->lock);
	i = find_proc(t, pid);
	if (i < 0) {
		pthread_mutex_unlock(&t->lock);
		pthread_mutex_unlock(&t->ops);
		return -ENOENT;
	}
	p = t->procs[i];
	p->removed = true; /* invisible from now on; the slot stays reserved */
	p->refs++;
	pthread_mutex_unlock(&t->lock);

	pthread_mutex_lock(&p->op);
	pp_inject__detach(p->inj); /* slots restored first: no new notifications */
	p->inj = NULL;
	release_links(p);
	pthread_mutex_unlock(&p->op);
	__atomic_store_n(&t->slot_ids[p->slot], 0, __ATOMIC_RELEASE);
	clear_live(t, p->slot);

	pthread_mutex_lock(&t->lock);
	t->procs[i] = NULL;
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_unlock(&t->ops);
	proc_put(t, p);
	return 0;
}

/* One process's exit, call rate and overhead budget, with p->op held. */
static void tick_one(struct pp_heap_tracer *t, struct heap_proc *p, uint64_t now)
{
	struct heap_proc_counters c;
	uint64_t calls;
	double dt;

	if (!p->exited && !proc_alive(p)) {
		p->exited = true;
		pp_inject__detach(p->inj);
		p->inj = NULL;
		release_links(p);
	}
	read_counters(t, p->slot, &c);
	if (p->inj) {
		struct pp_inject_stats is;

		if (pp_inject__stats(p->inj, &is) == 0) {
			c.mallocs = is.calls;
			c.frees = is.frees;
			c.alloc_bytes = is.bytes;
		}
	}
	calls = c.mallocs + c.frees;
	dt = (double)(now - p->last_tick_ns) / 1e9;
	if (dt <= 0)
		return;
	p->rate = p->exited || p->paused ? 0 : (double)(calls - p->last_calls) / dt;
	p->last_calls = calls;
	p->last_tick_ns = now;
	/* A probe the kernel must single-step (no emulated instruction
	 * found in malloc or free) costs about 15.8 us a hit (DESIGN.md). */
	double cost = p->session ? COST_NS_SESSION : COST_NS_CLASSIC;
	if (p->inj) {
		/* Agent: a few ns per call, the probe only per sample. */
		uint64_t ring = __atomic_load_n(&p->ring_allocs, __ATOMIC_RELAXED);
		double srate = (double)(c.sampled - p->agent_sampled_last) / dt;
		double rrate = (double)(ring - p->ring_sampled_last) / dt;

		p->agent_sampled_last = c.sampled;
		p->ring_sampled_last = ring;
		p->overhead = (p->rate * COST_NS_AGENT + srate * COST_NS_SAMPLE +
			       rrate * COST_NS_RING_SAMPLE) *
			      1e-9 * 100.0;
		p->over_budget = p->overhead > t->opts.budget_percent;
		return;
	}
	for (unsigned k = 0; k < p->alloc.n; k++) {
		int fn = p->alloc.fns[k].fn;
		if (!p->alloc.fns[k].emulated && (fn == HEAP_FN_MALLOC || fn == HEAP_FN_FREE))
			cost += COST_NS_SINGLESTEP / 2;
	}
	p->overhead = p->rate * cost * 1e-9 * 100.0;
	if (p->overhead > t->opts.budget_percent) {
		p->over_budget = true;
		if ((t->opts.over_budget == PP_HEAP_POLICY_PAUSE ||
		     t->opts.over_budget == PP_HEAP_POLICY_AUTO) &&
		    !p->paused) {
			release_links(p);
			p->paused = true;
			p->pause_overhead = p->overhead;
			pp_dbg("heap: pid %d: est. overhead %.1f%% over budget, paused",
			       (int)p->pid, p->overhead);
		}
	} else if (!p->paused) {
		p->over_budget = false;
	}
}

/* Once a second, from the poll thread: every attached process, each under
 * its own op lock (a slow injection elsewhere does not hold the poll up). */
static void tick(struct pp_heap_tracer *t, uint64_t now)
{
	struct heap_proc **list = calloc(HEAP_MAX_PROCS, sizeof(*list));
	size_t n = 0;

	if (!list)
		return;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < HEAP_MAX_PROCS; i++) {
		struct heap_proc *p = t->procs[i];

		if (p && !p->attaching && !p->removed) {
			p->refs++;
			list[n++] = p;
		}
	}
	pthread_mutex_unlock(&t->lock);
	for (size_t k = 0; k < n; k++) {
		pthread_mutex_lock(&list[k]->op);
		tick_one(t, list[k], now);
		pthread_mutex_unlock(&list[k]->op);
		proc_put(t, list[k]);
	}
	free(list);
}

/*
 * FREEs the BPF side could not put in the full ring buffer wait in
 * lost_frees: delivered after the ring buffer was drained (so after the
 * ALLOC they free), each taken with lookup_and_delete so that it is
 * delivered once, here or by an ALLOC at the same address in BPF.
 */
static void drain_lost_frees(struct pp_heap_tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.lost_frees);
	struct heap_live_key keys[256], k, *prev = NULL;
	size_t n = 0;

	while (n < ARRAY_SIZE(keys) && bpf_map_get_next_key(fd, prev, &k) == 0) {
		keys[n] = k;
		prev = &keys[n++];
	}
	for (size_t i = 0; i < n; i++) {
		struct heap_lost_free lf;
		struct heap_event_hdr h = { .type = HEAP_EV_FREE };

		int r = bpf_map_lookup_and_delete_elem(fd, &keys[i], &lf);
		if (r == -EINVAL || r == -524 /* ENOTSUPP: hash maps before 5.14 */) {
			/* not atomic: a FREE racing with an ALLOC at the same
			 * address may be delivered twice (rare; old kernels only) */
			if (bpf_map_lookup_elem(fd, &keys[i], &lf) < 0 ||
			    bpf_map_delete_elem(fd, &keys[i]) < 0)
				continue;
		} else if (r < 0) {
			continue; /* delivered through the ring buffer meanwhile */
		}
		h.slot = lf.tag;
		h.pid = lf.pid;
		h.tid = lf.tid;
		h.addr = keys[i].addr;
		h.size = lf.size;
		h.time_ns = lf.time_ns;
		on_record(t, &h, sizeof(h));
	}
}

struct ring_ctx {
	struct pp_heap_tracer *t;
	struct heap_proc *p;
};

static void on_ring_record(void *ctx, const struct pp_inject_rec *rec)
{
	struct ring_ctx *c = ctx;
	struct heap_proc *p = c->p;
	struct pp_heap_tracer *t = c->t;
	struct pp_heap_event ev = { 0 };
	struct pp_heap_stack_use use = { 0 };

	ev.pid = p->pid;
	ev.tid = p->pid;
	ev.addr = rec->addr;
	ev.time_ns = pp_now_mono_ns();
	if (rec->alloc) {
		if (rec->thread < RING_THREADS && p->ring_tids[rec->thread])
			ev.tid = p->ring_tids[rec->thread];
		ev.type = PP_HEAP_ALLOC;
		ev.size = rec->size;
		ev.regs_valid = true;
		ev.regs.r[0] = rec->addr; /* DWARF numbering, as the BPF side fills it */
		ev.regs.r[3] = rec->regs[PP_INJECT_RBX];
		ev.regs.r[6] = rec->regs[PP_INJECT_RBP];
		ev.regs.r[7] = rec->regs[PP_INJECT_SP];
		ev.regs.r[12] = rec->regs[PP_INJECT_R12];
		ev.regs.r[13] = rec->regs[PP_INJECT_R13];
		ev.regs.r[14] = rec->regs[PP_INJECT_R14];
		ev.regs.r[15] = rec->regs[PP_INJECT_R15];
		ev.regs.r[16] = rec->regs[PP_INJECT_IP];
		ev.stack = rec->stack;
		ev.stack_len = rec->stack_len;
		ev.use = &use;
		__atomic_store_n(&p->ring_allocs, p->ring_allocs + 1, __ATOMIC_RELAXED);
	} else {
		ev.type = PP_HEAP_FREE;
	}
	__atomic_store_n(&t->events, t->events + 1, __ATOMIC_RELAXED); /* one writer */
	t->fn(t->ctx, &ev);
	if (use.unwound)
		stack_fit_update(t, p->slot | (p->gen & 0xff) << 24, ev.stack_len, &use);
}

/*
 * The injected agents' rings, before the BPF ring buffer: a block's FREE
 * goes the way its ALLOC went, so per block the order holds either way;
 * between the two ways, the ring's records are older than the kernel
 * path's taken at the same poll when the ring was full. Each process is
 * read without its op lock (a reference keeps its ring), so a slow
 * injection or /metrics never holds the samples up, nor they it.
 */
static uint64_t drain_rings(struct pp_heap_tracer *t)
{
	struct heap_proc *list[HEAP_MAX_PROCS];
	uint64_t got = 0;
	size_t n = 0;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < HEAP_MAX_PROCS; i++) {
		struct heap_proc *p = t->procs[i];

		if (p && p->ring && !p->attaching && !p->removed) {
			p->refs++;
			list[n++] = p;
		}
	}
	pthread_mutex_unlock(&t->lock);
	for (size_t k = 0; k < n; k++) {
		struct heap_proc *p = list[k];
		struct ring_ctx c = { t, p };
		const struct stack_fit *f = &t->fit[p->slot];
		uint32_t want = stack_full(t);

		ssize_t r = pp_inject__ring_drain(p->ring, on_ring_record, &c);

		got += r > 0 ? (uint64_t)r : 0;
		if (f->tag == (p->slot | (p->gen & 0xff) << 24) && f->copy)
			want = f->copy;
		if (want != p->ring_copy && pp_inject__ring_copy(p->ring, want) == 0)
			p->ring_copy = want;
		proc_put(t, p);
	}
	return got;
}

/* While the agents' rings bring records, they are read every RING_POLL_MS
 * (nothing wakes podprof for them; at 2 MiB a ring holds ~500 samples of
 * 4 KiB stacks), else at the caller's timeout. */
#define RING_POLL_MS 10

int pp_heap_tracer__poll(struct pp_heap_tracer *t, int timeout_ms)
{
	uint64_t before, now;
	int r, r2;

	if (!t)
		return -EINVAL;
	before = t->events;
	/* Wakeups happen only when the buffer is half full: wait for one or
	 * for the timeout, then drain whatever is there. */
	if (t->ring_busy && timeout_ms > RING_POLL_MS)
		timeout_ms = RING_POLL_MS;
	r = pp_ringbuf__poll(t->rb, timeout_ms > 0 ? timeout_ms : 0);
	t->ring_busy = drain_rings(t) > 0;
	r2 = pp_ringbuf__consume(t->rb);
	if (r < 0 && r != -EINTR)
		return r;
	if (r2 < 0 && r2 != -EINTR)
		return r2;
	drain_lost_frees(t);
	now = pp_now_mono_ns();
	if (now - t->last_tick_ns >= TICK_NS) {
		tick(t, now);
		t->last_tick_ns = now;
	}
	return (int)PP_MIN(t->events - before, (uint64_t)INT32_MAX);
}

int pp_heap_tracer__proc_stats(struct pp_heap_tracer *t, pid_t pid, struct pp_heap_proc_stats *ret)
{
	struct heap_proc_counters c;
	struct heap_proc *p;

	if (!t || !ret)
		return -EINVAL;
	p = proc_get(t, pid);
	if (!p)
		return -ENOENT;
	read_counters(t, p->slot, &c);
	/* the agent's counters are read from the target under this process's
	 * op lock only: other processes and the poll thread go on meanwhile */
	pthread_mutex_lock(&p->op);
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->allocator, sizeof(ret->allocator), "%s", p->alloc.name);
	ret->mallocs = c.mallocs;
	ret->frees = c.frees;
	ret->alloc_bytes = c.alloc_bytes;
	ret->sampled = c.sampled;
	ret->calls_per_sec = p->rate;
	ret->est_overhead_percent = p->overhead;
	ret->paused = p->paused;
	ret->session = p->session;
	ret->over_budget = p->over_budget;
	ret->exited = p->exited;
	ret->probes = p->alloc.n;
	ret->probe_fallbacks = p->fallbacks;
	ret->pause_overhead_percent = p->pause_overhead;
	ret->injected = p->inj != NULL;
	ret->preloaded = pp_inject__preloaded(p->inj);
	snprintf(ret->mode_reason, sizeof(ret->mode_reason), "%s", p->mode_reason);
	{
		const struct stack_fit *f = &t->fit[p->slot];
		bool mine = __atomic_load_n(&f->tag, __ATOMIC_RELAXED) ==
			    (p->slot | (p->gen & 0xff) << 24);
		uint32_t copy = mine ? __atomic_load_n(&f->copy, __ATOMIC_RELAXED) : 0;

		ret->stack_copy_bytes = copy ? copy : stack_full(t);
		ret->stack_short = mine ? __atomic_load_n(&f->shorts, __ATOMIC_RELAXED) : 0;
	}
	if (p->ring) {
		ret->ring_samples = __atomic_load_n(&p->ring_allocs, __ATOMIC_RELAXED);
		ret->sampled += ret->ring_samples;
		pp_inject__ring_stats(p->ring, &(uint64_t){ 0 }, &ret->ring_skipped);
	}
	if (p->inj) {
		struct pp_inject_stats is;

		if (pp_inject__stats(p->inj, &is) == 0) {
			ret->ring_full = is.ring_full;
			ret->ring_nostack = is.ring_nostack;
			ret->mallocs = is.calls;
			ret->frees = is.frees;
			ret->alloc_bytes = is.bytes;
			ret->agent_reused = is.reused;
			ret->inject_slots = is.slots;
			ret->inject_modules = is.modules;
			ret->inject_skipped = is.skipped;
			ret->inject_pause_ns = is.pause_ns;
			snprintf(ret->coverage, sizeof(ret->coverage), "%s", is.coverage);
		}
		ret->probes = 2;
		ret->probe_fallbacks = 0;
		ret->session = false;
	}
	pthread_mutex_unlock(&p->op);
	proc_put(t, p);
	return 0;
}

static uint64_t drop_sum(struct pp_heap_tracer *t, uint32_t idx)
{
	return pp_percpu_sum(bpf_map__fd(t->skel->maps.drops), idx, t->ncpus);
}

void pp_heap_tracer__stats(struct pp_heap_tracer *t, struct pp_heap_stats *ret)
{
	if (!ret)
		return;
	memset(ret, 0, sizeof(*ret));
	if (!t)
		return;
	/* the BPF counters are read without the table lock */
	ret->events = __atomic_load_n(&t->events, __ATOMIC_RELAXED);
	ret->ringbuf_drops = drop_sum(t, HEAP_CNT_RINGBUF_DROP);
	ret->live_table_full = drop_sum(t, HEAP_CNT_LIVE_FULL);
	ret->stack_read_errors = drop_sum(t, HEAP_CNT_STACK_ERR);
	ret->nested = drop_sum(t, HEAP_CNT_NESTED);
	ret->frees_deferred = drop_sum(t, HEAP_CNT_FREE_DEFERRED);
	ret->frees_lost = drop_sum(t, HEAP_CNT_FREE_LOST);
	pthread_mutex_lock(&t->lock);
	ret->attach_errors = t->attach_errors;
	for (size_t i = 0; i < HEAP_MAX_PROCS; i++)
		ret->procs += t->procs[i] && !t->procs[i]->attaching && !t->procs[i]->removed;
	pthread_mutex_unlock(&t->lock);
}

int pp_heap_tracer__maps_changed(struct pp_heap_tracer *t, pid_t pid)
{
	struct heap_proc *p;
	int r = 0;

	if (!t)
		return -EINVAL;
	p = proc_get(t, pid);
	if (!p)
		return -ENOENT;
	pthread_mutex_lock(&p->op);
	if (p->inj)
		r = pp_inject__patch(p->inj); /* stops a thread of the target: its op lock only */
	pthread_mutex_unlock(&p->op);
	proc_put(t, p);
	return r;
}

const char *pp_heap_tracer__attach_reason(struct pp_heap_tracer *t)
{
	return t ? t->attach_reason : "";
}

const char *pp_heap_tracer__session_reason(struct pp_heap_tracer *t)
{
	return t ? t->session_reason : "";
}

void pp_heap_tracer__free(struct pp_heap_tracer *t)
{
	if (!t)
		return;
	/* no other thread uses t any more: every entry goes, references or not */
	for (size_t i = 0; i < HEAP_MAX_PROCS; i++)
		if (t->procs[i])
			proc_release(t->procs[i]);
	pp_ringbuf__free(t->rb);
	heap_bpf__destroy(t->skel);
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->ops);
	free(t);
}
