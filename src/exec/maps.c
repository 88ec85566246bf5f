/* /proc/PID/maps and smaps, one entry at a time. See maps.h. */
#include "maps.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#include "../prim/prim.h"

int hz_maps_open(struct hz_maps *m, pid_t pid, bool smaps)
{
	int fd = hz_prim_open_maps(pid, smaps);

	if (fd < 0)
		return fd;
	m->fd = fd;
	m->smaps = smaps;
	m->have_pending = false;
	m->pos = m->len = 0;
	return 0;
}

void hz_maps_close(struct hz_maps *m)
{
	if (m->fd >= 0)
		hz_prim_close(m->fd);
	m->fd = -1;
}

/* The next line, NUL-terminated in place, without its newline; a line
 * longer than the buffer is cut. NULL at the end or on an error. */
static char *next_line(struct hz_maps *m)
{
	for (;;) {
		char *start = m->buf + m->pos;
		char *nl = memchr(start, '\n', m->len - m->pos);
		ssize_t n;

		if (nl != NULL) {
			*nl = '\0';
			m->pos = (size_t)(nl - m->buf) + 1;
			return start;
		}
		if (m->pos == 0 && m->len == sizeof(m->buf) - 1) {
			/* Longer than the buffer: keep the head, drop the rest
			 * of the line. */
			char c;

			m->buf[m->len] = '\0';
			m->pos = m->len = 0;
			do
				n = hz_prim_read(m->fd, &c, 1);
			while (n == 1 && c != '\n');
			return m->buf;
		}
		memmove(m->buf, start, m->len - m->pos);
		m->len -= m->pos;
		m->pos = 0;
		n = hz_prim_read(m->fd, m->buf + m->len, sizeof(m->buf) - 1 - m->len);
		if (n <= 0) {
			if (m->len == 0)
				return NULL;
			/* Last line without a newline. */
			m->buf[m->len] = '\0';
			m->pos = m->len = 0;
			return m->buf;
		}
		m->len += (size_t)n;
	}
}

static uint64_t parse_hex(const char **p)
{
	uint64_t v = 0;

	for (;; (*p)++) {
		char c = **p;

		if (c >= '0' && c <= '9')
			v = v * 16 + (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (uint64_t)(c - 'a' + 10);
		else
			return v;
	}
}

static uint64_t parse_dec(const char **p)
{
	uint64_t v = 0;

	for (; **p >= '0' && **p <= '9'; (*p)++)
		v = v * 10 + (uint64_t)(**p - '0');
	return v;
}

static void skip_spaces(const char **p)
{
	while (**p == ' ' || **p == '\t')
		(*p)++;
}

static bool is_header(const char *line)
{
	return (line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f');
}

/* "start-end perms offset major:minor inode   path" */
static int parse_header(const char *line, struct hz_map *out)
{
	const char *p = line;
	size_t len;

	memset(out, 0, sizeof(*out));
	out->range.start = parse_hex(&p);
	if (*p++ != '-')
		return -EINVAL;
	out->range.end = parse_hex(&p);
	skip_spaces(&p);
	if (strlen(p) < 4)
		return -EINVAL;
	out->prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) |
		    (p[2] == 'x' ? PROT_EXEC : 0);
	out->shared = p[3] == 's';
	p += 4;
	skip_spaces(&p);
	out->offset = parse_hex(&p);
	skip_spaces(&p);
	parse_hex(&p); /* device major */
	if (*p == ':')
		p++;
	parse_hex(&p); /* device minor */
	skip_spaces(&p);
	out->inode = parse_dec(&p);
	skip_spaces(&p);
	len = strlen(p);
	if (len >= sizeof(out->path))
		len = sizeof(out->path) - 1;
	memcpy(out->path, p, len);
	out->path[len] = '\0';
	return 0;
}

/* "Name:   123 kB" */
static void parse_field(const char *line, struct hz_map *out)
{
	static const struct { const char *name; size_t off; } fields[] = {
		{ "Rss:", offsetof(struct hz_map, rss) },
		{ "AnonHugePages:", offsetof(struct hz_map, anon_huge) },
		{ "FilePmdMapped:", offsetof(struct hz_map, file_pmd) },
		{ "ShmemPmdMapped:", offsetof(struct hz_map, shmem_pmd) },
		{ "KernelPageSize:", offsetof(struct hz_map, kernel_page) },
	};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		size_t n = strlen(fields[i].name);
		const char *p;

		if (strncmp(line, fields[i].name, n) != 0)
			continue;
		p = line + n;
		skip_spaces(&p);
		*(uint64_t *)((char *)out + fields[i].off) = parse_dec(&p) * 1024;
		return;
	}
}

int hz_maps_next(struct hz_maps *m, struct hz_map *out)
{
	char *line;
	int ret;

	if (m->have_pending) {
		line = m->buf + m->pos;
		m->pos += strlen(line) + 1;
		m->have_pending = false;
		if (m->pos > m->len) /* it was a cut or unterminated line */
			m->pos = m->len = 0;
	} else {
		line = next_line(m);
	}
	if (line == NULL)
		return 0;
	ret = parse_header(line, out);
	if (ret != 0 || !m->smaps)
		return ret == 0 ? 1 : ret;
	/* smaps: the fields run until the next header line, which stays in
	 * the buffer for the next call. */
	while ((line = next_line(m)) != NULL) {
		if (is_header(line)) {
			m->pos = (size_t)(line - m->buf);
			m->have_pending = true;
			break;
		}
		parse_field(line, out);
	}
	return 1;
}
