/* log.c - warning sink shared by the binaries and the extension. */
#include "log.h"

#include <stdio.h>

static const char *program_name = "traceprof";
static tp_log_sink current_sink;

void
tp_log_set_program(const char *name)
{
	program_name = name;
}

void
tp_log_set_sink(tp_log_sink sink)
{
	current_sink = sink;
}

static void
emit(FILE *stream, const char *kind, const char *fmt, va_list ap)
{
	char message[1024];

	vsnprintf(message, sizeof(message), fmt, ap);
	if (current_sink != NULL && stream == NULL)
	{
		current_sink(message);
		return;
	}
	/* One fprintf so concurrent writers do not interleave inside a line. */
	fprintf(stderr, "%s: %s%s\n", program_name, kind, message);
}

void
tp_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(current_sink ? NULL : stderr, "warning: ", fmt, ap);
	va_end(ap);
}

void
tp_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(stderr, "error: ", fmt, ap);
	va_end(ap);
}
