#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Check that the public headers stay reference text, not essays: each
# header has at most 3 comment lines per code line, or the limit %limit
# names for it (long explanations belong in docs/, CONTRIBUTING.md "Code
# and documentation").  A kernel-doc of a summary, its @args, one
# Context: and one Return: line is about 2.5 lines per declaration line;
# 3 leaves each call a one- or two-line paragraph.  A code line has code
# outside comments; a comment line has a comment and no code; blank lines
# count for neither.  Prints, per
# public header, its comment and code lines, their ratio, the median length
# in lines of its kernel-doc comments and the mean words per sentence of
# their prose (summary and @arg lines left out); exits 1 when a header is
# over its limit.
#
# Usage: scripts/check-header-density.sh [<include/polstore dir>]
set -eu
dir=${1:-$(dirname "$0")/../include/polstore}
exec perl -e '
use strict;
use warnings;
# Most comment lines per code line: 3, or the limit given for the header.
my $default = 3;
# Headers of many one-declaration-line calls: their summaries, @args,
# Context: and Return: lines alone come to 3.05 (idmap.h) and 3.33
# (pcounter.h) comment lines per code line.
my %limit = ("idmap.h" => 3.7, "pcounter.h" => 4.1);
my $bad = 0;
for my $file (sort glob("$ARGV[0]/*.h")) {
	(my $name = $file) =~ s{.*/}{};
	open(my $fh, "<", $file) or die "$file: $!\n";
	my ($in, $com, $code, @doclen, $doc, $words, $sentences) = (0, 0, 0);
	($words, $sentences) = (0, 0);
	while (my $l = <$fh>) {
		chomp $l;
		my ($has_code, $has_com, $rest) = (0, 0, $l);
		$doc = [] if !$in && $l =~ m{^\s*/\*\*};
		push @$doc, $l if $doc;
		while ($rest ne "") {
			if ($in) {
				$has_com = 1;
				if ($rest =~ s{^.*?\*/}{}) { $in = 0; } else { $rest = ""; }
			} elsif ($rest =~ s{^(.*?)/\*}{}) {
				$has_code = 1 if $1 =~ /\S/;
				$has_com = 1;
				$in = 1;
			} else {
				$has_code = 1 if $rest =~ /\S/;
				$rest = "";
			}
		}
		if ($has_code) { $code++; } elsif ($has_com) { $com++; }
		if ($doc && !$in) {
			if (@$doc > 1) {
				push @doclen, scalar @$doc;
				# The prose: lines after the summary, @arg lines left out.
				my @t = map { s{^\s*/?\*+/?\s?}{}r } @$doc[2 .. $#$doc];
				my $prose = join(" ", grep { !/^\@\w+:/ && !/^\s+\S/ } @t);
				$words += () = $prose =~ /\S+/g;
				$sentences += () = $prose =~ /[.!?](?=\s|$)/g;
			}
			undef $doc;
		}
	}
	close $fh;
	my @s = sort { $a <=> $b } @doclen;
	my $median = !@s ? 0 : @s % 2 ? $s[$#s / 2] : ($s[@s / 2 - 1] + $s[@s / 2]) / 2;
	my $ratio = $code ? $com / $code : 0;
	my $max = exists $limit{$name} ? $limit{$name} : $default;
	my $over = $ratio > $max;
	printf "%-12s %4d comment / %3d code lines = %5.2f%s; kernel-doc median %4.1f lines, %4.1f words a sentence\n",
		$name, $com, $code, $ratio,
		sprintf(" (at most %g%s)", $max, $over ? ": TOO MANY" : ""),
		$median, $sentences ? $words / $sentences : 0;
	$bad++ if $over;
}
print STDERR "check-header-density: $bad header(s) over their limit:" .
	" move explanations to docs/ and point to them\n" if $bad;
exit($bad ? 1 : 0);
' "$dir"
