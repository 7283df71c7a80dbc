/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The linearizability oracle: run readers and writers on one store, record
 * every operation's interval on a shared clock and every lookup's result,
 * and check each result against the history.
 *
 * Writers give every set a fresh policy whose node mask encodes a unique
 * version number (ps_lin_encode()/ps_lin_decode()); removals (NULL or a
 * DEFAULT policy) are versions too, with no policy.  Times come from one
 * global seq_cst counter, ticked before and after every operation, so the
 * order of ticks extends real time.
 *
 * A lookup L of page p that returned version W (or "nothing", satisfied by
 * any removal covering p, or by the page's state at the start of the round)
 * is legal iff
 *   (a) W covers p (its range contains p);
 *   (b) W began before L ended:              W.begin < L.end;
 *   (c) no W' covering p certainly followed W and finished before L began:
 *       there is no W' with W.end < W'.begin and W'.end < L.begin.
 * (c) is the exact condition when writers do not overlap in time; with
 * concurrent writers the store's order of two overlapping sets is unknown,
 * so only sets that certainly followed W count (sound, never a false alarm).
 *
 * Batches (ps_store_set_many()): a writer may apply several sets and
 * removals as one batch; each op is a write with its own version, all with
 * the batch's interval.  On a page that a later op of the same batch also
 * covers, an earlier op is never visible (readers see all of a batch or
 * none): returning it is a violation.
 *
 * Window reads (ps_store_foreach_range(), and ps_store_next(), which reads
 * a range and the hole before it at once: recorded as the hole and the
 * range's first page, however far it is, up to 64 pages) see several
 * pages at one point in time.  Each page's result is checked as a lookup, and against the
 * other pages' results: a write X seen on one page is linearized before
 * the read, and so is every op of X's batch and every write Z that ended
 * before X began (so (c) uses max(R.begin, X.begin) for the read's begin);
 * on every page such a write covers, the read must not show something that
 * certainly preceded it (ended before it began, or the round's initial
 * state).  Sound: no false alarm however writers overlap.
 *
 * History is checked in rounds so memory stays bounded: all threads stop at
 * the end of a round, the state of every page is read (a lookup after every
 * write, checked like the others) and becomes version "initial" of the page
 * for the next round.
 */
#ifndef POLSTORE_STRESS_LINEARIZABILITY_H
#define POLSTORE_STRESS_LINEARIZABILITY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <polstore/polstore.h>

struct ps_lin_config {
	enum ps_sync sync;
	int readers; /* >= 1 */
	int writers; /* >= 1 */
	long lookups; /* reads (lookups and window reads), over all readers and rounds */
	long min_writes; /* more rounds until this many writes finished (4096 rounds at most) */
	int npages; /* pages 0 .. npages-1; 0 picks 48 */
	uint64_t seed;
	FILE *log; /* violations (with their history slice) go here; NULL: stderr */
	bool abort_on_violation; /* abort() after printing, as a stress binary would */
	/*
	 * Writes per round at most (0: 131072).  Under valgrind, which runs one
	 * thread at a time, a writer given whole time slices would otherwise
	 * make the round take minutes.
	 */
	long round_writes;
	/*
	 * No batch writes and no window reads: single sets and point lookups
	 * only, the workload before ps_store_set_many() and
	 * ps_store_foreach_range() existed.
	 */
	bool singles_only;
};

struct ps_lin_result {
	long lookups_checked; /* reads: lookups, window reads, end-of-round state reads */
	long writes;
	long removals;
	long rounds;
	long violations;
	long live_allocs; /* polstore allocations not freed after the store is destroyed */
	long batches; /* ps_store_set_many() calls (their ops count in writes) */
	long windows_checked; /* window reads (foreach_range, next), each checked page by page */
};

/**
 * ps_lin_run() - run the workload of @cfg and check its history
 * Return: 0 when every lookup was legal and nothing leaked, -1 otherwise
 * (violations were printed to @cfg->log).
 */
int ps_lin_run(const struct ps_lin_config *cfg, struct ps_lin_result *res);

/* One write (set or removal) of a history. */
struct ps_lin_write {
	uint64_t version; /* unique; 0 is never a version */
	uint32_t first, last; /* the pages it covers, inclusive */
	bool removal;
	uint64_t begin, end; /* clock ticks */
	/*
	 * An op of a batch: @batch is the version of the batch's first op
	 * (the ops' versions are @batch .. @batch + @nbatch - 1, applied in
	 * that order, all with the same interval); 0 for a write of its own.
	 */
	uint64_t batch;
	uint32_t nbatch;
};

/* One lookup of a history. */
struct ps_lin_lookup {
	uint64_t begin, end;
	uint64_t version; /* 0: nothing covered the page */
	uint32_t page;
	uint32_t reader;
};

/* One window read of a history: pages [@first, @last] seen at one point. */
struct ps_lin_window {
	uint64_t begin, end;
	uint32_t first, last;
	uint32_t reader;
	const uint64_t *versions; /* [last - first + 1], as a lookup's version */
	bool next; /* a ps_store_next() read (the hole from @first, then the range), for the log */
};

/* The state of a page before the history: version 0 means empty. */
struct ps_lin_initial {
	uint64_t version;
};

/**
 * ps_lin_check() - check a recorded history (the checker alone, for tests)
 * @initial: @npages entries, the state before the history; those versions
 *           count as writes that began and ended at tick 0
 * Return: the number of illegal lookups; each is printed with the history
 * slice that proves it to @log (when not NULL).
 */
long ps_lin_check(int npages, const struct ps_lin_initial *initial,
		const struct ps_lin_write *writes, long nwrites, const struct ps_lin_lookup *lookups,
		long nlookups, FILE *log);

/**
 * ps_lin_check_windows() - ps_lin_check() with window reads too
 * Return: the number of illegal lookups and window reads.
 */
long ps_lin_check_windows(int npages, const struct ps_lin_initial *initial,
		const struct ps_lin_write *writes, long nwrites, const struct ps_lin_lookup *lookups,
		long nlookups, const struct ps_lin_window *windows, long nwindows, FILE *log);

/* The policy that carries @version (a BIND policy with >= 1 node), or NULL + errno. */
struct ps_policy *ps_lin_encode(uint64_t version);
/* The version a policy carries; 0 for NULL; UINT64_MAX when it carries none. */
uint64_t ps_lin_decode(const struct ps_policy *pol);

#endif /* POLSTORE_STRESS_LINEARIZABILITY_H */
