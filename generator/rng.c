/* rng.c - seeding for the generator's xoshiro256** (see rng.h). */
#include "rng.h"

/* splitmix64: spreads a small or patterned seed over all 64 bits. */
static uint64_t
splitmix64(uint64_t *state)
{
	uint64_t	z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

void
gen_rng_seed(gen_rng *rng, uint64_t seed)
{
	uint64_t	state = seed;
	int			i;

	/*
	 * splitmix64's outputs for distinct counters are distinct, so the four
	 * words are never all zero, the one state xoshiro must avoid.
	 */
	for (i = 0; i < 4; i++)
		rng->s[i] = splitmix64(&state);
}
