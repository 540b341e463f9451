/*
 * sql_normalize.c - literal constants replaced by $n, one pass over the
 * text with PostgreSQL 15's token boundaries.
 *
 * Only boundaries matter here, so operators are read a character at a time
 * (a constant never starts inside one: the jumble's "-5" starts at a '-'
 * that is an operator of its own), and a statement that reached us was
 * parsed already: the lexer's error cases need no care beyond staying in
 * bounds, which a text cut short (an unterminated string) also needs.
 */
#include "sql_normalize.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

typedef enum token_kind
{
	TOKEN_END,
	TOKEN_LITERAL,				/* number, string, bit string, dollar quote */
	TOKEN_PARAM,				/* $n */
	TOKEN_MINUS,
	TOKEN_OTHER,
} token_kind;

typedef struct token
{
	token_kind	kind;
	size_t		start;
	size_t		end;
	int			param;			/* TOKEN_PARAM: n */
} token;

typedef struct scanner
{
	const char *s;
	size_t		len;
	size_t		pos;
	bool		standard_conforming_strings;
} scanner;

/* How a quoted string's body is read (scan.l's xq, xe and xb/xh states). */
typedef enum quoting
{
	QUOTES_DOUBLED,				/* '' is a quote: '...', U&'...' */
	QUOTES_ESCAPED,				/* '' and backslash escapes: E'...' */
	QUOTES_PLAIN,				/* the first quote ends it: B'...', X'...' */
} quoting;

static char
at(const scanner *sc, size_t i)
{
	return i < sc->len ? sc->s[i] : '\0';
}

/* Character classes, one lookup a byte on the common path. */
enum
{
	CHAR_DIGIT = 1,
	CHAR_IDENT_START = 2,		/* scan.l's ident_start; dollar-quote tags start alike */
	CHAR_IDENT_CONT = 4,		/* ident_cont: ident_start, digits and '$' */
	CHAR_BLANK = 8,				/* space, tab, form feed, newline */
};

#define WORD_START (CHAR_IDENT_START | CHAR_IDENT_CONT)

static const unsigned char char_class[256] = {
	[' '] = CHAR_BLANK,['\t'] = CHAR_BLANK,['\f'] = CHAR_BLANK,
	['\n'] = CHAR_BLANK,['\r'] = CHAR_BLANK,
	['0' ... '9'] = CHAR_DIGIT | CHAR_IDENT_CONT,
	['a' ... 'z'] = WORD_START,['A' ... 'Z'] = WORD_START,['_'] = WORD_START,
	[0x80 ... 0xff] = WORD_START,
	['$'] = CHAR_IDENT_CONT,
};

static bool
has_class(char c, int class)
{
	return (char_class[(unsigned char) c] & class) != 0;
}

static bool
is_digit(char c)
{
	return has_class(c, CHAR_DIGIT);
}

static bool
is_ident_start(char c)
{
	return has_class(c, CHAR_IDENT_START);
}

static bool
is_horizontal_space(char c)
{
	return c == ' ' || c == '\t' || c == '\f';
}

static bool
is_newline(char c)
{
	return c == '\n' || c == '\r';
}

static size_t
line_comment_end(const scanner *sc, size_t p)
{
	while (p < sc->len && !is_newline(sc->s[p]))
		p++;
	return p;
}

size_t
tp_sql_comment_len(const char *sql, size_t len)
{
	int			depth = 0;
	size_t		p = 0;

	while (p + 1 < len)
	{
		if (sql[p] == '/' && sql[p + 1] == '*')
		{
			depth++;
			p += 2;
		}
		else if (sql[p] == '*' && sql[p + 1] == '/')
		{
			p += 2;
			if (--depth == 0)
				return p;
		}
		else
			p++;
	}
	return 0;
}

/* An unterminated comment (a text cut short) runs to the end. */
static size_t
block_comment_end(const scanner *sc, size_t p)
{
	size_t		n = tp_sql_comment_len(sc->s + p, sc->len - p);

	return n > 0 ? p + n : sc->len;
}

/*
 * Blanks and words are most of a statement: the functions that read them
 * are inlined into next_token (called, they cost a third more a token).
 */
static inline __attribute__((always_inline)) void
skip_blanks(scanner *sc)
{
	size_t		p = sc->pos;

	for (;;)
	{
		while (p < sc->len && has_class(sc->s[p], CHAR_BLANK))
			p++;
		if (p + 1 >= sc->len)
			break;
		if (sc->s[p] == '-' && sc->s[p + 1] == '-')
			p = line_comment_end(sc, p);
		else if (sc->s[p] == '/' && sc->s[p + 1] == '*')
			p = block_comment_end(sc, p);
		else
			break;
	}
	sc->pos = p;
}

/*
 * After a closing quote at p - 1: the position of the quote that continues
 * the string, or 0.  A string continues past blanks and -- comments that
 * hold a newline ('a'<newline>'b' is 'ab'); block comments do not count.
 */
