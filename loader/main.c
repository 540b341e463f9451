/*
 * main.c - loader: stream order records from a file into PostgreSQL with
 * binary COPY, traced.
 *
 * The flow: read and check the first record (so a missing, empty or broken
 * file fails before any connection), connect, then per batch (one batch
 * for the whole file by default): BEGIN, a column check and, for a table
 * that is missing, CREATE TABLE IF NOT EXISTS (first batch only), COPY,
 * stream the tuples, end the COPY, COMMIT.  Any failure ends the COPY with an error (so the server discards
 * it), rolls back, prints one message and exits with the code --help lists.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "copy_stream.h"
#include "db.h"
#include "input.h"
#include "log.h"
#include "order_row.h"
#include "progress.h"
#include "pyroscope.h"
#include "self_profiler.h"
#include "stop_cancel.h"
#include "stop_signal.h"
#include "tracer.h"
#include "url_mask.h"

/*
 * How long a stop waits for its cancel request to reach the postmaster: it
 * takes a few milliseconds, and once sent it is carried out even if the
 * loader has exited, while the postmaster may not answer at all.
 */
#define LD_CANCEL_WAIT_MS 1000

/* Batches past this many share the root span, so memory stays bounded. */
#define LD_TRACED_BATCHES 100

typedef struct loader
{
	ld_options	opt;
	ld_input	in;
	ld_db		db;
	ld_copy_stream cs;
	ld_progress progress;
	tp_span    *root;
	tp_span    *copy_span;		/* the open batch's, NULL if untraced */
	double		start;
	uint64_t	batch_no;
	uint64_t	rows_in_batch;	/* tuples of the open batch written so far */
	uint64_t	rows_committed;
	uint64_t	batches_committed;
	bool		propagate;		/* SET traceprof.traceparent per phase */
} loader;

/* Print "loader: error: ..." (with the batch note), mark the spans failed. */
static int	fail(loader *ld, int code, tp_span *span, const char *fmt, ...)
			__attribute__((format(printf, 4, 5)));

static int
fail(loader *ld, int code, tp_span *span, const char *fmt, ...)
{
	char		msg[2048];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ld_stop_requested)
	{
		/* whatever failed, it failed because we cancelled it */
		code = LD_EXIT_INTERRUPTED;
		if (strncmp(msg, "interrupted", 11) != 0)
			snprintf(msg, sizeof(msg), "interrupted");
	}
	if (ld->opt.batch_size > 0 && ld->batch_no > 0)
	{
		size_t		n = strlen(msg);

		snprintf(msg + n, sizeof(msg) - n,
				 " (%llu rows in %llu earlier batch%s stay committed in %s)",
				 (unsigned long long) ld->rows_committed,
				 (unsigned long long) ld->batches_committed,
				 ld->batches_committed == 1 ? "" : "es", ld->opt.table);
	}
	ld_progress_finish(&ld->progress, ld->rows_committed + ld->rows_in_batch,
					   ld_input_offset(&ld->in));
	tp_error("%s", msg);
	if (span != NULL)
	{
		tp_span_set_error(span, msg);
		tp_span_end(span);
	}
	tp_span_set_error(ld->root, msg);
	return code;
}

/*
 * A connection parameter as libpq read it, or NULL if empty or if it shows
 * part of a password (a misread URL puts one into the host or database).
 */
static const char *
shown_parameter(const ld_db *db, const char *v)
{
	if (v == NULL || *v == '\0' ||
		(db->conninfo != NULL && ld_conninfo_reveals(db->conninfo, v)))
		return NULL;
	return v;
}

static void
set_db_attributes(tp_span *span, const ld_db *db, const char *table)
{
	const char *v;

	tp_span_set_string(span, "db.system.name", "postgresql");
	if (db->conn != NULL)
	{
		if ((v = shown_parameter(db, PQdb(db->conn))) != NULL)
			tp_span_set_string(span, "db.namespace", v);
		if ((v = shown_parameter(db, PQhost(db->conn))) != NULL)
			tp_span_set_string(span, "server.address", v);
		if ((v = shown_parameter(db, PQport(db->conn))) != NULL)
			tp_span_set_int(span, "server.port", strtol(v, NULL, 10));
	}
	if (table != NULL)
		tp_span_set_string(span, "db.collection.name", table);
}

