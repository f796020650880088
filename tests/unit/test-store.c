/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile store without perf or BPF: processes and maps are made up, a fake
 * symbolizer names every address "fn_<hex>" (and can be held, to show the
 * sample path never waits for it), profiles are rendered and decoded.
 * Deltas across snapshots, heap scaling, the lifecycle of exited processes
 * (released once their window closes, snapshots surviving slot reuse) and
 * caps counting what is held now.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>

#include "pprof/pprof.h"
#include "profile.pb-c.h"
#include "store/store.h"

typedef Perftools__Profiles__Profile Profile;

/* pids no test machine runs (above the default pid_max of 4194304). */
#define PID_BASE 0x3ff00000

struct fake_sym {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool hold; /* resolve waits while set */
	bool in_resolve;
	unsigned calls;
	bool by_offset; /* name file addresses "off_<file offset>" */
	bool hostile; /* names with a newline and invalid UTF-8, as a hostile ELF may hold */
};

static int fake_name(uint64_t addr, struct pp_sym_result *ret)
{
	ret->frames = calloc(1, sizeof(*ret->frames));
	if (!ret->frames)
		return -ENOMEM;
	char buf[64];
	snprintf(buf, sizeof(buf), "fn_%llx", (unsigned long long)addr);
	ret->frames[0].function = strdup(buf);
	ret->frames[0].system_name = strdup(buf);
	ret->n = 1;
	ret->has_function = true;
	return 0;
}

static int fake_resolve(void *ctx, pid_t pid, const struct pp_map *m, const uint8_t *build_id,
			size_t build_id_len, uint64_t addr, struct pp_sym_result *ret)
{
	struct fake_sym *f = ctx;
	pthread_mutex_lock(&f->lock);
	f->calls++;
	f->in_resolve = true;
	pthread_cond_broadcast(&f->cond);
	while (f->hold)
		pthread_cond_wait(&f->cond, &f->lock);
	f->in_resolve = false;
	bool by_offset = f->by_offset, hostile = f->hostile;
	pthread_mutex_unlock(&f->lock);
	if (hostile) {
		int r = fake_name(addr, ret);

		if (r == 0) {
			free(ret->frames[0].function);
			ret->frames[0].function = strdup("evil\n#\t0x1\tforged\xff");
		}
		return r;
	}
	assert_true(addr >= m->start && addr < m->end);
	if (by_offset) {
		int r = fake_name(addr - m->start + m->offset, ret);
		if (r == 0) {
			free(ret->frames[0].function);
			if (asprintf(&ret->frames[0].function, "off_%llx",
				     (unsigned long long)(addr - m->start + m->offset)) < 0)
				ret->frames[0].function = NULL;
		}
		return r;
	}
	return fake_name(addr, ret);
}

static int fake_resolve_kernel(void *ctx, uint64_t addr, struct pp_sym_result *ret)
{
	return fake_name(addr, ret);
}

static int fake_resolve_jit(void *ctx, pid_t pid, uint64_t addr, struct pp_sym_result *ret)
{
	return -ENOENT;
}

static const struct pp_store_sym_ops fake_ops = {
	.resolve = fake_resolve,
	.resolve_kernel = fake_resolve_kernel,
	.resolve_jit = fake_resolve_jit,
};

static struct fake_sym fake = { .lock = PTHREAD_MUTEX_INITIALIZER,
				.cond = PTHREAD_COND_INITIALIZER };

static struct pp_store *new_store(struct pp_store_opts o)
{
	o.sym_ops = &fake_ops;
	o.sym_ctx = &fake;
	struct pp_store *st = pp_store__new(&o, NULL);
	assert_non_null(st);
	return st;
}

/* A process with one executable mapping 0x400000-0x500000 of /fake/app. */
static void add_proc(struct pp_store *st, pid_t pid, uint64_t start_time)
{
	static const char text[] = "00400000-00500000 r-xp 00000000 00:00 4242 /fake/app\n"
				   "7ffe0000-7fff0000 rw-p 00000000 00:00 0 [stack]\n";
	struct pp_maps maps = { 0 };
	assert_int_equal(pp_maps__parse(text, sizeof(text) - 1, &maps, NULL), 0);
	struct pp_proc_info info = { .pid = pid, .start_time = start_time };
	snprintf(info.comm, sizeof(info.comm), "app%d", pid - PID_BASE);
	assert_int_equal(pp_store__process_update(st, &info, &maps, 0), 0);
	pp_maps__free(&maps);
}

