/* Unit tests: key=value lists and the OTEL_* environment. */
#include <stdlib.h>
#include <strings.h>

#include "kvlist.h"
#include "log.h"
#include "http_url.h"
#include "otel_config.h"
#include "unit.h"

static char last_warning[1024];
static int	warnings;

static void
capture_warning(const char *message)
{
	snprintf(last_warning, sizeof(last_warning), "%s", message);
	warnings++;
}

static void
clear_env(void)
{
	static const char *names[] = {
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED",
		"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unsetenv(names[i]);
	warnings = 0;
	last_warning[0] = '\0';
}

TEST(kvlist_plain_and_trimmed)
{
	tp_kvlist	list = {0};
	char		err[256];

	CHECK(tp_kvlist_parse(" env = dev ,service=generator,, version=1.0.0", 0, &list, err, sizeof(err)));
	CHECK(list.count == 3);
	CHECK_STR(tp_kvlist_get(&list, "env"), "dev");
	CHECK_STR(tp_kvlist_get(&list, "version"), "1.0.0");
	CHECK(tp_kvlist_get(&list, "missing") == NULL);
	tp_kvlist_free(&list);
}

TEST(kvlist_percent_decoding)
{
	tp_kvlist	list = {0};
	char		err[256];

	CHECK(tp_kvlist_parse("name=a%20b%2Cc,eq=x%3Dy", TP_KV_PERCENT_DECODE, &list, err, sizeof(err)));
	CHECK_STR(tp_kvlist_get(&list, "name"), "a b,c");
	CHECK_STR(tp_kvlist_get(&list, "eq"), "x=y");
	tp_kvlist_free(&list);
	/* Without the flag the value is kept verbatim. */
	CHECK(tp_kvlist_parse("name=a%20b", 0, &list, err, sizeof(err)));
	CHECK_STR(tp_kvlist_get(&list, "name"), "a%20b");
	tp_kvlist_free(&list);
}

TEST(kvlist_errors_name_the_bad_part)
{
	tp_kvlist	list = {0};
	char		err[256];

	CHECK(!tp_kvlist_parse("a=1,oops,b=2", 0, &list, err, sizeof(err)));
	CHECK(strstr(err, "\"oops\"") != NULL);
	CHECK(list.count == 0);
	CHECK(!tp_kvlist_parse("=1", 0, &list, err, sizeof(err)));
	CHECK(strstr(err, "empty key") != NULL);
	CHECK(!tp_kvlist_parse("a=%zz", TP_KV_PERCENT_DECODE, &list, err, sizeof(err)));
	CHECK(strstr(err, "percent") != NULL);
	CHECK(!tp_kvlist_parse("a=%4", TP_KV_PERCENT_DECODE, &list, err, sizeof(err)));
	CHECK(!tp_kvlist_parse("a=x%00y", TP_KV_PERCENT_DECODE, &list, err, sizeof(err)));
	/* Secret lists are described by position, never by content. */
	CHECK(!tp_kvlist_parse("authorization=Bearer%20ok,tokenwithoutequals", TP_KV_SECRET | TP_KV_PERCENT_DECODE,
						   &list, err, sizeof(err)));
	CHECK(strstr(err, "member 2") != NULL);
	CHECK(strstr(err, "tokenwithoutequals") == NULL);
}

/* Resource attributes go out as protobuf strings, which must be UTF-8. */
TEST(kvlist_values_are_utf8)
{
	tp_kvlist	list = {0};
	char		err[256];

	CHECK(tp_kvlist_parse("env=caf%C3%A9,team=\xc3\xa9quipe", TP_KV_PERCENT_DECODE, &list, err, sizeof(err)));
	CHECK_STR(tp_kvlist_get(&list, "env"), "caf\xc3\xa9");
	tp_kvlist_free(&list);
	/* Latin-1 once decoded, raw, a surrogate, an overlong form. */
	CHECK(!tp_kvlist_parse("a=1,env=caf%E9", TP_KV_PERCENT_DECODE, &list, err, sizeof(err)));
	CHECK(strstr(err, "\"env=caf%E9\" is not valid UTF-8 once percent-decoded") != NULL);
	CHECK(list.count == 0);
	CHECK(!tp_kvlist_parse("env=caf\xe9", 0, &list, err, sizeof(err)));
	CHECK(strstr(err, "\"env=caf?\" is not valid UTF-8") != NULL);
	CHECK(!tp_kvlist_parse("k\xed\xa0\x80=1", 0, &list, err, sizeof(err)));
	CHECK(!tp_kvlist_parse("k=%C0%AF", TP_KV_PERCENT_DECODE, &list, err, sizeof(err)));
	CHECK(!tp_kvlist_parse("k=%F4%90%80%80", TP_KV_PERCENT_DECODE, &list, err, sizeof(err)));
	CHECK(tp_kvlist_parse("k=%F4%8F%BF%BF", TP_KV_PERCENT_DECODE, &list, err, sizeof(err)));
	tp_kvlist_free(&list);
}

TEST(kvlist_set_replaces)
{
	tp_kvlist	list = {0};

	CHECK(tp_kvlist_set(&list, "a", "1"));
	CHECK(tp_kvlist_set(&list, "a", "2"));
	CHECK(list.count == 1);
	CHECK_STR(tp_kvlist_get(&list, "a"), "2");
	tp_kvlist_free(&list);
}

TEST(traces_url_rules)
{
	char	   *url;

	url = tp_otlp_traces_url("http://collector:4318", TP_OTLP_HTTP_PROTOBUF, false);
	CHECK_STR(url, "http://collector:4318/v1/traces");
	free(url);
	url = tp_otlp_traces_url("http://collector:4318/base/", TP_OTLP_HTTP_PROTOBUF, false);
	CHECK_STR(url, "http://collector:4318/base/v1/traces");
	free(url);
	url = tp_otlp_traces_url("http://collector:4318/custom/path", TP_OTLP_HTTP_PROTOBUF, true);
	CHECK_STR(url, "http://collector:4318/custom/path");
	free(url);
	url = tp_otlp_traces_url("localhost:4317", TP_OTLP_GRPC, false);
	CHECK_STR(url, "http://localhost:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export");
	free(url);
	/* The path is appended to the path, before a query string. */
	url = tp_otlp_traces_url("http://collector:4318?tenant=a", TP_OTLP_HTTP_PROTOBUF, false);
	CHECK_STR(url, "http://collector:4318/v1/traces?tenant=a");
	free(url);
	url = tp_otlp_traces_url("HTTPS://u:p@collector/base/?x=1", TP_OTLP_HTTP_PROTOBUF, false);
	CHECK_STR(url, "https://u:p@collector/base/v1/traces?x=1");
	free(url);
	CHECK(tp_otlp_traces_url("http://collector:port", TP_OTLP_HTTP_PROTOBUF, false) == NULL);
}

TEST(endpoints_checked_like_urls)
{
	CHECK(tp_http_url_is_valid("http://collector:4318"));
	CHECK(tp_http_url_is_valid("HTTP://collector"));
	CHECK(tp_http_url_is_valid("collector:4317"));
	CHECK(tp_http_url_is_valid("https://[::1]:4318/base?x=1"));
	CHECK(!tp_http_url_is_valid("http://127.0.0.1:abc"));
	CHECK(!tp_http_url_is_valid("http://collector:99999"));
	CHECK(!tp_http_url_is_valid("http://collector:0"));
	CHECK(!tp_http_url_is_valid("http://collector:/v1"));
	CHECK(!tp_http_url_is_valid("collector:"));
	/* Neither a scheme nor a port: a word, not an endpoint on port 80. */
	CHECK(!tp_http_url_is_valid("collector"));
	CHECK(!tp_http_url_is_valid("127.0.0.1"));
	CHECK(!tp_http_url_is_valid("collector/v1"));
	CHECK(tp_http_url_is_valid("collector:4318/v1"));
	CHECK(tp_http_url_is_valid("http://[::1]"));
	CHECK(!tp_http_url_is_valid("ftp://collector"));
	CHECK(!tp_http_url_is_valid("http://"));
	CHECK(!tp_http_url_is_valid("http:///v1/traces"));
	CHECK(!tp_http_url_is_valid("http://collector :4318"));
	/* As libcurl reads them (tests/fuzz/http_url.c holds it to that). */
	CHECK(tp_http_url_is_valid("http://u:p@collector:4318"));
	CHECK(!tp_http_url_is_valid("http://a@b@collector"));	/* the first '@' ends the user */
	CHECK(tp_http_url_is_valid("http://coll%41ctor"));
	CHECK(!tp_http_url_is_valid("http://coll%2Fctor"));
	CHECK(tp_http_url_is_valid("http://coll\xc3\xa9" "ctor.example/v1"));
	CHECK(tp_http_url_is_valid("http://[fe80::1%25eth0]:4318/v1"));
	CHECK(tp_http_url_is_valid("http://[::ffff:1.2.3.4]"));
	CHECK(!tp_http_url_is_valid("http://[::1"));
	CHECK(!tp_http_url_is_valid("http://[::1]x"));
	CHECK(!tp_http_url_is_valid("http://[zz::1]"));
	CHECK(tp_http_url_is_valid("http://collector:00080"));
	CHECK(!tp_http_url_is_valid("http://collector:65536"));
	CHECK(!tp_http_url_is_valid("http://coll<ctor"));
	CHECK(!tp_http_url_is_valid("http://collector\x7f" "/"));
	CHECK(!tp_http_url_is_valid("http:/a://b"));
}

TEST(defaults_without_environment)
{
	tp_otel_config cfg;

	clear_env();
	tp_otel_config_from_env(&cfg, "traceprof.test");
	CHECK(!cfg.export_enabled);
	CHECK(cfg.traces.protocol == TP_OTLP_HTTP_PROTOBUF);
	CHECK_STR(cfg.traces.url, "http://localhost:4318/v1/traces");
	CHECK(cfg.traces.timeout_ms == 10000);
	CHECK_STR(tp_kvlist_get(&cfg.resource, "service.name"), "traceprof.test");
	CHECK(warnings == 0);
	tp_otel_config_free(&cfg);

	/* OTEL_TRACES_EXPORTER=otlp alone means: the spec's default endpoint. */
	setenv("OTEL_TRACES_EXPORTER", "otlp", 1);
	tp_otel_config_from_env(&cfg, "traceprof.test");
	CHECK(cfg.export_enabled);
	tp_otel_config_free(&cfg);
}

TEST(scheme_less_endpoint_means_grpc)
{
	tp_otel_config cfg;

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4317", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(cfg.export_enabled);
	CHECK(cfg.traces.protocol == TP_OTLP_GRPC);
	CHECK_STR(cfg.traces.url, "http://localhost:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export");
	tp_otel_config_free(&cfg);

	/* An explicit protocol wins over the guess. */
	setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(cfg.traces.protocol == TP_OTLP_HTTP_PROTOBUF);
	CHECK_STR(cfg.traces.url, "http://localhost:4317/v1/traces");
	tp_otel_config_free(&cfg);
}

/*
 * OTEL_EXPORTER_OTLP_INSECURE=false asks a scheme-less gRPC endpoint for
 * TLS; unset, it stays cleartext as the reference's localhost:4317 expects.
 */
TEST(insecure_false_makes_a_scheme_less_grpc_endpoint_tls)
{
	tp_otel_config cfg;
	const char *grpc_path = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
	char		expected[256];

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317", 1);
	setenv("OTEL_EXPORTER_OTLP_INSECURE", "FALSE", 1);
	tp_otel_config_from_env(&cfg, "svc");
	snprintf(expected, sizeof(expected), "https://collector:4317%s", grpc_path);
	CHECK_STR(cfg.traces.url, expected);
	tp_otel_config_free(&cfg);

	/* the per-signal variable wins; "true" and unset are cleartext */
	setenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "true", 1);
	tp_otel_config_from_env(&cfg, "svc");
	snprintf(expected, sizeof(expected), "http://collector:4317%s", grpc_path);
	CHECK_STR(cfg.traces.url, expected);
	tp_otel_config_free(&cfg);
	unsetenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE");
	unsetenv("OTEL_EXPORTER_OTLP_INSECURE");
	tp_otel_config_from_env(&cfg, "svc");
	CHECK_STR(cfg.traces.url, expected);
	tp_otel_config_free(&cfg);
	CHECK(warnings == 0);

	/* a scheme, or http/protobuf, is not the option's business */
	setenv("OTEL_EXPORTER_OTLP_INSECURE", "false", 1);
	setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", 1);
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK_STR(cfg.traces.url, expected);
	tp_otel_config_free(&cfg);
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", 1);
	setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK_STR(cfg.traces.url, "http://collector:4318/v1/traces");
	tp_otel_config_free(&cfg);

	/* not a boolean: said, and taken as false, as the spec reads any value but true */
	unsetenv("OTEL_EXPORTER_OTLP_PROTOCOL");
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317", 1);
	setenv("OTEL_EXPORTER_OTLP_INSECURE", "no", 1);
	tp_otel_config_from_env(&cfg, "svc");
	snprintf(expected, sizeof(expected), "https://collector:4317%s", grpc_path);
	CHECK_STR(cfg.traces.url, expected);
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "OTEL_EXPORTER_OTLP_INSECURE=\"no\" is not a boolean (expected true or false); taken as false (TLS)") != NULL);
	tp_otel_config_free(&cfg);
}

