/* SPDX-License-Identifier: Apache-2.0 */
#include "agent.h"

#include "podprof-config.h"

#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "collector.h"
#include "cpu/cpu.h"
#include "heap/heap.h"
#include "http/present.h"
#include "offcpu/offcpu.h"
#include "procfs/procfs.h"
#include "refusal.h"
#include "store/store.h"
#include "symbolize/isolate.h"
#include "symbolize/symbolize.h"
#include "threads/threads.h"
#include "tracee/tracee.h"
#include "unwind/unwind.h"
#include "util/log.h"
#include "util/sigbus.h"

#define MAX_PCS 256
/* The main server and one per target with its own listen address. */
#define MAX_SERVERS (1 + PP_CONFIG_MAX_LISTENERS)
#define THREADCREATE_MAX 65536
#define TRIM_INTERVAL_NS (10ull * 1000 * 1000 * 1000)
/* /healthz fails when no discovery pass ended for this long (or 10 intervals). */
#define DISCOVERY_STALL_MIN_NS (60ull * 1000 * 1000 * 1000)

/* What each collector can do; reported in /metrics, on the index page and by its endpoints. */
enum coll { COLL_CPU = 0, COLL_HEAP, COLL_OFFCPU, COLL_THREADS, COLL__COUNT };
enum coll_state { CS_OK = 0, CS_DISABLED, CS_UNAVAILABLE };

static const char *const coll_state_names[] = { "ok", "disabled", "unavailable" };
static const struct pp_collector_ops *const coll_ops[COLL__COUNT]; /* below */

struct coll_status {
	enum coll_state state;
	bool from_attach; /* unavailable because every attach was refused (may recover) */
	char reason[512];
};

/* One collector's state for one target (see collector.h). */
struct target_coll {
	bool attached;
	bool reattach; /* exec'd: detach and attach again */
	bool refusal_logged; /* a refused attach is retried, logged once */
	unsigned attempts; /* failed attaches (a racing exec), up to max_attempts */
};

struct target {
	pid_t pid;
	uint64_t start_time;
	int group;
	char comm[16];
	char *exe;
	uint64_t maps_hash;
	unsigned maps_gen;
	bool seen;
	uint64_t dump_ns; /* last thread dump (threads.min_interval_ms), monotonic */
	struct target_coll c[COLL__COUNT];
};

struct pending_detach {
	pid_t pid;
	bool c[COLL__COUNT]; /* the collectors to detach */
};

/* A collector as the agent runs it. */
struct collector {
	struct pp_agent *a;
	enum coll id;
	const struct pp_collector_ops *ops;
	bool present; /* created (or, for thread snapshots, enabled) */
	pthread_t th; /* ops->poll's thread */
	bool th_started;
};

/* One unwinder (one libdw Dwfl, one set of fds) per target process, shared
 * by every consumer thread: lock serializes its use, refs and dead (under
 * unw_lock) let an entry removed from the cache live until its last user
 * is done. */
struct unw_entry {
	pid_t pid;
	uint64_t start_time;
	unsigned refs; /* unw_lock */
	bool dead; /* unw_lock: no longer in the cache */
	pthread_mutex_t lock; /* held while u is used */
	unsigned gen; /* lock */
	struct pp_unwinder *u;
};

struct unw_cache {
	struct unw_entry **v;
	size_t n, cap;
};

struct tc_entry { /* thread creation stacks, by new tid */
	pid_t pid, tid;
	uint32_t n;
	uint64_t pcs[64];
};

struct source_ctx {
	struct pp_agent *a;
	int group;
	struct pp_http_source src;
	struct pp_buf dump_text; /* the last goroutine?debug=2 text, under snapshot_lock */
	uint64_t dump_text_ns;
};

struct pp_agent {
	struct pp_config *cfg;
	struct pp_agent_opts opts;
	pid_t self;
	uint64_t start_ns;

	struct pp_symbolizer *sym;
	struct pp_symiso *iso; /* NULL: target files parsed in-process (symbolizer.isolate) */
	bool logged_iso_crash, logged_iso_timeout, logged_iso_refused;
	struct pp_store *store;
	struct pp_cpu_sampler *cpu;
	struct pp_heap_tracer *heap;
	struct pp_offcpu *offcpu;

	pthread_mutex_t lock; /* targets, windows, tc */
	struct target *targets;
	size_t n_targets, cap_targets;
	atomic_uint exits_gen;

	pthread_mutex_t win_lock; /* cpu_windows; never taken by collector callbacks */
	int cpu_windows;
	/* Off-CPU tracing runs while a block/mutex/threadcreate window is open,
	 * until offcpu.linger_seconds after the last request, or always_on;
	 * the offcpu thread (de)attaches (offcpu_update). */
	atomic_int offcpu_windows;
	atomic_uint_fast64_t offcpu_until_ns;
	/*
	 * Collector calls (add/remove/attach/detach) take the collector's own
	 * lock, which is held while it calls back into the agent (and the
	 * callbacks take a->lock). So they are never made with a->lock held:
	 * detaches are queued here and run by the discovery thread.
	 */
	struct pending_detach *pend;
	size_t n_pend, cap_pend;
	/* Unwinders shared by all consumers. Lock order: unw_lock before a
	 * unwinder's own lock and before a->lock; never taken with either held. */
	pthread_mutex_t unw_lock;
	struct unw_cache unw;
	pthread_mutex_t snapshot_lock; /* goroutine/threadcreate requests */
	uint64_t dump_limited_logged_ns, dump_deadline_logged_ns;

	struct tc_entry *tc; /* under lock */
	size_t n_tc, cap_tc;
	uint64_t tc_pruned, tc_dropped; /* under lock: exited threads, table full */

	struct collector colls[COLL__COUNT];
	pthread_t th_discovery;
	bool th_discovery_started;
	atomic_bool stop;

	struct source_ctx sources[MAX_SERVERS];
	size_t n_sources;
	struct pp_http_server *servers[MAX_SERVERS];
	size_t n_servers;

	/* counters */
	atomic_uint_fast64_t samples, unwinds, unwinds_complete, unwind_errors, unwind_truncated;
	atomic_uint_fast64_t heap_events, offcpu_events, attach_errors, discovery_passes;
	/* /proc reads that failed for podprof's own reasons (EMFILE, ENOMEM...),
	 * not because the process went away; logged once per episode */
	atomic_uint_fast64_t target_read_errors;
	bool target_read_logged;
	/* refusals of hostile target files, logged once each (counted in /metrics) */
	bool logged_sigbus, logged_dwarf_refused, logged_names_bounded, logged_unwind_refused;
	bool logged_fd_budget, logged_open_budget;
	atomic_uint_fast64_t snapshots, snapshot_pause_ns_max, threads_seen;
	atomic_uint_fast64_t thread_names_unread; /* threads past the 4096 named per pass */
	atomic_uint_fast64_t dumps_limited, dump_deadline_threads;
	uint64_t last_memstats_ns;
	unsigned store_warned; /* store drop kinds already logged (discovery thread) */
	uint64_t last_trim_ns; /* discovery thread only */
	uint64_t started_ns; /* set by pp_agent__start */
	_Atomic uint64_t last_pass_ns; /* monotonic end of the last discovery pass, 0 before */
	/* Verdicts on processes seen by discovery (pidcache.c); under discover_lock */
	struct pp_pid_cache *pcache;
	pthread_mutex_t discover_lock;
	pthread_cond_t discover_wake; /* CLOCK_MONOTONIC; signalled by stop */
	bool caps_bpf, caps_perfmon, caps_ptrace;
	pthread_mutex_t state_lock; /* coll[]; a leaf lock */
	struct coll_status coll[COLL__COUNT];
	struct pp_refusal_env renv;
	pid_t infra_pids[16]; /* infrastructure processes already logged as left out */
	/*
	 * A pid: entry names one process, pid and start time: the start time of
	 * the first process it selected, and of the last one it refused because
	 * the pid was reused (logged once). Indexed like cfg->targets (at most
	 * 1024 entries, CFG_MAX_TARGETS); under lock.
	 */
	uint64_t pid_sel_start[1024], pid_sel_refused[1024];
	size_t infra_logged;
	char heap_disabled_reason[160];
	char offcpu_disabled_reason[160];
	char cpu_disabled_reason[160];
};

/* ---- collector states ---- */

/* Marks c unavailable; logs once per change of reason, with the fix. */
static void coll_refused(struct pp_agent *a, enum coll c, const char *reason, bool from_attach)
{
	pthread_mutex_lock(&a->state_lock);
	struct coll_status *st = &a->coll[c];
	bool changed = st->state != CS_UNAVAILABLE || strcmp(st->reason, reason);
	st->state = CS_UNAVAILABLE;
	st->from_attach = from_attach;
	snprintf(st->reason, sizeof(st->reason), "%s", reason);
	pthread_mutex_unlock(&a->state_lock);
	if (changed)
		pp_warn("%s: %s unavailable: %s", coll_ops[c]->name, coll_ops[c]->loses, reason);
}

/* An attach worked: a collector refused only at attach time is available again. */
static void coll_attached(struct pp_agent *a, enum coll c)
{
	pthread_mutex_lock(&a->state_lock);
	struct coll_status *st = &a->coll[c];
	bool back = st->state == CS_UNAVAILABLE && st->from_attach;
	if (back) {
		st->state = CS_OK;
		st->reason[0] = '\0';
	}
	pthread_mutex_unlock(&a->state_lock);
	if (back)
		pp_info("%s: %s available again", coll_ops[c]->name, coll_ops[c]->loses);
}

static bool coll_is_unavailable(struct pp_agent *a, enum coll c)
{
	pthread_mutex_lock(&a->state_lock);
	bool r = a->coll[c].state == CS_UNAVAILABLE;
	pthread_mutex_unlock(&a->state_lock);
	return r;
}

static void coll_refused_err(struct pp_agent *a, enum coll c, enum pp_sys sys, int err,
			     bool from_attach)
{
	char why[512];
	pp_refusal__explain(sys, err, &a->renv, why, sizeof(why));
	coll_refused(a, c, why, from_attach);
}

/*
 * No target could be given uprobes. The syscalls behind them are probed
 * again to tell the kernel's refusal from files podprof may not open.
 */
static void heap_refused_everywhere(void *ctx, int err)
{
	struct pp_agent *a = ctx;
	char why[512];
	int perr = pp_refusal__probe(PP_SYS_PERF_EVENT_OPEN);
	int berr = pp_refusal__probe(PP_SYS_BPF);
	if (berr < 0 || perr < 0) {
		coll_refused_err(a, COLL_HEAP, berr < 0 ? PP_SYS_BPF : PP_SYS_PERF_EVENT_OPEN,
				 berr < 0 ? berr : perr, true);
		return;
	}
	snprintf(why, sizeof(why),
		 "attaching uprobes to the targets: %s (podprof cannot open the application's "
		 "files: add SYS_PTRACE, or DAC_READ_SEARCH for files only their owner may read)",
		 strerror(-err));
	coll_refused(a, COLL_HEAP, why, true);
}

static enum coll coll_of_kind(enum pp_profile_kind kind)
{
	switch (kind) {
	case PP_PROFILE_CPU:
		return COLL_CPU;
	case PP_PROFILE_HEAP:
	case PP_PROFILE_ALLOCS:
		return COLL_HEAP;
	case PP_PROFILE_GOROUTINE:
		return COLL_THREADS;
	default:
		return COLL_OFFCPU;
	}
}

/* ---- targets ---- */

static struct target *target_find(struct pp_agent *a, pid_t pid)
{
	for (size_t i = 0; i < a->n_targets; i++)
		if (a->targets[i].pid == pid)
			return &a->targets[i];
	return NULL;
}

static bool target_get(struct pp_agent *a, pid_t pid, uint64_t *start_time, unsigned *gen)
{
	pthread_mutex_lock(&a->lock);
	struct target *t = target_find(a, pid);
	if (t) {
		*start_time = t->start_time;
		*gen = t->maps_gen;
	}
	pthread_mutex_unlock(&a->lock);
	return t != NULL;
}

/* Detaches the collectors attached to t. Called without a->lock. */
static void target_detach(struct pp_agent *a, struct target *t)
{
	for (int c = 0; c < COLL__COUNT; c++) {
		const struct collector *co = &a->colls[c];
		if (t->c[c].attached && co->present && co->ops->detach)
			co->ops->detach(a, t->pid);
		t->c[c].attached = false;
	}
}

/* t exec'd: the collectors that depend on its image attach again. Under a->lock. */
static void target_execd(struct target *t)
{
	for (int c = 0; c < COLL__COUNT; c++)
		if (coll_ops[c]->reattach_on_exec)
			t->c[c].reattach = true;
}

static void unw_prepare(struct pp_agent *a, pid_t pid);

/* ---- the collectors' adapters (collector.h) ---- */

/* CPU: a refused attach is retried each pass, logged once per pid. */
static int cpu_attach(void *ctx, const struct pp_collector_attach *req)
{
	struct pp_agent *a = ctx;
	int e = pp_cpu_sampler__add_process(a->cpu, req->pid);

	if (pp_refusal__is_refusal(e)) {
		if (!req->refusal_logged) {
			a->attach_errors++;
			if (!coll_is_unavailable(a, COLL_CPU))
				pp_warn("cpu: cannot sample pid %d (%s): %s", req->pid, req->comm,
					strerror(-e));
		}
	} else if (e < 0 && e != -ESRCH) {
		a->attach_errors++;
		pp_warn("cpu: cannot sample pid %d (%s): %s", req->pid, req->comm, strerror(-e));
	}
	return e;
}

static void cpu_detach(void *ctx, pid_t pid)
{
	struct pp_agent *a = ctx;
	pp_cpu_sampler__remove_process(a->cpu, pid);
}

