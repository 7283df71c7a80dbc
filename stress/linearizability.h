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
 * History is checked in rounds so memory stays bounded: all threads stop at
 * the end of a round, the state of every page is read (a lookup after every
 * write, checked like the others) and becomes version "initial" of the page
 * for the next round.
 */
#ifndef POLSTORE_TESTS_LINEARIZABILITY_H
#define POLSTORE_TESTS_LINEARIZABILITY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <polstore/polstore.h>

struct ps_lin_config {
	enum ps_sync sync;
	int readers; /* >= 1 */
	int writers; /* >= 1 */
	long lookups; /* total over all readers and rounds */
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
};

struct ps_lin_result {
	long lookups_checked; /* reader lookups plus end-of-round state reads */
	long writes;
	long removals;
	long rounds;
	long violations;
	long live_allocs; /* polstore allocations not freed after the store is destroyed */
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
};

/* One lookup of a history. */
struct ps_lin_lookup {
	uint64_t begin, end;
	uint64_t version; /* 0: nothing covered the page */
	uint32_t page;
	uint32_t reader;
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

/* The policy that carries @version (a BIND policy with >= 1 node), or NULL + errno. */
struct ps_policy *ps_lin_encode(uint64_t version);
/* The version a policy carries; 0 for NULL; UINT64_MAX when it carries none. */
uint64_t ps_lin_decode(const struct ps_policy *pol);

#endif /* POLSTORE_TESTS_LINEARIZABILITY_H */
