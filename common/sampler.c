/*
 * sampler.c - signal-driven stack sampler for one thread (see sampler.h).
 *
 * The handler is the only producer of the sample ring and the consumer
 * (tp_sampler_drain) normally runs on the same thread, outside the
 * handler: a handler then runs to completion between two instructions of
 * the consumer, never the other way round, and signal fences (compiler
 * barriers) order everything.  The ring indices use acquire/release anyway
 * (free on x86), so that a drain from another thread is correct too.  No
 * lock is ever taken.
 *
 * Everything the handler touches is static or preallocated by
 * tp_sampler_start(); it calls only clock_gettime and timer_settime (both
 * async-signal-safe) and reads the stack.
 */
#include "sampler.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dwarf_unwind.h"
#include "fast_random.h"
#include "stack_walk.h"

/* Label slots: the one the handler reads, one being written, and spares. */
#define LABEL_SLOTS 4

_Static_assert(ATOMIC_LONG_LOCK_FREE == 2, "the handler needs lock-free atomics");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the handler needs lock-free atomics");

/* What the drain needs besides the sample to repair its stack. */
typedef struct top_words
{
	uintptr_t	words[TP_STACK_TOP_WORDS];	/* for tp_leaf_repair_apply */
	int			count;
	uint64_t	inserted;		/* bit i: pcs[i] is a JIT frame's caller */
} top_words;

/* Read by the handler. */
static tp_sample *ring;
static top_words *ring_top;		/* parallel to ring */
static unsigned long ring_capacity;
static atomic_ulong ring_head;	/* samples ever stored; only the handler writes */
static atomic_ulong ring_tail;	/* samples ever drained; only drain writes */
static atomic_ulong stat_dropped;
static atomic_ulong stat_truncated;
static atomic_ulong stat_handed_off;
static atomic_int active;		/* record samples; off while paused */
static atomic_int armed;		/* the timer runs; the handler may clear it */
static tp_stack_bounds stack_bounds;

/*
 * Where code is, to tell JIT code (in no object) apart.  The drain reads a
 * new map into the other one after a dlopen, then switches: the handler
 * only interrupts it, so it always reads a whole map.
 */
static tp_code_map code_maps[2];
static atomic_uint code_map_current;
static tp_sample_labels label_slots[LABEL_SLOTS];
static atomic_uint label_current;
static unsigned int label_next;	/* written by tp_sampler_set_labels only */

/* Our timer's si_value, to ignore the signal when other code sends it. */
static int	timer_cookie;

/* Only outside the handler. */
static bool started;
static bool forked_child;		/* state inherited by fork(): no timer */
static bool handler_installed;
static bool timer_valid;
static bool paused;
static _Atomic bool wall_clock;	/* read by the handler */
static bool atfork_registered;
static bool prepared;			/* the process was read, by prepared_in */
static pthread_t prepared_in;	/* whose stack bounds were read */
static uint64_t process_reads;

/*
 * The return address into the C library's start of the thread that read
 * the process (main's caller; a backend inherits the postmaster's), 0 if
 * unknown: a frame-pointer walk that ends there reached the root.
 */
static uintptr_t root_return;
static timer_t timer;			/* also read by the handler */
static struct timespec period;
static struct sigaction previous_action;
static tp_leaf_repair *leaf_repair;	/* NULL: no repair (out of memory) */
static const volatile uint32_t *_Atomic wait_source;	/* read by the handler */
static const volatile int *_Atomic idle_source;	/* and this, with idle_states */
static _Atomic uint32_t idle_states;

/*
 * Did a frame-pointer walk libunwind handed over (pcs[0..n), pcs[0] in code
 * that keeps frame pointers) stay in such code up to the thread's root, or
 * to the depth allowed?  Code without frame pointers further out (libperl
 * between the server's SPI and PL/Perl's call handler) leaves its return
 * address in the chain, and cuts it there.
 */
static bool
reached_root(const tp_code_map *map, const uintptr_t *pcs, int n, bool truncated)
{
	for (int i = 1; i < n; i++)
		if (!tp_code_map_framed(map, pcs[i]))
			return !truncated && i == n - 1 && pcs[i] == root_return && root_return != 0;
	return truncated;
}