static tp_span *
start_db_span(loader *ld, const char *name, const char *operation)
{
	tp_span    *span = tp_span_start(name, TP_SPAN_CLIENT, ld->root);

	set_db_attributes(span, &ld->db, ld->opt.table);
	tp_span_set_string(span, "db.operation.name", operation);
	if (ld->opt.batch_size > 0)
		tp_span_set_int(span, "loader.batch", (int64_t) ld->batch_no);
	return span;
}

/* Hand the current span's context to the server's traceprof extension. */
static void
propagate(loader *ld, const tp_span *span)
{
	char		traceparent[TP_TRACEPARENT_LEN + 1];

	if (!ld->propagate)
		return;
	tp_span_traceparent(span, traceparent);
	if (!ld_db_set_traceparent(&ld->db, traceparent))
	{
		if (ld->db.abandoned)
			return;				/* a stop: the next statement fails saying so */
		tp_warn("cannot set traceprof.traceparent (%s); the server's spans will not join the trace",
				ld->db.error);
		ld->propagate = false;
	}
}

/* The exit code for an LD_INPUT_ERROR. */
static int
input_error_code(const loader *ld)
{
	if (ld->in.interrupted)
		return LD_EXIT_INTERRUPTED;
	return ld->in.out_of_memory ? LD_EXIT_INTERNAL : LD_EXIT_INPUT;
}

static int
input_failure(loader *ld, tp_span *span)
{
	return fail(ld, input_error_code(ld), span, "%s", ld->in.message);
}

/*
 * Whether an error the server raised at a record of the COPY is about that
 * record: not a cancel, a timeout or a shutdown (57), the connection (08),
 * resources (53), a deadlock or serialization failure (40), a lock not
 * available (55), a system or internal error (58, XX), which come at
 * whatever record the COPY had reached.
 */
static bool
blames_the_record(const char *sqlstate)
{
	static const char *const not_the_records[] = {"57", "08", "53", "40", "55", "58", "XX"};

	for (size_t i = 0; i < sizeof(not_the_records) / sizeof(not_the_records[0]); i++)
		if (strncmp(sqlstate, not_the_records[i], 2) == 0)
			return false;
	return true;
}

/* The server refused the COPY data (or the connection broke). */
static int
copy_failure(loader *ld)
{
	tp_span    *span = ld->copy_span;
	uint64_t	record = ld->rows_committed + ld->db.error_row;	/* in the whole file */

	ld->copy_span = NULL;
	ld_db_rollback(&ld->db);
	if (ld->db.error_row == 0)
		return fail(ld, LD_EXIT_DATABASE, span, "COPY into %s failed: %s",
					ld->opt.table, ld->db.error);
	if (!blames_the_record(ld->db.error_sqlstate))
		return fail(ld, LD_EXIT_DATABASE, span, "COPY into %s failed at record %llu: %s",
					ld->opt.table, (unsigned long long) record, ld->db.error);
	return fail(ld, LD_EXIT_DATABASE, span, "%s: record %llu: rejected by the server: %s",
				ld->opt.file, (unsigned long long) record, ld->db.error);
}

/*
 * Give up on the open batch because of something on our side (bad input,
 * interruption).  The server has checked every row sent before; if it
 * refused one of them, that error came first and is the one reported.
 */
static int
abort_batch(loader *ld, int code, const char *message)
{
	uint64_t	rows;

	if (ld_copy_abort(&ld->cs, &ld->db, "loader: input rejected") &&
		!ld_db_copy_result(&ld->db, &rows) && ld->db.error_row > 0 &&
		strcmp(ld->db.error_sqlstate, "57014") != 0 && code != LD_EXIT_INTERRUPTED)
		return copy_failure(ld);
	ld_db_rollback(&ld->db);
	{
		tp_span    *span = ld->copy_span;

		ld->copy_span = NULL;
		return fail(ld, code, span, "%s", message);
	}
}

static int
connect_phase(loader *ld)
{
	tp_span    *span = tp_span_start("loader.connect", TP_SPAN_CLIENT, ld->root);
	bool		ok = ld_db_connect(&ld->db, ld->opt.conninfo, ld_stop_fd());

	set_db_attributes(span, &ld->db, NULL);
	if (!ok)
	{
		char		shown[1024];

		ld_mask_conninfo(ld->opt.conninfo, shown, sizeof(shown));
		return fail(ld, ld->db.out_of_memory ? LD_EXIT_INTERNAL : LD_EXIT_DATABASE, span,
					"cannot connect to %s: %s", shown, ld->db.error);
	}
	tp_span_end(span);
	/* From here on a signal also cancels the statement in progress. */
	if (!ld_stop_cancel_start(ld->db.conn, ld_stop_fd()))
		tp_warn("cannot start the thread that cancels a statement on SIGINT: "
				"a signal will close the connection without cancelling");
	ld->propagate = ld->db.traceparent_guc;
	return LD_EXIT_OK;
}

