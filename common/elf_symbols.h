/*
 * elf_symbols.h - function symbols, load segments and build id of one ELF
 * image held in memory (a mapped file, or the vDSO).
 *
 * Every offset and size read from the image is checked against its size:
 * a truncated or corrupt file gives fewer symbols, never a crash.  The
 * result owns copies of the names, so the image can be unmapped after.
 */
#ifndef TP_ELF_SYMBOLS_H
#define TP_ELF_SYMBOLS_H

#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tp_elf_load
{
	uint64_t	offset;			/* p_offset */
	uint64_t	vaddr;			/* p_vaddr */
	uint64_t	filesz;			/* p_filesz */
	bool		exec;			/* PF_X */
} tp_elf_load;

typedef struct tp_elf_func
{
	uint64_t	addr;			/* st_value (link-time address) */
	uint64_t	size;			/* sizeless ones: up to their section's end */
	uint64_t	reach;			/* highest end of this and every function before */
	uint32_t	name;			/* offset in tp_elf_image.names */
	bool		synthetic;		/* named from the unwind table, not a symbol */
} tp_elf_func;

typedef struct tp_elf_image
{
	tp_elf_load *loads;			/* PT_LOAD segments, in header order */
	size_t		nloads;
	tp_elf_func *funcs;			/* sorted by addr, one per address */
	size_t		nfuncs;
	char	   *names;			/* NUL-terminated names, back to back */
	char	   *build_id;		/* lowercase hex, or NULL */
	bool		has_symtab;		/* a .symtab was read (static functions) */
	size_t		shared_len;		/* funcs and names in one shared mapping: its length */
} tp_elf_image;

/* Is this a well-formed ELF header of this machine's class and byte order? */
bool		tp_elf_check(const void *data, size_t size);

/* GNU build id as malloc'd lowercase hex, NULL if none (or no memory). */
char	   *tp_elf_build_id(const void *data, size_t size);

/* Does the image have a non-empty .symtab? */
bool		tp_elf_has_symtab(const void *data, size_t size);

/*
 * Fill image from data: load segments, build id, and FUNC/IFUNC symbols of
 * .symtab and .dynsym.  debug (may be NULL) is a separate debug file for
 * the same build: its .symtab is merged in.  Aliases at one address are
 * merged, preferring global, then fewer leading underscores.  False when
 * data is not a usable ELF image or memory runs out.
 */
bool		tp_elf_image_read(const void *data, size_t size,
							  const void *debug, size_t debug_size,
							  tp_elf_image *image);

/*
 * For a stripped image: add a function named "<prefix>+0x<link-time
 * address>" for every function start listed in .eh_frame_hdr (the unwind
 * table every function with unwind info has) that no symbol covers.  Static
 * functions then stay apart in profiles, with names addr2line can resolve
 * against a debug file later.  False only when memory runs out; an image
 * without a usable .eh_frame_hdr is left as it is.
 */
bool		tp_elf_add_unwind_functions(const void *data, size_t size,
										const char *prefix, tp_elf_image *image);

/*
 * The same from an object the dynamic loader has mapped (dl_iterate_phdr's
 * load address and program headers), for a file deleted or replaced on
 * disk since: load segments, build id and .dynsym, found through
 * PT_DYNAMIC in the loaded segments (.symtab is never loaded; debug may
 * add it as above).  Every read is checked to lie in a loaded segment.
 */
bool		tp_elf_image_read_loaded(uintptr_t bias, const ElfW(Phdr) *phdrs,
									 size_t phnum, const void *debug,
									 size_t debug_size, tp_elf_image *image);

/* Its build id, as tp_elf_build_id. */
char	   *tp_elf_build_id_loaded(uintptr_t bias, const ElfW(Phdr) *phdrs, size_t phnum);

/* tp_elf_add_unwind_functions from its loaded .eh_frame_hdr. */
bool		tp_elf_add_unwind_functions_loaded(uintptr_t bias, const ElfW(Phdr) *phdrs,
											   size_t phnum, const char *prefix,
											   tp_elf_image *image);

/*
 * Difference between run-time and link-time addresses for a mapping of
 * the file at map_start from file offset map_offset.  False if no PT_LOAD
 * covers map_offset.
 */
bool		tp_elf_load_bias(const tp_elf_image *image, uintptr_t map_start,
							 uint64_t map_offset, uintptr_t *bias);

/*
 * The function containing link-time address vaddr, or NULL.  Symbols may
 * overlap (a local alias or an extra entry point inside a larger
 * function): the one starting last among those covering vaddr wins.
 */
const tp_elf_func *tp_elf_find(const tp_elf_image *image, uint64_t vaddr);

/*
 * Move the image's function table and names into one read-only shared
 * anonymous mapping, for a process that forks children which may look
 * names up (the postmaster): fork copies no page table of a shared mapping
 * and a child maps in only what it reads, where every page of a private
 * copy would be copied at each fork and torn down at each exit.  The image
 * must be complete (nothing is added to it afterwards).  False, the image
 * unchanged, when the mapping cannot be made.
 */
bool		tp_elf_image_share(tp_elf_image *image);

void		tp_elf_image_free(tp_elf_image *image);

#endif
