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
#    and "man polstore" finds polstore(7);
#  - with --lib: the LIBRARY section of every page in man3 names, as
#    rendered, the library whose dynamic symbols (nm -D) define the page's
#    function ("(libX, -lX; pkg-config --cflags --libs M)", M the module
#    of a .pc file in a --pc directory whose Libs has -lX); a macro's page
#    and a header's page name the library of the header's functions.
# Prints one line per problem and exits 1 when there is any; exits 77
# (skipped) without groff.
#
# Usage: scripts/check-man.sh [--lib <libX.so>]... [--pc <dir>]...
#                             <man dir> <header>...
set -eu
usage="usage: check-man.sh [--lib <libX.so>]... [--pc <dir>]... <man dir> <header>..."
command -v groff >/dev/null || { echo "check-man: no groff (groff-base): skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/polstore-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
libs=
pcdirs=
while [ $# -gt 0 ]; do
	case $1 in
	--lib) libs="$libs ${2:?$usage}"; shift 2 ;;
	--pc) pcdirs="$pcdirs ${2:?$usage}"; shift 2 ;;
	*) break ;;
	esac
done
mandir=$(cd "${1:?$usage}" && pwd)
shift
bad=0
problem() { printf 'check-man: %s\n' "$*" >&2; bad=$((bad + 1)); }

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

# LIBRARY: "<symbol> <lib>" for every symbol a library defines, and the
# pkg-config module of each library.
checked=0
if [ -n "$libs" ]; then
	command -v nm >/dev/null || problem "--lib given, but no nm (binutils)"
	for l in $libs; do
		[ -f "$l" ] || { problem "--lib $l: no such file"; continue; }
		name=$(basename "$l")
		name=${name%%.so*}
		nm -D --defined-only "$l" | awk -v lib="$name" 'NF == 3 { print $3, lib }'
	done | sort -u >"$tmp/defined"
	: >"$tmp/modules"
	for d in $pcdirs; do
		for pc in "$d"/*.pc; do
			[ -f "$pc" ] || continue
			sed -n 's/^Libs:.*-l\(polstore[A-Za-z0-9_]*\).*/lib\1/p' "$pc" |
				sed "s|\$| $(basename "$pc" .pc)|" >>"$tmp/modules"
		done
	done
	# Every page of man3 as a reader sees it, in one run: per page its
	# LIBRARY text, its #include, and the functions a header page lists.
	groff -man -Tascii -P-cbou -rLL=300n -rHY=0 -rcR=1 "$mandir"/man3/*.3polstore 2>/dev/null |
		awk '
		/^[^ ]+\(3polstore\) +polstore Manual/ { page = $1; sub(/\(3polstore\)$/, "", page); sect = ""; next }
		/^[A-Z][A-Z ]*$/ { sect = $0; next }
		sect == "LIBRARY" { $1 = $1; lib[page] = lib[page] (lib[page] == "" ? "" : " ") $0 }
		sect == "SYNOPSIS" && /#include <polstore\// { h = $0; sub(/.*<polstore\//, "", h); sub(/\.h>.*/, "", h); inc[page] = h }
		sect == "FUNCTIONS" && /^ +ps_[A-Za-z0-9_]+\(3polstore\)$/ { f = $1; sub(/\(.*/, "", f); print "F", page, f }
		END { for (p in lib) print "L", p, lib[p]; for (p in inc) print "I", p, inc[p] }
		' >"$tmp/rendered"
	awk -v havepc="$pcdirs" '
	FILENAME == ARGV[1] { def[$1] = $2; next }
	FILENAME == ARGV[2] { mod[$1] = $2; next }
	$1 == "F" { if ($3 in def) { l = def[$3]; if (!(($2, l) in seen)) { seen[$2, l] = 1; hl[$2] = hl[$2] (hl[$2] == "" ? "" : " ") l } } next }
	$1 == "I" { inc[$2] = $3; next }
	$1 == "L" { p = $2; $1 = ""; $2 = ""; sub(/^ +/, ""); line[p] = $0; next }
	END {
		for (p in line) {
			# A function: the library that defines it.  A header page: the
			# library of the functions it lists.  A macro: its header page s.
			if (p ~ /^polstore-/) want = hl[p]
			else if (p in def) want = def[p]
			else want = hl["polstore-" inc[p]]
			# A header without functions (version.h: macros) is libpolstore s.
			if (want == "") want = "libpolstore"
			if (want ~ / /) { print p ": its functions are in several libraries: " want; continue }
			m = (want in mod) ? mod[want] : ""
			if (m == "" && havepc != "") print p ": no .pc file links -l" substr(want, 4)
			expect = "(" want ", -l" substr(want, 4) (m == "" ? "" : "; pkg-config --cflags --libs " m) ")"
			if (index(line[p], expect)) print "ok"
			else print p ": LIBRARY says \"" line[p] "\", not \"... " expect "\" (nm -D: " want " defines it)"
		}
	}' "$tmp/defined" "$tmp/modules" "$tmp/rendered" | sort >"$tmp/libcheck"
	checked=$(grep -c '^ok$' "$tmp/libcheck" || true)
	while read -r line; do [ -z "$line" ] || problem "$line"; done <<EOF_LIB
$(grep -v '^ok$' "$tmp/libcheck" || true)
EOF_LIB
	[ "$checked" -gt 0 ] || problem "--lib: no page checked"
fi

echo "check-man: $pages pages, $(wc -l <"$tmp/functions") functions, $checked LIBRARY lines checked, ${bad} problem(s)"
[ "$bad" -eq 0 ]
