/*
 * traceprof.c - module entry point: GUCs, shared memory, hooks, exporter.
 *
 * Must be loaded with shared_preload_libraries = 'traceprof': the span ring
 * lives in shared memory and the exporter is a background worker.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "http_url.h"
#include "kvlist.h"
#include "log.h"
#include "pyroscope.h"
#include "traceprof.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

TP_HOT int			traceprof_track = TRACK_TOP;
/* Off by default, as pg_stat_statements.track_planning and track_io_timing. */
TP_HOT bool		traceprof_track_planning = false;
TP_HOT bool		traceprof_track_cpu_time = false;
TP_HOT int			traceprof_query_text = QUERY_TEXT_NORMALIZED;
TP_HOT int			traceprof_max_query_length = 1024;
int			traceprof_max_spans = 8192;
TP_HOT double		traceprof_sample_rate = 0.0;
char	   *traceprof_otlp_endpoint = NULL;
bool		traceprof_exporting = false;
char	   *traceprof_otlp_ca_file = NULL;
char	   *traceprof_otlp_client_certificate = NULL;
char	   *traceprof_otlp_client_key = NULL;
int			traceprof_otlp_protocol = 0;
int			traceprof_otlp_compression = 0;
char	   *traceprof_service_name = NULL;
char	   *traceprof_resource_attributes = NULL;
int			traceprof_otlp_timeout_ms = 10000;
int			traceprof_export_interval_ms = 1000;
int			traceprof_export_batch_size = 512;
TP_HOT int			traceprof_profile = PROFILE_TRACED;
int			traceprof_profile_mode = PROFILE_MODE_CPU;
int			traceprof_sample_hz = 100;
TP_HOT bool		traceprof_profile_root_span_only = false;
int			traceprof_max_samples = 32768;
int			traceprof_backend_samples = 2048;
int			traceprof_max_functions = 16384;
char	   *traceprof_pyroscope_url = NULL;
char	   *traceprof_pyroscope_ca_file = NULL;
char	   *traceprof_pyroscope_tenant_id = NULL;
int			traceprof_upload_interval_ms = 10000;
char	   *traceprof_application_name = NULL;
char	   *traceprof_pyroscope_tags = NULL;
char	   *traceprof_pyroscope_basic_auth_user = NULL;
char	   *traceprof_pyroscope_basic_auth_password = NULL;
bool		traceprof_profile_span_name = false;
bool		traceprof_profile_trace_id = true;

TP_HOT bool		traceprof_guc_context_valid = false;
TP_HOT tp_span_context traceprof_guc_context;

char		traceprof_guc_tracestate[TP_TRACESTATE_MAX + 1];
uint16		traceprof_guc_tracestate_len = 0;

static char *traceparent_setting = NULL;
static char *tracestate_setting = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static const struct config_enum_entry track_options[] = {
	{"top", TRACK_TOP, false},
	{"all", TRACK_ALL, false},
	{NULL, 0, false}
};

static const struct config_enum_entry query_text_options[] = {
	{"normalized", QUERY_TEXT_NORMALIZED, false},
	{"full", QUERY_TEXT_FULL, false},
	{"off", QUERY_TEXT_OFF, false},
	{NULL, 0, false}
};

static const struct config_enum_entry profile_options[] = {
	{"traced", PROFILE_TRACED, false},
	{"all", PROFILE_ALL, false},
	{"off", PROFILE_OFF, false},
	{NULL, 0, false}
};

static const struct config_enum_entry profile_mode_options[] = {
	{"cpu", PROFILE_MODE_CPU, false},
	{"wall", PROFILE_MODE_WALL, false},
	{NULL, 0, false}
};

/* Values match tp_otlp_protocol in common/otel_config.h. */
static const struct config_enum_entry protocol_options[] = {
	{"http/protobuf", 0, false},
	{"grpc", 1, false},
	{NULL, 0, false}
};

/* OTEL_EXPORTER_OTLP_COMPRESSION's values. */
static const struct config_enum_entry compression_options[] = {
	{"none", OTLP_COMPRESSION_NONE, false},
	{"gzip", OTLP_COMPRESSION_GZIP, false},
	{NULL, 0, false}
};

/* Parse once in the check hook; the assign hook only copies the result. */
/*
 * A trace context names one request's caller.  Stored as a default, of the
 * server (postgresql.conf, ALTER SYSTEM, the command line), a role or a
 * database (ALTER ROLE/DATABASE ... SET, validated as PGC_S_TEST, as a
 * function's SET clause is), it would put every later session into one
 * trace, and let a database owner trace and profile other roles' sessions,
 * superusers' included, which traceprof.sample_rate leaves to superusers.
 */
