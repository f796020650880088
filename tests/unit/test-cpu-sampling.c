/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End-to-end test of the cpu sampler + unwinder on real workloads
 * (tests/workloads/cpu): run each variant as a child process, sample it at
 * 999 Hz, unwind every sample at once (as podprof does), then resolve the
 * PCs with a small .symtab reader local to this test and check
 *  - >= 99% of stacks reach the thread's root (_start / clone3 ...),
 *  - the share of samples per hot function against the workload's known
 *    split, within 5 binomial sigmas + a systematic allowance,
 *  - threads and forked children born after sampling started get samples,
 *  - no event fd survives the processes' exit, none after free.
 *
 *  - a 128-thread pool has every thread sampled, threads living 20 ms are
 *    sampled in proportion to their CPU time, and every count matches the
 *    process's CPU time from /proc within 10%,
 *
 * argv: spin spin_nopie spin_static spin_stripped spin_stripped.debug forker pool
 */
#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpu/cpu.h"
#include "procfs/procfs.h"
#include "unwind/unwind.h"
#include "util/util.h"

#define FREQ 999
/* A loaded machine gives the workloads less CPU time than their threads'
 * worth: the windows last until they had MIN_CPU_NS, and MAX_MS is only a
 * guard against a hang. */
#define MIN_CPU_NS 1000000000ull
#define MAX_MS 60000
#define MAX_FRAMES 128
#define MAX_SAMPLES 200000

static const char *wl_spin, *wl_nopie, *wl_static, *wl_stripped, *wl_stripped_dbg, *wl_forker,
	*wl_pool;

/* ---- tiny symbolizer (test-local) ------------------------------------- */

struct sym {
	uint64_t start, end;
	char *name;
};

struct symtab {
	struct sym *v;
	size_t n, cap;
};

static void symtab_add(struct symtab *t, uint64_t start, uint64_t end, const char *name)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 1024;
		t->v = realloc(t->v, t->cap * sizeof(*t->v));
		assert_non_null(t->v);
	}
	t->v[t->n].start = start;
	t->v[t->n].end = end;
	t->v[t->n].name = strdup(name);
	t->n++;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Loads FUNC symbols of section type `type` from path, placed with bias. Returns count. */
static size_t load_syms(struct symtab *t, const char *path, uint64_t bias, uint64_t lo, uint64_t hi,
			Elf64_Word type)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t count = 0;

	if (fd < 0)
		return 0;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    s.st_value < lo || s.st_value >= hi)
				continue;
			const char *name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (name && *name) {
				symtab_add(t, bias + s.st_value,
					   bias + s.st_value + PP_MAX(s.st_size, 1), name);
				count++;
			}
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return count;
}

