/* elf_symbols.c - bounds-checked reading of ELF symbols, segments, notes. */
#include "elf_symbols.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if __SIZEOF_POINTER__ == 8
#define NATIVE_CLASS ELFCLASS64
#define SYM_TYPE(info) ELF64_ST_TYPE(info)
#define SYM_BIND(info) ELF64_ST_BIND(info)
#else
#define NATIVE_CLASS ELFCLASS32
#define SYM_TYPE(info) ELF32_ST_TYPE(info)
#define SYM_BIND(info) ELF32_ST_BIND(info)
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_DATA ELFDATA2LSB
#else
#define NATIVE_DATA ELFDATA2MSB
#endif

/* A size-less symbol (hand-written assembly) covers at most this much. */
#define SIZELESS_SPAN 4096

/* A symbol before names are copied: name points into a mapped image. */
typedef struct raw_func
{
	uint64_t	addr;
	uint64_t	size;
	const char *name;
	int			rank;			/* lower is the better name for the address */
} raw_func;

typedef struct raw_funcs
{
	raw_func   *items;
	size_t		count;
	size_t		capacity;
	bool		failed;			/* out of memory */
} raw_funcs;

static bool
in_bounds(size_t size, uint64_t offset, uint64_t len)
{
	return offset <= size && len <= size - offset;
}

/* Headers are copied out: offsets in a corrupt file need not be aligned. */
static bool
read_ehdr(const void *data, size_t size, ElfW(Ehdr) *ehdr)
{
	if (data == NULL || size < sizeof(*ehdr))
		return false;
	memcpy(ehdr, data, sizeof(*ehdr));
	return memcmp(ehdr->e_ident, ELFMAG, SELFMAG) == 0 &&
		ehdr->e_ident[EI_CLASS] == NATIVE_CLASS &&
		ehdr->e_ident[EI_DATA] == NATIVE_DATA;
}

bool
tp_elf_check(const void *data, size_t size)
{
	ElfW(Ehdr) ehdr;

	return read_ehdr(data, size, &ehdr);
}

static size_t
phdr_count(const ElfW(Ehdr) *ehdr, size_t size)
{
	if (ehdr->e_phoff == 0 || ehdr->e_phentsize != sizeof(ElfW(Phdr)) ||
		!in_bounds(size, ehdr->e_phoff, (uint64_t) ehdr->e_phnum * sizeof(ElfW(Phdr))))
		return 0;
	return ehdr->e_phnum;
}

static bool
read_phdr(const void *data, const ElfW(Ehdr) *ehdr, size_t i, ElfW(Phdr) *phdr)
{
	memcpy(phdr, (const char *) data + ehdr->e_phoff + i * sizeof(*phdr), sizeof(*phdr));
	return true;
}

/* Section count, with the extended numbering of files with >= 0xff00. */
static size_t
shdr_count(const void *data, const ElfW(Ehdr) *ehdr, size_t size)
{
	uint64_t	count = ehdr->e_shnum;

	if (ehdr->e_shoff == 0 || ehdr->e_shentsize != sizeof(ElfW(Shdr)) ||
		!in_bounds(size, ehdr->e_shoff, sizeof(ElfW(Shdr))))
		return 0;
	if (count == 0)
	{
		ElfW(Shdr) first;

		memcpy(&first, (const char *) data + ehdr->e_shoff, sizeof(first));
		count = first.sh_size;
	}
	if (count > (size - ehdr->e_shoff) / sizeof(ElfW(Shdr)))
		return 0;
	return (size_t) count;
}

static void
read_shdr(const void *data, const ElfW(Ehdr) *ehdr, size_t i, ElfW(Shdr) *shdr)
{
	memcpy(shdr, (const char *) data + ehdr->e_shoff + i * sizeof(*shdr), sizeof(*shdr));
}

