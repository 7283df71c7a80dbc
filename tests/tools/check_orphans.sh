#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# No orphan function in the libraries: every function an object of the
# static archives defines with external linkage is used somewhere.  A use
# is a relocation against its name in an object of the archives (a call,
# or its address taken into a table), other than in debugging and unwind
# information; or it is exported (debian/*.symbols lists the API); or the
# programs above the library name it (tests/, stress/, fuzz/, examples/:
# test hooks); or src/ calls it in text that this build's configuration
# leaves out (a use not at column 0, where kernel style writes
# declarations and definitions).  Comments are left out of the text.
# Usage: check_orphans.sh <source dir> <static archive>...
set -eu
src=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nm --defined-only -g "$@" | awk 'NF == 3 && $2 ~ /^[TW]$/ { print $3 }' | sort -u > "$tmp/defined"
[ -s "$tmp/defined" ] || { echo "check_orphans: no function defined in $*"; exit 1; }
readelf -rW "$@" | awk '
/^Relocation section/ { sec = $3; skip = (sec ~ /debug|eh_frame/); next }
!skip && NF >= 5 && $1 ~ /^[0-9a-f]+$/ { s = $5; sub(/[+@].*/, "", s); print s }
' | sort -u > "$tmp/relocated"
sed -n 's/^ \([A-Za-z_][A-Za-z0-9_]*\)@.*/\1/p' "$src"/debian/*.symbols | sort -u > "$tmp/exported"
comm -23 "$tmp/defined" "$tmp/relocated" | comm -23 - "$tmp/exported" > "$tmp/candidates"

status=0
n=$(wc -l < "$tmp/defined")
if [ -s "$tmp/candidates" ]; then
	cd "$src"
	perl -e '
	use strict;
	use warnings;
	my %cand = map { chomp; ($_ => 1) } do { open(my $c, "<", shift) or die; <$c> };
	my (%above, %config);
	my @files = split /\n/, `find src include tests stress fuzz examples -name "*.[ch]" 2>/dev/null`;
	for my $file (@files) {
		open(my $fh, "<", $file) or die "$file: $!\n";
		my $t = do { local $/; <$fh> };
		close $fh;
		$t =~ s{/\*.*?\*/|//[^\n]*}{ (my $x = $&) =~ s/[^\n]/ /g; $x }gse;
		my $lib = $file =~ m{^(?:src|include)/};
		for my $line (split /\n/, $t) {
			for my $w ($line =~ /\b([A-Za-z_]\w*)\b/g) {
				next unless $cand{$w};
				if (!$lib) {
					$above{$w} = $file;
				} elsif ($line =~ /^[ \t]/ || $line =~ /^#/) {
					$config{$w} = $file;
				}
			}
		}
	}
	my $bad = 0;
	for my $f (sort keys %cand) {
		next if $above{$f} || $config{$f};
		print "$f: defined in the libraries, called nowhere: remove it (or make it static and use it)\n";
		$bad++;
	}
	exit($bad ? 1 : 0);
	' "$tmp/candidates" || status=1
fi
[ $status = 0 ] && echo "orphans: none among the $n functions the libraries define with external linkage" \
	"($(wc -l < "$tmp/candidates") used only by tests, stress, fuzz or examples, or in another configuration)"
exit $status
