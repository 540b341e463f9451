/* Unit tests: /proc/self/maps + ELF symbolization of this very process. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>
#include <linux/capability.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elf_symbols.h"
#include "symbols.h"
#include "unit.h"

int			main(void);

/* Taken by address so that the compiler keeps them whole and unrenamed. */
__attribute__((noinline, used)) static int
local_target(int x)
{
	return x * 3 + (int) getpid();
}

__attribute__((noinline, used)) int global_target(int x);

__attribute__((noinline, used)) int
global_target(int x)
{
	return x * 7 + (int) getppid();
}

static void *unit_main_return;	/* where main() returns to, in libc */
static int	(*volatile keep_local) (int) = local_target;
static int	(*volatile keep_global) (int) = global_target;

static bool
is_hex(const char *s)
{
	if (s == NULL || *s == '\0')
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

TEST(static_and_global_functions_of_the_executable)
{
	tp_symbols *symbols = tp_symbols_load();
	tp_symbol	sym;
	uintptr_t	local = (uintptr_t) keep_local;
	uintptr_t	global = (uintptr_t) keep_global;

	CHECK(symbols != NULL);
	if (symbols == NULL)
		return;
	CHECK(tp_symbols_lookup(symbols, local, false, &sym));
	CHECK_STR(sym.function, "local_target");
	CHECK(sym.module != NULL && strstr(sym.module, "test_symbols") != NULL);
	CHECK(sym.module_start <= local && local < sym.module_end);
	CHECK(is_hex(sym.build_id));

	/* Inside the body, not only at its first byte. */
	CHECK(tp_symbols_lookup(symbols, local + 4, false, &sym));
	CHECK_STR(sym.function, "local_target");
	CHECK(tp_symbols_lookup(symbols, global, false, &sym));
	CHECK_STR(sym.function, "global_target");
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) (void *) main, false, &sym));
	CHECK_STR(sym.function, "main");
	tp_symbols_free(symbols);
}

TEST(return_address_looks_up_the_byte_before)
{
	tp_symbols *symbols = tp_symbols_load();
	tp_symbol	sym;
	uintptr_t	global = (uintptr_t) keep_global;

	if (symbols == NULL)
	{
		CHECK(symbols != NULL);
		return;
	}
	/* A call that ends a function returns to the next function's start. */
	tp_symbols_lookup(symbols, global, true, &sym);
	CHECK(sym.function == NULL || strcmp(sym.function, "global_target") != 0);
	CHECK(sym.module != NULL);
	CHECK(tp_symbols_lookup(symbols, global + 1, true, &sym));
	CHECK_STR(sym.function, "global_target");
	tp_symbols_free(symbols);
}

/* Code no symbol covers: the module is known, the function is not. */
TEST(code_outside_functions)
{
	tp_symbols *symbols = tp_symbols_load();
	tp_symbol	sym;
	tp_symbol	plt;
	bool		found = false;

	if (symbols == NULL)
	{
		CHECK(symbols != NULL);
		return;
	}
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) keep_global, false, &sym));

	/*
	 * The executable's code mapping starts with _init, which has no size,
	 * and the PLT follows: PLT stubs must not be named _init.
	 */
	for (uintptr_t pc = sym.module_start; pc < sym.module_start + 512; pc += 8)
	{
		tp_symbols_lookup(symbols, pc, false, &plt);
		CHECK(plt.module != NULL && strcmp(plt.module, sym.module) == 0);
		if (plt.function == NULL)
			found = true;
		else
			CHECK(strcmp(plt.function, "_init") != 0 || pc < sym.module_start + 64);
	}
	CHECK(found);
	tp_symbols_free(symbols);
}

TEST(libc_function)
{
	tp_symbols *symbols = tp_symbols_load();
	tp_symbol	sym;
	uintptr_t	pc = (uintptr_t) (void *) getpid;

	if (symbols == NULL)
	{
		CHECK(symbols != NULL);
		return;
	}
	CHECK(tp_symbols_lookup(symbols, pc, false, &sym));
	CHECK(sym.function != NULL && strstr(sym.function, "getpid") != NULL);
	CHECK(sym.module != NULL && strstr(sym.module, "libc") != NULL);
	CHECK(is_hex(sym.build_id));
	CHECK(sym.module_start <= pc && pc < sym.module_end);
	tp_symbols_free(symbols);
}

