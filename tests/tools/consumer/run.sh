#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install a built polstore into a temporary prefix and use it as a consumer
# would, from empty directories:
#  - what is installed: headers, versioned libraries, pkg-config and CMake
#    files, the manual pages (when the build made them; each LIBRARY
#    section checked against the installed libraries), the examples;
#  - pkg-config: every example built with the README's line
#    `cc prog.c $(pkg-config --cflags --libs polstore)` (plus the modules
#    an example REQUIRES in the table of examples.cmake), shared_text also
#    with polstore-inline; then with `pkg-config --static` against the
#    static libraries alone;
#  - CMake: the examples project installed with the examples
#    (share/doc/libpolstore-dev/examples), shared and static, with the hwloc
#    component and from a prefix without the bridge; the static builds
#    must not load libpolstore*.so;
#  - find_package(polstore) itself (tests/tools/consumer/CMakeLists.txt): no
#    variable set in the caller's scope, a clear message for an unknown or
#    missing component, and a refused mix of static and shared targets.
# quickstart runs from each build; shared_text's inline builds run too.
#
# Usage: tests/tools/consumer/run.sh <polstore build dir> [<polstore source dir>]
set -eu

builddir=$(cd "${1:?usage: run.sh <builddir> [<srcdir>]}" && pwd)
srcdir=$(cd "${2:-$(dirname "$0")/../../..}" && pwd)
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/polstore-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

step() { printf '== %s\n' "$*"; }
die() { printf 'consumer: %s\n' "$*" >&2; exit 1; }
# needed <binary>: its DT_NEEDED entries, one a line.
needed() { objdump -p "$1" | awk '/NEEDED/ { print $2 }'; }
# run77 <what> <command...>: the command must succeed or say it is skipped (77).
run77() {
	what=$1
	shift
	rc=0
	"$@" >/dev/null || rc=$?
	[ $rc = 0 ] || [ $rc = 77 ] || die "$what failed ($rc)"
}

step "install into $prefix"
cmake --install "$builddir" --prefix "$prefix" >"$tmp/install.log" || {
	cat "$tmp/install.log" >&2; die "cmake --install failed"; }
libdir=$(dirname "$(find "$prefix" -name polstore.pc -path '*/pkgconfig/*' | head -n 1)")
libdir=${libdir%/pkgconfig}
[ -d "$libdir" ] || die "no polstore.pc installed"
for f in include/polstore/polstore.h include/polstore/version.h include/polstore/numa.h; do
	[ -f "$prefix/$f" ] || die "$f not installed"
done
[ -f "$libdir/libpolstore.a" ] || die "static library not installed"
soname=$(objdump -p "$libdir/libpolstore.so" | awk '/SONAME/ { print $2 }')
case $soname in
libpolstore.so.[0-9]*) [ -f "$libdir/$soname" ] || die "$soname missing" ;;
*) die "unversioned SONAME '$soname'" ;;
esac
for f in polstoreConfig.cmake polstoreDependencies.cmake polstoreTargets.cmake; do
	[ -f "$libdir/cmake/polstore/$f" ] || die "CMake package: $f not installed"
done
# The hwloc bridge is a library of its own: libpolstore never needs hwloc.
if needed "$libdir/$soname" | grep -q hwloc; then
	die "$soname links hwloc"
fi
hwloc=no
if [ -f "$libdir/pkgconfig/polstore-hwloc.pc" ]; then
	hwloc=yes
	objdump -p "$libdir/libpolstore_hwloc.so" | grep -q 'SONAME.*libpolstore_hwloc\.so\.[0-9]' ||
		die "libpolstore_hwloc.so has no versioned SONAME"
	[ -f "$prefix/include/polstore/hwloc.h" ] || die "polstore/hwloc.h not installed"
elif [ -f "$prefix/include/polstore/hwloc.h" ]; then
	die "polstore/hwloc.h installed without the bridge"
fi
# So is the fault plane.
if [ -f "$libdir/pkgconfig/polstore-uffd.pc" ]; then
	objdump -p "$libdir/libpolstore_uffd.so" | grep -q 'SONAME.*libpolstore_uffd\.so\.[0-9]' ||
		die "libpolstore_uffd.so has no versioned SONAME"
	[ -f "$prefix/include/polstore/uffd.h" ] || die "polstore/uffd.h not installed"
	[ -f "$libdir/cmake/polstore/polstoreUffdTargets.cmake" ] || die "uffd CMake targets not installed"
elif [ -f "$prefix/include/polstore/uffd.h" ]; then
	die "polstore/uffd.h installed without the fault plane"
