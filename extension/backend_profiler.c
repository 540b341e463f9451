/*
 * backend_profiler.c - the sampler's life inside one backend.
 *
 * The sampler (common/sampler.c) is started lazily, the first time this
 * backend has something to profile: POSIX timers are not inherited across
 * fork, so every backend arms its own.  With traceprof.profile = traced the
 * timer runs only while a traced span is open and is disarmed otherwise
 * (zero cost when idle).  Samples carry the trace_id and span_id of the
 * span at work, the innermost open span of the statement running (or of
 * its local root span with traceprof.profile_root_span_only); none while
 * only portals kept open from earlier messages are, with the timer then
 * disarmed as outside spans.
 *
 * When the outermost span closes, the samples taken meanwhile are drained,
 * symbolized here (addresses of libraries loaded after fork are only valid
 * in this process) and stored in shared memory as frame-name ids.
 *
 * Parallel workers open no spans: a leader about to run a parallel plan
 * publishes the labels it samples with, and its workers sample with them.
 */
#include "postgres.h"

#include <malloc.h>

#include "access/parallel.h"
#include "access/twophase.h"
#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "chain_names.h"
#include "jit_code.h"
#include "sampler.h"
#include "stack_walk.h"
#include "symbols.h"
#include "traceprof.h"


typedef struct PcEntry
{
	uintptr_t	pc;				/* hash key (with the flag below) */
	bool		is_return_address;
	uint32		name_id;
	bool		named;			/* a real function name, not module+offset */
	bool		in_server;		/* in the postgres executable */
	bool		process_start;	/* outward of main: left out */
	uintptr_t	function_start;	/* 0: unknown */
} PcEntry;

/*
 * Static functions at fixed places in PostgreSQL 15's call chains (see
 * chain_names.h): the postmaster's path to a backend (Debian's build
 * inlines BackendStartup and BackendRun into ServerLoop), and the
 * executor's top levels.  ExecutorRun tail-calls its hook (standard_,
 * traceprof_, pgss_ExecutorRun...), so it may have no frame of its own;
 * a traced statement's is traceprof_traced_ExecutorRun, named to match.
 */
static const tp_chain_rule postgres_chains[] = {
	{"PostmasterMain", "PostgresMain", 1, {"ServerLoop"}},
	{"PostmasterMain", "PostgresMain", 3, {"ServerLoop", "BackendStartup", "BackendRun"}},
	{"PortalRun", "*ExecutorRun", 1, {"PortalRunSelect"}},
	{"PortalRun", "*ExecutorRun", 2, {"PortalRunMulti", "ProcessQuery"}},
	{"standard_ExecutorRun", "Exec*", 1, {"ExecutePlan"}},
};

/*
 * Shapes that only the hook being called can tell apart: a statement's
 * PortalRun is called by exec_simple_query or exec_execute_message, a
 * utility's PortalRunUtility by PortalRunMulti or FillPortalStore.  The
 * hook knows which (its DestReceiver, the portal's strategy), so it
 * captures its own stack once and the rule names those frames for good.
 */
static const tp_chain_rule call_path_rules[CALL_PATH_COUNT] = {
	[CALL_PATH_SIMPLE_QUERY] = {"PostgresMain", "PortalRun", 1, {"exec_simple_query"}},
	[CALL_PATH_EXTENDED_QUERY] = {"PostgresMain", "PortalRun", 1, {"exec_execute_message"}},
	[CALL_PATH_MULTI_QUERY_UTILITY] = {"PortalRun", "*ProcessUtility", 2,
	{"PortalRunMulti", "PortalRunUtility"}},
	[CALL_PATH_STORED_UTILITY] = {"PortalRun", "*ProcessUtility", 2,
	{"FillPortalStore", "PortalRunUtility"}},
};

#define CALL_PATH_MAX_FRAMES 64

typedef struct CapturedPath
{
	bool		done;			/* resolved (named or not): never captured again */
	int			depth;			/* > 0: captured, waiting for the next flush */
	uintptr_t	pcs[CALL_PATH_MAX_FRAMES];
} CapturedPath;

static CapturedPath captured_paths[CALL_PATH_COUNT];

/* Frames stored by the current flush, for traceprof.stats. */
static uint64 flush_named;
static uint64 flush_total;

