/*
 * db.h - the loader's conversation with PostgreSQL through libpq.
 *
 * Every failing call leaves one line in db->error (server message and
 * detail, or libpq's message; passwords scrubbed) and, for errors raised
 * while the server processed COPY data, the row it was at.
 *
 * The connection is nonblocking: every wait for the server (to take data,
 * to answer) is a poll() that also watches the stop descriptor, so a
 * server that stops reading or answering cannot hold a SIGINT or SIGTERM
 * up.  On a stop the connection is abandoned: closed at once (the server
 * rolls the open transaction back when it reads the end of it), db->conn
 * NULL, db->error "interrupted", and no statement is sent any more.
 */
#ifndef LD_DB_H
#define LD_DB_H

#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

typedef struct ld_db
{
	PGconn	   *conn;
	const char *conninfo;		/* as given: for scrubbing messages */
	bool		traceparent_guc;	/* the server knows traceprof.traceparent */
	bool		out_of_memory;	/* the last failure was libpq's allocation */
	char		error[1536];
	uint64_t	error_row;		/* "COPY t, line N" of the last error, or 0 */
	char		error_sqlstate[6];
	int			stop_fd;		/* readable once a stop came, or -1 */
	bool		abandoned;		/* closed on a stop */
	bool		unanswered;		/* ... with a statement sent and not answered */
	bool		answer_grace;	/* after a stop, the statement sent may still answer... */
	int64_t		give_up_at;		/* ... until then (monotonic ms; 0: no stop yet) */
} ld_db;

/* How long a COMMIT sent may still answer after a stop (ld_db_commit). */
#define LD_COMMIT_ANSWER_GRACE_MS 3000

/*
 * Connect (URL or keyword/value string; PG* environment variables apply),
 * with fallback_application_name=traceprof-loader, client_encoding=UTF8
 * and a 10 s connect_timeout unless conninfo sets one.  Then find out
 * whether the traceprof extension's traceparent setting exists.  A byte
 * readable on stop_fd (or -1: none) ends the attempt: false.
 */
bool		ld_db_connect(ld_db *db, const char *conninfo, int stop_fd);
void		ld_db_close(ld_db *db);

/* Run a statement that returns no rows of interest. */
bool		ld_db_exec(ld_db *db, const char *sql);

/* SET traceprof.traceparent (only call when db->traceparent_guc). */
bool		ld_db_set_traceparent(ld_db *db, const char *traceparent);

/*
 * qtable: a quoted table name (ld_options.qtable, at most
 * LD_MAX_QUOTED_TABLE bytes).
 *
 * CREATE TABLE IF NOT EXISTS with the documented schema.
 */
bool		ld_db_create_table(ld_db *db, const char *qtable);

/*
 * Check that the table has the columns the binary tuples fill, with types
 * that accept them (binary COPY does not convert between types).  On
 * failure, *missing tells a table that does not exist (or has no column
 * at all) from one that does not fit.
 */
bool		ld_db_check_columns(ld_db *db, const char *qtable, const char *shown, bool *missing);

/* Send COPY ... FROM STDIN (FORMAT binary); the server awaits data. */
bool		ld_db_copy_start(ld_db *db, const char *qtable);

/* COPY data, all sent before it returns (copy_stream.c calls these). */
bool		ld_db_put_copy_data(ld_db *db, const char *data, size_t len);

/* PQputCopyEnd(): reason NULL ends the COPY, else makes the server fail it. */
bool		ld_db_put_copy_end(ld_db *db, const char *reason);

/*
 * After PQputCopyEnd(): read the COPY's outcome.  *rows: rows the server
 * took.  On failure db->error_row tells the row the server was at (if it
 * said), and error_sqlstate is 57014 when the failure is our own abort.
 */
bool		ld_db_copy_result(ld_db *db, uint64_t *rows);

/*
 * COMMIT, and make sure it committed (a failed transaction rolls back).
 * A stop once it is sent waits up to LD_COMMIT_ANSWER_GRACE_MS for its
 * answer, then abandons the connection: db->unanswered (whether it
 * committed is unknown).  A stop before it is sent abandons at once.
 */
bool		ld_db_commit(ld_db *db);

/*
 * ROLLBACK, ignoring errors (the connection may be gone, or abandoned).  A
 * COPY must be ended first (ld_copy_abort): libpq sends no query during one.
 */
void		ld_db_rollback(ld_db *db);

/*
 * A libpq message (PQerrorMessage and the like) as one line: trailing
 * newlines dropped, inner ones folded; copy_stream.c reports with it too.
 */
void		ld_pq_one_line(char *out, size_t outlen, const char *msg);

/* The connection is gone (so the outcome of a COMMIT is unknown, etc.). */
bool		ld_db_connection_lost(const ld_db *db);

#endif
