/*
 * exporter.c - the background workers that send spans over OTLP and
 * profiles to Pyroscope.
 *
 * Network I/O happens here and nowhere else: backends only copy spans into
 * shared memory.  Each round takes up to traceprof.export_batch_size
 * unexported spans, sends them in one request (common/otlp_export.c:
 * bounded time, retries on 429/502/503/504), and marks them exported only
 * when the collector took them; when it could not be reached they stay for
 * the next round, and when it refused them they are dropped and counted.
 * A request refused as too large (413) goes again in halves, down to
 * single spans: only a span too large alone is dropped; later requests
 * stay under the size refused (probed again now and then).
 * Profiles go from a worker of their own: a Pyroscope that hangs must not
 * hold spans back until the ring overflows.
 *
 * This file is a library of its own, traceprof_exporter, which only the
 * workers load (workers.c says why); it uses traceprof's settings and
 * shared memory, which the postmaster loaded before forking them.
 */
#include "postgres.h"

#include <malloc.h>
#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/pmsignal.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/procsignal.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "build_id.h"
#include "http_retry.h"
#include "http_url.h"
#include "kvlist.h"
#include "log.h"
#include "otlp_export.h"
#include "profile.h"
#include "pyroscope.h"
#include "span_attributes.h"
#include "text.h"
#include "version.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Preloaded, it would bring libcurl into every backend, which it exists to keep out. */
void
_PG_init(void)
{
	if (process_shared_preload_libraries_in_progress)
		ereport(WARNING,
				(errmsg("traceprof_exporter need not be in shared_preload_libraries"),
				 errdetail("traceprof's workers load it themselves; preloaded, every backend maps libcurl."),
				 errhint("Preload traceprof only.")));
}

#define SCOPE_NAME "traceprof"

/*
 * One request's spans: their records, unpacked, and OTLP views of them.
 * Kept for the worker's life, so a round allocates nothing per span.
 */
typedef struct Batch
{
	char	   *records;		/* capacity records of TraceprofSpanSize() bytes */
	SpanAttributes *attrs;
	tp_span    *spans;
	tp_span   **span_list;		/* &spans[i], as the encoder takes them */
	uint64	   *ends;			/* the ring position after each span */
	int			count;
	int			capacity;
} Batch;

static Batch batch;

#define SAMPLES_PER_UPLOAD 8192

/*
 * A request stays within 4 MiB: an OpenTelemetry Collector refuses larger
 * gRPC requests by default, and 65536 spans with 64 kB texts would ask for
 * 4 GB.  A span takes at most its largest record, plus what encoding adds
 * (ids, times, attribute keys, the two Pyroscope links, which quote the
 * server's URL).  Only a raised max_query_length makes it bind (512 spans
 * of the default 1 kB take 1 MB).
 */
#define BATCH_BYTES (4 * 1024 * 1024)
#define SPAN_ENCODING_BYTES 4096

/*
 * Set by SIGTERM, and by a reload that moves the destination: a request in
 * flight, or its retry's wait, ends so that the worker exits, or takes the
 * new endpoint, at once and not after traceprof.otlp_timeout.  What it was
 * sending stays for the next round.
 */
static volatile sig_atomic_t interrupted = false;

/*
 * A reload during a request is applied where the request checks whether
 * to stop (request_must_stop), and stops it only when it changed where
 * requests go: stopped, a request the server had taken is sent again, so
 * any reload duplicated spans at the collector and samples in Pyroscope,
 * and reloads in a row stalled export.
 */
static StringInfoData destination;	/* the settings requests were built from */
static void (*describe_destination) (StringInfo out);
static bool reloaded;			/* since the worker last built its requests' settings */

static bool failing = false;	/* inside a streak of failed exports */
/* The last request failed (not refused): the collector cannot be reached. */
static bool collector_unreachable = false;
static char collector_warning[1024];	/* the last one logged, until a request has none */
static bool pyroscope_failing = false;

/* A batch holds samples of the CPU clock and of the wall clock: two profile types. */
#define KIND_CPU 0
#define KIND_WALL 1
#define KINDS 2

/*
 * A profile's samples lie within 10 s, as a Pyroscope SDK's do: Pyroscope
 * files a profile at its start, and Grafana looks for a span's profile
 * from 60 s before the span.  A long statement's samples, stored when it
 * ends, would otherwise move a batch of fresh samples back by its length.
 * Backends store their samples as their spans end, so a batch holds a few
 * such windows side by side (old and fresh samples interleaved), each
 * sent as a profile of its own; a sample that fits none ends the batch.
 */
#define PROFILE_WINDOW_NS (INT64CONST(10) * 1000 * 1000 * 1000)
#define WINDOWS 4

/* A part of a batch: one profile type of one window, a request of its own. */
#define PARTS (WINDOWS * KINDS)

/*
 * Backends may sample at different rates (a session's own sample_hz): a
 * part's header states the period most of its weight was taken at.
 */
#define BATCH_PERIODS 8

typedef struct PeriodWeight
{
	uint32		period_us;
	uint64		weight;
} PeriodWeight;

/* Samples gathered for one Pyroscope upload. */
typedef struct SampleBatch
{
	tp_profile *profiles[PARTS];	/* made as the first sample of a part comes */
	int			counts[PARTS];
	PeriodWeight periods[PARTS][BATCH_PERIODS];
	int			count;
	int			windows;		/* in use */
	int64		from_ns[WINDOWS];	/* the earliest time a window's samples measured */
	int64		until_ns[WINDOWS];	/* its latest sample's time: the end of its period */
	bool		stopped;		/* a sample fit no window, or no memory: it waits */
} SampleBatch;

/*
 * A batch read from the ring and not yet settled: each profile type goes in
 * a request of its own.  When one was taken and a later one interrupted
 * (SIGHUP, SIGTERM), the samples stay in the ring and the next round sends
 * only the parts not taken yet: Pyroscope would count a resent part twice.
 */
