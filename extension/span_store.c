/*
 * span_store.c - the shared-memory ring of finished spans.
 *
 * Writers (backends) never wait: a compare-and-swap claims a position, the
 * span is copied into its slot, and the slot's sequence number publishes
 * it.  Readers copy a slot and check its sequence number before and after
 * (a seqlock), so they never block writers either.
 *
 * With an OTLP endpoint configured, spans not yet exported are kept and new
 * ones are dropped (and counted) when the ring is full; without one, the
 * ring simply retains the most recent traceprof.max_spans spans for SQL.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/shmem.h"

#include "traceprof.h"

typedef struct SpanSlot
{
	pg_atomic_uint64 seq;		/* position + 1 when published, 0 while written */
	char		data[FLEXIBLE_ARRAY_MEMBER];
} SpanSlot;

typedef struct SpanStore
{
	pg_atomic_uint64 next_write;	/* next position to claim */
	pg_atomic_uint64 exported_upto; /* positions below were exported */
	pg_atomic_uint64 view_base;		/* positions below were reset away */
	pg_atomic_uint64 created;
	pg_atomic_uint64 dropped;
	pg_atomic_uint64 exported;
	pg_atomic_uint64 export_failures;
	pg_atomic_uint64 malformed;
	Latch	   *exporter_latch;
	slock_t		mutex;			/* protects the fields below */
	TimestampTz last_export;
	TimestampTz last_failure;
	TimestampTz stats_reset;
	char		last_error[256];
	char		slots[FLEXIBLE_ARRAY_MEMBER];
} SpanStore;

static SpanStore *store;

static Size
slot_size(void)
{
	return MAXALIGN(offsetof(SpanSlot, data) + TraceprofSpanSize());
}

static SpanSlot *
slot_at(uint64 position)
{
	return (SpanSlot *) (store->slots + (position % traceprof_max_spans) * slot_size());
}

Size
span_store_shmem_size(void)
{
	return add_size(MAXALIGN(offsetof(SpanStore, slots)),
					mul_size(traceprof_max_spans, slot_size()));
}

void
span_store_shmem_startup(void)
{
	bool		found;

	store = ShmemInitStruct("traceprof spans", span_store_shmem_size(), &found);
	if (found)
		return;
	pg_atomic_init_u64(&store->next_write, 0);
	pg_atomic_init_u64(&store->exported_upto, 0);
	pg_atomic_init_u64(&store->view_base, 0);
	pg_atomic_init_u64(&store->created, 0);
	pg_atomic_init_u64(&store->dropped, 0);
	pg_atomic_init_u64(&store->exported, 0);
	pg_atomic_init_u64(&store->export_failures, 0);
	pg_atomic_init_u64(&store->malformed, 0);
	store->exporter_latch = NULL;
	SpinLockInit(&store->mutex);
	store->last_export = 0;
	store->last_failure = 0;
	store->stats_reset = GetCurrentTimestamp();
	store->last_error[0] = '\0';
	for (int i = 0; i < traceprof_max_spans; i++)
		pg_atomic_init_u64(&slot_at(i)->seq, 0);
}

static bool
keep_unexported(void)
{
	return traceprof_otlp_endpoint != NULL && traceprof_otlp_endpoint[0] != '\0';
}

void
span_store_write(const TraceprofSpan *span)
{
	uint64		position;
	uint64		pending;
	SpanSlot   *slot;

	if (store == NULL)
		return;
	position = pg_atomic_read_u64(&store->next_write);
	for (;;)
	{
		if (keep_unexported() &&
			position - pg_atomic_read_u64(&store->exported_upto) >= (uint64) traceprof_max_spans)
		{
			pg_atomic_fetch_add_u64(&store->dropped, 1);
			return;
		}
		/* On failure, position is updated to the current value. */
		if (pg_atomic_compare_exchange_u64(&store->next_write, &position, position + 1))
			break;
	}
	slot = slot_at(position);
	pg_atomic_write_u64(&slot->seq, 0);
	pg_write_barrier();
	memcpy(slot->data, span, offsetof(TraceprofSpan, query) + span->query_len + 1);
	pg_write_barrier();
	pg_atomic_write_u64(&slot->seq, position + 1);
	pg_atomic_fetch_add_u64(&store->created, 1);

	/* Wake the exporter early when a quarter of the ring waits for it. */
	pending = position + 1 - pg_atomic_read_u64(&store->exported_upto);
	if (keep_unexported() && store->exporter_latch != NULL &&
		pending == (uint64) Max(traceprof_max_spans / 4, 1))
		SetLatch(store->exporter_latch);
}

