/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent ties the collectors together: it discovers target processes
 * from the config's selectors, attaches the CPU sampler, heap tracer and
 * off-CPU tracer to them through one interface (collector.h, which also
 * gives the lock order), unwinds what they report into the profile store,
 * and serves the store over HTTP (one server per listen address). What the
 * servers show beside profiles (/metrics, thread dump text, comments) is
 * formatted by http/present.c from counters the agent copies.
 *
 * Threads: discovery, one poll thread per collector, the HTTP workers.
 * Every pp_agent__* function is thread-safe.
 */
#ifndef PODPROF_AGENT_H
#define PODPROF_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "http/http.h"
#include "util/util.h"

struct pp_agent;

struct pp_agent_opts {
	bool serve; /* start the HTTP servers of the config */
	const char *token; /* bearer token (already read from token_file) or NULL */
};

/* Takes a copy of what it needs from cfg (cfg may be freed after). NULL with errno. */
struct pp_agent *pp_agent__new(const struct pp_config *cfg, const struct pp_agent_opts *opts);
/* Starts discovery, collectors and servers. -errno if nothing could start. */
int pp_agent__start(struct pp_agent *a);
/* Asks every thread to stop and joins them. Idempotent. */
void pp_agent__stop(struct pp_agent *a);
void pp_agent__free(struct pp_agent *a);

/* The source the servers use, for group (-1 = all targets). Borrowed until free. */
const struct pp_http_source *pp_agent__source(struct pp_agent *a, int group);
/* Ports actually bound (first = main server); returns how many. */
size_t pp_agent__ports(struct pp_agent *a, unsigned *ports, size_t max);

struct pp_agent_summary {
	uint64_t targets, threads_seen, samples, unwinds, unwinds_complete;
};
void pp_agent__summary(struct pp_agent *a, struct pp_agent_summary *ret);

/* Runs one discovery pass now (tests, record). */
void pp_agent__discover_now(struct pp_agent *a);

#endif
