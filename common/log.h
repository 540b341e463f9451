/*
 * log.h - one place where common/ code reports problems.
 *
 * common/ runs both in the command-line binaries (stderr) and inside
 * PostgreSQL backends (elog).  Code here never prints directly: it calls
 * tp_warn(), and the host program decides where the message goes by
 * installing a sink.
 */
#ifndef TP_LOG_H
#define TP_LOG_H

#include <stdarg.h>

typedef void (*tp_log_sink)(const char *message);

/* Program name used as prefix by the default stderr sink ("loader: ..."). */
void tp_log_set_program(const char *name);

/*
 * For the binaries, first thing: /dev/null on any of descriptors 0-2 the
 * caller closed.  Otherwise the next file opened takes it, and messages
 * to stderr land in it, or input is read from the loader's own pipe.
 */
void		tp_log_hold_standard_fds(void);

/* Replace the sink; NULL restores the default (stderr, one line). */
void tp_log_set_sink(tp_log_sink sink);

/* A warning: the operation goes on.  Formatted like printf. */
void tp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Write "program: message\n" to stderr: a plain report, not a problem. */
void		tp_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Write "program: error: message\n" to stderr; for fatal errors in the binaries. */
void tp_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
