/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pprof-dump FILE|-
 *
 * Decodes a pprof profile (gzip or raw protobuf; "-" reads stdin) and prints
 * exactly one JSON object followed by a newline on stdout. Exit status 0
 * when the input decodes (even if the check fails), 1 when it does not
 * (message on stderr, nothing on stdout), 2 on bad usage.
 *
 * Output, keys always present and in this order:
 *   "check":               "ok", or the first violated rule of
 *                          PPROF-COMPAT.md §2 as reported by pp_pprof_check
 *   "sample_types":        [[type, unit], ...]
 *   "period_type":         [type, unit], or null when absent
 *   "period":              number
 *   "time_nanos":          number
 *   "duration_nanos":      number
 *   "default_sample_type": string ("" when unset)
 *   "comments":            [string, ...]
 *   "drop_frames", "keep_frames": string ("" when unset)
 *   "mappings":  [{"id": number, "start": hex, "limit": hex, "offset": hex,
 *                  "file": string, "build_id": string, "has_functions": bool,
 *                  "has_filenames": bool, "has_line_numbers": bool,
 *                  "has_inline_frames": bool}, ...]
 *   "locations": [{"id": number, "mapping": number (0 = none), "address": hex,
 *                  "is_folded": bool,
 *                  "lines": [{"function": name, "system_name": string,
 *                             "file": string, "line": number,
 *                             "start_line": number}, ...]}, ...]
 *                "lines" is innermost inlined function first; a line whose
 *                function id does not exist has "function": null.
 *   "samples":   [{"values": [number, ...], "locations": [id, ...] (leaf first),
 *                  "labels": {key: string, ...},
 *                  "num_labels": {key: [number, unit string], ...}}, ...]
 *                When a key repeats within a sample, the first value is kept.
 *
 * "hex" is a lowercase string "0x..." (uint64 values may exceed 2^53).
 * Other numbers are plain JSON integers (values may be negative). Strings are
 * JSON-escaped; bytes that are not valid UTF-8 become \ufffd. A string index
 * out of range prints as "" (the "check" field reports it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/pprof.h"
#include "profile.pb-c.h"

#define DUMP_MAX_INPUT (1ull << 30)

static const Perftools__Profiles__Profile *P;

static const char *str(int64_t i)
{
	if (i < 0 || (uint64_t)i >= P->n_string_table || !P->string_table[i])
		return "";
	return P->string_table[i];
}

static void put_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	putchar('"');
	while (*p) {
		unsigned char c = *p;
		if (c == '"' || c == '\\') {
			putchar('\\');
			putchar(c);
			p++;
		} else if (c < 0x20 || c == 0x7f) {
			printf("\\u%04x", c);
			p++;
		} else if (c < 0x80) {
			putchar(c);
			p++;
		} else {
			/* copy a valid UTF-8 sequence, else emit U+FFFD for one byte */
			size_t len = c >= 0xc2 && c <= 0xdf   ? 2
				     : c >= 0xe0 && c <= 0xef ? 3
				     : c >= 0xf0 && c <= 0xf4 ? 4
							      : 0;
			bool ok = len > 0;
			for (size_t i = 1; ok && i < len; i++)
				ok = (p[i] & 0xc0) == 0x80;
			if (ok && len >= 3) {
				unsigned char d = p[1];
				ok = !((c == 0xe0 && d < 0xa0) || (c == 0xed && d > 0x9f) ||
				       (c == 0xf0 && d < 0x90) || (c == 0xf4 && d > 0x8f));
			}
			if (ok) {
				fwrite(p, 1, len, stdout);
				p += len;
			} else {
				fputs("\\ufffd", stdout);
				p++;
			}
		}
	}
	putchar('"');
}

static void put_hex(uint64_t v)
{
	printf("\"0x%" PRIx64 "\"", v);
}

static void put_bool(bool b)
{
	fputs(b ? "true" : "false", stdout);
}

static const Perftools__Profiles__Function *func(uint64_t id)
{
	if (id >= 1 && id <= P->n_function && P->function[id - 1]->id == id)
		return P->function[id - 1];
	for (size_t i = 0; i < P->n_function; i++)
		if (P->function[i]->id == id)
			return P->function[i];
	return NULL;
}

static bool seen_before(const Perftools__Profiles__Sample *s, size_t j, bool numeric)
{
	for (size_t k = 0; k < j; k++) {
		bool kn = s->label[k]->str == 0;
		if (kn == numeric && s->label[k]->key == s->label[j]->key)
			return true;
	}
	return false;
}

