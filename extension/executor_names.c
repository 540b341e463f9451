/*
 * executor_names.c - names for the executor's static node functions.
 *
 * Debian's postgres is stripped: ExecSeqScan, ExecHashJoin, ExecSort, ExecAgg
 * and the other per-node functions are static and have no symbol.  But every
 * PlanState of a started plan holds a pointer to its node's function
 * (ExecProcNodeReal), and the node type says which function that is.  So
 * the backend learns those addresses from the plans it runs and names the
 * sampled frames that start there.
 */
#include "postgres.h"

#include "nodes/execnodes.h"
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

static bool
learn_node(PlanState *node, void *context)
{
	const char *name;
	uintptr_t	start;
	LearnedFunction *entry;
	bool		found;

	if (node == NULL)
		return false;
	name = node_function(nodeTag(node));
	start = (uintptr_t) node->ExecProcNodeReal;
	if (name != NULL && start != 0)
	{
		entry = hash_search(learned, &start, HASH_ENTER, &found);
		if (!found)
		{
			/*
			 * A node type can have variants (parallel hash join, the Agg
			 * strategies): only the first function seen for a name gets it.
			 */
			entry->name = name;
			generation++;
		}
	}
	return planstate_tree_walker(node, learn_node, context);
}

void
executor_names_learn(PlanState *planstate)
{
	if (learned == NULL)
	{
		HASHCTL		info;

		memset(&info, 0, sizeof(info));
		info.keysize = sizeof(uintptr_t);
		info.entrysize = sizeof(LearnedFunction);
		info.hcxt = TopMemoryContext;
		learned = hash_create("traceprof executor functions", 64, &info,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	learn_node(planstate, NULL);
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
