/*
 * sampler_bench.c - the workloads bench/sampler.sh measures; it prints
 * raw figures, the script makes the table.  Built by the script itself.
 *
 *   sampler_bench walk N            N frame-pointer walks of a 20-deep stack
 *   sampler_bench backtrace N       N glibc backtrace() of the same stack
 *   sampler_bench jitwalk N         N walks of the stack under a fake JIT
 *                                   frame (x86_64): from a function it
 *                                   calls (tp_stack_walk_code), and from
 *                                   the JIT code itself (tp_stack_walk_jit)
 *   sampler_bench handler SECONDS   sample a 20-deep CPU loop at 250 Hz
 *   sampler_bench loop HZ ITERS     CPU-bound loop, 20 deep, sampled at HZ
 *                                   (0: no sampler); prints CPU seconds
 *   sampler_bench libc SECONDS      leaf in libc (memset): is its caller kept?
 *   sampler_bench signal HZ ITERS   the loop under an empty SIGRTMIN handler
 *                                   at HZ (wall clock): signal round trip
 *   sampler_bench pause N           N pause/resume pairs
 *   sampler_bench drain SECONDS     cost of draining (leaf repair included)
 *   sampler_bench symbolize         cost of symbolizing the samples
 */
#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sampler.h"
#include "stack_walk.h"
#include "symbols.h"

#if defined(__clang__)
/* clang has no per-function frame pointers: build with -fno-omit-frame-pointer. */
#define FRAMED __attribute__((noinline, disable_tail_calls))
#define FRAMELESS __attribute__((noinline))
#else
#define FRAMED __attribute__((noipa, optimize("no-omit-frame-pointer", "no-optimize-sibling-calls")))
#define FRAMELESS __attribute__((noipa, optimize("omit-frame-pointer")))
#endif
#define DEPTH 20

static volatile uint64_t sink;
static tp_stack_bounds bounds;
static char libc_buffer[4096];
static volatile size_t libc_size = sizeof(libc_buffer);	/* no inlined memset */

static double
clock_seconds(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

FRAMED static void
leaf_walk(long n)
{
	uintptr_t	pcs[TP_SAMPLER_MAX_FRAMES];
	volatile uintptr_t sp_probe = 0;
	tp_stack_regs regs;
	bool		truncated;
	uint64_t	inserted;
	int			depth = 0;
	static tp_code_map map;

	tp_code_map_read(&map);		/* as the handler has it: with the JIT checks */
	regs.pc = (uintptr_t) leaf_walk;
	regs.fp = (uintptr_t) __builtin_frame_address(0);
	regs.sp = (uintptr_t) &sp_probe;
	for (long i = 0; i < n; i++)
		depth = tp_stack_walk_code(&regs, &bounds, &map, pcs, TP_SAMPLER_MAX_FRAMES, &truncated,
								   &inserted);
	printf("depth %d\n", depth);
}

#if defined(__x86_64__)
/*
 * The JIT code's shape the walks step over: no frame record, the frame
 * register kept, entered through a function pointer; it calls leaf_jit.
 */
typedef void (*jit_fn) (long n);

FRAMED static void
leaf_jit(long n)
{
	const uintptr_t *frame = __builtin_frame_address(0);
	uintptr_t	pcs[TP_SAMPLER_MAX_FRAMES];
	tp_stack_regs regs;
	tp_stack_regs jit;
	bool		truncated;
	uint64_t	inserted = 0;
	int			depth_code = 0;
	int			depth_jit = 0;
	static tp_code_map map;

	tp_code_map_read(&map);
	regs.pc = (uintptr_t) leaf_jit;
	regs.fp = (uintptr_t) frame;
	regs.sp = (uintptr_t) frame;
	/* As libunwind leaves the JIT frame: its PC, SP and frame register. */
	jit.pc = frame[1];
	jit.sp = (uintptr_t) (frame + 2);
	jit.fp = frame[0];
	for (long i = 0; i < n; i++)
		depth_code = tp_stack_walk_code(&regs, &bounds, &map, pcs, TP_SAMPLER_MAX_FRAMES,
										&truncated, &inserted);
	for (long i = 0; i < n; i++)
		depth_jit = tp_stack_walk_jit(&jit, &bounds, &map, pcs, TP_SAMPLER_MAX_FRAMES,
									  &truncated, &inserted);
	printf("depth %d jit_depth %d\n", depth_code, depth_jit);
}

static jit_fn
jit_code(void)
{
	unsigned char code[32];
	size_t		n = 0;
	uintptr_t	callee = (uintptr_t) leaf_jit;
	unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
							   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (page == MAP_FAILED)
		return NULL;
	code[n++] = 0x50;			/* push %rax */
	code[n++] = 0x48;			/* movabs $leaf_jit, %rax */
	code[n++] = 0xb8;
	memcpy(code + n, &callee, 8);
	n += 8;
	code[n++] = 0xff;			/* call *%rax */
	code[n++] = 0xd0;
	code[n++] = 0x59;			/* pop %rcx */
	code[n++] = 0xc3;			/* ret */
	memcpy(page, code, n);
	if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0)
		return NULL;
	return (jit_fn) (void *) page;
}

