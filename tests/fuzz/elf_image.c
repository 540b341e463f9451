/*
 * elf_image.c - libFuzzer target for the sampler's ELF reader
 * (elf_symbols.h: tp_elf_check, tp_elf_build_id, tp_elf_image_read,
 * tp_elf_add_unwind_functions, tp_elf_find).  Backends run it on the
 * server's shared objects and on debug files under
 * /usr/lib/debug/.build-id/, files the process does not control: a
 * truncated or corrupt one must give fewer symbols, never a crash.
 *
 * The input is the image, in a buffer exactly as long (ASan sees a read
 * past its end); when its size is odd it is also read as its own debug
 * file.  Invariants: no crash, no read out of bounds; nothing is read
 * from what tp_elf_check refuses; a build id is 2 to 128 lowercase hex
 * digits, the same as the image's; functions are sorted by address, one
 * per address until the unwind table adds its own, each name a string
 * of the image's names (unwind ones starting with the prefix), reach
 * never below an entry's end nor the one before; tp_elf_find returns a
 * function covering the address, the one starting last, and finds one
 * whenever one covers it.
 */
#include <stdbool.h>

#include "elf_symbols.h"
#include "fuzz.h"

#define PREFIX "fuzz.so"
#define MAX_CHECKED 512			/* functions brute-force lookups are checked for */

static uint64_t
end_of(const tp_elf_func *f)
{
	return f->size > UINT64_MAX - f->addr ? UINT64_MAX : f->addr + f->size;
}

static bool
covers(const tp_elf_func *f, uint64_t vaddr)
{
	return f->addr <= vaddr && vaddr < end_of(f);
}

static void
check_lookup(const tp_elf_image *image, uint64_t vaddr)
{
	const tp_elf_func *found = tp_elf_find(image, vaddr);
	const tp_elf_func *best = NULL;

	if (found != NULL)
	{
		FUZZ_CHECK(found >= image->funcs && found < image->funcs + image->nfuncs);
		FUZZ_CHECK(found->addr <= vaddr && vaddr - found->addr < found->size);
	}
	if (image->nfuncs > MAX_CHECKED)
		return;
	for (size_t i = 0; i < image->nfuncs; i++)
		if (covers(&image->funcs[i], vaddr) && (best == NULL || image->funcs[i].addr >= best->addr))
			best = &image->funcs[i];
	if (best != NULL)
		FUZZ_CHECK(found != NULL && found->addr == best->addr);
}

static void
check_image(const tp_elf_image *image, bool unwind_added)
{
	uint64_t	reach = 0;

	for (size_t i = 0; i < image->nfuncs; i++)
	{
		const tp_elf_func *f = &image->funcs[i];
		const char *name = image->names + f->name;

		if (i > 0)
		{
			if (unwind_added)
				FUZZ_CHECK(image->funcs[i - 1].addr <= f->addr);
			else
				FUZZ_CHECK(image->funcs[i - 1].addr < f->addr);
		}
		FUZZ_CHECK(f->size > 0);
		FUZZ_CHECK(strlen(name) > 0);	/* ASan: a string of names */
		if (f->synthetic)
			FUZZ_CHECK(strncmp(name, PREFIX "+0x", strlen(PREFIX "+0x")) == 0);
		FUZZ_CHECK(f->reach >= end_of(f) && f->reach >= reach);
		reach = f->reach;
	}
	for (size_t i = 0; i < image->nloads; i++)
		(void) image->loads[i].filesz;	/* ASan: nloads entries */
	for (size_t i = 0; i < image->nfuncs; i++)
	{
		const tp_elf_func *f = &image->funcs[i];

		check_lookup(image, f->addr);
		check_lookup(image, f->addr + f->size - 1);
		check_lookup(image, end_of(f));
		if (f->addr > 0)
			check_lookup(image, f->addr - 1);
		if (i >= MAX_CHECKED)
			break;
	}
	check_lookup(image, 0);
	check_lookup(image, UINT64_MAX);
}

static void
check_build_id(const char *id)
{
	size_t		len;

	if (id == NULL)
		return;
	len = strlen(id);
	FUZZ_CHECK(len >= 2 && len <= 128 && len % 2 == 0);
	FUZZ_CHECK(strspn(id, "0123456789abcdef") == len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool		valid = tp_elf_check(data, size);
	char	   *id = tp_elf_build_id(data, size);
	tp_elf_image image;
	size_t		before;

	check_build_id(id);
	(void) tp_elf_has_symtab(data, size);
	if (!valid)
	{
		FUZZ_CHECK(id == NULL);
		FUZZ_CHECK(!tp_elf_image_read(data, size, NULL, 0, &image));
		FUZZ_CHECK(image.funcs == NULL && image.nfuncs == 0 && image.build_id == NULL);
		return 0;
	}
	if (tp_elf_image_read(data, size, size % 2 ? data : NULL, size, &image))
	{
		FUZZ_CHECK((id == NULL) == (image.build_id == NULL));
		FUZZ_CHECK(id == NULL || strcmp(id, image.build_id) == 0);
		check_image(&image, false);
		before = image.nfuncs;
		if (tp_elf_add_unwind_functions(data, size, PREFIX, &image))
		{
			FUZZ_CHECK(image.nfuncs >= before);
			check_image(&image, true);
		}
		for (size_t i = 0; i < image.nloads; i++)
		{
			uintptr_t	bias;

			(void) tp_elf_load_bias(&image, 0x7f0000000000, image.loads[i].offset, &bias);
		}
		tp_elf_image_free(&image);
	}
	free(id);
	return 0;
}
