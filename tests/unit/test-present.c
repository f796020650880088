/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lib/http/present.c: the /metrics text is valid Prometheus exposition
 * (every sample's family declared by a TYPE line before it, label values
 * escaped, a target's comm cannot break a line), each value lands on its
 * own metric, collectors that are absent leave their families out, and the
 * heap comments, CPU comment and thread dump text say what their structs
 * hold.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http/present.h"

/* The value of the sample line that starts with prefix (name and labels). */
static const char *sample(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, prefix, n) && l[n] == ' ')
			return l + n + 1;
	return NULL;
}

static uint64_t value(const char *text, const char *prefix)
{
	const char *v = sample(text, prefix);
	assert_non_null(v);
	return strtoull(v, NULL, 10);
}

/* Every sample line's family has a TYPE line before it, and no line is
 * empty or starts with anything but '#' or "podprof_". */
static void check_exposition(const char *text)
{
	char *copy = strdup(text);
	char *save = NULL;
	char typed[256][80];
	size_t nt = 0;

	assert_non_null(copy);
	assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(l, "# TYPE ", 7)) {
			assert_true(nt < 256);
			sscanf(l + 7, "%79s", typed[nt++]);
			continue;
		}
		if (!strncmp(l, "# HELP ", 7))
			continue;
		assert_int_equal(strncmp(l, "podprof_", 8), 0);
		char name[80];
		size_t k = strcspn(l, "{ ");
		assert_true(k < sizeof(name));
		memcpy(name, l, k);
		name[k] = '\0';
		bool found = false;
		for (size_t i = 0; i < nt && !found; i++)
			found = !strcmp(typed[i], name);
		if (!found)
			fail_msg("sample of %s before its TYPE line", name);
	}
	free(copy);
}

static void fill(struct pp_metrics *m, struct pp_present_target *tv, struct pp_http_collector *cv)
{
	memset(m, 0, sizeof(*m));
	m->version = "9.9.9";
	m->n_targets = 3;
	m->cpu_windows = 2;
	m->rss_bytes = 4096;
	m->targets = tv;
	m->n_listed = 2;
	tv[0] = (struct pp_present_target){ .pid = 11, .have_status = true, .have_heap = true };
	snprintf(tv[0].comm, sizeof(tv[0].comm), "a\"b\\c\nd");
	tv[0].status.vm_rss_kb = 10;
	tv[0].heap.injected = true;
	tv[0].heap.mallocs = 501;
	tv[0].heap.frees = 502;
	tv[1] = (struct pp_present_target){ .pid = 12, .have_status = false, .have_heap = true };
	snprintf(tv[1].heap.mode_reason, sizeof(tv[1].heap.mode_reason), "x \"y\" \\z\nw");
	m->agent.samples = 101;
	m->agent.unwinders = 102;
	m->agent.dumps_limited = 103;
	m->agent.dump_deadline_threads = 104;
	m->store.dropped_procs = 201;
	m->store.procs_held = 202;
	m->cpu.lost = 301;
	m->cpu.targets = 302;
	m->heap.frees_lost = 401;
	m->offcpu.drops = 601;
	m->sym.jit_reloads_deferred = 701;
	m->sigbus_repaired = 801;
	m->open_budget = 802;
	cv[0] = (struct pp_http_collector){ .name = "cpu", .profiles = "profile", .state = "ok" };
	cv[1] = (struct pp_http_collector){ .name = "heap", .state = "unavailable" };
	snprintf(cv[1].reason, sizeof(cv[1].reason), "no \"BPF\"\nhere");
	m->colls = cv;
	m->n_colls = 2;
}

