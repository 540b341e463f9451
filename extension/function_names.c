/*
 * function_names.c - a shared table of frame names, so stored samples hold
 * small ids instead of strings.
 *
 * Backends intern frame and span names when they store samples (never in
 * the signal handler); a backend-local cache keeps the shared lock off the
 * common path.  The table is fixed-size: once full, new names map to one
 * overflow id (FUNCTION_NAMES_OVERFLOW, not 0: a sample's span name id 0
 * means no span), counted, and the profile says so.
 *
 * Frame names are bounded by the code the server runs; span names are not
 * (they hold table names, which any role that may trace can make up).  So
 * span names may take only half of the table: past that, a span is named
 * by its operation alone, and frames keep the other half.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"

#include "traceprof.h"

typedef struct NameEntry
{
	char		name[TRACEPROF_NAME_LEN];	/* hash key */
	uint32		id;
} NameEntry;

typedef struct NameTable
{
	LWLock	   *lock;
	uint32		count;			/* ids 1..count are in use, 1 the overflow's */
	uint32		span_names;		/* of which entered as span names */
	pg_atomic_uint64 overflow;	/* lookups that found their share full */
	pg_atomic_flag full_logged;	/* the server log said so, once */
	pg_atomic_flag spans_logged;	/* the same for the span names' share */
	char		names[FLEXIBLE_ARRAY_MEMBER];	/* [id] -> name */
} NameTable;

/*
 * The local cache is direct-mapped: a name's slot holds the id it had last
 * (the shared table keeps the text, so a hit costs a hash and a compare).
 * Names that collide just take the shared path more often.
 */
typedef struct CachedName
{
	uint32		hash;
	uint32		id;				/* 0: empty */
} CachedName;

#define LOCAL_CACHE_SLOTS 4096	/* a power of two */

static NameTable *table;
static HTAB *shared_index;
static CachedName local_cache[LOCAL_CACHE_SLOTS];

static Size
names_size(void)
{
	return add_size(offsetof(NameTable, names),
					mul_size(traceprof_max_functions + 1, TRACEPROF_NAME_LEN));
}

Size
function_names_shmem_size(void)
{
	return add_size(MAXALIGN(names_size()),
					hash_estimate_size(traceprof_max_functions, sizeof(NameEntry)));
}

void
function_names_request_lock(void)
{
	RequestNamedLWLockTranche("traceprof function names", 1);
}

void
function_names_shmem_startup(void)
{
	HASHCTL		info;
	bool		found;

	table = ShmemInitStruct("traceprof function names", names_size(), &found);
	if (!found)
	{
		table->lock = &(GetNamedLWLockTranche("traceprof function names"))->lock;
		table->count = FUNCTION_NAMES_OVERFLOW;
		table->span_names = 0;
		pg_atomic_init_u64(&table->overflow, 0);
		pg_atomic_init_flag(&table->full_logged);
		pg_atomic_init_flag(&table->spans_logged);
		strlcpy(table->names + (Size) FUNCTION_NAMES_OVERFLOW * TRACEPROF_NAME_LEN,
				"[too many functions]", TRACEPROF_NAME_LEN);
	}
	memset(&info, 0, sizeof(info));
	info.keysize = TRACEPROF_NAME_LEN;
	info.entrysize = sizeof(NameEntry);
	shared_index = ShmemInitHash("traceprof function name index",
								 traceprof_max_functions, traceprof_max_functions,
								 &info, HASH_ELEM | HASH_STRINGS);
}

/*
 * A name found its share of the table full.  Nothing frees a name until
 * restart, so the profiles stay degraded: the operator is told once, in the
 * server log.
 */
static pg_noinline void
count_overflow(bool span_name)
{
	pg_atomic_fetch_add_u64(&table->overflow, 1);
	if (!span_name && pg_atomic_test_set_flag(&table->full_logged))
		ereport(LOG,
				(errmsg("traceprof: traceprof.max_functions (%d) is full", traceprof_max_functions),
				 errdetail("Frame names seen from now on read \"[too many functions]\" in profiles; traceprof.stats counts them in names_overflow."),
				 errhint("Raise traceprof.max_functions (it takes a restart).")));
	if (span_name && pg_atomic_test_set_flag(&table->spans_logged))
		ereport(LOG,
				(errmsg("traceprof: span names fill their half of traceprof.max_functions (%d)", traceprof_max_functions),
				 errdetail("Spans first sampled from now on are named by their operation alone in profiles (\"SELECT\" for \"SELECT t1\"); traceprof.stats counts them in names_overflow."),
				 errhint("Raise traceprof.max_functions (it takes a restart).")));
}