/*
 * The stack of a sample interrupted in code without frame pointers:
 * libunwind from the signal's context, then the frame-pointer walks where
 * it stops (JIT code, an object loaded since, or with hand_off_framed the
 * first frame back in code that keeps frame pointers).  Returns the depth.
 */
static int
unwind_frameless(void *ucontext, const tp_code_map *map, uintptr_t *pcs, int max,
				 bool *truncated, uint64_t *inserted, bool hand_off_framed)
{
	tp_stack_regs rest;
	bool		rest_in_jit;
	int			depth = tp_dwarf_unwind(ucontext, map, pcs, max, truncated, &rest,
										&rest_in_jit, hand_off_framed);

	*inserted = 0;
	if (rest.pc != 0 && depth < max)
	{
		uint64_t	walked_inserted = 0;
		int			above = depth;	/* < max <= 64 */

		depth += (rest_in_jit ? tp_stack_walk_jit : tp_stack_walk_code)
			(&rest, &stack_bounds, map, pcs + above, max - above, truncated, &walked_inserted);
		if (hand_off_framed && !rest_in_jit && tp_code_map_framed(map, rest.pc))
		{
			if (!reached_root(map, pcs + above, depth - above, *truncated))
				return unwind_frameless(ucontext, map, pcs, max, truncated, inserted, false);
			atomic_fetch_add_explicit(&stat_handed_off, 1, memory_order_relaxed);
		}
		*inserted = walked_inserted << above;
	}
	return depth;
}

static void
sample_handler(int signo, siginfo_t *info, void *ucontext)
{
	int			saved_errno = errno;
	unsigned long head;
	unsigned long tail;
	unsigned int slot;
	tp_sample  *sample;
	top_words  *top;
	tp_stack_regs regs;
	struct timespec now;
	bool		truncated = false;
	uint32_t	overrun;
	uint32_t	weight;
	int			max_frames;

	(void) signo;
	if (info == NULL || info->si_code != SI_TIMER ||
		info->si_value.sival_ptr != &timer_cookie)
	{
		errno = saved_errno;
		return;
	}
	if (!atomic_load_explicit(&active, memory_order_relaxed))
	{
		/* Paused since the last expiry: disarm now (see tp_sampler_pause). */
		static const struct itimerspec off;

		atomic_store_explicit(&armed, 0, memory_order_relaxed);
		timer_settime(timer, 0, &off, NULL);
		errno = saved_errno;
		return;
	}

	{
		const volatile int *source = atomic_load_explicit(&idle_source, memory_order_relaxed);
		unsigned	state = source != NULL ? (unsigned) *source : 32;

		if (state < 32 && (atomic_load_explicit(&idle_states, memory_order_relaxed) >> state & 1) != 0)
		{
			/*
			 * The host is idle: no sample, none lost.  A wall timer would
			 * wake an idle session at every period: it stops until
			 * tp_sampler_wake().  (A CPU timer barely runs while idle, and
			 * stopped by the CPU that answering the client costs, it would
			 * miss the next statement's parse.)
			 */
			static const struct itimerspec off;

			if (atomic_load_explicit(&wall_clock, memory_order_relaxed))
			{
				atomic_store_explicit(&armed, 0, memory_order_relaxed);
				timer_settime(timer, 0, &off, NULL);
			}
			errno = saved_errno;
			return;
		}
	}

	/*
	 * si_overrun is what timer_getoverrun() would return for this signal,
	 * without its system call.  A dropped signal loses as many periods as a
	 * kept one would have weighed.
	 */
	overrun = info->si_overrun > 0 ? (uint32_t) info->si_overrun : 0;
	weight = overrun < UINT32_MAX ? overrun + 1 : UINT32_MAX;

	head = atomic_load_explicit(&ring_head, memory_order_relaxed);
	tail = atomic_load_explicit(&ring_tail, memory_order_acquire);
	if (head - tail >= ring_capacity)
	{
		atomic_fetch_add_explicit(&stat_dropped, weight, memory_order_relaxed);
		errno = saved_errno;
		return;
	}
	atomic_signal_fence(memory_order_acquire);
	sample = &ring[head % ring_capacity];
	top = &ring_top[head % ring_capacity];

	slot = atomic_load_explicit(&label_current, memory_order_relaxed);
	atomic_signal_fence(memory_order_acquire);
	sample->labels = label_slots[slot % LABEL_SLOTS];
	{
		const volatile uint32_t *source = atomic_load_explicit(&wait_source, memory_order_relaxed);

		if (source != NULL)
			sample->labels.wait_event = *source;
	}

	sample->weight = weight;
	/* A wait event becomes the host's leaf frame: leave it a slot. */
	max_frames = sample->labels.wait_event != 0 ? TP_SAMPLER_MAX_FRAMES - 1 : TP_SAMPLER_MAX_FRAMES;

	clock_gettime(CLOCK_REALTIME, &now);
	sample->time_ns = (uint64_t) now.tv_sec * 1000000000u + (uint64_t) now.tv_nsec;

	sample->depth = 0;
	top->count = 0;
	top->inserted = 0;
	if (tp_stack_regs_get(ucontext, &regs))
	{
		const tp_code_map *map;

		map = &code_maps[atomic_load_explicit(&code_map_current, memory_order_relaxed) & 1];
		atomic_signal_fence(memory_order_acquire);

		/* Interrupted in code without frame pointers: its chain is broken. */
		if (!tp_code_map_framed(map, regs.pc))
			sample->depth = (uint32_t) unwind_frameless(ucontext, map, sample->pcs, max_frames,
														&truncated, &top->inserted, true);
		if (sample->depth <= 1)
		{
			top->inserted = 0;
			sample->depth = (uint32_t) tp_stack_walk_code(&regs, &stack_bounds, map, sample->pcs,
														  max_frames, &truncated,
														  &top->inserted);
			top->count = tp_stack_top_words(&regs, &stack_bounds, top->words);
		}
	}
	sample->truncated = truncated;
	if (truncated)
		atomic_fetch_add_explicit(&stat_truncated, 1, memory_order_relaxed);

	/* Publish only a completely written sample. */
	atomic_signal_fence(memory_order_release);
	atomic_store_explicit(&ring_head, head + 1, memory_order_release);
	errno = saved_errno;
}

