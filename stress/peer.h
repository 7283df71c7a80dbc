/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The plugin ABI of polstore-stress: a range map that the churn scenario
 * (stress/scn_churn.c, `--scenario churn --peer PATH.so`) measures beside
 * polstore's store variants, in the same harness and the same run.
 *
 * A plugin is a shared object that exports ps_peer_query().  The program
 * calls it once with the ABI version it speaks and uses the operations
 * table it returns until the program exits (a plugin is never unloaded:
 * deferred frees may still run its code).  The header depends on nothing
 * but the C library, so a plugin builds without polstore.  docs/peers.md
 * says what the scenario measures and how a plugin is written and built.
 *
 * Threads.  Every thread that calls an operation calls thread_register
 * first and thread_unregister after its last call.  One thread at a time
 * calls create, insert, remove, check and destroy, never inside a read
 * section; insert and remove run concurrently with readers.  A reader
 * calls read_enter, then one lookup, then read_exit; sections do not nest.
 * A thread of an RCU flavour whose quiescent states are explicit (QSBR)
 * calls quiescent, when the plugin sets it, between its operations.
 * Plugins built on liburcu should link the same flavour libraries as
 * polstore (liburcu-memb, liburcu-qsbr), so that the process holds one
 * registry of reader threads per flavour.
 */
#ifndef POLSTORE_STRESS_PEER_H
#define POLSTORE_STRESS_PEER_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version this header describes; a changed table gets a new number. */
#define PS_PEER_ABI_VERSION 1

/* ps_peer_ops.flags: what lookup() reports about the range it found. */
#define PS_PEER_VALUE 0x1u  /* hit->value: the value the range was inserted with */
#define PS_PEER_BOUNDS 0x2u /* hit->start and hit->end: the range itself */

/**
 * struct ps_peer_hit - what a lookup found
 * @start: first index of the range (PS_PEER_BOUNDS)
 * @end: one past its last index (PS_PEER_BOUNDS)
 * @value: the value it was inserted with (PS_PEER_VALUE)
 *
 * Fields the plugin does not report are left as they are.
 */
struct ps_peer_hit {
	uint64_t start;
	uint64_t end;
	uintptr_t value;
};

/**
 * struct ps_peer_ops - a range map, as polstore-stress drives it
 * @abi_version: PS_PEER_ABI_VERSION of the header the plugin was built with
 * @flags: PS_PEER_VALUE and/or PS_PEER_BOUNDS (at least one)
 * @name: short name for the tables, unique among the maps of a run
 *        (letters, digits, '-', '_', '.', ':'; at most 39 characters)
 * @version: free text naming what was built (upstream version or commit,
 *           build options); printed with the results, may be NULL
 * @create: a new empty map, or NULL on failure
 * @destroy: free the map and everything it holds; no other thread uses it,
 *           the calling thread is registered and outside any section
 * @insert: add [start, end) with @value (never 0); the harness guarantees
 *          that start < end and that the range overlaps no range in the
 *          map; returns 0 or a negative errno (the run then stops)
 * @remove: remove [start, end), which the harness inserted before and has
 *          not removed since; returns 0 or a negative errno
 * @lookup: the range covering @idx: true and @hit filled as @flags say, or
 *          false when none does; called between read_enter and read_exit.
 *          Lookups must be linearizable with insert and remove: a lookup
 *          that begins after a change returned sees it, one that ends
 *          before a change began does not
 * @read_enter: open a read-side section on @map (an RCU read lock, a lock)
 * @read_exit: close it
 * @quiescent: report a quiescent state (QSBR); NULL when not needed
 * @thread_register: make the calling thread ready to use maps; NULL when
 *                   not needed
 * @thread_unregister: undo thread_register before the thread exits; NULL
 *                     when not needed
 * @check: the map's own invariant check: 0, or a negative errno with *@why
 *         saying what is broken; runs after every measured point, alone;
 *         NULL when the plugin has none
 */
struct ps_peer_ops {
	uint32_t abi_version;
	uint32_t flags;
	const char *name;
	const char *version;
	void *(*create)(void);
	void (*destroy)(void *map);
	int (*insert)(void *map, uint64_t start, uint64_t end, uintptr_t value);
	int (*remove)(void *map, uint64_t start, uint64_t end);
	bool (*lookup)(void *map, uint64_t idx, struct ps_peer_hit *hit);
	void (*read_enter)(void *map);
	void (*read_exit)(void *map);
	void (*quiescent)(void *map);
	void (*thread_register)(void);
	void (*thread_unregister)(void);
	int (*check)(void *map, const char **why);
};

/* The name of the function every plugin exports. */
#define PS_PEER_QUERY_SYMBOL "ps_peer_query"

/**
 * ps_peer_query() - the plugin's operations table for an ABI version
 * @abi_version: the version the program speaks (PS_PEER_ABI_VERSION)
 *
 * Context: called once, from the program's main thread, before any
 * operation; may allocate and start threads of the plugin's own.
 * Return: the plugin's table (static, valid until the program exits), or
 * NULL when the plugin does not speak @abi_version.
 */
const struct ps_peer_ops *ps_peer_query(uint32_t abi_version);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_STRESS_PEER_H */
