/*
 * test_otlp_encode.c - the hand-written OTLP encoder, read back by
 * protobuf-c's generated decoder for proto/otlp_trace.proto.
 */
#include <stdlib.h>
#include <string.h>

#include "otlp_export.h"
#include "otlp_trace.pb-c.h"
#include "unit.h"

typedef Traceprof__Otlp__ExportTraceServiceRequest Request;
typedef Traceprof__Otlp__Span Span;
typedef Traceprof__Otlp__AnyValue AnyValue;

static Request *
encode_and_decode(const tp_kvlist *resource, const char *scope, const char *version,
				  tp_span *const *spans, size_t count, size_t *len)
{
	uint8_t    *bytes = tp_otlp_encode_traces(resource, scope, version, spans, count, len);
	Request    *request;

	CHECK(bytes != NULL);
	if (bytes == NULL)
		return NULL;
	request = traceprof__otlp__export_trace_service_request__unpack(NULL, *len, bytes);
	CHECK(request != NULL);
	free(bytes);
	return request;
}

static const AnyValue *
attribute(const Span *span, const char *key)
{
	for (size_t i = 0; i < span->n_attributes; i++)
		if (strcmp(span->attributes[i]->key, key) == 0)
			return span->attributes[i]->value;
	return NULL;
}

/* A span with every kind of field, values chosen to hit varint edges. */
static void
full_span(tp_span *span, const char *query)
{
	memset(span, 0, sizeof(*span));
	for (int i = 0; i < TP_TRACE_ID_BYTES; i++)
		span->context.trace_id[i] = (uint8_t) (0xa0 + i);
	for (int i = 0; i < TP_SPAN_ID_BYTES; i++)
		span->context.span_id[i] = (uint8_t) (1 + i);
	span->parent_span_id[7] = 0x42;
	span->context.flags = 1;
	span->name = strdup("SELECT orders");	/* tp_span_clear frees it */
	span->kind = TP_SPAN_SERVER;
	span->start_unix_ns = 1763700000123456789ull;
	span->end_unix_ns = 1763700000223456789ull;
	tp_span_set_string(span, "db.query.text", query);
	tp_span_set_string(span, "db.collection.name", "");
	tp_span_set_int(span, "db.response.returned_rows", 127);
	tp_span_set_int(span, "traceprof.rows_128", 128);
	tp_span_set_int(span, "traceprof.negative", -5);
	tp_span_set_int(span, "traceprof.zero", 0);
	tp_span_set_int(span, "traceprof.max", INT64_MAX);
	tp_span_set_double(span, "traceprof.ratio", 0.25);
	tp_span_set_bool(span, "traceprof.false", false);
	tp_span_set_bool(span, "traceprof.true", true);
	tp_span_set_error(span, "division by zero");
}

