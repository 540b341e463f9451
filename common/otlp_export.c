/*
 * otlp_export.c - deliver an encoded ExportTraceServiceRequest.
 *
 * One libcurl easy handle per call: exports are rare (once per batch) and a
 * fresh handle keeps no state between callers.  The retry policy follows the
 * OTLP specification: only throttling/unavailable answers and dropped
 * connections are retried, with exponential backoff, jitter and Retry-After,
 * all within one time budget so a broken collector can never hang a caller.
 */
#include <curl/curl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "grpc_status_details.h"
#include "gzip.h"
#include "http_retry.h"
#include "http_url.h"
#include "otlp_export.h"
#include "otlp_trace.pb-c.h"
#include "text.h"
#include "version.h"

/* What the OTLP exporter spec asks a User-Agent to name: the exporter, its language, its version. */
#define OTLP_USER_AGENT "traceprof-OTLP-Exporter-C/" TRACEPROF_VERSION

#define MAX_RESPONSE_BYTES (64 * 1024)
#define GRPC_FRAME_HEADER 5
#define BODY_SHOWN_BYTES 200
#define BODY_SCRUBBED_BYTES 4096	/* of the answer, scrubbed before it is cut */

typedef enum attempt_outcome
{
	ATTEMPT_DELIVERED,
	ATTEMPT_RETRY,
	ATTEMPT_REJECTED,			/* a definite no from the collector */
	ATTEMPT_TOO_LARGE,			/* 413: a no to this request's size only */
	ATTEMPT_FAILED,				/* a local or transport failure */
	ATTEMPT_UNREACHABLE,
} attempt_outcome;

/* What one request brought back. */
typedef struct response
{
	long		http_status;
	long		retry_after_ms; /* -1: no usable Retry-After */
	int			grpc_status;	/* -1: none seen */
	char		grpc_message[256];
	long		grpc_retry_delay_ms;	/* RetryInfo's delay; -1: no RetryInfo */
	uint8_t    *body;
	size_t		body_len;
	int64_t		rejected_spans; /* a partial success's count */
} response;

/*
 * gRPC sends grpc-message percent-encoded (what is not printable ASCII, and
 * '%' itself): decoded, then made one printable line of UTF-8.  A message
 * longer than out is cut.
 */
static void
grpc_message_decode(const char *value, size_t len, char *out, size_t outlen)
{
	size_t		n = 0;

	for (size_t i = 0; i < len && n + 1 < outlen; i++)
	{
		if (value[i] == '%' && i + 2 < len &&
			tp_hex_digit(value[i + 1]) >= 0 && tp_hex_digit(value[i + 2]) >= 0)
		{
			out[n++] = (char) (tp_hex_digit(value[i + 1]) << 4 | tp_hex_digit(value[i + 2]));
			i += 2;
		}
		else
			out[n++] = value[i];
	}
	out[n] = '\0';
	tp_make_printable(out);
}

#define GRPC_INTERNAL 13

/*
 * A grpc-status value, a decimal code.  Anything else (an empty value too)
 * is INTERNAL, as gRPC's clients read it: never OK, which would count a
 * broken answer's spans as delivered.
 */
static int
grpc_status_code(const char *value, size_t len)
{
	long		code = 0;

	if (len == 0)
		return GRPC_INTERNAL;
	for (size_t i = 0; i < len; i++)
	{
		if (value[i] < '0' || value[i] > '9')
			return GRPC_INTERNAL;
		code = code * 10 + (value[i] - '0');
		if (code > INT_MAX)
			return GRPC_INTERNAL;
	}
	return (int) code;
}

/* Whether a header line's name, of len bytes, is name (any case). */
static bool
header_is(const char *line, size_t len, const char *name)
{
	return len == strlen(name) && strncasecmp(line, name, len) == 0;
}

/*
 * One header line, of any length: the name before its colon, the value
 * after it without the blanks and line end around it (RFC 9110, 5.5).
 */
