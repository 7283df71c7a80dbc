// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fault plane (libpolstore_uffd): a userfaultfd, its resolver threads
 * and the table of registered regions.  It uses only polstore's public API
 * (ps_store_lookup_node()); docs/uffd.md explains the placement mechanism,
 * its cost per fault and the lifecycle rules.
 *
 * Locking.  Each resolver has a lock of its own, which it holds (shared)
 * while it resolves one fault (region lookup, store lookup, fill,
 * placement), and a mutex for its counts, which it adds at the end of each
 * fault.  Register and unregister change the region table holding every
 * resolver's lock exclusively, in index order, so a resolver reads the
 * table under its own lock alone: no line is shared between resolvers on
 * the fault path.  Holding them all also means that when
 * ps_uffd_unregister() returns no resolver is still placing a page in the
 * region.  uf->life orders the stop of destroy against the replacement of
 * a resolver that exits inside a callback.  Nothing else is shared, so the
 * plane needs no atomics: the thread checkers see plain locks.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <polstore/rcu.h>
#include <polstore/uffd.h>

#include "uffd_private.h"

/*
 * glibc runs a thread's cancellation cleanup after a longjmp out of the
 * frames it leaves (pthread_exit(), cancellation), which AddressSanitizer
 * does not see: their red zones would still poison the stack the cleanup
 * handler runs on.  The handler unpoisons the stack below its own frame,
 * from the bottom the thread noted when it started (asking for it there
 * would use poisoned stack already).
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UF_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(UF_ASAN)
#define UF_ASAN 1
#endif
#ifdef UF_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* Kernel ABI newer than the headers this may be built with. */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON (0x08)
struct uffdio_poison {
	struct uffdio_range range;
	__u64 mode;
	__s64 updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif
/* get_mempolicy(2) flag: the nodes this thread may allocate on. */
#define UF_MPOL_F_MEMS_ALLOWED (1 << 2)

/* Messages one read(2) takes: few, so that a burst spreads over resolvers. */
#define UF_BATCH 8
/* The resolver's memory policy: not set yet, or the kernel's default. */
#define UF_UNBOUND (-2)
#define UF_DEFAULT (-1)
/* How long an online QSBR resolver waits for the next fault before it goes offline. */
#define UF_LINGER_MS 1

struct uf_region {
	uintptr_t base;
	size_t len;
	uint64_t first_page;
	uint64_t epoch; /* the plane's epoch when it was registered */
	bool can_zeropage, can_poison;
};

struct uf_resolver {
	/*
	 * Read-held by the resolver while it resolves one fault, write-held by
	 * register, unregister and destroy: guards stop and the region table.
	 * Writers are preferred, so a resolver busy with fault after fault lets
	 * them in between two faults.
	 */
	pthread_rwlock_t lock;
	struct ps_uffd *uf;
	int index;
	int epfd;
	bool stop;
	/*
	 * The counts, added from cur at the end of each fault (under lock and
	 * st_lock: helgrind takes a write under a read lock for a race).
	 */
	pthread_mutex_t st_lock;
	struct ps_uffd_stats st;
	struct ps_uffd_stats cur; /* the fault being resolved: the resolver's own */
	void *buf;		  /* page_size bytes for the fill callback */
	/* Under uf->life: the running thread, the one it replaced. */
	pthread_t thread, pred;
	bool has_pred, started;
	/* The resolver thread's own: its policy and what it has read. */
	int bound, refused, refused_local;
	bool holding, online; /* online: for an RCU_QSBR store (polstore/rcu.h) */
	char *stack_lo;	      /* AddressSanitizer builds: the bottom of its stack */
	int nbatch, next;     /* batch[next .. nbatch) not resolved yet */
	uint64_t seen;	      /* uf->epoch before the batch was read */
	struct uffd_msg batch[UF_BATCH];
	/* Under uf->life: the thread's stack and guard, which no region may cover. */
	uintptr_t stack_own_lo, stack_own_hi;
} __attribute__((aligned(64)));

struct ps_uffd {
	struct ps_store *store;
	bool qsbr; /* the store is RCU_QSBR: resolvers go online */
	int uffd, stopfd;
	struct uf_tag tag; /* past the bytes malloc() reuses once the block is free */
	unsigned flags;
	size_t page_size, sys_page;
	int fixed_node;
	ps_uffd_fill_fn fill;
	void *fill_arg;
	void *zero; /* page_size zero bytes */
	int nres;
	struct uf_resolver *res;
	pthread_mutex_t life; /* stopping and the resolvers' thread handles */
	bool stopping;
	pthread_mutex_t regions_lock; /* serialises register and unregister */
	/* Sorted by base, disjoint; changed under every resolver's lock, as is epoch. */
	struct uf_region *regions;
	size_t nregions, cap;
	/*
	 * Counts registrations.  A message read while the epoch was e can
	 * only be a fault of a region registered at e or before: one found in
	 * a region registered since is a fault of an earlier registration of
	 * the range, which has ended.
	 */
	uint64_t epoch;
};

_Static_assert(offsetof(struct ps_uffd, tag) >= 16, "the tag must outlive free()");

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

/* ---- placement ------------------------------------------------------------------------- */

/* set_mempolicy(2): prefer @node, or the default policy for UF_DEFAULT. */
static int uf_set_policy(int node)
{
	unsigned long mask[PS_MAX_NUMNODES / (8 * sizeof(unsigned long))] = {0};
	const unsigned long bits = 8 * sizeof(unsigned long);

	if (node == UF_DEFAULT)
		return (int)syscall(SYS_set_mempolicy, PS_MPOL_DEFAULT, NULL, 0UL);
	if (node < 0 || node >= PS_MAX_NUMNODES) {
		errno = EINVAL;
		return -1;
	}
	mask[node / bits] = 1UL << (node % bits);
	/* The kernel reads maxnode - 1 bits. */
	return (int)syscall(SYS_set_mempolicy, PS_MPOL_PREFERRED, mask,
			(unsigned long)PS_MAX_NUMNODES + 1);
}

/*
 * Make the resolver's allocations prefer @named; when this process may not
 * allocate there, prefer @local, and failing that take the default policy.
 * The policy stays until a fault needs another node, so a run of faults
 * to one node costs one set_mempolicy(2) call, and a node refused once is
 * not asked for again until another is.  Returns the node the page will
 * be allocated on, or UF_DEFAULT.
 */
static int uf_bind(struct uf_resolver *r, int named, int local)
{
	if (named == r->bound)
		return named;
	if (named != r->refused) {
		if (!uf_set_policy(named)) {
			r->bound = named;
			r->cur.rebinds++;
			return named;
		}
		r->refused = named;
	}
	r->cur.fallbacks++;
	if (local == r->bound)
		return local;
	if (local != r->refused_local) {
		if (!uf_set_policy(local)) {
			r->bound = local;
			r->cur.rebinds++;
			return local;
		}
		r->refused_local = local;
	}
	if (r->bound != UF_DEFAULT && !uf_set_policy(UF_DEFAULT)) {
		r->bound = UF_DEFAULT;
		r->cur.rebinds++;
	}
	return UF_DEFAULT;
}

/* ---- resolving one fault --------------------------------------------------------------- */

static uint64_t uf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The region holding @addr, or NULL; under any resolver's lock. */
static const struct uf_region *uf_find(const struct ps_uffd *uf, uintptr_t addr)
{
	size_t lo = 0, hi = uf->nregions;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct uf_region *g = &uf->regions[mid];

		if (addr < g->base)
			hi = mid;
		else if (addr - g->base >= g->len)
			lo = mid + 1;
		else
			return g;
	}
	return NULL;
}