static void test_metrics_values_and_escaping(void **state)
{
	struct pp_metrics m;
	struct pp_present_target tv[2];
	struct pp_http_collector cv[2];
	struct pp_buf o = { .max = 1 << 20 };

	(void)state;
	fill(&m, tv, cv);
	m.have_cpu = m.have_heap = m.have_offcpu = true;
	pp_present__metrics(&m, &o);
	assert_non_null(o.data); /* pp_buf keeps its text NUL-terminated */
	check_exposition(o.data);

	assert_non_null(strstr(o.data, "podprof_build_info{version=\"9.9.9\"} 1\n"));
	assert_int_equal(value(o.data, "podprof_targets"), 3);
	assert_int_equal(value(o.data, "podprof_cpu_windows_open"), 2);
	assert_int_equal(value(o.data, "podprof_process_resident_memory_bytes"), 4096);
	/* the comm is the target's: escaped, one line */
	assert_int_equal(value(o.data, "podprof_target_resident_memory_bytes{pid=\"11\","
				       "comm=\"a\\\"b\\\\c\\nd\"}"),
			 10 * 1024);
	/* a target whose status could not be read is not listed */
	assert_null(strstr(o.data, "podprof_target_resident_memory_bytes{pid=\"12\""));
	assert_int_equal(value(o.data, "podprof_cpu_samples_total"), 101);
	assert_int_equal(value(o.data, "podprof_unwinders"), 102);
	assert_int_equal(value(o.data, "podprof_thread_dumps_refused_total{reason=\"rate_limit\"}"),
			 103);
	assert_int_equal(value(o.data, "podprof_thread_dumps_refused_total{reason=\"deadline\"}"),
			 104);
	assert_int_equal(value(o.data, "podprof_store_dropped_procs_total"), 201);
	assert_int_equal(value(o.data, "podprof_store_processes_held"), 202);
	assert_int_equal(value(o.data, "podprof_cpu_lost_samples_total"), 301);
	assert_int_equal(value(o.data, "podprof_cpu_sampled_processes"), 302);
	assert_int_equal(value(o.data, "podprof_heap_frees_lost_total"), 401);
	assert_int_equal(value(o.data, "podprof_heap_calls_total{pid=\"11\",kind=\"alloc\"}"), 501);
	assert_int_equal(value(o.data, "podprof_heap_calls_total{pid=\"11\",kind=\"free\"}"), 502);
	assert_int_equal(value(o.data, "podprof_heap_injected{pid=\"11\",reason=\"\"}"), 1);
	/* the reason's quotes, backslashes and newlines become ' */
	assert_int_equal(value(o.data, "podprof_heap_injected{pid=\"12\",reason=\"x 'y' 'z'w\"}"),
			 0);
	assert_non_null(sample(o.data, "podprof_heap_inject_pause_seconds{pid=\"11\"}"));
	assert_null(sample(o.data, "podprof_heap_inject_pause_seconds{pid=\"12\"}"));
	assert_int_equal(value(o.data, "podprof_offcpu_drops_total"), 601);
	assert_int_equal(value(o.data, "podprof_perf_map_reloads_deferred_total"), 701);
	assert_int_equal(value(o.data, "podprof_sigbus_repaired_total"), 801);
	assert_int_equal(value(o.data, "podprof_target_open_budget_total"), 802);
	assert_int_equal(value(o.data, "podprof_collector_up{collector=\"cpu\"}"), 1);
	assert_int_equal(value(o.data, "podprof_collector_up{collector=\"heap\"}"), 0);
	assert_int_equal(value(o.data, "podprof_collector_state{collector=\"heap\","
				       "state=\"unavailable\",reason=\"no \\\"BPF\\\"\\nhere\"}"),
			 1);
	pp_buf_free(&o);
}

/* A collector that does not exist leaves its families out, not zeros. */
static void test_metrics_absent_collectors(void **state)
{
	struct pp_metrics m;
	struct pp_present_target tv[2];
	struct pp_http_collector cv[2];
	struct pp_buf o = { .max = 1 << 20 };

	(void)state;
	fill(&m, tv, cv);
	pp_present__metrics(&m, &o);
	assert_non_null(o.data);
	check_exposition(o.data);
	assert_null(strstr(o.data, "podprof_cpu_lost_samples_total"));
	assert_null(strstr(o.data, "podprof_heap_ringbuf_drops_total"));
	assert_null(strstr(o.data, "podprof_heap_injected"));
	assert_null(strstr(o.data, "podprof_heap_calls_total"));
	assert_null(strstr(o.data, "podprof_offcpu_drops_total"));
	/* the agent's own counters stay */
	assert_int_equal(value(o.data, "podprof_cpu_samples_total"), 101);
	assert_int_equal(value(o.data, "podprof_offcpu_tracing"), 0);
	pp_buf_free(&o);
}

