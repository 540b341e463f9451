/*
 * dwarf_unwind.c - libunwind where the frame-pointer chain breaks (see
 * dwarf_unwind.h).
 */
/*
 * Not UNW_LOCAL_ONLY: libunwind's local-only flavour calls its own
 * find_proc_info (dl_iterate_phdr) directly; the generic one
 * (libunwind-generic) calls the address space's, which is ours (below).
 */
#include "dwarf_unwind.h"

#include <link.h>
#include <libunwind.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "log.h"

/*
 * libunwind finds a frame's unwind table with dl_iterate_phdr, which takes
 * the dynamic loader's lock.  A sample landing while its thread holds that
 * lock (inside dlopen, dlclose or dl_iterate_phdr: a library's first call,
 * LOAD, our own map reads) made the handler wait for the thread it
 * interrupted, for ever, or read a link map half updated.  So the loaded
 * objects' tables are kept here, found outside the handler, and the local
 * address space's find_proc_info is ours: it looks only in them, without
 * a lock, and the handler lets libunwind look up no PC outside them.
 *
 * They were registered with libunwind instead (_U_dyn_register), which
 * looks in such tables without a lock too; but it never frees what it
 * parses from them (its put_unwind_info of "dynamic" information does
 * nothing), and every lookup its cache missed (a sample's leaf: a new
 * address each time) kept ~150 bytes for good: a backend profiled in
 * PL/Perl or JIT code grew by megabytes an hour.  What our find_proc_info
 * returns is libunwind's ordinary table information, which it frees.
 *
 * The tables live in a fixed pool that the handler reads without a lock,
 * so a slot is written only while no handler can read it: a new slot is
 * filled before it is published (TABLE_LIVE, with release order); a slot
 * whose object was unloaded is withdrawn (TABLE_CANCELLED), then reused
 * only after a grace period.  The handler brackets its use of libunwind
 * with a counter that is odd while it unwinds (tp_dwarf_reader_enter/exit):
 * a slot withdrawn while the counter was even can be reached by no handler
 * (one that starts later sees it withdrawn); one withdrawn while it was odd
 * waits until the counter has moved on, i.e. that handler has returned.
 * The sampled thread's own drains run with the sampler's signal blocked,
 * so there the counter is always even and slots are reused at once; the
 * wait matters when another thread drains.
 *
 * When the pool is full, the objects left out are counted
 * (tp_dwarf_table_stats), warned about once per process, and their frames
 * end the libunwind walk as those of an object loaded since do.
 */
#define MAX_TABLES 512

typedef enum table_state
{
	TABLE_FREE,					/* never used, or reusable */
	TABLE_LIVE,					/* registered with libunwind */
	TABLE_CANCELLED,			/* unlinked, maybe still read by a handler */
} table_state;

static unw_dyn_info_t tables[MAX_TABLES];
static _Atomic table_state table_states[MAX_TABLES];
static unsigned long cancelled_at[MAX_TABLES];	/* readers when unlinked */
static atomic_int table_count;	/* slots ever used: [0, table_count) */

/* Odd while a handler unwinds with libunwind (see above). */
static atomic_ulong readers;

/* Samples not given to libunwind: objects unloaded since the map was read. */
static atomic_ulong stale_skips;

static unsigned long long tables_registered;
static unsigned long long tables_reused;
static int	tables_refused;		/* of the last registration: no room */
static bool warned_full;

void
tp_dwarf_reader_enter(void)
{
	atomic_fetch_add_explicit(&readers, 1, memory_order_seq_cst);
}

void
tp_dwarf_reader_exit(void)
{
	atomic_fetch_add_explicit(&readers, 1, memory_order_release);
}

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

/* A slot no handler can read any more, -1: none (the pool is full). */
static int
free_slot(void)
{
	unsigned long now;

	for (int t = 0; t < table_count; t++)
		if (table_states[t] == TABLE_FREE)
			return t;
	if (table_count < MAX_TABLES)
		return table_count++;
	now = atomic_load_explicit(&readers, memory_order_acquire);
	for (int t = 0; t < table_count; t++)
		if (table_states[t] == TABLE_CANCELLED &&
			((cancelled_at[t] & 1) == 0 || cancelled_at[t] != now))
		{
			table_states[t] = TABLE_FREE;
			tables_reused++;
			return t;
		}
	return -1;
}

/*
 * The live registration of segment i of map, registering it if new; -1:
 * none (*full: for want of a slot).
 */
static int
table_of(const tp_code_map *map, int i, bool *full)
{
	const uint8_t *table;
	uint32_t	entries;
	unw_dyn_info_t *di;
	int			t;

	*full = false;
	for (t = 0; t < table_count; t++)
		if (table_states[t] == TABLE_LIVE && tables[t].start_ip == map->start[i] &&
			tables[t].end_ip == map->end[i] && tables[t].u.rti.segbase == map->eh_frame_hdr[i])
			return t;
	if (map->eh_frame_hdr[i] == 0 ||
		(table = search_table(map->eh_frame_hdr[i], &entries)) == NULL)
		return -1;
	if ((t = free_slot()) < 0)
	{
		*full = true;
		return -1;
	}
	di = &tables[t];
	memset(di, 0, sizeof(*di));
	di->start_ip = map->start[i];
	di->end_ip = map->end[i];
	di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di->u.rti.segbase = map->eh_frame_hdr[i];
	di->u.rti.table_data = (unw_word_t) table;
	di->u.rti.table_len = entries * 8 / sizeof(unw_word_t);	/* 8-byte entries, in words */
	atomic_store_explicit(&table_states[t], TABLE_LIVE, memory_order_release);
	tables_registered++;
	return t;
}

/*
 * libunwind's search of a table in .eh_frame_hdr form: exported by it (the
 * remote unwinders' find_proc_info call it), though no header declares it.
 */