/* A process mapping file `inode` (dev 00:00, no build id) at base, text
 * at file offset 0x1000, and an anonymous JIT area. */
static void add_proc_at(struct pp_store *st, pid_t pid, uint64_t base, unsigned inode)
{
	char text[512];
	int n = snprintf(text, sizeof(text),
			 "%08llx-%08llx r--p 00000000 00:00 %u /fake/lib%u.so\n"
			 "%08llx-%08llx r-xp 00001000 00:00 %u /fake/lib%u.so\n"
			 "%08llx-%08llx rwxp 00000000 00:00 0 \n",
			 (unsigned long long)base, (unsigned long long)base + 0x1000, inode, inode,
			 (unsigned long long)base + 0x1000, (unsigned long long)base + 0x11000,
			 inode, inode, (unsigned long long)base + 0x20000,
			 (unsigned long long)base + 0x21000);
	struct pp_maps maps = { 0 };
	assert_int_equal(pp_maps__parse(text, (size_t)n, &maps, NULL), 0);
	struct pp_proc_info info = { .pid = pid, .start_time = 1 };
	snprintf(info.comm, sizeof(info.comm), "w%d", pid - PID_BASE);
	assert_int_equal(pp_store__process_update(st, &info, &maps, 0), 0);
	pp_maps__free(&maps);
}

static int cpu(struct pp_store *st, pid_t pid, uint64_t leaf, uint64_t caller, unsigned times)
{
	uint64_t pcs[2] = { leaf, caller };
	int r = 0;
	for (unsigned i = 0; i < times && !r; i++)
		r = pp_store__add_cpu(st, pid, 0, pcs, 2, NULL, 0, 1000);
	return r;
}

static Profile *render(struct pp_store *st, enum pp_profile_kind kind,
		       const struct pp_store_snapshot *base)
{
	struct pp_store_render_opts o = { .kind = kind, .base = base, .group = -1 };
	struct pp_buf b = { 0 };
	assert_int_equal(pp_store__render(st, &o, &b), 0);
	Profile *p = NULL;
	assert_int_equal(pp_pprof_decode(b.data, b.len, &p), 0);
	pp_buf_free(&b);
	char err[256];
	if (pp_pprof_check(p, err, sizeof(err)))
		fail_msg("check failed: %s", err);
	return p;
}

/* Sum of value vi over samples whose leaf function is name. */
static int64_t leaf_value(const Profile *p, const char *name, size_t vi)
{
	int64_t sum = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		assert_true(s->n_location_id > 0);
		const Perftools__Profiles__Location *l = p->location[s->location_id[0] - 1];
		if (!l->n_line)
			continue;
		const Perftools__Profiles__Function *f = p->function[l->line[0]->function_id - 1];
		if (!strcmp(p->string_table[f->name], name))
			sum += s->value[vi];
	}
	return sum;
}

static struct pp_store_stats stats(struct pp_store *st)
{
	struct pp_store_stats s;
	pp_store__stats(st, &s);
	return s;
}

/* Symbolization never runs on the sample path nor under the store lock. */
/* Names from the target's files stay one field of one line in the text
 * (debug=1) output: no forged line. */
static void test_text_hostile_names(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ 0 });
	struct pp_store_render_opts o = { .kind = PP_PROFILE_GOROUTINE, .group = -1, .debug = 1 };
	struct pp_buf b = { 0 };
	uint64_t pcs[2] = { 0x401000, 0x402001 };

	(void)state;
	fake.hostile = true;
	add_proc(st, PID_BASE + 1, 1);
	assert_int_equal(pp_store__gauge_begin(st, PP_PROFILE_GOROUTINE), 0);
	assert_int_equal(pp_store__gauge_add(st, PP_PROFILE_GOROUTINE, PID_BASE + 1, PID_BASE + 1,
					     pcs, 2),
			 0);
	pp_store__gauge_end(st, PP_PROFILE_GOROUTINE);
	assert_int_equal(pp_store__render(st, &o, &b), 0);
	fake.hostile = false;
	assert_non_null(b.data);
	assert_non_null(strstr(b.data, "evil\\n#\\t0x1\\tforged\\xff"));
	assert_null(strstr(b.data, "\n#\t0x1\tforged"));
	pp_buf_free(&b);
	pp_store__free(st);
}