static void cpu_refused(void *ctx, int err)
{
	coll_refused_err(ctx, COLL_CPU, PP_SYS_PERF_EVENT_OPEN, err, true);
}

static int cpu_poll(void *ctx, int ms)
{
	struct pp_agent *a = ctx;
	return pp_cpu_sampler__poll(a->cpu, ms);
}

static void cpu_stats(void *ctx, struct pp_metrics *m)
{
	struct pp_agent *a = ctx;
	m->have_cpu = a->cpu;
	if (a->cpu)
		pp_cpu_sampler__stats(a->cpu, &m->cpu);
}

/*
 * Heap: failures are logged as warnings on the last try only; refusals
 * (EPERM, EACCES) become the collector's state when no target could be
 * attached (heap_refused_everywhere).
 */
static int heap_attach(void *ctx, const struct pp_collector_attach *req)
{
	struct pp_agent *a = ctx;
	pid_t pid = req->pid;
	const char *comm = req->comm;
	int r = pp_heap_tracer__attach(a->heap, pid);

	if (r == 0) {
		struct pp_heap_proc_stats hs;
		unw_prepare(a, pid);
		if (pp_heap_tracer__proc_stats(a->heap, pid, &hs) == 0 && hs.preloaded)
			pp_info("heap: tracing pid %d (%s) allocator %s (preloaded agent%s)", pid,
				comm, hs.allocator, hs.agent_reused ? ", reused" : "");
		else if (pp_heap_tracer__proc_stats(a->heap, pid, &hs) == 0 && hs.injected)
			pp_info("heap: tracing pid %d (%s) allocator %s (injected agent%s, %u "
				"slots in "
				"%u modules, pause %.2f ms; %s)",
				pid, comm, hs.allocator, hs.agent_reused ? ", reused" : "",
				hs.inject_slots, hs.inject_modules,
				(double)hs.inject_pause_ns / 1e6, hs.coverage);
		else if (pp_heap_tracer__proc_stats(a->heap, pid, &hs) == 0)
			pp_info("heap: tracing pid %d (%s) allocator %s%s%s%s", pid, comm,
				hs.allocator, hs.session ? " (uprobe session)" : " (uretprobe)",
				hs.mode_reason[0] ? "; not injected: " : "", hs.mode_reason);
		return 0;
	}
	if (r == -ESRCH)
		return r;
	if (!req->last_try) {
		/* e.g. files changing under an exec in progress: try again next pass */
		pp_dbg("heap: cannot trace pid %d (%s) yet: %s", pid, comm, strerror(-r));
		return r;
	}
	a->attach_errors++;
	const char *why = pp_heap_tracer__attach_reason(a->heap);
	pp_warn("heap: cannot trace pid %d (%s): %s%s%s; heap profile of it stays empty", pid, comm,
		strerror(-r), why[0] ? ": " : "", why);
	return r;
}

static void heap_detach(void *ctx, pid_t pid)
{
	struct pp_agent *a = ctx;
	pp_heap_tracer__detach(a->heap, pid);
}

static void heap_refused_everywhere(void *ctx, int err);

static int heap_poll(void *ctx, int ms)
{
	struct pp_agent *a = ctx;
	return pp_heap_tracer__poll(a->heap, ms);
}

/* The tracer's counters and those of each target listed (its lock is
 * taken inside, one call at a time). */
static void heap_stats(void *ctx, struct pp_metrics *m)
{
	struct pp_agent *a = ctx;
	m->have_heap = a->heap;
	if (!a->heap)
		return;
	pp_heap_tracer__stats(a->heap, &m->heap);
	for (size_t i = 0; i < m->n_listed; i++)
		m->targets[i].have_heap = pp_heap_tracer__proc_stats(a->heap, m->targets[i].pid,
								     &m->targets[i].heap) == 0;
}

/* Off-CPU: attach failures are not reported (its tracepoints are global;
 * the process is only not recorded). */
static int offcpu_attach(void *ctx, const struct pp_collector_attach *req)
{
	struct pp_agent *a = ctx;
	return pp_offcpu__add_process(a->offcpu, req->pid);
}

static void offcpu_detach(void *ctx, pid_t pid)
{
	struct pp_agent *a = ctx;
	pp_offcpu__remove_process(a->offcpu, pid);
}

static int offcpu_poll(void *ctx, int ms);

static void offcpu_stats(void *ctx, struct pp_metrics *m)
{
	struct pp_agent *a = ctx;
	m->have_offcpu = a->offcpu;
	m->offcpu_tracing = pp_offcpu__enabled(a->offcpu);
	if (a->offcpu)
		pp_offcpu__stats(a->offcpu, &m->offcpu);
}

static void threads_stats(void *ctx, struct pp_metrics *m)
{
	struct pp_agent *a = ctx;
	m->agent.snapshots = a->snapshots;
	m->agent.snapshot_pause_ns_max = a->snapshot_pause_ns_max;
	m->agent.thread_names_unread = a->thread_names_unread;
	m->agent.dumps_limited = a->dumps_limited;
	m->agent.dump_deadline_threads = a->dump_deadline_threads;
	{
		struct pp_tracee_stats ts;

		pp_tracee__stats(&ts);
		m->agent.tracee_stops = ts.stops;
		m->agent.tracee_postponed = ts.postponed;
		m->agent.tracee_restarted = ts.restarted;
		m->agent.tracee_signals = ts.signals;
		m->agent.tracee_timeouts = ts.timeouts;
	}
}

static const struct pp_collector_ops cpu_ops = {
	.name = "cpu",
	.profiles = "profile",
	.loses = "CPU profiles",
	.attach = cpu_attach,
	.detach = cpu_detach,
	.refused = cpu_refused,
	.poll = cpu_poll,
	.stats = cpu_stats,
};

static const struct pp_collector_ops heap_ops = {
	.name = "heap",
	.profiles = "heap allocs",
	.loses = "heap and allocs profiles",
	.max_attempts = 3,
	.reattach_on_exec = true, /* the new image may use another allocator */
	.attach = heap_attach,
	.detach = heap_detach,
	.refused = heap_refused_everywhere,
	.poll = heap_poll,
	.stats = heap_stats,
};

static const struct pp_collector_ops offcpu_ops = {
	.name = "offcpu",
	.profiles = "block mutex threadcreate",
	.loses = "block, mutex and threadcreate profiles",
	.attach = offcpu_attach,
	.detach = offcpu_detach,
	.poll = offcpu_poll,
	.stats = offcpu_stats,
};

/* Thread snapshots are taken on request (snapshot_threads): nothing to attach or poll. */
static const struct pp_collector_ops threads_ops = {
	.name = "threads",
	.profiles = "goroutine",
	.loses = "goroutine dumps",
	.stats = threads_stats,
};

static const struct pp_collector_ops *const coll_ops[COLL__COUNT] = {
	[COLL_CPU] = &cpu_ops,
	[COLL_HEAP] = &heap_ops,
	[COLL_OFFCPU] = &offcpu_ops,
	[COLL_THREADS] = &threads_ops,
};

/* Reads pid's maps (capped: limits.max_maps_entries, limits.max_maps_bytes);
 * the first cut read is logged (all are counted in procfs). */
static int read_maps(const struct pp_proc_info *info, struct pp_maps *maps,
		     struct pp_maps_read_info *ri)
{
	static atomic_bool logged;
	int r = pp_maps__read_ex(info->pid, maps, ri);

	if (r == 0 && ri->truncated && !atomic_exchange(&logged, true)) {
		size_t keep, bytes;
		pp_maps__caps(&keep, &bytes);
		pp_warn("target: pid %d (%s): /proc/PID/maps cut after %zu entries, %zu bytes "
			"(caps: %zu entries, %zu bytes: limits.max_maps_entries, "
			"limits.max_maps_bytes); code in the mappings left out is not "
			"symbolized (podprof_maps_truncated_total; logged once)",
			info->pid, info->comm, ri->kept, ri->bytes, keep, bytes);
	}
	return r;
}

/* Reads maps and registers pid with the store. Called without a->lock. */
static int register_process(struct pp_agent *a, const struct pp_proc_info *info, int group,
			    uint64_t *ret_hash)
{
	struct pp_maps maps = { 0 };
	struct pp_maps_read_info ri;

	int r = read_maps(info, &maps, &ri);
	if (r < 0)
		return r;
	if (ret_hash)
		*ret_hash = ri.hash;
	r = pp_store__process_update(a->store, info, &maps, group);
	pp_maps__free(&maps);
	return r;
}

/*
 * Processes a pod runs that never execute application code: the pause
 * process that holds a Kubernetes pod's namespaces (PID 1 with
 * shareProcessNamespace), podman's catatonit, and the init shims that only
 * reap and forward signals. Left out of the default targets; a selector in
 * targets: still picks them.
 */
static bool infra_process(const struct pp_proc_info *info)
{
	static const char *const names[] = { "pause",	    "catatonit", "tini",
					     "tini-static", "dumb-init", "docker-init" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(info->comm, names[i]))
			return true;
	return false;
}

static int select_group(struct pp_agent *a, const struct pp_proc_info *info)
{
	if (info->kernel_thread)
		return -1;
	if ((info->pid == a->self || (a->iso && info->pid == pp_symiso__pid(a->iso))) &&
	    !a->cfg->discovery.include_self)
		return -1;
	if (a->cfg->n_targets == 0) {
		if (!infra_process(info))
			return 0;
		pthread_mutex_lock(&a->lock);
		bool first = a->infra_logged < ARRAY_SIZE(a->infra_pids);
		for (size_t i = 0; i < a->infra_logged && i < ARRAY_SIZE(a->infra_pids); i++)
			first &= a->infra_pids[i] != info->pid;
		if (first)
			a->infra_pids[a->infra_logged++] = info->pid;
		pthread_mutex_unlock(&a->lock);
		if (first)
			pp_info("target: pid %d (%s) left out: the pod's infrastructure process, "
				"no "
				"application code (a targets: entry selects it explicitly)",
				info->pid, info->comm);
		return -1;
	}
	for (size_t i = 0; i < a->cfg->n_targets; i++) {
		const struct pp_selector *sel = &a->cfg->targets[i];
		if (pp_selector__match(sel, info) != 1)
			continue;
		if (sel->pid > 0 && i < ARRAY_SIZE(a->pid_sel_start)) {
			bool reused = false, log = false;
			pthread_mutex_lock(&a->lock); /* collectors adopt pids too */
			if (!a->pid_sel_start[i]) {
				a->pid_sel_start[i] = info->start_time;
			} else if (a->pid_sel_start[i] != info->start_time) {
				reused = true;
				log = a->pid_sel_refused[i] != info->start_time;
				a->pid_sel_refused[i] = info->start_time;
			}
			pthread_mutex_unlock(&a->lock);
			if (log)
				pp_info("target: pid %d (%s) left out: pid reused by a new "
					"process, "
					"not the one %s selected",
					info->pid, info->comm, sel->name ? sel->name : "its entry");
			if (reused)
				continue;
		}
		return (int)i;
	}
	return -1;
}

/*
 * Adds a new target. Called with a->lock held. The collectors are attached
 * by the discovery thread's next attach_pass (at once for targets it finds).
 */
static struct target *target_add(struct pp_agent *a, const struct pp_proc_info *info, int group,
				 uint64_t maps_hash)
{
	if (a->n_targets >= a->cfg->limits.max_targets)
		return NULL;
	if (pp_grow(&a->targets, &a->cap_targets, a->n_targets + 1, sizeof(*a->targets), 16) < 0)
		return NULL;
	struct target *t = &a->targets[a->n_targets++];
	memset(t, 0, sizeof(*t));
	t->pid = info->pid;
	t->start_time = info->start_time;
	t->group = group;
	t->maps_hash = maps_hash;
	t->seen = true;
	memcpy(t->comm, info->comm, sizeof(t->comm));
	t->exe = info->exe ? strdup(info->exe) : NULL;
	pp_info("target: pid %d (%s) %s [%s]%s%s%s%.12s", t->pid, t->comm, t->exe ? t->exe : "?",
		a->cfg->n_targets ? a->cfg->targets[group].name : "all",
		info->container[0] ? " container=" : "", info->container,
		info->container_id[0] ? " container_id=" : "", info->container_id);
	return t;
}

/* Queues the detach of t's collectors. Called with a->lock held. */
static void queue_detach(struct pp_agent *a, const struct target *t)
{
	struct pending_detach d = { .pid = t->pid };
	bool any = false;

	for (int c = 0; c < COLL__COUNT; c++)
		any |= d.c[c] = t->c[c].attached;
	if (!any)
		return;
	if (pp_grow(&a->pend, &a->cap_pend, a->n_pend + 1, sizeof(*a->pend), 16) < 0)
		return; /* the collectors drop dead pids by themselves */
	a->pend[a->n_pend++] = d;
}

/* Runs queued detaches. Called without a->lock. */
static void run_pending_detaches(struct pp_agent *a)
{
	pthread_mutex_lock(&a->lock);
	struct pending_detach *v = a->pend;
	size_t n = a->n_pend;
	a->pend = NULL;
	a->n_pend = a->cap_pend = 0;
	pthread_mutex_unlock(&a->lock);
	for (size_t i = 0; i < n; i++) {
		struct target t = { .pid = v[i].pid };
		for (int c = 0; c < COLL__COUNT; c++)
			t.c[c].attached = v[i].c[c];
		target_detach(a, &t);
	}
	free(v);
}

/* What one target needs from each collector in an attach pass. */
struct attach_req {
	pid_t pid;
	uint64_t start_time;
	char comm[16];
	bool want[COLL__COUNT], detach_first[COLL__COUNT], last_try[COLL__COUNT];
	bool refusal_logged[COLL__COUNT];
};