typedef struct PendingUpload
{
	bool		held;
	bool		more;			/* the batch stopped short of what the ring holds */
	uint64		upto;			/* ring position after the batch */
	uint64		from_ns[PARTS];
	uint64		until_ns[PARTS];
	int			taken;			/* samples in the parts the server took */
	int			dropped;		/* samples of parts taken only in part (413) */
	uint8_t    *pprof[PARTS];	/* NULL: nothing (more) to send, or no memory */
	size_t		len[PARTS];
	int			counts[PARTS];	/* samples not taken yet, per part */
} PendingUpload;

static PendingUpload pending;

/* Messages of common/ code, under the name of the worker that ran it. */
static void
log_to_server(const char *message)
{
	ereport(LOG, (errmsg("%s: %s", MyBgworkerEntry->bgw_name, message)));
}

/* Room for capacity spans (traceprof.export_batch_size changes on reload). */
static bool
batch_reserve(int capacity)
{
	if (capacity <= batch.capacity)
		return true;
	free(batch.records);
	free(batch.attrs);
	free(batch.spans);
	free(batch.span_list);
	free(batch.ends);
	batch.records = malloc(TraceprofSpanSize() * capacity);
	batch.attrs = malloc(sizeof(SpanAttributes) * capacity);
	batch.spans = malloc(sizeof(tp_span) * capacity);
	batch.span_list = malloc(sizeof(tp_span *) * capacity);
	batch.ends = malloc(sizeof(uint64) * capacity);
	batch.capacity = capacity;
	if (batch.records && batch.attrs && batch.spans && batch.span_list && batch.ends)
		return true;
	batch.capacity = 0;
	return false;
}


static void
batch_clear(void)
{
	for (int i = 0; i < batch.count; i++)
		span_view_release(&batch.attrs[i]);
	batch.count = 0;
}

/*
 * Resource attributes: service.name, then traceprof.resource_attributes,
 * then what those leave unset: host.name and service.instance.id (host and
 * port), so that the spans of servers sharing a service name, on one host
 * or several, can be told apart, and the SDK's name and version.
 */
static void
build_resource(tp_kvlist *resource)
{
	tp_kvlist	extra = {0};
	char		err[512];
	char		host[256];

	tp_kvlist_add(resource, "service.name", traceprof_service_name);
	if (!tp_kvlist_parse(traceprof_resource_attributes, TP_KV_PERCENT_DECODE, &extra, err, sizeof(err)))
		ereport(WARNING,
				(errmsg("traceprof.resource_attributes ignored: %s", err),
				 errhint("Expected key=value,key=value with %%XX-encoded values.")));
	for (size_t i = 0; i < extra.count; i++)
		if (tp_kvlist_get(resource, extra.items[i].key) == NULL)
			tp_kvlist_add(resource, extra.items[i].key, extra.items[i].value);
	tp_kvlist_free(&extra);
	if (tp_kvlist_get(resource, "host.name") == NULL && gethostname(host, sizeof(host)) == 0)
	{
		host[sizeof(host) - 1] = '\0';
		tp_kvlist_add(resource, "host.name", host);
	}
	if (tp_kvlist_get(resource, "service.instance.id") == NULL &&
		tp_kvlist_get(resource, "host.name") != NULL)
	{
		char	   *instance = psprintf("%s:%d", tp_kvlist_get(resource, "host.name"), PostPortNumber);

		tp_kvlist_add(resource, "service.instance.id", instance);
		pfree(instance);
	}
	if (tp_kvlist_get(resource, "telemetry.sdk.name") == NULL)
		tp_kvlist_add(resource, "telemetry.sdk.name", "traceprof");
	if (tp_kvlist_get(resource, "telemetry.sdk.version") == NULL)
		tp_kvlist_add(resource, "telemetry.sdk.version", TRACEPROF_VERSION);
}

/* Where spans go: the settings the OTLP target is built from, NUL-separated. */
static void
describe_otlp_destination(StringInfo out)
{
	appendStringInfo(out, "%d", traceprof_otlp_protocol);
	appendBinaryStringInfo(out, traceprof_otlp_endpoint, strlen(traceprof_otlp_endpoint) + 1);
	appendBinaryStringInfo(out, traceprof_otlp_ca_file, strlen(traceprof_otlp_ca_file) + 1);
	appendBinaryStringInfo(out, traceprof_otlp_client_certificate,
						   strlen(traceprof_otlp_client_certificate) + 1);
	appendBinaryStringInfo(out, traceprof_otlp_client_key, strlen(traceprof_otlp_client_key) + 1);
}

/* The same for profiles. */
static void
describe_pyroscope_destination(StringInfo out)
{
	const char *settings[] = {traceprof_pyroscope_url, traceprof_pyroscope_tenant_id, traceprof_pyroscope_ca_file,
	traceprof_pyroscope_basic_auth_user, traceprof_pyroscope_basic_auth_password};

	for (int i = 0; i < lengthof(settings); i++)
		appendBinaryStringInfo(out, settings[i], strlen(settings[i]) + 1);
}

/* Requests are built from the settings as they are now. */
static void
remember_destination(void)
{
	resetStringInfo(&destination);
	describe_destination(&destination);
}

/* Whether the settings as they are now send requests elsewhere. */
static bool
destination_moved(void)
{
	StringInfoData now;
	bool		moved;

	initStringInfo(&now);
	describe_destination(&now);
	moved = now.len != destination.len || memcmp(now.data, destination.data, now.len) != 0;
	pfree(now.data);
	return moved;
}

/* Apply the reload the postmaster asked for; the next round rebuilds from it. */
static void
apply_reload(void)
{
	ConfigReloadPending = false;
	reloaded = true;
	ProcessConfigFile(PGC_SIGHUP);
}

/*
 * What other processes ask every process for, which a worker that never
 * reaches CHECK_FOR_INTERRUPTS must do itself: absorb a ProcSignalBarrier
 * (DROP DATABASE, DROP TABLESPACE wait until every process has), log its
 * memory contexts.
 */
static inline bool
requests_pending(void)
{
	return ProcSignalBarrierPending || LogMemoryContextPending;
}

