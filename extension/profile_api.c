/*
 * profile_api.c - profiles readable from SQL, with no backend at all.
 *
 *   traceprof.profile(trace_id, span_id DEFAULT NULL)
 *       one row per distinct stack, the heaviest first: span name, folded
 *       stack (root first, frames joined by ';'), samples, and the CPU (or
 *       wall) nanoseconds they stand for
 *   traceprof.profile_top(trace_id, n DEFAULT 20, span_id DEFAULT NULL)
 *       the n functions with the most self time: samples and nanoseconds
 *       where it was the leaf (self) and where it was anywhere on the stack
 *       (total); self_percent is its share of the self time
 *   traceprof.flamegraph(trace_id, span_id DEFAULT NULL)
 *       the same samples as an interactive SVG flame graph, widths in
 *       microseconds (a sample's weight times its period)
 *   traceprof.flamegraph_diff(trace_id, span_id DEFAULT NULL)
 *       a differential flame graph against the baseline: every retained
 *       sample of spans with the same span names, as Pyroscope's span
 *       profiles define it
 *
 * Each shows only the caller's own samples, unless the caller is a
 * superuser or a member of pg_read_all_stats (as traceprof.spans shows
 * query text).
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "flamegraph.h"
#include "traceprof.h"

PG_FUNCTION_INFO_V1(traceprof_profile_stacks);
PG_FUNCTION_INFO_V1(traceprof_flamegraph);
PG_FUNCTION_INFO_V1(traceprof_flamegraph_diff);
PG_FUNCTION_INFO_V1(traceprof_profile_top);

/* Which samples a call asks for, and may see. */
typedef struct SampleFilter
{
	uint8		trace_id[TP_TRACE_ID_BYTES];
	uint8		span_id[TP_SPAN_ID_BYTES];
	bool		by_span;
	Oid			userid;			/* the caller */
	bool		see_all;		/* superuser or pg_read_all_stats */
	HTAB	   *groups;
	int64		total;
	int64		hidden;			/* samples of the trace (span) from others' statements */
} SampleFilter;

typedef struct StackKey
{
	uint32		span_name_id;
	uint32		depth;
	uint32		frames[TRACEPROF_MAX_FRAMES];
} StackKey;

typedef struct StackGroup
{
	StackKey	key;
	int64		samples;
	int64		nanoseconds;
} StackGroup;

typedef struct FunctionCount
{
	uint32		name_id;		/* hash key */
	int64		self;
	int64		total;
	int64		self_ns;
	int64		total_ns;
	int64		last_counted;	/* sample number, to count a function once per stack */
} FunctionCount;

/* How much of an invalid id an error quotes, in characters. */
#define ECHO_CHARS 64

/* The columns of traceprof.profile() and traceprof.profile_top(). */
#define PROFILE_COLUMNS 4
#define PROFILE_TOP_COLUMNS 6

/*
 * An invalid argument as an error quotes it: whole when short, else its
 * first ECHO_CHARS characters (cut between characters of the database's
 * encoding), "..." and its length.  Quoted whole, a megabyte of input made
 * a megabyte of error message, in the client and in the server log.
 */
static char *
echo_arg(text *arg)
{
	const char *data = VARDATA_ANY(arg);
	int			len = VARSIZE_ANY_EXHDR(arg);
	int			bytes = 0;

	for (int chars = 0; chars < ECHO_CHARS && bytes < len; chars++)
		bytes += pg_mblen(data + bytes);
	if (bytes >= len)
		return psprintf("\"%.*s\"", len, data);
	return psprintf("\"%.*s...\" (%d bytes)", bytes, data, len);
}

void
trace_id_arg(FunctionCallInfo fcinfo, int argno, uint8 *trace_id)
{
	text	   *trace;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("trace_id must not be NULL"),
				 errhint("A trace_id is 32 lowercase hex digits, as traceprof.spans shows it.")));
	trace = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(trace) != TP_TRACE_ID_HEX ||
		!tp_hex_decode(VARDATA_ANY(trace), trace_id, TP_TRACE_ID_BYTES) ||
		tp_id_is_zero(trace_id, TP_TRACE_ID_BYTES))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid trace_id %s", echo_arg(trace)),
				 errhint("A trace_id is 32 lowercase hex digits, not all zero.")));
}

