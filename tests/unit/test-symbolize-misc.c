/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbolizer pieces that need no child process: demangling, /proc/kallsyms,
 * perf maps, and corrupted ELF files mapped into this process.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "symbolize/symbolize.h"
#include "util/util.h"

static void test_cxx_short_name(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "unsigned long mix::heavy_b<mix::Payload>(mix::Payload, unsigned int)", "mix::"
											  "heavy_"
											  "b" },
		{ "ppfix::inner::Box<long>::twice(long)", "ppfix::inner::Box::twice" },
		{ "(anonymous namespace)::worker(void*)", "(anonymous namespace)::worker" },
		{ "main::{lambda(int)#1}::operator()(int) const", "main::{lambda(int)#1}::operator("
								  ")" },
		{ "bool std::operator< <int>(std::vector<int> const&, std::vector<int> const&)",
		  "std::operator<" },
		{ "std::basic_ostream<char, std::char_traits<char> >& std::operator<< "
		  "<std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, "
		  "char const*)",
		  "std::operator<<" },
		{ "Foo::operator unsigned long() const", "Foo::operator unsigned long" },
		{ "operator new(unsigned long)", "operator new" },
		{ "Foo::operator->() const", "Foo::operator->" },
		{ "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > "
		  "name[abi:cxx11](int)",
		  "name[abi:cxx11]" }, /* go tool pprof keeps ABI tags */
		{ "Foo::bar(int) const", "Foo::bar" },
		{ "Foo::bar() const &&", "Foo::bar" },
		{ "Foo::bar() volatile", "Foo::bar" },
		{ "A::f(int) const::{lambda()#1}::operator()() const", "A::f(int) "
								       "const::{lambda()#1}::"
								       "operator()" },
		{ "decltype (g({parm#1})) f<int>(int)", "f" },
		{ "void (*A<int>::f<long>() const)(long)", "A::f" },
		{ "foo(int) [clone .cold]", "foo" },
		{ "plain", "plain" },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *d = pp_cxx_short_name(cases[i].in);
		assert_non_null(d);
		if (strcmp(d, cases[i].out))
			fail_msg("%s -> \"%s\", want \"%s\"", cases[i].in, d, cases[i].out);
		free(d);
	}
}

/*
 * Real mangled names from Debian's C++ libraries and programs (libstdc++,
 * RocksDB, Boost), each with what go tool pprof shows for it by default:
 * data/symbolize/cxx-names.tsv, written by gen-cxx-names.py there. The
 * names go through pp_demangle, the path profiles take; every mismatch is
 * printed before the test fails.
 */
static void test_cxx_names_table(void **state)
{
	FILE *f = fopen(SYM_CXX_NAMES, "r");
	char *line = NULL;
	size_t cap = 0, rows = 0, bad = 0;
	ssize_t len;

	(void)state;
	if (!f)
		fail_msg("%s: %s", SYM_CXX_NAMES, strerror(errno));
	while ((len = getline(&line, &cap, f)) > 0) {
		char *tab, *got;

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if (!len || line[0] == '#')
			continue;
		tab = strchr(line, '\t');
		assert_non_null(tab);
		*tab = '\0';
		rows++;
		got = pp_demangle(line);
		if (!got || strcmp(got, tab + 1)) {
			print_message("%s: got \"%s\", go tool pprof shows \"%s\"\n", line,
				      got ? got : "(not demangled)", tab + 1);
			bad++;
		}
		free(got);
	}
	free(line);
	fclose(f);
	print_message("%zu names, %zu differ from go tool pprof\n", rows, bad);
	assert_true(rows >= 100);
	assert_int_equal(bad, 0);
}

/*
 * Shapes the Debian libraries in cxx-names.tsv do not export, each checked
 * by hand with go tool pprof (go1.19.8) as gen-cxx-names.py does.
 */
