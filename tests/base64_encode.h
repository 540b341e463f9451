/*
 * base64_encode.h - standard base64 for the tests that build encoded
 * inputs (gRPC's grpc-status-details-bin): the unit tests and the fuzz
 * targets share it.  The encoder under test is not this one: it decodes.
 */
#ifndef TP_TEST_BASE64_ENCODE_H
#define TP_TEST_BASE64_ENCODE_H

#include <stddef.h>
#include <stdint.h>

/* How many characters test_base64 writes for size bytes. */
static inline size_t
test_base64_len(size_t size, int padded)
{
	return size / 3 * 4 + (size % 3 == 0 ? 0 : padded ? 4 : size % 3 + 1);
}

/* data[0..size) in base64, padded or not, into out (no NUL); returns its length. */
static inline size_t
test_base64(const uint8_t *data, size_t size, int padded, char *out)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t		o = 0;

	for (size_t i = 0; i < size; i += 3)
	{
		size_t		left = size - i;
		uint32_t	v = (uint32_t) data[i] << 16;

		if (left > 1)
			v |= (uint32_t) data[i + 1] << 8;
		if (left > 2)
			v |= data[i + 2];
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
		if (left > 1)
			out[o++] = abc[v >> 6 & 63];
		else if (padded)
			out[o++] = '=';
		if (left > 2)
			out[o++] = abc[v & 63];
		else if (padded)
			out[o++] = '=';
	}
	return o;
}

#endif
