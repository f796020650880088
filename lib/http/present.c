/* SPDX-License-Identifier: Apache-2.0 */
#include "present.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char *strfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strfmt(const char *fmt, ...)
{
	struct pp_buf b = { 0 };
	va_list ap;
	va_start(ap, fmt);
	int r = pp_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (r < 0) {
		pp_buf_free(&b);
		return NULL;
	}
	return pp_buf_steal(&b, NULL);
}

/*
 * A Prometheus label value (names come from the targets): each byte that
 * is not part of valid UTF-8 replaced by U+FFFD (Prometheus rejects the
 * whole scrape otherwise), backslash, double quote and newline escaped.
 */
static void put_label(struct pp_buf *o, const char *v)
{
	const unsigned char *p = (const unsigned char *)v;
	size_t n = strlen(v);

	while (n) {
		size_t l = pp_utf8_len(p, n);

		if (!l) {
			pp_buf_puts(o, "\xef\xbf\xbd");
			l = 1;
		} else if (*p == '\\' || *p == '"') {
			pp_buf_printf(o, "\\%c", *p);
		} else if (*p == '\n') {
			pp_buf_puts(o, "\\n");
		} else {
			pp_buf_append(o, p, l);
		}
		p += l;
		n -= l;
	}
}

static void put_counter(struct pp_buf *o, const char *name, const char *help, uint64_t val)
{
	pp_buf_printf(o,
		      "# HELP podprof_%s %s\n# TYPE podprof_%s counter\npodprof_%s %" PRIu64 "\n",
		      name, help, name, name, val);
}

static void put_gauge(struct pp_buf *o, const char *name, const char *help, uint64_t val)
{
	pp_buf_printf(o, "# HELP podprof_%s %s\n# TYPE podprof_%s gauge\npodprof_%s %" PRIu64 "\n",
		      name, help, name, name, val);
}

#define C(name, help, val) put_counter(o, name, help, (uint64_t)(val))
#define G(name, help, val) put_gauge(o, name, help, (uint64_t)(val))

static void metrics_cpu(const struct pp_cpu_stats *cs, struct pp_buf *o)
{
	C("cpu_lost_samples_total",
	  "Target CPU samples taken but not delivered (ring buffer full, malformed).", cs->lost);
	C("cpu_stack_errors_total", "CPU samples whose user stack could not be read.",
	  cs->stack_errors);
	C("cpu_adopted_children_total", "Children of targets adopted by the CPU sampler.",
	  cs->adopted);
	C("cpu_adopt_errors_total", "Children of targets the CPU sampler could not track.",
	  cs->adopt_errors);
	C("cpu_exited_targets_total",
	  "Targets the CPU sampler stopped sampling in the kernel as their last thread "
	  "exited (so a process reusing the pid is not sampled).",
	  cs->exited);
	G("cpu_events_open", "Per-CPU perf events open.", cs->events_open);
	G("cpu_open_errors", "CPUs whose perf event could not be opened (not sampled).",
	  cs->open_errors);
	G("cpu_sampled_processes", "Processes the CPU sampler samples.", cs->targets);
}