/* Takes what t needs into r (false: nothing). Called with a->lock held. */
static bool attach_wanted(struct pp_agent *a, struct target *t, struct attach_req *r)
{
	bool any = false;

	*r = (struct attach_req){ .pid = t->pid, .start_time = t->start_time };
	memcpy(r->comm, t->comm, sizeof(r->comm));
	for (int c = 0; c < COLL__COUNT; c++) {
		const struct pp_collector_ops *ops = a->colls[c].ops;
		struct target_coll *tc = &t->c[c];
		if (!a->colls[c].present || !ops->attach)
			continue;
		r->want[c] = (!tc->attached &&
			      (!ops->max_attempts || tc->attempts < ops->max_attempts)) ||
			     tc->reattach;
		if (!r->want[c])
			continue;
		any = true;
		r->detach_first[c] = tc->reattach && tc->attached;
		r->last_try[c] = ops->max_attempts && tc->attempts + 1 >= ops->max_attempts;
		r->refusal_logged[c] = tc->refusal_logged;
		if (tc->reattach)
			tc->attempts = 0;
		tc->reattach = false;
		if (r->detach_first[c])
			tc->attached = false;
	}
	return any;
}

/* Attaches the collectors to targets that lack them. Called without a->lock. */
static void attach_pass(struct pp_agent *a)
{
	pthread_mutex_lock(&a->lock);
	struct attach_req *reqs = calloc(a->n_targets ? a->n_targets : 1, sizeof(*reqs));
	size_t n = 0;
	for (size_t i = 0; reqs && i < a->n_targets; i++)
		n += attach_wanted(a, &a->targets[i], &reqs[n]);
	pthread_mutex_unlock(&a->lock);

	int refused[COLL__COUNT] = { 0 };
	bool any[COLL__COUNT] = { 0 };
	for (size_t i = 0; i < n; i++) {
		struct attach_req *r = &reqs[i];
		bool ok[COLL__COUNT] = { 0 }, refusal[COLL__COUNT] = { 0 };
		for (int c = 0; c < COLL__COUNT; c++) {
			const struct pp_collector_ops *ops = a->colls[c].ops;
			if (!r->want[c])
				continue;
			if (r->detach_first[c])
				ops->detach(a, r->pid);
			struct pp_collector_attach req = { .pid = r->pid,
							   .comm = r->comm,
							   .last_try = r->last_try[c],
							   .refusal_logged = r->refusal_logged[c] };
			int e = ops->attach(a, &req);
			ok[c] = e == 0;
			if (pp_refusal__is_refusal(e)) {
				refusal[c] = true;
				refused[c] = e;
			}
		}

		pthread_mutex_lock(&a->lock);
		struct target *t = target_find(a, r->pid);
		if (t && t->start_time == r->start_time) {
			for (int c = 0; c < COLL__COUNT; c++) {
				t->c[c].attached |= ok[c];
				if (r->want[c] && !ok[c])
					t->c[c].attempts++;
				t->c[c].refusal_logged |= refusal[c];
				any[c] |= ok[c];
			}
		} else {
			/* It went away meanwhile: undo. */
			struct target gone = { .pid = r->pid };
			for (int c = 0; c < COLL__COUNT; c++)
				gone.c[c].attached = ok[c];
			queue_detach(a, &gone);
		}
		pthread_mutex_unlock(&a->lock);
	}
	free(reqs);
	run_pending_detaches(a);

	/* A collector is refused when no target at all could be attached. */
	for (int c = 0; c < COLL__COUNT; c++) {
		if (any[c])
			coll_attached(a, c);
		if (!refused[c] || !a->colls[c].ops->refused)
			continue;
		bool some = false;
		pthread_mutex_lock(&a->lock);
		for (size_t i = 0; i < a->n_targets; i++)
			some |= a->targets[i].c[c].attached;
		pthread_mutex_unlock(&a->lock);
		if (!some)
			a->colls[c].ops->refused(a, refused[c]);
	}
}

static int cmp_pid(const void *x, const void *y)
{
	pid_t l = *(const pid_t *)x, r = *(const pid_t *)y;
	return l < r ? -1 : l > r;
}

/*
 * Drop pid's creation stacks whose thread is not in live (sorted; NULL:
 * the process exited, drop them all). a->lock held.
 */
static void __tc_prune(struct pp_agent *a, pid_t pid, const pid_t *live, size_t n_live)
{
	for (size_t i = 0; i < a->n_tc;) {
		struct tc_entry *e = &a->tc[i];
		if (e->pid != pid ||
		    (live && bsearch(&e->tid, live, n_live, sizeof(*live), cmp_pid))) {
			i++;
			continue;
		}
		*e = a->tc[--a->n_tc];
		a->tc_pruned++;
	}
}

/* pid's live threads were listed (tids, sorted here): forget the others' creation stacks. */
static void tc_prune_live(struct pp_agent *a, pid_t pid, pid_t *tids, size_t n)
{
	pthread_mutex_lock(&a->lock);
	bool empty = a->n_tc == 0;
	pthread_mutex_unlock(&a->lock);
	if (empty)
		return; /* nothing recorded (no off-CPU tracer): no sort, no scan */
	qsort(tids, n, sizeof(*tids), cmp_pid);
	pthread_mutex_lock(&a->lock);
	__tc_prune(a, pid, tids, n);
	pthread_mutex_unlock(&a->lock);
}

static void target_remove_at(struct pp_agent *a, size_t i)
{
	struct target *t = &a->targets[i];
	pp_info("target: pid %d (%s) exited", t->pid, t->comm);
	queue_detach(a, t);
	pp_store__process_exit(a->store, t->pid);
	__tc_prune(a, t->pid, NULL, 0);
	free(t->exe);
	a->targets[i] = a->targets[--a->n_targets];
	atomic_fetch_add(&a->exits_gen, 1);
}

/*
 * A collector reported a pid we do not know (a child forked by a target, or
 * a thread of a process seen before discovery): adopt it into its parent's
 * group if it qualifies.
 */
static bool adopt(struct pp_agent *a, pid_t pid)
{
	struct pp_proc_info info = { 0 };
	uint64_t st;
	unsigned gen;

	if (target_get(a, pid, &st, &gen))
		return true;
	if (pp_proc__read_info(pid, &info) < 0)
		return false;
	pp_dbg("adopting pid %d (%s), ppid %d", pid, info.comm, info.ppid);
	int group = select_group(a, &info);
	if (group < 0) {
		/* Not selected by itself: a child inherits its parent's target. */
		pthread_mutex_lock(&a->lock);
		struct target *parent = target_find(a, info.ppid);
		group = parent ? parent->group : -1;
		pthread_mutex_unlock(&a->lock);
	}
	bool ok = false;
	uint64_t h = 0;
	if (group >= 0) {
		/* No room for a target: not registered in the store either. */
		pthread_mutex_lock(&a->lock);
		if (a->n_targets >= a->cfg->limits.max_targets)
			group = -1;
		pthread_mutex_unlock(&a->lock);
	}
	if (group >= 0 && register_process(a, &info, group, &h) == 0) {
		pthread_mutex_lock(&a->lock);
		if (!target_find(a, pid))
			ok = target_add(a, &info, group, h) != NULL;
		else
			ok = true;
		if (!ok) /* not a target: the store must not keep it as alive */
			pp_store__process_exit(a->store, pid);
		pthread_mutex_unlock(&a->lock);
	}
	pp_proc_info__free(&info);
	return ok;
}

#define THREAD_NAMES_MAX 4096 /* threads of a process named per refresh */

static void update_thread_names(struct pp_agent *a, pid_t pid)
{
	pid_t *tids = NULL;
	size_t n = 0;
	if (pp_proc__list_tids(pid, &tids, &n) < 0)
		return;
	pp_store__forget_threads(a->store, pid);
	if (n > THREAD_NAMES_MAX)
		a->thread_names_unread += n - THREAD_NAMES_MAX;
	for (size_t i = 0; i < n && i < THREAD_NAMES_MAX; i++) {
		char name[16];
		if (pp_proc__thread_name(pid, tids[i], name, sizeof(name)) == 0)
			pp_store__set_thread_name(a->store, pid, tids[i], name);
	}
	atomic_store(&a->threads_seen, n);
	tc_prune_live(a, pid, tids, n);
	free(tids);
}

static void log_memstats(struct pp_agent *a)
{
	pthread_mutex_lock(&a->lock);
	size_t n = a->n_targets;
	pid_t *pids = calloc(n ? n : 1, sizeof(*pids));
	for (size_t i = 0; pids && i < n; i++)
		pids[i] = a->targets[i].pid;
	pthread_mutex_unlock(&a->lock);
	for (size_t i = 0; pids && i < n; i++) {
		struct pp_proc_status ps = { 0 };
		struct pp_store_heap_stats hs = { 0 };
		struct pp_heap_proc_stats ht = { 0 };
		if (pp_proc__read_status(pids[i], &ps) < 0)
			continue;
		pp_store__heap_stats(a->store, pids[i], &hs);
		if (a->heap)
			pp_heap_tracer__proc_stats(a->heap, pids[i], &ht);
		pp_info("memstats pid=%d inuse_bytes=%" PRIu64 " alloc_bytes_total=%" PRIu64
			" mallocs=%" PRIu64 " frees=%" PRIu64 " live_objects=%" PRIu64
			" rss_kb=%" PRIu64 " vms_kb=%" PRIu64 " hwm_kb=%" PRIu64 " data_kb=%" PRIu64
			" stack_kb=%" PRIu64 " locked_kb=%" PRIu64 " swap_kb=%" PRIu64,
			pids[i], hs.inuse_bytes, ht.alloc_bytes ? ht.alloc_bytes : hs.alloc_bytes,
			ht.mallocs, ht.frees, hs.inuse_objects, ps.vm_rss_kb, ps.vm_size_kb,
			ps.vm_hwm_kb, ps.vm_data_kb, ps.vm_stk_kb, ps.vm_lck_kb, ps.vm_swap_kb);
	}
	free(pids);
}

/* Counts a /proc read that failed for podprof's own reasons; one log line
 * per episode (until a discovery pass reads everything again). */
static void target_read_error(struct pp_agent *a, pid_t pid, int err)
{
	atomic_fetch_add(&a->target_read_errors, 1);
	if (a->target_read_logged)
		return;
	a->target_read_logged = true;
	if (pid)
		pp_warn("discovery: cannot read /proc/%d: %s; targets are kept, such failures "
			"are counted in podprof_target_read_errors_total",
			(int)pid, strerror(-err));
	else
		pp_warn("discovery: cannot list /proc: %s; targets are kept, such failures are "
			"counted in podprof_target_read_errors_total",
			strerror(-err));
}

/* The store's symbolization through the isolated helper (kernel symbols stay here). */
static int iso_resolve(void *ctx, pid_t pid, const struct pp_map *m, const uint8_t *build_id,
		       size_t build_id_len, uint64_t addr, struct pp_sym_result *ret)
{
	struct pp_agent *a = ctx;
	return pp_symiso__resolve(a->iso, pid, m, build_id, build_id_len, addr, ret);
}

static int iso_resolve_kernel(void *ctx, uint64_t addr, struct pp_sym_result *ret)
{
	struct pp_agent *a = ctx;
	return pp_symbolizer__resolve_kernel(a->sym, addr, ret);
}

static int iso_resolve_jit(void *ctx, pid_t pid, uint64_t addr, struct pp_sym_result *ret)
{
	struct pp_agent *a = ctx;
	return pp_symiso__resolve_jit(a->iso, pid, addr, ret);
}

static const struct pp_store_sym_ops iso_ops = {
	.resolve = iso_resolve,
	.resolve_kernel = iso_resolve_kernel,
	.resolve_jit = iso_resolve_jit,
};

/* The symbolizer's counters: this process's plus the isolated helper's. */
static void sym_stats(struct pp_agent *a, struct pp_symbolizer_stats *sy,
		      struct pp_symiso_stats *is)
{
	pp_symbolizer__stats(a->sym, sy);
	pp_symiso__stats(a->iso, is);
	sy->files_loaded += is->sym.files_loaded;
	sy->files_evicted += is->sym.files_evicted;
	sy->files_failed += is->sym.files_failed;
	sy->cache_bytes += is->sym.cache_bytes;
	sy->lookups += is->sym.lookups;
	sy->jit_reloads_deferred += is->sym.jit_reloads_deferred;
	sy->dwarf_refused += is->sym.dwarf_refused;
	sy->names_bounded += is->sym.names_bounded;
}

