/*
 * rng.h - the generator's seeded pseudo-random numbers.
 *
 * xoshiro256** (Blackman & Vigna), seeded through splitmix64 so that any
 * 64-bit seed, including 0, gives a well-mixed non-zero state.  Output is
 * the same on every platform, which is what makes a generated file a pure
 * function of (seed, N, format).  Not for anything secret.
 */
#ifndef GEN_RNG_H
#define GEN_RNG_H

#include <stdint.h>

typedef struct gen_rng
{
	uint64_t	s[4];
} gen_rng;

void		gen_rng_seed(gen_rng *rng, uint64_t seed);

static inline uint64_t
gen_rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* Next 64 uniformly distributed bits. */
static inline uint64_t
gen_rng_next(gen_rng *rng)
{
	uint64_t   *s = rng->s;
	uint64_t	result = gen_rng_rotl(s[1] * 5, 7) * 9;
	uint64_t	t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = gen_rng_rotl(s[3], 45);
	return result;
}

/*
 * Uniform-enough value in [0, bound), bound < 2^32: the high 32 bits scaled
 * by multiplication.  The bias (< bound / 2^32) is irrelevant for test
 * data, and there is no rejection loop, so every call consumes exactly one
 * draw.
 */
static inline uint32_t
gen_rng_below(gen_rng *rng, uint32_t bound)
{
	return (uint32_t) (((gen_rng_next(rng) >> 32) * (uint64_t) bound) >> 32);
}

/* True with probability percent/100. */
static inline int
gen_rng_chance(gen_rng *rng, uint32_t percent)
{
	return gen_rng_below(rng, 100) < percent;
}

#endif