static void metrics_heap(const struct pp_metrics *m, struct pp_buf *o)
{
	const struct pp_heap_stats *hs = &m->heap;

	C("heap_ringbuf_drops_total", "Heap events dropped: ring buffer full.", hs->ringbuf_drops);
	C("heap_live_table_full_total", "Sampled allocations not tracked: BPF live table full.",
	  hs->live_table_full);
	C("heap_stack_read_errors_total", "Heap stack copies that failed.", hs->stack_read_errors);
	C("heap_attach_errors_total", "Heap tracer attach failures.", hs->attach_errors);
	C("heap_frees_deferred_total",
	  "Frees that found the ring buffer full, delivered later from a side table.",
	  hs->frees_deferred);
	C("heap_frees_lost_total",
	  "Frees lost (ring buffer and side table full): their allocations stay live.",
	  hs->frees_lost);
	pp_buf_printf(o, "# TYPE podprof_heap_overhead_percent gauge\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		if (t->have_heap)
			pp_buf_printf(o,
				      "podprof_heap_overhead_percent{pid=\"%d\",paused=\"%d\"} "
				      "%.3f\n",
				      t->pid, t->heap.paused, t->heap.est_overhead_percent);
	}
	pp_buf_printf(o, "# HELP podprof_heap_injected 1 when a process's allocations are "
			 "seen through the injected agent, 0 on the uprobe path (reason).\n"
			 "# TYPE podprof_heap_injected gauge\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		char reason[160];
		if (!t->have_heap)
			continue;
		snprintf(reason, sizeof(reason), "%s", t->heap.mode_reason);
		for (char *q = reason; *q; q++)
			if (*q == '"' || *q == '\\' || *q == '\n')
				*q = '\'';
		pp_buf_printf(o, "podprof_heap_injected{pid=\"%d\",reason=\"%s\"} %d\n", t->pid,
			      reason, t->heap.injected);
	}
	pp_buf_printf(o, "# HELP podprof_heap_mode How a process's allocations are seen: "
			 "preload (the agent the loader loaded at its start), inject (the "
			 "agent mapped at run time) or uprobe.\n"
			 "# TYPE podprof_heap_mode gauge\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		if (t->have_heap)
			pp_buf_printf(o, "podprof_heap_mode{pid=\"%d\",mode=\"%s\"} 1\n", t->pid,
				      t->heap.preloaded	 ? "preload"
				      : t->heap.injected ? "inject"
							 : "uprobe");
	}
	pp_buf_printf(o, "# HELP podprof_heap_inject_pause_seconds Longest stop of a target "
			 "thread while injecting.\n"
			 "# TYPE podprof_heap_inject_pause_seconds gauge\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		if (t->have_heap && t->heap.injected)
			pp_buf_printf(o, "podprof_heap_inject_pause_seconds{pid=\"%d\"} %.6f\n",
				      t->pid, (double)t->heap.inject_pause_ns / 1e9);
	}
	pp_buf_printf(o, "# HELP podprof_heap_calls_total Allocator calls counted "
			 "(agent: every call through a redirected slot; uprobe "
			 "path: every probe hit).\n"
			 "# TYPE podprof_heap_calls_total counter\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		if (!t->have_heap)
			continue;
		pp_buf_printf(o,
			      "podprof_heap_calls_total{pid=\"%d\",kind=\"alloc\"} %" PRIu64
			      "\npodprof_heap_calls_total{pid=\"%d\",kind=\"free\"} %" PRIu64 "\n",
			      t->pid, t->heap.mallocs, t->pid, t->heap.frees);
	}
	pp_buf_printf(o, "# HELP podprof_heap_stack_copy_bytes Bytes of stack copied per sampled "
			 "allocation (twice the deepest stack seen, at most cpu.stack_bytes).\n"
			 "# TYPE podprof_heap_stack_copy_bytes gauge\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		if (t->have_heap)
			pp_buf_printf(o, "podprof_heap_stack_copy_bytes{pid=\"%d\"} %u\n", t->pid,
				      t->heap.stack_copy_bytes);
	}
	pp_buf_printf(o, "# HELP podprof_heap_stack_short_total Sampled allocations whose stack "
			 "copy was too short (stack truncated; the next copies are larger).\n"
			 "# TYPE podprof_heap_stack_short_total counter\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		if (t->have_heap)
			pp_buf_printf(o, "podprof_heap_stack_short_total{pid=\"%d\"} %" PRIu64 "\n",
				      t->pid, t->heap.stack_short);
	}
	pp_buf_printf(o, "# HELP podprof_heap_agent_samples_total Sampled allocations of an "
			 "injected agent, by the way they reached podprof: ring (recorded in the "
			 "process) or kernel (the uprobe on the agent's notification point).\n"
			 "# TYPE podprof_heap_agent_samples_total counter\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		const char *name = "podprof_heap_agent_samples_total";
		uint64_t kernel;

		if (!t->have_heap || !t->heap.injected)
			continue;
		kernel = t->heap.sampled - PP_MIN(t->heap.sampled, t->heap.ring_samples);
		pp_buf_printf(o, "%s{pid=\"%d\",path=\"ring\"} %" PRIu64 "\n", name, t->pid,
			      t->heap.ring_samples);
		pp_buf_printf(o, "%s{pid=\"%d\",path=\"kernel\"} %" PRIu64 "\n", name, t->pid,
			      kernel);
	}
	pp_buf_printf(o, "# HELP podprof_heap_agent_kernel_path_total Sampled allocations the "
			 "agent sent to the kernel path instead of its ring: ring_full (podprof "
			 "behind), stack_unknown (a thread's first sample, or a stack other than "
			 "its own). A preloaded agent has no kernel path: ring_full samples are "
			 "lost, stack_unknown ones copy only the page holding the stack pointer.\n"
			 "# TYPE podprof_heap_agent_kernel_path_total counter\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		const char *name = "podprof_heap_agent_kernel_path_total";

		if (!t->have_heap || !t->heap.injected)
			continue;
		pp_buf_printf(o, "%s{pid=\"%d\",reason=\"ring_full\"} %" PRIu64 "\n", name, t->pid,
			      t->heap.ring_full);
		pp_buf_printf(o, "%s{pid=\"%d\",reason=\"stack_unknown\"} %" PRIu64 "\n", name,
			      t->pid, t->heap.ring_nostack);
	}
	pp_buf_printf(o, "# HELP podprof_heap_agent_ring_skipped_total Times podprof skipped the "
			 "contents of an agent's ring it could not read as records (a record left "
			 "incomplete over 1 s, or malformed); their samples are lost.\n"
			 "# TYPE podprof_heap_agent_ring_skipped_total counter\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		if (t->have_heap && t->heap.injected)
			pp_buf_printf(o,
				      "podprof_heap_agent_ring_skipped_total{pid=\"%d\"} %" PRIu64
				      "\n",
				      t->pid, t->heap.ring_skipped);
	}
}

