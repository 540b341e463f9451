/*
 * stop_signal.c - SIGINT and SIGTERM as a flag and a self-pipe.
 */
#include "stop_signal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

volatile sig_atomic_t ld_stop_requested;
volatile sig_atomic_t ld_final_stop_requested;

static int	stop_pipe[2] = {-1, -1};
static volatile sig_atomic_t final_phase;

static void
on_stop_signal(int signo)
{
	int			saved_errno = errno;

	(void) signo;
	ld_stop_requested = 1;
	if (final_phase)
		ld_final_stop_requested = 1;
	if (stop_pipe[1] >= 0)
	{
		/* non-blocking: a full pipe means a byte is there already */
		ssize_t		n = write(stop_pipe[1], "", 1);

		(void) n;
	}
	errno = saved_errno;
}

static void
install_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sa.sa_flags = SA_RESETHAND; /* a second signal kills at once */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

bool
ld_stop_install(void)
{
	bool		ok = pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) == 0;

	if (!ok)
		stop_pipe[0] = stop_pipe[1] = -1;
	install_handler();
	return ok;
}

void
ld_stop_final_phase(void)
{
	/*
	 * Armed again: a signal that interrupted the run reset the handler
	 * (SA_RESETHAND).  That one set only ld_stop_requested, so the spans
	 * that tell of the interruption still go.
	 */
	final_phase = 1;
	install_handler();
}

int
ld_stop_fd(void)
{
	return stop_pipe[0];
}