TEST(per_signal_variables_win)
{
	tp_otel_config cfg;

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9999/ingest", 1);
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=2", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=3", 1);
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK_STR(cfg.traces.url, "http://traces:9999/ingest");
	CHECK_STR(tp_kvlist_get(&cfg.traces.headers, "a"), "1");
	CHECK_STR(tp_kvlist_get(&cfg.traces.headers, "b"), "3");
	CHECK(cfg.traces.headers.count == 2);
	CHECK(cfg.traces.timeout_ms == 700);
	tp_otel_config_free(&cfg);
}

TEST(service_name_precedence)
{
	tp_otel_config cfg;

	clear_env();
	setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,env=dev,team=a%20b", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK_STR(tp_kvlist_get(&cfg.resource, "service.name"), "from-attrs");
	CHECK_STR(tp_kvlist_get(&cfg.resource, "env"), "dev");
	CHECK_STR(tp_kvlist_get(&cfg.resource, "team"), "a b");
	tp_otel_config_free(&cfg);

	setenv("OTEL_SERVICE_NAME", "from-service-name", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK_STR(tp_kvlist_get(&cfg.resource, "service.name"), "from-service-name");
	tp_otel_config_free(&cfg);

	/* Not UTF-8: every request would be refused; the attributes' name wins. */
	setenv("OTEL_SERVICE_NAME", "caf\xe9", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "OTEL_SERVICE_NAME ignored: it is not valid UTF-8") != NULL);
	CHECK_STR(tp_kvlist_get(&cfg.resource, "service.name"), "from-attrs");
	tp_otel_config_free(&cfg);
}

