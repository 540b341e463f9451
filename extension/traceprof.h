/*
 * traceprof.h - declarations shared by the extension's files.
 *
 * The extension is thin glue: trace-context parsing, sqlcommenter, OTLP
 * encoding and delivery live in common/ (no PostgreSQL headers there).
 */
#ifndef TRACEPROF_H
#define TRACEPROF_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "port/atomics.h"
#include "storage/spin.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "trace_context.h"
#include "tracestate.h"

/* GUC values (traceprof.c) */
/*
 * Variables the hooks read for every statement, traced or not: in a section
 * of their own, so that they share a few cache lines instead of taking
 * one each wherever the compiler put them.  A statement's hooks run
 * after PostgreSQL's own work (and other processes, on a busy server) has
 * pushed those lines out.
 */
#define TP_HOT __attribute__((section("traceprof_hot")))

typedef enum
{
	TRACK_TOP,
	TRACK_ALL,
} TrackLevel;

typedef enum
{
	QUERY_TEXT_NORMALIZED,
	QUERY_TEXT_FULL,
	QUERY_TEXT_OFF,
} QueryTextMode;

extern int	traceprof_track;
extern bool traceprof_track_planning;
extern bool traceprof_track_cpu_time;
extern int	traceprof_query_text;
extern int	traceprof_max_query_length;
extern int	traceprof_max_spans;
extern double traceprof_sample_rate;
extern char *traceprof_otlp_endpoint;
extern bool traceprof_exporting;	/* otlp_endpoint is set; writers ask the ring */
extern char *traceprof_otlp_ca_file;
extern char *traceprof_otlp_client_certificate;
extern char *traceprof_otlp_client_key;
extern int	traceprof_otlp_protocol;
extern int	traceprof_otlp_compression;
#define OTLP_COMPRESSION_NONE 0
#define OTLP_COMPRESSION_GZIP 1
extern char *traceprof_service_name;
extern char *traceprof_resource_attributes;
extern int	traceprof_otlp_timeout_ms;
extern int	traceprof_export_interval_ms;
extern int	traceprof_export_batch_size;

/* The context set by traceprof.traceparent, if valid and non-empty. */
extern bool traceprof_guc_context_valid;
extern tp_span_context traceprof_guc_context;
/* traceprof.tracestate as kept (checked, cut), for that context; "" if none. */
extern char traceprof_guc_tracestate[TP_TRACESTATE_MAX + 1];
extern uint16 traceprof_guc_tracestate_len;

/* Span kinds and status codes share OTLP's numbering (common/span.h). */
#define SPAN_KIND_INTERNAL 1
#define SPAN_KIND_SERVER 2

#define SPAN_STATUS_UNSET 0
#define SPAN_STATUS_ERROR 2

/*
 * Room for a name: NAMEDATALEN bytes of its database's encoding may take
 * up to three times as many in UTF-8 (span_encoding.c).
 */
#define SPAN_NAME_BYTES (3 * NAMEDATALEN)

/*
 * One span, in one of two forms.  Readers get it unpacked, each string in
 * its array.  A backend builds it packed, the form shared memory keeps: the
 * fields before name, then name, operation, collection, dbname, username,
 * trace_state, query and message back to back, each NUL-terminated, so that a short
 * statement's span takes a few cache lines instead of the ~1,650 bytes its
 * string arrays span, and is stored with two copies.  Packed, of its strings
 * only name (the first) may be read as a field.  The query text's room is
 * traceprof.max_query_length bytes; either form fits TraceprofSpanSize().
 */
