/* The textfile collector's file, replaced atomically. See textfile.h.
 *
 * The collector reads every DIR/ *.prom at each scrape: the data is written
 * under a name it ignores (a dot file, not ending in .prom) in the same
 * directory, then renamed over the real name, which replaces it in one
 * step. No fsync: after a crash a stale or empty file is as good as none,
 * and the next run writes it again. */
#include "textfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const char *dir, const char *what, int err)
{
	const char *why = err == ENOENT ? "no such directory"
			: err == ENOTDIR ? "not a directory" : strerror(err);

	fprintf(stderr, "hugezero stats: --textfile %s: %s: %s%s\n", dir, what, why,
		err == EACCES || err == EPERM || err == EROFS
			? " (run as a user that may write there, or choose another directory)"
			: "");
	return -err;
}

int hz_textfile_open(struct hz_textfile *f, const char *dir, const char *name)
{
	int fd;
	size_t n = strlen(dir);
	const char *sep = n > 0 && dir[n - 1] == '/' ? "" : "/";

	f->out = NULL;
	if (n == 0)
		return fail(dir, "cannot create a file there", ENOENT);
	if ((size_t)snprintf(f->path, sizeof(f->path), "%s%s%s", dir, sep, name) >=
		    sizeof(f->path) ||
	    (size_t)snprintf(f->temp, sizeof(f->temp), "%s%s.%s.XXXXXX", dir, sep, name) >=
		    sizeof(f->temp))
		return fail(dir, "cannot create a file there", ENAMETOOLONG);
	fd = mkstemp(f->temp);
	if (fd < 0)
		return fail(dir, "cannot create a file there", errno);
	/* mkstemp makes it 0600; the collector may run as another user. */
	if (fchmod(fd, 0644) != 0 || (f->out = fdopen(fd, "w")) == NULL) {
		int err = errno;

		close(fd);
		unlink(f->temp);
		return fail(dir, "cannot write the file", err);
	}
	return 0;
}

int hz_textfile_commit(struct hz_textfile *f)
{
	int ret = fclose(f->out);
	char *slash;

	f->out = NULL;
	if (ret == 0 && rename(f->temp, f->path) == 0)
		return 0;
	ret = errno;
	unlink(f->temp);
	slash = strrchr(f->path, '/');
	if (slash != NULL)
		*slash = '\0';
	return fail(f->path, "cannot write the file", ret);
}

void hz_textfile_abandon(struct hz_textfile *f)
{
	if (f->out != NULL)
		fclose(f->out);
	f->out = NULL;
	unlink(f->temp);
}