static void test_symbolized_by_worker(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ 0 });
	add_proc(st, PID_BASE + 1, 1);
	pthread_mutex_lock(&fake.lock);
	fake.hold = true;
	pthread_mutex_unlock(&fake.lock);
	/* The worker blocks in the first resolve; samples still go in... */
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x402001, 3), 0);
	pthread_mutex_lock(&fake.lock);
	while (!fake.in_resolve)
		pthread_cond_wait(&fake.cond, &fake.lock);
	pthread_mutex_unlock(&fake.lock);
	/* ...and the store lock is free while it resolves. */
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401100, 0x402001, 2), 0);
	assert_int_equal(stats(st).cpu_samples, 5);
	pthread_mutex_lock(&fake.lock);
	fake.hold = false;
	pthread_cond_broadcast(&fake.cond);
	pthread_mutex_unlock(&fake.lock);
	/* The render waits for the queued locations: every frame named. */
	Profile *p = render(st, PP_PROFILE_CPU, NULL);
	assert_int_equal(leaf_value(p, "fn_401000", 0), 3);
	assert_int_equal(leaf_value(p, "fn_401100", 0), 2);
	assert_int_equal(leaf_value(p, "fn_401000", 1), 3000);
	pp_pprof_profile__free(p);
	pp_store__free(st);
}

static void test_deltas(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ 0 });
	add_proc(st, PID_BASE + 1, 1);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x402001, 3), 0);
	struct pp_store_snapshot *s1 = pp_store__snapshot(st, PP_PROFILE_CPU);
	assert_non_null(s1);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x402001, 2), 0);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x403000, 0x402001, 5), 0);
	Profile *p = render(st, PP_PROFILE_CPU, s1);
	assert_int_equal(leaf_value(p, "fn_401000", 0), 2);
	assert_int_equal(leaf_value(p, "fn_403000", 0), 5);
	assert_int_equal(leaf_value(p, "fn_403000", 1), 5000);
	pp_pprof_profile__free(p);
	p = render(st, PP_PROFILE_CPU, NULL);
	assert_int_equal(leaf_value(p, "fn_401000", 0), 5);
	pp_pprof_profile__free(p);
	/* Nothing new since s2: an empty delta. */
	struct pp_store_snapshot *s2 = pp_store__snapshot(st, PP_PROFILE_CPU);
	p = render(st, PP_PROFILE_CPU, s2);
	assert_int_equal(p->n_sample, 0);
	pp_pprof_profile__free(p);
	pp_store_snapshot__free(s1);
	pp_store_snapshot__free(s2);
	pp_store__free(st);
}

/*
 * Window baselines share: the second snapshot holds only the stack that
 * changed since the first (an overlay on it), yet every delta is exact
 * against its own snapshot; the bytes they hold are capped (EAGAIN).
 */
static void test_snapshot_overlays(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ 0 });
	add_proc(st, PID_BASE + 1, 1);
	for (uint64_t f = 0; f < 8; f++)
		assert_int_equal(cpu(st, PID_BASE + 1, 0x401000 + f * 0x1000, 0x40f001, 1), 0);
	struct pp_store_snapshot *s1 = pp_store__snapshot(st, PP_PROFILE_CPU);
	assert_non_null(s1);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x40f001, 2), 0);
	struct pp_store_snapshot *s2 = pp_store__snapshot(st, PP_PROFILE_CPU);
	struct pp_store_snapshot *s3 = pp_store__snapshot(st, PP_PROFILE_CPU);
	assert_non_null(s2);
	assert_non_null(s3);
	struct pp_store_stats ss = stats(st);
	assert_int_equal(ss.snapshots, 3);
	assert_int_equal(ss.snapshots_full, 1);
	assert_int_equal(ss.snapshot_shares, 2);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x402000, 0x40f001, 4), 0);
	/* s1 is freed first: the overlays keep it. */
	Profile *p = render(st, PP_PROFILE_CPU, s1);
	assert_int_equal(leaf_value(p, "fn_401000", 0), 2);
	assert_int_equal(leaf_value(p, "fn_402000", 0), 4);
	pp_pprof_profile__free(p);
	pp_store_snapshot__free(s1);
	p = render(st, PP_PROFILE_CPU, s2);
	assert_int_equal(leaf_value(p, "fn_401000", 0), 0);
	assert_int_equal(leaf_value(p, "fn_402000", 0), 4);
	assert_int_equal(p->n_sample, 1);
	pp_pprof_profile__free(p);
	pp_store_snapshot__free(s2);
	pp_store_snapshot__free(s3);
	ss = stats(st);
	assert_int_equal(ss.snapshots, 0);
	assert_int_equal(ss.snapshot_bytes, 0);
	pp_store__free(st);

	/* Over max_snapshot_bytes: refused with EAGAIN, counted. */
	st = new_store((struct pp_store_opts){ .max_snapshot_bytes = 1 });
	add_proc(st, PID_BASE + 1, 1);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x40f001, 1), 0);
	errno = 0;
	assert_null(pp_store__snapshot(st, PP_PROFILE_CPU));
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(stats(st).snapshots_refused, 1);
	pp_store__free(st);
}