static void
parse_filter(FunctionCallInfo fcinfo, int span_arg, SampleFilter *filter)
{
	memset(filter, 0, sizeof(*filter));
	trace_id_arg(fcinfo, 0, filter->trace_id);
	if (!PG_ARGISNULL(span_arg))
	{
		text	   *span = PG_GETARG_TEXT_PP(span_arg);

		if (VARSIZE_ANY_EXHDR(span) != TP_SPAN_ID_HEX ||
			!tp_hex_decode(VARDATA_ANY(span), filter->span_id, TP_SPAN_ID_BYTES) ||
			tp_id_is_zero(filter->span_id, TP_SPAN_ID_BYTES))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid span_id %s", echo_arg(span)),
					 errhint("A span_id is 16 lowercase hex digits, not all zero.")));
		filter->by_span = true;
	}
	filter->userid = GetUserId();
	filter->see_all = superuser() || has_privs_of_role(filter->userid, ROLE_PG_READ_ALL_STATS);
}

/*
 * Other roles' stacks say what their statements did, which traceprof.spans
 * hides from whoever may not read their query text: the same rule here.
 */
static bool
visible(const SampleFilter *filter, const TraceprofSample *sample)
{
	return filter->see_all || sample->userid == filter->userid;
}

static bool
matches(SampleFilter *filter, const TraceprofSample *sample)
{
	if (memcmp(sample->trace_id, filter->trace_id, TP_TRACE_ID_BYTES) != 0 ||
		(filter->by_span && memcmp(sample->span_id, filter->span_id, TP_SPAN_ID_BYTES) != 0))
		return false;
	if (visible(filter, sample))
		return true;
	/* As the functions count what they show: samples (weights) with a stack. */
	if (sample->depth > 0)
		filter->hidden += sample->weight;
	return false;
}

/*
 * An empty answer would read as "nothing was sampled" (or a mistyped id)
 * when the samples are there but other roles': say so.
 */
static void
notice_if_all_hidden(const SampleFilter *filter, bool any_shown)
{
	if (any_shown || filter->hidden == 0)
		return;
	ereport(NOTICE,
			(errmsg("the %lld samples of this %s were taken in other roles' statements",
					(long long) filter->hidden, filter->by_span ? "span" : "trace"),
			 errdetail("Only superusers and members of pg_read_all_stats see other roles' samples.")));
}

static bool
group_stack(const TraceprofSample *sample, void *arg)
{
	SampleFilter *filter = arg;
	StackKey	key;
	StackGroup *group;
	bool		found;

	/*
	 * A sample whose stack could not be walked says nothing of where the
	 * time went: skipped, as profile_top() and the flame graphs skip it, so
	 * that the four count the same samples.
	 */
	if (!matches(filter, sample) || sample->depth == 0)
		return true;
	memset(&key, 0, sizeof(key));
	key.span_name_id = sample->span_name_id;
	key.depth = sample->depth;
	memcpy(key.frames, sample->frames, sample->depth * sizeof(uint32));
	group = hash_search(filter->groups, &key, HASH_ENTER, &found);
	if (!found)
	{
		group->samples = 0;
		group->nanoseconds = 0;
	}
	group->samples += sample->weight;
	group->nanoseconds += (int64) sample->weight * sample->period_us * 1000;
	return true;
}

static const char *
span_name_of(const StackGroup *group)
{
	return group->key.span_name_id ? function_names_get(group->key.span_name_id) : "";
}

/*
 * The heaviest stacks first, as profile_top() ranks functions; ties by
 * span name, then by frame names from the root (a stack before the longer
 * ones it begins), so that equal samples give rows in the same order.
 */
static int
compare_groups(const void *a, const void *b)
{
	const StackGroup *x = *(StackGroup *const *) a;
	const StackGroup *y = *(StackGroup *const *) b;
	int			cmp;

	if (x->nanoseconds != y->nanoseconds)
		return x->nanoseconds > y->nanoseconds ? -1 : 1;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	if (x->key.span_name_id != y->key.span_name_id &&
		(cmp = strcmp(span_name_of(x), span_name_of(y))) != 0)
		return cmp;
	for (uint32 i = 1; i <= x->key.depth && i <= y->key.depth; i++)
	{
		uint32		fx = x->key.frames[x->key.depth - i];
		uint32		fy = y->key.frames[y->key.depth - i];

		if (fx != fy && (cmp = strcmp(function_names_get(fx), function_names_get(fy))) != 0)
			return cmp;
	}
	if (x->key.depth != y->key.depth)
		return x->key.depth < y->key.depth ? -1 : 1;
	return 0;
}

