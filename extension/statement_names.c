/*
 * statement_names.c - what a statement's span is named after: its operation
 * (db.operation.name) and the table it is about (db.collection.name), from
 * the Query being planned, the PlannedStmt being run, or a utility
 * statement's parse tree.
 */
#include "postgres.h"

#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "tcop/utility.h"

#include "traceprof.h"

static bool query_only_relation(Query *query, Oid *only);

/* A relation entry the statement names: not one a view's definition reads. */
static inline bool
named_relation(const RangeTblEntry *rte)
{
	return rte->rtekind == RTE_RELATION && !OidIsValid(rte->checkAsUser);
}

/* Another relation named: false once it is a second one. */
static inline bool
note_relation(Oid relid, Oid *only)
{
	if (OidIsValid(*only) && *only != relid)
		return false;
	*only = relid;
	return true;
}

/*
 * The one relation a range table names, in *only (InvalidOid before the
 * first); false once it names a second.  What the statement names is not
 * always what it reads:
 * - a view is expanded into a subquery before planning.  PostgreSQL 15 keeps
 *   the view's entry there, for its permission check, and marks the
 *   relations its definition reads with the view owner's checkAsUser: those
 *   are the view's, not the statement's;
 * - a plan lists a partitioned (or inherited) table's children after it
 *   (children: their indexes, NULL for a Query);
 * - a Query's subqueries are looked into (a plan's range table is flat
 *   already, and holds those of its sublinks and CTEs too).
 */
static bool
only_relation(List *rtable, const Bitmapset *children, Oid *only)
{
	ListCell   *lc;

	foreach(lc, rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_SUBQUERY && rte->subquery != NULL)
		{
			if (!query_only_relation(rte->subquery, only))
				return false;
			continue;
		}
		if (!named_relation(rte) || bms_is_member(foreach_current_index(lc) + 1, children))
			continue;
		if (!note_relation(rte->relid, only))
			return false;
	}
	return true;
}

/* query_tree_walker's walker for relations_walk: true stops at a second relation. */
static bool
second_relation_walker(Node *node, Oid *only)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
		return named_relation((RangeTblEntry *) node) &&
			!note_relation(((RangeTblEntry *) node)->relid, only);
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, second_relation_walker, only,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, second_relation_walker, only);
}

/*
 * only_relation for a Query with sublinks or CTEs, whose relations are
 * outside its range table: the planner flattens them into the plan's, so a
 * statement whose plan is cached was named otherwise than one planned for
 * it ("SELECT ... WHERE id IN (SELECT ...)" was named after its outer
 * table when planned, and after none from a cached plan).  The whole tree
 * is walked: out of line, only such statements pay for it.
 */
static pg_noinline bool
relations_walk(Query *query, Oid *only)
{
	return !second_relation_walker((Node *) query, only);
}

/* only_relation for a Query (or one of its subqueries in FROM). */
static bool
query_only_relation(Query *query, Oid *only)
{
	if (unlikely(query->hasSubLinks || query->cteList != NIL))
		return relations_walk(query, only);
	return only_relation(query->rtable, NULL, only);
}

/*
 * The table a Query's first data-modifying CTE writes, as the plan's first
 * result relation is when its top level writes none; 0 if none does.
 */
static pg_noinline Oid
cte_result_relation(const Query *query)
{
	ListCell   *lc;

	foreach(lc, query->cteList)
	{
		const Query *cte = (const Query *) ((CommonTableExpr *) lfirst(lc))->ctequery;

		if (IsA(cte, Query) && cte->resultRelation > 0)
			return rt_fetch(cte->resultRelation, cte->rtable)->relid;
	}
	return InvalidOid;
}

/* db.collection.name of a Query about to be planned, as of its plan (plan_collection). */
static const char *
query_collection(Query *query)
{
	Oid			only = InvalidOid;

	if (query->resultRelation > 0)
		return relation_name(rt_fetch(query->resultRelation, query->rtable)->relid);
	if (unlikely(query->hasModifyingCTE) && OidIsValid(only = cte_result_relation(query)))
		return relation_name(only);
	return query_only_relation(query, &only) ? relation_name(only) : NULL;
}

/* The partitions and inheritance children in a plan's range table. */
static Bitmapset *
plan_children(const PlannedStmt *plan)
{
	Bitmapset  *children = NULL;
	ListCell   *lc;

	foreach(lc, plan->appendRelations)
		children = bms_add_member(children, ((AppendRelInfo *) lfirst(lc))->child_relid);
	return children;
}

/* The partitioned (or inherited) table a plan's child entry belongs to. */
static Index
plan_parent(const PlannedStmt *plan, Index rti)
{
	ListCell   *lc;

	foreach(lc, plan->appendRelations)
	{
		AppendRelInfo *info = lfirst(lc);

		if (info->child_relid == rti)
			return plan_parent(plan, info->parent_relid);
	}
	return rti;
}

/*
 * The table a statement writes (result_rti, 0 for none), or reads when it
 * names just one: db.collection.name.
 */
static const char *
collection_name(List *rtable, Index result_rti, const Bitmapset *children)
{
	Oid			only = InvalidOid;

	if (result_rti > 0)
		return relation_name(rt_fetch(result_rti, rtable)->relid);
	return only_relation(rtable, children, &only) ? relation_name(only) : NULL;
}

