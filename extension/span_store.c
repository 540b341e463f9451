/*
 * span_store.c - finished spans in shared memory, plus export bookkeeping.
 *
 * The spans live in a shm_ring: backends never wait to store one.  With an
 * OTLP endpoint configured, spans not yet exported are kept and new ones are
 * dropped (and counted) when the ring is full; without one, the ring simply
 * retains the most recent traceprof.max_spans spans for SQL.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "utils/memutils.h"

#include "shm_ring.h"
#include "traceprof.h"

typedef struct SpanStore
{
	pg_atomic_uint64 export_failures;
	pg_atomic_uint64 upload_failures;
	pg_atomic_uint64 malformed;
	Latch	   *exporter_latch;
	slock_t		mutex;			/* protects the fields below */
	TimestampTz last_export;
	TimestampTz last_failure;
	TimestampTz stats_reset;
	char		last_error[256];
} SpanStore;

TP_HOT static SpanStore *store;
TP_HOT static ShmRing *ring;

/* An unpacked span into its packed form (traceprof.h), for spans made unpacked. */
void
span_pack(const TraceprofSpan *span, TraceprofSpan *out)
{
	char	   *p = span_packed_strings(out);

	memcpy(out, span, SPAN_PACKED_FIXED);
	p = span_pack_string(p, span->name, span->name_len);
	p = span_pack_string(p, span->operation, span->operation_len);
	p = span_pack_string(p, span->collection, span->collection_len);
	p = span_pack_string(p, span->dbname, span->dbname_len);
	p = span_pack_string(p, span->username, span->username_len);
	p = span_pack_string(p, span->trace_state, span->trace_state_len);
	p = span_pack_string(p, span->query, span->query_len);
	p = span_pack_string(p, span->message, span->message_len);
	Assert(p - (char *) out == span_packed_size(span));
}

/* One string of a packed span and its length; NULL past end (a record that cannot be). */
static const char *
unpack_string(const char *in, const char *end, char *s, Size size, uint8 *len)
{
	const char *nul = in < end ? memchr(in, '\0', end - in) : NULL;

	if (nul == NULL)
		return NULL;
	*len = (uint8) Min((Size) (nul - in), size - 1);
	memcpy(s, in, *len);
	s[*len] = '\0';
	return nul + 1;
}

/* The same for the tracestate, whose length does not fit a uint8. */
static const char *
unpack_trace_state(const char *in, const char *end, TraceprofSpan *span)
{
	const char *nul = in < end ? memchr(in, '\0', end - in) : NULL;

	if (nul == NULL)
		return NULL;
	span->trace_state_len = (uint16) Min((Size) (nul - in), sizeof(span->trace_state) - 1);
	memcpy(span->trace_state, in, span->trace_state_len);
	span->trace_state[span->trace_state_len] = '\0';
	return nul + 1;
}

/*
 * A packed span of len bytes into span but its query, which is returned
 * (NUL-terminated at *query_end); NULL for bytes that cannot be a span.
 */
static const char *
unpack_but_query(const char *in, Size len, TraceprofSpan *span, const char **query_end)
{
	const char *end = in + len;
	const char *p = in + SPAN_PACKED_FIXED;
	const char *nul;

	if (len < SPAN_PACKED_FIXED)
		return NULL;
	memcpy(span, in, SPAN_PACKED_FIXED);
	if ((p = unpack_string(p, end, span->name, sizeof(span->name), &span->name_len)) == NULL ||
		(p = unpack_string(p, end, span->operation, sizeof(span->operation), &span->operation_len)) == NULL ||
		(p = unpack_string(p, end, span->collection, sizeof(span->collection), &span->collection_len)) == NULL ||
		(p = unpack_string(p, end, span->dbname, sizeof(span->dbname), &span->dbname_len)) == NULL ||
		(p = unpack_string(p, end, span->username, sizeof(span->username), &span->username_len)) == NULL ||
		(p = unpack_trace_state(p, end, span)) == NULL ||
		(nul = memchr(p, '\0', end - p)) == NULL ||
		unpack_string(nul + 1, end, span->message, sizeof(span->message), &span->message_len) == NULL)
		return NULL;
	span->sqlstate[sizeof(span->sqlstate) - 1] = '\0';
	*query_end = nul;
	return p;
}

