/*
 * executor_names.c - names for static functions, learned from the pointers
 * PostgreSQL keeps to them.
 *
 * Debian's postgres is stripped: ExecSeqScan, ExecHashJoin, ExecInterpExpr,
 * AllocSetAlloc, tts_buffer_heap_getsomeattrs and many more hot functions
 * are static and have no symbol.  But PostgreSQL calls them through
 * pointers whose meaning is known:
 * - every PlanState of a started plan holds its node's function
 *   (ExecProcNodeReal), and the node type says which function that is;
 * - an interpreted ExprState holds ExecInterpExpr (evalfunc_private);
 * - exported method tables hold the rest: the memory context methods of
 *   TopMemoryContext (aset.c), the four TupleTableSlotOps (execTuples.c)
 *   and the heap table access method (heapam_handler.c).
 * So the backend learns those addresses and names the sampled frames that
 * start there (PostgreSQL 15's function names; only frames that have no
 * symbol of their own take them).
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "executor/execExpr.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "nodes/makefuncs.h"
#include "nodes/memnodes.h"
#include "nodes/nodeFuncs.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "traceprof.h"

typedef struct LearnedFunction
{
	uintptr_t	start;			/* hash key */
	const char *name;
} LearnedFunction;

static HTAB *learned;
static uint64 generation;		/* grows when a new function is learned */

/* The function ExecInitNode installs for each node type (PostgreSQL 15). */
static const char *
node_function(NodeTag tag)
{
	switch (tag)
	{
		case T_ResultState: return "ExecResult";
		case T_ProjectSetState: return "ExecProjectSet";
		case T_ModifyTableState: return "ExecModifyTable";
		case T_AppendState: return "ExecAppend";
		case T_MergeAppendState: return "ExecMergeAppend";
		case T_RecursiveUnionState: return "ExecRecursiveUnion";
		case T_SeqScanState: return "ExecSeqScan";
		case T_SampleScanState: return "ExecSampleScan";
		case T_IndexScanState: return "ExecIndexScan";
		case T_IndexOnlyScanState: return "ExecIndexOnlyScan";
		case T_BitmapHeapScanState: return "ExecBitmapHeapScan";
		case T_TidScanState: return "ExecTidScan";
		case T_TidRangeScanState: return "ExecTidRangeScan";
		case T_SubqueryScanState: return "ExecSubqueryScan";
		case T_FunctionScanState: return "ExecFunctionScan";
		case T_TableFuncScanState: return "ExecTableFuncScan";
		case T_ValuesScanState: return "ExecValuesScan";
		case T_CteScanState: return "ExecCteScan";
		case T_NamedTuplestoreScanState: return "ExecNamedTuplestoreScan";
		case T_WorkTableScanState: return "ExecWorkTableScan";
		case T_ForeignScanState: return "ExecForeignScan";
		case T_CustomScanState: return "ExecCustomScan";
		case T_NestLoopState: return "ExecNestLoop";
		case T_MergeJoinState: return "ExecMergeJoin";
		case T_HashJoinState: return "ExecHashJoin";
		case T_MaterialState: return "ExecMaterial";
		case T_MemoizeState: return "ExecMemoize";
		case T_SortState: return "ExecSort";
		case T_IncrementalSortState: return "ExecIncrementalSort";
		case T_GroupState: return "ExecGroup";
		case T_AggState: return "ExecAgg";
		case T_WindowAggState: return "ExecWindowAgg";
		case T_UniqueState: return "ExecUnique";
		case T_GatherState: return "ExecGather";
		case T_GatherMergeState: return "ExecGatherMerge";
		case T_SetOpState: return "ExecSetOp";
		case T_LockRowsState: return "ExecLockRows";
		case T_LimitState: return "ExecLimit";
		default: return NULL;	/* Hash, BitmapAnd/Or, BitmapIndexScan: MultiExec* */
	}
}

/*
 * name is a string constant or lives in TopMemoryContext.  The first name
 * seen for an address keeps it: a node type can have variants (parallel
 * hash join, the Agg strategies), and the compiler may fold identical
 * functions into one.
 */
static void
learn(const void *function, const char *name)
{
	/* Addresses learned already: every plan repeats them (no hash probe). */
	static uintptr_t recent[64];
	uintptr_t	start = (uintptr_t) function;
	uintptr_t  *memo = &recent[(start >> 4) % lengthof(recent)];
	LearnedFunction *entry;
	bool		found;

	if (start == 0 || *memo == start)
		return;
	entry = hash_search(learned, &start, HASH_ENTER, &found);
	if (!found)
	{
		entry->name = name;
		generation++;
	}
	*memo = start;
}

static bool
learn_node(PlanState *node, void *context)
{
	const char *name;

	if (node == NULL)
		return false;
	name = node_function(nodeTag(node));
	if (name != NULL)
		learn(node->ExecProcNodeReal, name);
	return planstate_tree_walker(node, learn_node, context);
}