static void
answer_requests(void)
{
	if (ProcSignalBarrierPending)
		ProcessProcSignalBarrier();
	if (LogMemoryContextPending)
		ProcessLogMemoryContextInterrupt();
}

/*
 * The postmaster is gone (killed, crashed): as WL_EXIT_ON_PM_DEATH would.
 * A worker left running in a request to a slow collector, up to its
 * timeout and batch after batch, holds the shared memory that keeps the
 * server from starting again.  Cheap: a flag the death signal sets.
 */
static inline void
exit_if_orphaned(void)
{
	if (unlikely(!PostmasterIsAlive()))
		proc_exit(1);
}

/*
 * Asked during a request (libcurl's progress callback, a retry's wait):
 * stop for a shutdown, or for a reload that moved the destination; answer
 * other processes meanwhile.  Nothing may unwind through libcurl's frames:
 * an error in the reload is reported here and stops the request.
 */
static bool
request_must_stop(void)
{
	MemoryContext context = CurrentMemoryContext;

	exit_if_orphaned();
	if (interrupted || (!ConfigReloadPending && !requests_pending()))
		return interrupted;
	PG_TRY();
	{
		answer_requests();
		if (ConfigReloadPending)
		{
			apply_reload();
			if (destination_moved())
				interrupted = true;
		}
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		EmitErrorReport();
		FlushErrorState();
		interrupted = true;
	}
	PG_END_TRY();
	return interrupted;
}

static bool key_alone_warned = false;

static void
build_target(tp_otlp_target *target)
{
	remember_destination();
	memset(target, 0, sizeof(*target));
	target->protocol = (tp_otlp_protocol) traceprof_otlp_protocol;
	target->url = tp_otlp_traces_url(traceprof_otlp_endpoint, target->protocol, false);
	target->grpc_setting = "traceprof.otlp_protocol = 'grpc'";
	target->http_setting = "traceprof.otlp_protocol = 'http/protobuf'";
	target->timeout_ms = traceprof_otlp_timeout_ms;
	target->gzip = traceprof_otlp_compression == OTLP_COMPRESSION_GZIP;
	if (traceprof_otlp_ca_file[0] != '\0')
		target->ca_file = strdup(traceprof_otlp_ca_file);
	if (traceprof_otlp_client_certificate[0] != '\0')
	{
		target->client_cert = strdup(traceprof_otlp_client_certificate);
		if (traceprof_otlp_client_key[0] != '\0')
			target->client_key = strdup(traceprof_otlp_client_key);
	}
	else if (traceprof_otlp_client_key[0] != '\0' && !key_alone_warned)
		ereport(WARNING,
				(errmsg("traceprof span exporter: traceprof.otlp_client_key is ignored without traceprof.otlp_client_certificate")));
	/* Said once, until the settings are mended. */
	key_alone_warned = traceprof_otlp_client_certificate[0] == '\0' && traceprof_otlp_client_key[0] != '\0';
	target->cancel = &interrupted;
}

/*
 * pg_stat_activity while the network is used: state active, what is sent
 * (never the endpoint: its URL may hold a password), wait event Extension.
 */
static void
report_sending(const char *what)
{
	pgstat_report_activity(STATE_RUNNING, what);
	pgstat_report_wait_start(PG_WAIT_EXTENSION);
}

/*
 * An export that failed, or was refused in whole or part: counted, and
 * warned about once a streak (the counts are in traceprof.stats).
 */
static void
export_failed(const char *err, const char *warning, const char *detail)
{
	span_store_export_failed(err);
	if (!failing)
		ereport(WARNING, (errmsg("traceprof exporter: %s", warning), errdetail("%s", detail)));
	failing = true;
}

/* Spans per request: traceprof.export_batch_size, as far as BATCH_BYTES allows. */
static int
batch_size(void)
{
	Size		span_bytes = TraceprofSpanSize() + SPAN_ENCODING_BYTES + 2 * strlen(traceprof_pyroscope_url);

	return Max(1, Min(traceprof_export_batch_size, (int) (BATCH_BYTES / span_bytes)));
}

/*
 * What became of a batch's spans, in ring order: the first `settled` were
 * delivered or dropped; after a request that failed or was interrupted
 * (stopped) the rest stay in the ring for the next round.
 */
typedef struct BatchOutcome
{
	int			settled;
	int			delivered;
	int			dropped;
	bool		stopped;
	bool		refused;		/* the collector refused spans for good (not for size) */
} BatchOutcome;

/* Logged once per configuration: a proxy's body limit is met on every burst. */
static bool too_large_logged = false;

/*
 * The collector's size limit as its refusals taught it, kept while the
 * endpoint stays: later batches go in requests under it at once.
 */
static tp_size_limit size_limit;

static void send_spans(const tp_kvlist *resource, tp_otlp_target *target, TimestampTz deadline,
					   int first, int count, BatchOutcome *out);

/* The first half, then, unless a request failed, the second. */
static void
send_halves(const tp_kvlist *resource, tp_otlp_target *target, TimestampTz deadline,
			int first, int count, BatchOutcome *out)
{
	int			half = count / 2;

	send_spans(resource, target, deadline, first, half, out);
	if (!out->stopped)
		send_spans(resource, target, deadline, first + half, count - half, out);
}

/*
 * Send spans [first, first + count) of the batch in one request.  One the
 * collector refuses as too large (HTTP 413: a proxy's body limit, nginx's
 * is 1 MB) goes again in halves, down to single spans; a span refused
 * alone is dropped.  A request at least as large as one refused before is
 * halved unsent (size_limit).  With a deadline (not 0), no request
 * outlasts it.
 */
