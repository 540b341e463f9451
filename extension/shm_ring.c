/* shm_ring.c - lock-free record ring in shared memory (see shm_ring.h). */
#include "postgres.h"

#include "shm_ring.h"

typedef struct RingSlot
{
	pg_atomic_uint64 seq;		/* position + 1 when published, 0 while written */
	uint32		len;			/* bytes of data in use */
	char		data[FLEXIBLE_ARRAY_MEMBER];
} RingSlot;

/*
 * Every writer claims positions with a compare-and-swap on next_write: it
 * gets a cache line of its own, apart from what writers only read, and
 * slots start on cache lines, so that backends on different CPUs do not
 * take lines from each other (measured: about half of the time spent
 * storing a span waited for that line).  The ring starts cache-aligned.
 */
typedef union
{
	pg_atomic_uint64 value;
	char		pad[PG_CACHE_LINE_SIZE];
} PaddedCounter;

struct ShmRing
{
	int			capacity;
	Size		record_size;
	pg_atomic_uint64 exported_upto; /* positions below were exported */
	pg_atomic_uint64 view_base;		/* positions below were reset away */
	PaddedCounter next_write;	/* next position to claim */
	pg_atomic_uint64 dropped;
	pg_atomic_uint64 exported;
	char		slots[FLEXIBLE_ARRAY_MEMBER] pg_attribute_aligned(PG_CACHE_LINE_SIZE);
};

static Size
slot_size(Size record_size)
{
	return CACHELINEALIGN(offsetof(RingSlot, data) + record_size);
}

static RingSlot *
slot_at(ShmRing *ring, uint64 position)
{
	return (RingSlot *) (ring->slots + (position % ring->capacity) * slot_size(ring->record_size));
}

Size
shm_ring_size(int capacity, Size record_size)
{
	return add_size(offsetof(ShmRing, slots),
					mul_size(capacity, slot_size(record_size)));
}

void
shm_ring_init(ShmRing *ring, int capacity, Size record_size)
{
	ring->capacity = capacity;
	ring->record_size = record_size;
	pg_atomic_init_u64(&ring->next_write.value, 0);
	pg_atomic_init_u64(&ring->exported_upto, 0);
	pg_atomic_init_u64(&ring->view_base, 0);
	pg_atomic_init_u64(&ring->dropped, 0);
	pg_atomic_init_u64(&ring->exported, 0);
	for (int i = 0; i < capacity; i++)
		pg_atomic_init_u64(&slot_at(ring, i)->seq, 0);
}

bool
shm_ring_write(ShmRing *ring, const void *record, Size len, bool keep_unexported,
			   uint64 *pending)
{
	uint64		position;
	RingSlot   *slot;

	/* Fetch the line for writing at once: the CAS below needs it exclusive. */
	__builtin_prefetch(&ring->next_write, 1);
	position = pg_atomic_read_u64(&ring->next_write.value);

	for (;;)
	{
		if (keep_unexported &&
			position - pg_atomic_read_u64(&ring->exported_upto) >= (uint64) ring->capacity)
		{
			pg_atomic_fetch_add_u64(&ring->dropped, 1);
			return false;
		}
		/* On failure, position is updated to the current value. */
		if (pg_atomic_compare_exchange_u64(&ring->next_write.value, &position, position + 1))
			break;
	}
	slot = slot_at(ring, position);
	pg_atomic_write_u64(&slot->seq, 0);
	pg_write_barrier();
	slot->len = Min(len, ring->record_size);
	memcpy(slot->data, record, slot->len);
	pg_write_barrier();

	/*
	 * A plain store publishes the record.  No locked instruction may follow
	 * the copy: it would wait for every store to the slot's cold cache lines
	 * (measured: most of the cost of storing a span).
	 */
	pg_atomic_write_u64(&slot->seq, position + 1);
	*pending = position + 1 - pg_atomic_read_u64(&ring->exported_upto);
	return true;
}

/*
 * Copy the record at position into buf and return its length; -1 if its
 * slot is being written or was overwritten by a later position.
 */
static int
read_slot(ShmRing *ring, uint64 position, void *buf)
{
	RingSlot   *slot = slot_at(ring, position);
	uint64		before = pg_atomic_read_u64(&slot->seq);
	Size		len;

	if (before != position + 1)
		return -1;
	pg_read_barrier();
	len = Min(slot->len, ring->record_size);
	memcpy(buf, slot->data, len);
	pg_read_barrier();
	return pg_atomic_read_u64(&slot->seq) == before ? (int) len : -1;
}

void
shm_ring_scan_retained(ShmRing *ring, void *buf, ShmRingVisitor visit, void *arg)
{
	uint64		end = pg_atomic_read_u64(&ring->next_write.value);
	uint64		start = end > (uint64) ring->capacity ? end - ring->capacity : 0;

	start = Max(start, pg_atomic_read_u64(&ring->view_base));
	for (uint64 position = start; position < end; position++)
	{
		int			len = read_slot(ring, position, buf);

		if (len >= 0 && !visit(buf, len, arg))
			break;
	}
}

uint64
shm_ring_read_unexported(ShmRing *ring, void *buf, ShmRingVisitor visit, void *arg, int max)
{
	uint64		end = pg_atomic_read_u64(&ring->next_write.value);
	uint64		position = pg_atomic_read_u64(&ring->exported_upto);
	int			visited = 0;

	/* Records overwritten while export was off are gone: skip past them. */
	if (end - position > (uint64) ring->capacity)
		position = end - ring->capacity;
	for (; position < end && visited < max; position++, visited++)
	{
		int			len;

		if (pg_atomic_read_u64(&slot_at(ring, position)->seq) == 0)
			break;				/* a writer is mid-copy: next round */
		len = read_slot(ring, position, buf);
		if (len >= 0)
			visit(buf, len, arg);
	}
	return position;
}

void
shm_ring_mark_exported(ShmRing *ring, uint64 upto, int count)
{
	pg_atomic_write_u64(&ring->exported_upto, upto);
	pg_atomic_fetch_add_u64(&ring->exported, count);
}

void
shm_ring_mark_rejected(ShmRing *ring, uint64 upto, int count)
{
	pg_atomic_write_u64(&ring->exported_upto, upto);
	pg_atomic_fetch_add_u64(&ring->dropped, count);
}

void
shm_ring_count_dropped(ShmRing *ring, uint64 count)
{
	pg_atomic_fetch_add_u64(&ring->dropped, count);
}

void
shm_ring_counts(ShmRing *ring, bool keep_unexported, ShmRingCounts *counts)
{
	uint64		end = pg_atomic_read_u64(&ring->next_write.value);
	uint64		exported_upto = pg_atomic_read_u64(&ring->exported_upto);

	/* Every claimed position was written: no counter shared by all writers. */
	counts->written = end - pg_atomic_read_u64(&ring->view_base);
	counts->dropped = pg_atomic_read_u64(&ring->dropped);
	counts->exported = pg_atomic_read_u64(&ring->exported);
	counts->pending = keep_unexported ?
		(int64) Min(end - exported_upto, (uint64) ring->capacity) : 0;
	counts->capacity = ring->capacity;
}

void
shm_ring_reset(ShmRing *ring)
{
	pg_atomic_write_u64(&ring->view_base, pg_atomic_read_u64(&ring->next_write.value));
	pg_atomic_write_u64(&ring->dropped, 0);
	pg_atomic_write_u64(&ring->exported, 0);
}
