#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# How many source files of the library one ps_store_set() and one
# ps_store_lookup() on an RCU store cross, computed from the code: a
# Debug build of the library of its own (-O0, no invariant checks, no
# annotations) runs tests/tools/crossings.c under callgrind, collecting
# only inside its one set (then its one lookup), and a file counts when
# any line of it ran there (its functions, or inline functions and
# macros' callers of its headers: callgrind's fl=/fi=/fe= records).
# Files of src/ and include/ count; liburcu's and libc's do not.
#
# Prints both counts and the files, and exits 1 when a count is above its
# limit (--max-set, --max-lookup; by default the counts docs/design.md
# was last written with, so that nothing adds a file unnoticed), or, with
# --check-doc, when docs/design.md's block between "<!-- crossings -->"
# and "<!-- /crossings -->" is not what --write-doc writes there.
# Exits 77 (skipped) without valgrind.
#
# Usage: scripts/check-crossings.sh [--build DIR] [--variant rcu|rcu-qsbr]
#        [--max-set N] [--max-lookup N] [--check-doc | --write-doc]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build-crossings
variant=rcu
max_set=23
max_lookup=5
doc=
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift ;;
	--variant) variant=$2; shift ;;
	--max-set) max_set=$2; shift ;;
	--max-lookup) max_lookup=$2; shift ;;
	--check-doc) doc=check ;;
	--write-doc) doc=write ;;
	*) echo "usage: $0 [--build DIR] [--variant rcu|rcu-qsbr] [--max-set N]" \
		"[--max-lookup N] [--check-doc | --write-doc]" >&2; exit 2 ;;
	esac
	shift
done
if ! command -v valgrind >/dev/null 2>&1; then
	echo "check-crossings: no valgrind: skipped" >&2
	exit 77
fi
mkdir -p "$build"
build=$(cd "$build" && pwd)
log=$build/crossings.log
if [ ! -f "$build/CMakeCache.txt" ]; then
	cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DPOLSTORE_BUILD_TESTS=OFF \
		-DPOLSTORE_BUILD_DOCS=OFF -DPOLSTORE_BUILD_STRESS=OFF \
		-DPOLSTORE_BUILD_EXAMPLES=OFF -DPOLSTORE_HWLOC=OFF >"$log" 2>&1 ||
		{ cat "$log" >&2; exit 1; }
fi
nice cmake --build "$build" --target polstore -j2 >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
${CC:-cc} -g -O0 -o "$build/crossings" "$src/tests/tools/crossings.c" -I"$src/include" \
	-I"$build/include" -L"$build/src" -Wl,-rpath,"$build/src" -lpolstore
for what in set lookup; do
	rm -f "$build"/callgrind.$what.*
	valgrind --tool=callgrind --separate-threads=yes --collect-atstart=no \
		--toggle-collect=crossing_$what \
		--callgrind-out-file="$build/callgrind.$what.%p" \
		"$build/crossings" "$variant" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
done
# The files with a cost line in the calling thread's profile (thread 1).
exec perl -e '
use strict;
use warnings;
my ($src, $build, $max_set, $max_lookup, $doc, $variant) = @ARGV;
my %count;
my %files;
for my $what ("set", "lookup") {
	my @out = glob("$build/callgrind.$what.*-01");
	die "check-crossings: no profile of the $what\n" unless @out == 1;
	open(my $fh, "<", $out[0]) or die "$out[0]: $!\n";
	my (%name, $fl, $cur, $skip);
	my %seen;
	while (<$fh>) {
		chomp;
		# File names are numbered where first named (a callee'\''s too).
		if (/^(fl|fi|fe|cfi|cfl)=\((\d+)\)(?: (.*))?$/) {
			$name{$2} = $3 if defined $3;
			next if $1 =~ /^c/;
			$cur = $name{$2};
			$fl = $cur if $1 eq "fl";
			next;
		}
		if (/^fn=/) {
			$cur = $fl;
			next;
		}
		if (/^calls=/) {
			$skip = 1; # the next line is the call'\''s inclusive cost
			next;
		}
		if (/^[-+*\d]/) {
			if ($skip) {
				$skip = 0;
				next;
			}
			my (undef, @cost) = split;
			$seen{$cur} = 1 if defined $cur && grep { $_ } @cost;
		}
	}
	close $fh;
	my @f = sort grep { s{^\Q$src\E/}{} && m{^(?:src|include)/} } keys %seen;
	$files{$what} = \@f;
	$count{$what} = @f;
}
my $block = "<!-- crossings -->\n" .
	"Counted from the code (`scripts/check-crossings.sh`, which writes this\n" .
	"block; the `docs` label fails when a count grows past its limit or the\n" .
	"block differs): one `ps_store_set()` on an RCU store (`$variant`) runs\n" .
	"code of $count{set} files, one `ps_store_lookup()` of $count{lookup}.\n\n" .
	"- set: " . join(", ", map { "`$_`" } @{$files{set}}) . "\n" .
	"- lookup: " . join(", ", map { "`$_`" } @{$files{lookup}}) . "\n" .
	"<!-- /crossings -->\n";
print "set: $count{set} files (at most $max_set)\n";
print "\t$_\n" for @{$files{set}};
print "lookup: $count{lookup} files (at most $max_lookup)\n";
print "\t$_\n" for @{$files{lookup}};
my $bad = 0;
if ($count{set} > $max_set || $count{lookup} > $max_lookup) {
	print STDERR "check-crossings: a set or a lookup crosses more files than its limit\n";
	$bad = 1;
}
if ($doc) {
	my $path = "$src/docs/design.md";
	open(my $fh, "<", $path) or die "$path: $!\n";
	my $text = do { local $/; <$fh> };
	close $fh;
	my ($old) = $text =~ m{(<!-- crossings -->\n.*?<!-- /crossings -->\n)}s;
	die "check-crossings: no crossings block in docs/design.md\n" unless defined $old;
	if ($doc eq "write") {
		$text =~ s{\Q$old\E}{$block};
		open($fh, ">", $path) or die "$path: $!\n";
		print $fh $text;
		close $fh;
	} elsif ($old ne $block) {
		print STDERR "check-crossings: docs/design.md does not print what the code crosses;" .
			" run scripts/check-crossings.sh --write-doc\n--- printed\n$old--- computed\n$block";
		$bad = 1;
	}
}
exit $bad;
' "$src" "$build" "$max_set" "$max_lookup" "$doc" "$variant"
