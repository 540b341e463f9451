/*
 * stop_signal.h - SIGINT and SIGTERM as a flag and a descriptor to wait on.
 *
 * A flag alone leaves a window: a signal that lands between the check of
 * the flag and a blocking read() is handled, and the read() still waits
 * for data that may never come.  So the handler also writes a byte into a
 * pipe, and waits poll() its read end next to their own descriptor: it is
 * readable from the moment a signal came, before or during the wait, and
 * whichever thread (the profiler's, libcurl's) ran the handler.
 */
#ifndef LD_STOP_SIGNAL_H
#define LD_STOP_SIGNAL_H

#include <signal.h>
#include <stdbool.h>

/* Set by the first SIGINT or SIGTERM. */
extern volatile sig_atomic_t ld_stop_requested;

/*
 * Create the pipe and install the handler (a second signal kills at once).
 * False if the pipe cannot be made (the flag still works then, without the
 * descriptor).
 */
bool		ld_stop_install(void);

/* The pipe's read end (readable once a signal came), or -1. */
int			ld_stop_fd(void);

/*
 * Set by a SIGINT or SIGTERM that comes after ld_stop_final_phase(): the
 * run is over and only its telemetry is being sent, which it cuts short.
 */
extern volatile sig_atomic_t ld_final_stop_requested;

/*
 * The run is over (connected or not): from here on, the first SIGINT or
 * SIGTERM sets ld_final_stop_requested, even
 * when one already interrupted the run; the next one kills at once.
 */
void		ld_stop_final_phase(void);

#endif