TEST(malformed_values_warn_and_fall_back)
{
	tp_otel_config cfg;

	clear_env();
	/* A decoding error discards the whole variable, as the spec says. */
	setenv("OTEL_RESOURCE_ATTRIBUTES", "env=dev,team=%zz", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "OTEL_RESOURCE_ATTRIBUTES") != NULL);
	CHECK(strstr(last_warning, "team=%zz") != NULL);
	CHECK(tp_kvlist_get(&cfg.resource, "env") == NULL);
	CHECK_STR(tp_kvlist_get(&cfg.resource, "service.name"), "default");
	tp_otel_config_free(&cfg);

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon", 1);
	setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", 1);
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://x", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 3);
	CHECK(cfg.traces.timeout_ms == 10000);
	CHECK(cfg.traces.protocol == TP_OTLP_HTTP_PROTOBUF);
	CHECK_STR(cfg.traces.url, "http://localhost:4318/v1/traces");
	/* Setting an endpoint asked for export: its default replaces it. */
	CHECK(cfg.export_enabled);
	tp_otel_config_free(&cfg);

	/* Longer than an export may take: the longest, not the 10 s default. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "900000", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "OTEL_EXPORTER_OTLP_TIMEOUT=\"900000\" is longer than an export may take here; using 600000") != NULL);
	CHECK(cfg.traces.timeout_ms == 600000);
	tp_otel_config_free(&cfg);
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "99999999999999999999", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(cfg.traces.timeout_ms == 600000);
	tp_otel_config_free(&cfg);

	/* A bad endpoint's password and query stay out of the warning. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:0tlpSecret@127.0.0.1:99999/?key=K3Y", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "\"http://***@127.0.0.1:99999/?***\" is not an endpoint") != NULL);
	CHECK(strstr(last_warning, "0tlpSecret") == NULL && strstr(last_warning, "K3Y") == NULL);
	CHECK(cfg.export_enabled);
	tp_otel_config_free(&cfg);

	/* Header values may be secrets: the warning shows positions only. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cret,garbage-s3cret", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "s3cret") == NULL);
	CHECK(cfg.traces.headers.count == 0);
	tp_otel_config_free(&cfg);
}

/* Found by tests/fuzz/otel_env.c: a decoded CR LF went into a header line. */
TEST(headers_that_break_the_request_are_refused)
{
	tp_otel_config cfg;

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "a=1%0D%0AInjected: yes", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "bad name=1", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 2);
	CHECK(strstr(last_warning, "OTEL_EXPORTER_OTLP_TRACES_HEADERS ignored: header 1") != NULL);
	CHECK(cfg.traces.headers.count == 0);
	tp_otel_config_free(&cfg);

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic%20dXNlcjpwdw==,x-tab=a%09b", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 0);
	CHECK_STR(tp_kvlist_get(&cfg.traces.headers, "Authorization"), "Basic dXNlcjpwdw==");
	tp_otel_config_free(&cfg);
}

