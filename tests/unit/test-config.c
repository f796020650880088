/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/config: defaults, good files, every error class with
 * its exact message, --set, PODPROF_* variables, dump round trips, caps and
 * the user documentation staying in sync with the key table.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <cmocka.h>

#include "config/config.h"

#ifndef CONFIG_TEST_DATA
#define CONFIG_TEST_DATA "tests/unit/data/config"
#endif
#ifndef CONFIG_DOCS
#define CONFIG_DOCS "docs/config-reference.md"
#endif

static struct pp_config *parse_ok(const char *yaml)
{
	struct pp_config *c = NULL;
	char err[512];
	int r = pp_config__parse(yaml, strlen(yaml), "x.yaml", &c, err, sizeof(err));
	if (r != 0)
		fail_msg("parse failed (%d): %s\n--- input ---\n%s", r, err, yaml);
	return c;
}

static struct pp_config *load_ok(const char *file)
{
	struct pp_config *c = NULL;
	char path[512], err[512];
	snprintf(path, sizeof(path), "%s/%s", CONFIG_TEST_DATA, file);
	int r = pp_config__load_file(path, &c, err, sizeof(err));
	if (r != 0)
		fail_msg("load %s failed (%d): %s", path, r, err);
	return c;
}

static char *dump(const struct pp_config *c)
{
	struct pp_buf b = { .max = 1 << 20 };
	assert_int_equal(pp_config__dump(c, &b), 0);
	return pp_buf_steal(&b, NULL);
}

static void assert_str_or_null(const char *a, const char *b)
{
	if (!a || !b)
		assert_ptr_equal(a, b);
	else
		assert_string_equal(a, b);
}

/* Field-by-field equality (source and line excepted). */
static void assert_config_equal(const struct pp_config *a, const struct pp_config *b)
{
	assert_str_or_null(a->listen, b->listen);
	assert_int_equal(a->n_targets, b->n_targets);
	for (size_t i = 0; i < a->n_targets; i++) {
		const struct pp_selector *x = &a->targets[i], *y = &b->targets[i];
		assert_str_or_null(x->name, y->name);
		assert_int_equal(x->pid, y->pid);
		assert_str_or_null(x->comm, y->comm);
		assert_str_or_null(x->exe, y->exe);
		assert_str_or_null(x->cmdline, y->cmdline);
		assert_str_or_null(x->listen, y->listen);
	}
	assert_int_equal(a->discovery.interval_ms, b->discovery.interval_ms);
	assert_int_equal(a->discovery.include_self, b->discovery.include_self);
	assert_int_equal(a->cpu.enabled, b->cpu.enabled);
	assert_int_equal(a->cpu.frequency_hz, b->cpu.frequency_hz);
	assert_int_equal(a->cpu.max_seconds, b->cpu.max_seconds);
	assert_int_equal(a->cpu.stack_bytes, b->cpu.stack_bytes);
	assert_int_equal(a->cpu.always_on, b->cpu.always_on);
	assert_int_equal(a->cpu.unwind, b->cpu.unwind);
	assert_int_equal(a->cpu.kernel_stacks, b->cpu.kernel_stacks);
	assert_int_equal(a->heap.enabled, b->heap.enabled);
	assert_int_equal(a->heap.sample_rate, b->heap.sample_rate);
	assert_int_equal(a->heap.max_live, b->heap.max_live);
	assert_true(a->heap.budget_percent == b->heap.budget_percent);
	assert_int_equal(a->heap.over_budget, b->heap.over_budget);
	assert_int_equal(a->offcpu.enabled, b->offcpu.enabled);
	assert_int_equal(a->offcpu.min_block_us, b->offcpu.min_block_us);
	assert_int_equal(a->threads.enabled, b->threads.enabled);
	assert_int_equal(a->threads.max_pause_ms, b->threads.max_pause_ms);
	assert_int_equal(a->http.max_connections, b->http.max_connections);
	assert_int_equal(a->http.max_request_bytes, b->http.max_request_bytes);
	assert_int_equal(a->http.timeout_seconds, b->http.timeout_seconds);
	assert_str_or_null(a->http.token_file, b->http.token_file);
	assert_str_or_null(a->http.allowed_hosts, b->http.allowed_hosts);
	assert_int_equal(a->limits.max_targets, b->limits.max_targets);
	assert_int_equal(a->limits.max_stacks, b->limits.max_stacks);
	assert_int_equal(a->limits.symbol_cache_bytes, b->limits.symbol_cache_bytes);
	assert_int_equal(a->limits.max_maps_entries, b->limits.max_maps_entries);
	assert_int_equal(a->limits.max_maps_bytes, b->limits.max_maps_bytes);
	assert_int_equal(a->limits.max_target_fds, b->limits.max_target_fds);
	assert_int_equal(a->log.level, b->log.level);
	assert_int_equal(a->log.format, b->log.format);
	assert_int_equal(a->log.memstats_interval_seconds, b->log.memstats_interval_seconds);
}

/* ------------------------------------------------------------ defaults -- */

static void check_defaults(const struct pp_config *c)
{
	assert_string_equal(c->listen, "127.0.0.1:6060");
	assert_int_equal(c->n_targets, 0);
	assert_null(c->targets);
	assert_int_equal(c->discovery.interval_ms, 1000);
	assert_false(c->discovery.include_self);
	assert_true(c->cpu.enabled);
	assert_int_equal(c->cpu.frequency_hz, 99);
	assert_int_equal(c->cpu.max_seconds, 300);
	assert_int_equal(c->cpu.stack_bytes, 32768);
	assert_false(c->cpu.always_on);
	assert_int_equal(c->cpu.unwind, PP_UNWIND_DWARF);
	assert_true(c->cpu.kernel_stacks);
	assert_true(c->heap.enabled);
	assert_int_equal(c->heap.sample_rate, 524288);
	assert_int_equal(c->heap.max_live, 65536);
	assert_true(c->heap.budget_percent == 5.0);
	assert_int_equal(c->heap.over_budget, PP_HEAP_POLICY_AUTO);
	assert_true(c->offcpu.enabled);
	assert_int_equal(c->offcpu.min_block_us, 0);
	assert_true(c->threads.enabled);
	assert_int_equal(c->threads.max_pause_ms, 50);
	assert_int_equal(c->threads.min_interval_ms, 1000);
	assert_int_equal(c->threads.dump_timeout_ms, 2000);
	assert_int_equal(c->http.max_connections, 1024);
	assert_int_equal(c->http.max_connections_per_client, 64);
	assert_int_equal(c->http.max_request_bytes, 65536);
	assert_int_equal(c->http.timeout_seconds, 30);
	assert_int_equal(c->http.header_timeout_seconds, 10);
	assert_int_equal(c->http.workers, 4);
	assert_null(c->http.token_file);
	assert_int_equal(c->limits.max_targets, 256);
	assert_int_equal(c->limits.max_stacks, 200000);
	assert_int_equal(c->limits.symbol_cache_bytes, 64ull << 20);
	assert_int_equal(c->limits.max_maps_entries, 65536);
	assert_int_equal(c->limits.max_maps_bytes, 16u << 20);
	assert_int_equal(c->limits.max_target_fds, 256);
	assert_int_equal(c->log.level, PP_LOG_INFO);
	assert_int_equal(c->log.format, PP_LOG_TEXT);
	assert_int_equal(c->log.memstats_interval_seconds, 60);
}

static void t_defaults(void **state)
{
	struct pp_config *c = pp_config__new_default();
	assert_non_null(c);
	assert_string_equal(c->source, "<default>");
	check_defaults(c);
	pp_config__free(c);
	pp_config__free(NULL);
}

