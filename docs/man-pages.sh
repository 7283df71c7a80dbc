#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Trim and fix Doxygen's section-3 man pages (MAN_LINKS = YES) for an
# installed manual:
#  - kept: a page per header (store.h.3polstore), per public struct, and a
#    ".so" link page per public name (ps_store_set.3polstore,
#    PS_APPLY_STRICT.3polstore), so that "man ps_store_set" works;
#  - removed: link pages of struct members and other names without the
#    ps_/PS_ prefix (they would shadow free(3) and the like), and the page
#    of docs/placement.md, whose name Doxygen makes from its absolute path;
#  - fixed: a text line that starts with an apostrophe (a "Return: 'spin',
#    'rwlock' ..." line) is a control line to roff, which Doxygen does not
#    escape: it gets the zero-width escape \& in front.
#
# Usage: docs/man-pages.sh <man3 dir>
set -eu
cd "${1:?usage: man-pages.sh <man3 dir>}"
for f in *.3polstore; do
	case $f in
	ps_* | PS_* | *.h.3polstore) ;;
	md_*)
		rm -f -- "$f"
		continue
		;;
	*)
		if head -n 1 -- "$f" | grep -q '^\.so '; then
			rm -f -- "$f"
			continue
		fi
		;;
	esac
	if grep -q "^'" -- "$f"; then
		sed "s/^'/\\\\\\&'/" -- "$f" >"$f.tmp" && mv -- "$f.tmp" "$f"
	fi
done