static void
unpack_query_as_stored(const char *query, const char *end, TraceprofSpan *span)
{
	span->query_len = Min(end - query, traceprof_max_query_length);
	memcpy(span->query, query, span->query_len);
	span->query[span->query_len] = '\0';
}

/* A packed span into span, its texts as they were stored (query_form kept). */
bool
span_unpack_texts(const char *in, Size len, TraceprofSpan *span)
{
	const char *end;
	const char *query = unpack_but_query(in, len, span, &end);

	if (query == NULL)
		return false;
	unpack_query_as_stored(query, end, span);
	return true;
}

/* A packed span into span as readers see it: its query final, its texts in encoding. */
static bool
span_unpack(const char *in, Size len, TraceprofSpan *span, int encoding)
{
	const char *end;
	const char *query = unpack_but_query(in, len, span, &end);

	if (query == NULL)
		return false;
	if (span->query_form != QUERY_FORM_FINAL)
	{
		span->query_len = query_text_normalize_literals(query, end - query, span->query_form,
														 span->encoding, span->query);
		span->query_form = QUERY_FORM_FINAL;
	}
	else
		unpack_query_as_stored(query, end, span);
	span_texts_to_encoding(span, encoding);
	return true;
}

/*
 * Slots of 512 bytes: a span of a short statement (~300 bytes packed) takes
 * one, a long text or message a few.  There are traceprof.max_spans of them,
 * and never fewer than the longest span needs.
 */
#define SPAN_SLOT_DATA (512 - SHM_RING_SLOT_OVERHEAD)

static int
span_ring_slots(void)
{
	return Max(traceprof_max_spans, (int) (TraceprofSpanSize() / SPAN_SLOT_DATA) + 2);
}

Size
span_store_shmem_size(void)
{
	return add_size(CACHELINEALIGN(sizeof(SpanStore)),
					shm_ring_size(span_ring_slots(), SPAN_SLOT_DATA));
}

void
span_store_shmem_startup(void)
{
	bool		found;

	store = ShmemInitStruct("traceprof spans", span_store_shmem_size(), &found);
	ring = (ShmRing *) ((char *) store + CACHELINEALIGN(sizeof(SpanStore)));
	if (found)
		return;
	pg_atomic_init_u64(&store->export_failures, 0);
	pg_atomic_init_u64(&store->upload_failures, 0);
	pg_atomic_init_u64(&store->malformed, 0);
	store->exporter_latch = NULL;
	SpinLockInit(&store->mutex);
	store->last_export = 0;
	store->last_failure = 0;
	store->stats_reset = GetCurrentTimestamp();
	store->last_error[0] = '\0';
	shm_ring_init(ring, span_ring_slots(), SPAN_SLOT_DATA, TraceprofSpanSize());
	/* Until the exporter starts: the spans of a server's first statements wait for it. */
	shm_ring_set_keep_unexported(ring, traceprof_exporting && traceprof_exporter_registered);
}

