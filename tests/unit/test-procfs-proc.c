/* SPDX-License-Identifier: Apache-2.0 */
/* stat/status parsing, process info, pid/tid lists, thread names, selectors. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"
#include "util/util.h"

/* How long to wait for a child to exec, exit or map: only a guard against a
 * hang (a loaded machine runs the child late). */
#define WAIT_NS (60ull * 1000000000ull)

/* ---- stat ---- */

/* Rows for bad input leave the expected fields zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define STAT_TAIL                                                                                  \
	" 1 2 3 -1 %s 10 0 0 0 5 6 0 0 20 0 1 0 %s 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 " \
	"0 0 0 0 17 1 0 0 0 0 0\n"

struct stat_case {
	const char *comm_field; /* "(...)" as printed */
	const char *state_ppid; /* "S 1" */
	const char *flags;
	const char *start;
	int ok;
	const char *comm;
	char state;
	int ppid;
	bool kthread;
	uint64_t start_time;
};

static const struct stat_case stat_cases[] = {
	{ "(cat)", "R 77", "4194304", "123456", 1, "cat", 'R', 77, false, 123456 },
	{ "(my prog)", "S 1", "4194560", "42", 1, "my prog", 'S', 1, false, 42 },
	{ "(a) b (c)", "S 1", "0", "1", 1, "a) b (c", 'S', 1, false, 1 },
	{ "()) ) ))", "D 9", "0", "7", 1, ")) ) )", 'D', 9, false, 7 },
	{ "(kthreadd)", "S 0", "2129984", "0", 1, "kthreadd", 'S', 0, true, 0 }, /* 0x208040 */
	{ "(x)", "Z 1", "0", "18446744073709551615", 1, "x", 'Z', 1, false, UINT64_MAX },
	{ "(0123456789abcdefghij)", "S 1", "0", "5", 1, "0123456789abcde", 'S', 1, false, 5 },
	{ "()", "S 1", "0", "5", 1, "", 'S', 1, false, 5 },
	/* bad */
	{ "(x)", "S x", "0", "5", 0 },
	{ "(x)", "SS 1", "0", "5", 0 },
	{ "(x)", "S 1", "-1", "5", 0 },
	{ "(x)", "S 1", "0", "18446744073709551616", 0 },
	{ "(x)", "S 1", "0", "", 0 },
};

static void test_stat_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(stat_cases); i++) {
		const struct stat_case *c = &stat_cases[i];
		char tail[512], line[1024];
		snprintf(tail, sizeof(tail), STAT_TAIL, c->flags, c->start);
		snprintf(line, sizeof(line), "4242 %s %s%s", c->comm_field, c->state_ppid, tail);
		struct pp_proc_info info;
		memset(&info, 0x55, sizeof(info));
		int r = pp_proc__parse_stat(line, strlen(line), &info);
		if (!c->ok) {
			if (r >= 0)
				fail_msg("case %zu accepted: %s", i, line);
			continue;
		}
		if (r < 0)
			fail_msg("case %zu rejected (%d): %s", i, r, line);
		assert_int_equal(info.pid, 4242);
		assert_string_equal(info.comm, c->comm);
		assert_int_equal(info.state, c->state);
		assert_int_equal(info.ppid, c->ppid);
		assert_int_equal(info.kernel_thread, c->kthread);
		assert_true(info.start_time == c->start_time);
		assert_null(info.exe);
		assert_null(info.cmdline);
	}

	/* structurally broken lines */
	static const char *bad[] = { "",
				     "4242",
				     "4242 (x",
				     "4242 x) S 1",
				     "(x) S 1 2",
				     "abc (x) S 1",
				     "0 (x) S 1" STAT_TAIL,
				     "4242 (x) S" };
	struct pp_proc_info info;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_true(pp_proc__parse_stat(bad[i], strlen(bad[i]), &info) < 0);
	/* truncated after field 21: start time missing */
	const char *t = "1 (x) S 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17";
	assert_true(pp_proc__parse_stat(t, strlen(t), &info) < 0);
}

/* ---- status ---- */