typedef struct TraceprofSpan
{
	uint8		trace_id[TP_TRACE_ID_BYTES];
	uint8		span_id[TP_SPAN_ID_BYTES];
	uint8		parent_span_id[TP_SPAN_ID_BYTES];	/* zero: a root span */
	uint8		flags;			/* W3C trace flags */
	uint8		kind;
	uint8		status;
	bool		remote_parent;	/* parent came from the client */
	bool		profiled;		/* the sampler ran while it was open */
	uint8		query_form;		/* QueryForm: what readers do with query */
	uint8		rows_meaning;	/* ROWS_RETURNED and/or ROWS_AFFECTED */
	uint8		encoding;		/* its database's: readers cut its text by it */
	uint8		profile_span_id[TP_SPAN_ID_BYTES];	/* its samples' span_id label */
	int32		pid;
	Oid			userid;
	Oid			dbid;
	uint64		query_id;
	int64		start_ns;		/* Unix epoch nanoseconds */
	int64		end_ns;
	int64		cpu_ns;			/* backend CPU time inside the span; -1: not tracked */
	int64		rows;			/* -1 when not applicable; see rows_meaning */
	int64		shared_blks_hit;
	int64		shared_blks_read;
	int64		wal_bytes;
	int64		planning_ns;	/* -1 when the statement was not planned */
	int32		query_len;
	uint16		trace_state_len;
	/* strlen of the strings below, so that packing copies without measuring */
	uint8		name_len;
	uint8		operation_len;
	uint8		collection_len;
	uint8		dbname_len;
	uint8		username_len;
	uint8		message_len;
	char		sqlstate[6];
	char		name[NAMEDATALEN + SPAN_NAME_BYTES];	/* operation and collection */
	char		operation[NAMEDATALEN];
	char		collection[SPAN_NAME_BYTES];
	char		dbname[SPAN_NAME_BYTES];
	char		username[SPAN_NAME_BYTES];
	char		trace_state[TP_TRACESTATE_MAX + 1];	/* the caller's W3C tracestate, or "" */
	char		message[256];
	char		query[FLEXIBLE_ARRAY_MEMBER];	/* NUL-terminated, query_len bytes */
} TraceprofSpan;

/* What a span's row count is: rows sent to the client, rows written, or both (RETURNING). */
#define ROWS_RETURNED 0x01
#define ROWS_AFFECTED 0x02

/*
 * A normalized text whose constants are every literal token is written as
 * the statement's own text and normalized where it is read (span_unpack):
 * off the statement's path, and not at all for spans nobody reads.
 */
typedef enum QueryForm
{
	QUERY_FORM_FINAL,			/* query is what readers see */
	QUERY_FORM_LITERALS,		/* replace literal tokens when read */
	QUERY_FORM_LITERALS_ESCAPED,	/* the same, standard_conforming_strings off */
} QueryForm;

#define TraceprofSpanSize() \
	(offsetof(TraceprofSpan, query) + traceprof_max_query_length + 1)

/* The packed form: its fixed part, its strings, its bytes. */
#define SPAN_PACKED_FIXED offsetof(TraceprofSpan, name)

/* Where the packed strings start; like strchr, const in and not out. */
static inline char *
span_packed_strings(const TraceprofSpan *span)
{
	return (char *) span + SPAN_PACKED_FIXED;
}

/* One packed string of len bytes and its NUL at out; returns the byte after them. */
static inline char *
span_pack_string(char *out, const char *s, Size len)
{
	memcpy(out, s, len);
	out[len] = '\0';
	return out + len + 1;
}

static inline Size
span_packed_size(const TraceprofSpan *span)
{
	return SPAN_PACKED_FIXED + span->name_len + span->operation_len + span->collection_len +
		span->dbname_len + span->username_len + span->trace_state_len + span->query_len +
		span->message_len + 8;
}

/* A packed span's tracestate: its sixth string. */
static inline char *
span_packed_trace_state(const TraceprofSpan *span)
{
	return span_packed_strings(span) + span->name_len + span->operation_len + span->collection_len +
		span->dbname_len + span->username_len + 5;
}

