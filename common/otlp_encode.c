/*
 * otlp_encode.c - tp_span → OTLP ExportTraceServiceRequest bytes, written
 * straight in protobuf's wire format (field numbers: proto/otlp_trace.proto).
 *
 * Not through protobuf-c: filling its message structs and packing them,
 * which sizes every nested message again at each level of nesting, was
 * ~30% of the extension exporter's CPU.  Here a first pass computes each
 * span's size, taking each string's length from the span or measuring it
 * once (strlen was a fifth of the exporter's CPU when every string was
 * measured three times), the buffer is allocated once, and a second pass
 * writes, checking strings for UTF-8 as it copies them.
 * proto3 rules: scalars at their default are left out, except inside the
 * AnyValue oneof, where the chosen member is always written.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_export.h"
#include "text.h"

enum wire_type
{
	WIRE_VARINT = 0,
	WIRE_FIXED64 = 1,
	WIRE_LEN = 2,
	WIRE_FIXED32 = 5,
};

/* Field numbers, by message. */
enum
{
	REQUEST_RESOURCE_SPANS = 1,
	RESOURCE_SPANS_RESOURCE = 1,
	RESOURCE_SPANS_SCOPE_SPANS = 2,
	RESOURCE_ATTRIBUTES = 1,
	SCOPE_SPANS_SCOPE = 1,
	SCOPE_SPANS_SPANS = 2,
	SCOPE_NAME = 1,
	SCOPE_VERSION = 2,
	SPAN_TRACE_ID = 1,
	SPAN_SPAN_ID = 2,
	SPAN_TRACE_STATE = 3,
	SPAN_PARENT_SPAN_ID = 4,
	SPAN_NAME = 5,
	SPAN_KIND = 6,
	SPAN_START = 7,
	SPAN_END = 8,
	SPAN_ATTRIBUTES = 9,
	SPAN_STATUS = 15,
	SPAN_FLAGS = 16,
	STATUS_MESSAGE = 2,
	STATUS_CODE = 3,
	KEY_VALUE_KEY = 1,
	KEY_VALUE_VALUE = 2,
	ANY_STRING = 1,
	ANY_BOOL = 2,
	ANY_INT = 3,
	ANY_DOUBLE = 4,
};

/* ---- sizes ---- */

static size_t
varint_size(uint64_t v)
{
	size_t		n = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		n++;
	}
	return n;
}

static size_t
tag_size(unsigned field)
{
	return varint_size((uint64_t) field << 3);
}

/* A length-delimited field whose body is len bytes. */
static size_t
len_field_size(unsigned field, size_t len)
{
	return tag_size(field) + varint_size(len) + len;
}

/*
 * The lengths of a span's strings, given or measured, found by the size
 * pass in this order and reused by the write pass: name, status message,
 * trace state, then key and value (0 unless a string) of each attribute.
 */
#define SPAN_FIXED_LENGTHS 3

/* OTLP's span flags: the W3C trace flags, then whether the parent is remote, when known. */
#define SPAN_FLAGS_HAS_IS_REMOTE 0x100
#define SPAN_FLAGS_IS_REMOTE 0x200

static uint32_t
span_flags(const tp_span *span)
{
	uint32_t	flags = span->context.flags;

	if (span->parent_place != TP_PARENT_UNKNOWN)
		flags |= SPAN_FLAGS_HAS_IS_REMOTE;
	if (span->parent_place == TP_PARENT_REMOTE)
		flags |= SPAN_FLAGS_IS_REMOTE;
	return flags;
}

static size_t
span_length_count(const tp_span *span)
{
	return SPAN_FIXED_LENGTHS + 2 * span->attr_count;
}

/* A string's length: none for NULL, else known (not 0) or measured. */
static size_t
length_of(const char *s, uint32_t known)
{
	return s == NULL ? 0 : known != 0 ? known : strlen(s);
}

static size_t
any_value_size(const tp_attr *attr, size_t value_len)
{
	switch (attr->type)
	{
		case TP_ATTR_STRING:
			return len_field_size(ANY_STRING, value_len);
		case TP_ATTR_INT:
			return tag_size(ANY_INT) + varint_size((uint64_t) attr->value.i);
		case TP_ATTR_DOUBLE:
			return tag_size(ANY_DOUBLE) + 8;
		case TP_ATTR_BOOL:
			return tag_size(ANY_BOOL) + 1;
	}
	return 0;
}

static size_t
key_value_size(size_t key_len, size_t value_size)
{
	return len_field_size(KEY_VALUE_KEY, key_len) + len_field_size(KEY_VALUE_VALUE, value_size);
}

