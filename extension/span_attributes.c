/*
 * span_attributes.c - a stored span as a common/ tp_span: the one mapping
 * to OpenTelemetry names, used both by the exporter and by the SQL view.
 *
 * Attribute names follow OpenTelemetry's database semantic conventions;
 * what only the server knows is under traceprof.*.  The exporter builds a
 * view per exported span, so nothing here copies or searches.
 */
#include "postgres.h"

#include "pyroscope.h"
#include "span_attributes.h"

typedef struct AttrList
{
	SpanAttributes *attrs;
	size_t		count;
} AttrList;

/*
 * Keys (and a few values) are string literals (the "" pasting refuses
 * anything else): their lengths are known here, not measured per span.
 * add_string_n passes a value's known length too.
 */
#define LITERAL_LEN(literal) (sizeof("" literal "") - 1)
#define add_string(list, key, value) add_string_len(list, key, LITERAL_LEN(key), value, 0)
#define add_string_n(list, key, value, len) add_string_len(list, key, LITERAL_LEN(key), value, len)
#define add_int(list, key, value) add_int_len(list, key, LITERAL_LEN(key), value)

/* value_len 0: the encoder measures the value. */
static void
add_string_len(AttrList *list, const char *key, uint32 key_len, const char *value, uint32 value_len)
{
	tp_attr    *a = &list->attrs->items[list->count++];

	Assert(list->count <= SPAN_MAX_ATTRIBUTES);
	a->key = (char *) key;
	a->key_len = key_len;
	a->type = TP_ATTR_STRING;
	a->value.s = (char *) value;
	a->value_len = value_len;
}

static void
add_int_len(AttrList *list, const char *key, uint32 key_len, int64 value)
{
	tp_attr    *a = &list->attrs->items[list->count++];

	Assert(list->count <= SPAN_MAX_ATTRIBUTES);
	a->key = (char *) key;
	a->key_len = key_len;
	a->type = TP_ATTR_INT;
	a->value.i = value;
	a->value_len = 0;
}

/*
 * Links into Pyroscope: this trace's profile, and the baseline (every
 * profiled span of the same name, with traceprof.profile_span_name), as
 * Pyroscope's span-profile docs define it.  The server URL is shown
 * without credentials, and the application named as the uploads name it
 * (a service name made into one).
 */
static void
add_profile_urls(AttrList *list, const TraceprofSpan *r)
{
	tp_pyroscope_config cfg;
	char		trace_hex[TP_TRACE_ID_HEX + 1];
	char		application[TP_PYROSCOPE_MAX_TAG_VALUE + 1];
	SpanAttributes *attrs = list->attrs;

	strlcpy(application, traceprof_pyroscope_application(), sizeof(application));
	tp_pyroscope_make_application_name(application);
	memset(&cfg, 0, sizeof(cfg));
	cfg.server_address = traceprof_pyroscope_url;
	cfg.application_name = application;
	/* Its query filters on the trace_id label: uploads carry it only so. */
	if (traceprof_profile_trace_id)
	{
		tp_hex_encode(r->trace_id, TP_TRACE_ID_BYTES, trace_hex);
		attrs->profile_url = tp_pyroscope_query_url(&cfg, trace_hex);
		if (attrs->profile_url != NULL)
			add_string(list, "pyroscope.profile.url", attrs->profile_url);
	}
	/* Its query filters on the span_name label: uploads carry it only so. */
	if (!traceprof_profile_span_name)
		return;
	attrs->baseline_url = tp_pyroscope_query_url_for(&cfg, "span_name", r->name);
	if (attrs->baseline_url != NULL)
		add_string(list, "pyroscope.profile.baseline.url", attrs->baseline_url);
}

static void
set_name(tp_span *out, const char *name, uint32 len)
{
	if (len == 0)
	{
		name = "statement";
		len = LITERAL_LEN("statement");
	}
	out->name = (char *) name;
	out->name_len = len;
}

