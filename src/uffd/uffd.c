// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fault plane (libpolstore_uffd): a userfaultfd, its resolver threads
 * and the table of registered regions.  It uses only polstore's public API
 * (ps_store_lookup_node(), and ps_store_attach() for the store's lifetime);
 * docs/uffd.md explains the placement mechanism, its cost per fault and the
 * lifecycle rules.
 *
 *
 * This file opens the userfaultfd and explains a refusal, and creates,
 * destroys and counts the plane; uffd_private.h says how the plane is
 * locked and which file does what.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <polstore/attach.h>
#include <polstore/uffd.h>

#include "uffd_private.h"

/* get_mempolicy(2) flag: the nodes this thread may allocate on. */
#define UF_MPOL_F_MEMS_ALLOWED (1 << 2)

static void uf_say(char *why, size_t len, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));

static void uf_say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* ---- why a userfaultfd is refused ------------------------------------------------------ */

/* The number after "@key" in /proc/self/status (base 16 for Cap*), or -1. */
static long long uf_status_field(const char *key, int base)
{
	char line[256];
	size_t klen = strlen(key);
	long long v = -1;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen)) {
			v = strtoll(line + klen, NULL, base);
			break;
		}
	fclose(f);
	return v;
}

static int uf_sysctl_unprivileged(void)
{
	int v = -1;
	FILE *f = fopen("/proc/sys/vm/unprivileged_userfaultfd", "re");

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/*
 * The sentence ps_uffd_available() and ps_uffd_create() give when neither
 * way to a userfaultfd worked: @sys_err from userfaultfd(2), @dev_err from
 * /dev/userfaultfd (@dev_step: "open" or "ioctl").
 */
static void uf_explain(char *why, size_t len, unsigned flags, int sys_err, int dev_err,
		const char *dev_step)
{
	static const char refused_anyway[] =
			"userfaultfd(2) is refused although %s, so by a seccomp filter or a "
			"security module (Seccomp: %lld in /proc/self/status): allow the "
			"userfaultfd system call in the filter (a container's seccomp profile)";
	static const char unprivileged[] =
			"userfaultfd(2) is refused: vm.unprivileged_userfaultfd is %s and the "
			"process lacks CAP_SYS_PTRACE%s: set vm.unprivileged_userfaultfd=1, "
			"grant CAP_SYS_PTRACE, or pass PS_UFFD_USER_MODE_ONLY when no kernel "
			"access (read(2), O_DIRECT, KVM) touches the regions";
	static const char no_syscall[] =
			"userfaultfd(2) does not exist: a kernel without CONFIG_USERFAULTFD, "
			"or a seccomp filter that answers ENOSYS (Seccomp: %lld)";
	long long seccomp = uf_status_field("Seccomp:", 10);
	long long caps = uf_status_field("CapEff:", 16);
	bool ptrace = caps >= 0 && (caps >> 19) & 1; /* CAP_SYS_PTRACE */
	int sysctl = uf_sysctl_unprivileged();
	bool user_only = flags & PS_UFFD_USER_MODE_ONLY;
	const char *sysctl_is = sysctl < 0 ? "unreadable" : sysctl == 0 ? "0" : "set";
	const char *allowed = user_only ? "only user-mode faults were asked for"
			      : ptrace	? "the process has CAP_SYS_PTRACE"
					: "vm.unprivileged_userfaultfd is 1";
	char sys[512], dev[256];

	if (sys_err == EPERM && (user_only || ptrace || sysctl == 1))
		snprintf(sys, sizeof(sys), refused_anyway, allowed, seccomp);
	else if (sys_err == EPERM)
		snprintf(sys, sizeof(sys), unprivileged, sysctl_is,
				seccomp > 0 ? " (or a seccomp filter refuses it)" : "");
	else if (sys_err == ENOSYS)
		snprintf(sys, sizeof(sys), no_syscall, seccomp);
	else
		snprintf(sys, sizeof(sys), "userfaultfd(2) failed: %s", strerror(sys_err));

	if (dev_err == ENOENT)
		snprintf(dev, sizeof(dev), "/dev/userfaultfd does not exist (Linux 6.1 has it)");
	else if (dev_err == EACCES)
		snprintf(dev, sizeof(dev), "%s",
				"/dev/userfaultfd is not open to this user (it needs read and "
				"write "
				"access; give it to the user's group)");
	else if (dev_err == EPERM && !strcmp(dev_step, "ioctl"))
		snprintf(dev, sizeof(dev), "%s",
				"/dev/userfaultfd opens but its USERFAULTFD_IOC_NEW ioctl is "
				"refused "
				"(a seccomp filter or a security module)");
	else
		snprintf(dev, sizeof(dev), "/dev/userfaultfd: %s failed: %s", dev_step,
				strerror(dev_err));
	uf_say(why, len, "no userfaultfd: %s; %s", sys, dev);
}

/* ---- the userfaultfd ------------------------------------------------------------------- */

/* A new userfaultfd (O_CLOEXEC, O_NONBLOCK), or -errno with @why written. */
static int uf_open(unsigned flags, char *why, size_t len)
{
	int oflags = O_CLOEXEC | O_NONBLOCK, fd, dfd, sys_err, dev_err, err;
	const char *step = "open";

	if (flags & PS_UFFD_USER_MODE_ONLY)
		oflags |= UFFD_USER_MODE_ONLY;
	fd = (int)syscall(SYS_userfaultfd, oflags);
	if (fd >= 0)
		return fd;
	sys_err = errno;
	/* /dev/userfaultfd: its file mode decides, not the sysctl. */
	dfd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dfd >= 0) {
		fd = ioctl(dfd, USERFAULTFD_IOC_NEW, oflags);
		dev_err = errno;
		close(dfd);
		if (fd >= 0)
			return fd;
		step = "ioctl";
	} else {
		dev_err = errno;
	}
	uf_explain(why, len, flags, sys_err, dev_err, step);
	if (sys_err == EPERM || dev_err == EPERM || dev_err == EACCES)
		err = EPERM;
	else if (sys_err == ENOSYS && (dev_err == ENOENT || dev_err == ENOTTY))
		err = ENOSYS;
	else
		err = sys_err;
	return -err;
}

