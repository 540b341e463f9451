/*
 * test_pyroscope.c - PYROSCOPE_* settings, tags, series names, and the
 * upload's failure messages (no server needed: a closed port).  The
 * successful upload is checked against a capture server in
 * tests/integration/pprof.test.js.
 */
#include <stdlib.h>
#include <time.h>

#include "http_retry.h"
#include "kvlist.h"
#include "log.h"
#include "pyroscope.h"
#include "unit.h"

#define MAX_WARNINGS 16

static char warning_text[MAX_WARNINGS][1024];
static int	warnings;

static void
capture_warning(const char *message)
{
	if (warnings < MAX_WARNINGS)
		snprintf(warning_text[warnings], sizeof(warning_text[0]), "%s", message);
	warnings++;
}

/* True when some warning contains every one of the given parts. */
static bool
warned(const char *part, const char *also)
{
	for (int i = 0; i < warnings && i < MAX_WARNINGS; i++)
		if (strstr(warning_text[i], part) != NULL &&
			(also == NULL || strstr(warning_text[i], also) != NULL))
			return true;
	return false;
}

static void
clear_env(void)
{
	static const char *names[] = {
		"PYROSCOPE_ENABLE", "PYROSCOPE_TRACE_CORRELATION", "PYROSCOPE_SERVER_ADDRESS",
		"PYROSCOPE_APPLICATION_NAME", "PYROSCOPE_TAGS", "PYROSCOPE_TENANT_ID",
		"PYROSCOPE_BASIC_AUTH_USER", "PYROSCOPE_BASIC_AUTH_PASSWORD",
		"PYROSCOPE_UPLOAD_TIMEOUT",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unsetenv(names[i]);
	warnings = 0;
}

/* "k=v,k=v" of a list, for exact comparisons. */
static const char *
joined(const tp_kvlist *tags)
{
	static char out[1024];
	size_t		used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < tags->count; i++)
		used += snprintf(out + used, sizeof(out) - used, "%s%s=%s", i ? "," : "",
						 tags->items[i].key, tags->items[i].value);
	return out;
}

TEST(correlation_tags_are_appended_in_order)
{
	tp_kvlist	tags = {0};

	warnings = 0;
	tp_pyroscope_parse_tags("env=dev,service=generator,version=1.0.0", "PYROSCOPE_TAGS", &tags);
	tp_pyroscope_add_tag(&tags, "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736");
	tp_pyroscope_add_tag(&tags, "root_span_id", "00f067aa0ba902b7");
	CHECK_STR(joined(&tags),
			  "env=dev,service=generator,version=1.0.0,"
			  "trace_id=4bf92f3577b34da6a3ce929d0e0e4736,root_span_id=00f067aa0ba902b7");
	/* Appending again changes nothing: the first value stays. */
	tp_pyroscope_add_tag(&tags, "trace_id", "ffffffffffffffffffffffffffffffff");
	tp_pyroscope_add_tag(&tags, "env", "prod");
	CHECK(tags.count == 5);
	CHECK_STR(tp_kvlist_get(&tags, "trace_id"), "4bf92f3577b34da6a3ce929d0e0e4736");
	CHECK_STR(tp_kvlist_get(&tags, "env"), "dev");
	CHECK(warnings == 0);
	tp_kvlist_free(&tags);
}

TEST(user_tags_win_over_correlation_tags)
{
	tp_kvlist	tags = {0};

	warnings = 0;
	tp_pyroscope_parse_tags("trace_id=mine", "PYROSCOPE_TAGS", &tags);
	tp_pyroscope_add_tag(&tags, "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736");
	CHECK_STR(joined(&tags), "trace_id=mine");
	/* An invalid appended tag is refused with a warning. */
	tp_pyroscope_add_tag(&tags, "bad key", "x");
	tp_pyroscope_add_tag(&tags, "k", "a,b");
	CHECK(tags.count == 1);
	CHECK(warnings == 2);
	CHECK(warned("bad key", "character"));
	tp_kvlist_free(&tags);
}

