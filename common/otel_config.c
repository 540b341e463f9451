/* otel_config.c - read the OTEL_* environment variables once. */
#include "otel_config.h"
#include "otlp_export.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "http_url.h"
#include "log.h"
#include "text.h"
#include "version.h"

#define DEFAULT_HTTP_ENDPOINT "http://localhost:4318"
#define DEFAULT_GRPC_ENDPOINT "http://localhost:4317"
#define DEFAULT_TIMEOUT_MS 10000
#define MAX_TIMEOUT_MS 600000
#define GRPC_EXPORT_PATH "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

/*
 * Every OTEL_* value is read trimmed of white space (tp_getenv_trimmed), as
 * the Go SDK reads it: "http://host:4318\n" from a file or a here-document
 * is that endpoint, not a malformed one replaced by the default.
 */

/*
 * The per-signal variable if set and not blank, else the general one:
 * trimmed, malloc'd, or NULL; *chosen names the variable read.
 */
static char *
env_pair(const char *per_signal, const char *general, const char **chosen)
{
	char	   *value = tp_getenv_trimmed(per_signal);

	if (value != NULL)
	{
		*chosen = per_signal;
		return value;
	}
	*chosen = general;
	return tp_getenv_trimmed(general);
}

/* env_pair's value, or NULL. */
static char *
env_copy(const char *per_signal, const char *general)
{
	const char *name;

	return env_pair(per_signal, general, &name);
}

/*
 * A boolean variable: "true" in any case; anything else is false, as the
 * spec says, with a warning when it is not "false" either (a "1" or "yes"
 * is meant as true and would silently do the opposite).
 */
static bool
env_is_true(const char *name)
{
	char	   *value = tp_getenv_trimmed(name);
	bool		result = false;

	if (value == NULL)
		return false;
	if (strcasecmp(value, "true") == 0)
		result = true;
	else if (strcasecmp(value, "false") != 0)
		tp_warn("%s=\"%s\" is not a boolean (expected true or false); taken as false",
				name, value);
	free(value);
	return result;
}

