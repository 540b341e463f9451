/*
 * folded_writer.c - the aggregate as folded stacks, the input of
 * flamegraph.pl, inferno and speedscope's importer:
 *
 *     root;caller;leaf 42
 *
 * One line per distinct stack of function names, root first, with the
 * number of samples (not nanoseconds: that is what the tools expect).
 * Labels are ignored: samples of every trace and span that share a stack
 * are summed, because a folded file answers "where did the time go", and
 * callers wanting one trace filter the samples before adding them.  Lines
 * are sorted by frame names, so equal input gives equal output.  A ';' in
 * a name would split the frame, so it is written as ':'.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

static void
put_frame(FILE *out, const char *name)
{
	for (const char *p = name; *p; p++)
		fputc(*p == ';' ? ':' : *p, out);
}

/* Same names at every depth: the lines would print the same. */
static bool
same_names(const tp_profile *profile, const tp_prof_stack *a, const tp_prof_stack *b)
{
	if (a->depth != b->depth)
		return false;
	for (uint32_t i = 0; i < a->depth; i++)
		if (strcmp(profile->functions[a->frames[i]].name,
				   profile->functions[b->frames[i]].name) != 0)
			return false;
	return true;
}

char *
tp_profile_folded(const tp_profile *profile)
{
	tp_prof_stack *stacks;
	size_t		count;
	char	   *text = NULL;
	size_t		size = 0;
	FILE	   *out;
	bool		ok;

	if (!tp_prof_collapse(profile, &stacks, &count))
		return NULL;
	out = open_memstream(&text, &size);
	if (out == NULL)
	{
		tp_prof_stacks_free(stacks, count);
		return NULL;
	}
	for (size_t i = 0; i < count; i++)
	{
		uint64_t	weight = stacks[i].weight;

		/* Functions of equal names in different modules: one line. */
		while (i + 1 < count && same_names(profile, &stacks[i], &stacks[i + 1]))
			weight += stacks[++i].weight;
		for (uint32_t d = 0; d < stacks[i].depth; d++)
		{
			if (d > 0)
				fputc(';', out);
			put_frame(out, profile->functions[stacks[i].frames[d]].name);
		}
		fprintf(out, " %" PRIu64 "\n", weight);
	}
	ok = !ferror(out);
	if (fclose(out) != 0)
		ok = false;
	tp_prof_stacks_free(stacks, count);
	if (!ok)
	{
		free(text);
		return NULL;
	}
	return text;
}