/* db.collection.name of a plan, as of the Query it was made from. */
static const char *
plan_collection(const PlannedStmt *plan)
{
	if (plan->resultRelations != NIL)
		return collection_name(plan->rtable, plan_parent(plan, linitial_int(plan->resultRelations)), NULL);
	return collection_name(plan->rtable, 0, plan_children(plan));
}

/* Whether a raw parse tree holds a subquery, in FROM or in an expression. */
static bool
has_subquery(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubLink) || IsA(node, RangeSubselect))
		return true;
	return raw_expression_tree_walker(node, has_subquery, context);
}

/*
 * The table of COPY (query) TO's query, as written (it is analysed only
 * when COPY runs it): a SELECT from one table and nothing else, or the
 * target of a writing statement, as for the same statements outside COPY.
 * NULL otherwise: a join, a set operation, a CTE (whose name is no table),
 * a subquery (which may read other tables).
 */
static RangeVar *
copy_query_relation(Node *query)
{
	switch (nodeTag(query))
	{
		case T_SelectStmt:
			{
				SelectStmt *select = (SelectStmt *) query;

				if (select->op == SETOP_NONE && select->withClause == NULL &&
					list_length(select->fromClause) == 1 && IsA(linitial(select->fromClause), RangeVar) &&
					!raw_expression_tree_walker(query, has_subquery, NULL))
					return linitial(select->fromClause);
				return NULL;
			}
		case T_InsertStmt:
			return ((InsertStmt *) query)->relation;
		case T_UpdateStmt:
			return ((UpdateStmt *) query)->relation;
		case T_DeleteStmt:
			return ((DeleteStmt *) query)->relation;
		default:
			return NULL;
	}
}

/*
 * db.collection.name of a statement: a Query being planned, a PlannedStmt,
 * or a utility statement (the table it is about, for the common cases; a
 * CALL's procedure, its db.stored_procedure.name).
 */
const char *
statement_collection(Node *stmt)
{
	RangeVar   *rel = NULL;

	switch (nodeTag(stmt))
	{
		case T_Query:
			return query_collection((Query *) stmt);
		case T_PlannedStmt:
			return plan_collection((PlannedStmt *) stmt);
		case T_CopyStmt:
			rel = ((CopyStmt *) stmt)->relation;
			if (rel == NULL && ((CopyStmt *) stmt)->query != NULL)
				rel = copy_query_relation(((CopyStmt *) stmt)->query);
			break;
		case T_CreateStmt:
			rel = ((CreateStmt *) stmt)->relation;
			break;
		case T_CreateTableAsStmt:	/* SELECT INTO too */
			rel = ((CreateTableAsStmt *) stmt)->into->rel;
			break;
		case T_IndexStmt:
			rel = ((IndexStmt *) stmt)->relation;
			break;
		case T_AlterTableStmt:
			rel = ((AlterTableStmt *) stmt)->relation;
			break;
		case T_RefreshMatViewStmt:
			rel = ((RefreshMatViewStmt *) stmt)->relation;
			break;
		case T_ClusterStmt:		/* NULL: every table clustered before */
			rel = ((ClusterStmt *) stmt)->relation;
			break;
		case T_TruncateStmt:
			/* A statement on several tables names none (db.collection.name) */
			if (list_length(((TruncateStmt *) stmt)->relations) == 1)
				rel = linitial(((TruncateStmt *) stmt)->relations);
			break;
		case T_VacuumStmt:
			if (list_length(((VacuumStmt *) stmt)->rels) == 1)
				rel = ((VacuumRelation *) linitial(((VacuumStmt *) stmt)->rels))->relation;
			break;
		case T_CallStmt:
			/* The procedure, as written (db.stored_procedure.name: span_attributes.c) */
			return strVal(llast(((CallStmt *) stmt)->funccall->funcname));
		default:
			break;
	}
	return rel ? rel->relname : NULL;
}

/* The tag of a plain DML statement, as CreateCommandTag gives it. */
static const char *
dml_operation(CmdType type)
{
	switch (type)
	{
		case CMD_SELECT:
			return "SELECT";
		case CMD_INSERT:
			return "INSERT";
		case CMD_UPDATE:
			return "UPDATE";
		case CMD_DELETE:
			return "DELETE";
		case CMD_MERGE:
			return "MERGE";
		default:
			return NULL;
	}
}

/*
 * db.operation.name: the statement's command tag.  The common statements
 * are named here: CreateCommandTag's switch over every statement type was
 * ~50 instruction-cache misses of a traced TPC-B transaction.  The rest,
 * and SELECT ... FOR UPDATE or DECLARE CURSOR, are its.
 */
const char *
statement_operation(Node *stmt)
{
	const char *name = NULL;

	if (IsA(stmt, PlannedStmt) && ((PlannedStmt *) stmt)->utilityStmt == NULL &&
		((PlannedStmt *) stmt)->rowMarks == NIL)
		name = dml_operation(((PlannedStmt *) stmt)->commandType);
	else if (IsA(stmt, Query) && ((Query *) stmt)->utilityStmt == NULL &&
			 ((Query *) stmt)->rowMarks == NIL)
		name = dml_operation(((Query *) stmt)->commandType);
	else if (IsA(stmt, TransactionStmt))
	{
		switch (((TransactionStmt *) stmt)->kind)
		{
			case TRANS_STMT_BEGIN:
				return "BEGIN";
			case TRANS_STMT_COMMIT:
				return "COMMIT";
			case TRANS_STMT_ROLLBACK:
				return "ROLLBACK";
			default:
				break;
		}
	}
	return name != NULL ? name : CreateCommandName(stmt);
}
