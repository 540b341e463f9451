/*
 * statement_spans.c - planner, executor and utility hooks that turn traced
 * statements into spans.
 *
 * A top-level statement gets a SERVER span whose parent is the caller's
 * context (sqlcommenter comment, else traceprof.traceparent, else a new
 * sampled root per traceprof.sample_rate).  Planning gets a child span.
 * With traceprof.track = all, statements run inside functions get child
 * spans of the span that ran them.
 *
 * Spans normally close in the hook that opened them.  Errors are not caught
 * in the planner and executor hooks: a PG_TRY costs every statement a
 * sigsetjmp, traced or not.  Instead a top-level hook running with spans
 * open pushes an error context callback that remembers the error raised
 * below it, and the (sub)transaction abort that every error ends in closes
 * the spans opened since the (sub)transaction began, with that error's
 * SQLSTATE and message, and puts back the nesting counted when it began.
 * An error nobody catches ends its spans earlier, when it is reported
 * (emit_log_hook), so that they are stored before the client hears of it.
 * Only ProcessUtility keeps a PG_TRY: a procedure's own ROLLBACK aborts the
 * transaction in the middle of a CALL, and the count of utility statements
 * under way is what tells that abort from an error's.  And, with track =
 * all, the planning of a nested statement under a traced one: its span
 * opens at ExecutorStart, so planning that fails would leave it none
 * (traceprof_nested_planner).
 */
#include "postgres.h"

#include <time.h>

#include "access/parallel.h"
#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/prepare.h"
#include "common/hashfn.h"
#include "common/pg_prng.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "libpq/libpq-be.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "optimizer/planner.h"
#include "parser/analyze.h"
#include "replication/walsender.h"
#include "storage/ipc.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/elog.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/queryjumble.h"

#include "sqlcommenter.h"
#include "span.h"
#include "traceprof.h"

#define MAX_OPEN_SPANS 32

typedef struct OpenSpan
{
	TraceprofSpan *record;		/* preallocated, TraceprofSpanSize() bytes */
	TraceprofSpan *root;		/* the top-level span it belongs to */
	bool		top_level;		/* a client's statement, not nested in ours */
	bool		ended;			/* stored already, popped once on top */
	bool		awaiting_executor;	/* opened by the planner, not yet run */
	bool		awaiting_xact_end;	/* COMMIT/ROLLBACK: ends when the xact does */
	bool		ran;			/* executor span: a run of it started */
	SubTransactionId subid;		/* the (sub)transaction it was opened in */
	QueryDesc  *query_desc;		/* executor span: its query; else NULL */
	TimestampTz planned_in;		/* the message that decided it (DecidedStatement) */
	int64		cpu_start_ns;	/* -1: CPU time not tracked */
	uint64		rows_run;		/* es_processed summed over its runs (pages) */
	/* When its work last paused (an Execute's run ended, a Bind planned it), in which message. */
	int64		paused_at_ns;	/* 0: not paused */
	/* The message's statement_timestamp(); not paused: the message it last opened or ran in. */
	TimestampTz paused_in;
	bool		paused_sampling;	/* the timer ran when its work paused */
	/* The three counters a span reports, not the whole usage structs. */
	int64		shared_blks_hit_start;
	int64		shared_blks_read_start;
	uint64		wal_bytes_start;
} OpenSpan;

static OpenSpan open_spans[MAX_OPEN_SPANS];
TP_HOT static int	open_count;

/*
 * The open span whose ids the samples carry: the span at work
 * (label_at_work), NULL outside every one (an untraced statement, a kept
 * portal's pause).  While the profiler is dormant it sets no label: the
 * one asked for is set when it wakes (statement_labels).
 */
TP_HOT static const OpenSpan *labelled_span;
TP_HOT static int	nesting_level;		/* executor and utility nesting */
TP_HOT static int	plan_nesting;
TP_HOT static int	utility_depth;		/* ProcessUtility calls under way */
TP_HOT static const char *prepared_text;	/* what a top-level EXECUTE runs, while it does */
/* That EXECUTE's own bytes, while it runs, when a comment of theirs holds a traceparent; else NULL. */
TP_HOT static const char *execute_comment;
static int	execute_comment_len;

/*
 * The client's statement parse analysis saw last (client_statement_parsed):
 * where a statement PostgreSQL does not locate, a rule's action replacing
 * it, stands in its query string.  Only for the message it was parsed in: a
 * later text may be allocated where this one was freed.
 */
static struct
{
	const char *source;
	int			location;
	int			len;
	TimestampTz message;
}			client_parsed;

/* Where the PREPARE stands in prepared_text, for the unlocated statements it runs. */
static int	prepared_location;
static int	prepared_len;

/* The nesting when a subtransaction began, by transaction nesting level. */
typedef struct NestingAtStart
{
	SubTransactionId subid;
	int			nesting_level;
	int			plan_nesting;
} NestingAtStart;

static NestingAtStart *subxact_starts;
static int	subxact_starts_size;

/* The last error raised below a top-level hook while spans were open, if error_raised. */
TP_HOT static bool error_raised;
static struct
{
	int			sqlerrcode;
	char		message[256];
} raised;

/*
 * Our emit_log_hook is at work (an error is being reported), or a failed
 * planning's span is made (nested_planning_failed): no catalog lookup.
 */
static bool reporting_error;

/*
 * The statement whose tracing the planner already decided (traced or not),
 * so that ExecutorStart does not decide again: no second sampling draw, no
 * second count of a malformed comment.  Identified by query id and place in
 * the source text, since the extended protocol executes a copy of the plan.
 * With query ids off, every extended-protocol statement has id 0 and
 * place 0: the message that decided tells them apart, as the creation time
 * of the portal that runs the statement (pipelined Binds: a statement
 * planned in one, another run from a cached plan before it).
 * Cached plans skip the planner and are decided in ExecutorStart.  A
 * custom plan made right after a generic one keeps the decision.  The
 * further queries a rule adds (canSetTag false) decide nothing: they run in
 * their statement's span.
 */
typedef struct DecidedStatement
{
	bool		pending;
	uint64		query_id;
	int			location;
	int			len;
	TimestampTz message;		/* of the decision: its portal's creation_time */
} DecidedStatement;

TP_HOT static DecidedStatement decided;

/*
 * The client message (by its statement_timestamp(), set as each arrives)
 * during which a hook decided about the top-level statement under way; 0
 * once that statement is done.  An error reported while no statement of the
 * message is under way failed before our hooks ran (record_failed_message):
 * a later statement of a multi-statement message, or the commit after the
 * last one.
 */
TP_HOT static TimestampTz decided_in_message;

/*
 * The record of the last top-level span that ended in the transaction under
 * way, NULL if none: a Sync's implicit commit that fails is that
 * statement's (record_failed_commit).  It holds that span until the stack
 * next empties: whatever opens in its slot is a top-level span or sits
 * above one, whose end (or its transaction's abort) replaces this first.
 */
TP_HOT static TraceprofSpan *last_top_level_span;
/* Whether that statement ran: a Bind's portal dropped unrun ends with no commit to fail. */
static bool last_top_level_ran;

/*
 * While a client's session cannot trace, the planner, executor and utility
 * hooks are out of their chains and only post-parse analysis stays, to see
 * a comment (see "Hook bypass" below).
 */
TP_HOT static bool hooks_bypassed;

/*
 * The message (statement_timestamp()) in which a setting put the hooks back
 * in the middle of a statement, 0 if none: our counts then start inside
 * it, so nesting_level counts one more until the statement is over: at
 * the next client statement parsed (client_statement_parsed) or the next
 * message.  Not before: planning runs no portal, yet what a function
 * folded while planning runs is as nested as what a portal runs.
 */
TP_HOT static TimestampTz engaged_in_message;

static inline void
end_engagement_offset(void)
{
	nesting_level = 0;
	engaged_in_message = 0;
}

static pg_noinline void
settle_engagement_now(void)
{
	if (GetCurrentStatementStartTimestamp() != engaged_in_message)
		end_engagement_offset();
}

/* At a hook's entry: a later message's statements are not the one that engaged the hooks. */
static inline void
settle_engagement(void)
{
	if (unlikely(engaged_in_message != 0))
		settle_engagement_now();
}

/* After a transaction's end or a subtransaction's abort reset the counts: one more while still counting in. */
static inline void
keep_engagement_offset(void)
{
	if (unlikely(engaged_in_message != 0) && nesting_level == 0)
		nesting_level = 1;
}

/* A top-level statement is done: what fails next is not its own. */
static inline void
statement_done(void)
{
	if (nesting_level == 0 && plan_nesting == 0)
		decided_in_message = 0;
}

TP_HOT static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;
TP_HOT static planner_hook_type prev_planner = NULL;
TP_HOT static ExecutorStart_hook_type prev_ExecutorStart = NULL;
TP_HOT static ExecutorRun_hook_type prev_ExecutorRun = NULL;
TP_HOT static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
TP_HOT static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;
TP_HOT static ProcessUtility_hook_type prev_ProcessUtility = NULL;
TP_HOT static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * A client's own statement: not one run by a statement of ours (executor,
 * utility, planning: functions folded or evaluated while planning) nor by a
 * trigger.  Deferred triggers (foreign keys declared INITIALLY DEFERRED, as
 * Django makes them) run their statements at COMMIT, outside every hook of
 * ours; only the trigger depth tells them from the client's.
 */
static inline bool
at_top_level(void)
{
	return nesting_level == 0 && plan_nesting == 0 && DatumGetInt32(pg_trigger_depth(NULL)) == 0;
}

/*
 * Whether a top-level plan or run is of the client's statement, not of an
 * expression PostgreSQL evaluates for the message outside any statement (a
 * domain's CHECK calling a PL/pgSQL function, at Bind).  Such a plan has
 * text of its own (the client's is planned with the message's very text);
 * such a run has no portal (the client's runs in one).  EXECUTE plans and
 * runs its prepared statement's text (a function in its parameters plans
 * its own); other kinds of process have no client message.
 */
static inline bool
is_clients_plan(const char *text)
{
	return text == debug_query_string || (text == prepared_text && text != NULL) ||
		MyBackendType != B_BACKEND;
}

static inline bool
is_clients_run(void)
{
	return ActivePortal != NULL || MyBackendType != B_BACKEND;
}

/*
 * The text a run's statement came from.  ExecuteQuery runs its prepared
 * statement in a portal holding a copy of the text: planned again, the plan
 * was made from prepared_text itself, but a cached plan starts its run with
 * the copy, which must be known for the EXECUTE's as well.
 */
static inline const char *
run_source(const QueryDesc *query_desc)
{
	const char *text = query_desc->sourceText;

	if (unlikely(prepared_text != NULL) && text != prepared_text && text != NULL &&
		strcmp(text, prepared_text) == 0)
		return prepared_text;
	return text;
}

/*
 * A system call (1-1.5 us on this project's VM, where a select-only
 * transaction costs ~45 us of server CPU), hence traceprof.track_cpu_time.
 */
static int64
thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Where a span about to open belongs: decided before anything is looked up. */
typedef struct SpanParent
{
	tp_span_context context;
	const char *trace_state;	/* the caller's tracestate as kept, or NULL */
	uint16		trace_state_len;
	bool		remote;			/* the caller's span, not one of ours */
	bool		nested;			/* under the open span at work (parent_at_work) */
	TraceprofSpan *root;		/* nested: that span's top-level span */
	const char *source;			/* the statement's source text, or NULL */
	int			location;		/* the statement within it, as in a Query */
	int			len;
	Oid			owner;			/* whose span; InvalidOid: the role at work */
} SpanParent;

/*
 * The context of a statement's comment, if it holds a valid traceparent:
 * TP_COMMENT_VALID, and *traced says whether it is sampled.  Out of line,
 * as each way of deciding is: a statement runs only one of them, and its
 * instruction-cache lines are most of what tracing it costs.
 */
static pg_noinline tp_comment_result
context_from_comment(const char *text, int len, SpanParent *parent, bool *traced)
{
	/* Static: the span about to open copies the tracestate from it. */
	static tp_comment_context comment;

	tp_sqlcomment_context(text, len, &comment);
	if (comment.parent_result == TP_COMMENT_MALFORMED)
		span_store_count_malformed();
	if (comment.parent_result != TP_COMMENT_VALID)
		return comment.parent_result;
	parent->context = comment.parent;
	parent->remote = true;
	*traced = (parent->context.flags & TP_FLAG_SAMPLED) != 0;
	if (!*traced)
		return TP_COMMENT_VALID;
	/* A malformed tracestate is counted and left out; the parent holds. */
	if (comment.state_result == TP_COMMENT_VALID)
	{
		parent->trace_state = comment.state;
		parent->trace_state_len = (uint16) comment.state_len;
	}
	else if (comment.state_result == TP_COMMENT_MALFORMED)
		span_store_count_malformed();
	return TP_COMMENT_VALID;
}

/*
 * Decide whether a top-level statement is traced, and under which parent.
 * The statement's own comment wins over the session's traceprof.traceparent;
 * without either, traceprof.sample_rate may start a new trace.
 */