static void test_heap_comments(void **state)
{
	struct pp_present_target tv[3] = { 0 };
	char **c = NULL;
	size_t n = 0;

	(void)state;
	tv[0] = (struct pp_present_target){ .pid = 21, .have_status = true };
	tv[0].status.vm_rss_kb = 77;
	tv[0].heap.injected = true;
	tv[0].heap.inject_slots = 5;
	tv[0].heap.inject_modules = 2;
	tv[0].heap.inject_skipped = 3;
	snprintf(tv[0].heap.allocator, sizeof(tv[0].heap.allocator), "libc.so.6");
	snprintf(tv[0].heap.coverage, sizeof(tv[0].heap.coverage), "app:3 libc.so.6:2");
	tv[1] = (struct pp_present_target){ .pid = 22, .have_status = true };
	snprintf(tv[1].heap.allocator, sizeof(tv[1].heap.allocator), "static:/app");
	snprintf(tv[1].heap.mode_reason, sizeof(tv[1].heap.mode_reason), "static binary");
	tv[2] = (struct pp_present_target){ .pid = 23, .have_status = false };
	struct pp_heap_comment_stats s = {
		.disabled_reason = "",
		.have_heap = true,
		.sample_rate = 4096,
		.store_dropped_live = 9,
		.targets = tv,
		.n_targets = 3,
	};
	s.heap.ringbuf_drops = 8;
	pp_present__heap_comments(&s, &c, &n);
	assert_non_null(c);
	assert_int_equal(n, 5);
	assert_string_equal(c[0], "podprof heap: sample_rate=4096 ringbuf_drops=8 "
				  "live_table_full=0 store_live_dropped=9 stack_read_errors=0");
	assert_int_equal(strncmp(c[1], "pid 21: allocator=libc.so.6 ", 28), 0);
	assert_non_null(strstr(c[1], " RSS=77kB "));
	assert_string_equal(c[2], "pid 21: heap mode=inject (agent): 5 slots in 2 modules "
				  "(app:3 libc.so.6:2), 3 left alone, pause 0.00 ms");
	assert_int_equal(strncmp(c[3], "pid 22: allocator=static:/app ", 30), 0);
	assert_string_equal(c[4], "pid 22: heap mode=uprobe; not injected: static binary");
	for (size_t i = 0; i < n; i++)
		free(c[i]);
	free(c);

	/* tracer off: the reason, and the targets with allocator none */
	struct pp_heap_comment_stats off = { .disabled_reason = "CAP_BPF missing",
					     .targets = tv + 1,
					     .n_targets = 1 };
	memset(&tv[1].heap, 0, sizeof(tv[1].heap));
	pp_present__heap_comments(&off, &c, &n);
	assert_int_equal(n, 2);
	assert_string_equal(c[0], "heap tracing disabled: CAP_BPF missing");
	assert_int_equal(strncmp(c[1], "pid 22: allocator=none ", 23), 0);
	for (size_t i = 0; i < n; i++)
		free(c[i]);
	free(c);
}

static void test_cpu_comment(void **state)
{
	struct pp_cpu_stats b = { .samples = 100, .lost = 3, .queued = 4, .stack_errors = 1 };
	struct pp_cpu_stats e = { .samples = 350,
				  .lost = 13,
				  .queued = 2,
				  .stack_errors = 6,
				  .open_errors = 1,
				  .events_open = 3 };
	(void)state;
	char *t = pp_present__cpu_comment(&b, &e);
	assert_string_equal(t, "podprof cpu: 250 samples, 10 lost (ring buffer full), 2 taken "
			       "but still queued at the end, 4 taken before the start but "
			       "delivered in the window, 5 without user stack, 0 children not "
			       "tracked, 1 of 4 CPUs not sampled (event refused)");
	free(t);
}

