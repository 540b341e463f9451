/*
 * dwarf_unwind.c - libunwind where the frame-pointer chain breaks (see
 * dwarf_unwind.h).
 */
#define UNW_LOCAL_ONLY
#include "dwarf_unwind.h"

#include <link.h>
#include <libunwind.h>
#include <stddef.h>

typedef struct range_search
{
	tp_code_ranges *ranges;
	uintptr_t	own_address;	/* an address inside this library */
	bool		first;			/* the main program is reported first */
} range_search;

static int
add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	range_search *search = arg;
	tp_code_ranges *ranges = search->ranges;
	bool		main_program = search->first;
	bool		ours = false;

	(void) size;
	for (int i = 0; i < info->dlpi_phnum; i++)
	{
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t	start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && search->own_address >= start &&
			search->own_address < start + ph->p_memsz)
			ours = true;
	}
	search->first = false;
	if (!main_program && !ours)
		return 0;
	for (int i = 0; i < info->dlpi_phnum && ranges->count < TP_CODE_RANGES; i++)
	{
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		ranges->start[ranges->count] = info->dlpi_addr + ph->p_vaddr;
		ranges->end[ranges->count] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		ranges->count++;
	}
	return 0;
}

void
tp_code_ranges_frame_pointer(tp_code_ranges *ranges)
{
	range_search search = {ranges, (uintptr_t) &tp_code_ranges_frame_pointer, true};

	ranges->count = 0;
	dl_iterate_phdr(add_module, &search);
	/* libunwind caches what it learns per thread: no locks in the handler. */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

bool
tp_code_ranges_contain(const tp_code_ranges *ranges, uintptr_t pc)
{
	for (int i = 0; i < ranges->count; i++)
		if (pc >= ranges->start[i] && pc < ranges->end[i])
			return true;
	return false;
}

/*
 * Is the cursor's frame JIT code: outside every object, and without unwind
 * information (a map read before a dlopen also puts new objects outside)?
 * On x86_64 libunwind reports "no information" as success with a one-byte
 * procedure at the IP (for _start, which has none either).
 */
#if defined(__x86_64__)
static bool
in_jit_code(unw_cursor_t *cursor, const tp_code_map *map, uintptr_t ip)
{
	unw_proc_info_t info;

	return map != NULL && tp_code_map_outside(map, ip) &&
		(unw_get_proc_info(cursor, &info) != 0 || info.end_ip - info.start_ip <= 1);
}
#endif

int
tp_dwarf_unwind(void *ucontext, const tp_code_map *map, uintptr_t *pcs, int max,
				bool *truncated, tp_stack_regs *jit)
{
	unw_cursor_t cursor;
	int			depth = 0;

#if !defined(__x86_64__)
	(void) map;
#endif
	*truncated = false;
	jit->pc = 0;
	if (max <= 0 || unw_init_local2(&cursor, (unw_context_t *) ucontext, UNW_INIT_SIGNAL_FRAME) != 0)
		return 0;
	do
	{
		unw_word_t	ip;

		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0)
			break;
#if defined(__x86_64__)
		if (in_jit_code(&cursor, map, (uintptr_t) ip))
		{
			unw_word_t	sp;
			unw_word_t	fp;

			if (unw_get_reg(&cursor, UNW_REG_SP, &sp) == 0 &&
				unw_get_reg(&cursor, UNW_X86_64_RBP, &fp) == 0)
			{
				jit->pc = (uintptr_t) ip;
				jit->sp = (uintptr_t) sp;
				jit->fp = (uintptr_t) fp;
				break;
			}
		}
#endif
		if (depth == max)
		{
			*truncated = true;
			break;
		}
		pcs[depth++] = (uintptr_t) ip;
	} while (unw_step(&cursor) > 0);
	return depth;
}
