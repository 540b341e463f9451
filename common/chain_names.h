/*
 * chain_names.h - names for unnamed frames from the named frames around
 * them.
 *
 * A stripped program's static functions have no symbol, but some sit at
 * fixed places in its call chains: in PostgreSQL 15, exactly three static
 * functions (ServerLoop, BackendStartup, BackendRun) lie between
 * PostmasterMain and PostgresMain.  A rule names such frames when the
 * stack shows exactly that shape (a named caller, exactly n frames that are
 * unnamed or already carry the rule's name for them, a named callee) and
 * nothing otherwise: a build that inlined one of them shows another count
 * and keeps its frames unnamed.
 */
#ifndef TP_CHAIN_NAMES_H
#define TP_CHAIN_NAMES_H

#include <stddef.h>

#define TP_CHAIN_MAX_UNNAMED 4

typedef struct tp_chain_rule
{
	const char *caller;			/* the named frame on the root side */
	const char *callee;			/* the named frame on the leaf side */
	/* In both, "Exec*" matches a prefix and "*ExecutorRun" a suffix. */
	size_t		unnamed;		/* exactly this many frames between */
	const char *names[TP_CHAIN_MAX_UNNAMED];	/* theirs, caller side first */
} tp_chain_rule;

/* Called for each unnamed frame a rule names: its index in the stack. */
typedef void (*tp_chain_found_fn) (size_t index, const char *name, void *arg);

/*
 * frames: depth frame names, leaf first; NULL for an unnamed frame.  Calls
 * found for every frame the rules name; returns how many.
 */
size_t		tp_chain_names_apply(const tp_chain_rule *rules, size_t rule_count,
								 const char *const *frames, size_t depth,
								 tp_chain_found_fn found, void *arg);

#endif