static jit_fn volatile jit_current;

/* The JIT code's caller, a frame-pointer function as ExecAgg is. */
FRAMED static void
leaf_enters_jit(long n)
{
	jit_current(n);
	sink++;
}
#endif

FRAMED static void
leaf_backtrace(long n)
{
	void	   *pcs[TP_SAMPLER_MAX_FRAMES];
	int			depth = 0;

	for (long i = 0; i < n; i++)
		depth = backtrace(pcs, TP_SAMPLER_MAX_FRAMES);
	printf("depth %d\n", depth);
}

FRAMELESS static void
leaf_spin(long iterations)
{
	uint64_t	x = sink | 1;

	for (long i = 0; i < iterations; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	sink = x;
}

FRAMED static void
leaf_libc(long iterations)
{
	for (long i = 0; i < iterations; i++)
	{
		memset(libc_buffer, (int) i, libc_size);
		sink += libc_buffer[i & 4095];
	}
}

/*
 * 20 real frames (bench_level) above whichever leaf.  leaf_spin has no
 * frame (GCC drops it from leaves that need no stack, as in PostgreSQL's
 * hash_bytes); leaf_libc calls libc's frameless memset.
 */
FRAMED static void
bench_level(int level, void (*leaf) (long), long arg)
{
	if (level > 1)
		bench_level(level - 1, leaf, arg);
	else
		leaf(arg);
	sink++;
}

static volatile sig_atomic_t signals_seen;

static void
count_signal(int signo)
{
	(void) signo;
	signals_seen++;
}

static void
start_or_die(int hz)
{
	char		err[256];

	if (!tp_sampler_start(hz, TP_SAMPLER_CPU, 1 << 16, err, sizeof(err)))
	{
		fprintf(stderr, "sampler_bench: %s\n", err);
		exit(1);
	}
}

typedef struct walk_stats
{
	tp_symbols *symbols;
	long		samples;
	long		weight;
	long		full;			/* every bench_level frame present */
	long		caller_kept;	/* libc mode: leaf_libc right under the PC */
	long		in_libc;
} walk_stats;

static const char *
name_of(walk_stats *w, const tp_sample *s, uint32_t i)
{
	tp_symbol	sym;

	tp_symbols_lookup(w->symbols, s->pcs[i], i > 0, &sym);
	return sym.function ? sym.function : "?";
}

static void
count_sample(const tp_sample *s, void *arg)
{
	walk_stats *w = arg;
	int			levels = 0;

	w->samples++;
	w->weight += s->weight;
	for (uint32_t i = 0; i < s->depth; i++)
		levels += strcmp(name_of(w, s, i), "bench_level") == 0;
	w->full += levels == DEPTH;
	if (s->depth > 1 && strstr(name_of(w, s, 0), "memset") != NULL)
	{
		w->in_libc++;
		w->caller_kept += strcmp(name_of(w, s, 1), "leaf_libc") == 0;
	}
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	double		arg = argc > 2 ? atof(argv[2]) : 0;

	tp_stack_bounds_current(&bounds);
	if (strcmp(mode, "walk") == 0)
		bench_level(DEPTH, leaf_walk, (long) arg);
#if defined(__x86_64__)
	else if (strcmp(mode, "jitwalk") == 0)
	{
		jit_current = jit_code();
		if (jit_current == NULL)
		{
			fprintf(stderr, "sampler_bench: cannot map JIT code\n");
			return 1;
		}
		bench_level(DEPTH, leaf_enters_jit, (long) arg);
	}
#endif
	else if (strcmp(mode, "backtrace") == 0)
		bench_level(DEPTH, leaf_backtrace, (long) arg);
	else if (strcmp(mode, "handler") == 0 || strcmp(mode, "libc") == 0)
	{
		bool		libc = strcmp(mode, "libc") == 0;
		walk_stats	w = {0};
		double		end;
		tp_sampler_stats stats;

		w.symbols = tp_symbols_load();
		start_or_die(250);
		end = clock_seconds(CLOCK_THREAD_CPUTIME_ID) + arg;
		while (clock_seconds(CLOCK_THREAD_CPUTIME_ID) < end)
			bench_level(DEPTH, libc ? leaf_libc : leaf_spin, libc ? 20000 : 2000000);
		tp_sampler_drain(count_sample, &w);
		tp_sampler_get_stats(&stats);
		tp_sampler_stop();
		printf("samples %ld weight %ld full %ld in_libc %ld caller_kept %ld truncated %llu\n",
			   w.samples, w.weight, w.full, w.in_libc, w.caller_kept,
			   (unsigned long long) stats.truncated);
		tp_symbols_free(w.symbols);
	}
	else if (strcmp(mode, "loop") == 0)
	{
		int			hz = (int) arg;
		long		iterations = argc > 3 ? atol(argv[3]) : 100000000;
		double		cpu0,
					wall0;
		walk_stats	w = {0};

		if (hz > 0)
			start_or_die(hz);
		cpu0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
		wall0 = clock_seconds(CLOCK_MONOTONIC);
		bench_level(DEPTH, leaf_spin, iterations);
		printf("cpu %.6f wall %.6f", clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0,
			   clock_seconds(CLOCK_MONOTONIC) - wall0);
		if (hz > 0)
		{
			w.symbols = tp_symbols_load();
			tp_sampler_drain(count_sample, &w);
			tp_sampler_stop();
			tp_symbols_free(w.symbols);
		}
		printf(" samples %ld full %ld\n", w.samples, w.full);
	}
	else if (strcmp(mode, "signal") == 0)
	{
		long		hz = (long) arg;
		long		iterations = argc > 3 ? atol(argv[3]) : 100000000;
		struct sigaction sa;
		struct sigevent sev;
		struct itimerspec its;
		timer_t		timer;
		double		cpu0;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = count_signal;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGRTMIN, &sa, NULL);
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGRTMIN;
		sev._sigev_un._tid = gettid();
		if (hz > 0 && timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0)
		{
			its.it_interval.tv_sec = 0;
			its.it_interval.tv_nsec = 1000000000L / hz;
			its.it_value = its.it_interval;
			timer_settime(timer, 0, &its, NULL);
		}
		cpu0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
		bench_level(DEPTH, leaf_spin, iterations);
		printf("cpu %.6f signals %ld\n", clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0,
			   (long) signals_seen);
	}
	else if (strcmp(mode, "pause") == 0)
	{
		long		n = (long) arg;
		double		t0;

		start_or_die(250);
		t0 = clock_seconds(CLOCK_MONOTONIC);
		for (long i = 0; i < n; i++)
		{
			tp_sampler_pause();
			tp_sampler_resume();
		}
		printf("ns_per_pair %.0f\n", (clock_seconds(CLOCK_MONOTONIC) - t0) / n * 1e9);
		tp_sampler_stop();
	}
	else if (strcmp(mode, "drain") == 0)
	{
		double		t0,
					t1;
		size_t		n;

		start_or_die(250);
		t0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
		while (clock_seconds(CLOCK_THREAD_CPUTIME_ID) < t0 + arg)
			bench_level(DEPTH, leaf_spin, 2000000);
		tp_sampler_pause();
		t0 = clock_seconds(CLOCK_MONOTONIC);
		n = tp_sampler_drain(NULL, NULL);
		t1 = clock_seconds(CLOCK_MONOTONIC);
		printf("drain_us_per_sample %.3f samples %zu\n", n ? (t1 - t0) / n * 1e6 : 0.0, n);
		tp_sampler_stop();
	}
	else if (strcmp(mode, "symbolize") == 0)
	{
		walk_stats	w = {0};
		double		t0,
					t1,
					t2;
		long		frames = 0;
		tp_sampler_stats stats;

		start_or_die(250);
		t0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
		while (clock_seconds(CLOCK_THREAD_CPUTIME_ID) < t0 + 1.0)
			bench_level(DEPTH, leaf_spin, 2000000);
		tp_sampler_pause();
		tp_sampler_get_stats(&stats);
		t0 = clock_seconds(CLOCK_MONOTONIC);
		w.symbols = tp_symbols_load();
		t1 = clock_seconds(CLOCK_MONOTONIC);
		tp_sampler_drain(count_sample, &w);
		t2 = clock_seconds(CLOCK_MONOTONIC);
		frames = (long) stats.samples * (DEPTH + 4);
		printf("load_ms %.3f drain_us_per_sample %.2f samples %ld frames_about %ld\n",
			   (t1 - t0) * 1e3, w.samples ? (t2 - t1) / w.samples * 1e6 : 0.0,
			   w.samples, frames);
		tp_sampler_stop();
		tp_symbols_free(w.symbols);
	}
	else
	{
		fprintf(stderr, "usage: sampler_bench walk|backtrace|handler|loop|libc|signal|pause|drain|symbolize ...\n");
		return 2;
	}
	return 0;
}