/* Heap values are scaled by 1 / (1 - exp(-avg / rate)), like Go's. */
static void test_heap_scaling(void **state)
{
	const uint64_t rate = 4096;
	struct pp_store *st = new_store((struct pp_store_opts){ .heap_sample_rate = rate });
	add_proc(st, PID_BASE + 1, 1);
	uint64_t pcs[2] = { 0x401000, 0x402001 };
	for (uint64_t i = 0; i < 10; i++)
		assert_int_equal(pp_store__heap_alloc(st, PID_BASE + 1, 0, pcs, 2, 0x10000 + i * 64,
						      1024),
				 0);
	assert_int_equal(pp_store__heap_free(st, PID_BASE + 1, 0x10000), 0);
	double scale = 1.0 / (1.0 - exp(-1024.0 / (double)rate));
	Profile *p = render(st, PP_PROFILE_HEAP, NULL);
	assert_int_equal(leaf_value(p, "fn_401000", 0), llround(10 * scale));
	assert_int_equal(leaf_value(p, "fn_401000", 1), llround(10 * 1024 * scale));
	assert_int_equal(leaf_value(p, "fn_401000", 2), llround(9 * scale));
	assert_int_equal(leaf_value(p, "fn_401000", 3), llround(9 * 1024 * scale));
	pp_pprof_profile__free(p);
	struct pp_store_heap_stats hs;
	assert_int_equal(pp_store__heap_stats(st, PID_BASE + 1, &hs), 0);
	assert_int_equal(hs.inuse_objects, llround(9 * scale));
	/* Its live entries go with the process. */
	pp_store__process_exit(st, PID_BASE + 1);
	assert_int_equal(stats(st).live_entries, 0);
	pp_store__free(st);
}

/*
 * The live table starts small and doubles at half full: 5,000 live objects
 * in two processes (past several doublings), every one of them found by its
 * free; one process exiting takes only its own; past max_live, drops are
 * counted and nothing is lost of what was kept.
 */
static void test_live_table_grows(void **state)
{
	const uint64_t n = 5000;
	struct pp_store *st = new_store((struct pp_store_opts){ .max_live = 6000 });
	add_proc(st, PID_BASE + 1, 1);
	add_proc(st, PID_BASE + 2, 1);
	uint64_t pcs[2] = { 0x401000, 0x402001 };
	for (uint64_t i = 0; i < n; i++)
		for (int p = 1; p <= 2; p++)
			assert_int_equal(pp_store__heap_alloc(st, PID_BASE + p, 0, pcs, 2,
							      0x7f0000000000ull + i * 48, 100 * p),
					 0);
	assert_int_equal(stats(st).live_entries, 6000);
	assert_int_equal(stats(st).dropped_live, 2 * n - 6000);
	/* frees of the first 1,000 of process 1 (all kept), then of process 2's */
	for (uint64_t i = 0; i < 1000; i++)
		assert_int_equal(pp_store__heap_free(st, PID_BASE + 1, 0x7f0000000000ull + i * 48),
				 0);
	assert_int_equal(stats(st).live_entries, 5000);
	struct pp_store_heap_stats hs2;
	assert_int_equal(pp_store__heap_stats(st, PID_BASE + 2, &hs2), 0);
	pp_store__process_exit(st, PID_BASE + 1);
	struct pp_store_heap_stats hs2b;
	assert_int_equal(pp_store__heap_stats(st, PID_BASE + 2, &hs2b), 0);
	assert_int_equal(hs2b.inuse_objects, hs2.inuse_objects);
	uint64_t left = stats(st).live_entries;
	assert_true(left > 0 && left < 5000);
	/* process 2's kept objects are all found after the shrink */
	uint64_t freed = 0;
	for (uint64_t i = 0; i < n; i++)
		if (pp_store__heap_free(st, PID_BASE + 2, 0x7f0000000000ull + i * 48) == 0)
			freed++;
	assert_int_equal(freed, left);
	assert_int_equal(stats(st).live_entries, 0);
	pp_store__free(st);
}

