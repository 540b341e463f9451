/*
 * http_url.h - the http(s) URLs of endpoints a user configures (OTLP
 * collectors, Pyroscope servers), checked when they are set rather than
 * found out at the first failed request.
 */
#ifndef TP_HTTP_URL_H
#define TP_HTTP_URL_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Is text an http or https URL (any case) with a host and, if any, a port
 * of 1..65535?  Without a scheme (http:// is meant) the port is required:
 * host:port.  Checked without libcurl, as libcurl's parser reads it.
 */
bool		tp_http_url_is_valid(const char *text);

/*
 * url as messages show it, valid URL or not: scheme, "***@" for any user
 * info, host and port, then the path with everything before a tail we
 * append ("/v1/traces", the gRPC method, "/ingest") hidden as "/" and three
 * asterisks, and "?***" for a query.  A token can sit in any of those
 * parts; where the request went stays clear.  "" and "/" are shown.
 */
void		tp_http_url_shown(const char *url, char *out, size_t outlen);

/*
 * Replace in message (in place; size bytes available) every occurrence of
 * the parts of url that tp_http_url_shown() hides (its path's, and its
 * query: after its '?', and alone too when 8 bytes or longer), as it
 * does: for messages that quote the URL in their own way (libcurl's, the
 * exporters', a collector's answer quoting the request).
 */
void		tp_http_url_scrub(const char *url, char *message, size_t size);

#endif
