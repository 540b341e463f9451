/*
 * flamegraph_layout.c - stacks merged into a tree of frames, and the
 * layout of that tree that the SVG writer draws.
 *
 * Node 0 is the root.  A node is keyed by (parent node, name), names are
 * interned, and both go through hash indexes, so adding a stack costs its
 * depth.  Children are kept in insertion order; the layout sorts them by
 * name, which is what makes the output independent of the input order.
 */
#include <stdlib.h>
#include <string.h>

#include "flamegraph.h"
#include "profile_internal.h"

#define ROOT_NAME "all"

typedef struct flame_node
{
	uint32_t	name;			/* index into names; TP_FLAME_NONE: root */
	uint32_t	parent;
	uint32_t	first_child;
	uint32_t	next_sibling;
	uint32_t	nchildren;
	uint64_t	weight;			/* this node and its descendants */
} flame_node;

struct tp_flame_stacks
{
	char	  **names;
	uint32_t	nnames;
	uint32_t	names_cap;
	tp_prof_index name_index;

	flame_node *nodes;
	uint32_t	nnodes;
	uint32_t	nodes_cap;
	tp_prof_index node_index;	/* (parent, name) -> node */

	bool		failed;			/* out of memory once: refuse to render */
	bool		ascii;			/* see tp_flame_stacks_set_ascii */

	tp_flame_check_fn check;	/* see tp_flame_stacks_set_check */
	void	   *check_arg;
	uint32_t	ticks;
	tp_flame_draw draw;			/* what a draw in progress holds */
};

typedef struct node_key
{
	uint32_t	parent;
	uint32_t	name;
} node_key;

static bool
grow(void **array, uint32_t *cap, uint32_t count, size_t size)
{
	void	   *grown;
	uint32_t	newcap;

	if (count < *cap)
		return true;
	if (*cap >= UINT32_MAX / 2)
		return false;
	newcap = *cap ? *cap * 2 : 64;
	grown = realloc(*array, (size_t) newcap * size);
	if (grown == NULL)
		return false;
	*array = grown;
	*cap = newcap;
	return true;
}

static uint64_t
hash_name(const char *name)
{
	return tp_prof_hash(name, strlen(name), 0);
}

static bool
name_eq(uint32_t entry, const void *key, const void *ctx)
{
	const tp_flame_stacks *stacks = ctx;

	return strcmp(stacks->names[entry], key) == 0;
}

static bool
node_eq(uint32_t entry, const void *key, const void *ctx)
{
	const tp_flame_stacks *stacks = ctx;
	const node_key *k = key;

	return stacks->nodes[entry].parent == k->parent &&
		stacks->nodes[entry].name == k->name;
}

static uint64_t
hash_node(const node_key *k)
{
	return tp_prof_hash(k, sizeof(*k), 1);
}

static uint32_t
find_name(const tp_flame_stacks *stacks, const char *name)
{
	return tp_prof_index_find(&stacks->name_index, hash_name(name), name_eq,
							  name, stacks);
}

static uint32_t
find_child(const tp_flame_stacks *stacks, uint32_t parent, uint32_t name)
{
	node_key	k = {parent, name};

	return tp_prof_index_find(&stacks->node_index, hash_node(&k), node_eq, &k, stacks);
}

/* The interned copy of a cleaned name, taking ownership of clean. */
static uint32_t
intern(tp_flame_stacks *stacks, char *clean)
{
	uint32_t	id = find_name(stacks, clean);

	if (id != TP_FLAME_NONE)
	{
		free(clean);
		return id;
	}
	if (!grow((void **) &stacks->names, &stacks->names_cap, stacks->nnames,
			  sizeof(char *)) ||
		!tp_prof_index_insert(&stacks->name_index, hash_name(clean), stacks->nnames))
	{
		free(clean);
		return TP_FLAME_NONE;
	}
	stacks->names[stacks->nnames] = clean;
	return stacks->nnames++;
}