static bool
choose_root_context(const char *text, int len, SpanParent *parent)
{
	bool		traced;

	/* Most statements have no comment at either end: said inline, before the reader's call. */
	if (text != NULL && tp_sqlcomment_present(text, len) &&
		context_from_comment(text, len, parent, &traced) == TP_COMMENT_VALID)
		return traced;
	if (traceprof_guc_context_valid)
	{
		parent->context = traceprof_guc_context;
		parent->remote = true;
		parent->trace_state = traceprof_guc_tracestate;
		parent->trace_state_len = traceprof_guc_tracestate_len;
		return (parent->context.flags & TP_FLAG_SAMPLED) != 0;
	}
	/* No draw at 1: pg_prng_double is ~50 instructions a statement. */
	if (traceprof_sample_rate >= 1.0 ||
		(traceprof_sample_rate > 0 && pg_prng_double(&pg_global_prng_state) < traceprof_sample_rate))
	{
		memset(&parent->context, 0, sizeof(parent->context));
		parent->remote = false;
		return tp_id_random(parent->context.trace_id, TP_TRACE_ID_BYTES);
	}
	return false;
}

/*
 * strlcpy into one of a span's strings, returning the length the span
 * keeps (PostgreSQL's strlcpy goes byte by byte: ~160 instructions of
 * every traced statement).
 */
static pg_noinline uint8
copy_string(char *dest, const char *src, size_t size)
{
	size_t		len = strnlen(src, size - 1);

	Assert(size <= 256);
	memcpy(dest, src, len);
	dest[len] = '\0';
	return (uint8) len;
}

/*
 * copy_string for free text (an error's message), cut on a character
 * boundary: a byte cut would send invalid UTF-8, which OTLP receivers refuse.
 */
static uint8
copy_text(char *dest, const char *src, size_t size)
{
	int			len = strnlen(src, size);

	Assert(size <= 256);
	if (len == size)
		len = pg_mbcliplen(src, len, size - 1);
	memcpy(dest, src, len);
	dest[len] = '\0';
	return (uint8) len;
}

/*
 * The span's name, operation and collection, packed at p (traceprof.h):
 * "operation collection", or the operation alone, as the semantic
 * conventions suggest, unless a name is given.  Operation and collection
 * fit NAMEDATALEN, so the joined name always fits (snprintf was ~350
 * instructions of every traced statement).  Returns the byte after them.
 */
static char *
set_names(TraceprofSpan *r, char *p, const char *name, const char *operation, const char *collection)
{
	char	   *next;

	StaticAssertStmt(sizeof(r->name) >= sizeof(r->operation) + sizeof(r->collection), "span name size");
	operation = operation ? operation : "";
	collection = collection ? collection : "";
	if (name != NULL)
	{
		r->name_len = copy_string(p, name, sizeof(r->name));
		p += r->name_len + 1;
		r->operation_len = copy_string(p, operation, sizeof(r->operation));
		p += r->operation_len + 1;
		r->collection_len = copy_string(p, collection, sizeof(r->collection));
		return p + r->collection_len + 1;
	}
	/* The name first, joined in place, then copies of its two parts. */
	r->operation_len = copy_string(p, operation, sizeof(r->operation));
	r->collection_len = copy_string(p + r->operation_len + 1, collection, sizeof(r->collection));
	r->name_len = r->operation_len;
	if (r->collection_len > 0)
	{
		p[r->operation_len] = ' ';
		r->name_len += 1 + r->collection_len;
	}
	next = span_pack_string(p + r->name_len + 1, p, r->operation_len);
	return span_pack_string(next, p + r->operation_len + 1, r->collection_len);
}

/*
 * The session's database name and the conversion its spans are stored with.
 * A client's backend has the name it connected with (a database cannot be
 * renamed while connected to).  The conversion (and the name, in a process
 * with no client) needs the catalogs: looked up once, at the first
 * statement's parse analysis, a transaction in progress.  A span may be
 * stored while an error is reported or a transaction aborts, where no lookup
 * belongs: a session's first statement may fail before parse analysis (its
 * texts are then kept where valid UTF-8, span_encoding.c).  Every span
 * copies the cached names whole, a fixed size (no call to memcpy): the
 * strings packed after them overwrite what is past their NUL.
 */
static char database_name[NAMEDATALEN];
static uint8 database_name_len;
TP_HOT static bool database_known;

static pg_noinline void
take_database_name(bool may_look_up)
{
	const char *name = MyProcPort != NULL ? MyProcPort->database_name : NULL;

	if (name == NULL && may_look_up)
		name = get_database_name(MyDatabaseId);
	database_name_len = copy_string(database_name, name ? name : "", sizeof(database_name));
}

/* Not in an aborted transaction block, where COMMIT and ROLLBACK are analysed. */
static inline void
remember_database(void)
{
	if (unlikely(!database_known) && IsTransactionState())
	{
		take_database_name(true);
		span_encoding_prepare();
		database_known = true;
	}
}

/*
 * The database's name packed at p; returns the byte after it.  The span
 * also keeps the database's encoding, which readers cut its text by.
 */
static char *
set_database_name(TraceprofSpan *record, char *p)
{
	static int	encoding = -1;

	StaticAssertStmt(sizeof(database_name) <= sizeof(record->dbname), "dbname size");
	if (unlikely(!database_known))
		take_database_name(false);
	if (unlikely(encoding < 0))
		encoding = GetDatabaseEncoding();	/* the database's, set before any statement */
	memcpy(p, database_name, sizeof(database_name));
	record->dbname_len = database_name_len;
	record->encoding = (uint8) encoding;
	return p + database_name_len + 1;
}

/*
 * The name of the role a span is recorded for, looked up once per switch
 * (a SECURITY DEFINER function's owner, SET ROLE).  A client's statement
 * is the session's role's (GetOuterUserId): one that fails at Bind in a
 * domain check is reported while that check's SECURITY DEFINER function is
 * current, and its owner must not get the client's text.  A nested one is
 * the role that runs it.
 */
static Oid	cached_user = InvalidOid;
static char cached_user_name[NAMEDATALEN];
static uint8 cached_user_name_len;

/* Look user's name up and cache it; false where no lookup belongs. */
static pg_noinline bool
cache_user_name(Oid user)
{
	char	   *name;

	if (!IsTransactionState() || reporting_error)
		return false;
	name = GetUserNameFromId(user, true);
	cached_user_name_len = copy_string(cached_user_name, name ? name : "", sizeof(cached_user_name));
	cached_user = user;
	return true;
}

/* The user's name packed at p; returns the byte after it. */
static char *
set_user_name(TraceprofSpan *record, char *p, Oid user)
{
	StaticAssertStmt(sizeof(cached_user_name) <= sizeof(record->username), "username size");
	if (unlikely(cached_user != user) && !cache_user_name(user))
	{
		/* No lookup: a client's own role has the name it logged in with. */
		bool		own = MyProcPort != NULL && user == GetAuthenticatedUserId();

		record->userid = user;
		record->username_len = copy_string(p, own ? MyProcPort->user_name : "", NAMEDATALEN);
		return p + record->username_len + 1;
	}
	record->userid = cached_user;
	memcpy(p, cached_user_name, sizeof(cached_user_name));
	record->username_len = cached_user_name_len;
	return p + cached_user_name_len + 1;
}

/*
 * The statement's bytes within source, as PostgreSQL locates them, blanks
 * included: enough to find its trailing comment, without the trimming that
 * only the text a span keeps needs.
 */
static const char *
statement_bytes(const char *source, int location, int len, int *text_len)
{
	const char *text;

	/*
	 * Unlocated in a client's query string (a DO INSTEAD rule's action, -1;
	 * the query inside CREATE TABLE AS or EXPLAIN, 0 and no length, as the
	 * whole string of one statement is): the client's statement it stands
	 * for, not the whole string, whose other statements' text and comments
	 * are not its own.  Likewise in the text of a PREPARE that an EXECUTE
	 * runs: the PREPARE.
	 */
	if (location < 0 || (location == 0 && len <= 0))
	{
		if (source == client_parsed.source &&
			client_parsed.message == GetCurrentStatementStartTimestamp())
		{
			location = client_parsed.location;
			len = client_parsed.len;
		}
		else if (source == prepared_text && source != NULL)
		{
			location = prepared_location;
			len = prepared_len;
		}
	}
	/* An unknown location makes the length unknown too, as in CleanQuerytext. */
	text = location >= 0 ? source + location : source;

	*text_len = location >= 0 && len > 0 ? len : (int) strlen(text);
	return text;
}

/*
 * The length of a statement that ends at its semicolon (len bytes at text)
 * with the comment that follows the semicolon, when nothing else follows
 * in the source; else len.  OpenTelemetry's instrumentations append their
 * comment to the text as the application wrote it, after any semicolon
 * ("SELECT 1; / *traceparent='...'* /"), and PostgreSQL ends the statement
 * at the semicolon: without this, such a statement lost its parent.
 */
static pg_noinline int
len_with_comment_after(const char *text, int len)
{
	const char *p = text + len;
	const char *close;

	while (*p == ';' || tp_sqlcomment_blank(*p))
		p++;
	if (p[0] != '/' || p[1] != '*' || (close = strstr(p + 2, "*/")) == NULL)
		return len;
	for (p = close + 2; *p == ';' || tp_sqlcomment_blank(*p); p++)
		;
	return *p == '\0' ? (int) (close + 2 - text) : len;
}

/*
 * The bytes whose ending or opening comment carries a statement's
 * context: its own (statement_bytes), or up to the comment after its
 * semicolon.  A source is a NUL-terminated string: the byte after the
 * statement can be read.
 */
static inline const char *
context_bytes(const char *source, int location, int len, int *text_len)
{
	const char *text = statement_bytes(source, location, len, text_len);

	/* The usual ending: the semicolon closes the source (pgbench, psql). */
	if (unlikely(text[*text_len] == ';') && text[*text_len + 1] != '\0')
		*text_len = len_with_comment_after(text, *text_len);
	return text;
}

/*
 * The length of len bytes at text without the semicolons and blanks that
 * end them: a failed message's text, or a statement PostgreSQL does not
 * locate (the query inside CREATE TABLE AS, REFRESH MATERIALIZED VIEW or
 * EXPLAIN, a rule's action), whose span shows the whole source text, which
 * should end as a located statement's does, before its semicolon.
 */
static pg_noinline int
len_without_semicolons(const char *text, int len)
{
	while (len > 0 && (text[len - 1] == ';' || tp_sqlcomment_blank(text[len - 1])))
		len--;
	return len;
}

/*
 * The statement's own text within source (several may share it) and its
 * length: its bytes without the blanks around them, trimmed as
 * CleanQuerytext does (whose calls to scanner_isspace were ~35
 * instruction-cache misses of a traced TPC-B transaction).
 */
static const char *
statement_text(const char *source, int location, int len, int *text_len)
{
	bool		located = location >= 0 && len > 0;
	const char *text = statement_bytes(source, location, len, &len);

	while (len > 0 && tp_sqlcomment_blank(text[0]))
	{
		text++;
		len--;
	}
	while (len > 0 && tp_sqlcomment_blank(text[len - 1]))
		len--;
	if (!located && unlikely(len > 0 && text[len - 1] == ';'))
		len = len_without_semicolons(text, len);
	*text_len = len;
	return text;
}

/*
 * Whether the top-level span whose record is root belongs to the statement
 * at work in this message: opened, run or paused in it.  A portal kept
 * open after its last run, a Bind's statement waiting for its Execute,
 * stay open while later messages run other statements; and a Close or
 * Sync runs no statement (as in ended_in_earlier_message).
 */
static bool
root_at_work(const TraceprofSpan *root, TimestampTz message)
{
	if (ActivePortal == NULL && debug_query_string == NULL)
		return false;
	for (int i = open_count - 1; i >= 0; i--)
		if (open_spans[i].record == root)
			return open_spans[i].top_level && !open_spans[i].ended &&
				open_spans[i].paused_in == message;
	return false;
}

/*
 * The index of the span a nested statement starting now belongs under, -1
 * if none: the innermost open span of the top-level statement at work.
 * Not merely the innermost: a kept portal's span may stand above the
 * statement at work, or be all that is open while an untraced statement
 * runs, and what they run is not the portal's.
 */
static int
parent_at_work(void)
{
	TimestampTz message = GetCurrentStatementStartTimestamp();

	for (int i = open_count - 1; i >= 0; i--)
		if (!open_spans[i].ended && root_at_work(open_spans[i].root, message))
			return i;
	return -1;
}

/* parent_at_work, at once when nothing is open. */
static inline const OpenSpan *
span_at_work(void)
{
	int			index = open_count > 0 ? parent_at_work() : -1;

	return index >= 0 ? &open_spans[index] : NULL;
}

/* Samples from now on carry span's ids (NULL: none, and with traceprof.profile = traced no timer). */
static void
label_samples(const OpenSpan *span)
{
	labelled_span = span;
	if (span != NULL)
		profiler_set_span(span->record, span->root);
	else
		profiler_set_span(NULL, NULL);
}

/*
 * Samples carry the span at work (parent_at_work), not merely the innermost
 * open: a portal kept open, a Bind's statement waiting for its Execute, do
 * no work while later statements run, and what those run is not theirs.
 */
