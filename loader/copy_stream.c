/*
 * copy_stream.c - buffer binary COPY data and hand it to libpq.
 */
#include "copy_stream.h"

#include <stdio.h>
#include <string.h>

#include "db.h"

/* libpq's message, folded as db.c folds its own (it has hint lines). */
static void
set_error(ld_copy_stream *cs, PGconn *conn, const char *what)
{
	size_t		n;

	snprintf(cs->error, sizeof(cs->error), "%s: ", what);
	n = strlen(cs->error);
	ld_pq_one_line(cs->error + n, sizeof(cs->error) - n, PQerrorMessage(conn));
	if (cs->error[n] == '\0')
		snprintf(cs->error + n, sizeof(cs->error) - n, "unknown libpq error");
}

bool
ld_copy_init(ld_copy_stream *cs)
{
	memset(cs, 0, sizeof(*cs));
	pgb_buf_init(&cs->buf);
	/* a flush threshold plus one typical tuple, so tuples rarely regrow it */
	return pgb_buf_reserve(&cs->buf, LD_COPY_FLUSH_BYTES + 64 * 1024);
}

void
ld_copy_free(ld_copy_stream *cs)
{
	pgb_buf_free(&cs->buf);
}

bool
ld_copy_begin(ld_copy_stream *cs)
{
	cs->buf.len = 0;
	cs->bytes_sent = 0;
	cs->error[0] = '\0';
	if (!pgb_buf_reserve(&cs->buf, PGB_COPY_HEADER_LEN))
		return false;
	pgb_put_copy_header(&cs->buf);
	return true;
}

bool
ld_copy_flush(ld_copy_stream *cs, PGconn *conn)
{
	const char *p = cs->buf.data;
	size_t		left = cs->buf.len;

	while (left > 0)
	{
		int			n = left > (size_t) 64 * 1024 * 1024 ? 64 * 1024 * 1024 : (int) left;

		if (PQputCopyData(conn, p, n) != 1)
		{
			set_error(cs, conn, "sending COPY data failed");
			return false;
		}
		p += n;
		left -= (size_t) n;
	}
	cs->bytes_sent += cs->buf.len;
	cs->buf.len = 0;
	return true;
}

bool
ld_copy_finish(ld_copy_stream *cs, PGconn *conn)
{
	if (!pgb_buf_reserve(&cs->buf, PGB_COPY_TRAILER_LEN))
	{
		snprintf(cs->error, sizeof(cs->error), "out of memory");
		return false;
	}
	pgb_put_copy_trailer(&cs->buf);
	if (!ld_copy_flush(cs, conn))
		return false;
	if (PQputCopyEnd(conn, NULL) != 1)
	{
		set_error(cs, conn, "ending COPY failed");
		return false;
	}
	return true;
}

bool
ld_copy_abort(ld_copy_stream *cs, PGconn *conn, const char *reason)
{
	bool		ok = ld_copy_flush(cs, conn);

	cs->buf.len = 0;
	if (PQputCopyEnd(conn, reason) != 1)
	{
		set_error(cs, conn, "aborting COPY failed");
		return false;
	}
	return ok;
}