/* span_store.c: the shared-memory ring of finished spans */
typedef struct SpanStoreStats
{
	int64		created;
	int64		dropped;
	int64		exported;
	int64		export_failures;	/* OTLP span exports */
	int64		upload_failures;	/* Pyroscope profile uploads */
	int64		malformed_contexts;
	int64		pending;
	int64		capacity;
	TimestampTz last_export;
	TimestampTz last_failure;
	char		last_error[256];
	TimestampTz stats_reset;
} SpanStoreStats;

typedef bool (*SpanVisitor) (const TraceprofSpan *span, void *arg);

extern Size span_store_shmem_size(void);
extern void span_store_shmem_startup(void);
/* span: packed */
extern void span_store_write(const TraceprofSpan *span);
/* Between the forms (out: TraceprofSpanSize() bytes); unpacking converts no text. */
extern void span_pack(const TraceprofSpan *span, TraceprofSpan *out);
extern bool span_unpack_texts(const char *in, Size len, TraceprofSpan *out);
extern void span_store_count_malformed(void);
extern void span_store_count_unmade(void);
/* The retained spans, oldest first; those of trace_id only, unless it is NULL. */
extern void span_store_scan_retained(const uint8 *trace_id, SpanVisitor visit, void *arg);
/* Up to max spans not yet exported, into spans (TraceprofSpanSize() bytes each). */
extern uint64 span_store_read_unexported(char *spans, uint64 *ends, int max, int *count);
extern void span_store_mark_exported(uint64 upto, int count);
extern void span_store_mark_rejected(uint64 upto, int count);
extern void span_store_count_refused(int count);
/* A failed span export (OTLP) or profile upload (Pyroscope), and why. */
extern void span_store_export_failed(const char *message);
extern void span_store_upload_failed(const char *message);
extern uint64 span_store_set_exporting(bool exporting);
extern void span_store_set_exporter_latch(Latch *latch);
extern void span_store_get_stats(SpanStoreStats *stats);
extern void span_store_reset(void);

/* span_encoding.c: texts converted for readers; '?' for what cannot be */
extern void span_texts_to_encoding(TraceprofSpan *span, int encoding);
/* A packed span's copy in UTF-8, packed */
extern const TraceprofSpan *span_in_utf8(const TraceprofSpan *span);
extern text *utf8_to_database_text(const char *s);
extern void span_encoding_prepare(void);

/* sql_api.c: the views' functions */
extern void require_result_columns(TupleDesc desc, int columns, const char *function);

/* profile_api.c: argument argno as a trace id, or an ERROR naming it (NULL too) */
extern void trace_id_arg(FunctionCallInfo fcinfo, int argno, uint8 *trace_id);

/* statement_spans.c: hooks that open and close spans */
extern void statement_spans_install_hooks(void);
extern void statement_spans_may_trace(void);

/* query_text.c */
struct JumbleState;
extern char *query_text_for_span(const char *text, int len, uint64 query_id, TraceprofSpan *span,
								 char *dest);
extern int	query_text_normalize_literals(const char *text, int len, QueryForm form, int encoding,
										  char *dest);
extern void query_text_remember_constants(uint64 query_id, const char *text, int len,
										  int text_location, const struct JumbleState *jstate);

/* workers.c */
extern void traceprof_register_exporter(void);
extern bool traceprof_exporter_registered;	/* the postmaster took the worker */
extern bool traceprof_uploader_registered;
extern PGDLLEXPORT const char traceprof_build_id[];	/* build_id.h, for the workers' library */

/* exporter.c: the workers' library, traceprof_exporter */
PGDLLEXPORT void traceprof_exporter_main(Datum arg);
PGDLLEXPORT void traceprof_profile_uploader_main(Datum arg);

/* Profiling (backend_profiler.c, sample_store.c, function_names.c) */
typedef enum
{
	PROFILE_TRACED,				/* sample while a traced span is open */
	PROFILE_ALL,				/* sample every statement */
	PROFILE_OFF,
} ProfileScope;

