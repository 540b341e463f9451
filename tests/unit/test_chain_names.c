/* Unit tests: naming unnamed frames by the named frames around them. */
#include "unit.h"

#include "chain_names.h"

static const tp_chain_rule rules[] = {
	{"PostmasterMain", "PostgresMain", 3, {"ServerLoop", "BackendStartup", "BackendRun"}},
	{"standard_ExecutorRun", "Exec*", 1, {"ExecutePlan"}},
	{"PortalRun", "*ExecutorRun", 1, {"PortalRunSelect"}},
};

typedef struct named_frames
{
	const char *names[16];
	size_t		calls;
} named_frames;

static void
remember(size_t index, const char *name, void *arg)
{
	named_frames *got = arg;

	got->names[index] = name;
	got->calls++;
}

TEST(exact_shapes_are_named)
{
	/* leaf first */
	const char *stack[] = {"ExecSort", NULL, "standard_ExecutorRun", "ExecutorRun",
		"PostgresMain", NULL, NULL, NULL, "PostmasterMain", "main"};
	named_frames got = {0};

	CHECK(tp_chain_names_apply(rules, 3, stack, 10, remember, &got) == 4);
	CHECK(got.calls == 4);
	CHECK_STR(got.names[1], "ExecutePlan");
	CHECK_STR(got.names[5], "BackendRun");
	CHECK_STR(got.names[6], "BackendStartup");
	CHECK_STR(got.names[7], "ServerLoop");
	CHECK(got.names[0] == NULL && got.names[2] == NULL);
}

TEST(other_counts_and_neighbours_stay_unnamed)
{
	/* two frames where the rule expects three; a callee not matching Exec* */
	const char *stack[] = {"printtup", NULL, "standard_ExecutorRun",
		"PostgresMain", NULL, NULL, "PostmasterMain"};
	/* an unnamed leaf and an unnamed root have only one neighbour */
	const char *open_ends[] = {NULL, "standard_ExecutorRun", "PostgresMain", NULL};
	named_frames got = {0};

	CHECK(tp_chain_names_apply(rules, 3, stack, 7, remember, &got) == 0);
	CHECK(tp_chain_names_apply(rules, 3, open_ends, 4, remember, &got) == 0);
	CHECK(got.calls == 0);
}

TEST(prefix_patterns_match_prefixes_only)
{
	const char *stack[] = {"Executor", NULL, "standard_ExecutorRun"};
	const char *match[] = {"ExecHashJoin", NULL, "standard_ExecutorRun"};
	named_frames got = {0};

	CHECK(tp_chain_names_apply(rules, 3, stack, 3, remember, &got) == 1);	/* "Exec" prefix */
	CHECK(tp_chain_names_apply(rules, 3, match, 3, remember, &got) == 1);
	CHECK(tp_chain_names_apply(rules, 3, (const char *[]) {"Exe", NULL, "standard_ExecutorRun"},
							   3, remember, &got) == 0);
	/* suffixes: any hook's ExecutorRun, but not a longer name */
	CHECK(tp_chain_names_apply(rules, 3, (const char *[]) {"pgss_ExecutorRun", NULL, "PortalRun"},
							   3, remember, &got) == 1);
	CHECK_STR(got.names[1], "PortalRunSelect");
	CHECK(tp_chain_names_apply(rules, 3, (const char *[]) {"ExecutorRunX", NULL, "PortalRun"},
							   3, remember, &got) == 0);
	CHECK(tp_chain_names_apply(rules, 3, (const char *[]) {"Run", NULL, "PortalRun"},
							   3, remember, &got) == 0);
}

TEST(frames_named_earlier_fit_the_gap)
{
	const tp_chain_rule multi = {"PortalRun", "*ProcessUtility", 2, {"PortalRunMulti", "PortalRunUtility"}};
	/* PortalRunUtility already learned (from another portal strategy) */
	const char *learned[] = {"traceprof_ProcessUtility", "PortalRunUtility", NULL, "PortalRun"};
	const char *wrong[] = {"traceprof_ProcessUtility", "FillPortalStore", NULL, "PortalRun"};
	const char *done[] = {"traceprof_ProcessUtility", "PortalRunUtility", "PortalRunMulti", "PortalRun"};
	named_frames got = {0};

	CHECK(tp_chain_names_apply(&multi, 1, learned, 4, remember, &got) == 1);
	CHECK_STR(got.names[2], "PortalRunMulti");
	CHECK(got.names[1] == NULL);
	CHECK(tp_chain_names_apply(&multi, 1, wrong, 4, remember, &got) == 0);
	CHECK(tp_chain_names_apply(&multi, 1, done, 4, remember, &got) == 0);
	CHECK(got.calls == 1);
}

int
main(void)
{
	RUN(exact_shapes_are_named);
	RUN(frames_named_earlier_fit_the_gap);
	RUN(other_counts_and_neighbours_stay_unnamed);
	RUN(prefix_patterns_match_prefixes_only);
	return unit_summary();
}
