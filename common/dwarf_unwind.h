/*
 * dwarf_unwind.h - the unwinder for stacks the frame-pointer walk cannot
 * follow.
 *
 * PostgreSQL and our own code keep frame pointers, libc and libcrypto do
 * not: a sample taken inside them has a broken chain and loses its
 * callers.  Those samples are unwound with libunwind from the signal
 * context (call-frame information, ~7,000 instructions a sample instead of
 * ~400), the others keep the cheap walk.  libunwind's local unwinding is
 * async-signal-safe.
 */
#ifndef TP_DWARF_UNWIND_H
#define TP_DWARF_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

#include "stack_walk.h"

/*
 * Unwind the interrupted context of a signal handler (its ucontext
 * argument) into pcs: pcs[0] the interrupted PC, then return addresses.
 * Returns the depth, 0 when libunwind cannot start; *truncated when deeper
 * than max.  Async-signal-safe.
 *
 * libunwind has no table for JIT code and guesses its caller from the
 * frame register, which JIT code does not keep: it stops before a frame
 * whose PC is outside every object of map, and leaves that frame's PC, SP
 * and frame register in *rest (rest->pc 0 otherwise) for the frame-pointer
 * walks to go on from: tp_stack_walk_jit if *rest_in_jit (the map is
 * current), tp_stack_walk_code if the frame may be in an object loaded
 * since.  It stops after a frame whose object's table map has not
 * registered (tp_dwarf_register_tables).
 *
 * With hand_off_framed it also stops at the first frame after pcs[0] in
 * code that keeps frame pointers (tp_code_map_framed), leaving it in *rest
 * the same way (*rest_in_jit false): a libunwind step costs two system
 * calls (Debian's build locks its cache, masking signals), a frame-pointer
 * step a few loads.  The frame-pointer walk from there is right only when
 * it stays in such code up to the thread's root: server code called from
 * code without frame pointers (PL/Perl's SPI) cuts the chain; unwind
 * again without the hand-off then.
 */
int			tp_dwarf_unwind(void *ucontext, const tp_code_map *map, uintptr_t *pcs,
							int max, bool *truncated, tp_stack_regs *rest,
							bool *rest_in_jit, bool hand_off_framed);

/*
 * Keep the unwind tables of map's objects where libunwind's lookups (our
 * find_proc_info) find them, so that the handler's unwinding never calls
 * dl_iterate_phdr (see dwarf_unwind.c), and note which in map->unwinds.
 * Call outside the handler, with the signal blocked, after each
 * tp_code_map_read.
 */
void		tp_dwarf_register_tables(tp_code_map *map);

/*
 * The pool of registrations: capacity slots, live ones registered now.
 * A slot of an unloaded object is reused for the next object once no
 * handler can still be reading it (see dwarf_unwind.c).  refused: code
 * segments of the last tp_dwarf_register_tables left without a table for
 * want of a slot (their frames end libunwind's walk); the first time that
 * happens in a process it is also logged (tp_warn).
 */
typedef struct tp_dwarf_stats
{
	int			capacity;
	int			live;
	int			refused;
	unsigned long long registered;	/* registrations ever made */
	unsigned long long reused;	/* of them, into a slot freed before */
	unsigned long stale_skips;	/* samples kept from libunwind: objects
								 * unloaded since the map was read
								 * (tp_code_map_same_objects) */
} tp_dwarf_stats;

void		tp_dwarf_table_stats(tp_dwarf_stats *stats);

/*
 * The handler's side of the pool's grace period: tp_dwarf_unwind calls
 * enter before libunwind reads the tables and exit after.  A slot
 * withdrawn between the two is not reused until exit.  Async-signal-safe
 * (lock-free atomics); exported for tests, which stand for a handler.
 */
void		tp_dwarf_reader_enter(void);
void		tp_dwarf_reader_exit(void);

#endif