/* The API handshake; asks for the faulting thread's id where the kernel has it. */
static int uf_handshake(int *fd, unsigned flags, char *why, size_t len)
{
	struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_THREAD_ID};
	int nfd;

	if (!ioctl(*fd, UFFDIO_API, &api))
		return 0;
	if (errno == EINVAL) {
		/* A kernel without the feature refuses the whole handshake: again without. */
		nfd = uf_open(flags, why, len);
		if (nfd < 0)
			return nfd;
		close(*fd);
		*fd = nfd;
		api.api = UFFD_API;
		api.features = 0;
		if (!ioctl(*fd, UFFDIO_API, &api))
			return 0;
	}
	uf_say(why, len, "the userfaultfd refuses the API handshake (UFFDIO_API): %s",
			strerror(errno));
	return errno == EINVAL ? -ENOSYS : -errno;
}

int ps_uffd_available(unsigned flags, char *why, size_t why_len)
{
	int fd;

	if (flags & ~PS_UFFD_ALL_FLAGS)
		return -EINVAL;
	fd = uf_open(flags, why, why_len);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* ---- creation and teardown ------------------------------------------------------------- */

/* Nodes this thread may allocate on (at least 1). */
static int uf_allowed_nodes(void)
{
	unsigned long mask[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))] = {0};
	int n = 0;
	size_t i;

	if (syscall(SYS_get_mempolicy, NULL, mask, (unsigned long)PS_MAX_NUMNODES, NULL,
			    UF_MPOL_F_MEMS_ALLOWED))
		return 1;
	for (i = 0; i < sizeof(mask) / sizeof(mask[0]); i++)
		n += __builtin_popcountl(mask[i]);
	return n > 0 ? n : 1;
}

/* 0, or -EINVAL with @why naming the first bad attribute and what it may be. */
static int uf_check_attr(const struct ps_uffd_attr *a, size_t sys, char *why, size_t len)
{
	if (a->size != sizeof(*a))
		uf_say(why, len,
				"bad attribute: attr->size is %zu, not sizeof(struct ps_uffd_attr) "
				"(%zu): set it with PS_UFFD_ATTR_INIT",
				a->size, sizeof(*a));
	else if (a->flags & ~PS_UFFD_ALL_FLAGS)
		uf_say(why, len,
				"bad attribute: attr->flags has bits %#x that no PS_UFFD_* flag "
				"names (PS_UFFD_ALL_FLAGS is %#x)",
				a->flags & ~PS_UFFD_ALL_FLAGS, PS_UFFD_ALL_FLAGS);
	else if (a->resolvers < 0 || a->resolvers > PS_UFFD_MAX_RESOLVERS)
		uf_say(why, len,
				"bad attribute: attr->resolvers is %d: 0 (one per node) or 1 .. "
				"%d (PS_UFFD_MAX_RESOLVERS)",
				a->resolvers, PS_UFFD_MAX_RESOLVERS);
	else if (a->node < -1 || a->node >= PS_MAX_NUMNODES)
		uf_say(why, len, "bad attribute: attr->node is %d: -1 (the local node) or 0 .. %d",
				a->node, PS_MAX_NUMNODES - 1);
	else if (a->page_size && (a->page_size % sys || (a->page_size & (a->page_size - 1))))
		uf_say(why, len,
				"bad attribute: attr->page_size is %zu: 0 (the system page, %zu "
				"bytes) or a power-of-two multiple of %zu",
				a->page_size, sys, sys);
	else
		return 0;
	return -EINVAL;
}

