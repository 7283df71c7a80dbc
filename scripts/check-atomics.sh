#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# One atomics vocabulary: the macros of include/polstore/static/atomic.h
# (_PS_* in the public headers, their PSI_* names from src/util/compiler.h
# in src/, tests/ and stress/).  Check that no other file of src/,
# include/, tests/ or stress/ calls an atomic
# builtin (__atomic_*, __ATOMIC_*, __sync_*), uses C11 <stdatomic.h> or
# _Atomic, or liburcu's atomics and barriers (uatomic_*, CMM_LOAD_SHARED,
# CMM_STORE_SHARED, CMM_ACCESS_ONCE, cmm_smp_*, cmm_barrier,
# rcu_dereference, rcu_assign_pointer, rcu_xchg_pointer,
# rcu_cmpxchg_pointer).  Comments are left out.
# Prints each use as file:line: text and exits 1 when there is any.
#
# Usage: scripts/check-atomics.sh [<source dir>]
set -eu
src=${1:-$(dirname "$0")/..}
cd "$src"
exec perl -e '
use strict;
use warnings;
my $home = "include/polstore/static/atomic.h";
my $word = qr/\b(?:__atomic_\w+|__ATOMIC_\w+|__sync_\w+|_Atomic|uatomic_\w+|CMM_LOAD_SHARED|CMM_STORE_SHARED|CMM_ACCESS_ONCE|cmm_smp_\w+|cmm_barrier|rcu_dereference\w*|rcu_assign_pointer|rcu_xchg_pointer|rcu_cmpxchg_pointer)\b|<stdatomic\.h>/;
my $bad = 0;
my @files = sort grep { $_ ne $home } map { chomp; $_ } `find src include tests stress -name "*.[ch]"`;
for my $file (@files) {
	open(my $fh, "<", $file) or die "$file: $!\n";
	my $text = do { local $/; <$fh> };
	close $fh;
	# Comments become blanks; their newlines stay, so line numbers hold.
	$text =~ s{/\*.*?\*/|//[^\n]*}{ (my $c = $&) =~ s/[^\n]/ /g; $c }gse;
	my @lines = split /\n/, $text;
	for my $i (0 .. $#lines) {
		next unless $lines[$i] =~ $word;
		print "$file:", $i + 1, ": $&\n";
		$bad++;
	}
}
if ($bad) {
	print STDERR "check-atomics: $bad atomic access(es) outside $home: use its macros" .
		" (PSI_* of src/util/compiler.h in src/, tests/ and stress/; CONTRIBUTING.md)\n";
	exit 1;
}
print scalar(@files), " files: every atomic access goes through $home\n";
' 
