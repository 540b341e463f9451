/*
 * test_otlp_answer.c - what the OTLP exporter makes of a collector's
 * answer, read from its bytes (tp_otlp_read_answer, the code tp_otlp_send
 * runs on what libcurl hands it).
 */
#include <stdlib.h>
#include <string.h>

#include "otlp_export.h"
#include "otlp_trace.pb-c.h"
#include "unit.h"

/* An ExportTraceServiceResponse with a partial success; malloc'd. */
static uint8_t *
partial_success(int64_t rejected, const char *message, size_t *len)
{
	Traceprof__Otlp__ExportTracePartialSuccess partial = TRACEPROF__OTLP__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;
	Traceprof__Otlp__ExportTraceServiceResponse answer = TRACEPROF__OTLP__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
	uint8_t    *bytes;

	partial.rejected_spans = rejected;
	partial.error_message = (char *) message;
	answer.partial_success = &partial;
	*len = traceprof__otlp__export_trace_service_response__get_packed_size(&answer);
	bytes = malloc(*len + 5);
	traceprof__otlp__export_trace_service_response__pack(&answer, bytes);
	return bytes;
}

/*
 * A partial success's message is the collector's own text: a line break
 * in it went into the error, and so into the server log, as is (found by
 * tests/fuzz/otlp_answer.c).
 */
TEST(a_partial_success_message_is_one_line)
{
	tp_otlp_target target = {.protocol = TP_OTLP_HTTP_PROTOBUF,
	.url = "http://collector.invalid:4318/v1/traces"};
	const char *lines[] = {"HTTP/1.1 200 OK\r\n", "\r\n"};
	size_t		lens[] = {strlen(lines[0]), strlen(lines[1])};
	size_t		len;
	uint8_t    *body = partial_success(2, "too old\nLOG:  forged\r\tline\x01", &len);
	bool		retry = true;
	long		retry_after_ms = 0;
	char		err[1024];

	CHECK(tp_otlp_read_answer(&target, 200, lines, lens, 2, body, len,
							  &retry, &retry_after_ms, err, sizeof(err)) == TP_EXPORT_OK);
	CHECK(!retry);
	CHECK(retry_after_ms == -1);
	CHECK_STR(err, "collector accepted the request but rejected 2 span(s): too old LOG:  forged  line?");

	/* The same over gRPC, after the message's 5-byte frame prefix. */
	memmove(body + 5, body, len);
	memset(body, 0, 5);
	body[4] = (uint8_t) len;
	{
		const char *grpc_lines[] = {"HTTP/2 200\r\n", "\r\n", "grpc-status: 0\r\n", "\r\n"};
		size_t		grpc_lens[4];

		for (int i = 0; i < 4; i++)
			grpc_lens[i] = strlen(grpc_lines[i]);
		target.protocol = TP_OTLP_GRPC;
		CHECK(tp_otlp_read_answer(&target, 200, grpc_lines, grpc_lens, 4, body, len + 5,
								  &retry, &retry_after_ms, err, sizeof(err)) == TP_EXPORT_OK);
		CHECK_STR(err, "collector accepted the request but rejected 2 span(s): too old LOG:  forged  line?");
	}
	free(body);
}

/* The answers the exporter already handled, read through the same entry. */
/*
 * A collector quoting the request line: the endpoint's query string is
 * scrubbed before the answer is cut to its shown length, so a secret that
 * straddles the cut leaves no part of itself.
 */
TEST(a_quoted_query_string_is_scrubbed_before_the_cut)
{
	tp_otlp_target target = {.protocol = TP_OTLP_HTTP_PROTOBUF,
	.url = "http://collector.invalid:4318/v1/traces?api_key=SECRET1234567890"};
	const char *lines[] = {"HTTP/1.1 404 Not Found\r\n", "\r\n"};
	size_t		lens[] = {strlen(lines[0]), strlen(lines[1])};
	bool		retry = false;
	long		retry_after_ms = 0;
	char		err[1024];
	char		body[512];

	for (int pad = 150; pad <= 200; pad += 5)
	{
		snprintf(body, sizeof(body), "%*s not found: POST /v1/traces?api_key=SECRET1234567890 HTTP/1.1",
				 pad, "x");
		CHECK(tp_otlp_read_answer(&target, 404, lines, lens, 2, (const uint8_t *) body, strlen(body),
								  &retry, &retry_after_ms, err, sizeof(err)) == TP_EXPORT_REJECTED);
		CHECK(strstr(err, "SECR") == NULL);
		CHECK(strstr(err, "HTTP status 404") != NULL);
	}
}