/*
 * fork() copies our state but not the timer.  Only flags here (fork may
 * have been called from a signal handler): the copied ring is freed by the
 * child's next tp_sampler_start() or tp_sampler_stop().
 */
static void
after_fork_child(void)
{
	if (!started)
		return;
	atomic_store_explicit(&active, 0, memory_order_relaxed);
	atomic_store_explicit(&armed, 0, memory_order_relaxed);
	forked_child = true;
	timer_valid = false;
	paused = true;
	/* The parent's samples are the parent's to report. */
	atomic_store_explicit(&ring_head, 0, memory_order_relaxed);
	atomic_store_explicit(&ring_tail, 0, memory_order_relaxed);
	atomic_store_explicit(&stat_dropped, 0, memory_order_relaxed);
	atomic_store_explicit(&stat_truncated, 0, memory_order_relaxed);
	atomic_store_explicit(&stat_handed_off, 0, memory_order_relaxed);
}

static void
set_error(char *err, size_t errlen, const char *what, int error)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "sampler: %s: %s", what, strerror(error));
}

static void
arm(const struct timespec *first)
{
	struct itimerspec its;

	its.it_interval = period;
	its.it_value = *first;
	atomic_store_explicit(&armed, 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	timer_settime(timer, 0, &its, NULL);
}

static bool
install_handler(void)
{
	struct sigaction action;

	memset(&action, 0, sizeof(action));
	action.sa_sigaction = sample_handler;
	action.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&action.sa_mask);
	return sigaction(TP_SAMPLER_SIGNAL, &action, NULL) == 0;
}