TEST(malformed_tags_keep_the_valid_part)
{
	tp_kvlist	tags = {0};

	warnings = 0;
	tp_pyroscope_parse_tags("env=dev,novalue,=x,bad key=1,ok.key_2=v, x = y ,v=a}b,"
							"w=a=b,env=other,z=,c=a\x01" "b,u=\xc3\xa9t\xc3\xa9", "PYROSCOPE_TAGS", &tags);
	CHECK_STR(joined(&tags), "env=dev,ok.key_2=v,x=y,u=\xc3\xa9t\xc3\xa9");
	CHECK(warnings == 8);
	CHECK(warned("\"novalue\"", "no '='"));
	CHECK(warned("\"=x\"", "empty key"));
	CHECK(warned("\"bad key=1\"", "key"));
	CHECK(warned("\"v=a}b\"", "value"));
	CHECK(warned("\"w=a=b\"", "value"));
	CHECK(warned("\"env=other\"", "keeping the first value \"dev\""));
	CHECK(warned("\"z=\"", "empty value"));
	CHECK(warned("\"c=a?b\"", "control character"));
	for (int i = 0; i < warnings && i < MAX_WARNINGS; i++)
		CHECK(strstr(warning_text[i], "PYROSCOPE_TAGS") != NULL);
	tp_kvlist_free(&tags);
}

/* The server's settings are no environment variables: messages name the setting. */
TEST(messages_name_their_source)
{
	tp_kvlist	tags = {0};
	char		long_name[TP_PYROSCOPE_MAX_TAG_VALUE + 2];
	char	   *name;

	warnings = 0;
	tp_pyroscope_parse_tags("bad key=1", "traceprof.pyroscope_tags", &tags);
	CHECK(warnings == 1);
	CHECK(warned("traceprof.pyroscope_tags: \"bad key=1\"", "character"));
	CHECK(!warned("PYROSCOPE_TAGS", NULL));
	tp_kvlist_free(&tags);

	CHECK(tp_pyroscope_tenant_id_is_valid("team-a b"));
	CHECK(!tp_pyroscope_tenant_id_is_valid("a\rX-Evil: 1"));
	CHECK(!tp_pyroscope_tenant_id_is_valid("caf\xc3\xa9"));

	CHECK(tp_pyroscope_application_name_is_valid("shop/loader-1.x"));
	CHECK(!tp_pyroscope_application_name_is_valid("my app{x=1},y"));
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	CHECK(!tp_pyroscope_application_name_is_valid(long_name));
	long_name[TP_PYROSCOPE_MAX_TAG_VALUE] = '\0';
	CHECK(tp_pyroscope_application_name_is_valid(long_name));

	warnings = 0;
	name = tp_pyroscope_application_name("my app{x=1},y", "traceprof.service_name");
	CHECK_STR(name, "my_app_x_1__y");
	CHECK(warned("traceprof.service_name \"my app{x=1},y\"", "using \"my_app_x_1__y\""));
	free(name);
	name = tp_pyroscope_application_name("shop", "traceprof.service_name");
	CHECK_STR(name, "shop");
	CHECK(warnings == 1);
	free(name);
}

TEST(tags_beyond_pyroscope_limits_are_ignored)
{
	tp_kvlist	tags = {0};
	char		text[8192] = "";
	char		long_value[TP_PYROSCOPE_MAX_TAG_VALUE + 8];

	warnings = 0;
	for (int i = 0; i < TP_PYROSCOPE_MAX_TAGS + 3; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), "%sk%d=v", i ? "," : "", i);
	tp_pyroscope_parse_tags(text, "PYROSCOPE_TAGS", &tags);
	CHECK(tags.count == TP_PYROSCOPE_MAX_TAGS);
	CHECK(warnings == 3);
	CHECK(warned("\"k24=v\"", "more than 24 tags"));
	/* Appended tags count too: a series takes 30 labels with Pyroscope's own. */
	warnings = 0;
	tp_pyroscope_add_tag(&tags, "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736");
	CHECK(tags.count == TP_PYROSCOPE_MAX_TAGS);
	CHECK(tp_kvlist_get(&tags, "trace_id") == NULL);
	CHECK(warned("\"trace_id\"", "more than 24 tags"));
	tp_kvlist_free(&tags);

	warnings = 0;
	memset(long_value, 'x', sizeof(long_value) - 1);
	long_value[sizeof(long_value) - 1] = '\0';
	memcpy(long_value, "a=", 2);
	tp_pyroscope_parse_tags(long_value, "PYROSCOPE_TAGS", &tags);
	long_value[2 + TP_PYROSCOPE_MAX_TAG_VALUE] = '\0';	/* exactly the limit */
	tp_pyroscope_parse_tags(long_value, "PYROSCOPE_TAGS", &tags);
	CHECK(tags.count == 1);
	CHECK(warnings == 1);
	CHECK(warned("\"a=xxx", "longer than Pyroscope accepts (2048"));
	tp_kvlist_free(&tags);
}

