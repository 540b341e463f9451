/* self_profiler.c - PYROSCOPE_* continuous profiling for the binaries. */
#include "self_profiler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "flamegraph.h"
#include "log.h"
#include "profile.h"
#include "pyroscope.h"
#include "sampler.h"
#include "symbols.h"
#include "text.h"
#include "tracer.h"

#define SAMPLE_HZ 100
#define RING_CAPACITY 4096		/* 40 s of samples between drains */
#define DEFAULT_UPLOAD_INTERVAL_MS 10000
#define PERIOD_NS (1000000000ULL / SAMPLE_HZ)

/* One pprof waiting for the uploader thread. */
typedef struct upload
{
	uint8_t    *pprof;
	size_t		len;
	uint64_t	from_ns;
	uint64_t	until_ns;
} upload;

static struct
{
	bool		sampling;
	bool		uploading;
	tp_pyroscope_config cfg;
	tp_symbols *symbols;
	tp_profile *window;			/* samples not yet uploaded */
	tp_profile *whole;			/* every sample, for --profile-out */
	char	   *profile_out;
	char	   *span_name;
	char		trace_id[TP_TRACE_ID_HEX + 1];
	uint64_t	window_start_ns;
	uint64_t	run_start_ns;	/* for --profile-out's time window */
	uint64_t	run_end_ns;		/* when sampling stopped; 0 before */
	uint64_t	last_drain_ns;
	uint64_t	upload_interval_ns;

	/* the uploader thread and its one-slot mailbox */
	pthread_t	thread;
	bool		thread_started;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	upload		pending;		/* pprof NULL: empty */
	bool		stop;
	bool		warned;
	bool		uploaded;		/* a profile went: the link at the end leads to data */
	uint64_t	exit_deadline_ns;	/* monotonic; 0 until finish sets it */
}			self;

static uint64_t
now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/*
 * Upload one window with cfg, a shallow copy of self.cfg (only the budget
 * differs), which keeps what the server answered (Retry-After, size limit).
 * Once the program is exiting, every upload shares what is left of one
 * PYROSCOPE_UPLOAD_TIMEOUT, however many windows wait: a slow server delays
 * the exit by one budget, not one per window.
 */
static void
send_one(const upload *u, uint64_t exit_deadline_ns, tp_pyroscope_config *cfg)
{
	char		err[512];

	if (exit_deadline_ns != 0)
	{
		uint64_t	now = now_ns(CLOCK_MONOTONIC);
		long		left_ms = now < exit_deadline_ns ? (long) ((exit_deadline_ns - now) / 1000000) : 0;

		if (left_ms < 1)
			left_ms = 1;		/* one last try rather than a silent drop */
		if (left_ms < cfg->timeout_ms)
			cfg->timeout_ms = left_ms;
	}
	if (tp_pyroscope_ingest(cfg, u->pprof, u->len, u->from_ns, u->until_ns, err, sizeof(err)))
		self.uploaded = true;
	else if (!self.warned)
	{
		/* One warning per run: a dead server must not flood the terminal. */
		self.warned = true;
		tp_warn("profiles not uploaded to Pyroscope: %s", err);
	}
}

/*
 * A server that answered with a Retry-After longer than the upload budget
 * is not asked again before it has passed: the mailbox stays full, and
 * windows accumulate meanwhile.  Exiting, the wait ends with the exit
 * budget; the upload then fails at once, saying why.  Called with the lock
 * held; finish() wakes it when it sets the exit deadline.
 */
static void
wait_out_retry_after(void)
{
	for (;;)
	{
		long		wait_ms = tp_pyroscope_retry_wait_ms(&self.cfg);
		uint64_t	until = now_ns(CLOCK_MONOTONIC) + (uint64_t) wait_ms * 1000000ULL;
		struct timespec ts;

		if (wait_ms <= 0 || (self.exit_deadline_ns != 0 && until > self.exit_deadline_ns))
			return;
		ts.tv_sec = (time_t) (until / 1000000000ULL);
		ts.tv_nsec = (long) (until % 1000000000ULL);
		pthread_cond_timedwait(&self.wake, &self.lock, &ts);
	}
}