static void metrics_collectors(const struct pp_metrics *m, struct pp_buf *o)
{
	pp_buf_puts(o, "# HELP podprof_collector_up 1 when the collector works, 0 when the kernel "
		       "refused what it needs or the config disabled it.\n"
		       "# TYPE podprof_collector_up gauge\n");
	for (size_t c = 0; c < m->n_colls; c++)
		pp_buf_printf(o, "podprof_collector_up{collector=\"%s\"} %d\n", m->colls[c].name,
			      !strcmp(m->colls[c].state, "ok"));
	pp_buf_puts(o, "# HELP podprof_collector_state The collector's state (ok, disabled, "
		       "unavailable) and why.\n# TYPE podprof_collector_state gauge\n");
	for (size_t c = 0; c < m->n_colls; c++) {
		pp_buf_printf(o, "podprof_collector_state{collector=\"%s\",state=\"%s\",reason=\"",
			      m->colls[c].name, m->colls[c].state);
		put_label(o, m->colls[c].reason);
		pp_buf_puts(o, "\"} 1\n");
	}
}

void pp_present__metrics(const struct pp_metrics *m, struct pp_buf *o)
{
	const struct pp_agent_counters *ac = &m->agent;
	const struct pp_store_stats *ss = &m->store;

	pp_buf_printf(o,
		      "# HELP podprof_build_info Build information.\n# TYPE podprof_build_info "
		      "gauge\n"
		      "podprof_build_info{version=\"%s\"} 1\n",
		      m->version);
	pp_buf_printf(o, "# TYPE podprof_uptime_seconds gauge\npodprof_uptime_seconds %.3f\n",
		      m->uptime_seconds);
	pp_buf_printf(o,
		      "# TYPE podprof_process_cpu_seconds_total counter\n"
		      "podprof_process_cpu_seconds_total %.3f\n",
		      m->cpu_seconds);
	pp_buf_printf(o,
		      "# TYPE podprof_process_resident_memory_bytes gauge\n"
		      "podprof_process_resident_memory_bytes %" PRIu64 "\n",
		      m->rss_bytes);
	pp_buf_printf(o, "# TYPE podprof_targets gauge\npodprof_targets %zu\n", m->n_targets);
	pp_buf_printf(o,
		      "# HELP podprof_metrics_targets_unlisted Targets whose per-pid series are "
		      "left out of this page (it lists at most 256).\n"
		      "# TYPE podprof_metrics_targets_unlisted gauge\n"
		      "podprof_metrics_targets_unlisted %zu\n",
		      m->n_targets > m->n_listed ? m->n_targets - m->n_listed : 0);
	pp_buf_printf(o, "# TYPE podprof_cpu_windows_open gauge\npodprof_cpu_windows_open %d\n",
		      m->cpu_windows);
	pp_buf_printf(o, "# TYPE podprof_offcpu_tracing gauge\npodprof_offcpu_tracing %d\n",
		      m->offcpu_tracing ? 1 : 0);
	pp_buf_printf(o, "# TYPE podprof_target_resident_memory_bytes gauge\n");
	for (size_t i = 0; i < m->n_listed; i++) {
		const struct pp_present_target *t = &m->targets[i];
		if (!t->have_status)
			continue;
		pp_buf_printf(o, "podprof_target_resident_memory_bytes{pid=\"%d\",comm=\"", t->pid);
		put_label(o, t->comm);
		pp_buf_printf(o, "\"} %" PRIu64 "\n", t->status.vm_rss_kb * 1024);
	}
	C("cpu_samples_total", "CPU samples received.", ac->samples);
	C("unwinds_total", "Stacks unwound.", ac->unwinds);
	G("unwinders", "Per-process unwinders held (one per live target).", ac->unwinders);
	C("unwinds_complete_total", "Stacks unwound to the thread's root.", ac->unwinds_complete);
	C("unwind_truncated_total", "Stacks cut short (stack copy or depth).",
	  ac->unwind_truncated);
	C("unwind_errors_total", "Unwind failures.", ac->unwind_errors);
	C("attach_errors_total", "Failed attachments to targets.", ac->attach_errors);
	C("target_read_errors_total",
	  "Reads of /proc that failed for podprof's own reasons (EMFILE, ENOMEM), "
	  "not because the process exited.",
	  ac->target_read_errors);
	C("heap_events_total", "Heap events received.", ac->heap_events);
	C("offcpu_events_total", "Off-CPU events received.", ac->offcpu_events);
	C("thread_snapshots_total", "Thread snapshots taken.", ac->snapshots);
	G("thread_snapshot_pause_max_nanoseconds", "Longest time a thread was stopped.",
	  ac->snapshot_pause_ns_max);
	pp_buf_printf(o,
		      "# HELP podprof_thread_dumps_refused_total Thread dumps or threads not "
		      "taken, by reason: rate_limit (threads.min_interval_ms; the last dump was "
		      "served), deadline (threads not stopped after threads.dump_timeout_ms).\n"
		      "# TYPE podprof_thread_dumps_refused_total counter\n"
		      "podprof_thread_dumps_refused_total{reason=\"rate_limit\"} %" PRIu64 "\n"
		      "podprof_thread_dumps_refused_total{reason=\"deadline\"} %" PRIu64 "\n",
		      ac->dumps_limited, ac->dump_deadline_threads);
	G("threadcreate_entries", "Creation stacks of live threads held for threadcreate.",
	  ac->tc_entries);
	C("threadcreate_pruned_total",
	  "Creation stacks dropped because their thread or process exited.", ac->tc_pruned);
	C("threadcreate_dropped_total",
	  "Creation stacks not kept: the table of 65536 live threads was full (those "
	  "threads are missing from threadcreate).",
	  ac->tc_dropped);
	C("ptrace_stops_total", "Threads of targets stopped (thread dumps, heap injection).",
	  ac->tracee_stops);
	C("ptrace_stops_avoided_total",
	  "Threads not stopped because the stop could have been visible to the program "
	  "(a call that would fail with EINTR, vfork, a seccomp filter, an rseq critical "
	  "section, a signal arriving); thread dumps read them without a stop.",
	  ac->tracee_postponed);
	C("ptrace_calls_restarted_total",
	  "Calls of a target interrupted by a stop and restarted so that the program "
	  "does not see EINTR.",
	  ac->tracee_restarted);
	C("ptrace_signals_handed_back_total",
	  "Signals that arrived as a thread stopped, handed back with their siginfo.",
	  ac->tracee_signals);
	C("ptrace_stop_timeouts_total", "Threads that did not stop in time (left running).",
	  ac->tracee_timeouts);
	C("thread_names_unread_total",
	  "Threads whose names were not read (a process's threads past the first 4096, "
	  "per refresh): they appear unnamed.",
	  ac->thread_names_unread);
	G("store_stacks", "Distinct stacks held.", ss->stacks);
	G("store_locations", "Distinct locations held.", ss->locations);
	G("objects",
	  "Files mapped by the processes held, one object each (build id, else "
	  "dev+inode+size+mtime): their locations and names serve every process.",
	  ss->objects);
	C("object_file_opens_total",
	  "Files opened to read a build id (a file already held as an "
	  "object is not opened again).",
	  ss->file_opens);
	G("store_live_allocations", "Sampled live allocations tracked.", ss->live_entries);
	C("store_dropped_stacks_total", "Samples dropped: limits.max_stacks reached.",
	  ss->dropped_stacks);
	C("store_dropped_live_total", "Allocations not tracked: heap.max_live reached.",
	  ss->dropped_live);
	G("store_processes", "Processes alive in the store.", ss->procs);
	G("store_processes_held", "Processes held: alive, or exited and not yet released.",
	  ss->procs_held);
	C("store_dropped_procs_total", "Processes not profiled: the processes cap was reached.",
	  ss->dropped_procs);
	C("store_dropped_locations_total", "Samples dropped: the locations cap was reached.",
	  ss->dropped_locations);
	C("store_released_procs_total", "Exited processes whose data was released.",
	  ss->released_procs);
	G("window_snapshots", "Baselines of open profile windows (one per window).", ss->snapshots);
	G("window_snapshots_full",
	  "Of them, full copies of a kind's counters; the others hold only what changed "
	  "since a full one they share.",
	  ss->snapshots_full);
	G("window_snapshot_bytes",
	  "Memory held by window baselines (capped by limits.max_window_bytes).",
	  ss->snapshot_bytes);
	C("window_snapshot_shares_total",
	  "Windows whose baseline shares a full copy (holding only what changed since).",
	  ss->snapshot_shares);
	C("window_snapshots_refused_total",
	  "Windows refused (503): their baselines would exceed limits.max_window_bytes.",
	  ss->snapshots_refused);
	C("store_unknown_frees_total", "Frees of untracked addresses.", ss->unknown_frees);
	C("store_heap_samples_total", "Sampled allocations stored.", ss->heap_samples);
	C("store_cpu_samples_total", "CPU samples stored.", ss->cpu_samples);
	C("maps_truncated_total",
	  "Reads of a target's /proc/PID/maps cut at 65536 entries or 16 MiB (mappings past "
	  "the cut are left out).",
	  m->maps_truncated);
	if (m->have_cpu)
		metrics_cpu(&m->cpu, o);
	if (m->have_heap)
		metrics_heap(m, o);
	if (m->have_offcpu) {
		C("offcpu_drops_total", "Off-CPU events dropped.", m->offcpu.drops);
		C("offcpu_exited_targets_total",
		  "Targets the off-CPU collector stopped recording in the kernel as their last "
		  "thread exited.",
		  m->offcpu.exited);
	}
	G("symbol_cache_bytes", "Symbol cache size.", m->sym.cache_bytes);
	if (m->symiso) {
		C("symbolizer_restarts_total",
		  "Symbolizer helper processes started again after one died, hung or recycled.",
		  m->symiso_restarts);
		C("symbolizer_crashes_total", "Symbolizer helpers that died or were killed.",
		  m->symiso_crashes);
		C("symbolizer_timeouts_total",
		  "Symbolization requests past symbolizer.timeout_ms: the helper was killed.",
		  m->symiso_timeouts);
		C("symbolizer_files_refused_total",
		  "Files (or perf maps) that hung or killed the helper: never sent again.",
		  m->symiso_files_refused);
		C("symbolizer_requests_total", "Requests answered by the symbolizer helper.",
		  m->symiso_requests);
		C("symbolizer_requests_lost_total",
		  "Locations named file+offset: their file was refused or the helper was down.",
		  m->symiso_requests_lost);
		C("symbolizer_idle_ends_total",
		  "Symbolizer helpers ended after symbolizer.idle_seconds without a request "
		  "(their cache freed; the next new location starts one).",
		  m->symiso_idle_ends);
		C("symbolizer_opens_refused_total",
		  "Files the symbolizer helper asked for that podprof did not pass (missing, not "
		  "the mapped file, or not derivable from the request).",
		  m->symiso_opens_refused);
	}
	C("symbol_files_failed_total", "Files that could not be symbolized.", m->sym.files_failed);
	C("symbol_files_evicted_total",
	  "Files dropped from the symbol cache (least recently used first) to stay within "
	  "limits.symbol_cache_bytes; a later new location in one loads it again.",
	  m->sym.files_evicted);
	C("symbol_dwarf_refused_total",
	  "Files whose DWARF would take over half the symbol cache (sizes from the compression "
	  "headers): symbols only.",
	  m->sym.dwarf_refused);
	C("symbol_names_bounded_total",
	  "Names that hit the demangler's bounds: shown without parameters or left mangled.",
	  m->sym.names_bounded);
	C("unwind_debug_refused_total",
	  "Files given no CFI: their debug sections would take over 64 MiB in libdw.",
	  m->unwind_debug_refused);
	C("unwind_fd_budget_total",
	  "Unwinder builds that reached a target's fd budget (limits.max_target_fds): files past "
	  "it got no CFI.",
	  m->unwind_fd_budget);
	C("target_open_budget_total",
	  "Build-id reads, allocator searches and agent slot scans that reached a target's budget "
	  "of files opened in one pass (limits.max_target_fds): files past it were skipped.",
	  m->open_budget);
	C("target_file_hangs_total",
	  "Opens, stats and build-id reads of a target's file abandoned at their deadline (a file "
	  "system that does not answer): the file went unnamed and unsymbolized.",
	  m->file_hangs);
	C("target_file_skipped_total",
	  "Accesses to a target's file refused at once because its device had a stuck access, or "
	  "every opener thread was stuck.",
	  m->file_skipped);
	G("target_file_stuck_threads",
	  "Opener threads still waiting on a file system that does not answer.",
	  m->file_stuck_threads);
	G("discovery_pass_age_seconds", "Seconds since the last discovery pass ended.",
	  m->discovery_age_ms / 1000);
	C("sigbus_repaired_total",
	  "Reads of a target file truncated under podprof, answered with zeros.",
	  m->sigbus_repaired);
	C("perf_map_reloads_deferred_total",
	  "Changed JIT perf maps not read again yet: at most 3 re-reads in a row, then one a "
	  "second.",
	  m->sym.jit_reloads_deferred);
	metrics_collectors(m, o);
}