static void uf_wake(const struct ps_uffd *uf, uintptr_t addr, size_t len)
{
	struct uffdio_range range = {.start = addr, .len = len};

	(void)ioctl(uf->uffd, UFFDIO_WAKE, &range);
}

/*
 * UFFDIO_COPY of [@src, @src + @len) to @dst, or with @src NULL
 * UFFDIO_ZEROPAGE of [@dst, @dst + @len): 0, or -errno; *@some is set
 * when this call placed part of it.  The kernel answers EAGAIN when the
 * address space is changing, and after a partial fill (that many bytes
 * placed and woken): both go on with what is left.
 */
static int uf_fill(struct uf_resolver *r, uintptr_t dst, const void *src, size_t len, bool *some)
{
	size_t done = 0;

	for (;;) {
		__s64 got;
		int rc, err;

		if (src) {
			struct uffdio_copy c = {.dst = dst + done,
					.src = (uintptr_t)src + done,
					.len = len - done,
					.mode = 0};

			rc = ioctl(r->uf->uffd, UFFDIO_COPY, &c);
			got = c.copy;
		} else {
			struct uffdio_zeropage z = {
					.range = {.start = dst + done, .len = len - done},
					.mode = 0};

			rc = ioctl(r->uf->uffd, UFFDIO_ZEROPAGE, &z);
			got = z.zeropage;
		}
		err = errno;
		if (!rc) {
			*some = true;
			return 0;
		}
		if (err != EAGAIN)
			return -err;
		if (got > 0) {
			done += (size_t)got;
			*some = true;
		}
		if (done >= len)
			return 0;
		r->cur.retries++;
		sched_yield();
	}
}

