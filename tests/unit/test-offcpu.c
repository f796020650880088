/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End-to-end test of the off-CPU tracer on tests/workloads/threads/blocked:
 * real BPF programs, real processes. Each event is unwound at once with
 * lib/unwind (as podprof does), the PCs are resolved with a small ELF
 * symbol reader local to this test, and the figures are compared with the
 * counters the workload measures itself (printed on SIGUSR1):
 *  - block events in sleeper_nap(): delay sum ~ the workload's sleep time,
 *  - block events in reader() with read() as the leaf,
 *  - mutex events in contend_lock(): delay sum ~ measured lock wait,
 *  - thread-create events with spawn_worker() whose new_tid is a live
 *    thread of the target,
 *  - a second tracer with Go-style sampling keeps a binomially consistent
 *    share of the same spells, scaled,
 *  - a process not added gives no events; a removed one stops; a target
 *    that dies is harmless; no fd survives pp_offcpu__free.
 *
 * argv[1]: the blocked workload.
 */
#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "offcpu/offcpu.h"
#include "unwind/unwind.h"
#include "util/util.h"

#define MAX_FRAMES 64
#define MAX_EVENTS 20000
#define MS 1000000ull

static const char *wl_blocked;

/* ---- workload processes ------------------------------------------------ */

struct proc {
	pid_t pid;
	FILE *out; /* its stdout */
};

struct wl_stats {
	uint64_t spin, sleep_ns, sleeps, read_ns, reads, lock_wait_ns, lock_waits, spawned;
};

static struct proc procs[4];

static void start_proc(struct proc *p)
{
	int fds[2];
	char line[128];

	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		dup2(fds[1], 1);
		execl(wl_blocked, wl_blocked, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	p->out = fdopen(fds[0], "r");
	assert_non_null(p->out);
	assert_non_null(fgets(line, sizeof(line), p->out));
	assert_int_equal(strncmp(line, "pid ", 4), 0);
}

static void stop_proc(struct proc *p)
{
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
	}
	if (p->out)
		fclose(p->out);
	p->pid = 0;
	p->out = NULL;
}

static void read_stats(struct proc *p, struct wl_stats *s)
{
	char line[512];

	assert_int_equal(kill(p->pid, SIGUSR1), 0);
	assert_non_null(fgets(line, sizeof(line), p->out));
	assert_int_equal(sscanf(line,
				"stats spin=%" SCNu64 " sleep_ns=%" SCNu64 " sleeps=%" SCNu64
				" read_ns=%" SCNu64 " reads=%" SCNu64 " lock_wait_ns=%" SCNu64
				" lock_waits=%" SCNu64 " spawned=%" SCNu64,
				&s->spin, &s->sleep_ns, &s->sleeps, &s->read_ns, &s->reads,
				&s->lock_wait_ns, &s->lock_waits, &s->spawned),
			 8);
}

static int teardown(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(procs); i++)
		stop_proc(&procs[i]);
	return 0;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

/* ---- tiny symbolizer (test-local): /proc/PID/maps + ELF symbols --------- */

struct sym {
	uint64_t start, end;
	char name[64];
};

struct elf_syms {
	char path[256];
	struct sym *v;
	size_t n;
	GElf_Phdr load[16];
	size_t nload;
};

static struct elf_syms elf_cache[32];
static size_t n_elf_cache;

static void load_elf(struct elf_syms *es)
{
	int fd = open(es->path, O_RDONLY | O_CLOEXEC);
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t cap = 0, phnum = 0;

	if (fd < 0)
		return;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_getphdrnum(elf, &phnum) == 0) {
		for (size_t i = 0; i < phnum && es->nload < ARRAY_SIZE(es->load); i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
				es->load[es->nload++] = ph;
		}
	}
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *name;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    !s.st_value)
				continue;
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!name)
				continue;
			if (es->n == cap) {
				cap = cap ? cap * 2 : 256;
				es->v = realloc(es->v, cap * sizeof(*es->v));
				assert_non_null(es->v);
			}
			es->v[es->n].start = s.st_value;
			es->v[es->n].end = s.st_value + PP_MAX(s.st_size, 1);
			snprintf(es->v[es->n].name, sizeof(es->v[es->n].name), "%s", name);
			es->n++;
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
}

