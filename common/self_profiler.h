/*
 * self_profiler.h - continuous profiling of the running binary, switched by
 * the PYROSCOPE_* environment variables (and --profile-out).
 *
 * Started after the root span exists, so the very first upload already
 * carries the correlation tags (trace_id, root_span_id) and every sample the
 * pprof labels span_id / trace_id of the root span.  Uploads happen every
 * 10 s (PYROSCOPE_UPLOAD_INTERVAL ms) from a helper thread (the sampled
 * thread only drains and encodes) and once more at the end; an unreachable
 * server costs one warning.
 */
#ifndef TP_SELF_PROFILER_H
#define TP_SELF_PROFILER_H

#include <stdbool.h>

#include "span.h"

/*
 * Read PYROSCOPE_* and start sampling the calling thread when profiling is
 * enabled or profile_out (a local file: .pprof/.pb.gz, .json for
 * speedscope, .folded) is given.  root: the run's root span; it gets the
 * pyroscope.profile.id / pyroscope.profile.url attributes.
 * default_application: the run's service.name, the application without
 * PYROSCOPE_APPLICATION_NAME.  Problems are warned about; the run goes on
 * without profiling.
 */
void		tp_self_profiler_start(tp_span *root, const char *default_application,
								   const char *profile_out);

/*
 * Would the profile (option: --profile-out when given and not empty, else
 * TRACEPROF_PROFILE_OUT) replace the file data_path names, the run's input
 * or output (data_name: "FILE", "OUT"; data_what: what it holds)?  Then
 * false, with err naming both.  The same regular file under any name (a
 * symbolic or hard link) counts, and, where one of them does not exist
 * yet, the same name once directories and links are resolved.  Checked
 * before any work: the profile is written last, over the data.
 */
bool		tp_self_profiler_check_out(const char *option, const char *data_path,
									   const char *data_name, const char *data_what,
									   char *err, size_t errlen);

/* Cheap; call often from the main loop: every 10 s it queues an upload. */
void		tp_self_profiler_tick(void);

/*
 * Stop sampling: the run's work is done and the profile's window ends
 * here.  Call it before ending the root span, so that the span does not
 * last as long as the final upload to a slow or unreachable server.
 */
void		tp_self_profiler_stop(void);

/*
 * Stop sampling if tp_self_profiler_stop() has not, upload what is left
 * (bounded by the upload timeout), write profile_out, and print the
 * Pyroscope link for the trace on stderr.
 */
void		tp_self_profiler_finish(void);

/* Whether profiles go to Pyroscope (tp_self_profiler_finish sends the last). */
bool		tp_self_profiler_uploading(void);

#endif
