/*
 * pprof_parts.h - runs of a gzip'd pprof's samples as pprofs of their own,
 * for a profile a server refused as too large (413) to go again in parts.
 */
#ifndef TP_PPROF_PARTS_H
#define TP_PPROF_PARTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct tp_pprof_parts tp_pprof_parts;

/* The profile gz unpacked; NULL: not a gzip'd pprof, or no memory. */
tp_pprof_parts *tp_pprof_parts_open(const uint8_t *gz, size_t len);
void		tp_pprof_parts_close(tp_pprof_parts *parts);

/* How many samples it holds. */
size_t		tp_pprof_parts_samples(const tp_pprof_parts *parts);

/* The "samples" count (first value) of samples [first, first + count). */
uint64_t	tp_pprof_parts_weight(const tp_pprof_parts *parts, size_t first, size_t count);

/*
 * Samples [first, first + count) as a gzip'd pprof of their own, with the
 * whole's header; malloc'd, its length in *len; NULL: no memory.
 */
uint8_t    *tp_pprof_parts_encode(tp_pprof_parts *parts, size_t first, size_t count, size_t *len);

#endif