static void wait_linger(void)
{
	usleep(20000); /* linger_ns is 1 ms in these tests */
}

/* An exited process is kept while a window opened before its exit is open,
 * released after. */
static void test_exited_released_after_window(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ .linger_ns = 1000000 });
	add_proc(st, PID_BASE + 1, 1);
	add_proc(st, PID_BASE + 2, 1);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x402001, 4), 0);
	assert_int_equal(cpu(st, PID_BASE + 2, 0x401000, 0x402001, 1), 0);
	struct pp_store_snapshot *win = pp_store__snapshot(st, PP_PROFILE_CPU);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x402001, 6), 0);
	pp_store__process_exit(st, PID_BASE + 1);
	assert_false(pp_store__has_process(st, PID_BASE + 1));
	/* Samples after its exit are not stored. */
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x402001, 1), -ENOSPC);
	wait_linger();
	pp_store__collect(st);
	struct pp_store_stats s = stats(st);
	assert_int_equal(s.procs_held, 2);
	assert_int_equal(s.released_procs, 0);
	/* The window still has the exited process' samples, named. */
	Profile *p = render(st, PP_PROFILE_CPU, win);
	assert_int_equal(leaf_value(p, "fn_401000", 0), 6);
	pp_pprof_profile__free(p);
	pp_store_snapshot__free(win);
	pp_store__collect(st);
	s = stats(st);
	assert_int_equal(s.procs_held, 1);
	assert_int_equal(s.procs, 1);
	assert_int_equal(s.released_procs, 1);
	assert_int_equal(s.stacks, 1); /* pid 2's */
	assert_int_equal(s.locations, 2);
	p = render(st, PP_PROFILE_CPU, NULL);
	assert_int_equal(leaf_value(p, "fn_401000", 0), 1);
	pp_pprof_profile__free(p);
	pp_store__free(st);
}

/* A snapshot taken after an exit does not hold the process; values are
 * keyed by stack id, so a slot reused by a new stack starts from zero. */
static void test_snapshot_survives_slot_reuse(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ .linger_ns = 1000000 });
	add_proc(st, PID_BASE + 1, 1);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x402001, 10), 0);
	pp_store__process_exit(st, PID_BASE + 1);
	struct pp_store_snapshot *win = pp_store__snapshot(st, PP_PROFILE_CPU);
	wait_linger();
	pp_store__collect(st);
	assert_int_equal(stats(st).released_procs, 1);
	assert_int_equal(stats(st).stacks, 0);
	/* The same pid again (a new process): its stack takes the freed slot. */
	add_proc(st, PID_BASE + 1, 2);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x402001, 3), 0);
	Profile *p = render(st, PP_PROFILE_CPU, win);
	assert_int_equal(leaf_value(p, "fn_401000", 0), 3);
	pp_pprof_profile__free(p);
	pp_store_snapshot__free(win);
	pp_store__free(st);
}

/* Caps bound what is held now: exited processes no window needs make room
 * before their linger ends; what still does not fit is counted. */
static void test_caps_count_current(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ .max_procs = 4, .max_stacks = 8 });
	for (int round = 0; round < 5; round++) {
		for (int i = 0; i < 4; i++) {
			add_proc(st, PID_BASE + 10 * round + i, 1);
			assert_int_equal(cpu(st, PID_BASE + 10 * round + i, 0x401000 + i * 16,
					     0x402001, 1),
					 0);
		}
		for (int i = 0; i < 4; i++)
			pp_store__process_exit(st, PID_BASE + 10 * round + i);
	}
	struct pp_store_stats s = stats(st);
	assert_int_equal(s.dropped_procs, 0);
	assert_int_equal(s.dropped_stacks, 0);
	assert_true(s.procs_held <= 4);
	assert_int_equal(s.released_procs, 16);
	/* Four alive: the fifth is dropped, and counted. */
	for (int i = 0; i < 4; i++)
		add_proc(st, PID_BASE + 100 + i, 1);
	struct pp_proc_info info = { .pid = PID_BASE + 104, .start_time = 1 };
	assert_int_equal(pp_store__process_update(st, &info, NULL, 0), -ENOSPC);
	assert_int_equal(stats(st).dropped_procs, 1);
	/* Stacks: 8 held at most, the ninth distinct one dropped. */
	for (int i = 0; i < 9; i++)
		cpu(st, PID_BASE + 100, 0x410000 + i * 16, 0x402001, 1);
	s = stats(st);
	assert_int_equal(s.stacks, 8);
	assert_int_equal(s.dropped_stacks, 1);
	pp_store__free(st);
}

