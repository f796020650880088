/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbolizer against real processes: each fixture variant runs as a child,
 * prints the addresses of its functions, and the symbolizer's answer for
 * them is compared with eu-addr2line --pid on the same live process.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "symbolize/symbolize.h"
#include "util/util.h"

#define MAX_TAGS 16

struct child {
	pid_t pid;
	char tag[MAX_TAGS][16];
	uint64_t addr[MAX_TAGS];
	size_t n;
	struct pp_maps maps;
};

/* every child ever started, killed at exit even when a test failed midway */
static pid_t all_children[64];
static size_t n_all_children;

static void kill_all_children(void)
{
	for (size_t i = 0; i < n_all_children; i++)
		if (all_children[i] > 0 && kill(all_children[i], SIGKILL) == 0)
			waitpid(all_children[i], NULL, 0);
}

static int child_start(const char *path, struct child *c)
{
	int p[2];
	memset(c, 0, sizeof(*c));
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(p[1], 1);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	c->pid = pid;
	if (n_all_children < ARRAY_SIZE(all_children))
		all_children[n_all_children++] = pid;
	FILE *f = fdopen(p[0], "r");
	if (!f)
		return -errno;
	char line[256];
	bool ready = false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "ready", 5)) {
			ready = true;
			break;
		}
		char tag[16];
		unsigned long long a;
		if (c->n < MAX_TAGS && sscanf(line, "%15s %llx", tag, &a) == 2) {
			snprintf(c->tag[c->n], sizeof(c->tag[0]), "%s", tag);
			c->addr[c->n++] = a;
		}
	}
	fclose(f);
	if (!ready)
		return -EIO;
	return pp_maps__read(pid, &c->maps);
}

static void child_stop(struct child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		for (size_t i = 0; i < n_all_children; i++)
			if (all_children[i] == c->pid)
				all_children[i] = 0;
	}
	pp_maps__free(&c->maps);
	c->pid = 0;
}

static uint64_t child_addr(const struct child *c, const char *tag)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->tag[i], tag))
			return c->addr[i];
	fail_msg("fixture printed no %s", tag);
	return 0;
}

struct ref_frame {
	char name[1100];
	char file[1100];
	unsigned line;
};

/* eu-addr2line --pid -f -i [-C]: (name, file:line) pairs, innermost first. */
static size_t addr2line(pid_t pid, uint64_t addr, bool demangle, struct ref_frame *fr, size_t max)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "eu-addr2line --pid=%d -f -i %s 0x%" PRIx64 " 2>/dev/null",
		 (int)pid, demangle ? "-C" : "", addr);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char name[1024], loc[1024];
	size_t n = 0;
	while (n < max && fgets(name, sizeof(name), p) && fgets(loc, sizeof(loc), p)) {
		name[strcspn(name, "\n")] = '\0';
		loc[strcspn(loc, "\n")] = '\0';
		char *in = strstr(name, " inlined at ");
		if (in)
			*in = '\0';
		snprintf(fr[n].name, sizeof(fr[n].name), "%s", name);
		/* FILE:LINE[:COL] */
		fr[n].line = 0;
		fr[n].file[0] = '\0';
		char *c1 = strrchr(loc, ':');
		if (c1) {
			*c1 = '\0';
			unsigned a = (unsigned)strtoul(c1 + 1, NULL, 10);
			char *c2 = strrchr(loc, ':');
			if (c2 && strspn(c2 + 1, "0123456789") == strlen(c2 + 1) && c2[1]) {
				*c2 = '\0';
				a = (unsigned)strtoul(c2 + 1, NULL, 10);
			}
			fr[n].line = a;
		}
		snprintf(fr[n].file, sizeof(fr[n].file), "%s", loc);
		n++;
	}
	pclose(p);
	return n;
}

static int resolve(struct pp_symbolizer *s, const struct child *c, uint64_t addr,
		   struct pp_sym_result *res)
{
	const struct pp_map *m = pp_maps__find(&c->maps, addr);
	assert_non_null(m);
	return pp_symbolizer__resolve(s, c->pid, m, NULL, 0, addr, res);
}