/* A valid endpoint (tp_http_url_is_valid) as libcurl reads it, or NULL. */
static CURLU *
parse_endpoint(const char *endpoint)
{
	CURLU	   *url;
	char	   *text = NULL;

	if (!tp_http_url_is_valid(endpoint) || (url = curl_url()) == NULL)
		return NULL;
	/* host:port means http://host:port, where libcurl would take https */
	if (asprintf(&text, "%s%s", strstr(endpoint, "://") ? "" : "http://", endpoint) < 0 ||
		curl_url_set(url, CURLUPART_URL, text, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK)
	{
		curl_url_cleanup(url);
		url = NULL;
	}
	free(text);
	return url;
}

/* The suffix goes on the path: a query string stays after it. */
char *
tp_otlp_traces_url(const char *endpoint, tp_otlp_protocol protocol, bool per_signal)
{
	const char *suffix = protocol == TP_OTLP_GRPC ? GRPC_EXPORT_PATH : "/v1/traces";
	CURLU	   *url = parse_endpoint(endpoint);
	char	   *path = NULL;
	char	   *joined = NULL;
	char	   *full = NULL;
	char	   *result = NULL;
	size_t		len;

	if (url == NULL)
		return NULL;
	if (per_signal && protocol == TP_OTLP_HTTP_PROTOBUF)
		suffix = "";			/* the traces endpoint is used as is */
	if (curl_url_get(url, CURLUPART_PATH, &path, 0) == CURLUE_OK)
	{
		len = strlen(path);
		while (suffix[0] != '\0' && len > 0 && path[len - 1] == '/')
			len--;
		if (asprintf(&joined, "%.*s%s", (int) len, path, suffix) >= 0 &&
			curl_url_set(url, CURLUPART_PATH, joined, 0) == CURLUE_OK &&
			curl_url_get(url, CURLUPART_URL, &full, 0) == CURLUE_OK)
			result = strdup(full);
	}
	curl_free(path);
	free(joined);
	curl_free(full);
	curl_url_cleanup(url);
	return result;
}

static tp_otlp_protocol
read_protocol(const char *endpoint)
{
	const char *name;
	char	   *value = env_pair("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
								 "OTEL_EXPORTER_OTLP_PROTOCOL", &name);
	tp_otlp_protocol protocol = TP_OTLP_HTTP_PROTOBUF;

	if (value == NULL)
	{
		/* The documents' "localhost:4317" form: no scheme means gRPC. */
		return endpoint != NULL && strstr(endpoint, "://") == NULL ? TP_OTLP_GRPC : TP_OTLP_HTTP_PROTOBUF;
	}
	/* The spec's enum values are read in any case ("GRPC"). */
	if (strcasecmp(value, "grpc") == 0)
		protocol = TP_OTLP_GRPC;
	else if (strcasecmp(value, "http/protobuf") != 0)
		tp_warn("%s=\"%s\" is not supported (expected grpc or http/protobuf); using http/protobuf",
				name, value);
	free(value);
	return protocol;
}

static bool
read_gzip(void)
{
	const char *name;
	char	   *value = env_pair("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
								 "OTEL_EXPORTER_OTLP_COMPRESSION", &name);
	bool		gzip = false;

	if (value == NULL)
		return false;
	if (strcasecmp(value, "gzip") == 0)
		gzip = true;
	else if (strcasecmp(value, "none") != 0)
		tp_warn("%s=\"%s\" is not supported (expected gzip or none); sending uncompressed", name, value);
	free(value);
	return gzip;
}

static long
read_timeout(void)
{
	const char *name;
	char	   *value = env_pair("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
								 "OTEL_EXPORTER_OTLP_TIMEOUT", &name);
	char	   *end;
	long		ms;

	if (value == NULL)
		return DEFAULT_TIMEOUT_MS;
	ms = strtol(value, &end, 10);
	if (*end != '\0' || end == value || ms <= 0)
	{
		tp_warn("%s=\"%s\" is not a timeout (expected milliseconds, 1..%d); using %d",
				name, value, MAX_TIMEOUT_MS, DEFAULT_TIMEOUT_MS);
		ms = DEFAULT_TIMEOUT_MS;
	}
	/* Asked for longer than we wait (strtol's overflow too): the longest, not the default. */
	else if (ms > MAX_TIMEOUT_MS)
	{
		tp_warn("%s=\"%s\" is longer than an export may take here; using %d",
				name, value, MAX_TIMEOUT_MS);
		ms = MAX_TIMEOUT_MS;
	}
	free(value);
	return ms;
}

/* Parse the variable into list; on error warn and leave list empty. */
static void
read_kvlist(const char *name, int flags, tp_kvlist *list)
{
	char	   *value = tp_getenv_trimmed(name);
	char		err[512];

	if (value == NULL)
		return;
	if (!tp_kvlist_parse(value, flags, list, err, sizeof(err)))
		tp_warn("%s ignored: %s", name, err);
	free(value);
}

/* An RFC 9110 token: what a header name may be. */
static bool
is_header_name(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char) *s) && strchr("!#$%&'*+-.^_`|~", *s) == NULL)
			return false;
	return true;
}

/* A decoded "%0D%0A" must not start a header line of its own. */
static bool
is_header_value(const char *s)
{
	for (; *s; s++)
		if (((unsigned char) *s < 0x20 && *s != '\t') || *s == 0x7f)
			return false;
	return true;
}

/*
 * Set header key to value.  Header names ignore case (RFC 9110): sent
 * twice, the server would read whichever comes first, not the override.
 */
static void
set_header(tp_kvlist *headers, const char *key, const char *value)
{
	for (size_t i = 0; i < headers->count; i++)
	{
		if (strcasecmp(headers->items[i].key, key) == 0)
		{
			char	   *copy = strdup(value);

			if (copy == NULL)
				return;
			free(headers->items[i].value);
			headers->items[i].value = copy;
			return;
		}
	}
	tp_kvlist_add(headers, key, value);
}

/*
 * Read a headers variable into headers, a later value replacing an earlier
 * one of the same name; one header curl cannot send voids the variable.
 */
static void
read_header_list(const char *name, tp_kvlist *headers)
{
	tp_kvlist	list = {0};

	read_kvlist(name, TP_KV_PERCENT_DECODE | TP_KV_SECRET, &list);
	for (size_t i = 0; i < list.count; i++)
	{
		if (!is_header_name(list.items[i].key) || !is_header_value(list.items[i].value))
		{
			tp_warn("%s ignored: header %zu is not a valid HTTP header (names: letters, digits and !#$%%&'*+-.^_`|~; values: no control characters)",
					name, i + 1);
			tp_kvlist_free(&list);
			return;
		}
	}
	for (size_t i = 0; i < list.count; i++)
		set_header(headers, list.items[i].key, list.items[i].value);
	tp_kvlist_free(&list);
}

