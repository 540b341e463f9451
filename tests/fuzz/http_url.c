/*
 * http_url.c - libFuzzer target for tp_http_url_is_valid(), which checks
 * the endpoint settings (traceprof.otlp_endpoint, traceprof.pyroscope_url,
 * OTEL_EXPORTER_OTLP_ENDPOINT, PYROSCOPE_SERVER_ADDRESS) without libcurl,
 * so that backends need not load it.
 *
 * The input is the setting's value as a C string (cut at its first NUL).
 * Invariant: whatever the check accepts, libcurl's own parser reads as an
 * http or https URL with a host and a port (if any) of 1..65535, which is
 * what the exporters then send to.  The check may refuse more (odd forms
 * such as "http:/a://b", which libcurl reads as host a): a setting it
 * refuses is reported at once, never found out at the first request.
 * FUZZ_HTTP_URL_BOTH_WAYS=1 also aborts on those, to review them.
 */
#include <curl/curl.h>
#include <stdbool.h>

#include "fuzz.h"
#include "http_url.h"

static bool
curl_part(CURLU *url, CURLUPart part, char **out)
{
	return curl_url_get(url, part, out, 0) == CURLUE_OK;
}

/* What libcurl makes of text, with http:// put before it when it has no scheme. */
static bool
curl_reads_as_endpoint(const char *text)
{
	bool		has_scheme = strstr(text, "://") != NULL;
	CURLU	   *url = curl_url();
	char	   *full = NULL;
	char	   *scheme = NULL;
	char	   *host = NULL;
	char	   *port = NULL;
	bool		ok;

	FUZZ_CHECK(url != NULL);
	FUZZ_CHECK(asprintf(&full, "%s%s", has_scheme ? "" : "http://", text) >= 0);
	ok = curl_url_set(url, CURLUPART_URL, full, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
		curl_part(url, CURLUPART_SCHEME, &scheme) &&
		(strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0) &&
		curl_part(url, CURLUPART_HOST, &host) && host[0] != '\0';
	if (ok && curl_part(url, CURLUPART_PORT, &port))
		ok = atoi(port) >= 1 && atoi(port) <= 65535;
	else if (ok)
		ok = has_scheme;		/* host:port needs its port */
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(url);
	free(full);
	return ok;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *text = fuzz_cstring(data, size);
	bool		ours = tp_http_url_is_valid(text);
	bool		theirs = curl_reads_as_endpoint(text);

	if (ours)
		FUZZ_CHECK(theirs);
	else if (getenv("FUZZ_HTTP_URL_BOTH_WAYS") != NULL)
		FUZZ_CHECK(!theirs);
	free(text);
	return 0;
}