void
span_store_write(const TraceprofSpan *span)
{
	uint64		pending;
	uint64		wake_at = Max(traceprof_max_spans / 4, 1);
	Latch	   *exporter;
	Size		len;

	if (store == NULL)
		return;
	/* OTLP and the other databases' readers want UTF-8 (span_encoding.c). */
	if (unlikely(span->encoding != PG_UTF8 && span->encoding != PG_SQL_ASCII))
		span = span_in_utf8(span);
	len = span_packed_size(span);
	if (likely(len <= SPAN_SLOT_DATA))
	{
		/*
		 * The common span: one slot, written in place (no loop over slots),
		 * in two copies: one of ~300 bytes would run the large-copy code of
		 * libc's memcpy, which little else uses (6 instruction-cache misses).
		 */
		uint64		position;
		char	   *slot = shm_ring_begin_write(ring, len, &position);

		if (slot == NULL)
			return;
		memcpy(slot, span, SPAN_PACKED_FIXED);
		memcpy(slot + SPAN_PACKED_FIXED, span_packed_strings(span), len - SPAN_PACKED_FIXED);
		shm_ring_end_write(ring, position, &pending);
	}
	else if (!shm_ring_write(ring, span, len, &pending))
		return;

	/*
	 * Wake the exporter early when a quarter of the ring waits for it: when
	 * this span crossed that mark or a further quarter (a long one takes
	 * several slots at once; the writer that crossed the last may have had
	 * its span dropped), if it exports.  The latch is read once: an exiting
	 * exporter clears it at any moment.
	 */
	exporter = ((volatile SpanStore *) store)->exporter_latch;
	if (exporter != NULL && pending >= wake_at &&
		(pending - shm_ring_slots(ring, len)) / wake_at != pending / wake_at &&
		shm_ring_keeps_unexported(ring))
		SetLatch(exporter);
}

void
span_store_count_malformed(void)
{
	if (store != NULL)
		pg_atomic_fetch_add_u64(&store->malformed, 1);
}

/* A span that was never made (nesting too deep, no random id): dropped. */
void
span_store_count_unmade(void)
{
	if (store != NULL)
		shm_ring_count_dropped(ring, 1);
}

typedef struct SpanVisit
{
	const uint8 *trace_id;		/* only this trace's spans; NULL: all */
	SpanVisitor visit;
	void	   *arg;
	TraceprofSpan *span;		/* unpacked here */
	MemoryContext per_span;		/* what unpacking and visiting one span allocate */
} SpanVisit;

/*
 * Copies that raced a writer were rejected by the ring; bound reads anyway.
 * What one span allocates (its texts converted, a row's values and jsonb)
 * is freed before the next: kept until the scan ended, it grew with the
 * ring (~6 kB a span, gigabytes for the largest ring).  A visitor keeps
 * what it wants in memory of its own (a tuplestore).
 */
static bool
visit_span(const void *record, Size len, uint64 next, void *arg)
{
	SpanVisit  *v = arg;
	MemoryContext caller;
	bool		more = true;

	/* A packed span begins with its trace id: another trace's is not unpacked. */
	StaticAssertStmt(offsetof(TraceprofSpan, trace_id) == 0, "a packed span begins with its trace id");
	if (v->trace_id != NULL &&
		(len < TP_TRACE_ID_BYTES || memcmp(record, v->trace_id, TP_TRACE_ID_BYTES) != 0))
		return true;
	caller = MemoryContextSwitchTo(v->per_span);
	if (span_unpack(record, len, v->span, GetDatabaseEncoding()))
		more = v->visit(v->span, v->arg);
	MemoryContextSwitchTo(caller);
	MemoryContextReset(v->per_span);
	return more;
}

void
span_store_scan_retained(const uint8 *trace_id, SpanVisitor visit, void *arg)
{
	SpanVisit	v = {trace_id, visit, arg, palloc(TraceprofSpanSize()), NULL};
	void	   *buf = palloc(TraceprofSpanSize());

	v.per_span = AllocSetContextCreate(CurrentMemoryContext, "traceprof span",
									   ALLOCSET_DEFAULT_SIZES);
	shm_ring_scan_retained(ring, buf, visit_span, &v);
	MemoryContextDelete(v.per_span);
	pfree(buf);
	pfree(v.span);
}

typedef struct UnpackInto
{
	char	   *spans;
	uint64	   *ends;
	int			count;
} UnpackInto;

static bool
unpack_next(const void *record, Size len, uint64 next, void *arg)
{
	UnpackInto *into = arg;

	if (span_unpack(record, len, (TraceprofSpan *) (into->spans + into->count * TraceprofSpanSize()), PG_UTF8))
		into->ends[into->count++] = next;
	return true;
}

