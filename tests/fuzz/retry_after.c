/*
 * retry_after.c - libFuzzer target for tp_parse_retry_after(), which reads
 * the Retry-After header a collector, Pyroscope or a proxy in front of
 * them sends (delay-seconds or an HTTP-date: IMF-fixdate, RFC 850,
 * asctime), in the exporters' background workers.
 *
 * The input is the header's value as a C string (cut at its first NUL).
 * Invariants: no crash, no read out of bounds; the answer is -1 (neither
 * form) or a delay of at most a day (the cap http_retry.c documents), in
 * whole seconds; plain delay-seconds (digits, then a header's trailing
 * blanks) read as exactly that many seconds, cut to a day.
 */
#include "fuzz.h"
#include "http_retry.h"

#define DAY_S (24 * 3600L)

/* The value of a delay-seconds of at most 9 digits and trailing blanks; -1 otherwise. */
static long
plain_seconds(const char *s)
{
	long		v = 0;
	size_t		digits = 0;

	for (; *s >= '0' && *s <= '9'; s++, digits++)
	{
		if (digits == 9)
			return -1;
		v = v * 10 + (*s - '0');
	}
	if (digits == 0 || s[strspn(s, " \t\r\n")] != '\0')
		return -1;
	return v;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *text = fuzz_cstring(data, size);
	long		ms = tp_parse_retry_after(text);
	long		seconds = plain_seconds(text);

	FUZZ_CHECK(ms == -1 || (ms >= 0 && ms <= DAY_S * 1000));
	FUZZ_CHECK(ms % 1000 == 0 || ms == -1);
	if (seconds >= 0)
		FUZZ_CHECK(ms == (seconds < DAY_S ? seconds : DAY_S) * 1000);
	free(text);
	return 0;
}
