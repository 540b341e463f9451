/*
 * Unit tests: the pool of unwind tables registered with libunwind
 * (dwarf_unwind.c).  The tables registered are this program's own
 * .eh_frame_hdr, under address ranges where nothing is mapped: libunwind
 * never looks them up, the pool's bookkeeping is what is tested.
 */
#include <link.h>
#include <stdint.h>
#include <stdlib.h>

#include "dwarf_unwind.h"
#include "stack_walk.h"
#include "unit.h"

#define POOL 512

/* Far above anything mapped in a test process, below the canonical limit. */
#define FAKE_BASE ((uintptr_t) 0x700000000000)
#define FAKE_SIZE ((uintptr_t) 0x1000)

static uintptr_t own_eh_frame_hdr;

static int
find_own_table(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void) size;
	(void) arg;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
		{
			own_eh_frame_hdr = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
			return 1;
		}
	return 1;					/* the main program comes first */
}

/* A map of count objects, numbered from first on, each with a table. */
static void
fake_map(tp_code_map *map, int first, int count)
{
	memset(map, 0, sizeof(*map));
	for (int i = 0; i < count; i++)
	{
		map->start[i] = FAKE_BASE + (uintptr_t) (first + i) * FAKE_SIZE;
		map->end[i] = map->start[i] + FAKE_SIZE;
		map->eh_frame_hdr[i] = own_eh_frame_hdr;
	}
	map->count = count;
	map->complete = true;
}

static int
unwound(const tp_code_map *map)
{
	int			n = 0;

	for (int i = 0; i < map->count; i++)
		n += map->unwinds[i];
	return n;
}

static tp_code_map map;

/* Objects in one map: at most TP_CODE_MAP_MAX code segments. */
#define LOADED TP_CODE_MAP_MAX

/*
 * A long-lived process loads and unloads objects: the slots of unloaded
 * ones serve the next, the pool never runs out while no more than a map's
 * worth are loaded at once.
 */
TEST(slots_of_unloaded_objects_are_reused)
{
	tp_dwarf_stats stats;

	for (int round = 0; round < 6; round++)
	{
		/* LOADED objects loaded, all others unloaded: a new set each round. */
		fake_map(&map, round * LOADED, LOADED);
		tp_dwarf_register_tables(&map);
		if (unwound(&map) != LOADED)
			printf("  round %d: %d of %d objects have their table\n", round, unwound(&map), LOADED);
		CHECK(unwound(&map) == LOADED);
	}
	tp_dwarf_table_stats(&stats);
	printf("  %d live of %d, %llu registered, %llu into reused slots\n", stats.live,
		   stats.capacity, stats.registered, stats.reused);
	CHECK(stats.live == LOADED);
	CHECK(stats.refused == 0);
	CHECK(stats.registered == 6 * LOADED);
	CHECK(stats.reused >= 6 * LOADED - POOL);
	fake_map(&map, 0, 0);
	tp_dwarf_register_tables(&map);
	tp_dwarf_table_stats(&stats);
	CHECK(stats.live == 0);
}

/*
 * A slot unlinked while a handler unwinds (on another thread) may be the
 * one that handler is reading: it is not reused until the handler is done.
 * Meanwhile the pool can run out: the objects left out are counted.
 */
TEST(no_reuse_while_a_handler_may_read)
{
	tp_dwarf_stats stats;

	fake_map(&map, 20000, LOADED);
	tp_dwarf_register_tables(&map);
	CHECK(unwound(&map) == LOADED);

	tp_dwarf_reader_enter();	/* a handler is in libunwind now */
	fake_map(&map, 30000, LOADED);
	tp_dwarf_register_tables(&map);
	CHECK(unwound(&map) == LOADED);	/* the pool's other half */
	fake_map(&map, 40000, LOADED);
	tp_dwarf_register_tables(&map);
	tp_dwarf_table_stats(&stats);
	CHECK(unwound(&map) == 0);	/* every free slot may still be read */
	CHECK(stats.refused == LOADED);
	CHECK(stats.live == 0);
	printf("  while a handler unwinds: %d live, %d objects refused\n", stats.live, stats.refused);
	tp_dwarf_register_tables(&map);
	CHECK(unwound(&map) == 0);	/* still inside */
	tp_dwarf_reader_exit();

	tp_dwarf_register_tables(&map);
	tp_dwarf_table_stats(&stats);
	CHECK(unwound(&map) == LOADED);
	CHECK(stats.refused == 0);

	/* Unlinked after the handler left: reusable at once. */
	tp_dwarf_reader_enter();
	tp_dwarf_reader_exit();
	fake_map(&map, 50000, LOADED);
	tp_dwarf_register_tables(&map);
	CHECK(unwound(&map) == LOADED);

	fake_map(&map, 0, 0);
	tp_dwarf_register_tables(&map);
}

int
main(void)
{
	dl_iterate_phdr(find_own_table, NULL);
	if (own_eh_frame_hdr == 0)
	{
		printf("no .eh_frame_hdr in this program\n");
		return 1;
	}
	RUN(slots_of_unloaded_objects_are_reused);
	RUN(no_reuse_while_a_handler_may_read);
	return unit_summary();
}
