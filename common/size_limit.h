/*
 * size_limit.h - what refusals for size (HTTP 413, gRPC RESOURCE_EXHAUSTED
 * "larger than max") taught about a server's body limit, so that later
 * requests go under it instead of being refused and halved again (up to
 * 2N - 1 requests for N items, every time).  Used for OTLP span batches
 * and Pyroscope profiles alike; the caller keeps one per endpoint, zeroed
 * when the endpoint changes.
 */
#ifndef TP_SIZE_LIMIT_H
#define TP_SIZE_LIMIT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tp_size_limit
{
	size_t		refused;		/* requests this large are split unsent: the
								 * smallest refused for its size, doubled by
								 * each probe taken; 0: none */
	int			taken;			/* requests taken since it was learnt or last probed */
	int			probe_every;	/* taken requests between two probes */
} tp_size_limit;

/* What became of a request. */
typedef enum tp_size_answer
{
	TP_SIZE_TAKEN,
	TP_SIZE_TOO_LARGE,
	TP_SIZE_OTHER,				/* failed otherwise: says nothing of the size */
} tp_size_answer;

/*
 * Whether a request of len bytes holding count items (spans, samples)
 * should go out, or be split unsent: one item always goes (nothing smaller
 * can be tried), and so does a request smaller than the smallest refused.
 * A server's limit may be raised: once every probe_every taken requests
 * (16 at first, doubling after each probe refused, at most 1024), one
 * request up to twice that size goes as a probe.
 */
bool		tp_size_limit_allows(const tp_size_limit *limit, size_t len, size_t count);

/* Learn from the answer to a request of len bytes holding count items. */
void		tp_size_limit_learn(tp_size_limit *limit, size_t len, size_t count,
								tp_size_answer answer);

#endif
