/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RCU store's spares: the ranges a writing thread keeps for its sets
 * and the flavour's depot of released chunks.  Part of the include-template
 * sync_cow-impl.h, which includes it once per flavour (it names
 * PSI_COW_FLAVOUR); not a header of its own.
 *
 * A store holds its live ranges and nothing else: spare ranges live with
 * the writing thread (struct cow_thread), not in the store.  A set's
 * record is made of range-sized chunks taken from the same spares, so
 * every chunk of memory an RCU store uses is one size: released, a
 * record's ranges and its own chunks all go to the flavour's depot, a
 * plain array of free chunks, where writers refill their spares; the
 * reclaim thread loads no range (the record lists them by pointer).
 * A thread keeps the spares its recent operations reserved (a bound from
 * the height of the trees it wrote), the depot at most PSI_COW_DEPOT_MAX
 * chunks while sets run and none once they stop (cow_depot_idle());
 * retired memory is back in the depot once the reclaim thread's batch has
 * had its grace period (rcu_reclaim.h: at most PSI_RECLAIM_LATENCY_NS, less
 * when sets retire PSI_RECLAIM_BATCH_BYTES sooner).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* A writing thread's memory for its sets. */
struct cow_thread {
	struct psi_rangetree_cow_mem mem;
	size_t keep;    /* spares kept after a set: the most one operation reserved lately */
	unsigned sets;  /* sets since @keep last halved */
	bool keyed;     /* the thread-exit destructor will free this */
	struct cow_thread *next, **pprev; /* on cow_threads */
};

/*
 * Every thread's struct cow_thread, so that a forked child frees those of
 * the threads fork() did not copy (their TLS is gone with them).  A leaf
 * lock: taken for a link or an unlink only, and across fork().
 */
static pthread_mutex_t cow_threads_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cow_thread *cow_threads;

/*
 * Released chunks, for the writers' spares; under @lock (only ever tried).
 * A fixed array, so that giving chunks to it never allocates: a release or
 * a set's end that cannot put chunks there frees them instead.
 */
static struct {
	pthread_mutex_t lock;
	size_t nfree;
	size_t n; /* atomic copy of @nfree, for reads outside @lock */
	void *free[PSI_COW_DEPOT_MAX];
} cow_depot = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_key_t cow_key;
static pthread_once_t cow_key_once = PTHREAD_ONCE_INIT;
static bool cow_key_ok;
static __thread struct cow_thread *cow_self;
/* What @cow_self points at: the record is no allocation, which ps_set_alloc_ops() could outlive. */
static __thread struct cow_thread cow_self_rec;

/* ---- the writing thread's spares ---------------------------------------------- */

static void cow_thread_unlink(struct cow_thread *t)
{
	if (t->next)
		t->next->pprev = t->pprev;
	*t->pprev = t->next;
}

static void cow_thread_free(void *arg)
{
	struct cow_thread *t = arg;

	pthread_mutex_lock(&cow_threads_lock);
	cow_thread_unlink(t);
	pthread_mutex_unlock(&cow_threads_lock);
	psi_rangetree_cow_mem_free(&t->mem);
}

static void cow_fork_prepare(void)
{
	pthread_mutex_lock(&cow_threads_lock);
}

static void cow_fork_parent(void)
{
	pthread_mutex_unlock(&cow_threads_lock);
}

/*
 * The child has the calling thread only: free the other threads' spares.
 * A thread frozen inside a set before its publication holds in @mem.used
 * copies no tree reaches: they go with the spares.  One frozen while it
 * published (@mem.publishing) may have linked them into the tree: those
 * stay, only the array that lists them goes.
 */
