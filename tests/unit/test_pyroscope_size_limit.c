/*
 * test_pyroscope_size_limit.c - what Pyroscope uploads remember of a
 * server's body limit (tp_pyroscope_config.size_limit): after a 413, a
 * later profile at least as large as the smallest body refused goes in
 * parts without being refused first, every sample still arrives once, and
 * a raised limit is noticed by a probe.
 *
 * The server is a real HTTP listener on 127.0.0.1 (a thread of this test)
 * that answers 413 to a body larger than its limit and 200 otherwise, and
 * reads each body it takes back as a pprof (tp_pprof_parts) to count its
 * samples.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pprof_parts.h"
#include "profile.h"
#include "pyroscope.h"
#include "unit.h"

#define SAMPLES 40
#define MAX_BODY (1 << 20)

/* ---- a body-limited ingest server ---- */

static struct
{
	int			fd;
	int			port;
	pthread_t	thread;
	atomic_bool stop;
	atomic_size_t limit;		/* larger bodies get 413 */

	pthread_mutex_t lock;
	struct seen
	{
		int			requests;
		int			refused;
		uint64_t	weight_taken;	/* "samples" values of the bodies taken */
		size_t		largest_taken;
		size_t		smallest_refused;
	}			seen;			/* since the last server_reset, under lock */
}			server;

static void
server_reset(size_t limit)
{
	pthread_mutex_lock(&server.lock);
	atomic_store(&server.limit, limit);
	memset(&server.seen, 0, sizeof(server.seen));
	server.seen.smallest_refused = SIZE_MAX;
	pthread_mutex_unlock(&server.lock);
}

/* What the server saw since its last reset. */
static struct seen
seen(void)
{
	struct seen s;

	pthread_mutex_lock(&server.lock);
	s = server.seen;
	pthread_mutex_unlock(&server.lock);
	return s;
}

/* Read one request (headers, then Content-Length bytes); its body length, -1: none. */
static long
read_request(int conn, uint8_t *buf, size_t cap, uint8_t **body)
{
	size_t		have = 0;
	char	   *end = NULL;
	long		length = -1;

	while (end == NULL)
	{
		ssize_t		n;

		if (have + 1 >= cap)
			return -1;
		n = read(conn, buf + have, cap - have - 1);
		if (n <= 0)
			return -1;
		have += (size_t) n;
		buf[have] = '\0';
		end = strstr((char *) buf, "\r\n\r\n");
	}
	for (char *line = (char *) buf; line < end; line = strstr(line, "\r\n") + 2)
		if (strncasecmp(line, "Content-Length:", 15) == 0)
			length = strtol(line + 15, NULL, 10);
	if (length < 0 || (size_t) length > cap - (size_t) (end + 4 - (char *) buf))
		return -1;
	*body = (uint8_t *) end + 4;
	while (have < (size_t) (*body - buf) + (size_t) length)
	{
		ssize_t		n = read(conn, buf + have, cap - have);

		if (n <= 0)
			return -1;
		have += (size_t) n;
	}
	return length;
}