/*
 * Resource attributes are strings, but for process.pid, which the semantic
 * conventions type as an int: a decimal one goes as an int.
 */
static tp_attr
resource_attr(const tp_kv *kv)
{
	tp_attr		attr = {.key = kv->key, .type = TP_ATTR_STRING, .value.s = kv->value};
	char	   *end;
	long long	pid;

	if (strcmp(kv->key, "process.pid") == 0 && kv->value[0] >= '0' && kv->value[0] <= '9')
	{
		errno = 0;
		pid = strtoll(kv->value, &end, 10);
		if (*end == '\0' && errno == 0)
		{
			attr.type = TP_ATTR_INT;
			attr.value.i = pid;
		}
	}
	return attr;
}

static size_t
status_size(const tp_span *span, size_t message_len)
{
	size_t		size = tag_size(STATUS_CODE) + varint_size((uint64_t) span->status);

	if (message_len > 0)
		size += len_field_size(STATUS_MESSAGE, message_len);
	return size;
}

/* The span's size; fills lens (span_length_count() entries). */
static size_t
span_size(const tp_span *span, size_t *lens)
{
	size_t		size = len_field_size(SPAN_TRACE_ID, TP_TRACE_ID_BYTES) +
		len_field_size(SPAN_SPAN_ID, TP_SPAN_ID_BYTES);

	lens[0] = length_of(span->name, span->name_len);
	lens[1] = span->status != TP_STATUS_UNSET ? length_of(span->status_message, span->status_message_len) : 0;
	lens[2] = length_of(span->trace_state, span->trace_state_len);
	if (lens[2] > 0)
		size += len_field_size(SPAN_TRACE_STATE, lens[2]);
	if (!tp_id_is_zero(span->parent_span_id, TP_SPAN_ID_BYTES))
		size += len_field_size(SPAN_PARENT_SPAN_ID, TP_SPAN_ID_BYTES);
	if (lens[0] > 0)
		size += len_field_size(SPAN_NAME, lens[0]);
	if (span->kind != 0)
		size += tag_size(SPAN_KIND) + varint_size((uint64_t) span->kind);
	if (span->start_unix_ns != 0)
		size += tag_size(SPAN_START) + 8;
	if (span->end_unix_ns != 0)
		size += tag_size(SPAN_END) + 8;
	for (size_t i = 0; i < span->attr_count; i++)
	{
		const tp_attr *attr = &span->attrs[i];
		size_t	   *key_len = &lens[SPAN_FIXED_LENGTHS + 2 * i];

		key_len[0] = length_of(attr->key, attr->key_len);
		key_len[1] = attr->type != TP_ATTR_STRING ? 0 : length_of(attr->value.s, attr->value_len);
		size += len_field_size(SPAN_ATTRIBUTES,
							   key_value_size(key_len[0], any_value_size(attr, key_len[1])));
	}
	if (span->status != TP_STATUS_UNSET)
		size += len_field_size(SPAN_STATUS, status_size(span, lens[1]));
	if (span_flags(span) != 0)
		size += tag_size(SPAN_FLAGS) + 4;
	return size;
}

static size_t
scope_size(const char *name, const char *version)
{
	size_t		size = 0;

	if (name != NULL && name[0] != '\0')
		size += len_field_size(SCOPE_NAME, strlen(name));
	if (version != NULL && version[0] != '\0')
		size += len_field_size(SCOPE_VERSION, strlen(version));
	return size;
}

/* ---- writers: each returns the position after what it wrote ---- */

static uint8_t *
put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80)
	{
		*p++ = (uint8_t) (v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t) v;
	return p;
}

static uint8_t *
put_tag(uint8_t *p, unsigned field, enum wire_type wire)
{
	return put_varint(p, ((uint64_t) field << 3) | wire);
}

/* The tag and length of a length-delimited field; its body follows. */
static uint8_t *
put_len(uint8_t *p, unsigned field, size_t len)
{
	return put_varint(put_tag(p, field, WIRE_LEN), len);
}

static uint8_t *
put_bytes(uint8_t *p, unsigned field, const void *data, size_t len)
{
	p = put_len(p, field, len);
	memcpy(p, data, len);
	return p + len;
}

/*
 * Copy len bytes to out and say whether all were ASCII, in one pass and no
 * libc call: most strings here are a few dozen bytes, where memcpy's
 * dispatch and a second pass to check them cost more than the copy.  The
 * ends are copied as words that may overlap the middle, not byte by byte.
 */