/* One log line the first time each kind of hostile-file refusal happens. */
static void log_refusals(struct pp_agent *a)
{
	struct pp_symbolizer_stats sy;
	uint64_t sb = pp_sigbus_guard_repaired();

	if (pp_unwind_debug_refused() && !a->logged_unwind_refused) {
		a->logged_unwind_refused = true;
		pp_warn("unwind: a file's debug sections would take over 64 MiB once decompressed: "
			"no CFI for it, frame pointers only (counted in "
			"podprof_unwind_debug_refused_total)");
	}
	if (pp_unwind_fd_budget_hits() && !a->logged_fd_budget) {
		a->logged_fd_budget = true;
		pp_warn("unwind: a target maps more executable files than its fd budget (%u fds, "
			"two per file: limits.max_target_fds) allows: the files past it get no "
			"CFI, frame pointers only (counted in podprof_unwind_fd_budget_total)",
			pp_unwind__fd_budget());
	}
	if (pp_open_budget__hits() && !a->logged_open_budget) {
		a->logged_open_budget = true;
		pp_warn("a target maps more files than podprof opens for it in one pass (%u: "
			"limits.max_target_fds): the files past it get no build id, allocator "
			"search or heap agent redirection in that pass (counted in "
			"podprof_target_open_budget_total)",
			a->cfg->limits.max_target_fds);
	}
	if (sb && !a->logged_sigbus) {
		a->logged_sigbus = true;
		pp_warn("a target truncated a file podprof had mapped: the pages past its end read "
			"as zeros (counted in podprof_sigbus_repaired_total)");
	}
	if (!a->sym)
		return;
	struct pp_symiso_stats is;
	pp_symiso__check(a->iso);
	sym_stats(a, &sy, &is);
	if (is.crashes - is.timeouts && !a->logged_iso_crash) {
		a->logged_iso_crash = true;
		pp_warn("symbolize: the symbolizer helper died; restarted, with a backoff when it "
			"keeps dying (counted in podprof_symbolizer_restarts_total)");
	}
	if (is.timeouts && !a->logged_iso_timeout) {
		a->logged_iso_timeout = true;
		pp_warn("symbolize: the symbolizer helper did not answer within "
			"symbolizer.timeout_ms: killed and restarted (counted in "
			"podprof_symbolizer_timeouts_total)");
	}
	if (is.files_refused && !a->logged_iso_refused) {
		a->logged_iso_refused = true;
		pp_warn("symbolize: a file hung or killed the symbolizer helper: it is not parsed "
			"again, its locations are named file+offset (counted in "
			"podprof_symbolizer_files_refused_total)");
	}
	if (sy.dwarf_refused && !a->logged_dwarf_refused) {
		a->logged_dwarf_refused = true;
		pp_warn("symbolize: a file's DWARF would take over half of "
			"limits.symbol_cache_bytes once decompressed: its symbols only, no inline "
			"frames or lines (counted in podprof_symbol_dwarf_refused_total)");
	}
	if (sy.names_bounded && !a->logged_names_bounded) {
		a->logged_names_bounded = true;
		pp_warn("symbolize: a name whose demangled form is over 64 KiB is shown without "
			"its parameters, or stays mangled (over 1 KiB short, 4 KiB mangled) "
			"(counted in podprof_symbol_names_bounded_total)");
	}
}

/* Processes remembered by discovery (pidcache.c), and how often each is
 * read in full anyway (passes). */
#define PCACHE_MAX 65536
#define PCACHE_REFRESH_PASSES 30

/*
 * A selector on cmdline can match a process later without an exec (a
 * process rewriting its argv: setproctitle): then every process is read in
 * full each pass, as before the cache.
 */
static bool pcache_usable(const struct pp_agent *a)
{
	for (size_t i = 0; i < a->cfg->n_targets; i++)
		if (a->cfg->targets[i].cmdline)
			return false;
	return true;
}

/*
 * A process discovery saw before and did not select: only its stat and exe
 * were read this pass. Still a child of a target (adopted into its group
 * below)? Then it is read in full.
 */
static bool still_left_out(struct pp_agent *a, const struct pp_proc_info *ident)
{
	int verdict;

	if (!a->pcache || !pp_pid_cache__lookup(a->pcache, ident, &verdict) || verdict >= 0)
		return false;
	pthread_mutex_lock(&a->lock);
	bool parent = target_find(a, ident->ppid) != NULL;
	pthread_mutex_unlock(&a->lock);
	return !parent;
}

static void discover_locked(struct pp_agent *a);

static void discover(struct pp_agent *a)
{
	pthread_mutex_lock(&a->discover_lock);
	if (!a->pcache && pcache_usable(a))
		a->pcache = pp_pid_cache__new(PCACHE_MAX, PCACHE_REFRESH_PASSES);
	discover_locked(a);
	pp_pid_cache__end_pass(a->pcache);
	pthread_mutex_unlock(&a->discover_lock);
	atomic_store(&a->last_pass_ns, pp_now_mono_ns());
}

/*
 * One pass over /proc. A process is read in full (stat, exe, cmdline,
 * cgroup, mountinfo) when discovery has not seen it as it is now (see
 * pp_pid_cache); otherwise stat and exe tell whether it is the same process
 * (start time), exec'd (exe, comm) or renamed, which is all a pass needs.
 */
static void discover_locked(struct pp_agent *a)
{
	pid_t *pids = NULL;
	size_t n = 0;

	int r = pp_proc__list_pids(&pids, &n);
	if (r < 0) {
		target_read_error(a, 0, r);
		return;
	}
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n_targets; i++)
		a->targets[i].seen = false;
	pthread_mutex_unlock(&a->lock);

	bool read_failed = false;
	for (size_t i = 0; i < n && !atomic_load(&a->stop); i++) {
		struct pp_proc_info info = { 0 };
		r = pp_proc__read_ident(pids[i], &info);
		if (r == -ESRCH || r == -ENOENT)
			continue; /* gone */
		if (r < 0) {
			/*
			 * EMFILE, ENFILE, ENOMEM: podprof's trouble, not the
			 * process's. A known target stays (it would be dropped
			 * and attached again at the next pass otherwise).
			 */
			read_failed = true;
			target_read_error(a, pids[i], r);
			pthread_mutex_lock(&a->lock);
			struct target *kt = target_find(a, pids[i]);
			if (kt)
				kt->seen = true;
			pthread_mutex_unlock(&a->lock);
			continue;
		}
		pthread_mutex_lock(&a->lock);
		struct target *t = target_find(a, info.pid);
		if (t && t->start_time != info.start_time) {
			/* pid reused by a new process */
			size_t idx = (size_t)(t - a->targets);
			target_remove_at(a, idx);
			t = NULL;
		}
		int group = t ? t->group : -1;
		bool known = t != NULL;
		bool exec_changed = t && info.exe && (!t->exe || strcmp(t->exe, info.exe));
		uint64_t old_hash = t ? t->maps_hash : 0;
		if (t)
			t->seen = true;
		pthread_mutex_unlock(&a->lock);

		if (!known) {
			if (still_left_out(a, &info)) {
				pp_proc_info__free(&info);
				continue;
			}
			pp_proc__read_extra(info.pid, &info);
			group = select_group(a, &info);
			if (a->pcache)
				pp_pid_cache__store(a->pcache, &info, group);
			if (group < 0) {
				/* Children of targets belong to their parent's entry. */
				pthread_mutex_lock(&a->lock);
				struct target *parent = target_find(a, info.ppid);
				if (parent && info.pid != a->self && !info.kernel_thread)
					group = parent->group;
				pthread_mutex_unlock(&a->lock);
			}
			if (group < 0) {
				pp_proc_info__free(&info);
				continue;
			}
			uint64_t h = 0;
			pthread_mutex_lock(&a->lock);
			bool full = a->n_targets >= a->cfg->limits.max_targets;
			pthread_mutex_unlock(&a->lock);
			if (full) {
				pp_warn("target: pid %d (%s) not profiled: "
					"limits.max_targets=%u reached",
					info.pid, info.comm, a->cfg->limits.max_targets);
			} else if (register_process(a, &info, group, &h) == 0) {
				pthread_mutex_lock(&a->lock);
				if (!target_find(a, info.pid) && !target_add(a, &info, group, h)) {
					pp_warn("target: pid %d (%s) not profiled: "
						"limits.max_targets=%u reached",
						info.pid, info.comm, a->cfg->limits.max_targets);
					pp_store__process_exit(a->store, info.pid);
				}
				pthread_mutex_unlock(&a->lock);
			}
		} else {
			uint64_t h = 0;
			struct pp_maps_read_info ri;
			if (read_maps(&info, NULL, &ri) == 0) /* the hash only */
				h = ri.hash;
			if (h && (h != old_hash || exec_changed)) {
				bool heap_patch = false;

				pp_proc__read_extra(info.pid, &info);
				register_process(a, &info, group, &h);
				pthread_mutex_lock(&a->lock);
				t = target_find(a, info.pid);
				if (t) {
					if (!exec_changed && t->c[COLL_HEAP].attached && a->heap)
						heap_patch = true;
					t->maps_hash = h;
					t->maps_gen++;
					memcpy(t->comm, info.comm, sizeof(t->comm));
					if (exec_changed) {
						pp_info("target: pid %d exec'd %s", t->pid,
							info.exe);
						free(t->exe);
						t->exe = strdup(info.exe);
						/* The new image may use another allocator. */
						target_execd(t);
					}
				}
				pthread_mutex_unlock(&a->lock);
				/* dlopen: redirect the new module's slots */
				int np = heap_patch
						 ? pp_heap_tracer__maps_changed(a->heap, info.pid)
						 : 0;
				if (np > 0)
					pp_info("heap: pid %d: %d more allocator slots redirected "
						"(modules loaded since)",
						info.pid, np);
			}
		}
		update_thread_names(a, info.pid);
		pp_proc_info__free(&info);
	}
	free(pids);
	if (!read_failed)
		a->target_read_logged = false;
	log_refusals(a);

	/* Samples a process took before it exited are stored (and unwound with
	 * its maps) before it is marked gone: deliver what is queued first. */
	bool gone = false;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n_targets; i++)
		gone |= !a->targets[i].seen;
	pthread_mutex_unlock(&a->lock);
	if (gone && a->cpu)
		pp_cpu_sampler__flush(a->cpu, 2000);

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n_targets;) {
		if (!a->targets[i].seen)
			target_remove_at(a, i);
		else
			i++;
	}
	pthread_mutex_unlock(&a->lock);
	run_pending_detaches(a);
	attach_pass(a);
	a->discovery_passes++;
}

void pp_agent__discover_now(struct pp_agent *a)
{
	discover(a);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Each kind of store drop is logged once (the counters are in /metrics). */
static void store_drops_warn(struct pp_agent *a)
{
	struct pp_store_stats ss;
	pp_store__stats(a->store, &ss);
	const struct {
		uint64_t n;
		const char *what;
	} d[] = {
		{ ss.dropped_procs, "processes held (limits.max_targets * 4 + 64, alive or exited "
				    "and still needed by a profile window): new processes not "
				    "profiled" },
		{ ss.dropped_stacks, "distinct stacks held (limits.max_stacks): samples dropped" },
		{ ss.dropped_locations, "locations held (4 * limits.max_stacks + 4096): samples "
					"dropped" },
		{ ss.dropped_live, "live allocations tracked (heap.max_live): allocations not "
				   "tracked" },
	};
	for (unsigned i = 0; i < ARRAY_SIZE(d); i++) {
		if (!d[i].n || (a->store_warned & (1u << i)))
			continue;
		a->store_warned |= 1u << i;
		pp_warn("store: limit of %s (counted in /metrics, logged once)", d[i].what);
	}
}

static void *discovery_main(void *arg)
{
	struct pp_agent *a = arg;
	while (!atomic_load(&a->stop)) {
		discover(a);
		pp_store__collect(a->store);
		store_drops_warn(a);
		uint64_t now = pp_now_mono_ns();
		unsigned iv = a->cfg->log.memstats_interval_seconds;
		if (iv && now - a->last_memstats_ns >= (uint64_t)iv * 1000000000ull) {
			a->last_memstats_ns = now;
			log_memstats(a);
		}
		/* Give freed heap pages back (every arena; a few ms at most). */
		if (now - a->last_trim_ns >= TRIM_INTERVAL_NS) {
			a->last_trim_ns = now;
			malloc_trim(0);
		}
		/* One wakeup per pass (stop signals the condition), not one per 50 ms. */
		struct timespec ts;
		uint64_t until =
			pp_now_mono_ns() + (uint64_t)a->cfg->discovery.interval_ms * 1000000ull;
		ts.tv_sec = (time_t)(until / 1000000000ull);
		ts.tv_nsec = (long)(until % 1000000000ull);
		pthread_mutex_lock(&a->discover_lock);
		while (!atomic_load(&a->stop) &&
		       pthread_cond_timedwait(&a->discover_wake, &a->discover_lock, &ts) == 0)
			;
		pthread_mutex_unlock(&a->discover_lock);
	}
	return NULL;
}

/* ---- unwinding ---- */

static void unw_entry_free(struct unw_entry *e)
{
	pp_unwinder__free(e->u);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

/* Drops the unwinders of exited processes. Takes unw_lock, then a->lock
 * (target_get) per entry; frees outside both. */
static void unw_sweep(struct pp_agent *a)
{
	struct unw_cache *c = &a->unw;
	struct unw_entry *gone[64];
	size_t ngone;

again:
	ngone = 0;
	pthread_mutex_lock(&a->unw_lock);
	for (size_t i = 0; i < c->n;) {
		struct unw_entry *e = c->v[i];
		uint64_t st;
		unsigned gen;
		if ((!target_get(a, e->pid, &st, &gen) || st != e->start_time) &&
		    (e->refs || ngone < ARRAY_SIZE(gone))) {
			c->v[i] = c->v[--c->n];
			e->dead = true;
			if (!e->refs)
				gone[ngone++] = e;
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&a->unw_lock);
	for (size_t i = 0; i < ngone; i++)
		unw_entry_free(gone[i]);
	/* A full batch: more may be left (a pre-fork server's children exit
	 * faster than one batch a pass), so sweep again. */
	if (ngone == ARRAY_SIZE(gone))
		goto again;
}

static void unw_put(struct pp_agent *a, struct unw_entry *e)
{
	bool last;

	pthread_mutex_lock(&a->unw_lock);
	last = --e->refs == 0 && e->dead;
	pthread_mutex_unlock(&a->unw_lock);
	if (last)
		unw_entry_free(e);
}

/* The shared unwinder entry of pid, referenced (unw_put when done), or NULL.
 * Takes a->lock (target_get, adopt) and then unw_lock, one after the other;
 * no file I/O under unw_lock (pp_unwinder__new reads nothing). *gen is the
 * target's maps generation. */
static struct unw_entry *unw_get(struct pp_agent *a, pid_t pid, unsigned *gen)
{
	struct unw_cache *c = &a->unw;
	struct unw_entry *e = NULL, *old = NULL;
	uint64_t st;

	if (!target_get(a, pid, &st, gen)) {
		if (!adopt(a, pid) || !target_get(a, pid, &st, gen))
			return NULL;
	}
	pthread_mutex_lock(&a->unw_lock);
	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i]->pid != pid)
			continue;
		if (c->v[i]->start_time == st) {
			e = c->v[i];
		} else { /* pid reused */
			old = c->v[i];
			c->v[i] = c->v[--c->n];
			old->dead = true;
			if (old->refs)
				old = NULL;
		}
		break;
	}
	if (!e)
		(void)pp_grow(&c->v, &c->cap, c->n + 1, sizeof(*c->v), 16); /* checked below */
	if (!e && c->n < c->cap) {
		struct pp_unwinder_opts uo = {
			.frame_pointers_only = a->cfg->cpu.unwind == PP_UNWIND_FRAME_POINTER,
		};
		e = calloc(1, sizeof(*e));
		if (e)
			e->u = pp_unwinder__new(pid, &uo);
		if (e && e->u) {
			e->pid = pid;
			e->start_time = st;
			e->gen = *gen;
			pthread_mutex_init(&e->lock, NULL);
			c->v[c->n++] = e;
		} else {
			free(e);
			e = NULL;
		}
	}
	if (e)
		e->refs++;
	pthread_mutex_unlock(&a->unw_lock);
	if (old)
		unw_entry_free(old);
	return e;
}

