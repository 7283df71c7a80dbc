#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build the Debian packages from a copy of the source tree, unpack them into
# a scratch root (the machine's own packages are not touched), check what
# each holds, build the quickstart example against the unpacked -dev
# package with pkg-config (hwloc_policy against polstore-hwloc, uffd_restore
# against polstore-uffd) and run it on the unpacked library; check that an
# inline program (polstore-inline) runs there and depends on the virtual
# package of its layouts, which libpolstore0 provides; build the packaged
# examples with their CMake project, then run lintian when it is installed.
#
# Usage: tests/tools/package/run.sh [<polstore source dir>]
# Exit status 77 (skipped) when dpkg-buildpackage or a build dependency is
# missing (scripts/deps.sh installs them).  Needs no root: the build uses
# Rules-Requires-Root: no.  About 40 s on 2 cores (build 25 s, lintian 10 s).
# POLSTORE_PACKAGE_KEEP=<dir> copies the .deb files and logs there.
set -eu

srcdir=$(cd "${1:-$(dirname "$0")/../../..}" && pwd)
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/polstore-package.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

step() { printf '== %s\n' "$*"; }
die() { printf 'package: %s\n' "$*" >&2; exit 1; }
now() { date +%s; }

for tool in dpkg-buildpackage dpkg-checkbuilddeps dpkg-deb dpkg-parsechangelog; do
	command -v $tool >/dev/null || { echo "package: no $tool: skipped"; exit 77; }
done
(cd "$srcdir" && dpkg-checkbuilddeps) 2>"$tmp/builddeps" || {
	cat "$tmp/builddeps"
	echo "package: build dependencies missing (scripts/deps.sh installs them): skipped"
	exit 77
}

version=$(dpkg-parsechangelog -l "$srcdir/debian/changelog" -S Version)
upstream=${version%-*}
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
src=$tmp/polstore-$upstream

# The tree as git sees it (tracked and untracked files, not ignored ones:
# no build directories), or the whole tree without them.
step "copy $srcdir"
mkdir "$src"
if git -C "$srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$srcdir" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | tar -xf - -C "$src"
else
	(cd "$srcdir" && tar --exclude='./build*' --exclude='./obj-*' -cf - .) | tar -xf - -C "$src"
fi

# The copy as its own git tree, every file added: what the build leaves
# that git neither tracks nor ignores shows after it (debian/README.source:
# a build in the tree leaves only ignored files).
gitcheck=no
if command -v git >/dev/null && git -C "$src" init -q && git -C "$src" add -A; then
	gitcheck=yes
fi

step "dpkg-buildpackage -us -uc -b (polstore $version, $arch)"
t0=$(now)
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=${POLSTORE_PACKAGE_JOBS:-2}" \
	dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1 || {
	tail -n 60 "$tmp/build.log" >&2
	die "dpkg-buildpackage failed"
}
t1=$(now)
grep -E 'dpkg-gensymbols: warning|dpkg-shlibdeps: warning' "$tmp/build.log" || true
if [ $gitcheck = yes ]; then
	left=$(git -C "$src" ls-files --others --exclude-standard; git -C "$src" diff --name-only)
	[ -z "$left" ] || die "the build leaves files git does not ignore, or changes tracked ones: $left"
fi

deb() { echo "$tmp/${1}_${version}_$arch.deb"; }
pkgs="libpolstore0 libpolstore-dev libpolstore-hwloc0 libpolstore-hwloc-dev libpolstore-uffd0
libpolstore-uffd-dev polstore-tools"
for p in $pkgs; do
	[ -f "$(deb $p)" ] || die "no package $p"
done