/* What main returns to is the C library's start of the process: left out of profiles. */
TEST(process_start_outward_of_main)
{
	tp_symbols *symbols = tp_symbols_load();
	tp_symbol	sym;

	CHECK(tp_symbol_is_process_start("_start"));
	CHECK(tp_symbol_is_process_start("__libc_start_main"));
	CHECK(!tp_symbol_is_process_start("main"));
	CHECK(!tp_symbol_is_process_start("PostgresMain"));
	CHECK(!tp_symbol_is_process_start(NULL));
	if (symbols == NULL)
	{
		CHECK(symbols != NULL);
		return;
	}
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) unit_main_return, true, &sym));
	CHECK(sym.function != NULL && tp_symbol_is_process_start(sym.function));
	tp_symbols_free(symbols);
}

TEST(address_in_no_module)
{
	tp_symbols *symbols = tp_symbols_load();
	tp_symbol	sym;
	char	   *heap = malloc(16);

	if (symbols == NULL)
	{
		CHECK(symbols != NULL);
		free(heap);
		return;
	}
	CHECK(!tp_symbols_lookup(symbols, 16, false, &sym));
	CHECK(sym.function == NULL && sym.module == NULL && sym.build_id == NULL);
	CHECK(!tp_symbols_lookup(symbols, (uintptr_t) heap, true, &sym));
	CHECK(sym.module == NULL);
	CHECK(!tp_symbols_lookup(symbols, 0, true, &sym));
	CHECK(!tp_symbols_lookup(symbols, UINTPTR_MAX, false, &sym));
	free(heap);
	tp_symbols_free(symbols);
}

/*
 * Build dir/name from source with symbols, split its debug part off under
 * dir/.build-id/ by build id (as a -dbgsym package lays it out), then run
 * strip_command in dir; lib gets the library's path.
 */
static bool
build_split_library(const char *dir, const char *name, const char *source,
					const char *strip_command, char *lib, size_t lib_size)
{
	char		cmd[2048];
	FILE	   *src;

	snprintf(cmd, sizeof(cmd), "%s/lib.c", dir);
	src = fopen(cmd, "w");
	if (src == NULL)
		return false;
	fputs(source, src);
	fclose(src);
	snprintf(lib, lib_size, "%s/%s", dir, name);
	snprintf(cmd, sizeof(cmd),
			 "set -e; cd %s; cc -g -O1 -fPIC -shared -Wl,--build-id -o %s lib.c; "
			 "id=$(readelf -n %s | sed -n 's/.*Build ID: //p'); "
			 "mkdir -p .build-id/$(echo $id | cut -c1-2); "
			 "objcopy --only-keep-debug %s .build-id/$(echo $id | cut -c1-2)/$(echo $id | cut -c3-).debug; %s",
			 dir, name, name, name, strip_command);
	return system(cmd) == 0;
}

/*
 * A stripped library whose static function is named only by its separate
 * debug file, found by build id under TRACEPROF_DEBUG_DIR, as a -dbgsym
 * package would install it under /usr/lib/debug.  Built here with cc and
 * objcopy so the test needs nothing installed beyond the toolchain.
 */
TEST(stripped_library_named_from_debug_file)
{
	char		dir[] = "/tmp/traceprof-debug-XXXXXX";
	char		cmd[2048];
	char		lib[512];
	void	   *handle;
	void	   *(*address_of_hidden) (void);
	tp_symbols *symbols;
	tp_symbol	sym;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(build_split_library(dir, "libhidden.so",
							  "__attribute__((noinline)) static int hidden_worker(int x) { return x * 7 + 1; }\n"
							  "int (*volatile keep)(int) = hidden_worker;\n"
							  "void *address_of_hidden(void) { return (void *) hidden_worker; }\n",
							  "strip --strip-all libhidden.so; ! nm libhidden.so 2>/dev/null | grep -q hidden_worker",
							  lib, sizeof(lib)));
	handle = dlopen(lib, RTLD_NOW);
	CHECK(handle != NULL);
	if (handle == NULL)
		return;
	address_of_hidden = (void *(*) (void)) dlsym(handle, "address_of_hidden");
	CHECK(address_of_hidden != NULL);

	/* Without the debug directory: only the unwind table's start address. */
	setenv("TRACEPROF_DEBUG_DIR", "/nonexistent", 1);
	symbols = tp_symbols_load();
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) address_of_hidden() + 1, false, &sym));
	CHECK(sym.function != NULL && strstr(sym.function, "libhidden.so+0x") == sym.function);
	CHECK(sym.synthetic);
	tp_symbols_free(symbols);

	/* With it: the real name, from the debug file's .symtab. */
	setenv("TRACEPROF_DEBUG_DIR", dir, 1);
	symbols = tp_symbols_load();
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) address_of_hidden() + 1, false, &sym));
	CHECK_STR(sym.function, "hidden_worker");
	CHECK(!sym.synthetic);
	CHECK(sym.function_start == (uintptr_t) address_of_hidden());
	tp_symbols_free(symbols);
	unsetenv("TRACEPROF_DEBUG_DIR");

	dlclose(handle);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/*
 * In a stripped library, the function with the highest address in the
 * unwind table is named like the others over its whole body, not only at
 * its first byte: the table says where a function starts, not where the
 * last one ends.
 */
