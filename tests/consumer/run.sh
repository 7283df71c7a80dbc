#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install a built polstore into a temporary prefix, then build every example
# against the installed copy twice, from empty directories: once with
# pkg-config, once with find_package(polstore) (polstore::polstore), and run
# quickstart from each build.
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
# Examples that call libnuma themselves (shared_text) ask for it, as any
# program using <numa.h> must: polstore lists it in Requires.private only.
cflags=$($pc --cflags polstore numa)
libs=$($pc --libs polstore numa)
[ -d "$($pc --variable=includedir polstore)/polstore" ] || die "pkg-config: wrong includedir"
for src in $examples; do
	name=$(basename "$src" .c)
	# shellcheck disable=SC2086 # word splitting of the flags is wanted
	$cc -Wall -Wextra -Werror $cflags -o "$name" "$src" $libs -pthread ||
		die "pkg-config build of $name failed"
done
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
if ldd "$tmp/cm/quickstart_static" | grep -q libpolstore; then
	die "quickstart_static loads libpolstore.so"
fi

step "consumer OK: $(echo "$examples" | wc -w) example(s) built both ways"
