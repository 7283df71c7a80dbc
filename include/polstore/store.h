/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore store: a map from half-open index ranges [start, end) to policies,
 * in the spirit of the kernel's struct shared_policy, with the
 * synchronisation chosen per store.
 *
 * Variants (enum ps_sync), all with the same semantics:
 *   PS_SYNC_SPIN      one spinlock around the tree (bounded spin, then yield).
 *   PS_SYNC_RWLOCK    readers share, writers exclude; writer-preferring, and
 *                     readers announce themselves on per-thread cache lines.
 *   PS_SYNC_SEQLOCK   readers walk optimistically and retry when a writer
 *                     intervened (falling back to the lock after a few
 *                     tries); memory is reclaimed after an RCU grace period.
 *   PS_SYNC_RCU       liburcu "memb" flavour; readers never block, never
 *                     retry and write no shared cache line.
 *   PS_SYNC_RCU_QSBR  liburcu "qsbr" flavour; as RCU, with zero-cost read
 *                     sections for threads that report quiescent states
 *                     (see polstore/rcu.h).
 *
 * Ranges never overlap.  Equal neighbours are NOT merged: a set() leaves
 * exactly the ranges the kernel's shared_policy_replace() would, so
 * foreach() shows the history of sets, trimmed.
 *
 * Calling contexts.  One table for every call; each function's Context:
 * line points here and adds only what is particular to it.  Columns:
 *   lock     what the call takes: excl the store's lock exclusively,
 *            shared the lock shared, writer the writer lock (SEQLOCK: a
 *            spinlock; RCU and RCU_QSBR: a mutex), - none;
 *   blocks   whether it may wait for another thread;
 *   section  inside a read-side section of the same store on the same
 *            thread (ps_store_read_lock() .. ps_store_read_unlock()):
 *            yes, or what it does there instead (EDEADLK: returns
 *            -EDEADLK, changing nothing; abort: prints the call and the
 *            store on stderr and aborts);
 *   GP       whether it may wait for an RCU grace period;
 *   callback inside a ps_foreach_fn callback of the same store.
 * RCU means RCU and RCU_QSBR alike where no note says otherwise.
 *
 *   call                variant  lock    blocks  section  GP   callback
 *   lookup, lookup_copy SPIN     excl    yes     EDEADLK  no   EDEADLK
 *   lookup_node, next   RWLOCK   shared  yes     yes      no   yes
 *                       SEQLOCK  - (1)   (1)     yes      no   yes
 *                       RCU      -       no (2)  yes      no   yes
 *   read_lock (opens    SPIN     excl    yes     abort    no   abort
 *   a section)          RWLOCK   shared  yes     yes      no   yes
 *                       SEQLOCK  -       no (2)  yes      no   yes
 *                       RCU      -       no (2)  yes      no   yes
 *   lookup_borrow,      only inside a section of the store; no lock
 *   next_borrow         (SEQLOCK: but (1)), no shared write
 *   foreach,            SPIN     excl    yes     EDEADLK  no   EDEADLK
 *   foreach_range       RWLOCK   shared  yes     yes      no   yes
 *                       SEQLOCK  writer  yes     yes      no   EDEADLK
 *                       RCU      -       no (2)  yes      no   yes
 *   set, set_many,      SPIN     excl    yes     EDEADLK  no   EDEADLK
 *   check               RWLOCK   excl    yes     EDEADLK  no   EDEADLK
 *                       SEQLOCK  writer  yes     yes      (3)  EDEADLK
 *                       RCU      writer  yes     yes      (4)  yes
 *   stats               RCU      writer  yes     yes      no   yes
 *   synchronize         SPIN,    -       no      yes      no   yes
 *                       RWLOCK   (a no-op: they defer nothing)
 *                       SEQLOCK  writer  yes     EDEADLK  yes  EDEADLK
 *                       RCU      -       yes     EDEADLK  yes  EDEADLK (5)
 *   destroy             SPIN,    -       no      abort    no   abort
 *                       RWLOCK
 *                       SEQLOCK, -       yes     abort    (6)  abort
 *                       RCU
 *   destroy_deferred,   all      -       no      yes      no   yes
 *   count, memory,
 *   sync_kind
 *
 *   (1) SEQLOCK reads take no lock; after 4 tries that met a writer they
 *       take the writer lock, and wait for it.
 *   (2) never waits for a writer.  RCU_QSBR: an online thread opens no
 *       section at all; an offline one is online for the section.
 *   (3) only when the small header of a batch of removed ranges cannot
 *       be allocated or no reclaim thread runs, and only outside every
 *       memb read-side section (inside one the batch waits for a later
 *       set or synchronize).
 *   (4) only with 32 MiB of retired ranges and records in flight (the
 *       reclaim thread far behind, as behind an online RCU_QSBR thread
 *       that reports no quiescent state) or no reclaim thread, and only
 *       outside every read-side section of its flavour (RCU_QSBR:
 *       offline); inside one the set never waits.
 *   (5) synchronize returns -EDEADLK inside any read-side section of the
 *       store's flavour, of this store or another (memb for SEQLOCK and
 *       RCU; for RCU_QSBR an automatic section, opened for a thread that
 *       was offline).  A section of an RCU_QSBR thread online by its own
 *       choice is not seen: the wait takes the thread offline, which ends
 *       the protection of what it borrowed.
 *   (6) waits for what the store's sets handed to the reclaim thread and
 *       is still in flight; so it aborts inside any read-side section of
 *       the store's flavour too, as (5).
 *   stats: the other variants return -EOPNOTSUPP at once.
 *
 * The first section of a thread registers it with liburcu (SEQLOCK, RCU:
 * memb; RCU_QSBR: qsbr), which it leaves at exit; a thread that exits or
 * is cancelled inside an RCU or SEQLOCK section has it closed then (see
 * polstore/rcu.h).
 *
 * Other stores.  Lookups, sections and walks of RWLOCK, SEQLOCK, RCU and
 * RCU_QSBR stores may be made inside any section or walk of another
 * store: they never wait for a writer that waits for the caller.  The
 * calls that take a lock exclusively (every call on a SPIN store but the
 * borrowed reads; set, set_many and check of SPIN, RWLOCK and SEQLOCK
 * stores; SEQLOCK walks), made inside a section or walk of another store,
 * deadlock with a thread that nests the same two stores the other way
 * round, as two mutexes do: nest them in one order across the program
 * (for example the order the stores were created in).  Likewise
 * ps_store_synchronize() or destroy of an RCU or SEQLOCK store inside a
 * SPIN or RWLOCK section, while another thread inside an RCU section
 * waits for that lock.
 *
 * Signal handlers.  On RCU and RCU_QSBR stores, ps_store_lookup_node(),
 * ps_store_lookup_copy() and a section the handler opens and closes
 * itself (ps_store_read_lock(), borrowed lookups, ps_store_read_unlock())
 * are async-signal-safe on a thread that has read a store of the same
 * flavour before (its first read registers it with liburcu, which takes a
 * mutex), the checking mode's records included.  Other calls may allocate
 * or wait (a lookup's reference on a policy that turns hot allocates), and
 * the other variants' reads take locks the interrupted thread may hold:
 * not from a handler.
 *
 * Misuse fails loudly.  Always, at the cost of a thread-local record of
 * the lock-based sections a thread holds (8 deep; nothing on the
 * lock-free read paths): a call that would wait for itself returns
 * -EDEADLK, or, when it returns nothing, prints what was called on which
 * store and aborts, as the table says; so does a read unlock with no
 * section to close (ps_store_read_unlock()).  The checking mode adds, for the stores
 * created while it is on: a read unlock on a store the thread holds no
 * section of (never locked, unlocked twice, or locked by another thread),
 * a borrowed lookup outside a section of the store, a destroy while
 * sections of the store are open on any thread, any call on a destroyed
 * store (kept poisoned for a while), a thread that exits inside a SPIN or
 * RWLOCK section, and threads deadlocked waiting for stores each other
 * holds (the lock order broken), each reported within a second: a
 * message naming the call and the store on stderr, then abort().  Turn it
 * on with POLSTORE_CHECK=1 in the environment (read when the library is
 * loaded), or build the library with -DPOLSTORE_CHECKING=ON
 * (POLSTORE_CHECK=0 turns that off).  Checked stores are slower (every
 * call goes through the library and a per-thread record, none inline);
 * the others run as without it.
 */
#ifndef POLSTORE_STORE_H
#define POLSTORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <polstore/export.h>
#include <polstore/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/** enum ps_sync - how a store synchronises readers and writers. */
enum ps_sync {
	PS_SYNC_SPIN,
	PS_SYNC_RWLOCK,
	PS_SYNC_SEQLOCK,
	PS_SYNC_RCU,
	PS_SYNC_RCU_QSBR,
};

/** Number of variants; loop `for (s = 0; s < PS_SYNC_COUNT; s++)`. */
#define PS_SYNC_COUNT 5

struct ps_store;

/**
 * ps_sync_name() - the variant's name: "spin", "rwlock", "seqlock", "rcu",
 * "rcu-qsbr"
 * @sync: the variant
 *
 * Context: any thread.
 * Return: a static string, or NULL for a value that is not a variant.
 */
PS_API const char *ps_sync_name(enum ps_sync sync);

/**
 * ps_sync_from_name() - parse a variant name as ps_sync_name() prints it
 * @name: the name
 *
 * Context: any thread.
 * Return: the variant (>= 0), or -EINVAL for NULL or an unknown name.
 */
PS_API int ps_sync_from_name(const char *name);

/* What a variant is, as ps_sync_caps() reports it. */
#define PS_CAP_LOCK 0x1u /* writers take a lock readers or walks can wait for */
#define PS_CAP_RCU 0x2u  /* readers use liburcu: a reading thread registers with it */
#define PS_CAP_QSBR 0x4u /* liburcu's qsbr flavour: online threads read for free */

/**
 * ps_sync_caps() - what a variant is, for programs that treat variants alike
 * @sync: the variant
 *
 * PS_CAP_LOCK: writers take a lock that readers or walks can wait for, the
 * lock ps_store_lock_stat_read() reports (polstore/lockstat.h).
 * PS_CAP_RCU: readers use liburcu; a thread that reads is registered with
 * one of its flavours (polstore/rcu.h).  PS_CAP_QSBR: that flavour is qsbr,
 * where a thread online by ps_qsbr_thread_online() reads with no section.
 *
 * Context: any thread.
 * Return: the PS_CAP_* bits of @sync; 0 for a value that is not a variant.
 */
PS_API unsigned ps_sync_caps(enum ps_sync sync);

/**
 * ps_store_create() - create an empty store
 * @sync: the synchronisation variant
 *
 * Context: any thread; allocates.
 * Return: the store, or NULL with errno EINVAL (unknown @sync) or ENOMEM;
 * for SEQLOCK, RCU and RCU_QSBR also EAGAIN or ENOMEM when polstore cannot
 * create the thread-specific-data keys that unregister reader threads from
 * liburcu at exit (pthread_key_create() failed; a later call tries again).
 */
PS_API struct ps_store *ps_store_create(enum ps_sync sync);

/**
 * ps_store_destroy() - free a store and drop its policy references
 * @store: the store, or NULL (a no-op)
 *
 * References that callers got from ps_store_lookup() stay valid until they
 * are put.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)).  No other
 * thread may use @store during or after the call
 * (ps_store_destroy_deferred() retires a store readers may still be in).
 */
PS_API void ps_store_destroy(struct ps_store *store);

/**
 * ps_store_destroy_deferred() - free a store once no reader can still use it, never waiting
 * @store: the store, which the caller has made unreachable for new readers
 *
 * Retires a store that lock-free readers may still be inside: the caller
 * unpublishes it (clears or replaces the pointer readers load it from,
 * with a release store), calls this, and returns at once; polstore
 * frees the store on its reclaim thread after a grace period, and drops
 * its policy references then.  Readers find the store inside
 * ps_sync_read_lock(), which opens the section each variant's grace
 * period waits for (examples/deferred_destroy.c shows the whole
 * pattern).  What "no reader can still use it" means depends on the
 * variant:
 *
 *  - RCU and SEQLOCK: a memb grace period.  Lookups, copies, node lookups,
 *    ps_store_read_lock() sections and RCU foreach walks under way when the
 *    call is made finish first.  A SEQLOCK foreach walk holds the writer
 *    lock, not a section: the store is freed once no walk holds it.
 *  - RCU_QSBR: a qsbr grace period: every online thread has passed a
 *    quiescent state (or gone offline), and automatic sections have ended.
 *    So its readers must find the store while online, or inside a
 *    section of an RCU_QSBR store: a memb section protects nothing here.
 *  - SPIN and RWLOCK: readers hold the store's lock, not an RCU section,
 *    so a grace period alone protects only readers that reached the store
 *    inside a memb read-side section of their own (ps_sync_read_lock(),
 *    liburcu's urcu_memb_read_lock(), or a section of any RCU or SEQLOCK
 *    store) and use it within it.  After a memb grace period the reclaim thread tries
 *    the store's lock (never waiting for it): while a section or walk
 *    still holds it, it tries again every 10 ms, and frees the store once
 *    the lock is free.
 *
 * ps_rcu_barrier() (polstore/rcu.h) waits until the free is done (but for
 * a lock still held).
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)); inside
 * sections of @store too (the free waits for them).  No writer of @store
 * (set, set_many, synchronize, check, destroy) may run during or after
 * the call, and no new reader may find @store: only readers already under
 * way may still use it.
 * Return: 0; -EINVAL for NULL; -ENOMEM or -EAGAIN (no memory for the
 * hand-over, no reclaim thread could start) with nothing done: @store is
 * as before, and the caller may retry or destroy it.
 */
PS_API int ps_store_destroy_deferred(struct ps_store *store);

/**
 * ps_sync_read_lock() - open a section in which stores of a variant are not freed
 * @sync: the variant of the stores the section finds
 *
 * The reader side of ps_store_destroy_deferred() for a store found
 * through a pointer the program publishes: load the pointer (an acquire
 * load) and use the store inside the section; a store handed to
 * ps_store_destroy_deferred() after it was loaded is freed only once the
 * section has closed.  A program needs no liburcu call and no liburcu
 * link flag for it:
 *
 *	if (ps_sync_read_lock(PS_SYNC_RCU) == 0) {
 *		struct ps_store *s = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
 *
 *		node = ps_store_lookup_node(s, page, local_node);
 *		ps_sync_read_unlock(PS_SYNC_RCU);
 *	}
 *
 * The section is a read-side section of the liburcu flavour whose grace
 * period ps_store_destroy_deferred() waits for: memb for SPIN, RWLOCK,
 * SEQLOCK and RCU, qsbr for RCU_QSBR (a thread online by
 * ps_qsbr_thread_online() is inside one already; an offline thread is
 * online for the section).  Sections nest, in each other and with the
 * stores' own sections.  The section takes no lock: a store's calls
 * inside it take that store's locks as they do anywhere.  The first
 * section of a thread registers it with liburcu, as a store's first read
 * does, and the thread leaves at exit (polstore/rcu.h).
 *
 * Context: any thread.  Inside the section, as inside a read-side section
 * of an RCU store of the same flavour (RCU_QSBR for PS_SYNC_RCU_QSBR, RCU
 * for the others): no call that waits for a grace period of that flavour
 * (ps_store_synchronize() and ps_store_destroy() of the stores of that
 * flavour: SEQLOCK and RCU for memb, RCU_QSBR for qsbr; ps_rcu_barrier();
 * the calling-context table at the top of polstore/store.h);
 * ps_store_destroy_deferred() is fine.  A thread that exits or is
 * cancelled inside has the section closed at exit.  Close it on the
 * thread that opened it, with the same @sync.
 * Return: 0; -EINVAL for a value that is not a variant, or -EAGAIN /
 * -ENOMEM when polstore cannot create the thread-specific-data key that
 * unregisters the thread at exit (pthread_key_create() failed): no
 * section is open then.
 */
PS_API int ps_sync_read_lock(enum ps_sync sync);

/**
 * ps_sync_read_unlock() - close a section that ps_sync_read_lock() opened
 * @sync: the variant given to ps_sync_read_lock()
 *
 * Context: the thread that opened the section, with the same @sync; a
 * value that is not a variant is ignored.  A thread that holds no section
 * of the variant's flavour gets a message naming the call and the variant
 * on stderr and abort() (a stray close would hold up every later grace
 * period); an RCU_QSBR thread online by its own choice is not checked.
 */
PS_API void ps_sync_read_unlock(enum ps_sync sync);

/**
 * ps_store_sync_kind() - the variant a store was created with
 * @store: the store
 *
 * Context: any thread.
 * Return: the variant, or -EINVAL when @store is NULL.
 */
PS_API int ps_store_sync_kind(const struct ps_store *store);

/**
 * ps_store_set() - give [@start, @end) the policy @pol
 * @store: the store
 * @start: first index of the range
 * @end: one past the last index; must be > @start
 * @pol: the policy, or NULL; NULL or a PS_MPOL_DEFAULT policy removes
 *       whatever covers [@start, @end)
 *
 * As the kernel's shared_policy_replace(): ranges inside [@start, @end) are
 * removed, ranges overlapping one edge are trimmed, a range covering the new
 * one on both sides is split in two (both parts keep their policy), then
 * the new range is inserted.  The store takes its own reference to @pol; the
 * caller keeps its reference.
 *
 * Every node the update may need is allocated before anything is published,
 * so an allocation failure leaves the store exactly as it was.
 *
 * SEQLOCK, RCU and RCU_QSBR stores free what a set removes (and, for RCU
 * and RCU_QSBR, the read index's nodes it replaced) after a grace period,
 * on polstore's reclaim thread; policy references of removed ranges are
 * dropped then too (see ps_store_synchronize()).
 *
 * RCU and RCU_QSBR: readers read a B+-tree index of the ranges; the set
 * builds the index nodes it changes and publishes them with one pointer
 * store into the child slot of the lowest node it leaves unchanged (the
 * root when the change reaches it), and changes the store's tree, which
 * no reader walks, in place.  It never waits for a grace period or for
 * readers.  A lookup sees the store before or after the set, never a mix
 * (ps_store_stats() counts the nodes sets build).
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)); writers
 * are serialised by the store; allocates.  RCU and RCU_QSBR: a set inside
 * a foreach callback of @store is not seen by the walk, and what the
 * caller borrowed stays valid until its section ends.  A set that waits
 * for a grace period (note 4 of the table) waits as long as the grace
 * period takes, which an online RCU_QSBR thread that reports no quiescent
 * state prolongs without end (ps_qsbr_set_stall_warning() names it).
 * Return: 0; -EINVAL when @store is NULL or @start >= @end; -ENOMEM;
 * -EDEADLK (nothing changed) where the calling-context table says so.
 */
PS_API int ps_store_set(struct ps_store *store, uint64_t start, uint64_t end,
		struct ps_policy *pol);

/**
 * ps_store_synchronize() - free what earlier sets removed but still hold
 * @store: the store
 *
 * SEQLOCK, RCU and RCU_QSBR stores free removed ranges, and drop their
 * policy references, after a grace period on polstore's reclaim thread of
 * the store's liburcu flavour (SEQLOCK gathers them in batches first).
 * This waits for all of that, so that after it returns every policy
 * reference the store holds belongs to a range in the store.  RCU and
 * RCU_QSBR also give back the calling thread's spare nodes and the
 * flavour's pool of released ones (which the reclaim thread empties by
 * itself once sets stop).  SPIN and RWLOCK stores free removed ranges
 * before ps_store_set() returns: a no-op for them.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)), note 5;
 * the memb sections of RCU id maps count too.  An online RCU_QSBR thread
 * goes offline for the wait and back online after it.
 * Return: 0; -EINVAL when @store is NULL; -EDEADLK (nothing waited for)
 * inside a section it would wait for.
 */
PS_API int ps_store_synchronize(struct ps_store *store);

/**
 * ps_store_lookup() - the policy covering @idx, with a new reference
 * @store: the store
 * @idx: the index
 *
 * Linearizable with concurrent ps_store_set() calls for every variant.  The
 * reference is one atomic increment: on the policy's count while it is
 * cold, and, once the policy is hot (64 lookups while in a store), on a
 * per-CPU stripe of it, a cache line of the caller's CPU (see
 * ps_policy_get()).  ps_store_lookup_borrow() writes nothing at all.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)) (RCU_QSBR:
 * polstore/rcu.h says what makes it cheap).  The lookup that makes a
 * policy hot allocates its stripes (up to 1 KiB) through the polstore
 * allocator; a failed allocation leaves the policy on its atomic count and
 * the lookup succeeds.
 * Return: the policy, which the caller must ps_policy_put(); NULL when no
 * range covers @idx (errno is then 0), @store is NULL (errno EINVAL), or
 * inside this thread's own section of a SPIN @store (errno EDEADLK).
 */
PS_API struct ps_policy *ps_store_lookup(struct ps_store *store, uint64_t idx);

/**
 * ps_store_read_lock() - open a read-side section for borrowed lookups
 * @store: the store
 *
 * Borrowed policies (ps_store_lookup_borrow()) stay valid until the matching
 * ps_store_read_unlock().  Per variant: SPIN takes the lock, RWLOCK takes it
 * shared, SEQLOCK and RCU enter an RCU read-side section, RCU_QSBR marks the
 * thread online if it is not.  Sections of RWLOCK, SEQLOCK, RCU and
 * RCU_QSBR stores nest, of one store or of several; a SPIN section must
 * not be opened inside another of the same store (that prints a message
 * and aborts).  Sections should be short: SPIN and RWLOCK writers wait
 * for them, and the variants that defer frees free nothing retired while
 * one is open.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)).
 */
PS_API void ps_store_read_lock(struct ps_store *store);

/**
 * ps_store_read_unlock() - close the section ps_store_read_lock() opened
 * @store: the store
 *
 * An unlock with no section of @store to close is refused, in every build
 * and whether the checking mode is on or not: it prints "polstore:
 * ps_store_read_unlock(): <variant> store <address>: this thread holds no
 * read-side section of it ..." on stderr and aborts, leaving the lock as it
 * was.  What a thread can be told to hold per variant: SPIN and RWLOCK
 * its own sections of @store (8 deep; an unlock with more open is taken
 * to close one of the deeper ones); SEQLOCK and RCU any memb read-side
 * section (an extra unlock inside a section of another such store closes
 * that one); RCU_QSBR being online (a thread online by its own choice has
 * no count to check).  The checking mode tells each section apart, on
 * every variant, and names the thread that holds it.
 *
 * Context: the thread that called ps_store_read_lock() on @store.
 */
PS_API void ps_store_read_unlock(struct ps_store *store);

/**
 * ps_store_lookup_borrow() - the policy covering @idx, borrowed, no reference
 * @store: the store
 * @idx: the index
 *
 * The no-shared-write lookup: under RCU and RCU_QSBR it writes no shared
 * cache line at all (SEQLOCK writes none unless it falls back to the lock).
 * The result is linearizable like ps_store_lookup()'s.  Use it for the hot
 * path where every thread reads the same policy; call ps_policy_get() on the
 * result to keep it past the section.
 *
 * Context: between ps_store_read_lock() and ps_store_read_unlock() on
 * @store; see the calling-context table at the top of polstore/store.h
 * (polstore-store(3polstore)).
 * Return: the policy, valid until ps_store_read_unlock(); NULL when no range
 * covers @idx or @store is NULL.
 */
PS_API const struct ps_policy *ps_store_lookup_borrow(struct ps_store *store, uint64_t idx);

/**
 * ps_store_lookup_copy() - the policy covering @idx, copied out: one call, no reference
 * @store: the store
 * @idx: the index
 * @view: initialised by the caller (PS_POLICY_VIEW_INIT(): size and the
 *        number of mask words wanted); receives the mode, flags, weight and
 *        those mask words of the covering policy, or PS_MPOL_DEFAULT with an
 *        empty mask when none covers @idx
 *
 * Opens and closes its own read-side section (RCU_QSBR: an online thread
 * needs none), so it writes nothing shared under RCU and RCU_QSBR, nor under
 * SEQLOCK unless it falls back to the lock; SPIN and RWLOCK take their lock.
 * Linearizable like ps_store_lookup().  Nothing stays borrowed: the view is
 * the caller's.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)).
 * Return: 1 when a policy covers @idx, 0 when none does; -EINVAL when
 * @store or @view is NULL, @view->size is not sizeof(struct
 * ps_policy_view) or @view->nwords exceeds PS_NODEMASK_WORDS (then @view
 * is untouched); -EDEADLK inside this thread's section of a SPIN @store.
 */
PS_API int ps_store_lookup_copy(struct ps_store *store, uint64_t idx, struct ps_policy_view *view);

/**
 * ps_store_lookup_node() - the node an allocation of page @idx should use: one call
 * @store: the store
 * @idx: the page index (the lookup key and the interleave index)
 * @local_node: the node of the allocating CPU, 0 .. PS_MAX_NUMNODES - 1
 *
 * ps_policy_node(covering policy, @idx, @local_node) inside one read-side
 * section of its own, with no reference and no shared write, as
 * ps_store_lookup_copy().  A caller that biases the interleave index (the
 * kernel adds a shared object's inode number) uses ps_store_lookup_borrow()
 * and ps_policy_node() with its own index instead.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)).
 * Return: the node, always one with memory in the topology in force
 * (polstore/numa.h; when no policy covers @idx, @local_node or the nearest
 * node with memory to it); -EINVAL when @store is NULL or @local_node is
 * out of range; -EDEADLK as
 * ps_store_lookup_copy().
 */
PS_API int ps_store_lookup_node(struct ps_store *store, uint64_t idx, int local_node);

/**
 * typedef ps_foreach_fn - callback of ps_store_foreach() and ps_store_foreach_range()
 *
 * @pol is borrowed for the duration of the call.  A non-zero return stops
 * the walk.  The callback runs inside the walk's section: what it may
 * call on its own store is the "callback" column of the calling-context
 * table at the top of this header, and calls on other stores follow the
 * lock order given there.
 */
typedef int (*ps_foreach_fn)(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg);

/**
 * ps_store_foreach() - call @fn on every range in ascending order
 * @store: the store
 * @fn: the callback
 * @arg: passed to @fn
 *
 * Every variant walks one consistent snapshot: SPIN and SEQLOCK hold the
 * writer lock, RWLOCK holds the lock shared, RCU and RCU_QSBR walk the tree
 * version current when the walk began inside one read-side section.  SPIN,
 * RWLOCK and SEQLOCK sets wait for the walk, so keep @fn short; RCU and
 * RCU_QSBR sets do not (they publish a new version, which the walk does
 * not see), but what they retire is freed only once the walk's section
 * has ended.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)); @fn as
 * ps_foreach_fn says.
 * Return: 0 after a full walk, @fn's non-zero return when it stopped the
 * walk, -EINVAL when @store or @fn is NULL, -EDEADLK where the
 * calling-context table says so.
 */
PS_API int ps_store_foreach(struct ps_store *store, ps_foreach_fn fn, void *arg);

/**
 * ps_store_count() - number of ranges in the store
 * @store: the store
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)); may be
 * stale at once under concurrent sets.
 * Return: the count; 0 for NULL.
 */
PS_API size_t ps_store_count(struct ps_store *store);

/**
 * ps_store_check() - verify every invariant of the store's tree(s)
 * @store: the store
 * @why: if not NULL, receives a static description of the first violation
 *
 * Checks the red-black properties, the depth bound, ascending
 * non-overlapping non-empty ranges, the range count, and a non-NULL
 * non-DEFAULT policy with a positive reference count in every range (RCU
 * variants: of the published version).  Debug builds
 * (POLSTORE_DEBUG_CHECKS) run it after every set and abort on a violation.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)); it
 * excludes sets while it runs.
 * Return: 0, -EINVAL for a NULL store, -EUCLEAN on a violation, or -EDEADLK.
 */
PS_API int ps_store_check(struct ps_store *store, const char **why);

/**
 * ps_store_memory() - bytes the store holds for its ranges
 * @store: the store
 *
 * Counts the store itself and its nodes, not the policies (which are
 * shared).  RCU and RCU_QSBR stores hold nothing else: the spare nodes a
 * set needs live with the thread that sets (ps_store_synchronize() gives
 * the calling thread's back), and what a set retires waits, with what every
 * store of the flavour retired, for a grace period that starts within
 * 40 ms (10 ms after sets stop), at once when 4 MiB are waiting (so about
 * 4 MiB are in flight at most, and what sets retire while one grace period
 * runs), then goes back to a pool those stores share, which is emptied
 * 20 ms after the last release; only if no reclaim thread could be started
 * do retired nodes wait in the store (they count here then).
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)); also
 * from an allocator hook (polstore/alloc.h) called inside a set of this
 * store.  Exact while no set runs, approximate under concurrent sets.
 * Return: the byte count; 0 for NULL.
 */
PS_API size_t ps_store_memory(struct ps_store *store);

/**
 * struct ps_store_stats - what a store's sets have done, since its creation
 * @sets: ps_store_set() calls and ps_store_set_many() batches that succeeded
 * @nodes_copied: read index nodes the sets built (RCU and RCU_QSBR build a
 *                new node for each one they change; a set that gives one
 *                range a new policy builds one leaf)
 * @nodes_copied_max: the most one set built
 * @nodes_retired: index nodes the sets took out of the published index
 *                 and ranges they removed, each freed after a grace period
 * @nodes_retired_max: the most one set retired
 * @root_publications: sets that made their change visible by a store of the
 *                     root rather than of a lower child slot (when they
 *                     changed the root, or while a ps_store_foreach() or
 *                     ps_store_foreach_range() walk, or the last try of a
 *                     ps_store_next() beside busy writers, was running)
 */
struct ps_store_stats {
	uint64_t sets;
	uint64_t nodes_copied;
	uint64_t nodes_copied_max;
	uint64_t nodes_retired;
	uint64_t nodes_retired_max;
	uint64_t root_publications;
};

/**
 * ps_store_stats() - read what a store's sets have done
 * @store: the store
 * @stats: receives the figures
 *
 * For RCU and RCU_QSBR stores; the others change their tree in place and
 * keep no figures.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)): RCU and
 * RCU_QSBR take the writer mutex briefly (waiting for a set in progress);
 * the other variants return at once.
 * Return: 0; -EINVAL when @store or @stats is NULL; -EOPNOTSUPP for a
 * variant that keeps no figures.
 */
PS_API int ps_store_stats(struct ps_store *store, struct ps_store_stats *stats);

/* ---- windows, walks by position, batches ---- */

/**
 * ps_store_foreach_range() - call @fn on every range overlapping [@start, @end)
 * @store: the store
 * @start: first index of the window
 * @end: one past the last index of the window; must be > @start
 * @fn: the callback, as for ps_store_foreach()
 * @arg: passed to @fn
 *
 * Ranges are passed in ascending order and NOT clipped: @fn sees each
 * range's own bounds, so the first may start before @start and the last
 * may end after @end (clip with max/min where needed).  The walk seeks the
 * first range that ends after @start and stops at the first that starts at
 * or after @end: O(log n + k) for k ranges in the window.
 *
 * One consistent snapshot, as ps_store_foreach(): SPIN and SEQLOCK hold the
 * writer lock, RWLOCK holds the lock shared, RCU and RCU_QSBR walk the
 * version published when the walk began inside one read-side section; no
 * RCU writer waits for the walk, and sets made meanwhile (also by @fn)
 * are not seen by it.
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)); @fn as
 * ps_foreach_fn says.
 * Return: 0 after a full walk (also when no range overlaps the window),
 * @fn's non-zero return when it stopped the walk, -EINVAL when @store or
 * @fn is NULL or @start >= @end, -EDEADLK as ps_store_foreach().
 */
PS_API int ps_store_foreach_range(struct ps_store *store, uint64_t start, uint64_t end,
		ps_foreach_fn fn, void *arg);

/**
 * ps_store_next() - the first range that ends after @idx, with a new reference
 * @store: the store
 * @idx: the index: the range found contains @idx, or is the first one
 *       starting after it
 * @start: receives the range's first index (not clipped to @idx)
 * @end: receives one past its last index
 * @pol: receives its policy, with a new reference the caller must
 *       ps_policy_put()
 *
 * Walks by position without a callback: start at @idx = 0 (or anywhere)
 * and continue with @idx = *@end until -ENOENT.  Each call is linearizable
 * on its own (as ps_store_lookup(): the range, its bounds and its policy
 * are one state of the store), but a loop of calls is NOT a snapshot:
 * sets between two calls show, so a loop may see a range that a later set
 * split, or miss one set behind it.  For a snapshot of a window use
 * ps_store_foreach_range().  O(log n).
 *
 * Context: see the calling-context table at the top of
 * polstore/store.h (polstore-store(3polstore)); in a
 * section of a SPIN @store use ps_store_next_borrow().
 * Return: 0 with *@start, *@end and *@pol written; -ENOENT when no range
 * ends after @idx (nothing written); -EINVAL when @store, @start, @end or
 * @pol is NULL; -EDEADLK inside this thread's section of a SPIN @store.
 */
PS_API int ps_store_next(struct ps_store *store, uint64_t idx, uint64_t *start, uint64_t *end,
		struct ps_policy **pol);

/**
 * ps_store_next_borrow() - ps_store_next() inside a read-side section, no reference
 * @store: the store
 * @idx: the index
 * @start: receives the range's first index
 * @end: receives one past its last index
 * @pol: receives its policy, borrowed until ps_store_read_unlock()
 *
 * As ps_store_next(), writing no shared cache line under RCU, RCU_QSBR and
 * SEQLOCK unless sets keep landing during its walk: after a few tries
 * SEQLOCK takes the lock, and RCU and RCU_QSBR announce the last walk to
 * the writers (who publish at the root meanwhile and never wait for it).
 * Each call is
 * linearizable on its own; under RCU, RCU_QSBR and SEQLOCK the section
 * does not freeze the store, so a loop of calls is no snapshot (under SPIN
 * and RWLOCK it is one: the section holds the lock).
 *
 * Context: between ps_store_read_lock() and ps_store_read_unlock() on
 * @store; see the calling-context table at the top of polstore/store.h
 * (polstore-store(3polstore)).
 * Return: 0 with *@start, *@end and *@pol written; -ENOENT when no range
 * ends after @idx (nothing written); -EINVAL when @store, @start, @end or
 * @pol is NULL.
 */
PS_API int ps_store_next_borrow(struct ps_store *store, uint64_t idx, uint64_t *start,
		uint64_t *end, const struct ps_policy **pol);

/**
 * struct ps_set_op - one set of a ps_store_set_many() batch
 * @start: first index of the range
 * @end: one past the last index; must be > @start
 * @pol: the policy, or NULL / a PS_MPOL_DEFAULT policy to remove
 */
struct ps_set_op {
	uint64_t start;
	uint64_t end;
	struct ps_policy *pol;
};

/**
 * ps_store_set_many() - apply @n sets in order as one atomic update
 * @store: the store
 * @ops: the sets, applied in array order; may be NULL when @n is 0
 * @n: how many (0: nothing to do)
 *
 * The result is that of ps_store_set() called on @ops[0], @ops[1], ... in
 * turn: ops may overlap, and where they do the later one wins (it trims,
 * splits or removes what earlier ops of the batch set, as it would
 * separate sets).  But readers see all of the batch or none of it: RCU and
 * RCU_QSBR publish one new version (one root store), SEQLOCK makes all the
 * changes in one write section, SPIN and RWLOCK in one hold of the lock.
 * A lookup that sees one op of the batch sees every other.
 *
 * All or nothing: the ops are checked first (-EINVAL for any op with
 * start >= end: nothing applied), then every node the whole batch can
 * need is allocated before anything changes, so -ENOMEM leaves the store
 * and every reference count as they were.  Reclamation, references and
 * waiting are as for ps_store_set().
 *
 * Context: as ps_store_set() (see the calling-context table at the top of
 * polstore/store.h).  Allocates (RCU and RCU_QSBR: before each change of
 * the tree, what it can need at worst, O(log N) for N ranges).
 * Return: 0; -EINVAL when @store is NULL, @ops is NULL with @n > 0, or an
 * op has start >= end; -ENOMEM; -EDEADLK as ps_store_set().
 */
PS_API int ps_store_set_many(struct ps_store *store, const struct ps_set_op *ops, size_t n);

/**
 * ps_inline_layout() - the identity of the layouts this library's inline read side reads
 *
 * A program built with POLSTORE_INLINE compiles the read side in from the
 * headers, and with it the layout of every structure it reads; the
 * identity is a hash of those layouts (polstore/static/layout.h), the same
 * for every release that keeps them.  Such a program runs with a library
 * of the same identity only: under any other, ps_store_create() fails with
 * errno EPROTO and prints one line on stderr naming both.  Packages carry
 * it: pkg-config --variable=layout polstore-inline, CMake's
 * polstore_INLINE_LAYOUT, and the Debian virtual package
 * polstore-layout-ID (ID: the identity in hex) that libpolstore0 provides
 * and an inline program's ${shlibs:Depends} names.
 *
 * Context: any thread.
 * Return: the identity, a 32-bit value (printed as 8 hex digits).
 */
PS_API unsigned long ps_inline_layout(void);

#ifdef __cplusplus
}
#endif