TEST(stripped_library_names_its_last_function_whole)
{
	char		dir[] = "/tmp/traceprof-last-XXXXXX";
	char		cmd[2048];
	char		lib[512];
	void	   *handle;
	void	   *(*address_of_last) (void);
	tp_symbols *symbols;
	tp_symbol	sym;
	tp_symbol	first;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(build_split_library(dir, "liblast.so",
							  "void *address_of_last(void);\n"
							  "static int last_worker(int x);\n"
							  "int (*volatile keep)(int) = last_worker;\n"
							  "void *address_of_last(void) { return (void *) last_worker; }\n"
							  "__attribute__((noinline, section(\".text.zz_last\"))) static int last_worker(int x)\n"
							  "{ int s = 0; for (int i = 0; i < x; i++) s += i * keep(i - 1); return s; }\n",
							  "strip --strip-all liblast.so", lib, sizeof(lib)));
	handle = dlopen(lib, RTLD_NOW);
	CHECK(handle != NULL);
	if (handle == NULL)
		return;
	address_of_last = (void *(*) (void)) dlsym(handle, "address_of_last");
	CHECK(address_of_last != NULL);
	setenv("TRACEPROF_DEBUG_DIR", "/nonexistent", 1);
	symbols = tp_symbols_load();
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) address_of_last(), false, &first));
	CHECK(first.function != NULL && strstr(first.function, "liblast.so+0x") == first.function);
	/* Past its first instructions: the same function. */
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) address_of_last() + 12, false, &sym));
	CHECK(sym.function != NULL && first.function != NULL && strcmp(sym.function, first.function) == 0);
	CHECK(sym.function_start == (uintptr_t) address_of_last());
	if (sym.function == NULL)
		printf("  %s+12: no name (module %s)\n", first.function ? first.function : "?",
			   sym.module ? sym.module : "none");
	tp_symbols_free(symbols);
	unsetenv("TRACEPROF_DEBUG_DIR");
	dlclose(handle);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/*
 * A function symbol inside a larger one (a local alias, an extra entry
 * point, a nested cold part): an address past the small symbol's end but
 * inside the large one is named by the large one, the innermost covering
 * symbol winning.
 */
TEST(overlapping_symbols_name_the_covering_function)
{
	char		dir[] = "/tmp/traceprof-overlap-XXXXXX";
	char		cmd[2048];
	char		lib[512];
	void	   *handle;
	void	   *outer;
	void	   *inner;
	tp_symbols *symbols;
	tp_symbol	sym;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(build_split_library(dir, "liboverlap.so",
							  "void outer_function(void);\n"
							  "__asm__(\".text\\n.globl outer_function\\n.type outer_function,@function\\n"
							  "outer_function:\\n nop\\n nop\\n"
							  ".globl inner_entry\\n.type inner_entry,@function\\ninner_entry:\\n nop\\n"
							  ".size inner_entry, 1\\n"
							  " nop\\n nop\\n nop\\n nop\\n nop\\n nop\\n nop\\n ret\\n"
							  ".size outer_function, .-outer_function\\n\");\n",
							  "true", lib, sizeof(lib)));
	handle = dlopen(lib, RTLD_NOW);
	CHECK(handle != NULL);
	if (handle == NULL)
		return;
	outer = dlsym(handle, "outer_function");
	inner = dlsym(handle, "inner_entry");
	CHECK(outer != NULL && inner != NULL);
	symbols = tp_symbols_load();
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) outer + 1, false, &sym));
	CHECK_STR(sym.function, "outer_function");
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) inner, false, &sym));
	CHECK_STR(sym.function, "inner_entry");
	/* Past inner_entry's one byte, still in outer_function. */
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) inner + 3, false, &sym));
	CHECK_STR(sym.function, "outer_function");
	CHECK(sym.function_start == (uintptr_t) outer);
	/* Past outer_function's end (ret is its last byte): not it. */
	tp_symbols_lookup(symbols, (uintptr_t) outer + 11, false, &sym);
	CHECK(sym.function == NULL || strcmp(sym.function, "outer_function") != 0);
	tp_symbols_free(symbols);
	dlclose(handle);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/*
 * The /proc/self/maps line of the mapping holding addr (its bounds, and
 * its permissions as "r-xp"); false when no mapping holds it.
 */
