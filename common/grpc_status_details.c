/*
 * grpc_status_details.c - the retry delay a gRPC status asks for.
 *
 * A gRPC answer may carry grpc-status-details-bin: base64 of a
 * google.rpc.Status whose details (google.protobuf.Any) may hold a
 * google.rpc.RetryInfo.  The OTLP specification retries RESOURCE_EXHAUSTED
 * only when one is there, and honours its delay for every retryable code.
 * A few dozen bytes worth reading: a hand-written, bounds-checked reader
 * rather than generated code for three schemas.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_status_details.h"
#include "http_retry.h"

/*
 * grpc-status-details-bin carries a google.rpc.Status, base64: longer than
 * the other header lines we read (a message, several details), but a
 * RetryInfo worth reading is a few dozen bytes.
 */
#define MAX_GRPC_DETAILS_CHARS (16 * 1024)

/* Protobuf wire types. */
#define WIRE_VARINT 0
#define WIRE_FIXED64 1
#define WIRE_LEN 2
#define WIRE_FIXED32 5

/* The bytes of a message not read yet. */
typedef struct pb_reader
{
	const uint8_t *p;
	const uint8_t *end;
} pb_reader;

/* One field: its number, wire type, varint value or bytes. */
typedef struct pb_field
{
	uint64_t	number;
	int			wire;
	uint64_t	value;
	pb_reader	bytes;
} pb_field;

static bool
pb_read_varint(pb_reader *r, uint64_t *value)
{
	uint64_t	v = 0;

	for (int shift = 0; shift < 64; shift += 7)
	{
		uint8_t		b;

		if (r->p >= r->end)
			return false;
		b = *r->p++;
		if (shift == 63 && b > 1)
			return false;		/* more than 64 bits */
		v |= (uint64_t) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
		{
			*value = v;
			return true;
		}
	}
	return false;
}

/*
 * The next field of r: 1 read, 0 at the message's end, -1 malformed (a
 * length past the end, a group, an unknown wire type, field number 0).
 * Fixed-size fields are skipped, checked to fit.
 */
