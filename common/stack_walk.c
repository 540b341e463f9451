/* stack_walk.c - bounded frame-pointer walk from a signal's ucontext. */
#include "stack_walk.h"

#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "loader_counters.h"

/*
 * The top-of-stack words we copy may never have been written, and code
 * without frame pointers (libcrypto's assembly) leaves anything in the
 * frame-pointer register and so in the "frame records" we follow; telling
 * memcheck that our copies are defined keeps valgrind runs of the host
 * quiet.  The request costs ~15 instructions per frame even natively, so
 * it is made only when memcheck answers it (it returns -1, other tools and
 * native runs 0).
 */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif
#ifndef VALGRIND_MAKE_MEM_DEFINED
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) 0
#endif
#define MARK_DEFINED(bounds, addr, len) \
	do { if ((bounds)->memcheck) (void) VALGRIND_MAKE_MEM_DEFINED(addr, len); } while (0)

/* A word read from the stack, declared defined (a copy: natively it stays in a register). */
static inline uintptr_t
defined_word(const tp_stack_bounds *bounds, uintptr_t word)
{
	MARK_DEFINED(bounds, &word, sizeof(word));
	return word;
}

/*
 * The walk reads stack words that are no C object (saved frame pointers,
 * return addresses, whatever a leaf left below its caller's frame), each
 * bounds-checked against the thread's stack first.  AddressSanitizer
 * poisons the redzones between locals of instrumented frames, so it would
 * report those reads as stack-buffer-underflow: they are exempt from it.
 */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize_address)
#define RAW_STACK_READS __attribute__((no_sanitize_address))
#endif
#endif
#ifndef RAW_STACK_READS
#define RAW_STACK_READS
#endif

/* Return addresses below this are garbage (the first page is never mapped). */
#define MIN_CODE_ADDRESS 4096

/* A PC this far past the start of the function called counts as inside it. */
#define LEAF_SPAN (16 * 1024)

/* Words of the stack searched above JIT code for the return into its caller. */
#define JIT_SCAN_WORDS 512

/* Records of a stale chain followed to the JIT code's true caller. */
#define JIT_CHAIN_STEPS 4

/* JIT functions calling JIT functions recovered between JIT code and its caller. */
#define JIT_NESTED_MAX 4

/* JIT code calls JIT code of its own module: this close to it. */
#define JIT_NEAR ((uintptr_t) 1 << 20)

/*
 * Reads of JIT code per walk (system calls, ~1 us each, in JIT samples
 * only): two a nesting level, the frame's return address and the
 * function's own address a JIT prologue's "push %rax" often leaves.
 */
#define JIT_PROBES 8

/* The smallest page size: an address's 4 KiB block lies in one page. */
#define MIN_PAGE ((uintptr_t) 4096)

/* Decoded call sites remembered (return address -> function called). */
#define SITE_CACHE 1024

/*
 * Fallback when pthread_getattr_np fails: the mapping that holds one of
 * our locals.  A main-thread stack grows down on demand, so the low bound
 * is the stack rlimit below its top when that is known.
 */
static bool
bounds_from_maps(tp_stack_bounds *bounds)
{
	uintptr_t	here = (uintptr_t) __builtin_frame_address(0);
	FILE	   *maps = fopen("/proc/self/maps", "r");
	char		line[512];
	bool		found = false;

	if (maps == NULL)
		return false;
	while (fgets(line, sizeof(line), maps) != NULL)
	{
		unsigned long start,
					end;

		if (sscanf(line, "%lx-%lx", &start, &end) == 2 &&
			here >= start && here < end)
		{
			struct rlimit rl;

			bounds->low = start;
			bounds->high = end;
			if (strstr(line, "[stack]") != NULL &&
				getrlimit(RLIMIT_STACK, &rl) == 0 &&
				rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < end &&
				end - rl.rlim_cur < start)
				bounds->low = end - rl.rlim_cur;
			found = true;
			break;
		}
	}
	fclose(maps);
	return found;
}

bool
tp_stack_bounds_current(tp_stack_bounds *bounds)
{
	pthread_attr_t attr;
	void	   *addr;
	size_t		size;

	bounds->low = bounds->high = 0;
	bounds->memcheck = VALGRIND_MAKE_MEM_DEFINED(&bounds->low, sizeof(bounds->low)) != 0;
	if (pthread_getattr_np(pthread_self(), &attr) == 0)
	{
		bool		ok = pthread_attr_getstack(&attr, &addr, &size) == 0;

		pthread_attr_destroy(&attr);
		if (ok && size > 0)
		{
			bounds->low = (uintptr_t) addr;
			bounds->high = (uintptr_t) addr + size;
			return true;
		}
	}
	return bounds_from_maps(bounds);
}

bool
tp_stack_regs_get(const void *ucontext, tp_stack_regs *regs)
{
	const ucontext_t *uc = ucontext;

	if (uc == NULL)
		return false;
#if defined(__x86_64__)
	regs->pc = (uintptr_t) uc->uc_mcontext.gregs[REG_RIP];
	regs->fp = (uintptr_t) uc->uc_mcontext.gregs[REG_RBP];
	regs->sp = (uintptr_t) uc->uc_mcontext.gregs[REG_RSP];
	return true;
#elif defined(__aarch64__)
	/* AAPCS64 frame records have the same {fp, lr} layout (x29 chain). */
	regs->pc = (uintptr_t) uc->uc_mcontext.pc;
	regs->fp = (uintptr_t) uc->uc_mcontext.regs[29];
	regs->sp = (uintptr_t) uc->uc_mcontext.sp;
	return true;
#else
	(void) regs;
	return false;
#endif
}