static struct elf_syms *get_elf(const char *path)
{
	for (size_t i = 0; i < n_elf_cache; i++)
		if (!strcmp(elf_cache[i].path, path))
			return &elf_cache[i];
	if (n_elf_cache == ARRAY_SIZE(elf_cache))
		return NULL;
	struct elf_syms *es = &elf_cache[n_elf_cache++];
	snprintf(es->path, sizeof(es->path), "%s", path);
	load_elf(es);
	return es;
}

static void free_elf_cache(void)
{
	for (size_t i = 0; i < n_elf_cache; i++)
		free(elf_cache[i].v);
	n_elf_cache = 0;
}

/* Name of the function containing pc in process pid, "?" if unknown. */
static const char *symbolize(pid_t pid, uint64_t pc)
{
	char path[64], line[512], file[256];
	const char *ret = "?";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return ret;
	while (fgets(line, sizeof(line), f)) {
		uint64_t lo, hi, off;
		struct elf_syms *es;

		file[0] = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %*u %255s", &lo, &hi,
			   &off, file) < 3 ||
		    pc < lo || pc >= hi)
			continue;
		if (file[0] != '/' || !(es = get_elf(file)))
			break;
		uint64_t foff = pc - lo + off;
		for (size_t i = 0; i < es->nload; i++) {
			GElf_Phdr *ph = &es->load[i];

			if (foff < ph->p_offset || foff >= ph->p_offset + ph->p_filesz)
				continue;
			uint64_t va = foff - ph->p_offset + ph->p_vaddr;
			for (size_t k = 0; k < es->n; k++)
				if (va >= es->v[k].start && va < es->v[k].end)
					ret = es->v[k].name;
			break;
		}
		break;
	}
	fclose(f);
	return ret;
}

/* ---- event collection -------------------------------------------------- */

struct rec {
	enum pp_offcpu_kind kind;
	pid_t pid, tid, new_tid;
	uint64_t delay_ns;
	double count, scaled;
	bool new_tid_live;
	uint64_t pcs[MAX_FRAMES];
	size_t n;
};

struct collector {
	struct rec *v;
	size_t n;
	size_t bad_pid; /* events of a pid not in want[] */
	pid_t want[2];
	struct pp_unwinder *unw[2];
};

static bool is_thread_of(pid_t pid, pid_t tid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
	return stat(path, &st) == 0;
}

static void on_event(void *ctx, const struct pp_offcpu_event *ev)
{
	struct collector *c = ctx;
	struct pp_unwinder *u = NULL;
	struct rec *r;
	unsigned flags;

	for (size_t i = 0; i < ARRAY_SIZE(c->want); i++)
		if (c->want[i] && ev->pid == c->want[i])
			u = c->unw[i];
	if (!u) {
		c->bad_pid++;
		return;
	}
	if (c->n == MAX_EVENTS)
		return;
	r = &c->v[c->n++];
	memset(r, 0, sizeof(*r));
	r->kind = ev->kind;
	r->pid = ev->pid;
	r->tid = ev->tid;
	r->new_tid = ev->new_tid;
	r->delay_ns = ev->delay_ns;
	r->count = ev->count;
	r->scaled = ev->delay_scaled_ns;
	if (ev->kind == PP_OFFCPU_THREAD_CREATE)
		r->new_tid_live = ev->new_tid > 0 && is_thread_of(ev->pid, ev->new_tid);
	if (ev->regs_valid && pp_unwinder__unwind(u, &ev->regs, ev->stack, ev->stack_len, r->pcs,
						  MAX_FRAMES, &r->n, &flags) < 0)
		r->n = 0;
}

