/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Target selectors (config `targets:` entries) against a process.
 *
 * - pid: equality.
 * - comm: fnmatch(3) on the 15-byte kernel comm, flags 0.
 * - exe: fnmatch(3), flags 0 (so `*` also crosses '/': "*nginx" matches
 *   "/usr/sbin/nginx"), on the executable path as the target sees it
 *   (" (deleted)" removed). A pattern without '/' is also tried against the
 *   basename, so `exe: nginx` or `exe: "python3*"` work without a directory.
 *   No exe (kernel thread, permission denied, zombie) never matches.
 * - cmdline: POSIX extended regex (REG_EXTENDED | REG_NOSUB), searched
 *   (not anchored) in argv joined by single spaces.
 * - container: fnmatch(3) on the Kubernetes container name (container.c);
 *   unknown names never match.
 * - container_id: prefix of the 64-hex-digit id from /proc/PID/cgroup.
 * Every field that is set must match; kernel threads never match.
 *
 * Compiled regexes are cached process-wide (a small table under a mutex;
 * regexec runs under it too, so matching is thread-safe).
 */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "procfs.h"
#include "util/util.h"

#define REGEX_CACHE_SIZE 16

struct regex_slot {
	char *pattern;
	regex_t re;
	uint64_t last_use;
};

static pthread_mutex_t regex_lock = PTHREAD_MUTEX_INITIALIZER;
static struct regex_slot regex_cache[REGEX_CACHE_SIZE];
static uint64_t regex_clock;

/* Called with regex_lock held. Returns the compiled regex or NULL (+*ret_err). */
static regex_t *regex_get(const char *pattern, int *ret_err)
{
	struct regex_slot *victim = NULL;

	for (size_t i = 0; i < REGEX_CACHE_SIZE; i++) {
		struct regex_slot *s = &regex_cache[i];
		if (s->pattern && strcmp(s->pattern, pattern) == 0) {
			s->last_use = ++regex_clock;
			return &s->re;
		}
		if (!victim || !s->pattern || (victim->pattern && s->last_use < victim->last_use))
			victim = s;
	}

	regex_t re;
	int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		*ret_err = rc == REG_ESPACE ? -ENOMEM : -EINVAL;
		return NULL;
	}
	char *copy = strdup(pattern);
	if (!copy) {
		regfree(&re);
		*ret_err = -ENOMEM;
		return NULL;
	}
	if (victim->pattern) {
		regfree(&victim->re);
		free(victim->pattern);
	}
	victim->pattern = copy;
	victim->re = re;
	victim->last_use = ++regex_clock;
	return &victim->re;
}

static int match_cmdline(const char *pattern, const struct pp_proc_info *info)
{
	_cleanup_free_ char *joined = NULL;
	size_t n = info->cmdline ? info->cmdline_len : 0;
	regex_t *re;
	int r = 0, rc;

	joined = malloc(n + 1);
	if (!joined)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		joined[i] = info->cmdline[i] == '\0' ? ' ' : info->cmdline[i];
	joined[n] = '\0';

	pthread_mutex_lock(&regex_lock);
	re = regex_get(pattern, &r);
	if (re) {
		rc = regexec(re, joined, 0, NULL, 0);
		r = rc == 0 ? 1 : rc == REG_NOMATCH ? 0 : -ENOMEM;
	}
	pthread_mutex_unlock(&regex_lock);
	return r;
}

static int match_exe(const char *pattern, const char *exe)
{
	if (!exe)
		return 0;
	if (fnmatch(pattern, exe, 0) == 0)
		return 1;
	if (!strchr(pattern, '/')) {
		const char *base = strrchr(exe, '/');
		if (base && fnmatch(pattern, base + 1, 0) == 0)
			return 1;
	}
	return 0;
}

int pp_selector__match(const struct pp_selector *s, const struct pp_proc_info *info)
{
	if (!s || !info)
		return -EINVAL;
	if (info->kernel_thread)
		return 0;
	if (s->pid > 0 && info->pid != s->pid)
		return 0;
	if (s->comm && fnmatch(s->comm, info->comm, 0) != 0)
		return 0;
	if (s->exe && !match_exe(s->exe, info->exe))
		return 0;
	if (s->container && (!info->container[0] || fnmatch(s->container, info->container, 0) != 0))
		return 0;
	if (s->container_id &&
	    strncmp(info->container_id, s->container_id, strlen(s->container_id)) != 0)
		return 0;
	if (s->cmdline)
		return match_cmdline(s->cmdline, info);
	return 1;
}
