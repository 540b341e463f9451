/*
 * db.c - connection, statements and error messages for the loader.
 */
#include "db.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "log.h"
#include "order_row.h"
#include "url_mask.h"

/* Type OIDs (pg_type.dat) of the columns binary tuples can fill. */
#define INT8OID 20
#define TEXTOID 25
#define BPCHAROID 1042
#define VARCHAROID 1043
#define NUMERICOID 1700
#define TIMESTAMPTZOID 1184
#define TEXTARRAYOID 1009
#define JSONBOID 3802

/*
 * Inner line breaks become "; ", or ". " before a tab-indented hint
 * ("refused\n\tIs the server..." reads "refused. Is the server..."); a
 * tab-indented line in lower case goes on with the sentence before it
 * ("abnormally\n\tbefore or while..."), so it is joined by a space.
 */
void
ld_pq_one_line(char *out, size_t outlen, const char *msg)
{
	size_t		o = 0;

	for (const char *p = msg; *p && o + 3 < outlen; p++)
	{
		bool		tab;

		if (*p != '\n')
		{
			out[o++] = *p;
			continue;
		}
		while (p[1] == '\n')
			p++;
		if (p[1] == '\0')
			break;
		tab = p[1] == '\t';
		if (tab)
			p++;
		if (o > 0 && !(tab && p[1] >= 'a' && p[1] <= 'z') &&
			strchr(".?!:;", out[o - 1]) == NULL)
			out[o++] = tab ? '.' : ';';
		out[o++] = ' ';
	}
	out[o] = '\0';
}

static void
set_libpq_error(ld_db *db, const char *what)
{
	char		line[1024];

	if (db->conn == NULL && db->abandoned)
		return;					/* "interrupted" says it */
	ld_pq_one_line(line, sizeof(line), db->conn ? PQerrorMessage(db->conn) : "out of memory");
	if (what != NULL)
		snprintf(db->error, sizeof(db->error), "%s: %s", what, line[0] ? line : "unknown error");
	else
		snprintf(db->error, sizeof(db->error), "%s", line[0] ? line : "unknown error");
	if (db->conninfo != NULL)
		ld_scrub_message(db->conninfo, db->error, sizeof(db->error));
}

/* "COPY orders, line 5, column amount: ..." -> 5 and "amount". */
static uint64_t
copy_context_row(const char *context, char *column, size_t columnlen)
{
	const char *p = context;

	column[0] = '\0';
	while (p != NULL && (p = strstr(p, "COPY ")) != NULL)
	{
		const char *line = strstr(p, ", line ");
		char	   *end;
		unsigned long long row;

		if (line == NULL)
			return 0;
		row = strtoull(line + 7, &end, 10);
		if (end != line + 7)
		{
			if (strncmp(end, ", column ", 9) == 0)
			{
				size_t		n = strcspn(end + 9, ":\n");

				snprintf(column, columnlen, "%.*s", (int) n, end + 9);
			}
			return row;
		}
		p = line + 7;
	}
	return 0;
}

/* db->error from a failed result: "what: message: detail". */
static void
set_result_error(ld_db *db, const PGresult *res, const char *what)
{
	const char *primary;
	const char *detail;
	const char *context;
	const char *sqlstate;
	char		column[128];
	char		text[1200];

	db->error_row = 0;
	db->error_sqlstate[0] = '\0';
	if (res == NULL || (primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)) == NULL)
	{
		set_libpq_error(db, what);
		return;
	}
	detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	context = PQresultErrorField(res, PG_DIAG_CONTEXT);
	sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (sqlstate != NULL)
		snprintf(db->error_sqlstate, sizeof(db->error_sqlstate), "%s", sqlstate);
	if (context != NULL)
		db->error_row = copy_context_row(context, column, sizeof(column));
	if (detail != NULL)
		snprintf(text, sizeof(text), "%s: %s", primary, detail);
	else
		snprintf(text, sizeof(text), "%s", primary);
	if (db->error_row > 0 && column[0] != '\0')
	{
		size_t		n = strlen(text);

		snprintf(text + n, sizeof(text) - n, " (column %s)", column);
	}
	if (what != NULL)
		snprintf(db->error, sizeof(db->error), "%s: %s", what, text);
	else
		snprintf(db->error, sizeof(db->error), "%s", text);
	{
		char		folded[sizeof(db->error)];

		ld_pq_one_line(folded, sizeof(folded), db->error);
		memcpy(db->error, folded, sizeof(folded));
	}
}

