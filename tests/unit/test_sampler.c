/*
 * Unit tests: the SIGPROF sampler, its frame-pointer walk and its ring.
 *
 * The functions sampled keep frame pointers and real calls whatever the
 * Makefile's -O2 does (noipa: no inlining, cloning or sibling calls).
 */
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sampler.h"
#include "stack_walk.h"
#include "symbols.h"
#include "unit.h"

#if defined(__clang__)
/* clang has no per-function frame pointers: build with -fno-omit-frame-pointer. */
#define FRAMED __attribute__((noinline, disable_tail_calls))
#define FRAMELESS __attribute__((noinline))
#else
#define FRAMED __attribute__((noipa, optimize("no-omit-frame-pointer", "no-optimize-sibling-calls")))
#define FRAMELESS __attribute__((noipa, optimize("omit-frame-pointer")))
#endif

#define CHAIN_LEN 6

int			main(void);

static const char *const chain_names[CHAIN_LEN] = {
	"burn_leaf", "chain_5", "chain_4", "chain_3", "chain_2", "chain_1"
};

static volatile uint64_t sink;
static tp_symbols *symbols;

static double
thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t
realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Spin for this much CPU time; the clock is read rarely (it is a syscall). */
FRAMED static uint64_t
burn_leaf(double seconds)
{
	double		end = thread_cpu_seconds() + seconds;
	uint64_t	x = sink | 1;

	do
	{
		for (int i = 0; i < (1 << 16); i++)
			x = x * 6364136223846793005u + 1442695040888963407u;
		sink = x;
	} while (thread_cpu_seconds() < end);
	return x;
}

FRAMED static uint64_t
chain_5(double seconds)
{
	uint64_t	r = burn_leaf(seconds);

	sink += r;
	return r + 5;
}

FRAMED static uint64_t
chain_4(double seconds)
{
	uint64_t	r = chain_5(seconds);

	sink += r;
	return r + 4;
}

FRAMED static uint64_t
chain_3(double seconds)
{
	uint64_t	r = chain_4(seconds);

	sink += r;
	return r + 3;
}

FRAMED static uint64_t
chain_2(double seconds)
{
	uint64_t	r = chain_3(seconds);

	sink += r;
	return r + 2;
}

FRAMED static uint64_t
chain_1(double seconds)
{
	uint64_t	r = chain_2(seconds);

	sink += r;
	return r + 1;
}

/*
 * A leaf without a frame (GCC drops it from leaves that need no stack,
 * even with -fno-omit-frame-pointer), under a framed caller.
 */
