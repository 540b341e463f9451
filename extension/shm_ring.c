/* shm_ring.c - lock-free record ring in shared memory (see shm_ring.h). */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "ring_positions.h"
#include "shm_ring.h"

/*
 * A record takes one slot, or several consecutive ones when it is longer
 * than a slot's data: slots are sized for the common record, not the
 * largest (a span's slot was 1.7 kB for ~300 bytes used, and touching 14 MB
 * of ring memory cost more than the rest of storing a span).  Every slot
 * names its record's first position, so a reader starting anywhere skips
 * to the next record.
 */
typedef struct RingSlot
{
	pg_atomic_uint64 seq;		/* see SEQ_WRITING */
	pg_atomic_uint64 abandoned; /* position + 1 of a writer that gave it up */
	uint64		head;			/* position of the record's first slot */
	uint32		len;			/* the whole record's bytes */
	uint32		nslots;			/* slots the record takes */
	char		data[FLEXIBLE_ARRAY_MEMBER];
} RingSlot;

StaticAssertDecl(offsetof(RingSlot, data) == SHM_RING_SLOT_OVERHEAD, "slot header size");

/*
 * Every writer claims positions with a compare-and-swap on next_write: it
 * gets a cache line of its own, apart from what writers only read, and
 * slots start on cache lines, so that backends on different CPUs do not
 * take lines from each other (measured: about half of the time spent
 * storing a span waited for that line).  The ring starts cache-aligned.
 * The alignment matters as much as the padding: unaligned, next_write
 * shared its first line with capacity and slot_data, and every writer's
 * read of those waited for the line another writer had just taken.
 */
/*
 * Positions passed while their writers copy, looked at again (settle_passed).
 * When as many are pending, the exporter waits at the next one instead.
 */
#define SHM_RING_PASSED_MAX 64

typedef union
{
	pg_atomic_uint64 value;
	char		pad[PG_CACHE_LINE_SIZE];
} PaddedCounter pg_attribute_aligned(PG_CACHE_LINE_SIZE);

struct ShmRing
{
	int			capacity;		/* slots */
	Size		slot_data;		/* bytes of record per slot */
	Size		max_record;
	pg_atomic_uint32 keep_unexported;	/* set by the exporting process */
	pg_atomic_uint64 exported_upto; /* positions below were exported */
	PaddedCounter next_write;	/* next position to claim */
	pg_atomic_uint64 dropped;
	pg_atomic_uint64 exported;

	/*
	 * Records written since the last reset = positions claimed since then
	 * (from its base) - positions that are no record's first.  extra_slots
	 * holds the reset's generation (EXTRA_GEN) and those positions since
	 * it (48 bits, 2^48 since a reset; the 16 of the generation wrap
	 * harmlessly); base[generation % RESET_BASES] is the position where it
	 * started.  See count_extra_slots and shm_ring_reset.
	 */
	pg_atomic_uint64 extra_slots;
	pg_atomic_uint64 base[4];
	/* The most records a reader was shown in a generation (never_fewer). */
	pg_atomic_uint64 written_shown;
	pg_atomic_uint32 resetting; /* a reset is under way */
	/* The exporter's alone: since when positions below stuck_end hold it up. */
	TimestampTz stuck_since;	/* 0: not held up */
	uint64		stuck_end;
	/* ... and the positions it passed while their writers copied (settle_passed). */
	int			npassed;
	uint64		passed[SHM_RING_PASSED_MAX];
	char		slots[FLEXIBLE_ARRAY_MEMBER] pg_attribute_aligned(PG_CACHE_LINE_SIZE);
};

#define RESET_BASES lengthof(((ShmRing *) NULL)->base)
#define EXTRA_GEN_SHIFT 48
#define EXTRA_GEN(word) ((word) >> EXTRA_GEN_SHIFT)
#define EXTRA_SLOTS(word) ((word) & ((UINT64CONST(1) << EXTRA_GEN_SHIFT) - 1))

StaticAssertDecl(offsetof(ShmRing, next_write) % PG_CACHE_LINE_SIZE == 0 &&
				 offsetof(ShmRing, dropped) - offsetof(ShmRing, next_write) == PG_CACHE_LINE_SIZE,
				 "next_write alone on its cache line");