static bool jit_caller(const tp_stack_bounds *bounds, const tp_code_map *map,
					   uintptr_t from, uintptr_t fp_hint, bool search_pairs,
					   uintptr_t last, uintptr_t *slot, uintptr_t *caller);
static bool outside_objects(const tp_code_map *map, uintptr_t pc);

#if defined(__x86_64__)
/*
 * Copy the len bytes of code before ret into buf through process_vm_readv:
 * a failed read is an error, not a fault (async-signal-safe, a plain
 * system call).  Never a plain read, not even on the page of the JIT frame
 * the walk is at: that frame may be a frame-pointer walk's garbage that
 * only looks like JIT code (outside every object the map knows), on a page
 * nothing maps; reading there killed the backend.  At most JIT_PROBES
 * times a walk.
 */
static bool
jit_code_before(uintptr_t ret, unsigned char *buf, size_t len, int *probes)
{
	struct iovec local = {buf, len};
	struct iovec remote = {(void *) (ret - len), len};

	if (ret - len > ret || *probes >= JIT_PROBES)
		return false;
	(*probes)++;
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t) len;
}

/*
 * Is word (within JIT_NEAR of callee) the return address of a call from
 * JIT code into the JIT function holding callee (a PC in it, or a return
 * address into it)?  A direct call
 * must target a start at or below callee; a call through a register (the
 * large code model) is taken as it is.
 */
static bool
returns_into_jit(const tp_code_map *map, uintptr_t word, uintptr_t callee, int *probes)
{
	unsigned char code[5];
	int32_t		disp;
	uintptr_t	target;

	if (!outside_objects(map, word) ||
		!jit_code_before(word, code, sizeof(code), probes))
		return false;
	if (code[0] == 0xe8)		/* call rel32 */
	{
		memcpy(&disp, code + 1, sizeof(disp));
		target = word + (intptr_t) disp;
		return target <= callee && callee - target < JIT_NEAR;
	}
	/* call *%r64: ff d0+r, or 41 ff d0+r for r8..r15 */
	return code[3] == 0xff && (code[4] & 0xf8) == 0xd0;
}
#endif

/*
 * Both walks through JIT code end the same way once jit_caller found the
 * JIT code's caller.  First the JIT frames between: the JIT code at
 * callee (the frame the walk is at) may have been called by other JIT
 * code, whose return address then lies in [from, slot), above the
 * callee's frame; up to JIT_NESTED_MAX such frames are inserted, innermost
 * first.  Then the return address at slot goes into pcs (bits of
 * *inserted mark what was found on the stack, for the drain), and the walk
 * goes on from the caller's frame record, unless it has none (caller 0)
 * or pcs is full.  Returns the new depth; *stop set (never cleared) when
 * the walk ends here.
 */
static inline __attribute__((always_inline)) RAW_STACK_READS int
insert_jit_caller(const tp_stack_bounds *bounds, const tp_code_map *map, uintptr_t from,
				  uintptr_t callee, uintptr_t slot, uintptr_t caller, uintptr_t *pcs,
				  int depth, int max, bool *truncated, uint64_t *inserted, bool *stop)
{
#if defined(__x86_64__)
	int			nested = 0;
	int			probes = 0;

	for (uintptr_t at = from; at < slot && nested < JIT_NESTED_MAX; at += sizeof(uintptr_t))
	{
		uintptr_t	word = defined_word(bounds, *(const uintptr_t *) at);

		if ((word > callee ? word - callee : callee - word) >= JIT_NEAR ||
			!returns_into_jit(map, word, callee, &probes))
			continue;
		if (depth == max)
		{
			*truncated = true;
			*stop = true;
			return depth;
		}
		*inserted |= (uint64_t) 1 << (depth & 63);
		pcs[depth++] = word;
		callee = word;
		nested++;
	}
#else
	(void) map;
	(void) from;
	(void) callee;
#endif
	if (depth == max)
	{
		*truncated = true;
		*stop = true;
		return depth;
	}
	*inserted |= (uint64_t) 1 << (depth & 63);
	pcs[depth++] = defined_word(bounds, *(const uintptr_t *) slot);
	if (caller == 0)
		*stop = true;
	return depth;
}

/*
 * The frame record at fp returns to ret, outside the map's hot range.  If
 * that is JIT code, its frames, which have no record, lie right above this
 * record: insert their caller into pcs (returning the new depth) and set
 * *next to the caller's frame.  Unless the JIT code kept a frame record
 * after all (its return address is the next record's).  A chain that goes
 * on is followed as the plain walk would: code loaded after the map was
 * read looks like JIT code too, and then only the frame inserted is wrong
 * (the drain drops it).  *stop when the walk ends here.  Out of line: the
 * loop stays as short as the plain walk's for the main program's frames.
 */