TP_HOT SamplerState profiler_state = SAMPLER_NOT_STARTED;
static bool span_open;			/* a traced span is open (set at every statement and span) */
static int	started_hz;			/* the running sampler's settings */
static int	started_mode;
static int	started_capacity;
static uint64 dropped_reported;	/* periods lost to sampler ring overflows, counted */
static tp_symbols *symbols;
static HTAB *pc_cache;
/*
 * Addresses named, kept until this many (~3 MB): a backend sampled for
 * long in an interpreter (PL/Perl) meets ever more of its addresses.
 */
#define PC_CACHE_MAX_ENTRIES 65536
static uint64 pc_cache_generation;	/* executor_names generation it reflects */
static tp_jit_code *jit_code;	/* created when a frame is in no module */

/*
 * What a leader samples with, for its parallel workers: one entry per
 * PGPROC, written only by its backend, and only while it runs a parallel
 * plan.  The version is odd while the entry is written, so that a worker
 * copies it without a lock and never waits.
 */
typedef struct LeaderLabels
{
	int32		pid;			/* its writer: a slot outlives its backend */
	bool		sampling;
	uint8		trace_id[TP_TRACE_ID_BYTES];	/* zero: outside traced spans */
	uint8		span_id[TP_SPAN_ID_BYTES];
	uint32		span_name_id;
	Oid			userid;			/* the span's role, who may read its samples */
} LeaderLabels;

typedef struct LeaderEntry
{
	pg_atomic_uint32 version;
	LeaderLabels labels;
} LeaderEntry;

static LeaderEntry *leader_entries;	/* [pgprocno] */
static bool publishing;			/* a parallel plan runs: keep our entry current */
static bool leaders_labels;		/* a worker sampling with its leader's labels */

static bool
want_sampling(int profile, bool in_span)
{
	if (profile == PROFILE_OFF)
		return false;
	return profile == PROFILE_ALL || in_span;
}

/*
 * The timer's signals read shared memory (the backend's state and wait
 * event): stopped before it goes, which a single-user backend unmaps at
 * exit.  An on_shmem_exit callback runs after the aborts and flushes of
 * before_shmem_exit, and before the unmapping, registered earlier.
 */
static void
stop_sampler_at_exit(int code, Datum arg)
{
	tp_sampler_stop();
	profiler_state = SAMPLER_NOT_STARTED;
}

static void
start_sampler(void)
{
	static bool exit_callback;
	char		err[256];

	if (!exit_callback)
	{
		on_shmem_exit(stop_sampler_at_exit, (Datum) 0);
		exit_callback = true;
	}
	if (!tp_sampler_start(traceprof_sample_hz,
						  traceprof_profile_mode == PROFILE_MODE_WALL ? TP_SAMPLER_WALL : TP_SAMPLER_CPU,
						  traceprof_backend_samples, err, sizeof(err)))
	{
		profiler_state = SAMPLER_UNAVAILABLE;
		ereport(WARNING,
				(errmsg("traceprof: cannot start the sampler in this backend: %s", err),
				 errdetail("Spans are still recorded; their samples are not.")));
		return;
	}
	profiler_state = SAMPLER_RUNNING;
	dropped_reported = 0;
	/* Wall time spent waiting shows as a leaf frame naming the wait event. */
	tp_sampler_set_wait_source(traceprof_profile_mode == PROFILE_MODE_WALL ?
							   (const volatile uint32_t *) my_wait_event_info : NULL);
	/*
	 * Waiting for the client's next command is no statement's time: with
	 * profile = all and wall time, an idle connection would fill the rings
	 * with ClientRead.  (Without track_activities the state stays disabled.)
	 */
	StaticAssertStmt(sizeof(MyBEEntry->st_state) == sizeof(int), "st_state is read as an int");
	tp_sampler_set_idle_source(MyBEEntry != NULL ? (const volatile int *) &MyBEEntry->st_state : NULL,
							   1u << STATE_IDLE | 1u << STATE_IDLEINTRANSACTION |
							   1u << STATE_IDLEINTRANSACTION_ABORTED);
	started_hz = traceprof_sample_hz;
	started_mode = traceprof_profile_mode;
	started_capacity = traceprof_backend_samples;
}

static void store_samples(void);
static void publish_labels(void);

static uint64 samples_before_label; /* the sampler's count when it was labelled */

/*
 * A changed rate or mode needs a new timer, a changed traceprof.backend_samples
 * a new ring: keep what was sampled so far.
 */
