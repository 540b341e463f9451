/*
 * pyroscope_config.c - PYROSCOPE_* settings, series names and the links
 * into Pyroscope's UI: no network, so backends use it without libcurl
 * (the upload is pyroscope.c).
 *
 * Settings (all optional):
 *   PYROSCOPE_ENABLE, PYROSCOPE_TRACE_CORRELATION  true/1/yes (any case)
 *   PYROSCOPE_SERVER_ADDRESS      default http://localhost:4040
 *   PYROSCOPE_APPLICATION_NAME    default chosen by the program
 *   PYROSCOPE_TAGS                k=v,k=v (series labels)
 *   PYROSCOPE_TENANT_ID           sent as X-Scope-OrgID
 *   PYROSCOPE_BASIC_AUTH_USER, PYROSCOPE_BASIC_AUTH_PASSWORD
 *   PYROSCOPE_UPLOAD_TIMEOUT      ms for a whole upload, default 10000
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_url.h"
#include "log.h"
#include "pyroscope.h"
#include "text.h"

#define MAX_TIMEOUT_MS 600000L

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

	*out = TP_PYROSCOPE_DEFAULT_TIMEOUT_MS;
	if (value == NULL)
		return true;
	ms = strtol(value, &end, 10);
	if (end == value || *end != '\0' || ms < 1 || ms > MAX_TIMEOUT_MS)
	{
		tp_warn("%s=\"%s\" is not a timeout (expected milliseconds from 1 to %ld); using %ld",
				name, shown(value, strlen(value), buf, sizeof(buf)),
				MAX_TIMEOUT_MS, TP_PYROSCOPE_DEFAULT_TIMEOUT_MS);
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
				"with no query string: /ingest?... is appended); using %s", shown, TP_PYROSCOPE_DEFAULT_SERVER);
		free(configured);
		configured = NULL;
	}
	if (configured == NULL)
		return strdup(TP_PYROSCOPE_DEFAULT_SERVER);
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

/*
 * What open_memstream() gathered into *text (set only once out is closed),
 * or NULL, with it freed, when writing failed.
 */
static char *
closed_text(FILE *out, char **text, bool ok)
{
	ok = !ferror(out) && ok;
	if (fclose(out) != 0 || !ok)
	{
		free(*text);
		return NULL;
	}
	return *text;
}

char *
tp_pyroscope_series_name(const tp_pyroscope_config *cfg)
{
	char	   *text = NULL;
	size_t		size = 0;
	FILE	   *out = open_memstream(&text, &size);

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
	return closed_text(out, &text, true);
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
	ok = put_origin_without_credentials(out, cfg->server_address ? cfg->server_address : TP_PYROSCOPE_DEFAULT_SERVER);
	fputs("/?query=", out);
	put_encoded(out, "service=");
	put_encoded(out, cfg->application_name ? cfg->application_name : "traceprof");
	put_encoded(out, " ");
	put_encoded(out, key);
	put_encoded(out, "=");
	put_encoded(out, value);
	return closed_text(out, &text, ok);
}

char *
tp_pyroscope_query_url(const tp_pyroscope_config *cfg, const char *trace_id_hex)
{
	return tp_pyroscope_query_url_for(cfg, "trace_id", trace_id_hex);
}
