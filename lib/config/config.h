/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podprof configuration: the embedded default, the YAML file (libyaml),
 * PODPROF_* environment variables and command-line overrides.
 *
 * Every key is optional. Errors name the file, line and key and say what
 * would be valid, e.g.
 *   podprof.yaml:7: cpu.frequency_hz: 0 is out of range (1..10000)
 *
 * Ownership: a struct pp_config and everything it points to belongs to the
 * caller of pp_config__new/__load_*; free with pp_config__free (NULL ok).
 * Not thread-safe; treat a loaded config as read-only once shared.
 */
#ifndef PODPROF_CONFIG_H
#define PODPROF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/log.h"
#include "util/util.h"

/* Targets with a listen address of their own (each is one more HTTP server). */
#define PP_CONFIG_MAX_LISTENERS 16

enum pp_unwind_mode { PP_UNWIND_DWARF = 0, PP_UNWIND_FRAME_POINTER };
/* auto: pause on the uprobe path (every call traps), warn with the agent. */
enum pp_heap_policy { PP_HEAP_POLICY_WARN = 0, PP_HEAP_POLICY_PAUSE, PP_HEAP_POLICY_AUTO };
/* How allocations are seen: the agent the dynamic loader loaded at the
 * process's start (preload), an agent injected into the process (inject),
 * uprobes on the allocator (uprobe), preload then inject then uprobes
 * (auto), or not at all (off). */
enum pp_heap_mode {
	PP_HEAP_MODE_AUTO = 0,
	PP_HEAP_MODE_INJECT,
	PP_HEAP_MODE_UPROBE,
	PP_HEAP_MODE_OFF,
	PP_HEAP_MODE_PRELOAD, /* only an agent the loader loaded (LD_PRELOAD) */
};

/*
 * One entry of `targets:`. A process matches when every selector that is
 * set matches (pid, comm, exe, cmdline, container, container_id); an entry with none set matches
 * every process. A process belongs to the first entry it matches.
 */
struct pp_selector {
	char *name; /* label; default "target-<index>" */
	pid_t pid; /* 0 = unset */
	char *comm; /* fnmatch(3) pattern on /proc/PID/comm */
	char *exe; /* fnmatch(3) pattern on the executable path as the target sees it */
	char *cmdline; /* POSIX extended regex, searched in argv joined by spaces */
	char *container; /* fnmatch(3) pattern on the Kubernetes container name */
	char *container_id; /* prefix (4..64 lowercase hex digits) of the container id */
	/* own listen address for this entry's processes; NULL = main server.
	 * At most PP_CONFIG_MAX_LISTENERS entries have one (checked at parse). */
	char *listen;
	int line; /* line in the config file (0 for flags/defaults) */
};

struct pp_config {
	char *source; /* file name, or "<default>" */

	char *listen; /* "host:port", ":port", or "0"/"" = no server. Default "127.0.0.1:6060" */

	struct pp_selector *targets; /* empty = every process in the PID namespace but podprof */
	size_t n_targets;

	struct {
		unsigned interval_ms; /* /proc rescan period, default 1000 (100..60000) */
		bool include_self; /* default false */
	} discovery;

	struct {
		bool enabled; /* default true */
		unsigned frequency_hz; /* default 99 (1..10000) */
		unsigned max_seconds; /* longest /profile window, default 300 (1..3600) */
		unsigned stack_bytes; /* user stack copied per sample, default 32768 (512..65528, multiple of 8) */
		bool always_on; /* sample even with no window open, default false */
		enum pp_unwind_mode unwind; /* "dwarf" (default) or "frame-pointer" */
		bool kernel_stacks; /* default true */
	} cpu;

	struct {
		bool enabled; /* default true */
		uint64_t sample_rate; /* mean bytes between samples, default 524288; 1 = every allocation */
		unsigned max_live; /* sampled live allocations tracked, default 65536 (16..16777216) */
		unsigned ring_mib; /* BPF ring of heap events in MiB, 0..256; 0 (default): from the rate */
		double budget_percent; /* overhead budget in % of one CPU, default 5 (0.1..100) */
		enum pp_heap_policy over_budget; /* "auto" (default), "warn" or "pause" */
		enum pp_heap_mode mode; /* "auto" (default), "preload", "inject", "uprobe", "off" */
		/* where podprof writes libpodprof-agent.so at start, before it
		 * serves (a volume shared with the application); NULL: nowhere */
		char *agent_dir;
	} heap;

	struct {
		bool enabled; /* block/mutex profiles from the scheduler, default true */
		unsigned min_block_us; /* ignore shorter off-CPU spells, default 0 */
		bool always_on; /* trace even when nobody asks, default false */
		unsigned linger_seconds; /* keep tracing this long after the last request, default 300 */
	} offcpu;

	struct {
		bool enabled; /* goroutine/threadcreate thread dumps, default true */
		unsigned max_pause_ms; /* longest a thread may be stopped for a snapshot, default 50 */
		unsigned min_interval_ms; /* at most one dump of a target this often, default 1000 */
		unsigned dump_timeout_ms; /* no thread is stopped after this, default 2000 */
	} threads;