static __attribute__((noinline)) RAW_STACK_READS int
step_over_jit(const tp_stack_bounds *bounds, const tp_code_map *map, uintptr_t fp,
			  uintptr_t ret, uintptr_t *next, uintptr_t last, uintptr_t *pcs, int depth,
			  int max, bool *truncated, uint64_t *inserted, bool *stop)
{
	const uintptr_t align = sizeof(uintptr_t) - 1;
	bool		chain_ends = *next <= fp || *next > last || (*next & align) != 0;
	uintptr_t	slot;
	uintptr_t	caller;

	if (!outside_objects(map, ret) ||
		!jit_caller(bounds, map, fp + 2 * sizeof(uintptr_t), *next, chain_ends, last,
					&slot, &caller) ||
		slot == *next + sizeof(uintptr_t))
		return depth;
	depth = insert_jit_caller(bounds, map, fp + 2 * sizeof(uintptr_t), ret, slot, caller, pcs,
							  depth, max, truncated, inserted, stop);
	*next = caller;
	return depth;
}

/*
 * The chain from the frame record at fp (already checked) on, into
 * pcs[depth..].  Without jit, the plain walk: tp_stack_walk inlines this
 * with the JIT checks compiled out, so its cost stays what it was.
 */
static inline __attribute__((always_inline)) RAW_STACK_READS int
follow_chain(uintptr_t fp, uintptr_t last, const tp_stack_bounds *bounds,
			 const tp_code_map *map, bool jit, uintptr_t *pcs, int depth, int max,
			 bool *truncated, uint64_t *inserted)
{
	const uintptr_t align = sizeof(uintptr_t) - 1;
	/* Locals: the stores into pcs could alias the map. */
	uintptr_t	hot_start = jit ? map->framed_start[0] : 0;
	uintptr_t	hot_size = jit ? map->framed_end[0] - hot_start : 0;
	uintptr_t	libc_start = jit ? map->libc_start : 0;
	uintptr_t	libc_size = jit ? map->libc_end - libc_start : 0;

	for (;;)
	{
		const uintptr_t *frame = (const uintptr_t *) fp;
		uintptr_t	next = defined_word(bounds, frame[0]);	/* the caller's fp */
		uintptr_t	ret = defined_word(bounds, frame[1]);

		if (ret < MIN_CODE_ADDRESS)
			break;				/* outermost frame, or garbage */
		if (depth == max)
		{
			*truncated = true;
			break;
		}
		pcs[depth++] = ret;
		if (jit && ret - hot_start >= hot_size && ret - libc_start >= libc_size)
		{
			bool		stop = false;

			depth = step_over_jit(bounds, map, fp, ret, &next, last, pcs, depth, max,
								  truncated, inserted, &stop);
			if (stop)
				break;
		}

		/* Strictly upwards (no loops), inside the stack, aligned. */
		if (next <= fp || next > last || (next & align) != 0)
			break;
		fp = next;
	}
	return depth;
}

/*
 * Only [sp, high) is sure to be mapped: below sp a main-thread stack may
 * not have grown yet.  An SP elsewhere (sigaltstack, a coroutine) gets the
 * PC alone.  *last: the highest address a frame record may start at.
 */
static inline bool
stack_above_sp(const tp_stack_regs *regs, const tp_stack_bounds *bounds, uintptr_t *last)
{
	if (regs->sp < bounds->low || regs->sp >= bounds->high ||
		bounds->high - regs->sp < 2 * sizeof(uintptr_t))
		return false;
	*last = bounds->high - 2 * sizeof(uintptr_t);
	return true;
}

static inline __attribute__((always_inline)) RAW_STACK_READS int
walk(const tp_stack_regs *regs, const tp_stack_bounds *bounds, const tp_code_map *map,
	 bool jit, uintptr_t *pcs, int max, bool *truncated, uint64_t *inserted)
{
	const uintptr_t align = sizeof(uintptr_t) - 1;
	uintptr_t	fp = regs->fp;
	uintptr_t	last;			/* highest address a frame record may start at */
	int			depth = 0;

	*truncated = false;
	if (max <= 0)
		return 0;
	pcs[depth++] = regs->pc;
	if (!stack_above_sp(regs, bounds, &last))
		return depth;
	fp = defined_word(bounds, fp);
	if (fp < regs->sp || fp > last || (fp & align) != 0)
		return depth;
	return follow_chain(fp, last, bounds, map, jit, pcs, depth, max, truncated, inserted);
}

RAW_STACK_READS int
tp_stack_walk(const tp_stack_regs *regs, const tp_stack_bounds *bounds,
			  uintptr_t *pcs, int max, bool *truncated)
{
	return walk(regs, bounds, NULL, false, pcs, max, truncated, NULL);
}

RAW_STACK_READS int
tp_stack_walk_code(const tp_stack_regs *regs, const tp_stack_bounds *bounds,
				   const tp_code_map *map, uintptr_t *pcs, int max,
				   bool *truncated, uint64_t *inserted)
{
	return walk(regs, bounds, map, true, pcs, max, truncated, inserted);
}

RAW_STACK_READS int
tp_stack_walk_jit(const tp_stack_regs *regs, const tp_stack_bounds *bounds,
				  const tp_code_map *map, uintptr_t *pcs, int max,
				  bool *truncated, uint64_t *inserted)
{
	uintptr_t	last;
	uintptr_t	slot;
	uintptr_t	caller;
	bool		stop = false;
	int			depth = 0;

	*truncated = false;
	if (max <= 0)
		return 0;
	pcs[depth++] = regs->pc;
	if (!stack_above_sp(regs, bounds, &last) ||
		!jit_caller(bounds, map, regs->sp, regs->fp, true, last, &slot, &caller))
		return depth;
	depth = insert_jit_caller(bounds, map, regs->sp, regs->pc, slot, caller, pcs, depth, max,
							  truncated, inserted, &stop);
	if (stop)
		return depth;
	return follow_chain(caller, last, bounds, map, true, pcs, depth, max, truncated, inserted);
}

