/*
 * progress.c - a rate-limited progress line on stderr.
 */
#include "progress.h"

#include <stdio.h>
#include <time.h>

#define MIN_INTERVAL 0.25		/* seconds between two drawings */

double
ld_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

void
ld_progress_init(ld_progress *p, bool enabled, uint64_t total_bytes)
{
	p->enabled = enabled;
	p->shown = false;
	p->total_bytes = total_bytes;
	p->start = p->last = ld_now();
	p->next_check = 0;
}

static void
draw(ld_progress *p, uint64_t rows, uint64_t bytes, double now)
{
	double		elapsed = now - p->start;
	double		rate = elapsed > 0 ? (double) rows / elapsed : 0;

	if (p->total_bytes > 0)
		fprintf(stderr, "\rloader: %llu rows, %.0f rows/s, %.0f%% read   ",
				(unsigned long long) rows, rate,
				100.0 * (double) bytes / (double) p->total_bytes);
	else
		fprintf(stderr, "\rloader: %llu rows, %.0f rows/s   ",
				(unsigned long long) rows, rate);
	fflush(stderr);
	p->shown = true;
	p->last = now;
}

void
ld_progress_show(ld_progress *p, uint64_t rows, uint64_t bytes)
{
	double		now;

	if (!p->enabled)
		return;
	now = ld_now();
	if (now - p->last >= MIN_INTERVAL)
		draw(p, rows, bytes, now);
}

void
ld_progress_finish(ld_progress *p, uint64_t rows, uint64_t bytes)
{
	if (!p->enabled || !p->shown)
		return;
	draw(p, rows, bytes, ld_now());
	fputc('\n', stderr);
	p->shown = false;
}
