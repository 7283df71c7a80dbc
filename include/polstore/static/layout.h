/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The identity of the layouts a POLSTORE_INLINE program compiles in: a
 * hash of the offset and size of every field its inlined read side touches
 * (polstore/static/lookup.h and the headers it includes), and of the
 * constants it compares them with.  Two libraries with the same identity
 * can run the same inline program, whatever their version numbers; a
 * change to one of those fields (reordered, resized, moved) changes the
 * identity by itself.  The library accepts only programs of its own
 * (_ps_store_create_inline()), and packages carry it (pkg-config variable
 * "layout" of polstore-inline, the Debian virtual package
 * polstore-layout-ID).
 *
 * A field the inline read side starts to read joins the list below.  A
 * change of meaning that keeps every layout (a field that now holds
 * something else) bumps _PS_INLINE_PROTOCOL.
 *
 * Not an API: see polstore/static/rtree.h.
 */
#ifndef POLSTORE_STATIC_LAYOUT_H
#define POLSTORE_STATIC_LAYOUT_H

#include <stddef.h>

#include <polstore/static/index.h>
#include <polstore/static/lcache.h>
#include <polstore/static/policy.h>
#include <polstore/static/rtree.h>
#include <polstore/static/store.h>

/* Revision of the inline read protocol beyond what the layouts show. */
#define _PS_INLINE_PROTOCOL 3

/* One step of FNV-1a over 64-bit words: an integer constant expression. */
#define _PS_LAYOUT_MIX(h, v) ((((h) ^ (unsigned long long)(v)) * 0x100000001b3ULL))
/* A field: its offset, then its size. */
#define _PS_LAYOUT_FIELD(h, type, member)                                                          \
	_PS_LAYOUT_MIX(_PS_LAYOUT_MIX(h, offsetof(type, member)), sizeof(((type *)0)->member))

/*
 * The hash, one field or constant a line, in order (a field added in the
 * middle renumbers the lines after it).  A store: the tag, then the
 * tree and the count walked; a range: the walk's node links and bounds,
 * the policy and the node hint; a policy: the words of the reference
 * count, then what lookups copy or pick a node from; the topology's
 * dense prefix; the read index: its root, the node header, an inner
 * node's pivots and children, a leaf's words (starts, ends, policies and
 * hints by its capacity), the fan-out, the sentinel and the hint's width.
 */