RAW_STACK_READS int
tp_stack_top_words(const tp_stack_regs *regs, const tp_stack_bounds *bounds,
				   uintptr_t *words)
{
#if defined(__x86_64__)
	uintptr_t	sp = regs->sp;
	uintptr_t	end = bounds->high;
	int			n = 0;

	if (sp < bounds->low || sp >= end || sp % sizeof(uintptr_t) != 0)
		return 0;

	/*
	 * A frameless leaf's return address lies below the frame its caller's
	 * frame pointer still designates; above it are older frames.
	 */
	if (regs->fp > sp && regs->fp < end)
		end = regs->fp;
	while (n < TP_STACK_TOP_WORDS && end - sp >= sizeof(uintptr_t))
	{
		words[n++] = *(const uintptr_t *) sp;
		sp += sizeof(uintptr_t);
	}
	MARK_DEFINED(bounds, words, n * sizeof(uintptr_t));
	return n;
#else
	/* aarch64 leaves keep their return address in LR: not handled yet. */
	(void) regs;
	(void) bounds;
	(void) words;
	return 0;
#endif
}

typedef struct code_range
{
	uintptr_t	start;
	uintptr_t	end;
	bool		exec;
} code_range;

struct tp_leaf_repair
{
	code_range *ranges;			/* PT_LOAD segments of loaded objects, sorted */
	size_t		nranges;
	size_t		capacity;
	bool		known;			/* ranges read at least once */
	bool		failed;			/* out of memory while reading them */
	unsigned long long adds;	/* dl_iterate_phdr's load/unload counters */
	unsigned long long subs;
	uintptr_t	site[SITE_CACHE];	/* return address, 0: empty */
	uintptr_t	target[SITE_CACHE];	/* see decode_site() */
};

/* What decode_site() found before a return address. */
#define SITE_NOT_CALL ((uintptr_t) 0)
#define SITE_INDIRECT ((uintptr_t) 1)	/* call through a register or memory */
/* anything else: the function a direct call called */

tp_leaf_repair *
tp_leaf_repair_new(void)
{
	return calloc(1, sizeof(tp_leaf_repair));
}

void
tp_leaf_repair_free(tp_leaf_repair *repair)
{
	if (repair == NULL)
		return;
	free(repair->ranges);
	free(repair);
}

static int
add_segments(struct dl_phdr_info *info, size_t size, void *arg)
{
	tp_leaf_repair *repair = arg;

	(void) size;
	for (int i = 0; i < info->dlpi_phnum; i++)
	{
		const ElfW(Phdr) *phdr = &info->dlpi_phdr[i];

		if (phdr->p_type != PT_LOAD || phdr->p_memsz == 0 || (phdr->p_flags & PF_R) == 0)
			continue;			/* only what we may read */
		if (repair->nranges == repair->capacity)
		{
			size_t		capacity = repair->capacity ? repair->capacity * 2 : 128;
			code_range *grown = realloc(repair->ranges, capacity * sizeof(code_range));

			if (grown == NULL)
			{
				repair->failed = true;
				return 1;
			}
			repair->ranges = grown;
			repair->capacity = capacity;
		}
		repair->ranges[repair->nranges].start = info->dlpi_addr + phdr->p_vaddr;
		repair->ranges[repair->nranges].end = info->dlpi_addr + phdr->p_vaddr + phdr->p_memsz;
		repair->ranges[repair->nranges].exec = (phdr->p_flags & PF_X) != 0;
		repair->nranges++;
	}
	return 0;
}

