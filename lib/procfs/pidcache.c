/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a discovery pass already decided about each process, so that the
 * next pass reads only the stat and exe of a process it has seen before
 * (see pidcache.h). Entries are kept sorted by pid; the ones added during a
 * pass are merged at its end.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "procfs.h"
#include "util/util.h"

struct pid_entry {
	pid_t pid;
	int verdict;
	uint64_t start_time;
	uint64_t exe_hash;
	unsigned checked; /* pass of the last full look */
	bool touched; /* looked up or stored in this pass */
	char comm[16];
};

struct pp_pid_cache {
	struct pid_entry *v, *add;
	size_t n, cap, nadd, cap_add, max;
	unsigned pass, refresh;
};

static uint64_t exe_hash(const char *exe)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a; a NULL exe hashes apart from "" */

	if (!exe)
		return 1;
	for (const unsigned char *p = (const unsigned char *)exe; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

struct pp_pid_cache *pp_pid_cache__new(size_t max, unsigned refresh_passes)
{
	struct pp_pid_cache *c;

	if (max == 0 || refresh_passes == 0)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->max = max;
	c->refresh = refresh_passes;
	return c;
}

void pp_pid_cache__free(struct pp_pid_cache *c)
{
	if (!c)
		return;
	free(c->v);
	free(c->add);
	free(c);
}

static struct pid_entry *find(struct pp_pid_cache *c, pid_t pid)
{
	size_t lo = 0, hi = c->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->v[mid].pid == pid)
			return &c->v[mid];
		if (c->v[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static bool same_process(const struct pid_entry *e, const struct pp_proc_info *ident)
{
	return e->start_time == ident->start_time && e->exe_hash == exe_hash(ident->exe) &&
	       strncmp(e->comm, ident->comm, sizeof(e->comm)) == 0;
}

bool pp_pid_cache__lookup(struct pp_pid_cache *c, const struct pp_proc_info *ident,
			  int *ret_verdict)
{
	struct pid_entry *e;

	if (!c || !ident || !ret_verdict)
		return false;
	e = find(c, ident->pid);
	if (!e)
		return false;
	e->touched = true; /* present in this pass: kept, whatever the answer */
	if (!same_process(e, ident) || c->pass - e->checked >= c->refresh)
		return false;
	*ret_verdict = e->verdict;
	return true;
}

static void fill(struct pid_entry *e, const struct pp_proc_info *ident, int verdict, unsigned pass)
{
	e->pid = ident->pid;
	e->verdict = verdict;
	e->start_time = ident->start_time;
	e->exe_hash = exe_hash(ident->exe);
	e->checked = pass;
	e->touched = true;
	memcpy(e->comm, ident->comm, sizeof(e->comm));
}

int pp_pid_cache__store(struct pp_pid_cache *c, const struct pp_proc_info *ident, int verdict)
{
	struct pid_entry *e;

	if (!c || !ident || ident->pid <= 0)
		return -EINVAL;
	e = find(c, ident->pid);
	if (e) {
		fill(e, ident, verdict, c->pass);
		return 0;
	}
	for (size_t i = 0; i < c->nadd; i++) {
		if (c->add[i].pid == ident->pid) {
			fill(&c->add[i], ident, verdict, c->pass);
			return 0;
		}
	}
	if (c->n + c->nadd >= c->max)
		return -ENOSPC; /* not remembered: read in full each pass */
	if (pp_grow(&c->add, &c->cap_add, c->nadd + 1, sizeof(*c->add), 64) < 0)
		return -ENOMEM;
	e = &c->add[c->nadd++];
	fill(e, ident, verdict, c->pass);
	/* Spread the periodic full looks over the passes: a first one sooner
	 * for some, then every `refresh` passes for each. */
	e->checked = c->pass - (unsigned)ident->pid % c->refresh;
	return 0;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = ((const struct pid_entry *)a)->pid, y = ((const struct pid_entry *)b)->pid;

	return x < y ? -1 : x > y;
}

void pp_pid_cache__end_pass(struct pp_pid_cache *c)
{
	size_t k = 0;

	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		if (!c->v[i].touched)
			continue; /* gone from /proc, or a target now */
		c->v[k] = c->v[i];
		c->v[k++].touched = false;
	}
	c->n = k;
	if (c->nadd) {
		/* /proc lists pids in ascending order: usually already sorted. */
		qsort(c->add, c->nadd, sizeof(*c->add), cmp_pid);
		if (pp_grow(&c->v, &c->cap, c->n + c->nadd, sizeof(*c->v), 64) == 0) {
			/* merge from the back */
			size_t i = c->n, j = c->nadd, o = c->n + c->nadd;

			while (j > 0) {
				if (i > 0 && c->v[i - 1].pid > c->add[j - 1].pid)
					c->v[--o] = c->v[--i];
				else
					c->v[--o] = c->add[--j];
			}
			c->n += c->nadd;
			for (size_t m = 0; m < c->n; m++)
				c->v[m].touched = false;
		}
		c->nadd = 0;
	}
	/* Shrink after a burst of short-lived processes has gone. */
	if (c->cap > 256 && c->n < c->cap / 4) {
		struct pid_entry *s = realloc(c->v, (c->cap / 2) * sizeof(*c->v));

		if (s) {
			c->v = s;
			c->cap /= 2;
		}
	}
	if (c->cap_add > 256 && c->nadd == 0) {
		free(c->add);
		c->add = NULL;
		c->cap_add = 0;
	}
	c->pass++;
}

size_t pp_pid_cache__size(const struct pp_pid_cache *c)
{
	return c ? c->n + c->nadd : 0;
}
