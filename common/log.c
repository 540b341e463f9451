/* log.c - warning sink shared by the binaries and the extension. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#include "text.h"

static const char *program_name = "traceprof";
static tp_log_sink warning_sink;

void
tp_log_set_program(const char *name)
{
	program_name = name;
}

void
tp_log_hold_standard_fds(void)
{
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
			(void) open("/dev/null", O_RDWR);	/* the lowest free descriptor: fd */
}

void
tp_log_set_sink(tp_log_sink sink)
{
	warning_sink = sink;
}

/* One fprintf per message so concurrent writers do not interleave a line. */
static void
print_line(const char *kind, const char *message)
{
	if (kind != NULL)
		fprintf(stderr, "%s: %s: %s\n", program_name, kind, message);
	else
		fprintf(stderr, "%s: %s\n", program_name, message);
}

void
tp_info(const char *fmt, ...)
{
	char		message[1024];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	tp_make_printable(message);	/* values quoted in it come from outside */
	print_line(NULL, message);
}

void
tp_warn(const char *fmt, ...)
{
	char		message[1024];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	tp_make_printable(message);	/* values quoted in it come from outside */
	if (warning_sink != NULL)
		warning_sink(message);
	else
		print_line("warning", message);
}

void
tp_error(const char *fmt, ...)
{
	char		message[1024];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	tp_make_printable(message);	/* values quoted in it come from outside */
	print_line("error", message);
}