/*
 * The table for the first batch, in its transaction: created only when
 * missing (a role may load into a table of a schema it cannot create in,
 * and CREATE TABLE IF NOT EXISTS checks that right first), its columns
 * checked.  A loader that created the same table meanwhile, not yet
 * committed, makes our CREATE wait for it, then fail as a duplicate: the
 * transaction starts again once, and finds the table.
 */
static int
prepare_table(loader *ld, tp_span *span, bool may_retry)
{
	bool		missing;
	bool		fits = ld_db_check_columns(&ld->db, ld->opt.qtable, ld->opt.table, &missing);

	if (!fits && missing)
	{
		if (!ld_db_create_table(&ld->db, ld->opt.qtable))
		{
			bool		raced = strcmp(ld->db.error_sqlstate, "23505") == 0 ||
				strcmp(ld->db.error_sqlstate, "42P07") == 0;

			ld_db_rollback(&ld->db);
			if (raced && may_retry && ld_db_exec(&ld->db, "BEGIN"))
				return prepare_table(ld, span, false);
			ld->copy_span = NULL;
			return fail(ld, LD_EXIT_DATABASE, span, "cannot create table %s: %s",
						ld->opt.table, ld->db.error);
		}
		fits = ld_db_check_columns(&ld->db, ld->opt.qtable, ld->opt.table, &missing);
	}
	if (!fits)
	{
		ld_db_rollback(&ld->db);
		ld->copy_span = NULL;
		return fail(ld, LD_EXIT_DATABASE, span, "cannot load into %s: %s",
					ld->opt.table, ld->db.error);
	}
	return LD_EXIT_OK;
}

/* Server side of a batch: BEGIN, (column check, CREATE TABLE), COPY. */
static int
begin_batch(loader *ld)
{
	tp_span    *span = NULL;

	ld->batch_no++;
	if (ld->batch_no <= LD_TRACED_BATCHES)
	{
		span = start_db_span(ld, "loader.copy", "COPY");
		propagate(ld, span);
	}
	else if (ld->batch_no == LD_TRACED_BATCHES + 1)
	{
		tp_span_set_int(ld->root, "loader.traced_batches", LD_TRACED_BATCHES);
		propagate(ld, ld->root);
	}
	ld->copy_span = span;
	if (!ld_db_exec(&ld->db, "BEGIN"))
	{
		ld->copy_span = NULL;
		return fail(ld, LD_EXIT_DATABASE, span, "BEGIN failed: %s", ld->db.error);
	}
	if (ld->batch_no == 1)
	{
		int			rc = prepare_table(ld, span, true);

		if (rc != LD_EXIT_OK)
			return rc;
	}
	if (!ld_db_copy_start(&ld->db, ld->opt.qtable))
	{
		ld_db_rollback(&ld->db);
		ld->copy_span = NULL;
		return fail(ld, LD_EXIT_DATABASE, span, "cannot start COPY into %s: %s",
					ld->opt.table, ld->db.error);
	}
	return LD_EXIT_OK;
}

/* End the COPY and commit the batch. */
static int
end_batch(loader *ld)
{
	tp_span    *span;
	uint64_t	rows;

	if (!ld_copy_finish(&ld->cs, &ld->db))
	{
		tp_span    *cspan = ld->copy_span;

		ld->copy_span = NULL;
		ld_db_rollback(&ld->db);
		return fail(ld, LD_EXIT_DATABASE, cspan, "COPY into %s failed: %s",
					ld->opt.table, ld->cs.error);
	}
	if (!ld_db_copy_result(&ld->db, &rows))
		return copy_failure(ld);
	if (ld->copy_span != NULL)
	{
		/* Rows written, as the server's COPY span says it (db.response.returned_rows: rows sent back). */
		tp_span_set_int(ld->copy_span, "traceprof.rows_affected", (int64_t) rows);
		tp_span_end(ld->copy_span);
		ld->copy_span = NULL;
	}

	span = ld->batch_no <= LD_TRACED_BATCHES ? start_db_span(ld, "loader.commit", "COMMIT") : NULL;
	if (span != NULL)
		propagate(ld, span);
	if (!ld_db_commit(&ld->db))
	{
		if (ld->db.unanswered)
			return fail(ld, LD_EXIT_INTERRUPTED, span,
						"interrupted during COMMIT; whether the last %llu rows were committed is unknown",
						(unsigned long long) ld->rows_in_batch);
		/* a stop before COMMIT was sent: "interrupted" (fail() says it) */
		if (ld_db_connection_lost(&ld->db))
			return fail(ld, LD_EXIT_DATABASE, span,
						"lost the connection during COMMIT; whether the last %llu rows were committed is unknown: %s",
						(unsigned long long) ld->rows_in_batch, ld->db.error);
		ld_db_rollback(&ld->db);
		return fail(ld, LD_EXIT_DATABASE, span, "COMMIT failed: %s", ld->db.error);
	}
	if (span != NULL)
		tp_span_end(span);
	ld->rows_committed += rows;
	ld->batches_committed++;
	ld->rows_in_batch = 0;
	return LD_EXIT_OK;
}