static void dump(const char *check)
{
	fputs("{\"check\":", stdout);
	put_str(check);

	fputs(",\"sample_types\":[", stdout);
	for (size_t i = 0; i < P->n_sample_type; i++) {
		fputs(i ? ",[" : "[", stdout);
		put_str(str(P->sample_type[i]->type));
		putchar(',');
		put_str(str(P->sample_type[i]->unit));
		putchar(']');
	}
	fputs("],\"period_type\":", stdout);
	if (P->period_type) {
		putchar('[');
		put_str(str(P->period_type->type));
		putchar(',');
		put_str(str(P->period_type->unit));
		putchar(']');
	} else {
		fputs("null", stdout);
	}
	printf(",\"period\":%" PRId64 ",\"time_nanos\":%" PRId64 ",\"duration_nanos\":%" PRId64,
	       P->period, P->time_nanos, P->duration_nanos);
	fputs(",\"default_sample_type\":", stdout);
	put_str(str(P->default_sample_type));
	fputs(",\"comments\":[", stdout);
	for (size_t i = 0; i < P->n_comment; i++) {
		if (i)
			putchar(',');
		put_str(str(P->comment[i]));
	}
	fputs("],\"drop_frames\":", stdout);
	put_str(str(P->drop_frames));
	fputs(",\"keep_frames\":", stdout);
	put_str(str(P->keep_frames));

	fputs(",\"mappings\":[", stdout);
	for (size_t i = 0; i < P->n_mapping; i++) {
		const Perftools__Profiles__Mapping *m = P->mapping[i];
		printf("%s{\"id\":%" PRIu64 ",\"start\":", i ? "," : "", m->id);
		put_hex(m->memory_start);
		fputs(",\"limit\":", stdout);
		put_hex(m->memory_limit);
		fputs(",\"offset\":", stdout);
		put_hex(m->file_offset);
		fputs(",\"file\":", stdout);
		put_str(str(m->filename));
		fputs(",\"build_id\":", stdout);
		put_str(str(m->build_id));
		fputs(",\"has_functions\":", stdout);
		put_bool(m->has_functions);
		fputs(",\"has_filenames\":", stdout);
		put_bool(m->has_filenames);
		fputs(",\"has_line_numbers\":", stdout);
		put_bool(m->has_line_numbers);
		fputs(",\"has_inline_frames\":", stdout);
		put_bool(m->has_inline_frames);
		putchar('}');
	}

	fputs("],\"locations\":[", stdout);
	for (size_t i = 0; i < P->n_location; i++) {
		const Perftools__Profiles__Location *l = P->location[i];
		printf("%s{\"id\":%" PRIu64 ",\"mapping\":%" PRIu64 ",\"address\":", i ? "," : "",
		       l->id, l->mapping_id);
		put_hex(l->address);
		fputs(",\"is_folded\":", stdout);
		put_bool(l->is_folded);
		fputs(",\"lines\":[", stdout);
		for (size_t j = 0; j < l->n_line; j++) {
			const Perftools__Profiles__Function *f = func(l->line[j]->function_id);
			fputs(j ? ",{\"function\":" : "{\"function\":", stdout);
			if (f)
				put_str(str(f->name));
			else
				fputs("null", stdout);
			fputs(",\"system_name\":", stdout);
			put_str(f ? str(f->system_name) : "");
			fputs(",\"file\":", stdout);
			put_str(f ? str(f->filename) : "");
			printf(",\"line\":%" PRId64 ",\"start_line\":%" PRId64 "}",
			       l->line[j]->line, f ? f->start_line : 0);
		}
		fputs("]}", stdout);
	}

	fputs("],\"samples\":[", stdout);
	for (size_t i = 0; i < P->n_sample; i++) {
		const Perftools__Profiles__Sample *s = P->sample[i];
		fputs(i ? ",{\"values\":[" : "{\"values\":[", stdout);
		for (size_t j = 0; j < s->n_value; j++)
			printf("%s%" PRId64, j ? "," : "", s->value[j]);
		fputs("],\"locations\":[", stdout);
		for (size_t j = 0; j < s->n_location_id; j++)
			printf("%s%" PRIu64, j ? "," : "", s->location_id[j]);
		fputs("],\"labels\":{", stdout);
		bool first = true;
		for (size_t j = 0; j < s->n_label; j++) {
			if (s->label[j]->str == 0 || seen_before(s, j, false))
				continue;
			if (!first)
				putchar(',');
			first = false;
			put_str(str(s->label[j]->key));
			putchar(':');
			put_str(str(s->label[j]->str));
		}
		fputs("},\"num_labels\":{", stdout);
		first = true;
		for (size_t j = 0; j < s->n_label; j++) {
			if (s->label[j]->str != 0 || seen_before(s, j, true))
				continue;
			if (!first)
				putchar(',');
			first = false;
			put_str(str(s->label[j]->key));
			printf(":[%" PRId64 ",", s->label[j]->num);
			put_str(str(s->label[j]->num_unit));
			putchar(']');
		}
		fputs("}}", stdout);
	}
	fputs("]}\n", stdout);
}

int main(int argc, char **argv)
{
	char *data = NULL;
	size_t len = 0;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE|-\n", argv[0]);
		return 2;
	}
	if (strcmp(argv[1], "-") == 0)
		r = pp_read_fd(STDIN_FILENO, DUMP_MAX_INPUT, &data, &len);
	else
		r = pp_read_file(argv[1], DUMP_MAX_INPUT, &data, &len);
	if (r < 0) {
		fprintf(stderr, "pprof-dump: cannot read %s: %s\n", argv[1], strerror(-r));
		return 1;
	}
	pp_pprof_profile *prof = NULL;
	r = pp_pprof_decode(data, len, &prof);
	free(data);
	if (r < 0) {
		fprintf(stderr, "pprof-dump: %s: not a pprof profile: %s\n", argv[1], strerror(-r));
		return 1;
	}
	char err[512];
	r = pp_pprof_check(prof, err, sizeof(err));
	P = prof;
	dump(r == 0 ? "ok" : err);
	pp_pprof_profile__free(prof);
	if (fflush(stdout) != 0)
		return 1;
	return 0;
}
