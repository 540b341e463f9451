/* tracer.c - spans of a command-line run, exported once at the end. */
#include "tracer.h"

#include <stdlib.h>
#include <string.h>

#include "http_retry.h"
#include "log.h"
#include "otel_config.h"
#include "otlp_export.h"
#include "version.h"

#define SCOPE_NAME "traceprof"

static tp_otel_config config;
static tp_span **spans;
static size_t span_count;
static bool initialized;

void
tp_tracer_init(const char *default_service)
{
	if (initialized)
		return;
	tp_otel_config_from_env(&config, default_service);
	initialized = true;
}

void
tp_tracer_set_cancel(volatile sig_atomic_t *cancel)
{
	config.traces.cancel = cancel;
}

const char *
tp_tracer_service_name(void)
{
	const char *name = tp_kvlist_get(&config.resource, "service.name");

	return name ? name : "";
}

tp_span *
tp_span_start(const char *name, tp_span_kind kind, const tp_span *parent)
{
	tp_span    *span = calloc(1, sizeof(tp_span));
	tp_span   **grown = realloc(spans, (span_count + 1) * sizeof(tp_span *));

	if (span == NULL || grown == NULL)
	{
		/* Tracing must not stop the run: hand out a span nobody exports. */
		static tp_span orphan;

		free(span);
		spans = grown ? grown : spans;
		return &orphan;
	}
	spans = grown;
	if (parent != NULL)
	{
		memcpy(span->context.trace_id, parent->context.trace_id, TP_TRACE_ID_BYTES);
		memcpy(span->parent_span_id, parent->context.span_id, TP_SPAN_ID_BYTES);
		span->context.flags = parent->context.flags;
	}
	else
	{
		if (!tp_id_random(span->context.trace_id, TP_TRACE_ID_BYTES))
			tp_warn("the kernel refused random bytes for a trace id");
		span->context.flags = TP_FLAG_SAMPLED;
	}
	if (!tp_id_random(span->context.span_id, TP_SPAN_ID_BYTES))
		tp_warn("the kernel refused random bytes for a span id");
	span->parent_place = TP_PARENT_LOCAL;	/* a run's spans start here or under one of ours */
	span->name = strdup(name);
	span->kind = kind;
	span->start_unix_ns = tp_unix_now_ns();
	spans[span_count++] = span;
	return span;
}

void
tp_span_end(tp_span *span)
{
	if (span->end_unix_ns == 0)
		span->end_unix_ns = tp_unix_now_ns();
}

void
tp_span_traceparent(const tp_span *span, char *out)
{
	tp_traceparent_format(&span->context, out);
	out[TP_TRACEPARENT_LEN] = '\0';
}

void
tp_span_trace_id_hex(const tp_span *span, char *out)
{
	tp_hex_encode(span->context.trace_id, TP_TRACE_ID_BYTES, out);
}

void
tp_span_id_hex(const tp_span *span, char *out)
{
	tp_hex_encode(span->context.span_id, TP_SPAN_ID_BYTES, out);
}

/* What an export did with the spans. */
typedef struct export_state
{
	long		budget_ms;		/* OTEL_EXPORTER_OTLP_TIMEOUT: for the whole export */
	long		deadline_ms;	/* monotonic: when it ends */
	size_t		delivered;
	size_t		dropped;
	bool		stopped;		/* a request failed: the spans not sent are lost */
	tp_size_limit size_limit;	/* what the collector's refusals taught */
} export_state;

static void send_spans(size_t first, size_t count, export_state *state);

/* The export was cut short by the host (a signal): say what is lost. */
static bool
export_cancelled(export_state *state)
{
	if (config.traces.cancel == NULL || *config.traces.cancel == 0)
		return false;
	tp_warn("traces not exported: interrupted: %zu span(s) of %zu not sent",
			span_count - state->delivered - state->dropped, span_count);
	state->stopped = true;
	return true;
}

/* The first half, then, unless a request failed, the second. */
static void
send_halves(size_t first, size_t count, export_state *state)
{
	send_spans(first, count / 2, state);
	if (!state->stopped)
		send_spans(first + count / 2, count - count / 2, state);
}

