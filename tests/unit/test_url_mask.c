/*
 * test_url_mask.c - passwords never reach the loader's messages.
 */
#include <string.h>

#include "unit.h"
#include "url_mask.h"

static const char *
mask(const char *conninfo)
{
	static char out[512];

	ld_mask_conninfo(conninfo, out, sizeof(out));
	return out;
}

static const char *
scrub(const char *conninfo, const char *msg)
{
	static char out[512];

	strcpy(out, msg);
	ld_scrub_message(conninfo, out, sizeof(out));
	return out;
}

TEST(uri_forms)
{
	CHECK_STR(mask("postgresql://u:secret@h:5432/db"), "postgresql://u:***@h:5432/db");
	CHECK_STR(mask("postgres://u:secret@h/db?sslmode=disable"), "postgres://u:***@h/db?sslmode=disable");
	CHECK_STR(mask("postgres://u@h/db"), "postgres://u@h/db");
	CHECK_STR(mask("postgres://h:5432/db"), "postgres://h:5432/db");
	CHECK_STR(mask("postgres://u:@h/db"), "postgres://u:@h/db");
	CHECK_STR(mask("postgres://u:p%40ss@h1:1,h2:2/db"), "postgres://u:***@h1:1,h2:2/db");
	CHECK_STR(mask("postgres://u@h/db?password=secret&sslmode=require"),
			  "postgres://u@h/db?password=***&sslmode=require");
	CHECK_STR(mask("postgres://u:a@h/db?application_name=x&password=b"),
			  "postgres://u:***@h/db?application_name=x&password=***");
	/* an '@' after the first '/' is not user info */
	CHECK_STR(mask("postgres://h/db?x=a:b@c"), "postgres://h/db?x=a:b@c");
}

TEST(keyword_forms)
{
	CHECK_STR(mask("host=h password=secret dbname=db"), "host=h password=*** dbname=db");
	CHECK_STR(mask("host=h password = 'two words' dbname=db"), "host=h password = '***' dbname=db");
	CHECK_STR(mask("password='it\\'s' host=h"), "password='***' host=h");
	CHECK_STR(mask("host=h dbname=db"), "host=h dbname=db");
	CHECK_STR(mask("passwordx=1 password=2"), "passwordx=1 password=***");
}

TEST(scrubbing)
{
	const char *url = "postgresql://u:p%zzword@[::1/db";

	/* libpq quotes the whole URI or the bad token in some messages */
	CHECK_STR(scrub(url, "end of string reached when looking for matching \"]\" in IPv6 host address in URI: \"postgresql://u:p%zzword@[::1/db\""),
			  "end of string reached when looking for matching \"]\" in IPv6 host address in URI: \"postgresql://u:***@[::1/db\"");
	CHECK_STR(scrub(url, "invalid percent-encoded token: \"p%zzword\""),
			  "invalid percent-encoded token: \"***\"");
	/* short passwords are replaced only when quoted */
	CHECK_STR(scrub("postgres://u:ab@h/db", "a \"ab\" about"), "a \"***\" about");
	CHECK_STR(scrub("postgres://u@h/db", "nothing \"to\" hide"), "nothing \"to\" hide");
}

int
main(void)
{
	RUN(uri_forms);
	RUN(keyword_forms);
	RUN(scrubbing);
	return unit_summary();
}
