/*
 * chain_names.c - names for unnamed frames from their named neighbours
 * (see chain_names.h).
 */
#include "chain_names.h"

#include <stdbool.h>
#include <string.h>

/* "Exec*": a prefix; "*ExecutorRun": a suffix; else the whole name. */
static bool
name_matches(const char *pattern, const char *name)
{
	size_t		len = strlen(pattern);
	size_t		name_len = strlen(name);

	if (len > 0 && pattern[len - 1] == '*')
		return strncmp(pattern, name, len - 1) == 0;
	if (len > 0 && pattern[0] == '*')
		return name_len >= len - 1 && strcmp(name + name_len - (len - 1), pattern + 1) == 0;
	return strcmp(pattern, name) == 0;
}

/*
 * The n frames between callee and callee + n + 1 fit the rule: each is
 * unnamed or already has the rule's name for it (learned earlier, maybe
 * from another rule), and at least one is unnamed.
 */
static bool
gap_fits(const tp_chain_rule *rule, const char *const *frames, size_t callee)
{
	size_t		caller = callee + rule->unnamed + 1;
	bool		any_unnamed = false;

	for (size_t i = 0; i < rule->unnamed; i++)
	{
		const char *frame = frames[caller - 1 - i];	/* names[0] is next to the caller */

		if (frame == NULL)
			any_unnamed = true;
		else if (strcmp(frame, rule->names[i]) != 0)
			return false;
	}
	return any_unnamed;
}

size_t
tp_chain_names_apply(const tp_chain_rule *rules, size_t rule_count,
					 const char *const *frames, size_t depth,
					 tp_chain_found_fn found, void *arg)
{
	size_t		named = 0;

	for (size_t callee = 0; callee < depth; callee++)
	{
		if (frames[callee] == NULL)
			continue;
		for (size_t r = 0; r < rule_count; r++)
		{
			const tp_chain_rule *rule = &rules[r];
			size_t		caller = callee + rule->unnamed + 1;

			if (caller >= depth || frames[caller] == NULL ||
				!name_matches(rule->callee, frames[callee]) ||
				!name_matches(rule->caller, frames[caller]) ||
				!gap_fits(rule, frames, callee))
				continue;
			for (size_t i = 0; i < rule->unnamed; i++)
				if (frames[caller - 1 - i] == NULL)
				{
					found(caller - 1 - i, rule->names[i], arg);
					named++;
				}
			callee = caller - 1;
			break;
		}
	}
	return named;
}
