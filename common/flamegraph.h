/*
 * flamegraph.h - interactive SVG flame graphs, plain and differential.
 *
 * The input is a set of stacks (frame names root first, a weight each).
 * Stacks are merged into a tree by name: two frames are the same node when
 * they have the same name and the same path of callers.  The graph draws
 * the root ("all") at the bottom and callees above their callers; siblings
 * are ordered by name, so equal input gives byte-identical output whatever
 * the order the stacks were added in.
 *
 * Frames narrower than TP_FLAME_MIN_PERMILLE thousandths of the total are
 * not drawn, nor are their callees: their weight stays inside the caller's
 * width (as self time would).  This bounds the output to about 1000 frames
 * per level whatever the size of the profile.  Zooming in does not bring
 * them back; a narrower profile (e.g. one span) does.
 *
 * The SVG is self-contained (inline CSS and JavaScript, no external
 * references) and sized width="100%" with a fixed height in pixels: frames
 * are placed in percent of the width, text keeps its size, and the script
 * re-fits the labels when the window is resized or the graph zoomed.
 * Opened directly (file:// or http), it is interactive: hover shows a frame's
 * details, click zooms into a frame, "Search" (or Ctrl-F, "/") highlights
 * frames matching a regular expression and shows the matched share,
 * Escape resets.  Embedded with <img> it renders without interactivity (give
 * the img a CSS width).  Every frame is a <g class="f"> carrying data-n
 * (name), data-v (weight), data-x (left edge, in weight from the root's left
 * edge) and data-d (depth, root 0); differential graphs add data-b (the
 * weight of the same path in the baseline).  The <svg> element carries
 * data-total, data-unit and, when differential, data-btotal.
 *
 * Strings returned are malloc'd and NUL-terminated; NULL means out of
 * memory.  Names need not be clean: invalid UTF-8 and control characters
 * become '?', and everything is XML-escaped.
 */
#ifndef TP_FLAMEGRAPH_H
#define TP_FLAMEGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile.h"

/* Frames with weight * 1000 < total * TP_FLAME_MIN_PERMILLE are omitted. */
#define TP_FLAME_MIN_PERMILLE 1

typedef struct tp_flame_stacks tp_flame_stacks;

tp_flame_stacks *tp_flame_stacks_new(void);

/*
 * Add weight to the stack frames[0] (root) .. frames[depth - 1] (leaf); a
 * NULL name counts as "?".  Equal stacks add up; depth 0 adds to the root
 * itself; weight 0 is ignored.  Returns false when out of memory (the
 * stacks then refuse to render) or when the total would overflow 64 bits
 * (that stack is left out).
 */
bool		tp_flame_stacks_add(tp_flame_stacks *stacks,
								const char *const *frames_root_first,
								size_t depth, uint64_t weight);

/* Sum of the weights added (0 for NULL). */
uint64_t	tp_flame_stacks_total(const tp_flame_stacks *stacks);

/*
 * The flame graph.  title NULL: "Flame Graph"; unit names the weight in
 * tooltips ("samples", "ms"; NULL: "samples").
 */
char	   *tp_flame_stacks_svg(const tp_flame_stacks *stacks, const char *title,
								const char *unit);

/*
 * A differential flame graph: the shape (widths) of target; each frame
 * coloured by how its share of the total changed from baseline to target,
 * both normalized to fractions of their own totals: red where target's
 * share is larger (a regression), blue where smaller, light grey where
 * equal, stronger the larger the change relative to the largest change
 * drawn.  A frame is matched by its path of names from the root.  Frames
 * only in the baseline are not drawn: target has no width to give them
 * (their loss shows as blue in their callers).  An empty baseline makes
 * every frame new (red).
 */
char	   *tp_flame_stacks_diff_svg(const tp_flame_stacks *target,
									 const tp_flame_stacks *baseline,
									 const char *title, const char *unit);

void		tp_flame_stacks_free(tp_flame_stacks *stacks);

/*
 * Drawing a large graph takes a while: a caller that must be able to stop
 * it (a query cancelled, a statement_timeout) gives the stacks a check,
 * called every TP_FLAME_CHECK_EVERY nodes or frames while a layout is built
 * and an SVG written from them (for a diff, the target's check).  It
 * returns true to go on, false to stop: the draw then returns NULL (or
 * false) with everything it allocated freed.  It may also never return
 * (PostgreSQL's CHECK_FOR_INTERRUPTS() raising an error, a longjmp): what
 * the draw held at that point stays recorded in the stacks and is freed by
 * tp_flame_stacks_free() (or by the next draw).  check NULL: none.
 */
