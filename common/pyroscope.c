/*
 * pyroscope.c - PYROSCOPE_* settings, series names, and the /ingest upload.
 *
 * Settings (all optional):
 *   PYROSCOPE_ENABLE, PYROSCOPE_TRACE_CORRELATION  true/1/yes (any case)
 *   PYROSCOPE_SERVER_ADDRESS      default http://localhost:4040
 *   PYROSCOPE_APPLICATION_NAME    default chosen by the program
 *   PYROSCOPE_TAGS                k=v,k=v (series labels)
 *   PYROSCOPE_TENANT_ID           sent as X-Scope-OrgID
 *   PYROSCOPE_BASIC_AUTH_USER, PYROSCOPE_BASIC_AUTH_PASSWORD
 *   PYROSCOPE_UPLOAD_TIMEOUT      ms for a whole upload, default 10000
 *
 * from/until go out in Unix seconds (10 digits, which Pyroscope reads as
 * seconds): from rounded down, until rounded up, so the window always
 * covers the samples; the exact window is in the pprof (time_nanos,
 * duration_nanos).  An upload retries what the OTLP exporter retries
 * (429/502/503/504 honouring Retry-After, dropped connections) within
 * PYROSCOPE_UPLOAD_TIMEOUT; anything else fails at once.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_retry.h"
#include "http_url.h"
#include "log.h"
#include "pprof_parts.h"
#include "pyroscope.h"
#include "text.h"
#include "version.h"

#define DEFAULT_SERVER "http://localhost:4040"
#define DEFAULT_TIMEOUT_MS 10000L
#define MAX_TIMEOUT_MS 600000L
#define SNIPPET_BYTES 200
#define NS_PER_SEC 1000000000ULL

/* ---- small helpers ---- */

/*
 * Text from the environment as shown in a warning: printable ASCII only,
 * cut short, so a stray control character cannot forge log lines.
 */
static const char *
shown(const char *s, size_t len, char *buf, size_t buflen)
{
	size_t		n = 0;

	for (size_t i = 0; i < len && n + 4 < buflen; i++)
		buf[n++] = isprint((unsigned char) s[i]) ? s[i] : '?';
	if (n < len && n + 4 >= buflen)
	{
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n] = '\0';
	return buf;
}

static bool
env_bool(const char *name)
{
	char	   *value = tp_getenv_trimmed(name);
	char		buf[80];
	bool		result = false;

	if (value == NULL)
		return false;
	if (strcasecmp(value, "true") == 0 || strcmp(value, "1") == 0 ||
		strcasecmp(value, "yes") == 0)
		result = true;
	else if (strcasecmp(value, "false") != 0 && strcmp(value, "0") != 0 &&
			 strcasecmp(value, "no") != 0)
		tp_warn("%s=\"%s\" is not a boolean (expected true, 1 or yes to enable, "
				"false, 0 or no to disable); treated as false",
				name, shown(value, strlen(value), buf, sizeof(buf)));
	free(value);
	return result;
}

static bool
env_timeout(const char *name, long *out)
{
	char	   *value = tp_getenv_trimmed(name);
	char	   *end;
	long		ms;
	char		buf[80];

	*out = DEFAULT_TIMEOUT_MS;
	if (value == NULL)
		return true;
	ms = strtol(value, &end, 10);
	if (end == value || *end != '\0' || ms < 1 || ms > MAX_TIMEOUT_MS)
	{
		tp_warn("%s=\"%s\" is not a timeout (expected milliseconds from 1 to %ld); using %ld",
				name, shown(value, strlen(value), buf, sizeof(buf)),
				MAX_TIMEOUT_MS, DEFAULT_TIMEOUT_MS);
		free(value);
		return false;
	}
	*out = ms;
	free(value);
	return true;
}

/* ---- names and tags ---- */

static bool
is_label_name_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		(c >= '0' && c <= '9') || c == '_' || c == '.';
}

static bool
is_app_name_char(char c)
{
	return is_label_name_char(c) || c == '-' || c == '/';
}

/* NULL when key=value can be a series label, else why not. */
static const char *
tag_problem(const char *key, const char *value)
{
	if (key[0] == '\0')
		return "empty key";
	if (strlen(key) > TP_PYROSCOPE_MAX_TAG_KEY)
		return "the key is longer than Pyroscope accepts (1024 bytes)";
	if (strlen(value) > TP_PYROSCOPE_MAX_TAG_VALUE)
		return "the value is longer than Pyroscope accepts (2048 bytes)";
	for (const char *p = key; *p; p++)
		if (!is_label_name_char(*p))
			return "the key has a character outside A-Z a-z 0-9 _ .";
	/*
	 * Pyroscope reads a __name__ tag as the application and adds
	 * service_name and pyroscope_spy itself: a second one is a duplicate
	 * label, which refuses every upload.
	 */
	if (strncmp(key, "__", 2) == 0 || strcmp(key, "service_name") == 0 ||
		strcmp(key, "pyroscope_spy") == 0)
		return "Pyroscope sets that label itself (names starting with __, service_name, pyroscope_spy)";
	if (value[0] == '\0')
		return "empty value";
	for (const char *p = value; *p; p++)
	{
		if (*p == ',' || *p == '}' || *p == '=')
			return "the value contains ',', '}' or '=', which series names cannot carry";
		if ((unsigned char) *p < 0x20 || *p == 0x7f)
			return "the value contains a control character";
	}
	/* Pyroscope refuses a series name that is not UTF-8: every upload would fail. */
	if (!tp_utf8_is_valid(value, strlen(value)))
		return "the value is not valid UTF-8";
	return NULL;
}

