/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "ui.h"

const struct pp_ui_asset *pp_ui__find(const char *name)
{
	if (!name)
		return NULL;
	if (!*name)
		name = "index.html";
	for (size_t i = 0; i < pp_ui_assets_count; i++)
		if (strcmp(pp_ui_assets[i].name, name) == 0)
			return &pp_ui_assets[i];
	return NULL;
}

/* A qvalue of zero ("q=0", "q=0.0", "q=0.000") refuses the coding (RFC 9110 12.4.2). */
static bool q_zero(const char *p, size_t n)
{
	while (n && (*p == ' ' || *p == '\t')) {
		p++;
		n--;
	}
	if (n < 3 || strncasecmp(p, "q=0", 3) != 0)
		return false;
	for (p += 3, n -= 3; n; p++, n--)
		if (*p != '.' && *p != '0' && *p != ' ' && *p != '\t')
			return false;
	return true;
}

bool pp_ui__accepts_gzip(const char *ae)
{
	bool star = false, gzip = false, gzip_seen = false;

	while (ae && *ae) {
		size_t len = strcspn(ae, ",");
		const char *tok = ae, *semi;
		size_t tlen;

		while (len && (*tok == ' ' || *tok == '\t')) {
			tok++;
			len--;
		}
		semi = memchr(tok, ';', len);
		tlen = semi ? (size_t)(semi - tok) : len;
		while (tlen && (tok[tlen - 1] == ' ' || tok[tlen - 1] == '\t'))
			tlen--;
		if ((tlen == 4 && strncasecmp(tok, "gzip", 4) == 0) ||
		    (tlen == 6 && strncasecmp(tok, "x-gzip", 6) == 0)) {
			gzip_seen = true;
			gzip = !(semi && q_zero(semi + 1, (size_t)(tok + len - semi - 1)));
		} else if (tlen == 1 && *tok == '*') {
			star = !(semi && q_zero(semi + 1, (size_t)(tok + len - semi - 1)));
		}
		ae = tok + len;
		if (*ae == ',')
			ae++;
	}
	return gzip_seen ? gzip : star;
}

int pp_ui__inflate(const struct pp_ui_asset *a, char **out)
{
	z_stream z = { 0 };
	char *buf;
	int r;

	buf = malloc(a->len ? a->len : 1);
	if (!buf)
		return -ENOMEM;
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(buf);
		return -ENOMEM;
	}
	z.next_in = (unsigned char *)a->gz;
	z.avail_in = (uInt)a->gz_len;
	z.next_out = (unsigned char *)buf;
	z.avail_out = (uInt)a->len;
	r = inflate(&z, Z_FINISH);
	inflateEnd(&z);
	if (r != Z_STREAM_END || z.total_out != a->len) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	return 0;
}
