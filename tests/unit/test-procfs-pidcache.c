/* SPDX-License-Identifier: Apache-2.0 */
/* Discovery's pid cache (pidcache.c) and the split reads it relies on. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"
#include "util/util.h"

/* How long to wait for a child to exec, exit or map: only a guard against a
 * hang (a loaded machine runs the child late). */
#define WAIT_NS (60ull * 1000000000ull)

static struct pp_proc_info ident(pid_t pid, uint64_t start, const char *comm, char *exe)
{
	struct pp_proc_info i = { .pid = pid, .start_time = start, .exe = exe };

	snprintf(i.comm, sizeof(i.comm), "%s", comm);
	return i;
}

static void test_same_process(void **state)
{
	struct pp_pid_cache *c = pp_pid_cache__new(16, 1000);
	struct pp_proc_info a = ident(10, 100, "app", "/usr/bin/app");
	int v = 7;

	assert_non_null(c);
	assert_false(pp_pid_cache__lookup(c, &a, &v)); /* never seen */
	assert_int_equal(pp_pid_cache__store(c, &a, -1), 0);
	pp_pid_cache__end_pass(c);
	assert_int_equal(pp_pid_cache__size(c), 1);
	assert_true(pp_pid_cache__lookup(c, &a, &v));
	assert_int_equal(v, -1);
	pp_pid_cache__end_pass(c);

	/* pid reused (start time), exec (exe), PR_SET_NAME or exec of the same
	 * file under another name (comm): each is a new look. */
	struct pp_proc_info reused = ident(10, 101, "app", "/usr/bin/app");
	struct pp_proc_info exec = ident(10, 100, "app", "/usr/bin/other");
	struct pp_proc_info noexe = ident(10, 100, "app", NULL);
	struct pp_proc_info renamed = ident(10, 100, "worker", "/usr/bin/app");
	assert_false(pp_pid_cache__lookup(c, &reused, &v));
	assert_false(pp_pid_cache__lookup(c, &exec, &v));
	assert_false(pp_pid_cache__lookup(c, &noexe, &v));
	assert_false(pp_pid_cache__lookup(c, &renamed, &v));
	/* the new verdict replaces the old one */
	assert_int_equal(pp_pid_cache__store(c, &exec, 3), 0);
	pp_pid_cache__end_pass(c);
	assert_int_equal(pp_pid_cache__size(c), 1);
	assert_false(pp_pid_cache__lookup(c, &a, &v));
	pp_pid_cache__end_pass(c);
	assert_true(pp_pid_cache__lookup(c, &exec, &v));
	assert_int_equal(v, 3);
	pp_pid_cache__free(c);
}

static void test_gone_and_order(void **state)
{
	struct pp_pid_cache *c = pp_pid_cache__new(1000, 1000);
	char exe[] = "/bin/x";
	int v;

	/* stored out of order over two passes: all found, sorted merge */
	for (pid_t p = 200; p > 100; p -= 2) {
		struct pp_proc_info i = ident(p, (uint64_t)p, "x", exe);
		assert_int_equal(pp_pid_cache__store(c, &i, (int)p), 0);
	}
	pp_pid_cache__end_pass(c);
	for (pid_t p = 101; p < 200; p += 2) {
		struct pp_proc_info i = ident(p, (uint64_t)p, "x", exe);
		assert_int_equal(pp_pid_cache__store(c, &i, (int)p), 0);
	}
	for (pid_t p = 200; p > 100; p -= 2) {
		struct pp_proc_info i = ident(p, (uint64_t)p, "x", exe);
		assert_true(pp_pid_cache__lookup(c, &i, &v));
	}
	pp_pid_cache__end_pass(c);
	assert_int_equal(pp_pid_cache__size(c), 100);
	/* a pass that sees only the odd pids forgets the even ones */
	for (pid_t p = 101; p <= 200; p++) {
		struct pp_proc_info i = ident(p, (uint64_t)p, "x", exe);
		if (p % 2)
			assert_true(pp_pid_cache__lookup(c, &i, &v) && v == (int)p);
	}
	pp_pid_cache__end_pass(c);
	assert_int_equal(pp_pid_cache__size(c), 50);
	for (pid_t p = 101; p <= 200; p++) {
		struct pp_proc_info i = ident(p, (uint64_t)p, "x", exe);
		assert_int_equal(pp_pid_cache__lookup(c, &i, &v), p % 2 == 1);
	}
	pp_pid_cache__free(c);
}

