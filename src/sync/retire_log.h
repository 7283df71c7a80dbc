/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The retire log of an RCU store (retire_log.c): what its sets took out of
 * the published read index and the tree, oldest first, kept by the store
 * itself until a grace period has ended and then taken back by its own
 * writer, to reuse or free.
 *
 * Entries are words whose meaning is the store's (a node, a policy
 * reference, a list of ranges; the two low bits are free for its tags).
 * Marks say which grace period frees which entries: a mark made after a
 * full fence that follows some updates' publications covers every entry
 * added before it with the grace period psi_reclaim_poll_state() names.
 * Entries before the first mark whose grace period has not ended are
 * ripe: no reader can reach what they name.  The writer takes them in
 * order.  Everything here is the caller's, serialised by its lock.
 */
#ifndef POLSTORE_SRC_RETIRE_LOG_H
#define POLSTORE_SRC_RETIRE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct psi_reclaimer;
struct psi_rlog_blk;

/* Marks a log keeps; past them the newest mark covers more, with the later grace period. */
#define PSI_RLOG_MARKS 3

struct psi_rlog_mark {
	uint64_t pos;    /* entries before it wait for @cookie */
	uint64_t bytes;  /* what the entries before it hold, in bytes */
	uint64_t cookie; /* the grace period (psi_reclaim_poll_state()) */
};

/*
 * A log exists while it holds entries (a store that sets nothing holds
 * none): psi_rlog_reserve() makes it, psi_rlog_trim() frees it empty.
 */
struct psi_rlog {
	struct psi_rlog_blk *head, *tail; /* oldest block, block being filled (more after it: room) */
	uint32_t hpos, tpos;              /* next entry of @head to take, next free slot of @tail */
	uint64_t added, taken, ripe;      /* entries ever added and taken; before @ripe: ripe */
	uint64_t marked;                  /* entries before it have a mark */
	uint64_t added_bytes, taken_bytes, ripe_bytes; /* the same, in bytes the entries hold */
	size_t own_bytes;                 /* the log's and its blocks' own */
	struct psi_rlog_mark mark[PSI_RLOG_MARKS];
	unsigned mfirst, mn;
};

/*
 * Room for @n more entries on *@logp, which is made when NULL.
 * Return: 0, or -ENOMEM with the log as it was.
 */
int psi_rlog_reserve(struct psi_rlog **logp, size_t n);

/* Add entry @e (room reserved: psi_rlog_reserve()). */
void psi_rlog_add(struct psi_rlog *log, void *e);

/* The entries added last hold @bytes more (what a psi_rlog_taken() will give back). */
static inline void psi_rlog_added_bytes(struct psi_rlog *log, size_t bytes)
{
	log->added_bytes += bytes;
}

/*
 * Every entry added and not marked waits for grace period @cookie, read
 * with psi_reclaim_poll_state() after a full fence that follows their
 * unpublication.
 */
void psi_rlog_mark(struct psi_rlog *log, uint64_t cookie);

/*
 * Entries whose grace period of @rc has ended become ripe.  Return: true
 * when some did (the caller orders its reuse after the grace period).
 */
bool psi_rlog_ripen(struct psi_rlog *log, const struct psi_reclaimer *rc);

/*
 * The first @pos entries (holding @bytes) are ripe: the caller waited for a
 * grace period that began after they were unpublished.
 */
void psi_rlog_ripen_upto(struct psi_rlog *log, uint64_t pos, uint64_t bytes);

/* The oldest ripe entry, taken off @log (NULL: none), or NULL; psi_rlog_taken() then. */
void *psi_rlog_take(struct psi_rlog *log);

/* The oldest ripe entry of @log (NULL: none), left on it, or NULL. */
void *psi_rlog_peek(const struct psi_rlog *log);

/* An entry taken held @bytes (as added). */
static inline void psi_rlog_taken(struct psi_rlog *log, size_t bytes)
{
	log->taken_bytes += bytes;
}

/* Entries on @log (NULL: none), ripe or not. */
static inline uint64_t psi_rlog_count(const struct psi_rlog *log)
{
	return log ? log->added - log->taken : 0;
}

/* Ripe entries on @log (NULL: none). */
static inline uint64_t psi_rlog_ripe_count(const struct psi_rlog *log)
{
	return log ? log->ripe - log->taken : 0;
}

/* Bytes the ripe entries on @log hold. */
static inline uint64_t psi_rlog_ripe_bytes(const struct psi_rlog *log)
{
	return log ? log->ripe_bytes - log->taken_bytes : 0;
}

/*
 * Bytes @log holds past their grace period: its ripe entries', and its
 * own while it holds some (what names entries in flight is in flight).
 */
static inline size_t psi_rlog_kept_bytes(const struct psi_rlog *log)
{
	if (!log || log->ripe == log->taken)
		return 0;
	return (size_t)(log->ripe_bytes - log->taken_bytes) + log->own_bytes;
}

/* Bytes @log holds: its entries' and its own. */
static inline size_t psi_rlog_bytes(const struct psi_rlog *log)
{
	return log ? (size_t)(log->added_bytes - log->taken_bytes) + log->own_bytes : 0;
}

/* Free *@logp if it is empty (an idle store keeps no log); NULL then. */
void psi_rlog_trim(struct psi_rlog **logp);

/* Whether the counts of @log agree with each other (ps_store_check()). */
bool psi_rlog_sane(const struct psi_rlog *log);

#endif /* POLSTORE_SRC_RETIRE_LOG_H */
