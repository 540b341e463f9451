/*
 * test_http_retry.c - the retry policy the OTLP and Pyroscope clients share.
 */
#include <stdio.h>
#include <time.h>

#include "http_retry.h"
#include "unit.h"

TEST(retry_after_in_seconds)
{
	CHECK(tp_parse_retry_after("0") == 0);
	CHECK(tp_parse_retry_after("1") == 1000);
	CHECK(tp_parse_retry_after("120") == 120000);
	CHECK(tp_parse_retry_after("3\r\n") == 3000);
	/* A header value may end in spaces or tabs (RFC 9110, 5.5). */
	CHECK(tp_parse_retry_after("5\t") == 5000);
	CHECK(tp_parse_retry_after("5 \t\r\n") == 5000);
	CHECK(tp_parse_retry_after("-1") == -1);
	/* Too long to count in milliseconds: cut, not read as "none". */
	CHECK(tp_parse_retry_after("86400") == 86400000L);
	CHECK(tp_parse_retry_after("99999999999999999999") == 86400000L);
	CHECK(tp_parse_retry_after("9300000000000000") == 86400000L);
}

TEST(retry_after_as_http_date)
{
	char		when[64];
	time_t		later = time(NULL) + 30;
	long		ms;

	strftime(when, sizeof(when), "%a, %d %b %Y %H:%M:%S GMT", gmtime(&later));
	ms = tp_parse_retry_after(when);
	CHECK(ms > 25000 && ms <= 30000);
	/* A date in the past means "now". */
	CHECK(tp_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT") == 0);
}

TEST(retry_after_garbage_is_ignored)
{
	CHECK(tp_parse_retry_after("") == -1);
	CHECK(tp_parse_retry_after("soon") == -1);
	CHECK(tp_parse_retry_after("1.5") == -1);
	CHECK(tp_parse_retry_after("5 minutes") == -1);
	/* delay-seconds is digits only: no sign, no blank before them. */
	CHECK(tp_parse_retry_after("+5") == -1);
	CHECK(tp_parse_retry_after(" 5") == -1);
	CHECK(tp_parse_retry_after("5x") == -1);
	CHECK(tp_parse_retry_after("007") == 7000);
}

TEST(backoff_grows_with_jitter_and_a_cap)
{
	for (int i = 0; i < 200; i++)
	{
		long		first = tp_backoff_ms(1);
		long		third = tp_backoff_ms(3);
		long		late = tp_backoff_ms(10);

		CHECK(first >= 125 && first <= 250);
		CHECK(third >= 500 && third <= 1000);
		CHECK(late >= 2500 && late <= 5000);
	}
}

TEST(only_throttling_and_unavailable_answers_are_retried)
{
	CHECK(tp_http_status_is_retryable(429));
	CHECK(tp_http_status_is_retryable(502));
	CHECK(tp_http_status_is_retryable(503));
	CHECK(tp_http_status_is_retryable(504));
	CHECK(!tp_http_status_is_retryable(200));
	CHECK(!tp_http_status_is_retryable(400));
	CHECK(!tp_http_status_is_retryable(401));
	CHECK(!tp_http_status_is_retryable(500));
	CHECK(!tp_http_status_is_retryable(501));
}

TEST(dropped_connections_are_retried_refusals_are_not)
{
	CHECK(tp_curl_error_is_dropped_connection(CURLE_RECV_ERROR));
	CHECK(tp_curl_error_is_dropped_connection(CURLE_SEND_ERROR));
	CHECK(tp_curl_error_is_dropped_connection(CURLE_GOT_NOTHING));
	CHECK(!tp_curl_error_is_dropped_connection(CURLE_COULDNT_CONNECT));
	CHECK(!tp_curl_error_is_dropped_connection(CURLE_OPERATION_TIMEDOUT));
	CHECK(!tp_curl_error_is_dropped_connection(CURLE_OK));
}

TEST(a_2xx_is_taken_even_if_its_body_is_cut_or_outlasts_the_deadline)
{
	CHECK(tp_http_answered_ok(CURLE_OK, 200));
	CHECK(tp_http_answered_ok(CURLE_PARTIAL_FILE, 200));
	CHECK(tp_http_answered_ok(CURLE_RECV_ERROR, 204));
	CHECK(tp_http_answered_ok(CURLE_OPERATION_TIMEDOUT, 200));	/* a body that never ends */
	CHECK(!tp_http_answered_ok(CURLE_OPERATION_TIMEDOUT, 0));
	CHECK(!tp_http_answered_ok(CURLE_PARTIAL_FILE, 503));
	CHECK(!tp_http_answered_ok(CURLE_COULDNT_CONNECT, 0));
}

/* A status line that was read decides, even if the body then broke off. */
TEST(a_refusal_whose_body_is_cut_is_still_a_refusal)
{
	CHECK(tp_http_refused_then_dropped(CURLE_PARTIAL_FILE, 400));
	CHECK(tp_http_refused_then_dropped(CURLE_RECV_ERROR, 503));	/* then retried by its status */
	CHECK(tp_http_refused_then_dropped(CURLE_PARTIAL_FILE, 307));
	CHECK(!tp_http_refused_then_dropped(CURLE_PARTIAL_FILE, 200));
	CHECK(!tp_http_refused_then_dropped(CURLE_RECV_ERROR, 0));	/* no answer at all */
	CHECK(!tp_http_refused_then_dropped(CURLE_OPERATION_TIMEDOUT, 400));
	CHECK(!tp_http_refused_then_dropped(CURLE_OK, 400));
}

TEST(a_kept_retry_after_is_capped_at_ten_minutes)
{
	long		day = tp_retry_not_before_ms(86400L * 1000);

	CHECK(tp_retry_wait_left_ms(day) > 599000 && tp_retry_wait_left_ms(day) <= 600000);
	CHECK(tp_retry_wait_left_ms(tp_retry_not_before_ms(0)) == 0);
	CHECK(tp_retry_wait_left_ms(0) == 0);	/* none kept */
}

/* An attempt answered 503 with Retry-After: *(long *) arg milliseconds. */
static bool
throttled(void *arg, long timeout_ms, long *retry_after_ms, char *err, size_t errlen)
{
	(void) timeout_ms;
	*retry_after_ms = *(long *) arg;
	snprintf(err, errlen, "HTTP status 503");
	return true;
}

TEST(a_retry_after_beyond_the_budget_is_named_when_giving_up)
{
	char		err[256];
	long		wait_ms = 600000;

	CHECK(tp_retry_run(1000, NULL, NULL, throttled, &wait_ms, err, sizeof(err)));
	CHECK_STR(err, "HTTP status 503 (gave up after 1 attempt: the server asked to wait 600.0 s, beyond the time budget)");
}

static int	attempts_made;

static bool
throttled_counted(void *arg, long timeout_ms, long *retry_after_ms, char *err, size_t errlen)
{
	attempts_made++;
	return throttled(arg, timeout_ms, retry_after_ms, err, errlen);
}

/*
 * A Retry-After of 0 (or an HTTP-date past) waits the backoff at least:
 * before, five attempts went back to back in every round.
 */
TEST(a_retry_after_of_zero_waits_the_backoff)
{
	char		err[256];
	long		wait_ms = 0;
	long		started = tp_monotonic_ms();

	attempts_made = 0;
	CHECK(tp_retry_run(60000, NULL, NULL, throttled_counted, &wait_ms, err, sizeof(err)));
	printf("  %d attempts in %ld ms\n", attempts_made, tp_monotonic_ms() - started);
	CHECK(attempts_made == TP_RETRY_MAX_ATTEMPTS);
	CHECK(tp_monotonic_ms() - started >= 4 * 100);	/* four waits of at least half the first backoff */
}

static int	checks_asked;

/* The host's check: stop from its second asking on. */
static bool
stop_on_second_ask(void)
{
	return ++checks_asked >= 2;
}

TEST(the_hosts_stop_check_ends_a_retry_wait_and_the_retries)
{
	char		err[256];
	long		wait_ms = 100;
	volatile sig_atomic_t cancel = 0;

	/* Not asked for a request that cannot be cancelled. */
	checks_asked = 0;
	tp_http_set_stop_check(stop_on_second_ask);
	CHECK(tp_retry_run(1000, NULL, NULL, throttled, &wait_ms, err, sizeof(err)));
	CHECK(checks_asked == 0);
	/* Asked before the first attempt (go on), then before the second (stop). */
	CHECK(!tp_retry_run(5000, &cancel, NULL, throttled, &wait_ms, err, sizeof(err)));
	CHECK(checks_asked == 2);
	tp_http_set_stop_check(NULL);
	/* The flag alone still stops it. */
	cancel = 1;
	CHECK(!tp_retry_run(5000, &cancel, NULL, throttled, &wait_ms, err, sizeof(err)));
}

int
main(void)
{
	RUN(retry_after_in_seconds);
	RUN(a_retry_after_of_zero_waits_the_backoff);
	RUN(retry_after_as_http_date);
	RUN(retry_after_garbage_is_ignored);
	RUN(backoff_grows_with_jitter_and_a_cap);
	RUN(only_throttling_and_unavailable_answers_are_retried);
	RUN(dropped_connections_are_retried_refusals_are_not);
	RUN(a_2xx_is_taken_even_if_its_body_is_cut_or_outlasts_the_deadline);
	RUN(a_refusal_whose_body_is_cut_is_still_a_refusal);
	RUN(a_kept_retry_after_is_capped_at_ten_minutes);
	RUN(a_retry_after_beyond_the_budget_is_named_when_giving_up);
	RUN(the_hosts_stop_check_ends_a_retry_wait_and_the_retries);
	return unit_summary();
}
