/*
 * sql_normalize.c - libFuzzer target for tp_sql_normalize().
 *
 * Every traced statement's text goes through it in a backend, with text
 * any database user controls (and, cut to max_query_length, text that
 * ends anywhere).  Invariants: it stays inside the input and the output
 * (exactly sized copies, so ASan sees any overrun); a smaller output is a
 * prefix of a larger one; constant offsets from the input's first bytes,
 * in or out of order, in range or not, are handled the same way.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "sql_normalize.h"

#define MAX_OFFSETS 8

static size_t
normalize(const char *sql, size_t len, bool scs, const tp_sql_constants *constants,
		  char **out, size_t cap)
{
	size_t		n;

	*out = malloc(cap ? cap : 1);
	FUZZ_CHECK(*out != NULL);
	n = tp_sql_normalize(sql, len, scs, constants, *out, cap);
	FUZZ_CHECK(n <= cap);
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int			offsets[MAX_OFFSETS];
	tp_sql_constants constants = {offsets, 0, 0};
	bool		scs;
	char	   *sql;
	char	   *full;
	char	   *cut;
	size_t		full_len;
	size_t		cut_len;
	size_t		cap;

	if (size < 2)
		return 0;
	/* first byte: settings and a cap; then up to 8 offsets; the rest is SQL */
	scs = data[0] & 1;
	constants.count = (data[0] >> 1) & 7;
	cap = data[1];
	data += 2;
	size -= 2;
	for (int i = 0; i < constants.count; i++)
		offsets[i] = i < (int) size ? data[i] % (size + 1) : 0;
	sql = malloc(size ? size : 1);		/* exactly sized: over-reads show */
	FUZZ_CHECK(sql != NULL);
	memcpy(sql, data, size);

	/* every literal: room for any growth ($n for each one-byte literal) */
	full_len = normalize(sql, size, scs, NULL, &full, 8 * size + 16);
	FUZZ_CHECK(full_len < 8 * size + 16);
	cut_len = normalize(sql, size, scs, NULL, &cut, cap);
	FUZZ_CHECK(cut_len == (full_len < cap ? full_len : cap));
	FUZZ_CHECK(memcmp(cut, full, cut_len) == 0);
	free(full);
	free(cut);

	/* offsets the jumble could never give must not break anything either */
	full_len = normalize(sql, size, scs, &constants, &full, 8 * size + 16);
	cut_len = normalize(sql, size, scs, &constants, &cut, cap);
	FUZZ_CHECK(cut_len == (full_len < cap ? full_len : cap));
	FUZZ_CHECK(memcmp(cut, full, cut_len) == 0);
	free(full);
	free(cut);
	free(sql);
	return 0;
}
