/*
 * pyroscope.c - the /ingest upload (settings and names: pyroscope_config.c).
 *
 * from/until go out in Unix seconds (10 digits, which Pyroscope reads as
 * seconds): from rounded down, until rounded up, so the window always
 * covers the samples; the exact window is in the pprof (time_nanos,
 * duration_nanos).  An upload retries what the OTLP exporter retries
 * (429/502/503/504 honouring Retry-After, dropped connections) within
 * PYROSCOPE_UPLOAD_TIMEOUT; anything else fails at once.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_retry.h"
#include "http_url.h"
#include "log.h"
#include "pprof_parts.h"
#include "pyroscope.h"
#include "text.h"
#include "version.h"

#define SNIPPET_BYTES 200
#define NS_PER_SEC 1000000000ULL

/* ---- upload ---- */

typedef struct answer
{
	char		snippet[SNIPPET_BYTES + 1];
	size_t		len;
	long		retry_after_ms; /* -1: no usable Retry-After */
	bool		refused;		/* a refusal of the profile itself, which no retry changes */
} answer;

/* Keep the start of the body, for the error message; drop the rest. */
static size_t
on_body(char *data, size_t size, size_t n, void *userdata)
{
	answer	   *a = userdata;
	size_t		len = size * n;
	size_t		keep = SNIPPET_BYTES - a->len;

	if (keep > len)
		keep = len;
	memcpy(a->snippet + a->len, data, keep);
	a->len += keep;
	a->snippet[a->len] = '\0';
	return len;
}

/* Only Retry-After matters: a throttling server says when to come back. */
static size_t
on_header(char *data, size_t size, size_t n, void *userdata)
{
	answer	   *a = userdata;
	size_t		len = size * n;
	static const char name[] = "retry-after:";
	char		value[128];

	/* a 103 Early Hints' Retry-After is not the final answer's */
	if (tp_http_is_status_line(data, len))
		a->retry_after_ms = -1;
	else if (len > sizeof(name) - 1 && len - (sizeof(name) - 1) < sizeof(value) &&
		strncasecmp(data, name, sizeof(name) - 1) == 0)
	{
		memcpy(value, data + sizeof(name) - 1, len - (sizeof(name) - 1));
		value[len - (sizeof(name) - 1)] = '\0';
		a->retry_after_ms = tp_parse_retry_after(value + strspn(value, " \t"));
	}
	return len;
}

/* "HTTP status N" plus the start of the body on one line. */
static void
describe_status(const char *where, long status, answer *a, char *err, size_t errlen)
{
	char	   *s = a->snippet;
	size_t		len = a->len;

	for (size_t i = 0; i < len; i++)
		if (!isprint((unsigned char) s[i]))
			s[i] = ' ';
	while (len > 0 && s[len - 1] == ' ')
		s[--len] = '\0';
	while (*s == ' ')
		s++;
	if (*s != '\0')
		snprintf(err, errlen, "%s: HTTP status %ld: %s", where, status, s);
	else
		snprintf(err, errlen, "%s: HTTP status %ld", where, status);
}

static char *
ingest_url(const tp_pyroscope_config *cfg, uint64_t from_ns, uint64_t until_ns)
{
	char	   *name = tp_pyroscope_series_name(cfg);
	const char *server = cfg->server_address ? cfg->server_address : TP_PYROSCOPE_DEFAULT_SERVER;
	size_t		server_len = strlen(server);
	uint64_t	from = from_ns / NS_PER_SEC;
	uint64_t	until = until_ns / NS_PER_SEC + (until_ns % NS_PER_SEC != 0);
	char	   *url = NULL;

	if (name == NULL)
		return NULL;
	if (until <= from)
		until = from + 1;		/* an empty window is not a window */
	while (server_len > 0 && server[server_len - 1] == '/')
		server_len--;
	if (asprintf(&url, "%.*s/ingest?name=%s&from=%" PRIu64 "&until=%" PRIu64 "&format=pprof",
				 (int) server_len, server, name, from, until) < 0)
		url = NULL;
	free(name);
	return url;
}

typedef enum attempt_outcome
{
	ATTEMPT_DELIVERED,
	ATTEMPT_RETRY,				/* throttled, unavailable, or the connection dropped */
	ATTEMPT_TOO_LARGE,			/* 413: the body is over a limit; its samples may go in parts */
	ATTEMPT_FAILED,
} attempt_outcome;

