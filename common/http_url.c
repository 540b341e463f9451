/* http_url.c - the http(s) URLs of endpoints a user configures. */
#include "http_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* No port, or one of 1..65535: libcurl takes "host:" for port 80 and "host:0" as is. */
static bool
port_is_valid(CURLU *url, const char *authority)
{
	char	   *port = NULL;
	size_t		authority_len = strcspn(authority, "/?#");
	bool		ok;

	if (curl_url_get(url, CURLUPART_PORT, &port, 0) != CURLUE_OK)
		return authority_len == 0 || authority[authority_len - 1] != ':';
	ok = atoi(port) >= 1 && atoi(port) <= 65535;
	curl_free(port);
	return ok;
}

static bool
has_port(CURLU *url)
{
	char	   *port = NULL;
	bool		found = curl_url_get(url, CURLUPART_PORT, &port, 0) == CURLUE_OK;

	curl_free(port);
	return found;
}

CURLU *
tp_http_url_parse(const char *endpoint)
{
	const char *separator = strstr(endpoint, "://");
	const char *authority = separator ? separator + 3 : endpoint;
	CURLU	   *url = curl_url();
	char	   *text = NULL;
	char	   *scheme = NULL;
	char	   *host = NULL;
	bool		ok;

	if (url == NULL)
		return NULL;
	/* libcurl would read "http:///x" as host x, and take https by default. */
	ok = authority[0] != '/' && strpbrk(endpoint, " \t\r\n") == NULL &&
		asprintf(&text, "%s%s", separator ? "" : "http://", endpoint) >= 0 &&
		curl_url_set(url, CURLUPART_URL, text, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
		curl_url_get(url, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
		(strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0) &&
		curl_url_get(url, CURLUPART_HOST, &host, 0) == CURLUE_OK && host[0] != '\0';
	free(text);
	curl_free(scheme);
	curl_free(host);
	/* Without a scheme, host:port: a bare word is no endpoint (nor port 80). */
	if (ok && separator == NULL)
		ok = has_port(url);
	if (ok && port_is_valid(url, authority))
		return url;
	curl_url_cleanup(url);
	return NULL;
}

bool
tp_http_url_is_valid(const char *text)
{
	CURLU	   *url = tp_http_url_parse(text);

	curl_url_cleanup(url);
	return url != NULL;
}

/* The paths we append to a configured endpoint: no secret in them. */
static const char *const known_tails[] = {
	"/v1/traces",
	"/opentelemetry.proto.collector.trace.v1.TraceService/Export",
	"/ingest",
};

/* The parts of url that may hold a secret, as offsets into it. */
typedef struct url_parts
{
	size_t		userinfo_start;
	size_t		userinfo_end;	/* == start: none; else the '@' */
	size_t		host_start;
	size_t		path_start;
	size_t		hidden_end;		/* path_start..hidden_end is hidden */
	size_t		path_end;		/* a query or fragment starts here */
	size_t		query_end;		/* path_end + 1..query_end: the query */
} url_parts;

static void
split_url(const char *url, url_parts *u)
{
	const char *separator = strstr(url, "://");
	size_t		authority = separator ? (size_t) (separator - url) + 3 : 0;
	size_t		tail = 0;

	/* "host:port/x" has no scheme; "x?a://b" is no scheme either */
	if (separator != NULL && strcspn(url, "/?#") < (size_t) (separator - url))
		authority = 0;
	u->userinfo_start = authority;
	u->path_start = authority + strcspn(url + authority, "/?#");
	u->userinfo_end = authority;
	for (size_t i = authority; i < u->path_start; i++)
		if (url[i] == '@')
			u->userinfo_end = i;	/* the last '@' ends the user info */
	u->host_start = u->userinfo_end == authority ? authority : u->userinfo_end + 1;
	u->path_end = u->path_start + strcspn(url + u->path_start, "?#");
	u->query_end = u->path_end;
	if (url[u->path_end] == '?')
		u->query_end = u->path_end + 1 + strcspn(url + u->path_end + 1, "#");
	for (size_t k = 0; k < sizeof(known_tails) / sizeof(known_tails[0]); k++)
	{
		size_t		n = strlen(known_tails[k]);

		if (u->path_end - u->path_start >= n &&
			strncmp(url + u->path_end - n, known_tails[k], n) == 0)
			tail = n;
	}
	u->hidden_end = u->path_end - tail;
	/* "" and "/" hold no secret */
	if (u->hidden_end - u->path_start <= 1)
		u->hidden_end = u->path_start;
}

void
tp_http_url_shown(const char *url, char *out, size_t outlen)
{
	url_parts	u;

	split_url(url, &u);
	snprintf(out, outlen, "%.*s%s%.*s%s%.*s%s",
			 (int) u.userinfo_start, url,
			 u.userinfo_end > u.userinfo_start ? "***@" : "",
			 (int) (u.path_start - u.host_start), url + u.host_start,
			 u.hidden_end > u.path_start ? "/***" : "",
			 (int) (u.path_end - u.hidden_end), url + u.hidden_end,
			 u.query_end > u.path_end ? "?***" : "");
}

/* A query this long is scrubbed even where it is quoted without its '?'. */
#define MIN_BARE_QUERY 8

/* Replace every occurrence of piece (len > 0 bytes) in message with with. */
static void
replace_all(char *message, size_t size, const char *piece, size_t len, const char *with)
{
	size_t		with_len = strlen(with);
	char	   *p = message;

	while ((p = memmem(p, strlen(p), piece, len)) != NULL)
	{
		size_t		at = (size_t) (p - message);
		size_t		rest = strlen(p + len);

		/* a message cut short is better than a secret left in it */
		if (at + with_len + 1 > size)
		{
			*p = '\0';
			return;
		}
		if (at + with_len + rest + 1 > size)
			rest = 0;			/* what follows might hold the rest of one */
		memmove(p + with_len, p + len, rest);
		memcpy(p, with, with_len);
		p[with_len + rest] = '\0';
		p += with_len;
	}
}

void
tp_http_url_scrub(const char *url, char *message, size_t size)
{
	url_parts	u;

	/*
	 * The path and the query, which a collector's answer may quote (its
	 * request line); our own messages mask user info already, and a short
	 * user name replaced everywhere would garble the message.
	 */
	split_url(url, &u);
	if (size == 0)
		return;
	if (u.hidden_end > u.path_start)
		replace_all(message, size, url + u.path_start, u.hidden_end - u.path_start, "/***");
	if (u.query_end > u.path_end + 1)
	{
		size_t		query_len = u.query_end - u.path_end - 1;

		/*
		 * With its '?' wherever it is; alone only when it is long enough not
		 * to be any word of the message ("?a" would turn every "a" into ***).
		 */
		replace_all(message, size, url + u.path_end, query_len + 1, "?***");
		if (query_len >= MIN_BARE_QUERY)
			replace_all(message, size, url + u.path_end + 1, query_len, "***");
	}
}