static uint32_t
child_of(tp_flame_stacks *stacks, uint32_t parent, uint32_t name)
{
	node_key	k = {parent, name};
	uint32_t	id = find_child(stacks, parent, name);
	flame_node *n;

	if (id != TP_FLAME_NONE)
		return id;
	if (!grow((void **) &stacks->nodes, &stacks->nodes_cap, stacks->nnodes,
			  sizeof(flame_node)) ||
		!tp_prof_index_insert(&stacks->node_index, hash_node(&k), stacks->nnodes))
		return TP_FLAME_NONE;
	id = stacks->nnodes++;
	n = &stacks->nodes[id];
	n->name = name;
	n->parent = parent;
	n->first_child = TP_FLAME_NONE;
	n->nchildren = 0;
	n->weight = 0;
	n->next_sibling = stacks->nodes[parent].first_child;
	stacks->nodes[parent].first_child = id;
	stacks->nodes[parent].nchildren++;
	return id;
}

tp_flame_stacks *
tp_flame_stacks_new(void)
{
	tp_flame_stacks *stacks = calloc(1, sizeof(tp_flame_stacks));

	if (stacks == NULL)
		return NULL;
	if (!grow((void **) &stacks->nodes, &stacks->nodes_cap, 0, sizeof(flame_node)))
	{
		free(stacks);
		return NULL;
	}
	stacks->nodes[0].name = TP_FLAME_NONE;
	stacks->nodes[0].parent = TP_FLAME_NONE;
	stacks->nodes[0].first_child = TP_FLAME_NONE;
	stacks->nodes[0].next_sibling = TP_FLAME_NONE;
	stacks->nodes[0].nchildren = 0;
	stacks->nodes[0].weight = 0;
	stacks->nnodes = 1;
	return stacks;
}

bool
tp_flame_stacks_add(tp_flame_stacks *stacks, const char *const *frames_root_first,
					size_t depth, uint64_t weight)
{
	uint32_t	node = 0;

	if (stacks == NULL || stacks->failed)
		return false;
	if (weight == 0)
		return true;
	if (stacks->nodes[0].weight > UINT64_MAX - weight)
		return false;
	/* Create the whole path first: a failure leaves the weights as they were. */
	for (size_t d = 0; d < depth; d++)
	{
		const char *name = frames_root_first[d] != NULL ? frames_root_first[d] : "?";
		uint32_t	id = find_name(stacks, name);	/* interned names are clean */
		char	   *clean;

		if (id == TP_FLAME_NONE)
		{
			clean = tp_prof_clean_copy(name);
			id = clean != NULL ? intern(stacks, clean) : TP_FLAME_NONE;
		}

		node = id != TP_FLAME_NONE ? child_of(stacks, node, id) : TP_FLAME_NONE;
		if (node == TP_FLAME_NONE)
		{
			stacks->failed = true;
			return false;
		}
	}
	for (;;)
	{
		stacks->nodes[node].weight += weight;
		if (node == 0)
			break;
		node = stacks->nodes[node].parent;
	}
	return true;
}

uint64_t
tp_flame_stacks_total(const tp_flame_stacks *stacks)
{
	return stacks != NULL ? stacks->nodes[0].weight : 0;
}

void
tp_flame_stacks_set_check(tp_flame_stacks *stacks, tp_flame_check_fn check, void *arg)
{
	if (stacks == NULL)
		return;
	stacks->check = check;
	stacks->check_arg = arg;
}

void
tp_flame_stacks_set_ascii(tp_flame_stacks *stacks, bool ascii)
{
	if (stacks != NULL)
		stacks->ascii = ascii;
}

bool
tp_flame_stacks_ascii(const tp_flame_stacks *stacks)
{
	return stacks != NULL && stacks->ascii;
}

/*
 * The record lives in the stacks because a check that longjmps leaves
 * nothing else to find it by; drawing reads the stacks as const but
 * writes this record, the only part it changes.
 */
tp_flame_draw *
tp_flame_stacks_draw(const tp_flame_stacks *stacks)
{
	return &((tp_flame_stacks *) stacks)->draw;
}

void
tp_flame_draw_release(tp_flame_draw *draw)
{
	if (draw->out != NULL)
		fclose(draw->out);		/* sets text to its buffer */
	free(draw->text);
	free(draw->kids);
	free(draw->first);
	free(draw->levels);
	free(draw->frames);
	free(draw->title);
	free(draw->unit);
	memset(draw, 0, sizeof(*draw));
}