/*
 * Drop the timer and our signal handler.  A signal the timer queued just
 * before it was deleted must not reach the restored disposition (for
 * SIG_DFL that would terminate the process): it is taken while blocked.
 */
static void
release(void)
{
	sigset_t	prof;
	sigset_t	saved_mask;
	struct timespec no_wait = {0, 0};

	atomic_store_explicit(&active, 0, memory_order_relaxed);
	sigemptyset(&prof);
	sigaddset(&prof, TP_SAMPLER_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &prof, &saved_mask);
	if (timer_valid)
		timer_delete(timer);
	timer_valid = false;
	atomic_store_explicit(&armed, 0, memory_order_relaxed);
	if (handler_installed)
	{
		while (sigtimedwait(&prof, NULL, &no_wait) == TP_SAMPLER_SIGNAL)
			;
		sigaction(TP_SAMPLER_SIGNAL, &previous_action, NULL);
		handler_installed = false;
	}
	pthread_sigmask(SIG_SETMASK, &saved_mask, NULL);

	free(ring);
	ring = NULL;
	free(ring_top);
	ring_top = NULL;
	ring_capacity = 0;
	tp_leaf_repair_free(leaf_repair);
	leaf_repair = NULL;
	started = false;
	forked_child = false;
	paused = false;
}

static void refresh_code_map(void);

#define ROOT_WALK_FRAMES 512

/* This thread's root_return: where a frame-pointer walk from here ends. */
__attribute__((noinline)) static uintptr_t
find_root_return(const tp_code_map *map)
{
	uintptr_t	pcs[ROOT_WALK_FRAMES];
	tp_stack_regs regs;
	bool		truncated;
	int			n;

	regs.pc = (uintptr_t) &find_root_return;
	regs.fp = (uintptr_t) __builtin_frame_address(0);
	regs.sp = (uintptr_t) &regs;
	n = tp_stack_walk(&regs, &stack_bounds, pcs, ROOT_WALK_FRAMES, &truncated);
	if (truncated || n < 2 || pcs[n - 1] - map->libc_start >= map->libc_end - map->libc_start)
		return 0;
	return pcs[n - 1];
}

/* The stack's bounds, the loaded objects and their unwind tables. */
static void
read_process(void)
{
	process_reads++;
	tp_stack_bounds_current(&stack_bounds); /* none: PCs only */
	tp_code_map_read(&code_maps[0]);
	root_return = find_root_return(&code_maps[0]);
	tp_dwarf_register_tables(&code_maps[0]);
	atomic_store_explicit(&code_map_current, 0, memory_order_relaxed);
}

void
tp_sampler_prepare(void)
{
	if (started)
		return;
	read_process();
	prepared = true;
	prepared_in = pthread_self();
}