static void
send_spans(const tp_kvlist *resource, tp_otlp_target *target, TimestampTz deadline,
		   int first, int count, BatchOutcome *out)
{
	uint8_t    *body;
	size_t		len = 0;
	char		err[1024];
	char		warning[1200];
	tp_export_result result;

	if (deadline != 0)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

		if (left <= 0)
		{
			out->stopped = true;
			return;
		}
		target->timeout_ms = Min(traceprof_otlp_timeout_ms, left);
	}
	body = tp_otlp_encode_traces(resource, SCOPE_NAME, TRACEPROF_VERSION,
								 batch.span_list + first, count, &len);
	if (body != NULL && !tp_size_limit_allows(&size_limit, len, count))
	{
		free(body);
		send_halves(resource, target, deadline, first, count, out);
		return;
	}
	if (body != NULL)
	{
		report_sending("exporting spans");
		result = tp_otlp_send(target, body, len, err, sizeof(err));
		pgstat_report_wait_end();
		free(body);
		tp_size_limit_learn(&size_limit, len, count, tp_otlp_size_answer(result));
	}
	else
	{
		strlcpy(err, "out of memory while encoding spans", sizeof(err));
		result = TP_EXPORT_FAILED;
	}

	if (result == TP_EXPORT_TOO_LARGE && count > 1)
	{
		if (!too_large_logged)
			ereport(LOG,
					(errmsg("traceprof exporter: a request of %d spans (%zu bytes%s) was refused as too large; "
							"sending its spans in smaller requests", count, len,
							target->gzip ? " before compression" : ""),
					 errdetail("%s", err),
					 errhint("Lower traceprof.export_batch_size, or raise the body limit of the collector or proxy.")));
		too_large_logged = true;
		send_halves(resource, target, deadline, first, count, out);
		return;
	}
	if (result == TP_EXPORT_TOO_LARGE)
	{
		char		message[1100];

		snprintf(message, sizeof(message), "a span too large for the collector even alone was dropped: %s", err);
		out->dropped++;
		out->settled++;
		export_failed(message, message,
					  "Requests refused as too large go again in halves; a span refused alone is dropped and counted "
					  "in traceprof.stats, without a warning until an export succeeds.");
		return;
	}
	if (result == TP_EXPORT_OK && target->rejected_spans > 0)
	{
		/* A partial success: the refused spans are dropped, like a rejection's. */
		int			refused = (int) Min(target->rejected_spans, (int64) count);

		out->delivered += count - refused;
		out->dropped += refused;
		out->settled += count;
		export_failed(err, err, "Refused spans are dropped and counted in traceprof.stats, "
					  "without a warning until an export is taken whole.");
		return;
	}
	if (result == TP_EXPORT_OK)
	{
		out->delivered += count;
		out->settled += count;
		/* A collector's warning may come with every request: logged when it changes. */
		if (err[0] != '\0' && strncmp(err, collector_warning, sizeof(collector_warning) - 1) != 0)
			ereport(LOG, (errmsg("traceprof exporter: %s", err),
						  errdetail("Logged again only when the collector's warning changes.")));
		strlcpy(collector_warning, err, sizeof(collector_warning));
		return;
	}
	if (result == TP_EXPORT_REJECTED)
	{
		/* Resending what the collector refused would block the ring forever. */
		out->dropped += count;
		out->settled += count;
		out->refused = true;
		snprintf(warning, sizeof(warning), "%d span%s rejected by the collector and dropped: %s",
				 count, count == 1 ? "" : "s", err);
		export_failed(err, warning,
					  "Further rejections are counted in traceprof.stats without a warning until an export succeeds.");
		return;
	}
	out->stopped = true;
	if (interrupted)
		return;					/* the spans stay for the next round */
	collector_unreachable = true;
	snprintf(warning, sizeof(warning), "cannot export spans: %s", err);
	export_failed(err, warning,
				  "Spans stay in shared memory and are retried; when it fills, new spans are dropped and counted in traceprof.stats.");
}

/*
 * One batch: up to traceprof.export_batch_size spans, in one request or,
 * refused as too large, several.  Returns the number of spans read when
 * all were settled, 0 when the collector refused some (no more this
 * round), -1 when a request failed (the spans not settled stay).
 */
static int
export_one_batch(const tp_kvlist *resource, tp_otlp_target *target, TimestampTz deadline)
{
	int			count;
	uint64		upto;
	BatchOutcome outcome = {0};

	if (!batch_reserve(batch_size()))
	{
		span_store_export_failed("out of memory for a batch of spans");
		return -1;
	}
	upto = span_store_read_unexported(batch.records, batch.ends, batch_size(), &batch.count);
	for (int i = 0; i < batch.count; i++)
	{
		span_view((TraceprofSpan *) (batch.records + i * TraceprofSpanSize()), true, true,
				  &batch.attrs[i], &batch.spans[i]);
		batch.span_list[i] = &batch.spans[i];
	}
	if (batch.count == 0)
	{
		span_store_mark_exported(upto, 0);	/* only skipped slots, if any */
		return 0;
	}
	count = batch.count;
	send_spans(resource, target, deadline, 0, count, &outcome);
	batch_clear();
	if (outcome.settled == 0)
		return -1;
	/* A request after them failed: the rest stay in the ring. */
	if (outcome.settled < count)
		upto = batch.ends[outcome.settled - 1];
	span_store_mark_exported(upto, outcome.delivered);
	if (outcome.dropped > 0)
		span_store_count_refused(outcome.dropped);
	if (outcome.stopped)
		return -1;
	collector_unreachable = false;
	if (outcome.dropped == 0)
	{
		if (failing)
		{
			char		shown[512];

			tp_http_url_shown(target->url, shown, sizeof(shown));	/* no secret it may hold */
			ereport(LOG, (errmsg("traceprof exporter: export to %s resumed", shown)));
		}
		failing = false;
	}
	return outcome.refused ? 0 : count;
}