static inline void
label_at_work(void)
{
	const OpenSpan *span = span_at_work();

	if (span != labelled_span)
		label_samples(span);
}

/*
 * A client's statement starts: its samples carry its span, or none when it
 * is untraced (not a kept portal's; the timer is then disarmed with
 * traceprof.profile = traced).
 */
static inline void
statement_labels(const OpenSpan *span)
{
	if (span == NULL)
		span = span_at_work();
	/*
	 * A sampler not started yet holds no label: one that starts for this
	 * span gets it.  Without a span there is none to give (profile = all
	 * starts the sampler unlabelled in profiler_statement_start): relabelling
	 * an untraced BEGIN or END cost a tenth of what the idle library adds to
	 * a TPC-B transaction.
	 */
	if (span != labelled_span ||
		(unlikely(profiler_state == SAMPLER_NOT_STARTED) && span != NULL &&
		 traceprof_profile != PROFILE_OFF))
		label_samples(span);
	profiler_statement_start(span != NULL ? span->record : NULL);
}

/* A nested statement's parent: the span at work (parent_at_work); false if none. */
static pg_noinline bool
nested_parent(SpanParent *parent)
{
	int			index = parent_at_work();
	const TraceprofSpan *innermost;

	if (index < 0)
		return false;
	innermost = open_spans[index].record;
	parent->nested = true;
	parent->root = open_spans[index].root;
	memcpy(parent->context.trace_id, innermost->trace_id, TP_TRACE_ID_BYTES);
	memcpy(parent->context.span_id, innermost->span_id, TP_SPAN_ID_BYTES);
	parent->context.flags = innermost->flags;
	parent->trace_state = span_packed_trace_state(innermost);
	parent->trace_state_len = innermost->trace_state_len;
	return true;
}

/*
 * Is the statement traced, and under which parent?  top_level: the caller's
 * context (or a new root); otherwise the span at work (parent_at_work).  Cheap, so
 * that untraced statements pay for nothing else (catalog lookups for names
 * come after).
 */
static bool
choose_parent(bool top_level, const char *source, int location, int len, SpanParent *parent)
{
	memset(parent, 0, sizeof(*parent));
	if (unlikely(IsParallelWorker()))
		return false;
	if (!top_level && !nested_parent(parent))
		return false;
	parent->source = source;
	parent->location = location;
	parent->len = len;
	if (top_level)
	{
		const char *text = NULL;
		int			text_len = 0;

		decided_in_message = GetCurrentStatementStartTimestamp();
		if (source != NULL)
			text = context_bytes(source, location, len, &text_len);
		/*
		 * An EXECUTE's context is its own comment's, not that of the
		 * PREPARE whose text it runs: that was for the PREPARE only.
		 */
		if (unlikely(source == prepared_text) && source != NULL)
		{
			text = execute_comment;
			text_len = execute_comment_len;
		}
		if (!choose_root_context(text, text_len, parent))
			return false;
	}
	if (unlikely(open_count == MAX_OPEN_SPANS))
	{
		/* Traced, but nested this deep, or under as many portals kept open: lost, counted. */
		span_store_count_unmade();
		return false;
	}
	return true;
}

/* Whether any statement of the session may be traced without a comment of its own. */
static inline bool
session_may_trace(void)
{
	return traceprof_guc_context_valid || traceprof_sample_rate > 0;
}

/*
 * Whether a client's statement may be traced at all: under the session's
 * context, by sampling, or by the comment that ends or opens it
 * (choose_root_context decides).  Cheap, and no side effect: a malformed
 * comment is counted where it is decided.
 */
static pg_attribute_always_inline bool
may_be_traced(const char *source, int location, int len)
{
	const char *text;
	int			text_len;

	if (session_may_trace())
		return true;
	if (source == NULL)
		return false;
	if (unlikely(source == prepared_text))
		return execute_comment != NULL;
	text = context_bytes(source, location, len, &text_len);
	return tp_sqlcomment_present(text, text_len);
}

/*
 * Open a span under parent.  The name is name if given, else "operation
 * collection" as the semantic conventions suggest.  A span opened in the
 * same instant as another (planning, right after its statement) takes that
 * one's start times: the thread CPU clock is a system call.
 * NULL when no span id can be drawn.
 */
static OpenSpan *
open_span(const SpanParent *parent, int kind, const char *name, const char *operation,
		  const char *collection, uint64 query_id, const OpenSpan *same_instant)
{
	OpenSpan   *span;
	TraceprofSpan *r;
	char	   *p;

	span = &open_spans[open_count];
	if (unlikely(span->record == NULL))
		span->record = MemoryContextAlloc(TopMemoryContext, TraceprofSpanSize());
	r = span->record;
	memset(r, 0, SPAN_PACKED_FIXED);
	memcpy(r->trace_id, parent->context.trace_id, TP_TRACE_ID_BYTES);
	if (parent->remote || parent->nested)
		memcpy(r->parent_span_id, parent->context.span_id, TP_SPAN_ID_BYTES);
	if (unlikely(!tp_id_random(r->span_id, TP_SPAN_ID_BYTES)))
	{
		span_store_count_unmade();
		return NULL;
	}
	r->flags = parent->context.flags | TP_FLAG_SAMPLED;
	r->remote_parent = parent->remote;
	r->kind = kind;
	r->pid = MyProcPid;
	r->dbid = MyDatabaseId;
	r->query_id = query_id;
	r->rows = -1;
	r->planning_ns = -1;
	/* The strings, packed in their order (traceprof.h). */
	p = set_names(r, span_packed_strings(r), name, operation, collection);
	p = set_database_name(r, p);
	p = set_user_name(r, p, OidIsValid(parent->owner) ? parent->owner :
					  parent->nested ? GetUserId() : GetOuterUserId());
	r->trace_state_len = parent->trace_state_len;
	if (likely(parent->trace_state_len == 0))
		*p++ = '\0';
	else
		p = span_pack_string(p, parent->trace_state, parent->trace_state_len);
	if (parent->source != NULL)
	{
		int			len;
		const char *text = statement_text(parent->source, parent->location, parent->len, &len);

		p = query_text_for_span(text, len, query_id, r, p);
	}
	else
		*p++ = '\0';
	*p = '\0';					/* the message, which only errors have */

	span->top_level = !parent->nested;
	span->root = parent->nested ? parent->root : r;
	span->ended = false;
	span->ran = false;
	span->subid = GetCurrentSubTransactionId();
	span->query_desc = NULL;
	span->rows_run = 0;
	span->paused_at_ns = 0;
	span->paused_in = decided_in_message;	/* a top-level span's: this message's */
	span->awaiting_executor = false;
	span->awaiting_xact_end = false;
	span->shared_blks_hit_start = pgBufferUsage.shared_blks_hit;
	span->shared_blks_read_start = pgBufferUsage.shared_blks_read;
	span->wal_bytes_start = pgWalUsage.wal_bytes;
	if (same_instant != NULL)
	{
		r->start_ns = same_instant->record->start_ns;
		span->cpu_start_ns = same_instant->cpu_start_ns;
	}
	else
	{
		r->start_ns = (int64) tp_unix_now_ns();
		/* The span's start decides: a change in mid-span leaves no half measurement. */
		span->cpu_start_ns = traceprof_track_cpu_time ? thread_cpu_ns() : -1;
	}
	open_count++;
	label_samples(span);
	return span;
}

/*
 * A SELECT's portal lives until the client drops it: through the extended
 * protocol inside a transaction block, until the next Bind, a Close or the
 * block's end, a round trip or the client's think time later.  Its
 * statement ended with its last run.  So did a statement a Bind planned and
 * nothing executed, with its planning.  Dropped by a later statement's
 * message, or by a Close or Sync: these set no statement_timestamp(), but
 * run no statement (debug_query_string).  An error in the message that
 * paused it (an AFTER trigger once the run ended, a Bind failing after
 * planning) is its own: PortalRun's and PortalStart's catch have reset
 * ActivePortal by the time it is reported.
 */
static bool
ended_in_earlier_message(const OpenSpan *span)
{
	return span->paused_at_ns != 0 &&
		(span->paused_in != GetCurrentStatementStartTimestamp() ||
		 (ActivePortal == NULL && debug_query_string == NULL));
}

/*
 * A client's query whose executor started in an earlier message and never
 * ran: a Bind of a cached plan (no planning to pause it), its portal not
 * executed.  What fails later (a statement after it, the transaction's end)
 * is not its own: it ends without error when its portal is dropped.
 */
static bool
started_in_earlier_message(const OpenSpan *span)
{
	return span->top_level && span->query_desc != NULL && !span->ran &&
		span->paused_in != GetCurrentStatementStartTimestamp();
}

/* A failed span: error status, its SQLSTATE and message (the last string packed). */
static void
set_error(TraceprofSpan *r, int sqlerrcode, const char *message)
{
	char	   *dest = (char *) r + span_packed_size(r) - r->message_len - 1;

	r->status = SPAN_STATUS_ERROR;
	strlcpy(r->sqlstate, unpack_sql_state(sqlerrcode), sizeof(r->sqlstate));
	r->message_len = copy_text(dest, message, sizeof(r->message));
}

/* The span's CPU time (cpu: if tracked; else -1), buffers and WAL from its start to now. */
static pg_attribute_always_inline void
measure_work(OpenSpan *span, bool cpu)
{
	TraceprofSpan *r = span->record;

	r->cpu_ns = cpu && span->cpu_start_ns >= 0 ? thread_cpu_ns() - span->cpu_start_ns : -1;
	r->shared_blks_hit = pgBufferUsage.shared_blks_hit - span->shared_blks_hit_start;
	r->shared_blks_read = pgBufferUsage.shared_blks_read - span->shared_blks_read_start;
	r->wal_bytes = (int64) (pgWalUsage.wal_bytes - span->wal_bytes_start);
}

/*
 * Its work pauses at end_ns (0: now), in this message: an Execute's run
 * ended, or a Bind planned it.  A later message that ends the span (its
 * portal kept, the Bind never executed) ends it there, as measured there.
 * The CPU clock is read before the wall clock, as at a span's end: what
 * runs between the two (an interrupt) would count as CPU time outside the
 * span's wall time.
 */
static inline void
pause_work(OpenSpan *span, int64 end_ns, bool cpu)
{
	measure_work(span, cpu);
	span->paused_at_ns = end_ns != 0 ? end_ns : (int64) tp_unix_now_ns();
	span->paused_in = GetCurrentStatementStartTimestamp();
	span->paused_sampling = profiler_is_sampling();
}

/* End a span and store it; it stays on the stack. */
static void
end_span(OpenSpan *span, int64 rows, int sqlerrcode, const char *message)
{
	TraceprofSpan *r = span->record;

	/*
	 * A portal kept after its run ended then, measured and with the rows
	 * counted then (run_ended); a later statement's error is not its own.
	 */
	if (unlikely(ended_in_earlier_message(span)))
	{
		r->end_ns = span->paused_at_ns;
		/* Its samples were taken up to then; the timer may have stopped since. */
		r->profiled = span->paused_sampling;
	}
	else
	{
		measure_work(span, true);
		r->end_ns = (int64) tp_unix_now_ns();
		r->rows = rows;
		if (unlikely(message != NULL) && !started_in_earlier_message(span))
			set_error(r, sqlerrcode, message);
		r->profiled = profiler_is_sampling();
	}
	/* Grafana finds a span's profile through the span_id its samples carry. */
	if (r->profiled)
		memcpy(r->profile_span_id, (traceprof_profile_root_span_only ? span->root : r)->span_id,
			   TP_SPAN_ID_BYTES);
	span_store_write(r);
	if (span->top_level)
	{
		last_top_level_span = r;
		last_top_level_ran = span->ran || span->query_desc == NULL;	/* utility: ran */
	}
	span->ended = true;
	span->query_desc = NULL;
}

/*
 * Close the innermost open span and store it, and pop the spans under it
 * that ended already (close_statement): the innermost is always open.
 */
static void
close_innermost(int64 rows, int sqlerrcode, const char *message)
{
	end_span(&open_spans[open_count - 1], rows, sqlerrcode, message);
	do
		open_count--;
	while (unlikely(open_count > 0 && open_spans[open_count - 1].ended));
	label_at_work();
}

/* Close every span from index up, innermost first. */
static void
close_from(int index, int64 rows, int sqlerrcode, const char *message)
{
	while (open_count > index)
		close_innermost(open_count - 1 == index ? rows : -1, sqlerrcode, message);
}

/*
 * Close a statement's span (at index) and the spans opened under it.  Above
 * them may be later top-level statements whose portals are still open (the
 * extended protocol: named portals read in turns): those go on, so the
 * statement's spans end where they are, and leave the stack when it
 * shrinks to them.
 */
static void
close_statement(int index, int64 rows)
{
	int			end = index + 1;

	while (end < open_count && !open_spans[end].top_level)
		end++;
	if (likely(end == open_count))
	{
		close_from(index, rows, 0, NULL);
		return;
	}
	for (int i = end - 1; i >= index; i--)
		if (!open_spans[i].ended)
			end_span(&open_spans[i], i == index ? rows : -1, 0, NULL);
	label_at_work();
}

