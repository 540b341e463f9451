/*
 * http_retry.h - the retry policy the OTLP exporter and the Pyroscope
 * uploader share: which answers are worth another attempt, how long to
 * wait (Retry-After, else exponential backoff with jitter), all inside one
 * time budget so a broken server can never hang the caller; and the
 * libcurl details of their requests they have in common.
 */
#ifndef TP_HTTP_RETRY_H
#define TP_HTTP_RETRY_H

#include <curl/curl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#define TP_RETRY_MAX_ATTEMPTS 5

/* Milliseconds on the monotonic clock. */
long		tp_monotonic_ms(void);

/* Sleep ms; a signal that sets *cancel (may be NULL) ends it early. */
void		tp_sleep_ms(long ms, volatile sig_atomic_t *cancel);

/*
 * A check of the process's own, besides *cancel, wherever a request that
 * can be cancelled looks at it (libcurl's progress callback, the waits
 * between attempts): true stops the request.  The server's exporters apply
 * a configuration reload there, and stop only when it moved the
 * destination.  NULL (the default): *cancel alone.
 */
void		tp_http_set_stop_check(bool (*check) (void));

/*
 * A Retry-After value (RFC 9110 10.2.3: delay-seconds or an HTTP-date) in
 * milliseconds from now, or -1 when it is neither.
 */
long		tp_parse_retry_after(const char *value);

/*
 * A delay a server asked for as seconds and nanoseconds (gRPC's RetryInfo,
 * a google.protobuf.Duration) in milliseconds, rounded up (a wait cut short
 * would come back too early), and cut to a day like a Retry-After.
 */
long		tp_retry_delay_ms(uint64_t seconds, uint32_t nanos);

/* The wait before attempt n + 1 when no Retry-After came: a random delay in [full/2, full]. */
long		tp_backoff_ms(int attempt_number);

/*
 * A Retry-After longer than one request's budget is kept across requests:
 * the monotonic time before which the server is not asked again, from a
 * Retry-After of retry_after_ms (capped at 10 minutes), and what is left
 * of such a wait (0: none).
 */
long		tp_retry_not_before_ms(long retry_after_ms);
long		tp_retry_wait_left_ms(long not_before_ms);

/*
 * Whether a header line is a status line ("HTTP/1.1 503 …"): it starts a
 * response, and the header lines of an interim (1xx) one before it are
 * not the answer's.
 */
bool		tp_http_is_status_line(const char *line, size_t len);

/* 429, 502, 503, 504: the server asks us to come back later. */
bool		tp_http_status_is_retryable(long status);

/* Append a header line to *list; false (the list unchanged) when memory ran out. */
bool		tp_http_append_header(struct curl_slist **list, const char *line);

/* The same for "name: value", as long as the value is (a bearer token can run to kilobytes). */
bool		tp_http_append_field(struct curl_slist **list, const char *name, const char *value);

/*
 * A POST as the OTLP exporter and the Pyroscope uploader both send it:
 * http(s) only, the whole attempt within timeout_ms (connecting within 3 s
 * of it), no signals, libcurl's message in error_buffer, the answer's
 * header lines and body to the callbacks with userdata, aborted when
 * *cancel (may be NULL) turns non-zero.
 */
typedef struct tp_http_post
{
	const char *url;
	const void *body;
	size_t		len;
	struct curl_slist *headers;
	long		timeout_ms;
	const char *user_agent;
	const char *ca_file;		/* NULL: the system's */
	const char *client_cert;	/* mutual TLS: PEM certificate and key, or NULL */
	const char *client_key;
	volatile sig_atomic_t *cancel;
	char	   *error_buffer;	/* CURL_ERROR_SIZE bytes */
	curl_write_callback on_header;
	curl_write_callback on_body;
	void	   *userdata;
} tp_http_post;

/* Set post's options on curl, for curl_easy_perform. */
void		tp_http_post_setup(CURL *curl, const tp_http_post *post);

/* The connection dropped before a complete answer: worth another attempt. */
bool		tp_curl_error_is_dropped_connection(CURLcode rc);

/*
 * The server took the request: a 2xx status, even if the connection then
 * dropped before the body's end, or the body was still coming at the
 * deadline (sending again would duplicate, and a body that never ends
 * would have the same batch sent every round).
 */
bool		tp_http_answered_ok(CURLcode rc, long status);

/*
 * The server answered with a status that is no success (3xx and up), then
 * the connection dropped before the body's end: the status decides, as if
 * the body had come whole (sending again would only get the same refusal).
 */
bool		tp_http_refused_then_dropped(CURLcode rc, long status);

/*
 * One attempt, given timeout_ms (at least 1) of the budget: writes its story
 * to err and a Retry-After to *retry_after_ms (-1: none).  True asks for
 * another attempt; the caller keeps the attempt's outcome in arg.
 */
typedef bool (*tp_retry_attempt_fn) (void *arg, long timeout_ms, long *retry_after_ms,
									 char *err, size_t errlen);

/*
 * Attempt until an attempt says done, up to TP_RETRY_MAX_ATTEMPTS, all
 * within timeout_ms; between attempts wait for Retry-After, else the
 * backoff.  The Retry-After of an attempt that asks for another is also
 * kept in *not_before_ms (may be NULL; see tp_retry_not_before_ms) for the
 * requests that follow.  err holds the last attempt's story, plus "(gave up
 * after n attempts)" when retries ran out.  False when *cancel (may be
 * NULL) stopped it before an attempt.
 */
bool		tp_retry_run(long timeout_ms, volatile sig_atomic_t *cancel, long *not_before_ms,
						 tp_retry_attempt_fn attempt, void *arg, char *err, size_t errlen);

#endif
