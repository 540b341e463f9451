/*
 * test_ring_positions.c - a writer's stale position neither drops a span
 * as if the ring were full nor reports a backlog that wrapped around.
 */
#include "ring_positions.h"
#include "unit.h"

TEST(room)
{
	/* 8 slots, 100 exported: positions up to 108 fit. */
	CHECK(tp_ring_has_room(100, 1, 100, 8));
	CHECK(tp_ring_has_room(107, 1, 100, 8));
	CHECK(!tp_ring_has_room(108, 1, 100, 8));
	CHECK(tp_ring_has_room(105, 3, 100, 8));
	CHECK(!tp_ring_has_room(106, 3, 100, 8));
	CHECK(tp_ring_has_room(0, 8, 0, 8));
	CHECK(!tp_ring_has_room(0, 9, 0, 8));
}

TEST(stale_position)
{
	/*
	 * Read 90, preempted; others wrote on and the exporter reached 100.
	 * position + 1 - exported_upto would wrap to ~2^64: "full".
	 */
	CHECK(tp_ring_has_room(90, 1, 100, 8));
	CHECK(tp_ring_has_room(0, 1, UINT64_C(1) << 40, 8192));
}

TEST(between)
{
	CHECK(tp_ring_between(100, 108) == 8);
	CHECK(tp_ring_between(100, 100) == 0);
	/* The exporter went past a position read earlier. */
	CHECK(tp_ring_between(100, 90) == 0);
}

int
main(void)
{
	RUN(room);
	RUN(stale_position);
	RUN(between);
	return unit_summary();
}