#undef C
#undef G

void pp_present__heap_comments(const struct pp_heap_comment_stats *s, char ***ret, size_t *ret_n)
{
	char **c = calloc(s->n_targets * 3 + 4, sizeof(*c));
	size_t n = 0;

	*ret = NULL;
	*ret_n = 0;
	if (!c)
		return;
	if (s->disabled_reason && s->disabled_reason[0])
		c[n++] = strfmt("heap tracing disabled: %s", s->disabled_reason);
	if (s->have_heap)
		c[n++] = strfmt("podprof heap: sample_rate=%" PRIu64 " ringbuf_drops=%" PRIu64
				" live_table_full=%" PRIu64 " store_live_dropped=%" PRIu64
				" stack_read_errors=%" PRIu64,
				s->sample_rate, s->heap.ringbuf_drops, s->heap.live_table_full,
				s->store_dropped_live, s->heap.stack_read_errors);
	for (size_t i = 0; i < s->n_targets; i++) {
		const struct pp_present_target *t = &s->targets[i];
		const struct pp_proc_status *ps = &t->status;
		const struct pp_heap_proc_stats *ht = &t->heap;
		if (!t->have_status)
			continue;
		c[n++] = strfmt("pid %d: allocator=%s mallocs=%" PRIu64 " frees=%" PRIu64
				" alloc_bytes=%" PRIu64 " overhead=%.2f%%%s RSS=%" PRIu64
				"kB VMS=%" PRIu64 "kB HWM=%" PRIu64 "kB Data=%" PRIu64
				"kB Stack=%" PRIu64 "kB Locked=%" PRIu64 "kB Swap=%" PRIu64 "kB",
				t->pid, ht->allocator[0] ? ht->allocator : "none", ht->mallocs,
				ht->frees, ht->alloc_bytes, ht->est_overhead_percent,
				ht->paused ? " (paused: over budget)" : "", ps->vm_rss_kb,
				ps->vm_size_kb, ps->vm_hwm_kb, ps->vm_data_kb, ps->vm_stk_kb,
				ps->vm_lck_kb, ps->vm_swap_kb);
		if (ht->preloaded)
			c[n++] = strfmt("pid %d: heap mode=preload (agent loaded at start%s): "
					"nothing stopped or redirected",
					t->pid, ht->agent_reused ? ", reused" : "");
		else if (ht->injected)
			c[n++] = strfmt("pid %d: heap mode=inject (agent%s): %u slots in %u "
					"modules (%s), %u left alone, pause %.2f ms",
					t->pid, ht->agent_reused ? " reused" : "", ht->inject_slots,
					ht->inject_modules, ht->coverage, ht->inject_skipped,
					(double)ht->inject_pause_ns / 1e6);
		else if (ht->allocator[0])
			c[n++] = strfmt("pid %d: heap mode=uprobe%s%s", t->pid,
					ht->mode_reason[0] ? "; not injected: " : "",
					ht->mode_reason);
	}
	*ret = c;
	*ret_n = n;
}

