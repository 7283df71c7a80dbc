/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore attached objects: an object that reads a store from threads of its own for as long as
 * it lives (a fault plane, polstore/uffd.h) attaches to the store, so that destroying the store
 * first is refused by name instead of freeing memory those threads go on reading.  Guide:
 * docs/store.md, "Attached objects".
 */
#ifndef POLSTORE_ATTACH_H
#define POLSTORE_ATTACH_H

#include <polstore/export.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ps_store;

/**
 * ps_store_attach() - record that an object reads a store from threads of its own while it lives
 * @store: the store
 * @user: the object; its address names it
 * @what: what it is, for the message ("fault plane"); kept, not copied
 * @until: the call that ends it ("ps_uffd_destroy()"); kept, not copied
 *
 * Until ps_store_detach(), ps_store_destroy() of @store prints one line on stderr naming the store,
 * @what, @user and @until, and aborts; ps_store_destroy_deferred() fails with -EBUSY (in the
 * checking mode it prints the line and aborts too).  Several objects may be attached to a store.
 * A child of fork() inherits the parent's attachments, which do not count there.
 *
 * Context: any thread, inside read-side sections too; allocates; takes a process-wide lock.
 * Return: 0; -EINVAL for a NULL argument; -EEXIST when @user is attached to @store already;
 * -ENOMEM.
 */
PS_API int ps_store_attach(
		struct ps_store *store, const void *user, const char *what, const char *until);

/**
 * ps_store_detach() - end what ps_store_attach() recorded
 * @store: the store given to ps_store_attach(); not read (a forked child may have destroyed it)
 * @user: the object given to it
 * Context: any thread, inside read-side sections too; takes a process-wide lock.
 * Return: 0; -EINVAL for a NULL argument; -ENOENT when @user is not attached to @store.
 */
PS_API int ps_store_detach(struct ps_store *store, const void *user);

#ifdef __cplusplus
}
#endif

#endif /* POLSTORE_ATTACH_H */