TEST(labels_pyroscope_sets_are_refused)
{
	tp_kvlist	tags = {0};

	/* A duplicate service_name refuses every upload; __name__ renames the application. */
	warnings = 0;
	tp_pyroscope_parse_tags("env=prod,__name__=evil,service_name=other,pyroscope_spy=x,__delta__=false,"
							"_ok=1", "PYROSCOPE_TAGS", &tags);
	CHECK_STR(joined(&tags), "env=prod,_ok=1");
	CHECK(warnings == 4);
	CHECK(warned("\"service_name=other\"", "Pyroscope sets that label itself"));
	CHECK(warned("\"__name__=evil\"", "Pyroscope sets that label itself"));
	tp_pyroscope_add_tag(&tags, "service_name", "x");
	CHECK(tags.count == 2);
	tp_kvlist_free(&tags);
}

TEST(empty_tag_members_are_skipped)
{
	tp_kvlist	tags = {0};

	warnings = 0;
	tp_pyroscope_parse_tags("a=1,, b=2 , ,", "PYROSCOPE_TAGS", &tags);
	CHECK_STR(joined(&tags), "a=1,b=2");
	tp_pyroscope_parse_tags("", "PYROSCOPE_TAGS", &tags);
	tp_pyroscope_parse_tags(NULL, "PYROSCOPE_TAGS", &tags);
	CHECK(tags.count == 2);
	CHECK(warnings == 0);
	tp_kvlist_free(&tags);
}

/*
 * A value that is not UTF-8 was kept: Pyroscope refuses such a series
 * name, so every upload failed.  Refused like any other bad member, with
 * the variable and the member named.
 */
TEST(tags_that_are_not_utf8_are_refused)
{
	tp_kvlist	tags = {0};

	warnings = 0;
	tp_pyroscope_parse_tags("a=ok,b=\xff\xfe,c=caf\xc3,d=\xc3\xa9t\xc3\xa9,"
							"e=\xc0\xaf,f=\xed\xa0\x80", "PYROSCOPE_TAGS", &tags);
	CHECK_STR(joined(&tags), "a=ok,d=\xc3\xa9t\xc3\xa9");
	CHECK(warnings == 4);
	CHECK(warned("PYROSCOPE_TAGS: \"b=??\"", "not valid UTF-8"));
	CHECK(warned("PYROSCOPE_TAGS: \"c=caf?\"", "not valid UTF-8"));
	CHECK(warned("PYROSCOPE_TAGS: \"e=??\"", "not valid UTF-8"));
	CHECK(warned("PYROSCOPE_TAGS: \"f=???\"", "not valid UTF-8"));
	tp_kvlist_free(&tags);

	/* The program's own tags are checked the same way. */
	warnings = 0;
	tp_pyroscope_add_tag(&tags, "k", "\xff");
	CHECK(tags.count == 0);
	CHECK(warned("\"k=?\"", "not valid UTF-8"));
	tp_kvlist_free(&tags);
}

TEST(series_name_is_url_encoded)
{
	tp_pyroscope_config cfg;
	char	   *name;

	memset(&cfg, 0, sizeof(cfg));
	cfg.application_name = "my-app/db.x_y";
	tp_pyroscope_parse_tags("env=dev,version=1.0.0,path=/a b&c", "PYROSCOPE_TAGS", &cfg.tags);
	name = tp_pyroscope_series_name(&cfg);
	CHECK_STR(name, "my-app%2Fdb.x_y%7Benv%3Ddev%2Cversion%3D1.0.0%2Cpath%3D%2Fa%20b%26c%7D");
	free(name);
	tp_kvlist_free(&cfg.tags);
	name = tp_pyroscope_series_name(&cfg);
	CHECK_STR(name, "my-app%2Fdb.x_y%7B%7D");
	free(name);
}