/* Server NOTICEs (e.g. "relation already exists, skipping") stay quiet. */
static void
notice_receiver(void *arg, const PGresult *res)
{
	const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

	(void) arg;
	if (severity != NULL && primary != NULL && strcmp(severity, "WARNING") == 0)
		tp_warn("server: %s", primary);
}

/* An option of the connection as libpq took it (URL, keywords, PG* variables), or NULL. */
static char *
option_value(PGconn *conn, const char *keyword)
{
	PQconninfoOption *options = PQconninfo(conn);
	char	   *value = NULL;

	for (PQconninfoOption *o = options; o != NULL && o->keyword != NULL; o++)
		if (strcmp(o->keyword, keyword) == 0 && o->val != NULL)
			value = strdup(o->val);
	PQconninfoFree(options);
	return value;
}

/*
 * The connection's connect_timeout in ms (0: none), read as libpq reads
 * it: an integer, blanks around it allowed, under 2 s made 2 s.  Unset
 * (URL, PGCONNECT_TIMEOUT and service file alike): 10 s, where libpq
 * would wait for ever.  False, with db->error, for a value libpq would
 * refuse.
 */
#define DEFAULT_CONNECT_TIMEOUT_S 10

static bool
connect_timeout_ms(ld_db *db, int64_t *timeout_ms)
{
	char	   *text = option_value(db->conn, "connect_timeout");
	char	   *end = text;
	long long	seconds = 0;

	*timeout_ms = DEFAULT_CONNECT_TIMEOUT_S * 1000;
	if (text == NULL)
		return true;
	errno = 0;
	seconds = strtoll(text, &end, 10);
	while (*end == ' ' || *end == '\t')
		end++;
	if (end == text || *end != '\0' || errno != 0 || seconds > INT32_MAX)
	{
		snprintf(db->error, sizeof(db->error),
				 "invalid integer value \"%s\" for connection option \"connect_timeout\"", text);
		free(text);
		return false;
	}
	free(text);
	*timeout_ms = seconds <= 0 ? 0 : (seconds < 2 ? 2 : seconds) * 1000;
	return true;
}

