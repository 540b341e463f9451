/*
 * test_otlp_retry_info.c - the delay a gRPC status asks for in a
 * google.rpc.RetryInfo, read from grpc-status-details-bin
 * (tp_grpc_retry_delay_ms): base64 of a google.rpc.Status{code = 1,
 * message = 2, details = 3 (repeated google.protobuf.Any{type_url = 1,
 * value = 2})}, the RetryInfo{retry_delay = 1} holding a
 * google.protobuf.Duration{seconds = 1, nanos = 2}.  The messages are built
 * here byte by byte; malformed ones must be ignored (-1), never read past
 * their end.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../base64_encode.h"
#include "http_retry.h"
#include "grpc_status_details.h"
#include "unit.h"

#define RETRY_INFO_URL "type.googleapis.com/google.rpc.RetryInfo"

/* A message being built. */
typedef struct msg
{
	uint8_t		b[4096];
	size_t		n;
} msg;

static void
put_varint(msg *m, uint64_t v)
{
	do
	{
		m->b[m->n++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v != 0);
}

static void
put_uint(msg *m, int field, uint64_t v)
{
	put_varint(m, (uint64_t) field << 3);
	put_varint(m, v);
}

static void
put_bytes(msg *m, int field, const void *data, size_t len)
{
	put_varint(m, (uint64_t) field << 3 | 2);
	put_varint(m, len);
	memcpy(m->b + m->n, data, len);
	m->n += len;
}

static void
put_msg(msg *m, int field, const msg *inner)
{
	put_bytes(m, field, inner->b, inner->n);
}

/* Duration{seconds, nanos}; a field left out when 0, as proto3 encoders do. */
static msg
duration(int64_t seconds, int32_t nanos)
{
	msg			d = {.n = 0};

	if (seconds != 0)
		put_uint(&d, 1, (uint64_t) seconds);
	if (nanos != 0)
		put_uint(&d, 2, (uint64_t) (int64_t) nanos);	/* int32: sign-extended */
	return d;
}

/* Any{type_url, RetryInfo{retry_delay = d}}. */
static msg
retry_info_any(const char *url, const msg *d)
{
	msg			info = {.n = 0};
	msg			any = {.n = 0};

	if (d != NULL)
		put_msg(&info, 1, d);
	put_bytes(&any, 1, url, strlen(url));
	put_msg(&any, 2, &info);
	return any;
}

/* Status{code 8, message, details = the anys}. */
static msg
status(const msg *anys, int count)
{
	msg			s = {.n = 0};

	put_uint(&s, 1, 8);
	put_bytes(&s, 2, "quota exceeded", 14);
	for (int i = 0; i < count; i++)
		put_msg(&s, 3, &anys[i]);
	return s;
}

/* Standard base64 of m, padded or not. */
static char *
base64(const msg *m, int padded)
{
	char	   *out = malloc(test_base64_len(m->n, padded) + 1);

	out[test_base64(m->b, m->n, padded, out)] = '\0';
	return out;
}

/* What the decoder makes of m, base64'd padded and not (both must agree). */
static long
delay_of(const msg *m)
{
	char	   *padded = base64(m, 1);
	char	   *bare = base64(m, 0);
	long		a = tp_grpc_retry_delay_ms(padded, strlen(padded));
	long		b = tp_grpc_retry_delay_ms(bare, strlen(bare));

	free(padded);
	free(bare);
	return a == b ? a : -1000;
}

TEST(retry_delay_is_read_in_milliseconds)
{
	msg			d = duration(2, 500000000);
	msg			any = retry_info_any(RETRY_INFO_URL, &d);
	msg			s = status(&any, 1);

	CHECK(delay_of(&s) == 2500);
	d = duration(1, 0);
	any = retry_info_any(RETRY_INFO_URL, &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == 1000);
	/* Rounded up: a wait cut short would come back too early. */
	d = duration(0, 1);
	any = retry_info_any(RETRY_INFO_URL, &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == 1);
	d = duration(0, 999999999);
	any = retry_info_any(RETRY_INFO_URL, &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == 1000);
	/* A year: cut to a day, like a Retry-After. */
	d = duration(365L * 86400, 0);
	any = retry_info_any(RETRY_INFO_URL, &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == 86400000L);
}

TEST(retry_info_without_a_delay_is_zero)
{
	msg			zero = duration(0, 0);
	msg			any = retry_info_any(RETRY_INFO_URL, NULL);
	msg			s = status(&any, 1);

	CHECK(delay_of(&s) == 0);
	any = retry_info_any(RETRY_INFO_URL, &zero);
	s = status(&any, 1);
	CHECK(delay_of(&s) == 0);
}

TEST(retry_info_is_found_among_other_details)
{
	msg			d = duration(3, 0);
	msg			anys[3];
	msg			s;

	anys[0] = retry_info_any("type.googleapis.com/google.rpc.ErrorInfo", NULL);
	anys[1] = retry_info_any(RETRY_INFO_URL, &d);
	anys[2] = retry_info_any("type.googleapis.com/google.rpc.QuotaFailure", NULL);
	s = status(anys, 3);
	CHECK(delay_of(&s) == 3000);
	/* The type is what follows the URL's last '/', whatever the host. */
	anys[1] = retry_info_any("example.com/types/google.rpc.RetryInfo", &d);
	s = status(anys, 2);
	CHECK(delay_of(&s) == 3000);
	/* Unknown fields, of every wire type, are skipped. */
	s = status(anys, 2);
	put_uint(&s, 9, 12345);
	s.b[s.n++] = 10 << 3 | 1;
	memcpy(s.b + s.n, "12345678", 8);
	s.n += 8;
	s.b[s.n++] = 11 << 3 | 5;
	memcpy(s.b + s.n, "1234", 4);
	s.n += 4;
	CHECK(delay_of(&s) == 3000);
}

TEST(no_retry_info_is_minus_one)
{
	msg			d = duration(3, 0);
	msg			any;
	msg			s = status(NULL, 0);

	CHECK(delay_of(&s) == -1);
	any = retry_info_any("type.googleapis.com/google.rpc.RetryInfoX", &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == -1);
	any = retry_info_any("type.googleapis.com/google.rpc.DebugInfo", &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == -1);
	CHECK(tp_grpc_retry_delay_ms("", 0) == -1);
}

TEST(malformed_details_are_ignored)
{
	msg			d = duration(2, 0);
	msg			any = retry_info_any(RETRY_INFO_URL, &d);
	msg			good = status(&any, 1);
	msg			s;
	char	   *text;

	CHECK(delay_of(&good) == 2000);
	/* Cut anywhere: a length or varint runs past the end. */
	for (size_t cut = 1; cut < good.n; cut++)
	{
		s = good;
		s.n = cut;
		CHECK(delay_of(&s) == -1);
	}
	/* Something malformed after a good RetryInfo spoils the whole Status. */
	s = good;
	s.b[s.n++] = 3 << 3 | 2;
	s.b[s.n++] = 100;
	CHECK(delay_of(&s) == -1);
	s = good;
	s.b[s.n++] = 4 << 3 | 3;	/* a group: not read */
	CHECK(delay_of(&s) == -1);
	s = good;
	s.b[s.n++] = 0 << 3 | 0;	/* field number 0 */
	s.b[s.n++] = 0;
	CHECK(delay_of(&s) == -1);
	s = good;					/* a varint of 11 bytes */
	s.b[s.n++] = 9 << 3;
	memset(s.b + s.n, 0xff, 10);
	s.n += 10;
	s.b[s.n++] = 1;
	CHECK(delay_of(&s) == -1);
	/* details (3) that is no message */
	s = status(NULL, 0);
	put_uint(&s, 3, 7);
	CHECK(delay_of(&s) == -1);

	/* Durations that say no delay: negative, nanos out of range, wrong wire types. */
	d = duration(-1, 0);
	any = retry_info_any(RETRY_INFO_URL, &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == -1);
	d = duration(1, -5);
	any = retry_info_any(RETRY_INFO_URL, &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == -1);
	d = duration(0, 1000000000);
	any = retry_info_any(RETRY_INFO_URL, &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == -1);
	d.n = 0;
	put_bytes(&d, 1, "xx", 2);	/* seconds as bytes */
	any = retry_info_any(RETRY_INFO_URL, &d);
	s = status(&any, 1);
	CHECK(delay_of(&s) == -1);
	{
		msg			info = {.n = 0};

		put_uint(&info, 1, 5);	/* retry_delay as a varint */
		any.n = 0;
		put_bytes(&any, 1, RETRY_INFO_URL, strlen(RETRY_INFO_URL));
		put_msg(&any, 2, &info);
		s = status(&any, 1);
		CHECK(delay_of(&s) == -1);
		any.n = 0;
		put_uint(&any, 1, 5);	/* type_url as a varint */
		s = status(&any, 1);
		CHECK(delay_of(&s) == -1);
	}

	/* Not base64: another alphabet, a stray character, a lone last character, padding inside. */
	text = base64(&good, 0);
	CHECK(tp_grpc_retry_delay_ms(text, strlen(text)) == 2000);
	for (size_t i = 0; i < strlen(text); i++)
	{
		char		saved = text[i];

		text[i] = "-_*\n"[i % 4];
		CHECK(tp_grpc_retry_delay_ms(text, strlen(text)) == -1);
		text[i] = saved;
	}
	CHECK(tp_grpc_retry_delay_ms("A", 1) == -1);
	CHECK(tp_grpc_retry_delay_ms("AAAAA", 5) == -1);
	CHECK(tp_grpc_retry_delay_ms("AA=A", 4) == -1);
	CHECK(tp_grpc_retry_delay_ms("AAA===", 6) == -1);
	free(text);
}

TEST(an_overlong_value_is_not_read)
{
	msg			d = duration(2, 0);
	msg			anys[1];
	msg			s;
	char	   *text;
	char		filler[3000];

	/* A Status with a long message (4000 bytes of details text is plenty). */
	memset(filler, 'x', sizeof(filler));
	anys[0] = retry_info_any(RETRY_INFO_URL, &d);
	s.n = 0;
	put_bytes(&s, 2, filler, sizeof(filler));
	put_msg(&s, 3, &anys[0]);
	CHECK(delay_of(&s) == 2000);
	/* 16 kB of base64 and more: not decoded. */
	text = malloc(20000);
	memset(text, 'A', 20000);
	CHECK(tp_grpc_retry_delay_ms(text, 20000) == -1);
	free(text);
}

TEST(delays_are_rounded_up_and_capped)
{
	CHECK(tp_retry_delay_ms(0, 0) == 0);
	CHECK(tp_retry_delay_ms(0, 1) == 1);
	CHECK(tp_retry_delay_ms(0, 1000000) == 1);
	CHECK(tp_retry_delay_ms(0, 1000001) == 2);
	CHECK(tp_retry_delay_ms(1, 999999999) == 2000);
	CHECK(tp_retry_delay_ms(86399, 999999999) == 86400000L);
	CHECK(tp_retry_delay_ms(86400, 0) == 86400000L);
	CHECK(tp_retry_delay_ms(UINT64_MAX, 999999999) == 86400000L);
}

int
main(void)
{
	RUN(retry_delay_is_read_in_milliseconds);
	RUN(retry_info_without_a_delay_is_zero);
	RUN(retry_info_is_found_among_other_details);
	RUN(no_retry_info_is_minus_one);
	RUN(malformed_details_are_ignored);
	RUN(an_overlong_value_is_not_read);
	RUN(delays_are_rounded_up_and_capped);
	return unit_summary();
}
