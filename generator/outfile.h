/*
 * outfile.h - write a file so that it is either complete or absent.
 *
 * Data goes to a hidden temporary file next to the target
 * (".NAME.tmp-XXXXXX" in the same directory, hence the same file system;
 * a long NAME is shortened so the temporary name is no longer than NAME),
 * which is fsync'ed and renamed over the target only when everything was
 * written.  Any failure, or SIGINT/SIGTERM/SIGHUP while writing, removes
 * the temporary file; an existing target is never touched until the
 * rename.  One output file per process at a time.
 *
 * The target is looked at first: an existing regular file keeps its mode
 * and must be writable by us (as for open(2), though a rename needs only
 * the directory's permission);
 * a symbolic link is followed and the file it names is replaced (the link
 * stays; a dangling link is refused); a FIFO or a character device
 * (/dev/null, /dev/tty) is written directly, with no temporary file and
 * no all-or-nothing guarantee, and so is the descriptor /dev/stdout,
 * /dev/stderr or /dev/fd/N names, whatever it is (pipe, socket, a file
 * opened for appending); anything else (directory, block device, socket)
 * is refused before anything is written.
 */
#ifndef GEN_OUTFILE_H
#define GEN_OUTFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct gen_outfile
{
	int			fd;				/* -1 when closed */
	const char *path;			/* the target, as given */
	char		target[PATH_MAX];	/* what the rename replaces: path, links resolved */
	bool		direct;			/* a FIFO or device: fd is the target itself */
	int			named_fd;		/* /dev/stdout and the like: that fd, else -1 */
	mode_t		mode;			/* for the new file */
	char		tmp_path[PATH_MAX];
	uint64_t	bytes;			/* written so far */
	char		err[PATH_MAX * 2 + 128];	/* one line, set on failure */
} gen_outfile;

/*
 * Install the signal handlers that remove an open temporary file and then
 * let the signal terminate the process as usual.  The SIGPIPE the kernel
 * sends for our own write to a closed pipe is ignored: that write fails
 * with EPIPE instead (reported for OUT).  Call once, early.
 */
bool		gen_outfile_install_signal_cleanup(void);

/*
 * Check the target and create the temporary file for path (mode of the
 * existing file, else 0666 & ~umask), or open a FIFO/device target.
 */
bool		gen_outfile_open(gen_outfile *f, const char *path);

/* Write all of data, retrying short writes and EINTR. */
bool		gen_outfile_write(gen_outfile *f, const char *data, size_t len);

/*
 * fsync, close and rename over the target (just close a FIFO or device);
 * f->fd is closed afterwards.
 */
bool		gen_outfile_commit(gen_outfile *f);

/* Close and remove the temporary file, if any.  Keeps f->err. */
void		gen_outfile_abort(gen_outfile *f);

#endif