/* The process's unwinder built before its first event (see pp_unwinder__prepare). */
static void unw_prepare(struct pp_agent *a, pid_t pid)
{
	unsigned gen;
	struct unw_entry *e = unw_get(a, pid, &gen);

	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	if (e->gen != gen) {
		pp_unwinder__invalidate(e->u);
		e->gen = gen;
	}
	int r = pp_unwinder__prepare(e->u);
	pthread_mutex_unlock(&e->lock);
	unw_put(a, e);
	if (r < 0)
		pp_dbg("unwind: pid %d: prepare: %s", (int)pid, strerror(-r));
}

/* use (may be NULL): how the unwind went, for the heap tracer's copy sizing. */
static size_t unwind(struct pp_agent *a, pid_t pid, const struct pp_regs *regs,
		     const uint8_t *stack, size_t stack_len, uint64_t *pcs,
		     struct pp_heap_stack_use *use)
{
	unsigned gen;
	struct unw_entry *e = unw_get(a, pid, &gen);
	size_t n = 0;
	unsigned flags = 0;
	int r;

	if (!e) {
		pcs[0] = regs->r[PP_REG_IP];
		return 1;
	}
	a->unwinds++;
	pthread_mutex_lock(&e->lock);
	if (e->gen != gen) {
		pp_unwinder__invalidate(e->u);
		e->gen = gen;
	}
	r = pp_unwinder__unwind(e->u, regs, stack, stack_len, pcs, MAX_PCS, &n, &flags);
	if (use && r == 0 && n) {
		use->unwound = true;
		use->complete = flags & PP_UNWIND_COMPLETE;
		use->short_copy = flags & PP_UNWIND_SHORT_COPY;
		use->used = pp_unwinder__stack_used(e->u);
	}
	pthread_mutex_unlock(&e->lock);
	unw_put(a, e);
	if (r < 0 || !n) {
		a->unwind_errors++;
		pcs[0] = regs->r[PP_REG_IP];
		return 1;
	}
	if (flags & PP_UNWIND_COMPLETE)
		a->unwinds_complete++;
	if (flags & PP_UNWIND_TRUNCATED)
		a->unwind_truncated++;
	return n;
}

/* ---- collectors ---- */

/* An event's process is profiled: known to the store, or adopted now. */
static bool admit(struct pp_agent *a, pid_t pid)
{
	return pp_store__has_process(a->store, pid) || adopt(a, pid);
}

/*
 * The user stack of a heap or off-CPU event into pcs (0 frames without
 * registers); -1 when its process cannot be admitted (the event is dropped).
 */
static ssize_t event_stack(struct pp_agent *a, pid_t pid, bool regs_valid,
			   const struct pp_regs *regs, const uint8_t *stack, size_t stack_len,
			   uint64_t *pcs, struct pp_heap_stack_use *use)
{
	if (!admit(a, pid))
		return -1;
	return regs_valid ? (ssize_t)unwind(a, pid, regs, stack, stack_len, pcs, use) : 0;
}

static void on_cpu_sample(void *ctx, const struct pp_raw_sample *s)
{
	struct pp_agent *a = ctx;
	uint64_t pcs[MAX_PCS];
	size_t n = 0;

	a->samples++;
	if (!admit(a, s->pid))
		return;
	if (s->regs_valid && a->cfg->cpu.unwind == PP_UNWIND_DWARF) {
		n = unwind(a, s->pid, &s->regs, s->stack, s->stack_len, pcs, NULL);
	} else if (s->n_user) {
		n = PP_MIN(s->n_user, (size_t)MAX_PCS);
		memcpy(pcs, s->user_ips, n * sizeof(*pcs));
	} else if (s->regs_valid) {
		n = unwind(a, s->pid, &s->regs, s->stack, s->stack_len, pcs, NULL);
	}
	pp_store__add_cpu(a->store, s->pid, s->tid, pcs, n,
			  a->cfg->cpu.kernel_stacks ? s->kernel_ips : NULL,
			  a->cfg->cpu.kernel_stacks ? s->n_kernel : 0, s->weight_ns);
}

static void on_heap_event(void *ctx, const struct pp_heap_event *ev)
{
	struct pp_agent *a = ctx;
	uint64_t pcs[MAX_PCS];

	a->heap_events++;
	if (ev->type == PP_HEAP_FREE) {
		pp_store__heap_free(a->store, ev->pid, ev->addr);
		return;
	}
	ssize_t n = event_stack(a, ev->pid, ev->regs_valid, &ev->regs, ev->stack, ev->stack_len,
				pcs, ev->use);
	if (n < 0)
		return;
	pp_store__heap_alloc(a->store, ev->pid, ev->tid, pcs, (size_t)n, ev->addr, ev->size);
}

static void tc_record(struct pp_agent *a, pid_t pid, pid_t tid, const uint64_t *pcs, size_t n)
{
	pthread_mutex_lock(&a->lock);
	struct tc_entry *e = NULL;
	for (size_t i = 0; i < a->n_tc; i++)
		if (a->tc[i].tid == tid) {
			e = &a->tc[i];
			break;
		}
	if (!e && a->n_tc < THREADCREATE_MAX) {
		(void)pp_grow(&a->tc, &a->cap_tc, a->n_tc + 1, sizeof(*a->tc), 64);
		if (a->n_tc < a->cap_tc)
			e = &a->tc[a->n_tc++];
	}
	if (!e)
		a->tc_dropped++;
	if (e) {
		e->pid = pid;
		e->tid = tid;
		e->n = (uint32_t)PP_MIN(n, ARRAY_SIZE(e->pcs));
		memcpy(e->pcs, pcs, e->n * sizeof(*pcs));
	}
	pthread_mutex_unlock(&a->lock);
}

static void on_offcpu_event(void *ctx, const struct pp_offcpu_event *ev)
{
	struct pp_agent *a = ctx;
	uint64_t pcs[MAX_PCS];

	a->offcpu_events++;
	ssize_t r = event_stack(a, ev->pid, ev->regs_valid, &ev->regs, ev->stack, ev->stack_len,
				pcs, NULL);
	if (r < 0)
		return;
	size_t n = (size_t)r;
	switch (ev->kind) {
	case PP_OFFCPU_BLOCK:
	case PP_OFFCPU_MUTEX: {
		int64_t count = (int64_t)(ev->count > 0 ? ev->count + 0.5 : 1);
		int64_t delay = (int64_t)(ev->delay_scaled_ns > 0 ? ev->delay_scaled_ns
								  : (double)ev->delay_ns);
		pp_store__add_contention(
			a->store, ev->kind == PP_OFFCPU_BLOCK ? PP_PROFILE_BLOCK : PP_PROFILE_MUTEX,
			ev->pid, ev->tid, pcs, n, count, delay);
		break;
	}
	case PP_OFFCPU_THREAD_CREATE:
		tc_record(a, ev->pid, ev->new_tid, pcs, n);
		break;
	}
}

static void cpu_update_enable(struct pp_agent *a)
{
	if (!a->cpu)
		return;
	bool on = a->cpu_windows > 0 || a->cfg->cpu.always_on;
	pp_cpu_sampler__enable(a->cpu, on);
}

static bool offcpu_kind(enum pp_profile_kind kind)
{
	return kind == PP_PROFILE_BLOCK || kind == PP_PROFILE_MUTEX ||
	       kind == PP_PROFILE_THREADCREATE;
}

static void offcpu_update(struct pp_agent *a);

/* A request for off-CPU data: keep (or start, at once) tracing. */
static void offcpu_demand(struct pp_agent *a, int dwindows)
{
	if (!a->offcpu)
		return;
	atomic_fetch_add(&a->offcpu_windows, dwindows);
	atomic_store(&a->offcpu_until_ns,
		     pp_now_mono_ns() + (uint64_t)a->cfg->offcpu.linger_seconds * 1000000000ull);
	if (dwindows >= 0)
		offcpu_update(a);
}

static void offcpu_update(struct pp_agent *a)
{
	bool on = a->cfg->offcpu.always_on || atomic_load(&a->offcpu_windows) > 0 ||
		  pp_now_mono_ns() < atomic_load(&a->offcpu_until_ns);
	if (on == pp_offcpu__enabled(a->offcpu))
		return;
	int r = pp_offcpu__enable(a->offcpu, on);
	if (r < 0)
		pp_dbg("offcpu: %s: %s", on ? "attach" : "detach", strerror(-r));
	else
		pp_dbg("offcpu: tracing %s", on ? "on" : "off");
}

static int offcpu_poll(void *ctx, int ms)
{
	struct pp_agent *a = ctx;
	offcpu_update(a);
	return pp_offcpu__poll(a->offcpu, ms);
}

/* The thread of one collector: poll (callbacks run here), and drop the
 * unwinders of exited processes when targets exit. */
static void *collector_main(void *arg)
{
	struct collector *co = arg;
	struct pp_agent *a = co->a;
	unsigned seen = atomic_load(&a->exits_gen);

	while (!atomic_load(&a->stop)) {
		int r = co->ops->poll(a, 100);
		if (r < 0 && r != -EINTR)
			sleep_ms(100);
		if (atomic_load(&a->exits_gen) != seen) {
			seen = atomic_load(&a->exits_gen);
			unw_sweep(a);
		}
	}
	return NULL;
}

/* ---- thread snapshots (goroutine, threadcreate) ---- */

/*
 * Every target pid of group (-1: all) into *ret (caller frees; NULL when
 * none or out of memory). Copied under a->lock.
 */
static size_t group_pids_all(struct pp_agent *a, int group, pid_t **ret)
{
	size_t n = 0;
	pthread_mutex_lock(&a->lock);
	pid_t *v = a->n_targets ? malloc(a->n_targets * sizeof(*v)) : NULL;
	for (size_t i = 0; v && i < a->n_targets; i++)
		if (group < 0 || a->targets[i].group == group)
			v[n++] = a->targets[i].pid;
	pthread_mutex_unlock(&a->lock);
	*ret = v;
	return n;
}

static size_t group_pids(struct pp_agent *a, int group, pid_t *out, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n_targets && n < max; i++)
		if (group < 0 || a->targets[i].group == group)
			out[n++] = a->targets[i].pid;
	pthread_mutex_unlock(&a->lock);
	return n;
}

static void dump_frames(struct pp_agent *a, pid_t pid, const struct pp_maps *maps,
			const uint64_t *pcs, size_t n, struct pp_buf *out)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t addr = i ? pcs[i] - 1 : pcs[i];
		const struct pp_map *m = pp_maps__find(maps, addr);
		struct pp_sym_result res = { 0 };
		bool ok = false;
		if (m && m->path && !m->special)
			ok = (a->iso ? pp_symiso__resolve(a->iso, pid, m, NULL, 0, addr, &res)
				     : pp_symbolizer__resolve(a->sym, pid, m, NULL, 0, addr,
							      &res)) == 0 &&
			     res.n > 0;
		pp_present__dump_frame(out, addr, ok ? &res : NULL, ok ? m->path : NULL);
		pp_sym_result__free(&res);
	}
}

/*
 * threads.min_interval_ms: 0 when none of pids was dumped less than that
 * ago (they are then noted as dumped now), else how many ns until they all
 * may be (a full table: the whole interval). Under snapshot_lock.
 */
/*
 * 0 and every target of group marked dumped now, or how long until each of
 * them may be dumped again (threads.min_interval_ms). Per target, so any
 * number of targets is served. a->lock.
 */
static uint64_t dump_too_soon(struct pp_agent *a, int group, uint64_t now)
{
	uint64_t iv = (uint64_t)a->cfg->threads.min_interval_ms * 1000000ull, wait = 0;

	if (!iv)
		return 0;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n_targets; i++) {
		const struct target *t = &a->targets[i];
		if ((group >= 0 && t->group != group) || !t->dump_ns || now - t->dump_ns >= iv)
			continue;
		wait = PP_MAX(wait, t->dump_ns + iv - now);
	}
	for (size_t i = 0; !wait && i < a->n_targets; i++)
		if (group < 0 || a->targets[i].group == group)
			a->targets[i].dump_ns = now;
	pthread_mutex_unlock(&a->lock);
	return wait;
}

