/*
 * progress.h - the progress line on a terminal.
 *
 * When enabled (stderr is a terminal) a "\r"-rewritten line shows rows,
 * rows/s and the share of the file read, at most four times a second;
 * finishing ends it with a newline.  Disabled, it prints nothing.
 */
#ifndef LD_PROGRESS_H
#define LD_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ld_progress
{
	bool		enabled;
	bool		shown;			/* a line is on screen */
	uint64_t	total_bytes;	/* 0: unknown (no percentage) */
	double		start;
	double		last;
	uint64_t	next_check;		/* rows at which to look at the clock */
} ld_progress;

/* Seconds on a monotonic clock. */
double		ld_now(void);

void		ld_progress_init(ld_progress *p, bool enabled, uint64_t total_bytes);

void		ld_progress_show(ld_progress *p, uint64_t rows, uint64_t bytes);

/* Cheap enough to call per row: looks at the clock every 4096 rows. */
static inline void
ld_progress_update(ld_progress *p, uint64_t rows, uint64_t bytes)
{
	if (p->enabled && rows >= p->next_check)
	{
		p->next_check = rows + 4096;
		ld_progress_show(p, rows, bytes);
	}
}

/* Draw the final state and end the line (if one was drawn). */
void		ld_progress_finish(ld_progress *p, uint64_t rows, uint64_t bytes);

#endif
