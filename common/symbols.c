/*
 * symbols.c - program counters to function names (see symbols.h).
 *
 * tp_symbols_load() only reads /proc/self/maps: a module's ELF file is
 * parsed the first time a lookup lands in it, since a backend's samples
 * touch a few of the dozens of libraries PostgreSQL maps.  Parsing copies
 * the names it keeps and unmaps the file.  Stripped files get their
 * .symtab from /usr/lib/debug/.build-id/xx/yyyy.debug when a debug package
 * is installed (checked by build id).
 *
 * tp_symbols_lookup() returns true when it names the function; out is
 * always filled (module fields set whenever pc is in a mapped file).
 *
 * Not thread-safe: one tp_symbols per thread, outside signal handlers.
 */
#include "symbols.h"

#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "elf_symbols.h"
#include "loader_counters.h"

#define DEBUG_ROOT "/usr/lib/debug"	/* TRACEPROF_DEBUG_DIR overrides */
#define DELETED_SUFFIX " (deleted)"

typedef struct module
{
	char	   *path;			/* from /proc/self/maps, without " (deleted)" */
	unsigned int dev_major;
	unsigned int dev_minor;
	uint64_t	inode;
	bool		is_exe;			/* open through /proc/self/exe */
	bool		is_vdso;		/* parse from memory */
	bool		loaded;			/* parse attempted */
	bool		usable;			/* parse succeeded */
	tp_elf_image image;
} module;

typedef struct range
{
	uintptr_t	start;
	uintptr_t	end;
	uint64_t	offset;
	module	   *module;
	bool		bias_known;
	uintptr_t	bias;
} range;

struct tp_symbols
{
	range	   *ranges;			/* executable mappings, sorted by start */
	size_t		nranges;
	module	  **modules;		/* every module ever seen, kept for its strings */
	size_t		nmodules;
	size_t		modules_capacity;
	struct stat exe;			/* of /proc/self/exe */
	bool		exe_known;
	char	   *exe_path;		/* readlink of /proc/self/exe */
	unsigned long maps_reads;	/* of /proc/self/maps */
	bool		counted;		/* the loader's counters below are known */
	unsigned long long adds;	/* dlpi_adds, dlpi_subs before the last read */
	unsigned long long subs;
};

typedef struct mapped_file
{
	void	   *data;
	size_t		size;
} mapped_file;

/* Map path read-only if it is the file with this inode (0: any). */
static bool
map_file(const char *path, uint64_t inode, mapped_file *out)
{
	struct stat st;
	int			fd = open(path, O_RDONLY | O_CLOEXEC);

	out->data = NULL;
	out->size = 0;
	if (fd < 0)
		return false;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
		(inode != 0 && (uint64_t) st.st_ino != inode))
	{
		close(fd);
		return false;
	}
	out->data = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (out->data == MAP_FAILED)
	{
		out->data = NULL;
		return false;
	}
	out->size = (size_t) st.st_size;
	return true;
}

static void
unmap_file(mapped_file *file)
{
	if (file->data != NULL)
		munmap(file->data, file->size);
	file->data = NULL;
}

/* The separate debug file for build_id, if installed and really its. */
static bool
map_debug_file(const char *build_id, mapped_file *out)
{
	char		path[PATH_MAX];
	const char *root = getenv("TRACEPROF_DEBUG_DIR");	/* like gdb's debug-file-directory */
	char	   *id;
	bool		same;

	if (build_id == NULL || strlen(build_id) < 4 || strlen(build_id) > 128)
		return false;
	if (root == NULL || root[0] == '\0')
		root = DEBUG_ROOT;
	snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", root, build_id, build_id + 2);
	if (!map_file(path, 0, out))
		return false;
	id = tp_elf_build_id(out->data, out->size);
	same = id != NULL && strcmp(id, build_id) == 0;
	free(id);
	if (!same)
		unmap_file(out);
	return same;
}

/* The loaded object holding an address, read from its memory. */
typedef struct loaded_search
{
	uintptr_t	addr;
	module	   *mod;
	bool		found;
} loaded_search;