static void test_demangle_shapes(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "_ZZ4mainENUt_3fooEv", "main::{unnamed type#1}::foo" },
		{ "_ZN1AIiE1fIlEEPFvT_Ev", "A::f" },
		{ "_ZNK1A1fIiEEPFvvEv", "A::f" },
		{ "_Zli3_kmy", "operator\"\" _km" },
		{ "_ZN3FoocvPFviEEv", "Foo::operator void (*)(int)" },
		{ "_ZNK3FoocvSsEv", "Foo::operator std::string" },
		{ "_ZNK1AcvRKiEv", "A::operator int const&" },
		{ "_ZZN1A1fIiEEvvE1x", "A::f()::x" },
		{ "_ZZ1fvEd_NKUlvE_clEv", "f()::{default arg#1}::{lambda()#1}::operator()" },
		{ "_ZZZ1fvENKUlvE_clEvENKUlvE_clEv", "f()::{lambda()#1}::operator()() "
						     "const::{lambda()#1}::operator()" },
		{ "_ZZN1A1fEiENKUlSt6vectorIiSaIiEEE_clES2_", "A::f(int)::{lambda(std::vector)#1}::"
							      "operator()" },
		{ "_ZZN12_GLOBAL__N_11fEvENKUlvE0_clEv", "(anonymous "
							 "namespace)::f()::{lambda()#2}::operator("
							 ")" },
		{ "_ZThn8_N1A1fIiEEvv", "non-virtual thunk to void A::f()" },
		{ "_ZTv0_n24_NK1A1fEv.cold", "virtual thunk to A::f() const" },
		{ "_ZGVZ4mainE1x", "guard variable for main::x" },
		{ "_ZNK1A1fEv.isra.0.cold", "A::f" },
		{ "_ZNKR1A1fEv", "A::f" },
		{ "_ZNVK1A1fEv", "A::f" },
		{ "_ZNO1A1fEv", "A::f" },
		{ "_Z1fIiEDTcl1gfp_EET_", "f" },
		{ "_ZNK1AgtIiEEbT_", "A::operator>" },
		{ "_ZN1AlsIiEERS_T_", "A::operator<<" },
		{ "_ZN1AssERKS_", "A::operator<=>" },
		{ "_ZNK1AdsEv", "A::operator.*" },
		{ "_ZN1AdaEPv", "A::operator delete[]" },
		{ "_ZN1AB5cxx111fEv", "A[abi:cxx11]::f" },
		{ "_ZN1A1fB5cxx11B3fooEv", "A::f[abi:cxx11][abi:foo]" },
		{ "_ZNSt8functionIFviEEclEi", "std::function::operator()" },
		{ "_ZN1AIXgtLi1ELi2EEE1fEv", "A::f" },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *d = pp_demangle(cases[i].in);
		if (!d || strcmp(d, cases[i].out))
			fail_msg("%s -> \"%s\", want \"%s\"", cases[i].in, d ? d : "(null)",
				 cases[i].out);
		free(d);
	}
}

static void test_demangle(void **state)
{
	static const struct {
		const char *in, *out; /* out NULL: not demangled */
	} cases[] = {
		{ "_ZN5ppfix5inner3BoxIlE5twiceEl", "ppfix::inner::Box::twice" },
		{ "_Z3addIiET_S0_S0_", "add" },
		{ "_ZNSt6vectorIiSaIiEE9push_backERKi", NULL /* checked by prefix below */ },
		{ "_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write" },
		{ "_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h1a2b3c4d5e6f7a8bE",
		  "std::rt::lang_start::{{closure}}" },
		{ "_ZN60_$LT$alloc..string..String$u20$as$u20$core..fmt..Display$GT$"
		  "3fmt17h11aa22bb33cc44ddE",
		  "<alloc::string::String as core::fmt::Display>::fmt" },
		{ "_ZN4core3ptr13drop_in_place17h0123456789abcdeE",
		  NULL }, /* 15-digit hash: not Rust */
		{ "_RNvCs1234_7mycrate4main", NULL },
		{ "_R", NULL },
		{ "main", NULL },
		{ "", NULL },
		{ "_Z", NULL },
		{ "_ZN", NULL },
		{ "_ZN99999999999999999999E", NULL },
		{ "_ZN3foo17h0123456789abcdefE", "foo" },
		/* PLT stubs: as go tool pprof shows them (checked with it) */
		{ "_ZN7rocksdb9CleanableC2Ev@plt", "rocksdb::Cleanable::Cleanable" },
		{ "_ZNK7rocksdb5Slice7compareERKS0_@plt", "rocksdb::Slice::compare" },
		{ "_ZdlPv@plt", "operator delete" },
		{ "malloc@plt", NULL },
		{ "_Z@plt", NULL },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *d = pp_demangle(cases[i].in);
		if (i == 2) {
			assert_non_null(d);
			assert_string_equal(d, "std::vector::push_back");
		} else if (cases[i].out) {
			if (!d)
				fail_msg("%s not demangled", cases[i].in);
			assert_string_equal(d, cases[i].out);
		} else if (d) {
			/* "_ZN...drop_in_place17h...E" with a short hash is valid C++ too */
			assert_true(strncmp(cases[i].in, "_ZN4core", 8) == 0);
		}
		free(d);
	}
	assert_null(pp_demangle(NULL));
	/* very long and deeply nested input does not crash */
	char *big = malloc(20000);
	assert_non_null(big);
	strcpy(big, "_Z");
	for (int i = 2; i < 19990; i += 2)
		memcpy(big + i, "PP", 2);
	big[19990] = 'i';
	big[19991] = '\0';
	free(pp_demangle(big));
	memcpy(big, "_Z1f", 4);
	for (int i = 4; i < 3000; i++)
		big[i] = 'P';
	strcpy(big + 3000, "v");
	free(pp_demangle(big));
	free(big);
}

