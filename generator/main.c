/*
 * main.c - generator: write N synthetic order records to a file.
 *
 *	generator N OUT [--seed S] [--format json|ndjson]
 *
 * Command line, tracing and the output file live here; the records come
 * from order_writer.c and the all-or-nothing file from outfile.c.
 */
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "order_writer.h"
#include "outfile.h"
#include "pyroscope.h"
#include "self_profiler.h"
#include "tracer.h"

#define MAX_RECORDS		UINT64_C(1000000000)
#define MAX_SEED		UINT64_C(9223372036854775807)	/* fits an int64 attribute */
#define DEFAULT_SEED	1
#define BUFFER_SIZE		(1024 * 1024)

#define EXIT_IO		1
#define EXIT_USAGE	2
#define EXIT_INTERRUPTED 130	/* as a shell reports SIGINT */

typedef struct options
{
	uint64_t	records;
	const char *out;
	uint64_t	seed;
	gen_format	format;
	const char *profile_out;	/* --profile-out FILE, or NULL */
} options;

static const char usage_line[] =
"usage: generator N OUT [--seed S] [--format json|ndjson] [--profile-out FILE]\n";

static void
print_help(void)
{
	printf("%s", usage_line);
	printf("\n"
		   "Write N synthetic order records (docs/record-format.md) to OUT.\n"
		   "\n"
		   "  N              number of records, 0 to %" PRIu64 "; ids run 1..N\n"
		   "  OUT            output file; written to a hidden temporary file in the\n"
		   "                 same directory and renamed over OUT when complete\n"
		   "                 (an existing file keeps its mode and must be writable;\n"
		   "                 a link's target is replaced); a FIFO, a device or\n"
		   "                 /dev/stdout is written directly; a directory or a\n"
		   "                 dangling link is refused\n"
		   "  --seed S       PRNG seed, 0 to %" PRIu64 " (default %d); the same seed,\n"
		   "                 N and format always give a byte-identical file\n"
		   "  --format F     json (default): one array, \"[\\n\" records joined by\n"
		   "                 \",\\n\" then \"\\n]\\n\" (\"[]\\n\" when N is 0);\n"
		   "                 ndjson: one record per line (empty when N is 0)\n"
		   "  --profile-out FILE\n"
		   "                 also write this run's CPU profile to FILE: pprof (.pprof,\n"
		   "                 .pb.gz), speedscope (.json), folded stacks (.folded)\n"
		   "                 or an interactive flame graph (.svg);\n"
		   "                 TRACEPROF_PROFILE_OUT does the same\n"
		   "  --help         show this text and exit\n"
		   "\n"
		   "Tracing follows the OTEL_* environment variables, profiling the\n"
		   "PYROSCOPE_* ones (see README).\n"
		   "Exit status: 0 success, 1 I/O error, 2 usage error, 130 interrupted\n"
		   "while sending the run's traces and profiles (the output is complete).\n",
		   MAX_RECORDS, MAX_SEED, DEFAULT_SEED);
}

/* One line naming the problem, then the synopsis; exit 2. */
static void usage_error(const char *fmt,...)
			__attribute__((format(printf, 1, 2), noreturn));

static void
usage_error(const char *fmt,...)
{
	char		msg[512];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tp_error("%s", msg);
	fprintf(stderr, "%sTry 'generator --help' for more information.\n", usage_line);
	exit(EXIT_USAGE);
}

/* Decimal digits only (no sign, no spaces), at most max. */
static bool
parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t	v = 0;

	if (*s == '\0')
		return false;
	for (; *s; s++)
	{
		if (*s < '0' || *s > '9')
			return false;
		if (v > (max - (uint64_t) (*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t) (*s - '0');
	}
	*out = v;
	return true;
}

/*
 * The value of "--name V" or "--name=V" at argv[*i], advancing *i past it;
 * NULL if arg is not this option.
 */
static const char *
option_value(int argc, char **argv, int *i, const char *name)
{
	size_t		len = strlen(name);
	const char *arg = argv[*i];

	if (strncmp(arg, name, len) != 0)
		return NULL;
	if (arg[len] == '=')
		return arg + len + 1;
	if (arg[len] != '\0')
		return NULL;
	if (*i + 1 >= argc)
		usage_error("option %s needs a value", name);
	return argv[++*i];
}

static void
parse_args(int argc, char **argv, options *opt)
{
	const char *positional[2] = {NULL, NULL};
	int			npos = 0;
	bool		options_done = false;
	const char *val;
	int			i;

	opt->seed = DEFAULT_SEED;
	opt->profile_out = NULL;
	opt->format = GEN_FORMAT_JSON;

	for (i = 1; i < argc; i++)
	{
		const char *arg = argv[i];

		/* "-5" is a bad N, not an option: let N's check explain it. */
		if (!options_done && arg[0] == '-' && arg[1] != '\0' &&
			!(arg[1] >= '0' && arg[1] <= '9'))
		{
			if (strcmp(arg, "--") == 0)
				options_done = true;
			else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
			{
				print_help();
				exit(0);
			}
			else if ((val = option_value(argc, argv, &i, "--seed")) != NULL)
			{
				if (!parse_uint(val, MAX_SEED, &opt->seed))
					usage_error("invalid --seed \"%s\": expected a whole number "
								"from 0 to %" PRIu64, val, MAX_SEED);
			}
			else if ((val = option_value(argc, argv, &i, "--profile-out")) != NULL)
				opt->profile_out = val;
			else if ((val = option_value(argc, argv, &i, "--format")) != NULL)
			{
				if (strcmp(val, "json") == 0)
					opt->format = GEN_FORMAT_JSON;
				else if (strcmp(val, "ndjson") == 0)
					opt->format = GEN_FORMAT_NDJSON;
				else
					usage_error("invalid --format \"%s\": expected json or ndjson", val);
			}
			else
				usage_error("unknown option \"%s\"", arg);
			continue;
		}
		if (npos == 2)
			usage_error("unexpected argument \"%s\"", arg);
		positional[npos++] = arg;
	}

	if (npos == 0)
		usage_error("missing arguments N and OUT");
	if (!parse_uint(positional[0], MAX_RECORDS, &opt->records))
		usage_error("invalid N \"%s\": expected a whole number from 0 to %" PRIu64,
					positional[0], MAX_RECORDS);
	if (npos == 1)
		usage_error("missing argument OUT");
	if (positional[1][0] == '\0')
		usage_error("OUT must not be empty");
	opt->out = positional[1];
}

/*
 * The profile is written last, by renaming over its path: naming OUT there
 * (directly, through a link, or in TRACEPROF_PROFILE_OUT) would replace the
 * records just written with a profile.
 */
static void
check_profile_out(const options *opt)
{
	char		err[PATH_MAX * 2 + 256];

	if (!tp_self_profiler_check_out(opt->profile_out, opt->out, "OUT", "records", err, sizeof(err)))
		usage_error("%s", err);
}

static bool
file_sink(void *arg, const char *data, size_t len)
{
	tp_self_profiler_tick();	/* once per buffer: cheap */
	return gen_outfile_write((gen_outfile *) arg, data, len);
}

static double
seconds_since(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double) (now.tv_sec - start->tv_sec)
		+ (double) (now.tv_nsec - start->tv_nsec) / 1e9;
}