char *pp_present__cpu_comment(const struct pp_cpu_stats *begin, const struct pp_cpu_stats *end)
{
	uint64_t got = end->samples - begin->samples, lost = end->lost - begin->lost;
	uint64_t nostack = end->stack_errors - begin->stack_errors;
	uint64_t adopt = end->adopt_errors - begin->adopt_errors;

	return strfmt("podprof cpu: %llu samples, %llu lost (ring buffer full), "
		      "%llu taken but still queued at the end, "
		      "%llu taken before the start but delivered in the window, "
		      "%llu without user stack, %llu children not tracked, "
		      "%llu of %llu CPUs not sampled (event refused)",
		      (unsigned long long)got, (unsigned long long)lost,
		      (unsigned long long)end->queued, (unsigned long long)begin->queued,
		      (unsigned long long)nostack, (unsigned long long)adopt,
		      (unsigned long long)end->open_errors,
		      (unsigned long long)(end->open_errors + end->events_open));
}

/* ---- the thread dump ---- */

static const char *state_name(char s)
{
	switch (s) {
	case 'R':
		return "running";
	case 'S':
		return "sleeping";
	case 'D':
		return "disk sleep";
	case 'T':
		return "stopped";
	case 't':
		return "tracing stop";
	case 'Z':
		return "zombie";
	case 'X':
		return "dead";
	case 'I':
		return "idle";
	default:
		return "unknown";
	}
}