/* One "key=value" member [start, end), already known to be non-blank. */
static void
parse_tag(const char *start, const char *end, const char *source, tp_kvlist *tags)
{
	const char *eq = memchr(start, '=', (size_t) (end - start));
	char		member[128];
	char		buf[128];
	char	   *key;
	char	   *value;
	const char *problem;
	const char *existing;

	shown(start, (size_t) (end - start), member, sizeof(member));
	if (eq == NULL)
	{
		tp_warn("%s: \"%s\" has no '=' (expected key=value); ignored", source, member);
		return;
	}
	key = tp_trimmed_copy(start, eq);
	value = tp_trimmed_copy(eq + 1, end);
	if (key == NULL || value == NULL)
		tp_warn("%s: out of memory; \"%s\" ignored", source, member);
	else if ((problem = tag_problem(key, value)) != NULL)
		tp_warn("%s: \"%s\": %s; ignored", source, member, problem);
	else if ((existing = tp_kvlist_get(tags, key)) != NULL)
		tp_warn("%s: \"%s\": key \"%s\" is already set; keeping the first value \"%s\"",
				source, member, key, shown(existing, strlen(existing), buf, sizeof(buf)));
	else if (tags->count >= TP_PYROSCOPE_MAX_TAGS)
		tp_warn("%s: \"%s\": more than %d tags (a Pyroscope series takes 30 labels); ignored",
				source, member, TP_PYROSCOPE_MAX_TAGS);
	else if (!tp_kvlist_add(tags, key, value))
		tp_warn("%s: out of memory; \"%s\" ignored", source, member);
	free(key);
	free(value);
}

void
tp_pyroscope_parse_tags(const char *text, const char *source, tp_kvlist *tags)
{
	const char *p = text;

	if (text == NULL)
		return;
	while (*p)
	{
		const char *end = p + strcspn(p, ",");
		const char *s = p;

		while (s < end && tp_is_blank(*s))
			s++;
		if (s < end)			/* empty members ("a=1,,b=2") are skipped */
			parse_tag(p, end, source, tags);
		p = *end ? end + 1 : end;
	}
}

void
tp_pyroscope_add_tag(tp_kvlist *tags, const char *key, const char *value)
{
	const char *problem;
	char		kbuf[80];
	char		vbuf[80];

	if (tp_kvlist_get(tags, key) != NULL)
		return;					/* the user's tag wins */
	if ((problem = tag_problem(key, value)) != NULL)
		tp_warn("Pyroscope tag \"%s=%s\": %s; ignored",
				shown(key, strlen(key), kbuf, sizeof(kbuf)),
				shown(value, strlen(value), vbuf, sizeof(vbuf)), problem);
	else if (tags->count >= TP_PYROSCOPE_MAX_TAGS)
		tp_warn("Pyroscope tag \"%s\": more than %d tags with the ones set (a Pyroscope series takes 30 labels); ignored",
				key, TP_PYROSCOPE_MAX_TAGS);
	else if (!tp_kvlist_add(tags, key, value))
		tp_warn("Pyroscope tag \"%s\": out of memory; ignored", key);
}

bool
tp_pyroscope_application_name_is_valid(const char *name)
{
	if (strlen(name) > TP_PYROSCOPE_MAX_TAG_VALUE)
		return false;
	for (const char *p = name; *p; p++)
		if (!is_app_name_char(*p))
			return false;
	return true;
}

void
tp_pyroscope_make_application_name(char *name)
{
	for (char *p = name; *p; p++)
		if (!is_app_name_char(*p))
			*p = '_';
}

char *
tp_pyroscope_application_name(const char *name, const char *source)
{
	char	   *usable = strndup(name, TP_PYROSCOPE_MAX_TAG_VALUE);
	char		given[80];
	char		used[80];

	if (usable == NULL || tp_pyroscope_application_name_is_valid(name))
		return usable;
	tp_pyroscope_make_application_name(usable);
	tp_warn("%s \"%s\" is not a Pyroscope application name (at most %d of A-Z a-z 0-9 _ . - /); using \"%s\"",
			source, shown(name, strlen(name), given, sizeof(given)), TP_PYROSCOPE_MAX_TAG_VALUE,
			shown(usable, strlen(usable), used, sizeof(used)));
	return usable;
}