#define _PS_LAYOUT_H0 _PS_LAYOUT_MIX(0xcbf29ce484222325ULL, _PS_INLINE_PROTOCOL)
#define _PS_LAYOUT_H1 _PS_LAYOUT_FIELD(_PS_LAYOUT_H0, struct ps_store, tag)
#define _PS_LAYOUT_H2 _PS_LAYOUT_FIELD(_PS_LAYOUT_H1, struct ps_store, rd.seq.seq)
#define _PS_LAYOUT_H3 _PS_LAYOUT_FIELD(_PS_LAYOUT_H2, struct ps_store, rd.tree.root.node)
#define _PS_LAYOUT_H4 _PS_LAYOUT_FIELD(_PS_LAYOUT_H3, struct ps_rb_node, child)
#define _PS_LAYOUT_H5 _PS_LAYOUT_FIELD(_PS_LAYOUT_H4, struct ps_range, rb)
#define _PS_LAYOUT_H6 _PS_LAYOUT_FIELD(_PS_LAYOUT_H5, struct ps_range, start)
#define _PS_LAYOUT_H7 _PS_LAYOUT_FIELD(_PS_LAYOUT_H6, struct ps_range, end)
#define _PS_LAYOUT_H8 _PS_LAYOUT_FIELD(_PS_LAYOUT_H7, struct ps_range, pol)
#define _PS_LAYOUT_H9 _PS_LAYOUT_FIELD(_PS_LAYOUT_H8, struct ps_range, node_hint)
#define _PS_LAYOUT_H10 _PS_LAYOUT_MIX(_PS_LAYOUT_H9, _PS_HINT_LOCAL)
#define _PS_LAYOUT_H11 _PS_LAYOUT_MIX(_PS_LAYOUT_H10, _PS_HINT_POLICY)
#define _PS_LAYOUT_H12 _PS_LAYOUT_FIELD(_PS_LAYOUT_H11, struct ps_policy, refcnt)
#define _PS_LAYOUT_H13 _PS_LAYOUT_FIELD(_PS_LAYOUT_H12, struct ps_policy, stripes)
#define _PS_LAYOUT_H14 _PS_LAYOUT_FIELD(_PS_LAYOUT_H13, struct ps_policy, refmode)
#define _PS_LAYOUT_H15 _PS_LAYOUT_FIELD(_PS_LAYOUT_H14, struct ps_policy, hits)
#define _PS_LAYOUT_H16 _PS_LAYOUT_FIELD(_PS_LAYOUT_H15, struct ps_policy, stores)
#define _PS_LAYOUT_H17 _PS_LAYOUT_FIELD(_PS_LAYOUT_H16, struct ps_policy, stripe_mask)
#define _PS_LAYOUT_H18 _PS_LAYOUT_MIX(_PS_LAYOUT_H17, PS_REF_ATOMIC)
#define _PS_LAYOUT_H19 _PS_LAYOUT_MIX(_PS_LAYOUT_H18, PS_REF_OPEN)
#define _PS_LAYOUT_H20 _PS_LAYOUT_MIX(_PS_LAYOUT_H19, PS_REF_BUSY)
#define _PS_LAYOUT_H21 _PS_LAYOUT_MIX(_PS_LAYOUT_H20, PS_REF_CLOSED_MAX)
#define _PS_LAYOUT_H22 _PS_LAYOUT_MIX(_PS_LAYOUT_H21, PS_REF_HOT)
#define _PS_LAYOUT_H23 _PS_LAYOUT_MIX(_PS_LAYOUT_H22, PS_REF_STRIPE_BYTES)
#define _PS_LAYOUT_H24 _PS_LAYOUT_FIELD(_PS_LAYOUT_H23, struct ps_policy, mode)
#define _PS_LAYOUT_H25 _PS_LAYOUT_FIELD(_PS_LAYOUT_H24, struct ps_policy, flags)
#define _PS_LAYOUT_H26 _PS_LAYOUT_FIELD(_PS_LAYOUT_H25, struct ps_policy, weight)
#define _PS_LAYOUT_H27 _PS_LAYOUT_FIELD(_PS_LAYOUT_H26, struct ps_policy, nodes)
#define _PS_LAYOUT_H28 _PS_LAYOUT_FIELD(_PS_LAYOUT_H27, struct _ps_numa_fast, dense)
/* The read index, in a chain of its own (compilers bound the nesting of one expression). */
#define _PS_LAYOUT_X0 _PS_LAYOUT_FIELD(0xcbf29ce484222325ULL, struct ps_store, ix.node)
#define _PS_LAYOUT_X1 _PS_LAYOUT_FIELD(_PS_LAYOUT_X0, struct ps_ix_node, n)
#define _PS_LAYOUT_X2 _PS_LAYOUT_FIELD(_PS_LAYOUT_X1, struct ps_ix_node, height)
#define _PS_LAYOUT_X3 _PS_LAYOUT_FIELD(_PS_LAYOUT_X2, struct ps_ix_node, shift)
#define _PS_LAYOUT_X4 _PS_LAYOUT_FIELD(_PS_LAYOUT_X3, struct ps_ix_inner, piv)
#define _PS_LAYOUT_X5 _PS_LAYOUT_FIELD(_PS_LAYOUT_X4, struct ps_ix_inner, child)
#define _PS_LAYOUT_X6                                                                              \
	_PS_LAYOUT_MIX(_PS_LAYOUT_MIX(_PS_LAYOUT_X5, offsetof(struct ps_ix_leaf, w)),              \
			sizeof(((struct ps_ix_leaf *)0)->w[0]))
