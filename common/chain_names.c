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

size_t
tp_chain_names_apply(const tp_chain_rule *rules, size_t rule_count,
					 const char *const *frames, size_t depth,
					 tp_chain_found_fn found, void *arg)
{
	size_t		named = 0;

	/* Each run of unnamed frames between two named ones, leaf side first. */
	for (size_t callee = 0; callee < depth; callee++)
	{
		size_t		caller = callee + 1;
		size_t		run;

		if (frames[callee] == NULL)
			continue;
		while (caller < depth && frames[caller] == NULL)
			caller++;
		run = caller - callee - 1;
		if (caller == depth || run == 0)
			continue;
		for (size_t r = 0; r < rule_count; r++)
		{
			const tp_chain_rule *rule = &rules[r];

			if (rule->unnamed != run || !name_matches(rule->callee, frames[callee]) ||
				!name_matches(rule->caller, frames[caller]))
				continue;
			/* names[0] is next to the caller, the highest index. */
			for (size_t i = 0; i < run; i++)
				found(caller - 1 - i, rule->names[i], arg);
			named += run;
			break;
		}
		callee = caller - 1;
	}
	return named;
}
