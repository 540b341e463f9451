/*
 * text.h - small string helpers the parsers of common/ share.
 */
#ifndef TP_TEXT_H
#define TP_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* A space or a tab: what key=value lists allow around their parts. */
bool		tp_is_blank(char c);

/* Copy [start, end) without leading and trailing blanks; malloc'd. */
char	   *tp_trimmed_copy(const char *start, const char *end);

/*
 * The environment variable name without leading and trailing white space
 * (space, \t, \n, \v, \f, \r: a value pasted with its newline), as the
 * OpenTelemetry Go SDK reads its variables (strings.TrimSpace); malloc'd,
 * NULL when unset, blank or out of memory.
 */
char	   *tp_getenv_trimmed(const char *name);

/*
 * Length of the valid UTF-8 sequence at s (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF; control characters are valid), or 0.
 * avail > 0 bytes are readable at s.
 */
size_t		tp_utf8_char_length(const unsigned char *s, size_t avail);

/* Whether the len bytes at s are valid UTF-8, as protobuf strings must be. */
bool		tp_utf8_is_valid(const char *s, size_t len);

/*
 * Make s one printable line in place: line breaks and tabs become blanks,
 * other control characters (and DEL) and bytes of no valid UTF-8 sequence
 * '?', so that text from the environment or the input cannot forge log
 * lines nor make a message's conversion fail.
 */
void		tp_make_printable(char *s);

/* Value of a hex digit of either case, or -1. */
int			tp_hex_digit(char c);

/*
 * url with its user info ("user:secret@") replaced by replacement: "***@"
 * for messages, "" for links meant to be shared; its query string and
 * fragment (tokens travel there too) left out.  Credentials never reach
 * logs, views or span attributes this way.
 */
void		tp_url_redact(const char *url, const char *replacement,
						  char *out, size_t outlen);

#endif
