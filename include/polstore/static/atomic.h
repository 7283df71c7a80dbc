/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The atomic accesses of polstore's library and inline read side, the one
 * place that names the compiler's __atomic builtins (GCC and clang).
 *
 * Each macro takes the shared object itself, an lvalue, not its address.
 * Loads and stores carry their order in their name; read-modify-writes
 * and fences take it as the last argument, the name of a C11 order
 * without its prefix: RELAXED, ACQUIRE, RELEASE, ACQ_REL or SEQ_CST.
 * src/ spells them PSI_* (src/util/compiler.h).
 *
 * Not an API: see polstore/static/rtree.h.
 */
#ifndef POLSTORE_STATIC_ATOMIC_H
#define POLSTORE_STATIC_ATOMIC_H

/* Loads: relaxed, acquire (pairs with a release store), sequentially consistent. */
#define _PS_READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define _PS_LOAD_ACQUIRE(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define _PS_LOAD_SEQ_CST(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)

/* Stores: relaxed, release (a publication), sequentially consistent. */
#define _PS_WRITE_ONCE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define _PS_STORE_RELEASE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define _PS_STORE_SEQ_CST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)

/* Exchange: stores @v, returns the value before. */
#define _PS_XCHG(x, v, mo) __atomic_exchange_n(&(x), (v), __ATOMIC_##mo)

/*
 * Compare-and-exchange: when @x holds *@expected, stores @v and returns
 * true (order @ok); else copies @x into *@expected and returns false
 * (order @fail, no stronger than @ok, neither RELEASE nor ACQ_REL).  The
 * weak form may fail spuriously: it belongs in a loop.
 */
#define _PS_TRY_CMPXCHG(x, expected, v, ok, fail)                                                  \
	__atomic_compare_exchange_n(&(x), (expected), (v), 0, __ATOMIC_##ok, __ATOMIC_##fail)
#define _PS_TRY_CMPXCHG_WEAK(x, expected, v, ok, fail)                                             \
	__atomic_compare_exchange_n(&(x), (expected), (v), 1, __ATOMIC_##ok, __ATOMIC_##fail)

/* Arithmetic: FETCH_* return the value before, *_FETCH the value after. */
#define _PS_FETCH_ADD(x, v, mo) __atomic_fetch_add(&(x), (v), __ATOMIC_##mo)
#define _PS_FETCH_SUB(x, v, mo) __atomic_fetch_sub(&(x), (v), __ATOMIC_##mo)
#define _PS_FETCH_OR(x, v, mo) __atomic_fetch_or(&(x), (v), __ATOMIC_##mo)
#define _PS_FETCH_AND(x, v, mo) __atomic_fetch_and(&(x), (v), __ATOMIC_##mo)
#define _PS_ADD_FETCH(x, v, mo) __atomic_add_fetch(&(x), (v), __ATOMIC_##mo)
#define _PS_SUB_FETCH(x, v, mo) __atomic_sub_fetch(&(x), (v), __ATOMIC_##mo)

/* Fences: between threads; between a thread and its signal handlers (the compiler only). */
#define _PS_FENCE(mo) __atomic_thread_fence(__ATOMIC_##mo)
#define _PS_SIGNAL_FENCE(mo) __atomic_signal_fence(__ATOMIC_##mo)

#endif /* POLSTORE_STATIC_ATOMIC_H */