static int
compare_ranges(const void *a, const void *b)
{
	const code_range *x = a;
	const code_range *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

void
tp_leaf_repair_refresh(tp_leaf_repair *repair)
{
	unsigned long long counters[2] = {0, 0};

	if (tp_loader_counters(counters) && repair->known &&
		counters[0] == repair->adds && counters[1] == repair->subs)
		return;
	repair->nranges = 0;
	repair->failed = false;
	dl_iterate_phdr(add_segments, repair);
	qsort(repair->ranges, repair->nranges, sizeof(code_range), compare_ranges);
	repair->adds = counters[0];
	repair->subs = counters[1];
	repair->known = !repair->failed;
	memset(repair->site, 0, sizeof(repair->site));	/* code may have moved */
}

/* Does [addr, addr + len) lie in one loaded segment (executable if asked)? */
static bool
readable(const tp_leaf_repair *repair, uintptr_t addr, size_t len, bool exec)
{
	size_t		lo = 0;
	size_t		hi = repair->nranges;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (repair->ranges[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	{
		const code_range *r = &repair->ranges[lo - 1];

		return addr < r->end && len <= r->end - addr && (!exec || r->exec);
	}
}

static uintptr_t
read_pointer(const tp_leaf_repair *repair, uintptr_t addr)
{
	uintptr_t	value;

	if (!readable(repair, addr, sizeof(value), false))
		return 0;
	memcpy(&value, (const void *) addr, sizeof(value));
	return value;
}

#if defined(__x86_64__)
/* Where a PLT stub (jmp *slot(%rip), maybe after endbr64/bnd) jumps to. */
static uintptr_t
through_plt(const tp_leaf_repair *repair, uintptr_t target)
{
	const unsigned char *p = (const unsigned char *) target;
	uintptr_t	at = target;
	int32_t		disp;
	uintptr_t	resolved;

	if (!readable(repair, target, 16, true))
		return target;
	if (p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa)
		at += 4;				/* endbr64 */
	if (((const unsigned char *) at)[0] == 0xf2)
		at += 1;				/* bnd */
	p = (const unsigned char *) at;
	if (p[0] != 0xff || p[1] != 0x25)
		return target;
	memcpy(&disp, p + 2, sizeof(disp));
	resolved = read_pointer(repair, at + 6 + (intptr_t) disp);
	return resolved != 0 ? resolved : target;
}

/*
 * Length of "call *r/m64" (FF /2) if one starts at p, else 0.  end bounds
 * the bytes we may look at.
 */
static int
indirect_call_length(const unsigned char *p, const unsigned char *end)
{
	const unsigned char *at = p;
	unsigned char modrm;
	int			mod;
	int			rm;
	int			len;

	if (at < end && *at == 0x3e)
		at++;					/* notrack */
	if (at < end && (*at & 0xf0) == 0x40)
		at++;					/* REX */
	if (end - at < 2 || at[0] != 0xff)
		return 0;
	modrm = at[1];
	if (((modrm >> 3) & 7) != 2)
		return 0;
	mod = modrm >> 6;
	rm = modrm & 7;
	len = (int) (at - p) + 2;
	if (mod == 3)
		return len;
	if (rm == 4)
	{
		if (end - at < 3)
			return 0;
		len++;					/* SIB */
		if (mod == 0 && (at[2] & 7) == 5)
			len += 4;			/* no base: disp32 */
	}
	else if (mod == 0 && rm == 5)
		len += 4;				/* rip-relative */
	if (mod == 1)
		len += 1;
	else if (mod == 2)
		len += 4;
	return len;
}

/* The kind of call a return address follows (see SITE_*). */
static uintptr_t
decode_site(const tp_leaf_repair *repair, uintptr_t ret)
{
	const unsigned char *end = (const unsigned char *) ret;
	int32_t		disp;
	uintptr_t	target;

	if (ret < MIN_CODE_ADDRESS || !readable(repair, ret - 8, 8, true))
		return SITE_NOT_CALL;
	if (end[-5] == 0xe8)		/* call rel32 */
	{
		memcpy(&disp, end - 4, sizeof(disp));
		target = ret + (intptr_t) disp;
		return target > SITE_INDIRECT ? through_plt(repair, target) : SITE_NOT_CALL;
	}
	if (end[-6] == 0xff && end[-5] == 0x15)	/* call *rel32(%rip), -fno-plt */
	{
		memcpy(&disp, end - 4, sizeof(disp));
		target = read_pointer(repair, ret + (intptr_t) disp);
		return target > SITE_INDIRECT ? through_plt(repair, target) : SITE_NOT_CALL;
	}
	for (int len = 2; len <= 8; len++)
	{
		if (indirect_call_length(end - len, end) == len)
			return SITE_INDIRECT;
	}
	return SITE_NOT_CALL;
}

static uintptr_t
site_kind(tp_leaf_repair *repair, uintptr_t ret)
{
	size_t		slot = (ret ^ (ret >> 11)) % SITE_CACHE;

	if (repair->site[slot] != ret)
	{
		repair->site[slot] = ret;
		repair->target[slot] = decode_site(repair, ret);
	}
	return repair->target[slot];
}

static bool
calls_function_at(uintptr_t kind, uintptr_t pc)
{
	return kind > SITE_INDIRECT && kind <= pc && pc - kind < LEAF_SPAN;
}
#endif

int
tp_leaf_repair_apply(tp_leaf_repair *repair, uintptr_t *pcs, int depth,
					 int max, const uintptr_t *words, int nwords)
{
#if defined(__x86_64__)
	uintptr_t	pc;
	bool		missing;

	if (repair == NULL || depth < 1 || max < 2 || nwords <= 0 || !repair->known)
		return depth;
	pc = pcs[0];

	/*
	 * Does the walk already hold the PC's caller?  Yes if pcs[1] follows a
	 * direct call of the PC's function.  A frame is surely missing if it
	 * follows a direct call of another function, or if the walk found no
	 * frame at all.  After an indirect call we cannot tell.
	 */
	if (depth >= 2)
	{
		uintptr_t	kind = site_kind(repair, pcs[1]);

		if (calls_function_at(kind, pc))
			return depth;
		missing = kind > SITE_INDIRECT;
	}
	else
		missing = true;

	for (int i = 0; i < nwords; i++)
	{
		uintptr_t	ret = words[i];
		uintptr_t	kind;

		if (ret < MIN_CODE_ADDRESS || !readable(repair, ret - 1, 1, true))
			continue;			/* data, not a return address */
		kind = site_kind(repair, ret);

		/*
		 * A direct call of the PC's function proves the frame; an indirect
		 * call is taken only when a frame is known to be missing, since a
		 * stale one could sit in a framed function's locals.
		 */
		if (!calls_function_at(kind, pc) && !(kind == SITE_INDIRECT && missing))
			continue;
		if (depth >= 2 && pcs[1] == ret)
			return depth;		/* the walk had it */
		if (depth == max)
			depth--;			/* the outermost frame makes room */
		memmove(&pcs[2], &pcs[1], (size_t) (depth - 1) * sizeof(uintptr_t));
		pcs[1] = ret;
		return depth + 1;
	}
	return depth;
#else
	(void) repair;
	(void) pcs;
	(void) max;
	(void) words;
	(void) nwords;
	return depth;
#endif
}

bool
tp_leaf_repair_in_object(const tp_leaf_repair *repair, uintptr_t pc)
{
	return repair != NULL && repair->known && readable(repair, pc, 1, true);
}

/* The JIT walk's map of code (see stack_walk.h). */

typedef struct map_search
{
	tp_code_map *map;
	uintptr_t	own_address;	/* an address inside this library */
	uintptr_t	libc_address;	/* one inside the C library's code */
	bool		first;			/* the main program is reported first */
	int			index;			/* of the object reported, in the loader's list */
} map_search;

static void
add_framed(tp_code_map *map, uintptr_t start, uintptr_t end, bool main_program)
{
	int			at = map->framed_count;

	if (at == TP_CODE_MAP_FRAMED)
		return;					/* only checked as code, not read */
	/* The main program's largest segment first: one comparison a frame. */
	if (main_program && (at == 0 || end - start > map->framed_end[0] - map->framed_start[0]))
	{
		map->framed_start[at] = map->framed_start[0];
		map->framed_end[at] = map->framed_end[0];
		at = 0;
	}
	map->framed_start[at] = start;
	map->framed_end[at] = end;
	map->framed_count++;
}

/*
 * The loader's list as it is now (called under its lock, from the first
 * dl_iterate_phdr callback): nodes, load addresses, dynamic sections.
 */
static void
remember_objects(tp_code_map *map)
{
	int			count = 0;

	map->known_objects = -1;
	if (_r_debug.r_state != RT_CONSISTENT)
		return;
	for (const struct link_map *l = _r_debug.r_map; l != NULL; l = l->l_next)
	{
		if (count == TP_CODE_MAP_OBJECTS)
			return;
		map->known[count].node = l;
		map->known[count].addr = (uintptr_t) l->l_addr;
		map->known[count].ld = l->l_ld;
		map->known[count].id_at = NULL;
		map->known[count].id_len = 0;
		count++;
	}
	map->known_objects = count;
}

/*
 * The build id of the object of info, if its note lies in the page at its
 * load address: any object loaded at that address since maps its first
 * page there (its ELF header), so the handler can read it back.
 */
static void
remember_build_id(tp_code_map *map, int index, const struct dl_phdr_info *info)
{
	if (index >= map->known_objects || map->known[index].addr != (uintptr_t) info->dlpi_addr)
	{
		map->known_objects = -1;	/* not the list's order: check nothing */
		return;
	}
	for (int i = 0; i < info->dlpi_phnum; i++)
	{
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const unsigned char *notes = (const unsigned char *) (info->dlpi_addr + ph->p_vaddr);
		size_t		pos = 0;

		if (ph->p_type != PT_NOTE || ph->p_vaddr + ph->p_filesz > MIN_PAGE)
			continue;
		while (ph->p_filesz - pos >= 12)
		{
			uint32_t	header[3];	/* namesz, descsz, type */
			size_t		name_len;
			size_t		desc_len;

			memcpy(header, notes + pos, sizeof(header));
			name_len = ((size_t) header[0] + 3) & ~(size_t) 3;
			desc_len = ((size_t) header[1] + 3) & ~(size_t) 3;
			if (name_len + desc_len > ph->p_filesz - pos - 12)
				break;
			if (header[2] == NT_GNU_BUILD_ID && header[0] == 4 && header[1] > 0 &&
				header[1] <= sizeof(map->known[index].id) &&
				memcmp(notes + pos + 12, "GNU", 4) == 0)
			{
				map->known[index].id_at = notes + pos + 12 + name_len;
				map->known[index].id_len = (int) header[1];
				memcpy(map->known[index].id, map->known[index].id_at, header[1]);
				return;
			}
			pos += 12 + name_len + desc_len;
		}
	}
}

static int
add_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	map_search *search = arg;
	tp_code_map *map = search->map;
	bool		main_program = search->first;
	bool		framed = main_program;
	uintptr_t	eh_frame_hdr = 0;

	(void) size;
	if (search->first)
		remember_objects(map);
	if (search->index < map->known_objects)
		remember_build_id(map, search->index, info);
	search->index++;
	search->first = false;
	for (int i = 0; i < info->dlpi_phnum; i++)
	{
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t	start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && search->own_address >= start &&
			search->own_address - start < ph->p_memsz)
			framed = true;
		if (ph->p_type == PT_GNU_EH_FRAME)
			eh_frame_hdr = start;
	}
	for (int i = 0; i < info->dlpi_phnum; i++)
	{
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t	start = info->dlpi_addr + ph->p_vaddr;
		int			at;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz == 0)
			continue;
		if (map->count == TP_CODE_MAP_MAX)
		{
			map->complete = false;
			return 0;
		}
		/* Insertion sort: a few dozen objects, read once per dlopen. */
		for (at = map->count; at > 0 && map->start[at - 1] > start; at--)
		{
			map->start[at] = map->start[at - 1];
			map->end[at] = map->end[at - 1];
			map->eh_frame_hdr[at] = map->eh_frame_hdr[at - 1];
		}
		map->start[at] = start;
		map->end[at] = start + ph->p_memsz;
		map->eh_frame_hdr[at] = eh_frame_hdr;
		map->count++;
		if (search->libc_address - start < ph->p_memsz)
		{
			map->libc_start = start;
			map->libc_end = start + ph->p_memsz;
		}
		if (framed)
			add_framed(map, start, start + ph->p_memsz, main_program);
	}
	return 0;
}