static bool
mapping_of(uintptr_t addr, unsigned long *start, unsigned long *end, char perms[5])
{
	FILE	   *maps = fopen("/proc/self/maps", "re");
	char		line[1024];
	bool		found = false;

	if (maps == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), maps) != NULL)
		found = sscanf(line, "%lx-%lx %4s", start, end, perms) == 3 && *start <= addr && addr < *end;
	fclose(maps);
	return found;
}

/*
 * Open this process's /proc/self/map_files entry for the mapping holding
 * addr: what only CAP_SYS_ADMIN may do, unlike the postgres user.
 */
static bool
map_files_opens(uintptr_t addr)
{
	unsigned long start,
				end;
	char		perms[5];
	char		path[64];
	int			fd;

	if (!mapping_of(addr, &start, &end, perms))
		return false;
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", start, end);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/*
 * Drop what opens map_files (CAP_SYS_ADMIN, or CAP_CHECKPOINT_RESTORE since
 * Linux 5.9) from the effective set: a root test then runs as postgres would.
 */
static bool
drop_sys_admin(void)
{
	struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &header, data) != 0)
		return false;
	data[0].effective &= ~(1u << CAP_SYS_ADMIN);
	data[1].effective &= ~(1u << (40 - 32));	/* CAP_CHECKPOINT_RESTORE */
	return syscall(SYS_capset, &header, data) == 0;
}

/*
 * A library deleted or replaced on disk after it was loaded (an extension
 * or a distribution package upgraded under a running server) is still
 * named: from the copy the loader keeps mapped (.dynsym, build id, unwind
 * table) and the debug file its build id finds, for a process that may
 * not open /proc/self/map_files (anyone but root).  Checked in a child
 * that gave up CAP_SYS_ADMIN; it exits with its failure count.
 */
