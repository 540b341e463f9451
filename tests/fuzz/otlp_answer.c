/*
 * otlp_answer.c - libFuzzer target for what the OTLP exporter makes of a
 * collector's answer (tp_otlp_read_answer: the header callback with
 * Retry-After, grpc-status, grpc-message and grpc-status-details-bin, the
 * body callback, then the classification: an OTLP/HTTP partial success, a
 * google.rpc.Status or a proxy's page of a refusal, gRPC's framed
 * answer).  It runs in the extension's background worker: a collector or
 * proxy answering anything must not crash it.
 *
 * The first byte picks the protocol (bit 0) and the HTTP status (the
 * next four bits, from a table); then come the header lines (split after
 * each '\n', each in a buffer of its own exactly as long, as libcurl hands
 * them without a NUL), up to the first NUL; the rest is the body.
 * Invariants: no crash, no read out of bounds; err is one line; a delay
 * is -1 or at most a day; a retry fails the attempt (TP_EXPORT_FAILED);
 * whatever is not taken says why in err; the status decides as
 * documented: 429/502/503/504 retried, 413 too large, 3xx rejected, an
 * OTLP/HTTP 2xx delivered; a gRPC answer is delivered only when its
 * last grpc-status says 0.
 */
#include <stdbool.h>
#include <strings.h>

#include "fuzz.h"
#include "http_retry.h"
#include "otlp_export.h"

#define DAY_MS (24 * 3600 * 1000L)
#define MAX_LINES 64

static const long statuses[16] = {
	200, 200, 200, 204, 400, 401, 404, 413, 429, 500, 502, 503, 504, 301, 100, 0,
};

/*
 * Does the last grpc-status line the header callback reads (one of any
 * length, the value up to a line break, blanks around it) say 0?
 */
static bool
last_grpc_status_is_zero(char *const *lines, const size_t *lens, size_t n)
{
	static const char name[] = "grpc-status:";
	bool		zero = false;

	for (size_t i = 0; i < n; i++)
	{
		const char *v = lines[i] + strlen(name);
		size_t		len;

		if (lens[i] < strlen(name) || strncasecmp(lines[i], name, strlen(name)) != 0)
			continue;
		len = lens[i] - strlen(name);
		for (size_t j = 0; j < len; j++)
			if (v[j] == '\r' || v[j] == '\n')
				len = j;
		while (len > 0 && (*v == ' ' || *v == '\t'))
		{
			v++;
			len--;
		}
		while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
			len--;
		zero = len > 0;
		for (size_t j = 0; j < len; j++)
			if (v[j] != '0')
				zero = false;
	}
	return zero;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data;
	const uint8_t *end = data + size;
	const uint8_t *headers;
	size_t		headers_len;
	char	   *lines[MAX_LINES];
	size_t		lens[MAX_LINES];
	size_t		nlines = 0;
	tp_otlp_target target = {.url = "http://collector.invalid:4318/v1/traces"};
	long		status;
	tp_export_result result;
	bool		retry = true;
	long		retry_after_ms = -2;
	char		err[1024];

	if (size == 0)
		return 0;
	target.protocol = data[0] & 1 ? TP_OTLP_GRPC : TP_OTLP_HTTP_PROTOBUF;
	status = statuses[(data[0] >> 1) & 15];
	p++;
	headers = fuzz_next_field(&p, end, &headers_len);
	nlines = fuzz_header_lines(headers, headers_len, lines, lens, MAX_LINES);

	memset(err, 'x', sizeof(err));
	result = tp_otlp_read_answer(&target, status, (const char *const *) lines, lens, nlines,
								 p, (size_t) (end - p), &retry, &retry_after_ms, err, sizeof(err));

	FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
	FUZZ_CHECK(fuzz_is_one_line(err));
	FUZZ_CHECK(retry_after_ms == -1 || (retry_after_ms >= 0 && retry_after_ms <= DAY_MS));
	FUZZ_CHECK(!retry || result == TP_EXPORT_FAILED);
	if (result != TP_EXPORT_OK)
		FUZZ_CHECK(err[0] != '\0');
	if (tp_http_status_is_retryable(status))
		FUZZ_CHECK(retry);
	if (status == 413)
		FUZZ_CHECK(result == TP_EXPORT_TOO_LARGE);
	if (status >= 300 && status <= 399)
		FUZZ_CHECK(result == TP_EXPORT_REJECTED);
	if (status >= 200 && status <= 299 && target.protocol == TP_OTLP_HTTP_PROTOBUF)
		FUZZ_CHECK(result == TP_EXPORT_OK);
	if (result == TP_EXPORT_OK && target.protocol == TP_OTLP_GRPC)
		FUZZ_CHECK(last_grpc_status_is_zero(lines, lens, nlines));
	for (size_t i = 0; i < nlines; i++)
		free(lines[i]);
	return 0;
}
