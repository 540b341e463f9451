/*
 * Unit tests: the pool of unwind tables registered with libunwind
 * (dwarf_unwind.c).  The tables registered are this program's own
 * .eh_frame_hdr, under address ranges where nothing is mapped: libunwind
 * never looks them up, the pool's bookkeeping is what is tested.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

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

/* A library built here, whose one function is int name(int). */
static bool
build_library(const char *dir, const char *file, const char *function, char *lib, size_t size)
{
	char		cmd[1024];

	snprintf(lib, size, "%s/%s", dir, file);
	snprintf(cmd, sizeof(cmd),
			 "set -e; cd %s; printf 'int %s(int x) { return x * 3 + 1; }\\n' > %s.c; "
			 "cc -O1 -fPIC -shared -Wl,--build-id -o %s %s.c", dir, function, function, file, function);
	return system(cmd) == 0;
}

static tp_code_map stale;

/*
 * dlclose of an object whose unwind table is registered, then dlopen of
 * another where it was: until the next drain reads the map again, the
 * handler must not let libunwind read the unloaded object's table (at
 * memory now unmapped or the new object's).  The loader's list still has
 * as many objects, often the same node at the same address: the build id
 * tells them apart.  A sample then takes the frame-pointer walk.
 */
TEST(no_libunwind_after_an_unload_until_the_map_is_read_again)
{
	char		dir[] = "/tmp/traceprof-unload-XXXXXX";
	char		lib_a[512];
	char		lib_b[512];
	char		cmd[600];
	void	   *handle;
	void	   *handle_a;
	void	   *fn_a;
	void	   *fn_b;
	ucontext_t	uc;
	uintptr_t	pcs[64];
	bool		truncated;
	bool		rest_in_jit;
	tp_stack_regs rest;
	tp_dwarf_stats before;
	tp_dwarf_stats after;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(build_library(dir, "libunload_a.so", "alpha_function", lib_a, sizeof(lib_a)));
	CHECK(build_library(dir, "libunload_b.so", "omega_function", lib_b, sizeof(lib_b)));
	handle = dlopen(lib_a, RTLD_NOW | RTLD_LOCAL);
	CHECK(handle != NULL);
	if (handle == NULL)
		return;
	fn_a = dlsym(handle, "alpha_function");
	tp_code_map_read(&stale);
	tp_dwarf_register_tables(&stale);
	CHECK(stale.known_objects > 0);
	CHECK(tp_code_map_same_objects(&stale));
	getcontext(&uc);
	CHECK(tp_dwarf_unwind(&uc, &stale, pcs, 64, &truncated, &rest, &rest_in_jit, false) >= 1);

	dlclose(handle);
	CHECK(!tp_code_map_same_objects(&stale));
	handle = dlopen(lib_b, RTLD_NOW | RTLD_LOCAL);
	CHECK(handle != NULL);
	if (handle == NULL)
		return;
	fn_b = dlsym(handle, "omega_function");
	printf("  libunload_b.so %s where libunload_a.so was\n", fn_b == fn_a ? "loaded" : "not loaded");
	CHECK(!tp_code_map_same_objects(&stale));
	tp_dwarf_table_stats(&before);
	getcontext(&uc);
	CHECK(tp_dwarf_unwind(&uc, &stale, pcs, 64, &truncated, &rest, &rest_in_jit, false) == 0);
	tp_dwarf_table_stats(&after);
	CHECK(after.stale_skips == before.stale_skips + 1);

	/* The drain reads the map again: libunwind's again. */
	tp_code_map_read(&stale);
	tp_dwarf_register_tables(&stale);
	CHECK(tp_code_map_same_objects(&stale));
	getcontext(&uc);
	CHECK(tp_dwarf_unwind(&uc, &stale, pcs, 64, &truncated, &rest, &rest_in_jit, false) >= 1);

	/* An object loaded since (a backend's first JIT loading libLLVM) takes nothing away. */
	handle_a = dlopen(lib_a, RTLD_NOW | RTLD_LOCAL);
	CHECK(handle_a != NULL);
	CHECK(tp_code_map_same_objects(&stale));
	getcontext(&uc);
	CHECK(tp_dwarf_unwind(&uc, &stale, pcs, 64, &truncated, &rest, &rest_in_jit, false) >= 1);
	if (handle_a != NULL)
		dlclose(handle_a);
	dlclose(handle);
	fake_map(&map, 0, 0);
	tp_dwarf_register_tables(&map);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/*
 * With the hand-off, libunwind stops at the first frame after the first in
 * code that keeps frame pointers (this program's) and leaves it to the
 * frame-pointer walk; a frame beyond max stops it first, as cut: the
 * hand-off came first, and a stack of exactly max frameless frames under
 * server code lost its "cut" mark (helper-104's review).
 */
static tp_code_map live;

TEST(libunwind_hands_framed_frames_on_and_marks_a_cut_stack)
{
	ucontext_t	uc;
	uintptr_t	pcs[64];
	bool		truncated;
	bool		rest_in_jit;
	tp_stack_regs rest;
	int			depth;

	tp_code_map_read(&live);
	tp_dwarf_register_tables(&live);
	getcontext(&uc);
	depth = tp_dwarf_unwind(&uc, &live, pcs, 64, &truncated, &rest, &rest_in_jit, true);
	CHECK(depth == 1);
	CHECK(!truncated);
	CHECK(rest.pc == (uintptr_t) __builtin_return_address(0));
	CHECK(rest.fp == *(uintptr_t *) __builtin_frame_address(0));
	CHECK(!rest_in_jit);

	getcontext(&uc);
	depth = tp_dwarf_unwind(&uc, &live, pcs, 1, &truncated, &rest, &rest_in_jit, true);
	CHECK(depth == 1);
	CHECK(truncated);
	CHECK(rest.pc == 0);

	/* Without the hand-off libunwind takes it all, up to main. */
	getcontext(&uc);
	depth = tp_dwarf_unwind(&uc, &live, pcs, 64, &truncated, &rest, &rest_in_jit, false);
	CHECK(depth >= 2);
	CHECK(rest.pc == 0);
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
	RUN(no_libunwind_after_an_unload_until_the_map_is_read_again);
	RUN(libunwind_hands_framed_frames_on_and_marks_a_cut_stack);
	return unit_summary();
}