TEST(every_field_round_trips)
{
	static char long_query[20000];
	tp_span		span;
	tp_span    *list[1] = {&span};
	tp_kvlist	resource = {0};
	Request    *request;
	size_t		len;
	const Span *m;
	const AnyValue *v;

	memset(long_query, 'q', sizeof(long_query) - 1);	/* a 3-byte length prefix */
	full_span(&span, long_query);
	tp_kvlist_add(&resource, "service.name", "orders-loader");
	tp_kvlist_add(&resource, "deployment.environment", "");
	request = encode_and_decode(&resource, "traceprof", "0.1", list, 1, &len);
	if (request == NULL)
		return;
	CHECK(request->n_resource_spans == 1);
	CHECK(request->resource_spans[0]->resource->n_attributes == 2);
	CHECK_STR(request->resource_spans[0]->resource->attributes[0]->key, "service.name");
	CHECK_STR(request->resource_spans[0]->resource->attributes[0]->value->string_value, "orders-loader");
	CHECK(request->resource_spans[0]->resource->attributes[1]->value->value_case ==
		  TRACEPROF__OTLP__ANY_VALUE__VALUE_STRING_VALUE);
	CHECK_STR(request->resource_spans[0]->resource->attributes[1]->value->string_value, "");
	CHECK(request->resource_spans[0]->n_scope_spans == 1);
	CHECK_STR(request->resource_spans[0]->scope_spans[0]->scope->name, "traceprof");
	CHECK_STR(request->resource_spans[0]->scope_spans[0]->scope->version, "0.1");
	CHECK(request->resource_spans[0]->scope_spans[0]->n_spans == 1);

	m = request->resource_spans[0]->scope_spans[0]->spans[0];
	CHECK(m->trace_id.len == 16 && memcmp(m->trace_id.data, span.context.trace_id, 16) == 0);
	CHECK(m->span_id.len == 8 && memcmp(m->span_id.data, span.context.span_id, 8) == 0);
	CHECK(m->parent_span_id.len == 8 && memcmp(m->parent_span_id.data, span.parent_span_id, 8) == 0);
	CHECK_STR(m->name, "SELECT orders");
	CHECK(m->kind == 2);
	CHECK(m->start_time_unix_nano == span.start_unix_ns);
	CHECK(m->end_time_unix_nano == span.end_unix_ns);
	CHECK(m->flags == 1);
	CHECK(m->status != NULL && m->status->code == 2);
	CHECK(m->status != NULL && strcmp(m->status->message, "division by zero") == 0);
	CHECK(m->n_attributes == span.attr_count);
	v = attribute(m, "db.query.text");
	CHECK(v != NULL && strlen(v->string_value) == sizeof(long_query) - 1);
	v = attribute(m, "db.collection.name");
	CHECK(v != NULL && v->value_case == TRACEPROF__OTLP__ANY_VALUE__VALUE_STRING_VALUE);
	v = attribute(m, "db.response.returned_rows");
	CHECK(v != NULL && v->int_value == 127);
	v = attribute(m, "traceprof.rows_128");
	CHECK(v != NULL && v->int_value == 128);
	v = attribute(m, "traceprof.negative");
	CHECK(v != NULL && v->int_value == -5);
	/* Oneof members are written even at their default. */
	v = attribute(m, "traceprof.zero");
	CHECK(v != NULL && v->value_case == TRACEPROF__OTLP__ANY_VALUE__VALUE_INT_VALUE && v->int_value == 0);
	v = attribute(m, "traceprof.max");
	CHECK(v != NULL && v->int_value == INT64_MAX);
	v = attribute(m, "traceprof.ratio");
	CHECK(v != NULL && v->value_case == TRACEPROF__OTLP__ANY_VALUE__VALUE_DOUBLE_VALUE && v->double_value == 0.25);
	v = attribute(m, "traceprof.false");
	CHECK(v != NULL && v->value_case == TRACEPROF__OTLP__ANY_VALUE__VALUE_BOOL_VALUE && !v->bool_value);
	v = attribute(m, "traceprof.true");
	CHECK(v != NULL && v->bool_value);

	/* The same request packed by protobuf-c has the same length. */
	CHECK(traceprof__otlp__export_trace_service_request__get_packed_size(request) == len);
	traceprof__otlp__export_trace_service_request__free_unpacked(request, NULL);
	tp_span_clear(&span);
	tp_kvlist_free(&resource);
}

TEST(defaults_are_left_out)
{
	tp_span		root;
	tp_span    *list[1] = {&root};
	tp_kvlist	none = {0};
	Request    *request;
	size_t		len;
	const Span *m;

	memset(&root, 0, sizeof(root));
	root.context.trace_id[0] = 1;
	root.context.span_id[0] = 2;
	root.name = "";
	request = encode_and_decode(&none, NULL, NULL, list, 1, &len);
	if (request == NULL)
		return;
	m = request->resource_spans[0]->scope_spans[0]->spans[0];
	CHECK(m->parent_span_id.len == 0);	/* a root span */
	CHECK_STR(m->name, "");
	CHECK(m->kind == 0 && m->flags == 0 && m->status == NULL && m->n_attributes == 0);
	CHECK(request->resource_spans[0]->resource->n_attributes == 0);
	CHECK(traceprof__otlp__export_trace_service_request__get_packed_size(request) == len);
	traceprof__otlp__export_trace_service_request__free_unpacked(request, NULL);
}

/* Whether two spans encode to the same bytes. */
static bool
encode_alike(tp_span *x, tp_span *y)
{
	tp_kvlist	none = {0};
	size_t		x_len;
	size_t		y_len;
	uint8_t    *x_bytes = tp_otlp_encode_traces(&none, NULL, NULL, &x, 1, &x_len);
	uint8_t    *y_bytes = tp_otlp_encode_traces(&none, NULL, NULL, &y, 1, &y_len);
	bool		alike = x_bytes != NULL && y_bytes != NULL && x_len == y_len &&
		memcmp(x_bytes, y_bytes, x_len) == 0;

	free(x_bytes);
	free(y_bytes);
	return alike;
}