static size_t
on_header(char *data, size_t size, size_t n, void *userdata)
{
	response   *r = userdata;
	size_t		len = size * n;
	const char *colon = memchr(data, ':', len);
	const char *value;
	size_t		name_len;
	size_t		value_len;

	if (tp_http_is_status_line(data, len))
	{
		/* a 103 Early Hints' Retry-After is not the final answer's */
		r->retry_after_ms = -1;
		r->grpc_status = -1;
		r->grpc_message[0] = '\0';
		r->grpc_retry_delay_ms = -1;
		return len;
	}
	if (colon == NULL)
		return len;
	name_len = colon - data;
	value = colon + 1;
	value_len = len - name_len - 1;
	while (value_len > 0 && (*value == ' ' || *value == '\t'))
	{
		value++;
		value_len--;
	}
	while (value_len > 0 && strchr(" \t\r\n", value[value_len - 1]) != NULL)
		value_len--;

	if (header_is(data, name_len, "grpc-status-details-bin"))
		r->grpc_retry_delay_ms = tp_grpc_retry_delay_ms(value, value_len);
	else if (header_is(data, name_len, "grpc-status"))
		r->grpc_status = grpc_status_code(value, value_len);
	else if (header_is(data, name_len, "grpc-message"))
		grpc_message_decode(value, value_len, r->grpc_message, sizeof(r->grpc_message));
	else if (header_is(data, name_len, "retry-after"))
	{
		char		text[64];

		/* Neither form is this long (an HTTP-date has 29 characters). */
		if (value_len < sizeof(text))
		{
			memcpy(text, value, value_len);
			text[value_len] = '\0';
			r->retry_after_ms = tp_parse_retry_after(text);
		}
		else
			r->retry_after_ms = -1;
	}
	return len;
}

/* Keep at most MAX_RESPONSE_BYTES of the body: enough for any OTLP answer. */
static size_t
on_body(char *data, size_t size, size_t n, void *userdata)
{
	response   *r = userdata;
	size_t		len = size * n;
	size_t		keep = len;

	if (r->body_len + keep > MAX_RESPONSE_BYTES)
		keep = MAX_RESPONSE_BYTES - r->body_len;
	if (keep > 0)
	{
		uint8_t    *grown = realloc(r->body, r->body_len + keep);

		if (grown == NULL)
			return 0;
		r->body = grown;
		memcpy(r->body + r->body_len, data, keep);
		r->body_len += keep;
	}
	return len;
}

/* gRPC wraps each message in a 5-byte prefix: compressed flag + length. */
static uint8_t *
grpc_frame(const uint8_t *body, size_t len, bool compressed)
{
	uint8_t    *framed = malloc(len + GRPC_FRAME_HEADER);

	if (framed == NULL)
		return NULL;
	framed[0] = compressed ? 1 : 0;
	framed[1] = (uint8_t) (len >> 24);
	framed[2] = (uint8_t) (len >> 16);
	framed[3] = (uint8_t) (len >> 8);
	framed[4] = (uint8_t) len;
	memcpy(framed + GRPC_FRAME_HEADER, body, len);
	return framed;
}

/*
 * The request's header lines, each as long as its value needs (a bearer
 * token can run to kilobytes; a cut one is refused with no hint why).
 * NULL when memory ran out: sending without a header would only be
 * refused for a reason no message names.
 */
static struct curl_slist *
request_headers(const tp_otlp_target *target, long budget_ms)
{
	struct curl_slist *list = NULL;
	char		timeout[64];
	bool		ok = true;

	if (target->protocol == TP_OTLP_GRPC)
	{
		snprintf(timeout, sizeof(timeout), "grpc-timeout: %ldm", budget_ms);
		ok = tp_http_append_header(&list, "Content-Type: application/grpc") &&
			tp_http_append_header(&list, "TE: trailers") &&
			tp_http_append_header(&list, timeout);
	}
	else
		ok = tp_http_append_header(&list, "Content-Type: application/x-protobuf");
	if (target->gzip)
		ok = ok && tp_http_append_header(&list, target->protocol == TP_OTLP_GRPC ?
										 "grpc-encoding: gzip" : "Content-Encoding: gzip");
	/* No 100-continue round trip. */
	ok = ok && tp_http_append_header(&list, "Expect:");
	for (size_t i = 0; ok && i < target->headers.count; i++)
		ok = tp_http_append_field(&list, target->headers.items[i].key, target->headers.items[i].value);
	if (ok)
		return list;
	curl_slist_free_all(list);
	return NULL;
}

