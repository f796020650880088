/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The /debug/pprof/ui/ page: static assets built from web/ (see web/README)
 * and embedded gzip-compressed by ui_embed.py.
 */
#ifndef PODPROF_HTTP_UI_H
#define PODPROF_HTTP_UI_H

#include <stdbool.h>
#include <stddef.h>

struct pp_ui_asset {
	const char *name; /* "index.html", "app.js", ... */
	const char *ctype;
	const unsigned char *gz; /* gzip file */
	size_t gz_len;
	size_t len; /* uncompressed */
};

extern const struct pp_ui_asset pp_ui_assets[];
extern const size_t pp_ui_assets_count;

/* The asset for the path below /debug/pprof/ui/ ("" = index.html); NULL if none. */
const struct pp_ui_asset *pp_ui__find(const char *name);

/* Whether an Accept-Encoding header value allows gzip (NULL: no). */
bool pp_ui__accepts_gzip(const char *accept_encoding);

/* Uncompressed copy of an asset in a new malloc'd buffer of a->len bytes. 0 or -errno. */
int pp_ui__inflate(const struct pp_ui_asset *a, char **out);

#endif
