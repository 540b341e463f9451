/* span.c - span attributes and status. */
#include "span.h"

#include <stdlib.h>
#include <string.h>

static void
free_value(tp_attr *attr)
{
	if (attr->type == TP_ATTR_STRING)
		free(attr->value.s);
}

/*
 * The slot for key: the existing one (its old value freed) or a new one.
 * NULL when memory runs out; the attribute is then dropped, since telemetry
 * must never take the program down.
 */
static tp_attr *
slot_for(tp_span *span, const char *key)
{
	for (size_t i = 0; i < span->attr_count; i++)
	{
		if (strcmp(span->attrs[i].key, key) == 0)
		{
			free_value(&span->attrs[i]);
			span->attrs[i].value_len = 0;	/* the new value's is not known */
			return &span->attrs[i];
		}
	}
	if (span->attr_count == span->attr_capacity)
	{
		size_t		capacity = span->attr_capacity ? span->attr_capacity * 2 : 8;
		tp_attr    *grown = realloc(span->attrs, capacity * sizeof(tp_attr));

		if (grown == NULL)
			return NULL;
		span->attrs = grown;
		span->attr_capacity = capacity;
	}

	char	   *key_copy = strdup(key);

	if (key_copy == NULL)
		return NULL;
	span->attrs[span->attr_count].key = key_copy;
	span->attrs[span->attr_count].key_len = 0;
	span->attrs[span->attr_count].value_len = 0;
	return &span->attrs[span->attr_count++];
}

void
tp_span_set_string(tp_span *span, const char *key, const char *value)
{
	tp_attr    *attr = slot_for(span, key);

	if (attr == NULL)
		return;
	attr->type = TP_ATTR_STRING;
	attr->value.s = strdup(value ? value : "");
	if (attr->value.s == NULL)
	{
		attr->type = TP_ATTR_BOOL;	/* keep the slot valid without a string */
		attr->value.b = false;
	}
}

void
tp_span_set_int(tp_span *span, const char *key, int64_t value)
{
	tp_attr    *attr = slot_for(span, key);

	if (attr == NULL)
		return;
	attr->type = TP_ATTR_INT;
	attr->value.i = value;
}

void
tp_span_set_double(tp_span *span, const char *key, double value)
{
	tp_attr    *attr = slot_for(span, key);

	if (attr == NULL)
		return;
	attr->type = TP_ATTR_DOUBLE;
	attr->value.d = value;
}

void
tp_span_set_bool(tp_span *span, const char *key, bool value)
{
	tp_attr    *attr = slot_for(span, key);

	if (attr == NULL)
		return;
	attr->type = TP_ATTR_BOOL;
	attr->value.b = value;
}

void
tp_span_set_error(tp_span *span, const char *message)
{
	free(span->status_message);
	span->status = TP_STATUS_ERROR;
	span->status_message = strdup(message ? message : "");
	span->status_message_len = 0;	/* measured when encoded */
}

void
tp_span_clear(tp_span *span)
{
	for (size_t i = 0; i < span->attr_count; i++)
	{
		free(span->attrs[i].key);
		free_value(&span->attrs[i]);
	}
	free(span->attrs);
	free(span->trace_state);
	free(span->name);
	free(span->status_message);
	memset(span, 0, sizeof(*span));
}