bool
tp_pyroscope_tenant_id_is_valid(const char *tenant_id)
{
	for (const char *p = tenant_id; *p; p++)
		if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
			return false;		/* a CR or LF would end the header */
	return true;
}

bool
tp_pyroscope_server_is_valid(const char *address)
{
	return tp_http_url_is_valid(address) && strpbrk(address, "?#") == NULL;
}

/* Without a scheme, http:// is meant; a trailing '/' would double up. */
static char *
server_address(char *configured)
{
	char	   *address;
	size_t		len;
	size_t		keep;

	if (configured != NULL && !tp_pyroscope_server_is_valid(configured))
	{
		char		shown[512];

		/* Its user info, path and query may be secrets, valid URL or not. */
		tp_http_url_shown(configured, shown, sizeof(shown));
		tp_warn("PYROSCOPE_SERVER_ADDRESS=\"%s\" is not a server address (expected http://host:port or https://host:port, "
				"with no query string: /ingest?... is appended); using %s", shown, DEFAULT_SERVER);
		free(configured);
		configured = NULL;
	}
	if (configured == NULL)
		return strdup(DEFAULT_SERVER);
	if (strstr(configured, "://") == NULL)
	{
		address = malloc(strlen(configured) + sizeof("http://"));
		if (address != NULL)
			sprintf(address, "http://%s", configured);
		free(configured);
	}
	else
		address = configured;
	if (address == NULL)
		return NULL;
	/* keep the "://" of a bare scheme: "http:" is not an address either */
	keep = (size_t) (strstr(address, "://") - address) + 3;
	len = strlen(address);
	while (len > keep && address[len - 1] == '/')
		address[--len] = '\0';
	return address;
}

static volatile sig_atomic_t *env_cancel;

void
tp_pyroscope_set_env_cancel(volatile sig_atomic_t *cancel)
{
	env_cancel = cancel;
}

void
tp_pyroscope_config_from_env(tp_pyroscope_config *cfg, const char *default_application)
{
	char	   *app = tp_getenv_trimmed("PYROSCOPE_APPLICATION_NAME");
	char	   *tags = tp_getenv_trimmed("PYROSCOPE_TAGS");

	memset(cfg, 0, sizeof(*cfg));
	cfg->enabled = env_bool("PYROSCOPE_ENABLE");
	cfg->trace_correlation = env_bool("PYROSCOPE_TRACE_CORRELATION");
	cfg->server_address = server_address(tp_getenv_trimmed("PYROSCOPE_SERVER_ADDRESS"));
	cfg->application_name = app != NULL ?
		tp_pyroscope_application_name(app, "PYROSCOPE_APPLICATION_NAME") :
		tp_pyroscope_application_name(default_application && default_application[0] ?
									  default_application : "traceprof", "service.name");
	tp_pyroscope_parse_tags(tags, "PYROSCOPE_TAGS", &cfg->tags);
	cfg->tenant_id = tp_getenv_trimmed("PYROSCOPE_TENANT_ID");
	if (cfg->tenant_id != NULL && !tp_pyroscope_tenant_id_is_valid(cfg->tenant_id))
	{
		tp_warn("PYROSCOPE_TENANT_ID contains a control character or a byte outside ASCII, which an HTTP header cannot carry; ignored");
		free(cfg->tenant_id);
		cfg->tenant_id = NULL;
	}
	cfg->basic_auth_user = tp_getenv_trimmed("PYROSCOPE_BASIC_AUTH_USER");
	cfg->basic_auth_password = tp_getenv_trimmed("PYROSCOPE_BASIC_AUTH_PASSWORD");
	if ((cfg->basic_auth_user != NULL) != (cfg->basic_auth_password != NULL))
		tp_warn("%s is set without %s: basic auth is sent with an empty %s",
				cfg->basic_auth_user ? "PYROSCOPE_BASIC_AUTH_USER" : "PYROSCOPE_BASIC_AUTH_PASSWORD",
				cfg->basic_auth_user ? "PYROSCOPE_BASIC_AUTH_PASSWORD" : "PYROSCOPE_BASIC_AUTH_USER",
				cfg->basic_auth_user ? "password" : "user name");
	cfg->ca_file = tp_getenv_trimmed("PYROSCOPE_CA_FILE");
	env_timeout("PYROSCOPE_UPLOAD_TIMEOUT", &cfg->timeout_ms);
	cfg->cancel = env_cancel;
	free(app);
	free(tags);
}

void
tp_pyroscope_config_free(tp_pyroscope_config *cfg)
{
	free(cfg->server_address);
	free(cfg->application_name);
	tp_kvlist_free(&cfg->tags);
	free(cfg->tenant_id);
	free(cfg->basic_auth_user);
	free(cfg->basic_auth_password);
	free(cfg->ca_file);
	memset(cfg, 0, sizeof(*cfg));
}