void
span_view(const TraceprofSpan *r, bool include_private, bool include_links,
		  SpanAttributes *attrs, tp_span *out)
{
	AttrList	list = {attrs, 0};

	attrs->profile_url = NULL;
	attrs->baseline_url = NULL;
	add_string_n(&list, "db.system.name", "postgresql", LITERAL_LEN("postgresql"));
	add_string_n(&list, "db.namespace", r->dbname, r->dbname_len);
	if (r->operation[0])
		add_string_n(&list, "db.operation.name", r->operation, r->operation_len);
	/* Another role's table names are private, as its query text is; a CALL's target is its procedure. */
	if (include_private && r->collection[0] && strcmp(r->operation, "CALL") == 0)
		add_string_n(&list, "db.stored_procedure.name", r->collection, r->collection_len);
	else if (include_private && r->collection[0])
		add_string_n(&list, "db.collection.name", r->collection, r->collection_len);
	if (include_private && r->query[0])
		add_string_n(&list, "db.query.text", r->query, r->query_len);
	if (r->rows >= 0 && (r->rows_meaning & ROWS_RETURNED))
		add_int(&list, "db.response.returned_rows", r->rows);
	if (r->rows >= 0 && (r->rows_meaning & ROWS_AFFECTED))
		add_int(&list, "traceprof.rows_affected", r->rows);
	/* As pg_stat_statements shows it: with the text, to whoever may see that. */
	if (include_private && r->query_id != 0)
		add_int(&list, "traceprof.query_id", (int64) r->query_id);
	add_int(&list, "traceprof.backend_pid", r->pid);
	add_string_n(&list, "traceprof.user", r->username, r->username_len);
	if (r->cpu_ns >= 0)
		add_int(&list, "traceprof.cpu_time_ns", r->cpu_ns);
	add_int(&list, "traceprof.shared_blks_hit", r->shared_blks_hit);
	add_int(&list, "traceprof.shared_blks_read", r->shared_blks_read);
	add_int(&list, "traceprof.wal_bytes", r->wal_bytes);
	if (r->planning_ns >= 0)
		add_int(&list, "traceprof.planning_time_ns", r->planning_ns);
	if (r->profiled)
	{
		tp_hex_encode(r->profile_span_id, TP_SPAN_ID_BYTES, attrs->profile_id);
		add_string_n(&list, "pyroscope.profile.id", attrs->profile_id, TP_SPAN_ID_HEX);
		/* They name the server of a superuser's setting. */
		if (include_private && include_links && traceprof_pyroscope_url[0] != '\0')
			add_profile_urls(&list, r);
	}

	memset(out, 0, sizeof(*out));
	memcpy(out->context.trace_id, r->trace_id, TP_TRACE_ID_BYTES);
	memcpy(out->context.span_id, r->span_id, TP_SPAN_ID_BYTES);
	out->context.flags = r->flags;
	out->parent_place = r->remote_parent ? TP_PARENT_REMOTE : TP_PARENT_LOCAL;
	memcpy(out->parent_span_id, r->parent_span_id, TP_SPAN_ID_BYTES);
	/* Most spans have none: NULL, not "" of a length 0 that means unknown. */
	out->trace_state = r->trace_state_len > 0 ? (char *) r->trace_state : NULL;
	out->trace_state_len = r->trace_state_len;
	/* Another role's span name would show its table: the operation alone. */
	if (include_private || r->collection[0] == '\0')
		set_name(out, r->name, r->name_len);
	else
		set_name(out, r->operation, r->operation_len);
	out->kind = (tp_span_kind) r->kind;
	out->start_unix_ns = (uint64) r->start_ns;
	out->end_unix_ns = (uint64) r->end_ns;
	if (r->status == SPAN_STATUS_ERROR)
	{
		add_string(&list, "db.response.status_code", r->sqlstate);
		add_string(&list, "error.type", r->sqlstate);
		out->status = TP_STATUS_ERROR;
		out->status_message = (char *) (include_private ? r->message : "");
		out->status_message_len = include_private ? r->message_len : 0;
	}
	else if (r->sqlstate[0] != '\0')
		add_string(&list, "db.response.status_code", r->sqlstate);	/* it ended with a warning */
	out->attrs = attrs->items;
	out->attr_count = list.count;
	out->attr_capacity = SPAN_MAX_ATTRIBUTES;
}

void
span_view_release(SpanAttributes *attrs)
{
	free(attrs->profile_url);
	free(attrs->baseline_url);
	attrs->profile_url = NULL;
	attrs->baseline_url = NULL;
}