static const char status_text[] = "Name:\tcat\n"
				  "Umask:\t0022\n"
				  "State:\tR (running)\n"
				  "Tgid:\t12\n"
				  "Uid:\t1000\t0\t0\t0\n"
				  "Gid:\t1000\t1000\t1000\t1000\n"
				  "VmPeak:\t    9999 kB\n"
				  "VmSize:\t    8000 kB\n"
				  "VmLck:\t       4 kB\n"
				  "VmHWM:\t    1200 kB\n"
				  "VmRSS:\t    1100 kB\n"
				  "RssAnon:\t     100 kB\n"
				  "VmData:\t     360 kB\n"
				  "VmStk:\t     132 kB\n"
				  "VmSwap:\t       7 kB\n"
				  "Threads:\t3\n"
				  "SigQ:\t0/94327\n"
				  "SigPnd:\t0000000000000000\n"
				  "SigBlk:\t0000000000010002\n"
				  "CapInh:\t0000000000000000\n"
				  "CapEff:\t000001ffffffffff\n"
				  "Cpus_allowed_list:\t0-1";

static void test_status(void **state)
{
	(void)state;
	struct pp_proc_status st;
	assert_int_equal(pp_proc__parse_status(status_text, strlen(status_text), &st), 0);
	assert_int_equal(st.vm_rss_kb, 1100);
	assert_int_equal(st.vm_size_kb, 8000);
	assert_int_equal(st.vm_hwm_kb, 1200);
	assert_int_equal(st.vm_data_kb, 360);
	assert_int_equal(st.vm_stk_kb, 132);
	assert_int_equal(st.vm_lck_kb, 4);
	assert_int_equal(st.vm_swap_kb, 7);
	assert_int_equal(st.threads, 3);
	assert_true(st.sig_blk == 0x10002);
	assert_true(st.cap_eff == 0x1ffffffffffull);
	assert_int_equal(st.uid, 1000);

	/* kernel thread: no Vm lines */
	const char *k = "Name:\tkthreadd\nUid:\t0\t0\t0\t0\nThreads:\t1\nSigBlk:"
			"\tffffffffffffffff\n";
	assert_int_equal(pp_proc__parse_status(k, strlen(k), &st), 0);
	assert_int_equal(st.vm_rss_kb, 0);
	assert_int_equal(st.threads, 1);
	assert_true(st.sig_blk == UINT64_MAX);

	/* garbage values are ignored, not misparsed; nothing known -> -EINVAL */
	const char *g = "VmRSS:\tlots kB\nThreads:\t-1\nUid:\t\nFoo:\t1\n";
	assert_int_equal(pp_proc__parse_status(g, strlen(g), &st), -EINVAL);
	assert_int_equal(pp_proc__parse_status("", 0, &st), -EINVAL);

	/* our own: at least one thread, RSS > 0, our uid */
	assert_int_equal(pp_proc__read_status(getpid(), &st), 0);
	assert_true(st.threads >= 1);
	assert_true(st.vm_rss_kb > 0);
	assert_true(st.vm_size_kb >= st.vm_rss_kb);
	assert_true(st.vm_hwm_kb >= st.vm_rss_kb);
	assert_int_equal(st.uid, getuid());
	assert_true(pp_proc__read_status(0x3fffffff, &st) < 0);
}

/* ---- info on real processes ---- */

static pid_t spawn_sleeper(const char *comm, char *const argv[])
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		if (argv) {
			/* exec /bin/sleep with a custom argv; pipe closes on exec */
			execv("/bin/sleep", argv);
			_exit(127);
		}
		prctl(PR_SET_NAME, comm);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	char c;
	/* returns 1 (ready) for the prctl child, 0 (EOF at exec) for the exec child */
	assert_true(read(p[0], &c, 1) >= 0);
	close(p[0]);
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_info_self(void **state)
{
	(void)state;
	struct pp_proc_info info;
	assert_int_equal(pp_proc__read_info(getpid(), &info), 0);
	assert_int_equal(info.pid, getpid());
	assert_int_equal(info.ppid, getppid());
	assert_int_equal(info.state, 'R');
	assert_false(info.kernel_thread);
	assert_true(info.start_time > 0);
	assert_non_null(info.exe);
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	assert_string_equal(info.exe, exe);
	assert_non_null(info.cmdline);
	assert_true(info.cmdline_len > 0);
	assert_true(info.cmdline[info.cmdline_len - 1] != '\0');
	assert_int_equal(info.cmdline[info.cmdline_len], '\0');
	pp_proc_info__free(&info);
	pp_proc_info__free(&info);

	assert_int_equal(pp_proc__read_info(0, &info), -EINVAL);
	assert_true(pp_proc__read_info(0x3fffffff, &info) < 0);
}