#define _PS_LAYOUT_X7 _PS_LAYOUT_MIX(_PS_LAYOUT_X6, PS_IX_FAN)
#define _PS_LAYOUT_X8 _PS_LAYOUT_MIX(_PS_LAYOUT_X7, PS_IX_NONE)
#define _PS_LAYOUT_X9 _PS_LAYOUT_MIX(_PS_LAYOUT_X8, sizeof(int16_t))
/* The lookup cache: the store's id and count, an entry's fields (a fill clears @cstamp), the ways. */
#define _PS_LAYOUT_C0 _PS_LAYOUT_FIELD(0xcbf29ce484222325ULL, struct ps_store, lc.id)
#define _PS_LAYOUT_C1 _PS_LAYOUT_FIELD(_PS_LAYOUT_C0, struct ps_store, rd.gen)
#define _PS_LAYOUT_C2 _PS_LAYOUT_FIELD(_PS_LAYOUT_C1, struct _ps_lc_entry, id)
#define _PS_LAYOUT_C3 _PS_LAYOUT_FIELD(_PS_LAYOUT_C2, struct _ps_lc_entry, gen)
#define _PS_LAYOUT_C4 _PS_LAYOUT_FIELD(_PS_LAYOUT_C3, struct _ps_lc_entry, start)
#define _PS_LAYOUT_C5 _PS_LAYOUT_FIELD(_PS_LAYOUT_C4, struct _ps_lc_entry, len)
#define _PS_LAYOUT_C6 _PS_LAYOUT_FIELD(_PS_LAYOUT_C5, struct _ps_lc_entry, pol)
#define _PS_LAYOUT_C7 _PS_LAYOUT_FIELD(_PS_LAYOUT_C6, struct _ps_lc_entry, hint)
#define _PS_LAYOUT_C8 _PS_LAYOUT_FIELD(_PS_LAYOUT_C7, struct _ps_lc_entry, cstamp)
#define _PS_LAYOUT_C9 _PS_LAYOUT_MIX(_PS_LAYOUT_MIX(_PS_LAYOUT_C8, sizeof(struct _ps_lc_entry)), PS_LC_WAYS)
#define _PS_LAYOUT_HASH                                                                            \
	_PS_LAYOUT_MIX(_PS_LAYOUT_MIX(_PS_LAYOUT_H28, _PS_LAYOUT_X9), _PS_LAYOUT_C9)

/* A final mix (MurmurHash3's), so that every input bit reaches the 32 kept. */
#define _PS_LAYOUT_AVAL1(z) ((((z) ^ ((z) >> 33)) * 0xff51afd7ed558ccdULL))
#define _PS_LAYOUT_AVAL(z) (_PS_LAYOUT_AVAL1(z) ^ (_PS_LAYOUT_AVAL1(z) >> 33))

/*
 * The identity: 32 bits of the hash (8 hex digits in messages and package
 * names).  A program built with POLSTORE_INLINE passes it to
 * _ps_store_create_inline().
 */
#define _PS_INLINE_ABI ((unsigned long)(_PS_LAYOUT_AVAL(_PS_LAYOUT_HASH) & 0xffffffffULL))

/*
 * The first word of every store: 24 bits of the identity and the variant,
 * so that an inlined reader built for other layouts recognises no store
 * and takes the library's exported calls instead.
 */
#define _PS_STORE_TAG(sync) ((unsigned)(_PS_INLINE_ABI & 0xffffff) << 8 | (unsigned)(sync))

/* The walk casts a tree node to its range: the node comes first. */
_Static_assert(offsetof(struct ps_range, rb) == 0, "struct ps_range begins with its tree node");

#endif /* POLSTORE_STATIC_LAYOUT_H */
