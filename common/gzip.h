/*
 * gzip.h - whole buffers in and out of gzip (deflate with the gzip header
 * and trailer), as pprof files are.
 */
#ifndef TP_GZIP_H
#define TP_GZIP_H

#include <stddef.h>
#include <stdint.h>

/* in compressed; malloc'd, its length in *outlen; NULL: no memory. */
uint8_t    *tp_gzip(const uint8_t *in, size_t len, size_t *outlen);

/* in decompressed; malloc'd; NULL: not whole gzip data, or no memory. */
uint8_t    *tp_gunzip(const uint8_t *in, size_t len, size_t *outlen);

#endif