static void test_locations_cap(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ .max_locations = 4 });
	add_proc(st, PID_BASE + 1, 1);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401000, 0x402001, 1), 0);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401010, 0x402001, 1), 0);
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401020, 0x402001, 1), 0);
	/* 4 locations held: a sample needing two more is dropped whole. */
	assert_int_equal(cpu(st, PID_BASE + 1, 0x401030, 0x402201, 1), -ENOSPC);
	struct pp_store_stats s = stats(st);
	assert_int_equal(s.locations, 4);
	assert_int_equal(s.dropped_locations, 1);
	assert_int_equal(s.stacks, 3);
	pp_store__free(st);
}

/* Addresses in none of the maps held (a library loaded since): the worker
 * reads the maps again (here: this test's own) and names them all, those
 * skipped while the read was under way included. */
static void test_maps_read_again(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ 0 });
	struct pp_proc_info info = { .pid = getpid(), .start_time = 1 };
	assert_int_equal(pp_store__process_update(st, &info, NULL, 0), 0);
	uint64_t a = (uint64_t)(uintptr_t)&test_deltas, b = (uint64_t)(uintptr_t)&render;
	uint64_t c = (uint64_t)(uintptr_t)&stats;
	for (int i = 0; i < 3; i++)
		assert_int_equal(cpu(st, getpid(), a + 16 * i, b + 1, 1), 0);
	assert_int_equal(cpu(st, getpid(), c, b + 1, 1), 0);
	Profile *p = render(st, PP_PROFILE_CPU, NULL);
	char name[64];
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "fn_%llx", (unsigned long long)(a + 16 * i));
		assert_int_equal(leaf_value(p, name, 0), 1);
	}
	snprintf(name, sizeof(name), "fn_%llx", (unsigned long long)c);
	assert_int_equal(leaf_value(p, name, 0), 1);
	pp_pprof_profile__free(p);
	pp_store__free(st);
}

static unsigned fake_calls(void)
{
	pthread_mutex_lock(&fake.lock);
	unsigned c = fake.calls;
	pthread_mutex_unlock(&fake.lock);
	return c;
}

/* Checks every sample of p: pid label, and leaf/caller locations at the
 * runtime addresses of that pid's mapping (base) with the file-offset names. */
static void check_shared_profile(const Profile *p, const pid_t *pids, const uint64_t *bases,
				 size_t n, int64_t want_each)
{
	int64_t seen[8] = { 0 };
	assert_true(n <= 8);
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		size_t k;
		int64_t pid = -1;
		for (size_t j = 0; j < s->n_label; j++)
			if (!strcmp(p->string_table[s->label[j]->key], "pid"))
				pid = s->label[j]->num;
		for (k = 0; k < n && pids[k] != pid; k++)
			;
		assert_true(k < n);
		assert_int_equal(s->n_location_id, 2);
		static const uint64_t offs[2] = { 0x2000, 0x3000 }; /* leaf, caller (ret - 1) */
		static const char *const names[2] = { "off_2000", "off_3000" };
		for (size_t f = 0; f < 2; f++) {
			const Perftools__Profiles__Location *l = p->location[s->location_id[f] - 1];
			assert_int_equal(l->address, bases[k] + offs[f]);
			assert_int_equal(l->n_line, 1);
			const Perftools__Profiles__Function *fn =
				p->function[l->line[0]->function_id - 1];
			assert_string_equal(p->string_table[fn->name], names[f]);
			const Perftools__Profiles__Mapping *m = p->mapping[l->mapping_id - 1];
			assert_true(l->address >= m->memory_start && l->address < m->memory_limit);
			assert_int_equal(l->address - m->memory_start + m->file_offset, offs[f]);
		}
		seen[k] += s->value[0];
	}
	for (size_t k = 0; k < n; k++)
		assert_int_equal(seen[k], want_each);
}

