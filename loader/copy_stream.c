/*
 * copy_stream.c - buffer binary COPY data and hand it to libpq.
 */
#include "copy_stream.h"

#include <stdio.h>
#include <string.h>

#include "db.h"

/* db.c's one line (libpq's message, or "interrupted"). */
static void
set_error(ld_copy_stream *cs, const ld_db *db, const char *what)
{
	snprintf(cs->error, sizeof(cs->error), "%s: %s", what,
			 db->error[0] != '\0' ? db->error : "unknown libpq error");
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
ld_copy_flush(ld_copy_stream *cs, ld_db *db)
{
	if (!ld_db_put_copy_data(db, cs->buf.data, cs->buf.len))
	{
		set_error(cs, db, "sending COPY data failed");
		return false;
	}
	cs->bytes_sent += cs->buf.len;
	cs->buf.len = 0;
	return true;
}

bool
ld_copy_finish(ld_copy_stream *cs, ld_db *db)
{
	if (!pgb_buf_reserve(&cs->buf, PGB_COPY_TRAILER_LEN))
	{
		snprintf(cs->error, sizeof(cs->error), "out of memory");
		return false;
	}
	pgb_put_copy_trailer(&cs->buf);
	if (!ld_copy_flush(cs, db))
		return false;
	if (!ld_db_put_copy_end(db, NULL))
	{
		set_error(cs, db, "ending COPY failed");
		return false;
	}
	return true;
}

bool
ld_copy_abort(ld_copy_stream *cs, ld_db *db, const char *reason)
{
	bool		ok = ld_copy_flush(cs, db);

	cs->buf.len = 0;
	if (!ld_db_put_copy_end(db, reason))
	{
		set_error(cs, db, "aborting COPY failed");
		return false;
	}
	return ok;
}
