/*
 * test_profile.c - aggregation and the three writers (pprof, folded,
 * speedscope) on hand-made samples.  symbols is NULL in most tests, so
 * frames are named by address ("0x1000"); the pprof output is read back
 * with protobuf-c after gunzipping it with zlib.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pprof.pb-c.h"
#include "profile.h"
#include "profile_internal.h"
#include "symbols.h"
#include "trace_context.h"
#include "unit.h"

#define PERIOD_NS 4000000ULL	/* 250 Hz */

static const char TRACE_HEX[] = "4bf92f3577b34da6a3ce929d0e0e4736";
static const char SPAN_HEX[] = "00f067aa0ba902b7";
static const char OTHER_SPAN_HEX[] = "b7ad6b7169203331";

static tp_sample
make_sample(const uintptr_t *pcs, uint32_t depth, uint32_t weight,
			const char *trace_hex, const char *span_hex)
{
	tp_sample	s;

	memset(&s, 0, sizeof(s));
	s.weight = weight;
	s.depth = depth;
	memcpy(s.pcs, pcs, depth * sizeof(uintptr_t));
	if (trace_hex != NULL)
		tp_hex_decode(trace_hex, s.labels.trace_id, TP_TRACE_ID_BYTES);
	if (span_hex != NULL)
		tp_hex_decode(span_hex, s.labels.span_id, TP_SPAN_ID_BYTES);
	return s;
}

static void
add(tp_profile *p, const uintptr_t *pcs, uint32_t depth, uint32_t weight,
	const char *trace_hex, const char *span_hex, const char *span_name)
{
	tp_sample	s = make_sample(pcs, depth, weight, trace_hex, span_hex);

	tp_profile_add(p, NULL, &s, span_name);
}

/* gunzip + unpack our own output; NULL on any failure. */
static Traceprof__Pprof__Profile *
decode(const tp_profile *p)
{
	size_t		len = 0;
	uint8_t    *gz = tp_profile_pprof(p, &len);
	uint8_t    *raw;
	size_t		cap = 1 << 20;
	z_stream	zs;
	Traceprof__Pprof__Profile *msg = NULL;

	if (gz == NULL || len < 18 || gz[0] != 0x1f || gz[1] != 0x8b)
	{
		free(gz);
		return NULL;
	}
	raw = malloc(cap);
	memset(&zs, 0, sizeof(zs));
	if (raw != NULL && inflateInit2(&zs, 15 + 16) == Z_OK)
	{
		zs.next_in = gz;
		zs.avail_in = (uInt) len;
		zs.next_out = raw;
		zs.avail_out = (uInt) cap;
		if (inflate(&zs, Z_FINISH) == Z_STREAM_END && zs.avail_in == 0)
			msg = traceprof__pprof__profile__unpack(NULL, zs.total_out, raw);
		inflateEnd(&zs);
	}
	free(raw);
	free(gz);
	return msg;
}

static const char *
str(const Traceprof__Pprof__Profile *m, int64_t index)
{
	if (index < 0 || (size_t) index >= m->n_string_table)
		return "(bad string index)";
	return m->string_table[index];
}

static const Traceprof__Pprof__Location *
location(const Traceprof__Pprof__Profile *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_location; i++)
		if (m->location[i]->id == id)
			return m->location[i];
	return NULL;
}

static const Traceprof__Pprof__Function *
function(const Traceprof__Pprof__Profile *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_function; i++)
		if (m->function[i]->id == id)
			return m->function[i];
	return NULL;
}

/* The function name of frame d of sample s ("" when unresolvable). */
static const char *
frame_name(const Traceprof__Pprof__Profile *m, const Traceprof__Pprof__Sample *s, size_t d)
{
	const Traceprof__Pprof__Location *loc;
	const Traceprof__Pprof__Function *fn;

	if (d >= s->n_location_id || (loc = location(m, s->location_id[d])) == NULL ||
		loc->n_line != 1 || (fn = function(m, loc->line[0]->function_id)) == NULL)
		return "";
	return str(m, fn->name);
}