static void cow_fork_child(void)
{
	struct cow_thread *t = cow_threads, *next;

	for (; t; t = next) {
		next = t->next;
		if (t == cow_self)
			continue;
		cow_thread_unlink(t);
		if (__atomic_load_n(&t->mem.publishing, __ATOMIC_RELAXED))
			t->mem.used.n = 0;
		psi_rangetree_cow_mem_free(&t->mem);
	}
	pthread_mutex_unlock(&cow_threads_lock);
	/*
	 * A depot lock still held belongs to a thread fork() did not copy; the
	 * depot is whole between any two of its holders' steps (every step
	 * changes @nfree last, or first when it takes chunks out).
	 */
	if (pthread_mutex_trylock(&cow_depot.lock))
		pthread_mutex_init(&cow_depot.lock, NULL);
	else
		pthread_mutex_unlock(&cow_depot.lock);
	__atomic_store_n(&cow_depot.n, cow_depot.nfree, __ATOMIC_RELAXED);
}

/* The thread's spares go at its exit (or with the library, for the threads still alive). */
static void cow_thread_exit(void *arg)
{
	if (cow_self == arg)
		cow_self = NULL;
	cow_thread_free(arg);
}

static void cow_key_create(void)
{
	/* Read without the lock as a hint (relaxed atomics; helgrind and DRD see plain accesses). */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&cow_depot.n, sizeof(cow_depot.n));
	cow_key_ok = !pthread_key_create(&cow_key, cow_thread_exit);
	/* Without the handlers a child keeps the other threads' spares, unreachable: a leak. */
	(void)pthread_atfork(cow_fork_prepare, cow_fork_parent, cow_fork_child);
	PSI_ANNOTATE_HAPPENS_BEFORE(&cow_key_once); /* helgrind and DRD do not see pthread_once() */
}

/* Under the depot's lock: free what it holds, one chunk at a time off its end. */
static void cow_depot_free_all(void)
{
	while (cow_depot.nfree)
		psi_free(cow_depot.free[--cow_depot.nfree]);
	__atomic_store_n(&cow_depot.n, 0, __ATOMIC_RELAXED);
}

/*
 * Free what the depot holds: ps_store_synchronize() and ps_store_destroy()
 * give the memory back, and the reclaim thread does once sets stop
 * (cow_depot_idle()).  Only tries the lock: a writer refilling now keeps
 * what it takes, and a forked child may find it held by a thread it does
 * not have.
 */
static void cow_depot_drain(void)
{
	if (!__atomic_load_n(&cow_depot.n, __ATOMIC_RELAXED) ||
			pthread_mutex_trylock(&cow_depot.lock))
		return;
	cow_depot_free_all();
	pthread_mutex_unlock(&cow_depot.lock);
}

/*
 * ps_set_alloc_ops(), while no other thread is inside polstore: every
 * thread's spares and the depot go back to the hooks they came from.  The
 * depot's lock is taken, not tried: the reclaim thread may hold it, freeing
 * through the hooks that are about to change.
 */
static void cow_alloc_flush(void)
{
	struct cow_thread *t;

	pthread_mutex_lock(&cow_threads_lock);
	for (t = cow_threads; t; t = t->next)
		psi_rangetree_cow_mem_free(&t->mem);
	pthread_mutex_unlock(&cow_threads_lock);
	pthread_mutex_lock(&cow_depot.lock);
	cow_depot_free_all();
	pthread_mutex_unlock(&cow_depot.lock);
}

__attribute__((constructor)) static void cow_alloc_cache_add(void)
{
	psi_alloc_cache_add(cow_alloc_flush);
}

static void cow_depot_idle(void)
{
	cow_depot_drain();
}

__attribute__((destructor)) static void cow_unload(void)
{
	/* A thread alive after dlclose() must not run a destructor in unmapped code. */
	if (cow_key_ok)
		pthread_key_delete(cow_key);
	cow_key_ok = false;
	cow_depot_drain();
}

/*
 * Put chunks from the depot in the spares until they number @want (and a
 * few more, as the spares' array has room).  Allocates nothing: the
 * caller reserved the array (psi_rangetree_cow_mem_reserve()).  Only tries the
 * lock.
 */
