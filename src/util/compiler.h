/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Internal helpers shared by every polstore source file.
 *
 * Shared fields that lockless readers may load while a writer stores them
 * are accessed only through the PSI_* atomics below, so every such access
 * is a C11 atomic access and no plain data race exists.  They are the
 * macros of polstore/static/atomic.h, which the inline read side uses too,
 * under the names src/ gives them; that header is the only file that calls
 * a compiler atomic builtin (scripts/check-atomics.sh).
 */
#ifndef POLSTORE_SRC_COMPILER_H
#define POLSTORE_SRC_COMPILER_H

#include <errno.h>
#include <stddef.h>

#include <polstore/static/atomic.h>

/* Loads and stores; the name gives the order. */
#define PSI_READ_ONCE _PS_READ_ONCE
#define PSI_LOAD_ACQUIRE _PS_LOAD_ACQUIRE
#define PSI_LOAD_SEQ_CST _PS_LOAD_SEQ_CST
#define PSI_WRITE_ONCE _PS_WRITE_ONCE
/* Publish: everything written before is visible to a reader that loads (acquire) the value. */
#define PSI_STORE_RELEASE _PS_STORE_RELEASE
#define PSI_STORE_SEQ_CST _PS_STORE_SEQ_CST
/* Read-modify-writes and fences; the order is the last argument: RELAXED, ..., SEQ_CST. */
#define PSI_XCHG _PS_XCHG
#define PSI_TRY_CMPXCHG _PS_TRY_CMPXCHG
#define PSI_TRY_CMPXCHG_WEAK _PS_TRY_CMPXCHG_WEAK
#define PSI_FETCH_ADD _PS_FETCH_ADD
#define PSI_FETCH_SUB _PS_FETCH_SUB
#define PSI_FETCH_OR _PS_FETCH_OR
#define PSI_FETCH_AND _PS_FETCH_AND
#define PSI_ADD_FETCH _PS_ADD_FETCH
#define PSI_SUB_FETCH _PS_SUB_FETCH
#define PSI_FENCE _PS_FENCE
#define PSI_SIGNAL_FENCE _PS_SIGNAL_FENCE

#define psi_likely(x) __builtin_expect(!!(x), 1)
/* A core written once and instantiated by named wrappers (sync_lock.c). */
#define psi_always_inline static inline __attribute__((always_inline))
#define psi_unlikely(x) __builtin_expect(!!(x), 0)

/*
 * A function that holds a pthread_cleanup_push() frame a callback may
 * unwind through (pthread_exit(), cancellation): left out of ASan's
 * instrumentation, whose no-return hook before the unwinder resumes
 * (GCC 12) reports its own sigaltstack() call as a stack overflow.
 */
#define psi_unwound_through __attribute__((no_sanitize_address))

#define psi_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

#define PSI_CACHELINE 64
#define __ps_cacheline_aligned __attribute__((aligned(PSI_CACHELINE)))

static inline void psi_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	PSI_SIGNAL_FENCE(SEQ_CST);
#endif
}

/* A constructor's failure: errno = @err, and NULL to return (CONTRIBUTING.md, errors). */
static inline void *psi_err_null(int err)
{
	errno = err;
	return NULL;
}

#endif /* POLSTORE_SRC_COMPILER_H */