/* The string value of label key on s, or NULL. */
static const char *
label(const Traceprof__Pprof__Profile *m, const Traceprof__Pprof__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (strcmp(str(m, s->label[i]->key), key) == 0)
			return str(m, s->label[i]->str);
	return NULL;
}

/* Ids are 1..n, unique and every reference resolves. */
static bool
ids_consistent(const Traceprof__Pprof__Profile *m)
{
	for (size_t i = 0; i < m->n_location; i++)
	{
		const Traceprof__Pprof__Location *loc = m->location[i];

		if (loc->id == 0 || location(m, loc->id) != loc || loc->n_line != 1 ||
			function(m, loc->line[0]->function_id) == NULL)
			return false;
	}
	for (size_t i = 0; i < m->n_function; i++)
		if (m->function[i]->id == 0 || function(m, m->function[i]->id) != m->function[i])
			return false;
	for (size_t i = 0; i < m->n_sample; i++)
		for (size_t d = 0; d < m->sample[i]->n_location_id; d++)
			if (m->sample[i]->location_id[d] == 0 ||
				location(m, m->sample[i]->location_id[d]) == NULL)
				return false;
	return true;
}

static const uintptr_t STACK_A[] = {0x1000, 0x2001, 0x3001};
static const uintptr_t STACK_B[] = {0x1100, 0x2001, 0x3001};

TEST(aggregation_merges_identical_stacks_and_labels)
{
	tp_profile *p = tp_profile_new("cpu", PERIOD_NS);

	add(p, STACK_A, 3, 1, TRACE_HEX, SPAN_HEX, "SELECT");
	add(p, STACK_A, 3, 1, TRACE_HEX, SPAN_HEX, "SELECT");
	add(p, STACK_A, 3, 3, TRACE_HEX, SPAN_HEX, "SELECT");
	CHECK(p->nsamples == 1);
	CHECK(p->samples[0].weight == 5);
	CHECK(tp_profile_total(p) == 5);

	/* Any difference in stack or labels keeps samples apart. */
	add(p, STACK_A, 3, 1, TRACE_HEX, OTHER_SPAN_HEX, "SELECT");
	add(p, STACK_A, 3, 1, NULL, NULL, "SELECT");
	add(p, STACK_A, 3, 1, TRACE_HEX, SPAN_HEX, NULL);
	add(p, STACK_A, 3, 1, TRACE_HEX, SPAN_HEX, "UPDATE");
	add(p, STACK_B, 3, 2, TRACE_HEX, SPAN_HEX, "SELECT");
	add(p, STACK_A, 2, 1, TRACE_HEX, SPAN_HEX, "SELECT");
	CHECK(p->nsamples == 7);
	CHECK(tp_profile_total(p) == 12);
	/* An empty span name is no span name. */
	add(p, STACK_A, 3, 1, TRACE_HEX, SPAN_HEX, "");
	CHECK(p->nsamples == 7);
	CHECK(tp_profile_total(p) == 13);
	/* Shared frames are shared: 0x2000 and 0x3000 once each. */
	CHECK(p->nlocations == 4);
	CHECK(p->nfunctions == 4);
	CHECK(p->nspan_names == 2);
	/* A zero weight carries no time. */
	add(p, STACK_B, 3, 0, NULL, NULL, NULL);
	CHECK(p->nsamples == 7);
	CHECK(tp_profile_total(p) == 13);
	tp_profile_free(p);
}

