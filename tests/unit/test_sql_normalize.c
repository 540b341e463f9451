/* Unit tests: literal constants replaced by $n with PostgreSQL 15's token rules. */
#include "sql_normalize.h"
#include "unit.h"

static char result[512];

static const char *
normalized_cap(const char *sql, const tp_sql_constants *constants, size_t cap)
{
	size_t		n = tp_sql_normalize(sql, strlen(sql), true, constants, result, cap);

	result[n] = '\0';
	return result;
}

static const char *
normalized(const char *sql)
{
	return normalized_cap(sql, NULL, sizeof(result) - 1);
}

TEST(numbers_and_strings)
{
	CHECK_STR(normalized("SELECT abalance FROM pgbench_accounts WHERE aid = 12345;"),
			  "SELECT abalance FROM pgbench_accounts WHERE aid = $1;");
	CHECK_STR(normalized("SELECT 1.5, .5, 1., 1e10, 2.5E-3, 'x'"), "SELECT $1, $2, $3, $4, $5, $6");
	/* "1..2" is 1 and ".."; "1e" is 1 and a word */
	CHECK_STR(normalized("SELECT 1..2"), "SELECT $1..$2");
	CHECK_STR(normalized("SELECT 1e"), "SELECT $1e");
	/* digits inside words and parameters are not constants */
	CHECK_STR(normalized("SELECT t1.c2, a$1 FROM t1"), "SELECT t1.c2, a$1 FROM t1");
	/* a sign is an operator of its own */
	CHECK_STR(normalized("SELECT -5, 3-2"), "SELECT -$1, $2-$3");
}

TEST(string_forms)
{
	CHECK_STR(normalized("SELECT 'it''s', E'a\\'b', B'0101', X'1F', U&'d\\0061t'"),
			  "SELECT $1, $2, $3, $4, $5");
	/* N'...' is the keyword NCHAR, then a string */
	CHECK_STR(normalized("SELECT N'abc'"), "SELECT N$1");
	/* B'' and X'' end at their first quote: no '' escape */
	CHECK_STR(normalized("SELECT B'01''10'"), "SELECT $1$2");
	/* E'' takes \\ and \' as escapes */
	CHECK_STR(normalized("SELECT E'\\\\', 1"), "SELECT $1, $2");
	/* a quoted identifier is no constant, "" inside it neither */
	CHECK_STR(normalized("SELECT \"a 'b\"\"\" FROM \"t\"\"1\" WHERE x = 'y'"),
			  "SELECT \"a 'b\"\"\" FROM \"t\"\"1\" WHERE x = $1");
	CHECK_STR(normalized("SELECT U&\"d\\0061t\" FROM t WHERE u = 2"),
			  "SELECT U&\"d\\0061t\" FROM t WHERE u = $1");
}

TEST(continued_strings)
{
	/* 'a' <newline> 'b' is one string; on one line they are two tokens */
	CHECK_STR(normalized("SELECT 'a'\n  'b', 2"), "SELECT $1, $2");
	CHECK_STR(normalized("SELECT 'a' -- note\n'b'"), "SELECT $1");
	CHECK_STR(normalized("SELECT 'a' 'b'"), "SELECT $1 $2");
	CHECK_STR(normalized("SELECT 'a' /* c */\n'b'"), "SELECT $1 /* c */\n$2");
}

TEST(dollar_quotes_and_params)
{
	CHECK_STR(normalized("SELECT $$it's$$, $tag$ $$ 'x' $tag$, $1, 7"), "SELECT $2, $3, $1, $4");
	/* numbered after the statement's own highest parameter, wherever it is */
	CHECK_STR(normalized("SELECT 5 WHERE a = $12 AND b = $3"), "SELECT $13 WHERE a = $12 AND b = $3");
	/* a tag may not start with a digit, $1$ is a parameter and a '$' */
	CHECK_STR(normalized("SELECT $a1$x$a1$"), "SELECT $1");
	CHECK_STR(normalized("SELECT $ab$ $a$ $b$ $ab$"), "SELECT $1");
}

TEST(comments)
{
	CHECK_STR(normalized("SELECT /* 1 /* 2 */ 3 */ 4 -- 5\n, 6"), "SELECT /* 1 /* 2 */ 3 */ $1 -- 5\n, $2");
	/* quotes inside comments open nothing */
	CHECK_STR(normalized("SELECT 1 /* it's */ + 2"), "SELECT $1 /* it's */ + $2");
	/* text after the last token goes: a sqlcommenter comment with per-request ids */
	CHECK_STR(normalized("SELECT 1 /*traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'*/ "),
			  "SELECT $1");
	CHECK_STR(normalized("SELECT 1; -- trailing"), "SELECT $1;");
	/* so does text before the first token: a sqlcommenter comment put first */
	CHECK_STR(normalized("/*traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'*/ SELECT 1"),
			  "SELECT $1");
	CHECK_STR(normalized("/* a /* nested */ one */-- and a line\n  SELECT 'x' /* kept */ , 2"),
			  "SELECT $1 /* kept */ , $2");
	CHECK(tp_sql_first_token("/* a /* b */ */ SELECT", 22) == 16);
	CHECK(tp_sql_first_token("  SELECT", 8) == 2);
	CHECK(tp_sql_first_token("-- x", 4) == 4);
	/* a block comment's length runs through the comments nested in it */
	CHECK(tp_sql_comment_len("/* a /* b */ c */ SELECT", 24) == 17);
	CHECK(tp_sql_comment_len("/**/", 4) == 4);
	CHECK(tp_sql_comment_len("/*/ SELECT", 10) == 0);
	CHECK(tp_sql_comment_len("/* a /* b */ SELECT", 19) == 0);
	CHECK_STR(normalized("-- only a comment"), "");
	CHECK_STR(normalized(""), "");
}