TEST(deleted_library_named_from_memory)
{
	char		dir[] = "/tmp/traceprof-gone-XXXXXX";
	char		cmd[2048];
	char		lib[512];
	void	   *handle;
	void	   *(*address_of_hidden) (void);
	void	   *exported;
	pid_t		child;
	int			status = -1;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(build_split_library(dir, "libgone.so",
							  "__attribute__((noinline)) static int gone_hidden(int x) { return x * 7 + 1; }\n"
							  "int (*volatile keep)(int) = gone_hidden;\n"
							  "int gone_exported(int x) { return keep(x) + 3; }\n"
							  "void *address_of_hidden(void) { return (void *) gone_hidden; }\n",
							  "strip --strip-unneeded libgone.so", lib, sizeof(lib)));
	handle = dlopen(lib, RTLD_NOW);
	CHECK(handle != NULL);
	if (handle == NULL)
		return;
	address_of_hidden = (void *(*) (void)) dlsym(handle, "address_of_hidden");
	exported = dlsym(handle, "gone_exported");
	CHECK(address_of_hidden != NULL && exported != NULL);
	if (address_of_hidden == NULL || exported == NULL)
		return;

	/* The upgrade: a new file (another inode) where the loaded one was. */
	snprintf(cmd, sizeof(cmd),
			 "set -e; cd %s; echo 'int other(void) { return 1; }' > new.c; "
			 "cc -O1 -fPIC -shared -o new.so new.c; mv new.so libgone.so", dir);
	CHECK(system(cmd) == 0);

	fflush(stdout);
	child = fork();
	if (child == 0)
	{
		tp_symbols *symbols;
		tp_symbol	sym;

		unit_failures = 0;
		if (geteuid() == 0)
			CHECK(drop_sys_admin());
		CHECK(!map_files_opens((uintptr_t) exported));

		setenv("TRACEPROF_DEBUG_DIR", "/nonexistent", 1);
		symbols = tp_symbols_load();
		CHECK(tp_symbols_lookup(symbols, (uintptr_t) exported + 1, false, &sym));
		CHECK_STR(sym.function, "gone_exported");
		CHECK(sym.function_start == (uintptr_t) exported);
		CHECK(sym.module != NULL && strstr(sym.module, "libgone.so") != NULL);
		CHECK(sym.build_id != NULL);
		/* No symbol: the unwind table's start, as for a stripped file. */
		CHECK(tp_symbols_lookup(symbols, (uintptr_t) address_of_hidden() + 1, false, &sym));
		CHECK(sym.function != NULL && strstr(sym.function, "libgone.so+0x") == sym.function);
		CHECK(sym.synthetic);
		tp_symbols_free(symbols);

		/* The debug file, found by the build id read from memory. */
		setenv("TRACEPROF_DEBUG_DIR", dir, 1);
		symbols = tp_symbols_load();
		CHECK(tp_symbols_lookup(symbols, (uintptr_t) address_of_hidden() + 1, false, &sym));
		CHECK_STR(sym.function, "gone_hidden");
		CHECK(!sym.synthetic);
		tp_symbols_free(symbols);
		fflush(stdout);
		_exit(unit_failures > 100 ? 100 : unit_failures);
	}
	CHECK(child > 0);
	while (child > 0 && waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	dlclose(handle);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

TEST(vdso)
{
	tp_symbols *symbols = tp_symbols_load();
	unsigned long base = getauxval(AT_SYSINFO_EHDR);
	tp_symbol	sym;
	bool		named = false;

	if (symbols == NULL || base == 0)
	{
		printf("  (skipped: no vDSO)\n");
		tp_symbols_free(symbols);
		return;
	}
	tp_symbols_lookup(symbols, base, false, &sym);
	CHECK_STR(sym.module, "[vdso]");
	for (uintptr_t pc = base; pc < sym.module_end && !named; pc += 16)
	{
		tp_symbol	s;

		if (tp_symbols_lookup(symbols, pc, false, &s) && strstr(s.function, "gettime") != NULL)
			named = true;
	}
	CHECK(named);
	tp_symbols_free(symbols);
}

/* Modules mapped after load are found after refresh, and only then. */
TEST(refresh_picks_up_dlopen)
{
	static const char *const candidates[][2] = {
		{"libbz2.so.1.0", "BZ2_bzlibVersion"},
		{"libexpat.so.1", "XML_ParserCreate"},
		{"libcrypt.so.1", "crypt_r"},
		{"libacl.so.1", "acl_init"},
		{"libcap.so.2", "cap_init"},
	};
	tp_symbols *symbols = tp_symbols_load();
	void	   *handle = NULL;
	tp_symbol	sym;

	if (symbols == NULL)
	{
		CHECK(symbols != NULL);
		return;
	}
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && handle == NULL; i++)
	{
		void	   *fn;
		Dl_info		info;

		if (dlopen(candidates[i][0], RTLD_NOW | RTLD_NOLOAD) != NULL)
			continue;			/* already mapped: proves nothing */
		handle = dlopen(candidates[i][0], RTLD_NOW | RTLD_LOCAL);
		if (handle == NULL)
			continue;
		fn = dlsym(handle, candidates[i][1]);
		if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_fname == NULL ||
			strstr(info.dli_fname, candidates[i][0]) == NULL)
		{
			dlclose(handle);
			handle = NULL;
			continue;
		}
		CHECK(!tp_symbols_lookup(symbols, (uintptr_t) fn, false, &sym));
		CHECK(sym.module == NULL);
		tp_symbols_refresh(symbols);
		CHECK(tp_symbols_lookup(symbols, (uintptr_t) fn, false, &sym));
		CHECK(sym.module != NULL && strstr(sym.module, candidates[i][0]) != NULL);
		CHECK_STR(sym.function, candidates[i][1]);
	}
	if (handle == NULL)
		printf("  (skipped: no library left to dlopen)\n");
	/* Strings stay valid after refresh, until free. */
	tp_symbols_lookup(symbols, (uintptr_t) keep_global, false, &sym);
	tp_symbols_refresh(symbols);
	CHECK_STR(sym.function, "global_target");
	tp_symbols_free(symbols);
	if (handle != NULL)
		dlclose(handle);
}

/*
 * The drain names every address in no module (JIT code) after a refresh,
 * in case a library was loaded since: with nothing loaded or unloaded
 * since the last read, a refresh reads /proc/self/maps no more.
 */