TEST(pprof_round_trip)
{
	tp_profile *p = tp_profile_new("cpu", PERIOD_NS);
	Traceprof__Pprof__Profile *m;

	tp_profile_set_window(p, 1700000000123456789ULL, 1700000010123456789ULL);
	add(p, STACK_A, 3, 2, TRACE_HEX, SPAN_HEX, "SELECT");
	add(p, STACK_B, 3, 1, NULL, NULL, NULL);
	m = decode(p);
	CHECK(m != NULL);
	if (m == NULL)
	{
		tp_profile_free(p);
		return;
	}
	CHECK(m->n_string_table > 0 && strcmp(m->string_table[0], "") == 0);
	CHECK(m->n_sample_type == 2);
	CHECK_STR(str(m, m->sample_type[0]->type), "samples");
	CHECK_STR(str(m, m->sample_type[0]->unit), "count");
	CHECK_STR(str(m, m->sample_type[1]->type), "cpu");
	CHECK_STR(str(m, m->sample_type[1]->unit), "nanoseconds");
	CHECK(m->period_type != NULL);
	if (m->period_type != NULL)
	{
		CHECK_STR(str(m, m->period_type->type), "cpu");
		CHECK_STR(str(m, m->period_type->unit), "nanoseconds");
	}
	CHECK(m->period == (int64_t) PERIOD_NS);
	CHECK_STR(str(m, m->default_sample_type), "cpu");
	CHECK(m->time_nanos == 1700000000123456789LL);
	CHECK(m->duration_nanos == 10000000000LL);
	CHECK(ids_consistent(m));
	CHECK(m->n_mapping == 0);	/* no symbols, no modules */

	CHECK(m->n_sample == 2);
	CHECK(m->n_location == 4);
	CHECK(m->n_function == 4);
	if (m->n_sample == 2)
	{
		const Traceprof__Pprof__Sample *a = m->sample[0];
		const Traceprof__Pprof__Sample *b = m->sample[1];

		CHECK(a->n_value == 2 && a->value[0] == 2 && a->value[1] == 2 * (int64_t) PERIOD_NS);
		CHECK(b->n_value == 2 && b->value[0] == 1 && b->value[1] == (int64_t) PERIOD_NS);
		/* leaf first; return addresses are recorded as pc - 1 */
		CHECK(a->n_location_id == 3);
		CHECK(location(m, a->location_id[0]) && location(m, a->location_id[0])->address == 0x1000);
		CHECK(location(m, a->location_id[1]) && location(m, a->location_id[1])->address == 0x2000);
		CHECK(location(m, a->location_id[2]) && location(m, a->location_id[2])->address == 0x3000);
		CHECK_STR(frame_name(m, a, 0), "0x1000");
		CHECK_STR(frame_name(m, a, 1), "0x2000");
		CHECK_STR(frame_name(m, a, 2), "0x3000");
		CHECK_STR(frame_name(m, b, 0), "0x1100");
		CHECK(a->location_id[1] == b->location_id[1]);
		CHECK(location(m, a->location_id[0])->mapping_id == 0);

		CHECK(a->n_label == 3);
		CHECK_STR(label(m, a, "span_id"), SPAN_HEX);
		CHECK_STR(label(m, a, "trace_id"), TRACE_HEX);
		CHECK_STR(label(m, a, "span_name"), "SELECT");
		CHECK(b->n_label == 0);
	}
	for (size_t i = 0; i < m->n_function; i++)
		CHECK(m->function[i]->system_name == m->function[i]->name);
	traceprof__pprof__profile__free_unpacked(m, NULL);
	tp_profile_free(p);
}

TEST(pprof_wall_and_partial_labels)
{
	tp_profile *p = tp_profile_new("wall", 10000000);
	Traceprof__Pprof__Profile *m;
	tp_sample	s = make_sample(STACK_A, 3, 1, NULL, SPAN_HEX);

	tp_profile_add(p, NULL, &s, NULL);
	m = decode(p);
	CHECK(m != NULL);
	if (m != NULL)
	{
		CHECK_STR(str(m, m->sample_type[1]->type), "wall");
		CHECK_STR(str(m, m->period_type->type), "wall");
		CHECK_STR(str(m, m->default_sample_type), "wall");
		CHECK(m->period == 10000000);
		CHECK(m->time_nanos == 0 && m->duration_nanos == 0);
		CHECK(m->n_sample == 1 && m->sample[0]->n_label == 1);
		CHECK_STR(label(m, m->sample[0], "span_id"), SPAN_HEX);
		CHECK(label(m, m->sample[0], "trace_id") == NULL);
		traceprof__pprof__profile__free_unpacked(m, NULL);
	}
	tp_profile_free(p);
}

