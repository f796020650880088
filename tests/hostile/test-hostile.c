/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hostile ELF files against every module that parses ELF from targets.
 *
 * usage: test-hostile PYTHON GEN_SCRIPT BASE_ELF MAPPER
 *
 * gen-hostile.py writes ~250 truncated/corrupted/hostile variants of
 * BASE_ELF (a real small binary) into a temporary directory. For each file
 * a forked worker (killed after WORKER_TIMEOUT s: a hang fails the test)
 *  - buildid: pp_buildid__from_buf on an exact-size copy, and
 *    pp_buildid__from_fd; only documented results are accepted;
 *  - unwind: starts MAPPER, a child that maps the file read+exec and
 *    sleeps, then pp_unwinder__new on it and unwinds from PCs inside the
 *    hostile mapping over a stack full of pointers into it;
 *  - symbolize: pp_symbolizer__resolve at addresses inside that mapping,
 *    which must return a result (a name or the "file+0xoff" fallback);
 *  - bombs: small files that expand in memory must not (peak RSS growth);
 *  - truncated: a mapped file truncated under the unwinder and symbolizer.
 * Every call must return; a crash or hang names the file.
 *
 * Environment: PP_HOSTILE_ONLY=substring (only matching files),
 * PP_HOSTILE_DEBUG=1 (library debug log), PP_HOSTILE_KEEP=1 (keep the files).
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"
#include "util/log.h"
#include "util/sigbus.h"
#include "symbolize/symbolize.h"
#include "unwind/unwind.h"

#define WORKER_TIMEOUT 30
#define MAX_FILES 1024

static const char *python, *gen_script, *base_elf, *mapper;
static char tmpdir[] = "/tmp/pp-hostile-XXXXXX";
static char *files[MAX_FILES];
static size_t n_files;

/* ---- helpers ------------------------------------------------------------ */

static int run_wait(char *const argv[])
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static int read_all(const char *path, uint8_t **ret, size_t *ret_len)
{
	char *buf;
	size_t len;
	int r = pp_read_file(path, 64 << 20, &buf, &len);

	if (r < 0)
		return r;
	*ret = (uint8_t *)buf;
	*ret_len = len;
	return 0;
}

/* Worker failures: print and exit 3 (contract violation). */
static void __attribute__((format(printf, 2, 3)))
worker_fail(const char *file, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", base_name(file));
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	_exit(3);
}

typedef void (*worker_fn)(const char *file);

/*
 * Runs fn(file) for every file in a forked worker with a timeout; returns
 * the number of files whose worker crashed, hung or reported a violation.
 */