bool
tp_flame_draw_tick(const tp_flame_stacks *stacks)
{
	tp_flame_stacks *s = (tp_flame_stacks *) stacks;

	if (s->check == NULL || ++s->ticks % TP_FLAME_CHECK_EVERY != 0)
		return true;
	return s->check(s->check_arg);
}

void
tp_flame_stacks_free(tp_flame_stacks *stacks)
{
	if (stacks == NULL)
		return;
	tp_flame_draw_release(&stacks->draw);
	for (uint32_t i = 0; i < stacks->nnames; i++)
		free(stacks->names[i]);
	free(stacks->names);
	free(stacks->nodes);
	tp_prof_index_free(&stacks->name_index);
	tp_prof_index_free(&stacks->node_index);
	free(stacks);
}

/* ---- layout ---- */

static const char *
node_name(const tp_flame_stacks *stacks, uint32_t node)
{
	uint32_t	name = stacks->nodes[node].name;

	return name == TP_FLAME_NONE ? ROOT_NAME : stacks->names[name];
}

static int
compare_nodes(const void *pa, const void *pb, void *arg)
{
	const tp_flame_stacks *stacks = arg;
	uint32_t	a = *(const uint32_t *) pa;
	uint32_t	b = *(const uint32_t *) pb;

	/* Siblings have distinct names, so this is a total order. */
	return strcmp(node_name(stacks, a), node_name(stacks, b));
}

/*
 * Every node's children, sorted by name, in one array: node n's are
 * kids[first[n]] .. kids[first[n] + nodes[n].nchildren - 1].
 */
static bool
sorted_children(const tp_flame_stacks *stacks, uint32_t **kids_out, uint32_t **first_out)
{
	tp_flame_draw *draw = tp_flame_stacks_draw(stacks);
	uint32_t   *kids = malloc(((size_t) stacks->nnodes + 1) * sizeof(uint32_t));
	uint32_t   *first = malloc(((size_t) stacks->nnodes + 1) * sizeof(uint32_t));
	uint32_t	at = 0;

	if (kids == NULL || first == NULL)
	{
		free(kids);
		free(first);
		return false;
	}
	draw->kids = kids;
	draw->first = first;
	for (uint32_t n = 0; n < stacks->nnodes; n++)
	{
		if (!tp_flame_draw_tick(stacks))
		{
			draw->kids = NULL;
			draw->first = NULL;
			free(kids);
			free(first);
			return false;
		}
		first[n] = at;
		for (uint32_t c = stacks->nodes[n].first_child; c != TP_FLAME_NONE;
			 c = stacks->nodes[c].next_sibling)
			kids[at++] = c;
		qsort_r(kids + first[n], stacks->nodes[n].nchildren, sizeof(uint32_t),
				compare_nodes, (void *) stacks);
	}
	*kids_out = kids;
	*first_out = first;
	return true;
}

/* The smallest weight drawn: weight * 1000 >= total * TP_FLAME_MIN_PERMILLE. */
static uint64_t
min_weight(uint64_t total)
{
	uint64_t	whole = total / 1000 * TP_FLAME_MIN_PERMILLE;
	uint64_t	part = total % 1000 * TP_FLAME_MIN_PERMILLE;

	return whole + part / 1000 + (part % 1000 != 0);
}

/* The same path as baseline's node bparent + name in target, or NONE. */
static uint32_t
baseline_child(const tp_flame_stacks *baseline, uint32_t bparent, const char *name)
{
	uint32_t	bname;

	if (baseline == NULL || bparent == TP_FLAME_NONE)
		return TP_FLAME_NONE;
	bname = find_name(baseline, name);
	return bname == TP_FLAME_NONE ? TP_FLAME_NONE : find_child(baseline, bparent, bname);
}

/* One level of the depth-first walk. */
typedef struct walk_level
{
	uint32_t	node;
	uint32_t	frame;
	uint32_t	bnode;			/* the same path in the baseline, or NONE */
	uint32_t	next;			/* next child to visit */
	uint64_t	x;				/* left edge of that child */
} walk_level;