TEST(pprof_empty_profile)
{
	tp_profile *p = tp_profile_new("cpu", PERIOD_NS);
	Traceprof__Pprof__Profile *m = decode(p);
	char	   *folded = tp_profile_folded(p);

	CHECK(m != NULL);
	if (m != NULL)
	{
		CHECK(m->n_sample == 0 && m->n_location == 0 && m->n_function == 0);
		CHECK(m->n_sample_type == 2);
		CHECK_STR(m->string_table[0], "");
		traceprof__pprof__profile__free_unpacked(m, NULL);
	}
	CHECK_STR(folded, "");
	free(folded);
	tp_profile_free(p);
}

TEST(odd_samples)
{
	tp_profile *p = tp_profile_new("cpu", PERIOD_NS);
	uintptr_t	deep[TP_SAMPLER_MAX_FRAMES];
	tp_sample	s;
	Traceprof__Pprof__Profile *m;

	/* An empty stack still took the time: one unknown frame. */
	s = make_sample(STACK_A, 0, 1, NULL, NULL);
	tp_profile_add(p, NULL, &s, NULL);
	/* depth beyond the array is clamped, never read past pcs[] */
	for (int i = 0; i < TP_SAMPLER_MAX_FRAMES; i++)
		deep[i] = 0x5000 + 0x10 * (uintptr_t) i;
	s = make_sample(deep, TP_SAMPLER_MAX_FRAMES, 1, NULL, NULL);
	s.depth = TP_SAMPLER_MAX_FRAMES + 7;
	tp_profile_add(p, NULL, &s, "caf\xc3\xa9 \xff\x01x");
	CHECK(tp_profile_total(p) == 2);
	m = decode(p);
	CHECK(m != NULL);
	if (m != NULL && m->n_sample == 2)
	{
		CHECK(m->sample[0]->n_location_id == 1);
		CHECK_STR(frame_name(m, m->sample[0], 0), "0x0");
		CHECK(m->sample[1]->n_location_id == TP_SAMPLER_MAX_FRAMES);
		/* invalid UTF-8 and control characters never reach the output */
		CHECK_STR(label(m, m->sample[1], "span_name"), "caf\xc3\xa9 ??x");
		CHECK(ids_consistent(m));
	}
	if (m != NULL)
		traceprof__pprof__profile__free_unpacked(m, NULL);
	tp_profile_free(p);
}

/*
 *   0x30 <- 0x20 <- 0x10   weight 2, one trace
 *   0x30 <- 0x20 <- 0x10   weight 3, another trace (merged in flame graphs)
 *   0x30 <- 0x20 <- 0x11   weight 1
 *   0x30                   weight 1 (the leaf pc equals return address 0x31 - 1)
 */
static tp_profile *
flame_profile(void)
{
	static const uintptr_t one[] = {0x10, 0x21, 0x31};
	static const uintptr_t two[] = {0x11, 0x21, 0x31};
	static const uintptr_t three[] = {0x30};
	tp_profile *p = tp_profile_new("cpu", PERIOD_NS);

	add(p, two, 3, 1, NULL, NULL, NULL);
	add(p, one, 3, 2, TRACE_HEX, SPAN_HEX, "SELECT");
	add(p, three, 1, 1, NULL, NULL, NULL);
	add(p, one, 3, 3, TRACE_HEX, OTHER_SPAN_HEX, "SELECT");
	return p;
}

TEST(folded_output)
{
	tp_profile *p = flame_profile();
	char	   *text = tp_profile_folded(p);

	CHECK(p->nsamples == 4);
	CHECK(p->nlocations == 4);
	CHECK_STR(text,
			  "0x30 1\n"
			  "0x30;0x20;0x10 5\n"
			  "0x30;0x20;0x11 1\n");
	free(text);
	tp_profile_free(p);
}