static void *
uploader_main(void *arg)
{
	(void) arg;
	pthread_mutex_lock(&self.lock);
	for (;;)
	{
		upload		u;
		uint64_t	exit_deadline_ns;
		tp_pyroscope_config cfg;

		while (self.pending.pprof == NULL && !self.stop)
			pthread_cond_wait(&self.wake, &self.lock);
		if (self.pending.pprof == NULL)
			break;				/* stop, nothing left */
		wait_out_retry_after();
		u = self.pending;
		exit_deadline_ns = self.exit_deadline_ns;
		cfg = self.cfg;
		self.pending.pprof = NULL;
		pthread_mutex_unlock(&self.lock);
		send_one(&u, exit_deadline_ns, &cfg);
		free(u.pprof);
		pthread_mutex_lock(&self.lock);
		/* What the server said holds for the next uploads. */
		self.cfg.retry_not_before_ms = cfg.retry_not_before_ms;
		self.cfg.size_limit = cfg.size_limit;
	}
	pthread_mutex_unlock(&self.lock);
	return NULL;
}

static void
add_sample(const tp_sample *sample, void *arg)
{
	(void) arg;
	if (self.window != NULL)
		tp_profile_add(self.window, self.symbols, sample, self.span_name);
	if (self.whole != NULL)
		tp_profile_add(self.whole, self.symbols, sample, self.span_name);
}

/*
 * Hand the window to the uploader if its mailbox is free; otherwise keep
 * accumulating, so a slow server delays samples but never loses them.
 */
static void
queue_window(uint64_t until_ns)
{
	upload		u;

	if (!self.uploading || tp_profile_total(self.window) == 0)
		return;
	pthread_mutex_lock(&self.lock);
	if (self.pending.pprof == NULL)
	{
		tp_profile_set_window(self.window, self.window_start_ns, until_ns);
		u.pprof = tp_profile_pprof(self.window, &u.len);
		u.from_ns = self.window_start_ns;
		u.until_ns = until_ns;
		if (u.pprof != NULL)
		{
			self.pending = u;
			tp_profile_clear(self.window);
			self.window_start_ns = until_ns;
			pthread_cond_signal(&self.wake);
		}
	}
	pthread_mutex_unlock(&self.lock);
}

/* PYROSCOPE_UPLOAD_INTERVAL: milliseconds between uploads (default 10 s). */
static uint64_t
upload_interval_ns(void)
{
	char	   *text = tp_getenv_trimmed("PYROSCOPE_UPLOAD_INTERVAL");
	char	   *end;
	long		ms;

	if (text == NULL)
		return DEFAULT_UPLOAD_INTERVAL_MS * 1000000ULL;
	ms = strtol(text, &end, 10);
	if (*end != '\0' || ms < 100 || ms > 3600000)
	{
		tp_warn("PYROSCOPE_UPLOAD_INTERVAL=\"%s\" is not an interval (expected milliseconds, 100..3600000); using %d",
				text, DEFAULT_UPLOAD_INTERVAL_MS);
		ms = DEFAULT_UPLOAD_INTERVAL_MS;
	}
	free(text);
	return (uint64_t) ms * 1000000ULL;
}

static void
describe_root(tp_span *root)
{
	char		span_id[TP_SPAN_ID_HEX + 1];
	char	   *url;

	tp_span_id_hex(root, span_id);
	tp_span_trace_id_hex(root, self.trace_id);
	/* What Grafana's "Profiles for this span" queries by. */
	tp_span_set_string(root, "pyroscope.profile.id", span_id);
	url = tp_pyroscope_query_url(&self.cfg, self.trace_id);
	if (url != NULL)
		tp_span_set_string(root, "pyroscope.profile.url", url);
	free(url);
	/*
	 * The reference tools' default tag, which the link's query filters by
	 * (a service key of the user's wins).
	 */
	tp_pyroscope_add_tag(&self.cfg.tags, "service", self.cfg.application_name);
	if (self.cfg.trace_correlation)
	{
		tp_pyroscope_add_tag(&self.cfg.tags, "trace_id", self.trace_id);
		tp_pyroscope_add_tag(&self.cfg.tags, "root_span_id", span_id);
	}
}

/* Where the profile goes: option when not empty, else TRACEPROF_PROFILE_OUT when not empty. */
static const char *
out_path(const char *option)
{
	const char *env = getenv("TRACEPROF_PROFILE_OUT");

	if (option != NULL && option[0] != '\0')
		return option;
	return env != NULL && env[0] != '\0' ? env : NULL;
}