static Size
slot_size(Size slot_data)
{
	return CACHELINEALIGN(offsetof(RingSlot, data) + slot_data);
}

static RingSlot *
slot_at(ShmRing *ring, uint64 position)
{
	return (RingSlot *) (ring->slots + (position % ring->capacity) * slot_size(ring->slot_data));
}

uint32
shm_ring_slots(ShmRing *ring, Size len)
{
	len = Min(len, ring->max_record);
	if (len <= ring->slot_data)
		return 1;
	return Min((uint32) ((len + ring->slot_data - 1) / ring->slot_data), (uint32) ring->capacity);
}

Size
shm_ring_size(int capacity, Size slot_data)
{
	return add_size(offsetof(ShmRing, slots),
					mul_size(capacity, slot_size(slot_data)));
}

void
shm_ring_init(ShmRing *ring, int capacity, Size slot_data, Size max_record)
{
	ring->capacity = capacity;
	ring->slot_data = slot_data;
	ring->max_record = max_record;
	pg_atomic_init_u32(&ring->keep_unexported, 0);
	pg_atomic_init_u64(&ring->next_write.value, 0);
	pg_atomic_init_u64(&ring->exported_upto, 0);
	pg_atomic_init_u64(&ring->dropped, 0);
	pg_atomic_init_u64(&ring->exported, 0);
	pg_atomic_init_u64(&ring->extra_slots, 0);
	pg_atomic_init_u64(&ring->written_shown, 0);
	for (int i = 0; i < RESET_BASES; i++)
		pg_atomic_init_u64(&ring->base[i], 0);
	pg_atomic_init_u32(&ring->resetting, 0);
	ring->stuck_since = 0;
	ring->stuck_end = 0;
	ring->npassed = 0;
	for (int i = 0; i < capacity; i++)
	{
		pg_atomic_init_u64(&slot_at(ring, i)->seq, 0);
		pg_atomic_init_u64(&slot_at(ring, i)->abandoned, 0);
	}
}

/*
 * Whether writers keep records not yet exported (dropping new ones when
 * the ring is full) or overwrite the oldest.  The process that exports
 * decides, for all writers at once: each backend's own copy of the setting
 * would change only at its next command, and one inside a long procedure
 * would overwrite records waiting for export, or drop its own with nothing
 * exporting them.  Export starts at the ring's end: what was written
 * before stays for SQL.  Exporting that lap first would leave writers, who
 * then keep what is not exported, a full ring to drop new records on; and
 * writers lapping each other gave some of its positions up.
 * Switched off, what was waiting for export will never go: its records are
 * counted as dropped (they stay for SQL until overwritten), and returned.
 */
uint64
shm_ring_set_keep_unexported(ShmRing *ring, bool keep)
{
	if (!keep)
	{
		uint64		end;
		uint64		waiting = 0;

		if (pg_atomic_exchange_u32(&ring->keep_unexported, 0) == 0)
			return 0;
		ring->npassed = 0;		/* counted below if published, and never read */
		end = pg_atomic_read_u64(&ring->next_write.value);
		for (uint64 position = pg_atomic_read_u64(&ring->exported_upto); position < end; position++)
		{
			RingSlot   *slot = slot_at(ring, position);

			if (pg_atomic_read_u64(&slot->seq) == position + 1 &&
				*(volatile uint64 *) &slot->head == position)
				waiting++;
		}
		pg_atomic_fetch_add_u64(&ring->dropped, waiting);
		return waiting;
	}
	/* Only this process sets it: the end first, so writers that keep see room. */
	if (pg_atomic_read_u32(&ring->keep_unexported) == 0)
	{
		pg_atomic_write_u64(&ring->exported_upto, pg_atomic_read_u64(&ring->next_write.value));
		pg_memory_barrier();
		pg_atomic_write_u32(&ring->keep_unexported, 1);
	}
	return 0;
}

bool
shm_ring_keeps_unexported(ShmRing *ring)
{
	return pg_atomic_read_u32(&ring->keep_unexported) != 0;
}