struct kent {
	uint64_t addr;
	char name[300];
};

static int kent_cmp(const void *a, const void *b)
{
	const struct kent *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void test_kallsyms(void **state)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	assert_non_null(f);
	size_t n = 0, cap = 1 << 18;
	struct kent *v = malloc(cap * sizeof(*v));
	assert_non_null(v);
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char type, name[256];
		if (sscanf(line, "%llx %c %255s", &a, &type, name) != 3 || !a)
			continue;
		if (!strchr("tTwW", type))
			continue;
		if (n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			assert_non_null(v);
		}
		v[n].addr = a;
		snprintf(v[n].name, sizeof(v[n].name), "%s%s", name,
			 strchr(line, '\t') ? "\t" : "");
		n++;
	}
	fclose(f);
	if (n == 0) {
		print_message("kallsyms has no addresses (no privilege): skipped\n");
		skip();
	}
	qsort(v, n, sizeof(*v), kent_cmp);
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	size_t checked = 0;
	/* a spread of core-kernel symbols with a unique address */
	for (size_t i = 1; i + 1 < n && checked < 50; i += n / 60 + 1) {
		if (v[i].addr == v[i - 1].addr || v[i].addr == v[i + 1].addr ||
		    strchr(v[i].name, '\t'))
			continue;
		struct pp_sym_result res;
		uint64_t a = v[i].addr + (v[i + 1].addr - v[i].addr) / 2;
		assert_int_equal(pp_symbolizer__resolve_kernel(s, a, &res), 0);
		assert_int_equal(res.n, 1);
		assert_string_equal(res.frames[0].function, v[i].name);
		assert_true(res.has_function);
		pp_sym_result__free(&res);
		checked++;
	}
	assert_true(checked >= 10);
	/* names are kept in deflated blocks of 64: the first and last of a block, and the
	 * first symbols (block 0) */
	static const size_t edges[] = { 1, 2, 62, 63, 64, 65, 127, 128, 64 * 100 - 1, 64 * 100 };
	size_t edge_checked = 0;
	for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]); e++) {
		size_t i = edges[e];
		if (i + 1 >= n || v[i].addr == v[i - 1].addr || v[i].addr == v[i + 1].addr ||
		    strchr(v[i].name, '\t'))
			continue;
		struct pp_sym_result res;
		assert_int_equal(pp_symbolizer__resolve_kernel(s, v[i].addr, &res), 0);
		assert_string_equal(res.frames[0].function, v[i].name);
		pp_sym_result__free(&res);
		edge_checked++;
	}
	assert_true(edge_checked >= 3);
	struct pp_sym_result res;
	assert_int_equal(pp_symbolizer__resolve_kernel(s, v[0].addr - 1, &res), -ENOENT);
	struct pp_symbolizer_stats st;
	pp_symbolizer__stats(s, &st);
	assert_true(st.cache_bytes > n * 4); /* 4 bytes of address a symbol, plus names */
	pp_symbolizer__free(s);
	free(v);
}

