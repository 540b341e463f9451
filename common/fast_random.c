/*
 * fast_random.c - xoshiro256** per thread, seeded from getrandom() (see
 * fast_random.h).
 */
#include "fast_random.h"

#include <errno.h>
#include <pthread.h>
#include <sys/random.h>

typedef struct random_state
{
	uint64_t	s[4];
	bool		seeded;
} random_state;

/* initial-exec: no __tls_get_addr call per draw in a dlopen()ed module */
static _Thread_local random_state state __attribute__((tls_model("initial-exec")));
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* The child of fork() must not continue its parent's sequence. */
static void
forget_seed_in_child(void)
{
	state.seeded = false;
}

static void
register_atfork(void)
{
	pthread_atfork(NULL, NULL, forget_seed_in_child);
}

/* Out of line and cold: inlined, it made every draw save five registers. */
static bool __attribute__((noinline, cold))
seed(void)
{
	unsigned char *bytes = (unsigned char *) state.s;
	size_t		filled = 0;

	pthread_once(&atfork_once, register_atfork);
	while (filled < sizeof(state.s))
	{
		ssize_t		n = getrandom(bytes + filled, sizeof(state.s) - filled, 0);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			return false;
		}
		filled += (size_t) n;
	}
	/* The all-zero state is the generator's one fixed point. */
	if ((state.s[0] | state.s[1] | state.s[2] | state.s[3]) == 0)
		state.s[0] = 1;
	state.seeded = true;
	return true;
}

static inline uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

bool
tp_random_u64(uint64_t *out)
{
	uint64_t   *s = state.s;
	uint64_t	t;

	if (!state.seeded && !seed())
		return false;
	*out = rotl(s[1] * 5, 7) * 9;
	t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return true;
}
