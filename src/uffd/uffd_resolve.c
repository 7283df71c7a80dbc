// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fault plane's resolver threads: each reads fault messages from the
 * userfaultfd, finds the region and the node the store names for the
 * page, binds its memory policy to that node and places the page
 * (UFFDIO_COPY or UFFDIO_ZEROPAGE).  A resolver that ends inside the fill
 * callback hands its faults back and is replaced.  Locking: uffd_private.h.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <polstore/counts.h>
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

/* The resolver's memory policy: not set yet, or the kernel's default. */
#define UF_UNBOUND (-2)
#define UF_DEFAULT (-1)
/* How long an online QSBR resolver waits for the next fault before it goes offline. */
#define UF_LINGER_MS 1

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
	if (!g || (g->epoch > r->seen && uf->ended && uf->ended < g->epoch)) {
		/*
		 * A message read after its region left the table (and, maybe,
		 * before another took the range): the kernel serves the fault,
		 * and a touch of a new region there faults into it afresh.  A
		 * region registered after the batch's count was read, once some
		 * region had ended before it, looks the same: its own faults
		 * are woken too, and come again.
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
		named = ps_store_lookup_node_count(uf->store, f.page, (int)local);
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
int uf_start_resolver(struct uf_resolver *r)
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

/* ---- counts ---------------------------------------------------------------------------- */

void uf_add(struct ps_uffd_stats *to, const struct ps_uffd_stats *s)
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