static int64_t
monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Entries in a comma-separated list (libpq's host, hostaddr, port). */
static int
list_length(const char *list)
{
	int			n = 1;

	for (const char *p = list; *p != '\0'; p++)
		n += *p == ',';
	return n;
}

/* The list without its first skip entries; a single entry stays (it holds for every host). */
static const char *
list_after(const char *list, int skip)
{
	if (list_length(list) == 1)
		return list;
	for (; skip > 0 && list != NULL; skip--)
		list = (list = strchr(list, ',')) ? list + 1 : NULL;
	return list;
}

/*
 * A connection to the hosts after the first tried ones of conn's list,
 * with its other options: what libpq does when connect_timeout passes
 * (PQconnectdbParams; PQconnectPoll leaves it to the caller).  NULL when
 * none is left, or out of memory.
 */
static PGconn *
connect_to_next_hosts(PGconn *conn, int tried)
{
	PQconninfoOption *options = PQconninfo(conn);
	const char *keys[64];
	const char *values[64];
	int			n = 0;
	bool		left = false;
	PGconn	   *next = NULL;

	for (PQconninfoOption *o = options; o != NULL && o->keyword != NULL && n < 63; o++)
	{
		bool		list = strcmp(o->keyword, "host") == 0 || strcmp(o->keyword, "hostaddr") == 0 ||
			strcmp(o->keyword, "port") == 0;

		if (o->val == NULL || o->val[0] == '\0')
			continue;
		keys[n] = o->keyword;
		values[n] = list ? list_after(o->val, tried) : o->val;
		if (values[n] == NULL)
			continue;
		left |= strcmp(o->keyword, "port") != 0 && list && list_length(o->val) > tried;
		n++;
	}
	keys[n] = values[n] = NULL;
	if (left)
		next = PQconnectStartParams(keys, values, 0);
	PQconninfoFree(options);
	return next;
}

/*
 * PQconnectPoll's loop, which PQconnectdbParams runs without a way out:
 * here a byte on stop_fd (SIGINT, SIGTERM) ends the wait, for a server that
 * accepts and never answers too.  connect_timeout holds for each host and
 * port, and when it passes the next host of a list is tried, as libpq does
 * (though not each address of one host name).  True when connected; false
 * with db->error set, or on a stop.
 */
static bool
poll_connection(ld_db *db, int stop_fd)
{
	PostgresPollingStatusType status = PGRES_POLLING_WRITING;
	int64_t		timeout_ms;
	int64_t		deadline = 0;
	char		host[256] = "";
	int			hosts_tried = 0;	/* of the list the connection began with */

	if (!connect_timeout_ms(db, &timeout_ms))
		return false;
	while (status != PGRES_POLLING_OK)
	{
		struct pollfd fds[2] = {
			{.fd = PQsocket(db->conn), .events = status == PGRES_POLLING_READING ? POLLIN : POLLOUT},
			{.fd = stop_fd, .events = POLLIN},
		};
		char		now_host[sizeof(host)];
		int64_t		wait_ms = -1;

		if (status == PGRES_POLLING_FAILED)
		{
			set_libpq_error(db, NULL);
			return false;
		}
		/* A new host or port: its own connect_timeout. */
		snprintf(now_host, sizeof(now_host), "%s:%s", PQhost(db->conn), PQport(db->conn));
		if (strcmp(now_host, host) != 0)
		{
			memcpy(host, now_host, sizeof(host));
			deadline = monotonic_ms() + timeout_ms;
			hosts_tried++;
		}
		if (timeout_ms > 0 && (wait_ms = deadline - monotonic_ms()) <= 0)
		{
			PGconn	   *next = connect_to_next_hosts(db->conn, hosts_tried);

			if (next == NULL)
			{
				snprintf(db->error, sizeof(db->error),
						 "connection to server at \"%s\", port %s failed: timeout expired (connect_timeout %lld s)",
						 PQhost(db->conn), PQport(db->conn), (long long) timeout_ms / 1000);
				return false;
			}
			PQfinish(db->conn);
			db->conn = next;
			status = PQstatus(next) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
			host[0] = '\0';
			hosts_tried = 0;
			continue;
		}
		if (poll(fds, stop_fd >= 0 ? 2 : 1, wait_ms > INT32_MAX ? INT32_MAX : (int) wait_ms) < 0 &&
			errno != EINTR)
		{
			snprintf(db->error, sizeof(db->error), "waiting for the server: %s", strerror(errno));
			return false;
		}
		if (stop_fd >= 0 && fds[1].revents != 0)
		{
			snprintf(db->error, sizeof(db->error), "interrupted");
			return false;
		}
		if (fds[0].revents != 0)
			status = PQconnectPoll(db->conn);
	}
	return true;
}

/* A byte on the stop descriptor: SIGINT or SIGTERM came (the byte stays). */
static bool
stop_pending(const ld_db *db)
{
	struct pollfd fd = {.fd = db->stop_fd, .events = POLLIN};

	return db->stop_fd >= 0 && poll(&fd, 1, 0) > 0 && fd.revents != 0;
}

/*
 * On a stop: close the connection without waiting for the server (the
 * connection is nonblocking, so PQfinish's goodbye cannot block either).
 * The server rolls the open transaction back once it reads the end.
 */
static void
abandon(ld_db *db, bool unanswered)
{
	ld_db_close(db);
	db->abandoned = true;
	db->unanswered = unanswered;
	snprintf(db->error, sizeof(db->error), "interrupted");
}

/*
 * Wait until libpq has sent all it holds and, with for_result, until a
 * result can be taken without blocking, reading what the server sends
 * meanwhile (a server blocked on a full socket could not read ours).  A
 * stop ends the wait at once, also when the server has stopped reading or
 * answering: the connection is abandoned.  A connection that breaks ends
 * it too (PQstatus says so): its error shows in the result, as with
 * libpq's blocking calls.
 */
static bool
wait_server(ld_db *db, bool for_result)
{
	for (;;)
	{
		int			flushed = PQflush(db->conn);
		struct pollfd fds[2];
		int			timeout = -1;
		int			ready;

		if (flushed < 0)
		{
			set_libpq_error(db, NULL);
			return false;
		}
		if (flushed == 0 && (!for_result || !PQisBusy(db->conn)))
			return true;
		fds[0] = (struct pollfd) {.fd = PQsocket(db->conn), .events = POLLIN | (flushed ? POLLOUT : 0)};
		fds[1] = (struct pollfd) {.fd = db->stop_fd, .events = POLLIN};
		if (fds[0].fd < 0)
		{
			set_libpq_error(db, NULL);
			return false;
		}
		if (db->give_up_at > 0)
			timeout = (int) (db->give_up_at > monotonic_ms() ? db->give_up_at - monotonic_ms() : 0);
		ready = poll(fds, db->give_up_at > 0 ? 1 : 2, timeout);
		if (ready < 0 && errno != EINTR)
		{
			snprintf(db->error, sizeof(db->error), "waiting for the server: %s", strerror(errno));
			return false;
		}
		if (db->give_up_at > 0 && ready == 0)
		{
			abandon(db, true);
			return false;
		}
		if (db->give_up_at == 0 && db->stop_fd >= 0 && fds[1].revents != 0)
		{
			if (!db->answer_grace)
			{
				abandon(db, true);
				return false;
			}
			db->give_up_at = monotonic_ms() + LD_COMMIT_ANSWER_GRACE_MS;
		}
		/* a broken connection is closed now: PQflush sends nothing, PQisBusy says false */
		if ((fds[0].revents & ~POLLOUT) != 0 && !PQconsumeInput(db->conn) &&
			PQstatus(db->conn) != CONNECTION_BAD)
		{
			set_libpq_error(db, NULL);
			return false;
		}
	}
}

/*
 * PQgetResult() through wait_server(): true with *res (NULL: no more), or
 * false with db->error.  On a broken connection, what the server said
 * before it broke is a result; else libpq's message from when it broke
 * is the error, not the one it would add about the closed socket.
 */
static bool
get_result(ld_db *db, PGresult **res)
{
	bool		lost;

	*res = NULL;
	if (!wait_server(db, true))
		return false;
	lost = PQstatus(db->conn) == CONNECTION_BAD;
	if (lost)
		set_libpq_error(db, NULL);
	*res = PQgetResult(db->conn);
	if (lost && (*res == NULL || PQresultErrorField(*res, PG_DIAG_MESSAGE_PRIMARY) == NULL))
	{
		PQclear(*res);
		*res = NULL;
		return false;
	}
	return true;
}

/*
 * PQexecParams() (PQexec() when nparams is 0) made of the calls above: the
 * last result, or the COPY_IN one; NULL with db->error when there is none.
 * After a stop nothing is sent: the connection is abandoned.
 */
static PGresult *
exec_params(ld_db *db, const char *sql, int nparams, const char *const *params)
{
	PGresult   *last = NULL;
	PGresult   *res;

	if (db->conn == NULL)
	{
		db->unanswered = false; /* this one was not sent */
		if (!db->abandoned)
			snprintf(db->error, sizeof(db->error), "not connected");
		return NULL;
	}
	if (stop_pending(db))
	{
		abandon(db, false);
		return NULL;
	}
	if (!(nparams > 0 ? PQsendQueryParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0)
		  : PQsendQuery(db->conn, sql)))
	{
		set_libpq_error(db, NULL);
		return NULL;
	}
	for (;;)
	{
		/* a failure after an answer (a stop before ReadyForQuery): that answer */
		if (!get_result(db, &res) || res == NULL)
			return last;
		PQclear(last);
		last = res;
		if (PQresultStatus(res) == PGRES_COPY_IN || PQstatus(db->conn) == CONNECTION_BAD)
			return last;
	}
}