/*
 * A slot's seq: 0 never written, position + 1 once that position's record
 * is published, and position + 1 with SEQ_WRITING while its writer copies.
 * SEQ_SKIPPED: the exporter passed the position without its record; its
 * writer drops the record rather than publish it unseen.
 */
#define SEQ_WRITING (UINT64CONST(1) << 63)
#define SEQ_SKIPPED (UINT64CONST(1) << 62)
#define SEQ_POSITION(seq) ((seq) & ~(SEQ_WRITING | SEQ_SKIPPED))

/*
 * Take the slot of position for its writer.  A slot another writer still
 * copies into, or that a later lap already took (this writer was preempted
 * between its claim and here for a whole lap), is left alone: copying into
 * it would tear that record under a sequence number readers trust.
 */
static inline bool
take_slot(RingSlot *slot, uint64 position)
{
	uint64		seq = pg_atomic_read_u64(&slot->seq);

	do
	{
		/* Also a slot the exporter passed this position at (SEQ_SKIPPED). */
		if ((seq & SEQ_WRITING) != 0 || SEQ_POSITION(seq) > position)
			return false;
	} while (!pg_atomic_compare_exchange_u64(&slot->seq, &seq, (position + 1) | SEQ_WRITING));
	return true;
}

/*
 * Count n positions of the record claimed at position as no record's first
 * (slots past its first, or a record given up), in the period of the reset
 * whose base is at or below position.  Rare: records given up, and records
 * longer than a slot whose early count a reset came across
 * (settle_early_count).  It counts after the claim, so a reset
 * can come in between in either order (shm_ring_reset): if the reset read
 * the ring's end after this claim (its base is above position), but
 * started its period before this count, the record belongs to the period
 * before and its n positions are taken out of the new one again (unless a
 * later reset ended that one too, which zeroed them).  Kept out of line:
 * the one-slot write never comes here.
 */
static pg_noinline void
count_extra_slots(ShmRing *ring, uint64 position, uint64 n)
{
	uint64		word = pg_atomic_fetch_add_u64(&ring->extra_slots, n) + n;
	uint64		gen = EXTRA_GEN(word);

	/* The base was written before its generation was published. */
	if (position >= pg_atomic_read_u64(&ring->base[gen % RESET_BASES]))
		return;
	/* On failure, word is updated to the current value. */
	while (EXTRA_GEN(word) == gen &&
		   !pg_atomic_compare_exchange_u64(&ring->extra_slots, &word, word - n))
		;
}

/* Take n out of extra_slots again, if still in the generation of word (its value once added). */
static void
uncount_extra_slots(ShmRing *ring, uint64 word, uint64 n)
{
	uint64		gen = EXTRA_GEN(word);

	word = pg_atomic_read_u64(&ring->extra_slots);
	/* On failure, word is updated to the current value. */
	while (EXTRA_GEN(word) == gen &&
		   !pg_atomic_compare_exchange_u64(&ring->extra_slots, &word, word - n))
		;
}

/*
 * A record of several slots counts its slots past the first before it
 * claims them (counted_in: extra_slots once they were added), so that a
 * reader in between sees a record fewer for a moment, which never_fewer
 * does not show, rather than several more, which it would have to keep
 * showing.  The count went into the period under way then: right, unless
 * a reset came, or is coming, in between.  Then it is made afresh as after
 * a claim, by count_extra_slots, which puts it in the period the record
 * belongs to, and the early one taken out (if still there).  The reset flags
 * itself before it reads the ring's end; seen clear, a reset that starts
 * later reads an end past this claim.  Out of line, so that a test can
 * hold a writer here, right after its claim.
 */
static pg_noinline void
settle_early_count(ShmRing *ring, uint64 counted_in, uint64 position, uint64 n)
{
	bool		resetting = pg_atomic_read_u32(&ring->resetting) != 0;

	pg_read_barrier();
	if (!resetting && EXTRA_GEN(pg_atomic_read_u64(&ring->extra_slots)) == EXTRA_GEN(counted_in))
		return;
	/* In this order: a reader in between sees a record fewer, not n more. */
	count_extra_slots(ring, position, n);
	uncount_extra_slots(ring, counted_in, n);
}