	struct {
		unsigned max_connections; /* default 1024 (1..10000) */
		unsigned max_connections_per_client; /* per address, default 64 (1..10000) */
		unsigned max_request_bytes; /* headers + body, default 65536 (1024..16777216) */
		unsigned timeout_seconds; /* idle connection timeout, default 30 (1..3600) */
		unsigned header_timeout_seconds; /* headers complete within, default 10 (1..3600) */
		unsigned workers; /* threads rendering profiles, default 4 (1..64) */
		unsigned max_windows; /* profile windows open at once per server, default 256 */
		unsigned max_windows_per_client; /* of those, from one address, default 32 */
		char *token_file; /* bearer token file; NULL = no auth */
		/* Host names accepted besides loopback and the machine's own, joined by ","; NULL = none */
		char *allowed_hosts;
	} http;

	struct {
		unsigned max_targets; /* processes profiled at once, default 256 */
		unsigned max_stacks; /* distinct stacks kept, default 200000 */
		uint64_t symbol_cache_bytes; /* default 64 MiB */
		uint64_t max_window_bytes; /* held by window baselines, default 64 MiB */
		/* /proc/PID/maps reads stop at either (pp_maps__set_caps) */
		unsigned max_maps_entries; /* default 65536 (256..1000000) */
		unsigned max_maps_bytes; /* default 16 MiB (64KiB..256MiB) */
		/* fds one target's unwinder keeps (pp_unwind__set_fd_budget) */
		unsigned max_target_fds; /* default 256 (4..65536) */
	} limits;

	struct {
		bool isolate; /* parse target files in a helper process, default true */
		unsigned memory_mib; /* its RLIMIT_AS, default 192 (16..65536) */
		unsigned cpu_seconds; /* its RLIMIT_CPU, default 86400; restarts at half */
		unsigned timeout_ms; /* per request, default 30000 (100..600000) */
		unsigned idle_seconds; /* helper ended after this long unused, default 30; 0 never */
		unsigned helper_uid; /* uid and gid of the helper, default 65533 */
	} symbolizer;

	struct {
		enum pp_log_level level; /* error|warn|info|debug, default info */
		enum pp_log_format format; /* text|json, default text */
		unsigned memstats_interval_seconds; /* 0 = off, default 60 */
	} log;
};

/* The embedded default (no file). NULL with errno=ENOMEM. */
struct pp_config *pp_config__new_default(void);

/*
 * Parse YAML from a buffer; `name` is used in messages. On error returns
 * -EINVAL (or -ENOMEM) and writes one line into err (no trailing newline).
 * Keys missing from the document keep their defaults.
 */
int pp_config__parse(const char *buf, size_t len, const char *name, struct pp_config **ret,
		     char *err, size_t errlen);
int pp_config__load_file(const char *path, struct pp_config **ret, char *err, size_t errlen);

/*
 * Set one key by its dotted name ("cpu.frequency_hz", "listen") from a
 * string, with the same validation and messages as the file (`origin` is
 * put where the file name would be, e.g. "--listen" or "PODPROF_LISTEN").
 */
int pp_config__set(struct pp_config *c, const char *key, const char *value, const char *origin,
		   char *err, size_t errlen);

/*
 * Apply PODPROF_* variables from envp (NULL-terminated "K=V" strings):
 * PODPROF_LISTEN, PODPROF_LOG_LEVEL, and generally PODPROF_<KEY> where KEY
 * is the dotted key upper-cased with '.' -> '_' (PODPROF_CPU_FREQUENCY_HZ).
 * PODPROF_CONFIG is not handled here (main reads it). Unknown PODPROF_*
 * names are errors. PODPROF_PID=12,34 appends pid selectors (as --pid);
 * no other variable touches targets. An empty value counts as unset.
 * On error the variables before the bad one have already been applied.
 */
int pp_config__apply_env(struct pp_config *c, char *const *envp, char *err, size_t errlen);

/*
 * Append a selector named "pid-<pid>" (for --pid); a pid that already has a
 * plain pid selector is not added twice. Returns 0, -EINVAL (pid <= 0),
 * -E2BIG (1024 targets) or -ENOMEM.
 */
int pp_config__add_pid_target(struct pp_config *c, pid_t pid);

/* The effective config as YAML that pp_config__parse accepts. */
int pp_config__dump(const struct pp_config *c, struct pp_buf *out);

void pp_config__free(struct pp_config *c);

/* True when a listen address turns its server off (NULL, "" or "0"). */
bool pp_config__listen_disabled(const char *addr);

/*
 * Split a listen address (as validated by this module) into host and port:
 * ":6060" gives host "" (every interface), "[::1]:6060" gives "::1".
 * Returns 0, -EINVAL (disabled or malformed) or -ENAMETOOLONG (hostlen).
 */
int pp_config__split_listen(const char *addr, char *host, size_t hostlen, uint16_t *ret_port);

#endif
