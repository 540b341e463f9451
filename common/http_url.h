/*
 * http_url.h - the http(s) URLs of endpoints a user configures (OTLP
 * collectors, Pyroscope servers), checked when they are set rather than
 * found out at the first failed request.
 */
#ifndef TP_HTTP_URL_H
#define TP_HTTP_URL_H

#include <curl/curl.h>
#include <stdbool.h>

/*
 * text as a URL (http:// when it names no scheme), or NULL unless it is an
 * http or https URL (any case) with a host and, if any, a port number.
 * Free with curl_url_cleanup.
 */
CURLU	   *tp_http_url_parse(const char *text);

bool		tp_http_url_is_valid(const char *text);

#endif