TEST(refresh_reads_maps_only_after_dlopen_or_dlclose)
{
	tp_symbols *symbols = tp_symbols_load();
	unsigned char *jit = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE | PROT_EXEC,
							  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned long before;
	unsigned long reads;
	tp_symbol	sym;

	CHECK(symbols != NULL && jit != MAP_FAILED);
	if (symbols == NULL || jit == MAP_FAILED)
		return;
	before = tp_symbols_maps_reads(symbols);
	/* As backend_profiler.c's frame_name does for each new JIT address. */
	for (int i = 0; i < 1000; i++)
	{
		uintptr_t	pc = (uintptr_t) jit + 64 * (uintptr_t) i;

		if (!tp_symbols_lookup(symbols, pc, false, &sym) && sym.module == NULL)
		{
			tp_symbols_refresh(symbols);
			tp_symbols_lookup(symbols, pc, false, &sym);
		}
		CHECK(sym.module == NULL);
	}
	reads = tp_symbols_maps_reads(symbols) - before;
	printf("  1000 JIT addresses named: %lu reads of /proc/self/maps\n", reads);
	CHECK(reads == 0);

	/* A load or an unload since: read again, once. */
	{
		void	   *handle = dlopen("libbz2.so.1.0", RTLD_NOW | RTLD_NOLOAD) ? NULL :
			dlopen("libbz2.so.1.0", RTLD_NOW | RTLD_LOCAL);

		if (handle != NULL)
		{
			before = tp_symbols_maps_reads(symbols);
			tp_symbols_refresh(symbols);
			tp_symbols_refresh(symbols);
			CHECK(tp_symbols_maps_reads(symbols) - before == 1);
			CHECK(tp_symbols_lookup(symbols, (uintptr_t) dlsym(handle, "BZ2_bzlibVersion"), false, &sym));
			dlclose(handle);
			before = tp_symbols_maps_reads(symbols);
			tp_symbols_refresh(symbols);
			tp_symbols_refresh(symbols);
			CHECK(tp_symbols_maps_reads(symbols) - before == 1);
		}
		else
			printf("  (dlopen part skipped: libbz2 already mapped or missing)\n");
	}
	munmap(jit, 1 << 16);
	tp_symbols_free(symbols);
}

/*
 * dlclose, then dlopen of another library that lands where the first was:
 * a refresh says the names may have changed, and the address is named
 * from the new library, not the old one.
 */
TEST(library_replaced_at_the_same_address_is_named_anew)
{
	char		dir[] = "/tmp/traceprof-replace-XXXXXX";
	char		cmd[2048];
	char		lib_a[512];
	char		lib_b[512];
	void	   *handle;
	void	   *fn_a;
	void	   *fn_b;
	tp_symbols *symbols;
	tp_symbol	sym;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(build_split_library(dir, "libreplace_a.so",
							  "int alpha_function(int x) { return x * 3 + 1; }\n", "true",
							  lib_a, sizeof(lib_a)));
	CHECK(build_split_library(dir, "libreplace_b.so",
							  "int omega_function(int x) { return x * 5 + 2; }\n", "true",
							  lib_b, sizeof(lib_b)));
	handle = dlopen(lib_a, RTLD_NOW | RTLD_LOCAL);
	CHECK(handle != NULL);
	if (handle == NULL)
		return;
	fn_a = dlsym(handle, "alpha_function");
	symbols = tp_symbols_load();
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) fn_a, false, &sym));
	CHECK_STR(sym.function, "alpha_function");
	dlclose(handle);
	handle = dlopen(lib_b, RTLD_NOW | RTLD_LOCAL);
	CHECK(handle != NULL);
	if (handle == NULL)
		return;
	fn_b = dlsym(handle, "omega_function");
	if (fn_b != fn_a)
		printf("  (libreplace_b.so at %p, not where libreplace_a.so was: %p)\n", fn_b, fn_a);
	/*
	 * Without a refresh the old list names it (A's module is still there):
	 * the drain refreshed only for addresses in no module, so it kept
	 * naming B's code alpha_function.
	 */
	if (fn_b == fn_a && tp_symbols_lookup(symbols, (uintptr_t) fn_b, false, &sym))
		printf("  before a refresh: %s (%s)\n", sym.function,
			   sym.module ? strrchr(sym.module, '/') + 1 : "?");
	/* The drain refreshes once per batch; the names after it are B's. */
	CHECK(tp_symbols_refresh(symbols));
	CHECK(!tp_symbols_refresh(symbols));
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) fn_b, false, &sym));
	CHECK_STR(sym.function, "omega_function");
	CHECK(sym.module != NULL && strstr(sym.module, "libreplace_b.so") != NULL);
	tp_symbols_free(symbols);
	dlclose(handle);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