FRAMELESS static uint64_t
frameless_leaf(long iterations)
{
	uint64_t	x = sink | 1;

	for (long i = 0; i < iterations; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	return x;
}

FRAMED static uint64_t
frameless_caller(double seconds)
{
	double		end = thread_cpu_seconds() + seconds;
	uint64_t	r = 0;

	while (thread_cpu_seconds() < end)
		r += frameless_leaf(1 << 20);
	sink += r;
	return r;
}

FRAMED static uint64_t
frameless_outer(double seconds)
{
	uint64_t	r = frameless_caller(seconds);

	sink += r;
	return r + 1;
}

/* The same leaf called through a pointer: an indirect call site. */
static uint64_t (*volatile leaf_pointer) (long) = frameless_leaf;

FRAMED static uint64_t
pointer_caller(double seconds)
{
	double		end = thread_cpu_seconds() + seconds;
	uint64_t	r = 0;

	while (thread_cpu_seconds() < end)
		r += leaf_pointer(1 << 20);
	sink += r;
	return r;
}

FRAMED static uint64_t
pointer_outer(double seconds)
{
	uint64_t	r = pointer_caller(seconds);

	sink += r;
	return r + 1;
}

static volatile size_t libc_size = 4096;
static char libc_buffer[4096];

/* libc's memset has no frame at all. */
FRAMED static uint64_t
libc_caller(double seconds)
{
	double		end = thread_cpu_seconds() + seconds;

	while (thread_cpu_seconds() < end)
	{
		for (int i = 0; i < 1000; i++)
			memset(libc_buffer, i, libc_size);
		sink += libc_buffer[5];
	}
	return sink;
}

FRAMED static uint64_t
libc_outer(double seconds)
{
	uint64_t	r = libc_caller(seconds);

	sink += r;
	return r + 1;
}

/* Deeper than TP_SAMPLER_MAX_FRAMES. */
FRAMED static uint64_t
deep(int levels, double seconds)
{
	uint64_t	r = levels > 0 ? deep(levels - 1, seconds) : burn_leaf(seconds);

	sink += r;
	return r + 1;
}

typedef struct collected
{
	tp_sample  *items;
	size_t		count;
	size_t		capacity;
} collected;

static void
collect(const tp_sample *sample, void *arg)
{
	collected  *c = arg;

	if (c->count == c->capacity)
	{
		c->capacity = c->capacity ? c->capacity * 2 : 256;
		c->items = realloc(c->items, c->capacity * sizeof(tp_sample));
	}
	c->items[c->count++] = *sample;
}

static void
collected_free(collected *c)
{
	free(c->items);
	memset(c, 0, sizeof(*c));
}

static const char *
frame_name(const tp_sample *sample, uint32_t i)
{
	tp_symbol	sym;

	tp_symbols_lookup(symbols, sample->pcs[i], i > 0, &sym);
	return sym.function ? sym.function : "?";
}

/* burn_leaf, chain_5 ... chain_1 one after the other, leaf first. */
static bool
has_chain(const tp_sample *sample, bool *at_top)
{
	for (uint32_t i = 0; i + CHAIN_LEN <= sample->depth; i++)
	{
		bool		all = true;

		if (strcmp(frame_name(sample, i), chain_names[0]) != 0)
			continue;
		for (int k = 1; k < CHAIN_LEN && all; k++)
			all = strcmp(frame_name(sample, i + k), chain_names[k]) == 0;
		if (all)
		{
			*at_top = i == 0;
			return true;
		}
	}
	return false;
}

static void
print_stack(const tp_sample *sample)
{
	printf("   ");
	for (uint32_t i = 0; i < sample->depth && i < 10; i++)
		printf(" %s", frame_name(sample, i));
	printf("\n");
}

static bool
start(int hz, tp_sampler_clock clock, size_t capacity)
{
	char		err[256] = "";
	bool		ok = tp_sampler_start(hz, clock, capacity, err, sizeof(err));

	if (!ok)
		printf("  tp_sampler_start: %s\n", err);
	return ok;
}

static void
sleep_seconds(double seconds)
{
	struct timespec ts = {(time_t) seconds, (long) ((seconds - (time_t) seconds) * 1e9)};

	/* nanosleep is never restarted (SA_RESTART or not): sleep the rest. */
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

TEST(cpu_samples_walk_the_whole_chain)
{
	collected	c = {0};
	size_t		full = 0;
	size_t		top = 0;
	uint64_t	weight = 0;
	uint64_t	t0;
	uint64_t	t1;
	double		cpu;
	tp_sampler_stats stats;

	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	t0 = realtime_ns();
	cpu = thread_cpu_seconds();
	chain_1(1.0);
	cpu = thread_cpu_seconds() - cpu;
	t1 = realtime_ns();
	/* disarmed first: a sample between drain and stats would not match */
	tp_sampler_pause();
	tp_sampler_drain(collect, &c);
	tp_sampler_get_stats(&stats);
	tp_sampler_stop();

	for (size_t i = 0; i < c.count; i++)
	{
		bool		at_top = false;

		if (has_chain(&c.items[i], &at_top))
			full++;
		top += at_top;
		weight += c.items[i].weight;
		CHECK(c.items[i].weight >= 1);
		CHECK(c.items[i].depth >= 1 && c.items[i].depth <= TP_SAMPLER_MAX_FRAMES);
		CHECK(c.items[i].time_ns >= t0 && c.items[i].time_ns <= t1 + 1000000);
	}
	printf("  %zu samples (weight %llu) in %.2f s CPU; whole chain in %zu (%.1f%%), "
		   "with the leaf on top in %zu\n", c.count, (unsigned long long) weight, cpu,
		   full, c.count ? 100.0 * full / c.count : 0.0, top);
	for (size_t i = 0, shown = 0; i < c.count && shown < 3; i++)
	{
		bool		at_top;

		if (!has_chain(&c.items[i], &at_top))
		{
			print_stack(&c.items[i]);
			shown++;
		}
	}
	CHECK(c.count > 0);
	CHECK(stats.samples == c.count);
	CHECK(stats.dropped == 0);
	/* The kernel delivers at most one CPU-timer signal per 4 ms tick. */
	CHECK(weight >= 0.5 * 250 * cpu && weight <= 1.2 * 250 * cpu + 2);
	CHECK(full >= 0.8 * c.count);
	collected_free(&c);
}

typedef uint64_t (*workload_fn) (double seconds);

/*
 * Share of the samples whose PC is in a function named like leaf that
 * have caller and outer right under it.
 */
static void
leaf_share(workload_fn workload, const char *leaf, const char *module,
		   const char *caller, const char *outer, size_t *in_leaf, size_t *ok)
{
	collected	c = {0};

	*in_leaf = *ok = 0;
	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	workload(0.4);
	tp_sampler_drain(collect, &c);
	tp_sampler_stop();
	for (size_t i = 0; i < c.count; i++)
	{
		const tp_sample *s = &c.items[i];

		tp_symbol	sym;

		if (s->depth < 3 || strstr(frame_name(s, 0), leaf) == NULL)
			continue;
		tp_symbols_lookup(symbols, s->pcs[0], false, &sym);
		if (sym.module == NULL || strstr(sym.module, module) == NULL)
			continue;			/* valgrind runs its own memset */
		(*in_leaf)++;
		*ok += strcmp(frame_name(s, 1), caller) == 0 &&
			strcmp(frame_name(s, 2), outer) == 0;
	}
	collected_free(&c);
}

/*
 * Under AddressSanitizer, memset() calls __asan_memset, which checks the
 * range and then jumps (a tail call, no frame) to libc's memset.  In a
 * sample there, the return address on top of the stack is at a call of
 * __asan_memset, not of memset, so the leaf repair rightly refuses it and
 * the caller is missing: the libc case cannot hold.
 */
#if defined(__SANITIZE_ADDRESS__)
#define MEMSET_INTERCEPTED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEMSET_INTERCEPTED 1
#endif
#endif
#ifndef MEMSET_INTERCEPTED
#define MEMSET_INTERCEPTED 0
#endif

/* Samples in a frameless leaf still name its caller (leaf repair). */
TEST(frameless_leaves_keep_their_caller)
{
	size_t		in_leaf,
				leaf_ok,
				via_pointer,
				pointer_ok,
				in_libc,
				libc_ok;

	leaf_share(frameless_outer, "frameless_leaf", "test_sampler", "frameless_caller",
			   "frameless_outer", &in_leaf, &leaf_ok);
	leaf_share(pointer_outer, "frameless_leaf", "test_sampler", "pointer_caller",
			   "pointer_outer", &via_pointer, &pointer_ok);
	leaf_share(libc_outer, "memset", "libc.so", "libc_caller", "libc_outer",
			   &in_libc, &libc_ok);
	printf("  frameless leaf: %zu of %zu samples with caller; through a pointer: %zu of %zu; "
		   "libc memset: %zu of %zu\n",
		   leaf_ok, in_leaf, pointer_ok, via_pointer, libc_ok, in_libc);
	CHECK(in_leaf > 20);
	CHECK(leaf_ok >= 0.9 * in_leaf);
	CHECK(via_pointer > 20);
	CHECK(pointer_ok >= 0.9 * via_pointer);
	if (in_libc == 0)
		printf("  (no sample in libc's memset: replaced, as valgrind does)\n");
	else if (MEMSET_INTERCEPTED)
		printf("  (memset goes through AddressSanitizer's interceptor: not checked)\n");
	else
		CHECK(libc_ok >= 0.9 * in_libc);
}

FRAMED static uintptr_t
called_directly(void)
{
	return (uintptr_t) __builtin_return_address(0);
}

FRAMED static uintptr_t
called_other(void)
{
	return (uintptr_t) __builtin_return_address(0);
}

/* The repair on hand-made stacks: inserts only what a call proves. */
TEST(leaf_repair_rules)
{
	tp_leaf_repair *repair = tp_leaf_repair_new();
	uintptr_t	site = called_directly();	/* follows "call called_directly" */
	uintptr_t	other = called_other();
	uintptr_t	in_callee = (uintptr_t) called_directly + 2;
	uintptr_t	local = 0;
	uintptr_t	words[4] = {42, (uintptr_t) &local, site, 7};
	uintptr_t	pcs[TP_SAMPLER_MAX_FRAMES];
	int			depth;

	CHECK(repair != NULL);
	if (repair == NULL)
		return;
	tp_leaf_repair_refresh(repair);

	/* pcs[1] follows a call of another function: the caller is missing. */
	pcs[0] = in_callee;
	pcs[1] = other;
	depth = tp_leaf_repair_apply(repair, pcs, 2, TP_SAMPLER_MAX_FRAMES, words, 4);
	CHECK(depth == 3 && pcs[1] == site && pcs[2] == other);

	/* The walk already has it: unchanged. */
	pcs[1] = site;
	CHECK(tp_leaf_repair_apply(repair, pcs, 2, TP_SAMPLER_MAX_FRAMES, words, 4) == 2);

	/* A call of some other function proves nothing about this PC. */
	pcs[0] = (uintptr_t) (void *) main;
	pcs[1] = other;
	CHECK(tp_leaf_repair_apply(repair, pcs, 2, TP_SAMPLER_MAX_FRAMES, words, 4) == 2);
	CHECK(pcs[1] == other);

	/* Full: the outermost frame goes. */
	for (int i = 0; i < TP_SAMPLER_MAX_FRAMES; i++)
		pcs[i] = other;
	pcs[0] = in_callee;
	depth = tp_leaf_repair_apply(repair, pcs, TP_SAMPLER_MAX_FRAMES, TP_SAMPLER_MAX_FRAMES, words, 4);
	CHECK(depth == TP_SAMPLER_MAX_FRAMES && pcs[1] == site && pcs[2] == other);

	/* Garbage anywhere: no crash, and never more than one frame added. */
	{
		unsigned int seed = 99;
		uintptr_t	code = (uintptr_t) (void *) main;

		for (int round = 0; round < 20000; round++)
		{
			uintptr_t	junk[TP_STACK_TOP_WORDS];
			int			d = 1 + round % 5;

			for (int i = 0; i < TP_STACK_TOP_WORDS; i++)
			{
				seed = seed * 1103515245u + 12345u;
				junk[i] = (seed & 1) ? code - 8192 + (seed >> 8) % 16384 : (uintptr_t) seed << (seed % 40);
			}
			for (int i = 0; i < d; i++)
				pcs[i] = junk[(i + 3) % TP_STACK_TOP_WORDS] ^ (uintptr_t) i;
			pcs[0] = code + round % 512;
			depth = tp_leaf_repair_apply(repair, pcs, d, TP_SAMPLER_MAX_FRAMES, junk,
										 TP_STACK_TOP_WORDS);
			CHECK(depth == d || depth == d + 1);
		}
	}
	tp_leaf_repair_free(repair);
}

TEST(labels_set_before_are_on_samples)
{
	collected	c = {0};
	tp_sample_labels a = {0};
	tp_sample_labels b = {0};
	uint64_t	switched;
	size_t		with_a = 0;
	size_t		with_b = 0;

	memset(a.trace_id, 0xa1, sizeof(a.trace_id));
	memset(a.span_id, 0xa2, sizeof(a.span_id));
	a.span_name_id = 7;
	memset(b.trace_id, 0xb1, sizeof(b.trace_id));
	memset(b.span_id, 0xb2, sizeof(b.span_id));
	b.span_name_id = 9;
	b.wait_event = 3;

	tp_sampler_set_labels(&a);
	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	chain_1(0.3);
	tp_sampler_set_labels(&b);
	switched = realtime_ns();
	chain_1(0.3);
	tp_sampler_drain(collect, &c);
	tp_sampler_stop();
	tp_sampler_set_labels(NULL);

	for (size_t i = 0; i < c.count; i++)
	{
		const tp_sample_labels *l = &c.items[i].labels;

		if (c.items[i].time_ns < switched)
			with_a += memcmp(l, &a, sizeof(a)) == 0;
		else
			with_b += memcmp(l, &b, sizeof(b)) == 0;
	}
	CHECK(c.count > 0);
	CHECK(with_a > 0 && with_b > 0);
	CHECK(with_a + with_b == c.count);
	collected_free(&c);
}

/* Labels switched as fast as possible: every sample sees one whole set. */
TEST(labels_are_never_torn)
{
	collected	c = {0};
	tp_sample_labels sets[2];
	double		end;
	size_t		bad = 0;
	uint64_t	switches = 0;

	for (int k = 0; k < 2; k++)
	{
		memset(&sets[k], 0x11 * (k + 1), sizeof(sets[k]));
	}
	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	end = thread_cpu_seconds() + 0.5;
	while (thread_cpu_seconds() < end)
	{
		for (int i = 0; i < 1000; i++)
			tp_sampler_set_labels(&sets[switches++ & 1]);
	}
	tp_sampler_drain(collect, &c);
	tp_sampler_stop();
	tp_sampler_set_labels(NULL);
	for (size_t i = 0; i < c.count; i++)
		bad += memcmp(&c.items[i].labels, &sets[0], sizeof(sets[0])) != 0 &&
			memcmp(&c.items[i].labels, &sets[1], sizeof(sets[1])) != 0;
	printf("  %zu samples over %llu label switches\n", c.count, (unsigned long long) switches);
	CHECK(c.count > 0);
	CHECK(bad == 0);
	collected_free(&c);
}

TEST(pause_takes_no_samples)
{
	collected	c = {0};
	size_t		paused_count;

	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	tp_sampler_pause();
	tp_sampler_drain(NULL, NULL);
	chain_1(0.3);
	paused_count = tp_sampler_drain(collect, &c);
	tp_sampler_pause();			/* twice is harmless */
	tp_sampler_resume();
	tp_sampler_resume();
	chain_1(0.3);
	tp_sampler_drain(collect, &c);
	tp_sampler_stop();
	CHECK(paused_count == 0);
	CHECK(c.count > 20);
	collected_free(&c);
}

/* Short traced regions still get their share: resume continues the period. */
TEST(pause_resume_keeps_the_period)
{
	collected	c = {0};
	double		cpu = 0;

	CHECK(start(100, TP_SAMPLER_CPU, 1024));
	for (int i = 0; i < 150; i++)
	{
		double		before;

		tp_sampler_resume();
		before = thread_cpu_seconds();
		burn_leaf(0.004);		/* shorter than the 10 ms period */
		cpu += thread_cpu_seconds() - before;
		tp_sampler_pause();
		burn_leaf(0.002);
	}
	tp_sampler_drain(collect, &c);
	tp_sampler_stop();
	printf("  %zu samples for %.2f s CPU while resumed (expect ~%.0f)\n",
		   c.count, cpu, cpu * 100);
	CHECK(c.count >= 0.7 * cpu * 100);
	collected_free(&c);
}

TEST(wall_mode_samples_sleep_cpu_mode_does_not)
{
	size_t		wall;
	size_t		cpu;

	CHECK(start(250, TP_SAMPLER_WALL, 1024));
	sleep_seconds(0.4);
	wall = tp_sampler_drain(NULL, NULL);
	tp_sampler_stop();

	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	sleep_seconds(0.4);
	cpu = tp_sampler_drain(NULL, NULL);
	tp_sampler_stop();
	printf("  sleeping 0.4 s: %zu wall samples, %zu CPU samples\n", wall, cpu);
	CHECK(wall >= 40);
	CHECK(cpu <= 2);
}

FRAMED static void
sleep_in_chain_2(double seconds)
{
	sleep_seconds(seconds);
	sink++;
}

FRAMED static void
sleep_in_chain_1(double seconds)
{
	sleep_in_chain_2(seconds);
	sink++;
}

/* Do frames named names[0..n) appear in the stack, one after the other? */
static bool
has_frames(const tp_sample *sample, const char *const *names, int n)
{
	for (uint32_t i = 0; i + n <= sample->depth; i++)
	{
		int			k = 0;

		while (k < n && strcmp(frame_name(sample, i + k), names[k]) == 0)
			k++;
		if (k == n)
			return true;
	}
	return false;
}

/*
 * Samples in libc's nanosleep (no frame pointers) under this program's
 * frames: libunwind takes libc's frames, each step two system calls with
 * Debian's build; from the first frame back in this program the
 * frame-pointer walk takes the rest, which reaches main (handed_off).
 */
TEST(libunwind_hands_a_framed_rest_to_frame_pointers)
{
	static const char *const names[] = {"sleep_in_chain_2", "sleep_in_chain_1"};
	collected	c = {0};
	tp_sampler_stats stats;
	size_t		whole = 0;

	CHECK(start(250, TP_SAMPLER_WALL, 1024));
	sleep_in_chain_1(0.3);
	tp_sampler_pause();
	tp_sampler_drain(collect, &c);
	tp_sampler_get_stats(&stats);
	tp_sampler_stop();
	for (size_t i = 0; i < c.count; i++)
		whole += has_frames(&c.items[i], names, 2) && c.items[i].depth >= 2 &&
			strcmp(frame_name(&c.items[i], c.items[i].depth - 2), "main") == 0;	/* then libc's start */
	printf("  %zu samples asleep: %zu with the chain up to main, %llu handed to frame pointers\n",
		   c.count, whole, (unsigned long long) stats.handed_off);
	if (c.count > 0 && whole < c.count)
		print_stack(&c.items[0]);
	CHECK(c.count >= 30);
	CHECK(whole >= 0.9 * c.count);
	CHECK(stats.handed_off >= 0.9 * c.count);
	collected_free(&c);
}

TEST(hz_is_clamped)
{
	collected	c = {0};
	uint64_t	weight = 0;
	double		cpu;

	/* Unclamped, 100 kHz would mean weights of ~400 per signal. */
	CHECK(start(100000, TP_SAMPLER_CPU, 1024));
	cpu = thread_cpu_seconds();
	chain_1(0.4);
	cpu = thread_cpu_seconds() - cpu;
	tp_sampler_drain(collect, &c);
	tp_sampler_stop();
	for (size_t i = 0; i < c.count; i++)
		weight += c.items[i].weight;
	CHECK(c.count > 0);
	CHECK(weight <= 1.3 * TP_SAMPLER_MAX_HZ * cpu + 2);
	collected_free(&c);

	CHECK(start(0, TP_SAMPLER_CPU, 16));
	chain_1(0.3);
	CHECK(tp_sampler_drain(NULL, NULL) <= 1);
	tp_sampler_stop();
	CHECK(start(-5, TP_SAMPLER_WALL, 16));
	tp_sampler_stop();
}

static volatile sig_atomic_t custom_calls;

static void
custom_handler(int signo)
{
	(void) signo;
	custom_calls++;
}

TEST(stop_restores_the_previous_handler)
{
	struct sigaction mine = {0};
	struct sigaction now;
	struct sigaction saved;

	sigaction(TP_SAMPLER_SIGNAL, NULL, &saved);
	mine.sa_handler = custom_handler;
	mine.sa_flags = SA_NODEFER;
	sigemptyset(&mine.sa_mask);
	sigaction(TP_SAMPLER_SIGNAL, &mine, NULL);

	CHECK(start(250, TP_SAMPLER_CPU, 64));
	sigaction(TP_SAMPLER_SIGNAL, NULL, &now);
	CHECK(now.sa_handler != custom_handler);
	CHECK((now.sa_flags & SA_RESTART) != 0 && (now.sa_flags & SA_SIGINFO) != 0);
	chain_1(0.1);
	CHECK(custom_calls == 0);	/* timer signals are ours */
	tp_sampler_stop();

	sigaction(TP_SAMPLER_SIGNAL, NULL, &now);
	CHECK(now.sa_handler == custom_handler);
	CHECK((now.sa_flags & SA_NODEFER) != 0);
	raise(TP_SAMPLER_SIGNAL);
	CHECK(custom_calls == 1);

	/* And the default disposition (which would kill us) comes back too. */
	signal(TP_SAMPLER_SIGNAL, SIG_DFL);
	CHECK(start(250, TP_SAMPLER_CPU, 64));
	chain_1(0.05);
	tp_sampler_stop();
	sigaction(TP_SAMPLER_SIGNAL, NULL, &now);
	CHECK(now.sa_handler == SIG_DFL);
	sigaction(TP_SAMPLER_SIGNAL, &saved, NULL);
}

static volatile sig_atomic_t their_signals;

static void
their_handler(int signo)
{
	(void) signo;
	their_signals++;
}

/*
 * SIGPROF is left to the code the sampler runs under: a profiler of its own
 * (PL/Python's, on ITIMER_PROF) keeps getting its signals while the sampler
 * samples, and setting it back to its default then ends nothing.  Before,
 * the sampler took SIGPROF: the first starved, the second was killed.
 */
TEST(sigprof_is_left_to_others)
{
	struct sigaction theirs = {0};
	struct sigaction saved;
	struct itimerval every_10ms = {{0, 10000}, {0, 10000}};
	struct itimerval off = {{0, 0}, {0, 0}};
	tp_sampler_stats stats;

	sigaction(SIGPROF, NULL, &saved);
	theirs.sa_handler = their_handler;
	sigemptyset(&theirs.sa_mask);
	sigaction(SIGPROF, &theirs, NULL);
	CHECK(start(250, TP_SAMPLER_CPU, 256));
	setitimer(ITIMER_PROF, &every_10ms, NULL);
	chain_1(0.2);
	setitimer(ITIMER_PROF, &off, NULL);
	printf("  their ITIMER_PROF signals while sampling: %d\n", (int) their_signals);
	CHECK(their_signals >= 5);

	/* Their SIGPROF back to its default while the sampler's timer runs on. */
	signal(SIGPROF, SIG_DFL);
	chain_1(0.1);
	tp_sampler_pause();
	tp_sampler_get_stats(&stats);
	CHECK(stats.samples >= 10);
	tp_sampler_stop();
	sigaction(SIGPROF, &saved, NULL);
}

/*
 * Our signal set back to its default (PL/Perl's "local %SIG" does so to
 * every signal) ends nothing: SIGWINCH's default is to ignore it.  Samples
 * stop until tp_sampler_keep_handler() puts the handler back.
 */
TEST(our_signal_reset_to_default_ends_nothing)
{
	tp_sampler_stats before;
	tp_sampler_stats after;

	CHECK(start(250, TP_SAMPLER_CPU, 256));
	signal(TP_SAMPLER_SIGNAL, SIG_DFL);
	chain_1(0.1);				/* alive: ignored by default */
	tp_sampler_get_stats(&before);
	tp_sampler_keep_handler();
	chain_1(0.2);
	tp_sampler_pause();
	tp_sampler_get_stats(&after);
	printf("  samples after the handler was put back: %llu\n",
		   (unsigned long long) (after.samples - before.samples));
	CHECK(after.samples - before.samples >= 10);
	tp_sampler_stop();
}

/*
 * Our signal blocked by the host's code (PL/Perl's sigprocmask) and left
 * so: the periods it held back were delivered as one sample weighing them
 * all, in whatever span was labelled when the mask was lifted.  Now
 * tp_sampler_keep_handler() counts them as dropped and unblocks it.
 */
TEST(our_signal_left_blocked_is_unblocked_its_periods_dropped)
{
	tp_sampler_stats before;
	tp_sampler_stats after;
	sigset_t	ours;
	sigset_t	mask;
	collected	c = {0};
	uint32_t	heaviest = 0;

	sigemptyset(&ours);
	sigaddset(&ours, TP_SAMPLER_SIGNAL);
	CHECK(start(250, TP_SAMPLER_CPU, 256));
	pthread_sigmask(SIG_BLOCK, &ours, NULL);
	tp_sampler_get_stats(&before);
	chain_1(0.2);				/* ~50 periods, held back */
	tp_sampler_keep_handler();
	pthread_sigmask(SIG_SETMASK, NULL, &mask);
	CHECK(!sigismember(&mask, TP_SAMPLER_SIGNAL));
	chain_1(0.1);
	tp_sampler_pause();
	tp_sampler_get_stats(&after);
	tp_sampler_drain(collect, &c);
	for (size_t i = 0; i < c.count; i++)
		heaviest = c.items[i].weight > heaviest ? c.items[i].weight : heaviest;
	printf("  blocked for ~50 periods: dropped %llu, then %llu samples, the heaviest weighing %u\n",
		   (unsigned long long) (after.dropped - before.dropped),
		   (unsigned long long) (after.samples - before.samples), heaviest);
	CHECK(after.dropped - before.dropped >= 25);
	CHECK(after.samples - before.samples >= 10);
	CHECK(heaviest <= 3);
	tp_sampler_stop();
	collected_free(&c);
}

/*
 * An idle host (a session waiting for its client) stops the wall timer at
 * its first expiry: no signal wakes it again until tp_sampler_wake().
 * Before, an idle session with profile = all got 250 signals a second.
 */
TEST(an_idle_host_stops_the_wall_timer)
{
	static volatile int host_state;
	struct timespec nap = {0, 300000000};
	tp_sampler_stats stats;
	int			rc;

	host_state = 1;				/* idle (again, on a retry) */
	tp_sampler_set_idle_source(&host_state, 1u << 1);
	CHECK(start(250, TP_SAMPLER_WALL, 256));
	sleep_seconds(0.05);		/* expiries find the host idle */
	rc = nanosleep(&nap, NULL);	/* not restarted: a signal would end it early */
	CHECK(rc == 0);
	host_state = 0;				/* busy: work again */
	tp_sampler_wake();
	sleep_seconds(0.2);
	tp_sampler_pause();
	tp_sampler_get_stats(&stats);
	CHECK(stats.samples >= 10);
	tp_sampler_stop();
	tp_sampler_set_idle_source(NULL, 0);
}

/*
 * A CPU timer is not stopped by an idle host: the CPU that answering the
 * client costs would otherwise stop it until the next statement's executor,
 * and that statement's parse would go unsampled.
 */
TEST(an_idle_host_leaves_the_cpu_timer_running)
{
	static volatile int host_state;
	tp_sampler_stats before;
	tp_sampler_stats after;

	host_state = 1;				/* idle (again, on a retry) */
	tp_sampler_set_idle_source(&host_state, 1u << 1);
	CHECK(start(250, TP_SAMPLER_CPU, 256));
	chain_1(0.05);				/* expiries find the host idle: no samples */
	host_state = 0;				/* busy, and no tp_sampler_wake() */
	tp_sampler_get_stats(&before);
	chain_1(0.2);
	tp_sampler_pause();
	tp_sampler_get_stats(&after);
	CHECK(after.samples - before.samples >= 10);
	tp_sampler_stop();
	tp_sampler_set_idle_source(NULL, 0);
}

typedef struct delayed_write
{
	int			fd;
	double		delay;
} delayed_write;

static void *
write_later(void *arg)
{
	delayed_write *w = arg;

	sleep_seconds(w->delay);
	if (write(w->fd, "x", 1) != 1)
		abort();
	return NULL;
}

TEST(interrupted_syscalls_restart)
{
	int			fds[2];
	pthread_t	writer;
	delayed_write w;
	char		byte = 0;
	ssize_t		got;
	int			saved_errno;
	size_t		samples;

	CHECK(pipe(fds) == 0);
	w.fd = fds[1];
	w.delay = 0.3;
	CHECK(start(250, TP_SAMPLER_WALL, 1024));
	pthread_create(&writer, NULL, write_later, &w);
	errno = 0;
	got = read(fds[0], &byte, 1);	/* blocks ~0.3 s under ~75 signals */
	saved_errno = errno;
	pthread_join(writer, NULL);
	samples = tp_sampler_drain(NULL, NULL);
	tp_sampler_stop();
	close(fds[0]);
	close(fds[1]);
	printf("  blocking read under %zu wall samples: returned %zd, errno %d\n",
		   samples, got, saved_errno);
	CHECK(got == 1 && byte == 'x');
	CHECK(saved_errno == 0);
	CHECK(samples >= 20);
}

TEST(errno_is_preserved)
{
	double		end;
	bool		kept = true;

	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	end = thread_cpu_seconds() + 0.3;
	while (thread_cpu_seconds() < end)
	{
		errno = ERANGE;
		for (int i = 0; i < 100000; i++)
			sink += i;
		kept = kept && errno == ERANGE;
	}
	CHECK(tp_sampler_drain(NULL, NULL) > 0);
	tp_sampler_stop();
	CHECK(kept);
}

TEST(full_ring_drops_and_counts)
{
	collected	c = {0};
	tp_sampler_stats stats;

	CHECK(start(250, TP_SAMPLER_CPU, 4));
	chain_1(0.3);
	tp_sampler_pause();			/* as above: stats must match the drain */
	tp_sampler_get_stats(&stats);
	CHECK(stats.waiting == 4);
	tp_sampler_drain(collect, &c);
	tp_sampler_get_stats(&stats);
	CHECK(stats.waiting == 0);
	tp_sampler_stop();
	printf("  capacity 4: kept %zu, dropped %llu\n", c.count,
		   (unsigned long long) stats.dropped);
	CHECK(c.count == 4);
	CHECK(stats.samples == 4);
	CHECK(stats.dropped >= 20);
	collected_free(&c);
}

TEST(deep_stacks_are_truncated)
{
	collected	c = {0};
	tp_sampler_stats stats;
	size_t		at_max = 0;
	size_t		leaf_kept = 0;

	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	deep(100, 0.3);
	tp_sampler_drain(collect, &c);
	tp_sampler_get_stats(&stats);
	tp_sampler_stop();
	for (size_t i = 0; i < c.count; i++)
	{
		at_max += c.items[i].depth == TP_SAMPLER_MAX_FRAMES;
		/* The leaf end is kept: deep() right above the leaf (burn_leaf, or its clock read). */
		for (uint32_t f = 1; f <= 3 && f < c.items[i].depth; f++)
			if (strcmp(frame_name(&c.items[i], f), "deep") == 0)
			{
				leaf_kept++;
				break;
			}
	}
	CHECK(c.count > 0);
	CHECK(stats.truncated > 0);
	CHECK(at_max >= 0.8 * c.count);
	CHECK(leaf_kept >= 0.8 * c.count);
	collected_free(&c);
}

/*
 * A signal that finds the ring full is dropped; the periods it stood for
 * (1 + overruns, what a kept sample would weigh) are what is lost.  Block
 * the signal for 50 periods of a wall timer: one pending signal, ~49 overruns.
 */
TEST(dropped_signals_count_their_overruns)
{
	tp_sampler_stats stats;
	sigset_t	prof;
	sigset_t	saved_mask;
	uint64_t	before;

	CHECK(start(250, TP_SAMPLER_WALL, 1));
	sleep_seconds(0.05);		/* fills the one slot */
	sigemptyset(&prof);
	sigaddset(&prof, TP_SAMPLER_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &prof, &saved_mask);
	tp_sampler_get_stats(&stats);
	before = stats.dropped;
	sleep_seconds(0.2);
	pthread_sigmask(SIG_SETMASK, &saved_mask, NULL);	/* delivered here */
	tp_sampler_get_stats(&stats);
	tp_sampler_stop();
	printf("  capacity 1: kept %llu, dropped %llu periods while blocked\n",
		   (unsigned long long) stats.samples,
		   (unsigned long long) (stats.dropped - before));
	CHECK(stats.samples == 1);
	CHECK(stats.dropped - before >= 40);
	CHECK(stats.dropped - before <= 60);
}

/*
 * The host adds the wait event as a leaf frame (backend_profiler.c): a
 * deep stack sampled in a wait must leave it a slot, cut at its root end
 * and counted like any truncated stack, not lose its root frame uncounted.
 */
TEST(wait_samples_leave_room_for_the_wait_leaf)
{
	static volatile uint32_t wait_word = 7;
	collected	c = {0};
	tp_sampler_stats stats;
	size_t		at_max = 0;
	size_t		too_deep = 0;
	size_t		labelled = 0;

	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	tp_sampler_set_wait_source(&wait_word);
	deep(100, 0.3);
	tp_sampler_set_wait_source(NULL);
	tp_sampler_drain(collect, &c);
	tp_sampler_get_stats(&stats);
	tp_sampler_stop();
	for (size_t i = 0; i < c.count; i++)
	{
		labelled += c.items[i].labels.wait_event == 7;
		at_max += c.items[i].depth == TP_SAMPLER_MAX_FRAMES - 1;
		too_deep += c.items[i].depth > TP_SAMPLER_MAX_FRAMES - 1;
	}
	printf("  %zu samples: %zu at %d frames, %zu deeper\n", c.count, at_max,
		   TP_SAMPLER_MAX_FRAMES - 1, too_deep);
	CHECK(c.count > 0);
	CHECK(labelled == c.count);
	CHECK(too_deep == 0);
	CHECK(at_max >= 0.8 * c.count);
	CHECK(stats.truncated >= at_max);
	collected_free(&c);
}

static int	drain_calls;

/* The handler fires while a drain is running (same thread). */
static void
slow_consumer(const tp_sample *sample, void *arg)
{
	collected  *c = arg;

	if (drain_calls++ == 0)
		chain_1(0.2);
	collect(sample, c);
}

TEST(sampling_during_drain)
{
	collected	c = {0};
	size_t		first;
	size_t		second;
	uint64_t	second_weight = 0;

	drain_calls = 0;
	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	chain_1(0.1);
	first = tp_sampler_drain(slow_consumer, &c);
	second = tp_sampler_drain(collect, &c);
	tp_sampler_stop();
	for (size_t i = first; i < c.count; i++)
		second_weight += c.items[i].weight;
	printf("  first drain %zu, samples taken during it %zu (weight %llu)\n", first, second,
		   (unsigned long long) second_weight);
	CHECK(first > 0);
	CHECK(first + second == c.count);

	/*
	 * Taken inside slow_consumer's 0.2 s of CPU: ~50 at 250 Hz.  Counted
	 * by weight: on a loaded machine the kernel folds expirations into one
	 * signal (its overrun is the weight).
	 */
	CHECK(second_weight >= 20);
	for (size_t i = 0; i < c.count; i++)
		CHECK(c.items[i].weight >= 1 && c.items[i].depth >= 1 &&
			  c.items[i].depth <= TP_SAMPLER_MAX_FRAMES);
	collected_free(&c);
}

static int
first_object_only(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void) info;
	(void) size;
	(void) arg;
	return 1;
}

static atomic_ulong lock_loop_rounds;
static atomic_bool lock_loop_done;

/* Spends its time in the C library, holding the dynamic loader's lock. */
FRAMED static uint64_t
loader_lock_loop(double seconds)
{
	double		end = thread_cpu_seconds() + seconds;

	do
	{
		for (int i = 0; i < 1000; i++)
			dl_iterate_phdr(first_object_only, NULL);
		atomic_fetch_add(&lock_loop_rounds, 1);
	} while (thread_cpu_seconds() < end);
	return 0;
}

/* A hang fails the run loudly instead of stalling it. */
static void *
lock_loop_watchdog(void *arg)
{
	unsigned long last = 0;
	int			still = 0;

	(void) arg;
	while (!atomic_load(&lock_loop_done))
	{
		unsigned long now = atomic_load(&lock_loop_rounds);

		still = now == last ? still + 1 : 0;
		last = now;
		if (still == 50)
		{
			printf("  FAIL: no progress for 5 s: the handler waits for the loader's lock its thread holds\n");
			fflush(stdout);
			_exit(1);
		}
		sleep_seconds(0.1);
	}
	return NULL;
}

/*
 * libunwind looked each frame's table up with dl_iterate_phdr, under the
 * loader's lock: a sample landing just as its thread took that lock waited
 * for itself for ever (within 1-2 s of this loop at 250 Hz).  Registered
 * tables need no lookup, and still unwind the C library to its callers.
 */
TEST(samples_under_the_loader_lock_unwind_without_it)
{
	collected	c = {0};
	pthread_t	watchdog;
	size_t		in_libc = 0;
	size_t		with_caller = 0;

	atomic_store(&lock_loop_done, false);
	CHECK(pthread_create(&watchdog, NULL, lock_loop_watchdog, NULL) == 0);
	CHECK(start(250, TP_SAMPLER_CPU, 4096));
	loader_lock_loop(2.0);
	tp_sampler_drain(collect, &c);
	tp_sampler_stop();
	atomic_store(&lock_loop_done, true);
	pthread_join(watchdog, NULL);
	for (size_t i = 0; i < c.count; i++)
	{
		const tp_sample *sample = &c.items[i];
		tp_symbol	sym;

		tp_symbols_lookup(symbols, sample->pcs[0], false, &sym);
		if (sym.module == NULL || strstr(sym.module, "libc.so") == NULL)
			continue;
		in_libc++;
		for (uint32_t k = 1; k < sample->depth; k++)
			if (strcmp(frame_name(sample, k), "loader_lock_loop") == 0)
			{
				with_caller++;
				break;
			}
	}
	printf("  %zu samples, %zu in the C library, %zu of those unwound to loader_lock_loop\n",
		   c.count, in_libc, with_caller);
	CHECK(in_libc > 100);
	CHECK(with_caller >= 0.9 * in_libc);
	collected_free(&c);
}

TEST(misuse_is_reported)
{
	char		err[256] = "";

	CHECK(!tp_sampler_start(100, TP_SAMPLER_CPU, 0, err, sizeof(err)));
	CHECK(strstr(err, "capacity") != NULL);
	CHECK(start(100, TP_SAMPLER_CPU, 16));
	CHECK(!tp_sampler_start(100, TP_SAMPLER_CPU, 16, err, sizeof(err)));
	CHECK(strstr(err, "already") != NULL);
	/* Our signal sent by other code, not our timer, is ignored, not counted. */
	tp_sampler_pause();
	tp_sampler_drain(NULL, NULL);
	raise(TP_SAMPLER_SIGNAL);
	tp_sampler_resume();
	tp_sampler_pause();
	CHECK(tp_sampler_drain(NULL, NULL) <= 1);
	tp_sampler_stop();
	tp_sampler_stop();			/* twice is harmless */
	tp_sampler_pause();
	tp_sampler_resume();
	CHECK(tp_sampler_drain(NULL, NULL) == 0);
}

/* A forked child has no timer: it neither reports the parent's samples nor breaks. */
TEST(fork_child_starts_its_own)
{
	pid_t		pid;
	int			status = 0;
	size_t		parent_count;

	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	chain_1(0.1);
	fflush(stdout);				/* the child must not print our buffer again */
	pid = fork();
	if (pid == 0)
	{
		int			code = 0;
		collected	c = {0};

		if (tp_sampler_drain(NULL, NULL) != 0)
			code |= 1;
		tp_sampler_pause();
		tp_sampler_resume();
		if (!tp_sampler_start(250, TP_SAMPLER_CPU, 1024, NULL, 0))
			code |= 2;
		chain_1(0.2);
		tp_sampler_drain(collect, &c);
		if (c.count < 10)
			code |= 4;
		tp_sampler_stop();
		_exit(code);
	}
	CHECK(pid > 0);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		printf("  child status %d\n", status);
	parent_count = tp_sampler_drain(NULL, NULL);
	tp_sampler_stop();
	CHECK(parent_count > 5);
}

static void *
start_and_stop(void *arg)
{
	(void) arg;
	if (tp_sampler_start(250, TP_SAMPLER_CPU, 1024, NULL, 0))
		tp_sampler_stop();
	return NULL;
}

/*
 * A parent that prepared reads the process once for its children: their
 * first start reads nothing (a backend saved ~0.7 ms of its first traced
 * statement), and still walks whole stacks with the inherited bounds.
 */
TEST(prepared_parent_spares_its_children_the_reading)
{
	pid_t		pid;
	int			status = 0;
	tp_sampler_stats stats;

	tp_sampler_prepare();
	fflush(stdout);
	pid = fork();
	if (pid == 0)
	{
		int			code = 0;
		collected	c = {0};
		size_t		full = 0;
		uint64_t	reads;

		tp_sampler_get_stats(&stats);
		reads = stats.process_reads;
		if (!tp_sampler_start(250, TP_SAMPLER_CPU, 1024, NULL, 0))
			code |= 1;
		tp_sampler_get_stats(&stats);
		if (stats.process_reads != reads)
			code |= 2;
		chain_1(0.4);
		tp_sampler_pause();
		tp_sampler_drain(collect, &c);
		for (size_t i = 0; i < c.count; i++)
		{
			bool		at_top;

			full += has_chain(&c.items[i], &at_top);
		}
		if (c.count < 20 || full < 0.8 * c.count)
			code |= 4;
		/* A restart in the same thread (new settings) reads nothing either... */
		tp_sampler_stop();
		if (!tp_sampler_start(100, TP_SAMPLER_CPU, 512, NULL, 0))
			code |= 1;
		tp_sampler_get_stats(&stats);
		if (stats.process_reads != reads)
			code |= 8;
		tp_sampler_stop();
		/* ...a start in another thread reads its stack bounds again. */
		{
			pthread_t	other;

			if (pthread_create(&other, NULL, start_and_stop, NULL) != 0 ||
				pthread_join(other, NULL) != 0)
				code |= 1;
		}
		tp_sampler_get_stats(&stats);
		if (stats.process_reads != reads + 1)
			code |= 16;
		printf("  child: %zu samples, whole chain in %zu\n", c.count, full);
		collected_free(&c);
		fflush(stdout);
		_exit(code);
	}
	CHECK(pid > 0);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		printf("  child status %d (1 start failed, 2 first start read, 4 stacks, 8 restart read, "
			   "16 another thread's start did not read)\n", status);
}

typedef struct thread_result
{
	size_t		count;
	size_t		full;
	bool		started;
} thread_result;

static void *
sampled_thread(void *arg)
{
	thread_result *r = arg;
	collected	c = {0};

	r->started = start(250, TP_SAMPLER_CPU, 1024);
	if (!r->started)
		return NULL;
	chain_1(0.4);
	tp_sampler_drain(collect, &c);
	tp_sampler_stop();
	r->count = c.count;
	for (size_t i = 0; i < c.count; i++)
	{
		bool		at_top;

		r->full += has_chain(&c.items[i], &at_top);
	}
	collected_free(&c);
	return NULL;
}

/* Another thread: its own stack bounds, and the main thread is not sampled. */
TEST(sampling_a_thread)
{
	pthread_t	thread;
	thread_result r = {0};

	pthread_create(&thread, NULL, sampled_thread, &r);
	chain_1(0.2);				/* burns the main thread's own clock */
	pthread_join(thread, NULL);
	printf("  thread: %zu samples, whole chain in %zu\n", r.count, r.full);
	CHECK(r.started);
	CHECK(r.count > 0);
	CHECK(r.full >= 0.8 * r.count);
}


/*
 * Code outside every object, made as LLVM's JIT makes it: no frame record,
 * and the frame register pushed, then used for something else (or left
 * alone: then it designates the caller's frame).  It is entered through a
 * function pointer, as PostgreSQL calls its compiled expressions.
 */
#if defined(__x86_64__)
#define JIT_GARBAGE 0x5a5a5a5a5a5a5a5au

typedef uint64_t (*jit_fn) (long arg);

/* Not inlined: jit_callee is no leaf, so it keeps its frame. */
FRAMED static void
jit_store(uint64_t x)
{
	sink = x;
}

/* A framed function the JIT code calls (as it calls numeric_mul). */
FRAMED static uint64_t
jit_callee(long iterations)
{
	uint64_t	x = sink | 1;

	for (long i = 0; i < iterations; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	jit_store(x);
	return x;
}

/* Copy code into a fresh anonymous executable page; NULL on failure. */
static jit_fn
jit_make(const unsigned char *code, size_t len)
{
	unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
							   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (page == MAP_FAILED)
		return NULL;
	memcpy(page, code, len);
	if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0)
	{
		munmap(page, 4096);
		return NULL;
	}
	return (jit_fn) (void *) page;
}

/* The entry: push %rbp and overwrite it with garbage, or push %rax (the same alignment). */
static size_t
emit_entry(unsigned char *code, size_t n, bool clobbers, uint64_t garbage)
{
	if (!clobbers)
	{
		code[n++] = 0x50;		/* push %rax */
		return n;
	}
	code[n++] = 0x55;			/* push %rbp */
	code[n++] = 0x48;			/* movabs $garbage, %rbp */
	code[n++] = 0xbd;
	memcpy(code + n, &garbage, 8);
	return n + 8;
}

/* movabs $target, %rax; call *%rax */
static size_t
emit_call_through_rax(unsigned char *code, size_t n, uintptr_t target)
{
	code[n++] = 0x48;
	code[n++] = 0xb8;
	memcpy(code + n, &target, 8);
	n += 8;
	code[n++] = 0xff;
	code[n++] = 0xd0;
	return n;
}

/* The body: call jit_callee, or spin %rdi times. */
static size_t
emit_body(unsigned char *code, size_t n, bool calls)
{
	if (calls)
		return emit_call_through_rax(code, n, (uintptr_t) jit_callee);
	code[n++] = 0x48;			/* 1: dec %rdi */
	code[n++] = 0xff;
	code[n++] = 0xcf;
	code[n++] = 0x75;			/* jnz 1b */
	code[n++] = 0xfb;
	return n;
}

/* The exit: pop %rbp, or pop %rcx; ret */
static size_t
emit_exit(unsigned char *code, size_t n, bool clobbers)
{
	code[n++] = clobbers ? 0x5d : 0x59;
	code[n++] = 0xc3;
	return n;
}

/*
 * The four shapes: a spinning leaf or a caller of jit_callee, with the
 * frame register kept or overwritten.
 */
static jit_fn
jit_build(bool calls, bool clobbers)
{
	unsigned char code[64];
	size_t		n = 0;

	n = emit_entry(code, n, clobbers, JIT_GARBAGE);
	n = emit_body(code, n, calls);
	n = emit_exit(code, n, clobbers);
	return jit_make(code, n);
}

static jit_fn volatile jit_current;

FRAMED static uint64_t
jit_caller(double seconds)
{
	double		end = thread_cpu_seconds() + seconds;
	uint64_t	r = 0;

	while (thread_cpu_seconds() < end)
		r += jit_current(1 << 20);
	sink += r;
	return r;
}

FRAMED static uint64_t
jit_outer(double seconds)
{
	uint64_t	r = jit_caller(seconds);

	sink += r;
	return r + 1;
}

/* Is the frame named main somewhere at or after index from? */
static bool
reaches_main(const tp_sample *sample, uint32_t from)
{
	for (uint32_t i = from; i < sample->depth; i++)
		if (strcmp(frame_name(sample, i), "main") == 0)
			return true;
	return false;
}

/* 0.4 s of CPU in fn under jit_outer, sampled at 250 Hz, into c. */
static void
sample_jit_code(jit_fn fn, collected *c)
{
	jit_current = fn;
	CHECK(start(250, TP_SAMPLER_CPU, 1024));
	jit_outer(0.4);
	tp_sampler_drain(collect, c);
	tp_sampler_stop();
}

/*
 * Samples in JIT code (or in what it calls) have the JIT code's caller
 * under it, then the rest of the chain down to main.
 */
TEST(jit_code_keeps_its_caller)
{
	for (int shape = 0; shape < 4; shape++)
	{
		bool		calls = shape & 1;
		bool		clobbers = shape & 2;
		jit_fn		fn = jit_build(calls, clobbers);
		uintptr_t	page = (uintptr_t) (void *) fn;
		collected	c = {0};
		size_t		in_jit = 0;
		size_t		ok = 0;

		CHECK(fn != NULL);
		if (fn == NULL)
			return;
		sample_jit_code(fn, &c);
		for (size_t i = 0; i < c.count; i++)
		{
			const tp_sample *s = &c.items[i];
			uint32_t	at = calls ? 1 : 0;	/* where the JIT frame is */

			if (calls && strcmp(frame_name(s, 0), "jit_callee") != 0)
				continue;
			if (s->depth <= at || s->pcs[at] - page >= 4096)
				continue;
			in_jit++;
			if (s->depth >= at + 3 && strcmp(frame_name(s, at + 1), "jit_caller") == 0 &&
				strcmp(frame_name(s, at + 2), "jit_outer") == 0 && reaches_main(s, at + 3))
				ok++;
			else if (in_jit - ok <= 2)
				print_stack(s);
		}
		printf("  JIT code %s, frame register %s: %zu of %zu samples with jit_caller, "
			   "jit_outer ... main under it\n", calls ? "calling a framed function" : "spinning",
			   clobbers ? "overwritten" : "kept", ok, in_jit);
		CHECK(in_jit >= 20);
		CHECK(ok == in_jit);
		collected_free(&c);
		munmap((void *) page, 4096);
	}
}

/*
 * JIT code calling JIT code, as an LLVM-compiled expression calls the
 * tuple deforming function compiled with it (PostgreSQL's evalexpr and
 * deform, one module: a direct call, or through a register): the outer
 * function A at the page's start, the inner one B at offset 128.  Both
 * push the frame register (and overwrite it) or only align the stack.  B
 * spins or calls jit_callee.
 */
static jit_fn
jit_build_nested(bool calls, bool clobbers, bool direct)
{
	unsigned char code[256];
	size_t		n = 0;
	const size_t inner = 128;
	unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
							   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t	inner_address = (uintptr_t) page + inner;

	if (page == MAP_FAILED)
		return NULL;
	memset(code, 0xcc, sizeof(code));	/* int3 */
	for (int f = 0; f < 2; f++)
	{
		n = f == 0 ? 0 : inner;
		n = emit_entry(code, n, clobbers, JIT_GARBAGE + (uint64_t) f);
		if (f == 0 && direct)
		{
			int32_t		disp;

			code[n++] = 0xe8;	/* call B */
			disp = (int32_t) (inner - (n + 4));
			memcpy(code + n, &disp, 4);
			n += 4;
		}
		else if (f == 0)
			n = emit_call_through_rax(code, n, inner_address);	/* B */
		else
			n = emit_body(code, n, calls);
		n = emit_exit(code, n, clobbers);
	}
	memcpy(page, code, sizeof(code));
	if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0)
	{
		munmap(page, 4096);
		return NULL;
	}
	return (jit_fn) (void *) page;
}