Datum
traceprof_profile_stacks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SampleFilter filter;
	HASHCTL		info;
	HASH_SEQ_STATUS scan;
	StackGroup *group;
	StackGroup **sorted;
	long		ngroups;
	MemoryContext per_row;
	MemoryContext caller;

	parse_filter(fcinfo, 1, &filter);
	InitMaterializedSRF(fcinfo, 0);
	require_result_columns(((ReturnSetInfo *) fcinfo->resultinfo)->setDesc, PROFILE_COLUMNS, "profile");
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(StackKey);
	info.entrysize = sizeof(StackGroup);
	info.hcxt = CurrentMemoryContext;
	filter.groups = hash_create("traceprof stacks", 256, &info, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	sample_store_scan(group_stack, &filter);
	ngroups = hash_get_num_entries(filter.groups);
	notice_if_all_hidden(&filter, ngroups > 0);
	sorted = palloc(sizeof(StackGroup *) * Max(ngroups, 1));
	ngroups = 0;
	hash_seq_init(&scan, filter.groups);
	while ((group = hash_seq_search(&scan)) != NULL)
		sorted[ngroups++] = group;
	qsort(sorted, ngroups, sizeof(StackGroup *), compare_groups);

	/*
	 * A row's texts (its folded stack, its span name, their copies in the
	 * database's encoding) are freed before the next row: kept until the
	 * call ended they grew with the distinct stacks (~2 kB each, up to a
	 * million of them), beside the tuplestore that copies the rows anyway.
	 */
	per_row = AllocSetContextCreate(CurrentMemoryContext, "traceprof profile row",
									ALLOCSET_DEFAULT_SIZES);
	caller = MemoryContextSwitchTo(per_row);
	for (long g = 0; g < ngroups; g++)
	{
		StringInfoData stack;
		Datum		values[PROFILE_COLUMNS];
		bool		nulls[PROFILE_COLUMNS] = {0};

		/* Up to a million rows, each a few kB to build and store: cancellable. */
		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(per_row);
		group = sorted[g];
		initStringInfo(&stack);
		for (int i = (int) group->key.depth - 1; i >= 0; i--)
		{
			appendStringInfoString(&stack, function_names_get(group->key.frames[i]));
			if (i > 0)
				appendStringInfoChar(&stack, ';');
		}
		values[0] = PointerGetDatum(utf8_to_database_text(span_name_of(group)));
		values[1] = PointerGetDatum(utf8_to_database_text(stack.data));
		values[2] = Int64GetDatum(group->samples);
		values[3] = Int64GetDatum(group->nanoseconds);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(per_row);
	return (Datum) 0;
}

static bool
count_functions(const TraceprofSample *sample, void *arg)
{
	SampleFilter *filter = arg;

	int64		ns = (int64) sample->weight * sample->period_us * 1000;

	if (!matches(filter, sample) || sample->depth == 0)
		return true;
	filter->total++;
	for (uint32 i = 0; i < sample->depth; i++)
	{
		bool		found;
		FunctionCount *count = hash_search(filter->groups, &sample->frames[i], HASH_ENTER, &found);

		if (!found)
		{
			count->self = 0;
			count->total = 0;
			count->self_ns = 0;
			count->total_ns = 0;
			count->last_counted = 0;
		}
		if (i == 0)
		{
			count->self += sample->weight;
			count->self_ns += ns;
		}
		/* Recursion puts a function on a stack more than once: count it once. */
		if (count->last_counted != filter->total)
		{
			count->total += sample->weight;
			count->total_ns += ns;
			count->last_counted = filter->total;
		}
	}
	return true;
}

/*
 * By time first: with samples taken at different rates a sample count
 * ranks functions by how often they were sampled, not by their cost.
 */
static int
compare_self(const void *a, const void *b)
{
	const FunctionCount *x = *(FunctionCount *const *) a;
	const FunctionCount *y = *(FunctionCount *const *) b;

	if (x->self_ns != y->self_ns)
		return x->self_ns > y->self_ns ? -1 : 1;
	if (x->total_ns != y->total_ns)
		return x->total_ns > y->total_ns ? -1 : 1;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(function_names_get(x->name_id), function_names_get(y->name_id));
}

Datum
traceprof_profile_top(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SampleFilter filter;
	HASHCTL		info;
	HASH_SEQ_STATUS scan;
	FunctionCount *count;
	FunctionCount **sorted;
	long		nfunctions;
	int64		self_ns_total = 0;
	int64		limit = PG_ARGISNULL(1) ? INT64_MAX : PG_GETARG_INT32(1);
	MemoryContext per_row;
	MemoryContext caller;

	/* The arguments in their order: a NULL trace_id is named before a bad n. */
	parse_filter(fcinfo, 2, &filter);
	if (limit < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid n " INT64_FORMAT, limit),
				 errhint("n is how many functions to return: 0 or more, or NULL for all of them.")));
	InitMaterializedSRF(fcinfo, 0);
	require_result_columns(((ReturnSetInfo *) fcinfo->resultinfo)->setDesc, PROFILE_TOP_COLUMNS, "profile_top");
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(uint32);
	info.entrysize = sizeof(FunctionCount);
	info.hcxt = CurrentMemoryContext;
	filter.groups = hash_create("traceprof functions", 256, &info, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	sample_store_scan(count_functions, &filter);
	notice_if_all_hidden(&filter, filter.total > 0);

	nfunctions = hash_get_num_entries(filter.groups);
	sorted = palloc(sizeof(FunctionCount *) * Max(nfunctions, 1));
	nfunctions = 0;
	hash_seq_init(&scan, filter.groups);
	while ((count = hash_seq_search(&scan)) != NULL)
	{
		self_ns_total += count->self_ns;
		sorted[nfunctions++] = count;
	}
	qsort(sorted, nfunctions, sizeof(FunctionCount *), compare_self);
	/* As in traceprof.profile(): one row's texts at a time (n NULL: every function). */
	per_row = AllocSetContextCreate(CurrentMemoryContext, "traceprof profile_top row",
									ALLOCSET_DEFAULT_SIZES);
	caller = MemoryContextSwitchTo(per_row);
	for (long i = 0; i < nfunctions && i < limit; i++)
	{
		Datum		values[PROFILE_TOP_COLUMNS];
		bool		nulls[PROFILE_TOP_COLUMNS] = {0};

		MemoryContextReset(per_row);
		count = sorted[i];
		values[0] = PointerGetDatum(utf8_to_database_text(function_names_get(count->name_id)));
		values[1] = Int64GetDatum(count->self);
		values[2] = Int64GetDatum(count->total);
		values[3] = Float8GetDatum(self_ns_total > 0 ? 100.0 * count->self_ns / self_ns_total : 0);
		values[4] = Int64GetDatum(count->self_ns);
		values[5] = Int64GetDatum(count->total_ns);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(per_row);
	return (Datum) 0;
}

/* Flame-graph weights: CPU (or wall) microseconds, exact for period_us. */
#define FLAME_UNIT "\xc2\xb5s"	/* µs, UTF-8 as the SVG is */

/* Samples into a flame-graph builder, frames root first. */
typedef struct FlameCollect
{
	SampleFilter *filter;		/* the caller's; baseline mode ignores its ids */
	HTAB	   *span_names;		/* span_name ids of the target */
	tp_flame_stacks *stacks;
	bool		failed;
} FlameCollect;

static void
add_to_flame(FlameCollect *collect, const TraceprofSample *sample)
{
	const char *frames[TRACEPROF_MAX_FRAMES];

	for (uint32 i = 0; i < sample->depth; i++)
		frames[sample->depth - 1 - i] = function_names_get(sample->frames[i]);

	/*
	 * Widths in time, as traceprof.profile()'s nanoseconds: samples of one
	 * trace may be taken at different rates (sample_hz changed between its
	 * statements), and a sample then stands for more or less time.
	 */
	if (!tp_flame_stacks_add(collect->stacks, frames, sample->depth,
							 (uint64) sample->weight * sample->period_us))
		collect->failed = true;
}

static bool
collect_target(const TraceprofSample *sample, void *arg)
{
	FlameCollect *collect = arg;
	bool		found;

	if (!matches(collect->filter, sample) || sample->depth == 0)
		return true;
	collect->filter->total++;
	add_to_flame(collect, sample);
	if (collect->span_names != NULL)
		hash_search(collect->span_names, &sample->span_name_id, HASH_ENTER, &found);
	return true;
}

static bool
collect_baseline(const TraceprofSample *sample, void *arg)
{
	FlameCollect *collect = arg;

	if (sample->depth == 0 || sample->span_name_id == 0 || !visible(collect->filter, sample) ||
		tp_id_is_zero(sample->trace_id, TP_TRACE_ID_BYTES) ||
		hash_search(collect->span_names, &sample->span_name_id, HASH_FIND, NULL) == NULL)
		return true;
	add_to_flame(collect, sample);
	return true;
}

static text *
svg_result(char *svg, const char *what)
{
	text	   *result;

	if (svg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while drawing the %s", what)));
	PG_TRY();
	{
		result = utf8_to_database_text(svg);
	}
	PG_FINALLY();
	{
		free(svg);
	}
	PG_END_TRY();
	return result;
}

static void
title_for(const SampleFilter *filter, FunctionCallInfo fcinfo, char *title, size_t len)
{
	char		trace[TP_TRACE_ID_HEX + 1];

	tp_hex_encode(filter->trace_id, TP_TRACE_ID_BYTES, trace);
	if (filter->by_span)
		snprintf(title, len, "trace %s, span %s", trace, text_to_cstring(PG_GETARG_TEXT_PP(1)));
	else
		snprintf(title, len, "trace %s", trace);
}

/*
 * Drawing a graph of many frames takes a while: a cancel or a
 * statement_timeout stops it here.  The error longjmps out of common/'s
 * drawing, which keeps what it holds in the stacks for
 * tp_flame_stacks_free.
 */
static bool
flame_check_interrupts(void *arg)
{
	CHECK_FOR_INTERRUPTS();
	return true;
}

/*
 * The builders are malloc'd (common/ knows no memory contexts): freed
 * whatever happens, a cancelled scan or drawing included.
 */
static char *
draw_flame_graphs(FlameCollect *target, FlameCollect *baseline, const char *title)
{
	char	   *svg = NULL;

	PG_TRY();
	{
		if (target->stacks == NULL || (baseline != NULL && baseline->stacks == NULL))
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		tp_flame_stacks_set_check(target->stacks, flame_check_interrupts, NULL);

		/*
		 * The SVG declares itself UTF-8.  Converted to another encoding
		 * (psql -Atc ... > f.svg with a LATIN1 or WIN1252 client) its "µs"
		 * became a byte no XML reader takes, and in a database of another
		 * encoding a name could lose characters to '?': then it is written
		 * in ASCII, the other characters as character references.
		 */
		tp_flame_stacks_set_ascii(target->stacks, GetDatabaseEncoding() != PG_UTF8 ||
								  pg_get_client_encoding() != PG_UTF8);
		sample_store_scan(collect_target, target);
		notice_if_all_hidden(target->filter, target->filter->total > 0);
		if (baseline != NULL)
			sample_store_scan(collect_baseline, baseline);
		if (target->failed || (baseline != NULL && baseline->failed))
			svg = NULL;
		else if (baseline != NULL)
			svg = tp_flame_stacks_diff_svg(target->stacks, baseline->stacks, title, FLAME_UNIT);
		else
			svg = tp_flame_stacks_svg(target->stacks, title, FLAME_UNIT);
	}
	PG_FINALLY();
	{
		tp_flame_stacks_free(target->stacks);
		if (baseline != NULL)
			tp_flame_stacks_free(baseline->stacks);
	}
	PG_END_TRY();
	return svg;
}

Datum
traceprof_flamegraph(PG_FUNCTION_ARGS)
{
	SampleFilter filter;
	FlameCollect collect = {0};
	char		title[128];

	parse_filter(fcinfo, 1, &filter);
	collect.filter = &filter;
	title_for(&filter, fcinfo, title, sizeof(title));
	collect.stacks = tp_flame_stacks_new();
	PG_RETURN_TEXT_P(svg_result(draw_flame_graphs(&collect, NULL, title), "flame graph"));
}

Datum
traceprof_flamegraph_diff(PG_FUNCTION_ARGS)
{
	SampleFilter filter;
	FlameCollect target = {0};
	FlameCollect baseline = {0};
	HASHCTL		info;
	char		title[160];

	parse_filter(fcinfo, 1, &filter);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(uint32);
	info.entrysize = sizeof(uint32);
	info.hcxt = CurrentMemoryContext;
	target.filter = &filter;
	target.span_names = hash_create("traceprof span names", 16, &info,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	baseline.filter = &filter;
	baseline.span_names = target.span_names;
	title_for(&filter, fcinfo, title, sizeof(title) - 32);
	strlcat(title, " vs. its baseline", sizeof(title));
	target.stacks = tp_flame_stacks_new();
	baseline.stacks = tp_flame_stacks_new();
	PG_RETURN_TEXT_P(svg_result(draw_flame_graphs(&target, &baseline, title), "differential flame graph"));
}
