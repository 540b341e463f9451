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

/*
 * The signals that end the process by default and that a user, a shell or
 * a CPU limit may send (SIGPIPE only from someone else: is_own_sigpipe):
 * not the self-profiler's (TP_SAMPLER_SIGNAL), nor those a fault raises
 * (SIGSEGV, SIGBUS: nothing is safe to do then).
 */
static const int cleanup_signals[] = {
	SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM,
	SIGPROF, SIGVTALRM, SIGXCPU,
};

/*
 * A SIGPIPE the kernel sent us for our own write to a pipe or socket whose
 * reader is gone: it comes as if we had kill()ed ourselves.  That write
 * then fails with EPIPE and is reported like any other write error (OUT)
 * or ignored (stderr), so the run still ends through its cleanup, exports
 * its spans and writes --profile-out.  A SIGPIPE someone else sends still
 * ends the run as the signal would.
 */
static bool
is_own_sigpipe(int sig, const siginfo_t *info)
{
	return sig == SIGPIPE && info->si_code == SI_USER && info->si_pid == getpid();
}

static void
on_signal(int sig, siginfo_t *info, void *ucontext)
{
	static const char msg[] = "generator: stopped by a signal, temporary file removed\n";
	int			save_errno = errno;

	(void) ucontext;
	if (is_own_sigpipe(sig, info))
		return;
	if (cleanup_armed)
	{
		cleanup_armed = 0;
		(void) unlink(cleanup_path);
		(void) !write(STDERR_FILENO, msg, sizeof(msg) - 1);
	}
	errno = save_errno;

	/*
	 * Back to the default action (not SA_RESETHAND, which an ignored own
	 * SIGPIPE would use up); the re-raised signal is blocked until the
	 * handler returns and then delivered, so the parent sees the usual
	 * "killed by SIGINT" status.
	 */
	(void) signal(sig, SIG_DFL);
	raise(sig);
}

bool
gen_outfile_install_signal_cleanup(void)
{
	struct sigaction sa;
	size_t		i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(cleanup_signals) / sizeof(cleanup_signals[0]); i++)
		sigaddset(&sa.sa_mask, cleanup_signals[i]);

	for (i = 0; i < sizeof(cleanup_signals) / sizeof(cleanup_signals[0]); i++)
		if (sigaction(cleanup_signals[i], &sa, NULL) != 0)
			return false;
	/* Past a file-size limit, write() then fails with EFBIG: reported, cleaned up. */
	return signal(SIGXFSZ, SIG_IGN) != SIG_ERR;
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

/* Names up to this long keep all of it in the temporary name. */
#define TMP_NAME_KEEP 40
/* What the temporary name adds: '.' before, ".tmp-XXXXXX" after. */
#define TMP_NAME_EXTRA 12

/*
 * "dir/.name.tmp-XXXXXX" for "dir/name"; false if it does not fit.  A long
 * name loses its last TMP_NAME_EXTRA bytes (never part of a UTF-8
 * character), so the temporary name fits wherever the name itself does.
 */
static bool
make_template(char *out, size_t outlen, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t		dirlen = slash ? (size_t) (slash - path) + 1 : 0;
	const char *name = path + dirlen;
	size_t		keep = strlen(name);
	int			n;

	if (keep > TMP_NAME_KEEP)
	{
		keep -= TMP_NAME_EXTRA;
		while (keep > 0 && ((unsigned char) name[keep] & 0xC0) == 0x80)
			keep--;
	}
	n = snprintf(out, outlen, "%.*s.%.*s.tmp-XXXXXX", (int) dirlen, path,
				 (int) keep, name);
	return n > 0 && (size_t) n < outlen;
}