static void
build_pyroscope(tp_pyroscope_config *cfg)
{
	remember_destination();
	memset(cfg, 0, sizeof(*cfg));
	cfg->enabled = traceprof_pyroscope_url[0] != '\0';
	cfg->server_address = strdup(traceprof_pyroscope_url);
	/*
	 * Grafana links a span to profiles whose service_name is its service.name.
	 * traceprof.application_name is checked when set; the service name may
	 * need making into one.
	 */
	cfg->application_name = tp_pyroscope_application_name(traceprof_pyroscope_application(),
														  traceprof_application_name[0] != '\0' ?
														  "traceprof.application_name" :
														  "traceprof.service_name");
	if (traceprof_pyroscope_tenant_id[0] != '\0')
		cfg->tenant_id = strdup(traceprof_pyroscope_tenant_id);
	if (traceprof_pyroscope_ca_file[0] != '\0')
		cfg->ca_file = strdup(traceprof_pyroscope_ca_file);
	if (traceprof_pyroscope_basic_auth_user[0] != '\0')
	{
		cfg->basic_auth_user = strdup(traceprof_pyroscope_basic_auth_user);
		cfg->basic_auth_password = strdup(traceprof_pyroscope_basic_auth_password);
	}
	tp_pyroscope_parse_tags(traceprof_pyroscope_tags, "traceprof.pyroscope_tags", &cfg->tags);
	cfg->timeout_ms = traceprof_otlp_timeout_ms;
	cfg->cancel = &interrupted;
}

static void
count_period(PeriodWeight *periods, uint32 period_us, uint32 weight)
{
	for (int i = 0; i < BATCH_PERIODS; i++)
		if (periods[i].period_us == period_us || periods[i].weight == 0)
		{
			periods[i].period_us = period_us;
			periods[i].weight += weight;
			return;
		}
	/* More rates than slots in one batch: those seen after 8 others go uncounted. */
}

static uint64
usual_period_ns(const PeriodWeight *periods)
{
	const PeriodWeight *usual = &periods[0];

	for (int i = 1; i < BATCH_PERIODS; i++)
		if (periods[i].weight > usual->weight)
			usual = &periods[i];
	return (uint64) usual->period_us * 1000;
}

/*
 * The window a sample measuring [from, until] goes in: one it keeps within
 * PROFILE_WINDOW_NS, else a new one; -1 when none is left.
 */
static int
window_for(SampleBatch *batch, int64 from, int64 until)
{
	int			w;

	for (w = 0; w < batch->windows; w++)
		if (Max(batch->until_ns[w], until) - Min(batch->from_ns[w], from) <= PROFILE_WINDOW_NS)
			break;
	if (w == WINDOWS)
		return -1;
	if (w == batch->windows)
	{
		batch->windows++;
		batch->from_ns[w] = from;
		batch->until_ns[w] = until;
	}
	batch->from_ns[w] = Min(batch->from_ns[w], from);
	batch->until_ns[w] = Max(batch->until_ns[w], until);
	return w;
}

static bool
add_sample(const TraceprofSample *sample, void *arg)
{
	SampleBatch *batch = arg;
	const char *frames[TRACEPROF_MAX_FRAMES];
	tp_sample_labels labels;
	int			kind = sample->wall ? KIND_WALL : KIND_CPU;
	int			window;
	int			part;

	/*
	 * A sample is taken when its timer expires: what it measured is the
	 * period before it (its weight of periods, after overruns).
	 */
	window = window_for(batch, sample->time_ns - (int64) sample->period_us * 1000 * Max(sample->weight, 1),
						sample->time_ns);
	part = window * KINDS + kind;
	if (window < 0 ||
		(batch->profiles[part] == NULL &&
		 (batch->profiles[part] = tp_profile_new(kind == KIND_WALL ? "wall" : "cpu", 0)) == NULL))
	{
		batch->stopped = true;
		return false;
	}
	for (uint32 i = 0; i < sample->depth; i++)
		frames[i] = function_names_get(sample->frames[i]);
	memset(&labels, 0, sizeof(labels));
	/* Left zero, the writer sets no trace_id label. */
	if (traceprof_profile_trace_id)
		memcpy(labels.trace_id, sample->trace_id, TP_TRACE_ID_BYTES);
	memcpy(labels.span_id, sample->span_id, TP_SPAN_ID_BYTES);
	/* Backends may sample at different rates: each sample keeps its own. */
	tp_profile_add_named(batch->profiles[part], frames, sample->depth,
						 &labels, sample->weight,
						 (uint64) sample->period_us * 1000,
						 traceprof_profile_span_name && sample->span_name_id ?
						 function_names_get(sample->span_name_id) : NULL);
	count_period(batch->periods[part], sample->period_us, sample->weight);
	batch->counts[part]++;
	batch->count++;
	return true;
}

/*
 * Read the next batch from the ring and encode it into pending.  False when
 * not even its first profile could be made (out of memory): the samples
 * stay in the ring.
 */
static bool
read_batch(void)
{
	SampleBatch batch = {0};

	memset(&pending, 0, sizeof(pending));
	pending.upto = sample_store_read_unexported(add_sample, &batch, SAMPLES_PER_UPLOAD);
	pending.held = batch.count > 0 || !batch.stopped;
	pending.more = batch.stopped || batch.count == SAMPLES_PER_UPLOAD;
	for (int part = 0; part < PARTS; part++)
	{
		int			window = part / KINDS;

		pending.counts[part] = batch.counts[part];
		if (batch.profiles[part] == NULL)
			continue;
		pending.from_ns[part] = batch.from_ns[window];
		pending.until_ns[part] = batch.until_ns[window];
		/* Each sample carries its period; the header's is the usual one. */
		tp_profile_set_window(batch.profiles[part], pending.from_ns[part], pending.until_ns[part]);
		tp_profile_set_period(batch.profiles[part], usual_period_ns(batch.periods[part]));
		pending.pprof[part] = tp_profile_pprof(batch.profiles[part], &pending.len[part]);
		tp_profile_free(batch.profiles[part]);
	}
	return pending.held;
}

/*
 * Of stored samples, those of part (of total) when a pprof went only in
 * part: the pprof counts weights (a sample stands for 1 + its timer
 * overruns), so in proportion, and at least one.
 */
static int
share_of(int stored, uint64 part, uint64 total)
{
	int			n = (int) (stored * ((double) part / (double) total) + 0.5);

	return Min(stored, Max(n, 1));
}

