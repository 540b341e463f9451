/*
 * Unit tests: JIT code named from a jitdump file that the process maps, as
 * LLVM's perf listener does.  The file is written here byte by byte in
 * perf's jitdump layout.
 */
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "jit_code.h"

static void
put(FILE *f, const void *bytes, size_t len)
{
	fwrite(bytes, 1, len, f);
}

static void
put_u32(FILE *f, uint32_t v)
{
	put(f, &v, 4);
}

static void
put_u64(FILE *f, uint64_t v)
{
	put(f, &v, 8);
}

static void
put_header(FILE *f)
{
	put_u32(f, 0x4A695444);		/* magic */
	put_u32(f, 1);				/* version */
	put_u32(f, 40);				/* header size */
	put_u32(f, 62);				/* EM_X86_64 */
	put_u32(f, 0);
	put_u32(f, (uint32_t) getpid());
	put_u64(f, 0);				/* timestamp */
	put_u64(f, 0);				/* flags */
}

/* A JIT_CODE_LOAD record with code_size bytes of (fake) code after the name. */
static void
put_code_load(FILE *f, uint64_t addr, uint64_t size, const char *name, size_t code_bytes)
{
	size_t		name_len = strlen(name) + 1;

	put_u32(f, 0);
	put_u32(f, (uint32_t) (16 + 40 + name_len + code_bytes));
	put_u64(f, 0);
	put_u32(f, (uint32_t) getpid());
	put_u32(f, (uint32_t) getpid());
	put_u64(f, addr);			/* vma */
	put_u64(f, addr);			/* code_addr */
	put_u64(f, size);
	put_u64(f, 7);				/* code_index */
	put(f, name, name_len);
	for (size_t i = 0; i < code_bytes; i++)
		fputc(0xc3, f);
}

/* Another record kind (JIT_CODE_DEBUG_INFO, 2): skipped by its size. */
static void
put_other(FILE *f)
{
	put_u32(f, 2);
	put_u32(f, 16 + 24);
	put_u64(f, 0);
	put_u64(f, 0x1000);
	put_u64(f, 0);
	put_u64(f, 0);
}

static char dir[] = "/tmp/jitcode-XXXXXX";
static char path[256];

/* The file, mapped like LLVM's marker so /proc/self/maps shows it. */
static void *
map_marker(size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	void	   *mapped;

	fseek(f, 0, SEEK_END);
	*len = (size_t) ftell(f);
	mapped = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fileno(f), 0);
	fclose(f);
	return mapped;
}

/* A new jitdump file of this process with its header; records follow. */
static FILE *
new_dump(void)
{
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/jit-%d.dump", dir, (int) getpid());
	f = fopen(path, "wb");
	put_header(f);
	return f;
}

TEST(no_file_no_names)
{
	tp_jit_code *jit = tp_jit_code_new();

	tp_jit_code_refresh(jit);
	CHECK(tp_jit_code_lookup(jit, 0x7f0000001000) == NULL);
	tp_jit_code_free(jit);
}

TEST(code_loads_are_named_and_the_latest_load_wins)
{
	tp_jit_code *jit = tp_jit_code_new();
	FILE	   *f;
	size_t		len;
	void	   *marker;

	f = new_dump();
	put_code_load(f, 0x7f0000001000, 0x100, "evalexpr_0_0", 3);
	put_other(f);
	put_code_load(f, 0x7f0000002000, 0x80, "deform_1_4", 0);
	/* a record whose header promises more than is written yet */
	put_u32(f, 0);
	put_u32(f, 200);
	put_u64(f, 0);
	fclose(f);
	marker = map_marker(&len);
	CHECK(marker != MAP_FAILED);

	CHECK(tp_jit_code_refresh(jit) == 2);
	CHECK(tp_jit_code_refresh(jit) == 0);
	CHECK_STR(tp_jit_code_lookup(jit, 0x7f0000001000), "evalexpr");
	CHECK_STR(tp_jit_code_lookup(jit, 0x7f00000010ff), "evalexpr");
	CHECK(tp_jit_code_lookup(jit, 0x7f0000001100) == NULL);
	CHECK_STR(tp_jit_code_lookup(jit, 0x7f0000002040), "deform");
	CHECK(tp_jit_code_lookup(jit, 0x7f0000000fff) == NULL);

	/* The writer finishes nothing more; a new file state: rewrite the tail. */
	f = fopen(path, "r+b");
	fseek(f, 0, SEEK_END);
	fseek(f, ftell(f) - 16, SEEK_SET);
	put_code_load(f, 0x7f0000001000, 0x40, "evalexpr_9_2", 0);	/* the address reused */
	put_code_load(f, 0x7f0000003000, 0x10, "llvm.fn", 0);
	fclose(f);
	CHECK(tp_jit_code_refresh(jit) == 2);
	CHECK_STR(tp_jit_code_lookup(jit, 0x7f0000001000), "evalexpr");
	CHECK_STR(tp_jit_code_lookup(jit, 0x7f0000001080), "evalexpr");	/* the older, longer load */
	CHECK_STR(tp_jit_code_lookup(jit, 0x7f0000003000), "llvm.fn");
	munmap(marker, len);
	tp_jit_code_free(jit);
}

TEST(names_lose_only_their_numbering)
{
	tp_jit_code *jit = tp_jit_code_new();
	FILE	   *f;
	size_t		len;
	void	   *marker;

	f = new_dump();
	put_code_load(f, 0x1000, 0x10, "evalexpr_12_345", 0);
	put_code_load(f, 0x2000, 0x10, "x_1", 0);
	put_code_load(f, 0x3000, 0x10, "_7", 0);
	put_code_load(f, 0x4000, 0x10, "plain", 0);
	put_code_load(f, 0x5000, 0x10, "a_name_that_is_far_too_long_to_keep_whole_3", 0);
	fclose(f);
	marker = map_marker(&len);
	tp_jit_code_refresh(jit);
	CHECK_STR(tp_jit_code_lookup(jit, 0x1000), "evalexpr");
	CHECK_STR(tp_jit_code_lookup(jit, 0x2000), "x");
	CHECK_STR(tp_jit_code_lookup(jit, 0x3000), "_7");
	CHECK_STR(tp_jit_code_lookup(jit, 0x4000), "plain");
	CHECK(strlen(tp_jit_code_lookup(jit, 0x5000)) < 32);
	munmap(marker, len);
	tp_jit_code_free(jit);
}

TEST(a_file_that_is_not_a_jitdump_is_ignored)
{
	tp_jit_code *jit = tp_jit_code_new();
	FILE	   *f;
	size_t		len;
	void	   *marker;

	snprintf(path, sizeof(path), "%s/jit-%d.dump", dir, (int) getpid());
	f = fopen(path, "wb");
	for (int i = 0; i < 100; i++)
		fputc('x', f);
	fclose(f);
	marker = map_marker(&len);
	tp_jit_code_refresh(jit);
	tp_jit_code_refresh(jit);
	CHECK(tp_jit_code_lookup(jit, 0x7878787878787878) == NULL);
	munmap(marker, len);
	tp_jit_code_free(jit);
}

int
main(void)
{
	if (mkdtemp(dir) == NULL)
	{
		perror("mkdtemp");
		return 1;
	}
	RUN(no_file_no_names);
	RUN(code_loads_are_named_and_the_latest_load_wins);
	RUN(names_lose_only_their_numbering);
	RUN(a_file_that_is_not_a_jitdump_is_ignored);
	unlink(path);
	rmdir(dir);
	return unit_summary();
}