static int
read_loaded_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	loaded_search *search = arg;
	module	   *mod = search->mod;
	mapped_file debug = {0};
	const char *slash;
	char	   *id;
	bool		holds = false;

	(void) size;
	for (size_t i = 0; i < info->dlpi_phnum && !holds; i++)
		holds = info->dlpi_phdr[i].p_type == PT_LOAD &&
			search->addr - info->dlpi_addr - info->dlpi_phdr[i].p_vaddr < info->dlpi_phdr[i].p_memsz;
	if (!holds)
		return 0;
	search->found = true;
	id = tp_elf_build_id_loaded(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum);
	map_debug_file(id, &debug);
	free(id);
	mod->usable = tp_elf_image_read_loaded(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum,
										   debug.data, debug.size, &mod->image);
	if (mod->usable && !mod->image.has_symtab)
	{
		slash = strrchr(mod->path, '/');
		mod->usable = tp_elf_add_unwind_functions_loaded(info->dlpi_addr, info->dlpi_phdr,
														 info->dlpi_phnum,
														 slash ? slash + 1 : mod->path,
														 &mod->image);
	}
	unmap_file(&debug);
	return 1;
}

static void
load_module(module *mod, const range *r)
{
	mapped_file file = {0};
	mapped_file debug = {0};
	char		alt[64];

	mod->loaded = true;
	if (mod->is_vdso)
	{
		/* The kernel maps the whole vDSO image, section headers included. */
		unsigned long base = getauxval(AT_SYSINFO_EHDR);

		if (base != 0 && base == r->start)
			mod->usable = tp_elf_image_read((const void *) base, r->end - r->start,
											NULL, 0, &mod->image);
		return;
	}

	/*
	 * The inode check catches a file replaced on disk since it was mapped
	 * (a package or extension upgrade): its symbols would be wrong.
	 * map_files still reaches the mapped file, for those allowed to open it
	 * (CAP_SYS_ADMIN: not the postgres user); otherwise the loader's copy
	 * in memory has .dynsym, the build id and the unwind table.
	 */
	if (!map_file(mod->is_exe ? "/proc/self/exe" : mod->path, mod->inode, &file))
	{
		snprintf(alt, sizeof(alt), "/proc/self/map_files/%lx-%lx",
				 (unsigned long) r->start, (unsigned long) r->end);
		if (!map_file(alt, mod->inode, &file))
		{
			loaded_search search = {r->start, mod, false};

			dl_iterate_phdr(read_loaded_object, &search);
			return;
		}
	}
	if (!tp_elf_has_symtab(file.data, file.size))
	{
		char	   *id = tp_elf_build_id(file.data, file.size);

		map_debug_file(id, &debug);
		free(id);
	}
	mod->usable = tp_elf_image_read(file.data, file.size, debug.data, debug.size,
									&mod->image);
	/* Stripped and no debug file: keep static functions apart by address. */
	if (mod->usable && !mod->image.has_symtab)
	{
		const char *slash = strrchr(mod->path, '/');

		mod->usable = tp_elf_add_unwind_functions(file.data, file.size,
												  slash ? slash + 1 : mod->path, &mod->image);
	}
	unmap_file(&debug);
	unmap_file(&file);
}