/* Debug file by build id under /usr/lib/debug, written into buf; false if none. */
static bool debug_by_build_id(int fd, char *buf, size_t n)
{
	uint8_t id[PP_BUILD_ID_MAX];
	size_t len;
	char hex[2 * PP_BUILD_ID_MAX + 1];

	if (pp_buildid__from_fd(fd, id, &len) < 0 || len < 2)
		return false;
	pp_buildid__hex(id, len, hex);
	snprintf(buf, n, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	return access(buf, R_OK) == 0;
}

static void symtab_for_pid(struct symtab *t, pid_t pid, const char *exe, const char *exe_debug)
{
	struct pp_maps maps;

	assert_int_equal(pp_maps__read(pid, &maps), 0);
	for (size_t i = 0; i < maps.n; i++) {
		const struct pp_map *m = &maps.v[i];
		if (!(m->prot & PP_PROT_X) || !m->path || m->special)
			continue;
		int fd = pp_proc__open_mapped(pid, m);
		if (fd < 0)
			continue;
		Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
		size_t phnum;
		if (elf && elf_getphdrnum(elf, &phnum) == 0) {
			for (size_t k = 0; k < phnum; k++) {
				GElf_Phdr ph;
				if (!gelf_getphdr(elf, (int)k, &ph) || ph.p_type != PT_LOAD ||
				    !(ph.p_flags & PF_X))
					continue;
				GElf_Ehdr eh;
				gelf_getehdr(elf, &eh);
				uint64_t bias = m->start - ph.p_vaddr - m->offset + ph.p_offset;
				if (eh.e_type == ET_EXEC)
					bias = 0;
				uint64_t lo = ph.p_vaddr, hi = ph.p_vaddr + ph.p_memsz;
				char dbg[512];
				size_t got = 0;
				if (exe_debug && exe && strcmp(m->path, exe) == 0)
					got = load_syms(t, exe_debug, bias, lo, hi, SHT_SYMTAB);
				if (!got && debug_by_build_id(fd, dbg, sizeof(dbg)))
					got = load_syms(t, dbg, bias, lo, hi, SHT_SYMTAB);
				if (!got)
					got = load_syms(t, m->path, bias, lo, hi, SHT_SYMTAB);
				if (!got)
					load_syms(t, m->path, bias, lo, hi, SHT_DYNSYM);
				break;
			}
		}
		if (elf)
			elf_end(elf);
		close(fd);
	}
	pp_maps__free(&maps);
	qsort(t->v, t->n, sizeof(*t->v), sym_cmp);
}

static const char *symtab_name(const struct symtab *t, uint64_t pc)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->v[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the last symbols starting <= pc: take one whose range holds pc */
	for (size_t i = lo; i-- > 0 && lo - i < 8;)
		if (pc < t->v[i].end)
			return t->v[i].name;
	return NULL;
}

static void symtab_free(struct symtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].name);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* ---- workloads -------------------------------------------------------- */

static pid_t running[8];

/* Kill what a failed assertion left running (the child of forker dies with it). */
static void kill_running(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(running); i++)
		if (running[i] > 0) {
			kill(running[i], SIGKILL);
			waitpid(running[i], NULL, 0);
			running[i] = 0;
		}
}

static int teardown(void **state)
{
	kill_running();
	return 0;
}