/*
 * Place one page of content (@src), or the zero page (@src NULL): 0 when
 * this call placed it (all of it, or the system pages of it still
 * missing), -EEXIST when it was all there.  A plane page of several system
 * pages may be partly there (a partial MADV_DONTNEED): then each system
 * page is filled on its own, and those present are left as they are.
 */
static int uf_place(struct uf_resolver *r, uintptr_t dst, const void *src)
{
	struct ps_uffd *uf = r->uf;
	size_t sys = uf->sys_page, off;
	bool some = false;
	int rc = uf_fill(r, dst, src, uf->page_size, &some);

	if (rc != -EEXIST || uf->page_size == sys)
		return rc;
	for (off = 0; off < uf->page_size; off += sys) {
		rc = uf_fill(r, dst + off, src ? (const char *)src + off : NULL, sys, &some);
		if (rc && rc != -EEXIST)
			return rc;
	}
	return some ? 0 : -EEXIST;
}

/* The fill callback could not give the content: poison the page, or let it fault again. */
static void uf_fill_failed(struct uf_resolver *r, const struct uf_region *g, uintptr_t addr)
{
	struct uffdio_poison p = {.range = {.start = addr, .len = r->uf->page_size}, .mode = 0};

	r->cur.fill_errors++;
	if (g->can_poison && !ioctl(r->uf->uffd, UFFDIO_POISON, &p))
		return;
	uf_wake(r->uf, addr, r->uf->page_size);
}

static void uf_resolve(struct uf_resolver *r, const struct uffd_msg *m, uint64_t t_start)
{
	struct ps_uffd *uf = r->uf;
	const struct uf_region *g;
	struct ps_uffd_fault f;
	uintptr_t addr;
	unsigned cpu, local;
	const void *src = uf->zero;
	bool zero = true;
	uint64_t t0 = 0, t1 = 0;
	int rc, named;

	if (m->event != UFFD_EVENT_PAGEFAULT)
		return;
	addr = (uintptr_t)m->arg.pagefault.address & ~(uintptr_t)(uf->page_size - 1);
	r->cur.faults++;
	g = uf_find(uf, addr);
	if (!g || g->epoch > r->seen) {
		/*
		 * A message read after its region left the table (and, maybe,
		 * before another took the range): the kernel serves the fault,
		 * and a touch of a new region there faults into it afresh.
		 */
		r->cur.dropped++;
		uf_wake(uf, addr, uf->page_size);
		return;
	}
	if (getcpu(&cpu, &local) || local >= PS_MAX_NUMNODES)
		local = 0;
	f.addr = (void *)addr;
	f.page = g->first_page + (addr - g->base) / uf->page_size;
	f.resolver = r->index;
	f.flags = m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE ? PS_UFFD_FAULT_WRITE : 0;
	f.tid = (pid_t)m->arg.pagefault.feat.ptid;
	/* Timed without a store too: the same clock reads, around no lookup. */
	if (uf->flags & PS_UFFD_TIMING)
		t0 = uf_now_ns();
	if (uf->store)
		named = ps_store_lookup_node(uf->store, f.page, (int)local);
	else
		named = uf->fixed_node >= 0 ? uf->fixed_node : (int)local;
	if (uf->flags & PS_UFFD_TIMING)
		t1 = uf_now_ns();
	if (named < 0)
		named = (int)local;
	f.named_node = named;
	f.node = uf_bind(r, named, (int)local);
	if (uf->fill) {
		rc = uf->fill(r->buf, &f, uf->fill_arg);
		/* The callback may have enabled cancellation: disabled again. */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (rc == 0) {
			src = r->buf;
			zero = false;
		} else if (rc != PS_UFFD_FILL_ZERO) {
			uf_fill_failed(r, g, addr);
			goto out;
		}
	}
	/* The zero page for a read of zero content, where the region allows it. */
	if (zero && (uf->flags & PS_UFFD_READ_ZEROPAGE) && !(f.flags & PS_UFFD_FAULT_WRITE) &&
			g->can_zeropage)
		src = NULL;
	rc = uf_place(r, addr, src);
	if (!rc) {
		if (zero)
			r->cur.zeros++;
		else
			r->cur.copies++;
	} else if (rc == -EEXIST) {
		/* Another resolver placed it; its faulting thread may still wait. */
		r->cur.exists++;
		uf_wake(uf, addr, uf->page_size);
	} else if (rc == -ENOENT || rc == -ESRCH) {
		/* The mapping went away (unmapped, unregistered) or its process is exiting. */
		r->cur.dropped++;
		uf_wake(uf, addr, uf->page_size);
	} else {
		/* ENOMEM and the like: the thread faults again and is served then. */
		r->cur.errors++;
		uf_wake(uf, addr, uf->page_size);
	}
out:
	if (uf->flags & PS_UFFD_TIMING) {
		r->cur.lookup_ns += t1 - t0;
		r->cur.resolve_ns += uf_now_ns() - t_start;
	}
}

