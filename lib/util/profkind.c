/* SPDX-License-Identifier: Apache-2.0 */
#include "profkind.h"

#include <string.h>

static const char *const kind_names[PP_PROFILE__COUNT] = {
	[PP_PROFILE_CPU] = "profile",
	[PP_PROFILE_HEAP] = "heap",
	[PP_PROFILE_ALLOCS] = "allocs",
	[PP_PROFILE_GOROUTINE] = "goroutine",
	[PP_PROFILE_THREADCREATE] = "threadcreate",
	[PP_PROFILE_BLOCK] = "block",
	[PP_PROFILE_MUTEX] = "mutex",
};

const char *pp_profile_kind__name(enum pp_profile_kind k)
{
	if ((unsigned)k >= PP_PROFILE__COUNT)
		return NULL;
	return kind_names[k];
}

int pp_profile_kind__from_name(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < PP_PROFILE__COUNT; i++)
		if (strcmp(kind_names[i], name) == 0)
			return i;
	return -1;
}