/* ---------------------------------------------------------- good files -- */

static void check_full(const struct pp_config *c)
{
	assert_string_equal(c->listen, "0.0.0.0:7070");
	assert_int_equal(c->n_targets, 3);
	assert_string_equal(c->targets[0].name, "app");
	assert_int_equal(c->targets[0].pid, 1234);
	assert_string_equal(c->targets[0].comm, "redis-*");
	assert_string_equal(c->targets[0].exe, "/usr/bin/redis-*");
	assert_string_equal(c->targets[0].cmdline, "--port [0-9]+");
	assert_string_equal(c->targets[0].listen, ":6061");
	assert_int_equal(c->targets[0].line, 4);
	assert_string_equal(c->targets[1].name, "target-1");
	assert_int_equal(c->targets[1].pid, 0);
	assert_string_equal(c->targets[1].comm, "worker");
	assert_null(c->targets[1].exe);
	assert_null(c->targets[1].cmdline);
	assert_null(c->targets[1].listen);
	assert_string_equal(c->targets[2].name, "quoted \"name\"");
	assert_string_equal(c->targets[2].listen, "[::1]:6062");
	assert_int_equal(c->discovery.interval_ms, 2000);
	assert_true(c->discovery.include_self);
	assert_false(c->cpu.enabled);
	assert_int_equal(c->cpu.frequency_hz, 199);
	assert_int_equal(c->cpu.max_seconds, 600);
	assert_int_equal(c->cpu.stack_bytes, 16384);
	assert_true(c->cpu.always_on);
	assert_int_equal(c->cpu.unwind, PP_UNWIND_FRAME_POINTER);
	assert_false(c->cpu.kernel_stacks);
	assert_false(c->heap.enabled);
	assert_int_equal(c->heap.sample_rate, 1 << 20);
	assert_int_equal(c->heap.max_live, 1024);
	assert_true(c->heap.budget_percent == 2.5);
	assert_int_equal(c->heap.over_budget, PP_HEAP_POLICY_PAUSE);
	assert_false(c->offcpu.enabled);
	assert_int_equal(c->offcpu.min_block_us, 250);
	assert_false(c->threads.enabled);
	assert_int_equal(c->threads.max_pause_ms, 20);
	assert_int_equal(c->http.max_connections, 8);
	assert_int_equal(c->http.max_request_bytes, 8192);
	assert_int_equal(c->http.timeout_seconds, 10);
	assert_string_equal(c->http.token_file, "/var/run/secrets/podprof/token");
	assert_int_equal(c->limits.max_targets, 16);
	assert_int_equal(c->limits.max_stacks, 5000);
	assert_int_equal(c->limits.symbol_cache_bytes, 128ull << 20);
	assert_int_equal(c->log.level, PP_LOG_DEBUG);
	assert_int_equal(c->log.format, PP_LOG_JSON);
	assert_int_equal(c->log.memstats_interval_seconds, 0);
}

static void check_partial(const struct pp_config *c)
{
	struct pp_config *d = pp_config__new_default();
	assert_non_null(d);
	assert_string_equal(c->listen, ":6060");
	assert_int_equal(c->cpu.frequency_hz, 49);
	assert_int_equal(c->heap.over_budget, PP_HEAP_POLICY_PAUSE);
	/* everything else is the default */
	d->cpu.frequency_hz = 49;
	d->heap.over_budget = PP_HEAP_POLICY_PAUSE;
	free(d->listen);
	d->listen = strdup(":6060");
	assert_config_equal(c, d);
	pp_config__free(d);
}

static const struct {
	const char *file;
	void (*check)(const struct pp_config *c);
} good_files[] = {
	{ "full.yaml", check_full },
	{ "partial.yaml", check_partial },
	{ "empty.yaml", check_defaults },
	{ "comments.yaml", check_defaults },
};

static void t_good_files(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(good_files); i++) {
		struct pp_config *c = load_ok(good_files[i].file);
		assert_non_null(strstr(c->source, good_files[i].file));
		good_files[i].check(c);
		pp_config__free(c);
	}
}

/* Small documents that are valid, each with one thing to check. */
static const struct {
	const char *yaml;
	const char *dump_line; /* a line the dump must contain */
} good_docs[] = {
	{ "", "listen: \"127.0.0.1:6060\"\n" },
	{ "targets:\n  - container: \"istio-*\"\n", "    container: \"istio-*\"\n" },
	{ "targets:\n  - container_id: \"containerd://3f1c9e0b\"\n", "    container_id: "
								     "\"3f1c9e0b\"\n" },
	{ "offcpu:\n  always_on: true\n  linger_seconds: 60\n", "  linger_seconds: 60\n" },
	{ "", "  linger_seconds: 300\n" },
	{ "---\n", "  frequency_hz: 99\n" },
	{ "---\n...\n", "  frequency_hz: 99\n" },
	{ "cpu:\n", "  frequency_hz: 99\n" },
	{ "cpu: ~\n", "  frequency_hz: 99\n" },
	{ "targets:\n", "targets: []\n" },
	{ "targets: []\n", "targets: []\n" },
	{ "listen: \"0\"\n", "listen: \"0\"\n" },
	{ "listen: 0\n", "listen: \"0\"\n" },
	{ "listen: \"\"\n", "listen: \"\"\n" },
	{ "listen: \"[::]:6060\"\n", "listen: \"[::]:6060\"\n" },
	{ "listen: localhost:6060\n", "listen: \"localhost:6060\"\n" },
	{ "cpu: {enabled: NO}\n", "  enabled: false\n" },
	{ "cpu: {enabled: Off}\n", "  enabled: false\n" },
	{ "cpu: {frequency_hz: \"250\"}\n", "  frequency_hz: 250\n" },
	{ "cpu: {stack_bytes: 16KiB}\n", "  stack_bytes: 16KiB\n" },
	{ "cpu: {stack_bytes: 65528}\n", "  stack_bytes: 65528\n" },
	{ "cpu: {unwind: fp}\n", "  unwind: frame-pointer\n" },
	{ "heap: {sample_rate: 1}\n", "  sample_rate: 1\n" },
	{ "heap: {sample_rate: 512 KiB}\n", "  sample_rate: 512KiB\n" },
	{ "heap: {sample_rate: 2Mi}\n", "  sample_rate: 2MiB\n" },
	{ "heap: {sample_rate: 1G}\n", "  sample_rate: 1GiB\n" },
	{ "heap: {budget_percent: 0.1}\n", "  budget_percent: 0.1\n" },
	{ "heap: {budget_percent: 1e2}\n", "  budget_percent: 100\n" },
	{ "log: {level: WARNING}\n", "  level: warn\n" },
	{ "limits: {symbol_cache_bytes: 1073741824}\n", "  symbol_cache_bytes: 1GiB\n" },
	{ "http: {token_file: \"\"}\n", "  token_file: \"\"\n" },
	{ "http: {token_file: ~}\n", "  token_file: \"\"\n" },
	{ "http: {allowed_hosts: [podprof.example, \"*.svc.cluster.local\", \"[fd00::1]\"]}\n",
	  "  allowed_hosts: \"podprof.example,*.svc.cluster.local,[fd00::1]\"\n" },
	{ "http: {allowed_hosts: \"a.example, 10.0.0.1:6060\"}\n", "  allowed_hosts: \"a.example, "
								   "10.0.0.1:6060\"\n" },
	{ "http: {allowed_hosts: []}\n", "  allowed_hosts: \"\"\n" },
	{ "targets: [{}]\n", "  - name: \"target-0\"\n" },
	{ "targets: [{pid: 1, comm: ~}]\n", "    pid: 1\n" },
	{ "targets: [{comm: \"a-very-long-pro*\"}]\n", "    comm: \"a-very-long-pro*\"\n" },
	{ "targets: [{exe: \"*/redis-server\"}]\n", "    exe: \"*/redis-server\"\n" },
	{ "targets: [{cmdline: \"^java .*-jar\"}]\n", "    cmdline: \"^java .*-jar\"\n" },
	{ "%YAML 1.1\n---\ncpu: {max_seconds: 1}\n", "  max_seconds: 1\n" },
	{ "\xef\xbb\xbf"
	  "cpu: {max_seconds: 2}\n",
	  "  max_seconds: 2\n" }, /* BOM */
	{ "cpu: &anchor {max_seconds: 3}\n", "  max_seconds: 3\n" }, /* anchor, no alias */
};