/*
 * A partial success: the spans it refused into *rejected, and what it says
 * into err.  The body is an ExportTraceServiceResponse.
 */
static void
read_partial_success(const uint8_t *body, size_t len, int64_t *rejected, char *err, size_t errlen)
{
	Traceprof__Otlp__ExportTraceServiceResponse *answer =
		traceprof__otlp__export_trace_service_response__unpack(NULL, len, body);

	if (answer == NULL)
		return;
	if (answer->partial_success != NULL &&
		(answer->partial_success->rejected_spans != 0 ||
		 answer->partial_success->error_message[0] != '\0'))
	{
		int64_t		count = answer->partial_success->rejected_spans;

		/* A count below zero is the collector's mistake: none were refused. */
		*rejected = count > 0 ? count : 0;
		if (count == 0)
			snprintf(err, errlen, "collector accepted the request with a warning: %s",
					 answer->partial_success->error_message);
		else if (count > 0)
			snprintf(err, errlen, "collector accepted the request but rejected %lld span(s): %s",
					 (long long) count, answer->partial_success->error_message);
		else
			snprintf(err, errlen, "collector accepted the request with an invalid rejected_spans (%lld): %s",
					 (long long) count, answer->partial_success->error_message);
		/* The collector's own text: a line break in it would forge log lines. */
		tp_make_printable(err);
	}
	traceprof__otlp__export_trace_service_response__free_unpacked(answer, NULL);
}

/*
 * What the collector wrote, as one printable line of at most buflen - 1
 * bytes cut on a character boundary; NULL when there is nothing to show, or
 * when only_text and the bytes are not text (a Status without a message).
 */
static const char *
answer_text(const uint8_t *data, size_t len, bool only_text, char *buf, size_t buflen)
{
	size_t		n = 0;
	size_t		start = 0;

	for (size_t i = 0; i < len;)
	{
		size_t		c = tp_utf8_char_length(data + i, len - i);

		if (only_text && (c == 0 || data[i] == 0x7f ||
						  (data[i] < 0x20 && data[i] != '\t' && data[i] != '\n' && data[i] != '\r')))
			return NULL;
		if (c == 0)
			c = 1;
		if (n + c >= buflen)
			break;
		memcpy(buf + n, data + i, c);
		n += c;
		i += c;
	}
	buf[n] = '\0';
	tp_make_printable(buf);		/* line breaks become blanks */
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = '\0';
	while (buf[start] == ' ')
		start++;
	return buf[start] != '\0' ? buf + start : NULL;
}

/*
 * "HTTP status N", with the Status message an OTLP collector sends, or the
 * start of a text body (a proxy's "413 Request Entity Too Large" page, a
 * gateway's JSON).
 */
/*
 * The answer's text, scrubbed of what the endpoint's URL hides (a collector
 * may quote the request line, query string included) before it is cut to
 * BODY_SHOWN_BYTES: cut first, a secret could be left half there.
 */
static const char *
shown_answer(const char *url, const uint8_t *data, size_t len, bool only_text,
			 char *whole, size_t wholelen, char *buf)
{
	const char *text = answer_text(data, len, only_text, whole, wholelen);

	if (text == NULL)
		return NULL;
	tp_http_url_scrub(url, whole, wholelen);
	return answer_text((const uint8_t *) text, strlen(text), false, buf, BODY_SHOWN_BYTES + 1);
}

