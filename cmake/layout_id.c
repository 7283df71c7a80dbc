/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Compiled, never linked or run, by cmake/polstoreLayout.cmake: the
 * identity of the inline layouts (polstore/static/layout.h) as this
 * compiler lays them out, written into the object as a string CMake reads.
 */
#include <polstore/static/layout.h>

#define PS_NIBBLE(n) ((unsigned)(_PS_INLINE_ABI >> (4 * (n))) & 15u)
#define PS_HEX(n) ((char)(PS_NIBBLE(n) < 10 ? '0' + PS_NIBBLE(n) : 'a' - 10 + PS_NIBBLE(n)))

extern const char polstore_layout_id[];
const char polstore_layout_id[] = { 'P', 'O', 'L', 'S', 'T', 'O', 'R', 'E', '_', 'L', 'A', 'Y',
	'O', 'U', 'T', '=', PS_HEX(7), PS_HEX(6), PS_HEX(5), PS_HEX(4), PS_HEX(3), PS_HEX(2),
	PS_HEX(1), PS_HEX(0), '\0' };