/*
 * Send spans[first, first + count) in one request.  One the collector
 * refuses as too large (HTTP 413: a proxy's body limit) goes again in
 * halves, down to single spans, all within the export's one budget; a span
 * refused alone is dropped.  A half at least as large as a request refused
 * already is halved unsent.  Failures are warned about here.
 */
static void
send_spans(size_t first, size_t count, export_state *state)
{
	size_t		len;
	uint8_t    *body;
	char		err[1024];
	tp_export_result result;
	long		left = state->deadline_ms - tp_monotonic_ms();

	if (export_cancelled(state))
		return;
	if (left <= 0)
	{
		tp_warn("traces not exported: %zu span(s) of %zu: OTEL_EXPORTER_OTLP_TIMEOUT (%ld ms) ran out "
				"while they went in smaller requests (the collector refused a larger one as too large)",
				span_count - state->delivered - state->dropped, span_count, state->budget_ms);
		state->stopped = true;
		return;
	}
	body = tp_otlp_encode_traces(&config.resource, SCOPE_NAME, TRACEPROF_VERSION,
								 spans + first, count, &len);
	if (body == NULL)
	{
		tp_warn("traces not exported: out of memory while encoding %zu spans", count);
		state->stopped = true;
		return;
	}
	if (!tp_size_limit_allows(&state->size_limit, len, count))
	{
		free(body);
		send_halves(first, count, state);
		return;
	}
	config.traces.timeout_ms = left;
	result = tp_otlp_send(&config.traces, body, len, err, sizeof(err));
	free(body);
	tp_size_limit_learn(&state->size_limit, len, count, tp_otlp_size_answer(result));
	if (result != TP_EXPORT_OK && export_cancelled(state))
		return;
	if (result == TP_EXPORT_TOO_LARGE && count > 1)
	{
		send_halves(first, count, state);
		return;
	}
	if (result == TP_EXPORT_TOO_LARGE)
	{
		tp_warn("span \"%s\" not exported: the collector refuses it as too large even alone: %s",
				spans[first]->name ? spans[first]->name : "", err);
		state->dropped++;
		return;
	}
	if (result == TP_EXPORT_OK)
	{
		state->delivered += count;
		if (err[0] != '\0')		/* a partial success, or a warning refusing nothing */
			tp_warn("traces exported: %s", err);
		return;
	}
	if (result == TP_EXPORT_REJECTED)
	{
		/* The other spans may still go: the refusal was for these. */
		tp_warn("traces rejected by the collector: %s", err);
		state->dropped += count;
		return;
	}
	if (state->delivered + state->dropped > 0)
		tp_warn("traces not exported: %zu span(s) of %zu, after the others went in smaller requests: %s",
				span_count - state->delivered - state->dropped, span_count, err);
	else if (result == TP_EXPORT_UNREACHABLE)
		tp_warn("traces not exported: OTLP collector unreachable: %s", err);
	else
		tp_warn("traces not exported: %s", err);
	state->stopped = true;
}

static bool
export_spans(void)
{
	export_state state = {.budget_ms = config.traces.timeout_ms,
	.deadline_ms = tp_monotonic_ms() + config.traces.timeout_ms};

	send_spans(0, span_count, &state);
	config.traces.timeout_ms = state.budget_ms;
	return !state.stopped && state.dropped == 0;
}

bool
tp_tracer_has_spans_to_send(void)
{
	return initialized && config.export_enabled && span_count > 0;
}

bool
tp_tracer_shutdown(void)
{
	bool		ok = true;

	for (size_t i = 0; i < span_count; i++)
		tp_span_end(spans[i]);
	if (initialized && config.export_enabled && span_count > 0)
		ok = export_spans();
	for (size_t i = 0; i < span_count; i++)
	{
		tp_span_clear(spans[i]);
		free(spans[i]);
	}
	free(spans);
	spans = NULL;
	span_count = 0;
	tp_otel_config_free(&config);
	initialized = false;
	return ok;
}
