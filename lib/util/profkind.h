/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kinds of profile podprof serves, shared by the store (which keeps
 * them), the agent and the HTTP module (which names them in URLs). Pure;
 * safe from any thread.
 */
#ifndef PODPROF_PROFKIND_H
#define PODPROF_PROFKIND_H

enum pp_profile_kind {
	PP_PROFILE_CPU = 0, /* "profile" */
	PP_PROFILE_HEAP, /* "heap" */
	PP_PROFILE_ALLOCS, /* "allocs" */
	PP_PROFILE_GOROUTINE, /* "goroutine" */
	PP_PROFILE_THREADCREATE, /* "threadcreate" */
	PP_PROFILE_BLOCK, /* "block" */
	PP_PROFILE_MUTEX, /* "mutex" */
	PP_PROFILE__COUNT
};

/* The endpoint's name ("profile" for CPU); NULL for an unknown kind. */
const char *pp_profile_kind__name(enum pp_profile_kind k);
/* The kind an endpoint name stands for; -1 if unknown. */
int pp_profile_kind__from_name(const char *name);

#endif