/* The link's server part was cut at 1023 bytes: it then pointed elsewhere. */
TEST(query_link_keeps_a_long_server_address_whole)
{
	tp_pyroscope_config cfg;
	char		server[1600];
	char	   *link;
	size_t		n;

	memset(&cfg, 0, sizeof(cfg));
	n = (size_t) snprintf(server, sizeof(server), "https://user:pw@profiles.example.com:4040/");
	for (; n < 1500; n++)
		server[n] = (char) ('a' + n % 26);
	server[n] = '\0';
	cfg.server_address = server;
	cfg.application_name = "app";
	link = tp_pyroscope_query_url(&cfg, "0123456789abcdef0123456789abcdef");
	CHECK(link != NULL);
	if (link != NULL)
	{
		/* Only the user info goes: "user:pw@" is 8 bytes. */
		CHECK(strncmp(link, "https://profiles.example.com:4040/", 34) == 0);
		CHECK(strncmp(link + 34, server + 42, n - 42) == 0);
		CHECK_STR(link + n - 8, "/?query=service%3Dapp%20trace_id%3D0123456789abcdef0123456789abcdef");
	}
	free(link);

	/* host:port with user info (traceprof.pyroscope_url allows it): no password, a scheme. */
	cfg.server_address = "alice:s3cretpw@127.0.0.1:24040";
	link = tp_pyroscope_query_url(&cfg, "0123456789abcdef0123456789abcdef");
	CHECK_STR(link, "http://127.0.0.1:24040/?query=service%3Dapp%20trace_id%3D0123456789abcdef0123456789abcdef");
	free(link);
}

TEST(config_defaults)
{
	tp_pyroscope_config cfg;

	clear_env();
	tp_pyroscope_config_from_env(&cfg, "traceprof.generator");
	CHECK(!cfg.enabled);
	CHECK(!cfg.trace_correlation);
	CHECK_STR(cfg.server_address, "http://localhost:4040");
	CHECK_STR(cfg.application_name, "traceprof.generator");
	CHECK(cfg.tags.count == 0);
	CHECK(cfg.tenant_id == NULL);
	CHECK(cfg.basic_auth_user == NULL);
	CHECK(cfg.basic_auth_password == NULL);
	CHECK(cfg.timeout_ms == 10000);
	CHECK(warnings == 0);
	tp_pyroscope_config_free(&cfg);
}

TEST(config_from_env)
{
	tp_pyroscope_config cfg;

	clear_env();
	setenv("PYROSCOPE_ENABLE", "TRUE", 1);
	setenv("PYROSCOPE_TRACE_CORRELATION", " Yes ", 1);
	setenv("PYROSCOPE_SERVER_ADDRESS", "https://profiles.example.com:4040/", 1);
	setenv("PYROSCOPE_APPLICATION_NAME", "shop/loader-1.x", 1);
	setenv("PYROSCOPE_TAGS", "env=dev,service=loader", 1);
	setenv("PYROSCOPE_TENANT_ID", "team-a", 1);
	setenv("PYROSCOPE_BASIC_AUTH_USER", "12345", 1);
	setenv("PYROSCOPE_BASIC_AUTH_PASSWORD", "s3cret", 1);
	setenv("PYROSCOPE_UPLOAD_TIMEOUT", "2500", 1);
	tp_pyroscope_config_from_env(&cfg, "traceprof.loader");
	CHECK(cfg.enabled);
	CHECK(cfg.trace_correlation);
	CHECK_STR(cfg.server_address, "https://profiles.example.com:4040");
	CHECK_STR(cfg.application_name, "shop/loader-1.x");
	CHECK_STR(joined(&cfg.tags), "env=dev,service=loader");
	CHECK_STR(cfg.tenant_id, "team-a");
	CHECK_STR(cfg.basic_auth_user, "12345");
	CHECK_STR(cfg.basic_auth_password, "s3cret");
	CHECK(cfg.timeout_ms == 2500);
	CHECK(warnings == 0);
	tp_pyroscope_config_free(&cfg);

	/* 1 and yes in any case are true */
	setenv("PYROSCOPE_ENABLE", "1", 1);
	setenv("PYROSCOPE_TRACE_CORRELATION", "yEs", 1);
	setenv("PYROSCOPE_SERVER_ADDRESS", "pyroscope:4040", 1);
	tp_pyroscope_config_from_env(&cfg, "x");
	CHECK(cfg.enabled && cfg.trace_correlation);
	CHECK_STR(cfg.server_address, "http://pyroscope:4040");
	tp_pyroscope_config_free(&cfg);

	/* No host (the fuzzer once made "http://" lose its "//"), no number for a port, a query: the default. */
	setenv("PYROSCOPE_SERVER_ADDRESS", "http:///", 1);
	tp_pyroscope_config_from_env(&cfg, "x");
	CHECK_STR(cfg.server_address, "http://localhost:4040");
	CHECK(warned("PYROSCOPE_SERVER_ADDRESS=\"http:///\" is not a server address", "using http://localhost:4040"));
	tp_pyroscope_config_free(&cfg);
	setenv("PYROSCOPE_SERVER_ADDRESS", "http://pyroscope:port", 1);
	tp_pyroscope_config_from_env(&cfg, "x");
	CHECK_STR(cfg.server_address, "http://localhost:4040");
	tp_pyroscope_config_free(&cfg);
	setenv("PYROSCOPE_SERVER_ADDRESS", "http://pyroscope:4040/?token=x", 1);
	tp_pyroscope_config_from_env(&cfg, "x");
	CHECK_STR(cfg.server_address, "http://localhost:4040");
	CHECK(warned("\"http://pyroscope:port\"", NULL) && warned("\"http://pyroscope:4040/?***\" is not", NULL) && !warned("token=x", NULL));
	tp_pyroscope_config_free(&cfg);
	/* A token in the path (some gateways take one there) is hidden as well. */
	setenv("PYROSCOPE_SERVER_ADDRESS", "http://pyroscope:4040/tenant-T0kEn/?x=1", 1);
	tp_pyroscope_config_from_env(&cfg, "x");
	CHECK(warned("\"http://pyroscope:4040/***?***\" is not", NULL) && !warned("T0kEn", NULL));
	tp_pyroscope_config_free(&cfg);
	setenv("PYROSCOPE_SERVER_ADDRESS", "http://admin:S3cretPw@127.0.0.1:99999", 1);
	tp_pyroscope_config_from_env(&cfg, "x");
	CHECK(warned("\"http://***@127.0.0.1:99999\" is not a server address", NULL));
	CHECK(!warned("S3cretPw", NULL));
	tp_pyroscope_config_free(&cfg);
	CHECK(tp_pyroscope_server_is_valid("https://profiles.example.com/base"));
	CHECK(!tp_pyroscope_server_is_valid("http://pyroscope:4040#top"));
	CHECK(tp_pyroscope_server_is_valid("pyroscope:4040"));
	CHECK(!tp_pyroscope_server_is_valid("pyroscope"));	/* not port 80 unasked */

	/* Trimmed like the OTEL_* ones: a value pasted with its newline works. */
	clear_env();
	setenv("PYROSCOPE_ENABLE", "true\n", 1);
	setenv("PYROSCOPE_SERVER_ADDRESS", "http://pyroscope:4040\r\n", 1);
	setenv("PYROSCOPE_APPLICATION_NAME", "\vshop\f", 1);
	tp_pyroscope_config_from_env(&cfg, "x");
	CHECK(cfg.enabled);
	CHECK_STR(cfg.server_address, "http://pyroscope:4040");
	CHECK_STR(cfg.application_name, "shop");
	CHECK(warnings == 0);
	tp_pyroscope_config_free(&cfg);
	clear_env();
}