TEST(speedscope_output)
{
	tp_profile *p = flame_profile();
	char	   *text = tp_profile_speedscope(p, "trace \"4bf9\" \\ x\ny");

	CHECK_STR(text,
			  "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
			  "\"shared\":{\"frames\":[{\"name\":\"0x30\"},{\"name\":\"0x20\"},"
			  "{\"name\":\"0x10\"},{\"name\":\"0x11\"}]},"
			  "\"profiles\":[{\"type\":\"sampled\",\"name\":\"trace \\\"4bf9\\\" \\\\ x?y\","
			  "\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":28000000,"
			  "\"samples\":[[0],[0,1,2],[0,1,3]],"
			  "\"weights\":[4000000,20000000,4000000]}],"
			  "\"name\":\"trace \\\"4bf9\\\" \\\\ x?y\",\"activeProfileIndex\":0,"
			  "\"exporter\":\"traceprof\"}\n");
	free(text);
	text = tp_profile_speedscope(p, NULL);
	CHECK(text != NULL && strstr(text, "\"name\":\"traceprof\"") != NULL);
	free(text);
	tp_profile_free(p);
}

TEST(clear_keeps_nothing_of_the_samples)
{
	static const uintptr_t other[] = {0x7000, 0x8001};
	tp_profile *p = flame_profile();
	Traceprof__Pprof__Profile *m;
	char	   *text;

	tp_profile_set_window(p, 1, 2);
	tp_profile_clear(p);
	CHECK(tp_profile_total(p) == 0);
	CHECK(p->nsamples == 0);
	CHECK(p->nspan_names == 0);
	CHECK(p->nlocations == 4);	/* no symbols: every address is kept */
	text = tp_profile_folded(p);
	CHECK_STR(text, "");
	free(text);

	add(p, other, 2, 4, NULL, NULL, NULL);
	m = decode(p);
	CHECK(m != NULL);
	if (m != NULL)
	{
		/* only what the new samples use, numbered from 1 again */
		CHECK(m->n_sample == 1);
		CHECK(m->n_location == 2);
		CHECK(m->n_function == 2);
		CHECK(m->time_nanos == 0);
		CHECK(ids_consistent(m));
		for (size_t i = 0; i < m->n_location; i++)
			CHECK(m->location[i]->id <= 2);
		CHECK_STR(frame_name(m, m->sample[0], 0), "0x7000");
		CHECK_STR(frame_name(m, m->sample[0], 1), "0x8000");
		traceprof__pprof__profile__free_unpacked(m, NULL);
	}
	text = tp_profile_folded(p);
	CHECK_STR(text, "0x8000;0x7000 4\n");
	free(text);
	tp_profile_free(p);
}

/* A function of this program for the symbolizer to find. */
static __attribute__((noinline)) int
marker_function(int x)
{
	return x * 3 + 1;
}

TEST(clear_forgets_unresolved_addresses)
{
	tp_symbols *symbols = tp_symbols_load();
	uintptr_t	pcs[2];
	tp_sample	s;
	Traceprof__Pprof__Profile *m;
	char	   *text;
	tp_profile *p = tp_profile_new("cpu", PERIOD_NS);

	CHECK(symbols != NULL);
	CHECK(marker_function(1) == 4);
	pcs[0] = (uintptr_t) &marker_function + 1;
	pcs[1] = 0x11;				/* nothing is mapped there */
	s = make_sample(pcs, 2, 1, NULL, NULL);
	tp_profile_add(p, symbols, &s, NULL);
	CHECK(p->nlocations == 2);
	CHECK(p->nmappings == 1);
	text = tp_profile_folded(p);
	CHECK_STR(text, "[unknown];marker_function 1\n");
	free(text);

	/* the resolved address stays cached, the unknown one is asked again */
	tp_profile_clear(p);
	CHECK(p->nlocations == 1);
	CHECK(p->locations[0].address == pcs[0]);
	tp_profile_add(p, symbols, &s, NULL);
	tp_profile_add(p, symbols, &s, NULL);
	CHECK(p->nlocations == 2);
	CHECK(p->nsamples == 1);
	m = decode(p);
	CHECK(m != NULL);
	if (m != NULL)
	{
		CHECK(ids_consistent(m));
		CHECK(m->n_mapping == 1);
		CHECK(m->n_sample == 1 && m->sample[0]->value[0] == 2);
		if (m->n_mapping == 1)
		{
			CHECK(m->mapping[0]->id == 1);
			CHECK(m->mapping[0]->has_functions);
			CHECK(m->mapping[0]->memory_start <= pcs[0] && pcs[0] < m->mapping[0]->memory_limit);
			CHECK(strstr(str(m, m->mapping[0]->filename), "test_profile") != NULL);
		}
		if (m->n_sample == 1)
		{
			CHECK_STR(frame_name(m, m->sample[0], 0), "marker_function");
			CHECK_STR(frame_name(m, m->sample[0], 1), "[unknown]");
			CHECK(location(m, m->sample[0]->location_id[0])->mapping_id == 1);
			CHECK(location(m, m->sample[0]->location_id[1])->mapping_id == 0);
		}
		traceprof__pprof__profile__free_unpacked(m, NULL);
	}
	tp_profile_free(p);
	tp_symbols_free(symbols);
}