bool
tp_sampler_start(int hz, tp_sampler_clock clock, size_t capacity,
				 char *err, size_t errlen)
{
	struct sigevent sev;
	clockid_t	clock_id;
	long		interval_ns;

	if (started && forked_child)
	{
		/* Keep the handler and the disposition it replaced; drop the rest. */
		free(ring);
		ring = NULL;
		free(ring_top);
		ring_top = NULL;
		tp_leaf_repair_free(leaf_repair);
		leaf_repair = NULL;
		started = false;
		forked_child = false;
	}
	if (started)
	{
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "sampler: already running in this process");
		return false;
	}
	if (capacity == 0 || capacity > SIZE_MAX / sizeof(tp_sample) ||
		capacity > (unsigned long) -1 / 2)
	{
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "sampler: capacity %zu out of range (1 .. %zu samples)",
					 capacity, SIZE_MAX / sizeof(tp_sample));
		return false;
	}
	if (hz < 1)
		hz = 1;
	if (hz > TP_SAMPLER_MAX_HZ)
		hz = TP_SAMPLER_MAX_HZ;
	interval_ns = 1000000000L / hz;
	period.tv_sec = interval_ns / 1000000000L;
	period.tv_nsec = interval_ns % 1000000000L;

	ring = calloc(capacity, sizeof(tp_sample));
	ring_top = calloc(capacity, sizeof(top_words));
	if (ring == NULL || ring_top == NULL)
	{
		free(ring);
		free(ring_top);
		ring = NULL;
		ring_top = NULL;
		set_error(err, errlen, "cannot allocate the sample ring", ENOMEM);
		return false;
	}
	leaf_repair = tp_leaf_repair_new();	/* optional */
	ring_capacity = capacity;
	atomic_store_explicit(&ring_head, 0, memory_order_relaxed);
	atomic_store_explicit(&ring_tail, 0, memory_order_relaxed);
	atomic_store_explicit(&stat_dropped, 0, memory_order_relaxed);
	atomic_store_explicit(&stat_truncated, 0, memory_order_relaxed);
	atomic_store_explicit(&stat_handed_off, 0, memory_order_relaxed);
	atomic_store_explicit(&active, 0, memory_order_relaxed);
	/*
	 * The objects loaded since the last read are added; the stack bounds
	 * are the thread's own, read again by another thread (a fork's child
	 * is the thread that forked).  A restart for new settings reads
	 * nothing (the whole read is ~0.7 ms).
	 */
	if (prepared && pthread_equal(prepared_in, pthread_self()))
		refresh_code_map();
	else
		read_process();
	prepared = true;
	prepared_in = pthread_self();
	started = true;

	if (!handler_installed)
	{
		if (sigaction(TP_SAMPLER_SIGNAL, NULL, &previous_action) != 0 || !install_handler())
		{
			set_error(err, errlen, "sigaction(SIGWINCH)", errno);
			release();
			return false;
		}
		handler_installed = true;
	}

	clock_id = clock == TP_SAMPLER_WALL ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
	atomic_store_explicit(&wall_clock, clock == TP_SAMPLER_WALL, memory_order_relaxed);
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = TP_SAMPLER_SIGNAL;
	sev.sigev_value.sival_ptr = &timer_cookie;
	sev._sigev_un._tid = gettid();
	if (timer_create(clock_id, &sev, &timer) != 0)
	{
		int			error = errno;

		set_error(err, errlen,
				  clock == TP_SAMPLER_WALL ? "timer_create(CLOCK_MONOTONIC)"
				  : "timer_create(CLOCK_THREAD_CPUTIME_ID)", error);
		release();
		return false;
	}
	timer_valid = true;

	if (!atfork_registered && pthread_atfork(NULL, NULL, after_fork_child) == 0)
		atfork_registered = true;

	paused = false;
	atomic_store_explicit(&active, 1, memory_order_relaxed);
	arm(&period);
	return true;
}

/*
 * Pausing and resuming happen around every traced statement, so they make
 * no system call when they can avoid it: pause only stops recording, and
 * the timer is disarmed by its next expiry, in the handler.  A CPU-clock
 * timer expires only while the thread runs, so an idle paused backend gets
 * at most that one signal; a statement that resumes before it keeps the
 * running timer.  The timer thus counts the untraced CPU time in between
 * too, and a sample lands in traced code in proportion to its CPU time:
 * each sample still stands for one period.
 */
void
tp_sampler_pause(void)
{
	if (!started || paused || !timer_valid)
		return;
	atomic_store_explicit(&active, 0, memory_order_relaxed);
	paused = true;
}

static void arm_if_disarmed(void);