extern int	_Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
												unw_dyn_info_t *di, unw_proc_info_t *pi,
												int need_unwind_info, void *arg);

/* The local address space's find_proc_info: the tables above, nothing else. */
static int
find_in_tables(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			   int need_unwind_info, void *arg)
{
	int			count = atomic_load_explicit(&table_count, memory_order_acquire);

	for (int t = 0; t < count; t++)
		if (atomic_load_explicit(&table_states[t], memory_order_acquire) == TABLE_LIVE &&
			ip >= tables[t].start_ip && ip < tables[t].end_ip)
			return _Ux86_64_dwarf_search_unwind_table(as, ip, &tables[t], pi,
													   need_unwind_info, arg);
	return -UNW_ENOINFO;
}

void
tp_dwarf_register_tables(tp_code_map *map)
{
	bool		cancelled = false;
	int			refused = 0;

	/* libunwind caches what it learns per thread: no locks in the handler. */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	unw_get_accessors(unw_local_addr_space)->find_proc_info = find_in_tables;

	/*
	 * Unloaded objects' tables first, so that their slots can serve the
	 * objects loaded since: their addresses may be another's next.
	 */
	for (int t = 0; t < table_count; t++)
	{
		bool		mapped = false;

		if (table_states[t] != TABLE_LIVE)
			continue;
		for (int i = 0; i < map->count && !mapped; i++)
			mapped = tables[t].start_ip == map->start[i] && tables[t].end_ip == map->end[i] &&
				tables[t].u.rti.segbase == map->eh_frame_hdr[i];
		if (mapped)
			continue;
		/* Withdrawn before the handlers' count is read. */
		atomic_store_explicit(&table_states[t], TABLE_CANCELLED, memory_order_seq_cst);
		cancelled_at[t] = atomic_load_explicit(&readers, memory_order_seq_cst);
		cancelled = true;
	}
	for (int i = 0; i < map->count; i++)
	{
		bool		full;
		int			t = table_of(map, i, &full);

		map->unwinds[i] = t >= 0;
		refused += full;
	}
	tables_refused = refused;
	if (refused > 0 && !warned_full)
	{
		warned_full = true;
		tp_warn("sampler: all %d slots for unwind tables are taken: %d code segment%s "
				"loaded since cannot be unwound by libunwind (their samples end there)",
				MAX_TABLES, refused, refused == 1 ? "" : "s");
	}

	/*
	 * libunwind's cache of what it parsed is keyed by address: another
	 * object may now sit where an unloaded one was.
	 */
	if (cancelled)
		unw_flush_cache(unw_local_addr_space, 0, 0);
}

void
tp_dwarf_table_stats(tp_dwarf_stats *stats)
{
	int			live = 0;

	for (int t = 0; t < table_count; t++)
		live += table_states[t] == TABLE_LIVE;
	stats->capacity = MAX_TABLES;
	stats->live = live;
	stats->refused = tables_refused;
	stats->registered = tables_registered;
	stats->reused = tables_reused;
	stats->stale_skips = atomic_load_explicit(&stale_skips, memory_order_relaxed);
}

#if defined(__x86_64__)
/* The frame the cursor is at, for a frame-pointer walk to go on from. */
static bool
hand_off(unw_cursor_t *cursor, unw_word_t ip, tp_stack_regs *rest)
{
	unw_word_t	sp;
	unw_word_t	fp;

	if (unw_get_reg(cursor, UNW_REG_SP, &sp) != 0 ||
		unw_get_reg(cursor, UNW_X86_64_RBP, &fp) != 0)
		return false;
	rest->pc = (uintptr_t) ip;
	rest->sp = (uintptr_t) sp;
	rest->fp = (uintptr_t) fp;
	return true;
}
#endif

int
tp_dwarf_unwind(void *ucontext, const tp_code_map *map, uintptr_t *pcs, int max,
				bool *truncated, tp_stack_regs *rest, bool *rest_in_jit,
				bool hand_off_framed)
{
	unw_cursor_t cursor;
	int			depth = 0;

	*truncated = false;
	rest->pc = 0;
	*rest_in_jit = false;
	if (max <= 0)
		return 0;

	/*
	 * An object unloaded since the map was read keeps its registration
	 * until the next drain, and another object (or JIT code) may sit where
	 * it was: libunwind would read its table in memory unmapped or not its
	 * own.  No libunwind then: the caller's frame-pointer walk, whose
	 * reads are all checked, takes the sample.
	 */
	if (!tp_code_map_same_objects(map))
	{
		atomic_fetch_add_explicit(&stale_skips, 1, memory_order_relaxed);
		return 0;
	}
	tp_dwarf_reader_enter();
	if (unw_init_local2(&cursor, (unw_context_t *) ucontext, UNW_INIT_SIGNAL_FRAME) != 0)
	{
		tp_dwarf_reader_exit();
		return 0;
	}
	do
	{
		unw_word_t	ip;
		int			segment;

		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0)
			break;
		/* A frame beyond max, whoever walks it: the stack is cut. */
		if (depth == max)
		{
			*truncated = true;
			break;
		}
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
			if (hand_off(&cursor, ip, rest))
				*rest_in_jit = tp_code_map_current(map);
			break;
		}
		if (hand_off_framed && depth > 0 && tp_code_map_framed(map, (uintptr_t) ip) &&
			hand_off(&cursor, ip, rest))
			break;
#endif
		pcs[depth++] = (uintptr_t) ip;
		/* Stepping looks ip's table up: only in a registered one (see tables). */
		if (segment < 0 || !map->unwinds[segment])
			break;
	} while (unw_step(&cursor) > 0);
	tp_dwarf_reader_exit();
	return depth;
}