static void test_info_child(void **state)
{
	(void)state;
	/* comm with ") " in it */
	pid_t pid = spawn_sleeper("a) b (c", NULL);
	struct pp_proc_info info;
	assert_int_equal(pp_proc__read_info(pid, &info), 0);
	assert_int_equal(info.pid, pid);
	assert_int_equal(info.ppid, getpid());
	assert_string_equal(info.comm, "a) b (c");
	assert_non_null(info.exe);
	pp_proc_info__free(&info);
	reap(pid);

	char *argv2[] = { "/bin/sleep", "1000", NULL };
	pid = spawn_sleeper(NULL, argv2);
	/* wait until exec has happened (comm changes to sleep) */
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS; pp_now_mono_ns() < end;) {
		if (pp_proc__read_info(pid, &info) == 0) {
			bool done = strcmp(info.comm, "sleep") == 0;
			if (done)
				break;
			pp_proc_info__free(&info);
		}
		usleep(2000);
	}
	assert_string_equal(info.comm, "sleep");
	char real[4096];
	assert_non_null(realpath("/bin/sleep", real));
	assert_string_equal(info.exe, real);
	assert_int_equal(info.cmdline_len, strlen("/bin/sleep") + 1 + strlen("1000"));
	assert_memory_equal(info.cmdline,
			    "/bin/sleep\0"
			    "1000",
			    info.cmdline_len);
	pp_proc_info__free(&info);

	/* a zombie keeps stat but loses exe */
	kill(pid, SIGKILL);
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS; pp_now_mono_ns() < end;) {
		if (pp_proc__read_info(pid, &info) == 0) {
			bool z = info.state == 'Z';
			if (z)
				break;
			pp_proc_info__free(&info);
		}
		usleep(2000);
	}
	assert_int_equal(info.state, 'Z');
	assert_null(info.exe);
	pp_proc_info__free(&info);
	waitpid(pid, NULL, 0);
}

static void test_info_kthread(void **state)
{
	(void)state;
	/* pid 2 is kthreadd in the initial pid namespace */
	struct pp_proc_info info;
	if (pp_proc__read_info(2, &info) < 0 || strcmp(info.comm, "kthreadd") != 0) {
		skip();
		return;
	}
	assert_true(info.kernel_thread);
	assert_null(info.cmdline);
	pp_proc_info__free(&info);
}

static void test_deleted_exe(void **state)
{
	(void)state;
	/* copy /bin/sleep, run it, delete it: exe has no " (deleted)" suffix */
	char path[] = "/tmp/procfs-test-exe-XXXXXX";
	int fd = mkostemp(path, O_CLOEXEC);
	assert_true(fd >= 0);
	size_t len;
	char *data = NULL;
	assert_int_equal(pp_read_file("/bin/sleep", (size_t)16 << 20, &data, &len), 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	free(data);
	fchmod(fd, 0755);
	close(fd);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl(path, "sleep", "1000", (char *)NULL);
		_exit(127);
	}
	struct pp_proc_info info = { 0 };
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS; pp_now_mono_ns() < end;) {
		if (pp_proc__read_info(pid, &info) == 0) {
			if (info.exe && strcmp(info.exe, path) == 0)
				break;
			pp_proc_info__free(&info);
		}
		usleep(2000);
	}
	assert_non_null(info.exe);
	pp_proc_info__free(&info);
	unlink(path);
	assert_int_equal(pp_proc__read_info(pid, &info), 0);
	assert_string_equal(info.exe, path);
	pp_proc_info__free(&info);
	reap(pid);
}

/* ---- lists ---- */

static void *named_thread(void *arg)
{
	prctl(PR_SET_NAME, "procfs-worker");
	pthread_barrier_wait(arg);
	pthread_barrier_wait(arg);
	return NULL;
}

