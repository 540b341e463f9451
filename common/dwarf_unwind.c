/*
 * dwarf_unwind.c - libunwind where the frame-pointer chain breaks (see
 * dwarf_unwind.h).
 */
#define UNW_LOCAL_ONLY
#include "dwarf_unwind.h"

#include <link.h>
#include <libunwind.h>
#include <stddef.h>
#include <string.h>

/*
 * libunwind finds a frame's unwind table with dl_iterate_phdr, which takes
 * the dynamic loader's lock.  A sample landing while its thread holds that
 * lock (inside dlopen, dlclose or dl_iterate_phdr: a library's first call,
 * LOAD, our own map reads) made the handler wait for the thread it
 * interrupted, for ever, or read a link map half updated.  libunwind looks
 * in the tables registered with it first, without a lock: the loaded
 * objects' tables are registered here, outside the handler, and the
 * handler lets it look up no PC outside them.  An entry stays where it is
 * once registered (a handler on another thread may be reading it), so
 * slots are not reused: objects are seldom unloaded.
 */
#define MAX_TABLES 512

static unw_dyn_info_t tables[MAX_TABLES];
static bool table_live[MAX_TABLES];
static int	table_count;

/*
 * The binary search table of an .eh_frame_hdr in the layout every x86_64
 * and aarch64 toolchain writes (version 1, a 4-byte count, 4-byte entries
 * relative to the header), as libunwind's own search reads it; NULL for
 * any other.
 */
static const uint8_t *
search_table(uintptr_t eh_frame_hdr, uint32_t *entries)
{
	const uint8_t *hdr = (const uint8_t *) eh_frame_hdr;
	int			pointer_size = (hdr[1] & 0x07) == 0x03 ? 4 : 0;	/* DW_EH_PE_[us]data4 */

	if (hdr[0] != 1 || pointer_size == 0 || hdr[2] != 0x03 /* DW_EH_PE_udata4 */ ||
		hdr[3] != 0x3b /* DW_EH_PE_datarel | DW_EH_PE_sdata4 */ )
		return NULL;
	memcpy(entries, hdr + 4 + pointer_size, sizeof(*entries));
	return hdr + 4 + pointer_size + 4;
}

/* The live registration of segment i of map, registering it if new; -1: none. */
static int
table_of(const tp_code_map *map, int i)
{
	const uint8_t *table;
	uint32_t	entries;
	unw_dyn_info_t *di;

	for (int t = 0; t < table_count; t++)
		if (table_live[t] && tables[t].start_ip == map->start[i] &&
			tables[t].end_ip == map->end[i] && tables[t].u.rti.segbase == map->eh_frame_hdr[i])
			return t;
	if (map->eh_frame_hdr[i] == 0 || table_count == MAX_TABLES ||
		(table = search_table(map->eh_frame_hdr[i], &entries)) == NULL)
		return -1;
	di = &tables[table_count];
	memset(di, 0, sizeof(*di));
	di->start_ip = map->start[i];
	di->end_ip = map->end[i];
	di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di->u.rti.segbase = map->eh_frame_hdr[i];
	di->u.rti.table_data = (unw_word_t) table;
	di->u.rti.table_len = entries * 8 / sizeof(unw_word_t);	/* 8-byte entries, in words */
	_U_dyn_register(di);
	table_live[table_count] = true;
	return table_count++;
}

void
tp_dwarf_register_tables(tp_code_map *map)
{
	bool		used[MAX_TABLES] = {false};

	/* libunwind caches what it learns per thread: no locks in the handler. */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	for (int i = 0; i < map->count; i++)
	{
		int			t = table_of(map, i);

		map->unwinds[i] = t >= 0;
		if (t >= 0)
			used[t] = true;
	}
	/* Unloaded objects' tables: their addresses may be another's next. */
	for (int t = 0; t < table_count; t++)
		if (table_live[t] && !used[t])
		{
			_U_dyn_cancel(&tables[t]);
			table_live[t] = false;
		}
}

int
tp_dwarf_unwind(void *ucontext, const tp_code_map *map, uintptr_t *pcs, int max,
				bool *truncated, tp_stack_regs *rest, bool *rest_in_jit)
{
	unw_cursor_t cursor;
	int			depth = 0;

	*truncated = false;
	rest->pc = 0;
	*rest_in_jit = false;
	if (max <= 0 || unw_init_local2(&cursor, (unw_context_t *) ucontext, UNW_INIT_SIGNAL_FRAME) != 0)
		return 0;
	do
	{
		unw_word_t	ip;
		int			segment;

		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0)
			break;
		segment = tp_code_map_find(map, (uintptr_t) ip);
#if defined(__x86_64__)
		/*
		 * Outside every object the map knows: JIT code if the map is
		 * current; otherwise perhaps an object loaded since (plpgsql.so in
		 * a session's first call), which keeps frame pointers if it is
		 * PostgreSQL's: the rest is theirs to walk.
		 */
		if (segment < 0 && tp_code_map_outside(map, (uintptr_t) ip))
		{
			unw_word_t	sp;
			unw_word_t	fp;

			if (unw_get_reg(&cursor, UNW_REG_SP, &sp) == 0 &&
				unw_get_reg(&cursor, UNW_X86_64_RBP, &fp) == 0)
			{
				rest->pc = (uintptr_t) ip;
				rest->sp = (uintptr_t) sp;
				rest->fp = (uintptr_t) fp;
				*rest_in_jit = tp_code_map_current(map);
			}
			break;
		}
#endif
		if (depth == max)
		{
			*truncated = true;
			break;
		}
		pcs[depth++] = (uintptr_t) ip;
		/* Stepping looks ip's table up: only in a registered one (see tables). */
		if (segment < 0 || !map->unwinds[segment])
			break;
	} while (unw_step(&cursor) > 0);
	return depth;
}