static void write_file(const char *path, const char *text, const char *mode)
{
	FILE *f = fopen(path, mode);
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void expect_jit(struct pp_symbolizer *s, uint64_t addr, const char *name)
{
	struct pp_sym_result res;
	int r = pp_symbolizer__resolve_jit(s, getpid(), addr, &res);
	if (!name) {
		assert_int_equal(r, -ENOENT);
		return;
	}
	if (r != 0)
		fail_msg("0x%" PRIx64 ": %d, want %s", addr, r, name);
	assert_string_equal(res.frames[0].function, name);
	pp_sym_result__free(&res);
}

static void test_perf_map(void **state)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	unlink(path);
	expect_jit(s, 0x1000, NULL); /* no file */
	write_file(path,
		   "1000 100 jit_one\n"
		   "0x2000 0x80 Interpreter::run(int) [jitted]\n"
		   "garbage line\n"
		   "zz 10 bad_start\n"
		   "4000 0 zero_size\n"
		   "5000 10\n"
		   "7f0000000000 20 _ZN3foo17h0123456789abcdefE\n",
		   "w");
	expect_jit(s, 0x1000, "jit_one");
	expect_jit(s, 0x10ff, "jit_one");
	expect_jit(s, 0x1100, NULL);
	expect_jit(s, 0x2040, "Interpreter::run(int) [jitted]");
	expect_jit(s, 0x4000, NULL);
	expect_jit(s, 0x5005, NULL);
	expect_jit(s, 0x7f0000000010, "foo"); /* demangled */
	expect_jit(s, 0xfff, NULL);
	/* new code appended: a miss re-reads the file; a later overlapping line wins */
	write_file(path, "3000 10 jit_three\n1000 10 jit_new\n", "a");
	expect_jit(s, 0x3005, "jit_three");
	expect_jit(s, 0x1005, "jit_new");
	expect_jit(s, 0x1050, "jit_one");
	/* rewritten entirely (different size) */
	write_file(path, "1000 100 jit_replaced\n", "w");
	expect_jit(s, 0x6000, NULL); /* the miss reloads */
	expect_jit(s, 0x1050, "jit_replaced");
	unlink(path);
	pp_symbolizer__free(s);
}

/*
 * A name whose substitutions nest: each "S0_I<Sn_><Sn_>E" is b<T, T> of
 * the previous type T, so its printed size doubles per 11 mangled bytes.
 * 245 bytes print as ~54 MB of parameter list (and took libstdc++'s
 * __cxa_demangle seconds and several times that in memory).
 */
static char *bomb_name(size_t len)
{
	static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	struct pp_buf b = { 0 };
	assert_int_equal(pp_buf_puts(&b, "_Z1f1a1bIS_S_E"), 0);
	for (unsigned i = 2; b.len < len; i++) {
		char id[8];
		snprintf(id, sizeof(id), "S%c_", digits[i - 1]);
		assert_true(i - 1 < 36);
		assert_int_equal(pp_buf_puts(&b, "S0_I"), 0);
		assert_int_equal(pp_buf_puts(&b, id), 0);
		assert_int_equal(pp_buf_puts(&b, id), 0);
		assert_int_equal(pp_buf_puts(&b, "E"), 0);
	}
	assert_int_equal(pp_buf_reserve(&b, 0), 0);
	b.data[b.len] = '\0';
	return (char *)b.data;
}

static long maxrss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/*
 * The JIT map entry: a perf map naming code with an exponentially
 * expanding mangled name. Resolving it (in a child, whose peak RSS is its
 * own) must cost a bounded amount: less than 32 MiB of peak RSS growth,
 * where an unbounded demangle of this name needs over 50 MB for the text
 * alone; and the name shown is bounded (PP_DEMANGLE_MAX_OUTPUT).
 */
