/*
 * stop_cancel.c - the thread that sends a stop's cancel request.
 *
 * Two pipes tie it to the main thread, so that neither frees what the
 * other still uses: the main thread closes the write end of one to say
 * "no cancel any more", the thread closes the write end of the other when
 * it is done.  The thread owns the cancel handle.
 */
#include "stop_cancel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct canceller
{
	PGcancel   *cancel;
	int			stop_fd;
	int			end_fd;			/* read end: closed by the main thread, no cancel */
	int			done_fd;		/* write end: closed when the thread is done */
} canceller;

/* The main thread's ends of the two pipes; -1 when no thread runs. */
static int	end_write_fd = -1;
static int	done_read_fd = -1;

/* The done pipe is closed last: the main thread may exit once it is. */
static void
free_canceller(canceller *c)
{
	int			done_fd = c->done_fd;

	PQfreeCancel(c->cancel);
	close(c->end_fd);
	free(c);
	close(done_fd);
}

static void *
watch_for_stop(void *arg)
{
	canceller  *c = arg;
	struct pollfd fds[2] = {
		{.fd = c->stop_fd, .events = POLLIN},
		{.fd = c->end_fd, .events = POLLIN},
	};

	while (poll(fds, 2, -1) < 0 && errno == EINTR)
		;
	/*
	 * A stop sends the request even when the main thread has already
	 * ended the watch: this thread may wake only after both.
	 */
	if (fds[0].revents != 0)
	{
		char		errbuf[256];

		(void) PQcancel(c->cancel, errbuf, sizeof(errbuf));
	}
	free_canceller(c);
	return NULL;
}

static bool
start_thread(canceller *c)
{
	pthread_t	thread;
	pthread_attr_t attr;
	sigset_t	all,
				old;
	bool		started;

	/* Signals go to the other threads: the new one inherits this mask. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	started = pthread_create(&thread, &attr, watch_for_stop, c) == 0;
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return started;
}

bool
ld_stop_cancel_start(PGconn *conn, int stop_fd)
{
	canceller  *c;
	int			end_pipe[2] = {-1, -1};
	int			done_pipe[2] = {-1, -1};

	if (stop_fd < 0 || end_write_fd >= 0 || (c = calloc(1, sizeof(*c))) == NULL)
		return false;
	c->stop_fd = stop_fd;
	if ((c->cancel = PQgetCancel(conn)) == NULL ||
		pipe2(end_pipe, O_CLOEXEC) != 0 || pipe2(done_pipe, O_CLOEXEC) != 0)
	{
		PQfreeCancel(c->cancel);
		for (int i = 0; i < 2; i++)
		{
			if (end_pipe[i] >= 0)
				close(end_pipe[i]);
		}
		free(c);
		return false;
	}
	c->end_fd = end_pipe[0];
	c->done_fd = done_pipe[1];
	if (!start_thread(c))
	{
		close(end_pipe[1]);
		close(done_pipe[0]);
		free_canceller(c);
		return false;
	}
	end_write_fd = end_pipe[1];
	done_read_fd = done_pipe[0];
	return true;
}

void
ld_stop_cancel_end(int wait_ms)
{
	struct pollfd done = {.fd = done_read_fd, .events = POLLIN};
	struct timespec now;
	int64_t		deadline_ms;

	if (end_write_fd < 0)
		return;
	close(end_write_fd);
	clock_gettime(CLOCK_MONOTONIC, &now);
	deadline_ms = now.tv_sec * 1000 + now.tv_nsec / 1000000 + wait_ms;
	/* POLLHUP once the thread has closed its end (the profiler's signals interrupt) */
	while (poll(&done, 1, wait_ms) < 0 && errno == EINTR)
	{
		clock_gettime(CLOCK_MONOTONIC, &now);
		wait_ms = (int) (deadline_ms - (now.tv_sec * 1000 + now.tv_nsec / 1000000));
		if (wait_ms <= 0)
			break;
	}
	close(done_read_fd);
	end_write_fd = done_read_fd = -1;
}
