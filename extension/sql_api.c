/*
 * sql_api.c - traceprof.spans, traceprof.stats and traceprof.reset().
 *
 * Visibility follows pg_stat_statements: query text and error messages of
 * other users' spans are shown only to superusers and members of
 * pg_read_all_stats.
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "span_attributes.h"

PG_FUNCTION_INFO_V1(traceprof_spans);
PG_FUNCTION_INFO_V1(traceprof_stats);
PG_FUNCTION_INFO_V1(traceprof_reset);

#define SPANS_COLUMNS 17
#define STATS_COLUMNS 17
#define HIDDEN "<insufficient privilege>"

typedef struct SpanScan
{
	ReturnSetInfo *rsinfo;
	Oid			userid;
	bool		see_all;
	bool		see_settings;	/* the superuser-only ones, as SHOW lets see them */
} SpanScan;

static void
require_loaded(void)
{
	if (!process_shared_preload_libraries_done || traceprof_max_spans == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("traceprof must be loaded via shared_preload_libraries")));
}

/*
 * The row shape the caller declared is the one this library writes: SQL
 * objects from another build of traceprof (the same version number) would
 * have their columns read as the wrong types, and crash the backend.
 */
void
require_result_columns(TupleDesc desc, int columns, const char *function)
{
	if (desc->natts != columns)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("traceprof.%s() is declared with %d columns, but the loaded library returns %d",
						function, desc->natts, columns),
				 errhint("The extension's SQL objects are from another build of traceprof: "
						 "DROP EXTENSION traceprof; CREATE EXTENSION traceprof;")));
}