int			main(void);
static void *main_return;		/* where main() returns to: libc's start of the process */

/* Stacks end at main: the C library's frames outward of it are left out. */
TEST(stacks_are_rooted_at_main)
{
	tp_symbols *symbols = tp_symbols_load();
	uintptr_t	pcs[3];
	tp_sample	s;
	char	   *text;
	tp_profile *p = tp_profile_new("cpu", PERIOD_NS);

	CHECK(symbols != NULL);
	pcs[0] = (uintptr_t) &marker_function + 1;
	pcs[1] = (uintptr_t) &main + 1;
	pcs[2] = (uintptr_t) main_return;
	s = make_sample(pcs, 3, 1, NULL, NULL);
	tp_profile_add(p, symbols, &s, NULL);
	text = tp_profile_folded(p);
	CHECK_STR(text, "main;marker_function 1\n");
	free(text);
	tp_profile_free(p);
	tp_symbols_free(symbols);
}

TEST(names_for_unknown_functions)
{
	tp_symbol	sym;
	char		buf[128];

	memset(&sym, 0, sizeof(sym));
	sym.module = "/usr/lib/x86_64-linux-gnu/libfoo.so.1";
	sym.module_start = 0x7f0000001000;
	sym.module_end = 0x7f0000009000;
	sym.module_offset = 0x1000;
	/* the file offset, the same in every process despite ASLR */
	tp_prof_unknown_name(&sym, true, 0x7f0000001234, buf, sizeof(buf));
	CHECK_STR(buf, "libfoo.so.1+0x1234");
	memset(&sym, 0, sizeof(sym));
	tp_prof_unknown_name(&sym, true, 0x7f0000001234, buf, sizeof(buf));
	CHECK_STR(buf, "[unknown]");
	tp_prof_unknown_name(NULL, false, 0x7f0000001234, buf, sizeof(buf));
	CHECK_STR(buf, "0x7f0000001234");
}

TEST(many_distinct_stacks)
{
	tp_profile *p = tp_profile_new("cpu", PERIOD_NS);
	Traceprof__Pprof__Profile *m;

	/* enough to grow every index several times */
	for (uintptr_t i = 0; i < 2000; i++)
	{
		uintptr_t	pcs[3] = {0x100000 + i, 0x200001 + (i % 7), 0x300001};

		add(p, pcs, 3, 1, NULL, NULL, NULL);
		add(p, pcs, 3, 1, NULL, NULL, NULL);
	}
	CHECK(p->nsamples == 2000);
	CHECK(tp_profile_total(p) == 4000);
	m = decode(p);
	CHECK(m != NULL);
	if (m != NULL)
	{
		CHECK(m->n_sample == 2000);
		CHECK(m->n_location == 2000 + 7 + 1);
		CHECK(ids_consistent(m));
		traceprof__pprof__profile__free_unpacked(m, NULL);
	}
	tp_profile_free(p);
}

int
main(void)
{
	main_return = __builtin_return_address(0);
	RUN(stacks_are_rooted_at_main);
	RUN(aggregation_merges_identical_stacks_and_labels);
	RUN(pprof_round_trip);
	RUN(pprof_wall_and_partial_labels);
	RUN(pprof_empty_profile);
	RUN(odd_samples);
	RUN(folded_output);
	RUN(speedscope_output);
	RUN(clear_keeps_nothing_of_the_samples);
	RUN(clear_forgets_unresolved_addresses);
	RUN(names_for_unknown_functions);
	RUN(many_distinct_stacks);
	return unit_summary();
}