/*
 * Claim nslots positions at *position and take their slots; false when the
 * record is dropped (counted): the ring keeps what is not exported and is
 * full, or a slot is not this writer's to take.  Keep mode is read with
 * each try, next to the position: a writer that read it earlier and was
 * preempted could claim without room once export started.  A slot taken before one that is not
 * is published empty, which readers skip; the positions not taken are
 * marked abandoned, so that the exporter need not wait for them.
 */
static inline bool
claim(ShmRing *ring, uint32 nslots, uint64 *position)
{
	uint64		counted_in = 0;

	/* Fetch the line for writing at once: the CAS below needs it exclusive. */
	__builtin_prefetch(&ring->next_write, 1);
	/* Rare (long texts): see settle_early_count. */
	if (unlikely(nslots > 1))
		counted_in = pg_atomic_fetch_add_u64(&ring->extra_slots, nslots - 1) + nslots - 1;
	*position = pg_atomic_read_u64(&ring->next_write.value);
	for (;;)
	{
		if (pg_atomic_read_u32(&ring->keep_unexported) != 0 &&
			!tp_ring_has_room(*position, nslots, pg_atomic_read_u64(&ring->exported_upto), ring->capacity))
		{
			if (unlikely(nslots > 1))
				uncount_extra_slots(ring, counted_in, nslots - 1);
			pg_atomic_fetch_add_u64(&ring->dropped, 1);
			return false;
		}
		/* On failure, *position is updated to the current value. */
		if (pg_atomic_compare_exchange_u64(&ring->next_write.value, position, *position + nslots))
			break;
	}
	if (unlikely(nslots > 1))
		settle_early_count(ring, counted_in, *position, nslots - 1);
	for (uint32 i = 0; i < nslots; i++)
	{
		if (likely(take_slot(slot_at(ring, *position + i), *position + i)))
			continue;
		for (uint32 k = 0; k < i; k++)
		{
			RingSlot   *taken = slot_at(ring, *position + k);

			taken->nslots = 0;	/* no record: read_record skips it */
			pg_write_barrier();
			pg_atomic_write_u64(&taken->seq, *position + k + 1);
		}
		for (uint32 k = i; k < nslots; k++)
			pg_atomic_write_u64(&slot_at(ring, *position + k)->abandoned, *position + k + 1);
		/* Its positions hold no record: not counted as written. */
		count_extra_slots(ring, *position, 1);
		pg_atomic_fetch_add_u64(&ring->dropped, 1);
		return false;
	}
	return true;
}

/*
 * Plain stores publish the record, its first slot last: a reader that sees
 * it published sees all of it.  No locked instruction may follow the copy:
 * it would wait for every store to the slot's cold cache lines (measured:
 * most of the cost of storing a span).  The slots are this writer's alone
 * (take_slot) but for the exporter's SEQ_SKIPPED, looked for first: a
 * record the exporter passed is dropped, not published where nobody reads
 * it.  The exporter's mark can still land between that look and the store
 * (a writer held up there, after being held up for SHM_RING_WAIT_MS): the
 * store then wipes it, and the exporter, which looks at such positions
 * again, drops the record and counts it (settle_passed).
 */
static inline void
publish(ShmRing *ring, uint64 position, uint32 nslots, uint64 *pending)
{
	bool		passed = false;

	pg_write_barrier();
	for (uint32 i = 0; i < nslots; i++)
		passed |= (pg_atomic_read_u64(&slot_at(ring, position + i)->seq) & SEQ_SKIPPED) != 0;
	/* Looked (span-ring.test.js holds a writer here, before the store). */
	if (unlikely(passed))
	{
		/* Free for the next lap, readable by nobody, and not counted as written. */
		for (uint32 i = 0; i < nslots; i++)
			pg_atomic_write_u64(&slot_at(ring, position + i)->seq, (position + i + 1) | SEQ_SKIPPED);
		count_extra_slots(ring, position, 1);
		pg_atomic_fetch_add_u64(&ring->dropped, 1);
	}
	else
		for (uint32 i = nslots; i-- > 0;)
			pg_atomic_write_u64(&slot_at(ring, position + i)->seq, position + i + 1);
	*pending = tp_ring_between(pg_atomic_read_u64(&ring->exported_upto), position + nslots);
}

