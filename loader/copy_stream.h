/*
 * copy_stream.h - the client side of one COPY ... FROM STDIN (FORMAT binary).
 *
 * Tuples are written into buf (see order_row.h); every ~256 KiB the buffer
 * goes to libpq in one PQputCopyData() call (db.c), and is sent before the
 * call returns; a stop (SIGINT, SIGTERM) abandons the connection even when
 * the server has stopped reading.  CopyData messages need not follow row
 * boundaries, so a flush may happen anywhere between tuples.
 */
#ifndef LD_COPY_STREAM_H
#define LD_COPY_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "pg_binary.h"

#define LD_COPY_FLUSH_BYTES ((size_t) 256 * 1024)

typedef struct ld_copy_stream
{
	pgb_buf		buf;			/* unsent bytes */
	uint64_t	bytes_sent;		/* through libpq, this COPY */
	char		error[1600];	/* why the last call failed (db.c's error and what) */
} ld_copy_stream;

/* Allocate the buffer; false on out-of-memory. */
bool		ld_copy_init(ld_copy_stream *cs);
void		ld_copy_free(ld_copy_stream *cs);

/* Start a new COPY data stream: the binary header, into an empty buffer. */
bool		ld_copy_begin(ld_copy_stream *cs);

/* Send everything buffered; false (cs->error) when libpq fails or on a stop. */
bool		ld_copy_flush(ld_copy_stream *cs, ld_db *db);

/* Call after each tuple: flushes once the buffer holds enough. */
static inline bool
ld_copy_tuple_done(ld_copy_stream *cs, ld_db *db)
{
	return cs->buf.len < LD_COPY_FLUSH_BYTES || ld_copy_flush(cs, db);
}

/* Trailer, flush, PQputCopyEnd(NULL).  The caller then reads the result. */
bool		ld_copy_finish(ld_copy_stream *cs, ld_db *db);

/*
 * Give up: send what is buffered (whole tuples only, so the server still
 * checks every earlier row and reports the first bad one), then
 * PQputCopyEnd(reason) makes the server fail the COPY.
 */
bool		ld_copy_abort(ld_copy_stream *cs, ld_db *db, const char *reason);

#endif
