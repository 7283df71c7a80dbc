/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polstore symbol visibility.
 *
 * The library is built with -fvisibility=hidden; only declarations marked
 * PS_API are exported from the shared object.  Static builds and consumers
 * see PS_API expand to a plain extern-visible declaration.
 */
#ifndef POLSTORE_EXPORT_H
#define POLSTORE_EXPORT_H

#if defined(POLSTORE_BUILDING) && defined(__GNUC__)
#define PS_API __attribute__((visibility("default")))
#else
#define PS_API
#endif

#endif /* POLSTORE_EXPORT_H */
