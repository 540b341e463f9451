/*
 * stack_walk.h - a bounded frame-pointer walk, safe inside a signal handler.
 *
 * Every memory read is checked to lie in the live part of the sampled
 * thread's stack, [interrupted SP, stack high), which is always mapped; the
 * frame chain must grow strictly upwards, so a garbage frame pointer ends
 * the walk instead of faulting or looping.
 *
 * What frame pointers cannot give: when the interrupted PC is in a function
 * without a frame (most of libc and libcrypto on Debian), or in a prologue
 * or epilogue, the frame register still holds the caller's frame, so the
 * walk goes on correctly but skips that caller (pcs[1] is the caller's
 * caller).  Frames of frameless code in the middle of the stack (qsort
 * calling back into the program) are skipped or end the walk.
 */
#ifndef TP_STACK_WALK_H
#define TP_STACK_WALK_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tp_stack_bounds
{
	uintptr_t	low;			/* lowest address of the thread's stack */
	uintptr_t	high;			/* one past its highest address */
} tp_stack_bounds;

/*
 * The calling thread's stack.  Not async-signal-safe (it may read
 * /proc/self/maps); call it once, before sampling.  False (and empty
 * bounds, which make walks record only the PC) when it cannot be found.
 */
bool		tp_stack_bounds_current(tp_stack_bounds *bounds);

/*
 * Walk from explicit registers: pcs[0] = pc, then return addresses.
 * Returns the number of entries written (at most max); *truncated is set
 * when frames remained beyond max.  Async-signal-safe.
 */
int			tp_stack_walk(uintptr_t pc, uintptr_t fp, uintptr_t sp,
						  const tp_stack_bounds *bounds,
						  uintptr_t *pcs, int max, bool *truncated);

/*
 * Walk from the ucontext_t a SA_SIGINFO handler receives.  On
 * architectures without support (not x86_64 or aarch64) returns 0.
 * Async-signal-safe.
 */
int			tp_stack_walk_ucontext(const void *ucontext,
								   const tp_stack_bounds *bounds,
								   uintptr_t *pcs, int max, bool *truncated);

#endif