/* Our frames equal eu-addr2line's: count, names, files, lines. */
static void compare_with_addr2line_ex(struct pp_symbolizer *s, const struct child *c, uint64_t addr,
				      bool demangle, bool only_with_dwarf)
{
	struct ref_frame ref[32];
	size_t nref = addr2line(c->pid, addr, demangle, ref, 32);
	if (only_with_dwarf && (nref == 0 || !strcmp(ref[0].file, "??"))) {
		print_message("no DWARF for 0x%" PRIx64 " (debug package missing?): skipped\n",
			      addr);
		return;
	}
	struct pp_sym_result res;
	assert_int_equal(resolve(s, c, addr, &res), 0);
	assert_true(nref >= 1);
	if (nref != res.n) {
		for (size_t i = 0; i < nref; i++)
			print_message("ref %zu: %s %s:%u\n", i, ref[i].name, ref[i].file,
				      ref[i].line);
		for (size_t i = 0; i < res.n; i++)
			print_message("got %zu: %s %s:%u\n", i, res.frames[i].function,
				      res.frames[i].file ? res.frames[i].file : "?",
				      res.frames[i].line);
	}
	assert_int_equal(res.n, nref);
	assert_true(res.has_function);
	for (size_t i = 0; i < nref; i++) {
		/* podprof shortens demangled C++ names as go tool pprof does */
		char *want = demangle ? pp_cxx_short_name(ref[i].name) : strdup(ref[i].name);
		assert_non_null(want);
		assert_string_equal(res.frames[i].function, want);
		free(want);
		if (strcmp(ref[i].file, "??")) {
			assert_non_null(res.frames[i].file);
			assert_string_equal(res.frames[i].file, ref[i].file);
			assert_int_equal(res.frames[i].line, ref[i].line);
		}
	}
	assert_int_equal(res.has_inline, nref > 1);
	pp_sym_result__free(&res);
}

static void compare_with_addr2line(struct pp_symbolizer *s, const struct child *c, uint64_t addr,
				   bool demangle)
{
	compare_with_addr2line_ex(s, c, addr, demangle, false);
}

/* The source line start_line points at names the function. */
static void check_start_line(const struct pp_sym_frame *f, const char *name)
{
	assert_non_null(f->file);
	assert_true(f->start_line > 0);
	FILE *src = fopen(f->file, "r");
	assert_non_null(src);
	char line[512];
	bool found = false;
	for (unsigned l = 1; fgets(line, sizeof(line), src); l++)
		if (l == f->start_line) {
			found = strstr(line, name) != NULL;
			break;
		}
	fclose(src);
	if (!found)
		fail_msg("line %u of %s does not declare %s", f->start_line, f->file, name);
}

struct variant {
	const char *path;
	bool dwarf; /* file:line available (own DWARF or via debuglink) */
	bool static_named; /* the static function has a symbol */
	bool no_addr2line; /* binutils' addr2line cannot read it (clang without aranges) */
};

