#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every function defined in the library (nm, local ones too) has its name
# written in src/ or include/: no generator makes a name that grep cannot
# find.  Functions of liburcu's inline headers are told apart by their
# own headers (and valgrind's client requests); the toolchain's (start-up
# code, libgcc and libc_nonshared helpers, sanitizer constructors) by name.
# A symbol named ps_* (function or object, global or local) is named in
# include/: private code takes psi_ (docs/design.md, "Names").
# Usage: check_nm_grep.sh <source dir> <library>
set -eu
src=$1
lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

words() {
	grep -rhoE '[A-Za-z_][A-Za-z0-9_]*' "$@" 2>/dev/null | sort -u
}
words "$src/src" "$src/include" > "$tmp/ours"
words "$src/include" > "$tmp/public"
inc=$(pkg-config --variable=includedir liburcu 2>/dev/null || echo /usr/include)
words "$inc/urcu" /usr/include/urcu /usr/include/valgrind > "$tmp/theirs"

# GCC's clones (foo.part.0, foo.cold, foo.constprop.0) count as foo.
nm --defined-only "$lib" | awk '$2 ~ /^[TtWw]$/ { sub(/\..*/, "", $3); print $3 }' | sort -u |
	grep -vxE '_init|_fini|frame_dummy|register_tm_clones|deregister_tm_clones|__.*|_sub_[ID]_[0-9_]*' \
	> "$tmp/funcs"

comm -23 "$tmp/funcs" "$tmp/ours" | comm -23 - "$tmp/theirs" > "$tmp/missing"
if [ -s "$tmp/missing" ]; then
	echo "functions in $lib whose name grep finds nowhere in src/ or include/:"
	sed 's/^/  /' "$tmp/missing"
	exit 1
fi
nm --defined-only "$lib" | awk '{ sub(/\..*/, "", $3); print $3 }' | grep -E '^ps_' | sort -u |
	comm -23 - "$tmp/public" > "$tmp/private_ps"
if [ -s "$tmp/private_ps" ]; then
	echo "symbols in $lib named ps_* but not in include/ (private code takes psi_):"
	sed 's/^/  /' "$tmp/private_ps"
	exit 1
fi
echo "nm-grep: $(wc -l < "$tmp/funcs") functions, each named in src/ or include/"
