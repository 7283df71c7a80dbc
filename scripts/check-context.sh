#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The calling-context table has one source, docs/context.tsv.  Check that
# the table in docs/context.md is the one made from it, and that
# include/polstore/store.h and README.md point to docs/context.md instead
# of keeping a table of their own.  With --write, first make the table in
# docs/context.md from docs/context.tsv.
# Prints one line per problem and exits 1 when there is any.
#
# Usage: scripts/check-context.sh [--write] [<source dir>]
set -eu
write=0
if [ "${1:-}" = --write ]; then
	write=1
	shift
fi
src=${1:-$(dirname "$0")/..}
tsv=$src/docs/context.tsv
md=$src/docs/context.md
begin='<!-- Made from docs/context.tsv by scripts/check-context.sh --write: edit that file. -->'
end='<!-- End of the table made from docs/context.tsv. -->'
tmp=$(mktemp -d "${TMPDIR:-/tmp}/polstore-context.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
bad=0
problem() { printf 'check-context: %s\n' "$*" >&2; bad=$((bad + 1)); }

# The table as Markdown: the first row is the header; in the call column
# each comma-separated item's first word is a call's name, written as code.
awk -F '\t' '
/^#/ || /^[ \t]*$/ { next }
NF < 2 || NF > 7 {
	printf "check-context: %s:%d: %d fields, not 2 to 7\n", FILENAME, FNR, NF > "/dev/stderr"
	bad = 1
	next
}
{
	nr++
	line = "|"
	for (i = 1; i <= 7; i++) {
		c = i <= NF ? $i : ""
		if (i == 1 && nr > 1 && c != "") {
			n = split(c, item, ", ")
			c = ""
			for (k = 1; k <= n; k++) {
				w = item[k]
				rest = ""
				if (match(w, / /)) {
					rest = substr(w, RSTART)
					w = substr(w, 1, RSTART - 1)
				}
				c = c (k > 1 ? ", " : "") "`" w "`" rest
			}
		}
		line = line (c == "" ? " " : " " c " ") "|"
	}
	print line
	if (nr == 1)
		print "|---|---|---|---|---|---|---|"
}
END { exit bad }' "$tsv" > "$tmp/table" || bad=$((bad + 1))

if [ "$write" = 1 ] && [ "$bad" = 0 ]; then
	awk -v begin="$begin" -v end="$end" -v table="$tmp/table" '
	$0 == begin { print; while ((getline l < table) > 0) print l; skip = 1; next }
	$0 == end { skip = 0 }
	!skip' "$md" > "$tmp/md"
	cat "$tmp/md" > "$md"
fi

# The table in docs/context.md, between the two marks.
if ! grep -qxF -- "$begin" "$md" || ! grep -qxF -- "$end" "$md"; then
	problem "$md: the marks around the table are missing"
else
	awk -v begin="$begin" -v end="$end" '
	$0 == end { inside = 0 }
	inside
	$0 == begin { inside = 1 }' "$md" > "$tmp/shown"
	if ! cmp -s "$tmp/table" "$tmp/shown"; then
		problem "$md: the table is not the one docs/context.tsv makes" \
			"(scripts/check-context.sh --write makes it):"
		diff -u "$tmp/table" "$tmp/shown" | sed 's/^/  /' >&2 || true
	fi
fi

# The header and the README point to the table and keep no copy of it: no
# column heading "variant lock blocks", no row "excl yes EDEADLK".
hdr=$src/include/polstore/store.h
readme=$src/README.md
grep -q 'docs/context\.md' "$hdr" || problem "$hdr does not point to docs/context.md"
grep -q '(docs/context\.md)' "$readme" || problem "$readme does not link docs/context.md"
for f in "$hdr" "$readme"; do
	if grep -nE 'variant[ |]+lock[ |]+blocks|(excl|shared|writer)[ |]+yes[ |]+(yes|EDEADLK|abort)' "$f" >&2; then
		problem "$f keeps a calling-context table of its own (above): point to docs/context.md"
	fi
	if grep -nE '^\|.*\|[ `]*spin[ `]*\|[ `]*rwlock[ `]*\|' "$f" >&2; then
		problem "$f keeps a table of calls by variant (above): point to docs/context.md"
	fi
done

[ "$bad" = 0 ] && echo "context: docs/context.md's table is made from docs/context.tsv;" \
	"store.h and README.md point to it"
[ "$bad" = 0 ]
