/*
 * speedscope_writer.c - the aggregate as a speedscope file
 * (https://www.speedscope.app/file-format-schema.json): one "sampled"
 * profile whose samples are root-first indices into shared.frames, one per
 * distinct stack (labels ignored, as in the folded writer), weighted in
 * nanoseconds.  There is no time order to keep, since identical stacks are
 * merged; they come sorted by frame names, so equal input gives equal
 * output.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

#define SCHEMA_URL "https://www.speedscope.app/file-format-schema.json"

/* A JSON string; profile strings are already valid UTF-8. */
static void
put_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *) s; *p; p++)
	{
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

static void
put_frames(FILE *out, const tp_profile *profile, const uint32_t *order, uint32_t nframes)
{
	fputs("\"shared\":{\"frames\":[", out);
	for (uint32_t i = 0; i < nframes; i++)
	{
		const tp_prof_function *f = &profile->functions[order[i]];

		fputs(i > 0 ? ",{\"name\":" : "{\"name\":", out);
		put_json_string(out, f->name);
		if (f->file != NULL)
		{
			fputs(",\"file\":", out);
			put_json_string(out, f->file);
		}
		fputc('}', out);
	}
	fputs("]}", out);
}

static void
put_profile(FILE *out, const tp_profile *profile, const char *name,
			const tp_prof_stack *stacks, size_t count, const uint32_t *frame_of)
{
	uint64_t	total = 0;

	for (size_t i = 0; i < count; i++)
		total += stacks[i].weight * profile->period_ns;
	fputs("\"profiles\":[{\"type\":\"sampled\",\"name\":", out);
	put_json_string(out, name);
	fprintf(out, ",\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":%" PRIu64
			",\"samples\":[", total);
	for (size_t i = 0; i < count; i++)
	{
		fputs(i > 0 ? ",[" : "[", out);
		for (uint32_t d = 0; d < stacks[i].depth; d++)
			fprintf(out, d > 0 ? ",%" PRIu32 : "%" PRIu32, frame_of[stacks[i].frames[d]]);
		fputc(']', out);
	}
	fputs("],\"weights\":[", out);
	for (size_t i = 0; i < count; i++)
		fprintf(out, i > 0 ? ",%" PRIu64 : "%" PRIu64, stacks[i].weight * profile->period_ns);
	fputs("]}]", out);
}

char *
tp_profile_speedscope(const tp_profile *profile, const char *name)
{
	tp_prof_stack *stacks;
	size_t		count;
	uint32_t   *frame_of = NULL;	/* function index -> frame index */
	uint32_t   *order = NULL;	/* frame index -> function index */
	uint32_t	nframes = 0;
	char	   *title;
	char	   *text = NULL;
	size_t		size = 0;
	FILE	   *out = NULL;
	bool		ok = false;

	title = tp_prof_clean_copy(name != NULL && name[0] != '\0' ? name : "traceprof");
	if (title == NULL)
		return NULL;
	if (!tp_prof_collapse(profile, &stacks, &count))
	{
		free(title);
		return NULL;
	}
	frame_of = malloc((profile->nfunctions + 1) * sizeof(uint32_t));
	order = malloc((profile->nfunctions + 1) * sizeof(uint32_t));
	if (frame_of == NULL || order == NULL)
		goto done;
	memset(frame_of, 0xff, (profile->nfunctions + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < count; i++)
		for (uint32_t d = 0; d < stacks[i].depth; d++)
		{
			uint32_t	f = stacks[i].frames[d];

			if (frame_of[f] == TP_PROF_NONE)
			{
				frame_of[f] = nframes;
				order[nframes++] = f;
			}
		}

	out = open_memstream(&text, &size);
	if (out == NULL)
		goto done;
	fputs("{\"$schema\":\"" SCHEMA_URL "\",", out);
	put_frames(out, profile, order, nframes);
	fputc(',', out);
	put_profile(out, profile, title, stacks, count, frame_of);
	fputs(",\"name\":", out);
	put_json_string(out, title);
	fputs(",\"activeProfileIndex\":0,\"exporter\":\"traceprof\"}\n", out);
	ok = !ferror(out);
	if (fclose(out) != 0)
		ok = false;

done:
	free(title);
	free(frame_of);
	free(order);
	tp_prof_stacks_free(stacks, count);
	if (!ok)
	{
		free(text);
		return NULL;
	}
	return text;
}