/* Lengths given with the strings (the extension's spans) encode as measured ones. */
TEST(given_lengths_encode_as_measured)
{
	tp_span		measured;
	tp_span		given;
	tp_span    *list[1] = {&given};
	tp_kvlist	none = {0};
	size_t		b_len;

	full_span(&measured, "SELECT * FROM orders WHERE id = $1");
	full_span(&given, "SELECT * FROM orders WHERE id = $1");
	for (size_t i = 0; i < given.attr_count; i++)
	{
		given.attrs[i].key_len = (uint32_t) strlen(given.attrs[i].key);
		if (given.attrs[i].type == TP_ATTR_STRING)
			given.attrs[i].value_len = (uint32_t) strlen(given.attrs[i].value.s);
	}
	given.name_len = (uint32_t) strlen(given.name);
	given.status_message_len = (uint32_t) strlen(given.status_message);
	measured.trace_state = strdup("vendor=value");
	given.trace_state = strdup("vendor=value");
	given.trace_state_len = (uint32_t) strlen(given.trace_state);
	CHECK(encode_alike(&measured, &given));

	/* The given length is the one used: no second measurement. */
	for (size_t i = 0; i < given.attr_count; i++)
		if (strcmp(given.attrs[i].key, "db.query.text") == 0)
			given.attrs[i].value_len = 6;
	given.name_len = 6;
	given.trace_state_len = 6;
	given.status_message_len = 8;
	{
		Request    *request = encode_and_decode(&none, NULL, NULL, list, 1, &b_len);
		const Span *m = request ? request->resource_spans[0]->scope_spans[0]->spans[0] : NULL;
		const AnyValue *v = m ? attribute(m, "db.query.text") : NULL;

		CHECK(v != NULL && v->string_value != NULL);
		if (v != NULL && v->string_value != NULL)
			CHECK_STR(v->string_value, "SELECT");
		if (m != NULL)
		{
			CHECK_STR(m->name, "SELECT");
			CHECK_STR(m->trace_state, "vendor");
			CHECK(m->status != NULL);
			if (m->status != NULL)
				CHECK_STR(m->status->message, "division");
		}
		if (request != NULL)
			traceprof__otlp__export_trace_service_request__free_unpacked(request, NULL);
	}
	tp_span_clear(&measured);
	tp_span_clear(&given);
}

/*
 * Protobuf strings are UTF-8: a receiver that checks (protoc, Go) refuses
 * the whole request for one bad byte, such as a Latin-1 file name given to
 * the generator.  Each byte of no valid sequence is sent as '?'.
 */
TEST(strings_that_are_not_utf8_are_sent_as_valid_utf8)
{
	tp_span		span;
	tp_span    *list[1] = {&span};
	tp_kvlist	resource = {0};
	Request    *request;
	size_t		len;
	const Span *m;
	const AnyValue *v;

	memset(&span, 0, sizeof(span));
	span.context.trace_id[0] = 1;
	span.context.span_id[0] = 2;
	span.name = strdup("caf\xe9 \xe2\x82\xac");	/* Latin-1 e-acute, then a valid euro sign */
	tp_span_set_string(&span, "generator.output_path", "/tmp/x\xff\xfe.json");
	tp_span_set_string(&span, "k\xe9y", "cut at the end \xe2\x82");
	tp_span_set_string(&span, "overlong", "\xc0\xaf and surrogate \xed\xa0\x80 and \xf4\x90\x80\x80");
	tp_span_set_string(&span, "valid", "\xc3\xa9\xf0\x9f\x98\x80");
	tp_span_set_error(&span, "relation \xaborders\xbb does not exist");
	tp_kvlist_add(&resource, "service.name", "svc\x80");
	request = encode_and_decode(&resource, "scope\xff", "1.0\xc3", list, 1, &len);
	if (request == NULL)
		return;
	CHECK_STR(request->resource_spans[0]->resource->attributes[0]->value->string_value, "svc?");
	CHECK_STR(request->resource_spans[0]->scope_spans[0]->scope->name, "scope?");
	CHECK_STR(request->resource_spans[0]->scope_spans[0]->scope->version, "1.0?");
	m = request->resource_spans[0]->scope_spans[0]->spans[0];
	CHECK_STR(m->name, "caf? \xe2\x82\xac");
	CHECK(m->status != NULL);
	if (m->status != NULL)
		CHECK_STR(m->status->message, "relation ?orders? does not exist");
	v = attribute(m, "generator.output_path");
	CHECK(v != NULL);
	if (v != NULL)
		CHECK_STR(v->string_value, "/tmp/x??.json");
	v = attribute(m, "k?y");
	CHECK(v != NULL);
	if (v != NULL)
		CHECK_STR(v->string_value, "cut at the end ??");
	v = attribute(m, "overlong");
	CHECK(v != NULL);
	if (v != NULL)
		CHECK_STR(v->string_value, "?? and surrogate ??? and ????");
	v = attribute(m, "valid");
	CHECK(v != NULL);
	if (v != NULL)
		CHECK_STR(v->string_value, "\xc3\xa9\xf0\x9f\x98\x80");
	CHECK(traceprof__otlp__export_trace_service_request__get_packed_size(request) == len);
	traceprof__otlp__export_trace_service_request__free_unpacked(request, NULL);
	/* The caller's strings are left as they were. */
	CHECK_STR(span.name, "caf\xe9 \xe2\x82\xac");
	tp_span_clear(&span);
	tp_kvlist_free(&resource);
}

