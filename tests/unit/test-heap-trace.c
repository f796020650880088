/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Heap tracer on real processes (tests/workloads/heap/sites.c): real
 * uprobes, real allocators (glibc, jemalloc, static musl).
 *
 * args: <glibc sites> [--jemalloc=<path>] [--musl=<path>]
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "heap/heap.h"
#include "unwind/unwind.h"

static const char *wl_glibc, *wl_jemalloc, *wl_musl;
/* The child of the running test, killed by the teardown if it fails. */
static pid_t cur_child;

#define R_DEFAULT 524288.0

/* Sizes of sites.c */
enum { SZ_A = 4000, SZ_B = 16010, SZ_C = 65000, SZ_RA = 5555 };

struct live_ent {
	uint64_t addr, size;
};

#define HT_SIZE (1u << 20)

struct ctx {
	pid_t pid;
	struct live_ent *ht;
	uint64_t allocs_by_size[5], frees_by_size[5];
	uint64_t allocs, frees, bad_pid;
	uint64_t other_sizes[16][2];
	uint64_t site_a, main_fn;
	struct pp_unwinder *unw;
	unsigned unwound, through_site_a, through_main;
};

static int size_idx(uint64_t s)
{
	switch (s) {
	case SZ_A:
		return 0;
	case SZ_B:
		return 1;
	case SZ_C:
		return 2;
	case SZ_RA:
		return 3;
	default:
		return 4;
	}
}

static struct live_ent *ht_find(struct live_ent *ht, uint64_t addr, bool insert)
{
	uint64_t h = (addr * 0x9E3779B97F4A7C15ull) >> 44;

	for (unsigned i = 0; i < HT_SIZE; i++) {
		struct live_ent *e = &ht[(h + i) & (HT_SIZE - 1)];

		if (e->addr == addr)
			return e;
		if (e->addr == 0)
			return insert ? e : NULL;
	}
	return NULL;
}

static void on_event(void *arg, const struct pp_heap_event *ev)
{
	struct ctx *c = arg;
	struct live_ent *e;

	if (ev->pid != c->pid) {
		c->bad_pid++;
		return;
	}
	if (ev->type == PP_HEAP_ALLOC) {
		c->allocs++;
		c->allocs_by_size[size_idx(ev->size)]++;
		if (size_idx(ev->size) == 4) {
			for (int i = 0; i < 16; i++) {
				if (c->other_sizes[i][0] == ev->size || !c->other_sizes[i][1]) {
					c->other_sizes[i][0] = ev->size;
					c->other_sizes[i][1]++;
					break;
				}
			}
		}
		e = ht_find(c->ht, ev->addr, true);
		if (e) {
			e->addr = ev->addr;
			e->size = ev->size;
		}
		if (c->unw && ev->size == SZ_A && c->unwound < 20 && ev->regs_valid) {
			uint64_t pcs[64];
			size_t n = 0;
			unsigned flags = 0;
			bool sa = false, mn = false;

			if (pp_unwinder__unwind(c->unw, &ev->regs, ev->stack, ev->stack_len, pcs,
						64, &n, &flags) == 0) {
				c->unwound++;
				for (size_t i = 0; i < n; i++) {
					sa |= pcs[i] >= c->site_a && pcs[i] < c->site_a + 512;
					mn |= pcs[i] >= c->main_fn && pcs[i] < c->main_fn + 4096;
				}
				c->through_site_a += sa;
				c->through_main += sa && mn;
			}
		}
	} else {
		c->frees++;
		c->frees_by_size[size_idx(ev->size)]++;
		e = ht_find(c->ht, ev->addr, false);
		if (e)
			e->size = 0; /* tombstone: keep addr so probing still works */
	}
}

