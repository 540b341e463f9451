/*
 * clock_cost.c - nanoseconds per read of the clocks a span reads, for
 * bench/pgbench.sh: the thread CPU clock (traceprof.track_cpu_time) is a
 * system call, the wall clock is not (vDSO).  Built by the script itself.
 *
 *   clock_cost N      prints "thread_cpu_ns realtime_ns", the median of 5
 *                     timings of N reads each
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int
compare_doubles(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Median over 5 timings: one preempted timing does not move it. */
static double
ns_per_read(clockid_t clock, long reads)
{
	double		timings[5];
	struct timespec ts;

	for (int t = 0; t < 5; t++)
	{
		double		start = now_ns();

		for (long i = 0; i < reads; i++)
			clock_gettime(clock, &ts);
		timings[t] = (now_ns() - start) / reads;
	}
	qsort(timings, 5, sizeof(double), compare_doubles);
	return timings[2];
}

int
main(int argc, char **argv)
{
	long		reads = argc > 1 ? atol(argv[1]) : 0;

	if (reads <= 0)
	{
		fprintf(stderr, "usage: clock_cost READS\n");
		return 2;
	}
	printf("%.0f %.0f\n", ns_per_read(CLOCK_THREAD_CPUTIME_ID, reads),
		   ns_per_read(CLOCK_REALTIME, reads));
	return 0;
}