/* Hex GNU build id from one note area, or NULL. */
static char *
build_id_in_notes(const char *notes, uint64_t len, uint64_t align)
{
	static const char hex[] = "0123456789abcdef";
	uint64_t	pos = 0;

	if (align != 8)
		align = 4;
	while (len - pos >= 3 * sizeof(uint32_t))
	{
		uint32_t	header[3];	/* namesz, descsz, type */
		uint64_t	name_len;
		uint64_t	desc_len;
		const char *name;
		const unsigned char *desc;

		memcpy(header, notes + pos, sizeof(header));
		pos += sizeof(header);
		name_len = ((uint64_t) header[0] + align - 1) & ~(align - 1);
		desc_len = ((uint64_t) header[1] + align - 1) & ~(align - 1);
		if (name_len > len - pos)
			return NULL;
		name = notes + pos;
		pos += name_len;
		if (desc_len > len - pos)
			return NULL;
		desc = (const unsigned char *) notes + pos;
		pos += desc_len;
		if (header[2] == NT_GNU_BUILD_ID && header[0] == 4 &&
			memcmp(name, "GNU", 4) == 0 && header[1] > 0 && header[1] <= 64)
		{
			char	   *out = malloc(2 * (size_t) header[1] + 1);

			if (out == NULL)
				return NULL;
			for (uint32_t i = 0; i < header[1]; i++)
			{
				out[2 * i] = hex[desc[i] >> 4];
				out[2 * i + 1] = hex[desc[i] & 15];
			}
			out[2 * header[1]] = '\0';
			return out;
		}
	}
	return NULL;
}

char *
tp_elf_build_id(const void *data, size_t size)
{
	ElfW(Ehdr) ehdr;
	size_t		count;

	if (!read_ehdr(data, size, &ehdr))
		return NULL;

	/* Program headers first: they are all a stripped file may keep. */
	count = phdr_count(&ehdr, size);
	for (size_t i = 0; i < count; i++)
	{
		ElfW(Phdr) phdr;
		char	   *id;

		read_phdr(data, &ehdr, i, &phdr);
		if (phdr.p_type != PT_NOTE || !in_bounds(size, phdr.p_offset, phdr.p_filesz))
			continue;
		id = build_id_in_notes((const char *) data + phdr.p_offset, phdr.p_filesz, phdr.p_align);
		if (id != NULL)
			return id;
	}

	/* Separate debug files keep the note as a section. */
	count = shdr_count(data, &ehdr, size);
	for (size_t i = 0; i < count; i++)
	{
		ElfW(Shdr) shdr;
		char	   *id;

		read_shdr(data, &ehdr, i, &shdr);
		if (shdr.sh_type != SHT_NOTE || !in_bounds(size, shdr.sh_offset, shdr.sh_size))
			continue;
		id = build_id_in_notes((const char *) data + shdr.sh_offset, shdr.sh_size, shdr.sh_addralign);
		if (id != NULL)
			return id;
	}
	return NULL;
}

bool
tp_elf_has_symtab(const void *data, size_t size)
{
	ElfW(Ehdr) ehdr;
	size_t		count;

	if (!read_ehdr(data, size, &ehdr))
		return false;
	count = shdr_count(data, &ehdr, size);
	for (size_t i = 0; i < count; i++)
	{
		ElfW(Shdr) shdr;

		read_shdr(data, &ehdr, i, &shdr);
		if (shdr.sh_type == SHT_SYMTAB && shdr.sh_size >= 2 * sizeof(ElfW(Sym)))
			return true;
	}
	return false;
}

/* Global names beat weak beat local; then fewer leading '_'; no '@'. */
static int
name_rank(unsigned char bind, const char *name)
{
	int			rank;
	int			underscores = 0;

	switch (bind)
	{
		case STB_GLOBAL:
			rank = 0;
			break;
		case STB_WEAK:
			rank = 1;
			break;
		case STB_LOCAL:
			rank = 2;
			break;
		default:
			rank = 3;
			break;
	}
	while (name[underscores] == '_' && underscores < 7)
		underscores++;
	return rank * 16 + underscores * 2 + (strchr(name, '@') != NULL);
}

static void
add_raw(raw_funcs *funcs, uint64_t addr, uint64_t size, const char *name, int rank)
{
	if (funcs->failed)
		return;
	if (funcs->count == funcs->capacity)
	{
		size_t		capacity = funcs->capacity ? funcs->capacity * 2 : 1024;
		raw_func   *grown = realloc(funcs->items, capacity * sizeof(raw_func));

		if (grown == NULL)
		{
			funcs->failed = true;
			return;
		}
		funcs->items = grown;
		funcs->capacity = capacity;
	}
	funcs->items[funcs->count].addr = addr;
	funcs->items[funcs->count].size = size;
	funcs->items[funcs->count].name = name;
	funcs->items[funcs->count].rank = rank;
	funcs->count++;
}

