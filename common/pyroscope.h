/*
 * pyroscope.h - PYROSCOPE_* configuration (pyroscope_config.c) and the
 * /ingest client (pyroscope.c).
 *
 * POST <server>/ingest?name=<app>{k=v,...}&from=<s>&until=<s>&format=pprof
 * with the gzip pprof as body; X-Scope-OrgID for a tenant; basic auth.
 */
#ifndef TP_PYROSCOPE_H
#define TP_PYROSCOPE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvlist.h"
#include "size_limit.h"

#define TP_PYROSCOPE_DEFAULT_SERVER "http://localhost:4040"
#define TP_PYROSCOPE_DEFAULT_TIMEOUT_MS 10000L

typedef struct tp_pyroscope_config
{
	bool		enabled;		/* PYROSCOPE_ENABLE */
	bool		trace_correlation;	/* PYROSCOPE_TRACE_CORRELATION */
	char	   *server_address; /* default http://localhost:4040 */
	char	   *application_name;
	tp_kvlist	tags;			/* PYROSCOPE_TAGS, valid members only */
	char	   *tenant_id;
	char	   *basic_auth_user;
	char	   *basic_auth_password;
	char	   *ca_file;		/* PYROSCOPE_CA_FILE: CAs for https, or NULL */
	long		timeout_ms;		/* budget of one upload, retries included */
	volatile sig_atomic_t *cancel;	/* non-zero aborts an upload (shutdown); may be NULL */
	long		retry_not_before_ms;	/* monotonic: the last Retry-After's time, or 0 */

	/*
	 * What 413s taught of the server's body limit (size_limit.h), samples
	 * being the items: a profile, or part, at least as large as the
	 * smallest refused is halved unsent, but for a probe now and then that
	 * notices a raised limit.  Whoever keeps the configuration across a reload forgets it
	 * (zeroes it) when the server address changes.
	 */
	tp_size_limit size_limit;
} tp_pyroscope_config;

/*
 * Is address a Pyroscope server we can send to?  An http(s) URL with a host
 * (host:port meaning http://), and no query string or fragment: the
 * ingest path and its query are appended to it.
 */
bool		tp_pyroscope_server_is_valid(const char *address);

/*
 * The cancel flag tp_pyroscope_config_from_env puts into the configurations
 * it reads from then on (a host's signal flag; NULL: none).
 */
void		tp_pyroscope_set_env_cancel(volatile sig_atomic_t *cancel);

/*
 * Read the environment; malformed values are warned about, never fatal.
 * Without PYROSCOPE_APPLICATION_NAME the application is default_application,
 * the run's service.name (made into an application name, with a warning).
 */
void		tp_pyroscope_config_from_env(tp_pyroscope_config *cfg,
										 const char *default_application);

/*
 * Pyroscope's default ingest limits: a series has at most 30 labels, names
 * up to 1024 characters and values up to 2048.  24 tags in all, appended
 * ones (trace correlation) included, leave room for the labels Pyroscope
 * adds (__name__, __delta__, service_name, pyroscope_spy) and a span_name
 * sample label.  Tags beyond these are ignored with a warning rather than
 * have every upload rejected.
 */
#define TP_PYROSCOPE_MAX_TAGS 24
#define TP_PYROSCOPE_MAX_TAG_KEY 1024
#define TP_PYROSCOPE_MAX_TAG_VALUE 2048

/*
 * Parse PYROSCOPE_TAGS-style text into tags, keeping valid members and
 * warning (naming source, the variable or setting it came from, and the
 * bad part) about missing '=', empty keys, invalid label names
 * ([A-Za-z0-9_.]) or values (no , } =, no control character, valid
 * UTF-8), duplicates, and members beyond the limits above.
 */
void		tp_pyroscope_parse_tags(const char *text, const char *source, tp_kvlist *tags);

/*
 * An application name goes into the series name (name{labels}): at most
 * TP_PYROSCOPE_MAX_TAG_VALUE bytes of [A-Za-z0-9_.-/].  The second makes a
 * name so in place, quietly: others become '_' (the caller keeps it to
 * TP_PYROSCOPE_MAX_TAG_VALUE bytes).  The third returns name made so,
 * malloc'd, warning with source when it had to change it.
 */
bool		tp_pyroscope_application_name_is_valid(const char *name);
void		tp_pyroscope_make_application_name(char *name);
char	   *tp_pyroscope_application_name(const char *name, const char *source);

