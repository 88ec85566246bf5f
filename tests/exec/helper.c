/* A program linked directly against the generated library (DT_NEEDED) and
 * libhugezero.so, compiled by exec_text at test time.
 *
 * It calls hz_exec_start() first thing, as the preload's start-up will,
 * runs every generated function, then prints
 *     ready BAD START END
 * (wrong results, and the generated library's text range) and waits for
 * its standard input to close, so the test can read its folios from
 * /proc/PID. HZ_HELPER_THREAD=1 starts a thread before hz_exec_start. */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern long (*const hzgen_table[])(long);
extern const int hzgen_count;
void hz_exec_start(void);

static unsigned long text_start, text_end;

static int find_text(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (strstr(info->dlpi_name, "libhzgen") == NULL)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			text_start = (info->dlpi_addr + ph->p_vaddr) & ~4095ul;
			text_end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + 4095) & ~4095ul;
		}
	}
	return 1;
}

static void *idle(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

int main(void)
{
	pthread_t thread;
	char c;
	int bad = 0;

	if (getenv("HZ_HELPER_THREAD") != NULL)
		pthread_create(&thread, NULL, idle, NULL);
	hz_exec_start();
	for (int i = 0; i < hzgen_count; i++)
		if (hzgen_table[i](1000) != 1000L * (2 * i + 1) + i)
			bad++;
	dl_iterate_phdr(find_text, NULL);
	printf("ready %d %lx %lx\n", bad, text_start, text_end);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return bad != 0;
}
