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

int
main(void)
{
	RUN(a_partial_success_message_is_one_line);
	RUN(answers_are_classified_as_before);
	return unit_summary();
}