/*
 * The length of the loader's list of objects, -1 while it changes.  The
 * list is the one debuggers read (<link.h>'s _r_debug): a node is linked
 * whole, and r_state leaves RT_CONSISTENT before any unlinking.
 */
#define MAX_OBJECTS 4096

static int
loaded_objects(void)
{
	const volatile struct r_debug *debug = &_r_debug;
	int			count = 0;

	if (debug->r_state != RT_CONSISTENT)
		return -1;
	for (const struct link_map *l = debug->r_map; l != NULL && count < MAX_OBJECTS; l = l->l_next)
		count++;
	return debug->r_state == RT_CONSISTENT ? count : -1;
}

bool
tp_code_map_current(const tp_code_map *map)
{
	int			count = loaded_objects();

	return count >= 0 && count == map->objects;
}

void
tp_code_map_read(tp_code_map *map)
{
	map_search	search = {map, (uintptr_t) &tp_code_map_read, (uintptr_t) &abort, true, 0};
	unsigned long long counters[2] = {0, 0};

	map->framed_count = 0;
	map->libc_start = map->libc_end = 0;
	map->count = 0;
	map->complete = true;
	memset(map->unwinds, 0, sizeof(map->unwinds));	/* until tp_dwarf_register_tables */
	map->objects = loaded_objects();
	map->known_objects = -1;
	(void) tp_loader_counters(counters);
	dl_iterate_phdr(add_object, &search);
	if (search.index < map->known_objects)
		map->known_objects = -1;	/* fewer reported than listed */
	map->adds = counters[0];
	map->subs = counters[1];
}