/* A part of the pending batch that will not go: its samples count as dropped. */
static void
drop_part(int part)
{
	pending.dropped += pending.counts[part];
	pending.counts[part] = 0;
	free(pending.pprof[part]);
	pending.pprof[part] = NULL;
}

/*
 * Send the pending parts not taken yet, in order, up to the first failure;
 * a part taken only in part (refused as too large, then split), or refused
 * for itself, is settled, its dropped samples counted, and the next part
 * goes.
 */
static bool
send_pending(tp_pyroscope_config *cfg, char *err, size_t errlen)
{
	tp_pyroscope_counts counts;
	int			dropped;
	int			rest;
	char		partial[1024] = "";	/* why a part was not taken whole */

	for (int part = 0; part < PARTS; part++)
	{
		if (pending.counts[part] == 0)
			continue;
		/* A part refused with a Retry-After beyond the budget: the rest waits for it. */
		if (tp_pyroscope_retry_wait_ms(cfg) > 0)
		{
			if (err[0] == '\0')
				strlcpy(err, "not sent: the server asked to wait (Retry-After)", errlen);
			return false;
		}
		if (pending.pprof[part] == NULL)
		{
			strlcpy(err, "out of memory while encoding samples", errlen);
			return false;
		}
		if (!tp_pyroscope_ingest_counted(cfg, pending.pprof[part], pending.len[part],
										 pending.from_ns[part], pending.until_ns[part], &counts, err, errlen))
		{
			if (counts.taken == 0 && counts.refused)
			{
				/* Refused for itself (a 400): dropped, and the other parts go. */
				drop_part(part);
				strlcpy(partial, err, sizeof(partial));
				continue;
			}
			if (counts.taken == 0)
			{
				free(counts.rest);
				if (interrupted)
					return false;	/* cut off by a reload or shutdown: it goes again */
				/* Nothing went: dropped; what becomes of the parts not sent yet, upload_samples says. */
				drop_part(part);
				return false;
			}
			if (counts.rest != NULL)
			{
				/*
				 * Interrupted while it went in parts: what was taken counts
				 * as exported, and only the samples not sent yet go in the
				 * next round (the others would count twice).
				 */
				uint64		total = counts.taken + counts.dropped + counts.rest_samples;

				rest = Min(share_of(pending.counts[part], counts.rest_samples, total),
						   pending.counts[part] - 1);
				dropped = counts.dropped == 0 ? 0 :
					Min(share_of(pending.counts[part], counts.dropped, total),
						pending.counts[part] - rest - 1);
				pending.taken += pending.counts[part] - rest - dropped;
				pending.dropped += dropped;
				pending.counts[part] = rest;
				free(pending.pprof[part]);
				pending.pprof[part] = counts.rest;
				pending.len[part] = counts.rest_len;
				return false;
			}
			/* Refused as too large, then taken in part: settled, never sent again. */
			dropped = share_of(pending.counts[part], counts.dropped, counts.taken + counts.dropped);
			pending.taken += pending.counts[part] - dropped;
			pending.dropped += dropped;
			pending.counts[part] = 0;
			free(pending.pprof[part]);
			pending.pprof[part] = NULL;
			strlcpy(partial, err, sizeof(partial));
			continue;
		}
		pending.taken += pending.counts[part];
		pending.counts[part] = 0;
		free(pending.pprof[part]);
		pending.pprof[part] = NULL;
	}
	if (partial[0] != '\0')
		strlcpy(err, partial, errlen);
	return partial[0] == '\0';
}

/*
 * The held batch settled: the parts the server took count as exported, the
 * others as dropped.  Returns the samples dropped.
 */
static int
settle_batch(void)
{
	int			refused = pending.dropped;

	for (int part = 0; part < PARTS; part++)
	{
		refused += pending.counts[part];
		free(pending.pprof[part]);
		pending.pprof[part] = NULL;
	}
	pending.held = false;
	sample_store_mark_exported(pending.upto, pending.taken);
	if (refused > 0)
		sample_store_mark_rejected(pending.upto, refused);
	return refused;
}

/* A held batch that will not go (the worker stops, uploads are switched off): dropped, said so. */
static void
give_up_held_batch(const char *why)
{
	int			refused = settle_batch();

	if (refused > 0)
		ereport(LOG,
				(errmsg("traceprof profile uploader: %d samples not uploaded yet were dropped: %s",
						refused, why),
				 errdetail("They are counted in traceprof.stats.samples_dropped.")));
}

/* Whether parts of the held batch were not sent yet. */
static bool
parts_left(void)
{
	for (int part = 0; part < PARTS; part++)
		if (pending.counts[part] > 0)
			return true;
	return false;
}

/*
 * One upload of stored samples as pprof.  A part the server refuses for
 * itself (400) drops its samples (counted) and the other parts still go.
 * A part that fails otherwise is dropped too, and so are the parts not
 * sent yet, when the server fails (no answer, an error after the
 * retries): samples are plentiful, and resending to a failing server would
 * block the ring.  When it asked to wait longer than the upload's budget
 * (Retry-After), the parts not sent yet wait for that, held.  The parts
 * taken count as exported.  Returns the number of samples settled.
 */
static int
upload_samples(tp_pyroscope_config *cfg)
{
	char		err[1024] = "";
	bool		ok;
	bool		hold;
	int			refused;

	exit_if_orphaned();
	if (!pending.held && !read_batch())
		return 0;
	report_sending("uploading profiles");
	ok = send_pending(cfg, err, sizeof(err));
	pgstat_report_wait_end();
	if (!ok && interrupted)
		return 0;				/* the parts not taken go in the next round */
	if (ok)
	{
		settle_batch();
		if (pyroscope_failing && pending.taken > 0)
			ereport(LOG, (errmsg("traceprof profile uploader: profile upload resumed")));
		pyroscope_failing = pyroscope_failing && pending.taken == 0;
		return pending.taken;
	}
	hold = tp_pyroscope_retry_wait_ms(cfg) > 0 && parts_left();
	span_store_upload_failed(err);
	if (!pyroscope_failing)
		ereport(WARNING,
				(errmsg("traceprof profile uploader: cannot upload profiles: %s", err),
				 errdetail("Samples that cannot be uploaded are dropped and counted in traceprof.stats%s.",
						   hold ? "; the rest of this batch waits for the server's Retry-After" : "")));
	pyroscope_failing = true;
	if (hold)
		return 0;
	refused = settle_batch();
	return pending.taken + refused;
}