/*
 * Processes mapping one file (workers of one binary, at different load
 * addresses) share its locations, keyed by (object, file offset): one
 * location and one name per offset for all of them, resolved once, kept
 * after the process that first used them exited; each process's profile
 * addresses are its own. Another file at the same offsets is another object.
 */
static void test_locations_by_object(void **state)
{
	struct pp_store *st = new_store((struct pp_store_opts){ .linger_ns = 1000000 });
	pthread_mutex_lock(&fake.lock);
	fake.by_offset = true;
	pthread_mutex_unlock(&fake.lock);
	enum { N = 4 };
	pid_t pids[N];
	uint64_t bases[N];
	for (int i = 0; i < N; i++) {
		pids[i] = PID_BASE + 20 + i;
		bases[i] = 0x10000000ull + 0x1000000ull * (uint64_t)i;
		add_proc_at(st, pids[i], bases[i], 7777);
	}
	assert_int_equal(stats(st).objects, 1);
	unsigned calls0 = fake_calls();
	/* leaf at file offset 0x2000, caller returns to 0x3001 */
	for (int i = 0; i < N; i++)
		assert_int_equal(cpu(st, pids[i], bases[i] + 0x2000, bases[i] + 0x3001, 5), 0);
	struct pp_store_stats s = stats(st);
	assert_int_equal(s.locations, 2);
	assert_int_equal(s.stacks, N);
	Profile *p = render(st, PP_PROFILE_CPU, NULL);
	assert_int_equal(fake_calls() - calls0, 2); /* one per location, not per process */
	check_shared_profile(p, pids, bases, N, 5);
	pp_pprof_profile__free(p);

	/* The first process exits and is released: the others keep the names;
	 * a new worker at yet another address uses them without a resolve. */
	pp_store__process_exit(st, pids[0]);
	wait_linger();
	pp_store__collect(st);
	assert_int_equal(stats(st).released_procs, 1);
	pids[0] = PID_BASE + 30;
	bases[0] = 0x30000000ull;
	add_proc_at(st, pids[0], bases[0], 7777);
	assert_int_equal(cpu(st, pids[0], bases[0] + 0x2000, bases[0] + 0x3001, 5), 0);
	p = render(st, PP_PROFILE_CPU, NULL);
	assert_int_equal(fake_calls() - calls0, 2);
	check_shared_profile(p, pids, bases, N, 5);
	pp_pprof_profile__free(p);
	s = stats(st);
	assert_int_equal(s.locations, 2);
	assert_int_equal(s.objects, 1);

	/* Another file (another inode) at the same offsets: its own locations. */
	add_proc_at(st, PID_BASE + 40, 0x40000000ull, 8888);
	assert_int_equal(cpu(st, PID_BASE + 40, 0x40002000ull, 0x40003001ull, 1), 0);
	/* JIT code (anonymous memory) stays per process. */
	for (int i = 1; i < N; i++)
		assert_int_equal(cpu(st, pids[i], bases[i] + 0x20010, bases[i] + 0x3001, 1), 0);
	s = stats(st);
	assert_int_equal(s.objects, 2);
	assert_int_equal(s.locations, 2 + 2 + (N - 1));

	/* Every process gone and released: locations and objects too. */
	for (int i = 0; i < N; i++)
		pp_store__process_exit(st, pids[i]);
	pp_store__process_exit(st, PID_BASE + 40);
	wait_linger();
	pp_store__collect(st);
	s = stats(st);
	assert_int_equal(s.procs_held, 0);
	assert_int_equal(s.locations, 0);
	assert_int_equal(s.objects, 0);
	pthread_mutex_lock(&fake.lock);
	fake.by_offset = false;
	pthread_mutex_unlock(&fake.lock);
	pp_store__free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symbolized_by_worker),
		cmocka_unit_test(test_text_hostile_names),
		cmocka_unit_test(test_deltas),
		cmocka_unit_test(test_snapshot_overlays),
		cmocka_unit_test(test_heap_scaling),
		cmocka_unit_test(test_live_table_grows),
		cmocka_unit_test(test_exited_released_after_window),
		cmocka_unit_test(test_snapshot_survives_slot_reuse),
		cmocka_unit_test(test_caps_count_current),
		cmocka_unit_test(test_locations_cap),
		cmocka_unit_test(test_maps_read_again),
		cmocka_unit_test(test_locations_by_object),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
