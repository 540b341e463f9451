/*
 * input.c - file reading and buffer refills for the JSON reader.
 */
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool
ld_input_open(ld_input *in, const char *path)
{
	struct stat st;

	memset(in, 0, sizeof(*in));
	in->name = path;
	in->fd = -1;
	in->stop_fd = -1;
	jr_init(&in->reader);

	/*
	 * O_NONBLOCK: a FIFO's open() would otherwise wait for a writer, deaf to
	 * a signal.  Reads block again (refill() waits in poll() instead).
	 */
	in->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (in->fd < 0 || fcntl(in->fd, F_SETFL, fcntl(in->fd, F_GETFL) & ~O_NONBLOCK) < 0)
	{
		snprintf(in->message, sizeof(in->message), "cannot open %s: %s", path, strerror(errno));
		return false;
	}
	if (fstat(in->fd, &st) == 0)
	{
		if (S_ISDIR(st.st_mode))
		{
			snprintf(in->message, sizeof(in->message), "cannot read %s: it is a directory", path);
			return false;
		}
		if (S_ISREG(st.st_mode))
		{
			in->size_known = true;
			in->size = (uint64_t) st.st_size;
			(void) posix_fadvise(in->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		}
	}
	in->cap = LD_INPUT_BUFFER;
	in->max_cap = in->reader.max_record + LD_INPUT_BUFFER;
	in->buf = malloc(in->cap);
	if (in->buf == NULL)
	{
		in->out_of_memory = true;
		snprintf(in->message, sizeof(in->message), "out of memory");
		return false;
	}
	return true;
}

/* Compact, then read what is there (a pipe may deliver little per read). */
static bool
refill(ld_input *in)
{
	if (in->start > 0)
	{
		memmove(in->buf, in->buf + in->start, in->end - in->start);
		in->end -= in->start;
		in->start = 0;
	}
	if (in->end == in->cap)
	{
		size_t		cap = in->cap * 2 > in->max_cap ? in->max_cap : in->cap * 2;
		char	   *buf;

		if (cap <= in->cap)
		{
			/* cannot happen: the reader refuses records this large */
			snprintf(in->message, sizeof(in->message), "%s: record too large", in->name);
			return false;
		}
		buf = realloc(in->buf, cap);
		if (buf == NULL)
		{
			in->out_of_memory = true;
			snprintf(in->message, sizeof(in->message), "out of memory");
			return false;
		}
		in->buf = buf;
		in->cap = cap;
	}

	/*
	 * One read that returns data is enough: waiting for a full buffer would
	 * keep a slow writer's records (and the open COPY) waiting too.  The
	 * wait is a poll() that also watches in->stop_fd: a signal that lands
	 * after the check of *in->stop makes it readable, where a read() would
	 * sleep on.
	 */
	for (;;)
	{
		struct pollfd fds[2];
		ssize_t		n;

		if (in->stop != NULL && *in->stop)
			break;
		fds[0].fd = in->fd;
		fds[0].events = POLLIN;
		fds[0].revents = 0;
		fds[1].fd = in->stop_fd;	/* poll() skips it when negative */
		fds[1].events = POLLIN;
		fds[1].revents = 0;
		if (poll(fds, 2, -1) < 0)
		{
			if (errno == EINTR)
				continue;
			snprintf(in->message, sizeof(in->message), "cannot read %s: %s", in->name, strerror(errno));
			return false;
		}
		if (fds[1].revents != 0)
			break;
		n = read(in->fd, in->buf + in->end, in->cap - in->end);
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			snprintf(in->message, sizeof(in->message), "cannot read %s: %s", in->name, strerror(errno));
			return false;
		}
		if (n == 0)
			in->eof = true;
		in->end += (size_t) n;
		return true;
	}
	in->interrupted = true;
	snprintf(in->message, sizeof(in->message), "interrupted");
	return false;
}

ld_input_result
ld_input_next(ld_input *in, jr_record *rec)
{
	for (;;)
	{
		size_t		consumed;
		jr_result	res;

		res = jr_next(&in->reader, in->buf + in->start, in->end - in->start,
					  in->eof, &consumed, rec);
		in->start += consumed;
		switch (res)
		{
			case JR_RECORD:
				return LD_INPUT_RECORD;
			case JR_END:
				return LD_INPUT_END;
			case JR_ERROR:
				ld_input_set_record_error(in);
				return LD_INPUT_ERROR;
			case JR_NEED_MORE:
				if (in->eof || !refill(in))
				{
					if (in->eof)
						snprintf(in->message, sizeof(in->message),
								 "%s: internal error: reader wants more input after the end", in->name);
					return LD_INPUT_ERROR;
				}
				break;
		}
	}
}

void
ld_input_set_record_error(ld_input *in)
{
	in->out_of_memory = in->reader.error.out_of_memory;
	if (in->out_of_memory)
		snprintf(in->message, sizeof(in->message), "out of memory");
	else
		jr_format_error(&in->reader.error, in->name, in->message, sizeof(in->message));
}

void
ld_input_close(ld_input *in)
{
	if (in->fd >= 0)
		close(in->fd);
	in->fd = -1;
	free(in->buf);
	in->buf = NULL;
	jr_free(&in->reader);
}
