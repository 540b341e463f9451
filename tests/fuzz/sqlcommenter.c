/*
 * sqlcommenter.c - libFuzzer target for tp_sqlcomment_traceparent() and
 * tp_sqlcomment_context().
 *
 * Every statement a traced backend runs (and every Parse message) goes
 * through this parser, with text any database user controls.
 * Invariants: a valid result holds a context that formats and parses
 * again; the answer does not change when blanks or semicolons follow the
 * comment, when blanks come before the statement, or when other SQL does
 * and the statement opens with no comment (one that opens it may be the
 * one read).
 */
#include <stdbool.h>

#include "fuzz.h"
#include "sqlcommenter.h"

static tp_comment_result
parse_copy(const char *prefix, const uint8_t *data, size_t size,
		   const char *suffix, tp_span_context *out)
{
	size_t		plen = strlen(prefix);
	size_t		slen = strlen(suffix);
	size_t		len = plen + size + slen;
	char	   *sql = malloc(len ? len : 1);	/* exactly sized: over-reads show */
	tp_comment_result result;

	FUZZ_CHECK(sql != NULL);
	memcpy(sql, prefix, plen);
	memcpy(sql + plen, data, size);
	memcpy(sql + plen + size, suffix, slen);
	result = tp_sqlcomment_traceparent(sql, len, out);
	free(sql);
	return result;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tp_span_context ctx;
	tp_span_context other;
	tp_comment_result result = tp_sqlcomment_traceparent((const char *) data, size, &ctx);

	FUZZ_CHECK(result == TP_COMMENT_NONE || result == TP_COMMENT_VALID ||
			   result == TP_COMMENT_MALFORMED);
	if (result == TP_COMMENT_VALID)
	{
		char		text[TP_TRACEPARENT_LEN + 1];
		const char *why;

		FUZZ_CHECK(!tp_id_is_zero(ctx.trace_id, TP_TRACE_ID_BYTES));
		FUZZ_CHECK(!tp_id_is_zero(ctx.span_id, TP_SPAN_ID_BYTES));
		tp_traceparent_format(&ctx, text);
		FUZZ_CHECK(tp_traceparent_parse(text, TP_TRACEPARENT_LEN, &other, &why));
	}

	{
		/* Both keys in one pass: the traceparent as found alone, the tracestate whole. */
		tp_comment_context both;

		tp_sqlcomment_context((const char *) data, size, &both);
		FUZZ_CHECK(both.parent_result == result);
		if (result == TP_COMMENT_VALID)
			FUZZ_CHECK(memcmp(&both.parent, &ctx, sizeof(ctx)) == 0);
		FUZZ_CHECK(both.state_result == TP_COMMENT_NONE || both.state_result == TP_COMMENT_VALID ||
				   both.state_result == TP_COMMENT_MALFORMED);
		FUZZ_CHECK(both.state_len <= TP_TRACESTATE_MAX && strlen(both.state) == both.state_len);
		if (both.state_result == TP_COMMENT_VALID)
		{
			char		again[TP_TRACESTATE_MAX + 1];
			size_t		again_len;
			const char *why;

			/* what is kept is a tracestate, kept whole */
			FUZZ_CHECK(tp_tracestate_parse(both.state, both.state_len, again, &again_len, &why));
			FUZZ_CHECK(again_len == both.state_len && memcmp(again, both.state, again_len) == 0);
		}
	}

	FUZZ_CHECK(parse_copy("", data, size, " ;\n\t;", &other) == result);
	if (result == TP_COMMENT_VALID)
		FUZZ_CHECK(memcmp(&ctx, &other, sizeof(ctx)) == 0);
	FUZZ_CHECK(parse_copy(" \n\f", data, size, "", &other) == result);
	if (result == TP_COMMENT_VALID)
		FUZZ_CHECK(memcmp(&ctx, &other, sizeof(ctx)) == 0);
	if (tp_sqlcomment_open((const char *) data, size) == NULL)
	{
		FUZZ_CHECK(parse_copy("SELECT 1; ", data, size, "", &other) == result);
		if (result == TP_COMMENT_VALID)
			FUZZ_CHECK(memcmp(&ctx, &other, sizeof(ctx)) == 0);
	}
	return 0;
}