static struct source_ctx *source_of_group(struct pp_agent *a, int group)
{
	for (size_t i = 0; i < a->n_sources; i++)
		if (a->sources[i].group == group)
			return &a->sources[i];
	return NULL;
}

/*
 * A dump asked for too soon: the last one. debug=2 gets the last text of
 * this server (-EAGAIN, i.e. 503, if it has none); the gauge stays as the
 * last dump left it.
 */
static int dump_limited(struct pp_agent *a, int group, struct pp_buf *out, uint64_t now)
{
	struct source_ctx *sc = source_of_group(a, group);
	uint64_t n = ++a->dumps_limited;

	if (!a->dump_limited_logged_ns || now - a->dump_limited_logged_ns >= 60000000000ull) {
		a->dump_limited_logged_ns = now;
		pp_warn("threads: thread dumps asked for more often than threads.min_interval_ms "
			"(%u ms): the last dump is served (%" PRIu64 " so far)",
			a->cfg->threads.min_interval_ms, n);
	}
	if (!out)
		return 0;
	if (!sc || !sc->dump_text.len)
		return -EAGAIN;
	pp_present__dump_repeat(out, now - sc->dump_text_ns, a->cfg->threads.min_interval_ms);
	return pp_buf_append(out, sc->dump_text.data, sc->dump_text.len);
}

/*
 * Snapshot every thread of the group's targets. With out != NULL, write the
 * debug=2 dump; else refresh the goroutine gauge in the store. At most one
 * dump per target per threads.min_interval_ms, each within
 * threads.dump_timeout_ms.
 */
struct dump_thread_ctx {
	struct pp_agent *a;
	pid_t pid;
	struct pp_maps maps; /* for the text dump */
	struct pp_buf *out; /* NULL: the gauge only */
	uint64_t *pcs; /* MAX_PCS */
	size_t deadline_hits;
};

/* One thread of a dump (pp_threads__snapshot_each): unwound into the
 * goroutine gauge and, for the text dump, written out. */
static void dump_thread(void *ctx, struct pp_thread_snap *t)
{
	struct dump_thread_ctx *dc = ctx;
	struct pp_agent *a = dc->a;
	struct pp_buf *out = dc->out;
	size_t n = 0;

	if (t->pause_ns > a->snapshot_pause_ns_max)
		a->snapshot_pause_ns_max = t->pause_ns;
	if (t->error == -ETIME)
		dc->deadline_hits++;
	if (t->captured)
		n = unwind(a, dc->pid, &t->regs, t->stack, t->stack_len, dc->pcs, NULL);
	if (n)
		pp_store__gauge_add(a->store, PP_PROFILE_GOROUTINE, dc->pid, t->tid, dc->pcs, n);
	if (!out)
		return;
	pp_present__dump_thread(out, t);
	if (t->captured)
		dump_frames(a, dc->pid, &dc->maps, dc->pcs, n, out);
	pp_present__dump_thread_end(out, t);
}

static int snapshot_threads(struct pp_agent *a, int group, struct pp_buf *out)
{
	if (!a->cfg->threads.enabled) {
		if (out)
			pp_present__dump_disabled(out);
		else
			pp_store__gauge_begin(a->store, PP_PROFILE_GOROUTINE);
		return 0;
	}
	pid_t *pids = NULL;
	size_t np = group_pids_all(a, group, &pids);
	uint64_t now = pp_now_mono_ns();
	struct pp_threads_opts to = {
		.stack_bytes = a->cfg->cpu.stack_bytes,
		.max_pause_ms = a->cfg->threads.max_pause_ms,
		.deadline_ns = now + (uint64_t)a->cfg->threads.dump_timeout_ms * 1000000ull
	};
	uint64_t pcs[MAX_PCS];
	size_t out_start = out ? out->len : 0;
	size_t deadline_hits = 0;

	uint64_t wait = dump_too_soon(a, group, now);
	if (wait && out &&
	    !(source_of_group(a, group) && source_of_group(a, group)->dump_text.len) &&
	    wait <= 2000000000ull) {
		/* debug=2 with no text to repeat: wait for the limit rather than refuse. */
		struct timespec ts = { (time_t)(wait / 1000000000ull),
				       (long)(wait % 1000000000ull) };
		nanosleep(&ts, NULL);
		now = pp_now_mono_ns();
		to.deadline_ns = now + (uint64_t)a->cfg->threads.dump_timeout_ms * 1000000ull;
		wait = dump_too_soon(a, group, now);
	}
	if (wait) {
		free(pids);
		return dump_limited(a, group, out, now);
	}

	unw_sweep(a); /* drop unwinders of exited processes */
	/* debug=2 refreshes the gauge too: a rate-limited request gets this dump. */
	pp_store__gauge_begin(a->store, PP_PROFILE_GOROUTINE);
	for (size_t p = 0; p < np; p++) {
		struct pp_buf body = { .max = out ? out->max : 0 };
		struct dump_thread_ctx dc = {
			.a = a, .pid = pids[p], .out = out ? &body : NULL, .pcs = pcs
		};
		size_t ns = 0;
		if (out)
			pp_maps__read(pids[p], &dc.maps);
		/* Each thread is unwound and written as its batch is done: at
		 * most PP_THREADS_BATCH stacks are held. */
		int r = pp_threads__snapshot_each(pids[p], &to, dump_thread, &dc, &ns);
		pp_maps__free(&dc.maps);
		deadline_hits += dc.deadline_hits;
		if (r < 0) {
			pp_buf_free(&body);
			continue;
		}
		a->snapshots++;
		if (out) {
			struct pp_proc_info info = { 0 };
			pp_proc__read_info(pids[p], &info);
			pp_present__dump_process(out, pids[p], info.comm, info.exe, ns);
			pp_proc_info__free(&info);
			if (body.len)
				pp_buf_append(out, body.data, body.len);
		}
		pp_buf_free(&body);
	}
	pp_store__gauge_end(a->store, PP_PROFILE_GOROUTINE);
	if (deadline_hits) {
		uint64_t total = a->dump_deadline_threads += deadline_hits;
		if (!a->dump_deadline_logged_ns ||
		    now - a->dump_deadline_logged_ns >= 60000000000ull) {
			a->dump_deadline_logged_ns = now;
			pp_warn("threads: a thread dump reached threads.dump_timeout_ms (%u ms): "
				"%zu "
				"threads not stopped (%" PRIu64 " so far)",
				a->cfg->threads.dump_timeout_ms, deadline_hits, total);
		}
	}
	if (out) {
		struct source_ctx *sc = source_of_group(a, group);
		if (sc && out->len >= out_start) {
			pp_buf_reset(&sc->dump_text);
			sc->dump_text.max = 4u << 20; /* larger dumps: 503 when limited */
			if (pp_buf_append(&sc->dump_text, out->data + out_start,
					  out->len - out_start) == 0)
				sc->dump_text_ns = now;
			else
				pp_buf_reset(&sc->dump_text);
		}
	}
	free(pids);
	return 0;
}

/* threadcreate: creation stacks of the live threads whose creation was traced. */
static int refresh_threadcreate(struct pp_agent *a, int group)
{
	pid_t *pids = NULL;
	size_t np = group_pids_all(a, group, &pids);
	pp_store__gauge_begin(a->store, PP_PROFILE_THREADCREATE);
	for (size_t p = 0; p < np; p++) {
		pid_t *tids = NULL;
		size_t nt = 0;
		if (pp_proc__list_tids(pids[p], &tids, &nt) < 0)
			continue;
		for (size_t i = 0; i < nt; i++) {
			uint64_t pcs[64];
			size_t n = 0;
			pthread_mutex_lock(&a->lock);
			for (size_t k = 0; k < a->n_tc; k++)
				if (a->tc[k].tid == tids[i] && a->tc[k].pid == pids[p]) {
					n = a->tc[k].n;
					memcpy(pcs, a->tc[k].pcs, n * sizeof(*pcs));
					break;
				}
			pthread_mutex_unlock(&a->lock);
			if (n)
				pp_store__gauge_add(a->store, PP_PROFILE_THREADCREATE, pids[p],
						    tids[i], pcs, n);
		}
		tc_prune_live(a, pids[p], tids, nt);
		free(tids);
	}
	free(pids);
	pp_store__gauge_end(a->store, PP_PROFILE_THREADCREATE);
	return 0;
}

/* ---- HTTP source ---- */

/* A goroutine or threadcreate request: take the gauge's current state now. */
static void refresh_gauge(struct pp_agent *a, enum pp_profile_kind kind, int group)
{
	if (kind != PP_PROFILE_GOROUTINE && kind != PP_PROFILE_THREADCREATE)
		return;
	pthread_mutex_lock(&a->snapshot_lock);
	if (kind == PP_PROFILE_GOROUTINE)
		snapshot_threads(a, group, NULL);
	else
		refresh_threadcreate(a, group);
	pthread_mutex_unlock(&a->snapshot_lock);
}

/* The base of a CPU window: the store's counters and the sampler's at its
 * start, so the window's losses can be told apart from earlier ones. */
struct cpu_base {
	struct pp_store_snapshot *snap;
	struct pp_cpu_stats stats;
};

static int src_begin(void *ctx, enum pp_profile_kind kind, void **ret_base)
{
	struct source_ctx *sc = ctx;
	struct pp_agent *a = sc->a;
	struct cpu_base *cb = NULL;

	if (kind == PP_PROFILE_CPU) {
		if (!a->cpu)
			return -EOPNOTSUPP;
		cb = calloc(1, sizeof(*cb));
		if (!cb)
			return -ENOMEM;
		pthread_mutex_lock(&a->win_lock);
		a->cpu_windows++;
		cpu_update_enable(a);
		pthread_mutex_unlock(&a->win_lock);
		/* Samples taken before the window (always_on, an overlapping
		 * window) are delivered before its base is taken. */
		if (pp_cpu_sampler__flush(a->cpu, 5000) < 0)
			pp_warn("cpu: samples taken before a window still queued after 5 s");
		pp_cpu_sampler__stats(a->cpu, &cb->stats);
	} else if (offcpu_kind(kind)) {
		offcpu_demand(a, 1);
	}
	refresh_gauge(a, kind, sc->group);
	struct pp_store_snapshot *s =
		pp_store__snapshot(a->store, kind == PP_PROFILE_ALLOCS ? PP_PROFILE_HEAP : kind);
	/* EAGAIN: limits.max_window_bytes (the server answers 503) */
	int err = s ? 0 : errno == EAGAIN ? -EAGAIN : -ENOMEM;
	if (!s) {
		if (kind == PP_PROFILE_CPU) {
			pthread_mutex_lock(&a->win_lock);
			a->cpu_windows--;
			cpu_update_enable(a);
			pthread_mutex_unlock(&a->win_lock);
			free(cb);
		} else if (offcpu_kind(kind)) {
			offcpu_demand(a, -1);
		}
		return err;
	}
	if (cb) {
		cb->snap = s;
		*ret_base = cb;
	} else {
		*ret_base = s;
	}
	return 0;
}

static void src_release(void *ctx, enum pp_profile_kind kind, void *base)
{
	struct source_ctx *sc = ctx;
	struct pp_agent *a = sc->a;
	if (kind == PP_PROFILE_CPU && base) {
		struct cpu_base *cb = base;
		pp_store_snapshot__free(cb->snap);
		free(cb);
	} else {
		pp_store_snapshot__free(base);
	}
	if (offcpu_kind(kind))
		offcpu_demand(a, -1);
	if (kind == PP_PROFILE_CPU && a->cpu) {
		pthread_mutex_lock(&a->win_lock);
		if (a->cpu_windows > 0)
			a->cpu_windows--;
		cpu_update_enable(a);
		pthread_mutex_unlock(&a->win_lock);
	}
}

/*
 * The first max targets of group (-1: all), pid and comm, copied under
 * a->lock; then, with no lock held, their /proc status (and the heap
 * tracer's counters when heap is set).
 */
static size_t targets_present(struct pp_agent *a, int group, struct pp_present_target *v,
			      size_t max, bool heap)
{
	size_t n = 0;

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n_targets && n < max; i++) {
		const struct target *t = &a->targets[i];
		if (group >= 0 && t->group != group)
			continue;
		v[n] = (struct pp_present_target){ .pid = t->pid };
		memcpy(v[n].comm, t->comm, sizeof(v[n].comm));
		n++;
	}
	pthread_mutex_unlock(&a->lock);
	for (size_t i = 0; i < n; i++) {
		v[i].have_status = pp_proc__read_status(v[i].pid, &v[i].status) == 0;
		if (heap && a->heap)
			v[i].have_heap =
				pp_heap_tracer__proc_stats(a->heap, v[i].pid, &v[i].heap) == 0;
	}
	return n;
}

static void heap_comments(struct pp_agent *a, int group, char ***ret, size_t *ret_n)
{
	struct pp_present_target *tv = calloc(64, sizeof(*tv));
	struct pp_heap_comment_stats hc = {
		.disabled_reason = a->heap_disabled_reason,
		.have_heap = a->heap,
		.sample_rate = a->cfg->heap.sample_rate,
		.targets = tv,
	};

	*ret = NULL;
	*ret_n = 0;
	if (!tv)
		return;
	if (a->heap) {
		struct pp_store_stats ss;
		pp_heap_tracer__stats(a->heap, &hc.heap);
		pp_store__stats(a->store, &ss);
		hc.store_dropped_live = ss.dropped_live;
	}
	hc.n_targets = targets_present(a, group, tv, 64, true);
	pp_present__heap_comments(&hc, ret, ret_n);
	free(tv);
}