static void test_lists(void **state)
{
	(void)state;
	pid_t *pids = NULL;
	size_t n = 0;
	assert_int_equal(pp_proc__list_pids(&pids, &n), 0);
	bool self = false, one = false;
	for (size_t i = 0; i < n; i++) {
		assert_true(pids[i] > 0);
		self |= pids[i] == getpid();
		one |= pids[i] == 1;
	}
	assert_true(self && one);
	free(pids);

	pthread_barrier_t b;
	pthread_t t;
	pthread_barrier_init(&b, NULL, 2);
	assert_int_equal(pthread_create(&t, NULL, named_thread, &b), 0);
	pthread_barrier_wait(&b);

	pid_t *tids = NULL;
	assert_int_equal(pp_proc__list_tids(getpid(), &tids, &n), 0);
	assert_true(n >= 2);
	bool main_seen = false, worker = false;
	for (size_t i = 0; i < n; i++) {
		char name[32];
		assert_int_equal(pp_proc__thread_name(getpid(), tids[i], name, sizeof(name)), 0);
		assert_null(strchr(name, '\n'));
		main_seen |= tids[i] == getpid();
		worker |= strcmp(name, "procfs-worker") == 0;
	}
	assert_true(main_seen && worker);
	/* truncation into a small buffer */
	char small[4];
	assert_int_equal(pp_proc__thread_name(getpid(), getpid(), small, sizeof(small)), 0);
	assert_int_equal(strlen(small), 3);
	free(tids);
	pthread_barrier_wait(&b);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&b);

	assert_true(pp_proc__list_tids(0x3fffffff, &tids, &n) < 0);
	char name[16];
	assert_true(pp_proc__thread_name(getpid(), 0x3fffffff, name, sizeof(name)) < 0);
}

/* ---- selectors ---- */

struct sel_case {
	struct pp_selector s;
	int want;
};

static void test_selector_table(void **state)
{
	(void)state;
	static char cmd[] = "/usr/bin/python3\0-m\0http.server\0--bind\0"
			    "127.0.0.1";
	struct pp_proc_info p = {
		.pid = 100,
		.ppid = 1,
		.comm = "python3",
		.state = 'S',
		.exe = "/usr/bin/python3.11",
		.cmdline = cmd,
		.cmdline_len = sizeof(cmd) - 1,
	};
	const struct sel_case cases[] = {
		{ { .name = "all" }, 1 },
		{ { .pid = 100 }, 1 },
		{ { .pid = 101 }, 0 },
		{ { .comm = "python3" }, 1 },
		{ { .comm = "py*" }, 1 },
		{ { .comm = "python" }, 0 },
		{ { .comm = "[pP]ython?" }, 1 },
		{ { .exe = "/usr/bin/python3.11" }, 1 },
		{ { .exe = "/usr/bin/python3*" }, 1 },
		{ { .exe = "*/python3.11" }, 1 },
		{ { .exe = "/usr/*" }, 1 }, /* '*' crosses '/' (no FNM_PATHNAME) */
		{ { .exe = "python3*" }, 1 }, /* no '/': basename */
		{ { .exe = "python3.11" }, 1 },
		{ { .exe = "python" }, 0 },
		{ { .exe = "/bin/python3.11" }, 0 }, /* has '/': full path only */
		{ { .cmdline = "http\\.server" }, 1 },
		{ { .cmdline = "-m http\\.server --bind" }, 1 }, /* args joined by spaces */
		{ { .cmdline = "^/usr/bin/python3 " }, 1 },
		{ { .cmdline = "127\\.0\\.0\\.1$" }, 1 },
		{ { .cmdline = "(gunicorn|uwsgi)" }, 0 },
		{ { .cmdline = "server\\.http" }, 0 },
		{ { .cmdline = "[" }, -EINVAL },
		{ { .cmdline = "a{1" }, -EINVAL },
		{ { .pid = 100, .comm = "python*", .exe = "*python3*", .cmdline = "http" }, 1 },
		{ { .pid = 100, .comm = "python*", .exe = "*python3*", .cmdline = "nope" }, 0 },
		{ { .pid = 100, .comm = "java" }, 0 },
		{ { .comm = "python3", .exe = "/opt/*" }, 0 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int r = pp_selector__match(&cases[i].s, &p);
		if (r != cases[i].want)
			fail_msg("selector case %zu: got %d want %d", i, r, cases[i].want);
		/* second call hits the regex cache and must agree */
		assert_int_equal(pp_selector__match(&cases[i].s, &p), r);
	}

	/* kernel threads never match, not even the empty selector */
	struct pp_proc_info k = { .pid = 2, .comm = "kthreadd", .kernel_thread = true };
	struct pp_selector empty = { 0 };
	assert_int_equal(pp_selector__match(&empty, &k), 0);
	struct pp_selector by_pid = { .pid = 2 };
	assert_int_equal(pp_selector__match(&by_pid, &k), 0);

	/* no exe (permission, zombie): an exe selector cannot match; no cmdline = "" */
	struct pp_proc_info z = { .pid = 5, .comm = "zomb" };
	struct pp_selector e = { .exe = "*" };
	assert_int_equal(pp_selector__match(&e, &z), 0);
	struct pp_selector c = { .cmdline = "^$" };
	assert_int_equal(pp_selector__match(&c, &z), 1);
	struct pp_selector c2 = { .cmdline = "." };
	assert_int_equal(pp_selector__match(&c2, &z), 0);

	/* more patterns than the cache holds, twice round: results stay right */
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 40; i++) {
			char pat[32];
			snprintf(pat, sizeof(pat), "(%d|http)", i);
			struct pp_selector s = { .cmdline = pat };
			assert_int_equal(pp_selector__match(&s, &p), 1);
			snprintf(pat, sizeof(pat), "^x%d", i);
			assert_int_equal(pp_selector__match(&s, &p), 0);
		}
	}
	assert_int_equal(pp_selector__match(NULL, &p), -EINVAL);
}