static bool
append_frame(tp_flame_layout *layout, size_t *cap, const tp_flame_frame *f)
{
	if (layout->count == *cap)
	{
		size_t		newcap = *cap ? *cap * 2 : 256;
		tp_flame_frame *grown = realloc(layout->frames, newcap * sizeof(tp_flame_frame));

		if (grown == NULL)
			return false;
		layout->frames = grown;
		*cap = newcap;
	}
	layout->frames[layout->count++] = *f;
	return true;
}

static bool
push_level(walk_level **levels, size_t *cap, size_t depth, const walk_level *l)
{
	if (depth == *cap)
	{
		size_t		newcap = *cap ? *cap * 2 : 64;
		walk_level *grown = realloc(*levels, newcap * sizeof(walk_level));

		if (grown == NULL)
			return false;
		*levels = grown;
		*cap = newcap;
	}
	(*levels)[depth] = *l;
	return true;
}

/* Iterative, so that deep stacks cannot exhaust the C stack. */
bool
tp_flame_layout_build(const tp_flame_stacks *stacks, const tp_flame_stacks *baseline,
					  tp_flame_layout *layout)
{
	uint32_t   *kids = NULL;
	uint32_t   *first = NULL;
	walk_level *levels = NULL;
	size_t		levels_cap = 0;
	size_t		frames_cap = 0;
	size_t		depth = 0;
	uint64_t	least;
	tp_flame_frame root;
	walk_level	l;
	bool		ok = false;

	tp_flame_draw *draw = tp_flame_stacks_draw(stacks);

	memset(layout, 0, sizeof(*layout));
	tp_flame_draw_release(draw);	/* what a draw stopped by a longjmp left */
	if (stacks->failed || (baseline != NULL && baseline->failed))
		return false;
	layout->total = stacks->nodes[0].weight;
	layout->baseline_total = baseline != NULL ? baseline->nodes[0].weight : 0;
	least = min_weight(layout->total);
	if (!sorted_children(stacks, &kids, &first))
		return false;

	root.name = ROOT_NAME;
	root.depth = 0;
	root.parent = TP_FLAME_NONE;
	root.start = 0;
	root.weight = layout->total;
	root.baseline = layout->baseline_total;
	l.node = 0;
	l.frame = 0;
	l.bnode = baseline != NULL ? 0 : TP_FLAME_NONE;
	l.next = 0;
	l.x = 0;
	if (!append_frame(layout, &frames_cap, &root) ||
		!push_level(&levels, &levels_cap, depth++, &l))
		goto done;
	while (depth > 0)
	{
		walk_level *top = &levels[depth - 1];
		const flame_node *parent = &stacks->nodes[top->node];
		uint32_t	c;
		const flame_node *child;
		tp_flame_frame f;
		uint32_t	bchild;

		draw->levels = levels;
		draw->frames = layout->frames;
		if (!tp_flame_draw_tick(stacks))
			goto done;
		if (top->next == parent->nchildren)
		{
			depth--;
			continue;
		}
		c = kids[first[top->node] + top->next++];
		child = &stacks->nodes[c];
		f.start = top->x;
		top->x += child->weight;
		if (child->weight < least)
		{
			layout->omitted++;
			continue;
		}
		f.name = node_name(stacks, c);
		f.depth = (uint32_t) depth;
		f.parent = top->frame;
		f.weight = child->weight;
		bchild = baseline_child(baseline, top->bnode, f.name);
		f.baseline = bchild != TP_FLAME_NONE ? baseline->nodes[bchild].weight : 0;
		l.node = c;
		l.frame = (uint32_t) layout->count;
		l.bnode = bchild;
		l.next = 0;
		l.x = f.start;
		if (!append_frame(layout, &frames_cap, &f) ||
			!push_level(&levels, &levels_cap, depth++, &l))
			goto done;
		if (f.depth > layout->max_depth)
			layout->max_depth = f.depth;
	}
	ok = true;

done:
	/* The frames are the caller's now (or freed); the rest is scratch. */
	draw->kids = NULL;
	draw->first = NULL;
	draw->levels = NULL;
	draw->frames = NULL;
	free(kids);
	free(first);
	free(levels);
	if (!ok)
		tp_flame_layout_free(layout);
	return ok;
}

void
tp_flame_layout_free(tp_flame_layout *layout)
{
	free(layout->frames);
	memset(layout, 0, sizeof(*layout));
}