/* tts_<kind>_<callback>: execTuples.c's naming for every slot callback. */
static void
learn_slot_ops(const TupleTableSlotOps *ops, const char *kind)
{
	struct
	{
		const void *function;
		const char *callback;
	}			callbacks[] = {
		{ops->init, "init"},
		{ops->release, "release"},
		{ops->clear, "clear"},
		{ops->getsomeattrs, "getsomeattrs"},
		{ops->getsysattr, "getsysattr"},
		{ops->materialize, "materialize"},
		{ops->copyslot, "copyslot"},
		{ops->get_heap_tuple, "get_heap_tuple"},
		{ops->get_minimal_tuple, "get_minimal_tuple"},
		{ops->copy_heap_tuple, "copy_heap_tuple"},
		{ops->copy_minimal_tuple, "copy_minimal_tuple"},
	};

	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	for (int i = 0; i < lengthof(callbacks); i++)
		if (callbacks[i].function != NULL)
			learn(callbacks[i].function, psprintf("tts_%s_%s", kind, callbacks[i].callback));
	MemoryContextSwitchTo(old);
}

/*
 * ExecInterpExpr, the expression interpreter, is static: learnt from an
 * expression of our own.  ExecReadyInterpretedExpr hands a program of four
 * steps or more to it (a shorter one may get an ExecJust* fast path), and
 * this one has five.  A plan's own expressions may all be short, or sit
 * where no walk of ours looks (an aggregate's transition): a backend named
 * the interpreter only after some plan had shown it.
 */
static void
learn_interpreter(void)
{
	MemoryContext scratch = AllocSetContextCreate(CurrentMemoryContext, "traceprof interpreter",
												  ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(scratch);
	Expr	   *both = make_andclause(list_make2(makeBoolConst(true, false), makeBoolConst(true, false)));
	ExprState  *state = ExecInitExpr(both, NULL);

	learn(state->evalfunc_private, "ExecInterpExpr");
	MemoryContextSwitchTo(old);
	MemoryContextDelete(scratch);
}

/* The method tables every backend has from the start, and the interpreter. */
static void
learn_method_tables(void)
{
	const MemoryContextMethods *aset = TopMemoryContext->methods;
	const TableAmRoutine *heap = GetHeapamTableAmRoutine();

	learn(aset->alloc, "AllocSetAlloc");
	learn(aset->free_p, "AllocSetFree");
	learn(aset->realloc, "AllocSetRealloc");
	learn(aset->reset, "AllocSetReset");
	learn(aset->delete_context, "AllocSetDelete");
	learn(aset->get_chunk_space, "AllocSetGetChunkSpace");
	learn(aset->is_empty, "AllocSetIsEmpty");
	learn(aset->stats, "AllocSetStats");

	learn_interpreter();
	learn_slot_ops(&TTSOpsVirtual, "virtual");
	learn_slot_ops(&TTSOpsHeapTuple, "heap");
	learn_slot_ops(&TTSOpsMinimalTuple, "minimal");
	learn_slot_ops(&TTSOpsBufferHeapTuple, "buffer_heap");

	learn(heap->slot_callbacks, "heapam_slot_callbacks");
	learn(heap->index_fetch_begin, "heapam_index_fetch_begin");
	learn(heap->index_fetch_reset, "heapam_index_fetch_reset");
	learn(heap->index_fetch_end, "heapam_index_fetch_end");
	learn(heap->index_fetch_tuple, "heapam_index_fetch_tuple");
	learn(heap->tuple_insert, "heapam_tuple_insert");
	learn(heap->tuple_insert_speculative, "heapam_tuple_insert_speculative");
	learn(heap->tuple_complete_speculative, "heapam_tuple_complete_speculative");
	learn(heap->tuple_delete, "heapam_tuple_delete");
	learn(heap->tuple_update, "heapam_tuple_update");
	learn(heap->tuple_lock, "heapam_tuple_lock");
	learn(heap->tuple_fetch_row_version, "heapam_fetch_row_version");
	learn(heap->tuple_tid_valid, "heapam_tuple_tid_valid");
	learn(heap->tuple_satisfies_snapshot, "heapam_tuple_satisfies_snapshot");
	learn(heap->relation_estimate_size, "heapam_estimate_rel_size");
	learn(heap->index_build_range_scan, "heapam_index_build_range_scan");
	learn(heap->index_validate_scan, "heapam_index_validate_scan");
	learn(heap->scan_analyze_next_block, "heapam_scan_analyze_next_block");
	learn(heap->scan_analyze_next_tuple, "heapam_scan_analyze_next_tuple");
	learn(heap->scan_bitmap_next_block, "heapam_scan_bitmap_next_block");
	learn(heap->scan_bitmap_next_tuple, "heapam_scan_bitmap_next_tuple");
	learn(heap->scan_sample_next_block, "heapam_scan_sample_next_block");
	learn(heap->scan_sample_next_tuple, "heapam_scan_sample_next_tuple");
}

static void
ensure_learned_table(void)
{
	if (learned == NULL)
	{
		HASHCTL		info;

		memset(&info, 0, sizeof(info));
		info.keysize = sizeof(uintptr_t);
		info.entrysize = sizeof(LearnedFunction);
		info.hcxt = TopMemoryContext;
		learned = hash_create("traceprof executor functions", 128, &info,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		learn_method_tables();
	}
}

void
executor_names_learn(PlanState *planstate)
{
	ensure_learned_table();
	learn_node(planstate, NULL);
}

void
executor_names_teach(uintptr_t function_start, const char *name)
{
	ensure_learned_table();
	learn((const void *) function_start, name);
}

const char *
executor_names_lookup(uintptr_t function_start)
{
	LearnedFunction *entry;

	if (learned == NULL || function_start == 0)
		return NULL;
	entry = hash_search(learned, &function_start, HASH_FIND, NULL);
	return entry ? entry->name : NULL;
}

uint64
executor_names_generation(void)
{
	return generation;
}