struct sel_thread_arg {
	const struct pp_proc_info *p;
	int failures;
};

static void *sel_thread(void *arg)
{
	struct sel_thread_arg *a = arg;
	for (int i = 0; i < 2000; i++) {
		char pat[32];
		snprintf(pat, sizeof(pat), "serv(er|%d)", i % 37);
		struct pp_selector s = { .cmdline = pat };
		if (pp_selector__match(&s, a->p) != 1)
			a->failures++;
	}
	return NULL;
}

static void test_selector_threads(void **state)
{
	(void)state;
	static char cmd[] = "srv\0--server";
	struct pp_proc_info p = {
		.pid = 9, .comm = "srv", .cmdline = cmd, .cmdline_len = sizeof(cmd) - 1
	};
	pthread_t t[4];
	struct sel_thread_arg a[4];
	for (int i = 0; i < 4; i++) {
		a[i] = (struct sel_thread_arg){ .p = &p };
		assert_int_equal(pthread_create(&t[i], NULL, sel_thread, &a[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].failures, 0);
	}
}

static void test_selector_real(void **state)
{
	(void)state;
	/* the selector on a real process read from /proc */
	struct pp_proc_info info;
	assert_int_equal(pp_proc__read_info(getpid(), &info), 0);
	struct pp_selector s = { .pid = getpid(),
				 .exe = "*test-procfs-proc",
				 .comm = "test-procfs*",
				 .cmdline = "test-procfs-proc" };
	assert_int_equal(pp_selector__match(&s, &info), 1);
	s.exe = "test-procfs-proc";
	assert_int_equal(pp_selector__match(&s, &info), 1);
	s.pid = getppid();
	assert_int_equal(pp_selector__match(&s, &info), 0);
	pp_proc_info__free(&info);
}

#define CID "3f1c9e0b7a2d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6"
#define CID2 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_cgroup_id(void **state)
{
	static const struct {
		const char *text;
		const char *want; /* NULL = -ENOENT */
	} cases[] = {
		/* containerd, systemd driver, cgroup v2 */
		{ "0::/kubepods.slice/kubepods-burstable.slice/"
		  "kubepods-burstable-pod1b2c_3d4e.slice/"
		  "cri-containerd-" CID ".scope\n",
		  CID },
		/* CRI-O, systemd driver */
		{ "0::/kubepods.slice/kubepods-pod12.slice/crio-" CID ".scope\n", CID },
		/* CRI-O's monitor is not the container */
		{ "0::/kubepods.slice/kubepods-pod12.slice/crio-conmon-" CID ".scope\n", NULL },
		/* Docker, systemd driver, v1 */
		{ "12:pids:/system.slice/docker-" CID ".scope\n"
		  "11:memory:/system.slice/docker-" CID ".scope\n0::/\n",
		  CID },
		/* cgroupfs driver, v1, containerd or docker */
		{ "4:memory:/kubepods/burstable/pod1b2c3d4e-aaaa-bbbb/" CID "\n1:cpu:/\n", CID },
		{ "3:cpu:/docker/" CID "\n", CID },
		/* nested: the innermost wins; the unified line before v1 */
		{ "5:pids:/docker/" CID2 "\n0::/docker/" CID2 "/kubepods/pod1/" CID "\n", CID },
		/* no trailing newline, podman */
		{ "0::/user.slice/libpod-" CID ".scope", CID },
		/* not containers */
		{ "0::/user.slice/user-0.slice/session-1.scope\n", NULL },
		{ "0::/" CID "0\n", NULL },
		{ "0::/cri-containerd-"
		  "3F1C9E0B7A2D4C5E6F708192A3B4C5D6E7F8091A2B3C4D5E6F708192A3B4C5D6"
		  ".scope\n",
		  NULL },
		{ "garbage without colons " CID "\n", NULL },
		{ "", NULL },
	};
	char id[65];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = pp_proc__parse_cgroup_id(cases[i].text, strlen(cases[i].text), id,
						 sizeof(id));
		if (!cases[i].want) {
			assert_int_equal(r, -ENOENT);
			continue;
		}
		assert_int_equal(r, 0);
		assert_string_equal(id, cases[i].want);
	}
	assert_int_equal(pp_proc__parse_cgroup_id("0::/", 4, id, 10), -EINVAL);
}

