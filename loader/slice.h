/*
 * slice.h - a borrowed byte range: pointer and length, never NUL-terminated.
 *
 * The loader passes field values around as slices of its input buffer (or
 * of the reader's scratch area for decoded strings) so that a value is
 * copied once, into the COPY buffer.
 */
#ifndef LD_SLICE_H
#define LD_SLICE_H

#include <stddef.h>

typedef struct ld_slice
{
	const char *ptr;
	size_t		len;
} ld_slice;

#endif
