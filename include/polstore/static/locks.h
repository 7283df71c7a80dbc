/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The state of the library's locks and RCU layer (src/locks/) that the
 * inline read side reads: SEQLOCK's sequence count and the depth of the
 * RCU_QSBR sections that brought an offline thread online.
 *
 * Not an API: see polstore/static/rtree.h.
 */
#ifndef POLSTORE_STATIC_LOCKS_H
#define POLSTORE_STATIC_LOCKS_H

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A sequence count: odd while a writer is inside, bumped twice per write section. */
struct ps_seqcount {
	unsigned seq;
};

/*
 * RCU_QSBR read-side sections that brought an offline thread online for
 * their length (src/locks/rcu_qsbr.c): while one is open, sections nest in
 * the library, which counts them.
 */
PS_API extern __thread unsigned _ps_qsbr_auto_depth __attribute__((tls_model("initial-exec")));

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_STATIC_LOCKS_H */
