/*
 * sampler.h - a CPU (or wall-clock) stack sampler for one thread.
 *
 * A POSIX timer on the thread's own CPU clock (or CLOCK_MONOTONIC in wall
 * mode) delivers TP_SAMPLER_SIGNAL to that thread.  The signal handler
 * copies the interrupted call stack (frame-pointer walk, every read
 * bounds-checked against the thread's stack) and the labels current at
 * that instant into a preallocated ring; nothing in the handler allocates,
 * locks or prints.
 * The host drains the ring outside the handler (tp_sampler_drain) and
 * symbolizes there (symbols.h).
 *
 * One sampler per process (it owns its signal); it samples the thread that
 * called tp_sampler_start().  Timers are not inherited across fork: a
 * forked child (a PostgreSQL backend) starts its own.
 */
#ifndef TP_SAMPLER_H
#define TP_SAMPLER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stack_walk.h"
#include "trace_context.h"

/*
 * SIGWINCH, not SIGPROF: code running in the process may use SIGPROF
 * itself (a Python profiler in PL/Python), and may set every signal back to
 * its default (PL/Perl's "local %SIG").  SIGPROF's default, and a real-time
 * signal's, ends the process at our timer's next expiry; SIGWINCH's is to
 * ignore it, and no server or terminal-less program uses it.  A handler
 * reset so is put back by tp_sampler_keep_handler().  (gdb passes it
 * silently by default.)
 */
#define TP_SAMPLER_SIGNAL SIGWINCH

#define TP_SAMPLER_MAX_FRAMES 64
#define TP_SAMPLER_MAX_HZ 250	/* the kernel checks CPU timers on its 250 Hz tick */

typedef enum tp_sampler_clock
{
	TP_SAMPLER_CPU,				/* the thread's CPU time */
	TP_SAMPLER_WALL,			/* elapsed time, also while blocked */
} tp_sampler_clock;

/* Labels attached to every sample taken while they are current. */
typedef struct tp_sample_labels
{
	uint8_t		trace_id[TP_TRACE_ID_BYTES];	/* all zero: none */
	uint8_t		span_id[TP_SPAN_ID_BYTES];
	uint32_t	span_name_id;	/* host-defined, 0: none */
	uint32_t	wait_event;		/* host-defined (wall mode), 0: none */
} tp_sample_labels;

typedef struct tp_sample
{
	tp_sample_labels labels;
	uint32_t	weight;			/* 1 + timer overruns */
	uint32_t	depth;			/* frames in pcs; at most
								 * TP_SAMPLER_MAX_FRAMES - 1 with a wait
								 * event, whose leaf frame the host adds */
	bool		truncated;		/* deeper than that: the outermost frames
								 * are missing */
	uint64_t	time_ns;		/* CLOCK_REALTIME when taken */
	uintptr_t	pcs[TP_SAMPLER_MAX_FRAMES];	/* pcs[0]: the interrupted
											 * PC; then return addresses */
} tp_sample;

typedef struct tp_sampler_stats
{
	uint64_t	samples;		/* stored in the ring */
	uint64_t	waiting;		/* stored, not drained yet */
	uint64_t	dropped;		/* periods lost with the ring full: the
								 * weight (1 + overruns) of each signal
								 * dropped, as a kept sample would weigh */
	uint64_t	truncated;		/* stacks cut at their outermost frames:
								 * deeper than sample.depth's limit */
	uint64_t	process_reads;	/* of the stack bounds, objects and tables,
								 * in this process and its parents */
	uint64_t	handed_off;		/* stacks libunwind took out of code without
								 * frame pointers, and frame pointers took
								 * from there to the root */
} tp_sampler_stats;

/*
 * Read ahead what a start needs to know of the process: the calling
 * thread's stack bounds, the loaded objects and their unwind tables (~0.7
 * ms in a PostgreSQL backend, most of it glibc reading /proc/self/maps for
 * the main thread's stack).  For a parent that forks the processes to
 * sample, from the thread that forks them: a child's first start then only
 * checks whether objects were loaded since.  Not while the sampler runs.
 */
void		tp_sampler_prepare(void);

/*
 * Arm the timer for the calling thread at hz samples per second (1 ..
 * TP_SAMPLER_MAX_HZ), keeping up to capacity samples between drains.
 * Memory is allocated here, never in the handler.  False with a message in
 * err when the timer or signal handler cannot be set up.
 */
bool		tp_sampler_start(int hz, tp_sampler_clock clock, size_t capacity,
							 char *err, size_t errlen);

/*
 * Stop recording samples (they stay in the ring until drained).  No system
 * call: the timer's next expiry disarms it, so a paused idle thread costs
 * at most one signal.
 */
void		tp_sampler_pause(void);

/*
 * Record again after tp_sampler_pause(); no system call while the timer
 * still runs, for "sample only while traced" around every statement.
 */
void		tp_sampler_resume(void);

/*
 * In wall mode, after an expiry found the host idle
 * (tp_sampler_set_idle_source), the timer stops until this is called: an
 * idle session gets no signals.  No system call while the timer runs.
 * Call it as soon as the host has work again.
 */
void		tp_sampler_wake(void);

/*
 * Put our signal handler back if code in the process replaced it, and
 * unblock our signal if it blocked it, counting what it held back as
 * dropped (system calls: call it now and then, not at every statement).
 */
void		tp_sampler_keep_handler(void);

/* Disarm, restore the signal's previous disposition and free the ring. */
void		tp_sampler_stop(void);

/*
 * Make labels current for samples taken from now on.  Call it from the
 * sampled thread, not from a signal handler; the sampler's handler may
 * interrupt it at any instant and reads whole labels.
 */
void		tp_sampler_set_labels(const tp_sample_labels *labels);

/*
 * Read *source (e.g. PostgreSQL's wait-event word of the backend) into
 * labels.wait_event of every sample, at the instant it is taken; NULL stops.
 * The word must stay readable for as long as the sampler runs.  A sample
 * with a wait event keeps at most TP_SAMPLER_MAX_FRAMES - 1 frames (a
 * deeper stack counts in stats.truncated), so that the host's wait-event
 * leaf and the stack fit TP_SAMPLER_MAX_FRAMES together.
 */
void		tp_sampler_set_wait_source(const volatile uint32_t *source);

/*
 * Take no sample while *state (e.g. PostgreSQL's activity state of the
 * backend) is a value whose bit is set in idle_mask: an idle host's wall
 * time is nobody's, and is neither sampled nor counted as dropped.  NULL
 * stops; the word must stay readable for as long as the sampler runs.
 */
void		tp_sampler_set_idle_source(const volatile int *state, uint32_t idle_mask);

/*
 * Read the loaded objects again now if any were loaded or unloaded since
 * they were read (the drain does it too, but only at its next call).  A
 * backend's first JIT compile loads libLLVM, which keeps no frame pointers:
 * until its object is known, the samples taken while LLVM compiles lose
 * their callers.  ~20 ns when nothing was loaded.  Not for the handler.
 */
void		tp_sampler_notice_loads(void);

/*
 * The sampled thread's stack bounds, read at start (or by
 * tp_sampler_prepare): for walks of that thread's own stack outside the
 * handler.  False when the sampler is not started.
 */
bool		tp_sampler_stack_bounds(tp_stack_bounds *bounds);

/* Call fn for each sample taken since the last drain, oldest first. */
typedef void (*tp_sample_fn) (const tp_sample *sample, void *arg);
size_t		tp_sampler_drain(tp_sample_fn fn, void *arg);

void		tp_sampler_get_stats(tp_sampler_stats *stats);

#endif
