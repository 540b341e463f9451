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

#include <stdbool.h>

/*
 * Copy conninfo into out with everything that may be a password replaced
 * by "***": in a URI (any "scheme://", any case) what follows the user
 * name up to the user info's last '@' (and what libpq reads as the
 * password), and the value of a query parameter or keyword whose name,
 * percent-decoded and case-folded, is password, passwd, pass, pwd or ends
 * in password/passwd.
 */
void		ld_mask_conninfo(const char *conninfo, char *out, size_t outlen);

/*
 * Rewrite msg (a NUL-terminated string in a buffer of msgsize bytes) so
 * that it reveals no password from conninfo: the whole conninfo is
 * replaced by its masked form, a double-quoted token that shows part of a
 * password (libpq quotes the pieces of a misread URI) by "***", and any
 * other occurrence of a password of 4 or more bytes by ***.
 */
void		ld_scrub_message(const char *conninfo, char *msg, size_t msgsize);

/*
 * Does text (e.g. what PQdb() or PQhost() made of conninfo) show part of
 * a password from conninfo?  Then it must not go into a span.
 */
bool		ld_conninfo_reveals(const char *conninfo, const char *text);

#endif
