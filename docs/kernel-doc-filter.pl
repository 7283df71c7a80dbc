#!/usr/bin/perl
# SPDX-License-Identifier: LGPL-2.1-or-later
# Doxygen INPUT_FILTER: print a header written with kernel-doc comments in
# Doxygen's dialect, line for line (Doxygen's warnings point at real lines).
#
# Inside /** ... */ blocks:
#   "name() - summary", "struct|union|enum|typedef name - summary" -> \brief
#   "@arg: text"   -> \param arg text (functions, typedefs)
#   "Return: text" -> \return text;  "Context: text" -> \pscontext text (an
#                  alias in Doxyfile.in: a paragraph of its own, also right
#                  after an @arg line)
#   "@name" elsewhere -> \p name
# Struct and union blocks: each "@member: text" line and its continuation
# lines document that member; other @names on that line ("@b, @c likewise")
# share the text.  Those lines are blanked in the block and the text goes in
# front of each member in the body, "T a, b;" becoming "T a; T b;" on the
# same line, so that every member carries its own comment.
# The header's own top comment becomes its \file description (Doxygen
# documents a file's functions only when the file itself is documented),
# its first paragraph the \brief (the file's summary in the reference);
# a header without one gets an empty \file block on its first line.
# A plain comment directly above a run of #defines documents them all: it
# becomes a doc comment and the run a member group (DISTRIBUTE_GROUP_DOC).
use strict;
use warnings;

my ($in_doc, $first, $kind, $pending, $in_body) = (0, 0, '', '', 0);
my (%mdoc, $cur, @alias, $text);

sub at2p { my $s = shift; $s =~ s/@([A-Za-z_]\w*)/\\p $1/g; return $s; }

sub flush_member {
	return unless defined $cur;
	$mdoc{$cur} = $text;
	for my $a (@alias) { $mdoc{$a} = $text unless exists $mdoc{$a}; }
	undef $cur;
	@alias = ();
}

sub doc_for { my $n = shift; return exists $mdoc{$n} ? "/** $mdoc{$n} */ " : ''; }

sub member_line {
	my $line = shift;
	# A function pointer member: one name.
	return "$1" . doc_for($3) . $2
		if $line =~ /^(\s*)(.*\(\s*\*\s*([A-Za-z_]\w*)\s*\).*)$/;
	return $line unless $line =~ /^(\s*)([^;]*);(.*)$/;
	my ($lead, $body, $trail) = ($1, $2, $3);
	my @parts = split /,/, $body;
	return $line unless $parts[0] =~ /^(.*?)(\**\s*[A-Za-z_]\w*\s*(?:\[[^\]]*\]\s*)*)$/;
	my ($type, @decls) = ($1, $2, @parts[1 .. $#parts]);
	$type =~ s/\s+$//;
	my @out;
	for my $d (@decls) {
		$d =~ s/^\s+|\s+$//g;
		(my $name = $d) =~ s/[\s*]|\[[^\]]*\]//g;
		push @out, doc_for($name) . "$type $d;";
	}
	return $lead . join(' ', @out) . $trail;
}