/*
 * A setter replacing a string forgets the length given for the old one:
 * the span encodes as one whose lengths were never given.
 */
TEST(setters_forget_given_lengths)
{
	tp_span		given;
	tp_span		measured;

	full_span(&given, "SELECT 1");
	full_span(&measured, "SELECT 1");
	for (size_t i = 0; i < given.attr_count; i++)
		if (strcmp(given.attrs[i].key, "db.query.text") == 0)
			given.attrs[i].value_len = 8;
	given.status_message_len = 16;
	tp_span_set_string(&given, "db.query.text", "SELECT");
	tp_span_set_error(&given, "late");
	tp_span_set_string(&measured, "db.query.text", "SELECT");
	tp_span_set_error(&measured, "late");
	CHECK(encode_alike(&given, &measured));
	tp_span_clear(&given);
	tp_span_clear(&measured);
}

/*
 * Strings are copied in words whose ends may overlap, and checked for
 * UTF-8 as they are copied: every length up to five words, ASCII and with
 * one bad byte at each place, comes out whole, the bad byte as '?'.
 */
TEST(strings_of_every_length_and_bad_byte_place)
{
	enum { LONGEST = 40 };
	char		text[LONGEST + 1];
	char		want[LONGEST + 1];
	bool		all_right = true;

	for (int len = 0; len <= LONGEST; len++)
		for (int bad = -1; bad < len; bad++)
		{
			tp_span		span;
			tp_span    *list[1] = {&span};
			tp_kvlist	none = {0};
			Request    *request;
			size_t		encoded;

			for (int i = 0; i < len; i++)
				text[i] = want[i] = (char) ('a' + i % 26);
			text[len] = want[len] = '\0';
			if (bad >= 0)
			{
				text[bad] = (char) 0xff;
				want[bad] = '?';
			}
			memset(&span, 0, sizeof(span));
			span.context.trace_id[0] = 1;
			span.context.span_id[0] = 2;
			span.name = text;
			span.name_len = (uint32_t) len;
			request = encode_and_decode(&none, NULL, NULL, list, 1, &encoded);
			if (request == NULL)
				return;
			if (strcmp(request->resource_spans[0]->scope_spans[0]->spans[0]->name, want) != 0)
				all_right = false;
			traceprof__otlp__export_trace_service_request__free_unpacked(request, NULL);
		}
	CHECK(all_right);
}

TEST(many_spans_in_order)
{
	enum { N = 300 };
	tp_span    *spans = calloc(N, sizeof(tp_span));
	tp_span    *list[N];
	tp_kvlist	resource = {0};
	Request    *request;
	size_t		len;
	bool		in_order = true;

	tp_kvlist_add(&resource, "service.name", "postgresql");
	for (int i = 0; i < N; i++)
	{
		full_span(&spans[i], i % 2 ? "SELECT 1" : "");
		spans[i].context.span_id[0] = (uint8_t) i;
		spans[i].context.span_id[1] = (uint8_t) (i >> 8);
		if (i % 3 == 0)
			spans[i].status = TP_STATUS_OK;
		list[i] = &spans[i];
	}
	request = encode_and_decode(&resource, "traceprof", "0.1", list, N, &len);
	if (request != NULL)
	{
		const Traceprof__Otlp__ScopeSpans *scope = request->resource_spans[0]->scope_spans[0];

		CHECK(scope->n_spans == N);
		for (size_t i = 0; i < scope->n_spans && i < N; i++)
			if (scope->spans[i]->span_id.data[0] != (uint8_t) i ||
				scope->spans[i]->span_id.data[1] != (uint8_t) (i >> 8) ||
				(int) scope->spans[i]->status->code != (i % 3 == 0 ? 1 : 2))
				in_order = false;
		CHECK(in_order);
		CHECK(traceprof__otlp__export_trace_service_request__get_packed_size(request) == len);
		traceprof__otlp__export_trace_service_request__free_unpacked(request, NULL);
	}
	for (int i = 0; i < N; i++)
		tp_span_clear(&spans[i]);
	free(spans);
	tp_kvlist_free(&resource);
}

int
main(void)
{
	RUN(every_field_round_trips);
	RUN(defaults_are_left_out);
	RUN(given_lengths_encode_as_measured);
	RUN(strings_that_are_not_utf8_are_sent_as_valid_utf8);
	RUN(setters_forget_given_lengths);
	RUN(strings_of_every_length_and_bad_byte_place);
	RUN(many_spans_in_order);
	return unit_summary();
}