static void
read_headers(tp_kvlist *headers)
{
	/* Per-signal headers, read last, win over general ones. */
	read_header_list("OTEL_EXPORTER_OTLP_HEADERS", headers);
	read_header_list("OTEL_EXPORTER_OTLP_TRACES_HEADERS", headers);
}

static void
read_resource(tp_kvlist *resource, const char *default_service)
{
	tp_kvlist	parsed = {0};
	tp_kvlist	from_env = {0};
	char	   *from_service_name = tp_getenv_trimmed("OTEL_SERVICE_NAME");
	const char *service = from_service_name;
	char		pid[32];

	read_kvlist("OTEL_RESOURCE_ATTRIBUTES", TP_KV_PERCENT_DECODE, &parsed);
	/* A repeated key keeps its last value, as in every OpenTelemetry SDK. */
	for (size_t i = 0; i < parsed.count; i++)
		tp_kvlist_set(&from_env, parsed.items[i].key, parsed.items[i].value);
	tp_kvlist_free(&parsed);
	if (service != NULL && !tp_utf8_is_valid(service, strlen(service)))
	{
		/* Every request would carry it, and a collector refuses them all. */
		tp_warn("OTEL_SERVICE_NAME ignored: it is not valid UTF-8");
		service = NULL;
	}
	if (service == NULL)
		service = tp_kvlist_get(&from_env, "service.name");
	if (service == NULL || service[0] == '\0')
		service = default_service;

	tp_kvlist_add(resource, "service.name", service);
	free(from_service_name);
	for (size_t i = 0; i < from_env.count; i++)
		if (strcmp(from_env.items[i].key, "service.name") != 0 &&
			tp_kvlist_get(resource, from_env.items[i].key) == NULL)
			tp_kvlist_add(resource, from_env.items[i].key, from_env.items[i].value);
	if (tp_kvlist_get(resource, "telemetry.sdk.name") == NULL)
		tp_kvlist_add(resource, "telemetry.sdk.name", "traceprof");
	if (tp_kvlist_get(resource, "telemetry.sdk.version") == NULL)
		tp_kvlist_add(resource, "telemetry.sdk.version", TRACEPROF_VERSION);
	snprintf(pid, sizeof(pid), "%ld", (long) getpid());
	if (tp_kvlist_get(resource, "process.pid") == NULL)
		tp_kvlist_add(resource, "process.pid", pid);
	tp_kvlist_free(&from_env);
}

/*
 * OTEL_TRACES_EXPORTER: a comma-separated list of exporter names, in any
 * case.  Only otlp exists here: it is honoured when listed, the other
 * members are named in a warning.  Returns false for none, or when no
 * member is otlp; *listed is false when the list has no member at all.
 */
static bool
exporter_list_wants_otlp(const char *value, bool *listed)
{
	char		others[256];
	size_t		olen = 0;
	bool		otlp = false;
	bool		none = false;
	int			members = 0;

	others[0] = '\0';
	for (const char *p = value; *p != '\0';)
	{
		const char *start = p + strspn(p, " \t");
		size_t		len = strcspn(start, ",");

		p = start + len;
		if (*p == ',')
			p++;
		while (len > 0 && (start[len - 1] == ' ' || start[len - 1] == '\t'))
			len--;
		if (len == 0)
			continue;
		members++;
		if (len == 4 && strncasecmp(start, "otlp", 4) == 0)
			otlp = true;
		else if (len == 4 && strncasecmp(start, "none", 4) == 0)
			none = true;
		else if (olen < sizeof(others))
			olen += snprintf(others + olen, sizeof(others) - olen, "%s%.*s",
							 olen > 0 ? ", " : "", (int) len, start);
	}
	*listed = members > 0;
	if (none && (otlp || others[0] != '\0'))
	{
		tp_warn("OTEL_TRACES_EXPORTER=\"%s\": none cannot be combined with other exporters; traces are not exported",
				value);
		return false;
	}
	if (none)
		return false;
	if (!otlp)
	{
		if (*listed)
			tp_warn("OTEL_TRACES_EXPORTER=\"%s\" is not supported (expected otlp or none); traces are not exported",
					value);
		return false;
	}
	if (others[0] != '\0')
		tp_warn("OTEL_TRACES_EXPORTER=\"%s\": %s not supported (expected otlp or none); exporting with otlp only",
				value, others);
	return true;
}