/* The X-Scope-OrgID header's value: printable ASCII only. */
bool		tp_pyroscope_tenant_id_is_valid(const char *tenant_id);

/*
 * Append key=value unless key is already present (never overwrites); the
 * limits above do not apply (the program's own tags: trace ids, service).
 */
void		tp_pyroscope_add_tag(tp_kvlist *tags, const char *key, const char *value);

/* The URL-encoded "name" parameter: app{k=v,...}; malloc'd. */
char	   *tp_pyroscope_series_name(const tp_pyroscope_config *cfg);

/*
 * The Pyroscope UI link for a trace, in the documented form
 * <server>/?query=service%3D<app>%20trace_id%3D<trace>; malloc'd.
 */
char	   *tp_pyroscope_query_url(const tp_pyroscope_config *cfg, const char *trace_id_hex);

/* The same link selecting by another label: service=<app> <key>=<value>. */
char	   *tp_pyroscope_query_url_for(const tp_pyroscope_config *cfg,
									   const char *key, const char *value);

/*
 * Upload one pprof covering [from_ns, until_ns], retrying 429/502/503/504
 * (honouring Retry-After) and dropped connections, and sending it again in
 * parts when it is refused as too large (413, below), all within timeout_ms;
 * *cancel ends it early.  A Retry-After beyond the budget is kept in cfg:
 * until it has passed, uploads fail at once without asking the server
 * (tp_pyroscope_retry_wait_ms says how long is left); so is what 413s
 * taught of the size limit (size_limit).  On failure returns
 * false with one line in err naming the endpoint (no query, no
 * credentials).
 */
bool		tp_pyroscope_ingest(tp_pyroscope_config *cfg,
								const uint8_t *pprof, size_t len,
								uint64_t from_ns, uint64_t until_ns,
								char *err, size_t errlen);

/*
 * What became of an upload that went in parts: a profile refused as too
 * large (HTTP 413, a proxy's body limit) goes again as halves of its
 * samples, for the same series and window (Pyroscope adds them up), down
 * to single samples; a profile, or part, at least as large as one refused
 * before (cfg->size_limit) is halved unsent.  A sample refused alone is
 * dropped, and when a part fails otherwise, or the budget runs out, the
 * parts not sent are too.
 * Counted in the profile's first value ("samples"); both 0 when the
 * upload went in one request (then all or nothing).
 */
typedef struct tp_pyroscope_counts
{
	uint64_t	taken;
	uint64_t	dropped;

	/*
	 * When *cfg->cancel stopped the parts (a reload, a shutdown), the
	 * samples not sent yet, neither taken nor dropped: a pprof of their
	 * own for the same window (gzip'd, malloc'd: the caller frees it), to
	 * be sent later in place of the whole, whose other samples must not go
	 * twice.  NULL, 0 otherwise.
	 */
	uint8_t    *rest;
	size_t		rest_len;
	uint64_t	rest_samples;

	/*
	 * Nothing went because the server refused this profile itself (a 400
	 * or 422, which no retry changes): other profiles may still go.
	 */
	bool		refused;
} tp_pyroscope_counts;

/* tp_pyroscope_ingest, saying in *counts (may be NULL) what went in parts. */
bool		tp_pyroscope_ingest_counted(tp_pyroscope_config *cfg,
										const uint8_t *pprof, size_t len,
										uint64_t from_ns, uint64_t until_ns,
										tp_pyroscope_counts *counts, char *err, size_t errlen);

/*
 * What an upload makes of one answer, from its bytes: the header lines
 * each as libcurl hands them (ending in "\r\n", not NUL-terminated), then
 * the body, with the HTTP status.  True when the server took the upload;
 * otherwise err says why, naming where (the endpoint as shown), and
 * *retry whether the attempt would be retried.  *retry_after_ms holds a
 * Retry-After (-1: none).  For tests/fuzz/pyroscope_answer.c: the answers
 * come from the network, and must never crash a worker.
 */
bool		tp_pyroscope_read_answer(const char *where, long status,
									 const char *const *header_lines,
									 const size_t *header_lens, size_t nheaders,
									 const uint8_t *body, size_t body_len,
									 bool *retry, long *retry_after_ms,
									 char *err, size_t errlen);

/* Milliseconds left of the server's last Retry-After; 0: upload at will. */
long		tp_pyroscope_retry_wait_ms(const tp_pyroscope_config *cfg);

void		tp_pyroscope_config_free(tp_pyroscope_config *cfg);

#endif
