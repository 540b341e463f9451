/*
 * fuzz.h - what the libFuzzer targets here share.
 *
 * A target checks invariants, not only "no crash": a failed FUZZ_CHECK
 * aborts with the expression, and libFuzzer keeps the input as a crash
 * file.  Environment values go through buffers we own because glibc's
 * setenv() keeps every value it was ever given (millions of runs would
 * exhaust memory).
 */
#ifndef TP_FUZZ_H
#define TP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(expr) \
	do { \
		if (!(expr)) { \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #expr); \
			abort(); \
		} \
	} while (0)

/* The input as a C string (cut at its first NUL, as getenv() would); malloc'd. */
static inline char *
fuzz_cstring(const uint8_t *data, size_t size)
{
	char	   *s = malloc(size + 1);

	FUZZ_CHECK(s != NULL);
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/*
 * The next NUL-separated field of [*data, end) (the rest when no NUL is
 * left); advances *data.  Lets one input carry several variables.
 */
static inline const uint8_t *
fuzz_next_field(const uint8_t **data, const uint8_t *end, size_t *len)
{
	const uint8_t *start = *data;
	const uint8_t *nul = memchr(start, '\0', (size_t) (end - start));

	*len = (size_t) ((nul ? nul : end) - start);
	*data = nul ? nul + 1 : end;
	return start;
}

/*
 * [data, data + len) as header lines the way libcurl hands them: each up to
 * and with its '\n', in a buffer of its own and exactly as long (no NUL:
 * ASan sees a read past its end).  At most max; returns how many, to be
 * freed by the caller.
 */
static inline size_t
fuzz_header_lines(const uint8_t *data, size_t len, char **lines, size_t *lens, size_t max)
{
	size_t		n = 0;

	for (size_t i = 0; i < len && n < max;)
	{
		const uint8_t *nl = memchr(data + i, '\n', len - i);
		size_t		line_len = nl ? (size_t) (nl + 1 - (data + i)) : len - i;

		lines[n] = malloc(line_len);
		FUZZ_CHECK(lines[n] != NULL);
		memcpy(lines[n], data + i, line_len);
		lens[n++] = line_len;
		i += line_len;
	}
	return n;
}

#define FUZZ_ENV_VALUE_MAX 4096

typedef struct fuzz_env
{
	const char *name;
	char		entry[64 + FUZZ_ENV_VALUE_MAX + 1];	/* "NAME=value" */
	size_t		prefix;
} fuzz_env;

/* Set var to value[0..len) (truncated; "" reads as unset everywhere). */
static inline void
fuzz_setenv(fuzz_env *var, const uint8_t *value, size_t len)
{
	if (var->prefix == 0)
	{
		var->prefix = (size_t) snprintf(var->entry, 64, "%s=", var->name);
		FUZZ_CHECK(putenv(var->entry) == 0);
	}
	if (len > FUZZ_ENV_VALUE_MAX)
		len = FUZZ_ENV_VALUE_MAX;
	memcpy(var->entry + var->prefix, value, len);
	var->entry[var->prefix + len] = '\0';
}

/* No control character: a message cannot forge a second log line. */
static inline int
fuzz_is_one_line(const char *s)
{
	for (; *s; s++)
		if ((unsigned char) *s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

#endif
