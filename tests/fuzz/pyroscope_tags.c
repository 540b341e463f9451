/*
 * pyroscope_tags.c - libFuzzer target for the PYROSCOPE_* settings:
 * tp_pyroscope_config_from_env() (PYROSCOPE_TAGS through
 * tp_pyroscope_parse_tags()) and the names and links built from them.
 *
 * The input is NUL-separated values for the variables below, in order.
 * Invariants: kept tags are valid series labels (values valid UTF-8)
 * with unique keys; the series name is fully percent-encoded; the link
 * never carries the server's user info; the tenant is a clean header
 * value; every warning is one line.
 */
#include <ctype.h>
#include <stdbool.h>

#include "fuzz.h"
#include "log.h"
#include "pyroscope.h"
#include "text.h"

static fuzz_env vars[] = {
	{.name = "PYROSCOPE_TAGS"},
	{.name = "PYROSCOPE_APPLICATION_NAME"},
	{.name = "PYROSCOPE_SERVER_ADDRESS"},
	{.name = "PYROSCOPE_TENANT_ID"},
	{.name = "PYROSCOPE_UPLOAD_TIMEOUT"},
	{.name = "PYROSCOPE_ENABLE"},
};

static void
check_warning(const char *message)
{
	FUZZ_CHECK(strlen(message) < 1024);
	FUZZ_CHECK(fuzz_is_one_line(message));
}

static bool
is_label_char(char c)
{
	return isalnum((unsigned char) c) || c == '_' || c == '.';
}

static void
check_tags(const tp_kvlist *tags)
{
	for (size_t i = 0; i < tags->count; i++)
	{
		const char *key = tags->items[i].key;
		const char *value = tags->items[i].value;

		FUZZ_CHECK(key[0] != '\0' && value[0] != '\0');
		for (const char *p = key; *p; p++)
			FUZZ_CHECK(is_label_char(*p));
		FUZZ_CHECK(strpbrk(value, ",}=") == NULL && fuzz_is_one_line(value));
		FUZZ_CHECK(tp_utf8_is_valid(value, strlen(value)));
		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(tags->items[j].key, key) != 0);
	}
}

/* Only RFC 3986 unreserved characters and %XX escapes. */
static void
check_encoded(const char *s)
{
	for (const char *p = s; *p; p++)
	{
		if (*p == '%')
		{
			FUZZ_CHECK(isxdigit((unsigned char) p[1]) && isxdigit((unsigned char) p[2]));
			p += 2;
		}
		else
			FUZZ_CHECK(isalnum((unsigned char) *p) || strchr("-._~", *p) != NULL);
	}
}

/* The link's authority (between "://" and the first of "/?#") has no '@'. */
static void
check_no_user_info(const char *url)
{
	const char *authority = strstr(url, "://");

	if (authority == NULL)
		return;
	authority += 3;
	FUZZ_CHECK(memchr(authority, '@', strcspn(authority, "/?#")) == NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data;
	const uint8_t *end = data + size;
	tp_pyroscope_config cfg;
	char	   *series;
	char	   *link;

	tp_log_set_sink(check_warning);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
	{
		size_t		len;
		const uint8_t *value = fuzz_next_field(&p, end, &len);

		fuzz_setenv(&vars[i], value, len);
	}

	tp_pyroscope_config_from_env(&cfg, "fuzz.app");
	FUZZ_CHECK(cfg.server_address != NULL && cfg.application_name != NULL);
	FUZZ_CHECK(strstr(cfg.server_address, "://") != NULL);
	FUZZ_CHECK(cfg.timeout_ms >= 1 && cfg.timeout_ms <= 600000);
	if (cfg.tenant_id != NULL)
		FUZZ_CHECK(fuzz_is_one_line(cfg.tenant_id));
	check_tags(&cfg.tags);

	/* the correlation tags are added later the same way: never overwrite */
	if (cfg.tags.count > 0)
	{
		const char *first = cfg.tags.items[0].value;
		size_t		count = cfg.tags.count;

		tp_pyroscope_add_tag(&cfg.tags, cfg.tags.items[0].key, "other");
		FUZZ_CHECK(cfg.tags.count == count && cfg.tags.items[0].value == first);
	}
	tp_pyroscope_add_tag(&cfg.tags, "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736");
	check_tags(&cfg.tags);

	series = tp_pyroscope_series_name(&cfg);
	FUZZ_CHECK(series != NULL);
	check_encoded(series);
	link = tp_pyroscope_query_url(&cfg, "4bf92f3577b34da6a3ce929d0e0e4736");
	FUZZ_CHECK(link != NULL && strstr(link, "/?query=service%3D") != NULL);
	check_no_user_info(link);
	free(series);
	free(link);
	tp_pyroscope_config_free(&cfg);
	return 0;
}