/*
 * POLSTORE_INLINE: define it before including any polstore header to have
 * the read side inlined into the program (polstore/static/lookup.h says
 * what is inlined and what stays a call).  The price: the program is bound
 * to libraries with the layouts it was compiled against (ps_inline_layout()),
 * and ps_store_create() fails with errno EPROTO under any other.  The
 * program links liburcu-memb and liburcu-qsbr itself (pkg-config:
 * polstore-inline).
 */
#if defined(POLSTORE_INLINE) && !defined(POLSTORE_BUILDING)
#include <polstore/static/lookup.h>
#define ps_store_create(sync) _ps_store_create_inline((sync), _PS_INLINE_ABI)
#define ps_store_lookup(store, idx) _ps_inl_lookup((store), (idx))
#define ps_store_lookup_borrow(store, idx) _ps_inl_lookup_borrow((store), (idx))
#define ps_store_read_lock(store) _ps_inl_read_lock(store)
#define ps_store_read_unlock(store) _ps_inl_read_unlock(store)
#define ps_store_lookup_copy(store, idx, view) _ps_inl_lookup_copy((store), (idx), (view))
#define ps_store_lookup_node(store, idx, node) _ps_inl_lookup_node((store), (idx), (node))
#define ps_policy_node(pol, ilx, node) _ps_inl_policy_node((pol), (ilx), (node))
#endif

#endif /* POLSTORE_STORE_H */
