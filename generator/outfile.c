/* outfile.c - all-or-nothing output file with signal-time cleanup. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * What the signal handler removes.  Only ever changed with the handled
 * signals blocked, so the handler never sees a half-copied path.
 */
static char cleanup_path[PATH_MAX];
static volatile sig_atomic_t cleanup_armed;

static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void
on_signal(int sig)
{
	static const char msg[] = "generator: interrupted, temporary file removed\n";
	int			save_errno = errno;

	if (cleanup_armed)
	{
		cleanup_armed = 0;
		(void) unlink(cleanup_path);
		(void) !write(STDERR_FILENO, msg, sizeof(msg) - 1);
	}
	errno = save_errno;

	/*
	 * SA_RESETHAND restored the default action; the re-raised signal is
	 * delivered as soon as the handler returns, so the parent sees the
	 * usual "killed by SIGINT" status.
	 */
	raise(sig);
}

bool
gen_outfile_install_signal_cleanup(void)
{
	struct sigaction sa;
	size_t		i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(cleanup_signals) / sizeof(cleanup_signals[0]); i++)
		sigaddset(&sa.sa_mask, cleanup_signals[i]);

	for (i = 0; i < sizeof(cleanup_signals) / sizeof(cleanup_signals[0]); i++)
		if (sigaction(cleanup_signals[i], &sa, NULL) != 0)
			return false;
	return true;
}

static void
block_cleanup_signals(sigset_t *old)
{
	sigset_t	set;
	size_t		i;

	sigemptyset(&set);
	for (i = 0; i < sizeof(cleanup_signals) / sizeof(cleanup_signals[0]); i++)
		sigaddset(&set, cleanup_signals[i]);
	sigprocmask(SIG_BLOCK, &set, old);
}

static void
restore_signals(const sigset_t *old)
{
	sigprocmask(SIG_SETMASK, old, NULL);
}

/* "dir/.name.tmp-XXXXXX" for "dir/name"; false if it does not fit. */
static bool
make_template(char *out, size_t outlen, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t		dirlen = slash ? (size_t) (slash - path) + 1 : 0;
	int			n;

	n = snprintf(out, outlen, "%.*s.%s.tmp-XXXXXX", (int) dirlen, path,
				 path + dirlen);
	return n > 0 && (size_t) n < outlen;
}

bool
gen_outfile_open(gen_outfile *f, const char *path)
{
	sigset_t	old;
	mode_t		mask;
	int			save_errno;

	f->fd = -1;
	f->path = path;
	f->bytes = 0;
	f->err[0] = '\0';

	if (path[0] == '\0' || path[strlen(path) - 1] == '/')
	{
		snprintf(f->err, sizeof(f->err), "cannot write \"%s\": %s",
				 path, strerror(EISDIR));
		return false;
	}
	if (!make_template(f->tmp_path, sizeof(f->tmp_path), path))
	{
		snprintf(f->err, sizeof(f->err), "cannot write \"%s\": %s",
				 path, strerror(ENAMETOOLONG));
		return false;
	}

	/* Create and arm atomically with respect to our signals. */
	block_cleanup_signals(&old);
	f->fd = mkostemp(f->tmp_path, O_CLOEXEC);
	save_errno = errno;
	if (f->fd >= 0)
	{
		memcpy(cleanup_path, f->tmp_path, sizeof(cleanup_path));
		cleanup_armed = 1;
	}
	restore_signals(&old);

	if (f->fd < 0)
	{
		/* mkstemp scribbled a name that was never created: show the pattern. */
		make_template(f->tmp_path, sizeof(f->tmp_path), path);
		snprintf(f->err, sizeof(f->err),
				 "cannot create temporary file \"%s\" for \"%s\": %s",
				 f->tmp_path, path, strerror(save_errno));
		return false;
	}

	/* mkstemp makes 0600; give the file the mode open(2) would have. */
	mask = umask(0);
	umask(mask);
	if (fchmod(f->fd, 0666 & ~mask) != 0)
	{
		snprintf(f->err, sizeof(f->err), "cannot set mode of \"%s\": %s",
				 f->tmp_path, strerror(errno));
		gen_outfile_abort(f);
		return false;
	}
	return true;
}

/*
 * Start writeback of each completed WRITEBACK_CHUNK as we go, so the kernel
 * flushes to disk (on another CPU) while we generate, and the final fsync
 * has little left to do.  Advisory: errors surface at fsync.
 */
#define WRITEBACK_CHUNK (UINT64_C(8) * 1024 * 1024)

static void
start_writeback(gen_outfile *f, uint64_t before)
{
	uint64_t	chunk_start = before / WRITEBACK_CHUNK * WRITEBACK_CHUNK;
	uint64_t	chunk_end = f->bytes / WRITEBACK_CHUNK * WRITEBACK_CHUNK;

	if (chunk_end > chunk_start)
		(void) sync_file_range(f->fd, (off_t) chunk_start,
							   (off_t) (chunk_end - chunk_start),
							   SYNC_FILE_RANGE_WRITE);
}

bool
gen_outfile_write(gen_outfile *f, const char *data, size_t len)
{
	uint64_t	before = f->bytes;

	while (len > 0)
	{
		ssize_t		n = write(f->fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
		{
			/* A regular file only returns 0 for len 0; treat it as I/O error. */
			snprintf(f->err, sizeof(f->err),
					 "cannot write \"%s\" (temporary file \"%s\", after %llu bytes): %s",
					 f->path, f->tmp_path, (unsigned long long) f->bytes,
					 strerror(n < 0 ? errno : EIO));
			return false;
		}
		data += n;
		len -= (size_t) n;
		f->bytes += (uint64_t) n;
	}
	start_writeback(f, before);
	return true;
}

/* Make the rename itself durable; failure here loses nothing written. */
static void
sync_directory(const char *path)
{
	char		dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int			fd;

	if (slash == NULL)
		strcpy(dir, ".");
	else if (slash == path)
		strcpy(dir, "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int) (slash - path), path);

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
	{
		(void) fsync(fd);
		close(fd);
	}
}

bool
gen_outfile_commit(gen_outfile *f)
{
	sigset_t	old;
	int			fd = f->fd;
	int			rc;

	if (fsync(fd) != 0)
	{
		snprintf(f->err, sizeof(f->err),
				 "cannot write \"%s\": fsync of temporary file \"%s\" failed: %s",
				 f->path, f->tmp_path, strerror(errno));
		return false;
	}
	f->fd = -1;
	if (close(fd) != 0)
	{
		snprintf(f->err, sizeof(f->err),
				 "cannot write \"%s\": close of temporary file \"%s\" failed: %s",
				 f->path, f->tmp_path, strerror(errno));
		return false;
	}

	/* Disarm together with the rename: afterwards the name is the target's. */
	block_cleanup_signals(&old);
	rc = rename(f->tmp_path, f->path);
	if (rc == 0)
		cleanup_armed = 0;
	else
		rc = errno;
	restore_signals(&old);

	if (rc != 0)
	{
		snprintf(f->err, sizeof(f->err), "cannot rename \"%s\" to \"%s\": %s",
				 f->tmp_path, f->path, strerror(rc));
		return false;
	}
	sync_directory(f->path);
	return true;
}

void
gen_outfile_abort(gen_outfile *f)
{
	sigset_t	old;

	if (f->fd >= 0)
	{
		close(f->fd);
		f->fd = -1;
	}
	block_cleanup_signals(&old);
	if (cleanup_armed)
	{
		(void) unlink(f->tmp_path);
		cleanup_armed = 0;
	}
	restore_signals(&old);
}
