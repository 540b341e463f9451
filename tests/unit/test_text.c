/* Unit tests: the string helpers of common/text.h. */
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "text.h"

TEST(utf8_validity)
{
	CHECK(tp_utf8_is_valid("", 0));
	CHECK(tp_utf8_is_valid("plain\t\x01", 7));	/* control characters are UTF-8 */
	CHECK(tp_utf8_is_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14));
	CHECK(tp_utf8_is_valid("\xf4\x8f\xbf\xbf", 4));	/* U+10FFFF */
	CHECK(!tp_utf8_is_valid("caf\xe9", 4));		/* Latin-1 */
	CHECK(!tp_utf8_is_valid("\xc0\xaf", 2));	/* overlong '/' */
	CHECK(!tp_utf8_is_valid("\xe0\x80\xaf", 3));	/* overlong, three bytes */
	CHECK(!tp_utf8_is_valid("\xed\xa0\x80", 3));	/* a surrogate */
	CHECK(!tp_utf8_is_valid("\xf4\x90\x80\x80", 4));	/* above U+10FFFF */
	CHECK(!tp_utf8_is_valid("\xe2\x82", 2));	/* cut short */
	CHECK(!tp_utf8_is_valid("\x80", 1));		/* a lone continuation */
}

TEST(printable_lines)
{
	char		s[] = "a\nb\tc\x1b[2J caf\xe9 \xc3\xa9";

	tp_make_printable(s);
	CHECK_STR(s, "a b c?[2J caf? \xc3\xa9");
}

TEST(urls_lose_credentials_and_queries)
{
	static const struct
	{
		const char *url;
		const char *replacement;
		const char *shown;
	}			cases[] = {
		{"http://user:pw@collector:4318/v1/traces", "***@", "http://***@collector:4318/v1/traces"},
		{"https://u:p@host/base/v1/traces?api_key=K3Y#frag", "***@", "https://***@host/base/v1/traces"},
		{"http://pyroscope:4040/?token=PT0K", "", "http://pyroscope:4040/"},
		/* An '@' past the authority is not user info. */
		{"http://host/p?mail=a@b", "", "http://host/p"},
		{"host:4317?x=1", "", "host:4317"},
		/* Without a scheme too: host:port is allowed for endpoints, with user info. */
		{"alice:s3cretpw@127.0.0.1:24040/base", "", "127.0.0.1:24040/base"},
		{"alice:pw@host:4317", "***@", "***@host:4317"},
		{"host:4317/a://b", "", "host:4317/a://b"},
	};
	char		out[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		tp_url_redact(cases[i].url, cases[i].replacement, out, sizeof(out));
		CHECK_STR(out, cases[i].shown);
	}
}

TEST(environment_values_are_trimmed)
{
	char	   *v;

	unsetenv("TP_TEST_TRIM");
	CHECK(tp_getenv_trimmed("TP_TEST_TRIM") == NULL);
	setenv("TP_TEST_TRIM", "", 1);
	CHECK(tp_getenv_trimmed("TP_TEST_TRIM") == NULL);
	setenv("TP_TEST_TRIM", " \t\n\v\f\r", 1);
	CHECK(tp_getenv_trimmed("TP_TEST_TRIM") == NULL);
	setenv("TP_TEST_TRIM", "\r\n a b\t\n", 1);
	CHECK_STR(v = tp_getenv_trimmed("TP_TEST_TRIM"), "a b");
	free(v);
	setenv("TP_TEST_TRIM", "x", 1);
	CHECK_STR(v = tp_getenv_trimmed("TP_TEST_TRIM"), "x");
	free(v);
	unsetenv("TP_TEST_TRIM");
	/* Lists keep their own rule: only blanks around their parts. */
	CHECK_STR(v = tp_trimmed_copy(" a\n", " a\n" + 3), "a\n");
	free(v);
}

int
main(void)
{
	RUN(utf8_validity);
	RUN(printable_lines);
	RUN(urls_lose_credentials_and_queries);
	RUN(environment_values_are_trimmed);
	return unit_summary();
}
