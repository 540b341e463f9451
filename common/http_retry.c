/* http_retry.c - retry policy shared by the OTLP and Pyroscope clients. */
#include "http_retry.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static bool (*stop_check) (void);

void
tp_http_set_stop_check(bool (*check) (void))
{
	stop_check = check;
}

/* Whether a request that can be cancelled (cancel not NULL) stops now. */
static bool
stop_requested(volatile sig_atomic_t *cancel)
{
	if (cancel == NULL)
		return false;
	return *cancel != 0 || (stop_check != NULL && stop_check());
}

void
tp_sleep_ms(long ms, volatile sig_atomic_t *cancel)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && !stop_requested(cancel))
		;
}

/*
 * Longer waits are cut to this (MAX_RETRY_WAIT_MS cuts them further): in
 * milliseconds, a huge value would overflow and read as "no Retry-After".
 */
#define MAX_RETRY_AFTER_S (24 * 3600L)

long
tp_parse_retry_after(const char *value)
{
	long		seconds = 0;
	const char *end = value;
	time_t		when;
	time_t		now;

	/* delay-seconds is digits only (RFC 9110, 10.2.3): no sign, no blanks before. */
	for (; *end >= '0' && *end <= '9'; end++)
		if (seconds <= MAX_RETRY_AFTER_S)
			seconds = seconds * 10 + (*end - '0');
	if (end != value)
	{
		end += strspn(end, " \t\r\n");	/* a header value's trailing blanks */
		if (*end != '\0')
			return -1;
		return (seconds > MAX_RETRY_AFTER_S ? MAX_RETRY_AFTER_S : seconds) * 1000;
	}

	when = curl_getdate(value, NULL);
	if (when < 0)
		return -1;
	/* One reading of the clock: a second one, later, could pass the date and go negative. */
	now = time(NULL);
	seconds = when > now ? (long) (when - now) : 0;
	return (seconds > MAX_RETRY_AFTER_S ? MAX_RETRY_AFTER_S : seconds) * 1000;
}

long
tp_retry_delay_ms(uint64_t seconds, uint32_t nanos)
{
	long		ms;

	if (seconds >= (uint64_t) MAX_RETRY_AFTER_S)
		return MAX_RETRY_AFTER_S * 1000;
	ms = (long) seconds * 1000 + (long) (nanos / 1000000);
	if (nanos % 1000000 != 0)
		ms++;
	return ms < MAX_RETRY_AFTER_S * 1000 ? ms : MAX_RETRY_AFTER_S * 1000;
}

long
tp_backoff_ms(int attempt_number)
{
	long		full = BACKOFF_FIRST_MS << (attempt_number - 1);
	uint64_t	noise;

	if (full > BACKOFF_MAX_MS)
		full = BACKOFF_MAX_MS;
	if (!tp_random_u64(&noise))
		return full;
	return full / 2 + (long) (noise % (uint64_t) (full / 2 + 1));
}

/* A Retry-After honoured across requests: a day's would stop export for a day. */
#define MAX_RETRY_WAIT_MS (10 * 60 * 1000L)

long
tp_retry_not_before_ms(long retry_after_ms)
{
	return tp_monotonic_ms() + (retry_after_ms < MAX_RETRY_WAIT_MS ? retry_after_ms : MAX_RETRY_WAIT_MS);
}

long
tp_retry_wait_left_ms(long not_before_ms)
{
	long		wait = not_before_ms - tp_monotonic_ms();

	return not_before_ms != 0 && wait > 0 ? wait : 0;
}

bool
tp_http_status_is_retryable(long status)
{
	return status == 429 || status == 502 || status == 503 || status == 504;
}

bool
tp_http_answered_ok(CURLcode rc, long status)
{
	(void) rc;
	return status >= 200 && status <= 299;
}

bool
tp_http_refused_then_dropped(CURLcode rc, long status)
{
	return status >= 300 && tp_curl_error_is_dropped_connection(rc);
}

bool
tp_http_append_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *grown = curl_slist_append(*list, line);

	if (grown == NULL)
		return false;
	*list = grown;
	return true;
}

