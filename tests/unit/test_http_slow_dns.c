/*
 * test_http_slow_dns.c - a request whose host name takes long to resolve
 * ends at its timeout or its cancel, not when the lookup does.
 *
 * libcurl resolves in a thread of its own and, unless told otherwise,
 * waits for that thread when a transfer ends: a DNS server that does not
 * answer (5 s a try, twice, per search domain) held the server's exporters
 * past shutdown and postmaster death, and the binaries past SIGINT.  This
 * program stands in for such a server: its getaddrinfo() takes
 * SLOW_LOOKUP_MS for names under .slowdns.test (libcurl's calls reach it,
 * as the program's own definitions come before libc's).
 */
#include <dlfcn.h>
#include <netdb.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http_retry.h"
#include "unit.h"

#define SLOW_LOOKUP_MS 4000

int
getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
			struct addrinfo **res)
{
	static const char slow[] = ".slowdns.test";
	int			(*real) (const char *, const char *, const struct addrinfo *, struct addrinfo **);
	size_t		len = node ? strlen(node) : 0;

	if (len >= sizeof(slow) - 1 && strcmp(node + len - (sizeof(slow) - 1), slow) == 0)
	{
		usleep(SLOW_LOOKUP_MS * 1000);
		return EAI_AGAIN;
	}
	real = dlsym(RTLD_NEXT, "getaddrinfo");
	return real(node, service, hints, res);
}

static size_t
ignore(char *data, size_t size, size_t n, void *userdata)
{
	(void) data, (void) userdata;
	return size * n;
}

/* Milliseconds one POST to a .slowdns.test host took, with rc its outcome. */
static long
post_to_slow_host(long timeout_ms, volatile sig_atomic_t *cancel, CURLcode *rc)
{
	CURL	   *curl = curl_easy_init();
	char		error[CURL_ERROR_SIZE] = "";
	tp_http_post post = {
		.url = "http://collector.slowdns.test:4318/v1/traces",
		.body = "x",
		.len = 1,
		.timeout_ms = timeout_ms,
		.user_agent = "test",
		.cancel = cancel,
		.error_buffer = error,
		.on_header = ignore,
		.on_body = ignore,
	};
	long		start = tp_monotonic_ms();

	tp_http_post_setup(curl, &post);
	*rc = curl_easy_perform(curl);
	curl_easy_cleanup(curl);
	return tp_monotonic_ms() - start;
}

TEST(a_slow_lookup_ends_at_the_timeout)
{
	CURLcode	rc;
	long		took = post_to_slow_host(300, NULL, &rc);

	CHECK(rc == CURLE_OPERATION_TIMEDOUT);
	if (took >= 2000)
		printf("  took %ld ms against a 300 ms timeout\n", took);
	CHECK(took < 2000);
}

static volatile sig_atomic_t stop;

static void *
stop_soon(void *arg)
{
	(void) arg;
	usleep(300 * 1000);
	stop = 1;
	return NULL;
}

TEST(a_slow_lookup_ends_at_a_cancel)
{
	pthread_t	thread;
	CURLcode	rc;
	long		took;

	stop = 0;
	pthread_create(&thread, NULL, stop_soon, NULL);
	took = post_to_slow_host(30000, &stop, &rc);
	pthread_join(thread, NULL);
	CHECK(rc == CURLE_ABORTED_BY_CALLBACK);
	if (took >= 2000)
		printf("  took %ld ms, cancelled after 300 ms\n", took);
	CHECK(took < 2000);
}

int
main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	RUN(a_slow_lookup_ends_at_the_timeout);
	RUN(a_slow_lookup_ends_at_a_cancel);
	return unit_summary();
}