bool
ld_db_connect(ld_db *db, const char *conninfo, int stop_fd)
{
	/* Later entries override earlier ones, and the expanded URL sits in between. */
	const char *const keys[] = {"dbname", "fallback_application_name", "client_encoding", NULL};
	const char *const values[] = {conninfo, "traceprof-loader", "UTF8", NULL};
	PGresult   *res;

	memset(db, 0, sizeof(*db));
	db->conninfo = conninfo;
	db->stop_fd = stop_fd;
	db->conn = PQconnectStartParams(keys, values, 1);
	if (db->conn == NULL)
	{
		/* libpq returns NULL only when it cannot allocate its PGconn */
		db->out_of_memory = true;
		snprintf(db->error, sizeof(db->error), "out of memory");
		return false;
	}
	if (PQstatus(db->conn) == CONNECTION_BAD)
	{
		set_libpq_error(db, NULL);
		return false;
	}
	if (!poll_connection(db, stop_fd))
		return false;
	PQsetNoticeReceiver(db->conn, notice_receiver, NULL);
	if (PQsetnonblocking(db->conn, 1) != 0)
	{
		set_libpq_error(db, NULL);
		return false;
	}

	res = exec_params(db, "SELECT current_setting('traceprof.traceparent', true)", 0, NULL);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		db->traceparent_guc = !PQgetisnull(res, 0, 0);
	PQclear(res);
	return !db->abandoned;
}