TEST(config_mistakes_are_warnings)
{
	tp_pyroscope_config cfg;

	clear_env();
	setenv("PYROSCOPE_ENABLE", "on", 1);
	setenv("PYROSCOPE_TRACE_CORRELATION", "false", 1);
	setenv("PYROSCOPE_APPLICATION_NAME", "my app!", 1);
	setenv("PYROSCOPE_TAGS", "env=dev,broken", 1);
	setenv("PYROSCOPE_TENANT_ID", "a\r\nX-Injected: 1", 1);
	setenv("PYROSCOPE_UPLOAD_TIMEOUT", "10s", 1);
	setenv("PYROSCOPE_BASIC_AUTH_USER", "alice", 1);
	tp_pyroscope_config_from_env(&cfg, "traceprof");
	CHECK(!cfg.enabled);
	CHECK(!cfg.trace_correlation);
	CHECK_STR(cfg.application_name, "my_app_");
	CHECK_STR(joined(&cfg.tags), "env=dev");
	CHECK(cfg.tenant_id == NULL);
	CHECK(cfg.timeout_ms == 10000);
	CHECK(warnings == 6);
	CHECK(warned("PYROSCOPE_BASIC_AUTH_USER is set without PYROSCOPE_BASIC_AUTH_PASSWORD", "empty password"));
	CHECK(warned("PYROSCOPE_ENABLE=\"on\"", "treated as false"));
	CHECK(warned("PYROSCOPE_APPLICATION_NAME \"my app!\"", "using \"my_app_\""));
	CHECK(warned("\"broken\"", NULL));
	CHECK(warned("PYROSCOPE_TENANT_ID", "control character"));
	CHECK(warned("PYROSCOPE_UPLOAD_TIMEOUT=\"10s\"", "milliseconds"));
	tp_pyroscope_config_free(&cfg);

	/* out-of-range timeouts and an empty name */
	clear_env();
	setenv("PYROSCOPE_UPLOAD_TIMEOUT", "0", 1);
	setenv("PYROSCOPE_APPLICATION_NAME", "  ", 1);
	tp_pyroscope_config_from_env(&cfg, "fallback.app");
	CHECK(cfg.timeout_ms == 10000);
	CHECK_STR(cfg.application_name, "fallback.app");
	CHECK(warnings == 1);
	tp_pyroscope_config_free(&cfg);
	clear_env();
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

TEST(unreachable_server_message_has_no_credentials)
{
	tp_pyroscope_config cfg;
	static const uint8_t body[] = {0x1f, 0x8b};
	char		err[512];
	long		started = now_ms();
	bool		ok;

	memset(&cfg, 0, sizeof(cfg));
	/* port 1 on loopback: nothing listens, the connection is refused */
	cfg.server_address = "http://user:hunter2@127.0.0.1:1";
	cfg.application_name = "app";
	cfg.basic_auth_user = "alice";
	cfg.basic_auth_password = "topsecret";
	cfg.timeout_ms = 2000;
	ok = tp_pyroscope_ingest(&cfg, body, sizeof(body), 1700000000000000000ULL,
							 1700000010000000000ULL, err, sizeof(err));
	CHECK(!ok);
	CHECK(strstr(err, "http://***@127.0.0.1:1/ingest") != NULL);
	CHECK(strstr(err, "hunter2") == NULL);
	CHECK(strstr(err, "topsecret") == NULL);
	CHECK(strstr(err, "alice") == NULL);
	CHECK(strstr(err, "name=") == NULL);
	CHECK(strchr(err, '\n') == NULL);
	CHECK(now_ms() - started < 2500);
	if (ok || strstr(err, "127.0.0.1") == NULL)
		printf("  message: %s\n", err);
}

/*
 * While a Retry-After kept from an earlier upload lasts, the server is not
 * asked (a refused port would answer at once with another message).
 */
TEST(upload_within_a_kept_retry_after_fails_at_once_saying_why)
{
	tp_pyroscope_config cfg;
	static const uint8_t body[] = {0x1f, 0x8b};
	char		err[512];

	memset(&cfg, 0, sizeof(cfg));
	cfg.server_address = "http://127.0.0.1:1";
	cfg.application_name = "app";
	cfg.timeout_ms = 2000;
	cfg.retry_not_before_ms = tp_retry_not_before_ms(30000);
	CHECK(tp_pyroscope_retry_wait_ms(&cfg) > 29000 && tp_pyroscope_retry_wait_ms(&cfg) <= 30000);
	CHECK(!tp_pyroscope_ingest(&cfg, body, sizeof(body), 1700000000000000000ULL,
							   1700000010000000000ULL, err, sizeof(err)));
	CHECK(strstr(err, "http://127.0.0.1:1/ingest: not sent: the server asked to wait 30.0 s more (Retry-After)") != NULL);
	if (strstr(err, "Retry-After") == NULL)
		printf("  message: %s\n", err);

	/* Once it has passed, the server is asked again: refused. */
	cfg.retry_not_before_ms = tp_retry_not_before_ms(0);
	CHECK(tp_pyroscope_retry_wait_ms(&cfg) == 0);
	CHECK(!tp_pyroscope_ingest(&cfg, body, sizeof(body), 1700000000000000000ULL,
							   1700000010000000000ULL, err, sizeof(err)));
	CHECK(strstr(err, "Retry-After") == NULL);
}

int
main(void)
{
	tp_log_set_sink(capture_warning);
	RUN(correlation_tags_are_appended_in_order);
	RUN(user_tags_win_over_correlation_tags);
	RUN(malformed_tags_keep_the_valid_part);
	RUN(messages_name_their_source);
	RUN(tags_beyond_pyroscope_limits_are_ignored);
	RUN(labels_pyroscope_sets_are_refused);
	RUN(empty_tag_members_are_skipped);
	RUN(tags_that_are_not_utf8_are_refused);
	RUN(series_name_is_url_encoded);
	RUN(query_link_keeps_a_long_server_address_whole);
	RUN(config_defaults);
	RUN(config_from_env);
	RUN(config_mistakes_are_warnings);
	RUN(unreachable_server_message_has_no_credentials);
	RUN(upload_within_a_kept_retry_after_fails_at_once_saying_why);
	return unit_summary();
}
