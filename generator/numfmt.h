/*
 * numfmt.h - integers and fixed-point decimals as ASCII, without printf.
 *
 * Every function writes at p and returns the new end; nothing is
 * NUL-terminated.  The caller guarantees room (at most 21 bytes for an
 * integer, 22 for a decimal).
 */
#ifndef GEN_NUMFMT_H
#define GEN_NUMFMT_H

#include <stdint.h>

/* "00".."99" back to back: two digits per lookup. */
extern const char gen_digit_pairs[200];

/* Exactly two digits of v (0..99). */
static inline char *
gen_put_2digits(char *p, unsigned v)
{
	p[0] = gen_digit_pairs[2 * v];
	p[1] = gen_digit_pairs[2 * v + 1];
	return p + 2;
}

char	   *gen_put_u64(char *p, uint64_t v);
char	   *gen_put_i64(char *p, int64_t v);

/*
 * scaled / 10^frac_digits as a JSON number with exactly frac_digits (1..9)
 * fraction digits: 123456,2 -> "1234.56"; -5,2 -> "-0.05"; 0,2 -> "0.00".
 */
char	   *gen_put_decimal(char *p, int64_t scaled, int frac_digits);

#endif