static module *
find_or_add_module(tp_symbols *symbols, const char *path, unsigned int dev_major,
				   unsigned int dev_minor, uint64_t inode)
{
	module	   *mod;

	for (size_t i = 0; i < symbols->nmodules; i++)
	{
		mod = symbols->modules[i];
		if (mod->inode == inode && mod->dev_major == dev_major &&
			mod->dev_minor == dev_minor && strcmp(mod->path, path) == 0)
			return mod;
	}
	if (symbols->nmodules == symbols->modules_capacity)
	{
		size_t		capacity = symbols->modules_capacity ? symbols->modules_capacity * 2 : 32;
		module	  **grown = realloc(symbols->modules, capacity * sizeof(module *));

		if (grown == NULL)
			return NULL;
		symbols->modules = grown;
		symbols->modules_capacity = capacity;
	}
	mod = calloc(1, sizeof(module));
	if (mod == NULL)
		return NULL;
	mod->path = strdup(path);
	if (mod->path == NULL)
	{
		free(mod);
		return NULL;
	}
	mod->dev_major = dev_major;
	mod->dev_minor = dev_minor;
	mod->inode = inode;
	mod->is_vdso = strcmp(path, "[vdso]") == 0;

	/*
	 * The executable: PostgreSQL rewrites argv[0], and /proc/self/exe
	 * still opens a binary deleted by an upgrade.  Overlay filesystems can
	 * report another device in maps than stat() does, hence the path test.
	 */
	if (symbols->exe_known && inode != 0 && (uint64_t) symbols->exe.st_ino == inode &&
		((dev_major == major(symbols->exe.st_dev) && dev_minor == minor(symbols->exe.st_dev)) ||
		 (symbols->exe_path != NULL && strcmp(symbols->exe_path, path) == 0)))
		mod->is_exe = true;
	symbols->modules[symbols->nmodules++] = mod;
	return mod;
}

/* The counters now, false if the loader does not report them. */
static bool
loader_counters(unsigned long long *adds, unsigned long long *subs)
{
	unsigned long long counters[2] = {0, 0};

	if (!tp_loader_counters(counters))
		return false;
	*adds = counters[0];
	*subs = counters[1];
	return true;
}

/* Rebuild the list of executable mappings; modules already seen are kept. */
static bool
read_maps(tp_symbols *symbols)
{
	/* Counters first: a load while the file is read is seen next time. */
	bool		counted = loader_counters(&symbols->adds, &symbols->subs);
	FILE	   *maps = fopen("/proc/self/maps", "re");
	char	   *line = NULL;
	size_t		line_cap = 0;
	range	   *ranges = NULL;
	size_t		nranges = 0;
	size_t		capacity = 0;
	bool		ok = true;

	if (maps == NULL)
		return false;
	symbols->maps_reads++;
	while (getline(&line, &line_cap, maps) > 0)
	{
		unsigned long start,
					end,
					offset,
					inode;
		unsigned int dev_major,
					dev_minor;
		char		perms[5];
		int			path_at = 0;
		char	   *path;
		size_t		len;
		module	   *mod;

		if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &start, &end, perms,
				   &offset, &dev_major, &dev_minor, &inode, &path_at) < 7 ||
			path_at == 0 || perms[2] != 'x' || end <= start)
			continue;
		path = line + path_at;
		len = strlen(path);
		while (len > 0 && (path[len - 1] == '\n' || path[len - 1] == ' '))
			path[--len] = '\0';
		if (len > strlen(DELETED_SUFFIX) &&
			strcmp(path + len - strlen(DELETED_SUFFIX), DELETED_SUFFIX) == 0)
			path[len - strlen(DELETED_SUFFIX)] = '\0';

		/* Anonymous code (JIT) has no symbols to read. */
		if (path[0] != '/' && strcmp(path, "[vdso]") != 0)
			continue;
		mod = find_or_add_module(symbols, path, dev_major, dev_minor, inode);
		if (mod == NULL)
		{
			ok = false;
			break;
		}
		if (nranges == capacity)
		{
			size_t		grown_capacity = capacity ? capacity * 2 : 64;
			range	   *grown = realloc(ranges, grown_capacity * sizeof(range));

			if (grown == NULL)
			{
				ok = false;
				break;
			}
			ranges = grown;
			capacity = grown_capacity;
		}
		memset(&ranges[nranges], 0, sizeof(range));
		ranges[nranges].start = start;
		ranges[nranges].end = end;
		ranges[nranges].offset = offset;
		ranges[nranges].module = mod;
		nranges++;
	}
	free(line);
	fclose(maps);
	if (!ok)
	{
		free(ranges);
		return false;
	}
	/* The kernel lists mappings in address order; binary search needs it. */
	for (size_t i = 1; i < nranges; i++)
	{
		if (ranges[i].start < ranges[i - 1].end)
		{
			free(ranges);
			return false;
		}
	}
	free(symbols->ranges);
	symbols->ranges = ranges;
	symbols->nranges = nranges;
	symbols->counted = counted;
	return true;
}