static int
run(loader *ld)
{
	jr_record	rec;
	ld_input_result ir;
	int			rc;

	if (!ld_input_open(&ld->in, ld->opt.file))
		return input_failure(ld, NULL);
	ld->in.stop = &ld_stop_requested;
	ld->in.stop_fd = ld_stop_fd();
	if (!ld_copy_init(&ld->cs))
		return fail(ld, LD_EXIT_INTERNAL, NULL, "out of memory");
	ld_progress_init(&ld->progress, isatty(STDERR_FILENO) == 1, ld->in.size);

	/* The first record, checked before connecting. */
	ir = ld_input_next(&ld->in, &rec);
	if (ir != LD_INPUT_RECORD)
		return input_failure(ld, NULL);
	if (!ld_copy_begin(&ld->cs) || !order_row_append(&ld->in.reader, &rec, &ld->cs.buf))
	{
		ld_input_set_record_error(&ld->in);
		return input_failure(ld, NULL);
	}
	ld->rows_in_batch = 1;

	if ((rc = connect_phase(ld)) != LD_EXIT_OK)
		return rc;

	for (;;)
	{
		/* The batch's first tuple is in the buffer already. */
		if (ld_stop_requested)
			return fail(ld, LD_EXIT_INTERRUPTED, NULL, "interrupted");
		if ((rc = begin_batch(ld)) != LD_EXIT_OK)
			return rc;
		ir = LD_INPUT_RECORD;
		while (ld->opt.batch_size == 0 || ld->rows_in_batch < ld->opt.batch_size)
		{
			ir = ld_input_next(&ld->in, &rec);
			if (ir == LD_INPUT_END)
				break;
			if (ir == LD_INPUT_ERROR)
				return abort_batch(ld, input_error_code(ld), ld->in.message);
			if (ld_stop_requested)
				return abort_batch(ld, LD_EXIT_INTERRUPTED, "interrupted");
			if (!order_row_append(&ld->in.reader, &rec, &ld->cs.buf))
			{
				ld_input_set_record_error(&ld->in);
				return abort_batch(ld, ld->in.out_of_memory ? LD_EXIT_INTERNAL : LD_EXIT_INPUT,
								   ld->in.message);
			}
			ld->rows_in_batch++;
			if (!ld_copy_tuple_done(&ld->cs, &ld->db))
			{
				tp_span    *span = ld->copy_span;

				ld->copy_span = NULL;
				ld_db_rollback(&ld->db);
				return fail(ld, LD_EXIT_DATABASE, span, "COPY into %s failed: %s",
							ld->opt.table, ld->cs.error);
			}
			ld_progress_update(&ld->progress, ld->rows_committed + ld->rows_in_batch,
							   ld_input_offset(&ld->in));
			if ((ld->rows_in_batch & 4095) == 0)
				tp_self_profiler_tick();
		}
		/* a signal during the last read must not be answered by a COMMIT */
		if (ld_stop_requested)
			return abort_batch(ld, LD_EXIT_INTERRUPTED, "interrupted");
		if ((rc = end_batch(ld)) != LD_EXIT_OK)
			return rc;
		if (ir == LD_INPUT_END)
			break;

		/* Next batch: its first record, before the server is involved. */
		ir = ld_input_next(&ld->in, &rec);
		if (ir == LD_INPUT_END)
			break;
		if (ir == LD_INPUT_ERROR)
			return input_failure(ld, NULL);
		if (!ld_copy_begin(&ld->cs) || !order_row_append(&ld->in.reader, &rec, &ld->cs.buf))
		{
			ld_input_set_record_error(&ld->in);
			return input_failure(ld, NULL);
		}
		ld->rows_in_batch = 1;
	}

	{
		double		elapsed = ld_now() - ld->start;

		ld_progress_finish(&ld->progress, ld->rows_committed, ld_input_offset(&ld->in));
		fprintf(stderr, "loader: loaded %llu rows into %s in %.2f s (%.0f rows/s)\n",
				(unsigned long long) ld->rows_committed, ld->opt.table, elapsed,
				elapsed > 0 ? (double) ld->rows_committed / elapsed : 0.0);
	}
	return LD_EXIT_OK;
}

