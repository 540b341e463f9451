/*
 * relation_names.c - table names for db.collection.name, remembered per
 * backend.
 *
 * get_rel_name is a syscache lookup and a palloc per call (~400
 * instructions, a tenth of what tracing a short statement costs); the same
 * few tables come back statement after statement.  Entries are dropped by
 * relcache invalidation, so a renamed or dropped table is looked up again.
 */
#include "postgres.h"

#include "utils/inval.h"
#include "utils/lsyscache.h"

#include "traceprof.h"

#define RELATION_NAME_SLOTS 64	/* direct-mapped by OID */

typedef struct RelationNameSlot
{
	Oid			relid;			/* InvalidOid: empty */
	char		name[NAMEDATALEN];
} RelationNameSlot;

static RelationNameSlot slots[RELATION_NAME_SLOTS];
static bool callback_registered;

static void
forget_relation(Datum arg, Oid relid)
{
	/* Names stay: a caller may still be copying one it was just given. */
	(void) arg;
	for (int i = 0; i < RELATION_NAME_SLOTS; i++)
		if (!OidIsValid(relid) || slots[i].relid == relid)
			slots[i].relid = InvalidOid;
}

/* The table's name (valid until the next call), or NULL when it has none. */
const char *
relation_name(Oid relid)
{
	RelationNameSlot *slot;
	char	   *name;

	if (!OidIsValid(relid))
		return NULL;
	slot = &slots[relid % RELATION_NAME_SLOTS];
	if (slot->relid == relid)
		return slot->name;
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(forget_relation, (Datum) 0);
		callback_registered = true;
	}
	name = get_rel_name(relid);
	if (name == NULL)
		return NULL;
	strlcpy(slot->name, name, sizeof(slot->name));
	slot->relid = relid;
	pfree(name);
	return slot->name;
}