static void collector_init(struct collector *c, pid_t a, pid_t b)
{
	memset(c, 0, sizeof(*c));
	c->v = calloc(MAX_EVENTS, sizeof(*c->v));
	assert_non_null(c->v);
	c->want[0] = a;
	c->want[1] = b;
	for (size_t i = 0; i < 2; i++) {
		if (!c->want[i])
			continue;
		c->unw[i] = pp_unwinder__new(c->want[i], NULL);
		assert_non_null(c->unw[i]);
	}
}

static void collector_free(struct collector *c)
{
	for (size_t i = 0; i < 2; i++)
		pp_unwinder__free(c->unw[i]);
	free(c->v);
}

/* Whether the stack of r has a frame in function fn (return addresses
 * looked up at pc - 1, the call instruction). */
static bool has_frame(const struct rec *r, const char *fn)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(symbolize(r->pid, i ? r->pcs[i] - 1 : r->pcs[i]), fn))
			return true;
	return false;
}

static void poll_for(struct pp_offcpu *a, struct pp_offcpu *b, uint64_t ms)
{
	uint64_t end = pp_now_mono_ns() + ms * MS;

	while (pp_now_mono_ns() < end) {
		assert_true(pp_offcpu__poll(a, 50) >= 0);
		if (b)
			assert_true(pp_offcpu__poll(b, 0) >= 0);
	}
	assert_true(pp_offcpu__poll(a, 0) >= 0);
	if (b)
		assert_true(pp_offcpu__poll(b, 0) >= 0);
}

static void print_stack(const char *what, const struct rec *r)
{
	fprintf(stderr, "%s tid %d new_tid %d delay %" PRIu64 " ns:", what, (int)r->tid,
		(int)r->new_tid, r->delay_ns);
	for (size_t k = 0; k < r->n; k++)
		fprintf(stderr, " %s", symbolize(r->pid, k ? r->pcs[k] - 1 : r->pcs[k]));
	fprintf(stderr, "\n");
}

/* ---- tests ------------------------------------------------------------- */

struct sums {
	double sleep_ns, read_ns, lock_ns;
	size_t sleeps, reads, locks, creates, creates_live, read_leaf, other_kind;
};

static void summarize(const struct collector *c, struct sums *s)
{
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < c->n; i++) {
		const struct rec *r = &c->v[i];

		if (r->kind == PP_OFFCPU_THREAD_CREATE) {
			if (getenv("OFFCPU_TEST_DEBUG"))
				print_stack("create", r);
			if (has_frame(r, "spawn_worker")) {
				s->creates++;
				s->creates_live += r->new_tid_live;
			}
		} else if (has_frame(r, "sleeper_nap")) {
			if (r->kind != PP_OFFCPU_BLOCK)
				s->other_kind++;
			s->sleeps++;
			s->sleep_ns += (double)r->delay_ns;
		} else if (has_frame(r, "reader")) {
			if (r->kind != PP_OFFCPU_BLOCK)
				s->other_kind++;
			s->reads++;
			s->read_ns += (double)r->delay_ns;
			if (r->n && strstr(symbolize(r->pid, r->pcs[0]), "read"))
				s->read_leaf++;
		} else if (has_frame(r, "contend_lock")) {
			if (r->kind != PP_OFFCPU_MUTEX)
				s->other_kind++;
			s->locks++;
			s->lock_ns += (double)r->delay_ns;
		}
	}
}

/* |got - want| within abs_ns + rel * want */
static void assert_near(const char *what, double got, double want, double abs_ns, double rel)
{
	print_message("  %-10s traced %8.1f ms, workload measured %8.1f ms\n", what, got / 1e6,
		      want / 1e6);
	assert_true(fabs(got - want) <= abs_ns + rel * want);
}