/* The message a failed span carries: an error raised without one still fails. */
static inline const char *
error_message(const ErrorData *error)
{
	return error->message ? error->message : "error";
}

/*
 * Error context callback of a top-level hook running with spans open:
 * remember the error raised below it for the abort that will close them.
 * Notices and log lines (class 00, 01 or 02) are not copied.
 */
static MemoryContext error_copies;

static void
remember_error(void *arg)
{
	int			category = ERRCODE_TO_CATEGORY(geterrcode());
	MemoryContext old;
	ErrorData  *error;

	if (category == ERRCODE_SUCCESSFUL_COMPLETION || category == ERRCODE_WARNING ||
		category == ERRCODE_NO_DATA)
		return;
	/*
	 * errfinish calls us in ErrorContext, where CopyErrorData may not run.
	 * The copy goes in a context of ours, emptied at once: copied into
	 * TopMemoryContext and freed, ~150 bytes an error stayed there (every
	 * error a traced statement's exception blocks caught, until exit).
	 */
	if (error_copies == NULL)
		error_copies = AllocSetContextCreate(TopMemoryContext, "traceprof error copies",
											 ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(error_copies);
	error = CopyErrorData();
	MemoryContextSwitchTo(old);
	if (error->elevel >= ERROR)
	{
		error_raised = true;
		raised.sqlerrcode = error->sqlerrcode;
		copy_text(raised.message, error_message(error), sizeof(raised.message));
	}
	MemoryContextReset(error_copies);
}

/*
 * Push remember_error while a top-level statement runs with spans open (a
 * few stores; nested hooks run under the top-level one's frame).
 */
static inline bool
watch_errors(ErrorContextCallback *frame)
{
	if (likely(nesting_level > 0 || open_count == 0))
		return false;
	frame->callback = remember_error;
	frame->arg = NULL;
	frame->previous = error_context_stack;
	error_context_stack = frame;
	return true;
}

static inline void
unwatch_errors(const ErrorContextCallback *frame, bool watching)
{
	if (watching)
		error_context_stack = frame->previous;
}

/* At a (sub)transaction abort: spans from index up end with its error. */
static void
close_aborted(int index, const char *otherwise)
{
	if (error_raised)
		close_from(index, -1, raised.sqlerrcode, raised.message);
	else
		close_from(index, -1, ERRCODE_IN_FAILED_SQL_TRANSACTION, otherwise);
	error_raised = false;
}

static int
index_of(const OpenSpan *span)
{
	return span ? (int) (span - open_spans) : open_count;
}

static int
index_of_query(const QueryDesc *query_desc)
{
	for (int i = open_count - 1; i >= 0; i--)
		if (open_spans[i].query_desc == query_desc)
			return i;
	return -1;
}

/*
 * Close spans left waiting: a COMMIT/ROLLBACK whose transaction end we were
 * waiting for, and statements planned but not run.  Those a Bind planned in
 * an earlier message wait for their portal's Execute (Binds pipelined ahead
 * of their Executes) until the transaction ends (xact_end): a portal's name
 * is not known here, so neither is whether a later Bind dropped it.  An
 * unused one still ends with its planning (ended_in_earlier_message).
 */
static pg_noinline void
close_stale_spans(bool xact_end)
{
	while (open_count > 0)
	{
		const OpenSpan *top = &open_spans[open_count - 1];

		if (!top->awaiting_xact_end &&
			!(top->awaiting_executor &&
			  (xact_end || top->planned_in == GetCurrentStatementStartTimestamp())))
			break;
		close_innermost(-1, 0, NULL);
	}
}

/* Inline, the test: most statements start with nothing open, and call nothing. */
static inline void
close_stale(bool xact_end)
{
	if (open_count > 0)
		close_stale_spans(xact_end);
}

static void client_statement_parsed(const char *source, int location, int len);

/*
 * Post-parse analysis: which tokens are constants, when PostgreSQL jumbled
 * the statement for its query id (compute_query_id), for statements that
 * may be traced: their normalized text then follows pg_stat_statements'
 * rules.  We never jumble ourselves (2.8% of a select-only transaction).
 */
static pg_noinline void
remember_constants_if_traced(ParseState *pstate, Query *query, JumbleState *jstate)
{
	const char *statement;
	const char *bytes;
	int			len;
	int			bytes_len;
	tp_span_context ignored;

	statement = statement_text(pstate->p_sourcetext, query->stmt_location, query->stmt_len, &len);
	bytes = context_bytes(pstate->p_sourcetext, query->stmt_location, query->stmt_len, &bytes_len);
	if (session_may_trace() ||
		tp_sqlcomment_traceparent(bytes, bytes_len, &ignored) != TP_COMMENT_NONE)
		query_text_remember_constants(query->queryId, statement, len,
									  (int) (statement - pstate->p_sourcetext), jstate);
}

/*
 * The last utility statement parse analysis saw, with its query id: its
 * PlannedStmt shares the statement node (pg_plan_queries), or a copy of it
 * in a cached plan (every PL/pgSQL statement's, from its first run): the
 * same kind of node at the same place of a text that hashes alike.  The
 * node is never read: it may be freed by the time another statement runs.
 */
static struct
{
	const Node *stmt;
	NodeTag		tag;
	int			location;
	int			len;
	uint32		text_hash;
	uint64		query_id;
}			utility_parsed;

/* A statement's text in its query string (len 0: to its end). */
static uint32
statement_text_hash(const char *source, int location, int len)
{
	if (source == NULL || location < 0)
		return 0;
	if (len <= 0)
		len = strlen(source + location);
	return hash_bytes((const unsigned char *) source + location, len);
}

/* A utility statement's query id, as parse analysis computed it. */
static uint64
utility_query_id(const PlannedStmt *pstmt, const char *query_string)
{
	if (pstmt->queryId != 0 || utility_parsed.stmt == NULL ||
		pstmt->stmt_location != utility_parsed.location || pstmt->stmt_len != utility_parsed.len)
		return pstmt->queryId;
	if (pstmt->utilityStmt != utility_parsed.stmt &&
		(pstmt->stmt_location < 0 || nodeTag(pstmt->utilityStmt) != utility_parsed.tag ||
		 statement_text_hash(query_string, pstmt->stmt_location, pstmt->stmt_len) != utility_parsed.text_hash))
		return pstmt->queryId;
	utility_parsed.stmt = NULL;	/* taken: a later statement at its address is another */
	return utility_parsed.query_id;
}

static void
traceprof_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
	utility_parsed.stmt = NULL;	/* only this statement's may match */
	profiler_statement_parsed();
	remember_database();
	/*
	 * The message's own text, with no portal running: a client's statement
	 * about to be planned or kept for Bind (not a function's body, inlined
	 * or run; not the query inside EXPLAIN or PREPARE, which a portal runs).
	 */
	if (pstate->p_sourcetext == debug_query_string && ActivePortal == NULL &&
		debug_query_string != NULL)
		client_statement_parsed(pstate->p_sourcetext, query->stmt_location, query->stmt_len);
	if (unlikely(hooks_bypassed))
		return;					/* nothing parsed now can be traced */
	if (query->commandType == CMD_UTILITY)
	{
		/* pg_stat_statements zeroes a utility PlannedStmt's id before our hook sees it. */
		utility_parsed.stmt = query->utilityStmt;
		utility_parsed.tag = nodeTag(query->utilityStmt);
		utility_parsed.location = query->stmt_location;
		utility_parsed.len = query->stmt_len;
		utility_parsed.text_hash = statement_text_hash(pstate->p_sourcetext, query->stmt_location,
														query->stmt_len);
		utility_parsed.query_id = query->queryId;
	}
	/* Out of line: without compute_query_id, the statement's path stops here. */
	if (jstate != NULL && jstate->clocations_count > 0 && pstate->p_sourcetext != NULL &&
		traceprof_query_text == QUERY_TEXT_NORMALIZED)
		remember_constants_if_traced(pstate, query, jstate);
}

/*
 * The span of a statement (a Query being planned, a PlannedStmt or a
 * utility statement) when it is traced: SERVER at the top level, else
 * INTERNAL under the innermost open span.  Out of line, as is all that
 * only traced statements run: an untraced statement's hooks fetch none.
 */
static pg_noinline OpenSpan *
open_statement_span(bool top_level, const char *source, int location, int len, Node *stmt,
					uint64 query_id)
{
	SpanParent	parent;

	if (!choose_parent(top_level, source, location, len, &parent))
		return NULL;
	return open_span(&parent, top_level ? SPAN_KIND_SERVER : SPAN_KIND_INTERNAL,
					 NULL, statement_operation(stmt), statement_collection(stmt), query_id, NULL);
}

/* The span of a traced statement's planning (traceprof.track_planning). */
static pg_noinline OpenSpan *
open_planning_span(OpenSpan *statement, uint64 query_id)
{
	SpanParent	parent;

	if (!choose_parent(false, NULL, 0, 0, &parent))
		return NULL;
	return open_span(&parent, SPAN_KIND_INTERNAL, "plan", NULL, NULL, query_id, statement);
}

/* Planning's time on its statement's span, and the planning span's end. */
static pg_noinline void
end_planning(OpenSpan *statement, OpenSpan *planning)
{
	int64		end_ns;

	if (planning != NULL)
	{
		close_from(index_of(planning), -1, 0, NULL);
		/* The closed span's record stays in its slot until the next open. */
		end_ns = planning->record->end_ns;
	}
	else
		end_ns = (int64) tp_unix_now_ns();
	statement->record->planning_ns = end_ns - statement->record->start_ns;
	/*
	 * Until its first run (a SELECT's executor starts at Bind, its run at
	 * Execute).  The CPU clock, a system call, is not read for an unused Bind.
	 */
	pause_work(statement, end_ns, false);
}

/* What was decided about stmt, in the message of that time, for its run to find. */
static void
remember_decision(const PlannedStmt *stmt, TimestampTz message)
{
	decided.pending = true;
	decided.query_id = stmt->queryId;
	decided.location = stmt->stmt_location;
	decided.len = stmt->stmt_len;
	decided.message = message;
}

/* The same statement planned again in the message that decided: a custom plan after a generic one. */
static bool
planned_again(const Query *parse)
{
	return decided.pending && decided.query_id == parse->queryId &&
		decided.location == parse->stmt_location && decided.len == parse->stmt_len &&
		decided.message == GetCurrentStatementStartTimestamp();
}

/* A client's statement about to be planned, not decided yet: the planner decides. */
static inline bool
planner_decides(const Query *parse, const char *query_string)
{
	return query_string != NULL && parse->canSetTag && at_top_level() &&
		is_clients_plan(query_string) && !planned_again(parse);
}

/* The next planner, what it runs counted as nested in planning. */
static inline PlannedStmt *
call_planner(Query *parse, const char *query_string, int cursor_options,
			 ParamListInfo bound_params)
{
	PlannedStmt *result;

	plan_nesting++;
	if (prev_planner)
		result = prev_planner(parse, query_string, cursor_options, bound_params);
	else
		result = standard_planner(parse, query_string, cursor_options, bound_params);
	plan_nesting--;
	return result;
}

/*
 * What a nested statement's span needs if its planning fails, taken when
 * the planning starts: the names come from the Query as it was, since the
 * planner rewrites it in place, and no catalog is read once it failed.
 */
typedef struct NestedPlanning
{
	int			open_count;		/* spans open when it began: its parent on top */
	int64		start_ns;
	int64		cpu_start_ns;	/* -1: CPU time not tracked */
	int64		shared_blks_hit_start;
	int64		shared_blks_read_start;
	uint64		wal_bytes_start;
	const char *operation;
	const char *collection;		/* NULL, or the name copied below */
	char		collection_name[NAMEDATALEN];
} NestedPlanning;

static pg_noinline void
nested_planning_starts(NestedPlanning *planning, Query *parse)
{
	const char *collection;

	planning->open_count = open_count;
	planning->start_ns = (int64) tp_unix_now_ns();
	planning->cpu_start_ns = traceprof_track_cpu_time ? thread_cpu_ns() : -1;
	planning->shared_blks_hit_start = pgBufferUsage.shared_blks_hit;
	planning->shared_blks_read_start = pgBufferUsage.shared_blks_read;
	planning->wal_bytes_start = pgWalUsage.wal_bytes;
	/*
	 * Its span, made if the planning fails, is the current user's: a
	 * SECURITY DEFINER function's owner may be new to the session, and no
	 * catalog is read once it failed.
	 */
	if (unlikely(cached_user != GetUserId()))
		cache_user_name(GetUserId());
	planning->operation = statement_operation((Node *) parse);
	/* A table's name is valid until the next lookup, which the planning may make. */
	collection = statement_collection((Node *) parse);
	planning->collection = NULL;
	if (collection != NULL)
	{
		strlcpy(planning->collection_name, collection, sizeof(planning->collection_name));
		planning->collection = planning->collection_name;
	}
}

