/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process-wide logger. lib/ modules log only at debug level; the caller
 * logs failures once, with context. Thread-safe.
 */
#ifndef PODPROF_LOG_H
#define PODPROF_LOG_H

#include <stdbool.h>

enum pp_log_level { PP_LOG_ERROR = 0, PP_LOG_WARN, PP_LOG_INFO, PP_LOG_DEBUG };
enum pp_log_format { PP_LOG_TEXT = 0, PP_LOG_JSON };

void pp_log_setup(enum pp_log_level level, enum pp_log_format format);
bool pp_log_enabled(enum pp_log_level level);
void pp_log(enum pp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pp_err(...) pp_log(PP_LOG_ERROR, __VA_ARGS__)
#define pp_warn(...) pp_log(PP_LOG_WARN, __VA_ARGS__)
#define pp_info(...) pp_log(PP_LOG_INFO, __VA_ARGS__)
#define pp_dbg(...)                                        \
	do {                                               \
		if (pp_log_enabled(PP_LOG_DEBUG))          \
			pp_log(PP_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

#endif
