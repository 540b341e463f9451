/*
 * symbols.h - program counters to function names, outside signal handlers.
 *
 * Built once per process from /proc/self/maps and each mapped ELF file's
 * .symtab and .dynsym (sorted arrays, binary search): dladdr costs ~117 us
 * a call here and cannot see static functions.  The main executable is
 * found through /proc/self/exe (PostgreSQL overwrites argv[0]).  Modules
 * loaded later are picked up by tp_symbols_refresh().
 */
#ifndef TP_SYMBOLS_H
#define TP_SYMBOLS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tp_symbols tp_symbols;

typedef struct tp_symbol
{
	const char *function;		/* NULL when unknown */
	const char *module;			/* path of the mapped file, NULL if none */
	uintptr_t	module_start;	/* mapping range, for pprof Mapping */
	uintptr_t	module_end;
	uint64_t	module_offset;	/* file offset of module_start */
	const char *build_id;		/* hex GNU build id, or NULL */
	uintptr_t	function_start; /* run-time address of the function, 0 if unknown */
	bool		synthetic;		/* function is "<module>+0x<start>", not a symbol */
	bool		in_executable;	/* in the main program, not a library */
} tp_symbol;

tp_symbols *tp_symbols_load(void);

/*
 * Re-read /proc/self/maps for modules loaded or unloaded since (dlopen,
 * dlclose): only when the dynamic loader's load and unload counters
 * (dl_iterate_phdr's dlpi_adds, dlpi_subs) moved since the last read, so
 * that calling it for every address in no module (JIT code) costs no file
 * read.  Returns true when the list was read again: an address may now be
 * another module's, names looked up before may be stale.
 */
bool		tp_symbols_refresh(tp_symbols *symbols);

/* How many times /proc/self/maps was read (load and refreshes), for tests. */
unsigned long tp_symbols_maps_reads(const tp_symbols *symbols);

/*
 * Resolve pc.  is_return_address: pc is a return address (every frame but
 * the interrupted one), so pc - 1 is looked up to land inside the call.
 * In a stripped module without a debug file, a function with no symbol
 * (a static one) is named "<module>+0x<link-time start address>" from the
 * module's unwind table, ready for addr2line against a debug file.
 * Strings stay valid until tp_symbols_free().
 */
bool		tp_symbols_lookup(tp_symbols *symbols, uintptr_t pc,
							  bool is_return_address, tp_symbol *out);

/*
 * The tables of every module parsed so far moved into shared mappings
 * (tp_elf_image_share): for a process whose children inherit them.
 * Modules parsed later, here or in a child, stay private.  NULL: nothing.
 */
void		tp_symbols_share(tp_symbols *symbols);

void		tp_symbols_free(tp_symbols *symbols);

/*
 * Whether function is the C library's start of the process, outward of
 * main (_start, __libc_start_main, __libc_start_call_main): a frame-pointer
 * walk stops at one of them and libunwind at another, so profiles leave
 * them out and every stack is rooted at main.
 */
bool		tp_symbol_is_process_start(const char *function);

#endif