/*
 * "realpath(dirname)/basename" for a path that does not exist (yet); false
 * if its directory cannot be resolved either.
 */
static bool
resolve_directory(const char *path, char *out)
{
	const char *slash = strrchr(path, '/');
	char		dir[PATH_MAX];
	char		real[PATH_MAX];
	int			n;

	if (slash == NULL)
		strcpy(dir, ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int) (slash - path), path);
	if (realpath(dir, real) == NULL)
		return false;
	n = snprintf(out, PATH_MAX, "%s/%s", strcmp(real, "/") == 0 ? "" : real,
				 slash != NULL ? slash + 1 : path);
	return n > 0 && n < PATH_MAX;
}

/* As many links as the kernel follows (SYMLOOP_MAX on Linux). */
#define MAX_LINK_HOPS 40

/*
 * The file a write to path replaces, as a resolved path: the real path of
 * an existing file; for one that does not exist yet, the resolved directory
 * and name, the end of a dangling link's chain included (writing through
 * the link creates that file).  false if it cannot be told.
 */
static bool
landing_path(const char *path, char *out)
{
	char		cur[PATH_MAX];
	char		link[PATH_MAX];
	ssize_t		n;

	if (snprintf(cur, sizeof(cur), "%s", path) >= (int) sizeof(cur))
		return false;
	for (int hop = 0; hop < MAX_LINK_HOPS; hop++)
	{
		const char *slash = strrchr(cur, '/');
		char		next[PATH_MAX];

		if (realpath(cur, out) != NULL)
			return true;
		n = readlink(cur, link, sizeof(link) - 1);
		if (n < 0)
			return resolve_directory(cur, out);
		link[n] = '\0';
		/* A relative link is read from the link's own directory. */
		if (link[0] == '/' || slash == NULL)
			snprintf(next, sizeof(next), "%s", link);
		else if (snprintf(next, sizeof(next), "%.*s/%s", (int) (slash - cur), cur, link) >= (int) sizeof(next))
			return false;
		strcpy(cur, next);
	}
	return false;
}

static bool
replaces(const char *profile_out, const char *data_path)
{
	struct stat a;
	struct stat b;
	char		pa[PATH_MAX];
	char		pb[PATH_MAX];

	/* Existing: the same regular file, under any name (links, hard links). */
	if (stat(profile_out, &a) == 0 && stat(data_path, &b) == 0)
		return S_ISREG(a.st_mode) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
	return landing_path(profile_out, pa) && landing_path(data_path, pb) &&
		strcmp(pa, pb) == 0;
}

bool
tp_self_profiler_check_out(const char *option, const char *data_path,
						   const char *data_name, const char *data_what,
						   char *err, size_t errlen)
{
	const char *profile_out = out_path(option);

	if (profile_out == NULL || !replaces(profile_out, data_path))
		return true;
	snprintf(err, errlen, "%s \"%s\" is the same file as %s \"%s\": the profile would replace "
			 "the %s; give the profile another name",
			 profile_out == option ? "--profile-out" : "TRACEPROF_PROFILE_OUT",
			 profile_out, data_name, data_path, data_what);
	return false;
}