/* ---- resolver threads ------------------------------------------------------------------ */

static int uf_start_resolver(struct uf_resolver *r);
static void uf_add(struct ps_uffd_stats *to, const struct ps_uffd_stats *s);

/* Wake the faults of batch[next .. nbatch): their threads fault again. */
static void uf_hand_back(struct uf_resolver *r)
{
	struct ps_uffd *uf = r->uf;

	for (; r->next < r->nbatch; r->next++)
		if (r->batch[r->next].event == UFFD_EVENT_PAGEFAULT)
			uf_wake(uf,
					(uintptr_t)r->batch[r->next].arg.pagefault.address &
							~(uintptr_t)(uf->page_size - 1),
					uf->page_size);
}

/*
 * A resolver that ends inside a callback (pthread_exit(), or cancellation
 * it enabled): the faults it had read are handed back, another resolver
 * reads them again, its lock is released, and a new thread takes its
 * place unless the plane is stopping.  The new thread joins this one
 * first; when it cannot be started, destroy joins this one.
 */
static void uf_resolver_exit(void *arg)
{
	struct uf_resolver *r = arg;
	struct ps_uffd *uf = r->uf;

#ifdef UF_ASAN
	__asan_unpoison_memory_region(
			r->stack_lo, (size_t)((char *)__builtin_frame_address(0) - r->stack_lo));
#endif
	/* The fault handed back is counted when it is read again. */
	memset(&r->cur, 0, sizeof(r->cur));
	if (r->online) {
		ps_qsbr_thread_offline();
		r->online = false;
	}
	uf_hand_back(r);
	if (r->holding) {
		r->holding = false;
		pthread_rwlock_unlock(&r->lock);
	}
	pthread_mutex_lock(&uf->life);
	if (!uf->stopping) {
		r->pred = pthread_self();
		r->has_pred = true;
		if (uf_start_resolver(r)) {
			r->has_pred = false;
		} else {
			pthread_mutex_lock(&r->st_lock);
			r->st.restarts++;
			pthread_mutex_unlock(&r->st_lock);
		}
	}
	pthread_mutex_unlock(&uf->life);
}

/*
 * Wait for the userfaultfd or the stop signal; false when stopping.  An
 * online QSBR resolver waits online for UF_LINGER_MS first, so that a
 * steady stream of faults costs it no online/offline fences; a grace
 * period that starts meanwhile waits that long at most.
 */
static bool uf_wait(struct uf_resolver *r)
{
	struct epoll_event ev[2];
	bool stop;
	int n;

	pthread_rwlock_rdlock(&r->lock);
	stop = r->stop;
	pthread_rwlock_unlock(&r->lock);
	if (stop)
		return false;
	if (r->online) {
		while ((n = epoll_wait(r->epfd, ev, 2, UF_LINGER_MS)) < 0 && errno == EINTR)
			;
		if (n)
			return true;
		ps_qsbr_thread_offline();
		r->online = false;
	}
	while (epoll_wait(r->epfd, ev, 2, -1) < 0 && errno == EINTR)
		;
	return true;
}

