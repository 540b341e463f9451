/*
 * cli.c - parse the loader's arguments; the --help text is the reference
 * for its contract (arguments, messages, exit codes).
 */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

static const char help_text[] =
"Usage: loader POSTGRES_URL FILE [--table T] [--batch-size N] [--profile-out FILE]\n"
"\n"
"Load order records (docs/record-format.md) from FILE into a PostgreSQL table\n"
"with COPY ... FROM STDIN (FORMAT binary), reading FILE in constant memory.\n"
"\n"
"  POSTGRES_URL    libpq connection URL or key=value string, for example\n"
"                  postgresql://user:password@host:5432/db (PGPASSWORD,\n"
"                  ~/.pgpass and the other PG* variables apply; connect_timeout\n"
"                  is 10 s unless set there)\n"
"  FILE            one JSON array of records, or one record per line\n"
"                  (ndjson), told apart by the first non-blank byte\n"
"  --table T       target table, NAME or SCHEMA.NAME, taken literally (quoted,\n"
"                  so case-sensitive); created when missing (default: orders)\n"
"  --batch-size N  commit every N records in a transaction of its own\n"
"                  (default 0: the whole file in one transaction)\n"
"  --profile-out FILE\n"
"                  also write this run's CPU profile to FILE: pprof (.pprof,\n"
"                  .pb.gz), speedscope (.json), folded stacks (.folded) or an\n"
"                  interactive flame graph (.svg);\n"
"                  TRACEPROF_PROFILE_OUT does the same\n"
"  -h, --help      show this help and exit\n"
"\n"
"All or nothing by default: the load runs in one transaction (BEGIN, CREATE\n"
"TABLE IF NOT EXISTS, COPY, COMMIT), so a bad record anywhere in FILE, or a\n"
"row the server refuses, loads nothing.  With --batch-size N the batches\n"
"committed before a failure stay committed; the error message says how many\n"
"rows that is.  Every record is checked strictly (exact keys, types, ranges,\n"
"UTF-8); a record may be at most 16 MiB, attributes may nest 4096 levels deep.\n"
"\n"
"Messages, all on stderr:\n"
"  loader: trace_id=<32 hex digits>                  at the start\n"
"  loader: N rows, R rows/s, P% read                 progress, on a terminal only\n"
"  loader: loaded N rows into T in S s (R rows/s)    when done\n"
"  loader: error: FILE: record N (line L, column C, byte offset O): what\n"
"  loader: error: FILE: line L, column C, byte offset O: what   (between records)\n"
"  loader: error: FILE: record N: rejected by the server: what\n"
"  loader: error: cannot connect to URL: what\n"
"Lines and columns count from 1 (columns in bytes), byte offsets from 0.\n"
"Passwords in POSTGRES_URL are shown as ***.\n"
"\n"
"Exit status:\n"
"  0    loaded\n"
"  1    internal error (out of memory)\n"
"  2    usage error\n"
"  3    bad input: FILE missing, unreadable or empty, no records, an invalid record\n"
"  4    database error: connection, authentication, CREATE TABLE, COPY refused by\n"
"       the server (e.g. a duplicate id), COMMIT\n"
"  130  interrupted (SIGINT or SIGTERM); the open transaction is rolled back\n"
"\n"
"Tracing: spans loader.run, loader.connect, loader.copy and loader.commit are\n"
"exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or\n"
"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; OTEL_SERVICE_NAME and\n"
"OTEL_RESOURCE_ATTRIBUTES apply.  When the server has the traceprof extension,\n"
"the loader sets traceprof.traceparent so that the server's spans join the trace.\n"
"With --batch-size, the first 100 batches get loader.copy and loader.commit spans\n"
"of their own; later batches run under loader.run.\n";

void
ld_cli_help(FILE *out)
{
	fputs(help_text, out);
}

/*
 * Append s as a quoted identifier.  Done here rather than by libpq after
 * connecting: a bad name is a usage error found before any connection,
 * and the quoted name needs no allocation that could fail later.
 */
static char *
quote_identifier(char *out, const char *s)
{
	*out++ = '"';
	for (; *s; s++)
	{
		if (*s == '"')
			*out++ = '"';
		*out++ = *s;
	}
	*out++ = '"';
	*out = '\0';
	return out;
}

static void
quote_table(ld_options *opt)
{
	char	   *p = opt->qtable;

	if (opt->schema[0] != '\0')
	{
		p = quote_identifier(p, opt->schema);
		*p++ = '.';
	}
	quote_identifier(p, opt->name);
}

