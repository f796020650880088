/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure HTTP parsers on one input: pp_http__query_get (as a query
 * string, with fixed names and with a name taken from the input),
 * pp_http__parse_symbol_request (as a body), pp_http__parse_listen, and
 * the Host checks (pp_http__host_name, then the loopback and allow-list
 * tests on its result; "list\nhost" takes an allow-list from the input).
 */
#include "fuzz.h"

#include "http/http.h"

static void query(const char *q, const char *name, size_t n)
{
	char buf[256];
	int r;

	memset(buf, 'x', sizeof(buf));
	r = pp_http__query_get(q, name, buf, n);
	/* -EINVAL only for a name longer than the 62 bytes query_get supports */
	fuzz_check(r == 0 || r == 1 || r == -E2BIG || (r == -EINVAL && strlen(name) > 62));
	if (r == 1)
		fuzz_check(memchr(buf, '\0', n) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "seconds", "debug", "gc", "", "a" };
	uint64_t *words = NULL;
	size_t n_words = (size_t)-1;
	char host[64];
	unsigned port = 0;
	char *s;
	int r;

	if (size > 1 << 20)
		return 0;
	s = fuzz_strdup(data, size);
	if (!s)
		return 0;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		query(s, names[i], 256);
		query(s, names[i], 4);
		query(s, names[i], 1);
	}
	/* "name\nquery": the name from the input too */
	char *nl = strchr(s, '\n');
	if (nl) {
		*nl = '\0';
		query(nl + 1, s, 256);
		query(nl + 1, s, 3);
		*nl = '\n';
	}

	r = pp_http__parse_symbol_request((const char *)data, size, &words, &n_words);
	fuzz_check(r == 0 || r == -ENOMEM);
	if (r == 0) {
		fuzz_check(n_words <= 100000);
		fuzz_check(n_words == 0 || words != NULL);
		for (size_t i = 0; i < n_words; i++)
			fuzz_check(words[i] != 0);
		free(words);
	}

	memset(host, 'x', sizeof(host));
	r = pp_http__parse_listen(s, host, sizeof(host), &port);
	fuzz_check(r == 0 || r == -EINVAL || r == -ENAMETOOLONG);
	if (r == 0) {
		fuzz_check(port <= 65535);
		fuzz_check(memchr(host, '\0', sizeof(host)) != NULL);
	}
	r = pp_http__parse_listen(s, host, 2, &port);
	if (r == 0)
		fuzz_check(memchr(host, '\0', 2) != NULL);

	r = pp_http__host_name(s, host, sizeof(host));
	fuzz_check(r == 0 || r == -EINVAL || r == -ENAMETOOLONG);
	if (r == 0) {
		unsigned char a[16];

		fuzz_check(host[0] && memchr(host, '\0', sizeof(host)) != NULL);
		for (const char *c = host; *c; c++)
			fuzz_check((unsigned char)*c > ' ' && *c != '/' && (*c < 'A' || *c > 'Z'));
		(void)pp_http__host_is_loopback(host);
		(void)pp_http__host_addr(host, a);
		fuzz_check(pp_http__host_listed("*", host));
		fuzz_check(pp_http__host_listed(host, host));
		fuzz_check(!pp_http__host_listed("", host));
	}
	if (nl) {
		*nl = '\0';
		if (pp_http__host_name(nl + 1, host, sizeof(host)) == 0)
			(void)pp_http__host_listed(s, host);
		*nl = '\n';
	}

	free(s);
	return 0;
}
