#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# No file of src/, stress/ or tests/ over 1,000 lines (CONTRIBUTING.md): a
# file that grows past it is split along what it holds.  A path listed in
# scripts/file-size.allow (one a line, '#' starts a comment) is let
# through while it is being split; a listed path that is back under the
# limit, or no longer there, is an error too, so the list only shrinks.
# Prints each file over the limit and exits 1 when there is any.
#
# Usage: scripts/check-file-size.sh [<source dir>]
set -eu
src=${1:-$(dirname "$0")/..}
cd "$src"
limit=1000
allow=scripts/file-size.allow
allowed=$(sed -e 's/#.*//' -e 's/[ 	]*$//' -e '/^$/d' "$allow" 2>/dev/null || true)
status=0
n=0
for f in $(find src stress tests -type f | LC_ALL=C sort); do
	n=$((n + 1))
	lines=$(wc -l < "$f")
	listed=0
	for a in $allowed; do [ "$a" = "$f" ] && listed=1; done
	if [ "$lines" -gt $limit ] && [ $listed = 0 ]; then
		echo "$f: $lines lines, over $limit: split it along what it holds"
		status=1
	elif [ "$lines" -le $limit ] && [ $listed = 1 ]; then
		echo "$f: $lines lines, at most $limit: take it off $allow"
		status=1
	fi
done
for a in $allowed; do
	[ -e "$a" ] || { echo "$allow: $a is no longer there: take it off"; status=1; }
done
[ $status = 0 ] && echo "$n files of src/, stress/ and tests/: none over $limit lines" \
	"(allowed while they are split: $(echo $allowed | wc -w))"
exit $status