/*
 * A nested statement's planning failed: the error is on its way to the
 * exception block that catches it, or to its report.  The statement's span
 * opens now, as from its planning's start, under the span it would have
 * had, and is left open for that subtransaction's abort, or the report, to
 * end with the error, as any nested statement that fails.  Spans opened
 * while it was planned (statements of functions the planner folds) are
 * still open above its parent: they failed with it, and end first, still
 * children of that parent (as when the planning succeeds).
 */
static pg_noinline void
nested_planning_failed(const NestedPlanning *planning, const Query *parse,
					   const char *query_string)
{
	SpanParent	parent;
	OpenSpan   *span;

	/* Its parent ended meanwhile (nothing should end it): no place for its span. */
	if (planning->open_count == 0 || open_count < planning->open_count)
		return;
	if (open_count > planning->open_count)
	{
		ErrorData  *error = CopyErrorData();

		close_from(planning->open_count, -1, error->sqlerrcode, error_message(error));
		FreeErrorData(error);
	}
	if (!choose_parent(false, query_string, parse->stmt_location, parse->stmt_len, &parent))
		return;
	reporting_error = true;		/* no lookup of the user's name */
	span = open_span(&parent, SPAN_KIND_INTERNAL, NULL, planning->operation,
					 planning->collection, parse->queryId, NULL);
	reporting_error = false;
	if (span == NULL)
		return;
	span->record->start_ns = planning->start_ns;
	span->cpu_start_ns = planning->cpu_start_ns;
	span->shared_blks_hit_start = planning->shared_blks_hit_start;
	span->shared_blks_read_start = planning->shared_blks_read_start;
	span->wal_bytes_start = planning->wal_bytes_start;
}

/*
 * The planning of a nested statement, with a span open and track = all.
 * Its span opens at ExecutorStart, after planning: a planning that fails
 * (a constant folded to an error, "PERFORM 1/0") would leave the statement
 * without one.  So it is caught, and only then is its span made: a plan
 * made and never run (a PL/pgSQL simple expression, EXPLAIN, a plan saved
 * for later) or whose run opens the span (a cached plan is not planned
 * again) adds none.  The PG_TRY (a sigsetjmp that saves no signal mask),
 * the clock and the names cost traced nested plannings only, a plan cache's
 * few; the untraced and top-level paths are as before.
 */
static pg_noinline PlannedStmt *
traceprof_nested_planner(Query *parse, const char *query_string, int cursor_options,
						 ParamListInfo bound_params)
{
	NestedPlanning planning;
	PlannedStmt *volatile result = NULL;
	ErrorContextCallback watch;
	bool		watching;

	nested_planning_starts(&planning, parse);
	watching = watch_errors(&watch);
	PG_TRY();
	{
		result = call_planner(parse, query_string, cursor_options, bound_params);
	}
	PG_CATCH();
	{
		unwatch_errors(&watch, watching);
		nested_planning_failed(&planning, parse, query_string);
		PG_RE_THROW();
	}
	PG_END_TRY();
	unwatch_errors(&watch, watching);
	return result;
}

/*
 * Not a client's statement to decide: a statement nested in ours, a rule's
 * further query, a plan made again.  Only the first may get a span of its
 * own.  Out of line: a client's statement, the usual, is decided.
 */
static pg_noinline PlannedStmt *
plan_undecided(Query *parse, const char *query_string, int cursor_options,
			   ParamListInfo bound_params)
{
	PlannedStmt *result;
	ErrorContextCallback watch;
	bool		watching;

	if (unlikely(traceprof_track == TRACK_ALL) && !at_top_level() && parse->canSetTag)
		return traceprof_nested_planner(parse, query_string, cursor_options, bound_params);
	watching = watch_errors(&watch);
	result = call_planner(parse, query_string, cursor_options, bound_params);
	unwatch_errors(&watch, watching);
	return result;
}

/*
 * The planner hook when a span is open or may open (traceprof_planner);
 * deciding is planner_decides(), as the hook found it.
 */
static pg_noinline PlannedStmt *
traceprof_traced_planner(Query *parse, const char *query_string, int cursor_options,
						 ParamListInfo bound_params, bool deciding)
{
	OpenSpan   *statement;
	OpenSpan   *planning = NULL;
	PlannedStmt *result;
	ErrorContextCallback watch;
	bool		watching;

	if (!deciding)
		return plan_undecided(parse, query_string, cursor_options, bound_params);

	close_stale(false);
	statement = open_statement_span(true, query_string, parse->stmt_location, parse->stmt_len,
									(Node *) parse, parse->queryId);
	if (statement != NULL)
	{
		statement->awaiting_executor = true;
		statement->planned_in = decided_in_message;
		if (traceprof_track_planning)
			planning = open_planning_span(statement, parse->queryId);
	}
	else
		label_at_work();		/* an untraced statement's planning: not a kept portal's */

	watching = watch_errors(&watch);
	result = call_planner(parse, query_string, cursor_options, bound_params);
	unwatch_errors(&watch, watching);

	remember_decision(result, decided_in_message);	/* this message: set deciding */
	if (statement != NULL)
		end_planning(statement, planning);
	return result;
}

/*
 * With no span open, a statement that cannot be traced (no session context,
 * no sampling, no comment ending or opening it) takes a short path here,
 * doing what traceprof_traced_planner would then do.  That is the common
 * case of a server that traces only its traced callers, and deciding's code
 * out of it was a third of the instruction-cache misses the extension cost
 * an untraced select.
 */
static PlannedStmt *
traceprof_planner(Query *parse, const char *query_string, int cursor_options,
				  ParamListInfo bound_params)
{
	PlannedStmt *result;
	bool		deciding;

	settle_engagement();
	deciding = planner_decides(parse, query_string);

	if (unlikely(open_count > 0) ||
		(deciding && unlikely(may_be_traced(query_string, parse->stmt_location, parse->stmt_len))))
		return traceprof_traced_planner(parse, query_string, cursor_options, bound_params,
										deciding);
	if (deciding)
		decided_in_message = GetCurrentStatementStartTimestamp();
	result = call_planner(parse, query_string, cursor_options, bound_params);
	if (deciding)
		remember_decision(result, decided_in_message);
	return result;
}

/*
 * The span a planning in message opened for the statement about to run, if
 * traced.  A portal opened since (pipelined Binds) may stand above it.
 */
static OpenSpan *
planned_span(TimestampTz message)
{
	for (int i = open_count - 1; i >= 0; i--)
		if (open_spans[i].awaiting_executor && open_spans[i].planned_in == message)
		{
			open_spans[i].awaiting_executor = false;
			return &open_spans[i];
		}
	return NULL;
}

/*
 * Whether the running portal has queries to run after stmt (a statement a
 * rule rewrote into several).  A NOTIFY among them does not count: it runs
 * in no span of its own, and in none at all after the last query.
 */
static pg_noinline bool
more_queries_after(const PlannedStmt *stmt)
{
	bool		after = false;
	ListCell   *lc;

	foreach(lc, ActivePortal->stmts)
	{
		const PlannedStmt *query = lfirst_node(PlannedStmt, lc);

		if (after && query->commandType != CMD_UTILITY)
			return true;
		after = after || query == stmt;
	}
	return false;
}

static inline bool
more_queries_follow(const PlannedStmt *stmt)
{
	return ActivePortal != NULL && unlikely(list_length(ActivePortal->stmts) > 1) &&
		more_queries_after(stmt);
}

/*
 * Consume the planner's decision if it was about this statement.  Another
 * statement's leaves it for its own run (a transaction's end forgets it).
 */
static inline bool
was_decided_by_planner(const PlannedStmt *stmt)
{
	bool		same = decided.pending && decided.query_id == stmt->queryId &&
		decided.location == stmt->stmt_location && decided.len == stmt->stmt_len &&
		(ActivePortal == NULL || ActivePortal->creation_time == decided.message);

	if (same)
		decided.pending = false;
	return same;
}

/*
 * The query of the running portal that sets the command tag (the client's
 * statement), if it has not run yet: NULL when it ran before stmt.  *any
 * says whether there is one at all.
 */
static const PlannedStmt *
tag_query_to_come(const PlannedStmt *stmt, bool *any)
{
	bool		after = false;
	ListCell   *lc;

	*any = false;
	foreach(lc, ActivePortal->stmts)
	{
		const PlannedStmt *query = lfirst_node(PlannedStmt, lc);

		after = after || query == stmt;
		if (query->canSetTag)
		{
			*any = true;
			return after ? query : NULL;
		}
	}
	return NULL;
}

/*
 * A rule's further query (canSetTag false) runs in its statement's span,
 * when that waits for it: planned, or run up to the query before.  A cached
 * plan's statement whose rule query runs first (UPDATE, DELETE) is decided
 * here, as the statement, whose own start then finds the decision.  When no
 * query sets the tag (INSTEAD rules of another command), the first decides.
 */
static pg_noinline pg_attribute_cold OpenSpan *
span_of_rule_query(const QueryDesc *query_desc)
{
	const PlannedStmt *stmt = query_desc->plannedstmt;
	const PlannedStmt *tag;
	OpenSpan   *span = open_count > 0 ? &open_spans[open_count - 1] : NULL;
	bool		any;

	/* Not a span an unused Bind left waiting: the one planned with this portal. */
	if (span != NULL && span->awaiting_executor && span->top_level &&
		(ActivePortal == NULL || span->planned_in == ActivePortal->creation_time))
	{
		span->awaiting_executor = false;
		return span;
	}
	if (ActivePortal == NULL)
		return NULL;
	tag = tag_query_to_come(stmt, &any);
	if (any && tag == NULL)
		return NULL;			/* decided, untraced, at the statement's own start */
	if (tag == NULL)
		tag = stmt;
	else
		remember_decision(tag, ActivePortal->creation_time);
	span = open_statement_span(true, run_source(query_desc), tag->stmt_location, tag->stmt_len,
							   (Node *) tag, tag->queryId);
	if (span != NULL)
		span->planned_in = ActivePortal->creation_time;	/* its further queries' portal */
	return span;
}

/* The next ExecutorStart: what it runs (initial partition pruning) is nested. */
static inline void
call_ExecutorStart(QueryDesc *query_desc, int eflags)
{
	nesting_level++;
	if (prev_ExecutorStart)
		prev_ExecutorStart(query_desc, eflags);
	else
		standard_ExecutorStart(query_desc, eflags);
	nesting_level--;
}

/*
 * The span of a query its planning did not decide: a cached plan's, one a
 * Bind planned, a nested statement's.  Out of line: a client's simple
 * query, the usual, was decided by its planning.
 */
static pg_noinline OpenSpan *
span_of_unplanned(QueryDesc *query_desc, int eflags, bool top_level)
{
	PlannedStmt *stmt = query_desc->plannedstmt;
	OpenSpan   *span = NULL;

	/* Planned by its Bind, and another Bind planned since (pipelined). */
	if (top_level && open_count > 0 && ActivePortal != NULL)
		span = planned_span(ActivePortal->creation_time);
	/*
	 * Nested, a rule's further query (canSetTag false) is no statement of
	 * its own either: its work is the statement's parent's (SPI runs it
	 * apart from the statement, with no portal to find it by).  Nor is a
	 * plan EXPLAIN only shows: it never runs.
	 */
	if (span == NULL &&
		(top_level ? is_clients_run() :
		 traceprof_track == TRACK_ALL && stmt->canSetTag && !(eflags & EXEC_FLAG_EXPLAIN_ONLY)))
	{
		span = open_statement_span(top_level, run_source(query_desc), stmt->stmt_location,
								   stmt->stmt_len, (Node *) stmt, stmt->queryId);
		/* A rule's further queries find their span by its portal (span_of_rule_query). */
		if (span != NULL && top_level && ActivePortal != NULL)
			span->planned_in = ActivePortal->creation_time;
	}
	return span;
}

/* The ExecutorStart hook when a span is open or may open (traceprof_ExecutorStart). */
static pg_noinline void
traceprof_traced_ExecutorStart(QueryDesc *query_desc, int eflags)
{
	PlannedStmt *stmt = query_desc->plannedstmt;
	OpenSpan   *span = NULL;
	ErrorContextCallback watch;
	bool		watching;
	bool		top_level = at_top_level();
	bool		worker = top_level && unlikely(IsParallelWorker());

	if (worker)
		profiler_worker_statement_start();
	if (top_level && unlikely(!stmt->canSetTag))
		span = span_of_rule_query(query_desc);
	else if (top_level && was_decided_by_planner(stmt))
		span = planned_span(decided.message);
	else
		span = span_of_unplanned(query_desc, eflags, top_level);
	if (span != NULL)
	{
		span->query_desc = query_desc;
		/*
		 * At work in this message (parent_at_work), which may be later than
		 * its planning's: an Execute of a write its Bind planned.
		 */
		if (top_level)
			span->paused_in = GetCurrentStatementStartTimestamp();
	}
	if (top_level && !worker)
		statement_labels(span);
	watching = watch_errors(&watch);
	call_ExecutorStart(query_desc, eflags);
	unwatch_errors(&watch, watching);
}

/*
 * With no span open: true when the statement about to start cannot get one,
 * having done what traceprof_traced_ExecutorStart then does; false, with
 * nothing done, when it may.  Nested, there is no span to nest under; a planned statement
 * was decided by its planning, untraced since nothing is open; a cached plan
 * is decided here, as choose_parent would.
 */
