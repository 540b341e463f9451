/*
 * otel_env.c - libFuzzer target for tp_otel_config_from_env(): the OTEL_*
 * variables the binaries read at start, each an untrusted string.
 *
 * The input is NUL-separated values for the variables below, in order.
 * Invariants: the result is always usable (an http(s) URL, a timeout in
 * range, service.name first in the resource, headers that cannot break
 * the request's header lines);
 * every warning is one line, and a warning about headers never shows
 * their content (they carry API keys).
 */
#include <stdbool.h>

#include "fuzz.h"
#include "log.h"
#include "otel_config.h"

static fuzz_env vars[] = {
	{.name = "OTEL_EXPORTER_OTLP_ENDPOINT"},
	{.name = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
	{.name = "OTEL_EXPORTER_OTLP_PROTOCOL"},
	{.name = "OTEL_EXPORTER_OTLP_HEADERS"},
	{.name = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"},
	{.name = "OTEL_EXPORTER_OTLP_TIMEOUT"},
	{.name = "OTEL_RESOURCE_ATTRIBUTES"},
	{.name = "OTEL_SERVICE_NAME"},
	{.name = "OTEL_TRACES_EXPORTER"},
};

static void
check_warning(const char *message)
{
	FUZZ_CHECK(strlen(message) < 1024);
	FUZZ_CHECK(fuzz_is_one_line(message));
	if (strncmp(message, "OTEL_EXPORTER_OTLP_HEADERS", 26) == 0 ||
		strncmp(message, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", 33) == 0)
		FUZZ_CHECK(strchr(message, '"') == NULL);	/* nothing quoted */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data;
	const uint8_t *end = data + size;
	tp_otel_config cfg;
	const char *url;

	tp_log_set_sink(check_warning);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
	{
		size_t		len;
		const uint8_t *value = fuzz_next_field(&p, end, &len);

		fuzz_setenv(&vars[i], value, len);
	}

	tp_otel_config_from_env(&cfg, "fuzz.service");
	url = cfg.traces.url;
	FUZZ_CHECK(url != NULL);
	FUZZ_CHECK(strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0);
	FUZZ_CHECK(cfg.traces.timeout_ms >= 1 && cfg.traces.timeout_ms <= 600000);
	FUZZ_CHECK(cfg.traces.protocol == TP_OTLP_HTTP_PROTOBUF || cfg.traces.protocol == TP_OTLP_GRPC);
	FUZZ_CHECK(cfg.resource.count >= 1);
	FUZZ_CHECK(strcmp(cfg.resource.items[0].key, "service.name") == 0);
	FUZZ_CHECK(cfg.resource.items[0].value[0] != '\0');
	for (size_t i = 0; i < cfg.traces.headers.count; i++)
	{
		const char *key = cfg.traces.headers.items[i].key;

		/* what goes into "key: value" request lines */
		FUZZ_CHECK(key[0] != '\0' && strpbrk(key, " :") == NULL && fuzz_is_one_line(key));
		for (const char *v = cfg.traces.headers.items[i].value; *v; v++)
			FUZZ_CHECK(*v == '\t' || ((unsigned char) *v >= 0x20 && *v != 0x7f));
	}
	tp_otel_config_free(&cfg);
	return 0;
}