step "contents"
# has PACKAGE PATH...: each path (a shell pattern) is in PACKAGE.
has() {
	p=$1
	shift
	dpkg-deb -c "$(deb "$p")" | awk '{ print $6 }' | sed 's|^\./|/|' >"$tmp/list"
	for f; do
		# shellcheck disable=SC2254 # the pattern is meant to match
		grep -q "^$f\$" "$tmp/list" || die "$p lacks $f"
	done
}
lib=/usr/lib/$triplet
has libpolstore0 "$lib/libpolstore\.so\.0" "$lib/libpolstore\.so\.$upstream"
ex=/usr/share/doc/libpolstore-dev/examples
has libpolstore-dev /usr/include/polstore/polstore.h /usr/include/polstore/version.h \
	"$lib/libpolstore\.so" "$lib/libpolstore\.a" "$lib/pkgconfig/polstore\.pc" \
	"$lib/cmake/polstore/polstoreConfig\.cmake" "$lib/cmake/polstore/polstoreTargets\.cmake" \
	"$lib/cmake/polstore/polstoreDependencies\.cmake" \
	'/usr/share/man/man7/polstore\.7\.gz' '/usr/share/man/man3/polstore-store\.3polstore\.gz' \
	'/usr/share/man/man3/ps_store_set\.3polstore\.gz' \
	"$ex/quickstart\.c" "$ex/shared_text\.c" "$ex/CMakeLists\.txt" "$ex/examples\.cmake" \
	'/usr/share/doc/libpolstore-dev/README\.md' '/usr/share/doc/libpolstore-dev/BENCHMARKS\.md' \
	'/usr/share/doc/libpolstore-dev/bench/results/lookup-cost\.svg' \
	'/usr/share/doc/libpolstore-dev/docs/context\.md' '/usr/share/doc/libpolstore-dev/docs/uffd\.md' \
	'/usr/share/doc/libpolstore-dev/docs/peers\.md'
has libpolstore-hwloc0 "$lib/libpolstore_hwloc\.so\.0"
has libpolstore-hwloc-dev /usr/include/polstore/hwloc.h "$lib/libpolstore_hwloc\.so" \
	"$lib/libpolstore_hwloc\.a" "$lib/pkgconfig/polstore-hwloc\.pc" \
	"$lib/cmake/polstore/polstoreHwlocTargets\.cmake" \
	'/usr/share/man/man3/polstore-hwloc\.3polstore\.gz' \
	'/usr/share/man/man3/ps_hwloc_policy_from_obj\.3polstore\.gz'
has libpolstore-uffd0 "$lib/libpolstore_uffd\.so\.0"
has libpolstore-uffd-dev /usr/include/polstore/uffd.h "$lib/libpolstore_uffd\.so" \
	"$lib/libpolstore_uffd\.a" "$lib/pkgconfig/polstore-uffd\.pc" \
	"$lib/cmake/polstore/polstoreUffdTargets\.cmake" \
	'/usr/share/man/man3/polstore-uffd\.3polstore\.gz' \
	'/usr/share/man/man3/ps_uffd_create\.3polstore\.gz'
has polstore-tools /usr/bin/polstore-stress '/usr/share/man/man1/polstore-stress\.1\.gz'
# Every guide a manual page or polstore(7) cites is in a package.
for p in $pkgs; do
	dpkg-deb -c "$(deb "$p")" | awk '{ print $6 }' | sed 's|^\./|/|'
done >"$tmp/all"
mkdir -p "$tmp/pages"
for p in $pkgs; do
	dpkg-deb -x "$(deb "$p")" "$tmp/pages"
done
cited=$(find "$tmp/pages/usr/share/man" -name '*.gz' -exec zcat {} + | sed 's/\\-/-/g' |
	grep -oE '/usr/share/doc/[a-z0-9.+-]+/([a-z]+/)?[A-Za-z0-9_-]+\.md' | sort -u)
[ -n "$cited" ] || die "no manual page cites a guide by its installed path"
for f in $cited; do
	grep -qx "$f" "$tmp/all" || die "a manual page cites $f, which no package installs"
done
echo "   the pages cite $(echo "$cited" | wc -l) guides, every one installed"
# Every relative link of an installed Markdown file leads to an installed
# file: the documentation keeps the source tree's layout.  CONTRIBUTING.md,
# for who changes the sources, stays in them.
for md in $(cd "$tmp/pages" && find usr/share/doc -name '*.md'); do
	d=$(dirname "$tmp/pages/$md")
	for l in $(grep -oE '\]\([^)#[:space:]]+' "$tmp/pages/$md" | sed 's/^](//' |
		grep -v -e '^[a-z]*:' -e '^CONTRIBUTING\.md$'); do
		[ -e "$d/$l" ] || die "/$md links to $l, which no package installs"
	done
done
echo "   every link between the installed documents holds"
# The hwloc bridge's files are in its own packages (the examples, which
# skip hwloc_policy without the bridge, and the guides, one set, all stay
# in libpolstore-dev).
docs=/usr/share/doc/libpolstore-dev/
if dpkg-deb -c "$(deb libpolstore-dev)" | awk '{ print $6 }' | grep -v "^\.$docs" | grep -q 'hwloc'; then
	die "libpolstore-dev holds hwloc files"