void
tp_self_profiler_start(tp_span *root, const char *default_application,
					   const char *profile_out)
{
	tp_sample_labels labels;
	char		err[256];

	profile_out = out_path(profile_out);
	tp_pyroscope_config_from_env(&self.cfg, default_application);
	self.uploading = self.cfg.enabled;
	if (!self.cfg.enabled && self.cfg.trace_correlation && profile_out == NULL)
		tp_warn("PYROSCOPE_TRACE_CORRELATION is on but PYROSCOPE_ENABLE is not: no profile is taken "
				"or uploaded (set PYROSCOPE_ENABLE=true)");
	if (profile_out != NULL)
		self.profile_out = strdup(profile_out);
	if (!self.uploading && self.profile_out == NULL)
		return;

	self.span_name = strdup(root->name);
	if (self.uploading)
		describe_root(root);
	else
		tp_span_trace_id_hex(root, self.trace_id);
	self.symbols = tp_symbols_load();
	self.window = self.uploading ? tp_profile_new("cpu", PERIOD_NS) : NULL;
	self.whole = self.profile_out ? tp_profile_new("cpu", PERIOD_NS) : NULL;
	if (self.uploading)
	{
		pthread_condattr_t monotonic;

		/* wait_out_retry_after's deadlines are on the monotonic clock. */
		pthread_condattr_init(&monotonic);
		pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
		pthread_mutex_init(&self.lock, NULL);
		pthread_cond_init(&self.wake, &monotonic);
		pthread_condattr_destroy(&monotonic);
		self.thread_started = pthread_create(&self.thread, NULL, uploader_main, NULL) == 0;
		if (!self.thread_started)
		{
			tp_warn("profiling off: cannot start the upload thread");
			self.uploading = false;
		}
	}
	/* Every sample carries the root span: what traces-to-profiles looks up. */
	memset(&labels, 0, sizeof(labels));
	memcpy(labels.trace_id, root->context.trace_id, TP_TRACE_ID_BYTES);
	memcpy(labels.span_id, root->context.span_id, TP_SPAN_ID_BYTES);
	tp_sampler_set_labels(&labels);
	if (!tp_sampler_start(SAMPLE_HZ, TP_SAMPLER_CPU, RING_CAPACITY, err, sizeof(err)))
	{
		tp_warn("profiling off: %s", err);
		return;
	}
	tp_sampler_set_labels(&labels);
	self.sampling = true;
	self.window_start_ns = now_ns(CLOCK_REALTIME);
	self.run_start_ns = self.window_start_ns;
	self.last_drain_ns = now_ns(CLOCK_MONOTONIC);
	self.upload_interval_ns = upload_interval_ns();
}

void
tp_self_profiler_tick(void)
{
	uint64_t	now;

	if (!self.sampling)
		return;
	now = now_ns(CLOCK_MONOTONIC);
	if (now - self.last_drain_ns < self.upload_interval_ns)
		return;
	self.last_drain_ns = now;
	tp_sampler_drain(add_sample, NULL);
	queue_window(now_ns(CLOCK_REALTIME));
}

/*
 * Write all of len bytes.  A short write (disk full, file size limit) is
 * followed by another, which returns the error that says why.
 */