typedef enum
{
	PROFILE_MODE_CPU,
	PROFILE_MODE_WALL,
} ProfileMode;

extern int	traceprof_profile;
extern int	traceprof_profile_mode;
extern int	traceprof_sample_hz;
extern bool traceprof_profile_root_span_only;
extern int	traceprof_max_samples;
extern int	traceprof_backend_samples;
extern int	traceprof_max_functions;
extern char *traceprof_pyroscope_url;
extern char *traceprof_pyroscope_ca_file;
extern char *traceprof_pyroscope_tenant_id;
extern int	traceprof_upload_interval_ms;
extern char *traceprof_application_name;
extern char *traceprof_pyroscope_tags;
extern char *traceprof_pyroscope_basic_auth_user;
extern char *traceprof_pyroscope_basic_auth_password;
extern bool traceprof_profile_span_name;
extern bool traceprof_profile_trace_id;

/* The Pyroscope application (service_name): traceprof.application_name or service.name. */
extern const char *traceprof_pyroscope_application(void);

#define TRACEPROF_MAX_FRAMES 64
#define TRACEPROF_NAME_LEN 96

/* One stack sample, frames as function_names ids, leaf first. */
typedef struct TraceprofSample
{
	uint8		trace_id[TP_TRACE_ID_BYTES];	/* zero: outside traced spans */
	uint8		span_id[TP_SPAN_ID_BYTES];
	uint32		span_name_id;	/* function_names id of the span's name */
	int64		time_ns;
	int32		pid;
	Oid			userid;			/* the role sampled: its stacks say what it ran */
	uint32		weight;			/* 1 + timer overruns */
	uint32		period_us;		/* CPU (or wall) time one unit of weight stands for */
	bool		wall;			/* taken on the wall clock (profile_mode = wall) */
	uint32		depth;
	uint32		frames[TRACEPROF_MAX_FRAMES];
} TraceprofSample;

typedef bool (*SampleVisitor) (const TraceprofSample *sample, void *arg);

extern Size sample_store_shmem_size(void);
extern void sample_store_shmem_startup(void);
extern uint64 sample_store_set_uploading(bool uploading);
extern void sample_store_write(const TraceprofSample *sample);
extern void sample_store_count_lost(uint64 count);
extern void sample_store_count_frames(uint64 named, uint64 total);
extern double sample_store_named_share(void);
extern void sample_store_scan(SampleVisitor visit, void *arg);
extern uint64 sample_store_read_unexported(SampleVisitor visit, void *arg, int max);
extern void sample_store_mark_exported(uint64 upto, int count);
extern void sample_store_mark_rejected(uint64 upto, int count);
extern void sample_store_counts(int64 *stored, int64 *dropped, int64 *exported);
extern void sample_store_reset(void);

extern Size function_names_shmem_size(void);
extern void function_names_request_lock(void);
extern void function_names_shmem_startup(void);
/* The id of every name that found traceprof.max_functions full: "[too many functions]". */
#define FUNCTION_NAMES_OVERFLOW 1
extern uint32 function_names_intern(const char *name);
extern uint32 function_names_intern_span(const char *name, const char *operation);
extern const char *function_names_get(uint32 id);
extern int64 function_names_overflow(void);

/*
 * backend_profiler.c: the sampler's life in a backend.  The hooks call in
 * on every statement; the inline checks below keep a statement that gives
 * the profiler nothing to do from fetching its code.
 */
typedef enum SamplerState
{
	SAMPLER_NOT_STARTED,
	SAMPLER_RUNNING,
	SAMPLER_PAUSED,
	SAMPLER_UNAVAILABLE,		/* could not start: warned once */
} SamplerState;