static void t_good_docs(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(good_docs); i++) {
		struct pp_config *c = parse_ok(good_docs[i].yaml);
		char *d = dump(c);
		if (!strstr(d, good_docs[i].dump_line))
			fail_msg("case %zu: %s\nwant line: %s\ngot:\n%s", i, good_docs[i].yaml,
				 good_docs[i].dump_line, d);
		free(d);
		pp_config__free(c);
	}
}

/* -------------------------------------------------------------- errors -- */

static const struct {
	const char *yaml;
	const char *err;
} bad_docs[] = {
	/* ranges */
	{ "cpu:\n  frequency_hz: 0\n", "x.yaml:2: cpu.frequency_hz: 0 is out of range (1..10000)" },
	{ "cpu: {frequency_hz: 10001}\n", "x.yaml:1: cpu.frequency_hz: 10001 is out of range "
					  "(1..10000)" },
	{ "cpu: {frequency_hz: -5}\n", "x.yaml:1: cpu.frequency_hz: -5 is out of range "
				       "(1..10000)" },
	{ "cpu: {frequency_hz: 99999999999999999999999}\n", "x.yaml:1: cpu.frequency_hz: "
							    "99999999999999999999999 is out of "
							    "range (1..10000)" },
	{ "discovery: {interval_ms: 99}\n", "x.yaml:1: discovery.interval_ms: 99 is out of range "
					    "(100..60000)" },
	{ "cpu: {max_seconds: 3601}\n", "x.yaml:1: cpu.max_seconds: 3601 is out of range "
					"(1..3600)" },
	{ "cpu: {stack_bytes: 256}\n", "x.yaml:1: cpu.stack_bytes: 256 is out of range "
				       "(512..65528)" },
	{ "cpu: {stack_bytes: 1001}\n", "x.yaml:1: cpu.stack_bytes: 1001 is not a multiple of 8 "
					"(512..65528)" },
	{ "cpu: {stack_bytes: 64MiB}\n", "x.yaml:1: cpu.stack_bytes: 64MiB is out of range "
					 "(512..65528)" },
	{ "heap: {sample_rate: 0}\n", "x.yaml:1: heap.sample_rate: 0 is out of range (1..1GiB)" },
	{ "heap: {sample_rate: 2GiB}\n", "x.yaml:1: heap.sample_rate: 2GiB is out of range "
					 "(1..1GiB)" },
	{ "heap: {sample_rate: 99999999999999TiB}\n", "x.yaml:1: heap.sample_rate: "
						      "99999999999999TiB is out of range "
						      "(1..1GiB)" },
	{ "heap: {max_live: 15}\n", "x.yaml:1: heap.max_live: 15 is out of range (16..16777216)" },
	{ "heap: {budget_percent: 0.05}\n", "x.yaml:1: heap.budget_percent: 0.05 is out of range "
					    "(0.1..100)" },
	{ "heap: {budget_percent: 101}\n", "x.yaml:1: heap.budget_percent: 101 is out of range "
					   "(0.1..100)" },
	{ "offcpu: {min_block_us: 60000001}\n", "x.yaml:1: offcpu.min_block_us: 60000001 is out of "
						"range (0..60000000)" },
	{ "threads: {max_pause_ms: 0}\n", "x.yaml:1: threads.max_pause_ms: 0 is out of range "
					  "(1..10000)" },
	{ "http: {max_connections: 0}\n", "x.yaml:1: http.max_connections: 0 is out of range "
					  "(1..10000)" },
	{ "http: {max_request_bytes: 100}\n", "x.yaml:1: http.max_request_bytes: 100 is out of "
					      "range (1KiB..16MiB)" },
	{ "http: {timeout_seconds: 0}\n", "x.yaml:1: http.timeout_seconds: 0 is out of range "
					  "(1..3600)" },
	{ "limits: {max_targets: 0}\n", "x.yaml:1: limits.max_targets: 0 is out of range "
					"(1..65536)" },
	{ "limits: {max_stacks: 10}\n", "x.yaml:1: limits.max_stacks: 10 is out of range "
					"(1024..10000000)" },
	{ "limits: {symbol_cache_bytes: 1KiB}\n", "x.yaml:1: limits.symbol_cache_bytes: 1KiB is "
						  "out of range (1MiB..64GiB)" },
	{ "limits: {max_maps_entries: 100}\n", "x.yaml:1: limits.max_maps_entries: 100 is out of "
					       "range (256..1000000)" },
	{ "limits:\n  max_maps_entries: 1000001\n", "x.yaml:2: limits.max_maps_entries: 1000001 "
						    "is out of range (256..1000000)" },
	{ "limits: {max_maps_bytes: 1KiB}\n", "x.yaml:1: limits.max_maps_bytes: 1KiB is out of "
					      "range (64KiB..256MiB)" },
	{ "limits: {max_maps_bytes: 257MiB}\n", "x.yaml:1: limits.max_maps_bytes: 257MiB is out "
						"of range (64KiB..256MiB)" },
	{ "limits:\n\n  max_target_fds: 3\n", "x.yaml:3: limits.max_target_fds: 3 is out of range "
					      "(4..65536)" },
	{ "limits: {max_target_fds: many}\n", "x.yaml:1: limits.max_target_fds: expected a number "
					      "(4..65536), got \"many\"" },
	{ "log: {memstats_interval_seconds: 86401}\n", "x.yaml:1: log.memstats_interval_seconds: "
						       "86401 is out of range (0..86400)" },
	{ "targets: [{pid: 0}]\n", "x.yaml:1: targets[0].pid: 0 is out of range (1..4194304)" },
	{ "targets: [{pid: 4194305}]\n", "x.yaml:1: targets[0].pid: 4194305 is out of range "
					 "(1..4194304)" },
	/* wrong types */
	{ "cpu: {frequency_hz: fast}\n", "x.yaml:1: cpu.frequency_hz: expected a number "
					 "(1..10000), got \"fast\"" },
	{ "cpu: {frequency_hz: 99.5}\n", "x.yaml:1: cpu.frequency_hz: expected a number "
					 "(1..10000), got \"99.5\"" },
	{ "cpu: {frequency_hz: 0x10}\n", "x.yaml:1: cpu.frequency_hz: expected a number "
					 "(1..10000), got \"0x10\"" },
	{ "cpu: {frequency_hz: }\n", "x.yaml:1: cpu.frequency_hz: expected a number (1..10000), "
				     "got nothing" },
	{ "cpu: {frequency_hz: [1]}\n", "x.yaml:1: cpu.frequency_hz: expected a number (1..10000), "
					"got a list" },
	{ "cpu: {frequency_hz: {a: 1}}\n", "x.yaml:1: cpu.frequency_hz: expected a number "
					   "(1..10000), got a mapping" },
	{ "heap: {sample_rate: 5XB}\n", "x.yaml:1: heap.sample_rate: expected a number (1..1GiB) "
					"or a size like 512KiB, got \"5XB\"" },
	{ "heap: {budget_percent: nan}\n", "x.yaml:1: heap.budget_percent: expected a number "
					   "(0.1..100), got \"nan\"" },
	{ "heap: {budget_percent: 5%}\n", "x.yaml:1: heap.budget_percent: expected a number "
					  "(0.1..100), got \"5%\"" },
	{ "cpu: {enabled: 1}\n", "x.yaml:1: cpu.enabled: expected true or false, got \"1\"" },
	{ "cpu: {enabled: maybe}\n", "x.yaml:1: cpu.enabled: expected true or false, got "
				     "\"maybe\"" },
	{ "cpu: []\n", "x.yaml:1: cpu: expected a mapping (enabled, frequency_hz, max_seconds, "
		       "stack_bytes, "
		       "always_on, unwind, kernel_stacks), got a list" },
	{ "log: debug\n", "x.yaml:1: log: expected a mapping (level, format, "
			  "memstats_interval_seconds), got "
			  "\"debug\"" },
	{ "cpu: false\n", "x.yaml:1: cpu: expected a mapping, got \"false\" (to turn it off write "
			  "\"cpu: "
			  "{enabled: false}\")" },
	{ "targets: {}\n", "x.yaml:1: targets: expected a list, got a mapping" },
	{ "targets: app\n", "x.yaml:1: targets: expected a list, got \"app\"" },
	{ "targets: [1234]\n", "x.yaml:1: targets[0]: expected a mapping (name, pid, comm, exe, "
			       "cmdline, container, container_id, listen), got "
			       "\"1234\"" },
	{ "targets:\n  - comm: a\n  - [x]\n", "x.yaml:3: targets[1]: expected a mapping (name, "
					      "pid, comm, exe, cmdline, container, "
					      "container_id, listen), got a list" },
	{ "- a\n- b\n", "x.yaml:1: top level: expected a mapping of keys (listen, targets, cpu, "
			"...), got a list" },
	{ "hello\n", "x.yaml:1: top level: expected a mapping of keys (listen, targets, cpu, ...), "
		     "got "
		     "\"hello\"" },
	{ "http: {token_file: [a]}\n", "x.yaml:1: http.token_file: expected a string, got a list" },
	{ "targets: [{name: {a: 1}}]\n", "x.yaml:1: targets[0].name: expected a string, got a "
					 "mapping" },
	{ "? [a]\n: 1\n", "x.yaml:1: top level: keys must be plain words, got a list" },
	{ "cpu:\n  ? {a: 1}\n  : 1\n", "x.yaml:2: cpu: keys must be plain words, got a mapping" },
	/* enums */
	{ "heap: {over_budget: stop}\n", "x.yaml:1: heap.over_budget: \"stop\" is not one of: "
					 "warn, pause, auto" },
	{ "cpu: {unwind: lbr}\n", "x.yaml:1: cpu.unwind: \"lbr\" is not one of: dwarf, "
				  "frame-pointer" },
	{ "log: {level: trace}\n", "x.yaml:1: log.level: \"trace\" is not one of: error, warn, "
				   "info, debug" },
	{ "log: {format: xml}\n", "x.yaml:1: log.format: \"xml\" is not one of: text, json" },
	{ "log: {format: [json]}\n", "x.yaml:1: log.format: expected one of: text, json; got a "
				     "list" },
	/* unknown keys */
	{ "cpu:\n  frequncy_hz: 5\n", "x.yaml:2: cpu.frequncy_hz: unknown key (did you mean "
				      "frequency_hz?)" },
	{ "cpu: {frequency: 5}\n", "x.yaml:1: cpu.frequency: unknown key (did you mean "
				   "frequency_hz?)" },
	{ "cpu: {frequencyHz: 5}\n", "x.yaml:1: cpu.frequencyHz: unknown key (did you mean "
				     "frequency_hz?)" },
	{ "cpu: {stack-bytes: 5}\n", "x.yaml:1: cpu.stack-bytes: unknown key (did you mean "
				     "stack_bytes?)" },
	{ "lisen: \":6060\"\n", "x.yaml:1: lisen: unknown key (did you mean listen?)" },
	{ "target:\n  - pid: 1\n", "x.yaml:1: target: unknown key (did you mean targets?)" },
	{ "foo: 1\n", "x.yaml:1: foo: unknown key (valid keys: listen, targets, discovery, cpu, "
		      "heap, offcpu, "
		      "threads, http, limits, symbolizer, log)" },
	{ "heap: {zzz: 1}\n", "x.yaml:1: heap.zzz: unknown key (valid keys: enabled, sample_rate, "
			      "max_live, ring_mib, "
			      "budget_percent, over_budget, mode, agent_dir)" },
	{ "targets:\n  - name: a\n    comn: redis\n", "x.yaml:3: targets[0].comn: unknown key (did "
						      "you mean comm?)" },
	{ "cpu.frequency_hz: 5\n", "x.yaml:1: cpu.frequency_hz: unknown key (write it nested: "
				   "\"cpu:\" and \"frequency_hz:\" "
				   "indented under it)" },
	/* duplicates */
	{ "cpu:\n  enabled: true\n  enabled: false\n", "x.yaml:3: cpu.enabled: duplicate key "
						       "(first set on line 2)" },
	{ "listen: \":1\"\nlisten: \":2\"\n", "x.yaml:2: listen: duplicate key (first set on line "
					      "1)" },
	{ "cpu: {}\nheap: {}\ncpu: {}\n", "x.yaml:3: cpu: duplicate key (first set on line 1)" },
	{ "targets:\n  - pid: 1\n    pid: 2\n", "x.yaml:3: targets[0].pid: duplicate key (first "
						"set on line 2)" },
	{ "targets:\n  - name: a\n  - name: a\n", "x.yaml:3: targets[1]: name \"a\" is already "
						  "used by targets[0]" },
	{ "targets:\n  - name: target-1\n  - {}\n", "x.yaml:3: targets[1]: name \"target-1\" is "
						    "already used by targets[0]" },
	/* listen addresses */
	{ "listen: 6060\n", "x.yaml:1: listen: \"6060\" has no host part; write \":6060\" for "
			    "every interface or "
			    "\"127.0.0.1:6060\" for local only" },
	{ "targets:\n  - cmdline: \"p++\"\n", "x.yaml:2: targets[0].cmdline: \"p++\" is refused: "
					      "stacked repetitions (like \"a++\" or "
					      "\"a{2}{2}\") make it too costly to compile" },
	{ "targets:\n  - cmdline: \"((p)+)+\"\n", "x.yaml:2: targets[0].cmdline: \"((p)+)+\" is "
						  "refused: a repeated group that itself "
						  "contains a repetition (like \"(a+)+\") is too "
						  "costly to compile" },
	{ "listen: localhost\n", "x.yaml:1: listen: \"localhost\" is missing \":PORT\" (expected "
				 "host:port or :port)" },
	{ "listen: \":65536\"\n", "x.yaml:1: listen: \":65536\" has port 65536, out of range "
				  "(0..65535)" },
	{ "listen: \"host:http\"\n", "x.yaml:1: listen: \"host:http\" has port \"http\", not a "
				     "number (0..65535)" },
	{ "listen: \"host:\"\n", "x.yaml:1: listen: \"host:\" has port \"\", not a number "
				 "(0..65535)" },
	{ "listen: \"::1:6060\"\n", "x.yaml:1: listen: \"::1:6060\" needs brackets around an IPv6 "
				    "address, as in "
				    "\"[::1]:6060\"" },
	{ "listen: \"[::1:6060\"\n", "x.yaml:1: listen: \"[::1:6060\" is missing \"]\" after the "
				     "IPv6 address" },
	{ "listen: \"[::1]6060\"\n", "x.yaml:1: listen: \"[::1]6060\" needs \":PORT\" after "
				     "\"]\"" },
	{ "listen: \"[nope]:6060\"\n", "x.yaml:1: listen: \"[nope]:6060\" has an invalid IPv6 "
				       "address" },
	{ "listen: \"[]:6060\"\n", "x.yaml:1: listen: \"[]:6060\" has no IPv6 address between [ "
				   "and ]" },
	{ "listen: \"a b:1\"\n", "x.yaml:1: listen: \"a b:1\" has a host name with characters "
				 "other than letters, digits, "
				 "'-', '.' and '_'" },
	{ "listen:\n", "x.yaml:1: listen: expected an address like \"127.0.0.1:6060\" or "
		       "\":6060\", got nothing" },
	{ "targets: [{listen: \"0\"}]\n", "x.yaml:1: targets[0].listen: \"0\" is not allowed here; "
					  "give host:port or :port, or leave "
					  "listen out to use the main server" },
	{ "targets: [{listen: 6061}]\n", "x.yaml:1: targets[0].listen: \"6061\" has no host part; "
					 "write \":6061\" for every "
					 "interface or \"127.0.0.1:6061\" for local only" },
	/* selectors */
	{ "targets:\n  - container: App_1\n", "x.yaml:2: targets[0].container: \"App_1\" can never "
					      "match: container names have only a-z, 0-9 "
					      "and '-' (wildcards allowed)" },
	{ "targets:\n  - container_id: abc\n", "x.yaml:2: targets[0].container_id: \"abc\": give "
					       "4..64 hex digits of the id" },
	{ "targets:\n  - container_id: ABCDEF\n", "x.yaml:2: targets[0].container_id: \"ABCDEF\" "
						  "is not a container id (lowercase hex digits)" },
	{ "targets:\n  - cmdline: \"--port [0-9+\"\n", "x.yaml:2: targets[0].cmdline: \"--port "
						       "[0-9+\" is not a valid extended regular "
						       "expression: Unmatched [, [^, [:, [., or "
						       "[=" },
	{ "targets: [{cmdline: \"a{1\"}]\n", "x.yaml:1: targets[0].cmdline: \"a{1\" is not a valid "
					     "extended regular expression: "
					     "Unmatched \\{" },
	{ "targets: [{comm: a-very-long-process-name}]\n", "x.yaml:1: targets[0].comm: "
							   "\"a-very-long-process-name\" can never "
							   "match: the kernel cuts "
							   "comm to 15 characters (write "
							   "\"a-very-long-pro*\" or match exe "
							   "instead)" },
	{ "targets: [{comm: \"\"}]\n", "x.yaml:1: targets[0].comm: the pattern is empty (leave the "
				       "key out instead)" },
	{ "targets: [{exe: redis-server}]\n", "x.yaml:1: targets[0].exe: \"redis-server\" can "
					      "never match: exe is an absolute path "
					      "(write \"*/redis-server\" or "
					      "\"/usr/bin/redis-server\")" },
	{ "targets: [{name: \"\"}]\n", "x.yaml:1: targets[0].name: must be 1..128 characters "
				       "long" },
	{ "targets: [{name: \"a\\tb\"}]\n", "x.yaml:1: targets[0].name: \"a\\x09b\" contains a "
					    "control character" },
	/* YAML syntax and safety */
	{ "cpu: {\n", "x.yaml:1: syntax error: did not find expected node content (while parsing "
		      "a flow node that started on line 1)" },
	{ "cpu:\n  frequency_hz: 1\n   x: 2\n", "x.yaml:3: syntax error: mapping values are not "
						"allowed in this context" },
	{ "cpu:\n\tfrequency_hz: 1\n", "x.yaml:2: syntax error: found character that cannot start "
				       "any token (tabs can't indent "
				       "YAML; use spaces)" },
	{ "listen: \"abc\n", "x.yaml:1: syntax error: found unexpected end of stream (while "
			     "scanning a quoted scalar that started on line 1)" },
	{ "cpu:\n  max_seconds: 9\xff\n", "x.yaml:2: syntax error: invalid leading UTF-8 octet" },
	{ "a: &x 1\nb: *x\n", "x.yaml:2: b: YAML aliases (*x) are not supported; write the value "
			      "out" },
	{ "cpu: &c {enabled: true}\nheap: *c\n", "x.yaml:2: heap: YAML aliases (*c) are not "
						 "supported; write the value out" },
	{ "cpu: {}\n---\nheap: {}\n", "x.yaml:2: syntax error: only one YAML document is allowed" },
	{ "http: {token_file: \"a\\0b\"}\n", "x.yaml:1: http.token_file: value contains a NUL "
					     "character" },
	{ "http: {allowed_hosts: [a, {b: 1}]}\n", "x.yaml:1: http.allowed_hosts[1]: expected a "
						  "host name" },
	{ "http: {allowed_hosts: \"a,,b\"}\n", "x.yaml:1: http.allowed_hosts: empty host name in "
					       "\"a,,b\"" },
	{ "http: {allowed_hosts: \"evil/x\"}\n", "x.yaml:1: http.allowed_hosts: \"evil/x\" is not "
						 "a host name, an address, \"*.domain\" or \"*\"" },
	{ "http: {allowed_hosts: {a: 1}}\n", "x.yaml:1: http.allowed_hosts: expected a list of "
					     "host names, got a mapping" },
	{ "a: [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]\n", "x.yaml:1: "
						      "a[0][0][0][0][0][0][0][0][0][0][0][0][0][0]["
						      "0]: nested deeper than 16 levels" },
};

