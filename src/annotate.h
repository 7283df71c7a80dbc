/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Happens-before annotations for thread checkers, compiled in only when the
 * build asks (POLSTORE_ANNOTATE=ON defines POLSTORE_ANNOTATE; a
 * -fsanitize=thread build defines it too).  Otherwise every macro is empty:
 * zero cost.
 *
 * Helgrind and DRD (valgrind/helgrind.h) and TSan do not see the ordering
 * our hand-made primitives give: a spinlock built on __atomic_exchange, a
 * rwlock of per-slot counters, a seqcount, and liburcu grace periods whose
 * x86 atomics are inline assembly.  At each hand-off the releasing side
 * says PS_ANNOTATE_HAPPENS_BEFORE(obj) and the acquiring side
 * PS_ANNOTATE_HAPPENS_AFTER(obj) with the same object address.
 */
#ifndef POLSTORE_SRC_ANNOTATE_H
#define POLSTORE_SRC_ANNOTATE_H

#if defined(__has_feature)
#if __has_feature(thread_sanitizer) && !defined(POLSTORE_TSAN)
#define POLSTORE_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(POLSTORE_TSAN)
#define POLSTORE_TSAN 1
#endif

#if defined(POLSTORE_TSAN)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define PS_ANNOTATE_HAPPENS_BEFORE(obj) __tsan_release((void *)(obj))
#define PS_ANNOTATE_HAPPENS_AFTER(obj) __tsan_acquire((void *)(obj))
#elif defined(POLSTORE_ANNOTATE)
#include <valgrind/helgrind.h>
#define PS_ANNOTATE_HAPPENS_BEFORE(obj) ANNOTATE_HAPPENS_BEFORE(obj)
#define PS_ANNOTATE_HAPPENS_AFTER(obj) ANNOTATE_HAPPENS_AFTER(obj)
#else
#define PS_ANNOTATE_HAPPENS_BEFORE(obj) ((void)(obj))
#define PS_ANNOTATE_HAPPENS_AFTER(obj) ((void)(obj))
#endif

#endif /* POLSTORE_SRC_ANNOTATE_H */
