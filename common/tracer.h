/*
 * tracer.h - a minimal in-process tracer for the command-line binaries.
 *
 * A batch job makes a handful of spans: they are kept in memory and sent in
 * one OTLP request by tp_tracer_shutdown() (in halves, should the collector
 * refuse it as too large).  Configuration comes from the
 * standard OTEL_* environment variables (otel_config.h); when no exporter
 * is configured, spans are still created (ids for logs and propagation)
 * but nothing is sent.
 */
#ifndef TP_TRACER_H
#define TP_TRACER_H

#include <signal.h>

#include "span.h"

/*
 * Read the environment once.  default_service is the service.name used when
 * neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one.
 * Problems in the environment are warned about, never fatal.
 */
void		tp_tracer_init(const char *default_service);

/* The service.name the tracer reports (after env overrides). */
const char *tp_tracer_service_name(void);

/*
 * Start a span.  parent NULL makes a root span with a new trace id.
 * The tracer owns the span; it stays valid until tp_tracer_shutdown().
 */
tp_span    *tp_span_start(const char *name, tp_span_kind kind, const tp_span *parent);

/* Record the end time.  Ending twice keeps the first end. */
void		tp_span_end(tp_span *span);

/* traceparent of span (version 00), into out[TP_TRACEPARENT_LEN + 1]. */
void		tp_span_traceparent(const tp_span *span, char *out);

/* Hex trace id of span into out[TP_TRACE_ID_HEX + 1]. */
void		tp_span_trace_id_hex(const tp_span *span, char *out);

/* Hex span id of span into out[TP_SPAN_ID_HEX + 1]. */
void		tp_span_id_hex(const tp_span *span, char *out);

/*
 * A flag that, once non-zero (a signal handler sets it), cuts the export of
 * tp_tracer_shutdown() short: the request in flight is abandoned, the
 * spans not yet sent are lost and a warning counts them.  NULL: none.
 */
void		tp_tracer_set_cancel(volatile sig_atomic_t *cancel);

/*
 * End any open spans, export everything (bounded time; one warning if the
 * collector cannot be reached) and free.  Safe to call when nothing was
 * configured.  Returns true when spans were delivered or export is off.
 */
bool		tp_tracer_shutdown(void);

/* Whether tp_tracer_shutdown has spans to export (an exporter configured). */
bool		tp_tracer_has_spans_to_send(void);

#endif