static void test_demangle_bomb(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char path[64];
		alarm(100); /* a hang guard only */
		_cleanup_free_ char *bomb = bomb_name(245);
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
		FILE *f = fopen(path, "w");
		if (!f)
			_exit(10);
		fprintf(f, "1000 100 %s\n2000 100 _ZN3foo3barEi\n", bomb);
		fclose(f);
		struct pp_symbolizer *s = pp_symbolizer__new(NULL);
		struct pp_sym_result res;
		long before = maxrss_kb();
		/* a normal name first: the demangler's own start-up is not the bomb */
		if (pp_symbolizer__resolve_jit(s, getpid(), 0x2010, &res) != 0)
			_exit(11);
		if (strcmp(res.frames[0].function, "foo::bar"))
			_exit(12);
		pp_sym_result__free(&res);
		before = maxrss_kb();
		int r = pp_symbolizer__resolve_jit(s, getpid(), 0x1010, &res);
		long grown = maxrss_kb() - before;
		unlink(path);
		if (r != 0)
			_exit(13);
		size_t n = strlen(res.frames[0].function);
		fprintf(stderr, "bomb: name %zu bytes \"%.40s\", peak RSS +%ld KiB\n", n,
			res.frames[0].function, grown);
		if (n > 4096)
			_exit(14);
		if (grown > 16 * 1024)
			_exit(15);
		pp_sym_result__free(&res);
		pp_symbolizer__free(s);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("bomb child: %s %d", WIFEXITED(status) ? "exit" : "signal",
			 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

static uint64_t rchar(void)
{
	char *text = NULL;
	size_t len;
	uint64_t v = 0;
	if (pp_read_file("/proc/self/io", 4096, &text, &len) == 0) {
		const char *p = strstr(text, "rchar: ");
		if (p)
			v = strtoull(p + 7, NULL, 10);
	}
	free(text);
	return v;
}

/*
 * A JIT that appends to a large perf map all the time while podprof keeps
 * missing in it: a miss re-reads a changed map, but a few times a second at
 * most, not on every miss (each re-read costs the whole file). Measured in
 * bytes read (rchar), against a bound derived from the elapsed time: two
 * re-reads per second plus four (the limit: three in a row, then one a second).
 */
static void test_perf_map_churn(void **state)
{
	char path[64];
	(void)state;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	for (unsigned i = 0; i < 100000; i++)
		fprintf(f, "%x 10 jit_function_number_%u_with_a_long_name_like_real_jits_make\n",
			0x100000 + i * 0x10, i);
	fclose(f);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	struct pp_sym_result res;
	assert_int_equal(pp_symbolizer__resolve_jit(s, getpid(), 0x100005, &res), 0);
	pp_sym_result__free(&res);
	uint64_t r0 = rchar(), t0 = pp_now_mono_ns();
	const unsigned rounds = 40;
	for (unsigned i = 0; i < rounds; i++) {
		char line[64];
		snprintf(line, sizeof(line), "%x 10 appended_%u\n", 0x10000000 + i * 0x10, i);
		write_file(path, line, "a");
		/* a miss: just appended code, or an address no line covers */
		if (pp_symbolizer__resolve_jit(s, getpid(), 0x20000000 + i, &res) == 0)
			pp_sym_result__free(&res);
	}
	double secs = (double)(pp_now_mono_ns() - t0) / 1e9;
	uint64_t read = rchar() - r0, bound = (uint64_t)((secs * 2 + 4) * (double)st.st_size);
	print_message("  %u misses on a changing %lld-byte perf map in %.2f s: %" PRIu64
		      " bytes read (bound %" PRIu64 ")\n",
		      rounds, (long long)st.st_size, secs, read, bound);
	assert_true(read <= bound);
	/* still follows the JIT: a later miss sees the appended code */
	usleep(1100 * 1000);
	assert_int_equal(pp_symbolizer__resolve_jit(s, getpid(), 0x10000005, &res), 0);
	assert_string_equal(res.frames[0].function, "appended_0");
	pp_sym_result__free(&res);
	unlink(path);
	pp_symbolizer__free(s);
}

/* Maps path into this process and resolves a few addresses in it. */
static void resolve_mapped(const char *path, size_t len, size_t off, bool expect_named)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)off);
	assert_true(p != MAP_FAILED);
	close(fd);
	struct pp_maps maps;
	assert_int_equal(pp_maps__read(getpid(), &maps), 0);
	const struct pp_map *m = pp_maps__find(&maps, (uint64_t)(uintptr_t)p);
	assert_non_null(m);
	assert_non_null(m->path);
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	for (size_t k = 0; k < 16; k++) {
		uint64_t a = (uint64_t)(uintptr_t)p + k * (len / 16) + 0x11;
		struct pp_sym_result res;
		assert_int_equal(pp_symbolizer__resolve(s, getpid(), m, NULL, 0, a, &res), 0);
		assert_true(res.n >= 1);
		assert_non_null(res.frames[0].function);
		assert_non_null(res.frames[0].system_name);
		if (!expect_named) {
			char want[256];
			snprintf(want, sizeof(want), "%s+0x%" PRIx64, strrchr(path, '/') + 1,
				 a - m->start + m->offset);
			assert_false(res.has_function);
			assert_string_equal(res.frames[0].function, want);
		}
		pp_sym_result__free(&res);
	}
	pp_symbolizer__free(s);
	pp_maps__free(&maps);
	munmap(p, len);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void test_corrupt_elf(void **state)
{
	char dir[] = "/tmp/pp-symc-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	_cleanup_free_ char *orig = NULL;
	size_t olen;
	assert_int_equal(pp_read_file(SYM_FIX_PIE, 64 << 20, &orig, &olen), 0);
	assert_true(olen > 16384);
	char *buf = malloc(olen);
	assert_non_null(buf);

	/* pure garbage */
	for (size_t i = 0; i < olen; i++)
		buf[i] = (char)rng();
	snprintf(path, sizeof(path), "%s/garbage.so", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_int_equal(write(fd, buf, olen), (ssize_t)olen);
	close(fd);
	resolve_mapped(path, 8192, 0, false);

	/* garbage with an ELF magic */
	memcpy(buf, orig, 64);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_int_equal(write(fd, buf, olen), (ssize_t)olen);
	close(fd);
	resolve_mapped(path, 8192, 0, false);

	/* truncated copies */
	static const size_t cuts[] = { 0x40, 0x200, 0x1000, 0x1800, 0x3000 };
	for (size_t i = 0; i < ARRAY_SIZE(cuts); i++) {
		snprintf(path, sizeof(path), "%s/trunc%zu.so", dir, i);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		assert_int_equal(write(fd, orig, cuts[i]), (ssize_t)cuts[i]);
		close(fd);
		resolve_mapped(path, 4096, 0, false);
	}

	/* random bytes flipped after the loaded part (symbols, DWARF, section headers) */
	for (int round = 0; round < 40; round++) {
		memcpy(buf, orig, olen);
		int nflip = round < 20 ? 8 : 200;
		for (int k = 0; k < nflip; k++) {
			size_t at = 0x3000 + rng() % (olen - 0x3000);
			buf[at] = (char)rng();
		}
		snprintf(path, sizeof(path), "%s/flip%d.so", dir, round);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		assert_int_equal(write(fd, buf, olen), (ssize_t)olen);
		close(fd);
		resolve_mapped(path, 8192, 0, true);
		unlink(path);
	}
	/* section header table pointing outside the file */
	memcpy(buf, orig, olen);
	uint64_t shoff = UINT64_MAX - 100;
	memcpy(buf + 0x28, &shoff, 8);
	snprintf(path, sizeof(path), "%s/shoff.so", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_int_equal(write(fd, buf, olen), (ssize_t)olen);
	close(fd);
	resolve_mapped(path, 8192, 0, false);

	free(buf);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* Anonymous memory and bad arguments. */
static void test_anon(void **state)
{
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	struct pp_map m = { .start = 0x1000, .end = 0x2000 };
	struct pp_sym_result res;
	assert_int_equal(pp_symbolizer__resolve(s, getpid(), &m, NULL, 0, 0x1800, &res), -ENOENT);
	assert_int_equal(pp_symbolizer__resolve(s, getpid(), &m, NULL, 0, 0x2000, &res), -EINVAL);
	/* a path that cannot be opened: fallback name, 0 */
	struct pp_map g = { .start = 0x1000,
			    .end = 0x2000,
			    .offset = 0x3000,
			    .inode = 12345,
			    .path = (char *)"/nonexistent/libgone.so.1" };
	assert_int_equal(pp_symbolizer__resolve(s, getpid(), &g, NULL, 0, 0x1010, &res), 0);
	assert_string_equal(res.frames[0].function, "libgone.so.1+0x3010");
	assert_false(res.has_function);
	pp_sym_result__free(&res);
	struct pp_symbolizer_stats st;
	pp_symbolizer__stats(s, &st);
	assert_int_equal(st.files_failed, 1);
	pp_sym_result__free(NULL);
	pp_symbolizer__free(s);
	pp_symbolizer__free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_demangle),	cmocka_unit_test(test_cxx_short_name),
		cmocka_unit_test(test_cxx_names_table), cmocka_unit_test(test_demangle_shapes),
		cmocka_unit_test(test_kallsyms),	cmocka_unit_test(test_perf_map),
		cmocka_unit_test(test_demangle_bomb),	cmocka_unit_test(test_perf_map_churn),
		cmocka_unit_test(test_corrupt_elf),	cmocka_unit_test(test_anon),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