bool
shm_ring_write(ShmRing *ring, const void *record, Size len, uint64 *pending)
{
	uint64		position;
	uint32		nslots;
	const char *from = record;

	nslots = shm_ring_slots(ring, len);
	len = Min(Min(len, ring->max_record), nslots * ring->slot_data);
	if (!claim(ring, nslots, &position))
		return false;
	for (uint32 i = 0; i < nslots; i++)
	{
		RingSlot   *slot = slot_at(ring, position + i);
		Size		chunk = Min(len - i * ring->slot_data, ring->slot_data);

		slot->head = position;
		slot->len = (uint32) len;
		slot->nslots = nslots;
		memcpy(slot->data, from + i * ring->slot_data, chunk);
	}
	publish(ring, position, nslots, pending);
	return true;
}

void *
shm_ring_begin_write(ShmRing *ring, Size len, uint64 *position)
{
	RingSlot   *slot;

	Assert(len <= ring->slot_data && len <= ring->max_record);
	if (!claim(ring, 1, position))
		return NULL;
	slot = slot_at(ring, *position);
	slot->head = *position;
	slot->len = (uint32) len;
	slot->nslots = 1;
	return slot->data;
}

void
shm_ring_end_write(ShmRing *ring, uint64 position, uint64 *pending)
{
	publish(ring, position, 1, pending);
}

/*
 * Copy the record whose first slot is at position into buf and return its
 * length; -1 if a slot of it is being written or was overwritten by a later
 * position, or position is not a record's first slot.  *next gets the
 * position after it (after this slot, when unreadable).
 */
static int
read_record(ShmRing *ring, uint64 position, void *buf, uint64 *next)
{
	RingSlot   *first = slot_at(ring, position);
	uint32		nslots;
	Size		len;

	*next = position + 1;
	if (pg_atomic_read_u64(&first->seq) != position + 1)
		return -1;
	pg_read_barrier();
	/*
	 * Read once: a writer of a later lap may be filling the header in.  The
	 * checks keep the copy within buf whatever it reads; the sequence
	 * numbers read again after the copy tell whether it was this record.
	 */
	nslots = *(volatile uint32 *) &first->nslots;
	len = *(volatile uint32 *) &first->len;
	if (*(volatile uint64 *) &first->head != position || nslots == 0 ||
		len > ring->max_record || nslots != shm_ring_slots(ring, len))
		return -1;
	for (uint32 i = 0; i < nslots; i++)
	{
		RingSlot   *slot = slot_at(ring, position + i);

		if (pg_atomic_read_u64(&slot->seq) != position + i + 1)
			return -1;
		pg_read_barrier();
		memcpy((char *) buf + i * ring->slot_data, slot->data,
			   Min(len - i * ring->slot_data, ring->slot_data));
	}
	pg_read_barrier();
	for (uint32 i = 0; i < nslots; i++)
		if (pg_atomic_read_u64(&slot_at(ring, position + i)->seq) != position + i + 1)
			return -1;
	*next = position + nslots;
	return (int) len;
}

/*
 * The last reset's base (positions below it were reset away) and the end;
 * *extra gets the positions since the base that are no record's first.
 * Returns the reset's generation.
 */
static uint64
read_period(ShmRing *ring, uint64 *base, uint64 *end, uint64 *extra)
{
	uint64		word = pg_atomic_read_u64(&ring->extra_slots);

	for (;;)
	{
		uint64		again;

		pg_read_barrier();
		*base = pg_atomic_read_u64(&ring->base[EXTRA_GEN(word) % RESET_BASES]);
		*end = pg_atomic_read_u64(&ring->next_write.value);
		pg_read_barrier();
		again = pg_atomic_read_u64(&ring->extra_slots);
		/* Resets went round the bases meanwhile: read again. */
		if (EXTRA_GEN(again) == EXTRA_GEN(word))
			break;
		word = again;
	}
	*extra = EXTRA_SLOTS(word);
	return EXTRA_GEN(word);
}