/*
 * Samples in JIT code called by JIT code (or in what it calls): the inner
 * JIT frame, then the outer one, then the outer one's caller and the rest
 * of the chain.
 */
TEST(jit_code_called_from_jit_code_keeps_both_frames)
{
	for (int shape = 0; shape < 8; shape++)
	{
		bool		calls = shape & 1;
		bool		clobbers = shape & 2;
		bool		direct = shape & 4;
		jit_fn		fn = jit_build_nested(calls, clobbers, direct);
		uintptr_t	page = (uintptr_t) (void *) fn;
		collected	c = {0};
		size_t		in_inner = 0;
		size_t		ok = 0;

		CHECK(fn != NULL);
		if (fn == NULL)
			return;
		sample_jit_code(fn, &c);
		for (size_t i = 0; i < c.count; i++)
		{
			const tp_sample *s = &c.items[i];
			uint32_t	at = calls ? 1 : 0;	/* where the inner JIT frame is */

			if (calls && strcmp(frame_name(s, 0), "jit_callee") != 0)
				continue;
			/* In B (or returning into it): past offset 128 of the page. */
			if (s->depth <= at || s->pcs[at] - page >= 4096 || s->pcs[at] - page < 128)
				continue;
			in_inner++;
			if (s->depth >= at + 4 && s->pcs[at + 1] - page < 128 &&
				strcmp(frame_name(s, at + 2), "jit_caller") == 0 &&
				strcmp(frame_name(s, at + 3), "jit_outer") == 0 && reaches_main(s, at + 4))
				ok++;
			else if (in_inner - ok <= 2)
			{
				printf("   [%u] %s%s:", at, (s->pcs[at + 1] - page < 128) ? "outer JIT frame next" : "no outer JIT frame", "");
				print_stack(s);
			}
		}
		printf("  inner JIT code %s, frame register %s, called %s: %zu of %zu samples with "
			   "the outer JIT frame, jit_caller, jit_outer ... main under it\n",
			   calls ? "calling a framed function" : "spinning",
			   clobbers ? "overwritten" : "kept", direct ? "directly" : "through a register",
			   ok, in_inner);
		CHECK(in_inner >= 20);
		CHECK(ok == in_inner);
		collected_free(&c);
		munmap((void *) page, 4096);
	}
}
#endif