static void
answer(int conn, bool too_large)
{
	static const char refused[] = "HTTP/1.1 413 Request Entity Too Large\r\n"
		"Content-Type: text/plain\r\nContent-Length: 28\r\nConnection: close\r\n\r\n"
		"413 Request Entity Too Large";
	static const char taken[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
	const char *text = too_large ? refused : taken;
	size_t		len = strlen(text);

	while (len > 0)
	{
		ssize_t		n = write(conn, text, len);

		if (n <= 0)
			return;
		text += n;
		len -= (size_t) n;
	}
}

static void *
server_main(void *arg)
{
	uint8_t    *buf = malloc(MAX_BODY + 8192);

	(void) arg;
	while (!atomic_load(&server.stop))
	{
		struct pollfd pfd = {.fd = server.fd, .events = POLLIN};
		int			conn;
		uint8_t    *body = NULL;
		long		len;

		if (poll(&pfd, 1, 50) <= 0)
			continue;
		conn = accept(server.fd, NULL, NULL);
		if (conn < 0)
			continue;
		len = read_request(conn, buf, MAX_BODY + 8192, &body);
		if (len >= 0)
		{
			bool		too_large = (size_t) len > atomic_load(&server.limit);
			tp_pprof_parts *parts = too_large ? NULL : tp_pprof_parts_open(body, (size_t) len);

			pthread_mutex_lock(&server.lock);
			server.seen.requests++;
			if (too_large)
			{
				server.seen.refused++;
				if ((size_t) len < server.seen.smallest_refused)
					server.seen.smallest_refused = (size_t) len;
			}
			else
			{
				if (parts != NULL)
					server.seen.weight_taken += tp_pprof_parts_weight(parts, 0, tp_pprof_parts_samples(parts));
				if ((size_t) len > server.seen.largest_taken)
					server.seen.largest_taken = (size_t) len;
			}
			pthread_mutex_unlock(&server.lock);
			tp_pprof_parts_close(parts);
			answer(conn, too_large);
		}
		close(conn);
	}
	free(buf);
	return NULL;
}

static bool
server_start(void)
{
	struct sockaddr_in addr;
	socklen_t	addrlen = sizeof(addr);

	pthread_mutex_init(&server.lock, NULL);
	server_reset(SIZE_MAX);
	server.fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (server.fd < 0 || bind(server.fd, (struct sockaddr *) &addr, sizeof(addr)) != 0 ||
		listen(server.fd, 16) != 0 ||
		getsockname(server.fd, (struct sockaddr *) &addr, &addrlen) != 0)
		return false;
	server.port = ntohs(addr.sin_port);
	return pthread_create(&server.thread, NULL, server_main, NULL) == 0;
}

static void
server_stop(void)
{
	atomic_store(&server.stop, true);
	pthread_join(server.thread, NULL);
	close(server.fd);
	pthread_mutex_destroy(&server.lock);
}

/* ---- profiles and uploads ---- */

/*
 * A profile of n samples of weight 1..3, each with a stack of its own, so
 * that a part's size follows its samples; gzip'd pprof, malloc'd.
 */
static uint8_t *
make_profile(unsigned seed, unsigned n, size_t *len, uint64_t *weight)
{
	tp_profile *p = tp_profile_new("cpu", 10000000);
	tp_sample_labels labels;
	uint8_t    *gz;

	memset(&labels, 0, sizeof(labels));
	memset(labels.trace_id, 0x4b, sizeof(labels.trace_id));
	memset(labels.span_id, 0x0f, sizeof(labels.span_id));
	*weight = 0;
	for (unsigned i = 0; i < n; i++)
	{
		char		names[3][40];
		const char *frames[3];

		for (int f = 0; f < 3; f++)
		{
			/* Names that gzip cannot fold into one another. */
			snprintf(names[f], sizeof(names[f]), "fn_%08x_%u_%d",
					 (unsigned) ((seed * 2654435761u) ^ (i * 40503u + (unsigned) f * 69069u)) * 2246822519u, i, f);
			frames[f] = names[f];
		}
		tp_profile_add_named(p, frames, 3, &labels, 1 + i % 3, 0, "statement");
		*weight += 1 + i % 3;
	}
	tp_profile_set_window(p, 1700000000000000000ULL, 1700000010000000000ULL);
	gz = tp_profile_pprof(p, len);
	tp_profile_free(p);
	return gz;
}

static void
config_for_server(tp_pyroscope_config *cfg, char *address, size_t size)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(address, size, "http://127.0.0.1:%d", server.port);
	cfg->server_address = address;
	cfg->application_name = "app";
	cfg->timeout_ms = 5000;
}

/* One upload; whether it succeeded, what went where in *counts. */
static bool
upload(tp_pyroscope_config *cfg, const uint8_t *gz, size_t len, tp_pyroscope_counts *counts,
	   char *err, size_t errlen)
{
	bool		ok = tp_pyroscope_ingest_counted(cfg, gz, len, 1700000000000000000ULL,
												 1700000010000000000ULL, counts, err, errlen);

	free(counts->rest);
	counts->rest = NULL;
	return ok;
}

/* ---- tests ---- */

/*
 * The brief's case: two uploads of a profile behind a limit its halves fit.
 * Before, the second went whole again and was refused first: one refused
 * request (and its bytes) per upload.
 */
