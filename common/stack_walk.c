/* stack_walk.c - bounded frame-pointer walk from a signal's ucontext. */
#include "stack_walk.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <ucontext.h>

/* Return addresses below this are garbage (the first page is never mapped). */
#define MIN_CODE_ADDRESS 4096

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

int
tp_stack_walk(uintptr_t pc, uintptr_t fp, uintptr_t sp,
			  const tp_stack_bounds *bounds,
			  uintptr_t *pcs, int max, bool *truncated)
{
	const uintptr_t frame_size = 2 * sizeof(uintptr_t);
	uintptr_t	low;
	uintptr_t	high = bounds->high;
	int			depth = 0;

	*truncated = false;
	if (max <= 0)
		return 0;
	pcs[depth++] = pc;

	/*
	 * Only [sp, high) is sure to be mapped: below sp a main-thread stack may
	 * not have grown yet.  An SP elsewhere (sigaltstack, a coroutine) gets
	 * the PC alone.
	 */
	if (sp < bounds->low || sp >= high)
		return depth;
	low = sp;

	/* A frame record is {caller's frame pointer, return address}. */
	while (fp >= low && fp < high && high - fp >= frame_size &&
		   fp % sizeof(uintptr_t) == 0)
	{
		const uintptr_t *frame = (const uintptr_t *) fp;
		uintptr_t	next = frame[0];
		uintptr_t	ret = frame[1];

		if (ret < MIN_CODE_ADDRESS)
			break;				/* outermost frame, or garbage */
		if (depth == max)
		{
			*truncated = true;
			break;
		}
		pcs[depth++] = ret;
		if (next <= fp)
			break;				/* frames only go up: stops loops */
		fp = next;
	}
	return depth;
}

int
tp_stack_walk_ucontext(const void *ucontext,
					   const tp_stack_bounds *bounds,
					   uintptr_t *pcs, int max, bool *truncated)
{
	const ucontext_t *uc = ucontext;

	*truncated = false;
	if (uc == NULL)
		return 0;
#if defined(__x86_64__)
	return tp_stack_walk((uintptr_t) uc->uc_mcontext.gregs[REG_RIP],
						 (uintptr_t) uc->uc_mcontext.gregs[REG_RBP],
						 (uintptr_t) uc->uc_mcontext.gregs[REG_RSP],
						 bounds, pcs, max, truncated);
#elif defined(__aarch64__)
	/* AAPCS64 frame records have the same {fp, lr} layout (x29 chain). */
	return tp_stack_walk((uintptr_t) uc->uc_mcontext.pc,
						 (uintptr_t) uc->uc_mcontext.regs[29],
						 (uintptr_t) uc->uc_mcontext.sp,
						 bounds, pcs, max, truncated);
#else
	(void) bounds;
	(void) pcs;
	(void) max;
	return 0;
#endif
}
