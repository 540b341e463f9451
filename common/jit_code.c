/*
 * jit_code.c - names for JIT-compiled code from the jitdump file (see
 * jit_code.h).  The format is perf's jitdump (tools/perf/Documentation/
 * jitdump-specification.txt): a header, then records that each start
 * with {id, total_size, timestamp}.
 */
#include "jit_code.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define JITDUMP_MAGIC 0x4A695444u	/* "JiTD" in the writer's byte order */
#define JITDUMP_HEADER_SIZE 40
#define RECORD_HEADER_SIZE 16
#define JIT_CODE_LOAD 0
#define CODE_LOAD_FIXED_SIZE (RECORD_HEADER_SIZE + 40)	/* pid, tid, vma, addr, size, index */

#define JIT_CODE_MAX 4096		/* older code is long freed */
#define JIT_NAME_MAX 32

typedef struct jit_function
{
	uintptr_t	start;
	uint64_t	size;
	char		name[JIT_NAME_MAX];
} jit_function;

struct tp_jit_code
{
	pid_t		pid;			/* the process the file belongs to */
	char		path[PATH_MAX]; /* empty until found */
	bool		unreadable;		/* not a jitdump we understand: give up */
	off_t		offset;			/* next record to read */
	jit_function functions[JIT_CODE_MAX];	/* a ring, in load order */
	size_t		count;
	size_t		next;
	size_t		loaded;			/* functions read in all */
};

tp_jit_code *
tp_jit_code_new(void)
{
	tp_jit_code *jit = calloc(1, sizeof(tp_jit_code));

	if (jit != NULL)
		jit->pid = getpid();
	return jit;
}

/* The jitdump file this process maps, "…/jit-<pid>.dump". */
static bool
find_dump_file(tp_jit_code *jit)
{
	char		suffix[32];
	char		line[PATH_MAX + 128];
	size_t		suffix_len;
	FILE	   *maps = fopen("/proc/self/maps", "re");

	if (maps == NULL)
		return false;
	snprintf(suffix, sizeof(suffix), "/jit-%d.dump", (int) jit->pid);
	suffix_len = strlen(suffix);
	while (fgets(line, sizeof(line), maps) != NULL)
	{
		char	   *path = strchr(line, '/');
		size_t		len;

		if (path == NULL)
			continue;
		len = strcspn(path, "\n");
		path[len] = '\0';
		if (len > suffix_len && len < sizeof(jit->path) &&
			strcmp(path + len - suffix_len, suffix) == 0)
		{
			memcpy(jit->path, path, len + 1);
			break;
		}
	}
	fclose(maps);
	return jit->path[0] != '\0';
}

/* "evalexpr_12_3" → "evalexpr": the numbers are per module and unbounded. */
static void
strip_numbering(char *name)
{
	size_t		len = strlen(name);

	for (;;)
	{
		size_t		end = len;

		while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9')
			end--;
		if (end == len || end < 2 || name[end - 1] != '_')
			break;
		len = end - 1;
		name[len] = '\0';
	}
}

static void
add_function(tp_jit_code *jit, uint64_t start, uint64_t size, const char *name, size_t name_len)
{
	jit_function *f = &jit->functions[jit->next];

	f->start = (uintptr_t) start;
	f->size = size;
	if (name_len >= sizeof(f->name))
		name_len = sizeof(f->name) - 1;
	memcpy(f->name, name, name_len);
	f->name[name_len] = '\0';
	strip_numbering(f->name);
	jit->next = (jit->next + 1) % JIT_CODE_MAX;
	jit->loaded++;
	if (jit->count < JIT_CODE_MAX)
		jit->count++;
}

/* Read whole records from jit->offset on; stop at one not yet complete. */
static void
read_records(tp_jit_code *jit, int fd, off_t file_size)
{
	unsigned char record[CODE_LOAD_FIXED_SIZE + JIT_NAME_MAX];

	while (file_size - jit->offset >= RECORD_HEADER_SIZE)
	{
		uint32_t	id;
		uint32_t	total_size;

		if (pread(fd, record, RECORD_HEADER_SIZE, jit->offset) != RECORD_HEADER_SIZE)
			return;
		memcpy(&id, record, 4);
		memcpy(&total_size, record + 4, 4);
		if (total_size < RECORD_HEADER_SIZE)
		{
			jit->unreadable = true;
			return;
		}
		if (file_size - jit->offset < total_size)
			return;				/* still being written */
		if (id == JIT_CODE_LOAD && total_size > CODE_LOAD_FIXED_SIZE)
		{
			size_t		want = total_size < sizeof(record) ? total_size : sizeof(record);
			uint64_t	start;
			uint64_t	size;
			size_t		name_len;

			if (pread(fd, record, want, jit->offset) != (ssize_t) want)
				return;
			memcpy(&start, record + RECORD_HEADER_SIZE + 16, 8);
			memcpy(&size, record + RECORD_HEADER_SIZE + 24, 8);
			name_len = strnlen((const char *) record + CODE_LOAD_FIXED_SIZE,
							   want - CODE_LOAD_FIXED_SIZE);
			add_function(jit, start, size, (const char *) record + CODE_LOAD_FIXED_SIZE, name_len);
		}
		jit->offset += total_size;
	}
}

size_t
tp_jit_code_refresh(tp_jit_code *jit)
{
	struct stat st;
	int			fd;
	size_t		loaded;

	if (jit->pid != getpid())
	{
		/* A forked child: its parent's code and file are not its own. */
		pid_t		pid = getpid();

		memset(jit, 0, sizeof(*jit));
		jit->pid = pid;
	}
	loaded = jit->loaded;
	if (jit->unreadable || (jit->path[0] == '\0' && !find_dump_file(jit)))
		return 0;
	fd = open(jit->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) != 0)
	{
		close(fd);
		return 0;
	}
	if (jit->offset == 0 && st.st_size >= JITDUMP_HEADER_SIZE)
	{
		uint32_t	header[3];	/* magic, version, header size */

		if (pread(fd, header, sizeof(header), 0) != sizeof(header) ||
			header[0] != JITDUMP_MAGIC || header[2] < JITDUMP_HEADER_SIZE)
			jit->unreadable = true;
		else
			jit->offset = header[2];
	}
	if (!jit->unreadable && jit->offset > 0)
		read_records(jit, fd, st.st_size);
	close(fd);
	return jit->loaded - loaded;
}

const char *
tp_jit_code_lookup(const tp_jit_code *jit, uintptr_t pc)
{
	for (size_t i = 1; i <= jit->count; i++)
	{
		const jit_function *f = &jit->functions[(jit->next + JIT_CODE_MAX - i) % JIT_CODE_MAX];

		if (pc >= f->start && pc - f->start < f->size)
			return f->name;
	}
	return NULL;
}

void
tp_jit_code_free(tp_jit_code *jit)
{
	free(jit);
}
