/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podprof: /debug/pprof for native processes. This file only parses the
 * command line, loads the configuration and wires the agent together.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "agent/agent.h"
#include "config/config.h"
#include "inject/inject.h"
#include "podprof-config.h"
#include "symbolize/isolate.h"
#include "tracee/tracee.h"
#include "util/caps.h"
#include "util/log.h"
#include "util/util.h"

extern char **environ;

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static void usage(FILE *f)
{
	fprintf(f,
		"Usage:\n"
		"  podprof [--config FILE] [--listen ADDR] [--pid PID]... [--set KEY=VALUE]...\n"
		"          [--log-level error|warn|info|debug] [--log-format text|json]\n"
		"  podprof record --pid PID [--seconds N] [-o FILE] [--config FILE] [--set "
		"KEY=VALUE]...\n"
		"  podprof check-config FILE\n"
		"  podprof healthcheck [ADDR]   (GET /healthz; exit 0 if healthy; for exec "
		"probes)\n"
		"  podprof --help | --version\n"
		"\n"
		"Serves Go-compatible /debug/pprof endpoints (profile, heap, allocs, goroutine,\n"
		"threadcreate, block, mutex, cmdline, symbol) for the native processes it finds.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE     YAML configuration (also PODPROF_CONFIG)\n"
		"  -l, --listen ADDR     host:port, :port, or 0 to disable the server\n"
		"                        (default 127.0.0.1:6060; also PODPROF_LISTEN)\n"
		"  -p, --pid PID         profile this process (repeatable); without targets every\n"
		"                        process in the PID namespace except podprof is profiled\n"
		"      --set KEY=VALUE   override one config key, e.g. --set cpu.frequency_hz=999\n"
		"      --log-level L     error, warn, info (default) or debug\n"
		"      --log-format F    text (default) or json\n"
		"  -h, --help            this text\n"
		"  -V, --version         print the version\n"
		"\n"
		"Exit status: 0 ok, 1 runtime failure, 2 usage or configuration error.\n");
}

/* libbpf's messages (verifier logs included) go to the debug log. */
static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[1024];
	if (level == LIBBPF_DEBUG || !pp_log_enabled(PP_LOG_DEBUG))
		return 0;
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n > 0 && buf[PP_MIN((size_t)n, sizeof(buf) - 1) - 1] == '\n')
		buf[PP_MIN((size_t)n, sizeof(buf) - 1) - 1] = '\0';
	pp_dbg("libbpf: %s", buf);
	return 0;
}

static volatile sig_atomic_t g_stop;

/*
 * SIGINT and SIGTERM are blocked in every thread (the agent's threads
 * inherit the mask) and taken synchronously by the main thread with
 * sigtimedwait, so a stop request can never land in a worker thread while
 * the main thread sleeps on.
 */
static sigset_t g_stop_signals;

