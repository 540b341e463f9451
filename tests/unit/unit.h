/*
 * unit.h - the smallest test harness that reports well.
 *
 * A test file defines test functions with TEST(name), lists them in
 * main() with RUN(name) (or RUN_RETRY, below), and ends with return
 * unit_summary().  A failed
 * CHECK prints file:line and the expression and marks the test failed; the
 * test goes on so one run shows every failure.
 */
#ifndef TP_UNIT_H
#define TP_UNIT_H

#include <stdio.h>
#include <string.h>

static int	unit_failures;
static int	unit_checks;
static int	unit_tests;

#define TEST(name) static void name(void)

/*
 * RUN_RETRY(name, attempts): for tests that count what a CPU-time timer
 * delivered.  The kernel checks such timers only at the ticks that find
 * the thread running, so a host that starves the process (a loaded or
 * shared VM) can deliver far fewer signals.  A failed attempt is reported
 * and run again; the test fails only when every attempt does.
 */
#define RUN_RETRY(name, attempts) \
	do { \
		int start_ = unit_failures; \
		int try_ = 1; \
		unit_tests++; \
		for (;;) { \
			name(); \
			if (unit_failures == start_ || try_ == (attempts)) \
				break; \
			printf("  attempt %d of %d failed, again\n", try_, (attempts)); \
			unit_failures = start_; \
			try_++; \
		} \
		printf("%s %s%s\n", unit_failures == start_ ? "ok  " : "FAIL", #name, \
			   try_ > 1 ? " (after a retry)" : ""); \
	} while (0)

#define RUN(name) RUN_RETRY(name, 1)

#define CHECK(expr) \
	do { \
		unit_checks++; \
		if (!(expr)) { \
			unit_failures++; \
			printf("  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #expr); \
		} \
	} while (0)

#define CHECK_STR(actual, expected) \
	do { \
		const char *a_ = (actual), *e_ = (expected); \
		unit_checks++; \
		if (a_ == NULL || e_ == NULL ? a_ != e_ : strcmp(a_, e_) != 0) { \
			unit_failures++; \
			printf("  %s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__, __LINE__, \
				   #actual, a_ ? a_ : "(null)", e_ ? e_ : "(null)"); \
		} \
	} while (0)

static inline int
unit_summary(void)
{
	printf("%d tests, %d checks, %d failures\n", unit_tests, unit_checks, unit_failures);
	return unit_failures == 0 && unit_checks > 0 ? 0 : 1;
}

#endif
