/* hugezero-prewarm [--force] [--drop] FILE...
 *
 * Read the executable text of each file into the page cache as 2 MiB folios
 * before a program maps it, so that program's text gets large folios from
 * its first instruction (a program cannot do this for its own main
 * executable: the kernel has read its first pages by then). For launchers
 * and boot scripts. Files whose text is mostly cached already are left
 * alone: their cached 4 KiB folios would stay 4 KiB (--drop asks the kernel
 * to drop them first, which it does for pages no process maps). */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "exec/exec.h"
#include "prim/prim.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: hugezero-prewarm [--force] [--drop] FILE...\n"
		   "  Read each file's executable text into the page cache as 2 MiB folios.\n"
		   "  --force  prewarm even when the text is mostly cached already\n"
		   "  --drop   first drop the file's unmapped cached pages (POSIX_FADV_DONTNEED)\n");
}

static int drop(const char *path)
{
	uint64_t size;
	int fd = hz_prim_open_read(path), ret;

	if (fd < 0)
		return fd;
	ret = hz_prim_file_size(fd, &size);
	if (ret == 0)
		ret = hz_prim_fadvise(fd, 0, size, POSIX_FADV_DONTNEED);
	hz_prim_close(fd);
	return ret;
}

int main(int argc, char **argv)
{
	bool force = false, drop_first = false;
	int files = 0, failed = 0;

	for (int i = 1; i < argc; i++) {
		struct hz_prewarm_result res;
		int ret;

		if (!strcmp(argv[i], "--force")) {
			force = true;
			continue;
		}
		if (!strcmp(argv[i], "--drop")) {
			drop_first = true;
			continue;
		}
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		}
		files++;
		if (drop_first && (ret = drop(argv[i])) != 0)
			fprintf(stderr, "hugezero-prewarm: %s: drop: %s\n", argv[i], strerror(-ret));
		ret = hz_exec_prewarm_file(argv[i], force, &res);
		if (ret != 0) {
			fprintf(stderr, "hugezero-prewarm: %s: %s\n", argv[i], strerror(-ret));
			failed++;
			continue;
		}
		if (res.text == 0)
			printf("%s: %.0f%% of %.1f MiB cached already: left alone\n", argv[i],
			       100.0 * (double)res.file_cached_before / (double)(res.file_size ? res.file_size : 1),
			       (double)res.file_size / (1 << 20));
		else
			printf("%s: %s %.1f MiB, file %.0f%% cached before; read %.1f MiB in %.1f ms\n",
			       argv[i], res.elf ? "text" : "whole file", (double)res.text / (1 << 20),
			       100.0 * (double)res.file_cached_before / (double)res.file_size,
			       (double)res.populated / (1 << 20), (double)res.ns / 1e6);
	}
	if (files == 0) {
		usage(stderr);
		return 2;
	}
	return failed ? 1 : 0;
}