static bool
read_whole(const char *path, unsigned char **data, size_t *size)
{
	struct stat st;
	int			fd = open(path, O_RDONLY);
	ssize_t		got;

	if (fd < 0 || fstat(fd, &st) != 0)
	{
		if (fd >= 0)
			close(fd);
		return false;
	}
	*size = (size_t) st.st_size;
	*data = malloc(*size);
	got = *data ? read(fd, *data, *size) : -1;
	close(fd);
	return got == (ssize_t) *size;
}

/* Truncated and corrupted copies of a real ELF file: no crash, no leak. */
/* libc read from the loader's memory names what its file's .dynsym names. */
static int
find_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void) size;
	if (strstr(info->dlpi_name, "/libc.so") == NULL)
		return 0;
	*(struct dl_phdr_info *) arg = *info;
	return 1;
}

TEST(loaded_image_matches_file)
{
	struct dl_phdr_info libc = {0};
	tp_elf_image memory;
	tp_elf_image file;
	unsigned char *data = NULL;
	size_t		size = 0;
	size_t		same = 0;

	CHECK(dl_iterate_phdr(find_libc, &libc) == 1);
	if (libc.dlpi_name == NULL || !read_whole(libc.dlpi_name, &data, &size))
		return;
	CHECK(tp_elf_image_read_loaded(libc.dlpi_addr, libc.dlpi_phdr, libc.dlpi_phnum,
								   NULL, 0, &memory));
	CHECK(tp_elf_image_read(data, size, NULL, 0, &file));
	CHECK(memory.nfuncs > 1000);
	CHECK(!memory.has_symtab);
	if (!file.has_symtab)
		CHECK(memory.nfuncs == file.nfuncs);
	for (size_t i = 0; i < memory.nfuncs; i++)
	{
		const tp_elf_func *f = tp_elf_find(&file, memory.funcs[i].addr);

		same += f != NULL && f->addr == memory.funcs[i].addr &&
			strcmp(file.names + f->name, memory.names + memory.funcs[i].name) == 0;
	}
	CHECK(same == memory.nfuncs);
	CHECK_STR(memory.build_id, file.build_id);
	tp_elf_image_free(&memory);
	tp_elf_image_free(&file);
	free(data);
}

/* Are the bytes at p in a read-only shared mapping of this process? */
static bool
in_shared_mapping(const void *p)
{
	unsigned long start,
				end;
	char		perms[5];

	return mapping_of((uintptr_t) p, &start, &end, perms) && strcmp(perms, "r--s") == 0;
}

TEST(shared_image_finds_what_the_private_one_did)
{
	struct dl_phdr_info libc = {0};
	unsigned char *data = NULL;
	size_t		size = 0;
	tp_elf_image private_image;
	tp_elf_image image;
	size_t		same = 0;

	CHECK(dl_iterate_phdr(find_libc, &libc) == 1);
	if (libc.dlpi_name == NULL || !read_whole(libc.dlpi_name, &data, &size))
		return;
	CHECK(tp_elf_image_read(data, size, NULL, 0, &private_image));
	CHECK(tp_elf_image_read(data, size, NULL, 0, &image));
	CHECK(!in_shared_mapping(image.funcs));
	CHECK(tp_elf_image_share(&image));
	CHECK(image.shared_len > 0 && in_shared_mapping(image.funcs) && in_shared_mapping(image.names));
	CHECK(tp_elf_image_share(&image));	/* once is enough */
	CHECK(image.nfuncs == private_image.nfuncs && image.nfuncs > 1000);
	for (size_t i = 0; i < private_image.nfuncs; i++)
	{
		const tp_elf_func *f = tp_elf_find(&image, private_image.funcs[i].addr);
		const tp_elf_func *g = tp_elf_find(&private_image, private_image.funcs[i].addr);

		same += f != NULL && g != NULL && f->addr == g->addr &&
			strcmp(image.names + f->name, private_image.names + g->name) == 0;
	}
	CHECK(same == private_image.nfuncs);
	tp_elf_image_free(&image);
	tp_elf_image_free(&private_image);
	free(data);
}

/* What tp_symbols_share() shares a forked child names from, as before. */
TEST(shared_symbols_name_functions_in_a_forked_child)
{
	tp_symbols *symbols = tp_symbols_load();
	tp_symbol	sym;
	pid_t		child;
	int			status = 0;

	CHECK(symbols != NULL);
	if (symbols == NULL)
		return;
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) keep_local, false, &sym));
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) (void *) malloc, false, &sym));
	tp_symbols_share(NULL);		/* a preload that read nothing */
	tp_symbols_share(symbols);
	CHECK(tp_symbols_lookup(symbols, (uintptr_t) keep_local, false, &sym));
	CHECK_STR(sym.function, "local_target");
	child = fork();
	if (child == 0)
	{
		bool		ok = tp_symbols_lookup(symbols, (uintptr_t) keep_global, false, &sym) &&
			strcmp(sym.function, "global_target") == 0 &&
			tp_symbols_lookup(symbols, (uintptr_t) (void *) malloc, false, &sym) &&
			strstr(sym.function, "malloc") != NULL;

		tp_symbols_free(symbols);
		_exit(ok ? 0 : 1);
	}
	CHECK(child > 0 && waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	tp_symbols_free(symbols);
}

