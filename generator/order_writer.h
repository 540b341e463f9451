/*
 * order_writer.h - synthetic order records (docs/record-format.md) as
 * bytes, a pure function of (seed, N, format).
 *
 * The caller owns the output buffer and the destination: gen_orders_emit
 * fills the buffer and hands each full chunk to a sink (a file, or memory
 * in the unit test), so there is no per-record system call and no printf.
 */
#ifndef GEN_ORDER_WRITER_H
#define GEN_ORDER_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pools.h"
#include "rng.h"

typedef enum gen_format
{
	GEN_FORMAT_JSON,			/* "[\n" rec ",\n" rec ... "\n]\n"; N=0: "[]\n" */
	GEN_FORMAT_NDJSON,			/* rec "\n" per record; N=0: empty file */
} gen_format;

typedef struct gen_orders
{
	gen_rng		rng;
	const gen_pools *pools;
	uint64_t	next_id;		/* ids run 1..N */
	int64_t		first_us;		/* created_at range, microseconds UTC */
	uint64_t	span_us;
} gen_orders;

void		gen_orders_init(gen_orders *g, uint64_t seed);

/*
 * Upper bound on the bytes of one record plus its separator; a buffer with
 * that much room left can always take the next record.
 */
size_t		gen_orders_max_record(const gen_orders *g);

/* Write the next record (no separator) at p; returns the new end. */
char	   *gen_orders_record(gen_orders *g, char *p);

/* Receives each filled chunk; false stops the stream (error kept by arg). */
typedef bool (*gen_sink) (void *arg, const char *data, size_t len);

/*
 * Produce the whole document of n records with buf (bufsize bytes, at least
 * gen_orders_max_record() + 16) as staging area.  Returns false as soon as
 * the sink fails, or when buf is too small.
 */
bool		gen_orders_emit(uint64_t seed, gen_format format, uint64_t n,
							char *buf, size_t bufsize,
							gen_sink sink, void *arg);

#endif