static size_t for_each_file(worker_fn fn, const char *what)
{
	size_t bad = 0;

	for (size_t i = 0; i < n_files; i++) {
		int status;
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (pid == 0) {
			alarm(WORKER_TIMEOUT);
			fn(files[i]);
			/* exit, not _exit: under ASan, LeakSanitizer then checks the worker */
			exit(0);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		bad++;
		if (WIFSIGNALED(status))
			fprintf(stderr, "FAIL %s %s: %s%s\n", what, base_name(files[i]),
				WTERMSIG(status) == SIGALRM ? "hung, killed after timeout: " : "",
				strsignal(WTERMSIG(status)));
		else
			fprintf(stderr, "FAIL %s %s: exit %d\n", what, base_name(files[i]),
				WEXITSTATUS(status));
	}
	return bad;
}

/* ---- build id ----------------------------------------------------------- */

static bool buildid_result_ok(int r, size_t len)
{
	if (r == 0)
		return len >= 1 && len <= PP_BUILD_ID_MAX;
	return r == -ENOENT || r == -ENOEXEC || r == -EBADMSG || r == -EIO || r == -EFBIG ||
	       r == -ENOMEM;
}

static void buildid_worker(const char *file)
{
	uint8_t id[PP_BUILD_ID_MAX], id2[PP_BUILD_ID_MAX];
	size_t len = 0, len2 = 0;
	uint8_t *data, *copy;
	size_t size;
	int r, r2, fd;

	if (read_all(file, &data, &size) < 0)
		worker_fail(file, "cannot read");
	/* exact size, so ASan/valgrind see reads past the end */
	copy = malloc(size ? size : 1);
	if (!copy)
		_exit(0);
	memcpy(copy, data, size);
	r = pp_buildid__from_buf(copy, size, id, &len);
	if (!buildid_result_ok(r, len))
		worker_fail(file, "from_buf: %d (len %zu)", r, len);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		worker_fail(file, "open");
	r2 = pp_buildid__from_fd(fd, id2, &len2);
	close(fd);
	if (!buildid_result_ok(r2, len2))
		worker_fail(file, "from_fd: %d (len %zu)", r2, len2);
	if (r == 0 && r2 == 0 && (len != len2 || memcmp(id, id2, len) != 0))
		worker_fail(file, "from_buf and from_fd disagree");
	/* the valid files must keep working */
	if (strncmp(base_name(file), "ok-", 3) == 0 && (r != 0 || r2 != 0))
		worker_fail(file, "valid file: from_buf %d, from_fd %d", r, r2);
	free(copy);
	free(data);
}

static void test_buildid(void **state)
{
	assert_int_equal(for_each_file(buildid_worker, "buildid"), 0);
}

/* Known ids of the synthetic valid files. */
static void test_buildid_expected(void **state)
{
	static const struct {
		const char *name;
		const char *hex;
	} cases[] = {
		{ "ok-synth64", "0102030405060708090a0b0c0d0e0f1011121314" },
		{ "ok-synth64-be", "0102030405060708090a0b0c0d0e0f1011121314" },
		{ "ok-synth32", "0102030405060708090a0b0c0d0e0f1011121314" },
		{ "ok-synth32-be", "0102030405060708090a0b0c0d0e0f1011121314" },
		{ "ok-synth64-shdr-only", "0102030405060708090a0b0c0d0e0f1011121314" },
		{ "ok-synth64-phdr-only", "0102030405060708090a0b0c0d0e0f1011121314" },
		{ "ok-synth64-align8", "0102030405060708090a0b0c0d0e0f1011121314" },
		{ "ok-synth64-other-notes-first", "1111111111111111111111111111111111111111" },
		{ "ok-synth64-id-1-byte", "01" },
		{ "ok-synth64-id-64-bytes", "020202020202020202020202020202020202020202020202020202"
					    "0202020202"
					    "020202020202020202020202020202020202020202020202020202"
					    "0202020202" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char path[256], hex[2 * PP_BUILD_ID_MAX + 1];
		uint8_t id[PP_BUILD_ID_MAX], *data = NULL;
		size_t len = 0, size = 0;

		snprintf(path, sizeof(path), "%s/%s", tmpdir, cases[i].name);
		assert_int_equal(read_all(path, &data, &size), 0);
		if (pp_buildid__from_buf(data, size, id, &len) != 0) {
			free(data);
			fail_msg("%s: no build id", cases[i].name);
		}
		free(data);
		pp_buildid__hex(id, len, hex);
		if (strcmp(hex, cases[i].hex) != 0)
			fprintf(stderr, "%s: got %s\n", cases[i].name, hex);
		assert_string_equal(hex, cases[i].hex);
	}
}

/* ---- a child that maps the file ----------------------------------------- */

struct mapped {
	pid_t pid;
	uint64_t addr[2], len[2];
};

static int mapped_start(const char *file, struct mapped *ret)
{
	char line[256];
	int p[2];
	FILE *f;
	pid_t pid;
	unsigned long a0, a1;
	size_t l0, l1;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(p[1], 1);
		execl(mapper, mapper, file, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	if (!f || !fgets(line, sizeof(line), f) ||
	    sscanf(line, "%lx %zu %lx %zu", &a0, &l0, &a1, &l1) != 4) {
		if (f)
			fclose(f);
		else
			close(p[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -EIO;
	}
	fclose(f);
	*ret = (struct mapped){ pid, { a0, a1 }, { l0, l1 } };
	return 0;
}

static void mapped_stop(struct mapped *m)
{
	kill(m->pid, SIGKILL);
	waitpid(m->pid, NULL, 0);
}

/*
 * Addresses worth trying in each view: the start, every 0x20 bytes of the
 * first 5 KiB (the base's .text is around 0x1000-0x1400, so its functions
 * are hit), the middle and the last byte.
 */
#define MAX_PROBES 400
static size_t probe_addrs(const struct mapped *m, uint64_t *out, size_t max)
{
	size_t n = 0;

	for (int v = 0; v < 2; v++) {
		if (!m->len[v])
			continue;
		for (uint64_t off = 0; off < 0x1400 && off < m->len[v] && n < max; off += 0x20)
			out[n++] = m->addr[v] + off;
		if (n < max)
			out[n++] = m->addr[v] + m->len[v] / 2;
		if (n < max)
			out[n++] = m->addr[v] + m->len[v] - 1;
	}
	return n;
}

/* ---- unwind ------------------------------------------------------------- */

/* Whether this process has an fd open on path (the unwinder keeps its files open). */
static bool fd_open_on(const char *path)
{
	struct dirent *de;
	bool found = false;
	DIR *d = opendir("/proc/self/fd");

	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		char link[300], target[512];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%s", de->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			found = strcmp(target, path) == 0;
		}
	}
	closedir(d);
	return found;
}

static void unwind_worker(const char *file)
{
	struct mapped m;
	uint64_t pcs[64], addrs[MAX_PROBES], stack[256];
	size_t n_addrs;

	if (mapped_start(file, &m) < 0)
		worker_fail(file, "mapper did not start");
	n_addrs = probe_addrs(&m, addrs, ARRAY_SIZE(addrs));

	for (int fp_only = 0; fp_only < 2; fp_only++) {
		struct pp_unwinder_opts opts = { .frame_pointers_only = fp_only };
		struct pp_unwinder *u = pp_unwinder__new(m.pid, &opts);

		if (!u)
			continue; /* an error is an acceptable answer */
		for (size_t i = 0; i < n_addrs; i++) {
			struct pp_regs regs = { 0 };
			size_t n = 0;
			unsigned flags = 0;
			const uint64_t sp = 0x7ffd12340000ull;

			/* a stack of return addresses into the hostile file, and garbage */
			for (size_t k = 0; k < ARRAY_SIZE(stack); k++)
				stack[k] = k % 3 == 2 ? sp + 8 * (k + 1)
						      : addrs[(i + k) % n_addrs] + (k & 7);
			regs.r[PP_REG_IP] = addrs[i];
			regs.r[PP_REG_SP] = sp;
			regs.r[PP_REG_BP] = sp + 16;
			int r = pp_unwinder__unwind(u, &regs, stack, sizeof(stack), pcs,
						    ARRAY_SIZE(pcs), &n, &flags);
			if (r == 0 && (n < 1 || n > ARRAY_SIZE(pcs) || pcs[0] != addrs[i]))
				worker_fail(file, "unwind: %zu frames, pc0 %#lx", n,
					    (unsigned long)pcs[0]);
			if (r > 0)
				worker_fail(file, "unwind returned %d", r);
		}
		/* the bomb's debug sections are never given to libdw */
		if (!fp_only && strcmp(base_name(file), "bomb-zlib-debug-info") == 0 &&
		    pp_unwind_debug_refused() == 0)
			worker_fail(file, "a file with 512 MiB of debug data given to libdw");
		/* sanity: the test must really feed the file to libdw */
		if (!fp_only && strcmp(base_name(file), "ok-base") == 0 && !fd_open_on(file))
			worker_fail(file, "the unwinder did not open the mapped file");
		pp_unwinder__invalidate(u);
		size_t n = 0;
		unsigned flags = 0;
		struct pp_regs regs = { 0 };
		regs.r[PP_REG_IP] = addrs[0];
		regs.r[PP_REG_SP] = 0x7ffd12340000ull;
		(void)pp_unwinder__unwind(u, &regs, stack, sizeof(stack), pcs, ARRAY_SIZE(pcs), &n,
					  &flags);
		pp_unwinder__free(u);
	}
	mapped_stop(&m);
}

static void test_unwind(void **state)
{
	assert_int_equal(for_each_file(unwind_worker, "unwind"), 0);
}

/* ---- symbolize ---------------------------------------------------------- */

static void symbolize_worker(const char *file)
{
	struct pp_symbolizer_opts opts[2] = { { .cache_bytes = 0 },
					      { .cache_bytes = 1 << 20, .no_dwarf = true } };
	struct pp_maps maps = { 0 };
	uint8_t id[PP_BUILD_ID_MAX];
	size_t id_len = 0;
	uint64_t addrs[MAX_PROBES];
	struct mapped m;
	size_t n_addrs;
	int fd;

	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (pp_buildid__from_fd(fd, id, &id_len) < 0)
			id_len = 0;
		close(fd);
	}
	if (mapped_start(file, &m) < 0)
		worker_fail(file, "mapper did not start");
	n_addrs = probe_addrs(&m, addrs, ARRAY_SIZE(addrs));
	if (pp_maps__read(m.pid, &maps) < 0)
		worker_fail(file, "cannot read the mapper's maps");

	for (size_t o = 0; o < ARRAY_SIZE(opts); o++) {
		struct pp_symbolizer *s = pp_symbolizer__new(&opts[o]);

		if (!s)
			worker_fail(file, "pp_symbolizer__new: %s", strerror(errno));
		for (size_t i = 0; i < n_addrs; i++) {
			const struct pp_map *mp = pp_maps__find(&maps, addrs[i]);
			struct pp_sym_result res = { 0 };

			if (!mp || !mp->path)
				worker_fail(file, "mapping of %#lx not in maps",
					    (unsigned long)addrs[i]);
			/* with and without the build id the caller would pass */
			int r = pp_symbolizer__resolve(s, m.pid, mp, (i & 1) ? id : NULL,
						       (i & 1) ? id_len : 0, addrs[i], &res);
			if (r < 0)
				worker_fail(file,
					    "resolve %#lx: %s (a file mapping must get at least "
					    "the fallback name)",
					    (unsigned long)addrs[i], strerror(-r));
			if (res.n < 1 || !res.frames)
				worker_fail(file, "resolve %#lx: no frames",
					    (unsigned long)addrs[i]);
			for (size_t k = 0; k < res.n; k++) {
				if (!res.frames[k].function || !res.frames[k].function[0])
					worker_fail(file, "resolve %#lx: frame %zu has no name",
						    (unsigned long)addrs[i], k);
				(void)strlen(res.frames[k].function);
				if (res.frames[k].system_name)
					(void)strlen(res.frames[k].system_name);
				if (res.frames[k].file)
					(void)strlen(res.frames[k].file);
			}
			pp_sym_result__free(&res);
		}
		pp_symbolizer__free(s);
	}
	pp_maps__free(&maps);
	mapped_stop(&m);
}

static void test_symbolize(void **state)
{
	assert_int_equal(for_each_file(symbolize_worker, "symbolize"), 0);
}

/* The base file must symbolize to its real function names. */
static void test_symbolize_base(void **state)
{
	char path[256];
	struct pp_maps maps = { 0 };
	struct mapped m;
	bool found = false;

	snprintf(path, sizeof(path), "%s/ok-base", tmpdir);
	assert_int_equal(mapped_start(path, &m), 0);
	assert_int_equal(pp_maps__read(m.pid, &maps), 0);
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	assert_non_null(s);
	/* scan the mapping for an address that resolves to hostile_mid */
	for (uint64_t a = m.addr[0]; a < m.addr[0] + m.len[0] && !found; a += 4) {
		const struct pp_map *mp = pp_maps__find(&maps, a);
		struct pp_sym_result res = { 0 };

		assert_non_null(mp);
		if (pp_symbolizer__resolve(s, m.pid, mp, NULL, 0, a, &res) == 0 &&
		    res.has_function && strcmp(res.frames[res.n - 1].function, "hostile_mid") == 0)
			found = true;
		pp_sym_result__free(&res);
	}
	assert_true(found);
	pp_symbolizer__free(s);
	pp_maps__free(&maps);
	mapped_stop(&m);
}

/* ---- a mapped file truncated -------------------------------------------- */

static void unwind_all(struct pp_unwinder *u, const uint64_t *addrs, size_t n_addrs)
{
	uint64_t pcs[64], stack[256];
	const uint64_t sp = 0x7ffd12340000ull;

	for (size_t i = 0; i < n_addrs; i++) {
		struct pp_regs regs = { 0 };
		size_t n = 0;
		unsigned flags = 0;

		for (size_t k = 0; k < ARRAY_SIZE(stack); k++)
			stack[k] = addrs[(i + k) % n_addrs] + (k & 7);
		regs.r[PP_REG_IP] = addrs[i];
		regs.r[PP_REG_SP] = sp;
		regs.r[PP_REG_BP] = sp + 16;
		(void)pp_unwinder__unwind(u, &regs, stack, sizeof(stack), pcs, ARRAY_SIZE(pcs), &n,
					  &flags);
	}
}

/*
 * The target truncates a file it maps while podprof has it open: whatever
 * podprof (or libelf/libdw for it) mapped of that file now raises SIGBUS
 * on access. The unwinder (libdw reads .eh_frame through its own mapping)
 * and the symbolizer must carry on.
 */
static void test_truncated(void **state)
{
	char path[512];
	int status;

	snprintf(path, sizeof(path), "%s/truncated-base", tmpdir);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct mapped m;
		uint64_t addrs[MAX_PROBES];
		uint8_t *data;
		size_t size;

		alarm(WORKER_TIMEOUT);
		/*
		 * Which pages libdw still has to read after the truncation
		 * depends on what it cached from the first half: up to three
		 * copies, the truncation after the first 1/2, 1/4, 1/8 of the
		 * addresses, until one raises SIGBUS (seen once under ASan:
		 * none raised at the half).
		 */
		for (unsigned attempt = 0;; attempt++) {
			if (read_all(base_elf, &data, &size) < 0)
				worker_fail(path, "cannot read the base");
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
			if (fd < 0 || write(fd, data, size) != (ssize_t)size || close(fd) < 0)
				worker_fail(path, "cannot write the copy");
			free(data);
			if (mapped_start(path, &m) < 0)
				worker_fail(path, "mapper did not start");
			size_t n_addrs = probe_addrs(&m, addrs, ARRAY_SIZE(addrs));
			size_t first = PP_MAX(n_addrs >> (attempt + 1), (size_t)1);
			struct pp_maps maps = { 0 };
			if (pp_maps__read(m.pid, &maps) < 0)
				worker_fail(path, "cannot read the mapper's maps");
			struct pp_unwinder *u = pp_unwinder__new(m.pid, NULL);
			struct pp_symbolizer *s = pp_symbolizer__new(NULL);
			if (!u || !s)
				worker_fail(path, "cannot create an unwinder and a symbolizer");
			uint64_t faults0 = pp_sigbus_guard_repaired();
			/* the first part before the truncation, the rest after */
			unwind_all(u, addrs, first);
			if (!fd_open_on(path))
				worker_fail(path, "the unwinder did not open the mapped file");
			if (truncate(path, 0) < 0)
				worker_fail(path, "truncate: %s", strerror(errno));
			unwind_all(u, addrs + first, n_addrs - first);
			for (size_t i = 0; i < n_addrs; i++) {
				struct pp_sym_result res = { 0 };
				const struct pp_map *mp = pp_maps__find(&maps, addrs[i]);
				if (mp && pp_symbolizer__resolve(s, m.pid, mp, NULL, 0, addrs[i],
								 &res) == 0)
					pp_sym_result__free(&res);
			}
			uint64_t faults = pp_sigbus_guard_repaired() - faults0;
			/* the test must really have libdw touch the truncated pages */
			fprintf(stderr,
				"truncated (%zu of %zu before): %" PRIu64 " faults answered\n",
				first, n_addrs, faults);
			pp_unwinder__free(u);
			pp_symbolizer__free(s);
			pp_maps__free(&maps);
			mapped_stop(&m);
			if (faults)
				break;
			if (attempt == 2)
				worker_fail(path, "no SIGBUS was raised: the test did not test");
			unlink(path);
		}
		unlink(path);
		exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	unlink(path);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("truncated: %s",
			 WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "worker failed");
}

/* ---- bombs -------------------------------------------------------------- */

static long maxrss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/*
 * Files that are small but expand (gen-hostile.py's bombs()): a zlib
 * compressed .debug_info of 512 MiB, a symbol table of 100k entries sharing
 * one 4000-byte name (400 MB when copied per symbol). Symbolizing them with
 * the default cache (64 MiB) must grow the worker's peak RSS by less than
 * BOMB_MAX_GROWTH: the bound is the cache, not the file's claims.
 */
#define BOMB_MAX_GROWTH_KB (96 << 10)
static void bomb_worker(const char *file)
{
	struct pp_maps maps = { 0 };
	uint64_t addrs[MAX_PROBES];
	struct mapped m;
	size_t n_addrs, named = 0;

	if (strncmp(base_name(file), "bomb-", 5) != 0)
		return;
	if (mapped_start(file, &m) < 0)
		worker_fail(file, "mapper did not start");
	n_addrs = probe_addrs(&m, addrs, ARRAY_SIZE(addrs));
	if (pp_maps__read(m.pid, &maps) < 0)
		worker_fail(file, "cannot read the mapper's maps");
	struct pp_symbolizer *s = pp_symbolizer__new(NULL);
	if (!s)
		worker_fail(file, "pp_symbolizer__new: %s", strerror(errno));
	long before = maxrss_kb();
	for (size_t i = 0; i < n_addrs; i++) {
		const struct pp_map *mp = pp_maps__find(&maps, addrs[i]);
		struct pp_sym_result res = { 0 };

		if (!mp)
			worker_fail(file, "mapping of %#lx not in maps", (unsigned long)addrs[i]);
		if (pp_symbolizer__resolve(s, m.pid, mp, NULL, 0, addrs[i], &res) == 0 &&
		    res.has_function)
			named++;
		pp_sym_result__free(&res);
	}
	long grown = maxrss_kb() - before;
	fprintf(stderr, "%s: %zu of %zu addresses named, peak RSS +%ld KiB\n", base_name(file),
		named, n_addrs, grown);
	if (grown > BOMB_MAX_GROWTH_KB)
		worker_fail(file, "peak RSS grew by %ld KiB", grown);
	pp_symbolizer__free(s);
	pp_maps__free(&maps);
	mapped_stop(&m);
}

static void test_bombs(void **state)
{
	assert_int_equal(for_each_file(bomb_worker, "bombs"), 0);
}

/* ---- setup -------------------------------------------------------------- */

static int rm_tree(void)
{
	for (size_t i = 0; i < n_files; i++) {
		unlink(files[i]);
		free(files[i]);
	}
	n_files = 0;
	return rmdir(tmpdir);
}

static int group_setup(void **state)
{
	struct dirent *de;
	DIR *d;

	if (!mkdtemp(tmpdir))
		return -1;
	char *argv[] = { (char *)python, (char *)gen_script, (char *)base_elf, tmpdir, NULL };
	if (run_wait(argv) != 0) {
		fprintf(stderr, "%s failed\n", gen_script);
		return -1;
	}
	d = opendir(tmpdir);
	if (!d)
		return -1;
	while ((de = readdir(d)) && n_files < MAX_FILES) {
		char path[512];

		if (de->d_name[0] == '.')
			continue;
		if (getenv("PP_HOSTILE_ONLY") && !strstr(de->d_name, getenv("PP_HOSTILE_ONLY")))
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, de->d_name);
		files[n_files] = strdup(path);
		if (!files[n_files])
			break;
		n_files++;
	}
	closedir(d);
	qsort(files, n_files, sizeof(files[0]), name_cmp);
	fprintf(stderr, "%zu hostile files in %s\n", n_files, tmpdir);
	return n_files > (getenv("PP_HOSTILE_ONLY") ? 0 : 100) ? 0 : -1;
}

static int group_teardown(void **state)
{
	if (getenv("PP_HOSTILE_KEEP")) {
		fprintf(stderr, "kept %s\n", tmpdir);
		return 0;
	}
	rm_tree();
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buildid_expected), cmocka_unit_test(test_buildid),
		cmocka_unit_test(test_unwind),		 cmocka_unit_test(test_symbolize_base),
		cmocka_unit_test(test_symbolize),	 cmocka_unit_test(test_bombs),
		cmocka_unit_test(test_truncated),
	};

	if (argc != 5) {
		fprintf(stderr, "usage: %s PYTHON GEN_SCRIPT BASE_ELF MAPPER\n", argv[0]);
		return 2;
	}
	python = argv[1];
	gen_script = argv[2];
	base_elf = argv[3];
	mapper = argv[4];
	signal(SIGPIPE, SIG_IGN);
	if (getenv("PP_HOSTILE_DEBUG"))
		pp_log_setup(PP_LOG_DEBUG, PP_LOG_TEXT);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
