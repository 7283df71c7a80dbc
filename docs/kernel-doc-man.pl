#!/usr/bin/perl
# SPDX-License-Identifier: LGPL-2.1-or-later
# The manual pages of polstore's API, from the kernel-doc comments of the
# public headers:
#   man3/<function>.3polstore  one page per documented function or
#                              function-like macro (NAME, LIBRARY, SYNOPSIS,
#                              ARGUMENTS, DESCRIPTION, CONTEXT, RETURN VALUE,
#                              ERRORS from the errno names of "Return:",
#                              SEE ALSO);
#   man3/polstore-<h>.3polstore one page per header <polstore/<h>.h>: its
#                              file comment, types, constants and functions;
#   man7/polstore.7            the overview, from the template given with
#                              --template: a line ".\" @FUNCTIONS@" there
#                              becomes the list of headers and functions.
# The LIBRARY section of a page names the library that defines the
# header's functions: libpolstore (pkg-config module polstore) unless a
# --library option names another for the header, as the build installs it
# (HEADER=LIB:MODULE:TITLE, e.g. uffd.h=polstore_uffd:polstore-uffd:polstore's
# fault plane; scripts/check-man.sh checks the pages against nm -D).
# Section 3polstore keeps the pages beside the system's without a clash of
# names (man ps_store_set, man 3 ps_store_set).
# --docdir DIR: where the documentation is installed, laid out as in the
# sources (/usr/share/doc/libpolstore-dev by default); a comment's
# docs/NAME.md reads DIR/docs/NAME.md in the pages, and polstore.7.in's
# @DOCDIR@ becomes DIR.
#
# Usage: kernel-doc-man.pl --out DIR --version V --date YYYY-MM-DD
#                          [--template polstore.7.in] [--docdir DIR]
#                          [--library HEADER=LIB:MODULE:TITLE]... header.h...
use strict;
use warnings;
use Errno ();
use File::Basename qw(basename);
use File::Path qw(make_path);
use Getopt::Long;

my ($out, $version, $date, $template, $docdir, @library) =
	('', '', '', '', '/usr/share/doc/libpolstore-dev');
GetOptions('out=s' => \$out, 'version=s' => \$version, 'date=s' => \$date,
	'template=s' => \$template, 'docdir=s' => \$docdir, 'library=s' => \@library)
	or die "kernel-doc-man: bad arguments\n";
die "usage: kernel-doc-man.pl --out DIR --version V --date D [--template T] " .
	"[--docdir DIR] [--library HEADER=LIB:MODULE:TITLE]... header...\n"
	unless $out && $version && $date && @ARGV;

# The library of each header: { lib => "polstore_uffd", module => "polstore-uffd",
# title => "polstore's fault plane" } by header file name.
my $CORE_LIB = { lib => 'polstore', module => 'polstore', title => 'polstore' };
my %lib_of;
for my $l (@library) {
	$l =~ /^([\w.-]+\.h)=(\w+):([\w.+-]+):(.+)$/
		or die "kernel-doc-man: --library $l: not HEADER=LIB:MODULE:TITLE\n";
	$lib_of{$1} = { lib => $2, module => $3, title => $4 };
}

my $SECT = '3polstore';
my @headers;  # { name, page, include, comment, funcs, types, consts, lib }
my %page_of;  # function name -> 1 (has its own page)
my $problems = 0;

sub problem { print STDERR "kernel-doc-man: $_[0]\n"; $problems++; }

# ---- parsing -----------------------------------------------------------

# The text lines of a comment: "/**", " * text", " */" -> "text" (leading
# "* " removed, deeper indentation kept).
sub comment_lines {
	my @raw = @_;
	my @l;
	for my $r (@raw) {
		my $s = $r;
		$s =~ s/^\s*\/\*\*?//;
		$s =~ s/\s*\*\/\s*$//;
		$s =~ s/^\s*\*(?!\/)//;
		$s =~ s/^ //;
		$s =~ s/\s+$//;
		push @l, $s;
	}
	shift @l while @l && $l[0] eq '';
	pop @l while @l && $l[-1] eq '';
	return @l;
}

