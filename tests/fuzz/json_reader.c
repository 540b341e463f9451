/*
 * json_reader.c - libFuzzer target for the loader's streaming JSON reader
 * (jr_next) and the record checks and COPY encoding behind it
 * (order_row_append), i.e. everything the loader does with file bytes.
 *
 * The input is read twice: whole, and in pieces whose size the first byte
 * chooses, each piece an exactly sized copy so any over-read shows.  The
 * header promises that JR_NEED_MORE never changes a result: both runs must
 * return the same records, COPY bytes and error text.  (Exception: a
 * record past max_record may be reported as too large before its syntax
 * error is seen; that depends on how much input is in the buffer.)
 * Errors must be one line of valid UTF-8 (they end up in span status
 * messages) with a position inside the input.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "json_reader.h"
#include "order_row.h"
#include "pg_binary.h"

#define MAX_RECORD 2048			/* small, so the size limit is reached too */

typedef struct outcome
{
	uint64_t	digest;			/* of every record and its COPY tuple */
	uint64_t	records;
	jr_result	last;
	char		error[1024];
} outcome;

static uint64_t
mix(uint64_t h, const void *bytes, size_t len)
{
	const unsigned char *p = bytes;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;	/* FNV-1a */
	return (h ^ len) * 0x100000001b3ULL;
}

static bool
is_valid_utf8_line(const char *s)
{
	const unsigned char *p = (const unsigned char *) s;

	while (*p)
	{
		int			n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3
			: (*p & 0xF8) == 0xF0 ? 4 : 0;

		if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f)))
			return false;
		for (int i = 1; i < n; i++)
			if ((p[i] & 0xC0) != 0x80)
				return false;
		p += n;
	}
	return true;
}

/* Feed data[0, size) in pieces of step bytes (step 0: all at once). */
static void
read_all(const uint8_t *data, size_t size, size_t step, outcome *out)
{
	jr_reader  *r = malloc(sizeof(jr_reader));
	pgb_buf		copy;
	size_t		start = 0;
	size_t		visible = step == 0 || step > size ? size : step;

	FUZZ_CHECK(r != NULL);
	jr_init(r);
	r->max_record = MAX_RECORD;
	pgb_buf_init(&copy);
	memset(out, 0, sizeof(*out));
	out->digest = 0xcbf29ce484222325ULL;
	for (;;)
	{
		size_t		n = visible - start;
		char	   *piece = malloc(n ? n : 1);
		size_t		consumed = (size_t) -1;
		jr_record	rec;
		jr_result	res;

		FUZZ_CHECK(piece != NULL);
		memcpy(piece, data + start, n);
		res = jr_next(r, piece, n, visible == size, &consumed, &rec);
		FUZZ_CHECK(consumed <= n);
		if (res == JR_RECORD)
		{
			copy.len = 0;
			if (!order_row_append(r, &rec, &copy))
				res = JR_ERROR;
			else
			{
				out->records++;
				out->digest = mix(out->digest, copy.data, copy.len);
				for (size_t i = 0; i < rec.ntags; i++)
					out->digest = mix(out->digest, rec.tags[i].ptr, rec.tags[i].len);
			}
		}
		free(piece);
		start += consumed;
		FUZZ_CHECK(r->offset == start);
		if (res == JR_RECORD)
			continue;
		if (res == JR_NEED_MORE)
		{
			FUZZ_CHECK(visible < size);	/* never more wanted after the end */
			visible = step == 0 || size - visible < step ? size : visible + step;
			continue;
		}
		out->last = res;
		if (res == JR_ERROR)
		{
			FUZZ_CHECK(r->error.message[0] != '\0');
			if (r->error.has_position)
			{
				FUZZ_CHECK(r->error.offset <= size);
				FUZZ_CHECK(r->error.line >= 1 && r->error.column >= 1);
				FUZZ_CHECK(r->error.column <= r->error.offset + 1);
			}
			jr_format_error(&r->error, "fuzz.json", out->error, sizeof(out->error));
			FUZZ_CHECK(is_valid_utf8_line(out->error));
			/* a failed reader stays failed */
			FUZZ_CHECK(jr_next(r, "", 0, true, &consumed, &rec) == JR_ERROR);
		}
		else
			FUZZ_CHECK(res == JR_END);
		break;
	}
	FUZZ_CHECK(out->records == r->records || out->last == JR_ERROR);
	jr_free(r);
	free(r);
	pgb_buf_free(&copy);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static outcome whole;
	static outcome pieces;
	size_t		step;

	if (size == 0)
		return 0;
	step = 1 + data[0] % 64;
	data++;
	size--;
	read_all(data, size, 0, &whole);
	read_all(data, size, step, &pieces);
	if (strstr(whole.error, "larger than") || strstr(pieces.error, "larger than"))
		return 0;
	FUZZ_CHECK(whole.last == pieces.last);
	FUZZ_CHECK(whole.records == pieces.records);
	FUZZ_CHECK(whole.digest == pieces.digest);
	FUZZ_CHECK(strcmp(whole.error, pieces.error) == 0);
	return 0;
}
