/* Feed files to a fuzz target without libFuzzer: every regular file of each
 * directory argument (in name order, so a failure is reproducible), or the
 * file itself. This is how every build, gcc included, replays the checked-in
 * corpus and regression inputs as unit tests, and how a crash file from
 * scripts/fuzz.sh is reproduced in a debugger. An empty corpus fails: a
 * replay of nothing would pass silently. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Targets that need no set-up do not define it. */
#pragma weak LLVMFuzzerInitialize

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	size_t size = 0;
	long len;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	/* One byte more, so an empty file still has a buffer of its own. */
	data = malloc((size_t)len + 1);
	if (data)
		size = fread(data, 1, (size_t)len, f);
	fclose(f);
	if (data == NULL || size != (size_t)len) {
		fprintf(stderr, "replay: %s: short read\n", path);
		free(data);
		return -1;
	}
	LLVMFuzzerTestOneInput(data, size);
	free(data);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Returns the number of files replayed, or -1. */
static int replay_path(const char *path)
{
	struct dirent **names;
	struct stat st;
	int n, done = 0;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path) == 0 ? 1 : -1;
	n = scandir(path, &names, NULL, by_name);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char file[4096];

		snprintf(file, sizeof(file), "%s/%s", path, names[i]->d_name);
		if (names[i]->d_name[0] != '.' && stat(file, &st) == 0 &&
		    S_ISREG(st.st_mode)) {
			if (replay_file(file) != 0)
				done = -1;
			else if (done >= 0)
				done++;
		}
		free(names[i]);
	}
	free(names);
	return done;
}

int main(int argc, char **argv)
{
	int total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR-OR-FILE...\n", argv[0]);
		return 2;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		int n = replay_path(argv[i]);

		if (n < 0)
			return 1;
		total += n;
	}
	printf("replayed %d inputs without a failed check\n", total);
	return total > 0 ? 0 : 1;
}
