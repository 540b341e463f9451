/*
 * shm_ring.h - a fixed-size ring of records in shared memory that writers
 * never wait on.
 *
 * A compare-and-swap claims a position (or several consecutive ones for a
 * record longer than a slot), the record is copied into its slots, and the
 * slots' sequence numbers publish it; readers copy the slots and check the
 * sequence numbers before and after (a seqlock).  Positions count slots.
 * In "keep" mode (something exports the records) writers drop and count
 * rather than overwrite records not yet exported; otherwise the ring keeps
 * the newest.
 */
#ifndef TRACEPROF_SHM_RING_H
#define TRACEPROF_SHM_RING_H

#include "postgres.h"

#include "port/atomics.h"

typedef struct ShmRing ShmRing;

/* record: len bytes, as written; next: the position after it */
typedef bool (*ShmRingVisitor) (const void *record, Size len, uint64 next, void *arg);

/* Bytes of a slot that are not record data. */
#define SHM_RING_SLOT_OVERHEAD 32

/* capacity slots of slot_data bytes; records of up to max_record bytes. */
extern Size shm_ring_size(int capacity, Size slot_data);
extern void shm_ring_init(ShmRing *ring, int capacity, Size slot_data, Size max_record);

/*
 * "Keep" mode, set by the process that exports the records (none at
 * first): writers then drop new records rather than overwrite ones not
 * yet exported.
 */
extern uint64 shm_ring_set_keep_unexported(ShmRing *ring, bool keep);
extern bool shm_ring_keeps_unexported(ShmRing *ring);

/*
 * Copy len bytes (at most max_record) into the next slots.  False when
 * the record was dropped (the ring keeps what is not exported, and is full).
 * *pending gets the number of slots now waiting for export, this record's
 * shm_ring_slots() included.
 */
extern bool shm_ring_write(ShmRing *ring, const void *record, Size len,
						   uint64 *pending);

/*
 * The same for a record that fits one slot, written in place: the slot's
 * data to write len bytes into, then shm_ring_end_write publishes it.
 * NULL when the record is dropped.
 */
extern void *shm_ring_begin_write(ShmRing *ring, Size len, uint64 *position);
extern void shm_ring_end_write(ShmRing *ring, uint64 position, uint64 *pending);

/* Slots a record of len bytes takes. */
extern uint32 shm_ring_slots(ShmRing *ring, Size len);

/* Visit retained records, oldest first; buf holds one record. */
extern void shm_ring_scan_retained(ShmRing *ring, void *buf,
								   ShmRingVisitor visit, void *arg);

/*
 * Visit up to max records not yet exported, oldest first, stopping at one
 * still being written, or before one the visitor returns false for (the
 * next read visits it again); returns the position to pass to
 * shm_ring_mark_*.
 */
extern uint64 shm_ring_read_unexported(ShmRing *ring, void *buf,
									   ShmRingVisitor visit, void *arg, int max);
extern void shm_ring_mark_exported(ShmRing *ring, uint64 upto, int count);
extern void shm_ring_mark_rejected(ShmRing *ring, uint64 upto, int count);

/* Count records lost before they reached the ring. */
extern void shm_ring_count_dropped(ShmRing *ring, uint64 count);

typedef struct ShmRingCounts
{
	int64		written;
	int64		dropped;
	int64		exported;
	int64		pending;		/* slots written, not exported, still retained */
	int64		capacity;		/* slots */
} ShmRingCounts;

extern void shm_ring_counts(ShmRing *ring, ShmRingCounts *counts);

/* Zero the counters and hide retained records from scans. */
extern void shm_ring_reset(ShmRing *ring);

#endif