/* Set by a SIGINT or SIGTERM once the run is over (arm_final_stop). */
static volatile sig_atomic_t final_stop_requested;

static void
on_final_stop(int signo)
{
	(void) signo;
	final_stop_requested = 1;
}

/*
 * The output is written or removed; only the run's telemetry is left to
 * send.  A SIGINT or SIGTERM from here on cuts those uploads short instead
 * of killing the generator (the run's handler re-raises it), so that the
 * --profile-out file is still written and the generator says what was
 * lost; a second signal kills at once.
 */
static void
arm_final_stop(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_final_stop;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Generate and commit; false with out->err set on failure. */
static bool
run(const options *opt, gen_outfile *out)
{
	char	   *buf = malloc(BUFFER_SIZE);
	bool		ok;

	if (buf == NULL)
	{
		snprintf(out->err, sizeof(out->err),
				 "out of memory allocating the %d-byte output buffer", BUFFER_SIZE);
		return false;
	}
	ok = gen_outfile_open(out, opt->out) &&
		gen_orders_emit(opt->seed, opt->format, opt->records,
						buf, BUFFER_SIZE, file_sink, out) &&
		gen_outfile_commit(out);
	free(buf);
	if (!ok)
		gen_outfile_abort(out);
	return ok;
}

int
main(int argc, char **argv)
{
	options		opt;
	gen_outfile out;
	tp_span    *span;
	char		trace_id[TP_TRACE_ID_HEX + 1];
	struct timespec start;
	double		secs;
	bool		ok;

	/*
	 * Whoever reads stderr (2>&1 | head -1) may go before we are done: a
	 * write to it must not kill the run, its telemetry or --profile-out.
	 * gen_outfile_install_signal_cleanup() keeps that for the run and turns
	 * a closed pipe as OUT into a failed write.
	 */
	(void) signal(SIGPIPE, SIG_IGN);
	tp_log_set_program("generator");
	tp_log_hold_standard_fds();
	parse_args(argc, argv, &opt);
	check_profile_out(&opt);

	tp_tracer_init("traceprof.generator");
	tp_tracer_set_cancel(&final_stop_requested);
	tp_pyroscope_set_env_cancel(&final_stop_requested);
	span = tp_span_start("generator.run", TP_SPAN_INTERNAL, NULL);
	tp_span_set_int(span, "generator.records", (int64_t) opt.records);
	tp_span_set_string(span, "generator.output_path", opt.out);
	tp_span_set_int(span, "generator.seed", (int64_t) opt.seed);
	tp_span_set_string(span, "generator.format",
					   opt.format == GEN_FORMAT_JSON ? "json" : "ndjson");
	tp_span_trace_id_hex(span, trace_id);
	fprintf(stderr, "generator: trace_id=%s\n", trace_id);
	/* Grafana finds a span's profiles by its service.name: the application defaults to it. */
	tp_self_profiler_start(span, tp_tracer_service_name(), opt.profile_out);

	memset(&out, 0, sizeof(out));
	out.fd = -1;
	clock_gettime(CLOCK_MONOTONIC, &start);
	if (!gen_outfile_install_signal_cleanup())
	{
		snprintf(out.err, sizeof(out.err), "cannot install signal handlers");
		ok = false;
	}
	else
		ok = run(&opt, &out);
	secs = seconds_since(&start);
	arm_final_stop();

	tp_span_set_int(span, "generator.bytes_written", (int64_t) out.bytes);
	if (ok)
		fprintf(stderr, "generator: wrote %" PRIu64 " records (%.1f MB) to %s "
				"in %.3f s (%.0f records/s)\n",
				opt.records, (double) out.bytes / 1e6, opt.out, secs,
				secs > 0 ? (double) opt.records / secs : 0.0);
	else
	{
		tp_error("%s", out.err);
		tp_span_set_error(span, out.err);
	}
	/* The run's span ends with its work, not after the final upload. */
	tp_self_profiler_stop();
	tp_span_end(span);
	tp_self_profiler_finish();
	tp_tracer_shutdown();
	if (final_stop_requested)
	{
		tp_error("interrupted");
		return EXIT_INTERRUPTED;
	}
	return ok ? 0 : EXIT_IO;
}