tp_symbols *
tp_symbols_load(void)
{
	tp_symbols *symbols = calloc(1, sizeof(tp_symbols));
	char		exe_path[4096];
	ssize_t		len;

	if (symbols == NULL)
		return NULL;
	symbols->exe_known = stat("/proc/self/exe", &symbols->exe) == 0;
	len = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
	if (len > 0)
	{
		exe_path[len] = '\0';
		if ((size_t) len > strlen(DELETED_SUFFIX) &&
			strcmp(exe_path + len - strlen(DELETED_SUFFIX), DELETED_SUFFIX) == 0)
			exe_path[len - strlen(DELETED_SUFFIX)] = '\0';
		symbols->exe_path = strdup(exe_path);
	}
	if (!read_maps(symbols))
	{
		tp_symbols_free(symbols);
		return NULL;
	}
	return symbols;
}

bool
tp_symbols_refresh(tp_symbols *symbols)
{
	unsigned long long adds;
	unsigned long long subs;

	if (symbols == NULL)
		return false;
	if (symbols->counted && loader_counters(&adds, &subs) &&
		adds == symbols->adds && subs == symbols->subs)
		return false;
	/* On failure the previous list stays: stale beats empty. */
	if (!read_maps(symbols))
	{
		symbols->counted = false;
		return false;
	}
	return true;
}

unsigned long
tp_symbols_maps_reads(const tp_symbols *symbols)
{
	return symbols != NULL ? symbols->maps_reads : 0;
}

static range *
find_range(tp_symbols *symbols, uintptr_t addr)
{
	size_t		lo = 0;
	size_t		hi = symbols->nranges;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (symbols->ranges[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= symbols->ranges[lo - 1].end)
		return NULL;
	return &symbols->ranges[lo - 1];
}

bool
tp_symbols_lookup(tp_symbols *symbols, uintptr_t pc,
				  bool is_return_address, tp_symbol *out)
{
	uintptr_t	addr = (is_return_address && pc > 0) ? pc - 1 : pc;
	range	   *r;
	module	   *mod;
	const tp_elf_func *func;

	memset(out, 0, sizeof(*out));
	if (symbols == NULL || (r = find_range(symbols, addr)) == NULL)
		return false;
	mod = r->module;
	if (!mod->loaded)
		load_module(mod, r);
	out->module = mod->path;
	out->in_executable = mod->is_exe;
	out->module_start = r->start;
	out->module_end = r->end;
	out->module_offset = r->offset;
	if (!mod->usable)
		return false;
	out->build_id = mod->image.build_id;
	if (!r->bias_known)
		r->bias_known = tp_elf_load_bias(&mod->image, r->start, r->offset, &r->bias);
	if (!r->bias_known)
		return false;
	func = tp_elf_find(&mod->image, (uint64_t) (addr - r->bias));
	if (func == NULL)
		return false;
	out->function = mod->image.names + func->name;
	out->function_start = (uintptr_t) func->addr + r->bias;
	out->synthetic = func->synthetic;
	return true;
}

void
tp_symbols_share(tp_symbols *symbols)
{
	if (symbols == NULL)
		return;
	for (size_t i = 0; i < symbols->nmodules; i++)
		if (symbols->modules[i]->usable)
			(void) tp_elf_image_share(&symbols->modules[i]->image);
}

void
tp_symbols_free(tp_symbols *symbols)
{
	if (symbols == NULL)
		return;
	for (size_t i = 0; i < symbols->nmodules; i++)
	{
		tp_elf_image_free(&symbols->modules[i]->image);
		free(symbols->modules[i]->path);
		free(symbols->modules[i]);
	}
	free(symbols->modules);
	free(symbols->ranges);
	free(symbols->exe_path);
	free(symbols);
}

bool
tp_symbol_is_process_start(const char *function)
{
	static const char *const names[] = {
		"_start", "__libc_start_main", "__libc_start_main_impl", "__libc_start_call_main",
	};

	if (function == NULL)
		return false;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(function, names[i]) == 0)
			return true;
	return false;
}