void
ld_db_close(ld_db *db)
{
	if (db->conn != NULL)
		PQfinish(db->conn);
	db->conn = NULL;
}

bool
ld_db_exec(ld_db *db, const char *sql)
{
	PGresult   *res = exec_params(db, sql, 0, NULL);
	ExecStatusType st = PQresultStatus(res);
	bool		ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;

	if (!ok && res != NULL)
		set_result_error(db, res, NULL);
	PQclear(res);
	return ok;
}

bool
ld_db_set_traceparent(ld_db *db, const char *traceparent)
{
	char		sql[128];

	/* a traceparent is hex digits and dashes: nothing to escape */
	snprintf(sql, sizeof(sql), "SET traceprof.traceparent = '%s'", traceparent);
	return ld_db_exec(db, sql);
}

bool
ld_db_create_table(ld_db *db, const char *qtable)
{
	char		sql[LD_MAX_QUOTED_TABLE + 512];

	snprintf(sql, sizeof(sql),
			 "CREATE TABLE IF NOT EXISTS %s (\n"
			 "    id            bigint PRIMARY KEY,\n"
			 "    customer_id   bigint NOT NULL,\n"
			 "    customer_name text NOT NULL,\n"
			 "    amount        numeric(12,2) NOT NULL,\n"
			 "    currency      text NOT NULL,\n"
			 "    created_at    timestamptz NOT NULL,\n"
			 "    tags          text[] NOT NULL,\n"
			 "    attributes    jsonb NOT NULL\n"
			 ")", qtable);
	return ld_db_exec(db, sql);
}

typedef struct expected_column
{
	const char *name;
	const char *type;
	unsigned	oids[3];
	const char *precision;		/* what a type modifier may not round, or NULL */
} expected_column;

