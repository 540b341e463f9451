/*
 * span_encoding.c - a span's texts in the encoding its reader needs.
 *
 * A span's texts (names, query, error message) are in its database's
 * encoding.  OTLP carries UTF-8 only, and a receiver that checks refuses a
 * whole batch for one bad string; a reader in another database needs its
 * own encoding.  So a backend of a database in neither UTF-8 nor SQL_ASCII
 * stores its spans converted to UTF-8 (only such backends pay for it), and
 * every reader converts what it gets to its own encoding.  Nothing here
 * raises an error: a character that cannot be converted, or a byte that is
 * not valid in the target (SQL_ASCII stores any), becomes '?', so that one
 * span can neither fail a view nor poison a batch.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "common/string.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "traceprof.h"

/* A conversion function, looked up once (it takes a transaction). */
typedef struct Converter
{
	int			from;
	int			to;
	bool		found;
	FmgrInfo	function;
} Converter;

/* A backend converts from its database's encoding; a reader to its own. */
#define MAX_CONVERTERS 8

static Converter converters[MAX_CONVERTERS];
static int	converter_count;
static char *scratch;

/* The longest text but the query: a message, a span name. */
#define MAX_SHORT_TEXT 255
StaticAssertDecl(sizeof(((TraceprofSpan *) NULL)->message) <= MAX_SHORT_TEXT + 1 &&
				 sizeof(((TraceprofSpan *) NULL)->name) <= MAX_SHORT_TEXT + 1,
				 "scratch holds every text");

/* Memory for good, or NULL: never an error. */
static void *
allocate(Size size)
{
	return MemoryContextAllocExtended(TopMemoryContext, size, MCXT_ALLOC_NO_OOM);
}

/*
 * The conversion from one encoding to another, NULL when none can be had:
 * looked up only when look_up and a transaction allows it.
 */
static FmgrInfo *
find_converter(int from, int to, bool look_up)
{
	Converter  *c;
	Oid			proc;

	if (from == PG_SQL_ASCII)
		return NULL;			/* any bytes: nothing says what they are */
	for (int i = 0; i < converter_count; i++)
		if (converters[i].from == from && converters[i].to == to)
			return converters[i].found ? &converters[i].function : NULL;
	/* The exporter (no database) and an aborted transaction cannot look. */
	if (!look_up || !IsTransactionState() || converter_count == MAX_CONVERTERS)
		return NULL;
	c = &converters[converter_count];
	proc = FindDefaultConversionProc(from, to);
	c->found = OidIsValid(proc);
	if (c->found)
		fmgr_info_cxt(proc, &c->function, TopMemoryContext);
	c->from = from;
	c->to = to;
	converter_count++;
	return c->found ? &c->function : NULL;
}

/*
 * The len bytes at src converted into dest, which holds
 * len * (MAX_CONVERSION_GROWTH + 1) + 1 bytes (every byte grown, or a '?');
 * returns the length written, NUL not counted.  Without a converter the
 * bytes are kept where valid in the target.
 */
static uint32
convert_into(const char *src, uint32 len, int from, int to, FmgrInfo *converter, char *dest)
{
	uint32		done = 0;
	uint32		out = 0;

	dest[0] = '\0';
	while (done < len)
	{
		if (converter != NULL)
		{
			/* Writes up to MAX_CONVERSION_GROWTH bytes a byte and a NUL. */
			done += DatumGetInt32(FunctionCall6(converter, Int32GetDatum(from), Int32GetDatum(to),
												CStringGetDatum(src + done),
												CStringGetDatum(dest + out),
												Int32GetDatum(len - done), BoolGetDatum(true)));
			out += strlen(dest + out);
		}
		else
		{
			int			valid = pg_encoding_verifymbstr(to, src + done, len - done);

			memcpy(dest + out, src + done, valid);
			out += valid;
			done += valid;
		}
		if (done >= len)
			break;
		/*
		 * What stopped it: a valid character of the source the target lacks,
		 * or a byte that starts no valid character (skipping the length it
		 * claims would take the bytes after it too).
		 */
		dest[out++] = '?';
		if (converter != NULL)
			done += (uint32) Max(pg_encoding_verifymbchar(from, src + done, (int) (len - done)), 1);
		else
			done++;
	}
	dest[out] = '\0';
	return out;
}

/*
 * The len bytes at text (size bytes of room) converted in place, cut on a
 * character boundary to fit; returns the new length.
 */
