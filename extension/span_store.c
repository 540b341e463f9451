/*
 * span_store.c - finished spans in shared memory, plus export bookkeeping.
 *
 * The spans live in a shm_ring: backends never wait to store one.  With an
 * OTLP endpoint configured, spans not yet exported are kept and new ones are
 * dropped (and counted) when the ring is full; without one, the ring simply
 * retains the most recent traceprof.max_spans spans for SQL.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/shmem.h"

#include "shm_ring.h"
#include "traceprof.h"

typedef struct SpanStore
{
	pg_atomic_uint64 export_failures;
	pg_atomic_uint64 malformed;
	Latch	   *exporter_latch;
	slock_t		mutex;			/* protects the fields below */
	TimestampTz last_export;
	TimestampTz last_failure;
	TimestampTz stats_reset;
	char		last_error[256];
} SpanStore;

static SpanStore *store;
static ShmRing *ring;

Size
span_store_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(SpanStore)),
					shm_ring_size(traceprof_max_spans, TraceprofSpanSize()));
}

void
span_store_shmem_startup(void)
{
	bool		found;

	store = ShmemInitStruct("traceprof spans", span_store_shmem_size(), &found);
	ring = (ShmRing *) ((char *) store + MAXALIGN(sizeof(SpanStore)));
	if (found)
		return;
	pg_atomic_init_u64(&store->export_failures, 0);
	pg_atomic_init_u64(&store->malformed, 0);
	store->exporter_latch = NULL;
	SpinLockInit(&store->mutex);
	store->last_export = 0;
	store->last_failure = 0;
	store->stats_reset = GetCurrentTimestamp();
	store->last_error[0] = '\0';
	shm_ring_init(ring, traceprof_max_spans, TraceprofSpanSize());
}

bool
traceprof_export_enabled(void)
{
	return traceprof_otlp_endpoint != NULL && traceprof_otlp_endpoint[0] != '\0';
}

void
span_store_write(const TraceprofSpan *span)
{
	uint64		pending;
	Latch	   *exporter;

	if (store == NULL)
		return;
	if (!shm_ring_write(ring, span, offsetof(TraceprofSpan, query) + span->query_len + 1,
						traceprof_export_enabled(), &pending))
		return;
	/*
	 * Wake the exporter early when a quarter of the ring waits for it.  The
	 * latch is read once: an exiting exporter clears it at any moment.
	 */
	exporter = ((volatile SpanStore *) store)->exporter_latch;
	if (traceprof_export_enabled() && exporter != NULL &&
		pending == (uint64) Max(traceprof_max_spans / 4, 1))
		SetLatch(exporter);
}

void
span_store_count_malformed(void)
{
	if (store != NULL)
		pg_atomic_fetch_add_u64(&store->malformed, 1);
}

typedef struct SpanVisit
{
	SpanVisitor visit;
	void	   *arg;
} SpanVisit;

/* A copy that raced a writer was rejected by the ring; terminate anyway. */
static bool
visit_span(const void *record, void *arg)
{
	SpanVisit  *v = arg;
	TraceprofSpan *span = (TraceprofSpan *) record;

	span->query_len = Min(Max(span->query_len, 0), traceprof_max_query_length);
	span->query[span->query_len] = '\0';
	return v->visit(span, v->arg);
}

void
span_store_scan_retained(SpanVisitor visit, void *arg)
{
	SpanVisit	v = {visit, arg};
	void	   *buf = palloc(TraceprofSpanSize());

	shm_ring_scan_retained(ring, buf, visit_span, &v);
	pfree(buf);
}

uint64
span_store_read_unexported(SpanVisitor visit, void *arg, int max)
{
	SpanVisit	v = {visit, arg};
	void	   *buf = palloc(TraceprofSpanSize());
	uint64		upto = shm_ring_read_unexported(ring, buf, visit_span, &v, max);

	pfree(buf);
	return upto;
}

void
span_store_mark_exported(uint64 upto, int count)
{
	shm_ring_mark_exported(ring, upto, count);
	if (count == 0)
		return;
	SpinLockAcquire(&store->mutex);
	store->last_export = GetCurrentTimestamp();
	SpinLockRelease(&store->mutex);
}

/* The collector refused these spans for good: move past them as dropped. */
void
span_store_mark_rejected(uint64 upto, int count)
{
	shm_ring_mark_rejected(ring, upto, count);
}

void
span_store_export_failed(const char *message)
{
	pg_atomic_fetch_add_u64(&store->export_failures, 1);
	SpinLockAcquire(&store->mutex);
	store->last_failure = GetCurrentTimestamp();
	strlcpy(store->last_error, message, sizeof(store->last_error));
	SpinLockRelease(&store->mutex);
}

void
span_store_set_exporter_latch(Latch *latch)
{
	store->exporter_latch = latch;
}

void
span_store_get_stats(SpanStoreStats *stats)
{
	ShmRingCounts counts;

	shm_ring_counts(ring, traceprof_export_enabled(), &counts);
	stats->created = counts.written;
	stats->dropped = counts.dropped;
	stats->exported = counts.exported;
	stats->pending = counts.pending;
	stats->capacity = counts.capacity;
	stats->export_failures = pg_atomic_read_u64(&store->export_failures);
	stats->malformed_contexts = pg_atomic_read_u64(&store->malformed);
	SpinLockAcquire(&store->mutex);
	stats->last_export = store->last_export;
	stats->last_failure = store->last_failure;
	stats->stats_reset = store->stats_reset;
	memcpy(stats->last_error, store->last_error, sizeof(stats->last_error));
	SpinLockRelease(&store->mutex);
}

/* Forget counters and hide retained spans from SQL; export is unaffected. */
void
span_store_reset(void)
{
	shm_ring_reset(ring);
	pg_atomic_write_u64(&store->export_failures, 0);
	pg_atomic_write_u64(&store->malformed, 0);
	SpinLockAcquire(&store->mutex);
	store->last_error[0] = '\0';
	store->last_export = 0;
	store->last_failure = 0;
	store->stats_reset = GetCurrentTimestamp();
	SpinLockRelease(&store->mutex);
}