TEST(corrupt_elf_files)
{
	unsigned char *data = NULL;
	size_t		size = 0;
	tp_elf_image image;
	size_t		funcs = 0;
	unsigned int seed = 12345;

	if (!read_whole("/proc/self/exe", &data, &size))
	{
		CHECK(false);
		free(data);
		return;
	}
	CHECK(tp_elf_image_read(data, size, NULL, 0, &image));
	funcs = image.nfuncs;
	CHECK(funcs > 10);
	CHECK(image.has_symtab);
	tp_elf_image_free(&image);

	for (size_t len = 0; len < size; len += len < 4096 ? 7 : 997)
	{
		if (tp_elf_image_read(data, len, NULL, 0, &image))
		{
			CHECK(image.nfuncs <= funcs);
			tp_elf_image_free(&image);
		}
		free(tp_elf_build_id(data, len));
	}
	for (int round = 0; round < 300; round++)
	{
		unsigned char *copy = malloc(size);

		memcpy(copy, data, size);
		for (int flips = 0; flips < 16; flips++)
		{
			size_t		at;

			seed = seed * 1103515245u + 12345u;
			/* Headers most of the time: that is where offsets live. */
			at = (round % 2 == 0) ? (seed >> 8) % 64 : (seed >> 4) % size;
			copy[at] = (unsigned char) (seed >> 16);
		}
		if (tp_elf_image_read(copy, size, copy, size, &image))
		{
			size_t		total = 0;

			/* Every name must be readable (valgrind checks the bytes). */
			for (size_t i = 0; i < image.nfuncs; i++)
				total += strlen(image.names + image.funcs[i].name);
			CHECK(total >= image.nfuncs);
			tp_elf_image_free(&image);
		}
		free(copy);
	}
	CHECK(!tp_elf_image_read(NULL, 0, NULL, 0, &image));
	CHECK(!tp_elf_image_read("not an elf file", 15, NULL, 0, &image));
	free(data);
}

/* Lookups are cheap enough to symbolize every frame of every sample. */
TEST(lookup_speed)
{
	tp_symbols *symbols = tp_symbols_load();
	struct timespec t0,
				t1,
				t2;
	tp_symbol	sym;
	int			n = 200000;
	int			found = 0;

	if (symbols == NULL)
	{
		CHECK(symbols != NULL);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	tp_symbols_lookup(symbols, (uintptr_t) (void *) getpid, false, &sym);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (int i = 0; i < n; i++)
		found += tp_symbols_lookup(symbols, (uintptr_t) (void *) getpid + (i % 8), false, &sym);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	CHECK(found == n);
	printf("  first libc lookup (parse) %.2f ms, then %.0f ns per lookup\n",
		   ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e6,
		   ((t2.tv_sec - t1.tv_sec) * 1e9 + (t2.tv_nsec - t1.tv_nsec)) / n);
	tp_symbols_free(symbols);
}

int
main(void)
{
	unit_main_return = __builtin_return_address(0);
	RUN(static_and_global_functions_of_the_executable);
	RUN(return_address_looks_up_the_byte_before);
	RUN(code_outside_functions);
	RUN(libc_function);
	RUN(process_start_outward_of_main);
	RUN(address_in_no_module);
	RUN(stripped_library_named_from_debug_file);
	RUN(stripped_library_names_its_last_function_whole);
	RUN(overlapping_symbols_name_the_covering_function);
	RUN(deleted_library_named_from_memory);
	RUN(vdso);
	RUN(refresh_picks_up_dlopen);
	RUN(refresh_reads_maps_only_after_dlopen_or_dlclose);
	RUN(library_replaced_at_the_same_address_is_named_anew);
	RUN(loaded_image_matches_file);
	RUN(shared_image_finds_what_the_private_one_did);
	RUN(shared_symbols_name_functions_in_a_forked_child);
	RUN(corrupt_elf_files);
	RUN(lookup_speed);
	return unit_summary();
}
