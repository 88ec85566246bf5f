/* The executable PT_LOAD segments of the loaded objects (dl_iterate_phdr),
 * matched with their mappings in /proc/self/maps. */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "../prim/prim.h"
#include "../stats.h"
#include "folios.h"
#include "remap.h"
#include "segments.h"
#include "maps.h"

struct collect {
	struct hz_exec_segment *out;
	unsigned max, count, index, first;
	uintptr_t vdso;  /* AT_SYSINFO_EHDR */
	uintptr_t mover; /* an address inside hugezero's remap code */
	bool overflow;
};

static bool object_holds(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && addr >= start && addr - start < ph->p_memsz)
			return true;
	}
	return false;
}

static int collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct collect *c = data;
	unsigned index = c->index++;
	bool vdso, mover;

	(void)size;
	if (index < c->first)
		return 0;
	vdso = c->vdso != 0 && object_holds(info, c->vdso);
	mover = object_holds(info, c->mover);
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		struct hz_exec_segment *s;
		uintptr_t start;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz == 0)
			continue;
		if (c->count == c->max) {
			c->overflow = true;
			return 0;
		}
		s = &c->out[c->count++];
		memset(s, 0, sizeof(*s));
		start = info->dlpi_addr + ph->p_vaddr;
		s->map.start = hz_align_down(start, HZ_SZ_4K);
		s->map.end = hz_align_up(start + ph->p_memsz, HZ_SZ_4K);
		/* ELF promises p_vaddr == p_offset modulo the page size. */
		s->file_off = hz_align_down(ph->p_offset, HZ_SZ_4K);
		s->file_len = ph->p_filesz + (start - s->map.start);
		s->base = info->dlpi_addr;
		s->name = info->dlpi_name ? info->dlpi_name : "";
		s->object = index;
		s->readable = (ph->p_flags & PF_R) != 0;
		s->main_program = index == 0;
		s->vdso = vdso;
		s->mover = mover;
	}
	return 0;
}

int hz_exec_segments(struct hz_exec_segment *out, unsigned max,
		     unsigned first_object, unsigned *count, unsigned *objects)
{
	struct collect c = {
		.out = out,
		.max = max,
		.first = first_object,
		.vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR),
		.mover = (uintptr_t)&hz_exec_remap_segment,
	};

	dl_iterate_phdr(collect_object, &c);
	*count = c.count;
	*objects = c.index;
	return c.overflow ? -E2BIG : 0;
}

struct counters {
	unsigned objects;
	uint64_t adds, subs;
};

static int count_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct counters *c = data;

	if (c->objects++ == 0 &&
	    size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		c->adds = info->dlpi_adds;
		c->subs = info->dlpi_subs;
	}
	return 0;
}

void hz_exec_objects(unsigned *objects, uint64_t *adds, uint64_t *subs)
{
	struct counters c = { 0, 0, 0 };

	dl_iterate_phdr(count_object, &c);
	*objects = c.objects;
	*adds = c.adds;
	*subs = c.subs;
}

const char *hz_exec_segment_path(const struct hz_exec_segment *s)
{
	return s->main_program || s->name[0] == '\0' ? hz_prim_self_exe_path() : s->name;
}

static void sort_by_address(struct hz_exec_segment *segs, unsigned count)
{
	/* Insertion sort: dl_iterate_phdr order is nearly sorted already and
	 * there are at most a few hundred segments. */
	for (unsigned i = 1; i < count; i++) {
		struct hz_exec_segment s = segs[i];
		unsigned j = i;

		for (; j > 0 && segs[j - 1].map.start > s.map.start; j--)
			segs[j] = segs[j - 1];
		segs[j] = s;
	}
}

int hz_exec_segments_match_maps(struct hz_exec_segment *segs, unsigned count)
{
	static struct hz_maps maps; /* 8 KiB; callers hold the exec lock */
	struct hz_map m;
	unsigned i = 0;
	int ret;

	sort_by_address(segs, count);
	for (unsigned k = 0; k < count; k++)
		segs[k].vma = (struct hz_range){ 0, 0 };
	ret = hz_maps_open(&maps, 0, false);
	if (ret != 0)
		return ret;
	/* Both lists are sorted: one merge pass. */
	while (i < count && (ret = hz_maps_next(&maps, &m)) == 1) {
		while (i < count && segs[i].map.start < m.range.start)
			i++;
		for (unsigned k = i; k < count && hz_range_contains(m.range, segs[k].map.start); k++) {
			segs[k].vma = m.range;
			segs[k].vma_prot = m.prot;
			segs[k].vma_private_file = !m.shared && m.inode != 0;
		}
	}
	hz_maps_close(&maps);
	return ret < 0 ? ret : 0;
}