static inline bool
starts_untraced(const QueryDesc *query_desc)
{
	const PlannedStmt *stmt = query_desc->plannedstmt;
	bool		deciding;

	if (!at_top_level())
		return true;
	if (unlikely(!stmt->canSetTag))
		return false;			/* a rule's query: span_of_rule_query */
	deciding = !was_decided_by_planner(stmt) && is_clients_run();
	if (deciding)
	{
		if (may_be_traced(run_source(query_desc), stmt->stmt_location, stmt->stmt_len))
			return false;
		if (unlikely(IsParallelWorker()))
		{
			profiler_worker_statement_start();
			return true;
		}
		decided_in_message = GetCurrentStatementStartTimestamp();
	}
	profiler_statement_start(NULL);
	return true;
}

/* Untraced statements take the short path, as in traceprof_planner. */
static void
traceprof_ExecutorStart(QueryDesc *query_desc, int eflags)
{
	settle_engagement();
	if (unlikely(open_count > 0) || !starts_untraced(query_desc))
		traceprof_traced_ExecutorStart(query_desc, eflags);
	else
		call_ExecutorStart(query_desc, eflags);
	if (profiler_is_sampling())
	{
		profiler_notice_loads();
		if (query_desc->planstate != NULL)
			executor_names_learn(query_desc->planstate);
		/* The workers its run may launch sample with our labels. */
		if (query_desc->plannedstmt->parallelModeNeeded)
			profiler_parallel_plan_starts();
	}
}

/*
 * The rows of a span's statement: those a SELECT returned, or those a write
 * wrote, over all its runs (a portal fetched in pages runs once a page, and
 * each run counts es_processed from 0).  None when it never ran (a SELECT's
 * executor starts at Bind, and a Bind not executed ends it): no count.
 */
static void
count_rows(OpenSpan *span, const QueryDesc *query_desc)
{
	if (unlikely(!query_desc->already_executed))
		return;
	span->record->rows = (int64) span->rows_run;
	/* Of a rule's queries, the one whose count the client gets says what rows are. */
	if (query_desc->plannedstmt->canSetTag)
		span->record->rows_meaning = query_desc->operation == CMD_SELECT ? ROWS_RETURNED :
			ROWS_AFFECTED | (query_desc->plannedstmt->hasReturning ? ROWS_RETURNED : 0);
}

/*
 * A run of a query with a span starts: through an Execute message, the
 * statement runs again until it ends (ended_in_earlier_message).
 */
static pg_noinline OpenSpan *
run_starts(const QueryDesc *query_desc)
{
	int			owner = index_of_query(query_desc);

	if (owner < 0)
		return NULL;
	open_spans[owner].ran = true;
	open_spans[owner].paused_at_ns = 0;
	/* At work in this message (parent_at_work): set by top_level_run_starts. */
	open_spans[owner].paused_in = decided_in_message;
	return &open_spans[owner];
}

/* An Execute's run ended: its work pauses until the portal runs again, or ends. */
static pg_noinline void
execute_run_ended(OpenSpan *span, const QueryDesc *query_desc)
{
	pause_work(span, 0, true);
	count_rows(span, query_desc);
	/*
	 * A SELECT's portal does nothing more in this message (its end, when
	 * dropped, is this pause): what the backend does until a later Execute
	 * runs it again is not its work.  A write's ExecutorFinish (its AFTER
	 * triggers) and ExecutorEnd follow at once, still its own.
	 */
	if (nesting_level == 0 && ActivePortal != NULL && ActivePortal->strategy == PORTAL_ONE_SELECT &&
		labelled_span == span)
		label_samples(NULL);
}

static pg_noinline void
run_ended(OpenSpan *span, const QueryDesc *query_desc)
{
	if (unlikely(span->query_desc != query_desc))
		return;					/* its span was ended by what the run did */
	if (query_desc->plannedstmt->canSetTag)	/* not a rule's further query */
		span->rows_run += query_desc->estate->es_processed;
	if (query_desc->dest->mydest != DestRemoteExecute)
		return;
	execute_run_ended(span, query_desc);
}

/* The protocol's static caller of a top-level statement, for the profiler. */
static void
learn_protocol_caller(const DestReceiver *dest)
{
	if (dest->mydest == DestRemote)
		profiler_learn_call_path(CALL_PATH_SIMPLE_QUERY);
	else if (dest->mydest == DestRemoteExecute)
		profiler_learn_call_path(CALL_PATH_EXTENDED_QUERY);
}

/* A run outside any statement of ours: the client's statement runs. */
static inline void
top_level_run_starts(const QueryDesc *query_desc)
{
	/* An Execute's statement was decided by its Bind, in an earlier message. */
	decided_in_message = GetCurrentStatementStartTimestamp();
	if (profiler_is_sampling())
		learn_protocol_caller(query_desc->dest);
}

/* The next ExecutorRun, what it runs counted as nested. */
static inline void
call_ExecutorRun(QueryDesc *query_desc, ScanDirection direction, uint64 count,
				 bool execute_once)
{
	nesting_level++;
	if (prev_ExecutorRun)
		prev_ExecutorRun(query_desc, direction, count, execute_once);
	else
		standard_ExecutorRun(query_desc, direction, count, execute_once);
	nesting_level--;
}

/*
 * A client's run starts: a portal run again by an Execute (another may
 * have been labelled since), or an untraced one's while others are kept.
 */
static inline void
run_labels(const OpenSpan *span)
{
	if (span == NULL)
		span = span_at_work();
	if (span != labelled_span)
		label_samples(span);
}

/*
 * The ExecutorRun hook with spans open (traceprof_ExecutorRun).  Samples'
 * stacks show this frame between PortalRun and standard_ExecutorRun: its
 * name ends like the hook's, which the profiler's rules for the static
 * frames above it expect (backend_profiler.c), and starts with ours, as do
 * the other hooks' traced paths, so that flame graphs tell it from
 * PostgreSQL's.
 */
static pg_noinline void
traceprof_traced_ExecutorRun(QueryDesc *query_desc, ScanDirection direction,
							 uint64 count, bool execute_once)
{
	ErrorContextCallback watch;
	bool		watching = watch_errors(&watch);
	OpenSpan   *span;

	if (nesting_level == 0)
	{
		top_level_run_starts(query_desc);
		span = run_starts(query_desc);
		run_labels(span);
	}
	else
		span = run_starts(query_desc);
	call_ExecutorRun(query_desc, direction, count, execute_once);
	unwatch_errors(&watch, watching);
	if (span != NULL)
		run_ended(span, query_desc);
}

/* With no span open, the run is only counted as nesting (see traceprof_planner). */
static void
traceprof_ExecutorRun(QueryDesc *query_desc, ScanDirection direction, uint64 count,
					  bool execute_once)
{
	settle_engagement();
	if (unlikely(open_count > 0))
	{
		traceprof_traced_ExecutorRun(query_desc, direction, count, execute_once);
		return;
	}
	if (nesting_level == 0)
		top_level_run_starts(query_desc);
	call_ExecutorRun(query_desc, direction, count, execute_once);
}

static void
traceprof_ExecutorFinish(QueryDesc *query_desc)
{
	ErrorContextCallback watch;
	bool		watching = watch_errors(&watch);

	nesting_level++;
	if (prev_ExecutorFinish)
		prev_ExecutorFinish(query_desc);
	else
		standard_ExecutorFinish(query_desc);
	nesting_level--;
	unwatch_errors(&watch, watching);
}

static inline void
call_ExecutorEnd(QueryDesc *query_desc)
{
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(query_desc);
	else
		standard_ExecutorEnd(query_desc);
}

/* ExecutorEnd of a query whose span (at owner) then closes. */
static pg_noinline void
traceprof_traced_ExecutorEnd(int owner, QueryDesc *query_desc)
{
	ErrorContextCallback watch;
	bool		watching = watch_errors(&watch);

	count_rows(&open_spans[owner], query_desc);
	call_ExecutorEnd(query_desc);
	unwatch_errors(&watch, watching);
	if (open_spans[owner].top_level && more_queries_follow(query_desc->plannedstmt))
	{
		/* A rule's further queries run next, in the same span. */
		open_spans[owner].query_desc = NULL;
		open_spans[owner].awaiting_executor = true;
		return;
	}
	close_statement(owner, open_spans[owner].record->rows);
}

static void
traceprof_ExecutorEnd(QueryDesc *query_desc)
{
	int			owner = index_of_query(query_desc);

	if (owner < 0)
		call_ExecutorEnd(query_desc);
	else
		traceprof_traced_ExecutorEnd(owner, query_desc);
	statement_done();
	if (nesting_level == 0 && open_count == 0)
		profiler_flush();
}

/* A packed span named anew: the strings after its names move to follow the new ones. */
static void
rename_span(TraceprofSpan *r, const char *name, const char *operation)
{
	char	   *strings = span_packed_strings(r);
	Size		old_len = r->name_len + r->operation_len + r->collection_len + 3;
	Size		rest = span_packed_size(r) - SPAN_PACKED_FIXED - old_len;
	char		names[sizeof(r->name) + sizeof(r->operation) + sizeof(r->collection)];
	Size		new_len;

	new_len = set_names(r, names, name, operation, NULL) - names;
	memmove(strings + new_len, strings + old_len, rest);
	memcpy(strings, names, new_len);
}

/*
 * A COMMIT or PREPARE TRANSACTION of a failed transaction rolls it back,
 * and the client gets ROLLBACK for its command tag: its span says so too.
 */
static bool
rolls_back_instead(Node *stmt)
{
	return IsA(stmt, TransactionStmt) &&
		(((TransactionStmt *) stmt)->kind == TRANS_STMT_COMMIT ||
		 ((TransactionStmt *) stmt)->kind == TRANS_STMT_PREPARE);
}

/*
 * COMMIT, PREPARE TRANSACTION and ROLLBACK only mark the transaction block
 * here; the work (deferred triggers, WAL flush, the state file, lock
 * release) happens when the statement's transaction command finishes, so
 * their span ends in the transaction callback.  In a block an
 * error already aborted, that work was done then: they end here.
 */
static pg_noinline void
end_utility(OpenSpan *span, Node *stmt, QueryCompletion *qc)
{
	if (IsA(stmt, TransactionStmt) && nesting_level == 0 &&
		(((TransactionStmt *) stmt)->kind == TRANS_STMT_COMMIT ||
		 ((TransactionStmt *) stmt)->kind == TRANS_STMT_PREPARE ||
		 ((TransactionStmt *) stmt)->kind == TRANS_STMT_ROLLBACK) &&
		IsTransactionState())
		span->awaiting_xact_end = true;
	else if (qc && command_tag_display_rowcount(qc->commandTag) && qc->commandTag != CMDTAG_MOVE)
	{
		/* FETCH and COPY TO send rows; COPY FROM, CREATE TABLE AS and the like write them. */
		span->record->rows_meaning = qc->commandTag == CMDTAG_FETCH ||
			(IsA(stmt, CopyStmt) && !((CopyStmt *) stmt)->is_from) ? ROWS_RETURNED : ROWS_AFFECTED;
		close_from(index_of(span), (int64) qc->nprocessed, 0, NULL);
	}
	else
	{
		if (qc && qc->commandTag == CMDTAG_ROLLBACK && rolls_back_instead(stmt))
			rename_span(span->record, NULL, "ROLLBACK");
		close_from(index_of(span), -1, 0, NULL);
	}
}

/* SET or RESET of traceprof.traceparent, SET LOCAL included. */
static bool
sets_traceparent(Node *stmt)
{
	return IsA(stmt, VariableSetStmt) && ((VariableSetStmt *) stmt)->name != NULL &&
		strcmp(((VariableSetStmt *) stmt)->name, "traceprof.traceparent") == 0;
}

/*
 * A top-level EXECUTE starts: the text of the prepared statement it names
 * (NULL if there is none) and the EXECUTE's own comment, if it carries a
 * traceparent: the parent of this execution, as a statement's comment is.
 */
static pg_noinline void
execute_starts(const ExecuteStmt *stmt, const char *query_string, const PlannedStmt *pstmt)
{
	PreparedStatement *prepared = FetchPreparedStatement(stmt->name, false);
	tp_span_context ignored;
	const char *text;
	int			len;

	prepared_text = prepared ? prepared->plansource->query_string : NULL;
	if (prepared != NULL && prepared->plansource->raw_parse_tree != NULL)
	{
		prepared_location = prepared->plansource->raw_parse_tree->stmt_location;
		prepared_len = prepared->plansource->raw_parse_tree->stmt_len;
	}
	else
		prepared_location = prepared_len = -1;
	if (query_string == NULL)
		return;
	text = context_bytes(query_string, pstmt->stmt_location, pstmt->stmt_len, &len);
	if (tp_sqlcomment_traceparent(text, len, &ignored) != TP_COMMENT_NONE)
	{
		execute_comment = text;
		execute_comment_len = len;
	}
}

