// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fault plane's region table: ps_uffd_register() and
 * ps_uffd_unregister(), which change it under every resolver's lock
 * (uffd_private.h), and what a region may cover.
 *
 * What a region may cover: the mappings of /proc/self/maps that meet the
 * range.  The kernel registers the mappings a range meets and skips its
 * holes, and splits one mmap(2) into several lines of /proc/self/maps
 * wherever mbind(2), madvise(2) or mprotect(2) changed part of it, while
 * it merges adjacent anonymous mappings with the same flags into one
 * line.  So a line boundary is not a mapping boundary; what tells two
 * mappings apart is what differs across it: the permissions, the backing
 * (device, inode, name) or, for a file, an offset that does not go on
 * where the line below ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <polstore/uffd.h>

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

/*
 * Whether [@a, @a + @len) may be registered as one region: 0; -EINVAL
 * when part of it is not mapped, or when, unless @span, it crosses from
 * one mapping into another that /proc/self/maps tells apart.
 */
static int uf_check_mappings(uintptr_t a, size_t len, bool span)
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

/* ---- regions --------------------------------------------------------------------------- */

static void uf_lock_all(struct ps_uffd *uf)
{
	int i;

	for (i = 0; i < uf->nres; i++)
		pthread_rwlock_wrlock(&uf->res[i].lock);
}

static void uf_unlock_all(struct ps_uffd *uf)
{
	int i;

	for (i = uf->nres - 1; i >= 0; i--)
		pthread_rwlock_unlock(&uf->res[i].lock);
}