int
main(int argc, char **argv)
{
	static loader ld;
	char		err[512];
	char		trace_id[TP_TRACE_ID_HEX + 1];
	int			rc;

	/*
	 * Whoever reads stderr (2>&1 | head -1) may go before we are done: a
	 * write to it then fails with EPIPE, which we ignore, instead of
	 * killing the run before its spans are sent and --profile-out written.
	 */
	(void) signal(SIGPIPE, SIG_IGN);
	tp_log_set_program("loader");
	tp_log_hold_standard_fds();
	switch (ld_cli_parse(argc, argv, &ld.opt, err, sizeof(err)))
	{
		case LD_CLI_HELP:
			ld_cli_help(stdout);
			return LD_EXIT_OK;
		case LD_CLI_RUN:
			/* The profile is written last, when FILE has been read: not over it. */
			if (tp_self_profiler_check_out(ld.opt.profile_out, ld.opt.file, "FILE", "input",
										   err, sizeof(err)))
				break;
			/* FALLTHROUGH */
		case LD_CLI_USAGE_ERROR:
			tp_error("%s (usage: loader POSTGRES_URL FILE [--table T] [--batch-size N] [--profile-out FILE]; see loader --help)", err);
			return LD_EXIT_USAGE;
	}

	/* First: a signal during the setup below must be an interruption too. */
	if (!ld_stop_install())
		tp_warn("cannot create a pipe (%s): SIGINT may not stop a wait for input", strerror(errno));
	ld.start = ld_now();
	ld.in.fd = -1;
	tp_tracer_init("traceprof.loader");
	/* A signal once the run is over cuts its telemetry short (see below). */
	tp_tracer_set_cancel(&ld_final_stop_requested);
	tp_pyroscope_set_env_cancel(&ld_final_stop_requested);
	ld.root = tp_span_start("loader.run", TP_SPAN_INTERNAL, NULL);
	tp_span_trace_id_hex(ld.root, trace_id);
	fprintf(stderr, "loader: trace_id=%s\n", trace_id);
	tp_span_set_string(ld.root, "loader.file", ld.opt.file);
	tp_span_set_string(ld.root, "loader.table", ld.opt.table);
	tp_span_set_int(ld.root, "loader.batch_size", (int64_t) ld.opt.batch_size);
	/* Grafana finds a span's profiles by its service.name: the application defaults to it. */
	tp_self_profiler_start(ld.root, tp_tracer_service_name(), ld.opt.profile_out);

	rc = run(&ld);

	/*
	 * The run is over, connected or not: a SIGINT or SIGTERM from here on
	 * stops the uploads of spans and profiles at once (a second one kills),
	 * and the loader exits 130 saying so; what was sent and the
	 * --profile-out file are kept.  It used to be the default action after
	 * a connection (killed, no message, no --profile-out), and nothing
	 * without one (a wait for the whole export timeout).
	 */
	ld_stop_cancel_end(LD_CANCEL_WAIT_MS);
	ld_stop_final_phase();
	/* Interrupted, the user waits: say for what, and how not to. */
	if (rc == LD_EXIT_INTERRUPTED && (tp_tracer_has_spans_to_send() || tp_self_profiler_uploading()))
		fprintf(stderr, "loader: sending the run's spans and profiles (each within its timeout); "
				"interrupt again to skip them\n");
	tp_span_set_int(ld.root, "loader.rows", (int64_t) ld.rows_committed);
	tp_span_set_int(ld.root, "loader.bytes", (int64_t) ld_input_offset(&ld.in));
	/* The run's span ends with its work, not after the final upload. */
	tp_self_profiler_stop();
	tp_span_end(ld.root);
	tp_self_profiler_finish();
	ld_db_close(&ld.db);
	ld_copy_free(&ld.cs);
	ld_input_close(&ld.in);
	tp_tracer_shutdown();
	if (ld_final_stop_requested && rc != LD_EXIT_INTERRUPTED)
	{
		tp_error("interrupted");	/* not said yet: the run itself ended */
		rc = LD_EXIT_INTERRUPTED;
	}
	return rc;
}