static void
describe_http_error(const char *url, const response *r, char *err, size_t errlen)
{
	Traceprof__Otlp__RpcStatus *status =
		traceprof__otlp__rpc_status__unpack(NULL, r->body_len, r->body);
	char		whole[BODY_SCRUBBED_BYTES];
	char		buf[BODY_SHOWN_BYTES + 1];
	const char *text = NULL;

	if (status != NULL && status->message[0] != '\0')
		text = shown_answer(url, (const uint8_t *) status->message, strlen(status->message), false,
							whole, sizeof(whole), buf);
	if (text == NULL)
		text = shown_answer(url, r->body, r->body_len, true, whole, sizeof(whole), buf);
	if (text != NULL)
		snprintf(err, errlen, "HTTP status %ld: %s", r->http_status, text);
	else
		snprintf(err, errlen, "HTTP status %ld", r->http_status);
	if (status != NULL)
		traceprof__otlp__rpc_status__free_unpacked(status, NULL);
}

static bool
grpc_status_is_retryable(int code)
{
	/* CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS */
	return code == 1 || code == 4 || code == 10 || code == 11 || code == 14 || code == 15;
}

#define GRPC_RESOURCE_EXHAUSTED 8

/*
 * A gRPC answer's message flagged compressed: gzip, the only encoding we
 * send.  Taken either way; one we cannot read is said, since a partial
 * success in it goes unseen.
 */
static attempt_outcome
read_compressed_answer(const uint8_t *message, size_t len, response *r, const char *shown,
					   char *err, size_t errlen)
{
	size_t		inflated_len;
	uint8_t    *inflated = tp_gunzip(message, len, &inflated_len);

	if (inflated == NULL)
	{
		snprintf(err, errlen, "%s: the answer's message is compressed, but not as gzip: "
				 "spans it may have refused are not known", shown);
		return ATTEMPT_DELIVERED;
	}
	read_partial_success(inflated, inflated_len, &r->rejected_spans, err, errlen);
	free(inflated);
	return ATTEMPT_DELIVERED;
}

/*
 * RESOURCE_EXHAUSTED also means "quota" or "memory" (the OTLP spec retries
 * those only with RetryInfo); a message above the server's max receive
 * size is a refusal of this request's size only, like an HTTP 413.  The
 * texts of grpc-go ("grpc: received message larger than max (N vs. M)",
 * also "... after decompression larger than max"), gRPC C-core ("Received
 * message larger than max") and grpc-java ("gRPC message exceeds maximum
 * size N: M").
 */
static bool
grpc_status_is_too_large(int code, const char *message)
{
	return code == GRPC_RESOURCE_EXHAUSTED &&
		(strcasestr(message, "larger than max") != NULL ||
		 strcasestr(message, "exceeds maximum size") != NULL);
}

/*
 * An answer that is no HTTP/1.x at all, to an OTLP/HTTP request: curl's
 * "Received HTTP/0.9 when not allowed" (what an HTTP/2-only server's
 * preface reads as) or a "weird server reply".  Without a protocol the
 * exporter sends http/protobuf, as documented, so an endpoint on a
 * gRPC-only port (a collector's 4317) fails this way and nothing else says
 * why.
 */
static bool
answer_looks_like_grpc(CURLcode rc, tp_otlp_protocol protocol)
{
	return protocol == TP_OTLP_HTTP_PROTOBUF &&
		(rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_WEIRD_SERVER_REPLY);
}

/*
 * No HTTP/2 answer to a gRPC request: an HTTP/1.1 server closes the
 * connection on the HTTP/2 preface ("Empty reply from server") or answers
 * in HTTP/1.1, which the HTTP/2 framing layer cannot read.  A collector's
 * OTLP/HTTP port (4318) does so when the protocol is set to grpc.  (An
 * error of one HTTP/2 stream comes from a server that speaks HTTP/2.)
 */
static bool
answer_looks_like_http1(CURLcode rc, tp_otlp_protocol protocol)
{
	return protocol == TP_OTLP_GRPC &&
		(rc == CURLE_GOT_NOTHING || rc == CURLE_HTTP2 || rc == CURLE_WEIRD_SERVER_REPLY);
}