static const expected_column expected_columns[] = {
	{"id", "bigint", {INT8OID}},
	{"customer_id", "bigint", {INT8OID}},
	{"customer_name", "text", {TEXTOID, VARCHAROID, BPCHAROID}},
	{"amount", "numeric", {NUMERICOID}, "2 decimal places"},
	{"currency", "text", {TEXTOID, VARCHAROID, BPCHAROID}},
	{"created_at", "timestamptz", {TIMESTAMPTZOID}, "microseconds"},
	{"tags", "text[]", {TEXTARRAYOID}},
	{"attributes", "jsonb", {JSONBOID}},
};

/*
 * Whether a type modifier rounds what the loader sends, silently: numeric
 * with fewer than 2 decimal places (typmod: precision << 16 | scale, plus
 * 4; the scale may be negative since PostgreSQL 15), timestamptz with
 * fewer than 6 fractional digits.  Too few integer digits fail loudly: the
 * server refuses the value.
 */
static bool
rounds_values(unsigned oid, int typmod)
{
	if (typmod < 0)
		return false;
	if (oid == NUMERICOID)
	{
		int			scale = (typmod - 4) & 0x7ff;

		return (scale & 0x400 ? scale - 0x800 : scale) < 2;
	}
	return oid == TIMESTAMPTZOID && typmod < 6;
}

bool
ld_db_check_columns(ld_db *db, const char *qtable, const char *shown, bool *missing)
{
	const char *params[1] = {qtable};
	PGresult   *res;
	int			n;

	*missing = false;

	/*
	 * The base type under any domains (a domain may be over another), and
	 * the modifier nearest the column, so that domains over the right types
	 * pass and a modifier anywhere in the chain counts.
	 */
	res = exec_params(db,
					   "WITH RECURSIVE chain AS ("
					   "  SELECT a.attname, a.atttypid AS typid, a.atttypmod AS typmod, "
					   "         format_type(a.atttypid, a.atttypmod) AS shown "
					   "  FROM pg_attribute a "
					   "  WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped "
					   "  UNION ALL "
					   "  SELECT c.attname, t.typbasetype, "
					   "         CASE WHEN c.typmod >= 0 THEN c.typmod ELSE t.typtypmod END, c.shown "
					   "  FROM chain c JOIN pg_type t ON t.oid = c.typid WHERE t.typtype = 'd') "
					   "SELECT c.attname::text, c.typid::int8, c.shown, c.typmod "
					   "FROM chain c JOIN pg_type t ON t.oid = c.typid WHERE t.typtype <> 'd'",
					   1, params);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		if (res != NULL)
			set_result_error(db, res, NULL);
		PQclear(res);
		return false;
	}
	n = PQntuples(res);
	*missing = n == 0;
	for (size_t c = 0; c < sizeof(expected_columns) / sizeof(expected_columns[0]); c++)
	{
		const expected_column *e = &expected_columns[c];
		int			row = -1;
		unsigned	oid;
		bool		fits = false;

		for (int i = 0; i < n && row < 0; i++)
			if (strcmp(PQgetvalue(res, i, 0), e->name) == 0)
				row = i;
		if (row < 0)
		{
			snprintf(db->error, sizeof(db->error),
					 "table %s has no column \"%s\" (the loader fills %s)",
					 shown, e->name, ORDER_ROW_COLUMNS);
			PQclear(res);
			return false;
		}
		oid = (unsigned) strtoul(PQgetvalue(res, row, 1), NULL, 10);
		for (int k = 0; k < 3; k++)
			fits |= e->oids[k] != 0 && e->oids[k] == oid;
		if (!fits)
		{
			snprintf(db->error, sizeof(db->error),
					 "column \"%s\" of table %s has type %s, but the loader sends %s",
					 e->name, shown, PQgetvalue(res, row, 2), e->type);
			PQclear(res);
			return false;
		}
		if (rounds_values(oid, atoi(PQgetvalue(res, row, 3))))
		{
			snprintf(db->error, sizeof(db->error),
					 "column \"%s\" of table %s has type %s, which would round the loader's values (%s with %s)",
					 e->name, shown, PQgetvalue(res, row, 2), e->type, e->precision);
			PQclear(res);
			return false;
		}
	}
	PQclear(res);
	return true;
}

