/* numfmt.c - hand-rolled number formatting for the generator's hot path. */
#include "numfmt.h"

#include <string.h>

const char	gen_digit_pairs[200] =
"00010203040506070809"
"10111213141516171819"
"20212223242526272829"
"30313233343536373839"
"40414243444546474849"
"50515253545556575859"
"60616263646566676869"
"70717273747576777879"
"80818283848586878889"
"90919293949596979899";

char *
gen_put_u64(char *p, uint64_t v)
{
	char		tmp[20];
	char	   *t = tmp + sizeof(tmp);
	size_t		len;

	/* Fill from the right, two digits per division. */
	while (v >= 100)
	{
		t -= 2;
		gen_put_2digits(t, (unsigned) (v % 100));
		v /= 100;
	}
	if (v >= 10)
	{
		t -= 2;
		gen_put_2digits(t, (unsigned) v);
	}
	else
		*--t = (char) ('0' + v);

	len = (size_t) (tmp + sizeof(tmp) - t);
	memcpy(p, t, len);
	return p + len;
}

char *
gen_put_i64(char *p, int64_t v)
{
	if (v < 0)
	{
		*p++ = '-';
		/* Negate in unsigned arithmetic so INT64_MIN does not overflow. */
		return gen_put_u64(p, 0 - (uint64_t) v);
	}
	return gen_put_u64(p, (uint64_t) v);
}

char *
gen_put_decimal(char *p, int64_t scaled, int frac_digits)
{
	uint64_t	mag;
	uint64_t	unit = 1;
	uint64_t	frac;
	int			i;

	if (scaled < 0)
	{
		*p++ = '-';
		mag = 0 - (uint64_t) scaled;
	}
	else
		mag = (uint64_t) scaled;

	for (i = 0; i < frac_digits; i++)
		unit *= 10;

	p = gen_put_u64(p, mag / unit);
	*p++ = '.';

	/* Fraction digits with leading zeros kept, written right to left. */
	frac = mag % unit;
	for (i = frac_digits; i > 0; i--)
	{
		p[i - 1] = (char) ('0' + frac % 10);
		frac /= 10;
	}
	return p + frac_digits;
}
