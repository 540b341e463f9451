/*
 * test_url_mask.c - passwords never reach the loader's messages.
 */
#include <stdio.h>
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

/*
 * Past 16 secret pieces, libpq still takes the last password: it was
 * shown.  Now such a string counts as secret whole.
 */
TEST(many_passwords_hide_the_last_too)
{
	char		conninfo[1024] = "host=h dbname=db";
	char		msg[512] = "password authentication failed: REALSECRET99";

	for (int i = 1; i <= 20; i++)
		snprintf(conninfo + strlen(conninfo), sizeof(conninfo) - strlen(conninfo), " password=decoy%d", i);
	strcat(conninfo, " password=REALSECRET99 sslmode=disable");
	CHECK_STR(mask(conninfo), "(a connection string of more than 16 secret values)");
	CHECK(strstr(scrub(conninfo, msg), "REALSECRET99") == NULL);
	CHECK(ld_conninfo_reveals(conninfo, "h"));
	/* 16 are masked one by one */
	strcpy(conninfo, "host=h");
	for (int i = 1; i <= 16; i++)
		snprintf(conninfo + strlen(conninfo), sizeof(conninfo) - strlen(conninfo), " password=p%d", i);
	CHECK(strncmp(mask(conninfo), "host=h password=*** password=***", 32) == 0);
	CHECK(strstr(mask(conninfo), "p16") == NULL);
	CHECK(!ld_conninfo_reveals(conninfo, "h"));
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

/* A URI given as a keyword's value: libpq takes it as a database name and quotes it. */
TEST(uri_inside_a_keyword_value)
{
	const char *kv = "host=h user=u dbname='postgres://u:PwG7secret@h/app'";

	CHECK_STR(mask(kv), "host=h user=u dbname='postgres://u:***@h/app'");
	CHECK_STR(mask("dbname=postgres://u:PwG7secret@h/app?password=Pw2x host=h"),
			  "dbname=postgres://u:***@h/app?password=*** host=h");
	/* escapes would shift the pieces: the whole value goes */
	CHECK_STR(mask("dbname='postgres://u:Pw\\G7@h/app' host=h"), "dbname='***' host=h");
	CHECK_STR(scrub(kv, "FATAL:  database \"postgres://u:PwG7secret@h/app\" does not exist"),
			  "FATAL:  database \"***\" does not exist");
	CHECK(ld_conninfo_reveals(kv, "postgres://u:PwG7secret@h/app"));
	CHECK(!ld_conninfo_reveals(kv, "app"));
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

/* Passwords libpq does not read as passwords are hidden all the same. */
TEST(misread_passwords)
{
	/* a '/' ends libpq's user info: it reads host "app", port "Pa55" */
	CHECK_STR(mask("postgres://app:Pa55/word99@127.0.0.1:5432/app"),
			  "postgres://app:***@127.0.0.1:5432/app");
	/* the user info runs to the last '@' */
	CHECK_STR(mask("postgres://app:p@ssw0rdXYZ@127.0.0.1:5432/app"),
			  "postgres://app:***@127.0.0.1:5432/app");
	CHECK_STR(mask("postgres://app:a/b@c?d@h/db?x=e@f&password=g"),
			  "postgres://app:***@h/db?x=e@f&password=***");
	/* a '?' in a password, read by libpq as such */
	CHECK_STR(mask("postgres://u:p?a=b@h/db"), "postgres://u:***@h/db");
	/* libpq decodes parameter names: pass%77ord is password */
	CHECK_STR(mask("postgresql://app@127.0.0.1:5432/app?pass%77ord=TopSecret1"),
			  "postgresql://app@127.0.0.1:5432/app?pass%77ord=***");
	CHECK_STR(mask("postgres://h/db?sslmode=disable&PassWord=x&sslpassword=y&passwordx=z"),
			  "postgres://h/db?sslmode=disable&PassWord=***&sslpassword=***&passwordx=z");
	/* libpq takes this for a database name, and would show it whole */
	CHECK_STR(mask("POSTGRES://app:UpperSecret@127.0.0.1:5432/app"),
			  "POSTGRES://app:***@127.0.0.1:5432/app");
	CHECK_STR(mask("PostgreSQL://app:UpperSecret@h/app"), "PostgreSQL://app:***@h/app");
	/* keyword forms libpq rejects, and so would echo */
	CHECK_STR(mask("host=h PASSWORD=Sekret99 dbname=app"), "host=h PASSWORD=*** dbname=app");
	CHECK_STR(mask("host=h passwd=Sekret99"), "host=h passwd=***");
	CHECK_STR(mask("host=h junk pass%77ord=Sekret99"), "host=h junk pass%77ord=***");
	CHECK_STR(mask("host=h pwd = 'Sek ret'"), "host=h pwd = '***'");
}

TEST(misread_pieces_in_messages)
{
	const char *slash = "postgres://app:Pa55/word99@127.0.0.1:5432/app";
	const char *at = "postgres://app:p@ssw0rdXYZ@127.0.0.1:5432/app";

	/* libpq's and the server's messages quote the pieces it misread */
	CHECK_STR(scrub(slash, "invalid integer value \"Pa55\" for connection option \"port\""),
			  "invalid integer value \"***\" for connection option \"port\"");
	CHECK_STR(scrub("postgres://app:Pa5/w@h/app", "invalid integer value \"Pa5\" for connection option \"port\""),
			  "invalid integer value \"***\" for connection option \"port\"");
	CHECK_STR(scrub(slash, "FATAL:  database \"word99@127.0.0.1:5432/app\" does not exist"),
			  "FATAL:  database \"***\" does not exist");
	CHECK_STR(scrub(at, "could not translate host name \"ssw0rdXYZ@127.0.0.1\" to address"),
			  "could not translate host name \"***\" to address");
	CHECK_STR(scrub("POSTGRES://app:UpperSecret@h/app",
					"FATAL:  database \"POSTGRES://app:UpperSecret@h/app\" does not exist"),
			  "FATAL:  database \"POSTGRES://app:***@h/app\" does not exist");
	/* quoted words that share nothing with the password stay */
	CHECK_STR(scrub(slash, "connection to server at \"127.0.0.1\", port 5432 failed"),
			  "connection to server at \"127.0.0.1\", port 5432 failed");

	/* what libpq made of the URL goes into spans only if it hides nothing */
	CHECK(ld_conninfo_reveals(slash, "word99@127.0.0.1:5432/app"));
	CHECK(ld_conninfo_reveals(slash, "Pa55"));
	CHECK(!ld_conninfo_reveals(slash, "app"));
	CHECK(ld_conninfo_reveals(at, "ssw0rdXYZ@127.0.0.1"));
	CHECK(ld_conninfo_reveals("POSTGRES://app:UpperSecret@h/app", "POSTGRES://app:UpperSecret@h/app"));
	CHECK(!ld_conninfo_reveals("postgres://app:secret@h:5432/app", "app"));
	CHECK(!ld_conninfo_reveals("postgres://app:secret@h:5432/app", "h"));
	CHECK(!ld_conninfo_reveals("postgres://app:secret@h:5432/app", "5432"));
	CHECK(!ld_conninfo_reveals("postgres://app@h/app", "app"));
}

int
main(void)
{
	RUN(uri_forms);
	RUN(many_passwords_hide_the_last_too);
	RUN(keyword_forms);
	RUN(uri_inside_a_keyword_value);
	RUN(scrubbing);
	RUN(misread_passwords);
	RUN(misread_pieces_in_messages);
	return unit_summary();
}