static void
restart_if_settings_changed(void)
{
	if ((profiler_state != SAMPLER_RUNNING && profiler_state != SAMPLER_PAUSED) ||
		(started_hz == traceprof_sample_hz && started_mode == traceprof_profile_mode &&
		 started_capacity == traceprof_backend_samples))
		return;
	/* The drain (the first loads the symbol tables) is no span's work. */
	if (profiler_state == SAMPLER_RUNNING)
		tp_sampler_pause();
	store_samples();
	tp_sampler_stop();
	start_sampler();

	/*
	 * The new timer counts from zero, and the span still labelled was named
	 * for its samples so far: an old count left here could equal the new
	 * one at the next relabel and leave its later samples unnamed.
	 */
	samples_before_label = 0;
	if (profiler_state == SAMPLER_RUNNING)
	{
		tp_sampler_pause();
		profiler_state = SAMPLER_PAUSED;
	}
}

/*
 * Run or pause the timer as the settings and the open spans require.  A
 * running timer an idle session stopped (wall mode, profile = all) starts
 * again; now and then the signal's handler is checked, which code run in
 * the backend may have reset (PL/Perl's "local %SIG").
 */
static pg_noinline void
arm_for(void)
{
	static uint32 arms;
	bool		want = want_sampling(traceprof_profile, span_open);

	if (profiler_state == SAMPLER_UNAVAILABLE)
		return;
	if (want)
		restart_if_settings_changed();
	if (want && profiler_state != SAMPLER_NOT_STARTED && (++arms & 63) == 0)
		tp_sampler_keep_handler();
	if (want && profiler_state == SAMPLER_NOT_STARTED)
		start_sampler();
	else if (want && profiler_state == SAMPLER_RUNNING)
		tp_sampler_wake();
	else if (want && profiler_state == SAMPLER_PAUSED)
	{
		tp_sampler_resume();
		profiler_state = SAMPLER_RUNNING;
	}
	else if (!want && profiler_state == SAMPLER_RUNNING)
	{
		tp_sampler_pause();
		profiler_state = SAMPLER_PAUSED;
	}
}

/*
 * traceprof.profile is being set (SET, or its revert at transaction end).
 * Turning sampling off takes effect now: otherwise the timer would run on
 * until the next statement starts, sampling its parse and plan for no one.
 * Turning it on waits for the next statement or span.
 */
void
profiler_profile_assigned(int profile)
{
	if (profiler_state == SAMPLER_RUNNING && !want_sampling(profile, span_open))
	{
		tp_sampler_pause();
		profiler_state = SAMPLER_PAUSED;
	}
}

void
profiler_wake(void)
{
	tp_sampler_wake();
}

/* profiler_statement_start's work, when it has any. */
void
profiler_arm_for_statement(const TraceprofSpan *innermost)
{
	span_open = innermost != NULL;
	if (!profiler_dormant())
		arm_for();
	if (unlikely(publishing))
		publish_labels();
}

/*
 * Samples name their span (traceprof.profile(), the span_name label), but
 * most spans get no sample: interning every span's name would cost more
 * than the sampler itself.  So labels carry ids only, and a span's name is
 * interned when it stops being labelled and samples were taken meanwhile;
 * store_sample finds it by span id.
 */
typedef struct SampledSpan
{
	uint8		span_id[TP_SPAN_ID_BYTES];	/* hash key */
	uint32		name_id;
	Oid			userid;			/* the span's role, who may read its samples */
} SampledSpan;

static HTAB *sampled_spans;		/* since the last flush */
static const TraceprofSpan *labelled;	/* the span samples are labelled with */
static uint8 labelled_id[TP_SPAN_ID_BYTES];	/* its id then (the record is reused) */

