#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install the Debian 12 packages polstore needs to build, test and benchmark.
# Installs only what is missing; when something is, it must run as root,
# or as a user who may use sudo.
set -eu

# libjemalloc-dev: examples/jemalloc_arena.c; libhwloc-dev: the hwloc bridge;
# debhelper and lintian: the Debian package test (tests/tools/package/run.sh);
# groff-base and man-db: the manual pages' check (scripts/check-man.sh).
PKGS="build-essential cmake pkg-config liburcu-dev libcriterion-dev libnuma-dev valgrind \
clang libclang-rt-14-dev gnuplot-nox doxygen libjemalloc-dev libhwloc-dev debhelper lintian \
groff-base man-db"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "polstore: installing$missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || {
		echo "polstore: installing packages needs root: run scripts/deps.sh as root" >&2
		exit 1
	}
	SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