my ($file_done, $file_block, $file_brief) = (0, 0, 0);
my (@pushback, $in_defines, $prev);
sub next_line {
	return shift @pushback if @pushback;
	my $l = <>;
	return undef unless defined $l;
	chomp $l;
	return $l;
}
while (defined(my $line = next_line())) {
	if ($in_defines) {
		# A line of the run: a #define, or the continuation of one.
		if ($line !~ /^\s*#\s*define\s/ && $prev !~ /\\$/) {
			$line = "/** \@} */ $line";
			$in_defines = 0;
		}
		$prev = $line;
		print "$line\n";
		next;
	}
	if ($file_done && !$in_doc && !$in_body && $line =~ /^\s*\/\*(?!\*)/) {
		my @buf = ($line);
		while ($buf[-1] !~ /\*\//) {
			my $l = next_line();
			last unless defined $l;
			push @buf, $l;
		}
		my $after = next_line();
		if (defined $after && $after =~ /^\s*#\s*define\s/) {
			$buf[0] =~ s/^(\s*)\/\*/$1\/** \@{ *\/ \/**/;
			print at2p($_), "\n" for @buf;
			print "$after\n";
			($in_defines, $prev) = (1, $after);
			next;
		}
		print "$_\n" for @buf;
		push @pushback, $after if defined $after;
		next;
	}
	if (!$file_done) {
		if ($line =~ /SPDX-License-Identifier/) {
			print "$line\n";
			next;
		}
		$file_done = 1;
		if ($line =~ s/^\/\*(?!\*)/\/**/) {
			$file_block = 1; # handled as a doc block, "\file" added at its end
			$file_brief = 1; # its first text line starts the \brief
		} else {
			print "/** \\file */ ";
		}
	}
	if ($in_body) {
		if ($line =~ /^\s*}/) {
			$in_body = 0;
			%mdoc = ();
		} else {
			$line = member_line($line);
		}
		print "$line\n";
		next;
	}
	if ($pending && !$in_doc) {
		if ($line =~ /^\s*(?:struct|union)\s+[A-Za-z_]\w*\s*\{/) {
			$in_body = 1;
			$pending = '';
			print "$line\n";
			next;
		}
		$pending = '' if $line =~ /\S/;
	}
	if (!$in_doc && $line =~ /^\s*\/\*\*/) {
		($in_doc, $first, $kind) = (1, !$file_block, '');
	}
	if (!$in_doc) {
		print "$line\n";
		next;
	}
	if ($file_brief && $line =~ /^(\s*\*|\s*\/\*\*)\s+(\S.*)$/) {
		$line = "$1 \\brief $2";
		$file_brief = 0;
	}
	my $closes = $line =~ /\*\//;
	if ($first && $line =~ /^(\s*\/\*\*|\s*\*)\s+(struct|union|enum|typedef)\s+[A-Za-z_]\w*\s+-\s+(.*)$/) {
		$kind = $2;
		my ($open, $sum) = ($1, $3);
		$line = "$open \\brief " . at2p($sum);
		$first = 0;
	} elsif ($first && $line =~ /^(\s*\/\*\*|\s*\*)\s+[A-Za-z_]\w*\(\)\s+-\s+(.*)$/) {
		$kind = 'function';
		my ($open, $sum) = ($1, $2);
		$line = "$open \\brief " . at2p($sum);
		$first = 0;
	} elsif ($line =~ /^(\s*\*)\s+@([A-Za-z_]\w*):\s*(.*)$/) {
		my ($star, $name, $rest) = ($1, $2, $3);
		$first = 0;
		if ($kind eq 'struct' || $kind eq 'union') {
			flush_member();
			($cur, $text) = ($name, at2p($rest));
			@alias = ($rest =~ /@([A-Za-z_]\w*)/g);
			$line = $star;
		} else {
			$line = "$star \\param $name " . at2p($rest);
		}
	} elsif (defined $cur && !$closes && $line =~ /^(\s*\*)\s{2,}(\S.*)$/) {
		my ($star, $more) = ($1, $2);
		$text .= ' ' . at2p($more); # continuation of a member's text
		$line = $star;
	} else {
		$first = 0 unless $line =~ /^\s*(?:\/\*\*|\*)\s*$/;
		flush_member();
		if ($line =~ /^(\s*\*)\s+Return:\s*(.*)$/) {
			my ($star, $rest) = ($1, $2);
			$line = "$star \\return " . at2p($rest);
		} elsif ($line =~ /^(\s*\*)\s+Context:\s*(.*)$/) {
			my ($star, $rest) = ($1, $2);
			$line = "$star \\pscontext " . at2p($rest);
		} else {
			$line = at2p($line);
		}
	}
	if ($closes) {
		flush_member();
		$in_doc = 0;
		if ($file_block) {
			$line =~ s/\*\/\s*$/\\file *\//;
			($file_block, $first, $kind) = (0, 0, '');
		}
		$pending = $kind if $kind eq 'struct' || $kind eq 'union';
	}
	print "$line\n";
}