/* Estimated live bytes of one size: sum of sampled sizes scaled. */
static double live_estimate(struct ctx *c, uint64_t size, double rate, uint64_t *ret_n)
{
	double scale = rate <= 1 ? 1.0 : 1.0 / (1.0 - exp(-(double)size / rate));
	uint64_t n = 0;

	for (unsigned i = 0; i < HT_SIZE; i++)
		if (c->ht[i].addr && c->ht[i].size == size)
			n++;
	*ret_n = n;
	return (double)n * (double)size * scale;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

struct child {
	pid_t pid;
	int out;
	char buf[4096];
	size_t len;
};

static bool child_line(struct child *ch, const char *prefix, int timeout_ms, char *line, size_t n)
{
	uint64_t waited = 0;

	for (;;) {
		char *nl;

		ch->buf[ch->len] = '\0';
		while ((nl = strchr(ch->buf, '\n'))) {
			size_t l = (size_t)(nl - ch->buf) + 1;
			bool match = strncmp(ch->buf, prefix, strlen(prefix)) == 0;

			if (match && line)
				snprintf(line, n, "%.*s", (int)(l - 1), ch->buf);
			memmove(ch->buf, nl + 1, ch->len - l + 1);
			ch->len -= l;
			if (match)
				return true;
		}
		struct pollfd p = { .fd = ch->out, .events = POLLIN };
		if (poll(&p, 1, 50) == 1) {
			ssize_t r = read(ch->out, ch->buf + ch->len, sizeof(ch->buf) - 1 - ch->len);

			if (r <= 0)
				return false;
			ch->len += (size_t)r;
		}
		waited += 50;
		if (waited > (uint64_t)timeout_ms)
			return false;
	}
}

static void spawn(struct child *ch, const char *path, const char *mode)
{
	int p[2];

	memset(ch, 0, sizeof(*ch));
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	ch->pid = fork();
	assert_true(ch->pid >= 0);
	if (ch->pid == 0) {
		dup2(p[1], 1);
		execl(path, path, mode, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	ch->out = p[0];
	cur_child = ch->pid;
}

static int teardown(void **state)
{
	int st;

	(void)state;
	if (cur_child > 0) {
		kill(cur_child, SIGKILL);
		waitpid(cur_child, &st, 0);
		cur_child = 0;
	}
	return 0;
}

static void reap(struct child *ch)
{
	int st;

	cur_child = 0;
	kill(ch->pid, SIGKILL);
	waitpid(ch->pid, &st, 0);
	close(ch->out);
}

struct run {
	const char *path;
	const char *mode;
	double rate;
	const char *want_allocator; /* prefix */
	bool unwind;
	bool no_session;
	double budget; /* > 0: pause policy with this budget, expect a pause */
};

static void run_workload(const struct run *rn)
{
	/* this suite tests the uprobe path (heap.mode uprobe) */
	struct pp_heap_opts o = { .sample_rate = (uint64_t)rn->rate,
				  .max_live = 1u << 18,
				  .stack_bytes = 16384,
				  .budget_percent = 100,
				  .over_budget = PP_HEAP_POLICY_WARN,
				  .no_session = rn->no_session,
				  .mode = PP_HEAP_MODE_UPROBE,
				  /* This suite checks sampled counts exactly, so every
				   * event must arrive however late this thread reads:
				   * the ring holds a whole run. The largest is "full"
				   * at the default rate: ~2,100 sampled allocations
				   * (sum of n(1-exp(-size/R)) over the sizes) of up to
				   * 16 KiB of stack each, ~35 MiB. Drops on a slowed
				   * consumer with the 4 MiB default (heap.ring_mib) are
				   * counted and tested in integration-heap and below. */
				  .ring_bytes = 64u << 20 };
	struct ctx *c = calloc(1, sizeof(*c));
	struct pp_heap_proc_stats ps;
	struct pp_heap_stats hs;
	struct pp_heap_tracer *t;
	struct child ch;
	char line[256];
	bool full = strcmp(rn->mode, "full") == 0;
	int fds0, fds1;
	uint64_t n;

	assert_non_null(c);
	if (rn->budget > 0) {
		o.budget_percent = rn->budget;
		o.over_budget = PP_HEAP_POLICY_PAUSE;
	}
	c->ht = calloc(HT_SIZE, sizeof(*c->ht));
	assert_non_null(c->ht);
	fds0 = count_fds();
	t = pp_heap_tracer__new(&o, on_event, c);
	assert_non_null(t);

	spawn(&ch, rn->path, rn->mode);
	assert_true(child_line(&ch, "waiting", 10000, line, sizeof(line)));
	assert_int_equal(sscanf(line, "waiting %" SCNx64 " %" SCNx64, &c->site_a, &c->main_fn), 2);
	c->pid = ch.pid;
	fds1 = count_fds();
	assert_int_equal(pp_heap_tracer__attach(t, ch.pid), 0);
	assert_int_equal(pp_heap_tracer__attach(t, ch.pid), -EEXIST);
	assert_int_equal(pp_heap_tracer__proc_stats(t, ch.pid, &ps), 0);
	print_message("%s %s: allocator %s, %u probes, %u at +0, %s (%s)\n", rn->path, rn->mode,
		      ps.allocator, ps.probes, ps.probe_fallbacks,
		      ps.session ? "session" : "uretprobe", pp_heap_tracer__session_reason(t));
	assert_true(strncmp(ps.allocator, rn->want_allocator, strlen(rn->want_allocator)) == 0);
	assert_true(ps.probes >= 6);
	assert_int_equal(ps.session, !rn->no_session);
	if (rn->unwind)
		c->unw = pp_unwinder__new(ch.pid, &(struct pp_unwinder_opts){ 0 });

	kill(ch.pid, SIGUSR1);
	bool ready = false;
	for (int i = 0; i < 1200 && !ready; i++) {
		assert_true(pp_heap_tracer__poll(t, 50) >= 0);
		ready = child_line(&ch, "ready", 0, NULL, 0);
	}
	assert_true(ready);
	for (int i = 0; i < 3; i++)
		assert_true(pp_heap_tracer__poll(t, 10) >= 0);

	assert_int_equal(pp_heap_tracer__proc_stats(t, ch.pid, &ps), 0);
	pp_heap_tracer__stats(t, &hs);
	print_message("  mallocs %" PRIu64 " frees %" PRIu64 " bytes %" PRIu64 " sampled %" PRIu64
		      " events %" PRIu64 " drops rb %" PRIu64 " live %" PRIu64 " stack %" PRIu64
		      "\n",
		      ps.mallocs, ps.frees, ps.alloc_bytes, ps.sampled, hs.events, hs.ringbuf_drops,
		      hs.live_table_full, hs.stack_read_errors);
	print_message("  nested %" PRIu64 ", other sizes:", hs.nested);
	for (int i = 0; i < 16 && c->other_sizes[i][1]; i++)
		print_message(" %" PRIu64 "x%" PRIu64, c->other_sizes[i][0], c->other_sizes[i][1]);
	print_message("\n");
	assert_int_equal(c->bad_pid, 0);
	if (rn->rate > 1) /* the ring holds every event of the run */
		assert_int_equal(hs.ringbuf_drops, 0);
	assert_int_equal(hs.live_table_full, 0);

	/* Call counters: every call after the signal; libc adds a few of its
	 * own (thread creation, stdio). */
	uint64_t n_a = full ? 16777 : 200, n_b = full ? 1048 : 50, n_c = full ? 16520 : 100;
	uint64_t want_m = n_a + n_b + n_c + 10 + 1 + 4, want_f = n_c + 9 + 4;
	if (rn->budget > 0) {
		/* When the guard pauses depends on the machine's speed and load:
		 * the workload may be paused anywhere in its run, so only upper
		 * bounds hold for the counters. What must hold is the decision:
		 * the tracer paused because its own estimate exceeded the budget,
		 * and it counts nothing after the pause. */
		for (int i = 0; i < 30 && !ps.paused; i++) {
			assert_true(pp_heap_tracer__poll(t, 100) >= 0);
			assert_int_equal(pp_heap_tracer__proc_stats(t, ch.pid, &ps), 0);
		}
		print_message("  paused %d at est. overhead %.2f%% (budget %.2f%%)\n", ps.paused,
			      ps.pause_overhead_percent, rn->budget);
		assert_true(ps.over_budget && ps.paused);
		assert_true(ps.pause_overhead_percent > rn->budget);
		assert_true(ps.mallocs <= want_m + 64 && ps.frees <= want_f + 64);
		assert_true(count_fds() < fds1 + 2); /* links released, pidfd kept */
		uint64_t m0 = ps.mallocs, f0 = ps.frees;
		kill(ch.pid, SIGUSR1); /* the workload exits: its exit path is not counted */
		for (int i = 0; i < 5; i++)
			assert_true(pp_heap_tracer__poll(t, 50) >= 0);
		assert_int_equal(pp_heap_tracer__proc_stats(t, ch.pid, &ps), 0);
		assert_int_equal(ps.mallocs, m0);
		assert_int_equal(ps.frees, f0);
		goto detach;
	}
	assert_true(ps.mallocs >= want_m && ps.mallocs <= want_m + 64);
	assert_true(ps.frees >= want_f && ps.frees <= want_f + 64);
	uint64_t want_bytes =
		n_a * SZ_A + n_b * SZ_B + n_c * SZ_C + SZ_RA + 1111 + 2224 + 3333 + 4444;
	for (unsigned i = 0; i < 10; i++)
		want_bytes += 10001 + i;
	assert_true(ps.alloc_bytes >= want_bytes && ps.alloc_bytes <= want_bytes + (1 << 20));

	if (rn->rate <= 1 && hs.ringbuf_drops) {
		/* Every allocation is an event, and a consumer slowed down (ASan,
		 * a loaded machine) let the ring fill: each missing event must be
		 * one of the drops counted. */
		const uint64_t want[4] = { n_a, n_b, n_c, n_c },
			       got[4] = { c->allocs_by_size[0], c->allocs_by_size[1],
					  c->allocs_by_size[2], c->frees_by_size[2] };
		uint64_t miss = 0;

		for (int i = 0; i < 4; i++) {
			assert_true(got[i] <= want[i]);
			miss += want[i] - got[i];
		}
		print_message("  %" PRIu64 " events missing, %" PRIu64 " dropped\n", miss,
			      hs.ringbuf_drops);
		assert_true(miss <= hs.ringbuf_drops);
		assert_int_equal(ps.sampled, c->allocs);
	} else if (rn->rate <= 1) {
		/* Every allocation is an event: exact. */
		assert_int_equal(c->allocs_by_size[0], n_a);
		assert_int_equal(c->allocs_by_size[1], n_b);
		assert_int_equal(c->allocs_by_size[2], n_c);
		assert_int_equal(c->frees_by_size[2], n_c);
		assert_int_equal(c->allocs_by_size[3], 1);
		for (int i = 0; i < 16; i++) {
			uint64_t sz = c->other_sizes[i][0];

			if (sz == 1111 || sz == 2224 || sz == 3333 || sz == 4444 ||
			    (sz >= 10001 && sz <= 10010))
				assert_int_equal(c->other_sizes[i][1], 1);
		}
		assert_int_equal(ps.sampled, c->allocs);
		assert_true(live_estimate(c, SZ_A, 1, &n) == (double)n_a * SZ_A);
		assert_true(live_estimate(c, SZ_B, 1, &n) == (double)n_b * SZ_B);
		assert_true(live_estimate(c, SZ_C, 1, &n) == 0);
		assert_true(live_estimate(c, 10010, 1, &n) == 10010);
		assert_true(live_estimate(c, 10005, 1, &n) == 0);
		assert_true(live_estimate(c, 1111, 1, &n) == 0 &&
			    live_estimate(c, 2224, 1, &n) == 0);
		assert_true(live_estimate(c, 3333, 1, &n) == 0 &&
			    live_estimate(c, 4444, 1, &n) == 0);
	} else {
		/* Poisson: each block of size s is sampled with p = 1-exp(-s/R);
		 * allow 5 standard deviations of the scaled estimate. */
		const struct {
			uint64_t size, n;
		} sites[] = { { SZ_A, n_a }, { SZ_B, n_b } };

		for (unsigned i = 0; i < 2; i++) {
			double p = 1 - exp(-(double)sites[i].size / rn->rate);
			double truth = (double)sites[i].n * (double)sites[i].size;
			double sd =
				sqrt((double)sites[i].n * p * (1 - p)) * (double)sites[i].size / p;
			double est = live_estimate(c, sites[i].size, rn->rate, &n);

			print_message("  size %" PRIu64 ": live est %.1f MiB (truth %.1f, sd "
				      "%.1f), %" PRIu64 " samples\n",
				      sites[i].size, est / 1048576, truth / 1048576, sd / 1048576,
				      n);
			assert_true(fabs(est - truth) <= 5 * sd);
		}
		double pc = 1 - exp(-(double)SZ_C / rn->rate);
		double want_c = (double)n_c * pc, sd_c = sqrt(want_c * (1 - pc));
		assert_true(fabs((double)c->allocs_by_size[2] - want_c) <= 5 * sd_c);
		assert_int_equal(c->frees_by_size[2], c->allocs_by_size[2]);
		assert_true(live_estimate(c, SZ_C, rn->rate, &n) == 0);
	}
	if (c->unw) {
		print_message("  unwound %u, through site_a %u, site_a..main %u\n", c->unwound,
			      c->through_site_a, c->through_main);
		assert_true(c->unwound >= 10);
		assert_true(c->through_site_a >= c->unwound * 9 / 10);
		assert_true(c->through_main >= c->unwound * 9 / 10);
		pp_unwinder__free(c->unw);
	}

detach:
	/* Detach releases every fd the attach took. */
	assert_int_equal(pp_heap_tracer__detach(t, ch.pid), 0);
	assert_int_equal(pp_heap_tracer__detach(t, ch.pid), -ENOENT);
	assert_int_equal(count_fds(), fds1);
	reap(&ch);
	pp_heap_tracer__free(t);
	assert_int_equal(count_fds(), fds0);
	free(c->ht);
	free(c);
}

static void test_glibc_exact(void **state)
{
	(void)state;
	run_workload(&(struct run){ .path = wl_glibc,
				    .mode = "small",
				    .rate = 1,
				    .want_allocator = "libc.so.6",
				    .unwind = true });
}

static void test_glibc_uretprobe(void **state)
{
	(void)state;
	run_workload(&(struct run){ .path = wl_glibc,
				    .mode = "small",
				    .rate = 1,
				    .want_allocator = "libc.so.6",
				    .unwind = true,
				    .no_session = true });
}

static void test_budget_pause(void **state)
{
	(void)state;
	run_workload(&(struct run){ .path = wl_glibc,
				    .mode = "full",
				    .rate = R_DEFAULT,
				    .want_allocator = "libc.so.6",
				    .unwind = false,
				    .budget = 0.1 });
}

static void test_glibc_sampled(void **state)
{
	(void)state;
	run_workload(&(struct run){ .path = wl_glibc,
				    .mode = "full",
				    .rate = R_DEFAULT,
				    .want_allocator = "libc.so.6",
				    .unwind = false });
}

static void test_jemalloc(void **state)
{
	(void)state;
	if (!wl_jemalloc)
		skip();
	run_workload(&(struct run){ .path = wl_jemalloc,
				    .mode = "small",
				    .rate = 1,
				    .want_allocator = "libjemalloc.so.2",
				    .unwind = false });
	run_workload(&(struct run){ .path = wl_jemalloc,
				    .mode = "full",
				    .rate = R_DEFAULT,
				    .want_allocator = "libjemalloc.so.2",
				    .unwind = false });
}

static void test_musl_static(void **state)
{
	(void)state;
	if (!wl_musl)
		skip();
	run_workload(&(struct run){ .path = wl_musl,
				    .mode = "small",
				    .rate = 1,
				    .want_allocator = "static:",
				    .unwind = false });
	run_workload(&(struct run){ .path = wl_musl,
				    .mode = "full",
				    .rate = R_DEFAULT,
				    .want_allocator = "static:",
				    .unwind = false });
}

/* Dead pid, and a target that dies while attached. */
static void test_exit(void **state)
{
	struct pp_heap_opts o = {
		.sample_rate = 1, .max_live = 4096, .stack_bytes = 4096, .budget_percent = 100
	};
	struct ctx *c = calloc(1, sizeof(*c));
	struct pp_heap_proc_stats ps;
	struct pp_heap_tracer *t;
	struct child ch;
	int st, fds1;

	(void)state;
	c->ht = calloc(HT_SIZE, sizeof(*c->ht));
	t = pp_heap_tracer__new(&o, on_event, c);
	assert_non_null(t);

	spawn(&ch, wl_glibc, "small");
	assert_true(child_line(&ch, "waiting", 10000, NULL, 0));
	kill(ch.pid, SIGKILL);
	waitpid(ch.pid, &st, 0);
	cur_child = 0;
	assert_int_equal(pp_heap_tracer__attach(t, ch.pid), -ESRCH);
	close(ch.out);

	spawn(&ch, wl_glibc, "small");
	assert_true(child_line(&ch, "waiting", 10000, NULL, 0));
	c->pid = ch.pid;
	fds1 = count_fds();
	assert_int_equal(pp_heap_tracer__attach(t, ch.pid), 0);
	kill(ch.pid, SIGUSR1);
	assert_true(pp_heap_tracer__poll(t, 20) >= 0);
	kill(ch.pid, SIGKILL);
	waitpid(ch.pid, &st, 0);
	cur_child = 0;
	for (int i = 0; i < 30; i++) {
		assert_true(pp_heap_tracer__poll(t, 50) >= 0);
		assert_int_equal(pp_heap_tracer__proc_stats(t, ch.pid, &ps), 0);
		if (ps.exited)
			break;
	}
	assert_true(ps.exited);
	assert_int_equal(pp_heap_tracer__detach(t, ch.pid), 0);
	assert_int_equal(count_fds(), fds1);
	close(ch.out);
	pp_heap_tracer__free(t);
	free(c->ht);
	free(c);
}

/*
 * FREE events while the ring buffer is full: the workload allocates 200
 * blocks (delivered), fills the buffer (nothing drains it), then frees the
 * 200 blocks. Each free must reach user space once the buffer drains (or
 * be counted as lost): no allocation stays live for ever.
 */
static void test_free_ring_full(void **state)
{
	struct pp_heap_opts o = { .sample_rate = 1,
				  .max_live = 1u << 18,
				  .stack_bytes = 16384,
				  .budget_percent = 100,
				  .over_budget = PP_HEAP_POLICY_WARN,
				  .mode = PP_HEAP_MODE_UPROBE };
	struct ctx *c = calloc(1, sizeof(*c));
	struct pp_heap_stats hs;
	struct pp_heap_tracer *t;
	struct child ch;
	uint64_t phantoms = 0;

	(void)state;
	assert_non_null(c);
	c->ht = calloc(HT_SIZE, sizeof(*c->ht));
	assert_non_null(c->ht);
	t = pp_heap_tracer__new(&o, on_event, c);
	assert_non_null(t);
	spawn(&ch, wl_glibc, "lostfree");
	assert_true(child_line(&ch, "waiting", 10000, NULL, 0));
	c->pid = ch.pid;
	assert_int_equal(pp_heap_tracer__attach(t, ch.pid), 0);
	kill(ch.pid, SIGUSR1);
	/* not drained meanwhile: the ring buffer fills up */
	assert_true(child_line(&ch, "ready", 120000, NULL, 0));
	kill(ch.pid, SIGUSR1);
	assert_true(child_line(&ch, "freed", 60000, NULL, 0));
	for (int i = 0; i < 400; i++)
		if (pp_heap_tracer__poll(t, 20) == 0 && i > 20)
			break;
	pp_heap_tracer__stats(t, &hs);
	live_estimate(c, SZ_A, 1, &phantoms);
	print_message("  allocs %" PRIu64 " frees %" PRIu64 " ring drops %" PRIu64 "\n", c->allocs,
		      c->frees, hs.ringbuf_drops);
	print_message("  frees deferred %" PRIu64 " lost %" PRIu64 ", site_a still live %" PRIu64
		      "\n",
		      hs.frees_deferred, hs.frees_lost, phantoms);
	assert_true(hs.ringbuf_drops > 0); /* the test did fill the buffer */
	assert_true(c->allocs_by_size[0] > 0);
	assert_true(phantoms <= hs.frees_lost);
	kill(ch.pid, SIGUSR1);
	int st;
	waitpid(ch.pid, &st, 0);
	cur_child = 0;
	close(ch.out);
	pp_heap_tracer__free(t);
	free(c->ht);
	free(c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_glibc_exact, teardown),
		cmocka_unit_test_teardown(test_glibc_sampled, teardown),
		cmocka_unit_test_teardown(test_glibc_uretprobe, teardown),
		cmocka_unit_test_teardown(test_budget_pause, teardown),
		cmocka_unit_test_teardown(test_jemalloc, teardown),
		cmocka_unit_test_teardown(test_musl_static, teardown),
		cmocka_unit_test_teardown(test_exit, teardown),
		cmocka_unit_test_teardown(test_free_ring_full, teardown),
	};

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--jemalloc=", 11) == 0)
			wl_jemalloc = argv[i] + 11;
		else if (strncmp(argv[i], "--musl=", 7) == 0)
			wl_musl = argv[i] + 7;
		else
			wl_glibc = argv[i];
	}
	if (!wl_glibc) {
		fprintf(stderr, "usage: %s <heap_sites> [--jemalloc=P] [--musl=P]\n", argv[0]);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