static void t_errors(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad_docs); i++) {
		struct pp_config *c = (void *)0x1;
		char err[512];
		int r = pp_config__parse(bad_docs[i].yaml, strlen(bad_docs[i].yaml), "x.yaml", &c,
					 err, sizeof(err));
		if (r != -EINVAL || strcmp(err, bad_docs[i].err) != 0)
			fail_msg("case %zu (r=%d)\n--- input ---\n%s--- want ---\n%s\n--- got "
				 "---\n%s",
				 i, r, bad_docs[i].yaml, bad_docs[i].err, err);
		assert_ptr_equal(c, (void *)0x1); /* ret untouched on error */
		assert_null(strchr(err, '\n'));
	}
}

/*
 * Each target with a listen address is a server of its own: 16 parse, a
 * 17th is refused with the file, the line and the key of its listen.
 */
static void t_listener_limit(void **state)
{
	struct pp_buf y = { 0 };
	struct pp_config *c = NULL;
	char err[512];

	assert_int_equal(pp_buf_puts(&y, "targets:\n"), 0);
	for (int i = 0; i < PP_CONFIG_MAX_LISTENERS; i++)
		assert_int_equal(pp_buf_printf(&y, "  - comm: w%d\n    listen: \"127.0.0.1:%d\"\n",
					       i, 7000 + i),
				 0);
	assert_int_equal(pp_config__parse(y.data, y.len, "x.yaml", &c, err, sizeof(err)), 0);
	pp_config__free(c);
	c = NULL;
	/* a target without listen does not count */
	assert_int_equal(pp_buf_puts(&y, "  - comm: plain\n"), 0);
	assert_int_equal(pp_buf_puts(&y, "  - comm: one-too-many\n    listen: \":7999\"\n"), 0);
	assert_int_equal(pp_config__parse(y.data, y.len, "x.yaml", &c, err, sizeof(err)), -EINVAL);
	assert_null(c);
	assert_string_equal(err, "x.yaml:36: targets[17].listen: more than 16 targets have their "
				 "own listen address (each is a server of its own; at most 16): "
				 "leave listen out of the others to serve them on the main server");
	pp_buf_free(&y);
}

