#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Check the manual pages a build made (docs/kernel-doc-man.pl):
#  - every exported function (a PS_API declaration) of the given headers
#    has a page of its own, and polstore(7) is there;
#  - every page renders without a warning (groff -ww; man --warnings for
#    the two pages below), and its NAME line is what apropos will show;
#  - no page is named after a header or lacks the ps_/PS_/polstore prefix
#    (it would shadow another project's page);
#  - "man ps_store_set" finds ps_store_set's own page, which starts at it,
#    and "man polstore" finds polstore(7).
# Prints one line per problem and exits 1 when there is any; exits 77
# (skipped) without groff.
#
# Usage: scripts/check-man.sh <man dir> <header>...
set -eu
command -v groff >/dev/null || { echo "check-man: no groff (groff-base): skipped"; exit 77; }
mandir=$(cd "${1:?usage: check-man.sh <man dir> <header>...}" && pwd)
shift
bad=0
problem() { printf 'check-man: %s\n' "$*" >&2; bad=$((bad + 1)); }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/polstore-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

[ -f "$mandir/man7/polstore.7" ] || problem "no polstore(7) in $mandir/man7"
for h; do
	perl -ne 'print "$1\n" if /^\s*PS_API\b[^;(]*?\b(\w+)\s*\(/' "$h"
done >"$tmp/functions"
[ -s "$tmp/functions" ] || problem "no PS_API function in $*"
while read -r f; do
	[ -f "$mandir/man3/$f.3polstore" ] || problem "$f(): no page $f.3polstore"
done <"$tmp/functions"

# Names, and link pages.
pages=0
for p in "$mandir"/man3/*.3polstore "$mandir"/man7/*.7; do
	[ -f "$p" ] || continue
	pages=$((pages + 1))
	name=$(basename "$p")
	case $name in
	*.h.* | *.h) problem "$name: named after a header" ;;
	ps_* | PS_* | polstore*) ;;
	*) problem "$name: not a polstore name" ;;
	esac
	head -n 5 "$p" | grep -q '^\.so ' && problem "$name: a link page"
done
# Every warning groff has (-ww), all pages in one run: any output fails.
groff -man -ww -z -Tutf8 "$mandir"/man3/*.3polstore "$mandir"/man7/*.7 >"$tmp/groff" 2>&1 ||
	problem "groff failed"
while read -r line; do problem "groff: $line"; done <"$tmp/groff"
# The NAME line apropos shows: "<name> - <summary>" for the page's own name.
if command -v lexgrog >/dev/null; then
	lexgrog "$mandir"/man3/*.3polstore "$mandir"/man7/*.7 >"$tmp/whatis" 2>&1 || true
	for p in "$mandir"/man3/*.3polstore "$mandir"/man7/*.7; do
		base=$(basename "$p")
		base=${base%.*}
		grep -qF "$p: \"$base - " "$tmp/whatis" ||
			problem "$(basename "$p"): NAME line is not '$base - ...'"
	done
fi

if command -v man >/dev/null; then
	# What a user types: the page found for the name, and where it starts.
	where=$(man -M "$mandir" -w ps_store_set 2>/dev/null || true)
	[ "$where" = "$mandir/man3/ps_store_set.3polstore" ] ||
		problem "man ps_store_set finds '$where', not man3/ps_store_set.3polstore"
	MANWIDTH=80 man --warnings=w -M "$mandir" ps_store_set 2>"$tmp/man" >"$tmp/set"
	[ ! -s "$tmp/man" ] || problem "man ps_store_set: $(head -n 3 "$tmp/man")"
	sed -n '/^NAME/{n;p;q;}' "$tmp/set" | grep -q "^ *ps_store_set  *- " ||
		problem "man ps_store_set does not start at ps_store_set"
	sed -n '/^SYNOPSIS/,/^ARGUMENTS/p' "$tmp/set" | grep -q 'int ps_store_set(' ||
		problem "man ps_store_set: no prototype of ps_store_set in SYNOPSIS"
	grep -q '^RETURN VALUE' "$tmp/set" && grep -q '^ERRORS' "$tmp/set" ||
		problem "man ps_store_set: no RETURN VALUE or ERRORS section"
	where=$(man -M "$mandir" -w polstore 2>/dev/null || true)
	[ "$where" = "$mandir/man7/polstore.7" ] || problem "man polstore finds '$where'"
	MANWIDTH=80 man --warnings=w -l "$mandir/man7/polstore.7" 2>"$tmp/man" >/dev/null
	[ ! -s "$tmp/man" ] || problem "man polstore: $(head -n 3 "$tmp/man")"
fi

echo "check-man: $pages pages, $(wc -l <"$tmp/functions") functions, ${bad} problem(s)"
[ "$bad" -eq 0 ]