static bool
source_may_carry_context(const char *name, GucSource source)
{
	switch (source)
	{
		case PGC_S_DYNAMIC_DEFAULT:
		case PGC_S_ENV_VAR:
		case PGC_S_FILE:
		case PGC_S_ARGV:
		case PGC_S_GLOBAL:
		case PGC_S_DATABASE:
		case PGC_S_USER:
		case PGC_S_DATABASE_USER:
		case PGC_S_TEST:
			break;
		default:
			return true;		/* a client's or session's: PGOPTIONS, SET, set_config() */
	}
	GUC_check_errmsg("%s cannot be stored as a default of the server, a role, a database or a function", name);
	GUC_check_errdetail("It belongs to one request's caller: as a stored default, every session would join one trace.");
	GUC_check_errhint("Set it per session or request (SET, SET LOCAL, set_config(), PGOPTIONS, a sqlcommenter comment); "
					  "to trace statements that arrive without a context, a superuser sets traceprof.sample_rate.");
	return false;
}

static bool
check_traceparent(char **newval, void **extra, GucSource source)
{
	tp_span_context *parsed;
	const char *why;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;			/* empty: no incoming context */
	if (!source_may_carry_context("traceprof.traceparent", source))
		return false;
	parsed = malloc(sizeof(tp_span_context));
	if (parsed == NULL)
		return false;
	if (!tp_traceparent_parse(*newval, strlen(*newval), parsed, &why))
	{
		free(parsed);
		GUC_check_errdetail("%s.", why);
		GUC_check_errhint("A W3C traceparent looks like 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01: "
						  "version, 32 lowercase hex trace-id, 16 lowercase hex parent-id, 2 hex flags; "
						  "an empty string clears it.");
		return false;
	}
	*extra = parsed;
	return true;
}

static void
assign_traceparent(const char *newval, void *extra)
{
	traceprof_guc_context_valid = extra != NULL;
	if (extra != NULL)
	{
		traceprof_guc_context = *(tp_span_context *) extra;
		statement_spans_may_trace();
	}
}

/* Checked and cut to what is kept once, in the check hook; the text kept is extra. */
static bool
check_tracestate(char **newval, void **extra, GucSource source)
{
	char	   *kept;
	size_t		kept_len;
	const char *why;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!source_may_carry_context("traceprof.tracestate", source))
		return false;
	kept = malloc(TP_TRACESTATE_MAX + 1);
	if (kept == NULL)
		return false;
	if (!tp_tracestate_parse(*newval, strlen(*newval), kept, &kept_len, &why))
	{
		free(kept);
		GUC_check_errdetail("%s.", why);
		GUC_check_errhint("A W3C tracestate looks like congo=t61rcWkgMzE,rojo=00f067aa0ba902b7; "
						  "an empty string clears it.");
		return false;
	}
	*extra = kept;
	return true;
}

static void
assign_tracestate(const char *newval, void *extra)
{
	const char *kept = extra != NULL ? extra : "";

	traceprof_guc_tracestate_len = (uint16) strlen(kept);
	memcpy(traceprof_guc_tracestate, kept, traceprof_guc_tracestate_len + 1);
}

static void
assign_sample_rate(double newval, void *extra)
{
	if (newval > 0)
		statement_spans_may_trace();
}

/* Refused at ALTER SYSTEM or reload, not found out later from export_failures. */
static bool
check_otlp_endpoint(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0' || tp_http_url_is_valid(*newval))
		return true;
	GUC_check_errdetail("Expected an http:// or https:// URL with a host (http://collector:4318), or host:port; "
						"empty disables export.");
	return false;
}

static bool
check_pyroscope_url(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0' || tp_pyroscope_server_is_valid(*newval))
		return true;
	GUC_check_errdetail("Expected an http:// or https:// URL with a host (http://pyroscope:4040), or host:port, "
						"with no query string (/ingest?... is appended); empty disables upload.");
	return false;
}