static int
pb_next(pb_reader *r, pb_field *f)
{
	uint64_t	key;
	uint64_t	len;

	if (r->p == r->end)
		return 0;
	if (!pb_read_varint(r, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
		return -1;
	f->number = key >> 3;
	f->wire = (int) (key & 7);
	switch (f->wire)
	{
		case WIRE_VARINT:
			return pb_read_varint(r, &f->value) ? 1 : -1;
		case WIRE_FIXED64:
		case WIRE_FIXED32:
			len = f->wire == WIRE_FIXED64 ? 8 : 4;
			if (len > (uint64_t) (r->end - r->p))
				return -1;
			r->p += len;
			return 1;
		case WIRE_LEN:
			if (!pb_read_varint(r, &len) || len > (uint64_t) (r->end - r->p))
				return -1;
			f->bytes.p = r->p;
			f->bytes.end = r->p + len;
			r->p += len;
			return 1;
		default:
			return -1;
	}
}

/*
 * google.protobuf.Duration{seconds = 1 (int64), nanos = 2 (int32)} in ms;
 * -1 when malformed, negative, or nanos out of [0, 999999999].
 */
static long
duration_ms(pb_reader r)
{
	pb_field	f;
	int			rc;
	uint64_t	seconds = 0;
	int64_t		nanos = 0;

	while ((rc = pb_next(&r, &f)) > 0)
	{
		if ((f.number == 1 || f.number == 2) && f.wire != WIRE_VARINT)
			return -1;
		if (f.number == 1)
			seconds = f.value;
		else if (f.number == 2)
			nanos = (int64_t) f.value;	/* an int32 goes sign-extended to 64 bits */
	}
	if (rc < 0 || (int64_t) seconds < 0 || nanos < 0 || nanos > 999999999)
		return -1;
	return tp_retry_delay_ms(seconds, (uint32_t) nanos);
}

/*
 * google.rpc.RetryInfo{retry_delay = 1 (Duration)}: its delay in ms, 0 when
 * it names none; -1 when malformed.
 */
static long
retry_info_ms(pb_reader r)
{
	pb_field	f;
	int			rc;
	long		ms = 0;

	while ((rc = pb_next(&r, &f)) > 0)
		if (f.number == 1)
		{
			if (f.wire != WIRE_LEN || (ms = duration_ms(f.bytes)) < 0)
				return -1;
		}
	return rc < 0 ? -1 : ms;
}

/*
 * A google.protobuf.Any{type_url = 1, value = 2} holding a RetryInfo: its
 * delay; -1 for another type, or malformed.  The type is named by what
 * follows the URL's last '/' (type.googleapis.com/google.rpc.RetryInfo).
 */
static long
any_retry_ms(pb_reader r)
{
	static const char type[] = "google.rpc.RetryInfo";
	pb_field	f;
	int			rc;
	pb_reader	url = {NULL, NULL};
	pb_reader	value = {NULL, NULL};
	const uint8_t *name;

	while ((rc = pb_next(&r, &f)) > 0)
	{
		if ((f.number == 1 || f.number == 2) && f.wire != WIRE_LEN)
			return -1;
		if (f.number == 1)
			url = f.bytes;
		else if (f.number == 2)
			value = f.bytes;
	}
	if (rc < 0 || url.p == NULL)
		return -1;
	name = url.end;
	while (name > url.p && name[-1] != '/')
		name--;
	if ((size_t) (url.end - name) != sizeof(type) - 1 || memcmp(name, type, sizeof(type) - 1) != 0)
		return -1;
	if (value.p == NULL)
		return 0;				/* an empty RetryInfo: its fields all default */
	return retry_info_ms(value);
}

/*
 * The first RetryInfo among a google.rpc.Status's details (field 3,
 * repeated Any); -1 when there is none, or the Status is malformed
 * anywhere (what else it says cannot be trusted).
 */
static long
status_retry_ms(const uint8_t *bytes, size_t len)
{
	pb_reader	r = {bytes, bytes + len};
	pb_field	f;
	int			rc;
	long		found = -1;

	while ((rc = pb_next(&r, &f)) > 0)
		if (f.number == 3)
		{
			if (f.wire != WIRE_LEN)
				return -1;
			if (found < 0)
				found = any_retry_ms(f.bytes);
		}
	return rc < 0 ? -1 : found;
}

static int
base64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * Standard base64, padded or not (gRPC's binary header values may be
 * either); NULL when it is not that, or memory ran out.
 */
static uint8_t *
base64_decode(const char *in, size_t len, size_t *outlen)
{
	size_t		pads = 0;
	uint8_t    *out;
	uint32_t	acc = 0;
	int			bits = 0;
	size_t		n = 0;

	while (len > 0 && in[len - 1] == '=' && pads < 2)
	{
		len--;
		pads++;
	}
	if (len % 4 == 1 || (pads > 0 && (len + pads) % 4 != 0))
		return NULL;
	out = malloc(len / 4 * 3 + 3);
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++)
	{
		int			v = base64_value(in[i]);

		if (v < 0)
		{
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (uint32_t) v;
		bits += 6;
		if (bits >= 8)
		{
			bits -= 8;
			out[n++] = (uint8_t) (acc >> bits);
		}
	}
	*outlen = n;
	return out;
}

long
tp_grpc_retry_delay_ms(const char *value, size_t len)
{
	size_t		n = 0;
	uint8_t    *bytes;
	long		ms;

	if (len == 0 || len > MAX_GRPC_DETAILS_CHARS)
		return -1;
	bytes = base64_decode(value, len, &n);
	if (bytes == NULL)
		return -1;
	ms = status_retry_ms(bytes, n);
	free(bytes);
	return ms;
}