bool
ld_db_copy_start(ld_db *db, const char *qtable)
{
	char		sql[LD_MAX_QUOTED_TABLE + 256];
	PGresult   *res;
	bool		ok;

	snprintf(sql, sizeof(sql), "COPY %s (" ORDER_ROW_COLUMNS ") FROM STDIN (FORMAT binary)", qtable);
	res = exec_params(db, sql, 0, NULL);
	ok = PQresultStatus(res) == PGRES_COPY_IN;
	if (!ok && res != NULL)
		set_result_error(db, res, NULL);
	PQclear(res);
	return ok;
}

bool
ld_db_put_copy_data(ld_db *db, const char *data, size_t len)
{
	while (len > 0)
	{
		int			n = len > (size_t) 64 * 1024 * 1024 ? 64 * 1024 * 1024 : (int) len;

		if (db->conn == NULL)
			return false;		/* abandoned: db->error says so */
		if (PQputCopyData(db->conn, data, n) != 1)
		{
			set_libpq_error(db, NULL);
			return false;
		}
		/* nonblocking, libpq would take it all into memory: send it now */
		if (!wait_server(db, false))
			return false;
		data += n;
		len -= (size_t) n;
	}
	return true;
}

bool
ld_db_put_copy_end(ld_db *db, const char *reason)
{
	if (db->conn == NULL)
		return false;
	if (PQputCopyEnd(db->conn, reason) != 1)
	{
		set_libpq_error(db, NULL);
		return false;
	}
	return true;				/* sent while waiting for the result */
}

bool
ld_db_copy_result(ld_db *db, uint64_t *rows)
{
	PGresult   *res;
	bool		ok;
	char		error[sizeof(db->error)];

	*rows = 0;
	db->error_row = 0;
	db->error_sqlstate[0] = '\0';
	if (db->conn == NULL || !get_result(db, &res))
		return false;
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (ok)
		*rows = strtoull(PQcmdTuples(res), NULL, 10);
	else
		set_result_error(db, res, NULL);
	PQclear(res);
	/* the rest (up to ReadyForQuery): a connection that breaks there keeps the COPY's error */
	memcpy(error, db->error, sizeof(error));
	while (get_result(db, &res) && res != NULL)
		PQclear(res);
	if (!db->abandoned)
		memcpy(db->error, error, sizeof(error));
	return ok && !db->abandoned;
}

bool
ld_db_commit(ld_db *db)
{
	PGresult   *res;
	bool		ok;

	/*
	 * A stop once COMMIT is sent waits a little for its answer: a healthy
	 * server gives it at once, and then the batch is known committed or not.
	 */
	db->answer_grace = true;
	db->give_up_at = 0;
	res = exec_params(db, "COMMIT", 0, NULL);
	db->answer_grace = false;
	db->give_up_at = 0;
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (res == NULL)
		return false;
	if (!ok)
		set_result_error(db, res, NULL);
	else if (strcmp(PQcmdStatus(res), "COMMIT") != 0)
	{
		snprintf(db->error, sizeof(db->error),
				 "the server rolled the transaction back instead of committing it");
		ok = false;
	}
	PQclear(res);
	return ok;
}

void
ld_db_rollback(ld_db *db)
{
	char		error[sizeof(db->error)];

	/* A failed COMMIT has ended the transaction: a ROLLBACK would be warned of. */
	if (db->conn == NULL || PQstatus(db->conn) != CONNECTION_OK ||
		PQtransactionStatus(db->conn) == PQTRANS_IDLE)
		return;
	memcpy(error, db->error, sizeof(error));	/* the failure being reported */
	PQclear(exec_params(db, "ROLLBACK", 0, NULL));
	memcpy(db->error, error, sizeof(error));
}

bool
ld_db_connection_lost(const ld_db *db)
{
	return db->conn == NULL || PQstatus(db->conn) != CONNECTION_OK;
}
