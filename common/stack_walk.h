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

/*
 * JIT code (PostgreSQL's LLVM-compiled expressions) lies outside every
 * loaded object, keeps no frame pointer and has no unwind table: while it
 * runs, the frame register holds its caller's frame (the walk then skips
 * that caller, ExecAgg under an expression) or whatever the code keeps in
 * it (the walk ends there).  Its caller is found on the stack instead: the
 * first word above the JIT frames that returns into code with frame
 * pointers right after an indirect call (code is only ever entered through
 * a function pointer; a word left by an older direct call is no match).
 * The walk goes on from that caller's frame record: the frame register if
 * it lies above that return address, else the copy the JIT code's prologue
 * pushed below it.  Only code with frame pointers (the main program, this
 * library: never unloaded) is read; the stack reads are bounds-checked as
 * in the plain walk.  JIT code called by JIT code (deform called from
 * evalexpr) keeps its caller too: between the JIT frame and the JIT
 * code's caller, a word within 1 MiB of that frame, outside every object,
 * that follows a call into it (a direct call of a function starting at or
 * below it, or a call through a register) is the outer JIT frame's return
 * address; up to 4 levels.  The code before such a word is read only on
 * the page of the JIT frame's own address, else through process_vm_readv
 * (never a fault).  x86_64 only; elsewhere the walks are the plain one.
 */

/* Executable segments of the loaded objects, readable inside a handler. */
#define TP_CODE_MAP_MAX 256

#define TP_CODE_MAP_FRAMED 4

/* Objects of the loader's list the map remembers (see tp_code_map_same_objects). */
#define TP_CODE_MAP_OBJECTS 256

typedef struct tp_code_map
{
	/* Code with frame pointers, [0] the main program's (most frames). */
	int			framed_count;
	uintptr_t	framed_start[TP_CODE_MAP_FRAMED];
	uintptr_t	framed_end[TP_CODE_MAP_FRAMED];
	/* The C library's code: the outermost frames of every stack. */
	uintptr_t	libc_start;
	uintptr_t	libc_end;
	int			count;			/* 0: not read, nothing counts as JIT code */
	bool		complete;		/* false: more segments than room */
	unsigned long long adds;	/* dl_iterate_phdr's load/unload counters */
	unsigned long long subs;
	int			objects;		/* in the loader's list (_r_debug) then */
	/*
	 * The loader's list (_r_debug.r_map) when the map was read, to tell in
	 * a handler whether any object was unloaded since (tp_code_map_same_objects):
	 * -1 when unknown (more objects than room, or not read).
	 */
	int			known_objects;
	struct
	{
		const void *node;		/* its struct link_map */
		uintptr_t	addr;		/* l_addr */
		const void *ld;			/* l_ld */
		const unsigned char *id_at; /* its build id in memory, NULL: none checked */
		unsigned char id[32];	/* the build id then */
		int			id_len;
	}			known[TP_CODE_MAP_OBJECTS];
	uintptr_t	start[TP_CODE_MAP_MAX]; /* sorted */
	uintptr_t	end[TP_CODE_MAP_MAX];
	uintptr_t	eh_frame_hdr[TP_CODE_MAP_MAX];	/* its object's, 0: none */
	bool		unwinds[TP_CODE_MAP_MAX];	/* libunwind has its table (dwarf_unwind.c) */
} tp_code_map;

/* Read the map (not async-signal-safe: dl_iterate_phdr). */
void		tp_code_map_read(tp_code_map *map);

/* Were objects loaded or unloaded since the map was read? */
bool		tp_code_map_changed(const tp_code_map *map);

/*
 * Are the objects the map was read with all still loaded: does the
 * loader's list start with the same nodes in the same order, each at the
 * same load address and dynamic section, with the same build id in its
 * first page, and no unload under way?  Objects loaded since (appended)
 * do not matter.  False also when the map remembers no list.  An
 * object unloaded since (dlclose), even with another loaded in its place,
 * fails it: its unwind table, still offered to libunwind until the
 * next drain, may point at memory unmapped or another object's.
 * Async-signal-safe: reads the list as debuggers do, without its lock
 * (sound for the thread that loads and unloads, i.e. a backend's only
 * one; another thread could unload between this check and its use).
 */
bool		tp_code_map_same_objects(const tp_code_map *map);

/* Is pc in no loaded object (JIT code)?  Async-signal-safe. */
bool		tp_code_map_outside(const tp_code_map *map, uintptr_t pc);

/*
 * Is pc in code that keeps frame pointers (the main program, this
 * library), elsewhere libunwind's to unwind?  Async-signal-safe.
 */
bool		tp_code_map_framed(const tp_code_map *map, uintptr_t pc);

/* The index of the segment holding pc, -1: none.  Async-signal-safe. */
int			tp_code_map_find(const tp_code_map *map, uintptr_t pc);

/*
 * Does the map still list every loaded object (nothing loaded or unloaded
 * since, no load under way)?  Async-signal-safe: reads the loader's list
 * as debuggers do, without its lock.
 */
bool		tp_code_map_current(const tp_code_map *map);

/*
 * tp_stack_walk that steps over JIT frames met on the chain (a return
 * address outside every object of map): their callers are inserted, and
 * bit i of *inserted set for each pcs[i] so found.  Async-signal-safe.
 */
int			tp_stack_walk_code(const tp_stack_regs *regs, const tp_stack_bounds *bounds,
							   const tp_code_map *map, uintptr_t *pcs, int max,
							   bool *truncated, uint64_t *inserted);

/*
 * The walk from JIT code: regs->pc in it, regs->sp and regs->fp its stack
 * pointer and frame register (those of the signal, or of the frame an
 * unwinder reached).  pcs[0] = regs->pc, pcs[1] its caller found on the
 * stack (bit 1 of *inserted), then that caller's chain as
 * tp_stack_walk_code follows it.  Async-signal-safe.
 */
int			tp_stack_walk_jit(const tp_stack_regs *regs, const tp_stack_bounds *bounds,
							  const tp_code_map *map, uintptr_t *pcs, int max,
							  bool *truncated, uint64_t *inserted);

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

/*
 * Is pc in a loaded object's code, as of the last tp_leaf_repair_refresh?
 * (A frame the handler took for JIT code with a map read before a dlopen.)
 */
bool		tp_leaf_repair_in_object(const tp_leaf_repair *repair, uintptr_t pc);

void		tp_leaf_repair_free(tp_leaf_repair *repair);

#endif