void
shm_ring_scan_retained(ShmRing *ring, void *buf, ShmRingVisitor visit, void *arg)
{
	uint64		base;
	uint64		end;
	uint64		extra;
	uint64		start;

	read_period(ring, &base, &end, &extra);
	start = end > (uint64) ring->capacity ? end - ring->capacity : 0;
	start = Max(start, base);
	for (uint64 position = start, next; position < end; position = next)
	{
		int			len;

		/* A million slots take seconds to read: cancel and timeouts work. */
		CHECK_FOR_INTERRUPTS();
		len = read_record(ring, position, buf, &next);

		if (len >= 0 && !visit(buf, len, next, arg))
			break;
	}
}

/*
 * The exporter meets a position not published yet: a writer between its
 * claim and its last store (a few hundred nanoseconds), or one preempted
 * or stopped there.  Export waits for it, but not for ever: with export
 * on, writers cannot lap the exporter, so a position nobody will publish
 * would stop export for good.  True once positions claimed before the wait
 * began (below stuck_end) have held it up for SHM_RING_WAIT_MS: skip them.
 * A writer that resumes later finds its record passed and counts it as
 * dropped (publish).
 */
#define SHM_RING_WAIT_MS 5000

typedef enum Unpublished
{
	UNPUBLISHED_WAIT,			/* for the next round */
	UNPUBLISHED_PASSED,
	UNPUBLISHED_NOW_PUBLISHED,	/* meanwhile: read it */
} Unpublished;

static bool
waited_long_enough(ShmRing *ring, uint64 position, uint64 end)
{
	TimestampTz now = GetCurrentTimestamp();

	if (ring->stuck_since == 0 || position >= ring->stuck_end)
	{
		ring->stuck_since = now;
		ring->stuck_end = end;
		return false;
	}
	return TimestampDifferenceExceeds(ring->stuck_since, now, SHM_RING_WAIT_MS);
}

/*
 * What the exporter does at a position whose slot does not hold it
 * published.  Passed at once: a position its writer gave up (it counted
 * the drop), or one a later lap took (a writer that had not seen export
 * start, and so did not keep it); else after SHM_RING_WAIT_MS.
 * A position passed is marked SEQ_SKIPPED with a compare-and-swap, which
 * fails if its writer publishes first: whoever comes second knows, and the
 * record is read, or dropped and counted by its writer, never both.  The
 * one slot not marked is one an earlier lap's writer still copies into
 * (one held up since before export started): its writer's, which a mark
 * would let the next lap take while it copies.
 */
static Unpublished
pass_unpublished(ShmRing *ring, uint64 position, uint64 end)
{
	RingSlot   *slot = slot_at(ring, position);
	uint64		seq = pg_atomic_read_u64(&slot->seq);

	if (pg_atomic_read_u64(&slot->abandoned) == position + 1 ||
		SEQ_POSITION(seq) > position + 1 ||
		(SEQ_POSITION(seq) == position + 1 && (seq & SEQ_SKIPPED) != 0))
		return UNPUBLISHED_PASSED;
	if (!waited_long_enough(ring, position, end))
		return UNPUBLISHED_WAIT;
	for (;;)
	{
		uint64		mark;

		if (seq == position + 1)
			return UNPUBLISHED_NOW_PUBLISHED;
		if (SEQ_POSITION(seq) > position + 1)
			return UNPUBLISHED_PASSED;	/* a later lap took it meanwhile */
		if (SEQ_POSITION(seq) == position + 1)
		{
			/*
			 * Its writer copies: passed only if it can be looked at again
			 * (settle_passed), else waited for, round after round, while
			 * as many passed writers all still copy (held up, stopped):
			 * passed unlisted, its record could be published unread and
			 * uncounted.
			 */
			if (ring->npassed == SHM_RING_PASSED_MAX)
				return UNPUBLISHED_WAIT;
			mark = seq | SEQ_SKIPPED;
		}
		else if ((seq & SEQ_WRITING) != 0)
			return UNPUBLISHED_PASSED;	/* an earlier lap's writer copies */
		else
			mark = (position + 1) | SEQ_SKIPPED;	/* not taken yet */
		/* On failure, seq is updated to the current value. */
		if (pg_atomic_compare_exchange_u64(&slot->seq, &seq, mark))
		{
			if ((mark & SEQ_WRITING) != 0)
				ring->passed[ring->npassed++] = position;
			return UNPUBLISHED_PASSED;
		}
	}
}