/* ---- series name ---- */

/* Percent-encode everything but RFC 3986's unreserved characters. */
static void
put_encoded(FILE *out, const char *s)
{
	for (const unsigned char *p = (const unsigned char *) s; *p; p++)
	{
		if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~')
			fputc(*p, out);
		else
			fprintf(out, "%%%02X", *p);
	}
}

char *
tp_pyroscope_series_name(const tp_pyroscope_config *cfg)
{
	char	   *text = NULL;
	size_t		size = 0;
	FILE	   *out = open_memstream(&text, &size);
	bool		ok;

	if (out == NULL)
		return NULL;
	put_encoded(out, cfg->application_name ? cfg->application_name : "traceprof");
	put_encoded(out, "{");
	for (size_t i = 0; i < cfg->tags.count; i++)
	{
		if (i > 0)
			put_encoded(out, ",");
		put_encoded(out, cfg->tags.items[i].key);
		put_encoded(out, "=");
		put_encoded(out, cfg->tags.items[i].value);
	}
	put_encoded(out, "}");
	ok = !ferror(out);
	if (fclose(out) != 0 || !ok)
	{
		free(text);
		return NULL;
	}
	return text;
}

/*
 * The server URL with any "user:password@" left out: links get shared.
 * Never longer than url, so its length bounds the copy (a path cut short
 * would make the link point elsewhere).
 */
static bool
put_origin_without_credentials(FILE *out, const char *url)
{
	size_t		size = strlen(url) + 1;
	char	   *clean = malloc(size);
	const char *scheme_end = strstr(url, "://");

	if (clean == NULL)
		return false;
	tp_url_redact(url, "", clean, size);
	/* host:port means http://, as for uploads: a link needs its scheme. */
	if (scheme_end == NULL || (size_t) (scheme_end - url) > strcspn(url, "/?#"))
		fputs("http://", out);
	fputs(clean, out);
	free(clean);
	return true;
}

char *
tp_pyroscope_query_url_for(const tp_pyroscope_config *cfg, const char *key, const char *value)
{
	char	   *text = NULL;
	size_t		size = 0;
	FILE	   *out = open_memstream(&text, &size);
	bool		ok;

	if (out == NULL)
		return NULL;
	ok = put_origin_without_credentials(out, cfg->server_address ? cfg->server_address : DEFAULT_SERVER);
	fputs("/?query=", out);
	put_encoded(out, "service=");
	put_encoded(out, cfg->application_name ? cfg->application_name : "traceprof");
	put_encoded(out, " ");
	put_encoded(out, key);
	put_encoded(out, "=");
	put_encoded(out, value);
	ok = ok && !ferror(out);
	if (fclose(out) != 0 || !ok)
	{
		free(text);
		return NULL;
	}
	return text;
}

char *
tp_pyroscope_query_url(const tp_pyroscope_config *cfg, const char *trace_id_hex)
{
	return tp_pyroscope_query_url_for(cfg, "trace_id", trace_id_hex);
}

/* ---- upload ---- */

typedef struct answer
{
	char		snippet[SNIPPET_BYTES + 1];
	size_t		len;
	long		retry_after_ms; /* -1: no usable Retry-After */
	bool		refused;		/* a refusal of the profile itself, which no retry changes */
} answer;

/* Keep the start of the body, for the error message; drop the rest. */
static size_t
on_body(char *data, size_t size, size_t n, void *userdata)
{
	answer	   *a = userdata;
	size_t		len = size * n;
	size_t		keep = SNIPPET_BYTES - a->len;

	if (keep > len)
		keep = len;
	memcpy(a->snippet + a->len, data, keep);
	a->len += keep;
	a->snippet[a->len] = '\0';
	return len;
}

/* Only Retry-After matters: a throttling server says when to come back. */
static size_t
on_header(char *data, size_t size, size_t n, void *userdata)
{
	answer	   *a = userdata;
	size_t		len = size * n;
	static const char name[] = "retry-after:";
	char		value[128];

	/* a 103 Early Hints' Retry-After is not the final answer's */
	if (tp_http_is_status_line(data, len))
		a->retry_after_ms = -1;
	else if (len > sizeof(name) - 1 && len - (sizeof(name) - 1) < sizeof(value) &&
		strncasecmp(data, name, sizeof(name) - 1) == 0)
	{
		memcpy(value, data + sizeof(name) - 1, len - (sizeof(name) - 1));
		value[len - (sizeof(name) - 1)] = '\0';
		a->retry_after_ms = tp_parse_retry_after(value + strspn(value, " \t"));
	}
	return len;
}

