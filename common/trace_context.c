/* trace_context.c - W3C traceparent parsing/formatting and random ids. */
#include "trace_context.h"

#include <string.h>

#include "fast_random.h"

/*
 * A digit's value plus one, 0 for anything else (uppercase is invalid per
 * the spec).  A table, not comparisons: ids are random, so a branch on
 * digit-or-letter was mispredicted for every few characters of a
 * traceparent that each traced statement decodes.
 */
static const uint8_t lower_hex_values[256] = {
	['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5,
	['5'] = 6, ['6'] = 7, ['7'] = 8, ['8'] = 9, ['9'] = 10,
	['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

static int
lower_hex_value(char c)
{
	return lower_hex_values[(unsigned char) c] - 1;
}

bool
tp_hex_decode(const char *hex, uint8_t *bytes, size_t len)
{
	for (size_t i = 0; i < len; i++)
	{
		int			hi = lower_hex_value(hex[2 * i]);
		int			lo = lower_hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		bytes[i] = (uint8_t) (hi << 4 | lo);
	}
	return true;
}

void
tp_hex_encode(const uint8_t *bytes, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++)
	{
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 0xf];
	}
	out[2 * len] = '\0';
}

bool
tp_traceparent_parse(const char *text, size_t len, tp_span_context *out,
					 const char **why)
{
	uint8_t		version;
	tp_span_context ctx;

	/* Layout: vv-tttttttttttttttttttttttttttttttt-pppppppppppppppp-ff */
	/* Not even a version: no traceparent at all, so say what one looks like. */
	if (len < 2 || !tp_hex_decode(text, &version, 1))
	{
		*why = len == TP_TRACEPARENT_LEN ? "version must be 2 lowercase hex digits" :
			"expected 55 characters: 00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>";
		return false;
	}
	if (version == 0xff)
	{
		*why = "version ff is forbidden";
		return false;
	}
	if (len < TP_TRACEPARENT_LEN)
	{
		*why = "expected 55 characters: 00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>";
		return false;
	}
	if (version == 0 && len != TP_TRACEPARENT_LEN)
	{
		*why = "version 00 must be exactly 55 characters";
		return false;
	}
	/* A future version may append fields, but only after a dash. */
	if (len > TP_TRACEPARENT_LEN && text[TP_TRACEPARENT_LEN] != '-')
	{
		*why = "data after the flags must start with '-'";
		return false;
	}
	if (text[2] != '-' || text[35] != '-' || text[52] != '-')
	{
		*why = "fields must be separated by '-' at positions 3, 36 and 53";
		return false;
	}
	if (!tp_hex_decode(text + 3, ctx.trace_id, TP_TRACE_ID_BYTES))
	{
		*why = "trace-id must be 32 lowercase hex digits";
		return false;
	}
	if (tp_id_is_zero(ctx.trace_id, TP_TRACE_ID_BYTES))
	{
		*why = "trace-id must not be all zeros";
		return false;
	}
	if (!tp_hex_decode(text + 36, ctx.span_id, TP_SPAN_ID_BYTES))
	{
		*why = "parent-id must be 16 lowercase hex digits";
		return false;
	}
	if (tp_id_is_zero(ctx.span_id, TP_SPAN_ID_BYTES))
	{
		*why = "parent-id must not be all zeros";
		return false;
	}
	if (!tp_hex_decode(text + 53, &ctx.flags, 1))
	{
		*why = "trace-flags must be 2 lowercase hex digits";
		return false;
	}
	*out = ctx;
	return true;
}

void
tp_traceparent_format(const tp_span_context *ctx, char *out)
{
	memcpy(out, "00-", 3);
	tp_hex_encode(ctx->trace_id, TP_TRACE_ID_BYTES, out + 3);
	out[35] = '-';
	tp_hex_encode(ctx->span_id, TP_SPAN_ID_BYTES, out + 36);
	out[52] = '-';
	tp_hex_encode(&ctx->flags, 1, out + 53);
}