static bool
copy_ascii(uint8_t *out, const char *s, size_t len)
{
	uint64_t	high = 0;
	uint64_t	word;
	uint32_t	half;

	if (len >= sizeof(word))
	{
		for (size_t i = 0; i + sizeof(word) < len; i += sizeof(word))
		{
			memcpy(&word, s + i, sizeof(word));
			memcpy(out + i, &word, sizeof(word));
			high |= word;
		}
		memcpy(&word, s + len - sizeof(word), sizeof(word));
		memcpy(out + len - sizeof(word), &word, sizeof(word));
		high |= word;
	}
	else if (len >= sizeof(half))
	{
		memcpy(&half, s, sizeof(half));
		memcpy(out, &half, sizeof(half));
		high = half;
		memcpy(&half, s + len - sizeof(half), sizeof(half));
		memcpy(out + len - sizeof(half), &half, sizeof(half));
		high |= half;
	}
	else if (len > 0)
	{
		/* 1 to 3 bytes: these three places cover them all */
		out[0] = (uint8_t) s[0];
		out[len / 2] = (uint8_t) s[len / 2];
		out[len - 1] = (uint8_t) s[len - 1];
		high = (uint8_t) (s[0] | s[len / 2] | s[len - 1]);
	}
	return (high & UINT64_C(0x8080808080808080)) == 0;
}

/*
 * A string field: protobuf strings must be UTF-8, and a receiver that checks
 * (protoc, Go's protobuf) refuses the whole request for one bad byte, such
 * as a file name or a server message in Latin-1.  Each byte of no valid
 * sequence becomes '?', which keeps the length the size pass used.
 * Nearly every string is ASCII, which the copy itself tells: only other
 * strings are read back.
 */
static uint8_t *
put_string(uint8_t *p, unsigned field, const char *s, size_t len)
{
	uint8_t    *text;

	p = put_len(p, field, len);
	text = p;
	if (copy_ascii(text, s, len))
		return p + len;
	for (size_t i = 0; i < len;)
	{
		size_t		n;

		if (text[i] < 0x80)
		{
			i++;
			continue;
		}
		n = tp_utf8_char_length(text + i, len - i);
		if (n == 0)
		{
			text[i++] = '?';
			continue;
		}
		i += n;
	}
	return p + len;
}

static uint8_t *
put_fixed(uint8_t *p, unsigned field, uint64_t v, int bytes)
{
	p = put_tag(p, field, bytes == 8 ? WIRE_FIXED64 : WIRE_FIXED32);
	for (int i = 0; i < bytes; i++)
		*p++ = (uint8_t) (v >> (8 * i));	/* little-endian */
	return p;
}

static uint8_t *
put_attr(uint8_t *p, unsigned field, const tp_attr *attr, size_t key_len, size_t value_len)
{
	size_t		value_size = any_value_size(attr, value_len);
	uint64_t	bits;

	p = put_len(p, field, key_value_size(key_len, value_size));
	p = put_string(p, KEY_VALUE_KEY, attr->key, key_len);
	p = put_len(p, KEY_VALUE_VALUE, value_size);
	switch (attr->type)
	{
		case TP_ATTR_STRING:
			return put_string(p, ANY_STRING, attr->value.s, value_len);
		case TP_ATTR_INT:
			return put_varint(put_tag(p, ANY_INT, WIRE_VARINT), (uint64_t) attr->value.i);
		case TP_ATTR_DOUBLE:
			memcpy(&bits, &attr->value.d, sizeof(bits));
			return put_fixed(p, ANY_DOUBLE, bits, 8);
		case TP_ATTR_BOOL:
			return put_varint(put_tag(p, ANY_BOOL, WIRE_VARINT), attr->value.b ? 1 : 0);
	}
	return p;
}

/* A resource attribute: measured as it is written (a few per request). */
static size_t
resource_attr_size(const tp_kv *kv)
{
	tp_attr		attr = resource_attr(kv);

	return key_value_size(strlen(kv->key), any_value_size(&attr, strlen(kv->value)));
}

static uint8_t *
put_resource_attr(uint8_t *p, const tp_kv *kv)
{
	tp_attr		attr = resource_attr(kv);

	return put_attr(p, RESOURCE_ATTRIBUTES, &attr, strlen(kv->key), strlen(kv->value));
}