TEST(answers_are_classified_as_before)
{
	tp_otlp_target target = {.protocol = TP_OTLP_HTTP_PROTOBUF,
	.url = "http://collector.invalid:4318/v1/traces"};
	const char *lines[] = {"HTTP/1.1 429 Too Many Requests\r\n", "Retry-After: 7\r\n", "\r\n"};
	size_t		lens[] = {strlen(lines[0]), strlen(lines[1]), strlen(lines[2])};
	bool		retry = false;
	long		retry_after_ms = 0;
	char		err[1024];
	static const char page[] = "<h1>413 Request Entity Too Large</h1>\n";

	CHECK(tp_otlp_read_answer(&target, 429, lines, lens, 3, NULL, 0,
							  &retry, &retry_after_ms, err, sizeof(err)) == TP_EXPORT_FAILED);
	CHECK(retry);
	CHECK(retry_after_ms == 7000);
	CHECK_STR(err, "http://collector.invalid:4318/v1/traces: HTTP status 429");

	CHECK(tp_otlp_read_answer(&target, 413, lines + 2, lens + 2, 1,
							  (const uint8_t *) page, strlen(page),
							  &retry, &retry_after_ms, err, sizeof(err)) == TP_EXPORT_TOO_LARGE);
	CHECK(!retry);
	CHECK(retry_after_ms == -1);
	CHECK_STR(err, "http://collector.invalid:4318/v1/traces: HTTP status 413: <h1>413 Request Entity Too Large</h1>");
}

/*
 * libcurl hands over an interim answer's header lines too: a 103 Early
 * Hints' Retry-After held export for ten minutes after the 503 that
 * followed it, which asked for no delay.
 */
TEST(an_interim_answers_retry_after_is_not_the_final_ones)
{
	tp_otlp_target target = {.protocol = TP_OTLP_HTTP_PROTOBUF,
	.url = "http://collector.invalid:4318/v1/traces"};
	const char *lines[] = {"HTTP/1.1 103 Early Hints\r\n", "Retry-After: 600\r\n", "\r\n",
	"HTTP/1.1 503 Service Unavailable\r\n", "\r\n"};
	size_t		lens[5];
	bool		retry = false;
	long		retry_after_ms = 0;
	char		err[1024];

	for (int i = 0; i < 5; i++)
		lens[i] = strlen(lines[i]);
	CHECK(tp_otlp_read_answer(&target, 503, lines, lens, 5, NULL, 0,
							  &retry, &retry_after_ms, err, sizeof(err)) == TP_EXPORT_FAILED);
	CHECK(retry);
	CHECK(retry_after_ms == -1);

	/*
	 * Over gRPC, a 103's grpc-status is not the answer's either: an answer
	 * without one is no delivery.
	 */
	{
		const char *h2[] = {"HTTP/2 103\r\n", "grpc-status: 0\r\n", "\r\n", "HTTP/2 200\r\n", "\r\n"};

		for (int i = 0; i < 5; i++)
			lens[i] = strlen(h2[i]);
		target.protocol = TP_OTLP_GRPC;
		CHECK(tp_otlp_read_answer(&target, 200, h2, lens, 5, NULL, 0,
								  &retry, &retry_after_ms, err, sizeof(err)) != TP_EXPORT_OK);
	}
}

/* A gRPC answer's status trailer, as the only header line. */
static tp_export_result
grpc_answer(const char *status_line, bool *retry, char *err, size_t errlen)
{
	tp_otlp_target target = {.protocol = TP_OTLP_GRPC, .url = "http://collector.invalid:4317"};
	const char *lines[] = {status_line};
	size_t		lens[] = {strlen(status_line)};
	long		retry_after_ms;

	return tp_otlp_read_answer(&target, 200, lines, lens, 1, NULL, 0,
							   retry, &retry_after_ms, err, errlen);
}

/*
 * atoi() read a grpc-status that is no number, an empty one too, as 0: a
 * broken answer's spans counted as delivered (found by
 * tests/fuzz/otlp_answer.c).  gRPC's clients read it as INTERNAL.
 */