static size_t
continuation_quote(const scanner *sc, size_t p)
{
	bool		newline = false;

	while (p < sc->len)
	{
		char		c = sc->s[p];

		if (is_horizontal_space(c))
			p++;
		else if (is_newline(c))
		{
			newline = true;
			p++;
		}
		else if (c == '-' && at(sc, p + 1) == '-')
			p = line_comment_end(sc, p);
		else
			break;
	}
	return newline && at(sc, p) == '\'' ? p : 0;
}

/* The end of a quoted string whose body starts at p; the text's end if unterminated. */
static size_t
string_end(const scanner *sc, size_t p, quoting how)
{
	for (;;)
	{
		size_t		next;

		while (p < sc->len)
		{
			char		c = sc->s[p];

			if (c == '\\' && how == QUOTES_ESCAPED)
				p += 2;
			else if (c == '\'' && how != QUOTES_PLAIN && at(sc, p + 1) == '\'')
				p += 2;
			else if (c == '\'')
				break;
			else
				p++;
		}
		if (p >= sc->len)
			return sc->len;
		next = continuation_quote(sc, p + 1);
		if (next == 0)
			return p + 1;
		p = next + 1;
	}
}

/* A quoted identifier: "" is a quote. */
static size_t
quoted_identifier_end(const scanner *sc, size_t p)
{
	while (p < sc->len)
	{
		if (sc->s[p] == '"' && at(sc, p + 1) == '"')
			p += 2;
		else if (sc->s[p] == '"')
			return p + 1;
		else
			p++;
	}
	return sc->len;
}

/* integer, decimal or real; "1..2" is 1 and "..". */
static size_t
number_end(const scanner *sc, size_t p)
{
	size_t		q;

	while (is_digit(at(sc, p)))
		p++;
	if (at(sc, p) == '.' && at(sc, p + 1) != '.')
		for (p++; is_digit(at(sc, p)); p++)
			;
	if (at(sc, p) != 'e' && at(sc, p) != 'E')
		return p;
	q = p + 1;
	if (at(sc, q) == '+' || at(sc, q) == '-')
		q++;
	if (!is_digit(at(sc, q)))
		return p;
	while (is_digit(at(sc, q)))
		q++;
	return q;
}

/* $n, or a dollar-quoted string $tag$...$tag$, or a lone '$'. */
static token
dollar_token(const scanner *sc, size_t p)
{
	token		t = {TOKEN_OTHER, p, p + 1, 0};
	size_t		tag_end = p + 1;

	if (is_digit(at(sc, p + 1)))
	{
		long		n = 0;

		for (t.end = p + 1; is_digit(at(sc, t.end)); t.end++)
			if (n < INT_MAX / 2)
				n = n * 10 + (sc->s[t.end] - '0');
		t.kind = TOKEN_PARAM;
		t.param = n < INT_MAX / 2 ? (int) n : INT_MAX / 2;
		return t;
	}
	if (is_ident_start(at(sc, tag_end)))
		while (is_ident_start(at(sc, tag_end)) || is_digit(at(sc, tag_end)))
			tag_end++;
	if (at(sc, tag_end) == '$')
	{
		size_t		delim_len = tag_end + 1 - p;
		const char *body = sc->s + tag_end + 1;
		const char *close = memmem(body, sc->len - (tag_end + 1), sc->s + p, delim_len);

		t.kind = TOKEN_LITERAL;
		t.end = close ? (size_t) (close - sc->s) + delim_len : sc->len;
	}
	return t;
}

/* A token starting with a letter: a prefixed string, or a word. */
static inline __attribute__((always_inline)) token
word_token(const scanner *sc, size_t p)
{
	token		t = {TOKEN_LITERAL, p, p, 0};
	char		c = sc->s[p] | 0x20;	/* ASCII lower case */

	if (at(sc, p + 1) == '\'')
	{
		if (c == 'e')
		{
			t.end = string_end(sc, p + 2, QUOTES_ESCAPED);
			return t;
		}
		if (c == 'b' || c == 'x')
		{
			t.end = string_end(sc, p + 2, QUOTES_PLAIN);
			return t;
		}
		/* N'...': the keyword NCHAR here, the string is the next token. */
	}
	if (c == 'u' && at(sc, p + 1) == '&' && at(sc, p + 2) == '\'')
	{
		t.end = string_end(sc, p + 3, QUOTES_DOUBLED);
		return t;
	}
	t.kind = TOKEN_OTHER;
	if (c == 'u' && at(sc, p + 1) == '&' && at(sc, p + 2) == '"')
	{
		t.end = quoted_identifier_end(sc, p + 3);
		return t;
	}
	if (c == 'n' && at(sc, p + 1) == '\'')
	{
		t.end = p + 1;
		return t;
	}
	for (t.end = p + 1; t.end < sc->len && has_class(sc->s[t.end], CHAR_IDENT_CONT); t.end++)
		;
	return t;
}

