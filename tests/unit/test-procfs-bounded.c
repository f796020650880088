/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Target file access under a deadline (bounded.c): a call that never
 * returns by itself (it reads a pipe nobody writes yet) times out, its
 * thread is counted stuck and given up on, the next calls still run, and
 * the stuck thread is counted back once its call ends. No timing is
 * asserted: the blocked call cannot finish before the test lets it.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"

static int read_pipe(void *arg)
{
	int fd = *(int *)arg;
	char c;

	return read(fd, &c, 1) == 1 ? c : -EIO;
}

static int add_one(void *arg)
{
	return *(int *)arg + 1;
}

static unsigned stuck(void)
{
	struct pp_file_stats s;

	pp_proc__file_stats(&s);
	return s.stuck_threads;
}

static void test_deadline(void **state)
{
	int p[2], v = 41;
	struct pp_file_stats before, after;

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pp_proc__file_stats(&before);
	/* a loaded machine may not even start the call within a short
	 * deadline (then it is dropped unstarted): lengthen it until it runs */
	for (unsigned ms = 50; !stuck(); ms *= 2) {
		assert_true(ms <= 60000);
		pp_proc__set_file_deadline(ms);
		assert_int_equal(pp_proc__call_bounded(read_pipe, &p[0], sizeof(p[0])), -ETIMEDOUT);
	}
	pp_proc__file_stats(&after);
	assert_int_equal(after.hangs, before.hangs + 1);
	assert_int_equal(after.stuck_threads, 1);
	/* another thread takes the next call */
	assert_int_equal(pp_proc__call_bounded(add_one, &v, sizeof(v)), 42);
	/* the stuck call ends: its thread is back */
	assert_int_equal(write(p[1], "x", 1), 1);
	for (int i = 0; i < 6000 && stuck(); i++)
		usleep(10000);
	assert_int_equal(stuck(), 0);
	close(p[0]);
	close(p[1]);
	pp_proc__set_file_deadline(PP_FILE_DEADLINE_MS);
}

static void test_fork_child(void **state)
{
	int v = 1;

	(void)state;
	/* the pool has threads now; a child has none and must still work */
	assert_int_equal(pp_proc__call_bounded(add_one, &v, sizeof(v)), 2);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(pp_proc__call_bounded(add_one, &v, sizeof(v)) == 2 ? 0 : 1);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_bad_args(void **state)
{
	char big[PP_CALL_ARG_MAX + 1] = { 0 };
	struct stat st;

	(void)state;
	assert_int_equal(pp_proc__call_bounded(add_one, big, sizeof(big)), -EINVAL);
	assert_int_equal(pp_proc__mapped_stat(getpid(), NULL, &st), -EINVAL);
	assert_int_equal(pp_proc__open_in_root(getpid(), "relative", O_RDONLY, 0), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_fork_child),
		cmocka_unit_test(test_bad_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