static bool
parse_table(const char *text, ld_options *opt, char *err, size_t errlen)
{
	const char *dot = strchr(text, '.');
	const char *name = dot ? dot + 1 : text;
	size_t		schema_len = dot ? (size_t) (dot - text) : 0;

	if ((dot && strchr(name, '.') != NULL) || *name == '\0' || (dot && schema_len == 0))
	{
		snprintf(err, errlen, "--table: expected NAME or SCHEMA.NAME, got \"%s\"", text);
		return false;
	}
	if (schema_len > LD_MAX_IDENTIFIER || strlen(name) > LD_MAX_IDENTIFIER)
	{
		snprintf(err, errlen, "--table: \"%s\": names are limited to %d bytes",
				 text, LD_MAX_IDENTIFIER);
		return false;
	}
	/* the connection's client_encoding is UTF8: the server would refuse it */
	if (!tp_utf8_is_valid(text, strlen(text)))
	{
		snprintf(err, errlen, "--table: \"%s\" is not valid UTF-8", text);
		return false;
	}
	memcpy(opt->schema, text, schema_len);
	opt->schema[schema_len] = '\0';
	strcpy(opt->name, name);
	opt->table = text;
	return true;
}

static bool
parse_batch_size(const char *text, uint64_t *out, char *err, size_t errlen)
{
	uint64_t	v = 0;

	if (text[0] == '\0' || text[strspn(text, "0123456789")] != '\0')
	{
		snprintf(err, errlen, "--batch-size: expected a whole number of records (0 or more), got \"%s\"", text);
		return false;
	}
	for (const char *p = text; *p != '\0'; p++)
	{
		if (v > (UINT64_C(1) << 62) / 10)
		{
			snprintf(err, errlen, "--batch-size: %s is too large (at most %llu records; 0: one batch)",
					 text, (unsigned long long) ((UINT64_C(1) << 62) / 10 * 10 + 9));
			return false;
		}
		v = v * 10 + (uint64_t) (*p - '0');
	}
	*out = v;
	return true;
}

/*
 * An option's value given as the next argument that is itself a long
 * option (--table --batch-size 10): the value was forgotten.  Such a value
 * can still be given as --table=--x.
 */
static bool
value_forgotten(char **argv, const char *option, char *err, size_t errlen)
{
	if (optarg != argv[optind - 1] || strncmp(optarg, "--", 2) != 0)
		return false;
	snprintf(err, errlen, "%s: expected a value, got the option \"%s\" (write %s=%s if that is the value)",
			 option, optarg, option, optarg);
	return true;
}

ld_cli_result
ld_cli_parse(int argc, char **argv, ld_options *opt, char *err, size_t errlen)
{
	static const struct option longopts[] = {
		{"table", required_argument, NULL, 't'},
		{"batch-size", required_argument, NULL, 'b'},
		{"profile-out", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	const char *positional[2] = {NULL, NULL};
	int			npositional = 0;
	int			c;

	memset(opt, 0, sizeof(*opt));
	strcpy(opt->name, LD_DEFAULT_TABLE);
	opt->table = LD_DEFAULT_TABLE;
	quote_table(opt);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 't':
				if (value_forgotten(argv, "--table", err, errlen) ||
					!parse_table(optarg, opt, err, errlen))
					return LD_CLI_USAGE_ERROR;
				quote_table(opt);
				break;
			case 'b':
				if (!parse_batch_size(optarg, &opt->batch_size, err, errlen))
					return LD_CLI_USAGE_ERROR;
				break;
			case 'p':
				if (value_forgotten(argv, "--profile-out", err, errlen))
					return LD_CLI_USAGE_ERROR;
				opt->profile_out = optarg;
				break;
			case 'h':
				return LD_CLI_HELP;
			case ':':
				snprintf(err, errlen, "option %s needs a value", argv[optind - 1]);
				return LD_CLI_USAGE_ERROR;
			default:
				if (optopt != 0)
					snprintf(err, errlen, "unknown option -%c", optopt);
				else
					snprintf(err, errlen, "unknown option %s", argv[optind - 1]);
				return LD_CLI_USAGE_ERROR;
		}
	}
	for (int i = optind; i < argc; i++)
	{
		if (npositional == 2)
		{
			snprintf(err, errlen, "unexpected argument \"%s\"", argv[i]);
			return LD_CLI_USAGE_ERROR;
		}
		positional[npositional++] = argv[i];
	}
	if (npositional < 2)
	{
		snprintf(err, errlen, npositional == 0 ? "missing POSTGRES_URL and FILE" : "missing FILE");
		return LD_CLI_USAGE_ERROR;
	}
	opt->conninfo = positional[0];
	opt->file = positional[1];
	if (opt->conninfo[0] == '\0')
	{
		snprintf(err, errlen, "POSTGRES_URL is empty");
		return LD_CLI_USAGE_ERROR;
	}
	return LD_CLI_RUN;
}