static attempt_outcome
classify_transport_error(CURLcode rc, const char *curl_message, const tp_otlp_target *target,
						 char *err, size_t errlen)
{
	const char *detail = rc == CURLE_ABORTED_BY_CALLBACK ? "export cancelled" :
		curl_message[0] ? curl_message : curl_easy_strerror(rc);
	char		shown[512];

	tp_http_url_shown(target->url, shown, sizeof(shown));
	if (answer_looks_like_grpc(rc, target->protocol))
		snprintf(err, errlen, "%s: %s (the endpoint does not answer in HTTP/1.1: it seems to speak gRPC; set %s)",
				 shown, detail, target->grpc_setting ? target->grpc_setting : "the protocol to grpc");
	else if (answer_looks_like_http1(rc, target->protocol))
		snprintf(err, errlen, "%s: %s (no HTTP/2 answer: if the endpoint serves OTLP/HTTP, as a collector's "
				 "port 4318 does, set %s)",
				 shown, detail, target->http_setting ? target->http_setting : "the protocol to http/protobuf");
	else
		snprintf(err, errlen, "%s: %s", shown, detail);
	if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
		rc == CURLE_COULDNT_RESOLVE_PROXY)
		return ATTEMPT_UNREACHABLE;
	return tp_curl_error_is_dropped_connection(rc) ? ATTEMPT_RETRY : ATTEMPT_FAILED;
}

static attempt_outcome
classify_answer(const tp_otlp_target *target, response *r, char *err, size_t errlen)
{
	const uint8_t *message = r->body;
	size_t		message_len = r->body_len;
	char		shown[512];

	tp_http_url_shown(target->url, shown, sizeof(shown));
	if (tp_http_status_is_retryable(r->http_status))
	{
		snprintf(err, errlen, "%s: HTTP status %ld", shown, r->http_status);
		return ATTEMPT_RETRY;
	}
	if (r->http_status >= 300 && r->http_status <= 399)
	{
		/* Following one would send the spans, and any credentials, elsewhere. */
		snprintf(err, errlen, "%s: HTTP status %ld, a redirect, which is not followed: "
				 "set the endpoint to the address it names", shown, r->http_status);
		return ATTEMPT_REJECTED;
	}
	if (r->http_status < 200 || r->http_status > 299)
	{
		char		what[512];

		describe_http_error(target->url, r, what, sizeof(what));
		snprintf(err, errlen, "%s: %s", shown, what);
		/* A proxy's body limit (nginx: 1 MB), not the spans: smaller requests may pass. */
		return r->http_status == 413 ? ATTEMPT_TOO_LARGE : ATTEMPT_REJECTED;
	}
	if (target->protocol == TP_OTLP_GRPC)
	{
		if (r->grpc_status < 0)
		{
			/* gRPC reads a missing status as INTERNAL (13), not retried. */
			snprintf(err, errlen, "%s: the answer has no grpc-status trailer (read as gRPC status 13, INTERNAL)",
					 shown);
			return ATTEMPT_REJECTED;
		}
		if (r->grpc_status != 0)
		{
			snprintf(err, errlen, "%s: gRPC status %d%s%s", shown, r->grpc_status,
					 r->grpc_message[0] ? ": " : "", r->grpc_message);
			if (grpc_status_is_too_large(r->grpc_status, r->grpc_message))
				return ATTEMPT_TOO_LARGE;

			/*
			 * A RetryInfo says when to come back (OTLP): it makes a
			 * RESOURCE_EXHAUSTED (a quota, memory) worth another attempt, and
			 * on any retryable code its delay is waited like a Retry-After,
			 * within the same budget.  Without a delay, the usual backoff.
			 */
			if (r->grpc_retry_delay_ms >= 0 &&
				(r->grpc_status == GRPC_RESOURCE_EXHAUSTED || grpc_status_is_retryable(r->grpc_status)))
			{
				if (r->grpc_retry_delay_ms > 0)
				{
					size_t		used = strlen(err);

					r->retry_after_ms = r->grpc_retry_delay_ms;
					snprintf(err + used, errlen - used, " (its RetryInfo asks to retry in %ld ms)",
							 r->grpc_retry_delay_ms);
				}
				return ATTEMPT_RETRY;
			}
			return grpc_status_is_retryable(r->grpc_status) ? ATTEMPT_RETRY : ATTEMPT_REJECTED;
		}
		if (message_len < GRPC_FRAME_HEADER)
			return ATTEMPT_DELIVERED;
		/* A server answers a compressed request compressed (grpc-go does). */
		if (message[0] != 0)
			return read_compressed_answer(message + GRPC_FRAME_HEADER, message_len - GRPC_FRAME_HEADER,
										  r, shown, err, errlen);
		message += GRPC_FRAME_HEADER;
		message_len -= GRPC_FRAME_HEADER;
	}
	read_partial_success(message, message_len, &r->rejected_spans, err, errlen);
	return ATTEMPT_DELIVERED;
}

