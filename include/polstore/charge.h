/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore charge counters: hierarchical resource counters with limits, as a memory controller
 * charges pages to nested groups (res_counter, its seqlock RFC, page_counter with a per-CPU
 * stock).  A charge goes to a counter and every ancestor, or to none; levels of one hierarchy may
 * be of different kinds; quantities are caller units, 0 .. PS_CHARGE_MAX.  Variants, bounds and
 * rules: docs/companions.md.
 */
#ifndef POLSTORE_CHARGE_H
#define POLSTORE_CHARGE_H

#include <limits.h>

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** enum ps_charge_kind - how a counter synchronises its updates. */
enum ps_charge_kind {
	PS_CHARGE_SPIN,	   /* a spinlock per counter; never exceeds the limit */
	PS_CHARGE_SEQLOCK, /* writers lock and bump a count, readers retry; never exceeds it */
	PS_CHARGE_ATOMIC,  /* add, compare, undo; may exceed it by ps_charge_overshoot_bound() */
	PS_CHARGE_STOCK,   /* ATOMIC behind a per-thread stock of pre-charged pages */
};

/** Number of kinds; loop `for (k = 0; k < PS_CHARGE_KIND_COUNT; k++)`. */
#define PS_CHARGE_KIND_COUNT 4

/** Largest limit, charge or batch: speculative adds can never overflow a long. */
#define PS_CHARGE_MAX (LONG_MAX / 4)

/** Default stock batch of PS_CHARGE_STOCK counters (the kernel's MEMCG_CHARGE_BATCH). */
#define PS_CHARGE_STOCK_BATCH 32

/** Per-thread stock slots of a counter; threads beyond this many share slots. */
#define PS_CHARGE_STOCK_SLOTS 64

/** enum ps_charge_field - what ps_charge_read() returns. */
enum ps_charge_field {
	PS_CHARGE_USAGE, /* charged now, stocked pages included */
	PS_CHARGE_LIMIT,
	PS_CHARGE_MAX_USAGE, /* watermark of successful charges since reset */
	PS_CHARGE_FAILCNT, /* charges this level refused since reset */
	PS_CHARGE_MAX_OVERSHOOT, /* largest usage - limit ever reached; 0 for SPIN/SEQLOCK */
	PS_CHARGE_STOCKED, /* pages pre-charged here and held in thread stocks */
};

/**
 * struct ps_charge_stat - all fields of a counter, read together
 * @usage: pages charged at this level (see PS_CHARGE_USAGE)
 * @limit: the level's limit (PS_CHARGE_LIMIT)
 * @max_usage: watermark of successful charges since reset (PS_CHARGE_MAX_USAGE)
 * @failcnt: charges this level refused since reset (PS_CHARGE_FAILCNT)
 * @max_overshoot: largest usage - limit ever reached (PS_CHARGE_MAX_OVERSHOOT)
 * @stocked: pages pre-charged here and held in thread stocks (PS_CHARGE_STOCKED)
 *
 * Consistent for SPIN and SEQLOCK; ATOMIC and STOCK read them one by one.
 */
struct ps_charge_stat {
	long usage;
	long limit;
	long max_usage;
	long failcnt;
	long max_overshoot;
	long stocked;
};

struct ps_charge;

/**
 * ps_charge_kind_name() - the kind's name: "spin", "seqlock", "atomic", "stock"
 * @kind: the kind
 * Context: any thread.
 * Return: a static string, or NULL for a value that is not a kind.
 */
PS_API const char *ps_charge_kind_name(enum ps_charge_kind kind);

/**
 * ps_charge_kind_from_name() - parse a name as ps_charge_kind_name() prints it
 * @name: the name
 * Context: any thread.
 * Return: the kind (>= 0), or -EINVAL for NULL or an unknown name.
 */
PS_API int ps_charge_kind_from_name(const char *name);

/**
 * ps_charge_create() - create a counter
 * @kind: the variant
 * @parent: the parent counter, or NULL for a root
 * @limit: the limit, 0 to PS_CHARGE_MAX (PS_CHARGE_MAX means "unlimited")
 *
 * A PS_CHARGE_STOCK counter starts with a stock of PS_CHARGE_STOCK_BATCH.
 * Context: any thread; allocates.  Concurrent creation and destruction of counters in one
 * hierarchy is allowed.
 * Return: the counter, or NULL with errno EINVAL (unknown @kind, @limit out of range) or ENOMEM.
 */
PS_API struct ps_charge *ps_charge_create(enum ps_charge_kind kind, struct ps_charge *parent,
		long limit);

/**
 * ps_charge_destroy() - free a counter
 * @c: the counter, or NULL (a no-op returning 0)
 *
 * The counter's stock is drained first; the counter must then be unused.
 * Context: no other thread may use @c during or after a successful call.
 * Return: 0; -EBUSY when @c has children or usage remains after draining its stock (the counter is
 * kept, its stock drained).
 */
PS_API int ps_charge_destroy(struct ps_charge *c);

/**
 * ps_charge_kind() - the kind a counter was created with
 * @c: the counter
 * Context: any thread.
 * Return: the kind, or -EINVAL when @c is NULL.
 */
PS_API int ps_charge_kind(const struct ps_charge *c);

/**
 * ps_charge_parent() - the parent of a counter
 * @c: the counter
 * Context: any thread.
 * Return: the parent, or NULL for a root or a NULL @c.
 */
PS_API struct ps_charge *ps_charge_parent(const struct ps_charge *c);

