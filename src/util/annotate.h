/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Happens-before annotations for thread checkers, compiled in only when the
 * build asks (POLSTORE_ANNOTATE=ON defines POLSTORE_ANNOTATE; a
 * -fsanitize=thread build defines it too).  Otherwise every macro is empty:
 * zero cost.
 *
 * Helgrind and DRD (valgrind/helgrind.h) and TSan do not see the ordering
 * our hand-made primitives give: a spinlock built on an atomic exchange, a
 * rwlock of per-slot counters, a seqcount, and liburcu grace periods whose
 * x86 atomics are inline assembly.  At each hand-off the releasing side
 * says PSI_ANNOTATE_HAPPENS_BEFORE(obj) and the acquiring side
 * PSI_ANNOTATE_HAPPENS_AFTER(obj) with the same object address.
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

/*
 * PSI_ANNOTATE_BENIGN_RACE_SIZED(addr, size): [addr, addr + size) holds
 * synchronisation words that are only ever accessed with __atomic builtins
 * (a lock word, a sequence count, a reference count, a published pointer).
 * Valgrind's tools see those atomics as plain loads and stores and report
 * every access to them; the ordering they carry is what HAPPENS_BEFORE and
 * HAPPENS_AFTER describe.  Call it once, after initialising the words and
 * before sharing them.  TSan understands atomics: nothing to say there.
 *
 * PSI_ANNOTATE_IGNORE_READS_BEGIN()/END(): the loads between them are
 * speculative by design (a seqlock read section whose result is thrown away
 * when the count changed) and may race with a writer; they are not checked.
 * Helgrind has no such request (valgrind 3.19 marks it unimplemented): its
 * reports for these reads are suppressed by name in tests/tools/helgrind.supp.
 */
#if defined(POLSTORE_TSAN)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define PSI_ANNOTATE_HAPPENS_BEFORE(obj) __tsan_release((void *)(obj))
#define PSI_ANNOTATE_HAPPENS_AFTER(obj) __tsan_acquire((void *)(obj))
#define PSI_ANNOTATE_BENIGN_RACE_SIZED(addr, size) ((void)(addr), (void)(size))
#define PSI_ANNOTATE_IGNORE_READS_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define PSI_ANNOTATE_IGNORE_READS_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#elif defined(POLSTORE_ANNOTATE)
#include <valgrind/helgrind.h>
/*
 * DRD implements helgrind.h's happens-before requests (drd.h gives
 * VG_USERREQ__DRD_ANNOTATE_HAPPENS_BEFORE/AFTER the same numbers), but not
 * its "untracked range" request, and helgrind.h and drd.h cannot both be
 * included (they define the same ANNOTATE_* macros).  These are the two
 * DRD requests we need, numbered as drd.h's ABI enum numbers them
 * (VG_USERREQ_TOOL_BASE('D','R') + 2 and + 6; the enum is append-only).
 * Each tool ignores the other tool's requests.
 */
#define _PS_DRD_START_SUPPRESSION (VG_USERREQ_TOOL_BASE('D', 'R') + 2)
#define _PS_DRD_RECORD_LOADS (VG_USERREQ_TOOL_BASE('D', 'R') + 6)
#define PSI_ANNOTATE_HAPPENS_BEFORE(obj) ANNOTATE_HAPPENS_BEFORE(obj)
#define PSI_ANNOTATE_HAPPENS_AFTER(obj) ANNOTATE_HAPPENS_AFTER(obj)
#define PSI_ANNOTATE_BENIGN_RACE_SIZED(addr, size)                                                  \
	do {                                                                                       \
		VALGRIND_HG_DISABLE_CHECKING((addr), (size));                                      \
		VALGRIND_DO_CLIENT_REQUEST_STMT(_PS_DRD_START_SUPPRESSION, (addr), (size), 0, 0,   \
				0);                                                                \
	} while (0)
#define PSI_ANNOTATE_IGNORE_READS_BEGIN()                                                           \
	VALGRIND_DO_CLIENT_REQUEST_STMT(_PS_DRD_RECORD_LOADS, 0, 0, 0, 0, 0)
#define PSI_ANNOTATE_IGNORE_READS_END()                                                             \
	VALGRIND_DO_CLIENT_REQUEST_STMT(_PS_DRD_RECORD_LOADS, 1, 0, 0, 0, 0)
#else
#define PSI_ANNOTATE_HAPPENS_BEFORE(obj) ((void)(obj))
#define PSI_ANNOTATE_HAPPENS_AFTER(obj) ((void)(obj))
#define PSI_ANNOTATE_BENIGN_RACE_SIZED(addr, size) ((void)(addr), (void)(size))
#define PSI_ANNOTATE_IGNORE_READS_BEGIN() ((void)0)
#define PSI_ANNOTATE_IGNORE_READS_END() ((void)0)
#endif

#endif /* POLSTORE_SRC_ANNOTATE_H */