/*
 * What both workers do first.  No database: the connection only gives the
 * worker a row in pg_stat_activity, where operators see whether it is
 * waiting or sending.
 */
static void
on_sigterm(SIGNAL_ARGS)
{
	interrupted = true;
	SignalHandlerForShutdownRequest(postgres_signal_arg);
}

/*
 * The server's traceprof and this library must agree on every layout:
 * after a new version was installed under a running server, a worker
 * started before the restart says so, once, and idles until shutdown
 * (restarted, it would say so every 10 s), touching nothing of traceprof.
 */
static void
idle_as_another_build(void)
{
	ereport(WARNING,
			(errmsg("traceprof: the %s cannot run: its library is of another build than the traceprof the server loaded",
					MyBgworkerEntry->bgw_name),
			 errdetail("The server loaded %s; %s is %s.", traceprof_build_id,
					   MyBgworkerEntry->bgw_library_name, TRACEPROF_BUILD_ID),
			 errhint("Restart the server after installing traceprof.")));
	while (!interrupted)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	proc_exit(0);
}

/* describe: the settings that say where this worker's requests go. */
static void
start_worker(void (*describe) (StringInfo out))
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, on_sigterm);
	/*
	 * No query to cancel: a pg_cancel_backend() (a job cancelling whatever
	 * is "active" too long) would stay pending and make the worker's next
	 * LOG or WARNING an ERROR, ending it (errfinish checks for interrupts).
	 */
	pqsignal(SIGINT, SIG_IGN);
	BackgroundWorkerUnblockSignals();
	if (strcmp(traceprof_build_id, TRACEPROF_BUILD_ID) != 0)
		idle_as_another_build();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	/* This library's copy of common/log.c: traceprof's, which it calls into, warns nothing here. */
	tp_log_set_sink(log_to_server);
	initStringInfo(&destination);
	describe_destination = describe;
	tp_http_set_stop_check(request_must_stop);
}

/*
 * Wait for the next round; true when the configuration was reloaded
 * meanwhile.  A reload applied during the last round (a drain it ended)
 * needs no wait: the next round starts at once.
 */
static bool
wait_round(long timeout_ms)
{
	pgstat_report_activity(STATE_IDLE, NULL);
	if (!reloaded)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	answer_requests();
	interrupted = ShutdownRequestPending;
	if (ConfigReloadPending)
		apply_reload();
	if (!reloaded)
		return false;
	reloaded = false;
	return true;
}

/*
 * Drain full batches; stop at the first failure until the next round, and
 * wait out a Retry-After the last export could not.  With a deadline (not
 * 0), every export's budget ends there too.  In a round (no deadline), a
 * reload during a request ends the drain, so that the next batches go with
 * the new settings: a backlog drained in full batches never came back to
 * the round that applies them.  The shutdown's drain goes on as it was.
 */
static void
export_spans(const tp_kvlist *resource, tp_otlp_target *target, TimestampTz deadline)
{
	while (traceprof_exporting && !*target->cancel && tp_otlp_retry_wait_ms(target) == 0)
	{
		exit_if_orphaned();
		if (deadline != 0 ? GetCurrentTimestamp() >= deadline : reloaded)
			return;
		if (export_one_batch(resource, target, deadline) != batch_size())
			return;
	}
}

/*
 * At shutdown, what waits in the ring would be lost with shared memory:
 * the last drains within FINAL_EXPORT_MS in all (the postmaster waits for
 * us), unless the collector could not be reached at the last request (one
 * that refused spans, answering, is tried).
 */
#define FINAL_EXPORT_MS 2000
#define FINAL_POLL_MS 10
#define FINAL_QUIET_MS 200

/*
 * A fast shutdown signals the backends when it signals us: a statement it
 * ends stores its span as its backend exits, after our first drain.  So
 * drain again while other processes of the server run and keep exiting or
 * storing spans, until FINAL_QUIET_MS pass without either.  The count holds
 * the workers (ours among them) and walsenders, which the postmaster
 * signals only once we have exited.  A stray SIGTERM ends no backend: it
 * costs FINAL_QUIET_MS, or the whole FINAL_EXPORT_MS while spans keep coming.
 */
static void
export_remaining_spans(const tp_kvlist *resource, tp_otlp_target *target)
{
	static volatile sig_atomic_t not_cancelled = 0;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz deadline = TimestampTzPlusMilliseconds(now, FINAL_EXPORT_MS);
	TimestampTz last_change = now;
	SpanStoreStats stats;
	uint64		created = 0;
	int			others = -1;

	if (!traceprof_exporting)
		return;
	target->cancel = &not_cancelled;
	tp_http_set_stop_check(NULL);
	while (!collector_unreachable && tp_otlp_retry_wait_ms(target) == 0 && now < deadline)
	{
		int			running;

		export_spans(resource, target, deadline);
		span_store_get_stats(&stats);
		running = CountDBBackends(InvalidOid) - 1;
		now = GetCurrentTimestamp();
		if (stats.created != created || running != others)
			last_change = now;
		created = stats.created;
		others = running;
		if (stats.pending == 0 &&
			(others == 0 || TimestampDifferenceExceeds(last_change, now, FINAL_QUIET_MS)))
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 FINAL_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		now = GetCurrentTimestamp();
	}
}

/*
 * The target after a reload.  A Retry-After, and what its refusals taught
 * of its size limit, still hold for the same collector: only a new
 * endpoint or protocol is tried at once, with any size.
 */