static TimestampTz
unix_ns_to_timestamptz(int64 ns)
{
	return (TimestampTz) (ns / 1000) -
		(TimestampTz) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

static text *
hex_text(const uint8 *bytes, size_t len)
{
	char		hex[2 * TP_TRACE_ID_BYTES + 1];

	tp_hex_encode(bytes, len, hex);
	return cstring_to_text(hex);
}

static const char *
kind_name(int kind)
{
	switch (kind)
	{
		case SPAN_KIND_SERVER:
			return "server";
		case SPAN_KIND_INTERNAL:
			return "internal";
		default:
			return "unspecified";
	}
}

/* The span's attributes as a jsonb object. */
static Datum
attributes_jsonb(const tp_span *span)
{
	StringInfoData json;
	Datum		result;

	initStringInfo(&json);
	appendStringInfoChar(&json, '{');
	for (size_t i = 0; i < span->attr_count; i++)
	{
		const tp_attr *attr = &span->attrs[i];

		if (i > 0)
			appendStringInfoString(&json, ", ");
		escape_json(&json, attr->key);
		appendStringInfoString(&json, ": ");
		switch (attr->type)
		{
			case TP_ATTR_STRING:
				escape_json(&json, attr->value.s);
				break;
			case TP_ATTR_INT:
				appendStringInfo(&json, INT64_FORMAT, attr->value.i);
				break;
			case TP_ATTR_DOUBLE:
				appendStringInfo(&json, "%.17g", attr->value.d);
				break;
			case TP_ATTR_BOOL:
				appendStringInfoString(&json, attr->value.b ? "true" : "false");
				break;
		}
	}
	appendStringInfoChar(&json, '}');
	result = DirectFunctionCall1(jsonb_in, CStringGetDatum(json.data));
	pfree(json.data);
	return result;
}

static bool
emit_span_row(const TraceprofSpan *r, void *arg)
{
	SpanScan  *state = arg;
	bool		visible = state->see_all || r->userid == state->userid;
	Datum		values[SPANS_COLUMNS];
	bool		nulls[SPANS_COLUMNS];
	SpanAttributes attrs;
	tp_span		span;
	int			i = 0;

	memset(nulls, 0, sizeof(nulls));
	span_view(r, visible, state->see_settings, &attrs, &span);
	values[i++] = PointerGetDatum(hex_text(r->trace_id, TP_TRACE_ID_BYTES));
	values[i++] = PointerGetDatum(hex_text(r->span_id, TP_SPAN_ID_BYTES));
	if (tp_id_is_zero(r->parent_span_id, TP_SPAN_ID_BYTES))
		nulls[i++] = true;
	else
		values[i++] = PointerGetDatum(hex_text(r->parent_span_id, TP_SPAN_ID_BYTES));
	/* A vendor's state may be as private as the query: shown as its text is. */
	if (r->trace_state_len == 0)
		nulls[i++] = true;
	else
		values[i++] = CStringGetTextDatum(visible ? r->trace_state : HIDDEN);
	values[i++] = CStringGetTextDatum(span.name);
	values[i++] = CStringGetTextDatum(kind_name(r->kind));
	values[i++] = TimestampTzGetDatum(unix_ns_to_timestamptz(r->start_ns));
	values[i++] = TimestampTzGetDatum(unix_ns_to_timestamptz(r->end_ns));
	values[i++] = Float8GetDatum((r->end_ns - r->start_ns) / 1e6);
	if (r->cpu_ns >= 0)
		values[i++] = Float8GetDatum(r->cpu_ns / 1e6);
	else
		nulls[i++] = true;
	values[i++] = CStringGetTextDatum(r->status == SPAN_STATUS_ERROR ? "error" : "unset");
	if (r->status == SPAN_STATUS_ERROR)
		values[i++] = CStringGetTextDatum(visible ? r->message : HIDDEN);
	else
		nulls[i++] = true;
	values[i++] = Int32GetDatum(r->pid);
	values[i++] = CStringGetTextDatum(r->username);
	values[i++] = CStringGetTextDatum(r->dbname);
	/* No text (query_text = off, a plan span): NULL, as the attribute is absent. */
	if (r->query_len == 0)
		nulls[i++] = true;
	else
		values[i++] = CStringGetTextDatum(visible ? r->query : HIDDEN);
	values[i++] = attributes_jsonb(&span);
	Assert(i == SPANS_COLUMNS);
	tuplestore_putvalues(state->rsinfo->setResult, state->rsinfo->setDesc, values, nulls);
	span_view_release(&attrs);
	return true;
}

/*
 * traceprof.spans_internal() (the view traceprof.spans), and
 * traceprof.trace_spans(trace_id): one trace's spans, found by the id a
 * packed span begins with, so that the others are not unpacked (their
 * texts normalized and converted) only for a WHERE to drop their rows.
 */
Datum
traceprof_spans(PG_FUNCTION_ARGS)
{
	SpanScan	state;
	uint8		trace_id[TP_TRACE_ID_BYTES];
	bool		one_trace = PG_NARGS() > 0;

	require_loaded();
	if (one_trace)
		trace_id_arg(fcinfo, 0, trace_id);
	InitMaterializedSRF(fcinfo, 0);
	state.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	require_result_columns(state.rsinfo->setDesc, SPANS_COLUMNS, "spans_internal");
	state.userid = GetUserId();
	state.see_all = superuser() || has_privs_of_role(state.userid, ROLE_PG_READ_ALL_STATS);
	state.see_settings = superuser() || has_privs_of_role(state.userid, ROLE_PG_READ_ALL_SETTINGS);
	span_store_scan_retained(one_trace ? trace_id : NULL, emit_span_row, &state);
	return (Datum) 0;
}

static Datum
timestamp_or_null(TimestampTz ts, bool *isnull)
{
	*isnull = ts == 0;
	return TimestampTzGetDatum(ts);
}

Datum
traceprof_stats(PG_FUNCTION_ARGS)
{
	SpanStoreStats stats;
	int64		samples_stored;
	int64		samples_dropped;
	int64		samples_exported;
	TupleDesc	desc;
	Datum		values[STATS_COLUMNS];
	bool		nulls[STATS_COLUMNS];
	int			i = 0;

	require_loaded();
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	require_result_columns(desc, STATS_COLUMNS, "stats_internal");
	span_store_get_stats(&stats);
	memset(nulls, 0, sizeof(nulls));
	values[i++] = Int64GetDatum(stats.created);
	values[i++] = Int64GetDatum(stats.dropped);
	values[i++] = Int64GetDatum(stats.exported);
	values[i++] = Int64GetDatum(stats.export_failures);
	values[i++] = Int64GetDatum(stats.malformed_contexts);
	values[i++] = Int64GetDatum(stats.pending);
	values[i++] = Int64GetDatum(stats.capacity);
	values[i] = timestamp_or_null(stats.last_export, &nulls[i]);
	i++;
	values[i] = timestamp_or_null(stats.last_failure, &nulls[i]);
	i++;
	/*
	 * A collector's refusal may quote what it was sent (other roles' query
	 * texts), and the endpoint is superuser-only: shown as query text is.
	 */
	if (stats.last_error[0] == '\0')
		nulls[i++] = true;
	else if (superuser() || has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS))
		values[i++] = PointerGetDatum(utf8_to_database_text(stats.last_error));	/* kept in UTF-8 */
	else
		values[i++] = CStringGetTextDatum("<insufficient privilege>");
	values[i++] = TimestampTzGetDatum(stats.stats_reset);
	sample_store_counts(&samples_stored, &samples_dropped, &samples_exported);
	values[i++] = Int64GetDatum(samples_stored);
	values[i++] = Int64GetDatum(samples_dropped);
	values[i++] = Int64GetDatum(samples_exported);
	values[i++] = Int64GetDatum(stats.upload_failures);
	values[i++] = Float8GetDatum(100.0 * sample_store_named_share());
	values[i++] = Int64GetDatum(function_names_overflow());
	Assert(i == STATS_COLUMNS);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

Datum
traceprof_reset(PG_FUNCTION_ARGS)
{
	require_loaded();
	span_store_reset();
	sample_store_reset();
	PG_RETURN_VOID();
}
