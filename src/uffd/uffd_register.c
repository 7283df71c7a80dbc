// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What a region may cover (ps_uffd_register()): the mappings of
 * /proc/self/maps that meet the range.  The kernel registers the mappings
 * a range meets and skips its holes, and splits one mmap(2) into several
 * lines of /proc/self/maps wherever mbind(2), madvise(2) or mprotect(2)
 * changed part of it, while it merges adjacent anonymous mappings with the
 * same flags into one line.  So a line boundary is not a mapping boundary;
 * what tells two mappings apart is what differs across it: the
 * permissions, the backing (device, inode, name) or, for a file, an offset
 * that does not go on where the line below ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uffd_private.h"

/* A line of /proc/self/maps (its name truncated to what fits). */
struct uf_map {
	uintptr_t start, end;
	char perms[5];
	unsigned long long offset, inode;
	unsigned dev_major, dev_minor;
	char name[256];
};

/* /proc/self/maps read a line at a time, without allocating. */
struct uf_maps_file {
	int fd;
	size_t len, pos;
	char buf[4096];
};

/* The next line, NUL-terminated, cut at @n - 1 bytes; false at the end or on an error. */
static bool uf_maps_line(struct uf_maps_file *f, char *line, size_t n)
{
	size_t k = 0;

	for (;;) {
		if (f->pos == f->len) {
			ssize_t got;

			do
				got = read(f->fd, f->buf, sizeof(f->buf));
			while (got < 0 && errno == EINTR);
			if (got <= 0) {
				line[k] = 0;
				return k > 0;
			}
			f->len = (size_t)got;
			f->pos = 0;
		}
		while (f->pos < f->len) {
			char c = f->buf[f->pos++];

			if (c == '\n') {
				line[k] = 0;
				return true;
			}
			if (k + 1 < n)
				line[k++] = c;
		}
	}
}

static unsigned long long uf_hex(const char **p)
{
	char *end;
	unsigned long long v = strtoull(*p, &end, 16);

	*p = end;
	return v;
}

/* "start-end perms offset major:minor inode   name": false when it is not that. */
static bool uf_parse_map(const char *s, struct uf_map *m)
{
	const char *p = s;
	size_t i;

	m->start = (uintptr_t)uf_hex(&p);
	if (*p++ != '-')
		return false;
	m->end = (uintptr_t)uf_hex(&p);
	if (*p++ != ' ')
		return false;
	for (i = 0; i < 4 && p[i] && p[i] != ' '; i++)
		m->perms[i] = p[i];
	m->perms[i] = 0;
	p += i;
	if (*p++ != ' ')
		return false;
	m->offset = uf_hex(&p);
	m->dev_major = (unsigned)uf_hex(&p);
	if (*p++ != ':')
		return false;
	m->dev_minor = (unsigned)uf_hex(&p);
	m->inode = strtoull(p, (char **)&p, 10);
	while (*p == ' ')
		p++;
	snprintf(m->name, sizeof(m->name), "%s", p);
	return m->start < m->end;
}

/* Whether @q, starting where @p ends, can be the same mapping as @p. */
static bool uf_same_mapping(const struct uf_map *p, const struct uf_map *q)
{
	if (strcmp(p->perms, q->perms) || p->dev_major != q->dev_major ||
			p->dev_minor != q->dev_minor || p->inode != q->inode ||
			strcmp(p->name, q->name))
		return false;
	/* A file (shared memory included) goes on at the next offset; anonymous memory shows 0. */
	return !p->inode || q->offset == p->offset + (p->end - p->start);
}

int uf_check_mappings(uintptr_t a, size_t len, bool span)
{
	struct uf_maps_file f = {.fd = -1};
	struct uf_map prev, cur;
	uintptr_t end = a + len, covered = a;
	bool first = true, ok = true;
	char line[512];

	f.fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (f.fd < 0) {
		/* No /proc: msync(2) still finds holes; mappings are not told apart. */
		return msync((void *)a, len, MS_ASYNC) && errno == ENOMEM ? -EINVAL : 0;
	}
	while (ok && covered < end && uf_maps_line(&f, line, sizeof(line))) {
		if (!uf_parse_map(line, &cur) || cur.end <= a)
			continue;
		if (cur.start > covered)
			break; /* a hole at covered */
		if (!first && !span && !uf_same_mapping(&prev, &cur))
			ok = false;
		covered = cur.end;
		prev = cur;
		first = false;
	}
	close(f.fd);
	return ok && covered >= end ? 0 : -EINVAL;
}