/*
 * The target's easy handle, made on first use.  curl_easy_reset clears the
 * options of the last request but keeps its open connection for this one.
 */
static CURL *
target_connection(tp_otlp_target *target)
{
	if (target->connection == NULL)
		target->connection = curl_easy_init();
	else
		curl_easy_reset(target->connection);
	return target->connection;
}

void
tp_otlp_target_close(tp_otlp_target *target)
{
	if (target->connection != NULL)
		curl_easy_cleanup(target->connection);
	target->connection = NULL;
}

static attempt_outcome
attempt(tp_otlp_target *target, const uint8_t *payload, size_t payload_len,
		long budget_ms, response *r, char *err, size_t errlen)
{
	CURL	   *curl = target_connection(target);
	struct curl_slist *headers;
	tp_http_post post;
	char		curl_message[CURL_ERROR_SIZE] = "";
	CURLcode	rc;
	attempt_outcome outcome;

	if (curl == NULL)
	{
		snprintf(err, errlen, "cannot initialise libcurl");
		return ATTEMPT_FAILED;
	}
	headers = request_headers(target, budget_ms);
	if (headers == NULL)
	{
		snprintf(err, errlen, "out of memory for the request's headers: not sent");
		return ATTEMPT_FAILED;
	}
	post = (tp_http_post) {
		.url = target->url,
		.body = payload,
		.len = payload_len,
		.headers = headers,
		.timeout_ms = budget_ms,
		.user_agent = OTLP_USER_AGENT,
		.ca_file = target->ca_file,
		.client_cert = target->client_cert,
		.client_key = target->client_key,
		.cancel = target->cancel,
		.error_buffer = curl_message,
		.on_header = on_header,
		.on_body = on_body,
		.userdata = r,
	};
	tp_http_post_setup(curl, &post);
	if (target->protocol == TP_OTLP_GRPC)
		curl_easy_setopt(curl, CURLOPT_HTTP_VERSION,
						 strncmp(target->url, "https:", 6) == 0 ?
						 CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);

	rc = curl_easy_perform(curl);
	if (rc == CURLE_OK)
	{
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->http_status);
		outcome = classify_answer(target, r, err, errlen);
	}
	else
	{
		/* OTLP/HTTP only: gRPC's status comes in the trailers, after the body. */
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->http_status);
		if (target->protocol != TP_OTLP_GRPC && tp_http_answered_ok(rc, r->http_status))
			outcome = ATTEMPT_DELIVERED;
		else if (tp_http_refused_then_dropped(rc, r->http_status))
			outcome = classify_answer(target, r, err, errlen);
		else
			outcome = classify_transport_error(rc, curl_message, target, err, errlen);
	}
	curl_slist_free_all(headers);
	/*
	 * The request after a gRPC answer failed on the reused HTTP/2 connection
	 * ("Error in the HTTP2 framing layer", libcurl 7.88 against Node's
	 * http2 server): gRPC opens a new connection each time.
	 */
	if (target->protocol == TP_OTLP_GRPC)
		tp_otlp_target_close(target);
	return outcome;
}

/* One export attempt, for tp_retry_run. */
typedef struct export_attempt
{
	tp_otlp_target *target;
	const uint8_t *payload;
	size_t		payload_len;
	attempt_outcome outcome;
} export_attempt;