/* "HTTP status N" plus the start of the body on one line. */
static void
describe_status(const char *where, long status, answer *a, char *err, size_t errlen)
{
	char	   *s = a->snippet;
	size_t		len = a->len;

	for (size_t i = 0; i < len; i++)
		if (!isprint((unsigned char) s[i]))
			s[i] = ' ';
	while (len > 0 && s[len - 1] == ' ')
		s[--len] = '\0';
	while (*s == ' ')
		s++;
	if (*s != '\0')
		snprintf(err, errlen, "%s: HTTP status %ld: %s", where, status, s);
	else
		snprintf(err, errlen, "%s: HTTP status %ld", where, status);
}

static char *
ingest_url(const tp_pyroscope_config *cfg, uint64_t from_ns, uint64_t until_ns)
{
	char	   *name = tp_pyroscope_series_name(cfg);
	const char *server = cfg->server_address ? cfg->server_address : DEFAULT_SERVER;
	size_t		server_len = strlen(server);
	uint64_t	from = from_ns / NS_PER_SEC;
	uint64_t	until = until_ns / NS_PER_SEC + (until_ns % NS_PER_SEC != 0);
	char	   *url = NULL;

	if (name == NULL)
		return NULL;
	if (until <= from)
		until = from + 1;		/* an empty window is not a window */
	while (server_len > 0 && server[server_len - 1] == '/')
		server_len--;
	if (asprintf(&url, "%.*s/ingest?name=%s&from=%" PRIu64 "&until=%" PRIu64 "&format=pprof",
				 (int) server_len, server, name, from, until) < 0)
		url = NULL;
	free(name);
	return url;
}

typedef enum attempt_outcome
{
	ATTEMPT_DELIVERED,
	ATTEMPT_RETRY,				/* throttled, unavailable, or the connection dropped */
	ATTEMPT_TOO_LARGE,			/* 413: the body is over a limit; its samples may go in parts */
	ATTEMPT_FAILED,
} attempt_outcome;

/* One upload request, and how its last attempt ended. */
typedef struct request
{
	tp_pyroscope_config *cfg;	/* its Retry-After is kept there */
	const char *url;
	const char *where;			/* the endpoint as messages show it */
	struct curl_slist *headers;
	const uint8_t *pprof;
	size_t		len;
	attempt_outcome outcome;
	bool		refused;		/* the last answer refused the profile itself */
} request;

/* An answer that is no success: what it says, and whether to try again. */
static attempt_outcome
classify_refusal(const char *where, long status, answer *a, char *err, size_t errlen)
{
	describe_status(where, status, a, err, errlen);
	if (status == 413)
		return ATTEMPT_TOO_LARGE;
	return tp_http_status_is_retryable(status) ? ATTEMPT_RETRY : ATTEMPT_FAILED;
}