uint64
span_store_read_unexported(char *spans, uint64 *ends, int max, int *count)
{
	UnpackInto	into = {spans, ends, 0};
	void	   *buf = palloc(TraceprofSpanSize());
	uint64		upto = shm_ring_read_unexported(ring, buf, unpack_next, &into, max);

	pfree(buf);
	*count = into.count;
	return upto;
}

void
span_store_mark_exported(uint64 upto, int count)
{
	TimestampTz now;

	shm_ring_mark_exported(ring, upto, count);
	if (count == 0)
		return;
	now = GetCurrentTimestamp();	/* not under the spinlock */
	SpinLockAcquire(&store->mutex);
	store->last_export = now;
	SpinLockRelease(&store->mutex);
}

/* Spans of a request the collector took, but refused in part (a partial success). */
void
span_store_count_refused(int count)
{
	shm_ring_count_dropped(ring, count);
}

/* The collector refused these spans for good: move past them as dropped. */
void
span_store_mark_rejected(uint64 upto, int count)
{
	shm_ring_mark_rejected(ring, upto, count);
}

/*
 * message into out (size bytes) as valid UTF-8, cut before a character:
 * a collector's refusal is its own text, and a byte cut out of a
 * character, or one that is not UTF-8, made traceprof.stats.last_error
 * invalid in its reader's encoding.  What is not UTF-8 becomes '?'.
 */
static void
copy_as_utf8(char *out, Size size, const char *message)
{
	const unsigned char *s = (const unsigned char *) message;
	Size		len = 0;

	while (*s != '\0')
	{
		int			l = pg_utf_mblen(s);

		if (strnlen((const char *) s, l) < (Size) l || !pg_utf8_islegal(s, l))
		{
			if (len + 1 > size - 1)
				break;
			out[len++] = '?';
			s++;
			continue;
		}
		if (len + l > size - 1)
			break;
		memcpy(out + len, s, l);
		len += l;
		s += l;
	}
	out[len] = '\0';
}

/* last_failure and last_error are shared: the latest failure of either kind. */
static void
remember_failure(pg_atomic_uint64 *counter, const char *message)
{
	TimestampTz now = GetCurrentTimestamp();
	char		error[sizeof(store->last_error)];

	copy_as_utf8(error, sizeof(error), message);	/* not under the spinlock */
	pg_atomic_fetch_add_u64(counter, 1);
	SpinLockAcquire(&store->mutex);
	store->last_failure = now;
	memcpy(store->last_error, error, sizeof(error));
	SpinLockRelease(&store->mutex);
}

void
span_store_export_failed(const char *message)
{
	remember_failure(&store->export_failures, message);
}

void
span_store_upload_failed(const char *message)
{
	remember_failure(&store->upload_failures, message);
}

/* The exporter's: whether writers keep spans until they are exported. */
/* Returns the spans that waited for export, if it was switched off (counted as dropped). */
uint64
span_store_set_exporting(bool exporting)
{
	return shm_ring_set_keep_unexported(ring, exporting);
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

	shm_ring_counts(ring, &counts);
	stats->created = counts.written;
	stats->dropped = counts.dropped;
	stats->exported = counts.exported;
	stats->pending = counts.pending;
	stats->capacity = counts.capacity;
	stats->export_failures = pg_atomic_read_u64(&store->export_failures);
	stats->upload_failures = pg_atomic_read_u64(&store->upload_failures);
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
	pg_atomic_write_u64(&store->upload_failures, 0);
	pg_atomic_write_u64(&store->malformed, 0);
	SpinLockAcquire(&store->mutex);
	store->last_error[0] = '\0';
	store->last_export = 0;
	store->last_failure = 0;
	store->stats_reset = GetCurrentTimestamp();
	SpinLockRelease(&store->mutex);
}