bool
tp_http_append_field(struct curl_slist **list, const char *name, const char *value)
{
	char	   *line;
	bool		ok;
	int			written;

	/* libcurl reads "name:" as "remove that header"; "name;" sends it empty. */
	if (value[0] == '\0')
		written = asprintf(&line, "%s;", name);
	else
		written = asprintf(&line, "%s: %s", name, value);
	if (written < 0)
		return false;
	ok = tp_http_append_header(list, line);
	free(line);
	return ok;
}

#define CONNECT_TIMEOUT_MS 3000L

/* Abort the transfer when the host asks us to stop (a shutdown, a reload). */
static int
on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
			curl_off_t ultotal, curl_off_t ulnow)
{
	const tp_http_post *post = userdata;

	(void) dltotal, (void) dlnow, (void) ultotal, (void) ulnow;
	return stop_requested(post->cancel);
}

void
tp_http_post_setup(CURL *curl, const tp_http_post *post)
{
	curl_easy_setopt(curl, CURLOPT_URL, post->url);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_POST, 1L);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post->body);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) post->len);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, post->headers);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, post->timeout_ms);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
					 post->timeout_ms < CONNECT_TIMEOUT_MS ? post->timeout_ms : CONNECT_TIMEOUT_MS);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);	/* no SIGALRM in our hosts */
#if LIBCURL_VERSION_NUM >= 0x075700
	/*
	 * A lookup still under way at the timeout or a cancel is left to its
	 * thread: libcurl otherwise waits for getaddrinfo(), which a DNS server
	 * that does not answer holds for 10 s and more.
	 */
	curl_easy_setopt(curl, CURLOPT_QUICK_EXIT, 1L);
#endif
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, post->error_buffer);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, post->on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, post->userdata);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, post->on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, post->userdata);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, post->user_agent);
	if (post->ca_file != NULL)
		curl_easy_setopt(curl, CURLOPT_CAINFO, post->ca_file);
	curl_easy_setopt(curl, CURLOPT_SSLCERT, post->client_cert);
	curl_easy_setopt(curl, CURLOPT_SSLKEY, post->client_key);
	/* The callback reads post: it must live until curl_easy_perform returns. */
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, post->cancel != NULL ? on_progress : NULL);
	curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *) post);
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, post->cancel != NULL ? 0L : 1L);
}

bool
tp_http_is_status_line(const char *line, size_t len)
{
	return len >= 5 && memcmp(line, "HTTP/", 5) == 0;
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

bool
tp_retry_run(long timeout_ms, volatile sig_atomic_t *cancel, long *not_before_ms,
			 tp_retry_attempt_fn attempt, void *arg, char *err, size_t errlen)
{
	long		deadline = tp_monotonic_ms() + timeout_ms;

	for (int n = 1; n <= TP_RETRY_MAX_ATTEMPTS; n++)
	{
		long		remaining = deadline - tp_monotonic_ms();
		long		retry_after_ms = -1;
		long		delay;

		if (remaining < 1)
			remaining = 1;		/* 0 would mean "no timeout" to libcurl */
		if (stop_requested(cancel))
			return false;
		err[0] = '\0';			/* only the last attempt's story counts */
		if (!attempt(arg, remaining, &retry_after_ms, err, errlen))
			return true;
		/* Retry-After means something only on an answer asking to come back. */
		if (retry_after_ms >= 0 && not_before_ms != NULL)
			*not_before_ms = tp_retry_not_before_ms(retry_after_ms);
		/* A Retry-After of 0 (or a date past) is no reason to hammer: at least the backoff. */
		delay = tp_backoff_ms(n);
		if (retry_after_ms > delay)
			delay = retry_after_ms;
		if (n == TP_RETRY_MAX_ATTEMPTS || tp_monotonic_ms() + delay >= deadline)
		{
			size_t		used = strlen(err);

			if (retry_after_ms >= 0 && retry_after_ms == delay && n < TP_RETRY_MAX_ATTEMPTS)
				snprintf(err + used, errlen - used,
						 " (gave up after %d attempt%s: the server asked to wait %.1f s, beyond the time budget)",
						 n, n == 1 ? "" : "s", retry_after_ms / 1000.0);
			else
				snprintf(err + used, errlen - used, " (gave up after %d attempt%s)",
						 n, n == 1 ? "" : "s");
			return true;
		}
		tp_sleep_ms(delay, cancel);
	}
	return true;
}