void
span_store_count_malformed(void)
{
	if (store != NULL)
		pg_atomic_fetch_add_u64(&store->malformed, 1);
}

/*
 * Copy the span at position into out.  False if the slot is being written
 * or was overwritten by a later position.
 */
static bool
read_slot(uint64 position, TraceprofSpan *out)
{
	SpanSlot   *slot = slot_at(position);
	uint64		before = pg_atomic_read_u64(&slot->seq);

	if (before != position + 1)
		return false;
	pg_read_barrier();
	memcpy(out, slot->data, TraceprofSpanSize());
	pg_read_barrier();
	if (pg_atomic_read_u64(&slot->seq) != before)
		return false;
	/* A torn copy is excluded above; keep strings terminated regardless. */
	out->query_len = Min(Max(out->query_len, 0), traceprof_max_query_length);
	out->query[out->query_len] = '\0';
	return true;
}

void
span_store_scan_retained(SpanVisitor visit, void *arg)
{
	TraceprofSpan *span = palloc(TraceprofSpanSize());
	uint64		end = pg_atomic_read_u64(&store->next_write);
	uint64		start = end > (uint64) traceprof_max_spans ? end - traceprof_max_spans : 0;

	start = Max(start, pg_atomic_read_u64(&store->view_base));
	for (uint64 position = start; position < end; position++)
		if (read_slot(position, span) && !visit(span, arg))
			break;
	pfree(span);
}

/*
 * Visit up to max spans not yet exported, oldest first, stopping at a slot
 * still being written.  Returns the position after the last one visited,
 * for span_store_mark_exported().
 */
uint64
span_store_read_unexported(SpanVisitor visit, void *arg, int max)
{
	TraceprofSpan *span = palloc(TraceprofSpanSize());
	uint64		end = pg_atomic_read_u64(&store->next_write);
	uint64		position = pg_atomic_read_u64(&store->exported_upto);
	int			visited = 0;

	/* Spans overwritten while export was off are gone: skip past them. */
	if (end - position > (uint64) traceprof_max_spans)
		position = end - traceprof_max_spans;
	for (; position < end && visited < max; position++, visited++)
	{
		if (pg_atomic_read_u64(&slot_at(position)->seq) == 0)
			break;				/* a writer is mid-copy: next round */
		if (read_slot(position, span))
			visit(span, arg);
	}
	pfree(span);
	return position;
}

void
span_store_mark_exported(uint64 upto, int count)
{
	pg_atomic_write_u64(&store->exported_upto, upto);
	if (count == 0)
		return;
	pg_atomic_fetch_add_u64(&store->exported, count);
	SpinLockAcquire(&store->mutex);
	store->last_export = GetCurrentTimestamp();
	SpinLockRelease(&store->mutex);
}

/* The collector refused these spans for good: move past them as dropped. */
void
span_store_mark_rejected(uint64 upto, int count)
{
	pg_atomic_write_u64(&store->exported_upto, upto);
	pg_atomic_fetch_add_u64(&store->dropped, count);
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
	uint64		end = pg_atomic_read_u64(&store->next_write);
	uint64		exported_upto = pg_atomic_read_u64(&store->exported_upto);

	stats->created = pg_atomic_read_u64(&store->created);
	stats->dropped = pg_atomic_read_u64(&store->dropped);
	stats->exported = pg_atomic_read_u64(&store->exported);
	stats->export_failures = pg_atomic_read_u64(&store->export_failures);
	stats->malformed_contexts = pg_atomic_read_u64(&store->malformed);
	stats->pending = keep_unexported() ? (int64) Min(end - exported_upto, (uint64) traceprof_max_spans) : 0;
	stats->capacity = traceprof_max_spans;
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
	pg_atomic_write_u64(&store->view_base, pg_atomic_read_u64(&store->next_write));
	pg_atomic_write_u64(&store->created, 0);
	pg_atomic_write_u64(&store->dropped, 0);
	pg_atomic_write_u64(&store->exported, 0);
	pg_atomic_write_u64(&store->export_failures, 0);
	pg_atomic_write_u64(&store->malformed, 0);
	SpinLockAcquire(&store->mutex);
	store->last_error[0] = '\0';
	store->last_export = 0;
	store->last_failure = 0;
	store->stats_reset = GetCurrentTimestamp();
	SpinLockRelease(&store->mutex);
}