fi
exdir=$prefix/share/doc/libpolstore-dev/examples
for f in "$srcdir"/examples/*.c "$srcdir/examples/CMakeLists.txt" "$srcdir/examples/examples.cmake"; do
	[ -f "$exdir/$(basename "$f")" ] || die "examples: $(basename "$f") not installed in $exdir"
done
# The documentation, laid out as in the sources: README, the benchmark
# page and every guide (the manual pages cite them by that path).
docdir=$prefix/share/doc/libpolstore-dev
for f in README.md BENCHMARKS.md "$srcdir"/docs/*.md; do
	f=${f#"$srcdir/"}
	[ -f "$docdir/$f" ] || die "documentation: $f not installed in $docdir"
done
if [ -d "$builddir/docs/man" ]; then
	for f in man7/polstore.7 man3/ps_store_set.3polstore man3/polstore-store.3polstore; do
		[ -f "$prefix/share/man/$f" ] || die "manual page $f not installed"
	done
	if command -v man >/dev/null; then
		man -M "$prefix/share/man" -w ps_store_set >/dev/null || die "man ps_store_set: no page"
	fi
	# The installed pages against the installed libraries: each LIBRARY
	# section names the library (and module) that defines its function.
	set --
	for l in "$libdir"/libpolstore*.so; do
		set -- "$@" --lib "$l"
	done
	rc=0
	sh "$srcdir/scripts/check-man.sh" "$@" --pc "$libdir/pkgconfig" "$prefix/share/man" \
		"$prefix"/include/polstore/*.h >"$tmp/check-man.log" 2>&1 || rc=$?
	[ $rc = 0 ] || [ $rc = 77 ] || { cat "$tmp/check-man.log" >&2; die "installed manual pages"; }
fi

examples=$(ls "$exdir"/*.c)
# requires <example.c>: the pkg-config modules it needs beyond polstore
# (its REQUIRES in the table of examples.cmake).
requires() {
	sed -n "s/^polstore_example($(basename "$1" .c) REQUIRES \([^A-Z)]*\).*/\1/p" \
		"$exdir/examples.cmake"
}

step "pkg-config, shared (SONAME $soname): the README's link line"
mkdir "$tmp/pc"
cd "$tmp/pc"
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
[ "$(pkg-config --modversion polstore)" = "$(sed -n 's/^Version: //p' "$libdir/pkgconfig/polstore.pc")" ] ||
	die "pkg-config does not see the installed polstore.pc"
# polstore.pc is relocatable: its prefix follows the file's location.
[ -d "$(pkg-config --variable=includedir polstore)/polstore" ] ||
	die "polstore.pc is not relocatable (prefix $(pkg-config --variable=prefix polstore))"
built=0
for src in $examples; do
	name=$(basename "$src" .c)
	modules="polstore $(requires "$src")"
	# shellcheck disable=SC2086 # word splitting of the module list is wanted
	if ! pkg-config --exists $modules; then
		step "skip $name (needs: $modules)"
		continue
	fi
	# shellcheck disable=SC2046,SC2086 # word splitting of the flags is wanted
	$cc -Wall -Wextra -Werror "$src" $(pkg-config --cflags --libs $modules) -o "$name" ||
		die "$name does not link with \$(pkg-config --cflags --libs $modules)"
	built=$((built + 1))
done
# The read side inlined (polstore-inline.pc: POLSTORE_INLINE), on the fault
# path of shared_text; 77: placement unavailable here, which it says.
pkg-config --exists polstore-inline || die "polstore-inline.pc not installed"
# shellcheck disable=SC2046
$cc -Wall -Wextra -Werror "$exdir/shared_text.c" $(pkg-config --cflags --libs polstore-inline) \
	-o shared_text_inline || die "shared_text does not link with polstore-inline"
# Inlined readers reach liburcu's thread-locals themselves (the library's
# exported calls stay only as their slow path).
nm shared_text_inline | grep -q ' U urcu_qsbr_reader$' ||
	die "shared_text_inline does not read liburcu's state itself: not inlined"
nm shared_text | grep -q ' U urcu_qsbr_reader$' &&
	die "shared_text (no POLSTORE_INLINE) reads liburcu's state itself"
LD_LIBRARY_PATH=$libdir run77 shared_text_inline ./shared_text_inline -v all -r 2 -p 64 -n 1
LD_LIBRARY_PATH=$libdir ldd ./quickstart | grep -q "$libdir/$soname" ||
	die "quickstart does not load the installed library"
LD_LIBRARY_PATH=$libdir ./quickstart >/dev/null || die "quickstart (pkg-config) failed"

