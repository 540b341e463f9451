/*
 * otlp_encode.c - tp_span → OTLP ExportTraceServiceRequest bytes.
 *
 * protobuf-c messages here only point at the caller's data; the arrays
 * that hold them live until the request is packed, then are freed.
 */
#include <stdlib.h>

#include "otlp_export.h"
#include "otlp_trace.pb-c.h"

typedef Traceprof__Otlp__KeyValue KeyValue;
typedef Traceprof__Otlp__AnyValue AnyValue;

/*
 * Storage for every attribute of a request, allocated at once: the pointer
 * array protobuf-c wants, plus the cells; next is the first unused one.
 */
typedef struct attr_block
{
	KeyValue  **pointers;
	KeyValue   *pairs;
	AnyValue   *values;
	size_t		next;
} attr_block;

static bool
attr_block_alloc(attr_block *block, size_t n)
{
	block->pointers = calloc(n ? n : 1, sizeof(KeyValue *));
	block->pairs = calloc(n ? n : 1, sizeof(KeyValue));
	block->values = calloc(n ? n : 1, sizeof(AnyValue));
	block->next = 0;
	return block->pointers && block->pairs && block->values;
}

static void
attr_block_free(attr_block *block)
{
	free(block->pointers);
	free(block->pairs);
	free(block->values);
}

/* The next cell, keyed; its value is set by the caller. */
static AnyValue *
attr_cell(attr_block *block, const char *key)
{
	KeyValue   *kv = &block->pairs[block->next];
	AnyValue   *value = &block->values[block->next];

	traceprof__otlp__key_value__init(kv);
	traceprof__otlp__any_value__init(value);
	kv->key = (char *) key;
	kv->value = value;
	block->pointers[block->next++] = kv;
	return value;
}

/* Cells for the span's attributes; returns where they start in pointers. */
static KeyValue **
fill_span_attrs(attr_block *block, const tp_span *span)
{
	KeyValue  **first = &block->pointers[block->next];

	for (size_t i = 0; i < span->attr_count; i++)
	{
		const tp_attr *attr = &span->attrs[i];
		AnyValue   *v = attr_cell(block, attr->key);

		switch (attr->type)
		{
			case TP_ATTR_STRING:
				v->value_case = TRACEPROF__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
				v->string_value = attr->value.s;
				break;
			case TP_ATTR_INT:
				v->value_case = TRACEPROF__OTLP__ANY_VALUE__VALUE_INT_VALUE;
				v->int_value = attr->value.i;
				break;
			case TP_ATTR_DOUBLE:
				v->value_case = TRACEPROF__OTLP__ANY_VALUE__VALUE_DOUBLE_VALUE;
				v->double_value = attr->value.d;
				break;
			case TP_ATTR_BOOL:
				v->value_case = TRACEPROF__OTLP__ANY_VALUE__VALUE_BOOL_VALUE;
				v->bool_value = attr->value.b;
				break;
		}
	}
	return first;
}

static ProtobufCBinaryData
bytes_of(const uint8_t *data, size_t len)
{
	ProtobufCBinaryData b = {len, (uint8_t *) data};

	return b;
}

uint8_t *
tp_otlp_encode_traces(const tp_kvlist *resource_attrs,
					  const char *scope_name, const char *scope_version,
					  tp_span *const *spans, size_t count, size_t *out_len)
{
	Traceprof__Otlp__ExportTraceServiceRequest request = TRACEPROF__OTLP__EXPORT_TRACE_SERVICE_REQUEST__INIT;
	Traceprof__Otlp__ResourceSpans resource_spans = TRACEPROF__OTLP__RESOURCE_SPANS__INIT;
	Traceprof__Otlp__ResourceSpans *resource_spans_list[1] = {&resource_spans};
	Traceprof__Otlp__Resource resource = TRACEPROF__OTLP__RESOURCE__INIT;
	Traceprof__Otlp__ScopeSpans scope_spans = TRACEPROF__OTLP__SCOPE_SPANS__INIT;
	Traceprof__Otlp__ScopeSpans *scope_spans_list[1] = {&scope_spans};
	Traceprof__Otlp__InstrumentationScope scope = TRACEPROF__OTLP__INSTRUMENTATION_SCOPE__INIT;
	Traceprof__Otlp__Span *messages = calloc(count ? count : 1, sizeof(*messages));
	Traceprof__Otlp__Span **message_list = calloc(count ? count : 1, sizeof(*message_list));
	Traceprof__Otlp__Status *statuses = calloc(count ? count : 1, sizeof(*statuses));
	attr_block	attrs = {0};
	size_t		attr_total = resource_attrs->count;
	uint8_t    *out = NULL;
	bool		ok;

	for (size_t i = 0; i < count; i++)
		attr_total += spans[i]->attr_count;
	ok = messages && message_list && statuses && attr_block_alloc(&attrs, attr_total);
	for (size_t i = 0; ok && i < resource_attrs->count; i++)
	{
		AnyValue   *v = attr_cell(&attrs, resource_attrs->items[i].key);

		v->value_case = TRACEPROF__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
		v->string_value = resource_attrs->items[i].value;
	}
	for (size_t i = 0; ok && i < count; i++)
	{
		const tp_span *span = spans[i];
		Traceprof__Otlp__Span *m = &messages[i];

		traceprof__otlp__span__init(m);
		m->trace_id = bytes_of(span->context.trace_id, TP_TRACE_ID_BYTES);
		m->span_id = bytes_of(span->context.span_id, TP_SPAN_ID_BYTES);
		if (!tp_id_is_zero(span->parent_span_id, TP_SPAN_ID_BYTES))
			m->parent_span_id = bytes_of(span->parent_span_id, TP_SPAN_ID_BYTES);
		m->name = span->name;
		m->kind = span->kind;
		m->start_time_unix_nano = span->start_unix_ns;
		m->end_time_unix_nano = span->end_unix_ns;
		m->n_attributes = span->attr_count;
		m->attributes = fill_span_attrs(&attrs, span);
		m->flags = span->context.flags;
		if (span->status != TP_STATUS_UNSET)
		{
			traceprof__otlp__status__init(&statuses[i]);
			statuses[i].code = span->status;
			statuses[i].message = span->status_message ? span->status_message : "";
			m->status = &statuses[i];
		}
		message_list[i] = m;
	}
	if (ok)
	{
		resource.n_attributes = resource_attrs->count;
		resource.attributes = attrs.pointers;
		scope.name = (char *) scope_name;
		scope.version = (char *) scope_version;
		scope_spans.scope = &scope;
		scope_spans.n_spans = count;
		scope_spans.spans = message_list;
		resource_spans.resource = &resource;
		resource_spans.n_scope_spans = 1;
		resource_spans.scope_spans = scope_spans_list;
		request.n_resource_spans = 1;
		request.resource_spans = resource_spans_list;

		*out_len = traceprof__otlp__export_trace_service_request__get_packed_size(&request);
		out = malloc(*out_len ? *out_len : 1);
		if (out != NULL)
			traceprof__otlp__export_trace_service_request__pack(&request, out);
	}
	attr_block_free(&attrs);
	free(statuses);
	free(message_list);
	free(messages);
	return out;
}