static bool
attempt_export(void *arg, long timeout_ms, long *retry_after_ms, char *err, size_t errlen)
{
	export_attempt *x = arg;
	response	r = {.retry_after_ms = -1, .grpc_status = -1, .grpc_retry_delay_ms = -1};

	x->outcome = attempt(x->target, x->payload, x->payload_len, timeout_ms, &r, err, errlen);
	x->target->rejected_spans = r.rejected_spans;
	free(r.body);
	*retry_after_ms = r.retry_after_ms;
	return x->outcome == ATTEMPT_RETRY;
}

/* What tp_otlp_send returns for its last attempt's outcome. */
static tp_export_result
export_result(attempt_outcome outcome)
{
	switch (outcome)
	{
		case ATTEMPT_DELIVERED:
			return TP_EXPORT_OK;
		case ATTEMPT_UNREACHABLE:
			return TP_EXPORT_UNREACHABLE;
		case ATTEMPT_REJECTED:
			return TP_EXPORT_REJECTED;
		case ATTEMPT_TOO_LARGE:
			return TP_EXPORT_TOO_LARGE;
		default:
			return TP_EXPORT_FAILED;
	}
}

long
tp_otlp_retry_wait_ms(const tp_otlp_target *target)
{
	return tp_retry_wait_left_ms(target->retry_not_before_ms);
}

tp_export_result
tp_otlp_send(tp_otlp_target *target, const uint8_t *body, size_t len,
			 char *err, size_t errlen)
{
	uint8_t    *compressed = NULL;
	uint8_t    *framed = NULL;
	export_attempt x = {.target = target, .outcome = ATTEMPT_FAILED};

	err[0] = '\0';
	if (target->gzip)
	{
		compressed = tp_gzip(body, len, &len);
		body = compressed;
	}
	if (body != NULL && target->protocol == TP_OTLP_GRPC)
	{
		framed = grpc_frame(body, len, target->gzip);
		body = framed;
		len += GRPC_FRAME_HEADER;
	}
	if (body == NULL)
	{
		free(compressed);
		snprintf(err, errlen, "out of memory");
		return TP_EXPORT_FAILED;
	}
	x.payload = body;
	x.payload_len = len;
	if (!tp_retry_run(target->timeout_ms, target->cancel, &target->retry_not_before_ms, attempt_export, &x, err, errlen))
		snprintf(err, errlen, "export cancelled");
	free(compressed);
	free(framed);
	/* What libcurl or the collector wrote may quote the path, and a token in it. */
	tp_http_url_scrub(target->url, err, errlen);
	return export_result(x.outcome);
}

/*
 * Not static only so that a fuzz target (tests/fuzz/otlp_answer.c) can
 * drive the answer handling without a network: the same callbacks and
 * classify_answer that attempt() runs on what libcurl hands it.
 */
tp_export_result
tp_otlp_read_answer(const tp_otlp_target *target, long http_status,
					const char *const *header_lines, const size_t *header_lens, size_t nheaders,
					const uint8_t *body, size_t body_len,
					bool *retry, long *retry_after_ms, char *err, size_t errlen)
{
	response	r = {.http_status = http_status, .retry_after_ms = -1, .grpc_status = -1,
	.grpc_retry_delay_ms = -1};
	attempt_outcome outcome;

	err[0] = '\0';
	for (size_t i = 0; i < nheaders; i++)
		on_header((char *) header_lines[i], 1, header_lens[i], &r);
	if (body_len > 0 && on_body((char *) body, 1, body_len, &r) != body_len)
	{
		free(r.body);
		snprintf(err, errlen, "out of memory");
		*retry = false;
		*retry_after_ms = -1;
		return TP_EXPORT_FAILED;
	}
	outcome = classify_answer(target, &r, err, errlen);
	tp_http_url_scrub(target->url, err, errlen);
	free(r.body);
	*retry = outcome == ATTEMPT_RETRY;
	*retry_after_ms = r.retry_after_ms;
	return export_result(outcome);
}
