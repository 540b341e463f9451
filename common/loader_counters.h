/*
 * loader_counters.h - the dynamic loader's load and unload counters
 * (dl_iterate_phdr's dlpi_adds and dlpi_subs): whether any object was
 * loaded or unloaded since they were last read, without reading the list.
 * Not for signal handlers (dl_iterate_phdr takes the loader's lock).
 */
#ifndef TP_LOADER_COUNTERS_H
#define TP_LOADER_COUNTERS_H

#include <link.h>
#include <stdbool.h>
#include <stddef.h>

static inline int
tp_peek_loader_counters(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *counters = arg;

	if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
		return -1;
	counters[0] = info->dlpi_adds;
	counters[1] = info->dlpi_subs;
	return 1;					/* the first object is enough */
}

/* counters[0] loads, counters[1] unloads; false if the loader does not report them. */
static inline bool
tp_loader_counters(unsigned long long counters[2])
{
	return dl_iterate_phdr(tp_peek_loader_counters, counters) == 1;
}

#endif