TEST(standard_conforming_strings_off)
{
	const char *sql = "SELECT 'a\\'c', 2";
	size_t		n = tp_sql_normalize(sql, strlen(sql), false, NULL, result, sizeof(result) - 1);

	result[n] = '\0';
	CHECK_STR(result, "SELECT $1, $2");
	/* with it on, the backslash is a character and the quote ends the string */
	CHECK_STR(normalized(sql), "SELECT $1c$2");
}

TEST(unterminated_text_stays_in_bounds)
{
	CHECK_STR(normalized("SELECT 'abc"), "SELECT $1");
	CHECK_STR(normalized("SELECT E'abc\\"), "SELECT $1");
	CHECK_STR(normalized("SELECT $q$abc"), "SELECT $1");
	CHECK_STR(normalized("SELECT \"abc"), "SELECT \"abc");
	CHECK_STR(normalized("SELECT 1 /* open"), "SELECT $1");
	CHECK_STR(normalized("SELECT 'a'\n"), "SELECT $1");
}

TEST(jumble_constants)
{
	/* the jumble's "-5" starts at its sign; a typmod is no constant */
	const char *sql = "SELECT -5, 2::numeric(12,2), 'x'";
	int			offsets[] = {7, 11, 29};
	tp_sql_constants constants = {offsets, 3, 0};

	CHECK_STR(normalized_cap(sql, &constants, sizeof(result) - 1), "SELECT $1, $2::numeric(12,2), $3");
	/* true is a constant to the jumble, a keyword to the lexer */
	offsets[0] = 7;
	constants.count = 1;
	constants.highest_param = 2;
	CHECK_STR(normalized_cap("SELECT true, $1, $2", &constants, sizeof(result) - 1), "SELECT $3, $1, $2");
	/*
	 * The jumble folds a minus through parentheses into one constant at
	 * the sign ("-(5)", as pg_stat_statements records it): the constant
	 * runs to its closing parenthesis, the literal inside included.
	 */
	{
		int			folded[] = {7, 23, 36, 46, 61};
		tp_sql_constants negated = {folded, 5, 0};

		CHECK_STR(normalized_cap("SELECT -(123456) AS a, -((8)) AS c, - 7 AS b, -(-(5)) AS d, (-9) AS e",
								 &negated, sizeof(result) - 1),
				  "SELECT $1 AS a, $2 AS c, $3 AS b, $4 AS d, ($5) AS e");
	}
	/* none listed: the text as it is, comments around it dropped */
	constants.count = 0;
	CHECK_STR(normalized_cap("/* y */ SELECT 1 /* x */", &constants, sizeof(result) - 1), "SELECT 1");
	/* offsets count from the text's start, a leading comment included */
	offsets[0] = 15;
	constants.count = 1;
	constants.highest_param = 0;
	CHECK_STR(normalized_cap("/* y */ SELECT 7", &constants, sizeof(result) - 1), "SELECT $1");
}

TEST(output_is_cut_at_cap)
{
	char		out[8];
	const char *sql = "SELECT 123456 FROM t";

	memset(out, '#', sizeof(out));
	CHECK(tp_sql_normalize(sql, strlen(sql), true, NULL, out, 6) == 6);
	CHECK(memcmp(out, "SELECT##", 8) == 0);
	CHECK(tp_sql_normalize(sql, strlen(sql), true, NULL, out, 8) == 8);
	CHECK(memcmp(out, "SELECT $", 8) == 0);
	CHECK(tp_sql_normalize(sql, strlen(sql), true, NULL, out, 0) == 0);
	CHECK_STR(normalized_cap("SELECT 1, 2, 3", NULL, 11), "SELECT $1, ");
}

int
main(void)
{
	RUN(numbers_and_strings);
	RUN(string_forms);
	RUN(continued_strings);
	RUN(dollar_quotes_and_params);
	RUN(comments);
	RUN(standard_conforming_strings_off);
	RUN(unterminated_text_stays_in_bounds);
	RUN(jumble_constants);
	RUN(output_is_cut_at_cap);
	return unit_summary();
}
