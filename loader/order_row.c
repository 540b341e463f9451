/*
 * order_row.c - check an order record's values and encode its COPY tuple.
 */
#include "order_row.h"

#include <stdio.h>

static bool
bigint_value(jr_reader *r, const jr_record *rec, jr_field f, ld_slice text,
			 int64_t *out)
{
	char		shown[64];

	switch (pgb_int8_from_text(text.ptr, text.len, out))
	{
		case PGB_INT_OK:
			return true;
		case PGB_INT_RANGE:
			jr_excerpt(text.ptr, text.len, shown, sizeof(shown));
			jr_fail_at(r, rec->value_at[f], "\"%s\": %s is out of range for bigint (a 64-bit signed integer)",
					   jr_field_names[f], shown);
			return false;
		default:
			jr_excerpt(text.ptr, text.len, shown, sizeof(shown));
			jr_fail_at(r, rec->value_at[f], "\"%s\": expected an integer, got %s",
					   jr_field_names[f], shown);
			return false;
	}
}

static bool
amount_value(jr_reader *r, const jr_record *rec, pgb_numeric *out)
{
	const char *at = rec->value_at[JR_AMOUNT];
	char		shown[64];
	pgb_numeric_status st;

	st = pgb_numeric_from_text(rec->amount.ptr, rec->amount.len,
							   ORDER_AMOUNT_INTEGER_DIGITS,
							   ORDER_AMOUNT_FRACTION_DIGITS, out);
	if (st == PGB_NUMERIC_OK)
		return true;
	jr_excerpt(rec->amount.ptr, rec->amount.len, shown, sizeof(shown));
	switch (st)
	{
		case PGB_NUMERIC_EXPONENT:
			jr_fail_at(r, at, "\"amount\": expected a decimal number without an exponent, got %s", shown);
			return false;
		case PGB_NUMERIC_FRACTION_DIGITS:
			jr_fail_at(r, at, "\"amount\": expected a decimal number with at most %d fraction digits, got %s",
					   ORDER_AMOUNT_FRACTION_DIGITS, shown);
			return false;
		case PGB_NUMERIC_INTEGER_DIGITS:
			jr_fail_at(r, at, "\"amount\": expected at most %d digits before the decimal point (numeric(12,2)), got %s",
					   ORDER_AMOUNT_INTEGER_DIGITS, shown);
			return false;
		default:
			jr_fail_at(r, at, "\"amount\": expected a decimal number, got %s", shown);
			return false;
	}
}

static bool
currency_ok(ld_slice c)
{
	if (c.len != 3)
		return false;
	for (size_t i = 0; i < 3; i++)
		if (c.ptr[i] < 'A' || c.ptr[i] > 'Z')
			return false;
	return true;
}

bool
order_row_append(jr_reader *r, const jr_record *rec, pgb_buf *out)
{
	int64_t		id;
	int64_t		customer_id;
	pgb_numeric amount;
	int64_t		created_at;
	char		why[160];
	char		shown[64];
	size_t		size;

	if (!bigint_value(r, rec, JR_ID, rec->id, &id) ||
		!bigint_value(r, rec, JR_CUSTOMER_ID, rec->customer_id, &customer_id) ||
		!amount_value(r, rec, &amount))
		return false;
	if (!currency_ok(rec->currency))
	{
		jr_excerpt(rec->currency.ptr, rec->currency.len, shown, sizeof(shown));
		jr_fail_at(r, rec->value_at[JR_CURRENCY],
				   "\"currency\": expected 3 uppercase ASCII letters (ISO 4217), got \"%s\"", shown);
		return false;
	}
	if (!pgb_timestamptz_from_rfc3339(rec->created_at.ptr, rec->created_at.len,
									  &created_at, why, sizeof(why)))
	{
		jr_excerpt(rec->created_at.ptr, rec->created_at.len, shown, sizeof(shown));
		jr_fail_at(r, rec->value_at[JR_CREATED_AT],
				   "\"created_at\": invalid RFC 3339 date-time \"%s\": %s", shown, why);
		return false;
	}

	size = PGB_TUPLE_HEADER_LEN
		+ PGB_INT8_FIELD_LEN * 2
		+ pgb_text_field_len(rec->customer_name.len)
		+ pgb_numeric_field_len(&amount)
		+ pgb_text_field_len(rec->currency.len)
		+ PGB_TIMESTAMPTZ_FIELD_LEN
		+ pgb_text_array_field_len(rec->tags, rec->ntags)
		+ pgb_jsonb_field_len(rec->attributes.len);
	if (!pgb_buf_reserve(out, size))
	{
		jr_fail_at(r, rec->value_at[JR_ID], "out of memory");
		r->error.out_of_memory = true;
		return false;
	}
	pgb_put_tuple_header(out, JR_NFIELDS);
	pgb_put_int8_field(out, id);
	pgb_put_int8_field(out, customer_id);
	pgb_put_text_field(out, rec->customer_name.ptr, rec->customer_name.len);
	pgb_put_numeric_field(out, &amount);
	pgb_put_text_field(out, rec->currency.ptr, rec->currency.len);
	pgb_put_timestamptz_field(out, created_at);
	pgb_put_text_array_field(out, rec->tags, rec->ntags);
	pgb_put_jsonb_field(out, rec->attributes.ptr, rec->attributes.len);
	return true;
}
