/* The generated test library. See gen.h. */
#include "gen.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "exec/exec.h"

int hz_gen_build(const char *cc, const char *dir, int functions)
{
	char path[512], cmd[1600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/gen.c", dir);
	f = fopen(path, "w");
	if (f == NULL) {
		perror(path);
		return -1;
	}
	/* .fill, not a C body: the assembler emits 64 KiB in one directive,
	 * so 6 MiB of text compile in a fraction of a second. */
	fprintf(f, "#if defined(__x86_64__)\n#define PAD \".fill 65536,1,0x90\"\n"
		   "#else\n#define PAD \".fill 16384,4,0xd503201f\"\n#endif\n");
	for (int i = 0; i < functions; i++)
		fprintf(f, "long hzgen_f%d(long x) { __asm__ volatile(PAD); "
			   "return x * %d + %d; }\n", i, 2 * i + 1, i);
	fprintf(f, "long (*const hzgen_table[])(long) = {\n");
	for (int i = 0; i < functions; i++)
		fprintf(f, "\thzgen_f%d,\n", i);
	fprintf(f, "};\nconst int hzgen_count = %d;\n", functions);
	if (fclose(f) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "'%s' -O1 -fPIC -shared -Wl,-soname,libhzgen.so -o '%s/libhzgen.so' '%s'",
		 cc, dir, path);
	if (system(cmd) != 0) {
		fprintf(stderr, "failed: %s\n", cmd);
		return -1;
	}
	return 0;
}

int64_t hz_gen_drop(const char *path)
{
	uint64_t cached = 0;
	int fd = open(path, O_RDONLY);
	off_t size;

	if (fd < 0)
		return -1;
	size = lseek(fd, 0, SEEK_END);
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (hz_exec_cached_bytes(fd, 0, (uint64_t)size, &cached) != 0) {
		close(fd);
		return -1;
	}
	close(fd);
	return (int64_t)cached;
}

int64_t hz_gen_copy_cold(const char *src, const char *dst)
{
	static char buf[1 << 16];
	int in = open(src, O_RDONLY), out;
	ssize_t n;

	if (in < 0)
		return -1;
	unlink(dst);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			n = -1;
	close(in);
	if (n < 0 || fsync(out) != 0 || close(out) != 0)
		return -1;
	return hz_gen_drop(dst);
}

int hz_gen_check(void *handle)
{
	long (*const *table)(long) = dlsym(handle, "hzgen_table");
	const int *count = dlsym(handle, "hzgen_count");
	int bad = 0;

	if (table == NULL || count == NULL)
		return -1;
	for (int i = 0; i < *count; i++)
		if (table[i](1000) != 1000L * (2 * i + 1) + i)
			bad++;
	return bad;
}