/* Index of the first region ending after @addr. */
static size_t uf_slot(const struct ps_uffd *uf, uintptr_t addr)
{
	size_t lo = 0, hi = uf->nregions;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (uf->regions[mid].base + uf->regions[mid].len <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool uf_meets(uintptr_t a, size_t len, const void *p, size_t n)
{
	return p && (uintptr_t)p < a + len && a < (uintptr_t)p + n;
}

/*
 * Under every resolver's lock: region @at leaves the table.  The first
 * to leave sets @ended: from then on a region registered later may be
 * found for a fault of one that left (uf_resolve()).
 */
static void uf_region_drop(struct ps_uffd *uf, size_t at)
{
	memmove(&uf->regions[at], &uf->regions[at + 1],
			(uf->nregions - at - 1) * sizeof(uf->regions[0]));
	uf->nregions--;
	if (!uf->ended)
		uf->ended = uf->epoch;
}

/*
 * Whether [@a, @a + @len) meets memory of the plane's own: its blocks and
 * its threads' stacks with their guard pages.  Under uf->regions_lock.
 */
static bool uf_meets_own(struct ps_uffd *uf, uintptr_t a, size_t len)
{
	bool meets = uf_meets(a, len, uf, sizeof(*uf)) ||
		     uf_meets(a, len, uf->res, (size_t)uf->nres * sizeof(*uf->res)) ||
		     uf_meets(a, len, uf->zero, uf->page_size) ||
		     uf_meets(a, len, uf->regions, uf->cap * sizeof(*uf->regions));
	int i;

	pthread_mutex_lock(&uf->life);
	for (i = 0; i < uf->nres && !meets; i++) {
		const struct uf_resolver *r = &uf->res[i];

		meets = uf_meets(a, len, r->buf, uf->page_size) ||
			(r->stack_own_hi && r->stack_own_lo < a + len && a < r->stack_own_hi);
	}
	pthread_mutex_unlock(&uf->life);
	return meets;
}

static int uf_register(struct ps_uffd *uf, void *addr, size_t len, uint64_t first_page,
		unsigned flags, const char *call)
{
	uintptr_t a = (uintptr_t)addr;
	struct uffdio_register reg;
	struct uf_region *g;
	size_t at;
	int err = 0;

	if (!uf)
		return -EINVAL;
	err = uf_enter(&uf->tag, uf, call, 0);
	if (err)
		return err;
	if (!len || a % uf->page_size || len % uf->page_size || a + len < a ||
			first_page + len / uf->page_size < first_page ||
			(flags & ~PS_UFFD_REGISTER_SPAN))
		return -EINVAL;
	pthread_mutex_lock(&uf->regions_lock);
	at = uf_slot(uf, a);
	if (at < uf->nregions && uf->regions[at].base < a + len) {
		err = -EBUSY;
		goto out;
	}
	if (uf->nregions == uf->cap) {
		size_t cap = uf->cap ? 2 * uf->cap : 8;
		struct uf_region *n = malloc(cap * sizeof(*n));

		if (!n) {
			err = -ENOMEM;
			goto out;
		}
		if (uf->nregions)
			memcpy(n, uf->regions, uf->nregions * sizeof(*n));
		uf_lock_all(uf);
		free(uf->regions);
		uf->regions = n;
		uf->cap = cap;
		uf_unlock_all(uf);
	}
	/* After the table has grown: it is the plane's own memory too. */
	if (uf_meets_own(uf, a, len)) {
		err = -EINVAL;
		goto out;
	}
	err = uf_check_mappings(a, len, flags & PS_UFFD_REGISTER_SPAN);
	if (err)
		goto out;
	/*
	 * The entry goes in first, so that the region's first faults find it;
	 * what the kernel allows there (zero pages, poison) is known after.
	 */
	uf_lock_all(uf);
	memmove(&uf->regions[at + 1], &uf->regions[at], (uf->nregions - at) * sizeof(*g));
	uf->epoch++;
	uf->regions[at] = (struct uf_region){
			.base = a, .len = len, .first_page = first_page, .epoch = uf->epoch};
	uf->nregions++;
	uf_unlock_all(uf);

	reg = (struct uffdio_register){
			.range = {.start = a, .len = len}, .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(uf->uffd, UFFDIO_REGISTER, &reg)) {
		err = -errno;
	} else if (!(reg.ioctls & (1ULL << _UFFDIO_COPY))) {
		struct uffdio_range range = {.start = a, .len = len};

		(void)ioctl(uf->uffd, UFFDIO_UNREGISTER, &range);
		err = -EOPNOTSUPP;
	}
	uf_lock_all(uf);
	g = &uf->regions[at];
	if (err) {
		uf_region_drop(uf, at);
	} else {
		g->can_zeropage = reg.ioctls & (1ULL << _UFFDIO_ZEROPAGE);
		g->can_poison = reg.ioctls & (1ULL << _UFFDIO_POISON);
	}
	uf_unlock_all(uf);
out:
	pthread_mutex_unlock(&uf->regions_lock);
	return err;
}

int ps_uffd_register(struct ps_uffd *uf, void *addr, size_t len, uint64_t first_page)
{
	return uf_register(uf, addr, len, first_page, 0, "ps_uffd_register()");
}

int ps_uffd_register_flags(
		struct ps_uffd *uf, void *addr, size_t len, uint64_t first_page, unsigned flags)
{
	return uf_register(uf, addr, len, first_page, flags, "ps_uffd_register_flags()");
}

int ps_uffd_unregister(struct ps_uffd *uf, void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	struct uffdio_range range = {.start = a, .len = len};
	size_t at;
	int err = 0;

	if (!uf)
		return -EINVAL;
	err = uf_enter(&uf->tag, uf, "ps_uffd_unregister()", 0);
	if (err)
		return err;
	pthread_mutex_lock(&uf->regions_lock);
	at = uf_slot(uf, a);
	if (at == uf->nregions || uf->regions[at].base != a || uf->regions[at].len != len) {
		err = -ENOENT;
		goto out;
	}
	/* Wakes the faults waiting there; an unmapped range has nothing left registered. */
	(void)ioctl(uf->uffd, UFFDIO_UNREGISTER, &range);
	/* Every resolver between two faults: none is placing a page here. */
	uf_lock_all(uf);
	uf_region_drop(uf, at);
	uf_unlock_all(uf);
out:
	pthread_mutex_unlock(&uf->regions_lock);
	return err;
}