fi
if dpkg-deb -c "$(deb libpolstore-dev)" | awk '{ print $6 }' | grep -v "^\.$docs" | grep -q 'uffd'; then
	die "libpolstore-dev holds fault plane files"
fi
# libpolstore0 and its -dev never need hwloc.
for p in libpolstore0 libpolstore-dev; do
	if dpkg-deb -f "$(deb $p)" Depends | grep -q hwloc; then
		die "$p depends on hwloc: $(dpkg-deb -f "$(deb $p)" Depends)"
	fi
done
for p in $pkgs; do
	printf '   %-22s %s\n' "$p" "$(dpkg-deb -f "$(deb $p)" Depends)"
done
# apt show prints the Maintainer: a real address, not one of the names
# reserved for examples and tests (RFC 2606, RFC 6761).
maint=$(dpkg-deb -f "$(deb libpolstore0)" Maintainer)
case $maint in
*'<'*@*'>') ;;
*) die "Maintainer '$maint' has no address" ;;
esac
mhost=${maint##*@}
mhost=${mhost%>}
case .$mhost in
*.example | *.example.* | *.invalid | *.test | *.localhost | *.local | *.localdomain | *.example.com | *.example.org | *.example.net)
	die "Maintainer '$maint': $mhost is a reserved or placeholder domain" ;;
esac

step "unpack into a scratch root, build examples with pkg-config"
root=$tmp/root
for p in $pkgs; do
	dpkg-deb -x "$(deb $p)" "$root"
done
# polstore.pc is relocatable: its prefix follows the file into the root.
export PKG_CONFIG_PATH="$root$lib/pkgconfig"
incdir=$(pkg-config --variable=includedir polstore)
[ "$(cd "$incdir" && pwd -P)" = "$(cd "$root/usr/include" && pwd -P)" ] ||
	die "polstore.pc does not follow the scratch root (includedir $incdir)"
mkdir "$tmp/app"
cd "$tmp/app"
# shellcheck disable=SC2046 # word splitting of the flags is wanted
$cc -Wall -Wextra -Werror $(pkg-config --cflags polstore) -o quickstart \
	"$src/examples/quickstart.c" $(pkg-config --libs polstore) || die "quickstart does not build"
LD_LIBRARY_PATH=$root$lib ldd ./quickstart | grep -q "$root$lib/libpolstore\.so\.0" ||
	die "quickstart does not load the packaged library"
LD_LIBRARY_PATH=$root$lib ./quickstart >quickstart.out || die "quickstart failed"
# shellcheck disable=SC2046
$cc -Wall -Wextra -Werror $(pkg-config --cflags polstore-hwloc) -o hwloc_policy \
	"$src/examples/hwloc_policy.c" $(pkg-config --libs polstore-hwloc) ||
	die "hwloc_policy does not build against polstore-hwloc"
LD_LIBRARY_PATH=$root$lib ./hwloc_policy >hwloc_policy.out || {
	rc=$?
	[ $rc -eq 77 ] || die "hwloc_policy failed ($rc)"
}
# shellcheck disable=SC2046
$cc -Wall -Wextra -Werror $(pkg-config --cflags polstore-uffd numa) -o uffd_restore \
	"$src/examples/uffd_restore.c" $(pkg-config --libs polstore-uffd numa) -pthread ||
	die "uffd_restore does not build against polstore-uffd"
LD_LIBRARY_PATH=$root$lib ./uffd_restore -g 2 -m 1 -v 2 >uffd_restore.out || {
	rc=$?
	[ $rc -eq 77 ] || die "uffd_restore failed ($rc)"
}
"$root/usr/bin/polstore-stress" --help >/dev/null || die "polstore-stress --help failed"

step "inline layouts: the virtual package, an inline program's dependency"
# The identity the -dev package records (pkg-config) is the one the library
# accepts, libpolstore0 provides its virtual package, and the symbols file
# gives a program built with POLSTORE_INLINE a dependency on it.
layout=$(pkg-config --variable=layout polstore-inline)
echo "$layout" | grep -Eq '^[0-9a-f]{8}$' || die "polstore-inline.pc: no layout identity ($layout)"
dpkg-deb -f "$(deb libpolstore0)" Provides | grep -Eq "(^|, )polstore-layout-$layout(,|\$)" ||
	die "libpolstore0 does not provide polstore-layout-$layout"
