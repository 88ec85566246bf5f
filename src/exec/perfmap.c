/* /tmp/perf-PID.map lines for remapped text.
 *
 * After a remap the text is anonymous memory: perf (and other profilers that
 * read the JIT convention "START SIZE name" in hex) no longer find the file
 * behind those addresses. The symbols come from the file's .symtab when it
 * has one, else from .dynsym (stripped binaries: exported functions only). */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "../prim/prim.h"
#include "../stats.h"
#include "perfmap.h"

struct out {
	int fd;
	size_t used;
	uint64_t lines;
	char buf[4096];
};

static void flush(struct out *o)
{
	if (o->used)
		hz_prim_write_all(o->fd, o->buf, o->used);
	o->used = 0;
}

static void emit(struct out *o, uintptr_t start, size_t len, const char *name,
		 size_t name_len)
{
	char line[400];
	int n;

	if (name_len > 300)
		name_len = 300;
	n = snprintf(line, sizeof(line), "%lx %zx %.*s\n", (unsigned long)start, len,
		     (int)name_len, name);
	if (n <= 0 || (size_t)n >= sizeof(line))
		return;
	if (o->used + (size_t)n > sizeof(o->buf))
		flush(o);
	memcpy(o->buf + o->used, line, (size_t)n);
	o->used += (size_t)n;
	o->lines++;
}

/* The symbol table to use: .symtab, else .dynsym; with its string table. */
static int find_symbols(const unsigned char *map, uint64_t size,
			const Elf64_Shdr **sym, const Elf64_Shdr **str)
{
	const Elf64_Ehdr *eh = (const void *)map;
	const Elf64_Shdr *sh;

	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    eh->e_shoff > size || (uint64_t)eh->e_shnum * sizeof(*sh) > size - eh->e_shoff)
		return -ENOEXEC;
	sh = (const void *)(map + eh->e_shoff);
	*sym = NULL;
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type == SHT_SYMTAB ||
		    (sh[i].sh_type == SHT_DYNSYM && *sym == NULL))
			*sym = &sh[i];
	}
	if (*sym == NULL || (*sym)->sh_link >= eh->e_shnum)
		return -ENOENT;
	*str = &sh[(*sym)->sh_link];
	if ((*sym)->sh_offset > size || (*sym)->sh_size > size - (*sym)->sh_offset ||
	    (*str)->sh_offset > size || (*str)->sh_size > size - (*str)->sh_offset)
		return -ENOEXEC;
	return 0;
}

/* Lines for the functions inside moved ranges; returns lines per range in
 * found[] so empty ranges get a fallback line. */
static void emit_symbols(struct out *o, const unsigned char *map, uint64_t size,
			 uintptr_t base, const struct hz_range *moved,
			 unsigned count, uint64_t *found)
{
	const Elf64_Shdr *symsh, *strsh;
	const Elf64_Sym *syms;
	const char *strs;

	if (find_symbols(map, size, &symsh, &strsh) != 0)
		return;
	syms = (const void *)(map + symsh->sh_offset);
	strs = (const char *)map + strsh->sh_offset;
	for (uint64_t i = 0; i < symsh->sh_size / sizeof(*syms); i++) {
		const Elf64_Sym *sym = &syms[i];
		struct hz_range r;
		int type = ELF64_ST_TYPE(sym->st_info);

		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    sym->st_shndx == SHN_UNDEF || sym->st_size == 0 ||
		    sym->st_name >= strsh->sh_size)
			continue;
		r = hz_range_make(base + sym->st_value, sym->st_size);
		for (unsigned k = 0; k < count; k++) {
			struct hz_range in = hz_range_clamp(r, moved[k]);
			const char *name = strs + sym->st_name;

			if (hz_range_empty(in))
				continue;
			emit(o, in.start, hz_range_len(in), name,
			     strnlen(name, strsh->sh_size - sym->st_name));
			found[k]++;
		}
	}
}

int hz_exec_perfmap_write(const char *path, uintptr_t base,
			  const struct hz_range *moved, unsigned count)
{
	static struct out o; /* callers hold the exec lock */
	uint64_t size = 0, found[64] = { 0 };
	void *map = NULL;
	int fd, ret;

	/* A set-user-ID program does not write files in /tmp for its user. */
	if (getauxval(AT_SECURE))
		return -EPERM;
	if (count > 64)
		count = 64;
	o.fd = hz_prim_open_perfmap();
	if (o.fd < 0)
		return o.fd;
	o.used = 0;
	o.lines = 0;
	fd = hz_prim_open_read(path);
	if (fd >= 0) {
		if (hz_prim_file_size(fd, &size) == 0 && size > 0 &&
		    hz_prim_mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0, &map) == 0) {
			emit_symbols(&o, map, size, base, moved, count, found);
			hz_prim_munmap(map, size);
		}
		hz_prim_close(fd);
	}
	for (unsigned k = 0; k < count; k++)
		if (found[k] == 0)
			emit(&o, moved[k].start, hz_range_len(moved[k]), path, strlen(path));
	flush(&o);
	ret = hz_prim_close(o.fd);
	hz_exec_stat_add(perfmap_lines, o.lines);
	return ret;
}