/* Should traces be exported at all?  Only when the user asked for it. */
static bool
export_requested(const char *endpoint)
{
	char	   *exporter;
	bool		requested = endpoint != NULL;

	if (env_is_true("OTEL_SDK_DISABLED"))
		return false;
	exporter = tp_getenv_trimmed("OTEL_TRACES_EXPORTER");
	if (exporter != NULL)
	{
		bool		listed;
		bool		otlp = exporter_list_wants_otlp(exporter, &listed);

		/* Blanks and commas only: as if unset. */
		if (listed)
			requested = otlp;
		free(exporter);
	}
	return requested;
}

/*
 * Does a gRPC endpoint without a scheme want TLS?  Only when the Insecure
 * option says "false": unset stays cleartext, as the reference documents'
 * "localhost:4317" to a local collector expects (the spec's default would
 * be TLS there).
 */
static bool
wants_tls_without_scheme(void)
{
	const char *name;
	char	   *value = env_pair("OTEL_EXPORTER_OTLP_TRACES_INSECURE",
								 "OTEL_EXPORTER_OTLP_INSECURE", &name);
	bool		tls;

	if (value == NULL)
		return false;
	tls = strcasecmp(value, "true") != 0;
	if (tls && strcasecmp(value, "false") != 0)
		tp_warn("%s=\"%s\" is not a boolean (expected true or false); taken as false (TLS)", name, value);
	free(value);
	return tls;
}

void
tp_otel_config_from_env(tp_otel_config *cfg, const char *default_service)
{
	const char *name;
	char	   *from_env = env_pair("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
									"OTEL_EXPORTER_OTLP_ENDPOINT", &name);
	const char *endpoint = from_env;

	memset(cfg, 0, sizeof(*cfg));
	if (endpoint != NULL && !tp_http_url_is_valid(endpoint))
	{
		char		shown[512];

		/* Its user info, path and query may hold secrets, valid URL or not. */
		tp_http_url_shown(endpoint, shown, sizeof(shown));
		tp_warn("%s=\"%s\" is not an endpoint (expected http://host:port, https://host:port or host:port); "
				"exporting to the default", name, shown);
		/* Setting one asked for export: the default replaces it, as for any variable. */
		cfg->export_enabled = export_requested("");
		endpoint = NULL;
	}
	else
		cfg->export_enabled = export_requested(endpoint);
	cfg->traces.protocol = read_protocol(endpoint);
	if (endpoint == NULL)
		cfg->traces.url = tp_otlp_traces_url(cfg->traces.protocol == TP_OTLP_GRPC ?
											 DEFAULT_GRPC_ENDPOINT : DEFAULT_HTTP_ENDPOINT,
											 cfg->traces.protocol, false);
	else
	{
		char	   *secure = NULL;

		if (cfg->traces.protocol == TP_OTLP_GRPC && strstr(endpoint, "://") == NULL &&
			wants_tls_without_scheme())
		{
			/* Never cleartext where TLS was asked for. */
			if (asprintf(&secure, "https://%s", endpoint) < 0)
			{
				tp_warn("out of memory reading %s: traces are not exported", name);
				cfg->export_enabled = false;
				secure = NULL;
			}
			endpoint = secure;
		}
		if (endpoint != NULL)
			cfg->traces.url = tp_otlp_traces_url(endpoint, cfg->traces.protocol,
												 strcmp(name, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == 0);
		free(secure);
	}
	free(from_env);
	cfg->traces.grpc_setting = "OTEL_EXPORTER_OTLP_PROTOCOL=grpc";
	cfg->traces.http_setting = "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf";
	cfg->traces.timeout_ms = read_timeout();
	cfg->traces.gzip = read_gzip();
	cfg->traces.ca_file = env_copy("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE");
	cfg->traces.client_cert = env_copy("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
									   "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE");
	cfg->traces.client_key = env_copy("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
									  "OTEL_EXPORTER_OTLP_CLIENT_KEY");
	read_headers(&cfg->traces.headers);
	read_resource(&cfg->resource, default_service);
}

void
tp_otel_config_free(tp_otel_config *cfg)
{
	tp_otlp_target_close(&cfg->traces);
	free(cfg->traces.url);
	free(cfg->traces.ca_file);
	free(cfg->traces.client_cert);
	free(cfg->traces.client_key);
	tp_kvlist_free(&cfg->traces.headers);
	tp_kvlist_free(&cfg->resource);
	memset(cfg, 0, sizeof(*cfg));
}