TEST(a_size_refused_is_not_sent_again)
{
	tp_pyroscope_config cfg;
	tp_pyroscope_counts counts;
	char		address[64];
	char		err[1024];
	size_t		len;
	uint64_t	weight;
	uint8_t    *gz = make_profile(1, SAMPLES, &len, &weight);
	struct seen first;
	struct seen second;

	config_for_server(&cfg, address, sizeof(address));
	server_reset(len - 1);		/* the whole is refused, its halves fit */

	/* First upload: refused whole, then in halves. */
	CHECK(upload(&cfg, gz, len, &counts, err, sizeof(err)));
	first = seen();
	CHECK(first.requests == 3 && first.refused == 1);
	CHECK(first.smallest_refused == len);
	CHECK(first.weight_taken == weight);
	CHECK(counts.taken == weight && counts.dropped == 0);
	CHECK(cfg.size_limit.refused == len);

	/* Second upload, as large: in halves at once, none refused. */
	server_reset(len - 1);
	CHECK(upload(&cfg, gz, len, &counts, err, sizeof(err)));
	second = seen();
	CHECK(second.refused == 0);
	CHECK(second.requests == 2);
	CHECK(second.largest_taken < len);
	CHECK(second.weight_taken == weight);
	CHECK(counts.taken == weight && counts.dropped == 0 && counts.rest_samples == 0);
	printf("  first upload: %d requests, %d refused; second: %d requests, %d refused\n",
		   first.requests, first.refused, second.requests, second.refused);
	free(gz);
}

/* A profile smaller than the smallest refused still goes whole, in one request. */
TEST(a_smaller_profile_goes_whole)
{
	tp_pyroscope_config cfg;
	tp_pyroscope_counts counts;
	char		address[64];
	char		err[1024];
	size_t		len;
	size_t		small_len = 0;
	uint64_t	weight;
	uint8_t    *gz = make_profile(5, SAMPLES, &len, &weight);
	uint8_t    *small = make_profile(6, SAMPLES / 4, &small_len, &weight);
	struct seen s;

	config_for_server(&cfg, address, sizeof(address));
	server_reset(len - 1);
	CHECK(upload(&cfg, gz, len, &counts, err, sizeof(err)));
	CHECK(small_len < len);
	server_reset(len - 1);
	CHECK(upload(&cfg, small, small_len, &counts, err, sizeof(err)));
	s = seen();
	CHECK(s.requests == 1 && s.refused == 0);
	CHECK(s.weight_taken == weight);
	CHECK(counts.taken == 0 && counts.dropped == 0);	/* one request: all or nothing */
	free(gz);
	free(small);
}

/*
 * Profiles a little larger each time behind the same limit: each goes in
 * parts under the smallest refused and every sample arrives; only a probe
 * (after 16 requests taken under the limit) is refused again, and the next
 * one waits twice as long.
 */
TEST(later_uploads_go_in_parts_under_it_and_a_probe_is_rare)
{
	tp_pyroscope_config cfg;
	tp_pyroscope_counts counts;
	char		address[64];
	char		err[1024];
	size_t		len;
	uint64_t	weight;
	uint8_t    *gz = make_profile(2, SAMPLES, &len, &weight);
	size_t		limit = len - 1;
	int			refused_later = 0;
	int			requests_later = 0;
	int			probe_round = -1;

	config_for_server(&cfg, address, sizeof(address));
	server_reset(limit);
	CHECK(upload(&cfg, gz, len, &counts, err, sizeof(err)));
	CHECK(seen().refused == 1);
	free(gz);
	for (unsigned round = 0; round < 12; round++)
	{
		uint8_t    *next = make_profile(100 + round, SAMPLES + 1 + round, &len, &weight);
		struct seen s;

		server_reset(limit);
		CHECK(len > limit + 1);
		CHECK(upload(&cfg, next, len, &counts, err, sizeof(err)));
		s = seen();
		CHECK(s.weight_taken == weight);
		CHECK(counts.taken == weight && counts.dropped == 0);
		if (s.refused > 0)
			probe_round = (int) round;
		refused_later += s.refused;
		requests_later += s.requests;
		free(next);
	}

	/*
	 * Two parts taken per upload, the first upload's included: 16 after
	 * round 6, so round 7 probes, refused; the next probe waits for 32.
	 */
	CHECK(refused_later == 1);
	CHECK(probe_round == 7);
	CHECK(cfg.size_limit.probe_every == 32);
	printf("  12 uploads after the first: %d requests, %d refused (a probe, round %d)\n",
		   requests_later, refused_later, probe_round);
}

