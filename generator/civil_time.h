/*
 * civil_time.h - proleptic Gregorian dates and RFC 3339 timestamps by
 * arithmetic (no gmtime, no time zone database, no locale).
 *
 * Days are counted from 1970-01-01 (day 0); negative days are before it.
 */
#ifndef GEN_CIVIL_TIME_H
#define GEN_CIVIL_TIME_H

#include <stdint.h>

/* Length of "YYYY-MM-DDTHH:MM:SS.ffffff+hh:mm" (the "Z" form is shorter). */
#define GEN_TIMESTAMP_MAX 32

/* Day number of year-month-day (month 1..12, day 1..31). */
int64_t		gen_days_from_civil(int64_t year, unsigned month, unsigned day);

/* Inverse of gen_days_from_civil. */
void		gen_civil_from_days(int64_t days, int64_t *year, unsigned *month,
								unsigned *day);

/*
 * The instant unix_us (microseconds since the epoch, UTC) as local time at
 * offset_min minutes east of UTC, with 6 fraction digits: "Z" for offset 0
 * when zulu is set, "+hh:mm"/"-hh:mm" otherwise.  Years 0..9999 only.
 */
char	   *gen_put_timestamp(char *p, int64_t unix_us, int offset_min, int zulu);

#endif
