/* civil_time.c - Gregorian calendar arithmetic for the generator. */
#include "civil_time.h"

#include "numfmt.h"

/*
 * Both conversions shift the year to start on March 1st, so that the leap
 * day is the last day of the (shifted) year and the month lengths from
 * March to January repeat the 31/30 pattern that (153 * m + 2) / 5 yields.
 * The calendar repeats every 400 years (an "era", 146097 days).
 */
#define DAYS_PER_ERA	146097
#define DAYS_0000_03_01_TO_EPOCH 719468

/* Division rounding toward minus infinity, for dates before an era start. */
static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t		q = a / b;

	if ((a % b) != 0 && ((a < 0) != (b < 0)))
		q--;
	return q;
}

int64_t
gen_days_from_civil(int64_t year, unsigned month, unsigned day)
{
	int64_t		y = month <= 2 ? year - 1 : year;
	int64_t		era = floor_div(y, 400);
	int64_t		year_of_era = y - era * 400;	/* 0..399 */
	int64_t		shifted_month = month > 2 ? month - 3 : month + 9;	/* Mar = 0 */
	int64_t		day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
	int64_t		day_of_era = year_of_era * 365 + year_of_era / 4
		- year_of_era / 100 + day_of_year;

	return era * DAYS_PER_ERA + day_of_era - DAYS_0000_03_01_TO_EPOCH;
}

void
gen_civil_from_days(int64_t days, int64_t *year, unsigned *month, unsigned *day)
{
	int64_t		z = days + DAYS_0000_03_01_TO_EPOCH;
	int64_t		era = floor_div(z, DAYS_PER_ERA);
	int64_t		day_of_era = z - era * DAYS_PER_ERA;	/* 0..146096 */

	/*
	 * Years of the era: subtract the leap days seen so far (one per 4 years,
	 * minus one per century, plus the era's last day) and divide by 365.
	 */
	int64_t		year_of_era = (day_of_era - day_of_era / 1460
							   + day_of_era / 36524
							   - day_of_era / (DAYS_PER_ERA - 1)) / 365;
	int64_t		day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4
											- year_of_era / 100);
	int64_t		shifted_month = (5 * day_of_year + 2) / 153;	/* Mar = 0 */
	unsigned	m = (unsigned) (shifted_month < 10 ? shifted_month + 3
								: shifted_month - 9);

	*day = (unsigned) (day_of_year - (153 * shifted_month + 2) / 5 + 1);
	*month = m;
	*year = year_of_era + era * 400 + (m <= 2 ? 1 : 0);
}

char *
gen_put_timestamp(char *p, int64_t unix_us, int offset_min, int zulu)
{
	int64_t		local_us = unix_us + (int64_t) offset_min * 60 * 1000000;
	int64_t		secs = floor_div(local_us, 1000000);
	int64_t		micros = local_us - secs * 1000000;
	int64_t		days = floor_div(secs, 86400);
	int64_t		sod = secs - days * 86400;
	int64_t		year;
	unsigned	month;
	unsigned	day;
	unsigned	off;

	gen_civil_from_days(days, &year, &month, &day);

	p = gen_put_2digits(p, (unsigned) (year / 100));
	p = gen_put_2digits(p, (unsigned) (year % 100));
	*p++ = '-';
	p = gen_put_2digits(p, month);
	*p++ = '-';
	p = gen_put_2digits(p, day);
	*p++ = 'T';
	p = gen_put_2digits(p, (unsigned) (sod / 3600));
	*p++ = ':';
	p = gen_put_2digits(p, (unsigned) (sod / 60 % 60));
	*p++ = ':';
	p = gen_put_2digits(p, (unsigned) (sod % 60));
	*p++ = '.';
	p = gen_put_2digits(p, (unsigned) (micros / 10000));
	p = gen_put_2digits(p, (unsigned) (micros / 100 % 100));
	p = gen_put_2digits(p, (unsigned) (micros % 100));

	if (offset_min == 0 && zulu)
	{
		*p++ = 'Z';
		return p;
	}
	*p++ = offset_min < 0 ? '-' : '+';
	off = (unsigned) (offset_min < 0 ? -offset_min : offset_min);
	p = gen_put_2digits(p, off / 60);
	*p++ = ':';
	return gen_put_2digits(p, off % 60);
}