static void check_variant(const struct variant *v)
{
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	assert_non_null(s);
	struct child c;
	assert_int_equal(child_start(v->path, &c), 0);

	uint64_t outer = child_addr(&c, "outer"), leaf = child_addr(&c, "leaf");
	uint64_t stat = child_addr(&c, "static"), inlret = child_addr(&c, "inlret");
	uint64_t mainf = child_addr(&c, "main");
	struct pp_sym_result res;

	if (v->dwarf && !v->no_addr2line) {
		compare_with_addr2line(s, &c, outer, false);
		compare_with_addr2line(s, &c, leaf, false);
		compare_with_addr2line(s, &c, stat, false);
		compare_with_addr2line(s, &c, mainf, false);
		compare_with_addr2line(s, &c, inlret - 1, false);
		/* libc: its DWARF is in /usr/lib/debug/.build-id (libc6-dbg) when installed */
		uint64_t lf = child_addr(&c, "libcfn") + 4;
		const struct pp_map *lm = pp_maps__find(&c.maps, lf);
		/* (non-PIE code takes the address of the PLT stub instead) */
		if (lm && lm->path && strstr(lm->path, "/libc.so"))
			compare_with_addr2line_ex(s, &c, lf, false, true);
		if (!strcmp(v->path, SYM_FIX_NOPIE)) {
			/* non-PIE: &fflush is the executable's PLT stub */
			assert_string_equal(lm->path, v->path);
			assert_int_equal(resolve(s, &c, lf, &res), 0);
			assert_true(res.has_function);
			assert_string_equal(res.frames[0].function, "fflush@plt");
			pp_sym_result__free(&res);
		}
	}
	if (v->dwarf) {
		/* The inline chain of the return address inside pp_fix_inl. */
		assert_int_equal(resolve(s, &c, inlret - 1, &res), 0);
		assert_int_equal(res.n, 2);
		assert_true(res.has_inline && res.has_line && res.has_file);
		assert_string_equal(res.frames[0].function, "pp_fix_inl");
		assert_string_equal(res.frames[1].function, "pp_fix_outer");
		check_start_line(&res.frames[0], "pp_fix_inl(");
		check_start_line(&res.frames[1], "pp_fix_outer(");
		/* frame 1's line is the call site of pp_fix_inl inside pp_fix_outer */
		assert_true(res.frames[1].line > res.frames[1].start_line);
		assert_true(res.frames[0].line > res.frames[0].start_line);
		assert_true(res.frames[0].line < res.frames[1].start_line);
		pp_sym_result__free(&res);
	}

	/* Names, with or without DWARF. */
	assert_int_equal(resolve(s, &c, leaf + 1, &res), 0);
	assert_true(res.has_function);
	assert_string_equal(res.frames[res.n - 1].function, "pp_fix_leaf");
	assert_string_equal(res.frames[res.n - 1].system_name, "pp_fix_leaf");
	pp_sym_result__free(&res);

	const struct pp_map *m = pp_maps__find(&c.maps, stat);
	assert_non_null(m);
	assert_int_equal(resolve(s, &c, stat, &res), 0);
	assert_int_equal(res.n, 1);
	if (v->static_named) {
		assert_true(res.has_function);
		assert_string_equal(res.frames[0].function, "pp_fix_static");
	} else {
		/* no symbol covers it: basename+0x<file offset>, not a neighbour's name */
		char want[512];
		const char *base = strrchr(v->path, '/') + 1;
		snprintf(want, sizeof(want), "%s+0x%" PRIx64, base, stat - m->start + m->offset);
		assert_false(res.has_function);
		assert_string_equal(res.frames[0].function, want);
		assert_null(res.frames[0].file);
	}
	pp_sym_result__free(&res);

	struct pp_symbolizer_stats st;
	pp_symbolizer__stats(s, &st);
	assert_true(st.files_loaded >= 1);
	assert_true(st.lookups >= 2);
	child_stop(&c);
	pp_symbolizer__free(s);
}

static void test_pie(void **state)
{
	check_variant(&(struct variant){ SYM_FIX_PIE, true, true, false });
}

static void test_nopie(void **state)
{
	check_variant(&(struct variant){ SYM_FIX_NOPIE, true, true, false });
}

static void test_static(void **state)
{
	check_variant(&(struct variant){ SYM_FIX_STATIC, true, true, false });
}

static void test_debuglink(void **state)
{
	check_variant(&(struct variant){ SYM_FIX_DBG, true, true, false });
}

#ifdef SYM_FIX_DWZ
/* DWARF partly in a dwz common file (inline functions' abstract origins live there). */
static void test_dwz(void **state)
{
	check_variant(&(struct variant){ SYM_FIX_DWZ, true, true, false });
}
#endif

#ifdef SYM_FIX_CLANG
/* No .debug_aranges at all (clang): CUs found through the symbolizer's own table. */
static void test_clang(void **state)
{
	check_variant(&(struct variant){ SYM_FIX_CLANG, true, true, true });
}

/* .debug_aranges describing one CU (gcc's) of two: the other (clang's) is found through
 * the symbolizer's own table, the described one through aranges. */