/*
 * A writer that looked for the exporter's mark just before the exporter
 * passed its position, and was held up there until after it, stores over
 * the mark (publish): its record is published where the exporter will not
 * read it.  Each round the exporter looks at the positions it passed while
 * their writers copied: a record published since is hidden again and
 * counted as dropped, as its writer would have had it seen the mark.
 * A position its writer still copies into is kept for the next round; one
 * published at or past exported_upto (an export failed since) is read
 * again by the exporter, as is any record there; any other outcome (the
 * writer saw the mark, a later lap took the slot) needs nothing.  The head
 * is read before the compare-and-swap, which succeeds only if nobody took
 * the slot since.
 */
static void
settle_passed(ShmRing *ring)
{
	uint64		exported_upto = pg_atomic_read_u64(&ring->exported_upto);
	int			kept = 0;

	for (int i = 0; i < ring->npassed; i++)
	{
		uint64		position = ring->passed[i];
		RingSlot   *slot = slot_at(ring, position);
		uint64		seq = pg_atomic_read_u64(&slot->seq);
		bool		first;

		if (seq == ((position + 1) | SEQ_WRITING | SEQ_SKIPPED))
		{
			ring->passed[kept++] = position;
			continue;
		}
		if (seq != position + 1 || position >= exported_upto)
			continue;
		pg_read_barrier();
		first = *(volatile uint64 *) &slot->head == position;
		if (pg_atomic_compare_exchange_u64(&slot->seq, &seq, (position + 1) | SEQ_SKIPPED) && first)
		{
			count_extra_slots(ring, position, 1);
			pg_atomic_fetch_add_u64(&ring->dropped, 1);
		}
	}
	ring->npassed = kept;
}

/* A passed position read after all (published before the exporter came back to it): not to settle. */
static void
forget_passed(ShmRing *ring, uint64 position)
{
	for (int i = 0; i < ring->npassed; i++)
		if (ring->passed[i] == position)
		{
			ring->passed[i] = ring->passed[--ring->npassed];
			return;
		}
}

uint64
shm_ring_read_unexported(ShmRing *ring, void *buf, ShmRingVisitor visit, void *arg, int max)
{
	uint64		end = pg_atomic_read_u64(&ring->next_write.value);
	uint64		position = pg_atomic_read_u64(&ring->exported_upto);
	int			visited = 0;

	if (unlikely(ring->npassed > 0))
		settle_passed(ring);
	while (position < end && visited < max)
	{
		uint64		next;
		int			len;

		/* The slot holds 0, an earlier lap's number, or this position's while written. */
		if (pg_atomic_read_u64(&slot_at(ring, position)->seq) != position + 1)
		{
			Unpublished what = pass_unpublished(ring, position, end);

			if (what == UNPUBLISHED_WAIT)
				break;
			if (what == UNPUBLISHED_PASSED)
			{
				position++;
				continue;
			}
		}
		len = read_record(ring, position, buf, &next);
		if (len >= 0)
		{
			if (unlikely(ring->npassed > 0))
				forget_passed(ring, position);
			if (!visit(buf, len, next, arg))
				break;			/* left for the next read */
			visited++;
		}
		position = next;
	}
	return position;
}

/*
 * Forward only: a batch read before export was switched off and on again
 * ends below where export restarted (shm_ring_set_keep_unexported).
 */
static void
advance_exported(ShmRing *ring, uint64 upto)
{
	if (upto > pg_atomic_read_u64(&ring->exported_upto))
		pg_atomic_write_u64(&ring->exported_upto, upto);
}

void
shm_ring_mark_exported(ShmRing *ring, uint64 upto, int count)
{
	advance_exported(ring, upto);
	pg_atomic_fetch_add_u64(&ring->exported, count);
}

void
shm_ring_mark_rejected(ShmRing *ring, uint64 upto, int count)
{
	advance_exported(ring, upto);
	pg_atomic_fetch_add_u64(&ring->dropped, count);
}

void
shm_ring_count_dropped(ShmRing *ring, uint64 count)
{
	pg_atomic_fetch_add_u64(&ring->dropped, count);
}

