/*
 * otel_config.h - the OTEL_* environment variables, parsed once.
 *
 * Follows the OpenTelemetry specification ("OTLP Exporter Configuration",
 * "Resource SDK"): OTEL_EXPORTER_OTLP_ENDPOINT is a base URL to which
 * "v1/traces" is appended, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as
 * is, the default protocol is http/protobuf at http://localhost:4318.
 * Enum and boolean values are read in any case, as the SDK environment
 * spec asks; OTEL_TRACES_EXPORTER may be a list (only otlp is honoured).
 */
#ifndef TP_OTEL_CONFIG_H
#define TP_OTEL_CONFIG_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "kvlist.h"

typedef enum tp_otlp_protocol
{
	TP_OTLP_HTTP_PROTOBUF,
	TP_OTLP_GRPC,
} tp_otlp_protocol;

typedef struct tp_otlp_target
{
	tp_otlp_protocol protocol;
	char	   *url;			/* full URL of the request */
	tp_kvlist	headers;		/* extra request headers (may hold secrets) */
	long		timeout_ms;		/* budget for one export, retries included */
	bool		gzip;			/* OTEL_EXPORTER_OTLP_COMPRESSION=gzip: bodies compressed */
	char	   *ca_file;		/* OTEL_EXPORTER_OTLP_CERTIFICATE, or NULL */
	char	   *client_cert;	/* OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE (mutual TLS), or NULL */
	char	   *client_key;		/* OTEL_EXPORTER_OTLP_CLIENT_KEY, or NULL */
	const char *grpc_setting;	/* what the user sets to speak gRPC, for messages */
	const char *http_setting;	/* ... and to speak OTLP/HTTP */
	volatile sig_atomic_t *cancel;	/* non-zero aborts an export (shutdown) */
	void	   *connection;		/* libcurl handle kept between exports, or NULL */
	long		retry_not_before_ms;	/* monotonic: the last Retry-After's time, or 0 */
	int64_t		rejected_spans; /* refused by the last delivered request's partial success */
} tp_otlp_target;

typedef struct tp_otel_config
{
	bool		export_enabled; /* an exporter endpoint/exporter was set */
	tp_otlp_target traces;
	tp_kvlist	resource;		/* includes service.name */
} tp_otel_config;

/*
 * Read the environment into cfg.  Every malformed variable is warned about
 * (tp_warn, naming the variable and the bad part) and replaced by its
 * default; this never fails.
 */
void		tp_otel_config_from_env(tp_otel_config *cfg, const char *default_service);

/*
 * Build the traces URL for an endpoint string as the spec defines it
 * (malloc'd; NULL if the endpoint is not valid); exposed for tests.  per_signal: the value came from the
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variable (used as is).
 */
char	   *tp_otlp_traces_url(const char *endpoint, tp_otlp_protocol protocol,
							   bool per_signal);

void		tp_otel_config_free(tp_otel_config *cfg);

#endif