/* The end of a CPU window: every sample taken inside it delivered, and
 * what was lost during it said in the profile (and in the log when it is
 * more than a few percent). */
static void cpu_comments(struct pp_agent *a, const struct pp_cpu_stats *begin, char ***ret,
			 size_t *ret_n)
{
	struct pp_cpu_stats now;
	char **c;
	size_t n = 0;

	*ret = NULL;
	*ret_n = 0;
	if (pp_cpu_sampler__flush(a->cpu, 5000) < 0)
		pp_warn("cpu: samples of the window's last moments still queued after 5 s");
	pp_cpu_sampler__stats(a->cpu, &now);
	uint64_t got = now.samples - begin->samples, lost = now.lost - begin->lost;
	c = calloc(2, sizeof(*c));
	if (!c)
		return;
	c[n++] = pp_present__cpu_comment(begin, &now);
	if (lost * 100 > (got + lost) * 2)
		pp_warn("cpu: a window lost %llu of %llu samples (ring buffer full: the CPU "
			"thread fell behind)",
			(unsigned long long)lost, (unsigned long long)(got + lost));
	*ret = c;
	*ret_n = n;
}

static int src_render(void *ctx, enum pp_profile_kind kind, void *base, int debug,
		      struct pp_buf *out)
{
	struct source_ctx *sc = ctx;
	struct pp_agent *a = sc->a;
	char **comments = NULL;
	size_t nc = 0;
	int r;

	if (!base && offcpu_kind(kind))
		offcpu_demand(a, 0);
	if (kind == PP_PROFILE_GOROUTINE && debug >= 2) {
		pthread_mutex_lock(&a->snapshot_lock);
		r = snapshot_threads(a, sc->group, out);
		pthread_mutex_unlock(&a->snapshot_lock);
		return r;
	}
	/* A gauge is refreshed now; a delta of it is that minus the counts at begin. */
	refresh_gauge(a, kind, sc->group);
	if (kind == PP_PROFILE_HEAP || kind == PP_PROFILE_ALLOCS)
		heap_comments(a, sc->group, &comments, &nc);
	if (kind == PP_PROFILE_CPU && base) {
		struct cpu_base *cb = base;
		base = cb->snap;
		cpu_comments(a, &cb->stats, &comments, &nc);
	}
	struct pp_store_render_opts ro = {
		.kind = kind,
		.base = base,
		.debug = debug,
		.group = sc->group,
		.comments = (const char *const *)comments,
		.n_comments = nc,
	};
	r = pp_store__render(a->store, &ro, out);
	for (size_t i = 0; i < nc; i++)
		free(comments[i]);
	free(comments);
	/* The profile's tree, encoding and gzip state are free now: give their pages back
	 * at once rather than at the next periodic trim (a render is per request). */
	malloc_trim(0);
	return r;
}

static long src_count(void *ctx, enum pp_profile_kind kind)
{
	struct source_ctx *sc = ctx;
	if (kind == PP_PROFILE_GOROUTINE) {
		pid_t *pids = NULL;
		size_t np = group_pids_all(sc->a, sc->group, &pids);
		long n = 0;
		for (size_t i = 0; i < np; i++) {
			struct pp_proc_status ps;
			if (pp_proc__read_status(pids[i], &ps) == 0)
				n += ps.threads;
		}
		free(pids);
		return n;
	}
	return pp_store__count(sc->a->store, kind, sc->group);
}

static int src_cmdline(void *ctx, struct pp_buf *out)
{
	struct source_ctx *sc = ctx;
	pid_t pid;
	if (group_pids(sc->a, sc->group, &pid, 1) != 1)
		return 0; /* no target yet: empty, like a process without argv */
	struct pp_proc_info info = { 0 };
	int r = pp_proc__read_info(pid, &info);
	if (r == 0 && info.cmdline)
		r = pp_buf_append(out, info.cmdline, info.cmdline_len);
	pp_proc_info__free(&info);
	return r == -ESRCH || r == -ENOENT ? 0 : r;
}

static int src_symbol(void *ctx, uint64_t addr, struct pp_buf *out)
{
	struct source_ctx *sc = ctx;
	return pp_store__symbol(sc->a->store, sc->group, addr, out);
}

static uint64_t self_rss_kb(void)
{
	struct pp_proc_status ps = { 0 };
	pp_proc__read_status(getpid(), &ps);
	return ps.vm_rss_kb;
}

static size_t src_collectors(void *ctx, struct pp_http_collector *ret, size_t max);

/* /metrics text. Locks: a->lock (copies of the target list only; the
 * targets' /proc files are read after it is released), unw_lock, the
 * store's, sampler's, heap tracer's, off-CPU tracer's and symbolizer's
 * stats locks one at a time (counters copied, no file I/O),
 * a->state_lock. Formatted with none held (http/present.c). */
static int src_metrics(void *ctx, struct pp_buf *o)
{
	struct source_ctx *sc = ctx;
	struct pp_agent *a = sc->a;
	struct pp_http_collector colls[COLL__COUNT];
	struct rusage ru;
	struct pp_metrics *m = calloc(1, sizeof(*m));
	struct pp_present_target *tv = calloc(256, sizeof(*tv));

	if (!m || !tv) {
		free(m);
		free(tv);
		return -ENOMEM;
	}
	pp_store__stats(a->store, &m->store);
	getrusage(RUSAGE_SELF, &ru);
	m->version = PODPROF_VERSION;
	m->cpu_seconds = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	m->uptime_seconds = (double)(pp_now_mono_ns() - a->start_ns) / 1e9;
	m->rss_bytes = self_rss_kb() * 1024;
	pthread_mutex_lock(&a->lock);
	/* A per-target listener shows its own target's series (and podprof's). */
	m->n_targets = 0;
	for (size_t i = 0; i < a->n_targets; i++)
		m->n_targets += sc->group < 0 || a->targets[i].group == sc->group;
	m->cpu_windows = a->cpu_windows;
	m->agent.tc_entries = a->n_tc;
	m->agent.tc_pruned = a->tc_pruned;
	m->agent.tc_dropped = a->tc_dropped;
	pthread_mutex_unlock(&a->lock);
	m->targets = tv;
	m->n_listed = targets_present(a, sc->group, tv, 256, false);
	uint64_t tce = m->agent.tc_entries, tcp = m->agent.tc_pruned, tcd = m->agent.tc_dropped;
	m->agent = (struct pp_agent_counters){
		.samples = a->samples,
		.unwinds = a->unwinds,
		.unwinds_complete = a->unwinds_complete,
		.unwind_truncated = a->unwind_truncated,
		.unwind_errors = a->unwind_errors,
		.attach_errors = a->attach_errors,
		.target_read_errors = a->target_read_errors,
		.heap_events = a->heap_events,
		.offcpu_events = a->offcpu_events,
		.tc_entries = tce,
		.tc_pruned = tcp,
		.tc_dropped = tcd,
	};
	pthread_mutex_lock(&a->unw_lock);
	m->agent.unwinders = a->unw.n;
	pthread_mutex_unlock(&a->unw_lock);
	m->maps_truncated = pp_maps__truncated_total();
	for (int c = 0; c < COLL__COUNT; c++)
		if (a->colls[c].ops->stats)
			a->colls[c].ops->stats(a, m);
	struct pp_symiso_stats is;
	sym_stats(a, &m->sym, &is);
	m->symiso = a->iso != NULL;
	m->symiso_restarts = is.restarts;
	m->symiso_crashes = is.crashes;
	m->symiso_timeouts = is.timeouts;
	m->symiso_files_refused = is.files_refused;
	m->symiso_requests = is.requests;
	m->symiso_requests_lost = is.requests_refused;
	m->symiso_idle_ends = is.idle_ends;
	m->symiso_opens_refused = is.opens_refused;
	m->unwind_debug_refused = pp_unwind_debug_refused();
	m->unwind_fd_budget = pp_unwind_fd_budget_hits();
	m->open_budget = pp_open_budget__hits();
	struct pp_file_stats fs;
	pp_proc__file_stats(&fs);
	m->file_hangs = fs.hangs;
	m->file_skipped = fs.skipped;
	m->file_stuck_threads = fs.stuck_threads;
	uint64_t last = atomic_load(&a->last_pass_ns);
	m->discovery_age_ms = last ? (pp_now_mono_ns() - last) / 1000000ull : 0;
	m->sigbus_repaired = pp_sigbus_guard_repaired();
	m->n_colls = src_collectors(sc, colls, ARRAY_SIZE(colls));
	m->colls = colls;

	pp_present__metrics(m, o);
	free(tv);
	free(m);
	return 0;
}

/*
 * Discovery is stalled when no pass has ended for this long (nor since
 * start): every target file access has a deadline, so a pass this late is
 * stuck somewhere no deadline covers.
 */
static uint64_t discovery_stall_ns(const struct pp_agent *a)
{
	uint64_t iv = (uint64_t)a->cfg->discovery.interval_ms * 1000000ull;
	return PP_MAX(DISCOVERY_STALL_MIN_NS, 10 * iv);
}

static bool src_healthy(void *ctx, struct pp_buf *msg)
{
	struct source_ctx *sc = ctx;
	struct pp_agent *a = sc->a;
	uint64_t last = atomic_load(&a->last_pass_ns), now = pp_now_mono_ns();

	if (atomic_load(&a->stop)) {
		pp_buf_puts(msg, "stopping");
		return false;
	}
	if (!last)
		last = a->started_ns;
	if (last && now - last > discovery_stall_ns(a)) {
		pp_buf_printf(msg, "discovery stalled: no pass ended for %" PRIu64 " s",
			      (uint64_t)((now - last) / 1000000000ull));
		return false;
	}
	pp_buf_puts(msg, "ok");
	return true;
}

static bool src_available(void *ctx, enum pp_profile_kind kind, struct pp_buf *msg)
{
	struct source_ctx *sc = ctx;
	struct pp_agent *a = sc->a;
	enum coll c = coll_of_kind(kind);
	pthread_mutex_lock(&a->state_lock);
	bool ok = a->coll[c].state != CS_UNAVAILABLE;
	if (!ok)
		pp_buf_puts(msg, a->coll[c].reason);
	pthread_mutex_unlock(&a->state_lock);
	return ok;
}

/* The HTTP server refuses connections (called at most once per 10 s per reason). */
static void src_refused(void *ctx, const char *what, unsigned long total)
{
	(void)ctx;
	pp_warn("http: refusing connections (%s; %lu so far, see podprof_http_refused_total)", what,
		total);
}

static size_t src_collectors(void *ctx, struct pp_http_collector *ret, size_t max)
{
	struct source_ctx *sc = ctx;
	struct pp_agent *a = sc->a;
	size_t n = 0;
	pthread_mutex_lock(&a->state_lock);
	for (int c = 0; c < COLL__COUNT && n < max; c++, n++) {
		ret[n].name = coll_ops[c]->name;
		ret[n].profiles = coll_ops[c]->profiles;
		ret[n].state = coll_state_names[a->coll[c].state];
		snprintf(ret[n].reason, sizeof(ret[n].reason), "%s", a->coll[c].reason);
	}
	pthread_mutex_unlock(&a->state_lock);
	return n;
}

const struct pp_http_source *pp_agent__source(struct pp_agent *a, int group)
{
	for (size_t i = 0; i < a->n_sources; i++)
		if (a->sources[i].group == group)
			return &a->sources[i].src;
	if (a->n_sources >= MAX_SERVERS)
		return NULL;
	struct source_ctx *sc = &a->sources[a->n_sources++];
	sc->a = a;
	sc->group = group;
	sc->src = (struct pp_http_source){
		.ctx = sc,
		.begin = src_begin,
		.render = src_render,
		.release = src_release,
		.count = src_count,
		.cmdline = src_cmdline,
		.symbol = src_symbol,
		.metrics = src_metrics,
		.healthy = src_healthy,
		.available = src_available,
		.collectors = src_collectors,
		.refused = src_refused,
	};
	return &sc->src;
}

/* ---- lifecycle ---- */

static void check_caps(struct pp_agent *a)
{
	struct pp_proc_status ps = { 0 };
	if (pp_proc__read_status(getpid(), &ps) < 0)
		return;
	uint64_t cap = ps.cap_eff;
	bool sys_admin = cap & (1ull << 21);
	a->caps_bpf = sys_admin || (cap & (1ull << 39));
	a->caps_perfmon = sys_admin || (cap & (1ull << 38));
	a->caps_ptrace = cap & (1ull << 19);
	if (!a->caps_bpf)
		pp_warn("CAP_BPF missing: CPU, heap, block and mutex profiles disabled; add BPF to "
			"securityContext.capabilities.add");
	if (!a->caps_perfmon)
		pp_warn("CAP_PERFMON missing: CPU profiles disabled (per-CPU perf events); add "
			"PERFMON to securityContext.capabilities.add");
	if (!a->caps_ptrace)
		pp_warn("CAP_SYS_PTRACE missing: processes of other users cannot be read and "
			"goroutine thread dumps are limited; add SYS_PTRACE to "
			"securityContext.capabilities.add");
	if (!(cap & (1ull << 40)) && !sys_admin)
		pp_info("CAP_CHECKPOINT_RESTORE absent: files are resolved through /proc/PID/root "
			"with an inode check instead of /proc/PID/map_files");
}

struct pp_agent *pp_agent__new(const struct pp_config *cfg, const struct pp_agent_opts *opts)
{
	struct pp_agent *a = calloc(1, sizeof(*a));
	struct pp_buf dump = { 0 };
	char err[512];