/*
 * Objects loaded since the map was read come after its objects in the list
 * (the loader appends) and never had a table registered, so a list that
 * grew, or grows now (a sample in the loader's own relocation code during
 * a dlopen), keeps libunwind usable; one an object left, or is leaving
 * (RT_DELETE), does not.
 */
bool
tp_code_map_same_objects(const tp_code_map *map)
{
	const volatile struct r_debug *debug = &_r_debug;
	const struct link_map *l = debug->r_map;

	if (map->known_objects < 0 || debug->r_state == RT_DELETE)
		return false;
	for (int i = 0; i < map->known_objects; i++, l = l->l_next)
	{
		if (l == NULL || l != map->known[i].node ||
			(uintptr_t) l->l_addr != map->known[i].addr || l->l_ld != map->known[i].ld)
			return false;
		/* The same node and place can be another object's: its build id. */
		if (map->known[i].id_len > 0 &&
			memcmp(map->known[i].id_at, map->known[i].id, map->known[i].id_len) != 0)
			return false;
	}
	return debug->r_state != RT_DELETE;
}

bool
tp_code_map_changed(const tp_code_map *map)
{
	unsigned long long counters[2] = {0, 0};

	return !tp_loader_counters(counters) ||
		counters[0] != map->adds || counters[1] != map->subs;
}