static SampledSpan *
sampled_span(const uint8 *span_id, bool *found)
{
	if (sampled_spans == NULL)
	{
		HASHCTL		info;

		memset(&info, 0, sizeof(info));
		info.keysize = TP_SPAN_ID_BYTES;
		info.entrysize = sizeof(SampledSpan);
		info.hcxt = TopMemoryContext;
		sampled_spans = hash_create("traceprof sampled spans", 64, &info,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	return hash_search(sampled_spans, span_id, HASH_ENTER, found);
}

/* The span's name id, interned the first time since the last flush. */
static uint32
remember_span_name(const TraceprofSpan *span)
{
	bool		found;
	SampledSpan *entry = sampled_span(span->span_id, &found);

	if (found)
		return entry->name_id;
	entry->userid = span->userid;
	/* pprof's strings are UTF-8, as OTLP's (span_encoding.c). */
	if (span->encoding != PG_UTF8)
		span = span_in_utf8(span);
	/* Packed: the operation is the string after the name. */
	entry->name_id = function_names_intern_span(span->name, span->name + span->name_len + 1);
	return entry->name_id;
}

/* The labelled span, if its record still holds it; else NULL. */
static const TraceprofSpan *
labelled_span(void)
{
	if (labelled != NULL && memcmp(labelled->span_id, labelled_id, TP_SPAN_ID_BYTES) == 0)
		return labelled;
	return NULL;
}

/* The labelled span, if its record still holds it, is named for its samples. */
static void
name_labelled_span(void)
{
	if (labelled_span() != NULL)
		remember_span_name(labelled);
}

static SampledSpan *
sampled_span_of(const uint8 *span_id)
{
	if (sampled_spans == NULL)
		return NULL;
	return hash_search(sampled_spans, span_id, HASH_FIND, NULL);
}

static pg_noinline void
relabel(const TraceprofSpan *innermost, const TraceprofSpan *root)
{
	const TraceprofSpan *next = NULL;
	tp_sample_labels labels;
	tp_sampler_stats before;
	tp_sampler_stats after;

	arm_for();
	if (profiler_state == SAMPLER_NOT_STARTED || profiler_state == SAMPLER_UNAVAILABLE)
		return;
	memset(&labels, 0, sizeof(labels));
	if (innermost != NULL)
	{
		next = traceprof_profile_root_span_only && root ? root : innermost;
		memcpy(labels.trace_id, next->trace_id, TP_TRACE_ID_BYTES);
		memcpy(labels.span_id, next->span_id, TP_SPAN_ID_BYTES);
	}

	/*
	 * A sample between the two counts may carry either labels: both spans
	 * count it (a name too many is harmless, a missing one is not).
	 */
	tp_sampler_get_stats(&before);
	tp_sampler_set_labels(&labels);
	tp_sampler_get_stats(&after);
	if (after.samples != samples_before_label)
		name_labelled_span();
	labelled = next;
	if (next != NULL)
		memcpy(labelled_id, next->span_id, TP_SPAN_ID_BYTES);
	samples_before_label = before.samples;
	if (unlikely(publishing))
		publish_labels();
}

/* profiler_set_span's work, unless the profiler is dormant. */
void
profiler_relabel(const TraceprofSpan *innermost, const TraceprofSpan *root)
{
	span_open = innermost != NULL;
	relabel(innermost, root);
}

/*
 * Code outside every module is JIT code; PostgreSQL's jitdump file names
 * it when jit_profiling_support is on.  Read once the first time, then at
 * each flush (refresh_jit_code).
 */
static const char *
jit_code_name(uintptr_t pc)
{
	if (jit_code == NULL)
	{
		jit_code = tp_jit_code_new();
		if (jit_code == NULL)
			return NULL;
		tp_jit_code_refresh(jit_code);
	}
	return tp_jit_code_lookup(jit_code, pc);
}

/* New JIT code may reuse addresses named before: true if any was loaded. */
static bool
refresh_jit_code(void)
{
	return jit_code != NULL && tp_jit_code_refresh(jit_code) > 0;
}

/* "name", "[jit] name", or "[unknown] (module)" naming the library at least. */
static const PcEntry *
frame_name(uintptr_t pc, bool is_return_address)
{
	PcEntry		key;
	PcEntry    *entry;
	bool		found;
	tp_symbol	symbol;

	memset(&key, 0, sizeof(key));
	key.pc = pc;
	key.is_return_address = is_return_address;
	entry = hash_search(pc_cache, &key, HASH_ENTER, &found);
	if (found)
		return entry;

	/* The list of modules is as of this drain (store_samples refreshed it). */
	tp_symbols_lookup(symbols, pc, is_return_address, &symbol);
	entry->named = true;
	entry->in_server = symbol.in_executable;
	entry->process_start = tp_symbol_is_process_start(symbol.function);
	entry->function_start = symbol.function_start;
	if (executor_names_lookup(symbol.function_start) != NULL &&
		(symbol.function == NULL || symbol.synthetic))
		entry->name_id = function_names_intern(executor_names_lookup(symbol.function_start));
	else if (symbol.function != NULL)
	{
		entry->name_id = function_names_intern(symbol.function);
		entry->named = !symbol.synthetic;
	}
	else
	{
		char		name[TRACEPROF_NAME_LEN];
		const char *module = symbol.module ? strrchr(symbol.module, '/') : NULL;
		const char *jit = symbol.module == NULL ? jit_code_name(pc) : NULL;

		if (jit != NULL)
			snprintf(name, sizeof(name), "[jit] %s", jit);
		else
			snprintf(name, sizeof(name), "[unknown] (%s)",
					 module ? module + 1 : symbol.module ? symbol.module : "no module");
		entry->name_id = function_names_intern(name);
		entry->named = jit != NULL;
	}
	/* A name the full table could not keep is not a function's name. */
	if (entry->name_id == FUNCTION_NAMES_OVERFLOW)
		entry->named = false;
	return entry;
}

/* "IO:DataFileRead": the wait event's type and name, as pg_stat_activity shows them. */
static uint32
wait_event_name_id(uint32 wait_event)
{
	char		name[TRACEPROF_NAME_LEN];
	const char *type = pgstat_get_wait_event_type(wait_event);
	const char *event = pgstat_get_wait_event(wait_event);

	snprintf(name, sizeof(name), "%s:%s", type ? type : "Wait", event ? event : "unknown");
	return function_names_intern(name);
}

/* One sample's frames, for naming static functions by their neighbours. */
typedef struct SampleChain
{
	TraceprofSample *record;
	const char *names[TRACEPROF_MAX_FRAMES];	/* NULL: unnamed */
	uintptr_t	starts[TRACEPROF_MAX_FRAMES];
} SampleChain;

/*
 * A frame as the call-chain rules see it: its name; NULL when it is a
 * static function of the server, a gap they may name; and a name that fits
 * no rule for one of a library (another extension's hook between two
 * PostgreSQL frames is none of PostgreSQL's static functions).
 */
static const char *
chain_name(const PcEntry *frame)
{
	if (frame->named)
		return function_names_get(frame->name_id);
	return frame->in_server ? NULL : "[not the server]";
}

/* Name the frame, and its function from now on (executor_names). */
static void
name_by_chain(size_t index, const char *name, void *arg)
{
	SampleChain *chain = arg;

	chain->record->frames[index] = function_names_intern(name);
	flush_named++;
	executor_names_teach(chain->starts[index], name);
}

static void
store_sample(const tp_sample *sample, void *arg)
{
	TraceprofSample record;
	SampleChain chain;
	uint32		first = 0;
	SampledSpan *span = sampled_span_of(sample->labels.span_id);

	memcpy(record.trace_id, sample->labels.trace_id, TP_TRACE_ID_BYTES);
	memcpy(record.span_id, sample->labels.span_id, TP_SPAN_ID_BYTES);
	record.span_name_id = span ? span->name_id : 0;
	record.time_ns = (int64) sample->time_ns;
	record.pid = MyProcPid;

	/*
	 * The span's role, not the one current now: samples are stored at a
	 * transaction's end, after an abort has restored the role it began with.
	 */
	record.userid = span ? span->userid : GetUserId();
	record.weight = sample->weight;
	record.period_us = (uint32) (1000000 / started_hz);
	record.wall = started_mode == PROFILE_MODE_WALL;
	if (sample->labels.wait_event != 0)
	{
		/* A wait event is no function: never a neighbour in a call chain. */
		chain.names[first] = NULL;
		chain.starts[first] = 0;
		record.frames[first++] = wait_event_name_id(sample->labels.wait_event);
	}
	record.depth = Min(sample->depth + first, TRACEPROF_MAX_FRAMES);
	for (uint32 i = first; i < record.depth; i++)
	{
		const PcEntry *frame = frame_name(sample->pcs[i - first], i > first);

		/* The root side ends at main, however far the walk went. */
		if (frame->process_start && i > first)
		{
			record.depth = i;
			break;
		}
		record.frames[i] = frame->name_id;
		flush_named += frame->named;
		chain.names[i] = chain_name(frame);
		chain.starts[i] = frame->function_start;
	}
	/* Cut at its root side: say so there, where a reader looks for main. */
	if (sample->truncated && record.depth > first + 1)
	{
		record.frames[record.depth - 1] = function_names_intern("[truncated]");
		chain.names[record.depth - 1] = NULL;
		chain.starts[record.depth - 1] = 0;
	}
	flush_total += record.depth - first;
	chain.record = &record;
	tp_chain_names_apply(postgres_chains, lengthof(postgres_chains), chain.names,
						 record.depth, name_by_chain, &chain);
	sample_store_write(&record);
}

/*
 * Capture the calling hook's stack (frame pointers: PostgreSQL and this
 * library keep them) for call_path_rules[path]; named at the next flush,
 * where the symbol table is at hand.  Once per path and backend.
 */
pg_noinline void
profiler_learn_call_path(CallPath path)
{
	tp_stack_bounds bounds;
	CapturedPath *captured = &captured_paths[path];
	tp_stack_regs regs;
	bool		truncated;

	if (captured->done || captured->depth > 0 || profiler_state != SAMPLER_RUNNING)
		return;
	/* The sampler's: reading them again costs ~0.4 ms (glibc reads /proc/self/maps). */
	if (!tp_sampler_stack_bounds(&bounds) || bounds.high == 0)
	{
		captured->done = true;
		return;
	}
	regs.pc = (uintptr_t) profiler_learn_call_path;
	regs.fp = regs.sp = (uintptr_t) __builtin_frame_address(0);
	captured->depth = tp_stack_walk(&regs, &bounds, captured->pcs, CALL_PATH_MAX_FRAMES, &truncated);
}

static void
teach_call_path(size_t index, const char *name, void *arg)
{
	const uintptr_t *starts = arg;

	executor_names_teach(starts[index], name);
}

static void
resolve_call_paths(void)
{
	for (int path = 0; path < CALL_PATH_COUNT; path++)
	{
		CapturedPath *captured = &captured_paths[path];
		const char *names[CALL_PATH_MAX_FRAMES];
		uintptr_t	starts[CALL_PATH_MAX_FRAMES];

		if (captured->done || captured->depth == 0)
			continue;
		for (int i = 0; i < captured->depth; i++)
		{
			const PcEntry *frame = frame_name(captured->pcs[i], i > 0);

			names[i] = chain_name(frame);
			starts[i] = frame->function_start;
		}
		tp_chain_names_apply(&call_path_rules[path], 1, names, captured->depth,
							 teach_call_path, starts);
		captured->done = true;
	}
}

/* Without a symbol table the samples cannot be named: keep the ring clear. */
static void
discard_sample(const tp_sample *sample, void *arg)
{
}

/* Empty a table whose entries start with their key. */
static void
remove_all(HTAB *table)
{
	HASH_SEQ_STATUS scan;
	void	   *entry;

	hash_seq_init(&scan, table);
	while ((entry = hash_seq_search(&scan)) != NULL)
		hash_search(table, entry, HASH_REMOVE, NULL);
}

static tp_symbols *
load_symbols(void)
{
	elog(DEBUG1, "traceprof: reading the symbols of process %d", MyProcPid);
	return tp_symbols_load();
}

/*
 * The postmaster's symbols, with the tables of the server, the C library
 * and this library parsed (a lookup parses its module), for backends and
 * workers to inherit.
 */
static void
preload_symbols(void)
{
	const uintptr_t in_modules[] = {
		(uintptr_t) PostgresMain, (uintptr_t) malloc, (uintptr_t) preload_symbols,
	};
	tp_symbol	symbol;

	symbols = load_symbols();
	if (symbols == NULL)
		return;					/* no /proc, or no memory: backends read their own */
	for (size_t i = 0; i < lengthof(in_modules); i++)
		(void) tp_symbols_lookup(symbols, in_modules[i], false, &symbol);
	/*
	 * Their tables in shared mappings, and the heap they were built in
	 * given back: every fork copied their page tables, and every exit
	 * tore them down, ~5% of a connection's server CPU on this VM.
	 */
	tp_symbols_share(symbols);
	malloc_trim(0);
}

/* Move the sampler's samples, named, into the sample store. */
static void
store_samples(void)
{
	tp_sampler_stats stats;
	bool		symbols_changed;

	/* Most statements end with nothing sampled: two loads, then done. */
	tp_sampler_get_stats(&stats);
	if (stats.waiting == 0 && stats.dropped == dropped_reported)
		return;
	if (pc_cache == NULL)
	{
		HASHCTL		info;

		if (symbols == NULL)	/* not inherited: loaded after the postmaster started */
			symbols = load_symbols();
		memset(&info, 0, sizeof(info));
		info.keysize = offsetof(PcEntry, name_id);
		info.entrysize = sizeof(PcEntry);
		info.hcxt = TopMemoryContext;
		pc_cache = hash_create("traceprof pc names", 4096, &info,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	/*
	 * Libraries loaded or unloaded since the last drain (the loader's
	 * counters moved; otherwise this reads nothing): a sample's address
	 * may be in a module loaded since, or in another library than the one
	 * named there before (dlclose, then dlopen at the same address).  Every
	 * sample in the ring was taken in code loaded by now.
	 */
	symbols_changed = tp_symbols_refresh(symbols);
	if (symbols != NULL)
		resolve_call_paths();
	/*
	 * Names learned from plans since, modules changed, JIT code loaded
	 * (maybe where other JIT code was), or too many: forget the frames
	 * named before.
	 */
	if (pc_cache != NULL && (refresh_jit_code() || symbols_changed ||
							 pc_cache_generation != executor_names_generation() ||
							 hash_get_num_entries(pc_cache) > PC_CACHE_MAX_ENTRIES))
	{
		remove_all(pc_cache);
		pc_cache_generation = executor_names_generation();
	}
	/* A flush inside a span (a changed rate): its samples need its name now. */
	name_labelled_span();
	flush_named = flush_total = 0;
	tp_sampler_drain(symbols ? store_sample : discard_sample, NULL);
	if (sampled_spans != NULL)
		remove_all(sampled_spans);
	sample_store_count_frames(flush_named, flush_total);
	tp_sampler_get_stats(&stats);	/* again: drops while draining count too */
	sample_store_count_lost(stats.dropped - dropped_reported);
	dropped_reported = stats.dropped;
}

static int
leader_entry_count(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

Size
profiler_shmem_size(void)
{
	return mul_size(leader_entry_count(), sizeof(LeaderEntry));
}

void
profiler_shmem_startup(void)
{
	bool		found;

	leader_entries = ShmemInitStruct("traceprof leader labels", profiler_shmem_size(), &found);

	/*
	 * In the postmaster, every preload library loaded: what a backend's
	 * sampler must read of the process (~0.7 ms), and the symbols of the
	 * modules nearly every sample lands in (~50 ms), read once here and
	 * inherited by fork.  Not in each backend's first sampled statement,
	 * nor at the end of every parallel worker that took a sample, where
	 * the leader, and its query, waited for them.  Modules loaded later
	 * (PL/Perl, LLVM) are read by each process that samples in them.
	 */
	if (!IsUnderPostmaster)
	{
		tp_sampler_prepare();
		if (symbols == NULL)
			preload_symbols();
	}
	if (found)
		return;
	for (int i = 0; i < leader_entry_count(); i++)
	{
		pg_atomic_init_u32(&leader_entries[i].version, 0);
		memset(&leader_entries[i].labels, 0, sizeof(LeaderLabels));
	}
}

/*
 * Write our entry: the labels samples carry now, and whether the timer
 * runs.  The span's name is interned first: nothing in between may fail.
 */
static void
publish_labels(void)
{
	LeaderEntry *entry;
	const TraceprofSpan *span = labelled_span();
	uint32		name_id = span != NULL ? remember_span_name(span) : 0;
	uint32		version;

	if (leader_entries == NULL || MyProc == NULL || MyProc->pgprocno >= leader_entry_count())
		return;
	entry = &leader_entries[MyProc->pgprocno];
	version = pg_atomic_read_u32(&entry->version);
	pg_atomic_write_u32(&entry->version, version + 1);
	pg_write_barrier();
	entry->labels.pid = MyProcPid;
	entry->labels.sampling = publishing && profiler_state == SAMPLER_RUNNING;
	entry->labels.span_name_id = name_id;
	if (span != NULL)
	{
		memcpy(entry->labels.trace_id, span->trace_id, TP_TRACE_ID_BYTES);
		memcpy(entry->labels.span_id, span->span_id, TP_SPAN_ID_BYTES);
		entry->labels.userid = span->userid;
	}
	else
	{
		memset(entry->labels.trace_id, 0, TP_TRACE_ID_BYTES);
		memset(entry->labels.span_id, 0, TP_SPAN_ID_BYTES);
		entry->labels.userid = InvalidOid;
	}
	pg_write_barrier();
	pg_atomic_write_u32(&entry->version, version + 2);
}

/*
 * An executor started while the timer runs.  If it JIT-compiled, this
 * backend may just have loaded libLLVM, whose code the run's samples
 * (LLVM optimizing and emitting the code) land in: the sampler must know
 * it before then, not at the statement's end.
 */
void
profiler_notice_loads(void)
{
	tp_sampler_notice_loads();
}

/*
 * A plan that may launch workers starts while the timer runs: publish our
 * labels, and keep them current (relabel) until nothing runs any more.
 */
void
profiler_parallel_plan_starts(void)
{
	publishing = true;
	publish_labels();
}

/*
 * traceprof.utility_sampling was set on by a statement that has not reset
 * it: one under way, or one that failed.
 */
bool		profiler_utility_sampling_set;

/*
 * The same for a utility statement that may launch workers while the timer
 * runs (a btree build, VACUUM's index passes).  Those workers run no hook of
 * ours: the one moment our code runs in them is when they restore their
 * leader's settings, so traceprof.utility_sampling is on among them.  It is
 * set for the session, not saved for the statement: VACUUM and CREATE INDEX
 * CONCURRENTLY commit transactions of their own, which would pop a saved
 * value mid-statement.  An error after such a commit leaves it on (the
 * abort goes back to what that commit kept), until the session's next
 * commit outside such a statement (profiler_utility_sampling_reset).
 */
void
profiler_utility_workers_may_start(void)
{
	profiler_parallel_plan_starts();
	(void) set_config_option("traceprof.utility_sampling", "on", PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, 0, false);
	profiler_utility_sampling_set = true;
}

/* The utility statement ended: its workers are gone, the setting goes back to its default. */
void
profiler_utility_workers_done(void)
{
	(void) set_config_option("traceprof.utility_sampling", NULL, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, 0, false);
	profiler_utility_sampling_set = false;
}

/*
 * A transaction is about to commit, no utility statement under way, and
 * the setting may have been left on (profiler_utility_sampling_left).  It goes back to its default, and the commit keeps that; an
 * abort could not, it undoes the reset with the rest of its transaction.
 * An error here (before the commit) fails the transaction as any would; in
 * parallel mode no setting may change.
 */
void
profiler_utility_sampling_reset(void)
{
	if (IsInParallelMode())
		return;
	(void) set_config_option("traceprof.utility_sampling", NULL, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, 0, false);
	profiler_utility_sampling_set = false;
}

/* A worker's copy of its leader's entry: false if the leader is not sampling. */
static bool
read_leader_labels(LeaderLabels *copy)
{
	PGPROC	   *leader = MyProc != NULL ? MyProc->lockGroupLeader : NULL;
	LeaderEntry *entry;

	if (leader_entries == NULL || leader == NULL || leader == MyProc ||
		leader->pgprocno >= leader_entry_count())
		return false;
	entry = &leader_entries[leader->pgprocno];
	/* The leader writes rarely and briefly: a few tries, never a wait. */
	for (int attempt = 0; attempt < 100; attempt++)
	{
		uint32		version = pg_atomic_read_u32(&entry->version);

		if ((version & 1) == 0)
		{
			pg_read_barrier();
			memcpy(copy, &entry->labels, sizeof(LeaderLabels));
			pg_read_barrier();
			if (pg_atomic_read_u32(&entry->version) == version)
				return copy->sampling && copy->pid == leader->pid;
		}
		pg_spin_delay();
	}
	return false;
}

/*
 * A parallel worker's query starts (in place of profiler_statement_start),
 * or a utility statement's worker restored traceprof.utility_sampling.  It
 * opens no span, so it samples as its leader does: inside the leader's span
 * when the leader samples one, with the leader's labels and name.  The
 * worker's transaction end (XACT_EVENT_PARALLEL_COMMIT or _ABORT) stores
 * its samples before the leader learns that it finished.
 */
void
profiler_worker_statement_start(void)
{
	LeaderLabels leader;
	tp_sample_labels labels;
	SampledSpan *entry;
	bool		found;

	if (profiler_dormant())
		return;
	span_open = read_leader_labels(&leader) && !tp_id_is_zero(leader.trace_id, TP_TRACE_ID_BYTES);
	arm_for();
	if (!span_open || profiler_state != SAMPLER_RUNNING)
		return;
	memset(&labels, 0, sizeof(labels));
	memcpy(labels.trace_id, leader.trace_id, TP_TRACE_ID_BYTES);
	memcpy(labels.span_id, leader.span_id, TP_SPAN_ID_BYTES);
	tp_sampler_set_labels(&labels);
	/*
	 * store_sample names samples by span id: the leader interned the name.
	 * They are the leader's span's role's to read, not this worker's.
	 */
	entry = sampled_span(leader.span_id, &found);
	entry->name_id = leader.span_name_id;
	entry->userid = leader.userid;
	leaders_labels = true;
}

/*
 * profiler_flush, once the sampler was started: called when nothing runs
 * (the outermost statement or its transaction ended).  A leader's workers
 * are gone then, and a worker's query is done.
 */
void
profiler_store_samples(void)
{
	if (unlikely(publishing))
	{
		publishing = false;
		publish_labels();
	}
	if (unlikely(leaders_labels))
	{
		leaders_labels = false;
		span_open = false;
		arm_for();
	}
	store_samples();
}