/* The profiler's static callers of a top-level utility statement. */
static pg_noinline void
learn_utility_callers(const DestReceiver *dest)
{
	learn_protocol_caller(dest);
	if (ActivePortal->strategy == PORTAL_MULTI_QUERY)
		profiler_learn_call_path(CALL_PATH_MULTI_QUERY_UTILITY);
	else if (ActivePortal->strategy == PORTAL_UTIL_SELECT)
		profiler_learn_call_path(CALL_PATH_STORED_UTILITY);
}

/* A utility statement that may run parallel workers of its own (index builds, VACUUM's index passes). */
static bool
may_launch_workers(Node *stmt)
{
	return IsA(stmt, IndexStmt) || IsA(stmt, ReindexStmt) || IsA(stmt, AlterTableStmt) ||
		(IsA(stmt, VacuumStmt) && ((VacuumStmt *) stmt)->is_vacuumcmd);
}

/* The next ProcessUtility. */
static inline void
call_ProcessUtility(PlannedStmt *pstmt, const char *query_string,
					bool read_only_tree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *query_env,
					DestReceiver *dest, QueryCompletion *qc)
{
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, query_string, read_only_tree, context,
							params, query_env, dest, qc);
	else
		standard_ProcessUtility(pstmt, query_string, read_only_tree, context,
								params, query_env, dest, qc);
}

/*
 * The ProcessUtility hook but for untraced transaction statements
 * (traceprof_ProcessUtility).  Named *ProcessUtility: tail-called, it is
 * the frame the profiler's call path rules look for (backend_profiler.c).
 */
