/*
 * shm_ring.h - a fixed-size ring of records in shared memory that writers
 * never wait on.
 *
 * A compare-and-swap claims a position, the record is copied into its
 * slot, and the slot's sequence number publishes it; readers copy a slot and
 * check the sequence number before and after (a seqlock).  In "keep" mode
 * (something exports the records) writers drop and count rather than
 * overwrite records not yet exported; otherwise the ring keeps the newest.
 */
#ifndef TRACEPROF_SHM_RING_H
#define TRACEPROF_SHM_RING_H

#include "postgres.h"

#include "port/atomics.h"

typedef struct ShmRing ShmRing;

/* record: len bytes, as written */
typedef bool (*ShmRingVisitor) (const void *record, Size len, void *arg);

extern Size shm_ring_size(int capacity, Size record_size);
extern void shm_ring_init(ShmRing *ring, int capacity, Size record_size);

/*
 * Copy len bytes (at most the record size) into the next slot.  False when
 * the record was dropped because keep_unexported and the ring is full.
 * *pending gets the number of records now waiting for export.
 */
extern bool shm_ring_write(ShmRing *ring, const void *record, Size len,
						   bool keep_unexported, uint64 *pending);

/* Visit retained records, oldest first; buf holds one record. */
extern void shm_ring_scan_retained(ShmRing *ring, void *buf,
								   ShmRingVisitor visit, void *arg);

/*
 * Visit up to max records not yet exported, oldest first, stopping at one
 * still being written; returns the position to pass to shm_ring_mark_*.
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
	int64		pending;		/* written, not exported, still retained */
	int64		capacity;
} ShmRingCounts;

extern void shm_ring_counts(ShmRing *ring, bool keep_unexported, ShmRingCounts *counts);

/* Zero the counters and hide retained records from scans. */
extern void shm_ring_reset(ShmRing *ring);

#endif
