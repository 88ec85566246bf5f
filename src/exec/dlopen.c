/* dlopen through hugezero: the file found the way ld.so would, prewarmed
 * before the real call, and the mode applied to what the call loaded. See
 * dlopen.h. */
#include "dlopen.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../prim/prim.h"
#include "../stats.h"
#include "apply.h"
#include "folios.h"
#include "mode.h"
#include "prewarm.h"
#include "segments.h"

/* This thread is inside hz_exec_dlopen (see there). */
static __thread bool in_dlopen;

#if defined(__x86_64__)
#define NATIVE_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define NATIVE_MACHINE EM_AARCH64
#endif

/* What ld.so's open_verify checks before it takes a file found in a
 * search directory: a file that fails any of it is skipped and the search
 * goes on (multi-arch trees put other machines' builds of a library in
 * earlier directories). Its ABI note check is left out: a note that
 * refuses the running kernel is for kernels older than 3.2. */
static bool header_loadable(const Elf64_Ehdr *eh)
{
	static const unsigned char pad[EI_NIDENT - EI_PAD];
	const unsigned char *id = eh->e_ident;

	return memcmp(id, ELFMAG, SELFMAG) == 0 && id[EI_CLASS] == ELFCLASS64 &&
	       id[EI_DATA] == ELFDATA2LSB && id[EI_VERSION] == EV_CURRENT &&
	       (id[EI_OSABI] == ELFOSABI_GNU ||
		(id[EI_OSABI] == ELFOSABI_SYSV && id[EI_ABIVERSION] == 0)) &&
	       memcmp(id + EI_PAD, pad, sizeof(pad)) == 0 && eh->e_version == EV_CURRENT &&
#ifdef NATIVE_MACHINE
	       eh->e_machine == NATIVE_MACHINE &&
#endif
	       (eh->e_type == ET_DYN || eh->e_type == ET_EXEC) &&
	       eh->e_phentsize == sizeof(Elf64_Phdr);
}

/* Whether ld.so would load the file at path rather than skip it. The
 * header is read through the prewarm's advised mapping: a cold file's
 * first 2 MiB window then becomes one large folio, as the prewarm itself
 * would have read it, instead of the 4 KiB pages a read() leaves. */
static bool loadable(const char *path)
{
	uint64_t size = 0;
	int fd = hz_prim_open_read(path);
	bool ok = false;
	void *map;

	if (fd < 0)
		return false;
	if (hz_prim_file_size(fd, &size) == 0 && size >= sizeof(Elf64_Ehdr) &&
	    hz_exec_map_for_prewarm(fd, size, &map) == 0) {
		ok = header_loadable(map);
		hz_prim_munmap(map, hz_align_up(size, HZ_SZ_4K));
	}
	hz_prim_close(fd);
	return ok;
}

/* The system directories: ld.so looks there (and in /etc/ld.so.cache,
 * before them) whoever calls dlopen. */
static bool system_dir(const char *dir, size_t len)
{
	static const char *const dirs[] = {
#if defined(__x86_64__)
		"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
#elif defined(__aarch64__)
		"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
#endif
		"/lib64", "/usr/lib64", "/lib", "/usr/lib",
	};

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		size_t n = strlen(dirs[i]);

		/* The directory itself or one of its glibc-hwcaps/ subdirectories. */
		if (len >= n && strncmp(dir, dirs[i], n) == 0 && (len == n || dir[n] == '/'))
			return true;
	}
	return false;
}

/* dlopen(file) looks in directories that depend on its caller (DT_RPATH,
 * DT_RUNPATH with $ORIGIN, LD_LIBRARY_PATH) before the cache and the system
 * directories. Called from here, the real dlopen would take hugezero for
 * the caller and miss the caller's own directories; so for names without a
 * slash the caller's search list (dlinfo RTLD_DI_SERINFO) is walked here,
 * system directories excluded, and the first file ld.so would take is
 * passed on as a path. The walk has to happen before the call: ld.so finds
 * the caller from the return address, which no call from here can give. */
static bool caller_dir_path(const char *file, const void *caller, char *path, size_t size)
{
	union {
		Dl_serinfo info;
		char buf[8192];
	} u;
	Dl_serinfo sizes;
	struct link_map *lm = NULL;
	Dl_info where;

	if (caller == NULL || dladdr1(caller, &where, (void **)&lm, RTLD_DL_LINKMAP) == 0 ||
	    lm == NULL)
		return false;
	if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &sizes) != 0 || sizes.dls_size > sizeof(u))
		return false;
	u.info.dls_size = sizes.dls_size;
	u.info.dls_cnt = sizes.dls_cnt;
	if (dlinfo(lm, RTLD_DI_SERINFO, &u.info) != 0)
		return false;
	for (unsigned i = 0; i < u.info.dls_cnt; i++) {
		const char *dir = u.info.dls_serpath[i].dls_name;
		size_t len = strlen(dir);

		while (len > 1 && dir[len - 1] == '/')
			len--;
		if (len == 0 || system_dir(dir, len))
			continue;
		if ((size_t)snprintf(path, size, "%.*s/%s", (int)len, dir, file) < size &&
		    loadable(path))
			return true;
	}
	return false;
}