/* Stop and join every started resolver; the caller holds no resolver lock. */
static void uf_stop_resolvers(struct ps_uffd *uf)
{
	uint64_t one = 1;
	int i;

	pthread_mutex_lock(&uf->life);
	uf->stopping = true;
	pthread_mutex_unlock(&uf->life);
	for (i = 0; i < uf->nres; i++) {
		pthread_rwlock_wrlock(&uf->res[i].lock);
		uf->res[i].stop = true;
		pthread_rwlock_unlock(&uf->res[i].lock);
	}
	if (uf->stopfd >= 0) {
		/* Never read back: the descriptor stays readable for every resolver. */
		ssize_t w = write(uf->stopfd, &one, sizeof(one));

		(void)w;
	}
	for (i = 0; i < uf->nres; i++) {
		struct uf_resolver *r = &uf->res[i];
		pthread_t t;
		bool started;

		pthread_mutex_lock(&uf->life);
		t = r->thread;
		started = r->started;
		pthread_mutex_unlock(&uf->life);
		if (started)
			pthread_join(t, NULL);
	}
}

/* Free what creation made but the plane's block; @destroy_locks: they were initialised. */
static void uf_free(struct ps_uffd *uf, bool destroy_locks)
{
	int i;

	for (i = 0; i < uf->nres; i++) {
		struct uf_resolver *r = &uf->res[i];

		if (r->epfd >= 0)
			close(r->epfd);
		free(r->buf);
		if (destroy_locks) {
			pthread_rwlock_destroy(&r->lock);
			pthread_mutex_destroy(&r->st_lock);
		}
	}
	if (uf->stopfd >= 0)
		close(uf->stopfd);
	if (uf->uffd >= 0)
		close(uf->uffd);
	if (destroy_locks) {
		pthread_mutex_destroy(&uf->life);
		pthread_mutex_destroy(&uf->regions_lock);
	}
	free(uf->res);
	free(uf->zero);
	free(uf->regions);
	/* Last: the store may go once no resolver can read it (in a child, none ever could). */
	if (uf->attached)
		(void)ps_store_detach(uf->store, uf);
}

struct ps_uffd *ps_uffd_create(
		struct ps_store *store, const struct ps_uffd_attr *attr, char *why, size_t why_len)
{
	const struct ps_uffd_attr defaults = PS_UFFD_ATTR_INIT;
	size_t sys = (size_t)sysconf(_SC_PAGESIZE);
	pthread_rwlockattr_t wpref;
	struct ps_uffd *uf;
	void *mem;
	int i, err = 0, nres;

	if (!attr)
		attr = &defaults;
	if (uf_check_attr(attr, sys, why, why_len)) {
		errno = EINVAL;
		return NULL;
	}
	uf = calloc(1, sizeof(*uf));
	if (!uf)
		goto nomem_early;
	uf_tag_init(&uf->tag);
	uf->uffd = uf->stopfd = -1;
	uf->store = store;
	uf->qsbr = store && (ps_sync_caps((enum ps_sync)ps_store_sync_kind(store)) & PS_CAP_QSBR);
	uf->flags = attr->flags;
	uf->page_size = attr->page_size ? attr->page_size : sys;
	uf->sys_page = sys;
	uf->fixed_node = attr->node;
	uf->fill = attr->fill;
	uf->fill_arg = attr->fill_arg;
	/* Before any resolver exists: from now on a destroy of the store is refused, by name. */
	if (store) {
		/* Its one failure here is -ENOMEM: @uf is new, no argument is NULL. */
		if (ps_store_attach(store, uf, "fault plane", "ps_uffd_destroy()"))
			goto nomem;
		uf->attached = true;
	}
	nres = attr->resolvers ? attr->resolvers : uf_allowed_nodes();
	if (nres > PS_UFFD_MAX_RESOLVERS)
		nres = PS_UFFD_MAX_RESOLVERS;
	if (posix_memalign(&mem, 64, (size_t)nres * sizeof(*uf->res)))
		goto nomem;
	uf->res = mem;
	memset(uf->res, 0, (size_t)nres * sizeof(*uf->res));
	for (i = 0; i < nres; i++)
		uf->res[i].epfd = -1;
	uf->nres = nres;
	if (posix_memalign(&mem, uf->page_size, uf->page_size))
		goto nomem;
	uf->zero = mem;
	memset(uf->zero, 0, uf->page_size);
	for (i = 0; i < nres; i++) {
		struct uf_resolver *r = &uf->res[i];

		r->uf = uf;
		r->index = i;
		if (uf->fill) {
			if (posix_memalign(&mem, uf->page_size, uf->page_size))
				goto nomem;
			r->buf = mem;
		}
	}

