/*
 * span_attributes.c - a stored span as a common/ tp_span: the one mapping
 * to OpenTelemetry names, used both by the exporter and by the SQL view.
 *
 * Attribute names follow OpenTelemetry's database semantic conventions;
 * what only the server knows is under traceprof.*.
 */
#include "postgres.h"

#include "pyroscope.h"
#include "span.h"
#include "traceprof.h"

#define TRACEPROF_QUERY_TEXT_KEY "db.query.text"

/*
 * Links into Pyroscope: this trace's profile, and the baseline (every
 * profiled span of the same name), as Pyroscope's span-profile docs define
 * it.  The server URL is shown without credentials.
 */
static void
set_profile_urls(tp_span *out, const TraceprofSpan *r)
{
	tp_pyroscope_config cfg;
	char		trace_hex[TP_TRACE_ID_HEX + 1];
	char	   *url;

	memset(&cfg, 0, sizeof(cfg));
	cfg.server_address = traceprof_pyroscope_url;
	cfg.application_name = (char *) traceprof_pyroscope_application();
	tp_hex_encode(r->trace_id, TP_TRACE_ID_BYTES, trace_hex);
	url = tp_pyroscope_query_url(&cfg, trace_hex);
	if (url != NULL)
		tp_span_set_string(out, "pyroscope.profile.url", url);
	free(url);
	url = tp_pyroscope_query_url_for(&cfg, "span_name", r->name);
	if (url != NULL)
		tp_span_set_string(out, "pyroscope.profile.baseline.url", url);
	free(url);
}

void
span_to_tp_span(const TraceprofSpan *r, tp_span *out, bool include_private)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->context.trace_id, r->trace_id, TP_TRACE_ID_BYTES);
	memcpy(out->context.span_id, r->span_id, TP_SPAN_ID_BYTES);
	out->context.flags = r->flags;
	memcpy(out->parent_span_id, r->parent_span_id, TP_SPAN_ID_BYTES);
	out->name = strdup(r->name[0] ? r->name : "statement");
	out->kind = (tp_span_kind) r->kind;
	out->start_unix_ns = (uint64) r->start_ns;
	out->end_unix_ns = (uint64) r->end_ns;

	tp_span_set_string(out, "db.system.name", "postgresql");
	tp_span_set_string(out, "db.namespace", r->dbname);
	if (r->operation[0])
		tp_span_set_string(out, "db.operation.name", r->operation);
	if (r->collection[0])
		tp_span_set_string(out, "db.collection.name", r->collection);
	if (include_private && r->query[0])
		tp_span_set_string(out, TRACEPROF_QUERY_TEXT_KEY, r->query);
	if (r->rows >= 0)
		tp_span_set_int(out, "db.response.returned_rows", r->rows);
	if (r->query_id != 0)
		tp_span_set_int(out, "traceprof.query_id", (int64) r->query_id);
	tp_span_set_int(out, "traceprof.backend_pid", r->pid);
	tp_span_set_string(out, "traceprof.user", r->username);
	tp_span_set_int(out, "traceprof.cpu_time_ns", r->cpu_ns);
	tp_span_set_int(out, "traceprof.shared_blks_hit", r->shared_blks_hit);
	tp_span_set_int(out, "traceprof.shared_blks_read", r->shared_blks_read);
	tp_span_set_int(out, "traceprof.wal_bytes", r->wal_bytes);
	if (r->planning_ns >= 0)
		tp_span_set_int(out, "traceprof.planning_time_ns", r->planning_ns);
	if (r->profiled)
	{
		char		hex[TP_SPAN_ID_HEX + 1];

		tp_hex_encode(r->profile_span_id, TP_SPAN_ID_BYTES, hex);
		tp_span_set_string(out, "pyroscope.profile.id", hex);
		if (traceprof_pyroscope_url[0] != '\0')
			set_profile_urls(out, r);
	}
	if (r->status == SPAN_STATUS_ERROR)
	{
		tp_span_set_string(out, "db.response.status_code", r->sqlstate);
		tp_span_set_string(out, "error.type", r->sqlstate);
		tp_span_set_error(out, include_private ? r->message : "");
	}
}