/**
 * ps_charge_try() - charge @nr at @c and every ancestor, or nowhere
 * @c: the counter
 * @nr: how much, 0 to PS_CHARGE_MAX
 * @fail: where to store the counter that refused, or NULL
 *
 * A level that would exceed its limit undoes the levels charged, counts a failure (failcnt)
 * and is stored in *@fail, after one retry with the stocks under it drained.  With a stock,
 * @nr <= batch comes from the calling thread's stock (docs/companions.md, "Stock and draining").
 * Context: any thread; never sleeps (spinning waiters yield).  Does not allocate.
 * Return: 0; -ENOMEM when a level refused (*@fail set); -EINVAL when @c is NULL or @nr is out of
 * range (*@fail untouched).
 */
PS_API int ps_charge_try(struct ps_charge *c, long nr, struct ps_charge **fail);

/**
 * ps_charge_uncharge() - return @nr to @c and every ancestor
 * @c: the counter @nr was charged to
 * @nr: how much, 0 to PS_CHARGE_MAX
 *
 * With a stock, @nr goes to the calling thread's stock, which keeps at most a batch
 * (docs/companions.md, "Stock and draining rules").
 * Context: any thread; never sleeps.
 * Return: 0; -EINVAL when @c is NULL, @nr is out of range, or (without a stock) @nr exceeds the
 * usage of @c, which is left unchanged.  Returning more than was charged through a stock is
 * detected only when the stock is drained (debug builds abort).
 */
PS_API int ps_charge_uncharge(struct ps_charge *c, long nr);

/**
 * ps_charge_set_limit() - change the limit
 * @c: the counter
 * @limit: the new limit, 0 to PS_CHARGE_MAX
 *
 * Refused when the usage is above @limit, after a retry with the stocks under @c drained.  An
 * ATOMIC level installs @limit, then checks: charges racing a refused call may see it briefly.
 * Context: any thread; never sleeps.
 * Return: 0; -EBUSY when usage > @limit; -EINVAL for a NULL @c or an @limit out of range.
 */
PS_API int ps_charge_set_limit(struct ps_charge *c, long limit);

/**
 * ps_charge_set_stock() - put a per-thread stock in front of a counter
 * @c: the counter, of any kind
 * @batch: pages a thread pre-charges at a time, 1 to PS_CHARGE_MAX, or 0 to remove the stock
 *
 * The current stock is drained first.  Charges racing with the change use the old or the new
 * batch.
 * Context: any thread; allocates the first time a counter gets a stock.
 * Return: 0; -EINVAL for a NULL @c or @batch out of range; -ENOMEM.
 */
PS_API int ps_charge_set_stock(struct ps_charge *c, long batch);

/**
 * ps_charge_stock_batch() - the stock batch of a counter
 * @c: the counter
 * Context: any thread.
 * Return: the batch, 0 without a stock, or -EINVAL when @c is NULL.
 */
PS_API long ps_charge_stock_batch(const struct ps_charge *c);

/**
 * ps_charge_drain_stock() - uncharge what the stocks of @c and its
 * descendants hold
 * @c: the counter
 *
 * Afterwards, with no charge running, every level's usage is exact.
 * Context: any thread; never sleeps.  Serialised with creation and destruction of counters.
 * Return: 0, or -EINVAL when @c is NULL.
 */
PS_API int ps_charge_drain_stock(struct ps_charge *c);

/**
 * ps_charge_read() - read one field
 * @c: the counter
 * @field: which field
 * Context: any thread.  SPIN takes the counter's lock; SEQLOCK retries while a writer is active;
 * ATOMIC and STOCK only load.
 * Return: the value (>= 0), or -EINVAL for a NULL @c or an unknown @field.
 */
PS_API long ps_charge_read(const struct ps_charge *c, enum ps_charge_field field);

/**
 * ps_charge_stat() - read every field
 * @c: the counter
 * @st: where to store them
 * Context: any thread (see struct ps_charge_stat for consistency).
 * Return: 0, or -EINVAL when @c or @st is NULL.
 */
PS_API int ps_charge_stat(const struct ps_charge *c, struct ps_charge_stat *st);

/**
 * ps_charge_reset_max() - restart the watermarks
 * @c: the counter
 *
 * max_usage becomes the current usage; max_overshoot becomes 0.
 * Context: any thread.
 * Return: 0, or -EINVAL when @c is NULL.
 */
PS_API int ps_charge_reset_max(struct ps_charge *c);

/**
 * ps_charge_reset_failcnt() - set failcnt to 0
 * @c: the counter
 * Context: any thread.
 * Return: 0, or -EINVAL when @c is NULL.
 */
PS_API int ps_charge_reset_failcnt(struct ps_charge *c);

/**
 * ps_charge_overshoot_bound() - how far usage may exceed the limit
 * @kind: the kind of the level
 * @nthreads: threads charging concurrently below that level
 * @max_nr: the largest single charge they make
 * @batch: the stock batch in front of the counters they charge, or 0
 *
 * One speculative add per thread, while the limit does not change (docs/companions.md).
 * Context: any thread.
 * Return: 0 for SPIN and SEQLOCK, @nthreads * max(@max_nr, @batch) for ATOMIC and STOCK (STOCK
 * with @batch 0 uses PS_CHARGE_STOCK_BATCH), or -EINVAL for an unknown kind or negative arguments.
 */
PS_API long ps_charge_overshoot_bound(enum ps_charge_kind kind, int nthreads, long max_nr,
		long batch);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_CHARGE_H */