static void test_dump_text(void **state)
{
	struct pp_buf o = { .max = 1 << 16 };
	struct pp_thread_snap t = { .tid = 7,
				    .state = 'S',
				    .captured = true,
				    .stopped = true,
				    .cpu_time_ns = 1500000000ull,
				    .voluntary_switches = 4,
				    .nonvoluntary_switches = 5,
				    .pause_ns = 2500 };
	struct pp_sym_frame fr[2] = { { .function = "inl", .file = "a.c", .line = 3 },
				      { .function = "outer" } };
	struct pp_sym_result res = { .frames = fr, .n = 2 };

	(void)state;
	snprintf(t.name, sizeof(t.name), "worker");
	snprintf(t.wchan, sizeof(t.wchan), "futex_wait");
	pp_present__dump_process(&o, 42, "app", NULL, 1);
	pp_present__dump_thread(&o, &t);
	pp_present__dump_frame(&o, 0x1234, &res, "/bin/app");
	pp_present__dump_frame(&o, 0x99, NULL, NULL);
	pp_present__dump_thread_end(&o, &t);
	t.captured = false;
	t.state = 'Q';
	t.wchan[0] = '\0';
	snprintf(t.reason, sizeof(t.reason), "not stopped in time");
	pp_present__dump_thread(&o, &t);
	assert_non_null(o.data);
	assert_string_equal(o.data, "process 42 (app) : 1 threads\n\n"
				    "thread 7 \"worker\" [sleeping, wchan futex_wait, cpu 1.500s, "
				    "switches 4 "
				    "voluntary / 5 involuntary]:\n"
				    "inl(...)\n\ta.c:3 pc=0x1234\n"
				    "outer(...)\n\t/bin/app pc=0x1234\n"
				    "0x99\n\t?\n"
				    "\t(stopped for 2.5 us)\n\n"
				    "thread 7 \"worker\" [unknown, cpu 1.500s, switches 4 "
				    "voluntary / 5 "
				    "involuntary]:\n"
				    "\t(stack not captured: not stopped in time)\n");
	pp_buf_free(&o);
}

/* Whether text is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static bool valid_utf8(const char *text)
{
	const unsigned char *p = (const unsigned char *)text;

	while (*p) {
		unsigned c = *p, cp, n;

		if (c < 0x80) {
			p++;
			continue;
		}
		n = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
		if (c < 0xc2 || c > 0xf4)
			return false;
		cp = c & (0x3f >> n);
		for (unsigned i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		p += n + 1;
	}
	return true;
}

/* Names a target chooses: /metrics stays valid UTF-8 exposition, a dump one line per entry. */
static void test_hostile_names(void **state)
{
	static const char *const names[] = { "ab\xe2\x82", "\xff\n\"x", "\xed\xa0\x80z",
					     "\xc0\xafok", "caf\xc3\xa9" };
	struct pp_metrics m;
	struct pp_present_target tv[2];
	struct pp_http_collector cv[2];
	struct pp_buf o = { .max = 1 << 20 };
	struct pp_thread_snap t = { .tid = 7, .state = 'S', .captured = true };
	struct pp_sym_frame fr = { .function = "f\nthread 9 \"forged\" [running]:",
				   .file = "a\r.c" };
	struct pp_sym_result res = { .frames = &fr, .n = 1 };
	size_t lines = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		fill(&m, tv, cv);
		snprintf(tv[0].comm, sizeof(tv[0].comm), "%s", names[i]);
		pp_present__metrics(&m, &o);
		assert_non_null(o.data);
		check_exposition(o.data);
		assert_true(valid_utf8(o.data));
		pp_buf_reset(&o);
	}
	fill(&m, tv, cv);
	snprintf(tv[0].comm, sizeof(tv[0].comm), "caf\xc3\xa9\xe2\x82");
	pp_present__metrics(&m, &o);
	assert_non_null(strstr(o.data, "comm=\"caf\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\"}"));
	pp_buf_reset(&o);

	snprintf(t.name, sizeof(t.name), "a\nthread 9 \"\xff");
	pp_present__dump_process(&o, 42, "p\nprocess 1", "/x\n", 1);
	pp_present__dump_thread(&o, &t);
	pp_present__dump_frame(&o, 0x1234, &res, NULL);
	assert_true(valid_utf8(o.data));
	for (const char *c = o.data; *c; c++)
		lines += *c == '\n';
	/* process, blank, thread, function, file: each one line */
	assert_int_equal(lines, 5);
	assert_non_null(strstr(o.data, "process 42 (p\\nprocess 1) /x\\n: 1 threads\n"));
	assert_non_null(strstr(o.data, "thread 7 \"a\\nthread 9 \\\"\\xff\" [sleeping"));
	assert_non_null(strstr(o.data, "f\\nthread 9 \"forged\" [running]:(...)\n\ta\\r.c:0 "));
	pp_buf_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_values_and_escaping),
		cmocka_unit_test(test_metrics_absent_collectors),
		cmocka_unit_test(test_heap_comments),
		cmocka_unit_test(test_cpu_comment),
		cmocka_unit_test(test_dump_text),
		cmocka_unit_test(test_hostile_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
