/*
 * json_reader.h - a strict, streaming RFC 8259 pull parser for order records.
 *
 * The input is either one JSON array of records ("json") or one record per
 * line ("ndjson"); the first non-blank byte decides ('[' or '{'), and a
 * UTF-8 byte-order mark at the very start is skipped.  Every record must be
 * an object with exactly the keys of docs/record-format.md, each once, with
 * the JSON type the format gives it; everything else about the value (integer
 * ranges, decimal places, timestamps, currency codes) is checked by whoever
 * converts it (order_row.c).
 *
 * Streaming: the caller owns a buffer holding the input from the first byte
 * not consumed yet.  jr_next() parses what it can from it.  On JR_NEED_MORE
 * the record in progress is incomplete: the caller drops the *consumed bytes
 * (compacts), appends more input and calls again with the whole remainder;
 * the record is parsed again from its start.  A record larger than
 * max_record bytes is an error, so a buffer of max_record plus one read
 * always suffices and memory stays constant whatever the file size.
 *
 * Errors carry the absolute byte offset, the line and the column (both
 * 1-based; the column counts bytes) of the offending byte, and the record
 * number when the error is inside a record.
 */
#ifndef LD_JSON_READER_H
#define LD_JSON_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "slice.h"

#define JR_MAX_RECORD ((size_t) 16 * 1024 * 1024)

/* Deepest nesting of arrays and objects inside "attributes". */
#define JR_MAX_DEPTH 4096

typedef enum jr_result
{
	JR_RECORD,					/* *rec holds the next record */
	JR_END,						/* the input ended properly */
	JR_NEED_MORE,				/* call again with more input (or eof) */
	JR_ERROR,					/* reader->error says what and where */
} jr_result;

typedef enum jr_layout
{
	JR_LAYOUT_UNKNOWN,
	JR_LAYOUT_ARRAY,
	JR_LAYOUT_NDJSON,
} jr_layout;

typedef enum jr_field
{
	JR_ID,
	JR_CUSTOMER_ID,
	JR_CUSTOMER_NAME,
	JR_AMOUNT,
	JR_CURRENCY,
	JR_CREATED_AT,
	JR_TAGS,
	JR_ATTRIBUTES,
	JR_NFIELDS
} jr_field;

/* The keys, in column order. */
extern const char *const jr_field_names[JR_NFIELDS];

/*
 * One record.  Strings are decoded (escapes resolved) valid UTF-8 without
 * NUL; numbers and attributes are the raw JSON text.  The slices point into
 * the caller's buffer or the reader's scratch space: valid until the next
 * jr_next() call or until the caller moves its buffer.
 */
typedef struct jr_record
{
	ld_slice	id;				/* JSON number text */
	ld_slice	customer_id;	/* JSON number text */
	ld_slice	customer_name;
	ld_slice	amount;			/* JSON number text */
	ld_slice	currency;
	ld_slice	created_at;
	const ld_slice *tags;
	size_t		ntags;
	ld_slice	attributes;		/* the object's JSON text, braces included */
	const char *value_at[JR_NFIELDS];	/* where each value starts */
} jr_record;

typedef struct jr_error
{
	bool		has_position;	/* false for "the file is empty" */
	bool		out_of_memory;
	uint64_t	record;			/* 1-based record number, 0: between records */
	uint64_t	offset;			/* absolute byte offset, 0-based */
	uint64_t	line;			/* 1-based */
	uint64_t	column;			/* 1-based, in bytes */
	char		message[512];
} jr_error;

typedef struct jr_reader
{
	/* read-only for callers */
	jr_layout	layout;
	uint64_t	records;		/* records returned so far */
	uint64_t	offset;			/* absolute offset of the first unconsumed byte */
	jr_error	error;
	size_t		max_record;		/* JR_MAX_RECORD; tests may lower it */

	/* private */
	int			state;
	bool		bom_checked;
	uint64_t	line;			/* position of the first unconsumed byte */
	uint64_t	line_start;
	const char *snap_ptr;		/* positions inside the current record are */
	uint64_t	snap_offset;	/* computed from this snapshot */
	uint64_t	snap_line;
	uint64_t	snap_line_start;
	uint64_t	snap_record;
	char	   *scratch;		/* decoded strings */
	size_t		scratch_cap;
	ld_slice   *tags;
	size_t		tags_cap;
	unsigned char stack[JR_MAX_DEPTH];
} jr_reader;

void		jr_init(jr_reader *r);
void		jr_free(jr_reader *r);

/*
 * Parse the next record from data[0..len), which must start at the first
 * byte not consumed so far.  eof: no input follows these bytes.  *consumed
 * is always set: that many bytes are done with (also on JR_NEED_MORE) and
 * must not be passed again.
 */
jr_result	jr_next(jr_reader *r, const char *data, size_t len, bool eof,
					size_t *consumed, jr_record *rec);

/*
 * Report a problem with the record jr_next() just returned, at 'at' (a
 * pointer into that record's input bytes, e.g. rec->value_at[f]).  Fills
 * r->error like a parse error; prefix the message with the key yourself.
 */
void		jr_fail_at(jr_reader *r, const char *at, const char *fmt, ...)
			__attribute__((format(printf, 3, 4)));

/*
 * "NAME: record 3 (line 5, column 12, byte offset 1234): message", or
 * "NAME: line 9, column 1, byte offset 2000: message" between records,
 * or "NAME: message" when the error has no position.
 */
void		jr_format_error(const jr_error *err, const char *name, char *out,
							size_t outlen);

/*
 * A short printable excerpt of input text for messages: at most ~40 bytes,
 * cut at a character boundary with "..." appended, blanks for line breaks.
 */
void		jr_excerpt(const char *text, size_t len, char *out, size_t outlen);

#endif
