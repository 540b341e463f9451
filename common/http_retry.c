/* http_retry.c - retry policy shared by the OTLP and Pyroscope clients. */
#include "http_retry.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "trace_context.h"

#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 5000

long
tp_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void
tp_sleep_ms(long ms, volatile sig_atomic_t *cancel)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && !(cancel != NULL && *cancel))
		;
}

long
tp_parse_retry_after(const char *value)
{
	char	   *end;
	long		seconds = strtol(value, &end, 10);

	if (end != value && (*end == '\0' || *end == '\r' || *end == '\n' || *end == ' '))
		return seconds >= 0 ? seconds * 1000 : -1;

	time_t		when = curl_getdate(value, NULL);

	if (when < 0)
		return -1;
	return when > time(NULL) ? (long) (when - time(NULL)) * 1000 : 0;
}

long
tp_backoff_ms(int attempt_number)
{
	long		full = BACKOFF_FIRST_MS << (attempt_number - 1);
	uint8_t		noise[2];

	if (full > BACKOFF_MAX_MS)
		full = BACKOFF_MAX_MS;
	if (!tp_id_random(noise, sizeof(noise)))
		return full;
	return full / 2 + (long) ((noise[0] << 8 | noise[1]) % (full / 2 + 1));
}

bool
tp_http_status_is_retryable(long status)
{
	return status == 429 || status == 502 || status == 503 || status == 504;
}

bool
tp_curl_error_is_dropped_connection(CURLcode rc)
{
	switch (rc)
	{
		case CURLE_SEND_ERROR:
		case CURLE_RECV_ERROR:
		case CURLE_GOT_NOTHING:
		case CURLE_PARTIAL_FILE:
		case CURLE_HTTP2:
		case CURLE_HTTP2_STREAM:
			return true;
		default:
			return false;
	}
}