static uint8_t *
put_span(uint8_t *p, const tp_span *span, size_t size, const size_t *lens)
{
	p = put_len(p, SCOPE_SPANS_SPANS, size);
	p = put_bytes(p, SPAN_TRACE_ID, span->context.trace_id, TP_TRACE_ID_BYTES);
	p = put_bytes(p, SPAN_SPAN_ID, span->context.span_id, TP_SPAN_ID_BYTES);
	if (lens[2] > 0)
		p = put_string(p, SPAN_TRACE_STATE, span->trace_state, lens[2]);
	if (!tp_id_is_zero(span->parent_span_id, TP_SPAN_ID_BYTES))
		p = put_bytes(p, SPAN_PARENT_SPAN_ID, span->parent_span_id, TP_SPAN_ID_BYTES);
	if (lens[0] > 0)
		p = put_string(p, SPAN_NAME, span->name, lens[0]);
	if (span->kind != 0)
		p = put_varint(put_tag(p, SPAN_KIND, WIRE_VARINT), (uint64_t) span->kind);
	if (span->start_unix_ns != 0)
		p = put_fixed(p, SPAN_START, span->start_unix_ns, 8);
	if (span->end_unix_ns != 0)
		p = put_fixed(p, SPAN_END, span->end_unix_ns, 8);
	for (size_t i = 0; i < span->attr_count; i++)
		p = put_attr(p, SPAN_ATTRIBUTES, &span->attrs[i], lens[SPAN_FIXED_LENGTHS + 2 * i],
					 lens[SPAN_FIXED_LENGTHS + 2 * i + 1]);
	if (span->status != TP_STATUS_UNSET)
	{
		p = put_len(p, SPAN_STATUS, status_size(span, lens[1]));
		if (lens[1] > 0)
			p = put_string(p, STATUS_MESSAGE, span->status_message, lens[1]);
		p = put_varint(put_tag(p, STATUS_CODE, WIRE_VARINT), (uint64_t) span->status);
	}
	if (span_flags(span) != 0)
		p = put_fixed(p, SPAN_FLAGS, span_flags(span), 4);
	return p;
}

uint8_t *
tp_otlp_encode_traces(const tp_kvlist *resource_attrs,
					  const char *scope_name, const char *scope_version,
					  tp_span *const *spans, size_t count, size_t *out_len)
{
	size_t		length_count = 0;
	size_t	   *span_sizes;
	size_t	   *lens;
	size_t		resource = 0;
	size_t		scope = scope_size(scope_name, scope_version);
	size_t		scope_spans;
	size_t		resource_spans;
	size_t		total;
	uint8_t    *out;
	uint8_t    *p;

	for (size_t i = 0; i < count; i++)
		length_count += span_length_count(spans[i]);
	span_sizes = malloc((count + length_count + 1) * sizeof(size_t));
	if (span_sizes == NULL)
		return NULL;
	lens = span_sizes + count;

	for (size_t i = 0; i < resource_attrs->count; i++)
		resource += len_field_size(RESOURCE_ATTRIBUTES, resource_attr_size(&resource_attrs->items[i]));
	scope_spans = len_field_size(SCOPE_SPANS_SCOPE, scope);
	for (size_t i = 0, at = 0; i < count; at += span_length_count(spans[i]), i++)
	{
		span_sizes[i] = span_size(spans[i], lens + at);
		scope_spans += len_field_size(SCOPE_SPANS_SPANS, span_sizes[i]);
	}
	resource_spans = len_field_size(RESOURCE_SPANS_RESOURCE, resource) +
		len_field_size(RESOURCE_SPANS_SCOPE_SPANS, scope_spans);
	total = len_field_size(REQUEST_RESOURCE_SPANS, resource_spans);

	out = malloc(total);
	if (out == NULL)
	{
		free(span_sizes);
		return NULL;
	}
	p = put_len(out, REQUEST_RESOURCE_SPANS, resource_spans);
	p = put_len(p, RESOURCE_SPANS_RESOURCE, resource);
	for (size_t i = 0; i < resource_attrs->count; i++)
		p = put_resource_attr(p, &resource_attrs->items[i]);
	p = put_len(p, RESOURCE_SPANS_SCOPE_SPANS, scope_spans);
	p = put_len(p, SCOPE_SPANS_SCOPE, scope);
	if (scope_name != NULL && scope_name[0] != '\0')
		p = put_string(p, SCOPE_NAME, scope_name, strlen(scope_name));
	if (scope_version != NULL && scope_version[0] != '\0')
		p = put_string(p, SCOPE_VERSION, scope_version, strlen(scope_version));
	for (size_t i = 0, at = 0; i < count; at += span_length_count(spans[i]), i++)
		p = put_span(p, spans[i], span_sizes[i], lens + at);
	free(span_sizes);
	*out_len = (size_t) (p - out);
	assert(*out_len == total);	/* each size function matches its writer */
	return out;
}