/* FUNC and IFUNC symbols of every section of type want. */
static bool
collect_symbols(const void *data, size_t size, uint32_t want, raw_funcs *funcs)
{
	const char *base = data;
	ElfW(Ehdr) ehdr;
	size_t		count;
	bool		found = false;

	if (!read_ehdr(data, size, &ehdr))
		return false;
	count = shdr_count(data, &ehdr, size);
	for (size_t i = 0; i < count; i++)
	{
		ElfW(Shdr) symtab;
		ElfW(Shdr) strtab;
		size_t		nsyms;

		read_shdr(data, &ehdr, i, &symtab);
		if (symtab.sh_type != want || symtab.sh_entsize != sizeof(ElfW(Sym)) ||
			!in_bounds(size, symtab.sh_offset, symtab.sh_size) ||
			symtab.sh_link >= count)
			continue;
		read_shdr(data, &ehdr, symtab.sh_link, &strtab);
		if (strtab.sh_type != SHT_STRTAB || strtab.sh_size == 0 ||
			!in_bounds(size, strtab.sh_offset, strtab.sh_size))
			continue;
		found = true;
		nsyms = symtab.sh_size / sizeof(ElfW(Sym));
		for (size_t j = 1; j < nsyms; j++)
		{
			ElfW(Sym)	sym;
			unsigned char type;
			const char *name;
			uint64_t	size;

			memcpy(&sym, base + symtab.sh_offset + j * sizeof(sym), sizeof(sym));
			type = SYM_TYPE(sym.st_info);
			if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
				sym.st_shndx == SHN_UNDEF || sym.st_value == 0 ||
				sym.st_name == 0 || sym.st_name >= strtab.sh_size)
				continue;
			name = base + strtab.sh_offset + sym.st_name;
			if (name[0] == '\0')
				continue;
			if (memchr(name, '\0', strtab.sh_size - sym.st_name) == NULL)
				continue;		/* unterminated: corrupt string table */
			size = sym.st_size;
			if (size == 0)
			{
				/*
				 * Hand-written code (_init, crt helpers) has no size: it
				 * ends with its section at the latest, so that _init does
				 * not swallow the PLT behind it.
				 */
				ElfW(Shdr)	section;

				if (sym.st_shndx >= count)
					continue;
				read_shdr(data, &ehdr, sym.st_shndx, &section);
				if ((section.sh_flags & SHF_EXECINSTR) == 0 ||
					sym.st_value < section.sh_addr ||
					sym.st_value - section.sh_addr >= section.sh_size)
					continue;
				size = section.sh_addr + section.sh_size - sym.st_value;
				if (size > SIZELESS_SPAN)
					size = SIZELESS_SPAN;
			}
			add_raw(funcs, sym.st_value, size, name,
					name_rank(SYM_BIND(sym.st_info), name));
		}
	}
	return found;
}

static void set_reach(tp_elf_image *image);

