/*
 * url_mask.h - keep database passwords out of messages.
 *
 * The loader shows the connection URL in connection errors, and libpq's own
 * messages about a malformed URL quote the URL (or a piece of it).  Both go
 * through here first.
 */
#ifndef LD_URL_MASK_H
#define LD_URL_MASK_H

#include <stddef.h>

/*
 * Copy conninfo into out with every password replaced by "***": the
 * password of a postgres:// or postgresql:// URI's user info, a password=
 * URI query parameter, or password=... in a keyword/value string.
 */
void		ld_mask_conninfo(const char *conninfo, char *out, size_t outlen);

/*
 * Rewrite msg (a NUL-terminated string in a buffer of msgsize bytes) so
 * that it reveals no password from conninfo: the whole conninfo is
 * replaced by its masked form, a password in double quotes by "***", and
 * any other occurrence of a password of 4 or more bytes by ***.
 */
void		ld_scrub_message(const char *conninfo, char *msg, size_t msgsize);

#endif
