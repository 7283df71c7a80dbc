/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The values of a store's first word (struct ps_store's tag) that the
 * checking mode sets, beside the live ones of _PS_STORE_TAG()
 * (polstore/static/layout.h).
 */
#ifndef POLSTORE_SRC_STORE_TAG_H
#define POLSTORE_SRC_STORE_TAG_H

/* In a checked store's tag: a variant byte no inlined reader knows, so every read reaches the wrappers. */
#define PSI_STORE_TAG_CHECKED 0x80u

/* The first word of a checked store once it is destroyed (store.c checks it where no op runs). */
#define PSI_STORE_TAG_DEAD 0xdead57feu

#endif /* POLSTORE_SRC_STORE_TAG_H */