int
main(void)
{
	symbols = tp_symbols_load();
	if (symbols == NULL)
	{
		printf("cannot load symbols\n");
		return 1;
	}
	RUN_RETRY(cpu_samples_walk_the_whole_chain, 3);
	RUN_RETRY(frameless_leaves_keep_their_caller, 3);
	RUN(leaf_repair_rules);
	RUN_RETRY(labels_set_before_are_on_samples, 3);
	RUN(labels_are_never_torn);
	RUN_RETRY(pause_takes_no_samples, 3);
	RUN_RETRY(pause_resume_keeps_the_period, 3);
	RUN_RETRY(wall_mode_samples_sleep_cpu_mode_does_not, 3);
	RUN_RETRY(libunwind_hands_a_framed_rest_to_frame_pointers, 3);
	RUN_RETRY(hz_is_clamped, 3);
	RUN(stop_restores_the_previous_handler);
	RUN(sigprof_is_left_to_others);
	RUN(our_signal_reset_to_default_ends_nothing);
	RUN_RETRY(our_signal_left_blocked_is_unblocked_its_periods_dropped, 3);
	RUN_RETRY(an_idle_host_stops_the_wall_timer, 3);
	RUN_RETRY(an_idle_host_leaves_the_cpu_timer_running, 3);
	RUN_RETRY(interrupted_syscalls_restart, 3);
	RUN_RETRY(errno_is_preserved, 3);
	RUN_RETRY(full_ring_drops_and_counts, 3);
	RUN_RETRY(deep_stacks_are_truncated, 3);
	RUN_RETRY(dropped_signals_count_their_overruns, 3);
	RUN_RETRY(wait_samples_leave_room_for_the_wait_leaf, 3);
	RUN_RETRY(sampling_during_drain, 3);
	RUN_RETRY(samples_under_the_loader_lock_unwind_without_it, 3);
	RUN(misuse_is_reported);
	RUN_RETRY(prepared_parent_spares_its_children_the_reading, 3);
	RUN_RETRY(fork_child_starts_its_own, 3);
	RUN_RETRY(sampling_a_thread, 3);
#if defined(__x86_64__)
	RUN_RETRY(jit_code_keeps_its_caller, 3);
	RUN_RETRY(jit_code_called_from_jit_code_keeps_both_frames, 3);
#endif
	tp_symbols_free(symbols);
	return unit_summary();
}
