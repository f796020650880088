/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Resolving the file behind a mapping of another process: map_files, the
 * /proc/PID/root fallback, deleted files, and other mount namespaces
 * (a bind mount over the mapped path, and an overlayfs like a container
 * root). Needs root (map_files, unshare, mount); skips otherwise.
 */
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"
#include "util/util.h"

/* How long to wait for a child to exec, exit or map: only a guard against a
 * hang (a loaded machine runs the child late). */
#define WAIT_NS (60ull * 1000000000ull)

static void assert_fd_is(int fd, const struct pp_map *m)
{
	struct stat st;
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true((uint64_t)st.st_ino == m->inode);
	assert_int_equal(major(st.st_dev), m->dev_major);
	assert_int_equal(minor(st.st_dev), m->dev_minor);
	int fl = fcntl(fd, F_GETFD);
	assert_true(fl & FD_CLOEXEC);
	assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* First mapping of pid whose path satisfies pred; copied into *ret with its path. */
static bool find_map(pid_t pid, bool (*pred)(const struct pp_map *, const void *), const void *arg,
		     struct pp_map *ret, char *path_buf, size_t n)
{
	struct pp_maps maps = { 0 };
	bool found = false;
	assert_int_equal(pp_maps__read(pid, &maps), 0);
	for (size_t i = 0; i < maps.n && !found; i++) {
		if (pred(&maps.v[i], arg)) {
			*ret = maps.v[i];
			snprintf(path_buf, n, "%s", maps.v[i].path ? maps.v[i].path : "");
			ret->path = maps.v[i].path ? path_buf : NULL;
			found = true;
		}
	}
	pp_maps__free(&maps);
	return found;
}

static bool path_is(const struct pp_map *m, const void *arg)
{
	return m->path && strcmp(m->path, arg) == 0;
}

static bool path_has(const struct pp_map *m, const void *arg)
{
	return m->path && !m->special && strstr(m->path, arg);
}

static bool is_anon(const struct pp_map *m, const void *arg)
{
	(void)arg;
	return !m->path;
}

static bool is_special(const struct pp_map *m, const void *arg)
{
	return m->special && m->path && strcmp(m->path, arg) == 0;
}

static pid_t run_sleep(void)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/bin/sleep", "sleep", "1000", (char *)NULL);
		_exit(127);
	}
	char want[4096], got[4096];
	assert_non_null(realpath("/bin/sleep", want));
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS; pp_now_mono_ns() < end;) {
		ssize_t n = readlink(link, got, sizeof(got) - 1);
		if (n > 0) {
			got[n] = '\0';
			if (strcmp(got, want) == 0)
				break;
		}
		usleep(2000);
	}
	/* and the dynamic loader has mapped libc */
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS; pp_now_mono_ns() < end;) {
		struct pp_map m;
		char buf[4096];
		if (find_map(pid, path_has, "libc", &m, buf, sizeof(buf)))
			break;
		usleep(2000);
	}
	return pid;
}

static void check_both_routes(pid_t pid, const struct pp_map *m)
{
	char buf[4200], want[4200];
	struct stat st;

	int fd = pp_proc__open_mapped(pid, m);
	assert_fd_is(fd, m);
	close(fd);

	/* map_files only, and root only */
	fd = pp_proc__open_mapped_ex(pid, m, PP_RESOLVE_NO_ROOT);
	assert_fd_is(fd, m);
	close(fd);
	fd = pp_proc__open_mapped_ex(pid, m, PP_RESOLVE_NO_MAP_FILES);
	assert_fd_is(fd, m);
	close(fd);

	assert_int_equal(pp_proc__mapped_path(pid, m, buf, sizeof(buf)), 0);
	snprintf(want, sizeof(want), "/proc/%d/map_files/%lx-%lx", (int)pid,
		 (unsigned long)m->start, (unsigned long)m->end);
	assert_string_equal(buf, want);
	assert_int_equal(stat(buf, &st), 0);
	assert_true((uint64_t)st.st_ino == m->inode);

	assert_int_equal(pp_proc__mapped_path_ex(pid, m, PP_RESOLVE_NO_MAP_FILES, buf, sizeof(buf)),
			 0);
	snprintf(want, sizeof(want), "/proc/%d/root%s", (int)pid, m->path);
	assert_string_equal(buf, want);
	assert_int_equal(stat(buf, &st), 0);
	assert_true((uint64_t)st.st_ino == m->inode);

	char small[8];
	assert_int_equal(pp_proc__mapped_path(pid, m, small, sizeof(small)), -ENAMETOOLONG);
}