static void
rebuild_target(tp_otlp_target *target)
{
	tp_otlp_target old = *target;

	bool		same_collector;

	build_target(target);
	too_large_logged = false;
	same_collector = old.protocol == target->protocol && old.url != NULL && target->url != NULL &&
		strcmp(old.url, target->url) == 0;
	if (same_collector)
		target->retry_not_before_ms = old.retry_not_before_ms;
	else
	{
		/* A new collector's first failure or warning is news: logged. */
		failing = false;
		collector_unreachable = false;
		collector_warning[0] = '\0';
	}
	/* Sizes are learnt uncompressed: compression changes what passes. */
	if (!same_collector || old.gzip != target->gzip)
		memset(&size_limit, 0, sizeof(size_limit));
	tp_otlp_target_close(&old);
	free(old.url);
	free(old.ca_file);
	free(old.client_cert);
	free(old.client_key);
}

/* Spans left in the ring when the worker stops: lost if the server stops too. */
static void
report_unsent_spans(void)
{
	SpanStoreStats stats;

	if (!traceprof_exporting)
		return;
	span_store_get_stats(&stats);
	if (stats.pending > 0)
		ereport(LOG,
				(errmsg("traceprof exporter: stopping with spans not exported (%lld ring slots)",
						(long long) stats.pending),
				 errdetail("At a server shutdown they are lost with shared memory; an exporter started again sends them.")));
}

void
traceprof_exporter_main(Datum arg)
{
	tp_kvlist	resource = {0};
	tp_otlp_target target;

	/*
	 * Encoding a batch allocates and frees about a megabyte.  By default glibc
	 * maps and unmaps blocks that large on every round, and page faults took
	 * a sixth of this worker's CPU; keep them in the heap instead.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
	start_worker(describe_otlp_destination);
	span_store_set_exporter_latch(MyLatch);

	build_resource(&resource);
	build_target(&target);
	span_store_set_exporting(traceprof_exporting);
	while (!ShutdownRequestPending)
	{
		if (wait_round(traceprof_export_interval_ms))
		{
			uint64		abandoned;

			tp_kvlist_free(&resource);
			build_resource(&resource);
			rebuild_target(&target);
			abandoned = span_store_set_exporting(traceprof_exporting);
			if (abandoned > 0)
				ereport(LOG,
						(errmsg("traceprof exporter: export switched off with %llu spans not exported",
								(unsigned long long) abandoned),
						 errdetail("They are counted in traceprof.stats.spans_dropped, and stay in traceprof.spans until overwritten.")));
		}
		export_spans(&resource, &target, 0);
	}
	export_remaining_spans(&resource, &target);
	/* Our latch is gone with us: a writer setting it would signal another process. */
	span_store_set_exporter_latch(NULL);
	report_unsent_spans();

	/*
	 * Exit code 1: the postmaster starts the worker again after
	 * bgw_restart_time, so a stray SIGTERM does not end export until the
	 * next server restart (at shutdown nothing is restarted anyway).
	 */
	proc_exit(1);
}

void
traceprof_profile_uploader_main(Datum arg)
{
	tp_pyroscope_config pyroscope;
	TimestampTz last_upload = GetCurrentTimestamp();

	start_worker(describe_pyroscope_destination);
	build_pyroscope(&pyroscope);
	sample_store_set_uploading(pyroscope.enabled);
	while (!ShutdownRequestPending)
	{
		if (wait_round(traceprof_upload_interval_ms))
		{
			/*
			 * A Retry-After, and what its refusals taught of its size limit,
			 * still hold for the same server, as for spans; another server
			 * is tried at once, with any size.
			 */
			long		not_before = pyroscope.retry_not_before_ms;
			tp_size_limit size_limit = pyroscope.size_limit;
			uint64		abandoned;
			char	   *server = pstrdup(pyroscope.server_address ? pyroscope.server_address : "");

			tp_pyroscope_config_free(&pyroscope);
			build_pyroscope(&pyroscope);
			if (pyroscope.server_address != NULL && strcmp(server, pyroscope.server_address) == 0)
			{
				pyroscope.retry_not_before_ms = not_before;
				pyroscope.size_limit = size_limit;
			}
			pfree(server);
			/* First: settled, the held batch is no longer waiting in the ring. */
			if (!pyroscope.enabled && pending.held)
				give_up_held_batch("profile uploads were switched off");
			abandoned = sample_store_set_uploading(pyroscope.enabled);
			if (abandoned > 0)
				ereport(LOG,
						(errmsg("traceprof profile uploader: uploads switched off with %llu samples not uploaded",
								(unsigned long long) abandoned),
						 errdetail("They are counted in traceprof.stats.samples_dropped, and stay for traceprof.profile() until overwritten.")));
		}

		/*
		 * A Retry-After the last upload could not wait out holds the samples
		 * in shared memory until it has passed.
		 */
		if (pyroscope.enabled && tp_pyroscope_retry_wait_ms(&pyroscope) == 0 &&
			TimestampDifferenceExceeds(last_upload, GetCurrentTimestamp(),
									   traceprof_upload_interval_ms))
		{
			/*
			 * A Retry-After met on the way stops the drain: the next batch
			 * would fail without being sent, and be dropped.  So does a
			 * failed upload: the next would wait out a timeout too.  A
			 * reload stops it too, and it goes on at once with the new
			 * settings (see export_spans).
			 */
			while (!ShutdownRequestPending && !reloaded &&
				   upload_samples(&pyroscope) > 0 && pending.more && !pyroscope_failing &&
				   tp_pyroscope_retry_wait_ms(&pyroscope) == 0)
				;
			/* Only a drain the reload cut short goes on at once. */
			if (!reloaded || !pending.more)
				last_upload = GetCurrentTimestamp();
		}
	}
	/*
	 * A batch interrupted in parts is settled: restarted after a stray
	 * SIGTERM, the worker would read it again and resend the parts taken.
	 */
	if (pending.held)
		give_up_held_batch("the worker stopped in the middle of their upload");
	proc_exit(1);				/* restarted like the span exporter */
}