/*
 * The records written in generation gen, as readers are shown them: never
 * fewer than a reader was shown before in the same generation.  The count
 * falls behind for a moment while a long record's slots past the first are
 * counted before its claim, and falls when a claimed record is given up,
 * and a counter that goes down reads as a reset to whoever takes its rate.
 * So after a record given up it may stay one ahead, until one more is
 * written.  A reader of an older generation (a reset came in between)
 * changes nothing.
 */
static uint64
never_fewer(ShmRing *ring, uint64 gen, uint64 written)
{
	uint64		shown = pg_atomic_read_u64(&ring->written_shown);

	written = Min(written, EXTRA_SLOTS(~UINT64CONST(0)));
	for (;;)
	{
		uint64		shown_gen = EXTRA_GEN(shown);

		if (shown_gen == gen && EXTRA_SLOTS(shown) >= written)
			return EXTRA_SLOTS(shown);
		/* Generations wrap at 16 bits: an older one is up to half the range behind. */
		if (shown_gen != gen && (uint16) (gen - shown_gen) >= 0x8000)
			return written;
		/* On failure, shown is updated to the current value. */
		if (pg_atomic_compare_exchange_u64(&ring->written_shown, &shown,
										   (gen << EXTRA_GEN_SHIFT) | written))
			return written;
	}
}

void
shm_ring_counts(ShmRing *ring, ShmRingCounts *counts)
{
	uint64		base;
	uint64		end;
	uint64		extra;
	uint64		gen;
	uint64		exported_upto = pg_atomic_read_u64(&ring->exported_upto);

	/*
	 * Every claimed position was written: no counter shared by all writers
	 * but the rare one of records longer than a slot.  Those count their
	 * slots past the first before they claim them: a record fewer for a
	 * moment (none below 0), which never_fewer does not show.
	 */
	gen = read_period(ring, &base, &end, &extra);
	counts->written = never_fewer(ring, gen, tp_ring_between(base + extra, end));
	counts->dropped = pg_atomic_read_u64(&ring->dropped);
	counts->exported = pg_atomic_read_u64(&ring->exported);
	counts->pending = shm_ring_keeps_unexported(ring) ?
		(int64) Min(tp_ring_between(exported_upto, end), (uint64) ring->capacity) : 0;
	counts->capacity = ring->capacity;
}

/*
 * Publish the period that starts at base, unless extra_slots is no longer
 * *seen (then *seen gets its value).  Out of line, so that a test can hold
 * a reset here, between reading the end and publishing.
 */
static pg_noinline bool
start_period(ShmRing *ring, uint64 *seen, uint64 base)
{
	uint64		next = (EXTRA_GEN(*seen) + 1) << EXTRA_GEN_SHIFT;

	pg_atomic_write_u64(&ring->base[EXTRA_GEN(next) % RESET_BASES], base);
	return pg_atomic_compare_exchange_u64(&ring->extra_slots, seen, next);
}

/*
 * A new period starts at the ring's end: a new generation in extra_slots
 * with no positions counted, its base written before it is published.  The
 * end and the count must agree: a writer that claimed below the end but
 * counts its extra slots after the reset takes them out again
 * (count_extra_slots); a writer that claimed at or past the end and
 * counted before the new generation would have them zeroed, so the reset
 * publishes only if extra_slots did not change since before it read the
 * end, and reads again otherwise.  Writers never wait for a reset; a reset
 * waits only for another reset.
 */
void
shm_ring_reset(ShmRing *ring)
{
	uint64		seen;

	/* One at a time: each writes the base of the generation it publishes. */
	while (pg_atomic_exchange_u32(&ring->resetting, 1) != 0)
	{
		CHECK_FOR_INTERRUPTS();
		pg_usleep(1000L);
	}
	/* Nothing here may raise an error: resetting would stay set. */
	seen = pg_atomic_read_u64(&ring->extra_slots);
	for (;;)
	{
		pg_memory_barrier();
		if (start_period(ring, &seen, pg_atomic_read_u64(&ring->next_write.value)))
			break;
	}
	pg_atomic_write_u64(&ring->dropped, 0);
	pg_atomic_write_u64(&ring->exported, 0);
	pg_atomic_write_u32(&ring->resetting, 0);
}