static pg_noinline void
traceprof_traced_ProcessUtility(PlannedStmt *pstmt, const char *query_string,
								bool read_only_tree, ProcessUtilityContext context,
								ParamListInfo params, QueryEnvironment *query_env,
								DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	OpenSpan   *span = NULL;
	ErrorContextCallback watch;
	bool		watching;
	bool		top_level = at_top_level();
	bool		sampling_workers;

	/*
	 * EXECUTE, PREPARE and DEALLOCATE are transparent, as in
	 * pg_stat_statements: the prepared statement's own execution is the
	 * span, with its text.
	 */
	bool		transparent = IsA(stmt, ExecuteStmt) || IsA(stmt, PrepareStmt) ||
		IsA(stmt, DeallocateStmt);

	/* A rule's NOTIFY (canSetTag false) is part of its statement's span, nested too. */
	if (unlikely(!pstmt->canSetTag))
		transparent = true;
	else if (top_level)
		close_stale(false);
	if (unlikely(sets_traceparent(stmt)))
	{
		/* Handing us the caller's context is no work of the caller's: no span. */
		if (top_level)
			decided_in_message = GetCurrentStatementStartTimestamp();
		transparent = true;
	}
	if (!transparent && top_level &&
		!may_be_traced(query_string, pstmt->stmt_location, pstmt->stmt_len))
	{
		/* Untraceable (see traceprof_planner): only what choose_parent would then do. */
		if (likely(!IsParallelWorker()))
			decided_in_message = GetCurrentStatementStartTimestamp();
	}
	else if (!transparent && (top_level || traceprof_track == TRACK_ALL))
		span = open_statement_span(top_level, query_string, pstmt->stmt_location, pstmt->stmt_len,
								   stmt, utility_query_id(pstmt, query_string));
	if (!transparent && top_level)
		statement_labels(span);
	if (top_level && context == PROCESS_UTILITY_TOPLEVEL && profiler_is_sampling() &&
		ActivePortal != NULL)
		learn_utility_callers(dest);

	if (top_level && IsA(stmt, ExecuteStmt))
		execute_starts((ExecuteStmt *) stmt, query_string, pstmt);
	/* In parallel mode no setting may change, and these statements fail anyway. */
	sampling_workers = profiler_is_sampling() && may_launch_workers(stmt) && !IsInParallelMode();
	if (sampling_workers)
		profiler_utility_workers_may_start();
	watching = watch_errors(&watch);
	if (!transparent)
		nesting_level++;
	utility_depth++;
	PG_TRY();
	{
		call_ProcessUtility(pstmt, query_string, read_only_tree, context,
							params, query_env, dest, qc);
	}
	PG_CATCH();
	{
		/* The spans end at the abort; the count must be right before it. */
		utility_depth--;
		if (!transparent)
			nesting_level--;
		if (top_level)
			prepared_text = execute_comment = NULL;
		unwatch_errors(&watch, watching);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (sampling_workers)
		profiler_utility_workers_done();
	if (top_level)
		prepared_text = execute_comment = NULL;
	utility_depth--;
	if (!transparent)
		nesting_level--;
	unwatch_errors(&watch, watching);
	if (span != NULL)
		end_utility(span, stmt, qc);
	statement_done();
	if (nesting_level == 0 && open_count == 0)
		profiler_flush();
}

/*
 * A client's BEGIN, COMMIT, SAVEPOINT... that nothing traces: two of every
 * OLTP transaction, for which the general path touched ~26 instruction
 * cache lines each, a sixth of what the idle library added to a TPC-B
 * transaction.  They run no statement below them (the transaction ends
 * after ProcessUtility returns, in finish_xact_command, where deferred
 * triggers run; a procedure's COMMIT never comes here): no nesting to
 * count and nothing to catch; the rest is what
 * traceprof_traced_ProcessUtility would do.
 */
static inline bool
is_untraced_transaction_stmt(const PlannedStmt *pstmt, const char *query_string)
{
	return IsA(pstmt->utilityStmt, TransactionStmt) && likely(open_count == 0) &&
		pstmt->canSetTag && at_top_level() &&
		!may_be_traced(query_string, pstmt->stmt_location, pstmt->stmt_len);
}

static void
traceprof_ProcessUtility(PlannedStmt *pstmt, const char *query_string,
						 bool read_only_tree, ProcessUtilityContext context,
						 ParamListInfo params, QueryEnvironment *query_env,
						 DestReceiver *dest, QueryCompletion *qc)
{
	settle_engagement();
	if (!is_untraced_transaction_stmt(pstmt, query_string))
	{
		traceprof_traced_ProcessUtility(pstmt, query_string, read_only_tree, context,
										params, query_env, dest, qc);
		return;
	}
	decided_in_message = GetCurrentStatementStartTimestamp();
	statement_labels(NULL);
	if (context == PROCESS_UTILITY_TOPLEVEL && profiler_is_sampling() && ActivePortal != NULL)
		learn_utility_callers(dest);
	call_ProcessUtility(pstmt, query_string, read_only_tree, context,
						params, query_env, dest, qc);
	statement_done();
	profiler_flush();
}


/* What the start of the current subtransaction recorded; NULL if none. */
static NestingAtStart *
current_subxact_start(void)
{
	int			level = GetCurrentTransactionNestLevel();

	if (level > 1 && level < subxact_starts_size &&
		subxact_starts[level].subid == GetCurrentSubTransactionId())
		return &subxact_starts[level];
	return NULL;
}

/*
 * The index of the first span the abort of the current (sub)transaction
 * will end: those opened since it began, in it or in the subtransactions
 * it started (whose ids are larger).  Told by id, not by how many spans
 * were open when it began: a portal from before it may have closed since.
 */
static int
first_span_of_current_xact(void)
{
	NestingAtStart *start = current_subxact_start();
	int			first = open_count;

	if (start == NULL)
		return 0;
	while (first > 0 && open_spans[first - 1].subid >= start->subid)
		first--;
	return first;
}

/* Whether a span from index up is a statement still running (not a kept portal's). */
static bool
any_running(int index)
{
	for (int i = index; i < open_count; i++)
		if (!open_spans[i].ended && !ended_in_earlier_message(&open_spans[i]))
			return true;
	return false;
}

/* A top-level statement that began its trace: no caller's span above it. */
static inline bool
began_its_trace(const TraceprofSpan *r)
{
	return !r->remote_parent && tp_id_is_zero(r->parent_span_id, TP_SPAN_ID_BYTES);
}

/*
 * A simple query's implicit commit failing (a deferred check) once its last
 * statement, traced, has ended: no transaction block is left (the implicit
 * one of several statements has ended too), and the last top-level span
 * ended in this message, its statement run.  A later statement failing
 * before it ran is still in the implicit block of its message; a Bind
 * failing after it dropped the unnamed portal of a statement never run
 * ended that one's span, unrun, in its own message.
 */
static bool
failed_at_commit(int64 arrived_ns)
{
	return last_top_level_span != NULL && last_top_level_ran && !IsTransactionBlock() &&
		last_top_level_span->end_ns >= arrived_ns;
}

/*
 * The parent of a failure beside statement r (failed_at_commit): r's own,
 * or r when it began its trace, as for a Sync's commit (record_failed_commit),
 * rather than a context decided again, where sampling would draw anew.
 * r's ids and tracestate are copied out: its record may be the one the
 * failure's span reuses.
 */
static void
parent_beside(const TraceprofSpan *r, SpanParent *parent, uint8 *parent_span_id, char *trace_state)
{
	memset(parent, 0, sizeof(*parent));
	memcpy(parent->context.trace_id, r->trace_id, TP_TRACE_ID_BYTES);
	parent->context.flags = r->flags;
	parent->remote = r->remote_parent;
	memcpy(parent_span_id, began_its_trace(r) ? r->span_id : r->parent_span_id, TP_SPAN_ID_BYTES);
	parent->trace_state_len = r->trace_state_len;
	memcpy(trace_state, span_packed_trace_state(r), r->trace_state_len);
	parent->trace_state = trace_state;
	decided_in_message = GetCurrentStatementStartTimestamp();
}

/*
 * The statement of a client message that failed before any hook of ours
 * ran for it: a syntax or name error, a Bind's bad parameter, a statement
 * refused in an aborted transaction.  Traced, it is a span of its own,
 * named as the semantic conventions say when the operation is unknown, with
 * the error.  The message's text may end in the statement's semicolon, or
 * be unknown (debug_query_string NULL; see may_be_sync_commit).
 */
static pg_noinline void
record_failed_message(const ErrorData *edata)
{
	SpanParent	parent;
	OpenSpan   *span;
	int			len = debug_query_string ? strlen(debug_query_string) : 0;
	int64		arrived_ns = (GetCurrentStatementStartTimestamp() +
							  (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY) * 1000;
	/* Read before the span opens: its record may be the one reused. */
	int64		earlier_end_ns = last_top_level_span != NULL ? last_top_level_span->end_ns : 0;
	bool		at_commit = failed_at_commit(arrived_ns);
	uint8		parent_span_id[TP_SPAN_ID_BYTES];
	char		trace_state[TP_TRACESTATE_MAX + 1];

	len = len_without_semicolons(debug_query_string, len);
	if (at_commit)
		parent_beside(last_top_level_span, &parent, parent_span_id, trace_state);
	else if (!choose_parent(true, debug_query_string, 0, len, &parent))
		return;
	parent.source = debug_query_string;
	parent.len = len;
	/*
	 * The message's text and error may be of statements run under several
	 * roles (one ending "; SET ROLE x" fails at its implicit commit as x):
	 * they are the login role's, who could become any of them.
	 */
	parent.owner = GetAuthenticatedUserId();
	span = open_span(&parent, SPAN_KIND_SERVER, "postgresql", NULL, NULL, 0, NULL);
	if (span == NULL)
		return;
	if (at_commit)
		memcpy(span->record->parent_span_id, parent_span_id, TP_SPAN_ID_BYTES);
	/*
	 * It began when the message arrived, or when a traced statement run
	 * before it in the same message ended ("SELECT 1; SELECT * FROM
	 * missing"): that time was the other's.  What it cost is not known.
	 */
	span->record->start_ns = Max(arrived_ns, earlier_end_ns);
	span->cpu_start_ns = -1;
	close_innermost(-1, edata->sqlerrcode, error_message(edata));
}

/*
 * An error with no text (debug_query_string NULL) is either a Sync's commit
 * failing (record_failed_commit), or a message failing before its text was
 * known: a text not convertible to the database's encoding, a statement or
 * portal that does not exist, a message refused in an aborted block, a
 * fast-path call.  A Sync commits only an implicit transaction (no block);
 * in one, a statement or portal that does not exist is still the message's.
 * The messages around a Sync tell nothing: the one before it may be
 * untraced, and a Sync sets no statement timestamp.
 */
static bool
may_be_sync_commit(const ErrorData *edata)
{
	return IsTransactionState() && !IsTransactionBlock() &&
		edata->sqlerrcode != ERRCODE_UNDEFINED_CURSOR &&
		edata->sqlerrcode != ERRCODE_UNDEFINED_PSTATEMENT;
}

/*
 * A stored span's record made the login role's (record_failed_commit): its
 * username, packed after the database's name, is replaced, and the text
 * after it moved.
 */
static void
give_to_login_role(TraceprofSpan *r)
{
	Oid			login = GetAuthenticatedUserId();
	char	   *user;
	Size		old_len = r->username_len + 1;
	Size		rest;
	char		name[NAMEDATALEN];
	Size		new_len;

	if (r->userid == login)
		return;
	user = span_packed_strings(r) + r->name_len + r->operation_len + r->collection_len +
		r->dbname_len + 4;
	rest = span_packed_size(r) - (user + old_len - (char *) r);
	new_len = set_user_name(r, name, login) - name;
	memmove(user + new_len, user + old_len, rest);
	memcpy(user, name, new_len);
}

/*
 * A Sync's implicit commit failed: a deferred foreign key, a serialization
 * failure.  No statement is under way and the message has no text
 * (debug_query_string is NULL), so the failure is the transaction's last
 * traced top-level statement's: a span beside it, under the same parent
 * (under it, when it has none), with its text, from its end to the error.
 * Its record becomes that span; it was stored already.  The transaction's
 * failure may be of statements run under other roles before a SET ROLE:
 * like a failed message's, the span is the login role's.
 */
static pg_noinline void
record_failed_commit(const ErrorData *edata)
{
	TraceprofSpan *r = last_top_level_span;

	last_top_level_span = NULL;
	/* A statement that began its trace (no caller's span): its child, one root a trace. */
	if (began_its_trace(r))
		memcpy(r->parent_span_id, r->span_id, TP_SPAN_ID_BYTES);
	if (!tp_id_random(r->span_id, TP_SPAN_ID_BYTES))
	{
		span_store_count_unmade();
		return;
	}
	rename_span(r, "postgresql", NULL);
	give_to_login_role(r);
	r->start_ns = r->end_ns;
	r->end_ns = (int64) tp_unix_now_ns();
	r->cpu_ns = -1;
	r->rows = -1;
	r->rows_meaning = 0;
	r->planning_ns = -1;
	r->shared_blks_hit = r->shared_blks_read = r->wal_bytes = 0;
	r->profiled = false;
	set_error(r, edata->sqlerrcode, error_message(edata));
	span_store_write(r);
}

/*
 * An error nobody caught is reported (PostgresMain, or a FATAL's errfinish)
 * before its transaction aborts and before the client hears of it: its
 * spans end here, so that they are stored by the time the client can look.
 * The abort then finds them closed.  Not called when log_min_messages
 * hides errors; the abort ends the spans then.
 */
/*
 * A warning reported while a span is at work: a statement whose response
 * ends with one has its SQLSTATE as db.response.status_code, as an error's
 * (the last warning's), without error status.
 */
static pg_noinline void
note_warning(int sqlerrcode)
{
	OpenSpan   *span = (OpenSpan *) span_at_work();

	if (span != NULL && !span->ended && span->record->status != SPAN_STATUS_ERROR)
		strlcpy(span->record->sqlstate, unpack_sql_state(sqlerrcode), sizeof(span->record->sqlstate));
}

static void
traceprof_emit_log(ErrorData *edata)
{
	bool		owned = false;

	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
	if (edata->elevel < ERROR)
	{
		if (edata->elevel >= WARNING && open_count > 0)
			note_warning(edata->sqlerrcode);
		return;
	}
	reporting_error = true;
	if (open_count > 0 && IsTransactionState())
	{
		/* A FATAL ends the whole session, an ERROR its (sub)transaction. */
		int			first = edata->elevel >= FATAL ? 0 : first_span_of_current_xact();

		owned = any_running(first);
		close_from(first, -1, edata->sqlerrcode, error_message(edata));
		error_raised = false;
	}
	/*
	 * A walsender's database connection runs a client's SQL too (logical
	 * replication), in a transaction, which its replication commands (no
	 * statements: none of them has a span) run outside.
	 */
	if (!owned && edata->elevel == ERROR &&
		(MyBackendType == B_BACKEND || (am_db_walsender && IsTransactionState())))
	{
		/* No statement under way took the error: only kept portals, or nothing, were open. */
		if (debug_query_string == NULL && may_be_sync_commit(edata))
		{
			if (last_top_level_span != NULL)
				record_failed_commit(edata);
		}
		else if (decided_in_message != GetCurrentStatementStartTimestamp())
			record_failed_message(edata);
	}
	reporting_error = false;
}

/* A procedure's own COMMIT or ROLLBACK: the CALL goes on (traceprof_xact_callback). */
static inline bool
in_procedure(void)
{
	return utility_depth > 0 && !proc_exit_inprogress;
}

/* Out of line and cold: an abort's code stays off the commit's cache lines. */
static pg_noinline pg_attribute_cold void
transaction_aborted(void)
{
	decided.pending = false;
	reporting_error = false;	/* in case our emit_log_hook was left by an error */
	/* A ROLLBACK ends well; a statement planned but not run failed with the rest. */
	while (open_count > 0 && open_spans[open_count - 1].awaiting_xact_end)
		close_innermost(-1, 0, NULL);
	if (in_procedure())
	{
		error_raised = false;
		return;
	}
	close_aborted(0, "transaction aborted");
	last_top_level_span = NULL;
	nesting_level = plan_nesting = utility_depth = 0;
	keep_engagement_offset();
	profiler_flush();			/* the failed statement's samples, now */
}

/*
 * A transaction's end.  An abort ends the spans still open with the error
 * that caused it (their statements' hooks catch nothing) and starts the
 * nesting afresh; so does a commit, in case some code swallowed an error
 * without a subtransaction.  Inside a CALL both are the procedure's own
 * COMMIT or ROLLBACK: the statement goes on, and so do its span and our
 * nesting.  An error reaches the abort only after ProcessUtility's catches
 * have unwound utility_depth to 0; a FATAL exits without unwinding, so at
 * process exit every open span ends.
 */
static void
traceprof_xact_callback(XactEvent event, void *arg)
{
	/* Hooks bypassed: nothing of ours is open, nesting nor sampling to end. */
	if (hooks_bypassed && (event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_COMMIT))
	{
		last_top_level_span = NULL;
		return;
	}
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			transaction_aborted();
			break;
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			/* Not one of VACUUM's or CREATE INDEX CONCURRENTLY's own commits. */
			if (unlikely(profiler_utility_sampling_left()) && utility_depth == 0)
				profiler_utility_sampling_reset();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			decided.pending = false;
			close_stale(true);
			error_raised = false;
			last_top_level_span = NULL;
			if (!in_procedure())
				nesting_level = plan_nesting = 0;
			keep_engagement_offset();
			/* A worker's one plain commit ends its start, after it began to sample (traceprof.c). */
			if (open_count == 0 && !IsParallelWorker())
				profiler_flush();
			break;
		case XACT_EVENT_PARALLEL_COMMIT:
			profiler_flush();	/* a worker's samples, before its leader goes on */
			break;
		default:
			break;
	}
}

/*
 * A subtransaction's start records the nesting; its abort (an error caught
 * by an exception block, ROLLBACK TO SAVEPOINT, or an error at the top
 * level inside a savepoint) puts it back and ends the spans opened since.
 */
static void
traceprof_subxact_callback(SubXactEvent event, SubTransactionId subid,
						   SubTransactionId parent_subid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	NestingAtStart *start;

	if (event == SUBXACT_EVENT_START_SUB)
	{
		Assert(subid == GetCurrentSubTransactionId());
		if (level >= subxact_starts_size)
		{
			int			size = Max(16, level * 2);

			subxact_starts = subxact_starts == NULL ?
				MemoryContextAlloc(TopMemoryContext, size * sizeof(NestingAtStart)) :
				repalloc(subxact_starts, size * sizeof(NestingAtStart));
			subxact_starts_size = size;
		}
		start = &subxact_starts[level];
		start->subid = subid;
		start->nesting_level = nesting_level;
		start->plan_nesting = plan_nesting;
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB && (start = current_subxact_start()) != NULL)
	{
		Assert(subid == GetCurrentSubTransactionId());
		decided.pending = false;
		nesting_level = start->nesting_level;
		plan_nesting = start->plan_nesting;
		keep_engagement_offset();
		/* Under a COMMIT or ROLLBACK the whole transaction ends: its abort closes them. */
		if (open_count == 0 || !open_spans[open_count - 1].awaiting_xact_end)
			close_aborted(first_span_of_current_xact(), "subtransaction aborted");
	}
}

/*
 * Hook bypass.  A session that cannot trace (no traceprof.traceparent, no
 * sampling, no comment) still paid for our planner, executor and utility
 * hooks on every statement: ~100 instructions each, but cold cache lines
 * every time, 1-2% of an OLTP transaction.  So while nothing can trace, a
 * client's backend takes them out of their chains and leaves post-parse
 * analysis alone to watch for comments.
 *
 * Taken out only when all six are ours to take (no module loaded after us
 * calls them), between statements, with nothing of ours under way.  Put
 * back by a comment (before its statement is planned), or by a setting
 * that may trace: that may be in the middle of a statement (set_config()
 * in a query, or while it is planned), so our counts start one deep until
 * it is over (engaged_in_message).  A statement seen with a traceparent comment keeps
 * the hooks for the session: a prepared statement may run from its cached
 * plan later, parsed no more.
 */
static bool comment_seen;
static bool bypass_refused;		/* a module loaded after us calls our hooks */

static bool
may_bypass(void)
{
	return !session_may_trace() && traceprof_profile != PROFILE_ALL &&
		(profiler_state == SAMPLER_NOT_STARTED || profiler_state == SAMPLER_PAUSED) &&
		open_count == 0 && nesting_level == 0 && plan_nesting == 0 && utility_depth == 0 &&
		!error_raised && prepared_text == NULL && !bypass_refused &&
		(MyBackendType == B_BACKEND || !IsUnderPostmaster);	/* a client's, or single-user */
}

static bool
hooks_are_ours(void)
{
	return planner_hook == traceprof_planner && ExecutorStart_hook == traceprof_ExecutorStart &&
		ExecutorRun_hook == traceprof_ExecutorRun && ExecutorFinish_hook == traceprof_ExecutorFinish &&
		ExecutorEnd_hook == traceprof_ExecutorEnd && ProcessUtility_hook == traceprof_ProcessUtility;
}

/* Out of line, with its checks: a session that may trace never comes here. */
static pg_noinline void
bypass_hooks(void)
{
	if (!may_bypass())
		return;
	if (!hooks_are_ours())
	{
		bypass_refused = true;	/* no hook leaves a chain it is called from */
		return;
	}
	planner_hook = prev_planner;
	ExecutorStart_hook = prev_ExecutorStart;
	ExecutorRun_hook = prev_ExecutorRun;
	ExecutorFinish_hook = prev_ExecutorFinish;
	ExecutorEnd_hook = prev_ExecutorEnd;
	ProcessUtility_hook = prev_ProcessUtility;
	decided.pending = false;
	decided_in_message = 0;
	hooks_bypassed = true;
}

/*
 * Our six hooks go first in their chains, as when the library was loaded.
 * Put back after a bypass, each chain holds what we left there, or a
 * module loaded meanwhile (LOAD) that took that as its next hook: either
 * way, what is there becomes ours.
 */
static pg_noinline void
engage_hooks(void)
{
	prev_planner = planner_hook;
	planner_hook = traceprof_planner;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = traceprof_ExecutorStart;
	prev_ExecutorRun = ExecutorRun_hook;
	ExecutorRun_hook = traceprof_ExecutorRun;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = traceprof_ExecutorFinish;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = traceprof_ExecutorEnd;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = traceprof_ProcessUtility;
	hooks_bypassed = false;
}

/*
 * A client's statement was parsed with no portal running
 * (traceprof_post_parse_analyze): nothing of ours is under way.  A
 * traceparent comment, well formed or not, puts the hooks back before the
 * statement is planned; else they go if nothing can trace.
 */
static pg_noinline void
client_statement_parsed(const char *source, int location, int len)
{
	const char *text;
	int			text_len;
	tp_span_context ignored;

	if (unlikely(engaged_in_message != 0))
		end_engagement_offset();	/* the statement that engaged them is over */
	client_parsed.source = source;
	client_parsed.location = location;
	client_parsed.len = len;
	client_parsed.message = GetCurrentStatementStartTimestamp();
	if (comment_seen)
		return;
	text = context_bytes(source, location, len, &text_len);
	if (unlikely(tp_sqlcomment_present(text, text_len)) &&
		tp_sqlcomment_traceparent(text, text_len, &ignored) != TP_COMMENT_NONE)
	{
		comment_seen = true;
		if (hooks_bypassed)
			engage_hooks();
	}
	else if (!hooks_bypassed && !session_may_trace())	/* a session that may trace calls nothing */
		bypass_hooks();
}

/*
 * A setting that may trace was assigned (traceprof.traceparent,
 * sample_rate, profile = all).  Inside a client message (SET, set_config()
 * in a query, a function's SET clause, even while planning), a statement is
 * under way that our counts did not see start: they count it until it is
 * over, and it stays untraced, as its planning was; an error it raises is
 * its own, not one raised before any hook (record_failed_message).  A
 * reload is read between messages.
 */
void
statement_spans_may_trace(void)
{
	if (!hooks_bypassed)
		return;
	engage_hooks();
	if (debug_query_string != NULL || ActivePortal != NULL)
	{
		nesting_level = 1;
		engaged_in_message = GetCurrentStatementStartTimestamp();
		decided_in_message = engaged_in_message;
	}
}

void
statement_spans_install_hooks(void)
{
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = traceprof_post_parse_analyze;
	engage_hooks();
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = traceprof_emit_log;
	RegisterXactCallback(traceprof_xact_callback, NULL);
	RegisterSubXactCallback(traceprof_subxact_callback, NULL);
}
