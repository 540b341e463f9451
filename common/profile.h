/*
 * profile.h - aggregate symbolized samples and write them out.
 *
 * Identical stacks with identical labels are merged (weights summed).  The
 * same aggregate feeds every writer: pprof (profile.proto, gzip; for
 * Pyroscope and go tool pprof), folded stacks, and speedscope JSON.
 */
#ifndef TP_PROFILE_H
#define TP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sampler.h"
#include "symbols.h"

typedef struct tp_profile tp_profile;

/*
 * period_ns: nanoseconds one unit of weight stands for (1e9 / hz).
 * sample_type: "cpu" (CPU clock) or "wall".
 */
tp_profile *tp_profile_new(const char *sample_type, uint64_t period_ns);

/* Add one sample; symbolize with symbols (may be NULL: addresses only). */
void		tp_profile_add(tp_profile *profile, tp_symbols *symbols,
						   const tp_sample *sample, const char *span_name);

/*
 * Add one sample whose frames are already names (leaf first), as stored by
 * a process that symbolized them itself; such frames have no address or
 * mapping.  labels and weight as in tp_sample; period_ns is the sampling
 * period it was taken at (samples of other processes may differ from the
 * profile's period).
 */
void		tp_profile_add_named(tp_profile *profile, const char *const *frames,
								 uint32_t depth, const tp_sample_labels *labels,
								 uint32_t weight, uint64_t period_ns,
								 const char *span_name);

/* Samples (sum of weights) added so far. */
uint64_t	tp_profile_total(const tp_profile *profile);

/* Start/end of the profiled window (Unix ns), for pprof and Pyroscope. */
void		tp_profile_set_window(tp_profile *profile, uint64_t start_ns, uint64_t end_ns);

/* The period pprof's header states, once the samples' own periods are known. */
void		tp_profile_set_period(tp_profile *profile, uint64_t period_ns);

/*
 * gzip-compressed pprof with sample labels span_id (16 hex), trace_id
 * (32 hex) and span_name when present; malloc'd, NULL on OOM.
 */
uint8_t    *tp_profile_pprof(const tp_profile *profile, size_t *len);

/* Folded stacks ("root;...;leaf weight\n"), malloc'd NUL-terminated. */
char	   *tp_profile_folded(const tp_profile *profile);

/* speedscope JSON (sampled profile), malloc'd NUL-terminated. */
char	   *tp_profile_speedscope(const tp_profile *profile, const char *name);

/* Forget the samples, keep the symbol caches; for periodic uploads. */
void		tp_profile_clear(tp_profile *profile);

void		tp_profile_free(tp_profile *profile);

#endif