dpkg-deb -I "$(deb libpolstore0)" symbols | grep -q "^| polstore-layout-$layout\$" ||
	die "libpolstore0's symbols file names no polstore-layout-$layout"
cat >inline_app.c <<'INLINE'
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <polstore/polstore.h>

int main(void)
{
	struct ps_store *s = ps_store_create(PS_SYNC_RCU);
	int node;

	if (!s) {
		fprintf(stderr, "inline_app: %s\n", strerror(errno));
		return 1;
	}
	node = ps_store_lookup_node(s, 0, 0);
	ps_store_destroy(s);
	printf("%08lx\n", ps_inline_layout());
	return node < 0;
}
INLINE
# shellcheck disable=SC2046
$cc -Wall -Wextra -Werror $(pkg-config --cflags polstore-inline) -o inline_app inline_app.c \
	$(pkg-config --libs polstore-inline) || die "an inline program does not build"
[ "$(LD_LIBRARY_PATH=$root$lib ./inline_app)" = "$layout" ] ||
	die "the inline program does not run on the packaged library"
if command -v dpkg-shlibdeps >/dev/null; then
	mkdir -p consumer/debian consumer/bin
	printf 'Source: inline-app\n\nPackage: inline-app\nArchitecture: any\n' >consumer/debian/control
	dpkg-deb -R "$(deb libpolstore0)" consumer/debian/libpolstore0
	cp inline_app consumer/bin/
	(cd consumer && dpkg-shlibdeps -O -Sdebian/libpolstore0 bin/inline_app) >shlibdeps.out 2>&1 ||
		{ cat shlibdeps.out >&2; die "dpkg-shlibdeps failed on the inline program"; }
	grep -q "polstore-layout-$layout" shlibdeps.out ||
		die "an inline program gets no dependency on its layouts: $(cat shlibdeps.out)"
	printf '   inline program: %s\n' "$(sed -n 's/^shlibs:Depends=//p' shlibdeps.out)"
fi
if command -v man >/dev/null; then
	for page in ps_store_set polstore ps_hwloc_policy_from_obj; do
		MANPATH=$root/usr/share/man man -w $page >/dev/null || die "man $page: no page"
	done
fi

step "build the packaged examples with CMake against the scratch root"
cmake -S "$root$ex" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$root/usr" \
	-DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/ex.log" 2>&1 || {
	cat "$tmp/ex.log" >&2; die "the packaged examples do not configure"; }
cmake --build "$tmp/ex" -j 2 >"$tmp/ex-build.log" 2>&1 || {
	cat "$tmp/ex-build.log" >&2; die "the packaged examples do not build"; }
[ -x "$tmp/ex/hwloc_policy" ] || die "the packaged examples: no hwloc_policy (hwloc component)"
LD_LIBRARY_PATH=$root$lib ldd "$tmp/ex/quickstart" | grep -q "$root$lib/libpolstore\.so\.0" ||
	die "the packaged quickstart (CMake) does not load the packaged library"
LD_LIBRARY_PATH=$root$lib "$tmp/ex/quickstart" >/dev/null || die "the packaged quickstart failed"

lintian_s=-
if command -v lintian >/dev/null; then
	step "lintian --pedantic"
	t2=$(now)
	# Warnings and notes are reported; an error fails the test.
	lintian --pedantic --display-info --allow-root \
		"$tmp/polstore_${version}_$arch.changes" >"$tmp/lintian.log" 2>&1 || true
	lintian_s=$(($(now) - t2))
	sed 's/^/   /' "$tmp/lintian.log"
	if grep -q '^E: ' "$tmp/lintian.log"; then
		die "lintian reports errors"
	fi
fi
if [ -n "${POLSTORE_PACKAGE_KEEP:-}" ]; then
	mkdir -p "$POLSTORE_PACKAGE_KEEP"
	cp "$tmp"/*.deb "$tmp"/*.changes "$tmp"/*.buildinfo "$tmp/build.log" "$POLSTORE_PACKAGE_KEEP"/
	[ ! -f "$tmp/lintian.log" ] || cp "$tmp/lintian.log" "$POLSTORE_PACKAGE_KEEP"/
fi
step "package OK: 7 packages built in $((t1 - t0)) s, lintian $lintian_s s"