static void cow_refill(struct psi_rangetree_cow_mem *m, size_t want)
{
	size_t k;

	want += PSI_COW_REFILL;
	if (want > m->spares.cap)
		want = m->spares.cap;
	if (want <= m->spares.n || !__atomic_load_n(&cow_depot.n, __ATOMIC_RELAXED) ||
			pthread_mutex_trylock(&cow_depot.lock))
		return;
	PSI_TEST_POINT(PSI_TP_COW_DEPOT_LOCKED);
	k = want - m->spares.n;
	if (k > cow_depot.nfree)
		k = cow_depot.nfree;
	cow_depot.nfree -= k;
	memcpy(m->spares.v + m->spares.n, cow_depot.free + cow_depot.nfree, k * sizeof(void *));
	m->spares.n += k;
	__atomic_store_n(&cow_depot.n, cow_depot.nfree, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cow_depot.lock);
}

static struct cow_thread *cow_thread_get(void)
{
	struct cow_thread *t = cow_self;

	if (psi_likely(t))
		return t;
	t = &cow_self_rec;
	memset(t, 0, sizeof(*t));
	t->mem.refill = cow_refill;
	t->mem.refill_batch = PSI_COW_REFILL;
	pthread_once(&cow_key_once, cow_key_create);
	PSI_ANNOTATE_HAPPENS_AFTER(&cow_key_once);
	pthread_mutex_lock(&cow_threads_lock);
	t->next = cow_threads;
	t->pprev = &cow_threads;
	if (cow_threads)
		cow_threads->pprev = &t->next;
	cow_threads = t;
	pthread_mutex_unlock(&cow_threads_lock);
	/* Without a destructor the thread keeps nothing between sets (cow_thread_settle()). */
	t->keyed = cow_key_ok && !pthread_setspecific(cow_key, t);
	cow_self = t;
	/* Once per thread: the reclaim thread empties the depot when sets stop. */
	psi_reclaim_on_idle(PSI_COW_FLAVOUR->reclaimer, cow_depot_idle);
	return t;
}

/*
 * After a set: keep the spares recent operations reserved, give the rest
 * to the depot (what finds it full or busy is freed).
 */
static void cow_thread_settle(struct cow_thread *t)
{
	struct psi_range_vec *sp = &t->mem.spares;
	size_t peak = t->mem.peak, k;

	t->mem.peak = 0;
	if (++t->sets >= PSI_COW_KEEP_DECAY) {
		t->keep /= 2;
		t->sets = 0;
	}
	if (t->keep < peak)
		t->keep = peak;
	if (!t->keyed) {
		cow_thread_free(t);
		cow_self = NULL;
		return;
	}
	if (sp->n <= t->keep + PSI_COW_REFILL)
		return; /* a margin, or chunks would go back and forth every set */
	k = sp->n - t->keep;
	if (__atomic_load_n(&cow_depot.n, __ATOMIC_RELAXED) + k <= PSI_COW_DEPOT_MAX &&
			!pthread_mutex_trylock(&cow_depot.lock)) {
		if (cow_depot.nfree + k <= PSI_COW_DEPOT_MAX) {
			sp->n -= k;
			memcpy(cow_depot.free + cow_depot.nfree, sp->v + sp->n, k * sizeof(void *));
			cow_depot.nfree += k;
			__atomic_store_n(&cow_depot.n, cow_depot.nfree, __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&cow_depot.lock);
	}
	psi_rangetree_cow_mem_trim(&t->mem, t->keep);
}

/* ps_store_synchronize(), ps_store_destroy(): the calling thread keeps no spares. */
static void cow_thread_trim(void)
{
	struct cow_thread *t = cow_self;

	if (!t)
		return;
	if (t->keyed)
		pthread_setspecific(cow_key, NULL);
	cow_self = NULL;
	cow_thread_free(t);
}