static void test_child_exe_and_libc(void **state)
{
	(void)state;
	pid_t pid = run_sleep();
	char exe[4096], buf[4096];
	struct pp_map m;
	assert_non_null(realpath("/bin/sleep", exe));

	assert_true(find_map(pid, path_is, exe, &m, buf, sizeof(buf)));
	check_both_routes(pid, &m);

	/* the build id through the resolved fd is the file's */
	int fd = pp_proc__open_mapped(pid, &m);
	assert_true(fd >= 0);
	uint8_t id1[PP_BUILD_ID_MAX], id2[PP_BUILD_ID_MAX];
	size_t n1 = 0, n2 = 0;
	int r1 = pp_buildid__from_fd(fd, id1, &n1);
	close(fd);
	fd = open(exe, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	int r2 = pp_buildid__from_fd(fd, id2, &n2);
	close(fd);
	assert_int_equal(r1, r2);
	if (r1 == 0) {
		assert_int_equal(n1, n2);
		assert_memory_equal(id1, id2, n1);
	}

	assert_true(find_map(pid, path_has, "libc", &m, buf, sizeof(buf)));
	check_both_routes(pid, &m);

	/* wrong inode or device: -ESTALE by either route */
	struct pp_map bad = m;
	bad.inode++;
	assert_int_equal(pp_proc__open_mapped(pid, &bad), -ESTALE);
	assert_int_equal(pp_proc__open_mapped_ex(pid, &bad, PP_RESOLVE_NO_MAP_FILES), -ESTALE);
	assert_int_equal(pp_proc__mapped_path(pid, &bad, buf, sizeof(buf)), -ESTALE);
	bad = m;
	bad.dev_minor ^= 1;
	assert_int_equal(pp_proc__open_mapped(pid, &bad), -ESTALE);

	/* a range that is not a mapping: map_files ENOENT, the root path still verifies */
	bad = m;
	bad.start += 1;
	fd = pp_proc__open_mapped(pid, &bad);
	assert_fd_is(fd, &m);
	close(fd);
	assert_int_equal(pp_proc__open_mapped_ex(pid, &bad, PP_RESOLVE_NO_ROOT), -ENOENT);

	/* anonymous and special mappings have no file */
	assert_true(find_map(pid, is_special, "[stack]", &m, buf, sizeof(buf)));
	assert_int_equal(pp_proc__open_mapped(pid, &m), -ENOENT);
	if (find_map(pid, is_anon, NULL, &m, buf, sizeof(buf)))
		assert_int_equal(pp_proc__open_mapped(pid, &m), -ENOENT);

	reap(pid);
	/* the process is gone */
	assert_true(pp_proc__open_mapped(pid, &bad) < 0);
}

static void test_root_path(void **state)
{
	(void)state;
	char buf[64];
	assert_int_equal(pp_proc__root_path(42, "/usr/lib/x.so", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/proc/42/root/usr/lib/x.so");
	assert_int_equal(pp_proc__root_path(42, "relative", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(pp_proc__root_path(0, "/x", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(pp_proc__root_path(42, "/x", buf, 10), -ENAMETOOLONG);
}

/* ---- children with their own mount namespace ---- */

struct ns_child {
	pid_t pid;
	char dir[64];
	char lower[128]; /* overlay lower layer: <dir>/lower, or on /dev/shm for NS_OVERLAY_XFS */
};

enum ns_kind { NS_BIND, NS_OVERLAY, NS_OVERLAY_XFS, NS_DELETED };

static void write_file(const char *path, char c, size_t len)
{
	char *b = malloc(len);
	if (!b)
		_exit(90);
	memset(b, c, len);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, b, len) != (ssize_t)len)
		_exit(91);
	close(fd);
	free(b);
}

/* Child: set up per kind, mmap <dir>/target (or merged/target), report, wait. */
static void ns_child_main(enum ns_kind kind, const char *dir, const char *lower, int wfd)
{
	char target[256], path[256], opts[1024];
	snprintf(target, sizeof(target), "%s/target", dir);
	/* never outlive the test, even when an assertion aborts it */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(9);

	if (kind != NS_DELETED) {
		if (unshare(CLONE_NEWNS) < 0)
			_exit(10);
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(11);
	}
	if (kind == NS_BIND) {
		snprintf(path, sizeof(path), "%s/other", dir);
		if (mount(path, target, NULL, MS_BIND, NULL) < 0)
			_exit(12);
	} else if (kind == NS_OVERLAY || kind == NS_OVERLAY_XFS) {
		snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s/upper,workdir=%s/work", lower,
			 dir, dir);
		snprintf(path, sizeof(path), "%s/merged", dir);
		if (mount("overlay", path, "overlay", 0, opts) < 0)
			_exit(13);
		snprintf(target, sizeof(target), "%s/merged/target", dir);
	}
	int fd = open(target, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		_exit(14);
	void *p = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		_exit(15);
	close(fd);
	if (kind == NS_DELETED && unlink(target) < 0)
		_exit(16);
	if (write(wfd, "k", 1) != 1)
		_exit(17);
	close(wfd);
	for (;;)
		pause();
}

/* 0 = running and ready, else the child's exit code. */
static int ns_start(struct ns_child *c, enum ns_kind kind)
{
	int p[2];
	char path[256];

	snprintf(c->dir, sizeof(c->dir), "/tmp/procfs-ns-XXXXXX");
	assert_non_null(mkdtemp(c->dir));
	snprintf(path, sizeof(path), "%s/target", c->dir);
	write_file(path, 'A', 8192);
	snprintf(path, sizeof(path), "%s/other", c->dir);
	write_file(path, 'B', 8192);
	static const char *sub[] = { "lower", "upper", "work", "merged" };
	for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
		snprintf(path, sizeof(path), "%s/%s", c->dir, sub[i]);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	if (kind == NS_OVERLAY_XFS) {
		snprintf(c->lower, sizeof(c->lower), "/dev/shm/procfs-lower-XXXXXX");
		assert_non_null(mkdtemp(c->lower));
	} else {
		snprintf(c->lower, sizeof(c->lower), "%s/lower", c->dir);
	}
	snprintf(path, sizeof(path), "%s/target", c->lower);
	write_file(path, 'L', 8192);

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		close(p[0]);
		ns_child_main(kind, c->dir, c->lower, p[1]);
		_exit(99);
	}
	close(p[1]);
	char b;
	ssize_t n = read(p[0], &b, 1);
	close(p[0]);
	if (n == 1)
		return 0;
	int status = 0;
	waitpid(c->pid, &status, 0);
	c->pid = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

static void ns_stop(struct ns_child *c)
{
	char cmd[400];
	if (c->pid > 0)
		reap(c->pid);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", c->dir, c->lower);
	if (system(cmd) != 0)
		print_message("cleanup of %s failed\n", c->dir);
}

static char fd_first_byte(int fd)
{
	char b = 0;
	assert_int_equal(pread(fd, &b, 1, 0), 1);
	return b;
}

static uint64_t ino_of(const char *dir, const char *name) /* name may be "" */
{
	char path[160];
	struct stat st;
	snprintf(path, sizeof(path), "%s%s%s", dir, name[0] ? "/" : "", name);
	assert_int_equal(stat(path, &st), 0);
	return st.st_ino;
}

static void test_bind_mount_namespace(void **state)
{
	(void)state;
	struct ns_child c;
	int r = ns_start(&c, NS_BIND);
	if (r != 0) {
		print_message("mount namespace setup failed (step %d), skipping\n", r);
		ns_stop(&c);
		skip();
		return;
	}
	char target[160], buf[4200], out[4200]; /* buf holds m.path */
	struct pp_map m;
	snprintf(target, sizeof(target), "%s/target", c.dir);
	assert_true(find_map(c.pid, path_is, target, &m, buf, sizeof(buf)));

	/* The child mapped "other" under the name of "target". */
	uint64_t ino_a = ino_of(c.dir, "target"), ino_b = ino_of(c.dir, "other");
	assert_true(m.inode == ino_b);
	assert_true(m.inode != ino_a);

	int fd = pp_proc__open_mapped(c.pid, &m);
	assert_fd_is(fd, &m);
	assert_int_equal(fd_first_byte(fd), 'B');
	close(fd);

	/* The root fallback walks the child's mount tree, so it finds B too. */
	fd = pp_proc__open_mapped_ex(c.pid, &m, PP_RESOLVE_NO_MAP_FILES);
	assert_fd_is(fd, &m);
	assert_int_equal(fd_first_byte(fd), 'B');
	close(fd);
	assert_int_equal(
		pp_proc__mapped_path_ex(c.pid, &m, PP_RESOLVE_NO_MAP_FILES, out, sizeof(out)), 0);

	/* A maps entry claiming the inode podprof sees at that path is refused. */
	struct pp_map wrong = m;
	wrong.inode = ino_a;
	assert_int_equal(pp_proc__open_mapped_ex(c.pid, &wrong, PP_RESOLVE_NO_MAP_FILES), -ESTALE);
	assert_int_equal(pp_proc__open_mapped(c.pid, &wrong), -ESTALE);
	assert_int_equal(pp_proc__mapped_path_ex(c.pid, &wrong, PP_RESOLVE_NO_MAP_FILES, buf,
						 sizeof(buf)),
			 -ESTALE);
	ns_stop(&c);
}

static void overlay_case(enum ns_kind kind)
{
	struct ns_child c;
	int r = ns_start(&c, kind);
	if (r != 0) {
		print_message("overlayfs setup failed (step %d), skipping\n", r);
		ns_stop(&c);
		skip();
		return;
	}
	char target[160], buf[4200], out[4200]; /* buf holds m.path */
	struct pp_map m;
	snprintf(target, sizeof(target), "%s/merged/target", c.dir);
	if (!find_map(c.pid, path_is, target, &m, buf, sizeof(buf))) {
		/* kernels before 6.8 show the backing path instead */
		snprintf(target, sizeof(target), "%s/target", c.lower);
		assert_true(find_map(c.pid, path_is, target, &m, buf, sizeof(buf)));
	}
	/* maps shows the backing (lower) file's identity */
	assert_true(m.inode == ino_of(c.lower, "target"));

	/* across file systems even map_files hands back the overlay file (other st_dev) */
	int fd = pp_proc__open_mapped(c.pid, &m);
	if (kind == NS_OVERLAY)
		assert_fd_is(fd, &m);
	assert_true(fd >= 0);
	assert_int_equal(fd_first_byte(fd), 'L');
	close(fd);
	assert_int_equal(pp_proc__mapped_path(c.pid, &m, out, sizeof(out)), 0);

	/* Root fallback: stat shows the overlay's device, but the mapped inode is verified. */
	struct stat st;
	char via_root[300];
	snprintf(via_root, sizeof(via_root), "/proc/%d/root%s", (int)c.pid, m.path);
	assert_int_equal(stat(via_root, &st), 0);
	/* with layers on one fs overlayfs reports the real st_dev for files; across file
	 * systems it reports its own, and only the mmap probe can verify the file */
	if (kind == NS_OVERLAY_XFS)
		assert_true(major(st.st_dev) != m.dev_major || minor(st.st_dev) != m.dev_minor);
	fd = pp_proc__open_mapped_ex(c.pid, &m, PP_RESOLVE_NO_MAP_FILES);
	assert_true(fd >= 0);
	assert_int_equal(fd_first_byte(fd), 'L');
	close(fd);
	assert_int_equal(
		pp_proc__mapped_path_ex(c.pid, &m, PP_RESOLVE_NO_MAP_FILES, out, sizeof(out)), 0);
	struct pp_map wrong = m;
	wrong.inode = ino_of(c.dir, "other");
	assert_int_equal(pp_proc__open_mapped_ex(c.pid, &wrong, PP_RESOLVE_NO_MAP_FILES), -ESTALE);
	ns_stop(&c);
}

static void test_overlay_namespace(void **state)
{
	(void)state;
	overlay_case(NS_OVERLAY);
}

static void test_overlay_cross_fs(void **state)
{
	(void)state;
	overlay_case(NS_OVERLAY_XFS);
}

static void test_deleted(void **state)
{
	(void)state;
	struct ns_child c;
	assert_int_equal(ns_start(&c, NS_DELETED), 0);
	char target[160], buf[4200];
	struct pp_map m;
	snprintf(target, sizeof(target), "%s/target", c.dir);
	assert_true(find_map(c.pid, path_is, target, &m, buf, sizeof(buf)));
	assert_true(m.deleted);

	int fd = pp_proc__open_mapped(c.pid, &m);
	assert_fd_is(fd, &m);
	assert_int_equal(fd_first_byte(fd), 'A');
	close(fd);
	/* never by path: a new file there must not be taken for it */
	snprintf(target, sizeof(target), "%s/target", c.dir);
	int nf = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(nf >= 0);
	close(nf);
	assert_int_equal(pp_proc__open_mapped_ex(c.pid, &m, PP_RESOLVE_NO_MAP_FILES), -ENOENT);
	ns_stop(&c);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "test_fifo_swapped_in: blocked opening a FIFO\n";
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

/* A target swaps a mapped file for a FIFO after podprof read its maps:
 * resolving the stale entry must fail at once, never wait for a writer. */
static void test_fifo_swapped_in(void **state)
{
	(void)state;
	char dir[] = "/tmp/pp-fifo-XXXXXX", path[64], buf[4200];
	struct pp_map m;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/lib.so", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "ELF!", 4), 4);
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(p != MAP_FAILED);
	close(fd);
	assert_true(find_map(getpid(), path_is, path, &m, buf, sizeof(buf)));
	assert_false(m.deleted);

	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0644), 0);
	signal(SIGALRM, on_alarm);
	alarm(10);
	assert_int_equal(pp_proc__open_mapped_ex(getpid(), &m, PP_RESOLVE_NO_MAP_FILES), -ESTALE);
	char out[256];
	assert_true(pp_proc__mapped_path_ex(getpid(), &m, PP_RESOLVE_NO_MAP_FILES, out,
					    sizeof(out)) < 0);
	alarm(0);
	/* map_files still reaches the mapped inode itself. */
	fd = pp_proc__open_mapped(getpid(), &m);
	assert_fd_is(fd, &m);
	close(fd);
	munmap(p, 4096);
	unlink(path);
	rmdir(dir);
}

/* A process chrooted into dir, waiting until killed. */
static pid_t chrooted(const char *dir)
{
	int p[2];
	char c;
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (chroot(dir) < 0 || chdir("/") < 0)
			_exit(1);
		close(p[0]);
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	return pid;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/*
 * The attacker's side: a target (chrooted, as a container) names paths
 * that lead out of its root to another container's secret (0600, another
 * owner): an absolute symlink, "..", and /proc/<other>/root. podprof's
 * opens stay in the target's root; a maps entry claiming the secret's own
 * device and inode at such a path opens nothing either.
 */
static void test_root_escapes(void **state)
{
	(void)state;
	char base[] = "/tmp/procfs-escape-XXXXXX", a[64], b[64], path[512], secret[128], link[640];
	assert_non_null(mkdtemp(base));
	snprintf(a, sizeof(a), "%s/target", base);
	snprintf(b, sizeof(b), "%s/other", base);
	assert_int_equal(mkdir(a, 0755), 0);
	assert_int_equal(mkdir(b, 0755), 0);
	snprintf(path, sizeof(path), "%s/lib", a);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/lib/ok.so", a);
	write_text(path, "ok", 0644);
	snprintf(secret, sizeof(secret), "%s/key.pem", b);
	write_text(secret, "SECRET", 0600);
	assert_int_equal(chown(secret, 4242, 4242), 0);
	struct stat sst;
	assert_int_equal(stat(secret, &sst), 0);

	/* links in the target's root: absolute, "..", and through another's root */
	snprintf(path, sizeof(path), "%s/lib/abs.so", a);
	assert_int_equal(symlink(secret, path), 0);
	snprintf(link, sizeof(link), "../../../../../../../..%s", secret);
	snprintf(path, sizeof(path), "%s/lib/up.so", a);
	assert_int_equal(symlink(link, path), 0);

	pid_t t = chrooted(a), o = chrooted(b);
	int fd = pp_proc__open_in_root(t, "/lib/ok.so", O_RDONLY, 0);
	assert_true(fd >= 0);
	close(fd);
	const char *escapes[] = { "/lib/abs.so", "/lib/up.so", link, NULL, NULL };
	char viaproc[128];
	/* (the target has no /proc: the host's, as a target sharing podprof's root sees it) */
	snprintf(viaproc, sizeof(viaproc), "/proc/%d/root/key.pem", (int)o);
	for (int i = 0; escapes[i]; i++) {
		fd = pp_proc__open_in_root(t, escapes[i], O_RDONLY, 0);
		assert_true(fd < 0);
		struct pp_map m = { .start = 0x1000,
				    .end = 0x2000,
				    .inode = sst.st_ino,
				    .dev_major = major(sst.st_dev),
				    .dev_minor = minor(sst.st_dev),
				    .path = (char *)escapes[i] };
		char out[600];
		assert_true(pp_proc__open_mapped_ex(t, &m, PP_RESOLVE_NO_MAP_FILES) < 0);
		assert_true(pp_proc__mapped_path_ex(t, &m, PP_RESOLVE_NO_MAP_FILES, out,
						    sizeof(out)) < 0);
	}
	/* the magic link: a plain open of /proc/SELF/root/proc/O/root/... reaches the
	 * secret, the resolution in the root does not */
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)getpid(), viaproc);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0); /* the attack works without the rules */
	close(fd);
	assert_int_equal(pp_proc__open_in_root(getpid(), viaproc, O_RDONLY, 0), -ELOOP);
	struct pp_map m = { .start = 0x1000,
			    .end = 0x2000,
			    .inode = sst.st_ino,
			    .dev_major = major(sst.st_dev),
			    .dev_minor = minor(sst.st_dev),
			    .path = viaproc };
	assert_true(pp_proc__open_mapped_ex(getpid(), &m, PP_RESOLVE_NO_MAP_FILES) < 0);
	stop(t);
	stop(o);
	snprintf(path, sizeof(path), "rm -rf '%s'", base);
	assert_int_equal(system(path), 0);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root_path),
		cmocka_unit_test(test_child_exe_and_libc),
		cmocka_unit_test(test_bind_mount_namespace),
		cmocka_unit_test(test_overlay_namespace),
		cmocka_unit_test(test_overlay_cross_fs),
		cmocka_unit_test(test_deleted),
		cmocka_unit_test(test_fifo_swapped_in),
		cmocka_unit_test(test_root_escapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