#define TP_FLAME_CHECK_EVERY 1024

typedef bool (*tp_flame_check_fn) (void *arg);

void		tp_flame_stacks_set_check(tp_flame_stacks *stacks, tp_flame_check_fn check,
									  void *arg);

/*
 * Write every character outside ASCII as a numeric character reference
 * (U+00B5 as &#181;) instead of UTF-8: the document then means the same in
 * any ASCII-compatible encoding it is converted to (a database's, a
 * client's), where its bytes in that encoding would contradict its
 * declaration, encoding="UTF-8".  For a diff, the target's setting.  Off
 * by default.
 */
void		tp_flame_stacks_set_ascii(tp_flame_stacks *stacks, bool ascii);
bool		tp_flame_stacks_ascii(const tp_flame_stacks *stacks);

/* A profile's stacks (merged by function name, labels ignored) as above. */
char	   *tp_flamegraph_svg(const tp_profile *profile, const char *title);
char	   *tp_flamegraph_diff_svg(const tp_profile *target, const tp_profile *baseline,
								   const char *title);

/*
 * The stacks of a profile as a tp_flame_stacks; NULL on out-of-memory.
 * For callers that filter or combine profiles before drawing.
 */
tp_flame_stacks *tp_flame_stacks_from_profile(const tp_profile *profile);

/*
 * ---- The layout, shared by the writers (and read by unit tests) ----
 *
 * The frames to draw in preorder, siblings by name, too-narrow frames
 * left out.  Weights are in the stacks' unit; x and width in percent are
 * start / total and weight / total.
 */
#define TP_FLAME_NONE UINT32_MAX

typedef struct tp_flame_frame
{
	const char *name;			/* owned by the stacks; "all" for the root */
	uint32_t	depth;			/* 0: the root */
	uint32_t	parent;			/* index into frames; TP_FLAME_NONE for the root */
	uint64_t	start;			/* left edge, in weight from the root's left edge */
	uint64_t	weight;			/* this frame and its callees */
	uint64_t	baseline;		/* diff: the same path's weight in the baseline */
} tp_flame_frame;

typedef struct tp_flame_layout
{
	tp_flame_frame *frames;
	size_t		count;
	uint32_t	max_depth;		/* deepest frame drawn */
	uint64_t	total;
	uint64_t	baseline_total; /* diff only */
	size_t		omitted;		/* frames too narrow to draw (subtree roots) */
} tp_flame_layout;

/*
 * What a draw in progress holds, recorded in its stacks before each check
 * (see tp_flame_stacks_set_check), so that a check that never returns
 * leaks nothing.  For the writers; NULL fields hold nothing.
 */
typedef struct tp_flame_draw
{
	uint32_t   *kids;			/* layout: children sorted by name */
	uint32_t   *first;
	void	   *levels;			/* layout: the walk's stack */
	tp_flame_frame *frames;		/* the layout's frames */
	char	   *title;			/* writer: cleaned title and unit */
	char	   *unit;
	FILE	   *out;			/* writer: open_memstream of text, size */
	char	   *text;
	size_t		size;
} tp_flame_draw;

/* The stacks' draw record (kept beside the stacks, written through const). */
tp_flame_draw *tp_flame_stacks_draw(const tp_flame_stacks *stacks);

/* Frees what the draw record holds and empties it. */
void		tp_flame_draw_release(tp_flame_draw *draw);

/*
 * One step of a draw: every TP_FLAME_CHECK_EVERY calls, the stacks' check.
 * false: stop.  Record what the draw holds before calling it.
 */
bool		tp_flame_draw_tick(const tp_flame_stacks *stacks);

/*
 * baseline NULL: a plain layout.  false on out-of-memory, or when the
 * stacks' check asked to stop.
 */
bool		tp_flame_layout_build(const tp_flame_stacks *stacks,
								  const tp_flame_stacks *baseline,
								  tp_flame_layout *layout);
void		tp_flame_layout_free(tp_flame_layout *layout);

#endif