static void install_signals(void)
{
	sigemptyset(&g_stop_signals);
	sigaddset(&g_stop_signals, SIGINT);
	sigaddset(&g_stop_signals, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &g_stop_signals, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Waits up to ms for a stop signal; sets g_stop when one came. */
static void wait_stop(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	if (sigtimedwait(&g_stop_signals, NULL, &ts) > 0)
		g_stop = 1;
}

/*
 * The whole shutdown gets this long. A thread can be stuck in the kernel on
 * a target's file system that does not answer (lib/procfs/procfs.h, "Files
 * that never answer"); joining it would never end, so past this podprof
 * exits anyway (exit_group ends every thread the kernel lets go). A second
 * stop signal exits at once. Below Kubernetes' default grace of 30 s.
 */
#define SHUTDOWN_GRACE_S 15

static void *shutdown_watchdog(void *arg)
{
	struct timespec ts = { SHUTDOWN_GRACE_S, 0 };
	int sig;

	(void)arg;
	do
		sig = sigtimedwait(&g_stop_signals, NULL, &ts);
	while (sig < 0 && errno == EINTR);
	if (sig > 0)
		pp_warn("second stop signal: exiting now");
	else
		pp_warn("shutdown still running after %d s (a thread waits on a file system?): "
			"exiting now",
			SHUTDOWN_GRACE_S);
	_exit(EXIT_OK);
	return NULL;
}

static void arm_shutdown_watchdog(void)
{
	pthread_t th;

	if (pthread_create(&th, NULL, shutdown_watchdog, NULL) == 0)
		pthread_detach(th);
}

/* Shutdown: no new ptrace stop of a target, and those in flight given
 * back, before anything else ends. A stop lasts up to the configured
 * pause; 5 s is far past any. */
static void stop_tracing(void)
{
	int left = pp_tracee__close(5000);

	if (left > 0)
		pp_warn("%d thread stops still in flight at exit", left);
}

struct cli {
	const char *config;
	const char *listen;
	const char *log_level;
	const char *log_format;
	const char *output;
	unsigned seconds;
	pid_t pids[256];
	size_t n_pids;
	const char *sets[128];
	size_t n_sets;
};

static int parse_cli(int argc, char **argv, struct cli *c, bool record)
{
	enum { OPT_SET = 256, OPT_LOG_LEVEL, OPT_LOG_FORMAT, OPT_SECONDS };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "pid", required_argument, NULL, 'p' },
		{ "set", required_argument, NULL, OPT_SET },
		{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
		{ "log-format", required_argument, NULL, OPT_LOG_FORMAT },
		{ "seconds", required_argument, NULL, OPT_SECONDS },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int o;
	uint64_t v;

	while ((o = getopt_long(argc, argv, "c:l:p:o:hV", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			c->config = optarg;
			break;
		case 'l':
			c->listen = optarg;
			break;
		case 'p':
			if (pp_parse_u64(optarg, 10, 1, 4194304, &v) < 0) {
				fprintf(stderr,
					"podprof: --pid: \"%s\" is not a process id (1..4194304)\n",
					optarg);
				return -EINVAL;
			}
			if (c->n_pids >= ARRAY_SIZE(c->pids)) {
				fprintf(stderr, "podprof: --pid: at most %zu\n",
					ARRAY_SIZE(c->pids));
				return -EINVAL;
			}
			c->pids[c->n_pids++] = (pid_t)v;
			break;
		case OPT_SET:
			if (!strchr(optarg, '=') || c->n_sets >= ARRAY_SIZE(c->sets)) {
				fprintf(stderr, "podprof: --set: expected KEY=VALUE, got \"%s\"\n",
					optarg);
				return -EINVAL;
			}
			c->sets[c->n_sets++] = optarg;
			break;
		case OPT_LOG_LEVEL:
			c->log_level = optarg;
			break;
		case OPT_LOG_FORMAT:
			c->log_format = optarg;
			break;
		case OPT_SECONDS:
			if (!record || pp_parse_u64(optarg, 10, 1, 3600, &v) < 0) {
				fprintf(stderr,
					"podprof: --seconds: \"%s\" must be a whole number of "
					"seconds (1..3600)\n",
					optarg);
				return -EINVAL;
			}
			c->seconds = (unsigned)v;
			break;
		case 'o':
			if (!record) {
				fprintf(stderr, "podprof: -o is only for 'podprof record'\n");
				return -EINVAL;
			}
			c->output = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(EXIT_OK);
		case 'V':
			printf("podprof %s\n", PODPROF_VERSION);
			exit(EXIT_OK);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "podprof: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

/* defaults < file < PODPROF_* environment < flags */
static int build_config(const struct cli *c, struct pp_config **ret)
{
	char err[1024];
	struct pp_config *cfg = NULL;
	const char *path = c->config ? c->config : getenv("PODPROF_CONFIG");
	int r;

	if (path && *path) {
		r = pp_config__load_file(path, &cfg, err, sizeof(err));
		if (r < 0) {
			fprintf(stderr, "podprof: %s\n", err);
			return r;
		}
	} else {
		cfg = pp_config__new_default();
		if (!cfg)
			return -ENOMEM;
	}
	r = pp_config__apply_env(cfg, environ, err, sizeof(err));
	if (r < 0)
		goto fail;
	if (c->listen &&
	    (r = pp_config__set(cfg, "listen", c->listen, "--listen", err, sizeof(err))) < 0)
		goto fail;
	if (c->log_level && (r = pp_config__set(cfg, "log.level", c->log_level, "--log-level", err,
						sizeof(err))) < 0)
		goto fail;
	if (c->log_format && (r = pp_config__set(cfg, "log.format", c->log_format, "--log-format",
						 err, sizeof(err))) < 0)
		goto fail;
	for (size_t i = 0; i < c->n_sets; i++) {
		char key[128];
		const char *eq = strchr(c->sets[i], '=');
		size_t kl = (size_t)(eq - c->sets[i]);
		if (kl >= sizeof(key))
			kl = sizeof(key) - 1;
		memcpy(key, c->sets[i], kl);
		key[kl] = '\0';
		r = pp_config__set(cfg, key, eq + 1, "--set", err, sizeof(err));
		if (r < 0)
			goto fail;
	}
	for (size_t i = 0; i < c->n_pids; i++) {
		r = pp_config__add_pid_target(cfg, c->pids[i]);
		if (r < 0) {
			snprintf(err, sizeof(err), "--pid: %s", strerror(-r));
			goto fail;
		}
	}
	*ret = cfg;
	return 0;
fail:
	fprintf(stderr, "podprof: %s\n", err);
	pp_config__free(cfg);
	return r;
}

static int cmd_check_config(int argc, char **argv)
{
	char err[1024];
	struct pp_config *cfg = NULL;
	struct pp_buf out = { 0 };

	if (argc != 2) {
		fprintf(stderr, "Usage: podprof check-config FILE\n");
		return EXIT_USAGE;
	}
	if (pp_config__load_file(argv[1], &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "podprof: %s\n", err);
		return EXIT_USAGE;
	}
	if (pp_config__dump(cfg, &out) < 0) {
		pp_config__free(cfg);
		return EXIT_FAIL;
	}
	printf("# %s: valid; effective configuration:\n%s", argv[1], out.data ? out.data : "");
	pp_buf_free(&out);
	pp_config__free(cfg);
	return EXIT_OK;
}

static int read_token(const struct pp_config *cfg, char **ret)
{
	*ret = NULL;
	if (!cfg->http.token_file || !*cfg->http.token_file)
		return 0;
	char *data = NULL;
	size_t len = 0;
	int r = pp_read_file(cfg->http.token_file, 4096, &data, &len);
	if (r < 0) {
		fprintf(stderr, "podprof: http.token_file: cannot read %s: %s\n",
			cfg->http.token_file, strerror(-r));
		return r;
	}
	/* A NUL would end the token early (or turn auth off when first): refuse it. */
	if (memchr(data, '\0', len)) {
		fprintf(stderr,
			"podprof: http.token_file: %s holds a NUL byte (at offset %zu); the token "
			"must be text\n",
			cfg->http.token_file, (size_t)((char *)memchr(data, '\0', len) - data));
		explicit_bzero(data, len);
		free(data);
		return -EINVAL;
	}
	while (len && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
		data[--len] = '\0';
	if (!len) {
		fprintf(stderr, "podprof: http.token_file: %s is empty\n", cfg->http.token_file);
		free(data);
		return -EINVAL;
	}
	*ret = data;
	return 0;
}

static int cmd_record(int argc, char **argv)
{
	struct cli c = { .seconds = 30 };
	struct pp_config *cfg = NULL;
	int r;

	optind = 1;
	install_signals(); /* before any thread exists */
	libbpf_set_print(libbpf_log);
	if (parse_cli(argc, argv, &c, true) < 0)
		return EXIT_USAGE;
	if (c.n_pids == 0) {
		fprintf(stderr, "podprof record: --pid PID is required\n");
		return EXIT_USAGE;
	}
	if (!c.output) {
		fprintf(stderr, "podprof record: -o FILE is required\n");
		return EXIT_USAGE;
	}
	if (build_config(&c, &cfg) < 0)
		return EXIT_USAGE;
	pp_log_setup(cfg->log.level, cfg->log.format);
	char e[256];
	pp_config__set(cfg, "listen", "0", "record", e, sizeof(e));
	for (size_t i = 0; i < c.n_pids; i++) {
		if (kill(c.pids[i], 0) < 0 && errno == ESRCH) {
			fprintf(stderr, "podprof record: no process %d\n", c.pids[i]);
			pp_config__free(cfg);
			return EXIT_FAIL;
		}
	}
	struct pp_agent_opts ao = { .serve = false };
	struct pp_agent *a = pp_agent__new(cfg, &ao);
	pp_config__free(cfg);
	if (!a) {
		fprintf(stderr, "podprof record: cannot start: %s\n", strerror(errno));
		return EXIT_FAIL;
	}
	if (pp_agent__start(a) < 0) {
		pp_agent__free(a);
		return EXIT_FAIL;
	}
	const struct pp_http_source *src = pp_agent__source(a, -1);
	void *base = NULL;
	r = src->begin(src->ctx, PP_PROFILE_CPU, &base);
	if (r < 0) {
		fprintf(stderr, "podprof record: cannot start CPU sampling: %s\n", strerror(-r));
		pp_agent__free(a);
		return EXIT_FAIL;
	}
	bool tty = isatty(STDERR_FILENO);
	uint64_t t0 = pp_now_mono_ns();
	while (!g_stop) {
		uint64_t el = pp_now_mono_ns() - t0;
		if (el >= (uint64_t)c.seconds * 1000000000ull)
			break;
		if (tty) {
			struct pp_agent_summary s;
			pp_agent__summary(a, &s);
			fprintf(stderr, "\rrecording: %5.1f/%us, %llu samples", (double)el / 1e9,
				c.seconds, (unsigned long long)s.samples);
		}
		wait_stop(200);
	}
	if (tty)
		fputc('\n', stderr);
	struct pp_buf out = { 0 };
	r = src->render(src->ctx, PP_PROFILE_CPU, base, 0, &out);
	src->release(src->ctx, PP_PROFILE_CPU, base);
	struct pp_agent_summary s;
	pp_agent__summary(a, &s);
	stop_tracing();
	pp_agent__free(a);
	if (r < 0) {
		fprintf(stderr, "podprof record: cannot build the profile: %s\n", strerror(-r));
		pp_buf_free(&out);
		return EXIT_FAIL;
	}
	int fd = open(c.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, out.data, out.len) != (ssize_t)out.len) {
		fprintf(stderr, "podprof record: cannot write %s: %s\n", c.output, strerror(errno));
		if (fd >= 0)
			close(fd);
		pp_buf_free(&out);
		return EXIT_FAIL;
	}
	close(fd);
	pp_buf_free(&out);
	fprintf(stderr,
		"podprof record: wrote %s: %llu samples, %llu processes, %.1f%% of stacks "
		"complete\n",
		c.output, (unsigned long long)s.samples, (unsigned long long)s.targets,
		s.unwinds ? 100.0 * (double)s.unwinds_complete / (double)s.unwinds : 0.0);
	return EXIT_OK;
}

/*
 * healthcheck: an exec liveness probe for setups that listen on loopback
 * only (the kubelet's HTTP probes connect to the pod IP).
 */
static int cmd_healthcheck(int argc, char **argv)
{
	char host[256];
	uint16_t port;
	const char *addr = argc > 1 ? argv[1] : getenv("PODPROF_LISTEN");
	if (!addr || !*addr)
		addr = "127.0.0.1:6060";
	if (pp_config__split_listen(addr, host, sizeof(host), &port) < 0) {
		fprintf(stderr, "podprof healthcheck: bad address \"%s\"\n", addr);
		return EXIT_USAGE;
	}
	if (!*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::"))
		snprintf(host, sizeof(host), "127.0.0.1");
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	char ps[16];
	snprintf(ps, sizeof(ps), "%u", port);
	if (getaddrinfo(host, ps, &hints, &ai) != 0 || !ai) {
		fprintf(stderr, "podprof healthcheck: cannot resolve %s\n", host);
		return EXIT_FAIL;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { .tv_sec = 5 };
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
	freeaddrinfo(ai);
	char buf[64] = { 0 };
	if (ok) {
		static const char req[] = "GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n";
		ok = write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1) &&
		     read(fd, buf, sizeof(buf) - 1) > 12 && !strncmp(buf + 8, " 200", 4);
	}
	if (fd >= 0)
		close(fd);
	if (!ok) {
		fprintf(stderr, "podprof healthcheck: %s:%u is not healthy\n", host, port);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/*
 * Give up every capability podprof does not use, before any thread starts
 * (capabilities are per thread; new threads inherit the caller's). Kept:
 * BPF and PERFMON (probes, perf events), SYS_PTRACE (/proc/PID/{mem,root,maps},
 * thread snapshots), CHECKPOINT_RESTORE (/proc/PID/map_files), SYSLOG
 * (kernel addresses in /proc/kallsyms), DAC_READ_SEARCH (application files
 * that are not world-readable); SYS_ADMIN only where BPF or PERFMON is
 * missing (kernels before 5.8, where it stands in for both); SETUID and
 * SETGID with symbolizer.isolate (the helper's own uid, isolate.h).
 */
static void drop_capabilities(bool helper_ids)
{
	uint64_t eff = 0, kept = 0;
	char before[256], after[256];

	if (pp_caps__effective(&eff) < 0)
		return;
	uint64_t keep = (1ull << PP_CAP_BPF) | (1ull << PP_CAP_PERFMON) |
			(1ull << PP_CAP_SYS_PTRACE) | (1ull << PP_CAP_CHECKPOINT_RESTORE) |
			(1ull << PP_CAP_SYSLOG) | (1ull << PP_CAP_DAC_READ_SEARCH);
	if (!(eff & (1ull << PP_CAP_BPF)) || !(eff & (1ull << PP_CAP_PERFMON)))
		keep |= 1ull << PP_CAP_SYS_ADMIN;
	/* the symbolizer helpers podprof starts later take their own uid with these
	 * (an exec under no_new_privs gets no capability podprof does not hold) */
	if (helper_ids)
		keep |= (1ull << PP_CAP_SETUID) | (1ull << PP_CAP_SETGID);
	if (!(eff & ~keep))
		return;
	int r = pp_caps__restrict(keep, &kept);
	pp_caps__format(eff, before, sizeof(before));
	pp_caps__format(kept, after, sizeof(after));
	if (r < 0)
		pp_warn("could not drop unused capabilities: %s; running with %s", strerror(-r),
			before);
	else
		pp_info("capabilities: kept %s; dropped the rest", after);
}

/*
 * Every target costs file descriptors (perf events, BPF links, the files
 * its symbols and CFI come from): the soft RLIMIT_NOFILE (often 1024) is
 * raised to the hard limit before anything is opened.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rlim_t was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		pp_warn("cannot raise RLIMIT_NOFILE from %lu: %s", (unsigned long)was,
			strerror(errno));
	else
		pp_dbg("RLIMIT_NOFILE raised from %lu to %lu", (unsigned long)was,
		       (unsigned long)rl.rlim_max);
}

/* glibc malloc for a long-running sidecar (bench/BENCHMARKS.md sections 7
 * and 11): one arena for every thread. The agent gives freed pages back
 * with malloc_trim every 10 s, but malloc_trim releases the free top of the
 * main arena only: a thread arena keeps its top (after a burst, such as
 * loading the kernel symbols, 8 MiB) until a free() at its top passes the
 * trim threshold, which glibc raises to twice the largest mmapped block
 * freed so far (11 MiB in the bench). Small blocks come from each thread's
 * tcache without the arena lock. The mmap threshold stays dynamic: fixed
 * at 128 KiB, buffers allocated and freed every second (/proc reads) were
 * mmapped and unmapped each time, and the TLB shootdowns of munmap made
 * podprof's CPU per sample 30% higher. Before any thread exists. */
static void malloc_setup(void)
{
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, 1);
}

int main(int argc, char **argv)
{
	struct cli c = { 0 };
	struct pp_config *cfg = NULL;
	char *token = NULL;

	/* The isolated symbolizer: podprof executed again by itself (hidden mode). */
	if (argc > 1 && !strcmp(argv[1], PP_SYMISO_HELPER_ARG))
		return pp_symiso__helper_main(argc, argv);
	malloc_setup();
	if (argc > 1 && !strcmp(argv[1], "check-config"))
		return cmd_check_config(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "healthcheck"))
		return cmd_healthcheck(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "record"))
		return cmd_record(argc - 1, argv + 1);
	install_signals(); /* before any thread exists */
	libbpf_set_print(libbpf_log);
	if (parse_cli(argc, argv, &c, false) < 0)
		return EXIT_USAGE;
	if (build_config(&c, &cfg) < 0)
		return EXIT_USAGE;
	pp_log_setup(cfg->log.level, cfg->log.format);
	if (read_token(cfg, &token) < 0) {
		pp_config__free(cfg);
		return EXIT_USAGE;
	}
	pp_info("podprof %s starting (config %s)", PODPROF_VERSION, cfg->source);
	raise_nofile();
	if (cfg->heap.agent_dir) {
		/* before the server answers: a startup probe on podprof gates
		 * the application's start on the file being there */
		char path[PATH_MAX];
		int r = pp_inject__install_preload(cfg->heap.agent_dir, path, sizeof(path));

		if (r < 0)
			pp_err("heap.agent_dir: cannot write the agent into %s: %s (applications "
			       "started now run without it)",
			       cfg->heap.agent_dir, strerror(-r));
		else
			pp_info("heap: agent for LD_PRELOAD written to %s", path);
	}
	struct pp_agent_opts ao = { .serve = true, .token = token };
	struct pp_agent *a = pp_agent__new(cfg, &ao);
	bool helper_ids = cfg->symbolizer.isolate;
	pp_config__free(cfg);
	if (!a) {
		pp_err("cannot start: %s", strerror(errno));
		free(token);
		return EXIT_FAIL;
	}
	drop_capabilities(helper_ids);
	if (pp_agent__start(a) < 0) {
		pp_agent__free(a);
		free(token);
		return EXIT_FAIL;
	}
	while (!g_stop)
		wait_stop(1000);
	pp_info("signal received, stopping");
	arm_shutdown_watchdog();
	/* no thread of a target is stopped from now on; those stopped are
	 * given back first (lib/tracee/tracee.h rule 6) */
	stop_tracing();
	pp_agent__free(a);
	free(token);
	return EXIT_OK;
}
