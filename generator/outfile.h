/*
 * outfile.h - write a file so that it is either complete or absent.
 *
 * Data goes to a hidden temporary file next to the target
 * (".NAME.tmp-XXXXXX" in the same directory, hence the same file system),
 * which is fsync'ed and renamed over the target only when everything was
 * written.  Any failure, or SIGINT/SIGTERM/SIGHUP while writing, removes
 * the temporary file; an existing target is never touched until the
 * rename.  One output file per process at a time.
 */
#ifndef GEN_OUTFILE_H
#define GEN_OUTFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gen_outfile
{
	int			fd;				/* -1 when closed */
	const char *path;			/* the target, as given */
	char		tmp_path[PATH_MAX];
	uint64_t	bytes;			/* written so far */
	char		err[PATH_MAX * 2 + 128];	/* one line, set on failure */
} gen_outfile;

/*
 * Install the signal handlers that remove an open temporary file and then
 * let the signal terminate the process as usual.  Call once, early.
 */
bool		gen_outfile_install_signal_cleanup(void);

/* Create the temporary file for path (mode 0666 & ~umask). */
bool		gen_outfile_open(gen_outfile *f, const char *path);

/* Write all of data, retrying short writes and EINTR. */
bool		gen_outfile_write(gen_outfile *f, const char *data, size_t len);

/* fsync, close and rename over the target; f->fd is closed afterwards. */
bool		gen_outfile_commit(gen_outfile *f);

/* Close and remove the temporary file, if any.  Keeps f->err. */
void		gen_outfile_abort(gen_outfile *f);

#endif
