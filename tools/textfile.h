/* A file for node_exporter's textfile collector, replaced atomically: the
 * collector may read the directory at any moment and must never see half
 * a file. */
#ifndef HZ_TOOLS_TEXTFILE_H
#define HZ_TOOLS_TEXTFILE_H

#include <limits.h>
#include <stdio.h>

struct hz_textfile {
	char path[PATH_MAX]; /* DIR/NAME */
	char temp[PATH_MAX]; /* DIR/.NAME.XXXXXX */
	FILE *out;
};

/* Create DIR/.NAME.XXXXXX, mode 0644, to write to through f->out. On
 * failure says why on stderr (a missing directory, one this user may not
 * write to) and returns a negative errno value. */
int hz_textfile_open(struct hz_textfile *f, const char *dir, const char *name);

/* Close it and rename it over DIR/NAME. Returns 0, or a negative errno
 * value after saying why and removing the temporary file. */
int hz_textfile_commit(struct hz_textfile *f);

/* Close and remove the temporary file: DIR/NAME stays as it was. */
void hz_textfile_abandon(struct hz_textfile *f);

#endif