static void test_profiles(void **state)
{
	struct pp_offcpu_opts opts = { .stack_bytes = 16384, .min_block_ns = 1 * MS };
	struct pp_offcpu_opts sopts = { .stack_bytes = 4096,
					.min_block_ns = 1 * MS,
					.sample_ns = 200 * MS };
	struct collector c, cs;
	struct wl_stats s0, s1;
	struct pp_offcpu_stats st;
	struct sums sm;
	struct pp_offcpu *o, *os;
	int fds0 = count_fds();

	start_proc(&procs[0]);
	start_proc(&procs[1]); /* never added */
	collector_init(&c, procs[0].pid, 0);
	collector_init(&cs, procs[0].pid, 0);
	o = pp_offcpu__new(&opts, on_event, &c);
	assert_non_null(o);
	os = pp_offcpu__new(&sopts, on_event, &cs);
	assert_non_null(os);
	assert_int_equal(pp_offcpu__enable(o, true), 0);
	assert_int_equal(pp_offcpu__enable(os, true), 0);

	/* Let the workload reach its steady state (first lock contention). */
	usleep(300 * 1000);
	assert_int_equal(pp_offcpu__add_process(o, procs[0].pid), 0);
	assert_int_equal(pp_offcpu__add_process(o, procs[0].pid), 0); /* idempotent */
	assert_int_equal(pp_offcpu__add_process(os, procs[0].pid), 0);
	read_stats(&procs[0], &s0);
	poll_for(o, os, 3000);
	assert_int_equal(pp_offcpu__remove_process(o, procs[0].pid), 0);
	assert_int_equal(pp_offcpu__remove_process(os, procs[0].pid), 0);
	read_stats(&procs[0], &s1);
	poll_for(o, os, 60); /* drain what was recorded before the removal */

	print_message("  %zu events (%zu sampled tracer), %zu from the process not added\n", c.n,
		      cs.n, c.bad_pid + cs.bad_pid);
	assert_int_equal(c.bad_pid + cs.bad_pid, 0);
	assert_true(s1.spin > s0.spin); /* the target kept running */

	summarize(&c, &sm);
	print_message("  sleeps %zu (workload %" PRIu64 "), reads %zu/%" PRIu64
		      " (read leaf %zu), lock waits %zu/%" PRIu64 ", creates %zu/%" PRIu64 " (live "
		      "%zu)\n",
		      sm.sleeps, s1.sleeps - s0.sleeps, sm.reads, s1.reads - s0.reads, sm.read_leaf,
		      sm.locks, s1.lock_waits - s0.lock_waits, sm.creates, s1.spawned - s0.spawned,
		      sm.creates_live);
	assert_int_equal(sm.other_kind, 0);
	/* Spells are reported when they end; the workload counts them when they
	 * end too, but the two snapshots and the add/remove are some ms apart:
	 * allow one spell at each end (100, 300, 150 ms) plus 10%. */
	assert_near("sleeper", sm.sleep_ns, (double)(s1.sleep_ns - s0.sleep_ns), 220 * MS, 0.10);
	assert_true(sm.sleep_ns >= 2.3e9); /* ~3 s of back-to-back 100 ms naps */
	assert_near("reader", sm.read_ns, (double)(s1.read_ns - s0.read_ns), 620 * MS, 0.10);
	assert_true(sm.reads + 2 >= s1.reads - s0.reads && sm.reads >= 5);
	assert_true(sm.read_leaf * 10 >= sm.reads * 9);
	assert_near("mutex", sm.lock_ns, (double)(s1.lock_wait_ns - s0.lock_wait_ns), 320 * MS,
		    0.15);
	assert_true(sm.locks >= 5);
	assert_true(sm.creates + 2 >= s1.spawned - s0.spawned && sm.creates >= 4);
	assert_int_equal(sm.creates_live, sm.creates);

	/* The sampled tracer saw the same spells: for the sleeper's, it should
	 * keep each with p = delay / 200 ms (Poisson-binomial count). */
	{
		double mu = 0, var = 0, scaled = 0;
		size_t kept = 0;

		for (size_t i = 0; i < c.n; i++) {
			const struct rec *r = &c.v[i];
			double p;

			if (r->kind != PP_OFFCPU_BLOCK || !has_frame(r, "sleeper_nap"))
				continue;
			p = PP_MIN(1.0, (double)r->delay_ns / (double)sopts.sample_ns);
			mu += p;
			var += p * (1 - p);
		}
		for (size_t i = 0; i < cs.n; i++) {
			const struct rec *r = &cs.v[i];

			if (r->kind != PP_OFFCPU_BLOCK || !has_frame(r, "sleeper_nap"))
				continue;
			kept++;
			scaled += r->scaled;
			if (r->delay_ns >=
			    sopts.sample_ns) { /* a nap stretched by CPU contention */
				assert_true(r->count == 1 && r->scaled == (double)r->delay_ns);
				continue;
			}
			assert_true(fabs(r->count * (double)r->delay_ns - (double)sopts.sample_ns) <
				    1e-3 * (double)sopts.sample_ns);
			assert_true(r->scaled == (double)sopts.sample_ns);
		}
		print_message("  sampled: kept %zu sleeper spells, expected %.1f +- %.1f; "
			      "scaled delay %.0f ms\n",
			      kept, mu, sqrt(var), scaled / 1e6);
		assert_true(fabs((double)kept - mu) <= 4 * sqrt(var) + 1);
	}

	pp_offcpu__stats(o, &st);
	print_message("  stats: events %" PRIu64 " drops %" PRIu64 " stack_errors %" PRIu64 "\n",
		      st.events, st.drops, st.stack_errors);
	assert_int_equal(st.events, c.n);
	assert_int_equal(st.drops, 0);
	assert_int_equal(st.stack_errors, 0);

	pp_offcpu__free(o);
	pp_offcpu__free(os);
	collector_free(&c);
	collector_free(&cs);
	free_elf_cache();
	stop_proc(&procs[0]);
	stop_proc(&procs[1]);
	assert_int_equal(count_fds(), fds0);
}