static uint32
convert_text(char *text, uint32 len, Size size, int from, int to, FmgrInfo *converter)
{
	uint32		out = convert_into(text, len, from, to, converter, scratch);

	if (out > size - 1)
		out = pg_encoding_mbcliplen(to, scratch, out, size - 1);
	memcpy(text, scratch, out);
	text[out] = '\0';
	return out;
}

#define CONVERT(field, len_field) \
	(span->len_field = convert_text(span->field, span->len_field, sizeof(span->field), \
									span->encoding, to, converter))

/*
 * Role and database names come from the shared catalogs, where another
 * database's backend may have written them in its own encoding: even in a
 * span of the reader's encoding they may not be valid in it.
 */
static bool
name_valid_in(const char *name, int len, int encoding)
{
	/* Every server encoding extends ASCII: the usual names need no verifier. */
	return pg_is_ascii(name) || pg_encoding_verifymbstr(encoding, name, len) == len;
}

static bool
names_valid_in(const TraceprofSpan *span, int encoding)
{
	return name_valid_in(span->dbname, span->dbname_len, encoding) &&
		name_valid_in(span->username, span->username_len, encoding);
}

static void
texts_to_encoding(TraceprofSpan *span, int to, bool look_up)
{
	FmgrInfo   *converter;

	if (to == PG_SQL_ASCII || (span->encoding == to && names_valid_in(span, to)))
		return;
	/*
	 * The longest text grown, and a '?' for every byte at worst.  Maybe
	 * while a transaction aborts: no error, the texts stay as they are.
	 */
	if (scratch == NULL)
		scratch = allocate((Size) (Max(traceprof_max_query_length, MAX_SHORT_TEXT) + 1) *
						   (MAX_CONVERSION_GROWTH + 1) + 1);
	if (scratch == NULL)
		return;
	if (span->encoding == to)
	{
		/* Without a converter, what is not valid becomes '?'. */
		converter = NULL;
		CONVERT(dbname, dbname_len);
		CONVERT(username, username_len);
		return;
	}
	converter = find_converter(span->encoding, to, look_up);
	CONVERT(name, name_len);
	CONVERT(operation, operation_len);
	CONVERT(collection, collection_len);
	CONVERT(dbname, dbname_len);
	CONVERT(username, username_len);
	CONVERT(message, message_len);
	span->query_len = (int32) convert_text(span->query, (uint32) span->query_len,
										   traceprof_max_query_length + 1, span->encoding, to, converter);
	span->encoding = (uint8) to;
}

void
span_texts_to_encoding(TraceprofSpan *span, int to)
{
	texts_to_encoding(span, to, true);
}

/*
 * A backend of a database that is neither UTF-8 nor SQL_ASCII looks up its
 * conversion once, at its first statement (statement_spans.c): storing a
 * span may happen while an error is reported or a transaction aborts,
 * where no catalog lookup belongs.
 */
void
span_encoding_prepare(void)
{
	int			encoding = GetDatabaseEncoding();

	if (encoding != PG_UTF8 && encoding != PG_SQL_ASCII)
		(void) find_converter(encoding, PG_UTF8, true);
}

/*
 * A copy of the packed span with its texts in UTF-8, packed, valid until
 * the next call (the span itself when there is no memory for it).
 */
const TraceprofSpan *
span_in_utf8(const TraceprofSpan *span)
{
	static TraceprofSpan *unpacked;
	static TraceprofSpan *copy;

	if (unpacked == NULL)
		unpacked = allocate(TraceprofSpanSize());
	if (copy == NULL)
		copy = allocate(TraceprofSpanSize());
	if (unpacked == NULL || copy == NULL ||
		!span_unpack_texts((const char *) span, span_packed_size(span), unpacked))
		return span;
	texts_to_encoding(unpacked, PG_UTF8, false);
	span_pack(unpacked, copy);
	return copy;
}

/*
 * A UTF-8 string (span and function names in profiles, which keep them in
 * UTF-8 for pprof) as text in the database's encoding.
 */
text *
utf8_to_database_text(const char *s)
{
	int			to = GetDatabaseEncoding();
	uint32		len = strlen(s);
	char	   *converted;
	text	   *result;

	if (to == PG_UTF8 || to == PG_SQL_ASCII)
		return cstring_to_text_with_len(s, len);
	converted = palloc_extended((Size) len * (MAX_CONVERSION_GROWTH + 1) + 1, MCXT_ALLOC_HUGE);
	len = convert_into(s, len, PG_UTF8, to, find_converter(PG_UTF8, to, true), converted);
	result = cstring_to_text_with_len(converted, len);
	pfree(converted);
	return result;
}