/* Messages get truncated, never overflow, with tiny buffers. */
static void t_error_buffer_sizes(void **state)
{
	const char *y = "cpu: {frequency_hz: 0}\n";
	for (size_t len = 0; len < 64; len++) {
		char err[64];
		struct pp_config *c = NULL;
		memset(err, 'Z', sizeof(err));
		assert_int_equal(pp_config__parse(y, strlen(y), "x.yaml", &c, err, len), -EINVAL);
		if (len)
			assert_true(strlen(err) < len);
		else
			assert_int_equal(err[0], 'Z');
	}
}

static void t_file_errors(void **state)
{
	struct pp_config *c = NULL;
	char err[512], path[512], tmpl[] = "/tmp/test-config-XXXXXX";
	int fd;

	snprintf(path, sizeof(path), "%s/bad-frequency.yaml", CONFIG_TEST_DATA);
	assert_int_equal(pp_config__load_file(path, &c, err, sizeof(err)), -EINVAL);
	char want[600];
	snprintf(want, sizeof(want), "%s:7: cpu.frequency_hz: 0 is out of range (1..10000)", path);
	assert_string_equal(err, want);

	assert_int_equal(pp_config__load_file("/nonexistent/podprof.yaml", &c, err, sizeof(err)),
			 -ENOENT);
	assert_string_equal(err, "/nonexistent/podprof.yaml: cannot read: No such file or "
				 "directory");

	/* the 1 MiB cap, from a file and from a buffer */
	fd = mkostemp(tmpl, O_CLOEXEC);
	assert_true(fd >= 0);
	size_t big = (1u << 20) + 1;
	char *buf = malloc(big);
	assert_non_null(buf);
	memset(buf, '#', big);
	buf[big - 1] = '\n';
	assert_int_equal(write(fd, buf, big), (ssize_t)big);
	close(fd);
	assert_int_equal(pp_config__load_file(tmpl, &c, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:1: file too large: the limit is 1 MiB (1048576 bytes)",
		 tmpl);
	assert_string_equal(err, want);
	unlink(tmpl);
	assert_int_equal(pp_config__parse(buf, big, "x.yaml", &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "x.yaml:1: file too large: 1048577 bytes; the limit is 1 MiB "
				 "(1048576 bytes)");
	/* exactly 1 MiB of comments is fine */
	assert_int_equal(pp_config__parse(buf, big - 1, "x.yaml", &c, err, sizeof(err)), 0);
	check_defaults(c);
	pp_config__free(c);
	free(buf);
}

static char *repeat(const char *head, const char *item, size_t n, const char *tail)
{
	struct pp_buf b = { 0 };
	assert_int_equal(pp_buf_puts(&b, head), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pp_buf_puts(&b, item), 0);
	assert_int_equal(pp_buf_puts(&b, tail), 0);
	return pp_buf_steal(&b, NULL);
}

static void t_caps(void **state)
{
	struct pp_config *c = NULL;
	char err[512];
	char *y;

	/* more than 1024 targets */
	y = repeat("targets:\n", "  - {}\n", 1025, "");
	assert_int_equal(pp_config__parse(y, strlen(y), "x.yaml", &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "x.yaml:1026: targets[1024]: more than 1024 targets");
	free(y);

	/* exactly 1024 is fine, names are unique */
	y = repeat("targets:\n", "  - {}\n", 1024, "");
	assert_int_equal(pp_config__parse(y, strlen(y), "x.yaml", &c, err, sizeof(err)), 0);
	assert_int_equal(c->n_targets, 1024);
	assert_string_equal(c->targets[1023].name, "target-1023");
	assert_int_equal(pp_config__add_pid_target(c, 42), -E2BIG);
	pp_config__free(c);
	free(y);

	/* node cap: 70000 list items under an unknown key */
	y = repeat("junk: [", "1,", 70000, "1]\n");
	assert_int_equal(pp_config__parse(y, strlen(y), "x.yaml", &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "x.yaml:1: syntax error: more than 65536 values in one file");
	free(y);

	/* value length cap */
	y = repeat("http: {token_file: \"", "a", 4097, "\"}\n");
	assert_int_equal(pp_config__parse(y, strlen(y), "x.yaml", &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "x.yaml:1: http.token_file: value is longer than 4096 bytes");
	free(y);

	/* deep nesting of block mappings */
	y = repeat("", "{a: ", 40, "1");
	assert_int_equal(pp_config__parse(y, strlen(y), "x.yaml", &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "x.yaml:1: a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a: nested deeper than 16 "
				 "levels");
	free(y);

	/* billion laughs: rejected at the first alias, no expansion */
	const char *laughs = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
			     "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
			     "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n";
	assert_int_equal(pp_config__parse(laughs, strlen(laughs), "x.yaml", &c, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "x.yaml:2: b[0]: YAML aliases (*a) are not supported; write the "
				 "value out");
}

/* ----------------------------------------------------------------- set -- */

static const struct {
	const char *key, *value;
	const char *want; /* dump line on success, full message on error */
	bool ok;
} set_cases[] = {
	{ "cpu.frequency_hz", "999", "  frequency_hz: 999\n", true },
	{ "cpu.frequency_hz", "0", "--set: cpu.frequency_hz: 0 is out of range (1..10000)", false },
	{ "cpu.frequency_hz", "", "--set: cpu.frequency_hz: expected a number (1..10000), got \"\"",
	  false },
	{ "cpu.frequncy_hz", "1",
	  "--set: cpu.frequncy_hz: unknown key (did you mean cpu.frequency_hz?)", false },
	{ "frequency_hz", "1", "--set: frequency_hz: unknown key (did you mean cpu.frequency_hz?)",
	  false },
	{ "nonsense", "1", "--set: nonsense: unknown key", false },
	{ "cpu", "1",
	  "--set: cpu: is a section; set one of its keys (enabled, frequency_hz, max_seconds, "
	  "stack_bytes, always_on, unwind, kernel_stacks)",
	  false },
	{ "targets", "x",
	  "--set: targets: targets can only be set in the config file, with --pid or with "
	  "PODPROF_PID",
	  false },
	{ "listen", "0", "listen: \"0\"\n", true },
	{ "listen", "", "listen: \"\"\n", true },
	{ "listen", ":7070", "listen: \":7070\"\n", true },
	{ "listen", "7070",
	  "--set: listen: \"7070\" has no host part; write \":7070\" for every interface or "
	  "\"127.0.0.1:7070\" for local only",
	  false },
	{ "cpu.always_on", "on", "  always_on: true\n", true },
	{ "cpu.always_on", "2", "--set: cpu.always_on: expected true or false, got \"2\"", false },
	{ "cpu.unwind", "frame-pointer", "  unwind: frame-pointer\n", true },
	{ "heap.sample_rate", "4KiB", "  sample_rate: 4KiB\n", true },
	{ "heap.sample_rate", "4097", "  sample_rate: 4097\n", true },
	{ "heap.budget_percent", "12.5", "  budget_percent: 12.5\n", true },
	{ "heap.over_budget", "stop",
	  "--set: heap.over_budget: \"stop\" is not one of: warn, pause, auto", false },
	{ "http.token_file", "/t", "  token_file: \"/t\"\n", true },
	{ "http.token_file", "", "  token_file: \"\"\n", true },
	{ "http.allowed_hosts", "a.example,*.b.example",
	  "  allowed_hosts: \"a.example,*.b.example\"\n", true },
	{ "http.allowed_hosts", "a.*",
	  "--set: http.allowed_hosts: \"a.*\" is not a host name, an "
	  "address, \"*.domain\" or \"*\"",
	  false },
	{ "log.level", "debug", "  level: debug\n", true },
	{ "log.format", "json", "  format: json\n", true },
	{ "limits.symbol_cache_bytes", "1GiB", "  symbol_cache_bytes: 1GiB\n", true },
	{ "limits.max_maps_entries", "1000", "  max_maps_entries: 1000\n", true },
	{ "limits.max_maps_bytes", "1MiB", "  max_maps_bytes: 1MiB\n", true },
	{ "limits.max_maps_bytes", "4KiB",
	  "--set: limits.max_maps_bytes: 4KiB is out of range (64KiB..256MiB)", false },
	{ "limits.max_target_fds", "64", "  max_target_fds: 64\n", true },
	{ "limits.max_target_fds", "0",
	  "--set: limits.max_target_fds: 0 is out of range (4..65536)", false },
};

static void t_set(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(set_cases); i++) {
		struct pp_config *c = pp_config__new_default();
		char err[512] = "untouched";
		char *before = dump(c), *after;
		assert_non_null(c);
		int r = pp_config__set(c, set_cases[i].key, set_cases[i].value, "--set", err,
				       sizeof(err));
		after = dump(c);
		if (set_cases[i].ok) {
			if (r != 0 || !strstr(after, set_cases[i].want))
				fail_msg("case %zu: r=%d err=%s\n%s", i, r, err, after);
		} else {
			if (r != -EINVAL || strcmp(err, set_cases[i].want) != 0)
				fail_msg("case %zu: r=%d\nwant: %s\ngot:  %s", i, r,
					 set_cases[i].want, err);
			assert_string_equal(before, after); /* failed set changes nothing */
		}
		free(before);
		free(after);
		pp_config__free(c);
	}
}

/* ----------------------------------------------------------------- env -- */

static const struct {
	const char *env[5];
	const char *want; /* dump line on success, message on error */
	bool ok;
	size_t n_targets;
} env_cases[] = {
	{ { "PODPROF_LISTEN=:7070", NULL }, "listen: \":7070\"\n", true, 0 },
	{ { "PODPROF_LISTEN=0", NULL }, "listen: \"0\"\n", true, 0 },
	{ { "PODPROF_LISTEN=", NULL }, "listen: \"127.0.0.1:6060\"\n", true, 0 }, /* empty = unset */
	{ { "PODPROF_CPU_FREQUENCY_HZ=250", NULL }, "  frequency_hz: 250\n", true, 0 },
	{ { "PODPROF_LOG_LEVEL=debug", NULL }, "  level: debug\n", true, 0 },
	{ { "PODPROF_HTTP_TOKEN_FILE=/secret/token", NULL },
	  "  token_file: \"/secret/token\"\n",
	  true,
	  0 },
	{ { "PODPROF_HEAP_SAMPLE_RATE=1MiB", NULL }, "  sample_rate: 1MiB\n", true, 0 },
	{ { "PODPROF_DISCOVERY_INCLUDE_SELF=yes", NULL }, "  include_self: true\n", true, 0 },
	{ { "PODPROF_LOG_MEMSTATS_INTERVAL_SECONDS=5", NULL },
	  "  memstats_interval_seconds: 5\n",
	  true,
	  0 },
	{ { "PODPROF_CONFIG=/etc/podprof.yaml", "HOME=/root", "PODPROFX=1", NULL },
	  "  frequency_hz: 99\n",
	  true,
	  0 },
	{ { "PODPROF_PID=12", NULL }, "    pid: 12\n", true, 1 },
	{ { "PODPROF_PID= 12, 34 ,,56", NULL }, "    pid: 56\n", true, 3 },
	{ { "PODPROF_PID=12,12", NULL }, "    pid: 12\n", true, 1 },
	{ { "PODPROF_PID=12,abc", NULL },
	  "PODPROF_PID: \"abc\" is not a pid (expected comma-separated numbers 1..4194304)",
	  false,
	  0 },
	{ { "PODPROF_PID=0", NULL },
	  "PODPROF_PID: \"0\" is not a pid (expected comma-separated numbers 1..4194304)",
	  false,
	  0 },
	{ { "PODPROF_CPU_FREQUENCY_HZ=0", NULL },
	  "PODPROF_CPU_FREQUENCY_HZ: cpu.frequency_hz: 0 is out of range (1..10000)",
	  false,
	  0 },
	{ { "PODPROF_LOG_LEVEL=loud", NULL },
	  "PODPROF_LOG_LEVEL: log.level: \"loud\" is not one of: error, warn, info, debug",
	  false,
	  0 },
	{ { "PODPROF_CPU_FREQUENCY=5", NULL },
	  "PODPROF_CPU_FREQUENCY: unknown variable (did you mean PODPROF_CPU_FREQUENCY_HZ?)",
	  false,
	  0 },
	{ { "PODPROF_LISTN=:1", NULL },
	  "PODPROF_LISTN: unknown variable (did you mean PODPROF_LISTEN?)",
	  false,
	  0 },
	{ { "PODPROF_WHATEVER_ELSE_ENTIRELY=1", NULL },
	  "PODPROF_WHATEVER_ELSE_ENTIRELY: unknown variable (see the configuration reference for "
	  "PODPROF_* names)",
	  false,
	  0 },
	{ { "PODPROF_TARGETS=x", NULL },
	  "PODPROF_TARGETS: targets can't be set from the environment (use PODPROF_PID or the "
	  "config "
	  "file)",
	  false,
	  0 },
};

static void t_env(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(env_cases); i++) {
		struct pp_config *c = pp_config__new_default();
		char err[512] = "";
		assert_non_null(c);
		int r = pp_config__apply_env(c, (char *const *)env_cases[i].env, err, sizeof(err));
		if (env_cases[i].ok) {
			char *d = dump(c);
			if (r != 0 || !strstr(d, env_cases[i].want))
				fail_msg("case %zu: r=%d err=%s\n%s", i, r, err, d);
			assert_int_equal(c->n_targets, env_cases[i].n_targets);
			free(d);
		} else if (r != -EINVAL || strcmp(err, env_cases[i].want) != 0) {
			fail_msg("case %zu: r=%d\nwant: %s\ngot:  %s", i, r, env_cases[i].want,
				 err);
		}
		pp_config__free(c);
	}
	/* NULL envp is a no-op */
	struct pp_config *c = pp_config__new_default();
	char err[16];
	assert_int_equal(pp_config__apply_env(c, NULL, err, sizeof(err)), 0);
	pp_config__free(c);
}

/* Env overrides the file: file values survive unless a variable names them. */
static void t_env_over_file(void **state)
{
	struct pp_config *c = load_ok("full.yaml");
	char *const env[] = { "PODPROF_CPU_FREQUENCY_HZ=11", "PODPROF_PID=77", NULL };
	char err[256];
	assert_int_equal(pp_config__apply_env(c, env, err, sizeof(err)), 0);
	assert_int_equal(c->cpu.frequency_hz, 11);
	assert_int_equal(c->cpu.max_seconds, 600);
	assert_int_equal(c->n_targets, 4);
	assert_int_equal(c->targets[3].pid, 77);
	assert_string_equal(c->targets[3].name, "pid-77");
	assert_string_equal(c->targets[0].name, "app");
	pp_config__free(c);
}

static void t_pid_target(void **state)
{
	struct pp_config *c = pp_config__new_default();
	assert_int_equal(pp_config__add_pid_target(c, 0), -EINVAL);
	assert_int_equal(pp_config__add_pid_target(c, -3), -EINVAL);
	assert_int_equal(pp_config__add_pid_target(c, 10), 0);
	assert_int_equal(pp_config__add_pid_target(c, 11), 0);
	assert_int_equal(pp_config__add_pid_target(c, 10), 0); /* deduplicated */
	assert_int_equal(c->n_targets, 2);
	assert_int_equal(c->targets[1].pid, 11);
	assert_string_equal(c->targets[1].name, "pid-11");
	assert_null(c->targets[1].comm);
	pp_config__free(c);
}

/* ---------------------------------------------------------- round trip -- */

static void roundtrip(const struct pp_config *c)
{
	char *d1 = dump(c), *d2;
	struct pp_config *back = parse_ok(d1);
	assert_config_equal(c, back);
	d2 = dump(back);
	/* the first line names the source, the rest must be identical */
	assert_string_equal(strchr(d1, '\n'), strchr(d2, '\n'));
	free(d1);
	free(d2);
	pp_config__free(back);
}

static void t_roundtrip(void **state)
{
	struct pp_config *c = pp_config__new_default();
	roundtrip(c);
	pp_config__free(c);

	for (size_t i = 0; i < ARRAY_SIZE(good_files); i++) {
		c = load_ok(good_files[i].file);
		roundtrip(c);
		pp_config__free(c);
	}

	/* awkward values: escapes, odd doubles, sizes that are not multiples */
	c = parse_ok("listen: \"[fe80::1%eth0]:80\"\n"
		     "targets:\n"
		     "  - name: \"sp ace \\\\ \\\"q\\\" \xc3\xa9\"\n"
		     "    cmdline: \"^a\\\\.b [\\\"x]\"\n"
		     "    comm: \"#not-a-comment\"\n"
		     "  - {pid: 4194304, exe: \"*: odd\"}\n"
		     "  - {}\n"
		     "heap: {budget_percent: 0.30000000000000004, sample_rate: 1025}\n"
		     "cpu: {stack_bytes: 520}\n"
		     "http: {token_file: \"'single' and: colon\\ttab\\x01\"}\n");
	assert_string_equal(c->http.token_file, "'single' and: colon\ttab\x01");
	assert_string_equal(c->targets[0].name, "sp ace \\ \"q\" \xc3\xa9");
	assert_true(c->heap.budget_percent == 0.30000000000000004);
	roundtrip(c);
	assert_int_equal(pp_config__add_pid_target(c, 9), 0);
	roundtrip(c);
	pp_config__free(c);

	/*
	 * Code points YAML reads as line breaks (NEL, LS, PS), a C1 control and
	 * the byte order mark: written raw into the dump, a parser folds them
	 * into spaces (a fuzzer found NEL).
	 */
	c = parse_ok("targets:\n"
		     "  - name: \"a\\Nb\\Lc\\Pd\\u0090e\\ufefff \xc3\xa9\"\n"
		     "    comm: \"x\\N*\"\n");
	assert_string_equal(c->targets[0].name, "a\xc2\x85"
						"b\xe2\x80\xa8"
						"c\xe2\x80\xa9"
						"d\xc2\x90"
						"e\xef\xbb\xbf"
						"f \xc3\xa9");
	assert_string_equal(c->targets[0].comm, "x\xc2\x85*");
	roundtrip(c);
	pp_config__free(c);
}

/* ------------------------------------------------------------- helpers -- */

static void t_listen_helpers(void **state)
{
	static const struct {
		const char *addr;
		int r;
		const char *host;
		unsigned port;
	} cases[] = {
		{ "127.0.0.1:6060", 0, "127.0.0.1", 6060 },
		{ ":6061", 0, "", 6061 },
		{ "[::1]:6062", 0, "::1", 6062 },
		{ "localhost:1", 0, "localhost", 1 },
		{ "0", -EINVAL, NULL, 0 },
		{ "", -EINVAL, NULL, 0 },
		{ "6060", -EINVAL, NULL, 0 },
		{ "[::1]", -EINVAL, NULL, 0 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char host[64];
		uint16_t port = 0;
		int r = pp_config__split_listen(cases[i].addr, host, sizeof(host), &port);
		assert_int_equal(r, cases[i].r);
		if (r == 0) {
			assert_string_equal(host, cases[i].host);
			assert_int_equal(port, cases[i].port);
		}
	}
	char small[4];
	uint16_t port;
	assert_int_equal(pp_config__split_listen("localhost:1", small, sizeof(small), &port),
			 -ENAMETOOLONG);
	assert_true(pp_config__listen_disabled(NULL));
	assert_true(pp_config__listen_disabled(""));
	assert_true(pp_config__listen_disabled("0"));
	assert_false(pp_config__listen_disabled(":0"));
	assert_false(pp_config__listen_disabled("127.0.0.1:6060"));
}

/*
 * The user reference must list every key the dump writes, with its
 * environment variable, so the docs cannot fall behind the code.
 */
static void t_docs_cover_every_key(void **state)
{
	struct pp_config *c = pp_config__new_default();
	char *d = dump(c), *docs = NULL, *save = NULL;
	char section[64] = "";
	size_t len, nkeys = 0;

	assert_int_equal(pp_read_file(CONFIG_DOCS, 1 << 20, &docs, &len), 0);
	for (char *line = strtok_r(d, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char key[128], cell[160], env[160];
		if (line[0] == '#')
			continue;
		char *colon = strchr(line, ':');
		assert_non_null(colon);
		if (line[0] != ' ' && colon[1] == '\0') {
			snprintf(section, sizeof(section), "%.*s", (int)(colon - line), line);
			continue;
		}
		if (line[0] != ' ')
			section[0] = '\0';
		const char *name = line + strspn(line, " ");
		snprintf(key, sizeof(key), "%s%s%.*s", section, *section ? "." : "",
			 (int)(colon - name), name);
		snprintf(cell, sizeof(cell), "`%s`", key);
		snprintf(env, sizeof(env), "`PODPROF_");
		size_t el = strlen(env);
		for (const char *p = key; *p && el + 1 < sizeof(env); p++)
			env[el++] = *p == '.' ? '_' : (char)toupper((unsigned char)*p);
		env[el] = '\0';
		strcat(env, "`");
		if (strcmp(key, "targets") == 0)
			continue;
		if (!strstr(docs, cell))
			fail_msg("docs lack %s", cell);
		if (!strstr(docs, env))
			fail_msg("docs lack %s", env);
		nkeys++;
	}
	assert_int_equal(nkeys, 52);
	for (const char *t = "name\0pid\0comm\0exe\0cmdline\0listen\0"; *t; t += strlen(t) + 1) {
		char cell[64];
		snprintf(cell, sizeof(cell), "`targets[].%s`", t);
		if (!strstr(docs, cell))
			fail_msg("docs lack %s", cell);
	}
	assert_non_null(strstr(docs, "`PODPROF_PID`"));
	free(docs);
	free(d);
	pp_config__free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_defaults),
		cmocka_unit_test(t_good_files),
		cmocka_unit_test(t_good_docs),
		cmocka_unit_test(t_errors),
		cmocka_unit_test(t_listener_limit),
		cmocka_unit_test(t_error_buffer_sizes),
		cmocka_unit_test(t_file_errors),
		cmocka_unit_test(t_caps),
		cmocka_unit_test(t_set),
		cmocka_unit_test(t_env),
		cmocka_unit_test(t_env_over_file),
		cmocka_unit_test(t_pid_target),
		cmocka_unit_test(t_roundtrip),
		cmocka_unit_test(t_listen_helpers),
		cmocka_unit_test(t_docs_cover_every_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