void pp_present__dump_disabled(struct pp_buf *out)
{
	pp_buf_puts(out, "thread dumps are disabled (threads.enabled: false)\n");
}

void pp_present__dump_repeat(struct pp_buf *out, uint64_t age_ns, unsigned interval_ms)
{
	pp_buf_printf(out,
		      "# the last dump, taken %.3f s ago: dumps are at most one per %u ms "
		      "(threads.min_interval_ms)\n",
		      (double)age_ns / 1e9, interval_ms);
}

void pp_present__dump_process(struct pp_buf *out, pid_t pid, const char *comm, const char *exe,
			      size_t n_threads)
{
	pp_buf_printf(out, "process %d (", pid);
	pp_buf_put_text(out, comm ? comm : "", false);
	pp_buf_puts(out, ") ");
	pp_buf_put_text(out, exe ? exe : "", false);
	pp_buf_printf(out, ": %zu threads\n\n", n_threads);
}

void pp_present__dump_thread(struct pp_buf *out, const struct pp_thread_snap *t)
{
	pp_buf_printf(out, "thread %d \"", t->tid);
	pp_buf_put_text(out, t->name, true);
	pp_buf_printf(out, "\" [%s%s", state_name(t->state), t->wchan[0] ? ", wchan " : "");
	pp_buf_put_text(out, t->wchan, false);
	pp_buf_printf(out, ", cpu %.3fs, ", (double)t->cpu_time_ns / 1e9);
	pp_buf_printf(out, "switches %" PRIu64 " voluntary / %" PRIu64 " involuntary]:\n",
		      t->voluntary_switches, t->nonvoluntary_switches);
	if (!t->captured) {
		pp_buf_puts(out, "\t(stack not captured: ");
		pp_buf_put_text(out, t->reason, false);
		pp_buf_puts(out, ")\n");
	}
}

void pp_present__dump_frame(struct pp_buf *out, uint64_t addr, const struct pp_sym_result *res,
			    const char *path)
{
	if (!res || !res->n) {
		pp_buf_printf(out, "0x%" PRIx64 "\n\t?\n", addr);
		return;
	}
	for (size_t f = 0; f < res->n; f++) {
		const struct pp_sym_frame *fr = &res->frames[f];
		pp_buf_put_text(out, fr->function ? fr->function : "?", false);
		pp_buf_puts(out, "(...)\n\t");
		if (fr->file) {
			pp_buf_put_text(out, fr->file, false);
			pp_buf_printf(out, ":%u pc=0x%" PRIx64 "\n", fr->line, addr);
		} else {
			pp_buf_put_text(out, path ? path : "?", false);
			pp_buf_printf(out, " pc=0x%" PRIx64 "\n", addr);
		}
	}
}

void pp_present__dump_thread_end(struct pp_buf *out, const struct pp_thread_snap *t)
{
	if (t->captured && !t->stopped)
		pp_buf_printf(out, "\t(%s)\n\n", t->reason);
	else
		pp_buf_printf(out, "\t(stopped for %.1f us)\n\n", (double)t->pause_ns / 1e3);
}