/* The last segment starting at or below pc, -1: none. */
static int
segment_below(const tp_code_map *map, uintptr_t pc)
{
	int			lo = 0;
	int			hi = map->count;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (map->start[mid] <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

/* In no loaded object, as far as a complete map tells. */
static bool
outside_objects(const tp_code_map *map, uintptr_t pc)
{
	int			below;

	if (map->count == 0 || !map->complete)
		return false;
	below = segment_below(map, pc);
	return below < 0 || pc >= map->end[below];
}

int
tp_code_map_find(const tp_code_map *map, uintptr_t pc)
{
	int			below = segment_below(map, pc);

	return below >= 0 && pc < map->end[below] ? below : -1;
}

bool
tp_code_map_outside(const tp_code_map *map, uintptr_t pc)
{
	return outside_objects(map, pc);
}

bool
tp_code_map_framed(const tp_code_map *map, uintptr_t pc)
{
	for (int i = 0; i < map->framed_count; i++)
		if (pc >= map->framed_start[i] && pc < map->framed_end[i])
			return true;
	return false;
}

/* The framed segment holding [pc - 8, pc), which we may read; -1: none. */
static int
framed_segment(const tp_code_map *map, uintptr_t pc)
{
	for (int i = 0; i < map->framed_count; i++)
		if (pc > map->framed_start[i] && pc - map->framed_start[i] >= 8 &&
			pc <= map->framed_end[i])
			return i;
	return -1;
}

#if defined(__x86_64__)
/* Does a call end at ret, in code with frame pointers (indirect only if asked)? */
static bool
returns_after_call(const tp_code_map *map, uintptr_t ret, bool indirect_only)
{
	const unsigned char *end = (const unsigned char *) ret;

	if (framed_segment(map, ret) < 0)
		return false;
	if (!indirect_only && (end[-5] == 0xe8 || (end[-6] == 0xff && end[-5] == 0x15)))
		return true;
	for (int len = 2; len <= 8; len++)
	{
		if (indirect_call_length(end - len, end) == len)
			return true;
	}
	return false;
}

/*
 * Could frame be the record of the function that called the JIT code
 * through slot?  Above slot, and holding a return address after a call
 * (or into another object: not ours to decode).
 */
static RAW_STACK_READS bool
caller_frame(const tp_stack_bounds *bounds, const tp_code_map *map, uintptr_t frame,
			 uintptr_t slot, uintptr_t last)
{
	uintptr_t	ret;

	if (frame <= slot || frame > last || (frame & (sizeof(uintptr_t) - 1)) != 0)
		return false;
	ret = defined_word(bounds, ((const uintptr_t *) frame)[1]);
	if (ret < MIN_CODE_ADDRESS || outside_objects(map, ret))
		return false;
	return framed_segment(map, ret) < 0 || returns_after_call(map, ret, false);
}
#endif

#if defined(__x86_64__)
/* Could word be the return address of a call into JIT code? */
static inline bool
enters_jit(const tp_code_map *map, uintptr_t word)
{
	return word >= MIN_CODE_ADDRESS && returns_after_call(map, word, true);
}

/*
 * The highest slot in [lo, hi) holding such a return address, with saved
 * in the word below it unless saved is 0; 0 if none.
 */
static RAW_STACK_READS uintptr_t
highest_entry(const tp_stack_bounds *bounds, const tp_code_map *map, uintptr_t lo,
			  uintptr_t hi, uintptr_t saved)
{
	for (uintptr_t at = hi; at > lo && at - lo >= sizeof(uintptr_t);)
	{
		at -= sizeof(uintptr_t);
		if (!enters_jit(map, defined_word(bounds, *(const uintptr_t *) at)))
			continue;
		if (saved == 0 ||
			(at - lo >= sizeof(uintptr_t) &&
			 defined_word(bounds, ((const uintptr_t *) at)[-1]) == saved))
			return at;
	}
	return 0;
}
#endif

/*
 * JIT frames fill the stack from `from` up: find the return address into
 * their caller (*slot its address) and that caller's frame record
 * (*caller); fp_hint is the frame register as the JIT code left it.  Only
 * if search_pairs, when fp_hint is no caller's frame, look for one the JIT
 * code saved.  False when nothing qualifies.
 *
 * The caller's older calls (an executor node fetching the next tuple) left
 * return addresses of their own in what are now the JIT frames, each with
 * the frame it saved below it: the lowest match is often stale.
 */
static RAW_STACK_READS bool
jit_caller(const tp_stack_bounds *bounds, const tp_code_map *map, uintptr_t from,
		   uintptr_t fp_hint, bool search_pairs, uintptr_t last, uintptr_t *slot,
		   uintptr_t *caller)
{
#if defined(__x86_64__)
	uintptr_t	end = bounds->high;

	if ((from & (sizeof(uintptr_t) - 1)) != 0 || from < bounds->low || from >= end)
		return false;
	if (end - from > JIT_SCAN_WORDS * sizeof(uintptr_t))
		end = from + JIT_SCAN_WORDS * sizeof(uintptr_t);

	/*
	 * The frame register left alone designates the caller's frame: the
	 * caller's return address is the highest one below it (the stale ones
	 * are deeper).
	 */
	if (caller_frame(bounds, map, fp_hint, from, last))
	{
		uintptr_t	at = highest_entry(bounds, map, from, fp_hint < end ? fp_hint : end, 0);

		if (at != 0)
		{
			*slot = at;
			*caller = fp_hint;
			return true;
		}
	}
	if (!search_pairs)
		return false;

	/*
	 * Overwritten: the JIT prologue pushed it first, right below the return
	 * address.  Take the lowest such pair, but follow its frame chain a few
	 * records: from a stale pair the chain leads through the caller's frame
	 * and steps over the true pair, a higher return address between a
	 * record and the frame it saved, with that frame below it.
	 */
	for (uintptr_t at = from + sizeof(uintptr_t); end - at >= sizeof(uintptr_t);
		 at += sizeof(uintptr_t))
	{
		uintptr_t	saved = defined_word(bounds, ((const uintptr_t *) at)[-1]);
		uintptr_t	record = at;
		uintptr_t	frame = saved;

		if (!enters_jit(map, defined_word(bounds, *(const uintptr_t *) at)) ||
			!caller_frame(bounds, map, saved, at, last))
			continue;
		for (int step = 0; step < JIT_CHAIN_STEPS; step++)
		{
			uintptr_t	higher = highest_entry(bounds, map, record + sizeof(uintptr_t),
											   frame < end ? frame : end, frame);
			uintptr_t	next;

			if (higher != 0)
			{
				at = higher;
				saved = frame;
				break;
			}
			next = defined_word(bounds, *(const uintptr_t *) frame);
			if (!caller_frame(bounds, map, next, frame + sizeof(uintptr_t), last))
				break;
			record = frame + sizeof(uintptr_t);
			frame = next;
		}
		*slot = at;
		*caller = saved;
		return true;
	}
	return false;
#else
	(void) bounds;
	(void) map;
	(void) from;
	(void) fp_hint;
	(void) search_pairs;
	(void) last;
	(void) slot;
	(void) caller;
	return false;
#endif
}
