/* size_limit.c - a server's body limit learnt from its refusals (see size_limit.h). */
#include "size_limit.h"

#include <string.h>

/*
 * Probes of a limit learnt from refusals: the first after PROBE_FIRST
 * taken requests, each refused one doubling the wait up to PROBE_MAX, so
 * a limit that stays costs at most one refused request per PROBE_MAX
 * taken.  A limit above LIMIT_FORGOTTEN binds no request we send (the
 * extension's are at most 4 MiB): it is forgotten.
 */
#define PROBE_FIRST 16
#define PROBE_MAX 1024
#define LIMIT_FORGOTTEN ((size_t) 64 * 1024 * 1024)

bool
tp_size_limit_allows(const tp_size_limit *limit, size_t len, size_t count)
{
	if (count <= 1 || limit->refused == 0 || len < limit->refused)
		return true;
	/* Grow carefully: a probe at most doubles what is tried. */
	return limit->taken >= limit->probe_every && len < 2 * limit->refused;
}

void
tp_size_limit_learn(tp_size_limit *limit, size_t len, size_t count,
					tp_size_answer answer)
{
	if (answer == TP_SIZE_TOO_LARGE)
	{
		if (limit->refused == 0 || len < limit->refused)
		{
			/* A new bound (or the limit was lowered). */
			limit->refused = len;
			if (limit->probe_every == 0)
				limit->probe_every = PROBE_FIRST;
			limit->taken = 0;
		}
		else if (count > 1)
		{
			/* A probe refused: the limit stays, try again less often. */
			limit->probe_every = limit->probe_every * 2 < PROBE_MAX ? limit->probe_every * 2 : PROBE_MAX;
			limit->taken = 0;
		}
		return;
	}
	if (answer != TP_SIZE_TAKEN || limit->refused == 0)
		return;
	if (len < limit->refused)
	{
		if (limit->taken < PROBE_MAX)
			limit->taken++;
		return;
	}
	/* Taken at or above the smallest refused: the limit was raised. */
	limit->refused = 2 * limit->refused > len + 1 ? 2 * limit->refused : len + 1;
	limit->probe_every = PROBE_FIRST;
	limit->taken = 0;
	if (limit->refused > LIMIT_FORGOTTEN)
		memset(limit, 0, sizeof(*limit));
}