static bool
write_all(int fd, const uint8_t *bytes, size_t len, int *error)
{
	while (len > 0)
	{
		ssize_t		n = write(fd, bytes, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
		{
			*error = n < 0 ? errno : EIO;
			return false;
		}
		bytes += n;
		len -= (size_t) n;
	}
	return true;
}

/*
 * A FIFO or a character device (/dev/stdout) is written as it is, like a
 * shell redirection: renaming a file over it would replace it.
 */
static void
write_profile_direct(const uint8_t *bytes, size_t len)
{
	int			fd = open(self.profile_out, O_WRONLY | O_CLOEXEC);
	int			error = 0;
	bool		ok = fd >= 0 && write_all(fd, bytes, len, &error);

	if (fd < 0)
		error = errno;
	if (fd >= 0 && close(fd) != 0 && ok)
	{
		error = errno;
		ok = false;
	}
	if (!ok)
		tp_warn("profile not written to %s: %s", self.profile_out, strerror(error));
	else
		tp_info("profile written to %s (%llu samples)", self.profile_out,
				(unsigned long long) tp_profile_total(self.whole));
}

/*
 * Write the whole run's profile next to its final name, then rename.  A
 * symbolic link stays: the file it names is replaced, in its directory.
 * An existing file keeps its mode.
 */
static void
write_profile_out(void)
{
	const char *dot = strrchr(self.profile_out, '.');
	char	   *text = NULL;
	uint8_t    *bytes;
	size_t		len;
	char	   *tmp;
	char	   *resolved = NULL;
	const char *target = self.profile_out;
	struct stat st;
	bool		exists;
	int			fd;
	int			error = 0;
	bool		ok;

	tp_profile_set_window(self.whole, self.run_start_ns, self.run_end_ns);
	if (dot != NULL && strcmp(dot, ".json") == 0)
		bytes = (uint8_t *) (text = tp_profile_speedscope(self.whole, self.span_name));
	else if (dot != NULL && (strcmp(dot, ".folded") == 0 || strcmp(dot, ".txt") == 0))
		bytes = (uint8_t *) (text = tp_profile_folded(self.whole));
	else if (dot != NULL && strcmp(dot, ".svg") == 0)
		bytes = (uint8_t *) (text = tp_flamegraph_svg(self.whole, self.span_name));
	else
		bytes = tp_profile_pprof(self.whole, &len);
	if (text != NULL)
		len = strlen(text);
	if (bytes == NULL)
	{
		tp_warn("profile not written to %s: out of memory", self.profile_out);
		return;
	}
	exists = stat(self.profile_out, &st) == 0;
	if (exists && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))
	{
		write_profile_direct(bytes, len);
		free(bytes);
		return;
	}
	if (exists && (resolved = realpath(self.profile_out, NULL)) != NULL)
		target = resolved;
	if (asprintf(&tmp, "%s.tmp-XXXXXX", target) < 0)
	{
		tp_warn("profile not written to %s: out of memory", self.profile_out);
		free(resolved);
		free(bytes);
		return;
	}
	fd = mkstemp(tmp);
	if (fd < 0)
		error = errno;
	else
	{
		mode_t		mask = umask(0);	/* mkstemp made it 0600 */

		umask(mask);
		(void) fchmod(fd, exists && S_ISREG(st.st_mode) ? (st.st_mode & 0777) : (0666 & ~mask));
	}
	ok = fd >= 0 && write_all(fd, bytes, len, &error);
	if (fd >= 0 && close(fd) != 0 && ok)
	{
		error = errno;
		ok = false;
	}
	if (ok && rename(tmp, target) != 0)
	{
		error = errno;
		ok = false;
	}
	if (!ok)
	{
		tp_warn("profile not written to %s: %s", self.profile_out, strerror(error));
		if (fd >= 0)
			unlink(tmp);
	}
	else
		tp_info("profile written to %s (%llu samples)", self.profile_out,
				(unsigned long long) tp_profile_total(self.whole));
	free(tmp);
	free(resolved);
	free(bytes);
}

void
tp_self_profiler_stop(void)
{
	if (self.sampling)
	{
		tp_sampler_pause();
		tp_sampler_drain(add_sample, NULL);
		tp_sampler_stop();
		self.sampling = false;
	}
	if (self.run_end_ns == 0)
		self.run_end_ns = now_ns(CLOCK_REALTIME);
}

bool
tp_self_profiler_uploading(void)
{
	return self.uploading;
}

void
tp_self_profiler_finish(void)
{
	tp_self_profiler_stop();
	if (self.uploading && self.thread_started)
	{
		char	   *url = tp_pyroscope_query_url(&self.cfg, self.trace_id);

		/*
		 * From here on uploads share one budget.  The one in flight ends by
		 * its own deadline, which is earlier.
		 */
		pthread_mutex_lock(&self.lock);
		self.exit_deadline_ns = now_ns(CLOCK_MONOTONIC) + (uint64_t) self.cfg.timeout_ms * 1000000ULL;
		pthread_cond_signal(&self.wake);	/* a Retry-After wait ends by it */
		pthread_mutex_unlock(&self.lock);

		/* The last window waits for the mailbox, then the thread drains it. */
		for (;;)
		{
			pthread_mutex_lock(&self.lock);
			bool		free_slot = self.pending.pprof == NULL;

			pthread_mutex_unlock(&self.lock);
			if (free_slot)
				break;
			usleep(10000);
		}
		queue_window(self.run_end_ns);
		pthread_mutex_lock(&self.lock);
		self.stop = true;
		pthread_cond_signal(&self.wake);
		pthread_mutex_unlock(&self.lock);
		pthread_join(self.thread, NULL);
		if (url != NULL && self.uploaded)
			tp_info("profiles of trace %s: %s", self.trace_id, url);
		free(url);
	}
	if (self.profile_out != NULL && self.whole != NULL)
		write_profile_out();
	if (self.window)
		tp_profile_free(self.window);
	if (self.whole)
		tp_profile_free(self.whole);
	if (self.symbols)
		tp_symbols_free(self.symbols);
	free(self.profile_out);
	free(self.span_name);
	tp_pyroscope_config_free(&self.cfg);
	memset(&self, 0, sizeof(self));
}