static bool
check_resource_attributes(char **newval, void **extra, GucSource source)
{
	tp_kvlist	parsed = {0};
	char		err[256];
	bool		ok = tp_kvlist_parse(*newval ? *newval : "", TP_KV_PERCENT_DECODE, &parsed, err, sizeof(err));
	bool		names_service = ok && tp_kvlist_get(&parsed, "service.name") != NULL;

	tp_kvlist_free(&parsed);
	if (names_service)
	{
		/* It would lose to traceprof.service_name, which always has a value. */
		GUC_check_errdetail("service.name comes from traceprof.service_name, which would override it here.");
		GUC_check_errhint("Set traceprof.service_name instead.");
		return false;
	}
	if (ok)
		return true;
	GUC_check_errdetail("%s.", err);
	GUC_check_errhint("Expected key=value,key=value with %%XX-encoded values.");
	return false;
}

/*
 * Names sent with every export: a byte that is not UTF-8 makes a collector
 * refuse every request (protobuf strings are UTF-8), so refuse it here.
 */
static bool
check_utf8_name(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || pg_verify_mbstr(PG_UTF8, *newval, (int) strlen(*newval), true))
		return true;
	GUC_check_errdetail("The value is not valid UTF-8.");
	GUC_check_errhint("Set it from a UTF-8 session, or in postgresql.conf saved as UTF-8.");
	return false;
}

/* service.name: a name, never empty (collectors group spans by it). */
static bool
check_service_name(char **newval, void **extra, GucSource source)
{
	if (*newval != NULL && (*newval)[0] == '\0')
	{
		GUC_check_errdetail("The service name is empty.");
		GUC_check_errhint("Set a name, such as the default, postgresql.");
		return false;
	}
	return check_utf8_name(newval, extra, source);
}

/* It becomes the name of a Pyroscope series: refused here, not at upload. */
static bool
check_application_name(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || tp_pyroscope_application_name_is_valid(*newval))
		return true;
	GUC_check_errdetail("Expected at most %d of the characters A-Z a-z 0-9 _ . - / (a Pyroscope application name); empty: traceprof.service_name.",
						TP_PYROSCOPE_MAX_TAG_VALUE);
	return false;
}

/* A CR or LF would end the X-Scope-OrgID header and start another. */
static bool
check_tenant_id(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || tp_pyroscope_tenant_id_is_valid(*newval))
		return true;
	GUC_check_errdetail("Expected printable ASCII only (an HTTP header's value).");
	return false;
}

/* Every span asks whether to keep it for export: a bool, not the string. */
static void
assign_otlp_endpoint(const char *newval, void *extra)
{
	traceprof_exporting = newval != NULL && newval[0] != '\0';
}

static void
assign_profile(int newval, void *extra)
{
	profiler_profile_assigned(newval);
	if (newval == PROFILE_ALL)
		statement_spans_may_trace();
}

/*
 * A parallel worker of a utility statement its leader samples restores this
 * setting on (profiler_utility_workers_may_start): its one chance to start
 * sampling, since it runs no executor hook.  Its name sorts after the
 * sampler's settings, which the worker has restored by then.
 */
static bool utility_sampling = false;

static void
assign_utility_sampling(bool newval, void *extra)
{
	if (newval && IsParallelWorker())
		profiler_worker_statement_start();
}

