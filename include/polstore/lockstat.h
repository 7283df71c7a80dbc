/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Lock statistics for the locking store variants, printed like the kernel's
 * /proc/lock_stat (Documentation/locking/lockstat.rst) so polstore's tables
 * read like the ones in the mailing-list threads that motivated it.
 *
 * Collected only when the library is built with -DPOLSTORE_LOCK_STAT=ON;
 * otherwise the calls below report -EOPNOTSUPP and the lock paths carry no
 * statistics code at all.  Collecting costs two clock reads per acquisition
 * and atomic updates of the lock's statistics: measure throughput without it.
 */
#ifndef POLSTORE_LOCKSTAT_H
#define POLSTORE_LOCKSTAT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ps_store;

/** Index of a direction: ps_store_lock_stat_read()'s @rows[]. */
enum { PS_LOCK_STAT_WRITE = 0, PS_LOCK_STAT_READ = 1 };

/**
 * struct ps_lock_stat_row - one direction of one lock, as lock_stat shows it
 * @con_bounces: contended acquisitions whose previous holder ran on another CPU
 * @contentions: acquisitions that had to wait
 * @wait_min_ns: shortest non-zero wait; @wait_max_ns, @wait_total_ns likewise
 * @acq_bounces: acquisitions whose previous acquirer ran on another CPU
 * @acquisitions: number of acquisitions
 * @hold_min_ns: shortest non-zero hold; @hold_max_ns, @hold_total_ns likewise
 */
struct ps_lock_stat_row {
	uint64_t con_bounces, contentions;
	uint64_t wait_min_ns, wait_max_ns, wait_total_ns;
	uint64_t acq_bounces, acquisitions;
	uint64_t hold_min_ns, hold_max_ns, hold_total_ns;
};

/**
 * ps_lock_stat_enabled() - was the library built with POLSTORE_LOCK_STAT?
 * Context: any thread.
 * Return: true when lock statistics are collected.
 */
PS_API bool ps_lock_stat_enabled(void);

/**
 * ps_store_lock_stat_read() - copy out a store's lock statistics
 * @store: the store
 * @rows: receives [PS_LOCK_STAT_WRITE] and [PS_LOCK_STAT_READ]
 *
 * SPIN counts every acquisition as a write.  SEQLOCK's lock is a spinlock
 * taken by writers and by readers that fell back to it after failed
 * lockless tries: both are counted as writes, and the read row stays zero
 * (lockless reads take no lock).  RWLOCK counts readers as reads.  RCU
 * variants have no lock and report zeros.
 *
 * Context: any thread; the copy is not atomic under concurrent use.
 * Return: 0, -EINVAL for NULL arguments, -EOPNOTSUPP when not built in.
 */
PS_API int ps_store_lock_stat_read(struct ps_store *store, struct ps_lock_stat_row rows[2]);

/**
 * ps_store_lock_stat_print() - print a store's statistics as /proc/lock_stat
 * @store: the store
 * @name: the class name to print (e.g. "&sp->lock"); NULL prints
 *        "<variant>->lock"
 * @header: print the "lock_stat version" header and column titles first
 * @out: the stream
 *
 * Rows are suffixed -W and -R as the kernel does for reader-writer locks;
 * times are microseconds with two decimals.
 *
 * Context: any thread.
 * Return: 0, -EINVAL for NULL @store or @out, -EOPNOTSUPP when not built in.
 */
PS_API int ps_store_lock_stat_print(struct ps_store *store, const char *name, bool header,
		FILE *out);

/**
 * ps_store_lock_stat_reset() - zero a store's lock statistics
 * @store: the store
 * Context: any thread; counts of acquisitions in progress may be lost.
 * Return: 0, -EINVAL for NULL, -EOPNOTSUPP when not built in.
 */
PS_API int ps_store_lock_stat_reset(struct ps_store *store);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_LOCKSTAT_H */
