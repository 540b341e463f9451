/* http_url.c - the http(s) URLs of endpoints a user configures. */
#include "http_url.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "text.h"

/*
 * libcurl's URL parser decides what the exporters can send to; this check,
 * which agrees with it (tests/fuzz/http_url.c), lets the settings be checked
 * where libcurl is not loaded: in the postmaster and every backend.
 */

/* Bytes a host name may not hold (libcurl's list), beside control bytes. */
#define BAD_HOST_BYTES " /:#?!@{}[]\\$'\"^`*<>=;,+&()"

/* [address] or [address%zone]: an IPv6 address, as inet_pton reads it. */
static bool
ipv6_is_valid(const char *start, size_t len)
{
	char		address[INET6_ADDRSTRLEN + 1];
	unsigned char binary[16];
	size_t		address_len = strspn(start, "0123456789abcdefABCDEF:.");

	if (address_len > len)
		address_len = len;
	if (address_len < len)
	{
		const char *zone = start + address_len + 1;
		size_t		zone_len = len - address_len - 1;

		/* %25 is the percent sign encoded, which it should be */
		if (zone_len > 2 && strncmp(zone, "25", 2) == 0)
			zone_len -= 2;
		if (start[address_len] != '%' || zone_len == 0 || zone_len > 15)
			return false;
	}
	if (address_len >= sizeof(address))
		return false;
	memcpy(address, start, address_len);
	address[address_len] = '\0';
	return inet_pton(AF_INET6, address, binary) == 1;
}

/* A host name, its %-encoded bytes decoded first (a lone '%' is one), as libcurl reads it. */
static bool
name_is_valid(const char *name, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) name[i];

		if (c == '%' && i + 2 < len &&
			tp_hex_digit(name[i + 1]) >= 0 && tp_hex_digit(name[i + 2]) >= 0)
		{
			c = (unsigned char) (tp_hex_digit(name[i + 1]) * 16 + tp_hex_digit(name[i + 2]));
			i += 2;
			if (c < ' ' || c == 0x7f)
				return false;
		}
		if (memchr(BAD_HOST_BYTES, c, sizeof(BAD_HOST_BYTES) - 1) != NULL)
			return false;
	}
	return true;
}

/* No port (without a colon), or one of 1..65535. */
static bool
port_is_valid(const char *port, const char *end, bool required)
{
	long		value = 0;

	if (port == end)
		return !required;
	if (*port++ != ':' || port == end)
		return false;			/* libcurl takes "host:" for port 80 */
	for (; port < end; port++)
	{
		if (*port < '0' || *port > '9')
			return false;
		value = value * 10 + (*port - '0');
		if (value > 65535)
			return false;
	}
	return value >= 1;
}

bool
tp_http_url_is_valid(const char *text)
{
	const char *authority = text;
	const char *end;
	const char *host;
	const char *port;

	/* libcurl refuses blanks and control bytes anywhere */
	for (const char *p = text; *p != '\0'; p++)
		if ((unsigned char) *p <= ' ' || *p == 0x7f)
			return false;
	if (strncasecmp(text, "http://", 7) == 0)
		authority = text + 7;
	else if (strncasecmp(text, "https://", 8) == 0)
		authority = text + 8;
	else if (strstr(text, "://") != NULL)
		return false;			/* another scheme */
	end = authority + strcspn(authority, "/?#");
	/* The user info ends at the authority's first '@'. */
	host = memchr(authority, '@', (size_t) (end - authority));
	host = host != NULL ? host + 1 : authority;
	if (*host == '[')
	{
		const char *close = memchr(host, ']', (size_t) (end - host));

		if (close == NULL || !ipv6_is_valid(host + 1, (size_t) (close - host - 1)))
			return false;
		port = close + 1;
	}
	else
	{
		port = host + strcspn(host, ":/?#");
		if (port > end)
			port = end;
		if (!name_is_valid(host, (size_t) (port - host)))
			return false;
	}
	/* Without a scheme, host:port: a bare word is no endpoint (nor port 80). */
	return port_is_valid(port, end, authority == text);
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
