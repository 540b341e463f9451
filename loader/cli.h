/*
 * cli.h - the loader's command line and exit codes.
 */
#ifndef LD_CLI_H
#define LD_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define LD_EXIT_OK 0
#define LD_EXIT_INTERNAL 1		/* out of memory and the like */
#define LD_EXIT_USAGE 2
#define LD_EXIT_INPUT 3
#define LD_EXIT_DATABASE 4
#define LD_EXIT_INTERRUPTED 130

#define LD_DEFAULT_TABLE "orders"
#define LD_MAX_IDENTIFIER 63	/* NAMEDATALEN - 1: longer names get truncated */
/* "schema"."name", every byte a doubled '"' at worst, and the NUL */
#define LD_MAX_QUOTED_TABLE (2 * (2 * LD_MAX_IDENTIFIER + 2) + 2)

typedef struct ld_options
{
	const char *conninfo;		/* POSTGRES_URL */
	const char *file;
	const char *table;			/* as given, for messages */
	char		schema[LD_MAX_IDENTIFIER + 1];	/* empty: none given */
	char		name[LD_MAX_IDENTIFIER + 1];
	char		qtable[LD_MAX_QUOTED_TABLE];	/* quoted for SQL */
	uint64_t	batch_size;		/* 0: one transaction */
	const char *profile_out;	/* --profile-out FILE, or NULL */
} ld_options;

typedef enum ld_cli_result
{
	LD_CLI_RUN,
	LD_CLI_HELP,				/* --help: print ld_cli_help(), exit 0 */
	LD_CLI_USAGE_ERROR,			/* err says what is wrong */
} ld_cli_result;

ld_cli_result ld_cli_parse(int argc, char **argv, ld_options *opt,
						   char *err, size_t errlen);

void		ld_cli_help(FILE *out);

#endif