static void test_container_name(void **state)
{
	static const struct {
		const char *text;
		const char *want;
	} cases[] = {
		{ "1400 1390 0:34 / / rw master:1 - overlay overlay rw\n"
		  "1410 1400 253:1 /var/lib/kubelet/pods/6f2b-11/containers/app/4a1b2c3d "
		  "/dev/termination-log rw,nosuid - ext4 /dev/vda1 rw\n",
		  "app" },
		/* /var/lib/kubelet on its own filesystem */
		{ "30 20 8:3 /pods/6f2b-11/containers/istio-proxy/0e1f2a3b /dev/termination-log "
		  "rw - xfs /dev/sdb rw\n",
		  "istio-proxy" },
		/* another mount point, an invalid name, a missing file part */
		{ "30 20 8:3 /pods/u/containers/app/f /etc/hosts rw - xfs /dev/sdb rw\n", NULL },
		{ "30 20 8:3 /pods/u/containers/App_1/f /dev/termination-log rw - xfs x rw\n",
		  NULL },
		{ "30 20 8:3 /pods/u/containers/app/ /dev/termination-log rw - xfs x rw\n", NULL },
		{ "30 20 8:3 /x/u/containers/app/f /dev/termination-log rw - xfs x rw\n", NULL },
		{ "30 20 8:3\n", NULL },
		{ "", NULL },
	};
	char name[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = pp_proc__parse_container_name(cases[i].text, strlen(cases[i].text), name,
						      sizeof(name));
		if (!cases[i].want) {
			assert_int_equal(r, -ENOENT);
			continue;
		}
		assert_int_equal(r, 0);
		assert_string_equal(name, cases[i].want);
	}
	assert_int_equal(pp_proc__parse_container_name(cases[1].text, strlen(cases[1].text), name,
						       5),
			 -ENAMETOOLONG);
}

static void test_selector_container(void **state)
{
	struct pp_proc_info info = { .pid = 7, .comm = "envoy" };
	struct pp_selector s = { .container = "istio-*" };

	(void)state;
	snprintf(info.container_id, sizeof(info.container_id), "%s", CID);
	assert_int_equal(pp_selector__match(&s, &info), 0); /* name unknown */
	snprintf(info.container, sizeof(info.container), "istio-proxy");
	assert_int_equal(pp_selector__match(&s, &info), 1);
	s.container = "app";
	assert_int_equal(pp_selector__match(&s, &info), 0);
	s.container = NULL;
	s.container_id = "3f1c9e0b";
	assert_int_equal(pp_selector__match(&s, &info), 1);
	s.container_id = "3f1c9e0c";
	assert_int_equal(pp_selector__match(&s, &info), 0);
	info.container_id[0] = '\0';
	s.container_id = "3f1c";
	assert_int_equal(pp_selector__match(&s, &info), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stat_table),
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_info_self),
		cmocka_unit_test(test_info_child),
		cmocka_unit_test(test_info_kthread),
		cmocka_unit_test(test_deleted_exe),
		cmocka_unit_test(test_lists),
		cmocka_unit_test(test_selector_table),
		cmocka_unit_test(test_selector_threads),
		cmocka_unit_test(test_selector_real),
		cmocka_unit_test(test_cgroup_id),
		cmocka_unit_test(test_container_name),
		cmocka_unit_test(test_selector_container),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
