/*
 * pyroscope_answer.c - libFuzzer target for what the Pyroscope uploader
 * makes of the server's answer (tp_pyroscope_read_answer: the header
 * callback's Retry-After, the body callback's snippet, and the line a
 * refusal is described with).  It runs in the extension's background
 * worker: a server or proxy answering anything must not crash it.
 *
 * The first byte picks the HTTP status (its low four bits, from a table);
 * then come the header lines (split after each '\n', each in a buffer of
 * its own exactly as long, as libcurl hands them without a NUL), up to the
 * first NUL; the rest is the body.
 * Invariants: no crash, no read out of bounds; a 2xx is taken, anything
 * else is described in one line that names the endpoint and the status;
 * 429/502/503/504 are retried; a delay is -1 or at most a day.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "http_retry.h"
#include "pyroscope.h"

#define DAY_MS (24 * 3600 * 1000L)
#define MAX_LINES 64
#define WHERE "http://pyroscope.invalid:4040/ingest"

static const long statuses[16] = {
	200, 200, 204, 400, 401, 404, 413, 422, 429, 500, 502, 503, 504, 301, 100, 0,
};

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
	long		status;
	bool		taken;
	bool		retry = true;
	long		retry_after_ms = -2;
	char		err[512];
	char		prefix[64];

	if (size == 0)
		return 0;
	status = statuses[data[0] & 15];
	p++;
	headers = fuzz_next_field(&p, end, &headers_len);
	nlines = fuzz_header_lines(headers, headers_len, lines, lens, MAX_LINES);

	memset(err, 'x', sizeof(err));
	taken = tp_pyroscope_read_answer(WHERE, status, (const char *const *) lines, lens, nlines,
									 p, (size_t) (end - p), &retry, &retry_after_ms,
									 err, sizeof(err));

	FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
	FUZZ_CHECK(fuzz_is_one_line(err));
	FUZZ_CHECK(retry_after_ms == -1 || (retry_after_ms >= 0 && retry_after_ms <= DAY_MS));
	FUZZ_CHECK(taken == (status >= 200 && status <= 299));
	FUZZ_CHECK(retry == tp_http_status_is_retryable(status));
	if (!taken)
	{
		snprintf(prefix, sizeof(prefix), "%s: HTTP status %ld", WHERE, status);
		FUZZ_CHECK(strncmp(err, prefix, strlen(prefix)) == 0);
	}
	for (size_t i = 0; i < nlines; i++)
		free(lines[i]);
	return 0;
}