static void uf_serve(struct uf_resolver *r)
{
	struct ps_uffd *uf = r->uf;
	bool timing = uf->flags & PS_UFFD_TIMING;

	for (;;) {
		uint64_t t = 0;
		ssize_t n;

		/* Every message read below was sent for a region registered by then. */
		pthread_rwlock_rdlock(&r->lock);
		r->seen = uf->epoch;
		pthread_rwlock_unlock(&r->lock);
		n = read(uf->uffd, r->batch, sizeof(r->batch));

		if (n <= 0) {
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return;
			if (!uf_wait(r))
				return;
			continue;
		}
		if (timing)
			t = uf_now_ns();
		/* An RCU_QSBR store's lookups are free for an online thread. */
		if (uf->qsbr && !r->online)
			r->online = !ps_qsbr_thread_online();
		r->nbatch = (int)((size_t)n / sizeof(struct uffd_msg));
		for (r->next = 0; r->next < r->nbatch; r->next++) {
			bool stop;

			pthread_rwlock_rdlock(&r->lock);
			stop = r->stop;
			if (!stop) {
				r->holding = true;
				uf_resolve(r, &r->batch[r->next], t);
				r->holding = false;
				/* Counted under the lock: ps_uffd_stats() waits for it. */
				pthread_mutex_lock(&r->st_lock);
				uf_add(&r->st, &r->cur);
				pthread_mutex_unlock(&r->st_lock);
				memset(&r->cur, 0, sizeof(r->cur));
			}
			pthread_rwlock_unlock(&r->lock);
			if (stop) {
				/* Served by the kernel once destroy has unregistered. */
				uf_hand_back(r);
				return;
			}
			/* Nothing borrowed is held between faults. */
			if (r->online)
				ps_qsbr_quiescent();
			if (timing)
				t = uf_now_ns();
		}
	}
}

static void *uf_resolver_main(void *arg)
{
	struct uf_resolver *r = arg;
	pthread_t pred;
	bool has_pred;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_mutex_lock(&r->uf->life);
	pred = r->pred;
	has_pred = r->has_pred;
	r->has_pred = false;
	pthread_mutex_unlock(&r->uf->life);
	if (has_pred)
		pthread_join(pred, NULL);
	uf_resolver_mark(r->uf);
	r->bound = r->refused = r->refused_local = UF_UNBOUND;
	r->online = false;
#ifdef UF_ASAN
	{
		pthread_attr_t a;
		size_t size;
		void *lo = NULL;

		if (!pthread_getattr_np(pthread_self(), &a)) {
			pthread_attr_getstack(&a, &lo, &size);
			pthread_attr_destroy(&a);
		}
		r->stack_lo = lo ? lo : (char *)__builtin_frame_address(0);
	}
#endif
	pthread_cleanup_push(uf_resolver_exit, r);
	uf_serve(r);
	pthread_cleanup_pop(0);
	if (r->online)
		ps_qsbr_thread_offline();
	return NULL;
}

/* Note the stack and guard of @r's new thread @t, which no region may cover; under uf->life. */
static void uf_note_stack(struct uf_resolver *r, pthread_t t)
{
	pthread_attr_t a;
	void *lo = NULL;
	size_t size = 0, guard = 0;

	r->stack_own_lo = r->stack_own_hi = 0;
	if (pthread_getattr_np(t, &a))
		return;
	if (!pthread_attr_getstack(&a, &lo, &size) && !pthread_attr_getguardsize(&a, &guard)) {
		r->stack_own_lo = (uintptr_t)lo - guard;
		r->stack_own_hi = (uintptr_t)lo + size;
	}
	pthread_attr_destroy(&a);
}

/* Start @r's thread with every signal blocked; under uf->life. */
static int uf_start_resolver(struct uf_resolver *r)
{
	sigset_t all, old;
	pthread_t t;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t, NULL, uf_resolver_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return err;
	r->thread = t;
	r->started = true;
	uf_note_stack(r, t);
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
		memmove(g, g + 1, (uf->nregions - at - 1) * sizeof(*g));
		uf->nregions--;
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
	memmove(&uf->regions[at], &uf->regions[at + 1],
			(uf->nregions - at - 1) * sizeof(uf->regions[0]));
	uf->nregions--;
	uf_unlock_all(uf);
out:
	pthread_mutex_unlock(&uf->regions_lock);
	return err;
}

/* ---- counts ---------------------------------------------------------------------------- */

static void uf_add(struct ps_uffd_stats *to, const struct ps_uffd_stats *s)
{
	to->faults += s->faults;
	to->copies += s->copies;
	to->zeros += s->zeros;
	to->exists += s->exists;
	to->retries += s->retries;
	to->rebinds += s->rebinds;
	to->fallbacks += s->fallbacks;
	to->fill_errors += s->fill_errors;
	to->dropped += s->dropped;
	to->errors += s->errors;
	to->restarts += s->restarts;
	to->lookup_ns += s->lookup_ns;
	to->resolve_ns += s->resolve_ns;
}

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
