/*
 * ring_positions.h - the arithmetic of a ring's ever-growing positions.
 *
 * Writers claim positions, an exporter moves exported_upto behind them.
 * A writer's position may be stale: read before it was preempted, while
 * others wrote and the exporter went past it.  Differences taken the other
 * way round would wrap to huge unsigned numbers: a ring that "is full"
 * (a span dropped for nothing) or a backlog of 2^64.
 */
#ifndef TP_RING_POSITIONS_H
#define TP_RING_POSITIONS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Whether nslots at position fit among capacity slots not yet exported.
 * A stale position fits; the claim that follows fails and looks again.
 */
static inline bool
tp_ring_has_room(uint64_t position, uint32_t nslots, uint64_t exported_upto, uint64_t capacity)
{
	return position + nslots <= exported_upto + capacity;
}

/*
 * Positions from start up to end (written and not exported: from
 * exported_upto); none when start was read after end and is past it.
 */
static inline uint64_t
tp_ring_between(uint64_t start, uint64_t end)
{
	return end > start ? end - start : 0;
}

#endif
