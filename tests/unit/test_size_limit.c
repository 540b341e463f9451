/*
 * test_size_limit.c - what the exporters remember of a server's size limit
 * (tp_size_limit): requests at least as large as one it refused are split
 * unsent, a single item (span, sample) always goes, and the limit is
 * probed again, at most doubling, less often while it holds.
 */
#include <string.h>

#include "size_limit.h"
#include "unit.h"

TEST(nothing_learnt_sends_everything)
{
	tp_size_limit limit;

	memset(&limit, 0, sizeof(limit));
	CHECK(tp_size_limit_allows(&limit, 100000000, 512));
	/* Other failures teach nothing about the size. */
	tp_size_limit_learn(&limit, 5000, 10, TP_SIZE_OTHER);
	tp_size_limit_learn(&limit, 5000, 10, TP_SIZE_TAKEN);
	CHECK(tp_size_limit_allows(&limit, 100000000, 512));
}

TEST(a_refused_size_is_not_sent_again)
{
	tp_size_limit limit;

	memset(&limit, 0, sizeof(limit));
	tp_size_limit_learn(&limit, 8000, 8, TP_SIZE_TOO_LARGE);
	CHECK(!tp_size_limit_allows(&limit, 8000, 8));
	CHECK(!tp_size_limit_allows(&limit, 9000, 4));
	CHECK(tp_size_limit_allows(&limit, 7999, 8));
	/* A single span cannot be split: it is always tried. */
	CHECK(tp_size_limit_allows(&limit, 50000, 1));
	/* A smaller refusal lowers the limit. */
	tp_size_limit_learn(&limit, 4000, 4, TP_SIZE_TOO_LARGE);
	CHECK(!tp_size_limit_allows(&limit, 4000, 4));
	CHECK(tp_size_limit_allows(&limit, 3999, 4));
	/* A single span refused above it changes nothing. */
	tp_size_limit_learn(&limit, 50000, 1, TP_SIZE_TOO_LARGE);
	CHECK(limit.refused == 4000);
	CHECK(!tp_size_limit_allows(&limit, 4000, 4));
}

/* Requests taken below the limit until a probe (a request at or above it) is allowed. */
static int
taken_until_probe(tp_size_limit *limit, size_t probe_len)
{
	int			taken = 0;

	while (!tp_size_limit_allows(limit, probe_len, 2) && taken < 100000)
	{
		tp_size_limit_learn(limit, 100, 2, TP_SIZE_TAKEN);
		taken++;
	}
	return taken;
}

TEST(a_limit_that_holds_is_probed_less_and_less_often)
{
	tp_size_limit limit;
	int			last = 0;

	memset(&limit, 0, sizeof(limit));
	tp_size_limit_learn(&limit, 4000, 4, TP_SIZE_TOO_LARGE);
	CHECK(taken_until_probe(&limit, 4000) == 16);
	/* A probe at most doubles what is tried. */
	CHECK(!tp_size_limit_allows(&limit, 8000, 8));
	CHECK(tp_size_limit_allows(&limit, 7999, 8));
	for (int round = 0; round < 12; round++)
	{
		int			n = taken_until_probe(&limit, 4000);

		CHECK(n >= last && n <= 1024);
		last = n;
		tp_size_limit_learn(&limit, 4000, 4, TP_SIZE_TOO_LARGE);
	}
	CHECK(last == 1024);
	CHECK(limit.refused == 4000);
}

TEST(a_raised_limit_is_found_by_doubling)
{
	tp_size_limit limit;
	int			requests = 0;

	memset(&limit, 0, sizeof(limit));
	tp_size_limit_learn(&limit, 4000, 4, TP_SIZE_TOO_LARGE);
	/* The collector now takes up to 1 MB: each probe taken doubles the limit. */
	while (limit.refused != 0 && 2 * limit.refused - 1 <= 1000000 && requests < 100000)
	{
		size_t		probe = 2 * limit.refused - 1;

		if (tp_size_limit_allows(&limit, probe, 8))
			tp_size_limit_learn(&limit, probe, 8, TP_SIZE_TAKEN);
		else
			tp_size_limit_learn(&limit, 100, 2, TP_SIZE_TAKEN);
		requests++;
	}
	CHECK(limit.refused == 512000);	/* 4000 doubled by 7 probes */
	CHECK(requests == 7 * (16 + 1));
	/* The next probe goes above 1 MB: refused, the limit stays. */
	requests = taken_until_probe(&limit, 1023999);
	CHECK(requests == 16);
	tp_size_limit_learn(&limit, 1023999, 8, TP_SIZE_TOO_LARGE);
	CHECK(limit.refused == 512000);
	CHECK(!tp_size_limit_allows(&limit, 512000, 8));
}

TEST(a_probe_taken_with_a_single_big_span_raises_the_limit)
{
	tp_size_limit limit;

	memset(&limit, 0, sizeof(limit));
	tp_size_limit_learn(&limit, 4000, 4, TP_SIZE_TOO_LARGE);
	tp_size_limit_learn(&limit, 20000, 1, TP_SIZE_TAKEN);
	CHECK(tp_size_limit_allows(&limit, 20000, 20));
	CHECK(!tp_size_limit_allows(&limit, 20001, 20));
}

int
main(void)
{
	RUN(nothing_learnt_sends_everything);
	RUN(a_refused_size_is_not_sent_again);
	RUN(a_limit_that_holds_is_probed_less_and_less_often);
	RUN(a_raised_limit_is_found_by_doubling);
	RUN(a_probe_taken_with_a_single_big_span_raises_the_limit);
	return unit_summary();
}