/* One upload request, and how its last attempt ended. */
typedef struct request
{
	tp_pyroscope_config *cfg;	/* its Retry-After is kept there */
	const char *url;
	const char *where;			/* the endpoint as messages show it */
	struct curl_slist *headers;
	const uint8_t *pprof;
	size_t		len;
	attempt_outcome outcome;
	bool		refused;		/* the last answer refused the profile itself */
} request;

/* An answer that is no success: what it says, and whether to try again. */
static attempt_outcome
classify_refusal(const char *where, long status, answer *a, char *err, size_t errlen)
{
	describe_status(where, status, a, err, errlen);
	if (status == 413)
		return ATTEMPT_TOO_LARGE;
	return tp_http_status_is_retryable(status) ? ATTEMPT_RETRY : ATTEMPT_FAILED;
}

static attempt_outcome
attempt(const request *req, long timeout_ms, answer *a, char *err, size_t errlen)
{
	const tp_pyroscope_config *cfg = req->cfg;
	tp_http_post post;
	char		curl_message[CURL_ERROR_SIZE] = "";
	CURL	   *curl = curl_easy_init();
	CURLcode	rc;
	long		status = 0;
	attempt_outcome outcome;

	if (curl == NULL)
	{
		snprintf(err, errlen, "cannot initialise libcurl");
		return ATTEMPT_FAILED;
	}
	post = (tp_http_post) {
		.url = req->url,
		.body = req->pprof,
		.len = req->len,
		.headers = req->headers,
		.timeout_ms = timeout_ms,
		.user_agent = "traceprof-pyroscope-c/" TRACEPROF_VERSION,
		.ca_file = cfg->ca_file,
		.cancel = cfg->cancel,
		.error_buffer = curl_message,
		.on_header = on_header,
		.on_body = on_body,
		.userdata = a,
	};
	tp_http_post_setup(curl, &post);
	if (cfg->basic_auth_user != NULL || cfg->basic_auth_password != NULL)
	{
		curl_easy_setopt(curl, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
		curl_easy_setopt(curl, CURLOPT_USERNAME,
						 cfg->basic_auth_user ? cfg->basic_auth_user : "");
		curl_easy_setopt(curl, CURLOPT_PASSWORD,
						 cfg->basic_auth_password ? cfg->basic_auth_password : "");
	}

	rc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	if (tp_http_answered_ok(rc, status))
		outcome = ATTEMPT_DELIVERED;
	else if (rc == CURLE_ABORTED_BY_CALLBACK)
	{
		snprintf(err, errlen, "%s: upload cancelled", req->where);	/* not libcurl's words */
		outcome = ATTEMPT_FAILED;
	}
	else if (rc != CURLE_OK && !tp_http_refused_then_dropped(rc, status))
	{
		snprintf(err, errlen, "%s: %s", req->where,
				 curl_message[0] ? curl_message : curl_easy_strerror(rc));
		outcome = tp_curl_error_is_dropped_connection(rc) ? ATTEMPT_RETRY : ATTEMPT_FAILED;
	}
	else
	{
		outcome = classify_refusal(req->where, status, a, err, errlen);
		/* Of the profile, not of the server or its address (401, 404, 500): those others would get too. */
		a->refused = outcome == ATTEMPT_FAILED && (status == 400 || status == 422);
	}
	curl_easy_cleanup(curl);
	return outcome;
}

static bool
attempt_upload(void *arg, long timeout_ms, long *retry_after_ms, char *err, size_t errlen)
{
	request    *req = arg;
	answer		a = {.len = 0, .retry_after_ms = -1};

	req->outcome = attempt(req, timeout_ms, &a, err, errlen);
	req->refused = a.refused;
	*retry_after_ms = a.retry_after_ms;
	return req->outcome == ATTEMPT_RETRY;
}

/*
 * Not static only so that a fuzz target (tests/fuzz/pyroscope_answer.c)
 * can drive the answer handling without a network: the same callbacks and
 * classify_refusal that attempt() runs on what libcurl hands it.
 */
bool
tp_pyroscope_read_answer(const char *where, long status,
						 const char *const *header_lines, const size_t *header_lens, size_t nheaders,
						 const uint8_t *body, size_t body_len,
						 bool *retry, long *retry_after_ms, char *err, size_t errlen)
{
	answer		a = {.len = 0, .retry_after_ms = -1};
	attempt_outcome outcome = ATTEMPT_DELIVERED;

	err[0] = '\0';
	for (size_t i = 0; i < nheaders; i++)
		on_header((char *) header_lines[i], 1, header_lens[i], &a);
	if (body_len > 0)
		on_body((char *) body, 1, body_len, &a);
	if (!tp_http_answered_ok(CURLE_OK, status))
		outcome = classify_refusal(where, status, &a, err, errlen);
	*retry = outcome == ATTEMPT_RETRY;
	*retry_after_ms = a.retry_after_ms;
	return outcome == ATTEMPT_DELIVERED;
}

/*
 * The upload's header lines, the tenant's as long as it is (a cut one
 * names another tenant); NULL when memory ran out.
 */
static struct curl_slist *
request_headers(const tp_pyroscope_config *cfg)
{
	struct curl_slist *list = NULL;
	bool		ok;

	/* No 100-continue round trip. */
	ok = tp_http_append_header(&list, "Content-Type: application/octet-stream") &&
		tp_http_append_header(&list, "Expect:");
	if (ok && cfg->tenant_id != NULL)
		ok = tp_http_append_field(&list, "X-Scope-OrgID", cfg->tenant_id);
	if (ok)
		return list;
	curl_slist_free_all(list);
	return NULL;
}

long
tp_pyroscope_retry_wait_ms(const tp_pyroscope_config *cfg)
{
	return tp_retry_wait_left_ms(cfg->retry_not_before_ms);
}

/*
 * One request of len bytes holding count samples at req, retried within
 * what is left until deadline_ms; what its answer says of the server's size
 * limit is kept in the configuration.
 */
static attempt_outcome
send_request(request *req, const uint8_t *pprof, size_t len, size_t count,
			 long deadline_ms, char *err, size_t errlen)
{
	long		left = deadline_ms - tp_monotonic_ms();
	tp_size_answer answer;

	req->pprof = pprof;
	req->len = len;
	req->outcome = ATTEMPT_FAILED;
	if (!tp_retry_run(left > 0 ? left : 1, req->cfg->cancel, &req->cfg->retry_not_before_ms,
					  attempt_upload, req, err, errlen))
		snprintf(err, errlen, "%s: upload cancelled", req->where);
	if (req->outcome == ATTEMPT_DELIVERED)
		answer = TP_SIZE_TAKEN;
	else if (req->outcome == ATTEMPT_TOO_LARGE)
		answer = TP_SIZE_TOO_LARGE;
	else
		answer = TP_SIZE_OTHER;
	tp_size_limit_learn(&req->cfg->size_limit, len, count, answer);
	return req->outcome;
}

/* ---- a profile refused as too large goes again in parts ---- */

/* What became of the parts of a profile refused as too large. */
typedef struct split
{
	tp_pprof_parts *parts;
	uint64_t	taken;			/* "samples" values the server took */
	uint64_t	dropped;		/* refused even alone, or left after a failure */
	bool		stopped;		/* a request failed: the rest is dropped */
	bool		keep_rest_allowed;	/* a caller that can send the rest later */
	bool		keep_rest;		/* cancelled, the caller takes what is left */
	size_t		rest_first;		/* then: samples [rest_first, n) were not sent */
	char		first_refusal[512];	/* why the first part dropped was, "" if none */
} split;

static void send_part(request *req, split *sp, size_t first, size_t count,
					  long deadline_ms, char *err, size_t errlen);

/* Samples [first, first + count) as two parts, in order. */
static void
send_halves(request *req, split *sp, size_t first, size_t count, long deadline_ms,
			char *err, size_t errlen)
{
	send_part(req, sp, first, count / 2, deadline_ms, err, errlen);
	send_part(req, sp, first + count / 2, count - count / 2, deadline_ms, err, errlen);
}

/*
 * Upload samples [first, first + count) in one request; refused as too
 * large, in halves, down to single samples (a sample refused alone is
 * dropped).  A part at least as large as one refused before is halved
 * unsent.  Each part has fewer samples than the one before, so this ends;
 * all share the upload's one deadline.
 */
static void
send_part(request *req, split *sp, size_t first, size_t count, long deadline_ms,
		  char *err, size_t errlen)
{
	size_t		len = 0;
	uint8_t    *body;
	attempt_outcome outcome;

	if (sp->stopped || tp_monotonic_ms() >= deadline_ms)
	{
		sp->stopped = true;
		if (!sp->keep_rest)
			sp->dropped += tp_pprof_parts_weight(sp->parts, first, count);
		return;
	}
	body = tp_pprof_parts_encode(sp->parts, first, count, &len);
	if (body != NULL && !tp_size_limit_allows(&req->cfg->size_limit, len, count))
	{
		/* The server refused as large a body before: no need to ask again. */
		free(body);
		send_halves(req, sp, first, count, deadline_ms, err, errlen);
		return;
	}
	if (body == NULL)
	{
		snprintf(err, errlen, "%s: out of memory while splitting a profile refused as too large", req->where);
		outcome = ATTEMPT_FAILED;
	}
	else
		outcome = send_request(req, body, len, count, deadline_ms, err, errlen);
	free(body);
	if (outcome == ATTEMPT_TOO_LARGE && count > 1)
	{
		send_halves(req, sp, first, count, deadline_ms, err, errlen);
		return;
	}
	if (outcome != ATTEMPT_DELIVERED && outcome != ATTEMPT_TOO_LARGE && sp->keep_rest_allowed &&
		req->cfg->cancel != NULL && *req->cfg->cancel)
	{
		/*
		 * Cancelled (a reload, a shutdown), not refused: parts go in order,
		 * so this one and all after it are what is left, for the caller to
		 * send later; dropping them would lose samples no server refused.
		 */
		sp->keep_rest = true;
		sp->rest_first = first;
		sp->stopped = true;
		return;
	}
	if (outcome == ATTEMPT_DELIVERED)
		sp->taken += tp_pprof_parts_weight(sp->parts, first, count);
	else
	{
		sp->dropped += tp_pprof_parts_weight(sp->parts, first, count);
		/* A later part taken leaves err empty: the refusal is quoted from here. */
		if (sp->first_refusal[0] == '\0')
			snprintf(sp->first_refusal, sizeof(sp->first_refusal), "%s", err);
	}
	if (outcome != ATTEMPT_DELIVERED && outcome != ATTEMPT_TOO_LARGE)
		sp->stopped = true;		/* not the size: the next parts would fail alike */
}

/*
 * A profile too large for the server (413: a proxy's body limit) goes as
 * parts of its samples for the same series and window, which Pyroscope
 * adds up: again when it was refused (refused, err saying so), or at once
 * when one as large was refused before.  parts: the profile unpacked (NULL:
 * not ours to read, or no memory).  Fills what was taken and dropped into
 * *counts (may be NULL).
 */
static bool
send_in_parts(request *req, tp_pprof_parts *parts, bool refused, long deadline_ms,
			  tp_pyroscope_counts *counts, char *err, size_t errlen)
{
	split		sp = {.parts = parts};
	char		refusal[512];
	bool		ok = false;
	size_t		n;				/* samples in the profile */
	const char *how = refused ? "after a refusal as too large, in parts" :
		"in parts under the size refused before";

	snprintf(refusal, sizeof(refusal), "%s", err);
	n = parts != NULL ? tp_pprof_parts_samples(parts) : 0;
	if (n < 2)
	{
		/* One sample (or not ours to read): nothing smaller can be sent. */
		if (parts != NULL)
		{
			size_t		used = strlen(err);

			snprintf(err + used, errlen - used, " (a profile of one sample, refused even alone: dropped)");
			if (counts != NULL)
				counts->dropped = tp_pprof_parts_weight(parts, 0, n);
		}
	}
	else
	{
		sp.keep_rest_allowed = counts != NULL;
		send_halves(req, &sp, 0, n, deadline_ms, err, errlen);
		if (sp.keep_rest)
		{
			size_t		left = n - sp.rest_first;

			counts->rest_samples = tp_pprof_parts_weight(sp.parts, sp.rest_first, left);
			counts->rest = tp_pprof_parts_encode(sp.parts, sp.rest_first, left, &counts->rest_len);
			if (counts->rest == NULL)
			{
				sp.dropped += counts->rest_samples;
				counts->rest_samples = 0;
			}
		}
		ok = sp.dropped == 0 && !sp.keep_rest;
		if (sp.keep_rest && sp.dropped == 0)
		{
			size_t		used = strlen(err);

			snprintf(err + used, errlen - used, " (%s: %llu samples not sent yet)",
					 how, (unsigned long long) counts->rest_samples);
		}
		else if (!ok && !sp.stopped)
		{
			/* Not sent whole, the refusal to quote is a sample's. */
			if (!refused)
				snprintf(refusal, sizeof(refusal), "%s", sp.first_refusal[0] ? sp.first_refusal : err);
			snprintf(err, errlen, "%s (the profile went %s; samples refused even alone "
					 "were dropped: %llu of %llu)", refusal,
					 refused ? "again in parts" : "in parts under the size refused before",
					 (unsigned long long) sp.dropped, (unsigned long long) (sp.taken + sp.dropped));
		}
		else if (!ok)
		{
			size_t		used = strlen(err);

			snprintf(err + used, errlen - used, " (%s: %llu of %llu samples not uploaded)",
					 how, (unsigned long long) sp.dropped, (unsigned long long) (sp.taken + sp.dropped));
		}
		if (counts != NULL)
		{
			counts->taken = sp.taken;
			counts->dropped = sp.dropped;
		}
	}
	return ok;
}

bool
tp_pyroscope_ingest(tp_pyroscope_config *cfg,
					const uint8_t *pprof, size_t len,
					uint64_t from_ns, uint64_t until_ns,
					char *err, size_t errlen)
{
	return tp_pyroscope_ingest_counted(cfg, pprof, len, from_ns, until_ns, NULL, err, errlen);
}

bool
tp_pyroscope_ingest_counted(tp_pyroscope_config *cfg,
							const uint8_t *pprof, size_t len,
							uint64_t from_ns, uint64_t until_ns,
							tp_pyroscope_counts *counts, char *err, size_t errlen)
{
	char	   *url = ingest_url(cfg, from_ns, until_ns);
	char		where[512];
	request		req = {.cfg = cfg, .outcome = ATTEMPT_FAILED};
	long		timeout = cfg->timeout_ms > 0 ? cfg->timeout_ms : TP_PYROSCOPE_DEFAULT_TIMEOUT_MS;
	long		deadline_ms = tp_monotonic_ms() + timeout;
	long		wait_ms = tp_pyroscope_retry_wait_ms(cfg);
	tp_pprof_parts *parts = NULL;
	size_t		samples = 1;	/* in the profile, once read */
	bool		ok;

	err[0] = '\0';
	if (counts != NULL)
		memset(counts, 0, sizeof(*counts));
	if (url == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return false;
	}
	/* Messages name the endpoint only: no query, no credentials, no token in the path. */
	tp_http_url_shown(url, where, sizeof(where));
	where[strcspn(where, "?")] = '\0';
	if (wait_ms > 0)
	{
		/* The server said when to come back; asking sooner only adds load. */
		snprintf(err, errlen, "%s: not sent: the server asked to wait %.1f s more (Retry-After)",
				 where, wait_ms / 1000.0);
		free(url);
		return false;
	}
	req.url = url;
	req.where = where;
	req.headers = request_headers(cfg);
	if (req.headers == NULL)
	{
		/* Sent without its tenant, a profile would go to another one, or be refused. */
		snprintf(err, errlen, "%s: out of memory for the request's headers: not sent", where);
		free(url);
		return false;
	}

	/*
	 * As large as a profile the server refused before: read, to count its
	 * samples; unless it may go as a probe of a raised limit, it goes in
	 * parts without being refused whole first.  One that cannot be read
	 * goes whole, as a single sample would (never a probe).
	 */
	if (cfg->size_limit.refused != 0 && len >= cfg->size_limit.refused)
		parts = tp_pprof_parts_open(pprof, len);
	if (parts != NULL)
		samples = tp_pprof_parts_samples(parts);

	/* Retries, and parts, stay inside the one budget: the next upload must not wait. */
	if (parts != NULL && !tp_size_limit_allows(&cfg->size_limit, len, samples))
		ok = send_in_parts(&req, parts, false, deadline_ms, counts, err, errlen);
	else
	{
		ok = send_request(&req, pprof, len, samples, deadline_ms, err, errlen) == ATTEMPT_DELIVERED;
		if (req.outcome == ATTEMPT_TOO_LARGE)
		{
			if (parts == NULL)
				parts = tp_pprof_parts_open(pprof, len);
			ok = send_in_parts(&req, parts, true, deadline_ms, counts, err, errlen);
		}
	}
	tp_pprof_parts_close(parts);
	/* The last request, whole or a part's, stopped it: refused for the profile's sake? */
	if (!ok && counts != NULL)
		counts->refused = req.outcome == ATTEMPT_FAILED && req.refused;
	/* What libcurl or the server wrote may quote the path, and a token in it. */
	tp_http_url_scrub(url, err, errlen);
	curl_slist_free_all(req.headers);
	free(url);
	return ok;
}