/* The file a caller-independent search finds (for the prewarm only):
 * the system directories. /etc/ld.so.cache is not read: a library found
 * only through it is loaded without a prewarm. */
static bool system_path(const char *file, char *path, size_t size)
{
	static const char *const dirs[] = {
#if defined(__x86_64__)
		"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
#elif defined(__aarch64__)
		"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
#endif
		"/lib64", "/usr/lib64", "/lib", "/usr/lib",
	};

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if ((size_t)snprintf(path, size, "%s/%s", dirs[i], file) < size && loadable(path))
			return true;
	return false;
}

/* The file the call will load, for the prewarm: *load becomes the path
 * when the name is found in the caller's own directories (see
 * caller_dir_path). Returns false when the file is not known. */
static bool find_file(void *(*real_dlopen)(const char *, int), const char *file,
		      const void *caller, char *path, size_t size, const char **load)
{
	void *handle;

	if (strchr(file, '/') != NULL)
		return (size_t)snprintf(path, size, "%s", file) < size;
	/* Loaded already (matched by name or soname, whoever asks): nothing
	 * to prewarm, and the name goes through unchanged. */
	handle = real_dlopen(file, RTLD_LAZY | RTLD_NOLOAD);
	if (handle != NULL) {
		dlclose(handle);
		return false;
	}
	if (caller_dir_path(file, caller, path, size)) {
		*load = path;
		return true;
	}
	return system_path(file, path, size);
}

/* hz_exec_dlopen calls in progress and begun: a call that overlapped
 * another one cannot tell its objects from the other's. */
static unsigned inflight;
static unsigned long begun;

struct before_call {
	unsigned objects, threads, inflight;
	uint64_t adds, subs;
	unsigned long begun;
};

/* Apply the mode to what the call loaded. Another thread's dlopen may
 * have run at the same time (no lock is held across the real call: see
 * hz_exec_dlopen), so what was loaded meanwhile is treated as ours:
 * advising it twice is harmless, moving it is not (its own thread may be
 * running its constructors), so remap waits for a call that ran alone. */
static void apply_loaded(enum hz_exec_mode mode, const struct before_call *b)
{
	unsigned objects, threads = 0, first = b->objects;
	uint64_t adds, subs;
	char why[64] = "";

	hz_exec_objects(&objects, &adds, &subs);
	if (adds == b->adds)
		return;
	hz_prim_thread_count(&threads);
	if (threads > b->threads)
		snprintf(why, sizeof(why), "its constructors started threads");
	if (b->inflight != 0 || __atomic_load_n(&begun, __ATOMIC_RELAXED) != b->begun + 1)
		snprintf(why, sizeof(why), "another dlopen ran meanwhile");
	/* An unload in between (another thread's dlclose) shifts the
	 * indexes: advise everything again (idempotent), but move nothing
	 * that was loaded before this call. */
	if (subs != b->subs) {
		first = 0;
		snprintf(why, sizeof(why), "objects were unloaded meanwhile");
	}
	hz_exec_stat_add(dlopens, 1);
	hz_exec_apply(mode, first, why[0] == '\0', why);
}

/* No lock of ours is held across the real dlopen: glibc's loader lock is
 * taken inside it, and a constructor that runs under that lock (a load
 * that did not come through here: dlmopen, NSS, iconv) may call dlopen,
 * which comes here; a lock taken before the loader's would deadlock it
 * with another thread waiting for the loader inside our lock. */
void *hz_exec_dlopen(void *(*real_dlopen)(const char *, int), const char *file,
		     int flags, const void *caller)
{
	enum hz_exec_mode mode = hz_exec_mode();
	struct hz_prewarm_result res;
	struct before_call b = { 0 };
	const char *load = file;
	char path[512];
	void *handle;
	int saved;

	/* A dlopen from a constructor of a library being opened: the outer
	 * call handles every object loaded inside it. */
	if (mode == HZ_EXEC_OFF || mode == HZ_EXEC_REPORT || file == NULL ||
	    (flags & RTLD_NOLOAD) || in_dlopen)
		return real_dlopen(file, flags);
	in_dlopen = true;
	b.inflight = __atomic_fetch_add(&inflight, 1, __ATOMIC_RELAXED);
	b.begun = __atomic_fetch_add(&begun, 1, __ATOMIC_RELAXED);
	hz_exec_objects(&b.objects, &b.adds, &b.subs);
	if (find_file(real_dlopen, file, caller, path, sizeof(path), &load) &&
	    hz_exec_prewarm_file(path, false, &res) == 0 && res.populated) {
		hz_exec_stat_add(prewarmed_bytes, res.populated);
		hz_exec_stat_add(prewarm_ns, res.ns);
	}
	hz_prim_thread_count(&b.threads);
	handle = real_dlopen(load, flags);
	saved = errno;
	if (handle != NULL)
		apply_loaded(mode, &b);
	__atomic_fetch_sub(&inflight, 1, __ATOMIC_RELAXED);
	in_dlopen = false;
	errno = saved;
	return handle;
}