/* Has the new name room?  Span names stop at half the table. */
static bool
has_room(bool span_name)
{
	if (table->count >= (uint32) traceprof_max_functions)
		return false;
	return !span_name || table->span_names < (uint32) traceprof_max_functions / 2;
}

/* The name's id; 0 if it is new and its share is full (the caller counts it). */
static uint32
shared_lookup(const char *key, bool span_name)
{
	NameEntry  *entry;
	bool		found;
	uint32		id;

	LWLockAcquire(table->lock, LW_SHARED);
	entry = hash_search(shared_index, key, HASH_FIND, NULL);
	id = entry ? entry->id : 0;
	LWLockRelease(table->lock);
	if (entry != NULL)
		return id;

	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	if (!has_room(span_name))
		entry = hash_search(shared_index, key, HASH_FIND, NULL);
	else
	{
		entry = hash_search(shared_index, key, HASH_ENTER_NULL, &found);
		if (entry != NULL && !found)
		{
			entry->id = ++table->count;
			if (span_name)
				table->span_names++;
			strlcpy(table->names + (Size) entry->id * TRACEPROF_NAME_LEN, key, TRACEPROF_NAME_LEN);
		}
	}
	id = entry ? entry->id : 0;
	LWLockRelease(table->lock);
	return id;
}

/*
 * A name longer than the shared index keys (TRACEPROF_NAME_LEN - 1 bytes)
 * is cut and ends in "~" and a hash of the whole name: C++ symbols (LLVM's
 * overloads) that differ only past the cut stay distinct frames.  The cut
 * falls before a UTF-8 character rather than inside it: a span name from a
 * LATIN1 database grows to 125 bytes in UTF-8, and half a character made
 * traceprof.profile() return text invalid in its encoding (and pprof
 * strings invalid UTF-8).
 */
#define CUT_SUFFIX_LEN 9		/* "~" and 8 hex digits */

static const char *
cut_name(const char *name, char *cut)
{
	size_t		len = TRACEPROF_NAME_LEN - 1 - CUT_SUFFIX_LEN;

	/* name[len] is the first byte left out: not a continuation byte. */
	while (len > 0 && ((unsigned char) name[len] & 0xC0) == 0x80)
		len--;
	memcpy(cut, name, len);
	snprintf(cut + len, CUT_SUFFIX_LEN + 1, "~%08x",
			 hash_bytes((const unsigned char *) name, (int) strlen(name)));
	return cut;
}

/* The name's id; 0: no room for it. */
static uint32
intern(const char *name, bool span_name)
{
	size_t		len = strnlen(name, TRACEPROF_NAME_LEN);
	char		cut[TRACEPROF_NAME_LEN];
	uint32		hash;
	uint32		id;
	CachedName *slot;

	if (len == TRACEPROF_NAME_LEN)
	{
		name = cut_name(name, cut);
		len = strlen(name);
	}
	hash = hash_bytes((const unsigned char *) name, (int) len);
	slot = &local_cache[hash & (LOCAL_CACHE_SLOTS - 1)];

	if (slot->id != 0 && slot->hash == hash)
	{
		const char *known = function_names_get(slot->id);

		if (memcmp(known, name, len) == 0 && known[len] == '\0')
			return slot->id;
	}
	id = shared_lookup(name, span_name);
	if (id == 0)
		return 0;
	slot->id = id;
	slot->hash = hash;
	return id;
}

uint32
function_names_intern(const char *name)
{
	uint32		id = intern(name, false);

	if (id != 0)
		return id;
	count_overflow(false);
	return FUNCTION_NAMES_OVERFLOW;
}

/*
 * A span's name, or, once span names fill their share, its operation's:
 * a bounded set, interned as frame names are (the span counted once).
 */
uint32
function_names_intern_span(const char *name, const char *operation)
{
	uint32		id = intern(name, true);

	if (id != 0)
		return id;
	count_overflow(true);
	if (operation[0] != '\0' && (id = intern(operation, false)) != 0)
		return id;
	return FUNCTION_NAMES_OVERFLOW;
}

const char *
function_names_get(uint32 id)
{
	if (id == 0 || id > table->count)
		return "[unknown]";
	return table->names + (Size) id * TRACEPROF_NAME_LEN;
}

int64
function_names_overflow(void)
{
	return (int64) pg_atomic_read_u64(&table->overflow);
}
