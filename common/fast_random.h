/*
 * fast_random.h - a fast per-thread pseudo-random generator.
 *
 * Span ids are drawn for every traced statement: one getrandom() system
 * call each cost more than the rest of the span.  This generator
 * (xoshiro256**) is seeded once per thread from getrandom() and again in
 * a forked child, so two PostgreSQL backends never share a sequence.  Not
 * for secrets: ids, jitter and sampling phases only.
 */
#ifndef TP_FAST_RANDOM_H
#define TP_FAST_RANDOM_H

#include <stdbool.h>
#include <stdint.h>

/* False only when the kernel cannot seed the generator (no getrandom). */
bool		tp_random_u64(uint64_t *out);

#endif