static pid_t start_argv(char *const argv[])
{
	int p[2];
	char line[32] = { 0 };

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		dup2(p[1], 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	size_t n = 0;
	while (n < sizeof(line) - 1) {
		ssize_t r = read(p[0], line + n, 1);
		if (r <= 0 || line[n] == '\n')
			break;
		n++;
	}
	close(p[0]);
	line[n] = 0;
	uint64_t pid;
	assert_int_equal(pp_parse_u64(line, 10, 1, INT32_MAX, &pid), 0);
	assert_int_equal((pid_t)pid, child);
	for (size_t i = 0; i < ARRAY_SIZE(running); i++)
		if (running[i] <= 0) {
			running[i] = child;
			break;
		}
	return child;
}

static pid_t start_workload(const char *path, const char *arg)
{
	return start_argv((char *const[]){ (char *)path, (char *)arg, NULL });
}

/* The CPU time of the whole process, exited threads included, to the
 * nanosecond (the scheduler's runtime; /proc/PID/stat's tick-based
 * utime+stime is far off for threads that run in short bursts). */
static uint64_t proc_cpu_ns(pid_t pid)
{
	clockid_t clk;
	struct timespec ts;

	assert_int_equal(clock_getcpuclockid(pid, &clk), 0);
	assert_int_equal(clock_gettime(clk, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Samples a process of its own CPU time cpu_ns should get at FREQ: every
 * CPU's timer fires once a period and samples whatever runs, so the count
 * is cpu_ns / period give or take the phase of each burst (the workloads
 * never run in step with the timer). 10% (the bound) is far above
 * that for the hundreds of samples these tests take.
 */
/* CPU time the target may have had while the sampler was being enabled or
 * disabled (see sample_until): samples taken then may or may not count. */
static uint64_t window_edge_ns;

static void check_rate(uint64_t samples, uint64_t cpu_ns, const char *what)
{
	double want = (double)cpu_ns / (1e9 / FREQ);
	double edge = (double)window_edge_ns / (1e9 / FREQ);

	print_message("%s: %" PRIu64 " samples, %.0f predicted by %.2f s of CPU time "
		      "(+%.0f at the window's edges)\n",
		      what, samples, want, (double)cpu_ns / 1e9, edge);
	assert_true(want >= 100);
	assert_true((double)samples >= 0.90 * want);
	assert_true((double)samples <= 1.10 * (want + edge));
}

static void stop_workload(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (size_t i = 0; i < ARRAY_SIZE(running); i++)
		if (running[i] == pid)
			running[i] = 0;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

/* ---- collection -------------------------------------------------------- */

struct usample {
	pid_t pid, tid;
	unsigned flags;
	size_t n;
	uint64_t pcs[MAX_FRAMES];
};

struct unw_slot {
	pid_t pid;
	struct pp_unwinder *u;
};

struct tid_count {
	pid_t tid;
	uint64_t n;
};

struct collect {
	struct usample *v;
	size_t n;
	uint64_t raw, no_regs, unwind_ns;
	struct unw_slot unw[16];
	struct tid_count tids[4096]; /* every raw sample, by thread */
	size_t n_tids;
};

static void count_tid(struct collect *c, pid_t tid)
{
	for (size_t i = 0; i < c->n_tids; i++)
		if (c->tids[i].tid == tid) {
			c->tids[i].n++;
			return;
		}
	if (c->n_tids < ARRAY_SIZE(c->tids))
		c->tids[c->n_tids++] = (struct tid_count){ tid, 1 };
}

static struct pp_unwinder *unwinder_for(struct collect *c, pid_t pid)
{
	for (size_t i = 0; i < ARRAY_SIZE(c->unw); i++)
		if (c->unw[i].u && c->unw[i].pid == pid)
			return c->unw[i].u;
	for (size_t i = 0; i < ARRAY_SIZE(c->unw); i++)
		if (!c->unw[i].u) {
			c->unw[i].pid = pid;
			c->unw[i].u = pp_unwinder__new(pid, NULL);
			return c->unw[i].u;
		}
	return NULL;
}

static void on_sample(void *ctx, const struct pp_raw_sample *s)
{
	struct collect *c = ctx;

	c->raw++;
	count_tid(c, s->tid);
	if (!s->regs_valid) {
		c->no_regs++;
		return;
	}
	if (c->n >= MAX_SAMPLES)
		return;
	struct pp_unwinder *u = unwinder_for(c, s->pid);
	if (!u)
		return;
	struct usample *o = &c->v[c->n];
	uint64_t t0 = pp_now_mono_ns();
	int r = pp_unwinder__unwind(u, &s->regs, s->stack, s->stack_len, o->pcs, MAX_FRAMES, &o->n,
				    &o->flags);
	c->unwind_ns += pp_now_mono_ns() - t0; /* reported, never asserted */
	if (r == 0) {
		o->pid = s->pid;
		o->tid = s->tid;
		c->n++;
	}
}

static void collect_free(struct collect *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(c->unw); i++)
		pp_unwinder__free(c->unw[i].u);
	free(c->v);
	memset(c, 0, sizeof(*c));
}

static struct pp_cpu_sampler *sampler_new(struct collect *c)
{
	struct pp_cpu_opts o = { .frequency_hz = FREQ,
				 .stack_bytes = 32768,
				 .kernel_callchain = true };

	memset(c, 0, sizeof(*c));
	c->v = calloc(MAX_SAMPLES, sizeof(*c->v));
	assert_non_null(c->v);
	struct pp_cpu_sampler *s = pp_cpu_sampler__new(&o, on_sample, c);
	assert_non_null(s);
	return s;
}

/* Polls for ms, at least once: each poll drains everything committed to
 * the ring (so a drain after a disable is exact, however long the thread
 * waited for a CPU). */
static void run_for(struct pp_cpu_sampler *s, unsigned ms)
{
	uint64_t end = pp_now_mono_ns() + (uint64_t)ms * 1000000ull;

	do
		assert_true(pp_cpu_sampler__poll(s, 50) >= 0);
	while (pp_now_mono_ns() < end);
}

/* Enable, run for at least ms and until the process used cpu_target_ns
 * of CPU time (at most max_ms: a loaded machine gives it less), disable,
 * and deliver what was taken; returns the process's CPU time while
 * sampling was on. */
static uint64_t sample_until(struct pp_cpu_sampler *s, pid_t pid, unsigned ms,
			     uint64_t cpu_target_ns, unsigned max_ms)
{
	uint64_t c0, c1, e0, e1, t0 = pp_now_mono_ns();

	/* The target's CPU time is read on both sides of each ioctl: this
	 * thread may be preempted around them (a loaded machine) while the
	 * target runs, so the samples cover at least c1 - c0 and at most that
	 * plus what it ran during the calls (window_edge_ns). */
	e0 = proc_cpu_ns(pid);
	assert_int_equal(pp_cpu_sampler__enable(s, true), 0);
	c0 = proc_cpu_ns(pid);
	run_for(s, ms);
	while (proc_cpu_ns(pid) - c0 < cpu_target_ns &&
	       pp_now_mono_ns() - t0 < (uint64_t)max_ms * 1000000ull)
		run_for(s, 100);
	c1 = proc_cpu_ns(pid);
	assert_int_equal(pp_cpu_sampler__enable(s, false), 0);
	e1 = proc_cpu_ns(pid);
	window_edge_ns = (c0 - e0) + (e1 - c1);
	run_for(s, 200); /* deliver what was taken before the ioctl */
	return c1 - c0;
}

static bool is_root(const char *name)
{
	static const char *const roots[] = {
		"_start",  "__libc_start_main", "__libc_start_call_main",
		"clone3",  "__clone3",		"clone",
		"__clone", "start_thread"
	};

	if (name && strncmp(name, "__GI_", 5) == 0)
		name += 5; /* glibc's internal aliases in its debug symtab */
	for (size_t i = 0; name && i < ARRAY_SIZE(roots); i++)
		if (strcmp(name, roots[i]) == 0)
			return true;
	return false;
}

static const char *frame_name(const struct symtab *t, const struct usample *s, size_t i)
{
	return symtab_name(t, i == 0 ? s->pcs[0] : s->pcs[i] - 1);
}

static bool stack_has(const struct symtab *t, const struct usample *s, const char *fn)
{
	for (size_t i = 0; i < s->n; i++) {
		const char *n = frame_name(t, s, i);
		if (n && strcmp(n, fn) == 0)
			return true;
	}
	return false;
}

static double tolerance(double p, size_t n)
{
	return 5.0 * sqrt(p * (1.0 - p) / (double)n) + 0.03;
}

/* ---- spin variants ----------------------------------------------------- */

static void check_spin(const char *exe, const char *exe_debug, unsigned ms)
{
	struct collect c;
	struct symtab t = { 0 };
	struct pp_cpu_sampler *s = sampler_new(&c);
	pid_t pid = start_workload(exe, "2");

	assert_int_equal(pp_cpu_sampler__add_process(s, pid), 0);
	/* ms, and on until the spin had 1 s of CPU time (~1,000 samples; a
	 * loaded machine gives it less than its two threads' worth) */
	uint64_t cpu_ns = sample_until(s, pid, ms, MIN_CPU_NS, MAX_MS);
	symtab_for_pid(&t, pid, exe, exe_debug);
	stop_workload(pid);

	size_t n = c.n, rooted = 0, complete = 0, depth = 0, b_ok = 0;
	size_t hits[4] = { 0 };
	static const char *const hot[4] = { "hot_a", "hot_b", "hot_c", "lib_hot" };
	static const double expect[4] = { 0.4, 0.3, 0.2, 0.1 };

	struct pp_cpu_stats st;
	pp_cpu_sampler__stats(s, &st);
	check_rate(c.raw + st.lost, cpu_ns, exe);
	for (size_t i = 0; i < n; i++) {
		const struct usample *u = &c.v[i];
		const char *leaf = frame_name(&t, u, 0);
		const char *outer = frame_name(&t, u, u->n - 1);

		depth += u->n;
		if (is_root(outer))
			rooted++;
		if (u->flags & PP_UNWIND_COMPLETE)
			complete++;
		for (int k = 0; k < 4; k++)
			if (leaf && strcmp(leaf, hot[k]) == 0) {
				hits[k]++;
				if (k == 1 && stack_has(&t, u, "big_frame") &&
				    stack_has(&t, u, "worker_loop"))
					b_ok++;
			}
	}
	print_message("%s: %zu samples (%" PRIu64 " without regs), %.1f us/unwind, mean depth "
		      "%.1f, "
		      "rooted %.2f%%, complete %.2f%%, a/b/c/lib %.3f %.3f %.3f %.3f\n",
		      exe, n, c.no_regs, (double)c.unwind_ns / 1000.0 / (double)n,
		      (double)depth / (double)n, 100.0 * (double)rooted / (double)n,
		      100.0 * (double)complete / (double)n, (double)hits[0] / (double)n,
		      (double)hits[1] / (double)n, (double)hits[2] / (double)n,
		      (double)hits[3] / (double)n);
	if (rooted < n * 99 / 100 || getenv("PP_TEST_VERBOSE")) {
		/* Show a few failures to make the report useful. */
		for (size_t i = 0, shown = 0; i < n && shown < 6; i++) {
			const struct usample *u = &c.v[i];
			if (is_root(frame_name(&t, u, u->n - 1)))
				continue;
			shown++;
			print_message("  unrooted (tid %d flags %u):", u->tid, u->flags);
			for (size_t k = 0; k < u->n; k++) {
				const char *nm = frame_name(&t, u, k);
				print_message(" %s/%" PRIx64, nm ? nm : "?", u->pcs[k]);
			}
			print_message("\n");
		}
	}
	assert_true(rooted * 100 >= n * 99);
	assert_true(complete * 100 >= n * 99);
	for (int k = 0; k < 4; k++) {
		double p = (double)hits[k] / (double)n;
		assert_true(fabs(p - expect[k]) <= tolerance(expect[k], n));
	}
	/* hot_b sits below the 16 KiB frame: its callers must be there. */
	assert_true(b_ok * 100 >= hits[1] * 99);

	pp_cpu_sampler__free(s);
	collect_free(&c);
	symtab_free(&t);
}

static void test_spin_pie(void **state)
{
	check_spin(wl_spin, NULL, 3000);
}

static void test_spin_nopie(void **state)
{
	check_spin(wl_nopie, NULL, 2000);
}

static void test_spin_static(void **state)
{
	check_spin(wl_static, NULL, 2000);
}

static void test_spin_stripped(void **state)
{
	check_spin(wl_stripped, wl_stripped_dbg, 2000);
}

/* ---- forker: new threads and children ------------------------------------ */

/* Scheduler runtime of each thread of pid, from /proc/PID/task/TID/schedstat. */
static size_t thread_runtimes(pid_t pid, struct tid_count *out, size_t max)
{
	pid_t *tids = NULL;
	size_t n = 0, k = 0;

	assert_int_equal(pp_proc__list_tids(pid, &tids, &n), 0);
	for (size_t i = 0; i < n && k < max; i++) {
		char path[80], *buf = NULL;
		size_t len;
		unsigned long long ns;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tids[i]);
		if (pp_read_file(path, 256, &buf, &len) == 0 && buf &&
		    sscanf(buf, "%llu", &ns) == 1)
			out[k++] = (struct tid_count){ tids[i], ns };
		free(buf);
	}
	free(tids);
	return k;
}

/* The forker's child, 0 until it has forked. */
static pid_t forker_child(pid_t pid)
{
	char path[64], *buf = NULL;
	size_t len;
	uint64_t child = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	if (pp_read_file(path, 4096, &buf, &len) == 0 && buf) {
		buf[strcspn(buf, " \n")] = 0;
		if (pp_parse_u64(buf, 10, 1, INT32_MAX, &child) < 0)
			child = 0;
	}
	free(buf);
	return (pid_t)child;
}

/* CPU time of pid's main thread, and of its other threads together. */
static void main_and_others(pid_t pid, uint64_t *ret_main, uint64_t *ret_others)
{
	static struct tid_count rt[64];
	size_t n = thread_runtimes(pid, rt, ARRAY_SIZE(rt));

	*ret_main = *ret_others = 0;
	for (size_t i = 0; i < n; i++) {
		if (rt[i].tid == pid)
			*ret_main = rt[i].n;
		else
			*ret_others += rt[i].n;
	}
}

/* True once the forker has forked and each of its four burning threads had
 * cpu_ns of CPU time; *ret_child is the child (0 before the fork). */
static bool forker_fed(pid_t pid, uint64_t cpu_ns, pid_t *ret_child)
{
	uint64_t t[4];

	*ret_child = forker_child(pid);
	if (!*ret_child)
		return false;
	main_and_others(pid, &t[0], &t[1]);
	main_and_others(*ret_child, &t[2], &t[3]);
	for (int i = 0; i < 4; i++)
		if (t[i] < cpu_ns)
			return false;
	return true;
}

static void test_forker(void **state)
{
	struct collect c;
	struct symtab tp = { 0 }, tc = { 0 };
	int fds0 = count_fds();
	struct pp_cpu_sampler *s = sampler_new(&c);
	int fds1 = count_fds();
	pid_t pid = start_workload(wl_forker, "400");

	assert_int_equal(pp_cpu_sampler__add_process(s, pid), 0);
	assert_int_equal(pp_cpu_sampler__enable(s, true), 0);
	/*
	 * 2.5 s, and on until the child forked and each of the four threads
	 * had 100 ms of CPU time (~100 samples at FREQ): on a loaded machine
	 * the fork comes late and each thread gets a small share.
	 */
	pid_t child;
	uint64_t t0 = pp_now_mono_ns();
	run_for(s, 2500);
	while (!forker_fed(pid, 100000000ull, &child) &&
	       pp_now_mono_ns() - t0 < MAX_MS * 1000000ull)
		run_for(s, 100);
	assert_true(child > 0);

	symtab_for_pid(&tp, pid, NULL, NULL);
	symtab_for_pid(&tc, child, NULL, NULL);

	size_t parent_main = 0, late_thread = 0, child_main = 0, child_thread = 0, rooted = 0;
	for (size_t i = 0; i < c.n; i++) {
		const struct usample *u = &c.v[i];
		const struct symtab *t = u->pid == pid ? &tp : &tc;
		const char *leaf = frame_name(t, u, 0);
		if (is_root(frame_name(t, u, u->n - 1)))
			rooted++;
		if (!leaf)
			continue;
		if (u->pid == pid && u->tid == pid && !strcmp(leaf, "parent_burn"))
			parent_main++;
		if (u->pid == pid && u->tid != pid && !strcmp(leaf, "late_thread_burn"))
			late_thread++;
		if (u->pid == child && u->tid == child && !strcmp(leaf, "child_burn"))
			child_main++;
		if (u->pid == child && u->tid != child && !strcmp(leaf, "child_thread_burn"))
			child_thread++;
	}
	print_message("forker: %zu samples: parent %zu, late thread %zu, child %zu, child thread "
		      "%zu, rooted %.2f%%\n",
		      c.n, parent_main, late_thread, child_main, child_thread,
		      100.0 * (double)rooted / (double)c.n);
	/*
	 * 100 ms of CPU time is ~100 samples: fewer than 30 is a Poisson miss
	 * below 1e-15, unless samples were lost (a consumer that fell behind
	 * loses them, counted), any of which may be this thread's.
	 */
	struct pp_cpu_stats st;
	pp_cpu_sampler__stats(s, &st);
	assert_true(parent_main + st.lost >= 30);
	assert_true(late_thread + st.lost >= 30);
	assert_true(child_main + st.lost >= 30);
	assert_true(child_thread + st.lost >= 30);
	assert_true(rooted * 100 >= c.n * 99);

	/* The child was adopted in BPF; removing the parent removes it too,
	 * and every fd goes with free(). */
	print_message("forker: adopted %" PRIu64 ", sampled processes %" PRIu64 "\n", st.adopted,
		      st.targets);
	assert_true(st.adopted >= 1);
	assert_int_equal(st.targets, 2);
	assert_int_equal(pp_cpu_sampler__remove_process(s, pid), 0);
	assert_int_equal(pp_cpu_sampler__remove_process(s, pid), -ENOENT);
	pp_cpu_sampler__stats(s, &st);
	assert_int_equal(st.targets, 0);
	stop_workload(pid);
	collect_free(&c); /* unwinders' fds */
	assert_int_equal(count_fds(), fds1);
	pp_cpu_sampler__free(s);
	assert_int_equal(count_fds(), fds0);
	symtab_free(&tp);
	symtab_free(&tc);
}

/* ---- thread pools and short-lived threads --------------------------------- */

/* 128 threads, each busy about 1 ms every 100 ms: every one of them is
 * sampled, and the count matches the process's CPU time. */
static void test_pool(void **state)
{
	struct collect c;
	struct pp_cpu_sampler *s = sampler_new(&c);
	pid_t pid =
		start_argv((char *const[]){ (char *)wl_pool, "pool", "128", "1000", "100", NULL });
	static struct tid_count rt0[256], rt1[256];
	struct pp_cpu_stats st;
	size_t pool_threads = 0, due = 0, seen = 0, n0, n1;

	usleep(200 * 1000); /* let the pool start */
	assert_int_equal(pp_cpu_sampler__add_process(s, pid), 0);
	n0 = thread_runtimes(pid, rt0, ARRAY_SIZE(rt0));
	/* 3 s, or until the pool had 128 x 25 ms of CPU time (up to 60 s). */
	uint64_t cpu_ns = sample_until(s, pid, 3000, 128 * 25000000ull, MAX_MS);
	n1 = thread_runtimes(pid, rt1, ARRAY_SIZE(rt1));
	for (size_t i = 0; i < c.n_tids; i++)
		pool_threads += c.tids[i].tid != pid;
	/* Every thread whose own runtime in the window predicts >= 20 samples
	 * must be there (a Poisson miss is below 1e-8 per thread): with the
	 * pool's 3.2 s of CPU time, nearly every pool thread. */
	for (size_t i = 0; i < n1; i++) {
		uint64_t before = 0;
		for (size_t j = 0; j < n0; j++)
			if (rt0[j].tid == rt1[i].tid)
				before = rt0[j].n;
		if ((double)(rt1[i].n - before) / (1e9 / FREQ) < 20)
			continue;
		due++;
		for (size_t j = 0; j < c.n_tids; j++)
			seen += c.tids[j].tid == rt1[i].tid;
	}
	pp_cpu_sampler__stats(s, &st);
	print_message("pool: %zu threads sampled; %zu due >= 20 samples, %zu of them seen; %" PRIu64
		      " lost\n",
		      pool_threads, due, seen, st.lost);
	/* Every sample taken is delivered or counted as lost (a consumer that
	 * falls behind on a loaded machine loses some, never silently). */
	check_rate(c.raw + st.lost, cpu_ns, "pool");
	assert_int_equal(seen, due);
	if (cpu_ns >= 128 * 25000000ull)
		assert_true(due >= 64); /* the fair share is 25 ms (~25 samples) each */
	stop_workload(pid);
	pp_cpu_sampler__free(s);
	collect_free(&c);
}

/* Threads that live 20 ms each, one after another: far shorter than any
 * rescan; their samples follow their CPU time. */
static void test_short_threads(void **state)
{
	struct collect c;
	struct pp_cpu_sampler *s = sampler_new(&c);
	pid_t pid = start_argv((char *const[]){ (char *)wl_pool, "short", "20", NULL });
	struct symtab t = { 0 };
	size_t burn = 0;

	assert_int_equal(pp_cpu_sampler__add_process(s, pid), 0);
	uint64_t cpu_ns = sample_until(s, pid, 3000, MIN_CPU_NS, MAX_MS);
	symtab_for_pid(&t, pid, wl_pool, NULL);
	for (size_t i = 0; i < c.n; i++)
		burn += stack_has(&t, &c.v[i], "short_burn");
	struct pp_cpu_stats st;
	pp_cpu_sampler__stats(s, &st);
	print_message("short: %zu threads sampled, %zu samples under short_burn of %zu\n", c.n_tids,
		      burn, c.n);
	check_rate(c.raw + st.lost, cpu_ns, "short threads");
	/* Nearly all of the time is spent under the threads' own burn loop. */
	assert_true(burn * 100 >= c.n * 90);
	/* ~150 threads lived in the window, ~20 samples each. */
	assert_true((double)c.n_tids >= 0.8 * (double)cpu_ns / 20e6);
	stop_workload(pid);
	pp_cpu_sampler__free(s);
	collect_free(&c);
	symtab_free(&t);
}

/* ---- enable(false) stops samples ------------------------------------------ */

static void test_disable(void **state)
{
	struct collect c;
	struct pp_cpu_sampler *s = sampler_new(&c);
	pid_t pid = start_workload(wl_spin, "1");

	assert_int_equal(pp_cpu_sampler__add_process(s, pid), 0);
	run_for(s, 300);
	assert_int_equal(c.raw, 0); /* created disabled */
	assert_int_equal(pp_cpu_sampler__enable(s, true), 0);
	/* until the spin was sampled: a loaded machine may not run it at once */
	uint64_t t0 = pp_now_mono_ns();
	do
		run_for(s, 100);
	while (c.raw == 0 && pp_now_mono_ns() - t0 < MAX_MS * 1000000ull);
	assert_true(c.raw > 0);
	assert_int_equal(pp_cpu_sampler__enable(s, false), 0);
	run_for(s, 100); /* drain what was taken before the ioctl */
	uint64_t before = c.raw;
	run_for(s, 400);
	assert_int_equal(c.raw, before);
	stop_workload(pid);
	pp_cpu_sampler__free(s);
	collect_free(&c);
}

int main(int argc, char **argv)
{
	if (argc < 8) {
		fprintf(stderr,
			"usage: %s spin spin_nopie spin_static spin_stripped "
			"spin_stripped.debug forker pool\n",
			argv[0]);
		return 2;
	}
	wl_spin = argv[1];
	wl_nopie = argv[2];
	wl_static = argv[3];
	wl_stripped = argv[4];
	wl_stripped_dbg = argv[5];
	wl_forker = argv[6];
	wl_pool = argv[7];
	elf_version(EV_CURRENT);
	atexit(kill_running);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_spin_pie, teardown),
		cmocka_unit_test_teardown(test_spin_nopie, teardown),
		cmocka_unit_test_teardown(test_spin_static, teardown),
		cmocka_unit_test_teardown(test_spin_stripped, teardown),
		cmocka_unit_test_teardown(test_forker, teardown),
		cmocka_unit_test_teardown(test_pool, teardown),
		cmocka_unit_test_teardown(test_short_threads, teardown),
		cmocka_unit_test_teardown(test_disable, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
