#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every function defined in the libraries (nm, local ones too) has its
# definition written in src/ or include/: grep finds "name(" at a
# definition, and no generator makes a name grep cannot find.
#
# A definition is what kernel style writes at column 0: a return type
# (with any qualifiers and attributes) and the name, or the name alone
# below its return type, then the parameters in parentheses, then the
# body's "{" (comments and strings left out; preprocessor lines are not
# definitions).  A generator macro that stays must list every name it
# makes in a table above it, one line per name starting with the marker
# "polstore-generated:" (inside its comment), e.g.
#   * polstore-generated: foo_lookup foo_lookup_copy
#
# Functions of liburcu's inline headers are told apart by their own
# headers (and valgrind's client requests); the toolchain's (start-up
# code, libgcc and libc_nonshared helpers, sanitizer constructors) by name.
# A symbol named ps_* (function or object, global or local) is named in
# include/: private code takes psi_ (docs/design.md, "Names").
# Usage: check_nm_grep.sh <source dir> <library>...
set -eu
src=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

words() {
	grep -rhoE '[A-Za-z_][A-Za-z0-9_]*' "$@" 2>/dev/null | sort -u
}

# The names of the functions src/ and include/ define.
find "$src/src" "$src/include" -name '*.[ch]' -print0 | xargs -0 perl -e '
my %kw = map { $_ => 1 } qw(if for while switch return sizeof else do case
	__attribute__ __typeof__ typeof _Static_assert _Alignof alignof defined);
my $par = qr/(\((?:[^()]++|(?-1))*\))/;
for my $file (@ARGV) {
	open(my $fh, "<", $file) or die "$file: $!\n";
	local $/;
	my $t = <$fh>;
	close $fh;
	print "$_\n" for map { split /[\s,]+/ } $t =~ /polstore-generated:[ \t]*([\w \t,]+)/g;
	# Comments, strings and characters out; preprocessor lines (with
	# their continuations) blanked.
	$t =~ s{/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27}
		{ my $m = $&; $m =~ /^["\x27]/ ? "0" : " " . ($m =~ tr/\n//cdr) }gse;
	$t =~ s{^[ \t]*#(?:[^\n]*\\\n)*[^\n]*}{}gm;
	while ($t =~ /^(?:[A-Za-z_][^;{}=\n]*?[\s*])?([A-Za-z_]\w*)[ \t]*$par\s*(?:__attribute__\s*$par\s*)*\{/gm) {
		print "$1\n" unless $kw{$1};
	}
}' | sort -u > "$tmp/ours"
words "$src/include" > "$tmp/public"
inc=$(pkg-config --variable=includedir liburcu 2>/dev/null || echo /usr/include)
words "$inc/urcu" /usr/include/urcu /usr/include/valgrind > "$tmp/theirs"

status=0
nfuncs=0
for lib in "$@"; do
	# GCC's clones (foo.part.0, foo.cold, foo.constprop.0) count as foo.
	nm --defined-only "$lib" | awk '$2 ~ /^[TtWw]$/ { sub(/\..*/, "", $3); print $3 }' | sort -u |
		grep -vxE '_init|_fini|frame_dummy|register_tm_clones|deregister_tm_clones|__.*|_sub_[ID]_[0-9_]*' \
		> "$tmp/funcs"
	nfuncs=$((nfuncs + $(wc -l < "$tmp/funcs")))
	comm -23 "$tmp/funcs" "$tmp/ours" | comm -23 - "$tmp/theirs" > "$tmp/missing"
	if [ -s "$tmp/missing" ]; then
		echo "functions in $lib with no definition grep finds in src/ or include/:"
		sed 's/^/  /' "$tmp/missing"
		status=1
	fi
	nm --defined-only "$lib" | awk '{ sub(/\..*/, "", $3); print $3 }' | grep -E '^ps_' | sort -u |
		comm -23 - "$tmp/public" > "$tmp/private_ps"
	if [ -s "$tmp/private_ps" ]; then
		echo "symbols in $lib named ps_* but not in include/ (private code takes psi_):"
		sed 's/^/  /' "$tmp/private_ps"
		status=1
	fi
done
[ $status -eq 0 ] && echo "nm-grep: $nfuncs functions in $#" \
	"librar$([ $# -eq 1 ] && echo y || echo ies), each defined by name in src/ or include/"
exit $status