static void test_cap_and_refresh(void **state)
{
	const unsigned refresh = 5;
	struct pp_pid_cache *c = pp_pid_cache__new(3, refresh);
	char exe[] = "/bin/x";
	int v;

	for (pid_t p = 1; p <= 3; p++) {
		struct pp_proc_info i = ident(p, 1, "x", exe);
		assert_int_equal(pp_pid_cache__store(c, &i, -1), 0);
	}
	struct pp_proc_info extra = ident(4, 1, "x", exe);
	assert_int_equal(pp_pid_cache__store(c, &extra, -1), -ENOSPC);
	pp_pid_cache__end_pass(c);
	assert_int_equal(pp_pid_cache__size(c), 3);

	/* Each entry is due for a full look within `refresh` passes, then
	 * every `refresh` passes: a caller that stores after each miss reads
	 * each process in full about once per `refresh` passes. */
	unsigned misses[3] = { 0 };
	for (unsigned pass = 0; pass < 10 * refresh; pass++) {
		for (pid_t p = 1; p <= 3; p++) {
			struct pp_proc_info i = ident(p, 1, "x", exe);
			if (!pp_pid_cache__lookup(c, &i, &v)) {
				misses[p - 1]++;
				assert_int_equal(pp_pid_cache__store(c, &i, -1), 0);
			} else {
				assert_int_equal(v, -1);
			}
		}
		pp_pid_cache__end_pass(c);
	}
	for (int p = 0; p < 3; p++)
		assert_true(misses[p] >= 9 && misses[p] <= 11);
	assert_null(pp_pid_cache__new(0, 1));
	assert_null(pp_pid_cache__new(1, 0));
	pp_pid_cache__free(c);
	pp_pid_cache__free(NULL);
	pp_pid_cache__end_pass(NULL);
}

/* read_ident + read_extra give what read_info gives; an exec shows in
 * read_ident (exe and comm) of a real process. */
static void test_split_read_real(void **state)
{
	struct pp_proc_info full = { 0 }, id = { 0 };

	assert_int_equal(pp_proc__read_info(getpid(), &full), 0);
	assert_int_equal(pp_proc__read_ident(getpid(), &id), 0);
	assert_null(id.cmdline);
	assert_int_equal(id.start_time, full.start_time);
	assert_string_equal(id.comm, full.comm);
	assert_non_null(id.exe);
	assert_string_equal(id.exe, full.exe);
	pp_proc__read_extra(getpid(), &id);
	assert_int_equal(id.cmdline_len, full.cmdline_len);
	assert_memory_equal(id.cmdline, full.cmdline, full.cmdline_len);
	assert_string_equal(id.container_id, full.container_id);
	assert_string_equal(id.container, full.container);
	pp_proc_info__free(&full);

	int go[2];
	assert_int_equal(pipe(go), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		char b;
		close(go[1]);
		if (read(go[0], &b, 1) != 1)
			_exit(1);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	close(go[0]);
	struct pp_pid_cache *c = pp_pid_cache__new(4, 1000);
	struct pp_proc_info before = { 0 }, after = { 0 };
	int v;
	assert_int_equal(pp_proc__read_ident(child, &before), 0);
	assert_int_equal(pp_pid_cache__store(c, &before, -1), 0);
	pp_pid_cache__end_pass(c);
	assert_true(pp_pid_cache__lookup(c, &before, &v));
	pp_pid_cache__end_pass(c);
	assert_int_equal(write(go[1], "x", 1), 1);
	close(go[1]);
	/* wait for the exec to show */
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS; pp_now_mono_ns() < end;) {
		pp_proc_info__free(&after);
		assert_int_equal(pp_proc__read_ident(child, &after), 0);
		if (!strcmp(after.comm, "sleep"))
			break;
		usleep(10000);
	}
	assert_string_equal(after.comm, "sleep");
	assert_int_equal(after.start_time, before.start_time);
	assert_false(pp_pid_cache__lookup(c, &after, &v));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	pp_proc_info__free(&before);
	pp_proc_info__free(&after);
	pp_proc_info__free(&id);
	pp_pid_cache__free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_process),
		cmocka_unit_test(test_gone_and_order),
		cmocka_unit_test(test_cap_and_refresh),
		cmocka_unit_test(test_split_read_real),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