/* Found by tests/fuzz/kvlist.c: a member's line break went into the log. */
TEST(messages_stay_on_one_line)
{
	tp_otel_config cfg;
	tp_kvlist	list = {0};
	char		err[256];

	CHECK(!tp_kvlist_parse("a=1,forged\nloader: error: x", 0, &list, err, sizeof(err)));
	CHECK(strchr(err, '\n') == NULL);
	clear_env();
	setenv("OTEL_TRACES_EXPORTER", "zipkin\r\nloader: forged\033[2J", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "\"zipkin  loader: forged?[2J\"") != NULL);
	tp_otel_config_free(&cfg);
}

TEST(disabled_sdk_exports_nothing)
{
	tp_otel_config cfg;

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	setenv("OTEL_SDK_DISABLED", "true", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(!cfg.export_enabled);
	tp_otel_config_free(&cfg);
	unsetenv("OTEL_SDK_DISABLED");
	setenv("OTEL_TRACES_EXPORTER", "none", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(!cfg.export_enabled);
	tp_otel_config_free(&cfg);
}

/*
 * The SDK environment spec: enum values SHOULD be read case-insensitively
 * ("OTLP", "GRPC", "HTTP/PROTOBUF" are what the documented values mean).
 */
TEST(enum_values_ignore_case)
{
	tp_otel_config cfg;

	clear_env();
	setenv("OTEL_TRACES_EXPORTER", "OTLP", 1);
	setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "GRPC", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 0);
	CHECK(cfg.export_enabled);
	CHECK(cfg.traces.protocol == TP_OTLP_GRPC);
	CHECK_STR(cfg.traces.url, "http://localhost:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export");
	tp_otel_config_free(&cfg);

	/* The per-signal variable too; it wins over a scheme-less endpoint's guess. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4317", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "HTTP/Protobuf", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 0);
	CHECK(cfg.traces.protocol == TP_OTLP_HTTP_PROTOBUF);
	CHECK_STR(cfg.traces.url, "http://localhost:4317/v1/traces");
	tp_otel_config_free(&cfg);

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	setenv("OTEL_TRACES_EXPORTER", "None", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 0);
	CHECK(!cfg.export_enabled);
	tp_otel_config_free(&cfg);

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	setenv("OTEL_SDK_DISABLED", "TRUE", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 0);
	CHECK(!cfg.export_enabled);
	tp_otel_config_free(&cfg);

	/* An unknown value still warns, naming the variable and what it takes. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "HTTP/JSON", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"HTTP/JSON\" is not supported (expected grpc or http/protobuf)") != NULL);
	CHECK(cfg.traces.protocol == TP_OTLP_HTTP_PROTOBUF);
	tp_otel_config_free(&cfg);

	/* Booleans: "true" in any case; what is neither true nor false is false, said so. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	setenv("OTEL_SDK_DISABLED", "False", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 0);
	CHECK(cfg.export_enabled);
	tp_otel_config_free(&cfg);
	setenv("OTEL_SDK_DISABLED", "1", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "OTEL_SDK_DISABLED=\"1\" is not a boolean (expected true or false)") != NULL);
	CHECK(cfg.export_enabled);
	tp_otel_config_free(&cfg);
}

/*
 * OTEL_TRACES_EXPORTER is a comma-separated list in the spec
 * ("otlp,console"): the otlp member is honoured, the others are named in
 * a warning; none goes with nothing else.
 */
TEST(traces_exporter_list)
{
	tp_otel_config cfg;

	clear_env();
	setenv("OTEL_TRACES_EXPORTER", "otlp,console", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(cfg.export_enabled);
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "OTEL_TRACES_EXPORTER=\"otlp,console\": console not supported (expected otlp or none); exporting with otlp only") != NULL);
	tp_otel_config_free(&cfg);

	/* Blanks around members, any case, repeats and empty members are fine. */
	clear_env();
	setenv("OTEL_TRACES_EXPORTER", " Console , OTLP,otlp,, zipkin ", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(cfg.export_enabled);
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, ": Console, zipkin not supported (expected otlp or none); exporting with otlp only") != NULL);
	tp_otel_config_free(&cfg);

	clear_env();
	setenv("OTEL_TRACES_EXPORTER", "otlp, OTLP,", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(cfg.export_enabled);
	CHECK(warnings == 0);
	tp_otel_config_free(&cfg);

	/* No otlp member: nothing we can export to, even with an endpoint set. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	setenv("OTEL_TRACES_EXPORTER", "console,zipkin", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(!cfg.export_enabled);
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "OTEL_TRACES_EXPORTER=\"console,zipkin\" is not supported (expected otlp or none); traces are not exported") != NULL);
	tp_otel_config_free(&cfg);

	/* none asks for no export: with other members it is a contradiction; nothing is exported. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	setenv("OTEL_TRACES_EXPORTER", "otlp,none", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(!cfg.export_enabled);
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "OTEL_TRACES_EXPORTER=\"otlp,none\": none cannot be combined with other exporters; traces are not exported") != NULL);
	tp_otel_config_free(&cfg);

	/* Only blanks and commas: as if unset (the endpoint decides). */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	setenv("OTEL_TRACES_EXPORTER", " , ", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(cfg.export_enabled);
	CHECK(warnings == 0);
	tp_otel_config_free(&cfg);
}

/* A token in an endpoint's path stays out of messages; the rest stays useful. */
TEST(urls_in_messages_hide_path_secrets)
{
	char		out[512];
	char		msg[256];

	tp_http_url_shown("http://collector:4318", out, sizeof(out));
	CHECK_STR(out, "http://collector:4318");
	tp_http_url_shown("https://collector:4318/", out, sizeof(out));
	CHECK_STR(out, "https://collector:4318/");
	tp_http_url_shown("http://collector:4318/v1/traces", out, sizeof(out));
	CHECK_STR(out, "http://collector:4318/v1/traces");
	tp_http_url_shown("https://host/v1/traces/Tok3nSecret", out, sizeof(out));
	CHECK_STR(out, "https://host/***");
	tp_http_url_shown("https://host/Tok3nSecret/v1/traces", out, sizeof(out));
	CHECK_STR(out, "https://host/***/v1/traces");
	tp_http_url_shown("http://u:pw@pyro:4040/t/Tok3nSecret/ingest?name=x", out, sizeof(out));
	CHECK_STR(out, "http://***@pyro:4040/***/ingest?***");
	tp_http_url_shown("collector:4317/Tok3nSecret", out, sizeof(out));
	CHECK_STR(out, "collector:4317/***");
	tp_http_url_shown("http://127.0.0.1:1:x/Tok3nSecret", out, sizeof(out));
	CHECK_STR(out, "http://127.0.0.1:1:x/***");
	tp_http_url_shown("https://host/opentelemetry.proto.collector.trace.v1.TraceService/Export", out, sizeof(out));
	CHECK_STR(out, "https://host/opentelemetry.proto.collector.trace.v1.TraceService/Export");

	snprintf(msg, sizeof(msg), "OTLP collector unreachable: http://h:1/v1/traces/Tok3nSecret/v1/traces: refused");
	tp_http_url_scrub("http://h:1/v1/traces/Tok3nSecret/v1/traces", msg, sizeof(msg));
	CHECK_STR(msg, "OTLP collector unreachable: http://h:1/***/v1/traces: refused");
	snprintf(msg, sizeof(msg), "http://h:1/v1/traces: refused");
	tp_http_url_scrub("http://h:1/v1/traces", msg, sizeof(msg));
	CHECK_STR(msg, "http://h:1/v1/traces: refused");
	/* A collector's answer quoting the request line: its query too. */
	snprintf(msg, sizeof(msg), "HTTP status 404: POST /v1/traces?api_key=SECRET123 HTTP/1.1");
	tp_http_url_scrub("http://h:1/v1/traces?api_key=SECRET123", msg, sizeof(msg));
	CHECK_STR(msg, "HTTP status 404: POST /v1/traces?*** HTTP/1.1");
	snprintf(msg, sizeof(msg), "bad key: api_key=SECRET123");
	tp_http_url_scrub("http://h:1/v1/traces?api_key=SECRET123", msg, sizeof(msg));
	CHECK_STR(msg, "bad key: ***");
	/* A short query is scrubbed where it follows its '?', not in every word. */
	snprintf(msg, sizeof(msg), "HTTP status 400: a bad request at /v1/traces?a");
	tp_http_url_scrub("http://h:1/v1/traces?a", msg, sizeof(msg));
	CHECK_STR(msg, "HTTP status 400: a bad request at /v1/traces?***");
	/* no room to grow: cut short rather than leave a piece */
	snprintf(msg, 10, "at /ab/ab");
	tp_http_url_scrub("http://h/ab", msg, 10);
	CHECK_STR(msg, "at /***");
}

/* The endpoint warning names the variable and the server, not the token. */
TEST(invalid_endpoint_warning_hides_path_secret)
{
	tp_otel_config cfg;

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1:x/v1/traces/Tok3nSecret", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 1);
	CHECK(strstr(last_warning, "Tok3nSecret") == NULL);
	CHECK(strstr(last_warning, "OTEL_EXPORTER_OTLP_ENDPOINT=\"http://127.0.0.1:1:x/***\"") != NULL);
	tp_otel_config_free(&cfg);
}

TEST(header_names_are_case_insensitive)
{
	tp_otel_config cfg;

	/*
	 * HTTP header names ignore case: a per-signal Authorization must
	 * replace the general one, not go out next to it (the collector then
	 * reads whichever comes first: the general one).  A name repeated in
	 * one variable is one header too, the last value winning, as the
	 * SDKs' maps do.
	 */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20general,X-Team=a,x-team=b", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Bearer%20traces", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 0);
	CHECK(cfg.traces.headers.count == 2);
	CHECK(cfg.traces.headers.count == 2 &&
		  strcasecmp(cfg.traces.headers.items[0].key, "authorization") == 0 &&
		  strcmp(cfg.traces.headers.items[0].value, "Bearer traces") == 0);
	CHECK(cfg.traces.headers.count == 2 &&
		  strcasecmp(cfg.traces.headers.items[1].key, "x-team") == 0 &&
		  strcmp(cfg.traces.headers.items[1].value, "b") == 0);
	tp_otel_config_free(&cfg);
}

TEST(repeated_resource_attributes_keep_the_last_value)
{
	tp_otel_config cfg;

	/*
	 * "$OTEL_RESOURCE_ATTRIBUTES,deployment.environment=prod" is how a
	 * value is overridden in a shell; every OpenTelemetry SDK keeps the
	 * last value of a repeated key (Go's attribute set, Java's and
	 * Python's maps, JS's object).
	 */
	clear_env();
	setenv("OTEL_RESOURCE_ATTRIBUTES",
		   "deployment.environment=dev,service.name=first,team=a,"
		   "deployment.environment=prod,service.name=last", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 0);
	CHECK_STR(tp_kvlist_get(&cfg.resource, "deployment.environment"), "prod");
	CHECK_STR(tp_kvlist_get(&cfg.resource, "service.name"), "last");
	CHECK_STR(tp_kvlist_get(&cfg.resource, "team"), "a");
	for (size_t i = 0; i < cfg.resource.count; i++)
		for (size_t j = i + 1; j < cfg.resource.count; j++)
			CHECK(strcmp(cfg.resource.items[i].key, cfg.resource.items[j].key) != 0);
	tp_otel_config_free(&cfg);
}

/*
 * Values are read trimmed of white space, as the Go SDK's envconfig does
 * (strings.TrimSpace): a value pasted with its newline, or quoted with a
 * blank, means what it says instead of being refused or misread.
 */
TEST(values_are_trimmed_of_white_space)
{
	tp_otel_config cfg;

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:58510\n", 1);
	setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf ", 1);
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5000 ", 1);
	setenv("OTEL_EXPORTER_OTLP_COMPRESSION", " gzip", 1);
	setenv("OTEL_SERVICE_NAME", " x \r\n", 1);
	setenv("OTEL_RESOURCE_ATTRIBUTES", "\tenv=dev\n", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 0);
	CHECK(cfg.export_enabled);
	CHECK(cfg.traces.protocol == TP_OTLP_HTTP_PROTOBUF);
	CHECK_STR(cfg.traces.url, "http://127.0.0.1:58510/v1/traces");
	CHECK(cfg.traces.timeout_ms == 5000);
	CHECK(cfg.traces.gzip);
	CHECK_STR(tp_kvlist_get(&cfg.resource, "service.name"), "x");
	CHECK_STR(tp_kvlist_get(&cfg.resource, "env"), "dev");
	tp_otel_config_free(&cfg);

	/* The per-signal variables too; only blanks is as good as unset. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "\v\f", 1);
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", " localhost:4317\n", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "\tgrpc\t", 1);
	setenv("OTEL_SERVICE_NAME", " \n", 1);
	tp_otel_config_from_env(&cfg, "default");
	CHECK(warnings == 0);
	CHECK(cfg.traces.protocol == TP_OTLP_GRPC);
	CHECK_STR(cfg.traces.url, "http://localhost:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export");
	CHECK_STR(tp_kvlist_get(&cfg.resource, "service.name"), "default");
	tp_otel_config_free(&cfg);
}

TEST(switches_are_trimmed_of_white_space)
{
	tp_otel_config cfg;

	/* "true " was taken as false: the SDK disabled exported anyway. */
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	setenv("OTEL_SDK_DISABLED", "true ", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(!cfg.export_enabled);
	CHECK(warnings == 0);
	tp_otel_config_free(&cfg);

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	setenv("OTEL_TRACES_EXPORTER", "none\n", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(!cfg.export_enabled);
	CHECK(warnings == 0);
	tp_otel_config_free(&cfg);

	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317", 1);
	setenv("OTEL_EXPORTER_OTLP_INSECURE", "false\n", 1);
	tp_otel_config_from_env(&cfg, "svc");
	CHECK(warnings == 0);
	CHECK(strncmp(cfg.traces.url, "https://", 8) == 0);
	tp_otel_config_free(&cfg);
}

int
main(void)
{
	tp_log_set_sink(capture_warning);
	RUN(kvlist_plain_and_trimmed);
	RUN(kvlist_percent_decoding);
	RUN(kvlist_errors_name_the_bad_part);
	RUN(kvlist_values_are_utf8);
	RUN(kvlist_set_replaces);
	RUN(traces_url_rules);
	RUN(endpoints_checked_like_urls);
	RUN(defaults_without_environment);
	RUN(scheme_less_endpoint_means_grpc);
	RUN(insecure_false_makes_a_scheme_less_grpc_endpoint_tls);
	RUN(per_signal_variables_win);
	RUN(service_name_precedence);
	RUN(header_names_are_case_insensitive);
	RUN(repeated_resource_attributes_keep_the_last_value);
	RUN(malformed_values_warn_and_fall_back);
	RUN(headers_that_break_the_request_are_refused);
	RUN(messages_stay_on_one_line);
	RUN(disabled_sdk_exports_nothing);
	RUN(enum_values_ignore_case);
	RUN(traces_exporter_list);
	RUN(urls_in_messages_hide_path_secrets);
	RUN(invalid_endpoint_warning_hides_path_secret);
	RUN(values_are_trimmed_of_white_space);
	RUN(switches_are_trimmed_of_white_space);
	return unit_summary();
}