static int
compare_raw(const void *a, const void *b)
{
	const raw_func *x = a;
	const raw_func *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Sort, keep the best name per address, copy names out of the image. */
static bool
finish_funcs(raw_funcs *raw, tp_elf_image *image)
{
	size_t		names_len = 0;
	size_t		kept = 0;
	size_t		pos = 0;

	if (raw->count == 0)
		return true;
	qsort(raw->items, raw->count, sizeof(raw_func), compare_raw);
	for (size_t i = 0; i < raw->count; i++)
	{
		if (kept > 0 && raw->items[kept - 1].addr == raw->items[i].addr)
		{
			if (raw->items[i].size > raw->items[kept - 1].size)
				raw->items[kept - 1].size = raw->items[i].size;
			continue;
		}
		raw->items[kept++] = raw->items[i];
		names_len += strlen(raw->items[i].name) + 1;
	}
	if (names_len > UINT32_MAX)
		return false;
	image->funcs = malloc(kept * sizeof(tp_elf_func));
	image->names = malloc(names_len);
	if (image->funcs == NULL || image->names == NULL)
		return false;
	for (size_t i = 0; i < kept; i++)
	{
		size_t		len = strlen(raw->items[i].name) + 1;

		memcpy(image->names + pos, raw->items[i].name, len);
		image->funcs[i].addr = raw->items[i].addr;
		image->funcs[i].size = raw->items[i].size;
		image->funcs[i].name = (uint32_t) pos;
		image->funcs[i].synthetic = false;
		pos += len;
	}
	image->nfuncs = kept;
	set_reach(image);
	return true;
}

/* A function's end, saturated. */
static uint64_t
func_end(const tp_elf_func *func)
{
	return func->size > UINT64_MAX - func->addr ? UINT64_MAX : func->addr + func->size;
}

/*
 * After a sort: each entry's reach, the highest end of it and of every
 * entry before it, so that a lookup knows how far back a symbol covering
 * an address may start (see tp_elf_find).
 */
static void
set_reach(tp_elf_image *image)
{
	uint64_t	reach = 0;

	for (size_t i = 0; i < image->nfuncs; i++)
	{
		uint64_t	end = func_end(&image->funcs[i]);

		if (end > reach)
			reach = end;
		image->funcs[i].reach = reach;
	}
}

static bool
read_loads(const void *data, size_t size, tp_elf_image *image)
{
	ElfW(Ehdr) ehdr;
	size_t		count;

	if (!read_ehdr(data, size, &ehdr))
		return false;
	count = phdr_count(&ehdr, size);
	if (count == 0)
		return true;
	image->loads = calloc(count, sizeof(tp_elf_load));
	if (image->loads == NULL)
		return false;
	for (size_t i = 0; i < count; i++)
	{
		ElfW(Phdr) phdr;

		read_phdr(data, &ehdr, i, &phdr);
		if (phdr.p_type != PT_LOAD)
			continue;
		image->loads[image->nloads].offset = phdr.p_offset;
		image->loads[image->nloads].vaddr = phdr.p_vaddr;
		image->loads[image->nloads].filesz = phdr.p_filesz;
		image->loads[image->nloads].exec = (phdr.p_flags & PF_X) != 0;
		image->nloads++;
	}
	return true;
}

bool
tp_elf_image_read(const void *data, size_t size,
				  const void *debug, size_t debug_size,
				  tp_elf_image *image)
{
	raw_funcs	raw = {0};
	bool		ok;

	memset(image, 0, sizeof(*image));
	if (!tp_elf_check(data, size))
		return false;
	if (!read_loads(data, size, image))
		goto fail;
	image->build_id = tp_elf_build_id(data, size);
	image->has_symtab = collect_symbols(data, size, SHT_SYMTAB, &raw);
	collect_symbols(data, size, SHT_DYNSYM, &raw);
	if (debug != NULL && collect_symbols(debug, debug_size, SHT_SYMTAB, &raw))
		image->has_symtab = true;
	ok = !raw.failed && finish_funcs(&raw, image);
	free(raw.items);
	if (ok)
		return true;
fail:
	free(raw.items);
	tp_elf_image_free(image);
	return false;
}

/* .eh_frame_hdr encodings we read (the ones every toolchain emits). */
#define EH_PE_UDATA4 0x03
#define EH_PE_SDATA4 0x0b
#define EH_PE_PCREL_SDATA4 0x1b
#define EH_PE_DATAREL_SDATA4 0x3b

static int32_t
read_i32(const char *p)
{
	int32_t		v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static int
compare_funcs(const void *a, const void *b)
{
	const tp_elf_func *x = a;
	const tp_elf_func *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * The functions of an .eh_frame_hdr at hdr (avail bytes readable there,
 * link-time address hdr_vaddr) that no symbol covers.
 */
static bool
add_unwind_table(const char *hdr, uint64_t avail, uint64_t hdr_vaddr, const char *prefix,
				 tp_elf_image *image)
{
	const char *table;
	uint32_t	count;
	size_t		added = 0;
	size_t		names_len = 0;
	size_t		pos;
	tp_elf_func *funcs;
	char	   *names;
	char		name[128];

	/* version 1, then: eh_frame_ptr, fde_count, sorted (start, fde) pairs */
	if (avail < 12 || hdr[0] != 1 ||
		((unsigned char) hdr[1] != EH_PE_PCREL_SDATA4 &&
		 (unsigned char) hdr[1] != EH_PE_SDATA4) ||
		(unsigned char) hdr[2] != EH_PE_UDATA4 ||
		(unsigned char) hdr[3] != EH_PE_DATAREL_SDATA4)
		return true;
	count = (uint32_t) read_i32(hdr + 8);
	table = hdr + 12;
	if ((uint64_t) count * 8 > avail - 12)
		return true;

	/* First pass: how much room the new entries need. */
	for (uint32_t i = 0; i < count; i++)
	{
		uint64_t	start = hdr_vaddr + (int64_t) read_i32(table + 8 * i);

		if (tp_elf_find(image, start) == NULL)
		{
			added++;
			names_len += snprintf(name, sizeof(name), "%s+0x%llx", prefix,
								  (unsigned long long) start) + 1;
		}
	}
	if (added == 0)
		return true;
	funcs = realloc(image->funcs, (image->nfuncs + added) * sizeof(tp_elf_func));
	if (funcs == NULL)
		return false;
	image->funcs = funcs;
	pos = 0;
	for (size_t i = 0; i < image->nfuncs; i++)	/* current names length */
	{
		size_t		end = funcs[i].name + strlen(image->names + funcs[i].name) + 1;

		if (end > pos)
			pos = end;
	}
	names = realloc(image->names, pos + names_len);
	if (names == NULL)
		return false;
	image->names = names;

	/*
	 * Second pass: append, each reaching to the next listed start, the
	 * last one to the end of its executable segment (the table says where
	 * functions start, not where the last one ends; a symbol after it
	 * still wins, lookups take the last start).
	 */
	for (uint32_t i = 0, n = (uint32_t) image->nfuncs; i < count; i++)
	{
		uint64_t	start = hdr_vaddr + (int64_t) read_i32(table + 8 * i);
		uint64_t	next = i + 1 < count ? hdr_vaddr + (int64_t) read_i32(table + 8 * (i + 1)) : start + 1;
		int			len;

		if (i + 1 == count)
			for (size_t k = 0; k < image->nloads; k++)
				if (image->loads[k].exec && start >= image->loads[k].vaddr &&
					start - image->loads[k].vaddr < image->loads[k].filesz)
					next = image->loads[k].vaddr + image->loads[k].filesz;
		if (tp_elf_find(image, start) != NULL)
			continue;
		len = snprintf(names + pos, names_len, "%s+0x%llx", prefix, (unsigned long long) start);
		funcs[n].addr = start;
		funcs[n].size = next > start ? next - start : 1;
		funcs[n].name = (uint32_t) pos;
		funcs[n].synthetic = true;
		funcs[n].reach = 0;		/* set_reach, once sorted */
		pos += (size_t) len + 1;
		names_len -= (size_t) len + 1;
		n++;
	}
	image->nfuncs += added;
	qsort(image->funcs, image->nfuncs, sizeof(tp_elf_func), compare_funcs);
	set_reach(image);
	return true;
}

bool
tp_elf_add_unwind_functions(const void *data, size_t size, const char *prefix,
							tp_elf_image *image)
{
	const char *base = data;
	ElfW(Ehdr) ehdr;
	ElfW(Phdr) hdr = {0};

	if (!read_ehdr(data, size, &ehdr))
		return true;
	for (size_t i = 0; i < phdr_count(&ehdr, size) && hdr.p_type != PT_GNU_EH_FRAME; i++)
		read_phdr(data, &ehdr, i, &hdr);
	if (hdr.p_type != PT_GNU_EH_FRAME || !in_bounds(size, hdr.p_offset, 12))
		return true;
	return add_unwind_table(base + hdr.p_offset, size - hdr.p_offset, hdr.p_vaddr,
							prefix, image);
}

/* ---- objects in memory ---- */

/* Is [addr, addr + len) in a loaded segment's file contents? */
static bool
loaded_span(uintptr_t bias, const ElfW(Phdr) *phdrs, size_t phnum, uintptr_t addr,
			uint64_t len)
{
	for (size_t i = 0; i < phnum; i++)
	{
		uintptr_t	start = bias + (uintptr_t) phdrs[i].p_vaddr;

		if (phdrs[i].p_type == PT_LOAD && addr >= start &&
			in_bounds(phdrs[i].p_filesz, addr - start, len))
			return true;
	}
	return false;
}

/*
 * A pointer of the dynamic section: glibc relocates them in place on most
 * machines (x86_64, aarch64), not on all; either way, where it points.
 */
static uintptr_t
dynamic_pointer(uintptr_t bias, const ElfW(Phdr) *phdrs, size_t phnum, uint64_t value)
{
	if (value >= bias && loaded_span(bias, phdrs, phnum, (uintptr_t) value, 1))
		return (uintptr_t) value;
	if (loaded_span(bias, phdrs, phnum, bias + (uintptr_t) value, 1))
		return bias + (uintptr_t) value;
	return 0;
}

/* Number of .dynsym entries from DT_HASH or DT_GNU_HASH; 0: unknown. */
static size_t
dynsym_count(uintptr_t bias, const ElfW(Phdr) *phdrs, size_t phnum, uintptr_t hash,
			 uintptr_t gnu_hash)
{
	uint32_t	words[4];

	if (hash != 0 && loaded_span(bias, phdrs, phnum, hash, 8))
	{
		memcpy(words, (const void *) hash, 8);	/* nbucket, nchain */
		return words[1];
	}
	if (gnu_hash != 0 && loaded_span(bias, phdrs, phnum, gnu_hash, 16))
	{
		uintptr_t	buckets;
		uintptr_t	chains;
		uint32_t	last = 0;

		/* nbuckets, symoffset, bloom words, bloom shift */
		memcpy(words, (const void *) gnu_hash, 16);
		buckets = gnu_hash + 16 + (uintptr_t) words[2] * sizeof(ElfW(Addr));
		if (!loaded_span(bias, phdrs, phnum, buckets, (uint64_t) words[0] * 4))
			return 0;
		for (uint32_t i = 0; i < words[0]; i++)
		{
			uint32_t	b;

			memcpy(&b, (const void *) (buckets + 4 * (uintptr_t) i), 4);
			if (b > last)
				last = b;
		}
		if (last < words[1])
			return words[1];
		/* The highest bucket's chain ends at the last symbol (low bit set). */
		chains = buckets + (uintptr_t) words[0] * 4;
		for (;;)
		{
			uint32_t	c;
			uintptr_t	at = chains + 4 * (uintptr_t) (last - words[1]);

			if (!loaded_span(bias, phdrs, phnum, at, 4))
				return 0;
			memcpy(&c, (const void *) at, 4);
			if (c & 1)
				return (size_t) last + 1;
			if (last == UINT32_MAX)
				return 0;
			last++;
		}
	}
	return 0;
}

/* FUNC and IFUNC symbols of the loaded .dynsym. */
static void
collect_loaded_dynsym(uintptr_t bias, const ElfW(Phdr) *phdrs, size_t phnum, raw_funcs *funcs)
{
	const ElfW(Phdr) *dynamic = NULL;
	uintptr_t	symtab = 0;
	uintptr_t	strtab = 0;
	uint64_t	strsz = 0;
	uintptr_t	hash = 0;
	uintptr_t	gnu_hash = 0;
	size_t		nsyms;

	for (size_t i = 0; i < phnum; i++)
		if (phdrs[i].p_type == PT_DYNAMIC)
			dynamic = &phdrs[i];
	if (dynamic == NULL ||
		!loaded_span(bias, phdrs, phnum, bias + (uintptr_t) dynamic->p_vaddr, dynamic->p_filesz))
		return;
	for (size_t i = 0; i < dynamic->p_filesz / sizeof(ElfW(Dyn)); i++)
	{
		ElfW(Dyn)	d;

		memcpy(&d, (const char *) (bias + (uintptr_t) dynamic->p_vaddr) + i * sizeof(d), sizeof(d));
		if (d.d_tag == DT_NULL)
			break;
		if (d.d_tag == DT_SYMTAB)
			symtab = dynamic_pointer(bias, phdrs, phnum, d.d_un.d_ptr);
		else if (d.d_tag == DT_STRTAB)
			strtab = dynamic_pointer(bias, phdrs, phnum, d.d_un.d_ptr);
		else if (d.d_tag == DT_STRSZ)
			strsz = d.d_un.d_val;
		else if (d.d_tag == DT_HASH)
			hash = dynamic_pointer(bias, phdrs, phnum, d.d_un.d_ptr);
		else if (d.d_tag == DT_GNU_HASH)
			gnu_hash = dynamic_pointer(bias, phdrs, phnum, d.d_un.d_ptr);
		else if (d.d_tag == DT_SYMENT && d.d_un.d_val != sizeof(ElfW(Sym)))
			return;
	}
	if (symtab == 0 || strtab == 0 || strsz == 0 ||
		!loaded_span(bias, phdrs, phnum, strtab, strsz))
		return;
	nsyms = dynsym_count(bias, phdrs, phnum, hash, gnu_hash);
	if (nsyms == 0 || nsyms > SIZE_MAX / sizeof(ElfW(Sym)) ||
		!loaded_span(bias, phdrs, phnum, symtab, (uint64_t) nsyms * sizeof(ElfW(Sym))))
		return;
	for (size_t j = 1; j < nsyms; j++)
	{
		ElfW(Sym)	sym;
		unsigned char type;
		const char *name;
		uint64_t	size;

		memcpy(&sym, (const void *) (symtab + j * sizeof(sym)), sizeof(sym));
		type = SYM_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
			sym.st_shndx == SHN_UNDEF || sym.st_value == 0 ||
			sym.st_name == 0 || sym.st_name >= strsz)
			continue;
		name = (const char *) strtab + sym.st_name;
		if (name[0] == '\0' || memchr(name, '\0', strsz - sym.st_name) == NULL)
			continue;
		size = sym.st_size;
		if (size == 0)
		{
			/* No section headers here: its executable segment bounds it. */
			for (size_t i = 0; i < phnum; i++)
				if (phdrs[i].p_type == PT_LOAD && (phdrs[i].p_flags & PF_X) &&
					sym.st_value >= phdrs[i].p_vaddr &&
					sym.st_value - phdrs[i].p_vaddr < phdrs[i].p_filesz)
					size = phdrs[i].p_vaddr + phdrs[i].p_filesz - sym.st_value;
			if (size == 0)
				continue;
			if (size > SIZELESS_SPAN)
				size = SIZELESS_SPAN;
		}
		add_raw(funcs, sym.st_value, size, name, name_rank(SYM_BIND(sym.st_info), name));
	}
}

char *
tp_elf_build_id_loaded(uintptr_t bias, const ElfW(Phdr) *phdrs, size_t phnum)
{
	for (size_t i = 0; i < phnum; i++)
	{
		uintptr_t	notes = bias + (uintptr_t) phdrs[i].p_vaddr;
		char	   *id;

		if (phdrs[i].p_type != PT_NOTE ||
			!loaded_span(bias, phdrs, phnum, notes, phdrs[i].p_filesz))
			continue;
		id = build_id_in_notes((const char *) notes, phdrs[i].p_filesz, phdrs[i].p_align);
		if (id != NULL)
			return id;
	}
	return NULL;
}

bool
tp_elf_image_read_loaded(uintptr_t bias, const ElfW(Phdr) *phdrs, size_t phnum,
						 const void *debug, size_t debug_size, tp_elf_image *image)
{
	raw_funcs	raw = {0};
	bool		ok;

	memset(image, 0, sizeof(*image));
	if (phdrs == NULL || phnum == 0)
		return false;
	image->loads = calloc(phnum, sizeof(tp_elf_load));
	if (image->loads == NULL)
		return false;
	for (size_t i = 0; i < phnum; i++)
	{
		if (phdrs[i].p_type != PT_LOAD)
			continue;
		image->loads[image->nloads].offset = phdrs[i].p_offset;
		image->loads[image->nloads].vaddr = phdrs[i].p_vaddr;
		image->loads[image->nloads].filesz = phdrs[i].p_filesz;
		image->loads[image->nloads].exec = (phdrs[i].p_flags & PF_X) != 0;
		image->nloads++;
	}
	image->build_id = tp_elf_build_id_loaded(bias, phdrs, phnum);
	collect_loaded_dynsym(bias, phdrs, phnum, &raw);
	if (debug != NULL && collect_symbols(debug, debug_size, SHT_SYMTAB, &raw))
		image->has_symtab = true;
	ok = !raw.failed && finish_funcs(&raw, image);
	free(raw.items);
	if (!ok)
		tp_elf_image_free(image);
	return ok;
}

bool
tp_elf_add_unwind_functions_loaded(uintptr_t bias, const ElfW(Phdr) *phdrs, size_t phnum,
								   const char *prefix, tp_elf_image *image)
{
	for (size_t i = 0; i < phnum; i++)
	{
		uintptr_t	hdr = bias + (uintptr_t) phdrs[i].p_vaddr;

		if (phdrs[i].p_type == PT_GNU_EH_FRAME &&
			loaded_span(bias, phdrs, phnum, hdr, phdrs[i].p_filesz))
			return add_unwind_table((const char *) hdr, phdrs[i].p_filesz, phdrs[i].p_vaddr,
									prefix, image);
	}
	return true;
}

bool
tp_elf_load_bias(const tp_elf_image *image, uintptr_t map_start,
				 uint64_t map_offset, uintptr_t *bias)
{
	uint64_t	page = (uint64_t) sysconf(_SC_PAGESIZE);

	/* Executable segments first: the mappings we look up are r-x. */
	for (int pass = 0; pass < 2; pass++)
	{
		for (size_t i = 0; i < image->nloads; i++)
		{
			const tp_elf_load *load = &image->loads[i];
			uint64_t	first = load->offset & ~(page - 1);	/* mapped from here */

			if (load->exec != (pass == 0))
				continue;
			if (first <= map_offset &&
				(map_offset < load->offset || map_offset - load->offset < load->filesz))
			{
				/* file offset o sits at bias + vaddr + (o - offset) */
				*bias = map_start - (uintptr_t) map_offset + (uintptr_t) load->offset - (uintptr_t) load->vaddr;
				return true;
			}
		}
	}
	return false;
}

const tp_elf_func *
tp_elf_find(const tp_elf_image *image, uint64_t vaddr)
{
	size_t		lo = 0;
	size_t		hi = image->nfuncs;
	const tp_elf_func *func;

	/* The last function starting at or before vaddr. */
	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (image->funcs[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/*
	 * Usually that one covers vaddr.  Else an earlier, larger one may: go
	 * back while some entry at or before can still reach past vaddr (reach
	 * only grows along the array, so the first that cannot ends the
	 * search).  Nested symbols are few: a step or two.
	 */
	for (size_t i = lo; i > 0 && image->funcs[i - 1].reach > vaddr; i--)
	{
		func = &image->funcs[i - 1];
		if (vaddr - func->addr < func->size)
			return func;
	}
	return NULL;
}

bool
tp_elf_image_share(tp_elf_image *image)
{
	size_t		funcs_len = image->nfuncs * sizeof(tp_elf_func);
	size_t		names_len = 0;
	char	   *shared;

	if (image->shared_len > 0 || image->nfuncs == 0)
		return image->shared_len > 0;
	for (size_t i = 0; i < image->nfuncs; i++)
	{
		size_t		end = image->funcs[i].name + strlen(image->names + image->funcs[i].name) + 1;

		if (end > names_len)
			names_len = end;
	}
	shared = mmap(NULL, funcs_len + names_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return false;
	memcpy(shared, image->funcs, funcs_len);
	memcpy(shared + funcs_len, image->names, names_len);
	(void) mprotect(shared, funcs_len + names_len, PROT_READ);
	free(image->funcs);
	free(image->names);
	image->funcs = (tp_elf_func *) shared;
	image->names = shared + funcs_len;
	image->shared_len = funcs_len + names_len;
	return true;
}

void
tp_elf_image_free(tp_elf_image *image)
{
	free(image->loads);
	if (image->shared_len > 0)
		munmap(image->funcs, image->shared_len);
	else
	{
		free(image->funcs);
		free(image->names);
	}
	free(image->build_id);
	memset(image, 0, sizeof(*image));
}