# The C text from line $i on, up to the end of a declaration ("; " or "{"
# at depth 0 for functions; the closing "};" for a struct/enum body; a
# #define with its continuation lines).
sub declaration {
	my ($lines, $i, $kind) = @_;
	my @d;
	if ($lines->[$i] =~ /^\s*#\s*define\b/) {
		while ($i < @$lines) {
			push @d, $lines->[$i];
			last unless $lines->[$i] =~ /\\\s*$/;
			$i++;
		}
		return (\@d, $i);
	}
	my $depth = 0;
	while ($i < @$lines) {
		my $l = $lines->[$i];
		push @d, $l;
		my $code = $l;
		$code =~ s/\/\*.*?\*\///g;
		$depth += () = $code =~ /\{/g;
		$depth -= () = $code =~ /\}/g;
		if ($kind eq 'body') {
			last if $depth <= 0 && $code =~ /;/;
		} else {
			last if $depth <= 0 && $code =~ /[;{]/;
		}
		$i++;
	}
	return (\@d, $i);
}

sub parse_header {
	my ($file) = @_;
	open(my $fh, '<', $file) or die "$file: $!\n";
	my @lines = map { chomp; $_ } <$fh>;
	close $fh;
	(my $base = basename($file)) =~ s/\.h(\.in)?$//;
	my $h = { name => $base, include => "polstore/$base.h", page => "polstore-$base",
		comment => [], funcs => [], types => [], consts => [],
		lib => $lib_of{"$base.h"} || $CORE_LIB };
	my $i = 0;
	$i++ while $i < @lines && ($lines[$i] =~ /SPDX-License-Identifier/ || $lines[$i] =~ /^\s*$/);
	if ($i < @lines && $lines[$i] =~ /^\/\*(?!\*)/) {
		my @c;
		while ($i < @lines) {
			push @c, $lines[$i];
			last if $lines[$i++] =~ /\*\//;
		}
		$h->{comment} = [comment_lines(@c)];
	}
	my $inline_block = 0;
	for (; $i < @lines; $i++) {
		my $l = $lines[$i];
		# The POLSTORE_INLINE name map at the end of store.h is no API.
		$inline_block = 1 if $l =~ /^#if\s+defined\(POLSTORE_INLINE\)/;
		$inline_block = 0 if $inline_block && $l =~ /^#endif/;
		next if $inline_block;
		next unless $l =~ /^\s*\/\*/;
		my $doc = $l =~ /^\s*\/\*\*/;
		my @c;
		while ($i < @lines) {
			push @c, $lines[$i];
			last if $lines[$i] =~ /\*\//;
			$i++;
		}
		my @text = comment_lines(@c);
		my $j = $i + 1;
		next if $j >= @lines;
		my $next = $lines[$j];
		if ($doc && @text && $text[0] =~ /^([A-Za-z_]\w*)\(\)\s+-\s+(.*)$/) {
			my ($d, $end) = declaration(\@lines, $j, 'decl');
			push @{$h->{funcs}}, parse_function(\@text, $d, $file);
			$i = $end;
		} elsif ($doc && @text && $text[0] =~ /^(struct|union|enum|typedef)\s+(\w+)\s+-\s+(.*)$/) {
			my $kind = $1;
			my ($d, $end) = declaration(\@lines, $j, $kind eq 'typedef' ? 'decl' : 'body');
			push @{$h->{types}}, parse_type(\@text, $d);
			$i = $end;
		} elsif ($next =~ /^\s*#\s*define\s+(PS_\w+)/ && $1 ne 'PS_API') {
			# A comment above a run of #defines documents them all.
			my @names;
			while ($j < @lines && $lines[$j] =~ /^\s*#\s*define\s+(PS_\w+(?:\([^)]*\))?)/) {
				push @names, $1;
				$j++ while $lines[$j] =~ /\\\s*$/;
				$j++;
			}
			my @t = @text;
			$t[0] =~ s/^\Q$names[0]\E\s+-\s+// if @t && @names == 1;
			$t[0] = ucfirst_phrase($t[0]) if @t;
			push @{$h->{consts}}, { names => \@names, text => \@t };
			$i = $j - 1;
		} elsif ($doc && $next =~ /^\s*enum\s*\{(.*)\}\s*;/) {
			my @names = map { /^\s*(\w+)/ ? $1 : () } split /,/, $1;
			push @{$h->{consts}}, { names => \@names, text => \@text };
			$i = $j;
		}
	}
	return $h;
}

# Splits the lines of a function comment into summary, @args, body,
# Context: and Return:.
sub split_sections {
	my ($text) = @_;
	my @t = @$text;
	my $first = shift @t;
	$first =~ s/^(?:(?:struct|union|enum|typedef)\s+)?\S+\s+-\s+//;
	my @summary = ($first);
	while (@t && $t[0] ne '' && $t[0] !~ /^@[\w.]+:/ && $t[0] !~ /^(Context|Return):/) {
		push @summary, shift @t;
	}
	my (@args, @body, %tag);
	my $where = 'body';
	for my $l (@t) {
		if ($l =~ /^@([\w.]+):\s*(.*)$/ && $where ne 'tag') {
			push @args, [$1, $2];
			$where = 'arg';
		} elsif ($where eq 'arg' && $l =~ /^\s+\S/) {
			(my $m = $l) =~ s/^\s+//;
			$args[-1][1] .= " $m";
		} elsif ($l =~ /^(Context|Return):\s*(.*)$/) {
			$where = 'tag';
			$tag{cur} = $1;
			push @{$tag{$1}}, $2;
		} elsif ($where eq 'tag') {
			push @{$tag{$tag{cur}}}, $l;
		} else {
			$where = 'body' if $where eq 'arg' && $l eq '';
			push @body, $l;
		}
	}
	shift @body while @body && $body[0] eq '';
	pop @body while @body && $body[-1] eq '';
	for my $k ('Context', 'Return') {
		next unless $tag{$k};
		pop @{$tag{$k}} while @{$tag{$k}} && $tag{$k}[-1] eq '';
	}
	my $summary = join(' ', @summary);
	$summary =~ s/\.$//;
	return ($summary, \@args, \@body, $tag{Context} || [], $tag{Return} || []);
}

sub parse_function {
	my ($text, $decl, $file) = @_;
	$text->[0] =~ /^(\w+)\(\)/;
	my $name = $1;
	my ($summary, $args, $body, $ctx, $ret) = split_sections($text);
	my $d = join(' ', map { my $s = $_; $s =~ s/\\\s*$//; $s } @$decl);
	$d =~ s/\/\*.*?\*\///g;
	$d =~ s/\s+/ /g;
	$d =~ s/^\s+|\s+$//g;
	my $f = { name => $name, summary => $summary, args => $args, body => $body,
		context => $ctx, return => $ret, text => $text };
	if ($d =~ /^#\s*define\s+\Q$name\E\s*\(([^)]*)\)/) {
		$f->{macro} = 1;
		$f->{params} = [map { s/^\s+|\s+$//gr } split /,/, $1];
	} elsif ($d =~ /^(?:PS_API\s+)?(.*?)\b\Q$name\E\s*\((.*)\)\s*[;{]/) {
		my ($ret, $params) = ($1, $2);
		$ret =~ s/\s+$//;
		$f->{ret} = $ret;
		$f->{params} = split_params($params);
	} else {
		problem("$file: $name(): no declaration after its comment");
		$f->{params} = [];
		$f->{ret} = '';
	}
	return $f;
}

sub split_params {
	my ($s) = @_;
	return [] if $s =~ /^\s*(void)?\s*$/;
	my ($depth, $cur, @p) = (0, '');
	for my $c (split //, $s) {
		$depth++ if $c eq '(';
		$depth-- if $c eq ')';
		if ($c eq ',' && !$depth) { push @p, $cur; $cur = ''; } else { $cur .= $c; }
	}
	push @p, $cur;
	return [map { s/^\s+|\s+$//gr } @p];
}

sub param_name {
	my ($p) = @_;
	return $1 if $p =~ /\(\s*\*\s*(\w+)\s*\)/;
	return $1 if $p =~ /(\w+)\s*(?:\[[^\]]*\]\s*)*$/;
	return undef;
}

sub parse_type {
	my ($text, $decl) = @_;
	$text->[0] =~ /^(struct|union|enum|typedef)\s+(\w+)\s+-\s+(.*)$/;
	my ($kind, $name) = ($1, $2);
	my ($summary, $args, $body) = split_sections($text);
	return { kind => $kind, name => $name, summary => $summary, members => $args,
		body => $body, decl => $decl };
}

# ---- roff ---------------------------------------------------------------

# One line of comment text as roff: @name italic, name() and page(N) bold,
# `code` bold, minus signs and backslashes escaped.
sub roff {
	my ($s) = @_;
	$s =~ s/\\/\\e/g;
	$s =~ s/`([^`]+)`/\\fB$1\\fP/g;
	$s =~ s/(?<![\w\\])-(?=[A-Z0-9(])/\\-/g;
	$s =~ s/@([A-Za-z_]\w*)/\\fI$1\\fP/g;
	$s =~ s/\b([A-Za-z_][\w.-]*)\((\d[a-z]*)\)/\\fB$1\\fP($2)/g;
	$s =~ s/(?<![\\\w])([A-Za-z_]\w*)\(\)/\\fB$1\\fP()/g;
	$s =~ s/^([.'])/\\&$1/;
	return installed_docs($s);
}

# A guide the comments cite as docs/NAME.md, named where the packages
# install it (--docdir) so that a reader of the page can open it.
my $docdir_roff = $docdir =~ s/-/\\-/gr;
sub installed_docs {
	my ($s) = @_;
	$s =~ s{(^|[^\w/.]|\\fB)docs/([\w-]+\.md)}{$1$docdir_roff/docs/$2}g;
	return $s;
}

# Plain text for NAME lines and .SS titles: no markup at all.
sub plain {
	my ($s) = @_;
	$s =~ s/@([A-Za-z_]\w*)/$1/g;
	$s =~ s/`//g;
	$s =~ s/\\/\\e/g;
	$s =~ s/(?<![\w\\])-(?=[A-Z0-9(])/\\-/g;
	$s =~ s/"/\\(dq/g;
	return $s;
}

# Paragraphs of comment text: prose is filled, "- " items become a bullet
# list, other indented lines (code, aligned lists) and table rows ("| a |
# b |") stay as they are.
sub paragraphs {
	my @l = @_;
	my ($o, $mode, $item_indent, @pre) = ('', '', 0);
	# A preformatted block keeps its layout, less the indentation all its
	# lines share (a tab counts 4 columns: code in the comments is
	# indented with tabs, tables with spaces).
	my $close = sub {
		if ($mode eq 'pre') {
			my @x = map { my $l = $_; 1 while $l =~ s/^([^\t]*)\t/$1 . ' ' x (4 - length($1) % 4)/e; $l } @pre;
			my $min = 1000;
			for (@x) { /^( *)/; $min = length($1) if length($1) < $min; }
			$o .= ".in +4n\n.EX\n";
			for my $p (@x) {
				$p = substr($p, $min);
				$p =~ s/\\/\\e/g;
				$p =~ s/-/\\-/g;
				$p =~ s/^([.'])/\\&$1/;
				$o .= "$p\n";
			}
			$o .= ".EE\n.in\n";
			@pre = ();
		}
		$o .= ".RE\n" if $mode eq 'list';
		$mode = '';
	};
	my $para = 1;
	for my $l (@l) {
		if ($l eq '') {
			$close->() if $mode eq 'pre';
			$para = 1;
			next;
		}
		(my $lead = $l) =~ s/\S.*//;
		my $ind = length($lead =~ s/\t/        /gr);
		(my $t = $l) =~ s/^\s+//;
		if ($t =~ /^- (.*)$/ && ($ind <= 4)) {
			$close->() if $mode eq 'pre';
			if ($mode ne 'list') {
				$o .= ".RS 2\n";
				$mode = 'list';
			}
			$o .= ".IP \\(bu 2\n" . roff($1) . "\n";
			$item_indent = $ind;
			$para = 0;
		} elsif ($mode eq 'list' && $ind > $item_indent && !$para) {
			$o .= roff($t) . "\n";
		} elsif ($ind > 0 || $t =~ /^\|/ || $t =~ /^[-+=|: ]{3,}$/) {
			# Indented lines (code, aligned lists) and table rows.
			if ($mode ne 'pre') {
				$close->();
				$o .= ".PP\n" if $para && $o ne '';
				$mode = 'pre';
			}
			push @pre, $l;
			$para = 0;
		} else {
			$para = 1 if $mode;
			$close->() if $mode;
			$o .= ".PP\n" if $para && $o ne '';
			$o .= roff($t) . "\n";
			$para = 0;
		}
	}
	$close->();
	return $o;
}

# The sentence-initial capital of a phrase from a Return: line.
sub ucfirst_phrase {
	my ($s) = @_;
	return $s if $s =~ /^[a-z]\w*(?:_|\(\))/ || $s =~ /^polstore\b/;
	return ucfirst($s);
}

# The clauses of a Return: text: split at "; " and at sentence ends, never
# inside parentheses nor after "e.g." or "i.e.".
sub clauses {
	my ($t) = @_;
	my ($depth, $cur, @c) = (0, '');
	my @ch = split //, $t;
	for my $k (0 .. $#ch) {
		my $c = $ch[$k];
		$depth++ if $c eq '(';
		$depth-- if $c eq ')' && $depth;
		if (!$depth && $c eq ';') {
			push @c, $cur;
			$cur = '';
			next;
		}
		$cur .= $c;
		if (!$depth && $c eq '.' && $k + 2 <= $#ch && $ch[$k + 1] eq ' '
				&& substr($t, $k + 1) =~ /^\s+[A-Z]/ && $cur !~ /\b(?:e\.g|i\.e)\.$/) {
			push @c, $cur;
			$cur = '';
		}
	}
	push @c, $cur;
	return grep { /\S/ } map { s/^\s+|\s+$//gr } @c;
}

sub errno_text {
	my ($name) = @_;
	my $n = eval "Errno::$name()";
	return undef unless defined $n;
	local $! = $n;
	return "$!";
}

# ERRORS from the text of "Return:": each errno name (EINVAL, -EINVAL, the
# errno of a constructor) with what follows it up to the next errno name,
# a ";" or the end of the sentence; names joined by "or" or "/" share it.
# A phrase that refers to another call's errors ("as ps_policy_create()
# sets it", "the first ps_policy_apply() error") is kept as it is.
sub errors_of {
	my ($ret) = @_;
	my $t = join(' ', @$ret);
	$t =~ s/\s+/ /g;
	my @out;
	for my $c (clauses($t)) {
		$c =~ s/\.\s*$//;
		my @tok;
		while ($c =~ /(?<![\w-])-?(E[A-Z0-9]{2,})\b/g) {
			next unless defined errno_text($1);
			push @tok, [$1, $-[0], $+[0]];
		}
		if (!@tok) {
			if ($c =~ /\berrno\b|\berror\b/ && $c =~ /\w\(\)/) {
				push @out, [[], ucfirst_phrase($c =~ s/^\s*(?:or|otherwise,?)\s+//r)];
			}
			next;
		}
		my @groups;
		for my $k (0 .. $#tok) {
			my $between = $k ? substr($c, $tok[$k - 1][2], $tok[$k][1] - $tok[$k - 1][2]) : undef;
			if (defined $between && $between =~ /^\s*(?:or|\/)\s*$/) {
				push @{$groups[-1]{names}}, $tok[$k][0];
				$groups[-1]{end} = $tok[$k][2];
			} else {
				push @groups, { names => [$tok[$k][0]], start => $tok[$k][1], end => $tok[$k][2] };
			}
		}
		for my $g (0 .. $#groups) {
			my $stop = $g < $#groups ? $groups[$g + 1]{start} : length($c);
			my $d = substr($c, $groups[$g]{end}, $stop - $groups[$g]{end});
			if ($d =~ /^\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)/) {
				$d = $1;
			} else {
				$d =~ s/^\s*\)//;
				$d =~ s/[\s,]*(?:,|\bor|\band)?\s*$//;
				$d =~ s/^\s*,?\s*//;
				$d =~ s/\s*\(.*$// if $d =~ /^\(/;
			}
			if ($d eq '' && substr($c, 0, $groups[$g]{start}) =~ /(?:^|when |\bor |, )([^(),]*?)\s*\(errno\s*$/) {
				$d = $1;
			}
			$d =~ s/^(?:when|if)\s+//;
			$d =~ s/\s+$//;
			$d = ucfirst_phrase($d) if $d ne '';
			push @out, [$groups[$g]{names}, $d];
		}
	}
	return @out;
}

sub th {
	my ($title, $sect) = @_;
	return ".\\\" Generated by docs/kernel-doc-man.pl from the kernel-doc comments of\n" .
		".\\\" the polstore headers: edit those, not this page.\n" .
		".TH $title $sect $date \"polstore $version\" \"polstore Manual\"\n";
}

# "polstore's fault plane (libpolstore_uffd, -lpolstore_uffd;
# pkg-config --cflags --libs polstore-uffd)", as man-pages(7) has it.
sub library {
	my ($h) = @_;
	my $l = $h->{lib};
	(my $module = $l->{module}) =~ s/-/\\-/g;
	return ".SH LIBRARY\n" . plain($l->{title}) . "\n.RI ( lib$l->{lib} ,\n" .
		".BR \\-l$l->{lib} ;\n" .
		".BR \"pkg\\-config \\-\\-cflags \\-\\-libs $module\" )\n";
}

# A prototype in the SYNOPSIS: the name bold, the parameter names italic,
# wrapped under the opening parenthesis.
sub prototype_roff {
	my ($f) = @_;
	my $esc = sub { my $s = shift; $s =~ s/\\/\\e/g; $s =~ s/-/\\-/g; return $s };
	my (@parts, $head, $plain_head);
	if ($f->{macro}) {
		$plain_head = "#define $f->{name}(";
		$head = "#define \\fB$f->{name}\\fP(";
		@parts = map { ["\\fI" . $esc->($_) . "\\fP", $_] } @{$f->{params}};
	} else {
		my $ret = $f->{ret};
		my $sep = $ret =~ /\*$/ ? '' : ' ';
		$plain_head = "$ret$sep$f->{name}(";
		$head = $esc->($ret) . "$sep\\fB$f->{name}\\fP(";
		for my $p (@{$f->{params}}) {
			my $n = param_name($p);
			my $r = $esc->($p);
			$r =~ s/\b\Q$n\E\b(?!.*\b\Q$n\E\b)/\\fI$n\\fP/ if defined $n && $p ne '...';
			push @parts, [$r, $p];
		}
		@parts = (['void', 'void']) unless @parts;
	}
	my $o = $head;
	my $col = length($plain_head);
	my $indent = ' ' x $col;
	for my $k (0 .. $#parts) {
		my ($r, $p) = @{$parts[$k]};
		my $tail = $k < $#parts ? ',' : ($f->{macro} ? ')' : ');');
		if ($k && $col + 1 + length($p) + length($tail) > 72) {
			$o .= "\n$indent";
			$col = length($indent);
		} elsif ($k) {
			$o .= ' ';
			$col++;
		}
		$o .= $r . $tail;
		$col += length($p) + length($tail);
	}
	$o .= $f->{macro} ? ')' : ');' unless @parts;
	return $o;
}

sub see_also {
	my ($self, $h, @text) = @_;
	my (%seen, @refs);
	$seen{$self} = 1;
	push @refs, ['polstore', '7'];
	push @refs, [$h->{page}, $SECT];
	$seen{$h->{page}} = 1;
	my $t = join(' ', @text);
	while ($t =~ /\b([A-Za-z_][\w.-]*)\((\d[a-z]*)?\)/g) {
		my ($n, $s) = ($1, $2);
		next if $seen{$n}++;
		if (defined $s) {
			push @refs, [$n, $s];
		} elsif ($page_of{$n}) {
			push @refs, [$n, $SECT];
		}
	}
	my $o = ".SH SEE ALSO\n";
	for my $k (0 .. $#refs) {
		$o .= ".BR $refs[$k][0] ($refs[$k][1])" . ($k < $#refs ? ",\n" : "\n");
	}
	$o =~ s/(\.BR \S+)-/$1\\-/g;
	return $o;
}

sub function_page {
	my ($h, $f) = @_;
	my $o = th($f->{name}, $SECT);
	$o .= ".SH NAME\n$f->{name} \\- " . plain($f->{summary}) . "\n";
	$o .= library($h);
	$o .= ".SH SYNOPSIS\n.nf\n.B #include <$h->{include}>\n.PP\n" . prototype_roff($f) . "\n.fi\n";
	if (@{$f->{args}}) {
		$o .= ".SH ARGUMENTS\n";
		for my $a (@{$f->{args}}) {
			$o .= ".TP\n.I " . ($a->[0] eq '...' ? '\\&...' : $a->[0]) . "\n" . roff($a->[1]) . "\n";
		}
	}
	$o .= ".SH DESCRIPTION\n";
	if (@{$f->{body}}) {
		$o .= paragraphs(@{$f->{body}});
	} else {
		$o .= "\\fB$f->{name}\\fP(): " . roff($f->{summary}) . ".\n";
	}
	if (@{$f->{context}}) {
		$o .= ".SH CONTEXT\n" . paragraphs(@{$f->{context}});
	}
	if (@{$f->{return}}) {
		$o .= ".SH RETURN VALUE\n" . paragraphs(@{$f->{return}});
		my @e = errors_of($f->{return});
		if (@e) {
			$o .= ".SH ERRORS\n";
			for my $e (@e) {
				my ($names, $d) = @$e;
				if (!@$names) {
					$o .= ".PP\n" . roff($d) . ".\n";
					next;
				}
				$d = join(' ', map { errno_text($_) . '.' } @$names) if $d eq '';
				$d .= '.' unless $d =~ /\.$/;
				$o .= ".TP\n.B " . join(', ', @$names) . "\n" . roff($d) . "\n";
			}
		}
	}
	$o .= see_also($f->{name}, $h, @{$f->{text}});
	return $o;
}

sub header_page {
	my ($h) = @_;
	my @c = @{$h->{comment}};
	my $first = '';
	for my $l (@c) {
		last if $l eq '';
		$first .= ($first ? ' ' : '') . $l;
	}
	$first =~ s/\.\s.*$//;
	$first =~ s/\.$//;
	my $o = th($h->{page}, $SECT);
	$o .= ".SH NAME\n$h->{page} \\- " . plain($first) . "\n";
	$o .= library($h);
	$o .= ".SH SYNOPSIS\n.nf\n.B #include <$h->{include}>\n";
	if (@{$h->{funcs}}) {
		$o .= ".PP\n" . join("\n", map { prototype_roff($_) } @{$h->{funcs}}) . "\n";
	}
	$o .= ".fi\n";
	$o .= ".SH DESCRIPTION\n" . paragraphs(@c) if @c;
	if (@{$h->{types}}) {
		$o .= ".SH TYPES\n";
		for my $t (@{$h->{types}}) {
			my $title = $t->{kind} eq 'typedef' ? $t->{name} : "$t->{kind} $t->{name}";
			$o .= ".SS \"" . plain($title) . "\"\n" . roff(ucfirst_phrase($t->{summary})) . ".\n";
			$o .= ".PP\n.in +4n\n.EX\n";
			for my $d (@{$t->{decl}}) {
				(my $s = $d) =~ s/\\/\\e/g;
				$s =~ s/-/\\-/g;
				$s =~ s/^\t/    /;
				$s =~ s/\t/ /g;
				$s =~ s/^([.'])/\\&$1/;
				$o .= "$s\n";
			}
			$o .= ".EE\n.in\n";
			for my $m (@{$t->{members}}) {
				$o .= ".TP\n.I $m->[0]\n" . roff($m->[1]) . "\n";
			}
			$o .= paragraphs(@{$t->{body}}) =~ s/^(?!\.PP)/.PP\n/r if @{$t->{body}};
		}
	}
	if (@{$h->{consts}}) {
		$o .= ".SH CONSTANTS\n";
		for my $c (@{$h->{consts}}) {
			$o .= ".TP\n.B " . join(', ', map { s/-/\\-/gr } @{$c->{names}}) . "\n";
			my $p = paragraphs(@{$c->{text}});
			$p =~ s/^\.PP\n//;
			$o .= $p;
		}
	}
	if (@{$h->{funcs}}) {
		$o .= ".SH FUNCTIONS\n";
		for my $f (@{$h->{funcs}}) {
			$o .= ".TP\n.BR $f->{name} ($SECT)\n" . roff($f->{summary}) . "\n";
		}
	}
	$o .= ".SH SEE ALSO\n.BR polstore (7)\n";
	return $o;
}

# The list polstore(7) shows: every header page and its functions.
sub function_list {
	my $o = '';
	for my $h (@headers) {
		next unless @{$h->{funcs}} || @{$h->{types}} || @{$h->{consts}};
		my $lib = $h->{lib} == $CORE_LIB ? '' : " (lib$h->{lib}{lib})";
		$o .= ".SS \"<$h->{include}>: " . "$h->{page}($SECT)$lib\"\n";
		for my $f (@{$h->{funcs}}) {
			$o .= ".TP\n.BR $f->{name} ($SECT)\n" . roff($f->{summary}) . "\n";
		}
	}
	return $o;
}

sub write_file {
	my ($path, $text) = @_;
	open(my $fh, '>', "$path.tmp") or die "$path.tmp: $!\n";
	print $fh $text;
	close $fh or die "$path.tmp: $!\n";
	rename("$path.tmp", $path) or die "$path: $!\n";
}

# ---- main -----------------------------------------------------------------

push @headers, parse_header($_) for @ARGV;
for my $h (@headers) {
	$page_of{$_->{name}} = 1 for @{$h->{funcs}};
}
make_path("$out/man3", "$out/man7");
# Pages of an earlier run whose function is gone would linger.
unlink glob("$out/man3/*.$SECT");
my $pages = 0;
for my $h (@headers) {
	next unless @{$h->{funcs}} || @{$h->{types}} || @{$h->{consts}};
	write_file("$out/man3/$h->{page}.$SECT", header_page($h));
	$pages++;
	for my $f (@{$h->{funcs}}) {
		write_file("$out/man3/$f->{name}.$SECT", function_page($h, $f));
		$pages++;
	}
}
if ($template) {
	open(my $fh, '<', $template) or die "$template: $!\n";
	my $t = do { local $/; <$fh> };
	close $fh;
	$t =~ s/\@VERSION\@/$version/g;
	$t =~ s/\@DATE\@/$date/g;
	$t =~ s/\@DOCDIR\@/$docdir_roff/g;
	my $list = function_list();
	$t =~ s/^\.\\" \@FUNCTIONS\@\n/$list/m or problem("$template: no line '.\\\" \@FUNCTIONS\@'");
	write_file("$out/man7/polstore.7", $t);
	$pages++;
}
exit 1 if $problems;
print "kernel-doc-man: $pages pages in $out\n";