	if (!a)
		return NULL;
	/* Own a copy of the config through its YAML form. */
	if (pp_config__dump(cfg, &dump) < 0 ||
	    pp_config__parse(dump.data ? dump.data : "", dump.len, cfg->source, &a->cfg, err,
			     sizeof(err)) < 0) {
		pp_err("internal: config copy failed: %s", err);
		pp_buf_free(&dump);
		free(a);
		errno = EINVAL;
		return NULL;
	}
	pp_buf_free(&dump);
	if (opts)
		a->opts = *opts;
	a->self = getpid();
	a->start_ns = pp_now_mono_ns();
	/* Process-wide caps on what one target makes podprof read and hold. */
	pp_maps__set_caps(a->cfg->limits.max_maps_entries, a->cfg->limits.max_maps_bytes);
	pp_unwind__set_fd_budget(a->cfg->limits.max_target_fds);
	pp_proc__set_open_budget(a->cfg->limits.max_target_fds);
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->snapshot_lock, NULL);
	pthread_mutex_init(&a->unw_lock, NULL);
	pthread_mutex_init(&a->win_lock, NULL);
	pthread_mutex_init(&a->state_lock, NULL);
	pthread_mutex_init(&a->discover_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->discover_wake, &ca);
	pthread_condattr_destroy(&ca);
	check_caps(a);
	pp_refusal_env__read(&a->renv);
	a->coll[COLL_CPU].state = a->cfg->cpu.enabled ? CS_OK : CS_DISABLED;
	a->coll[COLL_HEAP].state = a->cfg->heap.enabled ? CS_OK : CS_DISABLED;
	a->coll[COLL_OFFCPU].state = a->cfg->offcpu.enabled ? CS_OK : CS_DISABLED;
	a->coll[COLL_THREADS].state = a->cfg->threads.enabled ? CS_OK : CS_DISABLED;

	struct pp_symbolizer_opts so = { .cache_bytes = a->cfg->limits.symbol_cache_bytes };
	a->sym = pp_symbolizer__new(&so);
	if (a->cfg->symbolizer.isolate) {
		struct pp_symiso_opts io = {
			.cache_bytes = a->cfg->limits.symbol_cache_bytes,
			.memory_mib = a->cfg->symbolizer.memory_mib,
			.cpu_seconds = a->cfg->symbolizer.cpu_seconds,
			.timeout_ms = a->cfg->symbolizer.timeout_ms,
			.idle_seconds = a->cfg->symbolizer.idle_seconds,
			.helper_uid = a->cfg->symbolizer.helper_uid,
			.log_level = a->cfg->log.level,
			.log_json = a->cfg->log.format == PP_LOG_JSON,
		};
		a->iso = pp_symiso__new(&io);
		struct pp_symiso_stats ist;
		pp_symiso__stats(a->iso, &ist);
		if (!a->iso)
			pp_warn("symbolize: cannot start the symbolizer helper (%s): target files "
				"are parsed in podprof itself",
				strerror(errno));
		else if (ist.shared_uid)
			pp_warn("symbolize: the symbolizer helper cannot take uid %u (no "
				"CAP_SETUID/CAP_SETGID, or not mapped): it runs as podprof's uid, "
				"non-dumpable and without capabilities",
				io.helper_uid);
	}
	struct pp_store_opts sto = {
		.max_stacks = a->cfg->limits.max_stacks,
		.max_live = a->cfg->heap.max_live,
		.max_procs = a->cfg->limits.max_targets * 4 + 64,
		.heap_sample_rate = a->cfg->heap.sample_rate,
		.cpu_period_ns = 1000000000ull / a->cfg->cpu.frequency_hz,
		.sym_ops = a->iso ? &iso_ops : NULL,
		.sym_ctx = a,
		.max_snapshot_bytes = a->cfg->limits.max_window_bytes,
	};
	a->store = pp_store__new(&sto, a->sym);
	if (!a->sym || !a->store) {
		pp_agent__free(a);
		errno = ENOMEM;
		return NULL;
	}
	if (a->cfg->cpu.enabled) {
		struct pp_cpu_opts co = {
			.frequency_hz = a->cfg->cpu.frequency_hz,
			.stack_bytes = a->cfg->cpu.stack_bytes,
			.kernel_callchain = a->cfg->cpu.kernel_stacks,
			.user_callchain = a->cfg->cpu.unwind == PP_UNWIND_FRAME_POINTER,
		};
		a->cpu = pp_cpu_sampler__new(&co, on_cpu_sample, a);
		int e = errno;
		int perr = pp_refusal__probe(PP_SYS_PERF_EVENT_OPEN);
		if (!a->cpu) {
			/* The sampler needs both per-CPU perf events and its BPF program. */
			int berr = pp_refusal__probe(PP_SYS_BPF);
			snprintf(a->cpu_disabled_reason, sizeof(a->cpu_disabled_reason),
				 "CPU sampler could not start (%s)", strerror(e));
			if (perr < 0)
				coll_refused_err(a, COLL_CPU, PP_SYS_PERF_EVENT_OPEN, perr, false);
			else if (berr < 0)
				coll_refused_err(a, COLL_CPU, PP_SYS_BPF, berr, false);
			else
				coll_refused(a, COLL_CPU, a->cpu_disabled_reason, false);
		} else if (perr < 0) {
			/* The sampler stays: targets are tried again, silently, each pass. */
			coll_refused_err(a, COLL_CPU, PP_SYS_PERF_EVENT_OPEN, perr, true);
		}
	}
	if (a->cfg->heap.enabled && a->cfg->heap.mode != PP_HEAP_MODE_OFF) {
		struct pp_heap_opts ho = {
			.sample_rate = a->cfg->heap.sample_rate,
			.max_live = a->cfg->heap.max_live,
			.stack_bytes = a->cfg->cpu.stack_bytes,
			.budget_percent = a->cfg->heap.budget_percent,
			.over_budget = a->cfg->heap.over_budget,
			.mode = a->cfg->heap.mode,
			.ring_bytes = a->cfg->heap.ring_mib << 20,
		};
		a->heap = pp_heap_tracer__new(&ho, on_heap_event, a);
		if (!a->heap) {
			int e = errno;
			int berr = pp_refusal__probe(PP_SYS_BPF);
			snprintf(a->heap_disabled_reason, sizeof(a->heap_disabled_reason),
				 "BPF heap tracer could not load (%s)%s", strerror(e),
				 a->caps_bpf ? "" : "; CAP_BPF missing");
			if (berr < 0)
				coll_refused_err(a, COLL_HEAP, PP_SYS_BPF, berr, false);
			else
				coll_refused(a, COLL_HEAP, a->heap_disabled_reason, false);
		}
	}
	if (a->cfg->offcpu.enabled) {
		struct pp_offcpu_opts oo = {
			.stack_bytes = PP_MIN(a->cfg->cpu.stack_bytes, 16384u),
			.min_block_ns = (uint64_t)a->cfg->offcpu.min_block_us * 1000,
			.sample_ns = 0,
			.ringbuf_bytes = 1 << 20, /* BENCHMARKS 7 */
		};
		a->offcpu = pp_offcpu__new(&oo, on_offcpu_event, a);
		if (!a->offcpu) {
			int e = errno;
			int berr = pp_refusal__probe(PP_SYS_BPF);
			snprintf(a->offcpu_disabled_reason, sizeof(a->offcpu_disabled_reason),
				 "BPF off-CPU tracer could not load (%s)", strerror(e));
			if (berr < 0)
				coll_refused_err(a, COLL_OFFCPU, PP_SYS_BPF, berr, false);
			else
				coll_refused(a, COLL_OFFCPU, a->offcpu_disabled_reason, false);
		}
	}
	for (int c = 0; c < COLL__COUNT; c++)
		a->colls[c] = (struct collector){ .a = a, .id = c, .ops = coll_ops[c] };
	a->colls[COLL_CPU].present = a->cpu;
	a->colls[COLL_HEAP].present = a->heap;
	a->colls[COLL_OFFCPU].present = a->offcpu;
	a->colls[COLL_THREADS].present = a->cfg->threads.enabled;
	return a;
}

static int start_server(struct pp_agent *a, const char *listen, int group, const char *title)
{
	if (!listen || !*listen || !strcmp(listen, "0"))
		return 0;
	if (a->n_servers >= MAX_SERVERS) {
		/* The config refuses more (PP_CONFIG_MAX_LISTENERS): a bug if seen. */
		pp_err("http: cannot listen on %s: more than %d servers", listen, MAX_SERVERS);
		return -ENOSPC;
	}
	struct pp_http_opts ho = {
		.listen = listen,
		.max_connections = a->cfg->http.max_connections,
		.max_connections_per_client = a->cfg->http.max_connections_per_client,
		.max_request_bytes = a->cfg->http.max_request_bytes,
		.timeout_seconds = a->cfg->http.timeout_seconds,
		.header_timeout_seconds = a->cfg->http.header_timeout_seconds,
		.workers = a->cfg->http.workers,
		.max_window_seconds = a->cfg->cpu.max_seconds,
		.max_windows = a->cfg->http.max_windows,
		.max_windows_per_client = a->cfg->http.max_windows_per_client,
		.token = a->opts.token,
		.allowed_hosts = a->cfg->http.allowed_hosts,
		.index_title = title,
	};
	const struct pp_http_source *src = pp_agent__source(a, group);
	struct pp_http_server *s = src ? pp_http_server__start(&ho, src) : NULL;
	if (!s) {
		int e = errno ? errno : EINVAL;
		pp_err("http: cannot listen on %s: %s", listen, strerror(e));
		return -e;
	}
	pp_info("http: serving /debug/pprof/ on %s (port %u)%s%s", listen, pp_http_server__port(s),
		title ? " for " : "", title ? title : "");
	a->servers[a->n_servers++] = s;
	return 0;
}

int pp_agent__start(struct pp_agent *a)
{
	int r;

	/* /proc/kallsyms is loaded by the store's symbolization worker at
	 * the first kernel frame (off the sample path), not here: without a
	 * CPU or off-CPU window its ~4 MiB are never needed. */
	a->started_ns = pp_now_mono_ns();
	/* The servers answer first: the first pass reads every target's
	 * files, and a file system may make that slow (procfs.h). */
	if (a->opts.serve) {
		r = start_server(a, a->cfg->listen, -1, NULL);
		if (r < 0)
			return r;
		for (size_t i = 0; i < a->cfg->n_targets; i++) {
			if (!a->cfg->targets[i].listen)
				continue;
			r = start_server(a, a->cfg->targets[i].listen, (int)i,
					 a->cfg->targets[i].name);
			if (r < 0)
				return r;
		}
	}
	discover(a);
	pthread_mutex_lock(&a->lock);
	size_t n = a->n_targets;
	pthread_mutex_unlock(&a->lock);
	/* "ready" for whoever waits on the log (the tests): profiles now cover
	 * every target present at start */
	pp_info("discovery: first pass done (%zu targets)", n);
	cpu_update_enable(a);
	for (int c = 0; c < COLL__COUNT; c++) {
		struct collector *co = &a->colls[c];
		if (co->present && co->ops->poll &&
		    pthread_create(&co->th, NULL, collector_main, co) == 0)
			co->th_started = true;
	}
	if (pthread_create(&a->th_discovery, NULL, discovery_main, a) == 0)
		a->th_discovery_started = true;
	return 0;
}

size_t pp_agent__ports(struct pp_agent *a, unsigned *ports, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < a->n_servers && n < max; i++)
		ports[n++] = pp_http_server__port(a->servers[i]);
	return n;
}

void pp_agent__summary(struct pp_agent *a, struct pp_agent_summary *ret)
{
	pthread_mutex_lock(&a->lock);
	ret->targets = a->n_targets;
	pthread_mutex_unlock(&a->lock);
	ret->threads_seen = a->threads_seen;
	ret->samples = a->samples;
	ret->unwinds = a->unwinds;
	ret->unwinds_complete = a->unwinds_complete;
}

void pp_agent__stop(struct pp_agent *a)
{
	if (!a || atomic_exchange(&a->stop, true))
		return;
	pthread_mutex_lock(&a->discover_lock);
	pthread_cond_broadcast(&a->discover_wake);
	pthread_mutex_unlock(&a->discover_lock);
	for (size_t i = 0; i < a->n_servers; i++)
		pp_http_server__stop(a->servers[i]);
	a->n_servers = 0;
	if (a->th_discovery_started)
		pthread_join(a->th_discovery, NULL);
	a->th_discovery_started = false;
	for (int c = 0; c < COLL__COUNT; c++) {
		if (a->colls[c].th_started)
			pthread_join(a->colls[c].th, NULL);
		a->colls[c].th_started = false;
	}
}

void pp_agent__free(struct pp_agent *a)
{
	if (!a)
		return;
	pp_agent__stop(a);
	for (size_t i = 0; i < a->n_targets; i++) {
		target_detach(a, &a->targets[i]);
		free(a->targets[i].exe);
	}
	free(a->targets);
	for (size_t i = 0; i < a->unw.n; i++)
		unw_entry_free(a->unw.v[i]);
	free(a->unw.v);
	free(a->tc);
	for (size_t i = 0; i < a->n_sources; i++)
		pp_buf_free(&a->sources[i].dump_text);
	pp_cpu_sampler__free(a->cpu);
	pp_heap_tracer__free(a->heap);
	pp_offcpu__free(a->offcpu);
	pp_store__free(a->store);
	pp_symiso__free(a->iso);
	pp_symbolizer__free(a->sym);
	pp_config__free(a->cfg);
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->snapshot_lock);
	pthread_mutex_destroy(&a->unw_lock);
	pthread_mutex_destroy(&a->win_lock);
	pthread_mutex_destroy(&a->state_lock);
	pthread_mutex_destroy(&a->discover_lock);
	pthread_cond_destroy(&a->discover_wake);
	pp_pid_cache__free(a->pcache);
	free(a->pend);
	free(a);
}
