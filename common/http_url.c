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