static inline __attribute__((always_inline)) token
next_token(scanner *sc)
{
	token		t = {TOKEN_END, sc->len, sc->len, 0};
	size_t		p;
	char		c;

	skip_blanks(sc);
	p = sc->pos;
	if (p >= sc->len)
		return t;
	c = sc->s[p];
	t.start = p;
	t.end = p + 1;
	t.kind = TOKEN_OTHER;
	if (is_ident_start(c))
		t = word_token(sc, p);
	else if (c == '\'')
	{
		t.kind = TOKEN_LITERAL;
		t.end = string_end(sc, p + 1, sc->standard_conforming_strings ?
						   QUOTES_DOUBLED : QUOTES_ESCAPED);
	}
	else if (c == '"')
		t.end = quoted_identifier_end(sc, p + 1);
	else if (c == '$')
		t = dollar_token(sc, p);
	else if (is_digit(c) || (c == '.' && is_digit(at(sc, p + 1))))
	{
		t.kind = TOKEN_LITERAL;
		t.end = number_end(sc, c == '.' ? p + 1 : p);
	}
	else if (c == '-')
		t.kind = TOKEN_MINUS;
	else if (c == '.' && at(sc, p + 1) == '.')
		t.end = p + 2;			/* "..": ".2" after it is no number */
	sc->pos = t.end;
	return t;
}

size_t
tp_sql_first_token(const char *sql, size_t len)
{
	scanner		sc = {sql, len, 0, true};

	skip_blanks(&sc);
	return sc.pos;
}

/* The statement's own highest $n, after which constants are numbered. */
static int
highest_param(const char *sql, size_t len, bool standard_conforming_strings)
{
	scanner		sc = {sql, len, 0, standard_conforming_strings};
	int			highest = 0;
	token		t;

	if (memchr(sql, '$', len) == NULL)
		return 0;
	while ((t = next_token(&sc)).kind != TOKEN_END)
		if (t.kind == TOKEN_PARAM && t.param > highest)
			highest = t.param;
	return highest;
}

typedef struct output
{
	char	   *buf;
	size_t		cap;
	size_t		len;
} output;

/* false once the output is full (what fit was written). */
static bool
put(output *out, const char *p, size_t n)
{
	size_t		room = out->cap - out->len;

	if (n > room)
	{
		memcpy(out->buf + out->len, p, room);
		out->len = out->cap;
		return false;
	}
	memcpy(out->buf + out->len, p, n);
	out->len += n;
	return true;
}

static bool
put_param(output *out, int n)
{
	char		digits[16];
	size_t		i = sizeof(digits);

	do
		digits[--i] = (char) ('0' + n % 10);
	while ((n /= 10) > 0);
	digits[--i] = '$';
	return put(out, digits + i, sizeof(digits) - i);
}

size_t
tp_sql_normalize(const char *sql, size_t len, bool standard_conforming_strings,
				 const tp_sql_constants *constants, char *out, size_t cap)
{
	scanner		sc = {sql, len, 0, standard_conforming_strings};
	output		o = {out, cap, 0};
	int			param = constants ? constants->highest_param :
		highest_param(sql, len, standard_conforming_strings);
	int			listed = 0;
	size_t		copied = SIZE_MAX;	/* what comes before the first token is dropped */
	size_t		end_of_tokens = 0;
	size_t		minus = 0;
	bool		minus_pending = false;	/* a listed '-': the constant starts at its sign */
	int			opened = 0;		/* '(' after that sign */
	int			closing = 0;	/* ')' still part of the constant just replaced */
	token		t;

	while ((t = next_token(&sc)).kind != TOKEN_END)
	{
		size_t		start = t.start;

		if (copied == SIZE_MAX)
			copied = t.start;
		end_of_tokens = t.end;
		if (constants != NULL)
		{
			bool		is_listed;

			if (closing > 0)
			{
				if (t.kind == TOKEN_OTHER && sql[t.start] == ')')
				{
					closing--;
					copied = t.end;
					continue;
				}
				closing = 0;
			}
			while (listed < constants->count && (size_t) constants->offsets[listed] < t.start)
				listed++;
			is_listed = listed < constants->count &&
				(size_t) constants->offsets[listed] == t.start;
			if (is_listed && t.kind == TOKEN_MINUS)
			{
				minus = t.start;
				minus_pending = true;
				opened = 0;
				continue;
			}
			/*
			 * The grammar folds a minus into the number it negates through
			 * parentheses and more minus signs ("-(5)", "-(-(5))"): one
			 * constant at the first sign.  It runs through the number and
			 * its closing parentheses, or the number would be shown.
			 */
			if (minus_pending && !is_listed &&
				(t.kind == TOKEN_MINUS || (t.kind == TOKEN_OTHER && sql[t.start] == '(')))
			{
				opened += t.kind == TOKEN_OTHER;
				continue;
			}
			if (!is_listed && !minus_pending)
				continue;
		}
		else if (t.kind != TOKEN_LITERAL)
			continue;
		if (minus_pending)
			start = minus;
		minus_pending = false;
		closing = opened;
		opened = 0;
		if (!put(&o, sql + copied, start - copied) || !put_param(&o, ++param))
			return o.len;
		copied = t.end;
	}
	if (end_of_tokens > copied)
		put(&o, sql + copied, end_of_tokens - copied);
	return o.len;
}