	err = uf_open(uf->flags, why, why_len);
	if (err < 0)
		goto fail;
	uf->uffd = err;
	err = uf_handshake(&uf->uffd, uf->flags, why, why_len);
	if (err < 0)
		goto fail;
	uf->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (uf->stopfd < 0)
		goto fail_errno;
	for (i = 0; i < nres; i++) {
		struct uf_resolver *r = &uf->res[i];
		/* One resolver woken per fault; every resolver by the stop signal. */
		struct epoll_event fault = {.events = EPOLLIN | EPOLLEXCLUSIVE};
		struct epoll_event stop = {.events = EPOLLIN};

		r->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (r->epfd < 0 || epoll_ctl(r->epfd, EPOLL_CTL_ADD, uf->uffd, &fault) ||
				epoll_ctl(r->epfd, EPOLL_CTL_ADD, uf->stopfd, &stop))
			goto fail_errno;
	}

	pthread_mutex_init(&uf->life, NULL);
	pthread_mutex_init(&uf->regions_lock, NULL);
	pthread_rwlockattr_init(&wpref);
	pthread_rwlockattr_setkind_np(&wpref, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (i = 0; i < nres; i++) {
		pthread_rwlock_init(&uf->res[i].lock, &wpref);
		pthread_mutex_init(&uf->res[i].st_lock, NULL);
	}
	pthread_rwlockattr_destroy(&wpref);
	pthread_mutex_lock(&uf->life);
	for (i = 0; i < nres; i++) {
		err = uf_start_resolver(&uf->res[i]);
		if (err)
			break;
	}
	pthread_mutex_unlock(&uf->life);
	if (err) {
		uf_stop_resolvers(uf);
		uf_free(uf, true);
		free(uf);
		uf_say(why, why_len, "cannot start a resolver thread: %s", strerror(err));
		errno = err;
		return NULL;
	}
	return uf;

fail_errno:
	err = -errno;
	uf_say(why, why_len, "cannot set up the resolvers' descriptors: %s", strerror(-err));
fail:
	uf_free(uf, false);
	free(uf);
	errno = -err;
	return NULL;
nomem:
	uf_free(uf, false);
	free(uf);
nomem_early:
	uf_say(why, why_len, "out of memory");
	errno = ENOMEM;
	return NULL;
}

void ps_uffd_destroy(struct ps_uffd *uf)
{
	size_t k;

	if (!uf)
		return;
	uf_enter(&uf->tag, uf, "ps_uffd_destroy()", UF_IN_CHILD);
	if (getpid() != uf->tag.pid) {
		/* The resolvers and the registrations are the parent's: close the copies. */
		uf_free(uf, false);
		uf_tag_bury(&uf->tag, uf);
		return;
	}
	uf_stop_resolvers(uf);
	for (k = 0; k < uf->nregions; k++) {
		struct uffdio_range range = {
				.start = uf->regions[k].base, .len = uf->regions[k].len};

		/* Wakes the faults still waiting; an unmapped region fails harmlessly. */
		(void)ioctl(uf->uffd, UFFDIO_UNREGISTER, &range);
	}
	uf_free(uf, true);
	uf_tag_bury(&uf->tag, uf);
}

int ps_uffd_resolvers(const struct ps_uffd *uf)
{
	if (!uf)
		return -EINVAL;
	uf_enter(&uf->tag, uf, "ps_uffd_resolvers()", UF_IN_CHILD | UF_RESOLVER);
	return uf->nres;
}

/* ---- counts ---------------------------------------------------------------------------- */

int ps_uffd_stats(struct ps_uffd *uf, int resolver, struct ps_uffd_stats *stats)
{
	struct ps_uffd_stats sum = {0};
	int i, lo, hi;

	int err;

	if (!uf)
		return -EINVAL;
	err = uf_enter(&uf->tag, uf, "ps_uffd_stats()", 0);
	if (err)
		return err;
	if (!stats || resolver < -1 || resolver >= uf->nres)
		return -EINVAL;
	lo = resolver < 0 ? 0 : resolver;
	hi = resolver < 0 ? uf->nres : resolver + 1;
	for (i = lo; i < hi; i++) {
		/* Between two of its faults: the one it is resolving is counted first. */
		pthread_rwlock_wrlock(&uf->res[i].lock);
		pthread_mutex_lock(&uf->res[i].st_lock);
		uf_add(&sum, &uf->res[i].st);
		pthread_mutex_unlock(&uf->res[i].st_lock);
		pthread_rwlock_unlock(&uf->res[i].lock);
	}
	*stats = sum;
	return 0;
}