static void
define_gucs(void)
{
	DefineCustomStringVariable("traceprof.traceparent",
							   "W3C traceparent of the caller's span: following statements become its children.",
							   "Empty means no incoming trace context.",
							   &traceparent_setting, "", PGC_USERSET, 0,
							   check_traceparent, assign_traceparent, NULL);
	DefineCustomStringVariable("traceprof.tracestate",
							   "W3C tracestate that comes with traceprof.traceparent: kept on the spans made under it.",
							   "At most 32 members, each key once; past 512 bytes, members over 128 bytes are dropped first, then from the end. Empty means none.",
							   &tracestate_setting, "", PGC_USERSET, 0,
							   check_tracestate, assign_tracestate, NULL);
	DefineCustomRealVariable("traceprof.sample_rate",
							 "Fraction of statements without a trace context that start a new trace.",
							 NULL, &traceprof_sample_rate, 0.0, 0.0, 1.0, PGC_SUSET, 0,
							 NULL, assign_sample_rate, NULL);
	DefineCustomEnumVariable("traceprof.track",
							 "Which statements get spans: top (client statements) or all (also those inside functions).",
							 NULL, &traceprof_track, TRACK_TOP, track_options, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("traceprof.track_planning",
							 "Give a statement's planning a child span of its own.",
							 "Off: planning time stays an attribute of the statement's span.",
							 &traceprof_track_planning, false, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("traceprof.track_cpu_time",
							 "Record each span's CPU time from the thread CPU clock.",
							 "Costs a system call at each end of a span, which may cost more than the rest of tracing.",
							 &traceprof_track_cpu_time, false, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("traceprof.query_text",
							 "Query text in spans: normalized (constants replaced), full, or off.",
							 NULL, &traceprof_query_text, QUERY_TEXT_NORMALIZED, query_text_options,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("traceprof.max_query_length",
							"Bytes of query text kept per span.",
							NULL, &traceprof_max_query_length, 1024, 64, 65536, PGC_POSTMASTER,
							GUC_UNIT_BYTE, NULL, NULL, NULL);
	DefineCustomIntVariable("traceprof.max_spans",
							"Finished spans kept in shared memory; when full, new spans are dropped and counted.",
							NULL, &traceprof_max_spans, 8192, 128, 1048576, PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomStringVariable("traceprof.otlp_endpoint",
							   "OTLP endpoint spans are exported to; empty disables export.",
							   "http/protobuf: base URL, v1/traces is appended; grpc: http://host:port.",
							   &traceprof_otlp_endpoint, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   check_otlp_endpoint, assign_otlp_endpoint, NULL);
	DefineCustomStringVariable("traceprof.otlp_ca_file",
							   "PEM file of the CA certificates that verify an https OTLP endpoint; empty: the system's.",
							   "Certificates and host names are always verified.",
							   &traceprof_otlp_ca_file, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("traceprof.otlp_client_certificate",
							   "PEM certificate presented to an https OTLP endpoint that asks for one (mutual TLS); empty: none.",
							   NULL,
							   &traceprof_otlp_client_certificate, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("traceprof.otlp_client_key",
							   "PEM private key of traceprof.otlp_client_certificate; empty: read from the certificate's file.",
							   NULL,
							   &traceprof_otlp_client_key, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
	DefineCustomEnumVariable("traceprof.otlp_protocol",
							 "OTLP transport: http/protobuf or grpc.",
							 NULL, &traceprof_otlp_protocol, 0, protocol_options, PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("traceprof.otlp_compression",
							 "OTLP request compression: none or gzip.",
							 NULL, &traceprof_otlp_compression, 0, compression_options, PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("traceprof.service_name",
							   "service.name resource attribute of exported spans.",
							   NULL, &traceprof_service_name, "postgresql", PGC_SIGHUP, 0,
							   check_service_name, NULL, NULL);
	DefineCustomStringVariable("traceprof.resource_attributes",
							   "Extra resource attributes, key=value,... (values percent-encoded).",
							   NULL, &traceprof_resource_attributes, "", PGC_SIGHUP, 0,
							   check_resource_attributes, NULL, NULL);
	DefineCustomIntVariable("traceprof.otlp_timeout",
							"Time budget of one export, retries included.",
							NULL, &traceprof_otlp_timeout_ms, 10000, 100, 600000, PGC_SIGHUP,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("traceprof.export_interval",
							"Time between exports.",
							NULL, &traceprof_export_interval_ms, 1000, 10, 3600000, PGC_SIGHUP,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("traceprof.export_batch_size",
							"Spans per OTLP request.",
							NULL, &traceprof_export_batch_size, 512, 1, 65536, PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("traceprof.profile",
							 "When backends sample their stacks: traced (while a traced span is open), all, or off.",
							 NULL, &traceprof_profile, PROFILE_TRACED, profile_options, PGC_SUSET, 0,
							 NULL, assign_profile, NULL);
	DefineCustomEnumVariable("traceprof.profile_mode",
							 "What the sampling timer counts: cpu (the backend's CPU time) or wall (elapsed time).",
							 "A change restarts a sampling backend's timer at its next statement.",
							 &traceprof_profile_mode, PROFILE_MODE_CPU, profile_mode_options, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("traceprof.sample_hz",
							"Samples per second of CPU (or wall) time.",
							"The kernel checks CPU timers on its 250 Hz tick, so higher rates would not be delivered.",
							&traceprof_sample_hz, 100, 1, 250, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("traceprof.profile_root_span_only",
							 "Label samples with the local root span instead of the innermost span.",
							 NULL, &traceprof_profile_root_span_only, false, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("traceprof.max_samples",
							"Stack samples kept in shared memory.",
							NULL, &traceprof_max_samples, 32768, 1024, 1048576, PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("traceprof.backend_samples",
							"Samples a backend holds until its outermost traced span ends.",
							"640 bytes each, reserved when a backend first samples and resident as the ring is first gone round (1.25 MB at 2048). A longer span keeps its first samples and counts the rest in traceprof.stats.samples_dropped.",
							&traceprof_backend_samples, 2048, 128, 65536, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("traceprof.max_functions",
							"Distinct frame and span names kept in shared memory.",
							NULL, &traceprof_max_functions, 16384, 1024, 1048576, PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomStringVariable("traceprof.pyroscope_url",
							   "Grafana Pyroscope server profiles are sent to; empty disables.",
							   NULL, &traceprof_pyroscope_url, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   check_pyroscope_url, NULL, NULL);
	DefineCustomStringVariable("traceprof.pyroscope_ca_file",
							   "PEM file of the CA certificates that verify an https Pyroscope server; empty: the system's.",
							   "Certificates and host names are always verified.",
							   &traceprof_pyroscope_ca_file, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("traceprof.pyroscope_tenant_id",
							   "X-Scope-OrgID sent to a multi-tenant Pyroscope.",
							   NULL, &traceprof_pyroscope_tenant_id, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   check_tenant_id, NULL, NULL);
	DefineCustomIntVariable("traceprof.upload_interval",
							"Time between profile uploads to Pyroscope.",
							NULL, &traceprof_upload_interval_ms, 10000, 100, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("traceprof.application_name",
							   "Pyroscope application (service_name) of uploaded profiles; empty: traceprof.service_name.",
							   "Grafana links a span to the profiles whose service_name equals its service.name.",
							   &traceprof_application_name, "", PGC_SIGHUP, 0,
							   check_application_name, NULL, NULL);
	DefineCustomStringVariable("traceprof.pyroscope_tags",
							   "Static series labels of uploaded profiles, key=value,...",
							   NULL, &traceprof_pyroscope_tags, "", PGC_SIGHUP, 0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("traceprof.pyroscope_basic_auth_user",
							   "Basic-auth user for Pyroscope.",
							   NULL, &traceprof_pyroscope_basic_auth_user, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("traceprof.pyroscope_basic_auth_password",
							   "Basic-auth password for Pyroscope.",
							   NULL, &traceprof_pyroscope_basic_auth_password, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
	DefineCustomBoolVariable("traceprof.profile_span_name",
							 "Add the span name as a sample label of uploaded profiles.",
							 "Pyroscope turns every string sample label but span_id into a series label.",
							 &traceprof_profile_span_name, false, PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("traceprof.profile_trace_id",
							 "Add the trace id as a sample label of uploaded profiles.",
							 "Pyroscope turns it into a series label: a series per trace. "
							 "Off: samples carry span_id alone, all Grafana's profiles for a span need.",
							 &traceprof_profile_trace_id, true, PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("traceprof.utility_sampling",
							 "Set by traceprof while a sampling backend runs a utility statement that may launch parallel workers.",
							 "Internal: it makes those workers sample with the backend's labels.",
							 &utility_sampling, false, PGC_SUSET,
							 GUC_NO_SHOW_ALL | GUC_NO_RESET_ALL | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE,
							 NULL, assign_utility_sampling, NULL);
	MarkGUCPrefixReserved("traceprof");
}

const char *
traceprof_pyroscope_application(void)
{
	return traceprof_application_name[0] != '\0' ? traceprof_application_name : traceprof_service_name;
}

static void
traceprof_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(span_store_shmem_size());
	RequestAddinShmemSpace(sample_store_shmem_size());
	RequestAddinShmemSpace(function_names_shmem_size());
	RequestAddinShmemSpace(profiler_shmem_size());
	function_names_request_lock();
}

static void
traceprof_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	span_store_shmem_startup();
	sample_store_shmem_startup();
	function_names_shmem_startup();
	profiler_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * common/'s warnings (the sampler's, in a backend) go to the server's log
 * in its format and destinations, not to a backend's stderr.  Only LOG:
 * they come from the statements' path, which must not fail for them.
 */
static void
warn_to_server_log(const char *message)
{
	ereport(LOG, (errmsg("traceprof: %s", message)));
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("traceprof must be loaded via shared_preload_libraries"),
				 errhint("Add traceprof to shared_preload_libraries in postgresql.conf and restart the server.")));

	define_gucs();
	tp_log_set_sink(warn_to_server_log);

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = traceprof_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = traceprof_shmem_startup;

	statement_spans_install_hooks();
	traceprof_register_exporter();
}
