/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum pp_log_level g_level = PP_LOG_INFO;
static enum pp_log_format g_format = PP_LOG_TEXT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void pp_log_setup(enum pp_log_level level, enum pp_log_format format)
{
	g_level = level;
	g_format = format;
}

bool pp_log_enabled(enum pp_log_level level)
{
	return level <= g_level;
}

static void json_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
}

static void text_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

void pp_log(enum pp_log_level level, const char *fmt, ...)
{
	char msg[2048];
	char ts[40];
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (!pp_log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);

	pthread_mutex_lock(&g_lock);
	if (g_format == PP_LOG_JSON) {
		fprintf(stderr, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts,
			level_names[level]);
		json_escape(stderr, msg);
		fputs("\"}\n", stderr);
	} else {
		/* one line per entry: targets name their processes, files and
		 * containers, so control characters in a message are escaped */
		fprintf(stderr, "%s %-5s ", ts, level_names[level]);
		text_escape(stderr, msg);
		fputc('\n', stderr);
	}
	fflush(stderr);
	pthread_mutex_unlock(&g_lock);
}