static void test_mixed_aranges(void **state)
{
	check_variant(&(struct variant){ SYM_FIX_MIXED, true, true, true });
}
#endif

static void test_stripall(void **state)
{
	check_variant(&(struct variant){ SYM_FIX_STRIPALL, false, false, false });
}

/* Symbols only: no file:line, a single frame, still the right names. */
static void test_no_dwarf_opt(void **state)
{
	struct pp_symbolizer *s =
		pp_symbolizer__new(&(struct pp_symbolizer_opts){ .no_dwarf = true });
	struct child c;
	assert_int_equal(child_start(SYM_FIX_PIE, &c), 0);
	struct pp_sym_result res;
	assert_int_equal(resolve(s, &c, child_addr(&c, "inlret") - 1, &res), 0);
	assert_int_equal(res.n, 1);
	assert_string_equal(res.frames[0].function, "pp_fix_outer");
	assert_null(res.frames[0].file);
	assert_false(res.has_line);
	pp_sym_result__free(&res);
	child_stop(&c);
	pp_symbolizer__free(s);
}

/* A mismatched debug file (same debuglink name, other contents) is rejected. */
static void test_debuglink_mismatch(void **state)
{
	char dir[] = "/tmp/pp-sym-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char cmd[4096], exe[512];
	snprintf(exe, sizeof(exe), "%s/sym-fixture-dbg", dir);
	/* the right stripped binary, but its debuglink target is another program's debug file */
	snprintf(cmd, sizeof(cmd),
		 "cp %s %s && objcopy --only-keep-debug %s %s/sym-fixture-dbg.debug", SYM_FIX_DBG,
		 exe, SYM_FIX_PIE, dir);
	assert_int_equal(system(cmd), 0);
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	struct child c;
	assert_int_equal(child_start(exe, &c), 0);
	struct pp_sym_result res;
	uint64_t stat = child_addr(&c, "static");
	assert_int_equal(resolve(s, &c, stat, &res), 0);
	assert_false(res.has_function); /* the static symbol lives only in the real debug file */
	assert_null(res.frames[0].file);
	pp_sym_result__free(&res);
	assert_int_equal(resolve(s, &c, child_addr(&c, "leaf"), &res), 0);
	assert_string_equal(res.frames[0].function, "pp_fix_leaf"); /* from .dynsym */
	assert_null(res.frames[0].file);
	pp_sym_result__free(&res);
	child_stop(&c);
	pp_symbolizer__free(s);

	/* Now the right debug file in a .debug/ subdirectory is found. */
	snprintf(cmd, sizeof(cmd),
		 "rm %s/sym-fixture-dbg.debug && mkdir %s/.debug && "
		 "cp %s.debug %s/.debug/sym-fixture-dbg.debug",
		 dir, dir, SYM_FIX_DBG, dir);
	assert_int_equal(system(cmd), 0);
	s = pp_symbolizer__new(NULL);
	assert_int_equal(child_start(exe, &c), 0);
	assert_int_equal(resolve(s, &c, child_addr(&c, "static"), &res), 0);
	assert_true(res.has_function);
	assert_string_equal(res.frames[0].function, "pp_fix_static");
	assert_non_null(res.frames[0].file);
	pp_sym_result__free(&res);
	child_stop(&c);
	pp_symbolizer__free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

#ifdef SYM_FIX_CXX
static void test_cxx(void **state)
{
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	struct child c;
	assert_int_equal(child_start(SYM_FIX_CXX, &c), 0);
	uint64_t twice = child_addr(&c, "twice"), add = child_addr(&c, "add");
	compare_with_addr2line(s, &c, twice, true);
	compare_with_addr2line(s, &c, add, true);
	struct pp_sym_result res;
	assert_int_equal(resolve(s, &c, twice, &res), 0);
	assert_string_equal(res.frames[res.n - 1].function, "ppfix::inner::Box::twice");
	assert_string_equal(res.frames[res.n - 1].system_name, "_ZN5ppfix5inner3BoxIlE5twiceEl");
	pp_sym_result__free(&res);
	assert_int_equal(resolve(s, &c, add, &res), 0);
	assert_string_equal(res.frames[res.n - 1].function, "ppfix::inner::add");
	assert_true(strncmp(res.frames[res.n - 1].system_name, "_ZN5ppfix5inner3add", 19) == 0);
	pp_sym_result__free(&res);
	child_stop(&c);
	pp_symbolizer__free(s);
}
#endif

/* A cache too small for one file: every file is evicted after use, answers stay right. */
static void test_tiny_cache(void **state)
{
	struct pp_symbolizer *s =
		pp_symbolizer__new(&(struct pp_symbolizer_opts){ .cache_bytes = 1 });
	struct child a, b;
	assert_int_equal(child_start(SYM_FIX_PIE, &a), 0);
	assert_int_equal(child_start(SYM_FIX_NOPIE, &b), 0);
	for (int i = 0; i < 10; i++) {
		struct child *c = i % 2 ? &a : &b;
		struct pp_sym_result res;
		assert_int_equal(resolve(s, c, child_addr(c, "static"), &res), 0);
		assert_string_equal(res.frames[res.n - 1].function, "pp_fix_static");
		pp_sym_result__free(&res);
	}
	struct pp_symbolizer_stats st;
	pp_symbolizer__stats(s, &st);
	assert_true(st.files_evicted >= 9);
	assert_int_equal(st.cache_bytes, 0); /* nothing in use, nothing kept */
	child_stop(&a);
	child_stop(&b);
	pp_symbolizer__free(s);
}

struct thr_arg {
	struct pp_symbolizer *s;
	struct child *c[2];
	int errors;
};

static void *thr_main(void *p)
{
	struct thr_arg *t = p;
	for (int i = 0; i < 200; i++) {
		struct child *c = t->c[i % 2];
		struct pp_sym_result res;
		const char *tag = i % 3 ? "outer" : "leaf";
		const char *want = i % 3 ? "pp_fix_outer" : "pp_fix_leaf";
		uint64_t addr = 0;
		for (size_t k = 0; k < c->n; k++)
			if (!strcmp(c->tag[k], tag))
				addr = c->addr[k];
		const struct pp_map *m = pp_maps__find(&c->maps, addr);
		if (!m || pp_symbolizer__resolve(t->s, c->pid, m, NULL, 0, addr, &res) < 0) {
			t->errors++;
			continue;
		}
		if (strcmp(res.frames[res.n - 1].function, want))
			t->errors++;
		pp_sym_result__free(&res);
	}
	return NULL;
}

/* Several threads, a cache holding about one file: no crash, no wrong answer. */
static void test_threads(void **state)
{
	struct pp_symbolizer *s =
		pp_symbolizer__new(&(struct pp_symbolizer_opts){ .cache_bytes = 20000 });
	struct child a, b;
	assert_int_equal(child_start(SYM_FIX_PIE, &a), 0);
	assert_int_equal(child_start(SYM_FIX_STATIC, &b), 0);
	pthread_t th[4];
	struct thr_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (struct thr_arg){ .s = s, .c = { i % 2 ? &a : &b, i % 2 ? &b : &a } };
		assert_int_equal(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].errors, 0);
	}
	child_stop(&a);
	child_stop(&b);
	pp_symbolizer__free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pie),
		cmocka_unit_test(test_nopie),
		cmocka_unit_test(test_static),
		cmocka_unit_test(test_debuglink),
#ifdef SYM_FIX_DWZ
		cmocka_unit_test(test_dwz),
#endif
#ifdef SYM_FIX_CLANG
		cmocka_unit_test(test_clang),
		cmocka_unit_test(test_mixed_aranges),
#endif
		cmocka_unit_test(test_stripall),
		cmocka_unit_test(test_no_dwarf_opt),
		cmocka_unit_test(test_debuglink_mismatch),
#ifdef SYM_FIX_CXX
		cmocka_unit_test(test_cxx),
#endif
		cmocka_unit_test(test_tiny_cache),
		cmocka_unit_test(test_threads),
	};
	atexit(kill_all_children);
	int r = cmocka_run_group_tests(tests, NULL, NULL);
	kill_all_children();
	return r;
}
