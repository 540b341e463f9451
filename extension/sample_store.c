/*
 * sample_store.c - symbolized stack samples in shared memory.
 *
 * Each backend drains its own sampler when a traced span closes, resolves
 * the addresses there (they are only valid in that process: libraries
 * loaded after fork sit at different addresses in different backends), and
 * stores the samples here as frame-name ids.  SQL reads them back per
 * trace; the exporter sends them to Pyroscope.
 */
#include "postgres.h"

#include "storage/shmem.h"

#include "shm_ring.h"
#include "traceprof.h"

typedef struct FrameCounts
{
	pg_atomic_uint64 named;		/* frames stored with a real function name */
	pg_atomic_uint64 total;
} FrameCounts;

static FrameCounts *frames;
static ShmRing *ring;

Size
sample_store_shmem_size(void)
{
	return add_size(CACHELINEALIGN(sizeof(FrameCounts)),
					shm_ring_size(traceprof_max_samples, sizeof(TraceprofSample)));
}

void
sample_store_shmem_startup(void)
{
	bool		found;

	frames = ShmemInitStruct("traceprof samples", sample_store_shmem_size(), &found);
	ring = (ShmRing *) ((char *) frames + CACHELINEALIGN(sizeof(FrameCounts)));
	if (found)
		return;
	pg_atomic_init_u64(&frames->named, 0);
	pg_atomic_init_u64(&frames->total, 0);
	shm_ring_init(ring, traceprof_max_samples, sizeof(TraceprofSample), sizeof(TraceprofSample));
	/* Until the uploader starts: the first samples wait for it. */
	shm_ring_set_keep_unexported(ring, traceprof_pyroscope_url[0] != '\0' && traceprof_uploader_registered);
}

void
sample_store_count_frames(uint64 named, uint64 total)
{
	if (frames == NULL || total == 0)
		return;
	pg_atomic_fetch_add_u64(&frames->named, named);
	pg_atomic_fetch_add_u64(&frames->total, total);
}

double
sample_store_named_share(void)
{
	uint64		total = pg_atomic_read_u64(&frames->total);

	return total == 0 ? 0.0 : (double) pg_atomic_read_u64(&frames->named) / total;
}

/* The uploader's: whether writers keep samples until they are uploaded. */
/* Returns the samples that waited for upload, if it was switched off (counted as dropped). */
uint64
sample_store_set_uploading(bool uploading)
{
	return ring != NULL ? shm_ring_set_keep_unexported(ring, uploading) : 0;
}

void
sample_store_write(const TraceprofSample *sample)
{
	uint64		pending;

	if (ring != NULL)
		(void) shm_ring_write(ring, sample,
							  offsetof(TraceprofSample, frames) + sample->depth * sizeof(uint32),
							  &pending);
}

/*
 * Periods a backend's own ring could not hold (a very long span): a lost
 * signal counts its weight, 1 + timer overruns, as a kept sample would.
 */
void
sample_store_count_lost(uint64 count)
{
	if (ring != NULL && count > 0)
		shm_ring_count_dropped(ring, count);
}

/* Copies may race a writer and are discarded by the ring; bound depth anyway. */
typedef struct SampleVisit
{
	SampleVisitor visit;
	void	   *arg;
} SampleVisit;

static bool
visit_sample(const void *record, Size len, uint64 next, void *arg)
{
	SampleVisit *v = arg;
	TraceprofSample *sample = (TraceprofSample *) record;

	if (len < offsetof(TraceprofSample, frames))
		return true;
	sample->depth = Min(sample->depth, (len - offsetof(TraceprofSample, frames)) / sizeof(uint32));
	return v->visit(sample, v->arg);
}

void
sample_store_scan(SampleVisitor visit, void *arg)
{
	SampleVisit v = {visit, arg};
	TraceprofSample *buf = palloc(sizeof(TraceprofSample));

	shm_ring_scan_retained(ring, buf, visit_sample, &v);
	pfree(buf);
}

uint64
sample_store_read_unexported(SampleVisitor visit, void *arg, int max)
{
	SampleVisit v = {visit, arg};
	TraceprofSample *buf = palloc(sizeof(TraceprofSample));
	uint64		upto = shm_ring_read_unexported(ring, buf, visit_sample, &v, max);

	pfree(buf);
	return upto;
}

void
sample_store_mark_exported(uint64 upto, int count)
{
	shm_ring_mark_exported(ring, upto, count);
}

void
sample_store_mark_rejected(uint64 upto, int count)
{
	shm_ring_mark_rejected(ring, upto, count);
}

void
sample_store_counts(int64 *stored, int64 *dropped, int64 *exported)
{
	ShmRingCounts counts;

	shm_ring_counts(ring, &counts);
	*stored = counts.written;
	*dropped = counts.dropped;
	*exported = counts.exported;
}

void
sample_store_reset(void)
{
	shm_ring_reset(ring);
	pg_atomic_write_u64(&frames->named, 0);
	pg_atomic_write_u64(&frames->total, 0);
}
