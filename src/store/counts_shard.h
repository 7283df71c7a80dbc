/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A store's access counts as counts.c keeps them and counts_read.c folds
 * them: one shard a counting thread, a hash table of slots keyed by a
 * range's first page, which only its owner writes (counts.c's file
 * comment says how counting and reading meet).
 */
#ifndef POLSTORE_SRC_COUNTS_SHARD_H
#define POLSTORE_SRC_COUNTS_SHARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <polstore/store.h>

#include "seqcount.h"

#define PSI_COUNTS_EMPTY UINT64_MAX /* no range starts there: a free slot */
#define PSI_COUNTS_CACHE 64 /* ranges a shard finds the slot of at once */
#define PSI_COUNTS_RATE_ONE 1024 /* a count in the rate's fixed point */

/* A range's counts in a shard, keyed by its first page. */
struct psi_cslot {
	uint64_t start; /* the key: PSI_COUNTS_EMPTY or a range's first page */
	uint64_t end;
	uint64_t count;
	uint64_t rate; /* PSI_COUNTS_RATE_ONE a count up to @rated, halved each epoch since @epoch */
	uint64_t epoch; /* the epoch of the last count */
	uint64_t rated; /* @count when @rate was last brought to @epoch */
	struct ps_seqcount seq; /* around a change of @rate, @epoch and @rated */
	uint32_t pad1;
	uint64_t pad2;
};
/* A slot a line: tables are cache-line aligned (counts.c), so a count touches one line. */
_Static_assert(sizeof(struct psi_cslot) == 64, "a slot a cache line");

/* A range the owner counted since the store's generation @gen of its shard. */
struct psi_crange {
	uint64_t start, end;
	struct psi_cslot *slot;
};

/* One thread's counts of one store: a hash table only that thread writes. */
struct psi_cshard {
	/* The owner's; replaced under the store's @lock; a thread's shard has one from its start. */
	struct psi_cslot *slots;
	size_t mask;
	size_t used;	/* the owner's */
	/* The owner's: the ranges it counted at generation @gen, sorted by @start. */
	uint64_t gen;
	unsigned nranges, last;
	struct psi_crange ranges[PSI_COUNTS_CACHE];
	uint64_t gaps;	/* accesses of pages no range held */
	uint64_t lost;	/* accesses no slot could take (an allocation failed) */
	pthread_t owner;
	bool orphan;	/* the owner left it without folding it */
	struct psi_cshard *next; /* under @lock */
};

/* A store's counts (counts.c's file comment). */
struct _ps_counts {
	pthread_mutex_t lock;
	pthread_mutex_t tick_lock; /* ticks one at a time: ps_store_counts_tick() */
	uint64_t serial;
	/*
	 * Atomic: no other counts of the process had it, and a tick gives a
	 * new one after the epoch (release): what validates a thread's
	 * remembered slot (counts.c).
	 */
	uint64_t stamp;
	uint64_t epoch;
	struct psi_cshard *shards; /* under @lock */
	struct psi_cshard retired; /* exited threads' counts, under @lock */
	struct ps_store *store;
	struct _ps_counts *next; /* the process's, under counts_lock */
};

/* Accesses to add to a range's counter: [@start, @end) takes @count. */
struct psi_counts_add {
	uint64_t start, end, count;
};

/*
 * Add @n counters' accesses, @total in all, and @gaps accesses of no
 * range to @c's table of exited threads' counts (counts.c), under its
 * @lock: all of them or, on an error, none.
 * Return: 0; -ENOMEM (the table cannot grow); -EOVERFLOW (a counter
 * cannot take @total more).
 */
int psi_counts_add_retired(struct _ps_counts *c, const struct psi_counts_add *a, size_t n,
		uint64_t total, uint64_t gaps);

/* A rate at epoch @from brought to @epoch: halved once an epoch since. */
static inline uint64_t psi_counts_rate_at(uint64_t rate, uint64_t from, uint64_t epoch)
{
	return epoch <= from ? rate : epoch - from >= 64 ? 0 : rate >> (epoch - from);
}

/*
 * A read of @sl, from any thread: its count and epoch, and its rate at
 * that epoch with the counts since its @rated in (counts.c).
 */
uint64_t psi_counts_slot_read(const struct psi_cslot *sl, uint64_t *count, uint64_t *epoch);

#endif /* POLSTORE_SRC_COUNTS_SHARD_H */
