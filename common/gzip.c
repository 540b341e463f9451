/* gzip.c - whole buffers in and out of gzip (see gzip.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gzip.h"

uint8_t *
tp_gzip(const uint8_t *in, size_t len, size_t *outlen)
{
	z_stream	zs;
	uint8_t    *out;
	uLong		bound;

	if (len > UINT_MAX)
		return NULL;
	memset(&zs, 0, sizeof(zs));
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
					 Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	bound = deflateBound(&zs, (uLong) len);
	out = malloc(bound);
	if (out == NULL)
	{
		deflateEnd(&zs);
		return NULL;
	}
	zs.next_in = (Bytef *) in;
	zs.avail_in = (uInt) len;
	zs.next_out = out;
	zs.avail_out = (uInt) bound;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
	{
		deflateEnd(&zs);
		free(out);
		return NULL;
	}
	*outlen = zs.total_out;
	deflateEnd(&zs);
	return out;
}

uint8_t *
tp_gunzip(const uint8_t *in, size_t len, size_t *outlen)
{
	z_stream	zs;
	size_t		cap = len * 4 + 1024;
	uint8_t    *out = malloc(cap);
	int			rc = Z_OK;

	memset(&zs, 0, sizeof(zs));
	if (out == NULL || len > UINT_MAX || inflateInit2(&zs, 15 + 16) != Z_OK)
	{
		free(out);
		return NULL;
	}
	zs.next_in = (Bytef *) in;
	zs.avail_in = (uInt) len;
	while (rc == Z_OK)
	{
		if (zs.total_out == cap)
		{
			uint8_t    *grown = cap < UINT_MAX / 2 ? realloc(out, cap * 2) : NULL;

			if (grown == NULL)
				break;
			out = grown;
			cap *= 2;
		}
		zs.next_out = out + zs.total_out;
		zs.avail_out = (uInt) (cap - zs.total_out);
		rc = inflate(&zs, Z_NO_FLUSH);
	}
	*outlen = zs.total_out;
	inflateEnd(&zs);
	if (rc != Z_STREAM_END)
	{
		free(out);
		return NULL;
	}
	return out;
}
