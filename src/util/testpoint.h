/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Test points: named places where a test may hold a thread, to open a
 * window that is otherwise a few instructions wide (tests/common/testutil.h sets
 * the hook).  Unset, a point costs one load and a branch that is never
 * taken; points sit on slow paths, or on walks of several nodes, never on
 * a point lookup.
 */
#ifndef POLSTORE_SRC_TESTPOINT_H
#define POLSTORE_SRC_TESTPOINT_H

#include "compiler.h"

enum psi_test_point {
	/* An RCU store's update built its index nodes and took its spares, holding the writer lock. */
	PSI_TP_RCU_UPDATE_BUILT,
	/* An RCU store's next() loaded the root and is about to walk from it. */
	PSI_TP_RCU_NEXT_WALK,
	/* A count is bringing its slot's rate to a new epoch: the epoch stored, not the rest. */
	PSI_TP_COUNTS_SLOT_ADVANCE,
};

extern void (*psi_test_hook)(enum psi_test_point point);

#define PSI_TEST_POINT(point)                                                                       \
	do {                                                                                       \
		if (psi_unlikely(PSI_READ_ONCE(psi_test_hook) != NULL))                            \
			psi_test_hook(point);                                                      \
	} while (0)

#endif /* POLSTORE_SRC_TESTPOINT_H */
