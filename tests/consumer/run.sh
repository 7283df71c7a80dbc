#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install a built polstore into a temporary prefix, then build every example
# against the installed copy twice, from empty directories: once with
# pkg-config, once with find_package(polstore) (polstore::polstore), and run
# quickstart from each build; shared_text is also built with the read side
# inlined (polstore-inline.pc, polstore::inline) and run.
#
# Usage: tests/consumer/run.sh <polstore build dir> [<polstore source dir>]
set -eu

builddir=$(cd "${1:?usage: run.sh <builddir> [<srcdir>]}" && pwd)
srcdir=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/polstore-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

step() { printf '== %s\n' "$*"; }
die() { printf 'consumer: %s\n' "$*" >&2; exit 1; }

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
[ -f "$libdir/cmake/polstore/polstoreConfig.cmake" ] || die "CMake package not installed"
# The hwloc bridge is a library of its own: libpolstore never needs hwloc.
if objdump -p "$libdir/$soname" | grep -q 'NEEDED.*hwloc'; then
	die "$soname links hwloc"
fi
if [ -f "$libdir/pkgconfig/polstore-hwloc.pc" ]; then
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

examples=$(ls "$srcdir"/examples/*.c)

step "pkg-config build (SONAME $soname)"
mkdir "$tmp/pc"
cd "$tmp/pc"
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
[ "$(pkg-config --modversion polstore)" = "$(sed -n 's/^Version: //p' "$libdir/pkgconfig/polstore.pc")" ] ||
	die "pkg-config does not see the installed polstore.pc"
# polstore.pc is relocatable: its prefix follows the file's location.
pc="pkg-config"
[ -d "$(pkg-config --variable=includedir polstore)/polstore" ] ||
	die "polstore.pc is not relocatable (prefix $(pkg-config --variable=prefix polstore))"
[ -d "$($pc --variable=includedir polstore)/polstore" ] || die "pkg-config: wrong includedir"
built=0
for src in $examples; do
	name=$(basename "$src" .c)
	# Examples that call libnuma themselves (shared_text) ask for it, as any
	# program using <numa.h> must: polstore lists it in Requires.private
	# only.  An "example-requires:" line names the other modules one needs
	# (jemalloc, polstore-hwloc, polstore-uffd); without them it is skipped, as
	# in the build.
	modules="polstore numa $(sed -n 's/.*example-requires:[[:space:]]*//p' "$src" | head -n 1)"
	# shellcheck disable=SC2086 # word splitting of the module list is wanted
	if ! $pc --exists $modules; then
		step "skip $name (needs: $modules)"
		continue
	fi
	# shellcheck disable=SC2086 # word splitting of the flags is wanted
	$cc -Wall -Wextra -Werror $($pc --cflags $modules) -o "$name" "$src" \
		$($pc --libs $modules) -pthread || die "pkg-config build of $name failed"
	built=$((built + 1))
done
# The read side inlined (polstore-inline.pc: POLSTORE_INLINE), on the fault
# path of shared_text; 77: placement unavailable here, which it says.
$pc --exists polstore-inline || die "polstore-inline.pc not installed"
$cc -Wall -Wextra -Werror $($pc --cflags polstore-inline numa) -o shared_text_inline \
	"$srcdir/examples/shared_text.c" $($pc --libs polstore-inline numa) -pthread ||
	die "pkg-config build of shared_text with polstore-inline failed"
# Inlined readers reach liburcu's thread-locals themselves (the library's
# exported calls stay only as their slow path).
nm shared_text_inline | grep -q ' U urcu_qsbr_reader$' ||
	die "shared_text_inline does not read liburcu's state itself: not inlined"
nm shared_text | grep -q ' U urcu_qsbr_reader$' &&
	die "shared_text (no POLSTORE_INLINE) reads liburcu's state itself"
rc=0
LD_LIBRARY_PATH=$libdir ./shared_text_inline -v all -r 2 -p 64 -n 1 || rc=$?
[ $rc = 0 ] || [ $rc = 77 ] || die "shared_text_inline failed ($rc)"
LD_LIBRARY_PATH=$libdir ldd ./quickstart | grep -q "$libdir/$soname" ||
	die "quickstart does not load the installed library"
LD_LIBRARY_PATH=$libdir ./quickstart || die "quickstart (pkg-config) failed"

step "find_package build"
mkdir "$tmp/cm"
cmake -S "$srcdir/tests/consumer" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_C_FLAGS="-Wall -Wextra -Werror" \
	-DPOLSTORE_EXAMPLES_DIR="$srcdir/examples" >"$tmp/cm.log" 2>&1 || {
	cat "$tmp/cm.log" >&2; die "configure against the installed package failed"; }
cmake --build "$tmp/cm" -j 2 >"$tmp/cm-build.log" 2>&1 || {
	cat "$tmp/cm-build.log" >&2; die "find_package build failed"; }
ldd "$tmp/cm/quickstart" | grep -q "$libdir/$soname" ||
	die "quickstart (find_package) does not load the installed library"
"$tmp/cm/quickstart" || die "quickstart (find_package) failed"
"$tmp/cm/quickstart_static" rwlock || die "quickstart_static failed"
rc=0
"$tmp/cm/shared_text_inline" -v all -r 2 -p 64 -n 1 || rc=$?
[ $rc = 0 ] || [ $rc = 77 ] || die "shared_text_inline (polstore::inline) failed ($rc)"
if ldd "$tmp/cm/quickstart_static" | grep -q libpolstore; then
	die "quickstart_static loads libpolstore.so"
fi

step "consumer OK: $built of $(echo "$examples" | wc -w) example(s) built with pkg-config, and with find_package"