TEST(a_grpc_status_that_is_no_number_is_internal)
{
	static const char *const malformed[] = {
		"grpc-status:\r\n", "grpc-status: \r\n", "grpc-status: abc\r\n", "grpc-status: 0x0\r\n",
		"grpc-status: +0\r\n", "grpc-status: -0\r\n", "grpc-status: 4294967296\r\n",
		"grpc-status: 99999999999999999999\r\n", "grpc-status: 0 0\r\n",
	};
	bool		retry;
	char		err[1024];

	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++)
	{
		CHECK(grpc_answer(malformed[i], &retry, err, sizeof(err)) == TP_EXPORT_REJECTED);
		CHECK(!retry);
		CHECK(strstr(err, "gRPC status 13") != NULL);
	}
	CHECK(grpc_answer("grpc-status: 0\r\n", &retry, err, sizeof(err)) == TP_EXPORT_OK);
	CHECK(grpc_answer("grpc-status:\t00 \r\n", &retry, err, sizeof(err)) == TP_EXPORT_OK);
	CHECK(grpc_answer("GRPC-STATUS: 14\r\n", &retry, err, sizeof(err)) == TP_EXPORT_FAILED);
	CHECK(retry);
	CHECK(strstr(err, "gRPC status 14") != NULL);
	CHECK(grpc_answer("grpc-status: 2147483647\r\n", &retry, err, sizeof(err)) == TP_EXPORT_REJECTED);
	CHECK(strstr(err, "gRPC status 2147483647") != NULL);
}

/*
 * Header lines of 512 bytes or more were ignored whole: a long grpc-message
 * was lost, and a grpc-status padded with blanks read as no status.  Any
 * length is read now; the message is cut to what the error holds.
 */
TEST(long_header_lines_are_read)
{
	char		status[700];
	char		message[3000];
	bool		retry;
	char		err[1024];

	snprintf(status, sizeof(status), "grpc-status:%*s14\r\n", 600, "");
	CHECK(grpc_answer(status, &retry, err, sizeof(err)) == TP_EXPORT_FAILED);
	CHECK(retry);
	CHECK(strstr(err, "gRPC status 14") != NULL);

	{
		tp_otlp_target target = {.protocol = TP_OTLP_GRPC, .url = "http://collector.invalid:4317"};
		const char *lines[2];
		size_t		lens[2];
		long		retry_after_ms;
		const char *said;

		memcpy(message, "grpc-message: ", 14);
		for (size_t i = 14; i < sizeof(message) - 3; i += 3)
			memcpy(message + i, "%41", 3);	/* 'A', percent-encoded */
		strcpy(message + sizeof(message) - 3, "\r\n");
		lines[0] = "grpc-status: 3\r\n";
		lines[1] = message;
		lens[0] = strlen(lines[0]);
		lens[1] = strlen(message);
		CHECK(tp_otlp_read_answer(&target, 200, lines, lens, 2, NULL, 0,
								  &retry, &retry_after_ms, err, sizeof(err)) == TP_EXPORT_REJECTED);
		said = strstr(err, "AAAA");
		CHECK(said != NULL);
		/* 255 of the decoded 'A's, and no '%' of a cut escape. */
		CHECK(said != NULL && strspn(said, "A") == 255);
		CHECK(strchr(err, '%') == NULL);
	}
}

/* A partial success's count below zero refuses no span and says so. */
TEST(a_negative_rejected_count_is_reported_as_invalid)
{
	tp_otlp_target target = {.protocol = TP_OTLP_HTTP_PROTOBUF,
	.url = "http://collector.invalid:4318/v1/traces"};
	const char *lines[] = {"HTTP/1.1 200 OK\r\n"};
	size_t		lens[] = {strlen(lines[0])};
	size_t		len;
	uint8_t    *body = partial_success(-1, "", &len);
	bool		retry;
	long		retry_after_ms;
	char		err[1024];

	CHECK(tp_otlp_read_answer(&target, 200, lines, lens, 1, body, len,
							  &retry, &retry_after_ms, err, sizeof(err)) == TP_EXPORT_OK);
	CHECK_STR(err, "collector accepted the request with an invalid rejected_spans (-1): ");
	free(body);
}

int
main(void)
{
	RUN(a_partial_success_message_is_one_line);
	RUN(a_quoted_query_string_is_scrubbed_before_the_cut);
	RUN(answers_are_classified_as_before);
	RUN(an_interim_answers_retry_after_is_not_the_final_ones);
	RUN(a_grpc_status_that_is_no_number_is_internal);
	RUN(long_header_lines_are_read);
	RUN(a_negative_rejected_count_is_reported_as_invalid);
	return unit_summary();
}
