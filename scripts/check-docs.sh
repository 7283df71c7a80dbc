#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Check that every exported function (a PS_API declaration) in the public
# headers carries a kernel-doc comment directly above it (CONTRIBUTING.md,
# "Code and documentation"):
#   /**
#    * name() - one-line summary        (the declared name)
#    * @arg: ...                        (every named parameter)
#    * ...
#    * Context: ...
#    * Return: ...                      (unless the function returns void)
#    */
# Prints one line per problem and exits 1 when there is any.
#
# Usage: scripts/check-docs.sh [<include/polstore dir>]
set -eu
dir=${1:-$(dirname "$0")/../include/polstore}
exec perl -e '
use strict;
use warnings;
my ($bad, $checked) = (0, 0);
sub complain { my ($f, $n, $msg) = @_; print STDERR "$f:$n: $msg\n"; $bad++; }
for my $file (sort glob("$ARGV[0]/*.h"), sort glob("$ARGV[0]/*.h.in")) {
	open(my $fh, "<", $file) or die "$file: $!\n";
	my @lines = <$fh>;
	close $fh;
	my $src = join("", @lines);
	# Every PS_API declaration: from PS_API to the first ";" or "{".
	while ($src =~ /^[ \t]*PS_API\b([^;{]*)/mg) {
		my $decl = $1;
		my $pos = $-[0];
		my $line = 1 + (() = substr($src, 0, $pos) =~ /\n/g);
		$decl =~ s/\s+/ /g;
		next if $decl =~ /^\s*extern\b/ && $decl !~ /\(/; # an exported variable
		unless ($decl =~ /([A-Za-z_]\w*)\s*\((.*)\)\s*$/) {
			complain($file, $line, "cannot parse PS_API declaration:$decl");
			next;
		}
		my ($name, $args) = ($1, $2);
		$checked++;
		my $before = substr($src, 0, $pos);
		unless ($before =~ /(\/\*\*(?:(?!\*\/).)*?\*\/)\s*\z/s) {
			complain($file, $line, "$name(): no kernel-doc comment directly above");
			next;
		}
		my $doc = $1;
		unless ($doc =~ /^\/\*\*\s*\n\s*\*\s+\Q$name\E\(\)\s+-\s+\S/) {
			complain($file, $line, "$name(): comment must start with \"$name() - summary\"");
		}
		my @params;
		if ($args !~ /^\s*void\s*$/ && $args =~ /\S/) {
			# Split on commas outside parentheses (function-pointer parameters).
			my ($depth, $cur) = (0, "");
			for my $c (split //, $args) {
				$depth++ if $c eq "(";
				$depth-- if $c eq ")";
				if ($c eq "," && !$depth) { push @params, $cur; $cur = ""; } else { $cur .= $c; }
			}
			push @params, $cur;
		}
		for my $p (@params) {
			next if $p =~ /^\s*\.\.\.\s*$/;
			my $pn;
			if ($p =~ /\(\s*\*\s*([A-Za-z_]\w*)\s*\)/) { $pn = $1; }
			elsif ($p =~ /([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$/) { $pn = $1; }
			next unless defined $pn;
			complain($file, $line, "$name(): parameter \@$pn is not documented")
				unless $doc =~ /^\s*\*\s+\@\Q$pn\E:/m;
		}
		complain($file, $line, "$name(): no Context: section")
			unless $doc =~ /^\s*\*\s+Context:/m;
		my $ret = $decl;
		$ret =~ s/\b\Q$name\E\s*\(.*//;
		if ($ret !~ /^\s*void\s*$/) {
			complain($file, $line, "$name(): returns a value but has no Return: section")
				unless $doc =~ /^\s*\*\s+Return:/m;
		}
	}
}
die "check-docs: no PS_API declaration found under $ARGV[0]\n" unless $checked;
print "check-docs: $checked public functions, ", ($bad ? "$bad problem(s)" : "all documented"), "\n";
exit($bad ? 1 : 0);
' "$dir"
