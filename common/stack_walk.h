/*
 * stack_walk.h - a bounded frame-pointer walk, safe inside a signal handler,
 * and the repair of frameless leaves outside it.
 *
 * Every memory read of the walk is checked to lie in the live part of the
 * sampled thread's stack, [interrupted SP, stack high), which is always
 * mapped; the frame chain must grow strictly upwards, so a garbage frame
 * pointer ends the walk instead of faulting or looping.
 *
 * What frame pointers alone cannot give: when the interrupted PC is in a
 * function without a frame, or in a prologue or epilogue, the frame
 * register still holds the caller's frame, so the walk goes on correctly
 * but skips that caller (pcs[1] is the caller's caller).  GCC omits the
 * frame of leaf functions that need no stack even with
 * -fno-omit-frame-pointer (PostgreSQL's hash_bytes), and libc has none at
 * all.  So the handler also copies the few words at the top of the stack,
 * and tp_leaf_repair() later finds among them a return address whose call
 * instruction targets the function holding the PC, and inserts it.  Frames
 * of frameless code in the middle of the stack (qsort calling back into
 * the program) are still skipped, or end the walk.
 */
#ifndef TP_STACK_WALK_H
#define TP_STACK_WALK_H

#include <stdbool.h>
#include <stdint.h>

#define TP_STACK_TOP_WORDS 8

typedef struct tp_stack_bounds
{
	uintptr_t	low;			/* lowest address of the thread's stack */
	uintptr_t	high;			/* one past its highest address */
	bool		memcheck;		/* under valgrind's memcheck: annotate raw reads */
} tp_stack_bounds;

typedef struct tp_stack_regs
{
	uintptr_t	pc;
	uintptr_t	fp;
	uintptr_t	sp;
} tp_stack_regs;

/*
 * The calling thread's stack.  Not async-signal-safe (it may read
 * /proc/self/maps); call it once, before sampling.  False (and empty
 * bounds, which make walks record only the PC) when it cannot be found.
 */
bool		tp_stack_bounds_current(tp_stack_bounds *bounds);

/*
 * PC, frame pointer and stack pointer from the ucontext_t a SA_SIGINFO
 * handler receives; false on architectures we do not support (anything
 * but x86_64 and aarch64).  Async-signal-safe.
 */
bool		tp_stack_regs_get(const void *ucontext, tp_stack_regs *regs);

/*
 * Walk: pcs[0] = regs->pc, then return addresses.  Returns the number of
 * entries written (at most max); *truncated is set when frames remained
 * beyond max.  Async-signal-safe.
 */
int			tp_stack_walk(const tp_stack_regs *regs, const tp_stack_bounds *bounds,
						  uintptr_t *pcs, int max, bool *truncated);

/*
 * Copy up to TP_STACK_TOP_WORDS words from the top of the stack (from SP,
 * below the frame pointer's frame) for tp_leaf_repair.  Returns how many.
 * Async-signal-safe.
 */
int			tp_stack_top_words(const tp_stack_regs *regs, const tp_stack_bounds *bounds,
							   uintptr_t *words);

/* Remembers the code ranges of loaded objects and decoded call sites. */
typedef struct tp_leaf_repair tp_leaf_repair;

tp_leaf_repair *tp_leaf_repair_new(void);

/*
 * Read the code ranges of loaded objects (again if dlopen or dlclose ran
 * since).  Call before a batch of tp_leaf_repair_apply.
 */
void		tp_leaf_repair_refresh(tp_leaf_repair *repair);

/*
 * Insert the missing caller of a frameless leaf into pcs (depth entries,
 * room for max) using the words tp_stack_top_words copied at the sample.
 * Returns the new depth.  Not async-signal-safe: it reads code memory of
 * objects that dl_iterate_phdr reports as loaded (x86_64 only; elsewhere
 * it returns depth unchanged).
 */
int			tp_leaf_repair_apply(tp_leaf_repair *repair, uintptr_t *pcs, int depth,
								 int max, const uintptr_t *words, int nwords);

void		tp_leaf_repair_free(tp_leaf_repair *repair);

#endif