/* The server's limit raised: the probe is taken, and profiles go whole again. */
TEST(a_raised_limit_is_noticed_by_a_probe)
{
	tp_pyroscope_config cfg;
	tp_pyroscope_counts counts;
	char		address[64];
	char		err[1024];
	size_t		len;
	uint64_t	weight;
	uint8_t    *gz = make_profile(3, SAMPLES, &len, &weight);
	int			uploads_in_parts = 0;

	config_for_server(&cfg, address, sizeof(address));
	server_reset(len - 1);
	CHECK(upload(&cfg, gz, len, &counts, err, sizeof(err)));
	CHECK(cfg.size_limit.refused == len);

	/* Now the proxy takes anything: parts until the probe, then whole. */
	for (int i = 0; i < 12; i++)
	{
		struct seen s;

		server_reset(SIZE_MAX);
		CHECK(upload(&cfg, gz, len, &counts, err, sizeof(err)));
		s = seen();
		CHECK(s.refused == 0);
		CHECK(s.weight_taken == weight);
		if (s.requests > 1)
			uploads_in_parts++;
	}
	CHECK(uploads_in_parts == 7);	/* 16 requests taken, then the probe */
	CHECK(cfg.size_limit.refused == 2 * len);
	free(gz);
}

/*
 * A proxy refusing even single samples: once learnt, a profile goes down
 * to its single samples without its larger parts being refused again (N
 * requests, not 2N - 1), and the message says so, naming the endpoint only.
 */
TEST(single_samples_refused_go_at_once_and_the_message_says_so)
{
	tp_pyroscope_config cfg;
	tp_pyroscope_counts counts;
	char		address[64];
	char		err[1024];
	size_t		len;
	uint64_t	weight;
	uint8_t    *gz = make_profile(4, SAMPLES, &len, &weight);
	struct seen first;
	struct seen second;

	config_for_server(&cfg, address, sizeof(address));
	snprintf(address, sizeof(address), "http://user:hunter2@127.0.0.1:%d", server.port);

	/*
	 * Each sample goes alone once; a part is not sent once a smaller body
	 * was refused, already within this upload (2N - 1 requests before).
	 */
	server_reset(10);
	CHECK(!upload(&cfg, gz, len, &counts, err, sizeof(err)));
	first = seen();
	CHECK(first.requests >= SAMPLES && first.requests < 2 * SAMPLES - 1);
	CHECK(counts.dropped == weight);
	CHECK(strstr(err, "(the profile went again in parts; samples refused even alone were dropped") != NULL);

	/* The next goes down to single samples unsent: one request each. */
	server_reset(10);
	CHECK(!upload(&cfg, gz, len, &counts, err, sizeof(err)));
	second = seen();
	CHECK(second.requests == SAMPLES);
	CHECK(counts.taken == 0 && counts.dropped == weight);
	CHECK(strstr(err, "http://***@127.0.0.1:") != NULL);
	CHECK(strstr(err, "/ingest: HTTP status 413: 413 Request Entity Too Large (the profile went in parts "
				 "under the size refused before; samples refused even alone were dropped: ") != NULL);
	CHECK(strstr(err, "hunter2") == NULL && strstr(err, "name=") == NULL);
	printf("  %d samples: %d requests, then %d\n", SAMPLES, first.requests, second.requests);
	free(gz);
}

/* A profile of one sample refused: dropped, and the message says why. */
TEST(a_profile_of_one_sample_refused_is_dropped_and_the_message_says_so)
{
	tp_pyroscope_config cfg;
	tp_pyroscope_counts counts;
	char		address[64];
	char		err[1024];
	size_t		len;
	uint64_t	weight;
	uint8_t    *gz = make_profile(5, 1, &len, &weight);

	config_for_server(&cfg, address, sizeof(address));
	server_reset(len - 1);
	CHECK(!upload(&cfg, gz, len, &counts, err, sizeof(err)));
	CHECK(seen().requests == 1 && seen().refused == 1);
	CHECK(counts.taken == 0 && counts.dropped == weight);
	CHECK(strstr(err, "HTTP status 413: 413 Request Entity Too Large (a profile of one sample, "
				 "refused even alone: dropped)") != NULL);
	free(gz);
}

int
main(void)
{
	if (!server_start())
	{
		printf("cannot start the test's HTTP listener\n");
		return 1;
	}
	RUN(a_size_refused_is_not_sent_again);
	RUN(a_smaller_profile_goes_whole);
	RUN(later_uploads_go_in_parts_under_it_and_a_probe_is_rare);
	RUN(a_raised_limit_is_noticed_by_a_probe);
	RUN(single_samples_refused_go_at_once_and_the_message_says_so);
	RUN(a_profile_of_one_sample_refused_is_dropped_and_the_message_says_so);
	server_stop();
	return unit_summary();
}
