/*
 * stop_cancel.h - a stop (SIGINT, SIGTERM) cancels the server's statement.
 *
 * The cancel request is sent by a thread of its own, not by the signal
 * handler: PQcancel() connects to the server and waits for it to close that
 * connection, both blocking, so a stalled postmaster or a network that
 * drops packets held the handler, and the stop with it, for as long.
 */
#ifndef LD_STOP_CANCEL_H
#define LD_STOP_CANCEL_H

#include <stdbool.h>

#include <libpq-fe.h>

/*
 * Watch stop_fd (stop_signal.h) for conn's session: once it is readable, a
 * cancel request goes to the server.  False, with nothing started, if the
 * thread or its cancel handle cannot be made.
 */
bool		ld_stop_cancel_start(PGconn *conn, int stop_fd);

/*
 * No cancel from here on.  A request under way gets up to wait_ms to be
 * taken (the postmaster may be slow to answer, or not answer at all);
 * after that the thread is left to it, and frees what it holds when done.
 */
void		ld_stop_cancel_end(int wait_ms);

#endif
