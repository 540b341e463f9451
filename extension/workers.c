/*
 * workers.c - registers the background workers that export spans and
 * upload profiles.
 *
 * They run in a library of their own, traceprof_exporter (exporter.c),
 * which links libcurl: the postmaster, and so every backend forked from
 * it, never loads libcurl and the libraries it brings, which made each
 * new connection cost ~6% more server CPU (docs/benchmarks.md).  That
 * library reaches this one's settings and shared memory by name: a worker
 * is a child of the postmaster, which loaded this library first (with
 * RTLD_GLOBAL).  Both must come from one build, which the worker checks.
 */
#include "postgres.h"

#include <sys/stat.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/bgworker_internals.h"

#include "build_id.h"
#include "traceprof.h"

#define WORKER_LIBRARY "traceprof_exporter"

const char traceprof_build_id[] = TRACEPROF_BUILD_ID;

/* Is path a file (not a directory), as PostgreSQL's loader asks? */
static bool
file_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/*
 * Will a worker find its library, along dynamic_library_path ("$libdir"
 * by default) as PostgreSQL's loader looks (dfmgr.c: the name as given,
 * then with DLSUFFIX, in each directory)?  Without it, they would fail at
 * every start while the rings kept spans for them.  If not, problem says
 * why, to follow "cannot be loaded: ".
 */
static bool
worker_library_found(char *problem, size_t size)
{
	const char *dirs = Dynamic_library_path;
	const char *suffixes[] = {"", DLSUFFIX};
	char		dir[MAXPGPATH];
	char		path[MAXPGPATH];
	bool		found = false;

	if (*dirs == '\0')
	{
		snprintf(problem, size, "dynamic_library_path is empty");
		return false;
	}
	/* Every entry is checked: the loader reads them all for the bare name first. */
	for (;;)
	{
		size_t		len = strcspn(dirs, ":");

		/* What the loader refuses (an ERROR at every worker start). */
		if (len >= 7 && strncmp(dirs, "$libdir", 7) == 0 && (len == 7 || dirs[7] == '/'))
			snprintf(dir, sizeof(dir), "%s%.*s", pkglib_path, (int) len - 7, dirs + 7);
		else
			snprintf(dir, sizeof(dir), "%.*s", (int) len, dirs);
		if (len == 0 || len >= sizeof(dir) || !is_absolute_path(dir))
		{
			snprintf(problem, size, "dynamic_library_path has an entry that is not an absolute path: \"%.*s\"",
					 (int) len, dirs);
			return false;
		}
		for (int i = 0; i < lengthof(suffixes) && !found; i++)
		{
			snprintf(path, sizeof(path), "%s/%s%s", dir, WORKER_LIBRARY, suffixes[i]);
			found = file_exists(path);
		}
		if (dirs == Dynamic_library_path)
			snprintf(problem, size, "\"%s\" not found", path);
		if (dirs[len] == '\0')
			return found;
		dirs += len + 1;
	}
}

bool		traceprof_exporter_registered = false;
bool		traceprof_uploader_registered = false;

/*
 * Register a worker; false when the postmaster refused it (its own LOG
 * says only "too many background workers").  RegisterBackgroundWorker
 * returns nothing: a registered worker is the head of the list.
 */
static bool
register_worker(const char *name, const char *function, const char *kept)
{
	BackgroundWorker worker;
	RegisteredBgWorker *head;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* A hot standby traces its read-only statements too. */
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 10;
	strlcpy(worker.bgw_library_name, WORKER_LIBRARY, BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, function, BGW_MAXLEN);
	strlcpy(worker.bgw_name, name, BGW_MAXLEN);
	strlcpy(worker.bgw_type, name, BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
	head = slist_is_empty(&BackgroundWorkerList) ? NULL :
		slist_container(RegisteredBgWorker, rw_lnode, slist_head_node(&BackgroundWorkerList));
	if (head != NULL && strcmp(head->rw_worker.bgw_function_name, function) == 0)
		return true;
	ereport(WARNING,
			(errmsg("traceprof: the %s cannot run", name),
			 errdetail("%s", kept),
			 errhint("traceprof's two workers need two of max_worker_processes (%d), beside the workers registered before them (the logical replication launcher, other preloaded extensions'); raise it (it takes a restart).",
					 max_worker_processes)));
	return false;
}

/*
 * Without its worker, a ring would keep what waits for export until it is
 * full, then drop every span: the rings are told so at their creation.
 */
void
traceprof_register_exporter(void)
{
	char		problem[MAXPGPATH + 100];

	/* A single-user backend starts no worker: its rings keep the latest, as without room. */
	if (!IsPostmasterEnvironment)
		return;
	if (!worker_library_found(problem, sizeof(problem)))
	{
		ereport(WARNING,
				(errmsg("traceprof: its workers' library cannot be loaded: %s", problem),
				 errdetail("No span is exported and no profile uploaded; traceprof.spans and traceprof.profile() keep the latest."),
				 errhint("Install traceprof again: it has two libraries, traceprof and " WORKER_LIBRARY ".")));
		return;
	}
	traceprof_exporter_registered =
		register_worker("traceprof exporter", "traceprof_exporter_main",
						"No span is exported; traceprof.spans keeps the latest.");
	traceprof_uploader_registered =
		register_worker("traceprof profile uploader", "traceprof_profile_uploader_main",
						"No profile is uploaded; traceprof.profile() keeps the latest samples.");
}
