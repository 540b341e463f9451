/*
 * input.h - read order records from a file in constant memory.
 *
 * Owns the file descriptor and the read buffer and drives the JSON
 * reader: when it needs more, the consumed bytes are dropped, the rest is
 * moved to the front and whatever one read returns is added (growing the
 * buffer, up to the record size limit plus one read, only for records that
 * do not fit).
 */
#ifndef LD_INPUT_H
#define LD_INPUT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "json_reader.h"

#define LD_INPUT_BUFFER ((size_t) 1024 * 1024)

typedef enum ld_input_result
{
	LD_INPUT_RECORD,
	LD_INPUT_END,
	LD_INPUT_ERROR,				/* in->message says what */
} ld_input_result;

typedef struct ld_input
{
	const char *name;			/* the path as given, for messages */
	int			fd;
	char	   *buf;
	size_t		cap;
	size_t		max_cap;
	size_t		start;			/* first unconsumed byte */
	size_t		end;			/* end of the bytes read */
	bool		eof;
	bool		size_known;		/* a regular file: size is its length */
	uint64_t	size;
	bool		out_of_memory;
	/* set by a signal handler: a wait for input gives up ... */
	const volatile sig_atomic_t *stop;
	int			stop_fd;		/* ... and this turns readable (or -1) */
	bool		interrupted;	/* the last LD_INPUT_ERROR came from *stop */
	jr_reader	reader;
	char		message[1024];
} ld_input;

/*
 * Open path; false with in->message set ("cannot open x: reason").  Set
 * in->stop and in->stop_fd afterwards to make a signal stop a wait for
 * input (ld_stop_requested, ld_stop_fd()).
 */
bool		ld_input_open(ld_input *in, const char *path);

/*
 * The next record, valid until the next call.  LD_INPUT_ERROR: bad input,
 * a read error, out of memory (in->out_of_memory) or *in->stop set while
 * waiting for input (in->interrupted), in->message set.
 */
ld_input_result ld_input_next(ld_input *in, jr_record *rec);

/* Bytes of the file consumed so far (the position after the last record). */
static inline uint64_t
ld_input_offset(const ld_input *in)
{
	return in->reader.offset;
}

/* After jr_fail_at() on in->reader: format its error into in->message. */
void		ld_input_set_record_error(ld_input *in);

void		ld_input_close(ld_input *in);

#endif
