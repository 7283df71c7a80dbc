/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the fault plane's files share: the plane, its resolvers and its
 * region table.  uffd.c opens the userfaultfd and creates, destroys and
 * counts the plane; uffd_resolve.c is the resolver threads and the fault
 * path; uffd_register.c the region table (register, unregister, what a
 * region may cover); uffd_check.c the misuse checks (destroyed planes, the
 * wrong process, a resolver calling its own plane).
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
#ifndef POLSTORE_SRC_UFFD_PRIVATE_H
#define POLSTORE_SRC_UFFD_PRIVATE_H

#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <polstore/uffd.h>

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

/* Messages one read(2) takes: few, so that a burst spreads over resolvers. */
#define UF_BATCH 8

/*
 * A plane's identity, checked at every call.  It lies past the first 16
 * bytes of the plane's block, which malloc() reuses for its own lists once
 * the block is freed, so a destroyed plane's tag stays readable until the
 * block is allocated again.
 */
struct uf_tag {
	uint32_t magic; /* UF_TAG_LIVE from creation to destroy, then UF_TAG_DEAD */
	bool checked;	/* created in the checking mode: its block outlives destroy */
	pid_t pid;	/* the process that created it */
};

#define UF_TAG_LIVE 0x0ff1ce11u
#define UF_TAG_DEAD 0xdeadfa17u

/* What a call may do beyond the parent's other threads (uf_enter() @how). */
#define UF_IN_CHILD 1U /* run in a child of fork() */
#define UF_RESOLVER 2U /* run on one of the plane's own resolver threads */

/*
 * The checking mode for planes created from now on: POLSTORE_CHECK=1 when
 * the library is loaded, or the build's default (POLSTORE_CHECKING).
 */
extern bool psi_uffd_checking;

/* A new plane's tag (the block is not shared yet). */
void uf_tag_init(struct uf_tag *t);

/*
 * Check a call (@call, e.g. "ps_uffd_stats()") on the plane @uf whose tag
 * is @t: misuse prints a message naming polstore, the call and the plane,
 * and aborts.  Return: 0, or -ESRCH in a child of fork() for a call that
 * does not allow it (@how) on a plane the checking mode does not cover.
 */
int uf_enter(const struct uf_tag *t, const void *uf, const char *call, unsigned how);

/* The end of @uf, whose tag is @t: its block is freed, or kept poisoned when checked. */
void uf_tag_bury(struct uf_tag *t, void *uf);

/* The calling thread is a resolver of @uf from now on (NULL: no longer). */
void uf_resolver_mark(const void *uf);

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
	bool attached; /* to @store (ps_store_attach()): its destroy is refused until uf_free() */
	bool qsbr;     /* the store is RCU_QSBR: resolvers go online */
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
	 * only be a fault of a region registered at e or before, or of one
	 * whose range was registered before it and has ended: a region
	 * registered since is found for it only then.  @ended is the epoch at
	 * the first end of a region (0: none yet); a region registered before
	 * any ended was the first at its range, and its faults are its own.
	 */
	uint64_t epoch, ended;
};

_Static_assert(offsetof(struct ps_uffd, tag) >= 16, "the tag must outlive free()");

/* Start @r's thread with every signal blocked (uffd_resolve.c); under uf->life. */
int uf_start_resolver(struct uf_resolver *r);

/* Add the counts @s to @to (uffd_resolve.c). */
void uf_add(struct ps_uffd_stats *to, const struct ps_uffd_stats *s);

#endif /* POLSTORE_SRC_UFFD_PRIVATE_H */