void
tp_sampler_resume(void)
{
	if (!started || !paused || !timer_valid)
		return;
	paused = false;
	/* Active first: an expiry from here on records instead of disarming. */
	atomic_store_explicit(&active, 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	arm_if_disarmed();
}

void
tp_sampler_wake(void)
{
	if (started && !paused && timer_valid)
		arm_if_disarmed();
}

/*
 * Our signal blocked by code the host ran (a PL/Perl function's
 * sigprocmask) and left so: the timer's expiries pile up as overruns of one
 * pending signal, which would weigh them all in whatever span is labelled
 * when the mask is lifted, and until then nothing is sampled.  They are
 * counted as lost, and the signal unblocked.
 */
static void
unblock_our_signal(void)
{
	sigset_t	mask;
	sigset_t	ours;
	siginfo_t	info;
	const struct timespec now = {0, 0};

	if (pthread_sigmask(SIG_SETMASK, NULL, &mask) != 0 || !sigismember(&mask, TP_SAMPLER_SIGNAL))
		return;
	sigemptyset(&ours);
	sigaddset(&ours, TP_SAMPLER_SIGNAL);
	if (sigtimedwait(&ours, &info, &now) == TP_SAMPLER_SIGNAL)
		atomic_fetch_add_explicit(&stat_dropped, 1 + (info.si_overrun > 0 ? (unsigned long) info.si_overrun : 0),
								  memory_order_relaxed);
	pthread_sigmask(SIG_UNBLOCK, &ours, NULL);
}

void
tp_sampler_keep_handler(void)
{
	struct sigaction now;

	if (handler_installed)
		unblock_our_signal();
	if (!handler_installed || sigaction(TP_SAMPLER_SIGNAL, NULL, &now) != 0 ||
		((now.sa_flags & SA_SIGINFO) != 0 && now.sa_sigaction == sample_handler))
		return;
	install_handler();

	/*
	 * A timer whose signal was ignored meanwhile sends no more (Linux 6.18
	 * keeps it armed, but silent) until it is set again.
	 */
	atomic_store_explicit(&armed, 0, memory_order_relaxed);
	if (!paused && timer_valid)
		arm_if_disarmed();
}

/* The timer disarmed by a pause or an idle host: armed again. */
static void
arm_if_disarmed(void)
{
	if (!atomic_load_explicit(&armed, memory_order_relaxed))
	{
		struct timespec first = period;
		uint64_t	draw;

		/*
		 * A random first expiry: re-arming at every region start with a
		 * full period would lock onto a periodic workload's phase and
		 * sample its regions in the wrong proportions.
		 */
		if (tp_random_u64(&draw))
		{
			uint64_t	period_ns = (uint64_t) period.tv_sec * 1000000000u + (uint64_t) period.tv_nsec;
			uint64_t	first_ns = 1 + draw % period_ns;

			first.tv_sec = (time_t) (first_ns / 1000000000u);
			first.tv_nsec = (long) (first_ns % 1000000000u);
		}
		arm(&first);
	}
}

void
tp_sampler_stop(void)
{
	if (!started)
		return;
	release();
}

void
tp_sampler_set_labels(const tp_sample_labels *labels)
{
	static const tp_sample_labels none;
	unsigned int slot;

	/*
	 * Write a slot the handler is not reading, then switch to it.  Only
	 * this thread sets labels, never from a signal handler, so a plain
	 * counter picks the slot: a locked increment would wait for every store
	 * still pending, such as a span just copied to cold shared memory
	 * (measured: a third of the sampler's cost per traced statement).
	 */
	slot = label_next++ % LABEL_SLOTS;
	if (slot == atomic_load_explicit(&label_current, memory_order_relaxed) % LABEL_SLOTS)
		slot = label_next++ % LABEL_SLOTS;
	label_slots[slot] = labels != NULL ? *labels : none;
	atomic_signal_fence(memory_order_release);
	atomic_store_explicit(&label_current, slot, memory_order_relaxed);
}

void
tp_sampler_set_wait_source(const volatile uint32_t *source)
{
	atomic_store_explicit(&wait_source, source, memory_order_relaxed);
}

void
tp_sampler_set_idle_source(const volatile int *state, uint32_t idle_mask)
{
	atomic_store_explicit(&idle_states, idle_mask, memory_order_relaxed);
	atomic_store_explicit(&idle_source, state, memory_order_relaxed);
}

/* After a dlopen: read the map into the one the handler does not use. */
static void
refresh_code_map(void)
{
	unsigned int current = atomic_load_explicit(&code_map_current, memory_order_relaxed) & 1;

	if (!tp_code_map_changed(&code_maps[current]))
		return;
	tp_code_map_read(&code_maps[current ^ 1]);
	tp_dwarf_register_tables(&code_maps[current ^ 1]);
	atomic_signal_fence(memory_order_release);
	atomic_store_explicit(&code_map_current, current ^ 1, memory_order_release);
}

/*
 * A frame the handler took for JIT code may be in an object loaded after
 * its map was read: the caller it found on the stack for it then is a
 * guess the chain did not need.  Drop it.
 */
static uint32_t
undo_stale_jit(uintptr_t *pcs, uint32_t depth, uint64_t inserted)
{
	for (uint32_t i = depth - 1; i >= 1 && depth > 1; i--)
	{
		if ((inserted >> i & 1) == 0 || !tp_leaf_repair_in_object(leaf_repair, pcs[i - 1]))
			continue;
		memmove(&pcs[i], &pcs[i + 1], (depth - i - 1) * sizeof(uintptr_t));
		depth--;
	}
	return depth;
}

/*
 * Both maps, read again if objects were loaded or unloaded.  Both read
 * them with dl_iterate_phdr, under the dynamic loader's lock: a sample
 * taken meanwhile (the timer still runs during a restart's or profile =
 * all's drain) must wait, or the handler's unwinding could find the lock
 * half taken by its own thread.
 */
static void
refresh_maps(void)
{
	sigset_t	prof;
	sigset_t	saved_mask;

	sigemptyset(&prof);
	sigaddset(&prof, TP_SAMPLER_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &prof, &saved_mask);
	if (leaf_repair != NULL)
		tp_leaf_repair_refresh(leaf_repair);
	refresh_code_map();
	pthread_sigmask(SIG_SETMASK, &saved_mask, NULL);
}

void
tp_sampler_notice_loads(void)
{
	unsigned int current = atomic_load_explicit(&code_map_current, memory_order_relaxed) & 1;

	if (started && tp_code_map_changed(&code_maps[current]))
		refresh_maps();
}

bool
tp_sampler_stack_bounds(tp_stack_bounds *bounds)
{
	if (!started)
		return false;
	*bounds = stack_bounds;
	return true;
}

size_t
tp_sampler_drain(tp_sample_fn fn, void *arg)
{
	unsigned long tail;
	unsigned long head;
	size_t		count = 0;

	if (!started || ring == NULL)
		return 0;
	tail = atomic_load_explicit(&ring_tail, memory_order_relaxed);
	head = atomic_load_explicit(&ring_head, memory_order_acquire);
	atomic_signal_fence(memory_order_acquire);

	if (tail != head)
		refresh_maps();

	/*
	 * Samples taken while fn runs wait for the next drain.  fn reads the
	 * slot in place: the handler does not reuse it until tail moves past.
	 */
	while (tail != head)
	{
		tp_sample  *sample = &ring[tail % ring_capacity];
		const top_words *top = &ring_top[tail % ring_capacity];

		if (top->inserted != 0)
			sample->depth = undo_stale_jit(sample->pcs, sample->depth, top->inserted);
#ifndef TP_SAMPLER_NO_LEAF_REPAIR	/* for bench/sampler.sh's comparison */
		sample->depth = (uint32_t) tp_leaf_repair_apply(leaf_repair, sample->pcs,
														(int) sample->depth,
														sample->labels.wait_event != 0 ?
														TP_SAMPLER_MAX_FRAMES - 1 :
														TP_SAMPLER_MAX_FRAMES,
														top->words, top->count);
#else
		(void) top;
#endif
		if (fn != NULL)
			fn(sample, arg);
		tail++;
		atomic_signal_fence(memory_order_release);
		atomic_store_explicit(&ring_tail, tail, memory_order_release);
		count++;
	}
	return count;
}

void
tp_sampler_get_stats(tp_sampler_stats *stats)
{
	stats->samples = atomic_load_explicit(&ring_head, memory_order_relaxed);
	stats->waiting = stats->samples - atomic_load_explicit(&ring_tail, memory_order_relaxed);
	stats->dropped = atomic_load_explicit(&stat_dropped, memory_order_relaxed);
	stats->truncated = atomic_load_explicit(&stat_truncated, memory_order_relaxed);
	stats->handed_off = atomic_load_explicit(&stat_handed_off, memory_order_relaxed);
	stats->process_reads = process_reads;
}
