/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore: contention-aware memory-policy bookkeeping.  Umbrella header.
 */
#ifndef POLSTORE_POLSTORE_H
#define POLSTORE_POLSTORE_H

#include <polstore/export.h>
#include <polstore/version.h>
#include <polstore/alloc.h>
#include <polstore/policy.h>
#include <polstore/store.h>
#include <polstore/attach.h>
#include <polstore/rcu.h>
#include <polstore/lockstat.h>
#include <polstore/charge.h>
#include <polstore/pcounter.h>
#include <polstore/idmap.h>
#include <polstore/numa.h>
#include <polstore/counts.h>
#include <polstore/subscribe.h>

#endif /* POLSTORE_POLSTORE_H */