extern SamplerState profiler_state;
extern void profiler_arm_for_statement(const TraceprofSpan *innermost);
extern void profiler_profile_assigned(int profile);
extern void profiler_relabel(const TraceprofSpan *innermost, const TraceprofSpan *root);
extern void profiler_store_samples(void);
/* Objects loaded since the sampler read them (a first JIT compile's libLLVM). */
extern void profiler_notice_loads(void);
/* Parallel workers sample with the labels their leader publishes. */
extern Size profiler_shmem_size(void);
extern void profiler_shmem_startup(void);
extern void profiler_parallel_plan_starts(void);
extern void profiler_worker_statement_start(void) pg_attribute_cold;
extern void profiler_utility_workers_may_start(void);
extern void profiler_utility_workers_done(void);
extern bool profiler_utility_sampling_set;
extern void profiler_utility_sampling_reset(void);

/*
 * Profile off and the timer never started in this backend: the profiler's
 * entry points return at once.  Tracing alone then fetches none of the
 * profiler's code (it was a tenth of tracing's instruction-cache misses).
 */
static inline bool
profiler_dormant(void)
{
	return profiler_state == SAMPLER_NOT_STARTED && traceprof_profile == PROFILE_OFF;
}

static inline bool
profiler_is_sampling(void)
{
	return profiler_state == SAMPLER_RUNNING;
}

/*
 * A statement starts: outside spans the timer runs only with profile = all,
 * so without a span there is work only to pause it or to start it for all.
 */
static inline void
profiler_statement_start(const TraceprofSpan *innermost)
{
	if (innermost != NULL || profiler_state == SAMPLER_RUNNING || traceprof_profile == PROFILE_ALL)
		profiler_arm_for_statement(innermost);
}

/*
 * A client's statement is being parsed: a wall timer an idle session
 * stopped (profile = all) runs again from here, not from its executor.
 */
extern void profiler_wake(void);

static inline void
profiler_statement_parsed(void)
{
	if (unlikely(profiler_state == SAMPLER_RUNNING))
		profiler_wake();
}

/* The span samples are labelled with: the one at work (statement_spans.c), or none. */
static inline void
profiler_set_span(const TraceprofSpan *innermost, const TraceprofSpan *root)
{
	if (!profiler_dormant())
		profiler_relabel(innermost, root);
}

/* The samples of what ended, into the sample store. */
static inline void
profiler_flush(void)
{
	if (profiler_state == SAMPLER_RUNNING || profiler_state == SAMPLER_PAUSED)
		profiler_store_samples();
}

/*
 * traceprof.utility_sampling may be on with no statement to reset it (one
 * failed): a commit outside a utility statement resets it.
 */
static inline bool
profiler_utility_sampling_left(void)
{
	return profiler_utility_sampling_set;
}

/* Where a hook was called from, when the hook alone can tell. */
typedef enum CallPath
{
	CALL_PATH_SIMPLE_QUERY,		/* PostgresMain → exec_simple_query → PortalRun */
	CALL_PATH_EXTENDED_QUERY,	/* PostgresMain → exec_execute_message → PortalRun */
	CALL_PATH_MULTI_QUERY_UTILITY,	/* PortalRun → PortalRunMulti → PortalRunUtility */
	CALL_PATH_STORED_UTILITY,	/* PortalRun → FillPortalStore → PortalRunUtility */
	CALL_PATH_COUNT
} CallPath;
extern void profiler_learn_call_path(CallPath path);

/* relation_names.c: table names remembered per backend */
extern const char *relation_name(Oid relid);

/* statement_names.c: db.operation.name and db.collection.name of a statement */
struct Node;
extern const char *statement_operation(struct Node *stmt);
extern const char *statement_collection(struct Node *stmt);

/* executor_names.c: static node functions named from running plans */
struct PlanState;
extern void executor_names_learn(struct PlanState *planstate);
extern const char *executor_names_lookup(uintptr_t function_start);
/* name: a string constant; a function found by other means (chain_names.h) */
extern void executor_names_teach(uintptr_t function_start, const char *name);
extern uint64 executor_names_generation(void);

#endif