static attempt_outcome
attempt(const request *req, long timeout_ms, answer *a, char *err, size_t errlen)
{
	const tp_pyroscope_config *cfg = req->cfg;
	tp_http_post post;
	char		curl_message[CURL_ERROR_SIZE] = "";
	CURL	   *curl = curl_easy_init();
	CURLcode	rc;
	long		status = 0;
	attempt_outcome outcome;

	if (curl == NULL)
	{
		snprintf(err, errlen, "cannot initialise libcurl");
		return ATTEMPT_FAILED;
	}
	post = (tp_http_post) {
		.url = req->url,
		.body = req->pprof,
		.len = req->len,
		.headers = req->headers,
		.timeout_ms = timeout_ms,
		.user_agent = "traceprof-pyroscope-c/" TRACEPROF_VERSION,
		.ca_file = cfg->ca_file,
		.cancel = cfg->cancel,
		.error_buffer = curl_message,
		.on_header = on_header,
		.on_body = on_body,
		.userdata = a,
	};
	tp_http_post_setup(curl, &post);
	if (cfg->basic_auth_user != NULL || cfg->basic_auth_password != NULL)
	{
		curl_easy_setopt(curl, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
		curl_easy_setopt(curl, CURLOPT_USERNAME,
						 cfg->basic_auth_user ? cfg->basic_auth_user : "");
		curl_easy_setopt(curl, CURLOPT_PASSWORD,
						 cfg->basic_auth_password ? cfg->basic_auth_password : "");
	}

	rc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	if (tp_http_answered_ok(rc, status))
		outcome = ATTEMPT_DELIVERED;
	else if (rc == CURLE_ABORTED_BY_CALLBACK)
	{
		snprintf(err, errlen, "%s: upload cancelled", req->where);	/* not libcurl's words */
		outcome = ATTEMPT_FAILED;
	}
	else if (rc != CURLE_OK && !tp_http_refused_then_dropped(rc, status))
	{
		snprintf(err, errlen, "%s: %s", req->where,
				 curl_message[0] ? curl_message : curl_easy_strerror(rc));
		outcome = tp_curl_error_is_dropped_connection(rc) ? ATTEMPT_RETRY : ATTEMPT_FAILED;
	}
	else
	{
		outcome = classify_refusal(req->where, status, a, err, errlen);
		/* Of the profile, not of the server or its address (401, 404, 500): those others would get too. */
		a->refused = outcome == ATTEMPT_FAILED && (status == 400 || status == 422);
	}
	curl_easy_cleanup(curl);
	return outcome;
}

static bool
attempt_upload(void *arg, long timeout_ms, long *retry_after_ms, char *err, size_t errlen)
{
	request    *req = arg;
	answer		a = {.len = 0, .retry_after_ms = -1};

	req->outcome = attempt(req, timeout_ms, &a, err, errlen);
	req->refused = a.refused;
	*retry_after_ms = a.retry_after_ms;
	return req->outcome == ATTEMPT_RETRY;
}

/*
 * Not static only so that a fuzz target (tests/fuzz/pyroscope_answer.c)
 * can drive the answer handling without a network: the same callbacks and
 * classify_refusal that attempt() runs on what libcurl hands it.
 */
bool
tp_pyroscope_read_answer(const char *where, long status,
						 const char *const *header_lines, const size_t *header_lens, size_t nheaders,
						 const uint8_t *body, size_t body_len,
						 bool *retry, long *retry_after_ms, char *err, size_t errlen)
{
	answer		a = {.len = 0, .retry_after_ms = -1};
	attempt_outcome outcome = ATTEMPT_DELIVERED;

	err[0] = '\0';
	for (size_t i = 0; i < nheaders; i++)
		on_header((char *) header_lines[i], 1, header_lens[i], &a);
	if (body_len > 0)
		on_body((char *) body, 1, body_len, &a);
	if (!tp_http_answered_ok(CURLE_OK, status))
		outcome = classify_refusal(where, status, &a, err, errlen);
	*retry = outcome == ATTEMPT_RETRY;
	*retry_after_ms = a.retry_after_ms;
	return outcome == ATTEMPT_DELIVERED;
}

/*
 * The upload's header lines, the tenant's as long as it is (a cut one
 * names another tenant); NULL when memory ran out.
 */
static struct curl_slist *
request_headers(const tp_pyroscope_config *cfg)
{
	struct curl_slist *list = NULL;
	bool		ok;

	/* No 100-continue round trip. */
	ok = tp_http_append_header(&list, "Content-Type: application/octet-stream") &&
		tp_http_append_header(&list, "Expect:");
	if (ok && cfg->tenant_id != NULL)
		ok = tp_http_append_field(&list, "X-Scope-OrgID", cfg->tenant_id);
	if (ok)
		return list;
	curl_slist_free_all(list);
	return NULL;
}

long
tp_pyroscope_retry_wait_ms(const tp_pyroscope_config *cfg)
{
	return tp_retry_wait_left_ms(cfg->retry_not_before_ms);
}

/*
 * One request of len bytes holding count samples at req, retried within
 * what is left until deadline_ms; what its answer says of the server's size
 * limit is kept in the configuration.
 */
static attempt_outcome
send_request(request *req, const uint8_t *pprof, size_t len, size_t count,
			 long deadline_ms, char *err, size_t errlen)
{
	long		left = deadline_ms - tp_monotonic_ms();
	tp_size_answer answer;

	req->pprof = pprof;
	req->len = len;
	req->outcome = ATTEMPT_FAILED;
	if (!tp_retry_run(left > 0 ? left : 1, req->cfg->cancel, &req->cfg->retry_not_before_ms,
					  attempt_upload, req, err, errlen))
		snprintf(err, errlen, "%s: upload cancelled", req->where);
	if (req->outcome == ATTEMPT_DELIVERED)
		answer = TP_SIZE_TAKEN;
	else if (req->outcome == ATTEMPT_TOO_LARGE)
		answer = TP_SIZE_TOO_LARGE;
	else
		answer = TP_SIZE_OTHER;
	tp_size_limit_learn(&req->cfg->size_limit, len, count, answer);
	return req->outcome;
}

/* ---- a profile refused as too large goes again in parts ---- */

/* What became of the parts of a profile refused as too large. */
typedef struct split
{
	tp_pprof_parts *parts;
	uint64_t	taken;			/* "samples" values the server took */
	uint64_t	dropped;		/* refused even alone, or left after a failure */
	bool		stopped;		/* a request failed: the rest is dropped */
	bool		keep_rest_allowed;	/* a caller that can send the rest later */
	bool		keep_rest;		/* cancelled, the caller takes what is left */
	size_t		rest_first;		/* then: samples [rest_first, n) were not sent */
	char		first_refusal[512];	/* why the first part dropped was, "" if none */
} split;

static void send_part(request *req, split *sp, size_t first, size_t count,
					  long deadline_ms, char *err, size_t errlen);

/* Samples [first, first + count) as two parts, in order. */
static void
send_halves(request *req, split *sp, size_t first, size_t count, long deadline_ms,
			char *err, size_t errlen)
{
	send_part(req, sp, first, count / 2, deadline_ms, err, errlen);
	send_part(req, sp, first + count / 2, count - count / 2, deadline_ms, err, errlen);
}

/*
 * Upload samples [first, first + count) in one request; refused as too
 * large, in halves, down to single samples (a sample refused alone is
 * dropped).  A part at least as large as one refused before is halved
 * unsent.  Each part has fewer samples than the one before, so this ends;
 * all share the upload's one deadline.
 */
static void
send_part(request *req, split *sp, size_t first, size_t count, long deadline_ms,
		  char *err, size_t errlen)
{
	size_t		len = 0;
	uint8_t    *body;
	attempt_outcome outcome;

	if (sp->stopped || tp_monotonic_ms() >= deadline_ms)
	{
		sp->stopped = true;
		if (!sp->keep_rest)
			sp->dropped += tp_pprof_parts_weight(sp->parts, first, count);
		return;
	}
	body = tp_pprof_parts_encode(sp->parts, first, count, &len);
	if (body != NULL && !tp_size_limit_allows(&req->cfg->size_limit, len, count))
	{
		/* The server refused as large a body before: no need to ask again. */
		free(body);
		send_halves(req, sp, first, count, deadline_ms, err, errlen);
		return;
	}
	if (body == NULL)
	{
		snprintf(err, errlen, "%s: out of memory while splitting a profile refused as too large", req->where);
		outcome = ATTEMPT_FAILED;
	}
	else
		outcome = send_request(req, body, len, count, deadline_ms, err, errlen);
	free(body);
	if (outcome == ATTEMPT_TOO_LARGE && count > 1)
	{
		send_halves(req, sp, first, count, deadline_ms, err, errlen);
		return;
	}
	if (outcome != ATTEMPT_DELIVERED && outcome != ATTEMPT_TOO_LARGE && sp->keep_rest_allowed &&
		req->cfg->cancel != NULL && *req->cfg->cancel)
	{
		/*
		 * Cancelled (a reload, a shutdown), not refused: parts go in order,
		 * so this one and all after it are what is left, for the caller to
		 * send later; dropping them would lose samples no server refused.
		 */
		sp->keep_rest = true;
		sp->rest_first = first;
		sp->stopped = true;
		return;
	}
	if (outcome == ATTEMPT_DELIVERED)
		sp->taken += tp_pprof_parts_weight(sp->parts, first, count);
	else
	{
		sp->dropped += tp_pprof_parts_weight(sp->parts, first, count);
		/* A later part taken leaves err empty: the refusal is quoted from here. */
		if (sp->first_refusal[0] == '\0')
			snprintf(sp->first_refusal, sizeof(sp->first_refusal), "%s", err);
	}
	if (outcome != ATTEMPT_DELIVERED && outcome != ATTEMPT_TOO_LARGE)
		sp->stopped = true;		/* not the size: the next parts would fail alike */
}

/*
 * A profile too large for the server (413: a proxy's body limit) goes as
 * parts of its samples for the same series and window, which Pyroscope
 * adds up: again when it was refused (refused, err saying so), or at once
 * when one as large was refused before.  parts: the profile unpacked (NULL:
 * not ours to read, or no memory).  Fills what was taken and dropped into
 * *counts (may be NULL).
 */
static bool
send_in_parts(request *req, tp_pprof_parts *parts, bool refused, long deadline_ms,
			  tp_pyroscope_counts *counts, char *err, size_t errlen)
{
	split		sp = {.parts = parts};
	char		refusal[512];
	bool		ok = false;
	size_t		n;				/* samples in the profile */
	const char *how = refused ? "after a refusal as too large, in parts" :
		"in parts under the size refused before";

	snprintf(refusal, sizeof(refusal), "%s", err);
	n = parts != NULL ? tp_pprof_parts_samples(parts) : 0;
	if (n < 2)
	{
		/* One sample (or not ours to read): nothing smaller can be sent. */
		if (parts != NULL)
		{
			size_t		used = strlen(err);

			snprintf(err + used, errlen - used, " (a profile of one sample, refused even alone: dropped)");
			if (counts != NULL)
				counts->dropped = tp_pprof_parts_weight(parts, 0, n);
		}
	}
	else
	{
		sp.keep_rest_allowed = counts != NULL;
		send_halves(req, &sp, 0, n, deadline_ms, err, errlen);
		if (sp.keep_rest)
		{
			size_t		left = n - sp.rest_first;

			counts->rest_samples = tp_pprof_parts_weight(sp.parts, sp.rest_first, left);
			counts->rest = tp_pprof_parts_encode(sp.parts, sp.rest_first, left, &counts->rest_len);
			if (counts->rest == NULL)
			{
				sp.dropped += counts->rest_samples;
				counts->rest_samples = 0;
			}
		}
		ok = sp.dropped == 0 && !sp.keep_rest;
		if (sp.keep_rest && sp.dropped == 0)
		{
			size_t		used = strlen(err);

			snprintf(err + used, errlen - used, " (%s: %llu samples not sent yet)",
					 how, (unsigned long long) counts->rest_samples);
		}
		else if (!ok && !sp.stopped)
		{
			/* Not sent whole, the refusal to quote is a sample's. */
			if (!refused)
				snprintf(refusal, sizeof(refusal), "%s", sp.first_refusal[0] ? sp.first_refusal : err);
			snprintf(err, errlen, "%s (the profile went %s; samples refused even alone "
					 "were dropped: %llu of %llu)", refusal,
					 refused ? "again in parts" : "in parts under the size refused before",
					 (unsigned long long) sp.dropped, (unsigned long long) (sp.taken + sp.dropped));
		}
		else if (!ok)
		{
			size_t		used = strlen(err);

			snprintf(err + used, errlen - used, " (%s: %llu of %llu samples not uploaded)",
					 how, (unsigned long long) sp.dropped, (unsigned long long) (sp.taken + sp.dropped));
		}
		if (counts != NULL)
		{
			counts->taken = sp.taken;
			counts->dropped = sp.dropped;
		}
	}
	return ok;
}

bool
tp_pyroscope_ingest(tp_pyroscope_config *cfg,
					const uint8_t *pprof, size_t len,
					uint64_t from_ns, uint64_t until_ns,
					char *err, size_t errlen)
{
	return tp_pyroscope_ingest_counted(cfg, pprof, len, from_ns, until_ns, NULL, err, errlen);
}

bool
tp_pyroscope_ingest_counted(tp_pyroscope_config *cfg,
							const uint8_t *pprof, size_t len,
							uint64_t from_ns, uint64_t until_ns,
							tp_pyroscope_counts *counts, char *err, size_t errlen)
{
	char	   *url = ingest_url(cfg, from_ns, until_ns);
	char		where[512];
	request		req = {.cfg = cfg, .outcome = ATTEMPT_FAILED};
	long		timeout = cfg->timeout_ms > 0 ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
	long		deadline_ms = tp_monotonic_ms() + timeout;
	long		wait_ms = tp_pyroscope_retry_wait_ms(cfg);
	tp_pprof_parts *parts = NULL;
	size_t		samples = 1;	/* in the profile, once read */
	bool		ok;

	err[0] = '\0';
	if (counts != NULL)
		memset(counts, 0, sizeof(*counts));
	if (url == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return false;
	}
	/* Messages name the endpoint only: no query, no credentials, no token in the path. */
	tp_http_url_shown(url, where, sizeof(where));
	where[strcspn(where, "?")] = '\0';
	if (wait_ms > 0)
	{
		/* The server said when to come back; asking sooner only adds load. */
		snprintf(err, errlen, "%s: not sent: the server asked to wait %.1f s more (Retry-After)",
				 where, wait_ms / 1000.0);
		free(url);
		return false;
	}
	req.url = url;
	req.where = where;
	req.headers = request_headers(cfg);
	if (req.headers == NULL)
	{
		/* Sent without its tenant, a profile would go to another one, or be refused. */
		snprintf(err, errlen, "%s: out of memory for the request's headers: not sent", where);
		free(url);
		return false;
	}

	/*
	 * As large as a profile the server refused before: read, to count its
	 * samples; unless it may go as a probe of a raised limit, it goes in
	 * parts without being refused whole first.  One that cannot be read
	 * goes whole, as a single sample would (never a probe).
	 */
	if (cfg->size_limit.refused != 0 && len >= cfg->size_limit.refused)
		parts = tp_pprof_parts_open(pprof, len);
	if (parts != NULL)
		samples = tp_pprof_parts_samples(parts);

	/* Retries, and parts, stay inside the one budget: the next upload must not wait. */
	if (parts != NULL && !tp_size_limit_allows(&cfg->size_limit, len, samples))
		ok = send_in_parts(&req, parts, false, deadline_ms, counts, err, errlen);
	else
	{
		ok = send_request(&req, pprof, len, samples, deadline_ms, err, errlen) == ATTEMPT_DELIVERED;
		if (req.outcome == ATTEMPT_TOO_LARGE)
		{
			if (parts == NULL)
				parts = tp_pprof_parts_open(pprof, len);
			ok = send_in_parts(&req, parts, true, deadline_ms, counts, err, errlen);
		}
	}
	tp_pprof_parts_close(parts);
	/* The last request, whole or a part's, stopped it: refused for the profile's sake? */
	if (!ok && counts != NULL)
		counts->refused = req.outcome == ATTEMPT_FAILED && req.refused;
	/* What libcurl or the server wrote may quote the path, and a token in it. */
	tp_http_url_scrub(url, err, errlen);
	curl_slist_free_all(req.headers);
	free(url);
	return ok;
}