static size_t count_pid(const struct collector *c, pid_t pid)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n; i++)
		n += c->v[i].pid == pid;
	return n;
}

static size_t count_kind(const struct collector *c, enum pp_offcpu_kind kind)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n; i++)
		n += c->v[i].kind == kind;
	return n;
}

/*
 * Polls for at least ms, and on until pid a has want_a events and pid b
 * want_b (0: any) and there are want_mutex MUTEX events: the workloads
 * block at their own pace, which a loaded machine slows down. The
 * deadline only guards against a hang; the counts are asserted after.
 */
static void poll_until(struct pp_offcpu *o, const struct collector *c, uint64_t ms, pid_t a,
		       size_t want_a, pid_t b, size_t want_b, size_t want_mutex)
{
	uint64_t end = pp_now_mono_ns() + 60000 * MS;

	poll_for(o, NULL, ms);
	while ((count_pid(c, a) < want_a || count_pid(c, b) < want_b ||
		count_kind(c, PP_OFFCPU_MUTEX) < want_mutex) &&
	       pp_now_mono_ns() < end)
		poll_for(o, NULL, 100);
}

static void test_remove_and_exit(void **state)
{
	struct pp_offcpu_opts opts = { .stack_bytes = 8192,
				       .min_block_ns = 1 * MS,
				       .futex_in_block = true };
	struct collector c;
	struct pp_offcpu *o;
	pid_t a, b;
	size_t n;
	int fds0 = count_fds();

	start_proc(&procs[2]);
	start_proc(&procs[3]);
	a = procs[2].pid;
	b = procs[3].pid;
	collector_init(&c, a, b);
	o = pp_offcpu__new(&opts, on_event, &c);
	assert_non_null(o);
	assert_int_equal(pp_offcpu__add_process(o, a), 0);
	assert_int_equal(pp_offcpu__add_process(o, b), 0);
	/* A new tracer is disabled: its targets produce nothing. */
	poll_for(o, NULL, 500);
	print_message("  disabled: %zu events\n", c.n);
	assert_int_equal(c.n, 0);
	assert_false(pp_offcpu__enabled(o));
	assert_int_equal(pp_offcpu__enable(o, true), 0);
	assert_int_equal(pp_offcpu__enable(o, true), 0); /* idempotent */
	assert_true(pp_offcpu__enabled(o));
	poll_until(o, &c, 1000, a, 10, b, 10, 2);
	print_message("  both traced: %zu + %zu events\n", count_pid(&c, a), count_pid(&c, b));
	assert_true(count_pid(&c, a) >= 10 && count_pid(&c, b) >= 10);
	/* futex_in_block: every MUTEX event comes again as BLOCK */
	{
		size_t m = 0, blk_in_lock = 0;

		for (size_t i = 0; i < c.n; i++) {
			m += c.v[i].kind == PP_OFFCPU_MUTEX;
			blk_in_lock += c.v[i].kind == PP_OFFCPU_BLOCK && i > 0 &&
				       c.v[i - 1].kind == PP_OFFCPU_MUTEX &&
				       c.v[i - 1].delay_ns == c.v[i].delay_ns;
		}
		assert_true(m >= 2);
		assert_int_equal(blk_in_lock, m);
	}

	/* Removed: nothing more from a once the ring is drained. */
	assert_int_equal(pp_offcpu__remove_process(o, a), 0);
	assert_int_equal(pp_offcpu__remove_process(o, a), -ENOENT);
	poll_for(o, NULL, 50);
	c.n = 0;
	poll_until(o, &c, 800, a, 0, b, 5, 0);
	print_message("  after removing %d: %zu + %zu events\n", (int)a, count_pid(&c, a),
		      count_pid(&c, b));
	assert_int_equal(count_pid(&c, a), 0);
	assert_true(count_pid(&c, b) >= 5);

	/* Disabled again: nothing more once the ring is drained; then back on. */
	assert_int_equal(pp_offcpu__enable(o, false), 0);
	poll_for(o, NULL, 50);
	c.n = 0;
	poll_for(o, NULL, 500);
	print_message("  disabled again: %zu events\n", c.n);
	assert_int_equal(c.n, 0);
	assert_int_equal(pp_offcpu__enable(o, true), 0);
	poll_until(o, &c, 800, a, 0, b, 3, 0);
	assert_true(count_pid(&c, b) >= 3);

	/* b dies while traced: polling goes on without error. */
	kill(b, SIGKILL);
	waitpid(b, NULL, 0);
	procs[3].pid = 0;
	poll_for(o, NULL, 300);
	n = c.n;
	poll_for(o, NULL, 300);
	assert_int_equal(c.n, n);
	/* Its entry went with its last thread, in BPF (a process reusing the
	 * pid is not recorded as b), and that is counted. */
	struct pp_offcpu_stats st;
	pp_offcpu__stats(o, &st);
	assert_true(st.exited >= 1);
	assert_int_equal(pp_offcpu__remove_process(o, b), -ENOENT);
	assert_int_equal(pp_offcpu__add_process(o, b), -ESRCH);
	/* and a can come back */
	assert_int_equal(pp_offcpu__add_process(o, a), 0);
	c.n = 0;
	poll_until(o, &c, 700, a, 3, b, 0, 0);
	assert_true(count_pid(&c, a) >= 3);

	pp_offcpu__free(o);
	collector_free(&c);
	stop_proc(&procs[2]);
	stop_proc(&procs[3]);
	assert_int_equal(count_fds(), fds0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_profiles, teardown),
		cmocka_unit_test_teardown(test_remove_and_exit, teardown),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s BLOCKED_WORKLOAD\n", argv[0]);
		return 2;
	}
	wl_blocked = argv[1];
	elf_version(EV_CURRENT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
