/*
 * otlp_export.h - encode spans as an OTLP ExportTraceServiceRequest and
 * deliver it over OTLP/HTTP (protobuf) or OTLP/gRPC with libcurl.
 */
#ifndef TP_OTLP_EXPORT_H
#define TP_OTLP_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "otel_config.h"
#include "size_limit.h"
#include "span.h"

/* Serialized ExportTraceServiceRequest (malloc'd), or NULL on OOM. */
uint8_t    *tp_otlp_encode_traces(const tp_kvlist *resource,
								  const char *scope_name, const char *scope_version,
								  tp_span *const *spans, size_t count,
								  size_t *out_len);

typedef enum tp_export_result
{
	TP_EXPORT_OK,				/* delivered (possibly partial success) */
	TP_EXPORT_REJECTED,			/* the collector refused it: do not resend */
	TP_EXPORT_FAILED,			/* retries or time ran out: may resend later */
	TP_EXPORT_UNREACHABLE,		/* could not connect at all */
	TP_EXPORT_TOO_LARGE,		/* refused for its size (HTTP 413, gRPC
								 * RESOURCE_EXHAUSTED "larger than max"):
								 * send the spans again in smaller requests */
} tp_export_result;

/*
 * POST body to target, retrying 429/502/503/504 (gRPC: UNAVAILABLE and
 * friends, and a RESOURCE_EXHAUSTED that carries a RetryInfo) and dropped
 * connections with backoff, jitter and Retry-After (gRPC: RetryInfo's
 * delay), within target->timeout_ms.  On anything but TP_EXPORT_OK, err holds one
 * line saying what went wrong (never header values, never the password of
 * the URL).  A partial success is TP_EXPORT_OK with the rejection described
 * in err and the spans it refused in target->rejected_spans.  A 413, or
 * a gRPC RESOURCE_EXHAUSTED whose message says the request is larger than
 * the server's maximum, is TP_EXPORT_TOO_LARGE, not retried: the caller
 * decides whether the spans can go in smaller requests.  Out of memory for the request (its headers
 * included) is TP_EXPORT_FAILED: never a request without a header.
 */
tp_export_result tp_otlp_send(tp_otlp_target *target,
							  const uint8_t *body, size_t len,
							  char *err, size_t errlen);

/*
 * What tp_otlp_send makes of one answer, from its bytes: the header lines
 * (gRPC's trailers among them) each as libcurl hands them, ending in
 * "\r\n" and not NUL-terminated, then the body, with the HTTP status.
 * *retry says the attempt would be retried, *retry_after_ms holds a
 * Retry-After or RetryInfo's delay (-1: none); err is as tp_otlp_send
 * writes it (a partial success's too).  For tests/fuzz/otlp_answer.c: the
 * answers come from the network, and must never crash a worker.
 */
tp_export_result tp_otlp_read_answer(const tp_otlp_target *target, long http_status,
									 const char *const *header_lines,
									 const size_t *header_lens, size_t nheaders,
									 const uint8_t *body, size_t body_len,
									 bool *retry, long *retry_after_ms,
									 char *err, size_t errlen);

/* What an export's result says of its request's size (size_limit.h). */
static inline tp_size_answer
tp_otlp_size_answer(tp_export_result result)
{
	if (result == TP_EXPORT_OK)
		return TP_SIZE_TAKEN;
	return result == TP_EXPORT_TOO_LARGE ? TP_SIZE_TOO_LARGE : TP_SIZE_OTHER;
}

/*
 * Milliseconds the collector's last Retry-After still asks for (0: none).
 * A Retry-After longer than the export's budget ends the export; a caller
 * that exports again later waits this long first (at most 10 minutes).
 */
long		tp_otlp_retry_wait_ms(const tp_otlp_target *target);

/*
 * Close the connection tp_otlp_send keeps open in target between exports
 * (reusing it spares a TCP, and TLS, handshake per request).
 */
void		tp_otlp_target_close(tp_otlp_target *target);

#endif