# The static libraries alone (a copy of the prefix without the shared
# ones): --static must name every library they need.
step "pkg-config --static, static libraries only"
cp -a "$prefix" "$tmp/sprefix"
slibdir=$tmp/sprefix${libdir#"$prefix"}
rm -f "$slibdir"/libpolstore*.so*
mkdir "$tmp/pcs"
cd "$tmp/pcs"
export PKG_CONFIG_PATH="$slibdir/pkgconfig"
static_hwloc=$hwloc
if [ $hwloc = yes ] &&
	! echo 'int main(void) { return 0; }' | $cc -x c - $(pkg-config --static --libs hwloc) \
		-o hwloc_only 2>/dev/null; then
	# hwloc's own static link line names libraries this machine lacks.
	step "skip static hwloc_policy: 'pkg-config --static --libs hwloc' does not link here"
	static_hwloc=no
fi
for name in quickstart shared_text hwloc_policy; do
	[ $name != hwloc_policy ] || [ $static_hwloc = yes ] || continue
	modules="polstore $(requires "$exdir/$name.c")"
	# shellcheck disable=SC2046,SC2086
	$cc -Wall -Wextra -Werror "$exdir/$name.c" $(pkg-config --static --cflags --libs $modules) \
		-o "$name" || die "$name does not link with \$(pkg-config --static --cflags --libs $modules)"
	if needed "$name" | grep -q libpolstore; then
		die "$name (static) needs $(needed "$name" | grep libpolstore)"
	fi
done
./quickstart >/dev/null || die "quickstart (pkg-config --static) failed"

# A prefix without the hwloc bridge, for the builds without the component.
cp -a "$prefix" "$tmp/nhprefix"
rm -f "$tmp/nhprefix${libdir#"$prefix"}"/cmake/polstore/polstoreHwlocTargets*.cmake
unset PKG_CONFIG_PATH

# cmake_examples <dir> <prefix> <static ON|OFF>: configure and build the
# installed examples project; its configure log in <dir>.log.
cmake_examples() {
	cmake -S "$exdir" -B "$1" -DCMAKE_PREFIX_PATH="$2" -DPOLSTORE_EXAMPLES_STATIC="$3" \
		-DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$1.log" 2>&1 || {
		cat "$1.log" >&2; die "configure of the examples ($1) failed"; }
	cmake --build "$1" -j 2 >"$1.build.log" 2>&1 || {
		cat "$1.build.log" >&2; die "build of the examples ($1) failed"; }
}
bridges=no
[ $hwloc = no ] || bridges="yes no"
for static in OFF ON; do
	for bridge in $bridges; do
		pfx=$prefix
		[ $bridge = yes ] || pfx=$tmp/nhprefix
		dir=$tmp/cm-static$static-hwloc$bridge
		step "CMake: installed examples, static $static, hwloc component $bridge"
		cmake_examples "$dir" "$pfx" $static
		if [ $bridge = yes ]; then
			[ -x "$dir/hwloc_policy" ] || die "hwloc_policy not built with the component"
		else
			[ ! -e "$dir/hwloc_policy" ] || die "hwloc_policy built without the component"
			grep -q "optional component 'hwloc' not available: the hwloc bridge is not installed" \
				"$dir.log" || die "no message for the missing hwloc component"
		fi
		if [ $static = ON ]; then
			for f in "$dir"/*; do
				[ -f "$f" ] && [ -x "$f" ] || continue
				if needed "$f" | grep -q libpolstore; then
					die "$(basename "$f") (static) needs $(needed "$f" | grep libpolstore)"
				fi
			done
			"$dir/quickstart" rwlock >/dev/null || die "quickstart (CMake, static) failed"
		else
			ldd "$dir/quickstart" | grep -q "$pfx${libdir#"$prefix"}/$soname" ||
				die "quickstart (CMake) does not load the installed library"
			"$dir/quickstart" >/dev/null || die "quickstart (CMake) failed"
			run77 "shared_text_inline (polstore::inline)" "$dir/shared_text_inline" -v all -r 2 -p 64 -n 1
		fi
	done
done

step "find_package(polstore): the caller's scope, components, static with shared"
# consumer_cmake <dir> <prefix> <args...>: configure tests/tools/consumer.
consumer_cmake() {
	d=$1
	p=$2
	shift 2
	cmake -S "$srcdir/tests/tools/consumer" -B "$d" -DCMAKE_PREFIX_PATH="$p" "$@" >"$d.log" 2>&1
}
consumer_cmake "$tmp/fp" "$prefix" || { cat "$tmp/fp.log" >&2; die "find_package(polstore) checks failed"; }
grep -q 'no variable leaked' "$tmp/fp.log" || die "find_package(polstore) checks did not run"
if consumer_cmake "$tmp/fp-bogus" "$prefix" -DPOLSTORE_CONSUMER_COMPONENTS=bogus; then
	die "find_package(polstore COMPONENTS bogus) succeeded"
fi
grep -q "component 'bogus': no such component" "$tmp/fp-bogus.log" ||
	{ cat "$tmp/fp-bogus.log" >&2; die "no clear message for an unknown component"; }
if consumer_cmake "$tmp/fp-nohwloc" "$tmp/nhprefix" -DPOLSTORE_CONSUMER_COMPONENTS=hwloc; then
	die "find_package(polstore COMPONENTS hwloc) succeeded without the bridge"
fi
grep -q "component 'hwloc': the hwloc bridge is not installed" "$tmp/fp-nohwloc.log" ||
	{ cat "$tmp/fp-nohwloc.log" >&2; die "no clear message for a missing hwloc component"; }
if [ $hwloc = yes ]; then
	if consumer_cmake "$tmp/fp-mix" "$prefix" -DPOLSTORE_CONSUMER_MIX=ON; then
		die "a program linking polstore::polstore_static and polstore::polstore_hwloc configured"
	fi
	grep -q 'POLSTORE_LINKAGE' "$tmp/fp-mix.log" ||
		{ cat "$tmp/fp-mix.log" >&2; die "the static/shared mix failed for another reason"; }
fi

step "consumer OK: $built of $(echo "$examples" | wc -w) example(s) built with the README's pkg-config line, static with --static, and with CMake (shared, static; hwloc component $hwloc and no)"
