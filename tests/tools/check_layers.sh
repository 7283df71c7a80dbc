#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The dependency rule of docs/design.md, checked: among the library's
# object files (who calls or reads whom, from nm of the static archive)
# and among the project's headers and sources (#include "..." and
# <polstore/...>), no circle; and no file uses a layer above its own in
# docs/design.md's layer table.  The public static headers
# (include/polstore/static/) have the layer of the row that names them, so
# a private header that includes one of a higher layer is an edge up; no
# public header includes a private one or names a private symbol (psi_,
# PSI_).  No file calls a function of a layer it may not use through a
# function pointer, but for the callbacks up a layer docs/design.md lists.
# Among the units of stress/ and of tests/common/ (a source and its
# header of the same name), neither the include graph nor the call graph
# (a unit that names a function another unit defines) has a circle.  Above the library, the same for the
# includes of tests/, stress/ and fuzz/ (tests/README.md): tests/common/
# uses only the library; the suites (tests/unit/, tests/properties/),
# stress/ and fuzz/ use tests/common/ and the library, and none uses
# another of them.
# Usage: check_layers.sh <source dir> <libpolstore.a>
set -eu
src=$1
lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The layer table: one line "file layer-index file" per file it names, one
# "dir layer-index folder" per row, and one "allow layer-index layer-index"
# per layer a row may use.
awk '
/^\| layer \|/ { intable = 1; next }
intable && /^\|---/ { next }
intable && !/^\|/ { intable = 0 }
intable {
	split($0, col, "|")
	name = col[2]; gsub(/^ +| +$/, "", name)
	n++; lname[n] = name
	dir = col[3]; gsub(/^ +| +$|`/, "", dir); sub(/\/$/, "", dir)
	print "dir", n, dir
	files = col[4]
	# the public static headers, also where they stand in parentheses
	while (match(files, /`include\/polstore\/static\/[^`]+`/)) {
		print "file", n, substr(files, RSTART + 9, RLENGTH - 10)
		files = substr(files, 1, RSTART - 1) substr(files, RSTART + RLENGTH)
	}
	# the src/ files: drop what stands in parentheses
	gsub(/\([^)]*\)/, "", files)
	while (match(files, /`[^`]+`/)) {
		f = substr(files, RSTART + 1, RLENGTH - 2)
		files = substr(files, RSTART + RLENGTH)
		if (f ~ /\//) {
			continue
		} else if (f ~ /\.\[ch\]$/) {
			sub(/\.\[ch\]$/, "", f)
			print "file", n, f ".c"; print "file", n, f ".h"
		} else {
			print "file", n, f
		}
	}
	use[n] = col[5]
}
END {
	for (i = 1; i <= n; i++) {
		print "allow", i, i
		u = use[i]; sub(/:.*/, "", u)
		if (u ~ /everything below/)
			for (j = 1; j < i; j++) print "allow", i, j
		for (j = 1; j <= n; j++)
			if (j != i && index(u, lname[j])) print "allow", i, j
	}
}' "$src/docs/design.md" > "$tmp/layers"

grep -q '^file' "$tmp/layers" || { echo "no layer table found in docs/design.md"; exit 1; }
status=0
# Every file of src/ is in a row, and in that row's folder.
for f in "$src"/src/*.c "$src"/src/*.h "$src"/src/*/*.c "$src"/src/*/*.h; do
	[ -e "$f" ] || continue
	rel=${f#"$src"/}
	base=$(basename "$f")
	n=$(awk -v f="$base" '$1 == "file" && $3 == f { print $2; exit }' "$tmp/layers")
	if [ -z "$n" ]; then
		echo "$rel is in no row of docs/design.md's layer table"; status=1; continue
	fi
	dir=$(awk -v n="$n" '$1 == "dir" && $2 == n { print $3; exit }' "$tmp/layers")
	[ "$(dirname "$rel")" = "$dir" ] ||
		{ echo "$rel: its row of docs/design.md's layer table puts it in $dir/"; status=1; }
done

# Every public static header is in a row; no public header reaches into src/.
for f in "$src"/include/polstore/static/*.h; do
	rel=${f#"$src"/include/}
	awk -v f="$rel" '$1 == "file" && $3 == f { found = 1 } END { exit !found }' "$tmp/layers" ||
		{ echo "include/$rel is in no row of docs/design.md's layer table"; status=1; }
done
for f in "$src"/include/polstore/*.h "$src"/include/polstore/static/*.h; do
	[ -e "$f" ] || continue
	rel=${f#"$src"/}
	if grep -q '^#[ 	]*include[ 	]*"' "$f"; then
		echo "$rel includes a private header"; status=1
	fi
	# Private names outside comments: a public header that depends on private code.
	perl -0777 -ne 's{/\*.*?\*/|//[^\n]*}{ }gs; print "$1\n" while /\b((?:psi|PSI)_\w*)/g' "$f" |
		sort -u | sed "s|^|$rel names the private |" | grep . && status=1
done

# Object graph: "obj obj symbol" for each use of a symbol another object defines.
nm -A "$lib" 2>/dev/null | awk '
{
	split($1, p, ":"); obj = p[2]; sub(/\.o$/, "", obj)
	if (NF == 3 && $2 ~ /^[TDBRVWCGS]$/) def[$3] = obj
	else if (NF == 2 && $1 ~ /:$/ || $2 == "U") { if ($NF != "U") use[obj, $NF] = 1 }
}
END { for (k in use) { split(k, q, SUBSEP); if ((q[2] in def) && def[q[2]] != q[1]) print q[1], def[q[2]], q[2] } }
' > "$tmp/objedges"

# Include graph: "file file" for each project header a source or header includes.
for f in "$src"/src/*/*.c "$src"/src/*/*.h "$src"/include/polstore/*.h "$src"/include/polstore/static/*.h; do
	[ -e "$f" ] || continue
	case $f in "$src"/include/*) from=${f#"$src"/include/} ;; *) from=$(basename "$f") ;; esac
	sed -n -e 's/^#[ 	]*include[ 	]*"\([^"]*\)".*/\1/p' \
		-e 's/^#[ 	]*include[ 	]*<\(polstore\/[^>]*\)>.*/\1/p' "$f" |
		while read -r to; do echo "$from $to"; done
done |
	# The one include that points up, on purpose: a public header's opt-in
	# to the inline read side (POLSTORE_INLINE), at its end, after every
	# declaration the static headers need, as liburcu's urcu.h does.
	grep -v '^polstore/store.h polstore/static/lookup.h$' > "$tmp/incedges"

check() { # $1: edges file ("from to [why]"), $2: what the graph is
	awk -v what="$2" -v layers="$tmp/layers" '
	BEGIN {
		while ((getline l < layers) > 0) {
			split(l, w, " ")
			if (w[1] == "file") layer[w[3]] = w[2]
			else if (w[1] == "allow") allow[w[2], w[3]] = 1
		}
	}
	{
		a = $1; b = $2
		if (!(a in id)) { id[a] = ++n; nm[n] = a }
		if (!(b in id)) { id[b] = ++n; nm[n] = b }
		e[id[a], id[b]] = 1; why[id[a], id[b]] = $3
		la = layer[a ".c"] ? layer[a ".c"] : layer[a]
		lb = layer[b ".c"] ? layer[b ".c"] : layer[b]
		if (la && lb && !allow[la, lb]) {
			printf "%s: %s uses %s%s, a layer it may not use (docs/design.md)\n",
				what, a, b, $3 ? " (" $3 ")" : ""
			bad = 1
		}
	}
	END {
		for (k = 1; k <= n; k++)
			for (i = 1; i <= n; i++)
				if (e[i, k])
					for (j = 1; j <= n; j++)
						if (e[k, j] && !e[i, j]) { e[i, j] = 1; via[i, j] = k }
		for (i = 1; i <= n; i++)
			if (e[i, i]) { printf "%s: %s is in a circle\n", what, nm[i]; bad = 1 }
		exit bad
	}' "$1"
}

# stress/ and tests/common/: "unit unit [function]" for each #include "..."
# of a header of the same folder and each function (or object) a file
# names that another file defines at file scope; a unit is a source and
# the header of the same name (x.c and x.h), as a reader takes them.
callgraph() {
perl -e '
my $par = qr/(\((?:[^()]++|(?-1))*\))/;
my (%files, %def, %text);
sub unit { (my $u = shift) =~ s/\.[ch]\z//; return $u }
for (@ARGV) { (my $f = $_) =~ s{.*/}{}; $files{$f} = 1; }
for my $path (@ARGV) {
	open(my $fh, "<", $path) or die "$path: $!\n";
	local $/;
	my $t = <$fh>;
	close $fh;
	(my $file = $path) =~ s{.*/}{};
	$t =~ s{/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"}{ }gs;
	while ($t =~ /^[ \t]*#[ \t]*include[ \t]*"([^"\/]+)"/gm) {
		print unit($file), " ", unit($1), "\n" if unit($1) ne unit($file) && $files{$1};
	}
	$t =~ s{^[ \t]*#(?:[^\n]*\\\n)*[^\n]*}{}gm;
	# Definitions at file scope, at column 0: functions with their body
	# (in a .c not static), and the objects of a .c that are not static.
	while ($t =~ /^((?:[A-Za-z_][^;{}=\n]*?[\s*])?)([A-Za-z_]\w*)[ \t]*$par\s*(?:__attribute__\s*$par\s*)*\{/gm) {
		my ($pre, $name) = ($1, $2);
		$def{$name} = $file unless $file =~ /\.c$/ && $pre =~ /\bstatic\b/;
	}
	while ($file =~ /\.c$/ &&
			$t =~ /^([A-Za-z_][^;{}=\n()]*?[\s*])([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?:=|;)/gm) {
		$def{$2} = $file unless $1 =~ /\b(?:static|extern|typedef)\b/;
	}
	# What a file names: not its declarations, the members of its types,
	# nor any x.name or x->name.
	$t =~ s/^(?:[A-Za-z_][^;{}=\n]*?[\s*])?[A-Za-z_]\w*[ \t]*$par\s*(?:__attribute__\s*$par\s*)*;/ /gm;
	$t =~ s/^extern\b[^;]*;/ /gm;
	$t =~ s/\b(?:struct|union|enum)(?:\s+\w+)?\s*(\{(?:[^{}]++|(?-1))*\})/ /g;
	$t =~ s/(?:\.|->)\s*\w+/ /g;
	$text{$file} = $t;
}
my %seen;
for my $file (sort keys %text) {
	for my $w ($text{$file} =~ /\b[A-Za-z_]\w*\b/g) {
		my $to = $def{$w};
		next if !defined $to || unit($to) eq unit($file) || $seen{unit($file) . " " . unit($to)}++;
		print unit($file), " ", unit($to), " $w\n";
	}
}' "$@"
}
callgraph "$src"/stress/*.c "$src"/stress/*.h > "$tmp/stressedges"
callgraph "$src"/tests/common/*.c "$src"/tests/common/*.h > "$tmp/commonedges"

# Function pointers: no file calls, through a pointer it was handed, a
# function of a layer its own may not use, unless docs/design.md lists
# that pointer (type.member) among its callbacks up a layer.  Where a
# function goes: a table's initializer (.member = function), an
# assignment (x->member = function), or an argument that the callee
# stores into a member; the member's type is read from the declaration
# of what stands before it (a name the script cannot type, e.g. a macro,
# is matched only to stores it cannot type either).
fnpointers() {
perl -e 'use strict;
use warnings;
# Usage: perl fp.pl layersfile design.md files...
my ($layers, $design, @paths) = @ARGV;
my (%layer, %allow, %lname);
open(my $lf, "<", $layers) or die;
while (<$lf>) {
	my @w = split;
	if ($w[0] eq "file") { $layer{$w[2]} = $w[1] }
	elsif ($w[0] eq "allow") { $allow{"$w[1] $w[2]"} = 1 }
}
my %listed;
open(my $df, "<", $design) or die;
my $d = do { local $/; <$df> };
if ($d =~ /^Callbacks up a layer\b(.*?)(?:\n\n|\z)/ms) {
	my $p = $1;
	$listed{$1} = 1 while $p =~ /`(\w+\.\w+)`/g;
}
my $par = qr/(\((?:[^()]++|(?-1))*\))/;
my $brace = qr/(\{(?:[^{}]++|(?-1))*\})/;
my (%text, %fp, %def, %fpparam);
for my $path (@paths) {
	open(my $fh, "<", $path) or die "$path: $!\n";
	my $t = do { local $/; <$fh> };
	$t =~ s{/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"}{ }gs;
	(my $file = $path) =~ s{.*/include/}{}; $file =~ s{.*/}{} unless $file =~ m{^polstore/};
	$text{$file} = $t;
	$fp{$1} = 1 while $t =~ /\(\s*\*\s*(\w+)\s*\)\s*\(/g;
}
for my $file (keys %text) {
	my $t = $text{$file};
	while ($t =~ /^((?:[A-Za-z_][^;{}=\n]*?[\s*])?)([A-Za-z_]\w*)[ \t]*$par\s*(?:__attribute__\s*$par\s*)*$brace/gm) {
		my ($name, $params, $body) = ($2, $3, $5);
		push @{$def{$name}}, $file;
		# A parameter of pointer-to-function type stored into a member.
		my @p = split /,(?![^()]*\))/, substr($params, 1, -1);
		for my $i (0 .. $#p) {
			next unless $p[$i] =~ /\(\s*\*\s*(\w+)\s*\)/;
			my $pn = $1;
			while ($body =~ /(\w+(?:\s*\[[^\]]*\])?)\s*(?:\.|->)\s*(\w+)\s*=\s*$pn\b/g) {
				push @{$fpparam{"$name $i"}}, [$file, $1, $2];
			}
		}
	}
}
# The struct type of a name: its declaration in @file, else anywhere (a member).
sub type_of {
	my ($file, $name) = @_;
	for my $t ($text{$file}, map { $text{$_} } sort keys %text) {
		return $1 if $t =~ /\bstruct\s+(\w+)\s*(?:const\s*)?\**\s*(?:const\s*)?\b$name\b\s*[;,=)\[]/;
	}
	return "?";
}
# The type whose member the pointer is: from what stands before "->m" or ".m".
sub owner {
	my ($file, $before) = @_;
	return type_of($file, $1) if $before =~ /(\w+)\s*(?:\[[^\]]*\]\s*)?$/;
	return "?";
}
my %flow; # "type.member" -> { function -> file that hands it }
for my $file (keys %text) {
	my $t = $text{$file};
	# Tables: struct X name = { .m = f, ... }.
	while ($t =~ /\bstruct\s+(\w+)\s+\w+\s*(?:\[\w*\]\s*)?=\s*$brace/g) {
		my ($type, $init) = ($1, $2);
		while ($init =~ /\.\s*(\w+)\s*=\s*&?\s*(\w+)\b\s*[,;}]/g) {
			$flow{"$type.$1"}{$2} = $file if $fp{$1} && $def{$2};
		}
	}
	while ($t =~ /(\w+(?:\s*\[[^\]]*\])?)\s*(?:\.|->)\s*(\w+)\s*=\s*&?\s*(\w+)\b\s*[,;}]/g) {
		my ($v, $m, $f) = ($1, $2, $3);
		$flow{owner($file, $v) . ".$m"}{$f} = $file if $fp{$m} && $def{$f};
	}
	while ($t =~ /\b(\w+)\s*$par/g) {
		my ($g, $args) = ($1, $2);
		my @a = split /,(?![^()]*\))/, substr($args, 1, -1);
		for my $i (0 .. $#a) {
			next unless $a[$i] =~ /^\s*&?\s*(\w+)\s*$/ && $def{$1};
			my $f = $1;
			next unless $fpparam{"$g $i"};
			$flow{owner($_->[0], $_->[1]) . ".$_->[2]"}{$f} = $file for @{$fpparam{"$g $i"}};
		}
	}
}
my $bad = 0;
my %seen;
for my $file (sort keys %text) {
	my $lc = $layer{$file} or next;
	my $t = $text{$file};
	while ($t =~ /(\w+(?:\s*\[[^\]]*\])?)\s*(?:\.|->)\s*(\w+)\s*\(/g) {
		my ($v, $m) = ($1, $2);
		next unless $fp{$m};
		my $type = owner($file, $v);
		my %fs;
		for my $k ($type eq "?" ? ("?.$m") : ("$type.$m", "?.$m")) {
			$fs{$_} = 1 for keys %{$flow{$k} // {}};
		}
		for my $f (sort keys %fs) {
			for my $df (@{$def{$f}}) {
				my $lf = $layer{$df} or next;
				next if $allow{"$lc $lf"} || $listed{"$type.$m"} || $seen{"$file $m $f"}++;
				print "function pointers: $file calls $f ($df) through $type.$m, a layer it may not use;",
					" docs/design.md lists no such callback up a layer\n";
				$bad = 1;
			}
		}
	}
}
exit $bad;
' "$tmp/layers" "$src/docs/design.md" "$@"
}

# Above the library: "from to" with paths from the source dir for the
# files of tests/, stress/ and fuzz/, and a library header by the name the
# include graph above gives it.  A quoted include is looked up beside the
# file, then in tests/common/ (the suites' and the stress program's
# include path), then in src/.
for f in "$src"/tests/*/*.c "$src"/tests/*/*.h "$src"/stress/*.c "$src"/stress/*.h \
		"$src"/fuzz/*.c "$src"/fuzz/*.h; do
	[ -e "$f" ] || continue
	from=${f#"$src"/}
	dir=$(dirname "$f")
	sed -n -e 's/^#[ 	]*include[ 	]*"\([^"]*\)".*/q \1/p' \
		-e 's/^#[ 	]*include[ 	]*<\(polstore\/[^>]*\)>.*/a \1/p' "$f" |
		while read -r kind to; do
			if [ "$kind" = a ]; then
				echo "$from $to"
			elif [ -e "$dir/$to" ]; then
				echo "$from ${dir#"$src"/}/$to"
			elif [ -e "$src/tests/common/$to" ]; then
				echo "$from tests/common/$to"
			else
				echo "$from $to"
			fi
		done
done > "$tmp/testedges"
# Who may use whom: the folder of each end (a library header has none).
awk '
function group(f) {
	if (f !~ /\//) return "lib"
	if (f ~ /^polstore\//) return "lib"
	if (f ~ /^tests\/common\//) return "common"
	sub(/\/[^\/]*$/, "", f)
	return f
}
{
	a = group($1); b = group($2)
	if (b == "lib" || a == b || b == "common" && a != "lib") next
	printf "test include graph: %s includes %s (%s/ may use only itself, tests/common/ and the library)\n", $1, $2, a
	bad = 1
}
END { exit bad }' "$tmp/testedges" || status=1

check "$tmp/objedges" "object graph" || status=1
check "$tmp/incedges" "include graph" || status=1
check "$tmp/stressedges" "stress/ graph" || status=1
check "$tmp/commonedges" "tests/common/ graph" || status=1
fnpointers "$src"/src/*/*.c "$src"/src/*/*.h "$src"/include/polstore/static/*.h || status=1
check "$tmp/testedges" "test include graph" || status=1
[ $status -eq 0 ] && echo "layers: $(wc -l < "$tmp/objedges") object and $(wc -l < "$tmp/incedges") include edges," \
	"$(wc -l < "$tmp/stressedges") in stress/, $(wc -l < "$tmp/commonedges") in tests/common/," \
	"$(wc -l < "$tmp/testedges") in tests, stress and fuzz;" \
	"no circle, none up a layer, no callback up one that docs/design.md does not list"
exit $status
