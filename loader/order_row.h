/*
 * order_row.h - one order record as one binary COPY tuple.
 *
 * The JSON reader guarantees the shape of a record (keys, JSON types);
 * this checks what only the table cares about - bigint range, numeric(12,2),
 * currency code, timestamp - and writes the tuple.
 */
#ifndef LD_ORDER_ROW_H
#define LD_ORDER_ROW_H

#include <stdbool.h>

#include "json_reader.h"
#include "pg_binary.h"

/* Column list of the COPY, in the order the tuples carry the fields. */
#define ORDER_ROW_COLUMNS \
	"id, customer_id, customer_name, amount, currency, created_at, tags, attributes"

#define ORDER_AMOUNT_INTEGER_DIGITS 10
#define ORDER_AMOUNT_FRACTION_DIGITS 2

/*
 * Append rec's tuple to out.  A bad value: reported through jr_fail_at() on
 * r (so the message names the record and position) and false.  Out of
 * memory: false with r->error.out_of_memory set.
 */
bool		order_row_append(jr_reader *r, const jr_record *rec, pgb_buf *out);

#endif