static const char *
file_type_name(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

/* A symbolic link at path: false with f->err set if it leads nowhere. */
static bool
follow_link(gen_outfile *f, const char *path, struct stat *st)
{
	char		dest[PATH_MAX];
	ssize_t		n;

	if (stat(path, st) == 0)
		return true;
	if (errno != ENOENT)
	{
		snprintf(f->err, sizeof(f->err), "cannot write \"%s\": %s", path, strerror(errno));
		return false;
	}
	n = readlink(path, dest, sizeof(dest) - 1);
	dest[n > 0 ? n : 0] = '\0';
	snprintf(f->err, sizeof(f->err),
			 "cannot write \"%s\": it is a symbolic link to \"%s\", which does not exist "
			 "(expected a link to an existing file; remove the link to write a new file)",
			 path, dest);
	return false;
}

/*
 * The descriptor that /dev/stdout, /dev/stderr, /dev/fd/N or
 * /proc/self/fd/N names, else -1.  Written through directly: it may be a
 * socket (which cannot be opened by name) or a file opened for appending.
 */
static int
named_descriptor(const char *path)
{
	const char *num = NULL;
	char	   *end;
	long		fd;

	if (strcmp(path, "/dev/stdout") == 0)
		return STDOUT_FILENO;
	if (strcmp(path, "/dev/stderr") == 0)
		return STDERR_FILENO;
	if (strncmp(path, "/dev/fd/", 8) == 0)
		num = path + 8;
	else if (strncmp(path, "/proc/self/fd/", 14) == 0)
		num = path + 14;
	if (num == NULL || *num < '0' || *num > '9')
		return -1;
	errno = 0;
	fd = strtol(num, &end, 10);
	if (*end != '\0' || errno != 0 || fd > INT_MAX)
		return -1;
	return (int) fd;
}

/*
 * Replacing a file by rename needs only the directory's permission: a
 * write-protected OUT (chmod 444) would be replaced all the same, where a
 * shell's ">" or any open for writing fails.  Ask as open would (the
 * effective ids), and leave such a file alone.
 */
static bool
check_writable(gen_outfile *f, const char *path)
{
	if (faccessat(AT_FDCWD, f->target, W_OK, AT_EACCESS) == 0)
		return true;
	snprintf(f->err, sizeof(f->err), "cannot write \"%s\": %s", path, strerror(errno));
	return false;
}

/*
 * Decide where the data goes.  A missing path (or one lstat cannot see,
 * e.g. under a missing directory) is created by the rename, whose errors
 * name the cause.
 */
static bool
resolve_target(gen_outfile *f, const char *path)
{
	struct stat st;
	mode_t		mask;
	bool		link;

	mask = umask(0);
	umask(mask);
	f->mode = 0666 & ~mask;
	f->direct = false;
	if (snprintf(f->target, sizeof(f->target), "%s", path) >= (int) sizeof(f->target))
	{
		snprintf(f->err, sizeof(f->err), "cannot write \"%s\": %s", path, strerror(ENAMETOOLONG));
		return false;
	}
	f->named_fd = named_descriptor(path);
	if (f->named_fd >= 0)
	{
		f->direct = true;
		return true;
	}
	if (lstat(path, &st) != 0)
		return true;
	link = S_ISLNK(st.st_mode);
	if (link && !follow_link(f, path, &st))
		return false;
	if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))
	{
		f->direct = true;
		return true;
	}
	if (!S_ISREG(st.st_mode))
	{
		snprintf(f->err, sizeof(f->err),
				 "cannot write \"%s\": it is %s%s; expected a regular file, a FIFO or a character device",
				 path, link ? "a symbolic link to " : "", file_type_name(st.st_mode));
		return false;
	}
	/* Replace the file the link names, in its own directory; the link stays. */
	if (link && realpath(path, f->target) == NULL)
	{
		snprintf(f->err, sizeof(f->err), "cannot resolve symbolic link \"%s\": %s",
				 path, strerror(errno));
		return false;
	}
	if (!check_writable(f, path))
		return false;
	f->mode = st.st_mode & 0777;
	return true;
}

/* A FIFO or a device: write to it as it is, like a shell redirection. */
static bool
open_direct(gen_outfile *f)
{
	if (f->named_fd >= 0)
		f->fd = fcntl(f->named_fd, F_DUPFD_CLOEXEC, 0);
	else
		f->fd = open(f->path, O_WRONLY | O_CLOEXEC);
	if (f->fd < 0)
	{
		snprintf(f->err, sizeof(f->err), "cannot open \"%s\" for writing: %s",
				 f->path, strerror(errno));
		return false;
	}
	return true;
}

bool
gen_outfile_open(gen_outfile *f, const char *path)
{
	sigset_t	old;
	int			save_errno;

	f->fd = -1;
	f->path = path;
	f->bytes = 0;
	f->err[0] = '\0';
	f->tmp_path[0] = '\0';
	f->named_fd = -1;

	if (path[0] == '\0' || path[strlen(path) - 1] == '/')
	{
		snprintf(f->err, sizeof(f->err), "cannot write \"%s\": %s",
				 path, strerror(EISDIR));
		return false;
	}
	if (!resolve_target(f, path))
		return false;
	if (f->direct)
		return open_direct(f);
	if (!make_template(f->tmp_path, sizeof(f->tmp_path), f->target))
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
		make_template(f->tmp_path, sizeof(f->tmp_path), f->target);
		snprintf(f->err, sizeof(f->err),
				 "cannot create temporary file \"%s\" for \"%s\": %s",
				 f->tmp_path, path, strerror(save_errno));
		return false;
	}

	/* mkstemp makes 0600; give the file the mode it has or open(2) would give. */
	if (fchmod(f->fd, f->mode) != 0)
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

	if (chunk_end > chunk_start && !f->direct)
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
			if (f->direct)
				snprintf(f->err, sizeof(f->err), "cannot write \"%s\" (after %llu bytes): %s",
						 f->path, (unsigned long long) f->bytes, strerror(n < 0 ? errno : EIO));
			else
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

/* A FIFO or device has nothing to fsync or rename: close reports errors. */
static bool
commit_direct(gen_outfile *f)
{
	int			fd = f->fd;

	f->fd = -1;
	if (close(fd) != 0)
	{
		snprintf(f->err, sizeof(f->err), "cannot write \"%s\": close failed: %s",
				 f->path, strerror(errno));
		return false;
	}
	return true;
}

bool
gen_outfile_commit(gen_outfile *f)
{
	sigset_t	old;
	int			fd = f->fd;
	int			rc;

	if (f->direct)
		return commit_direct(f);
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
	rc = rename(f->tmp_path, f->target);
	if (rc == 0)
		cleanup_armed = 0;
	else
		rc = errno;
	restore_signals(&old);

	if (rc != 0)
	{
		snprintf(f->err, sizeof(f->err), "cannot rename \"%s\" to \"%s\": %s",
				 f->tmp_path, f->target, strerror(rc));
		return false;
	}
	sync_directory(f->target);
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
