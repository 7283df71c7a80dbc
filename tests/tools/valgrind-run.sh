#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run a valgrind tool (the arguments: valgrind, its options, the program)
# with the system's CA bundle out of sight, where a private mount
# namespace can be had (root, unshare(1)); otherwise run it as it is.
#
# Criterion initialises libgit2 in every test process, and libgit2 parses
# /etc/ssl/certs/ca-certificates.crt with mbedtls when it starts: 80 % of
# the instructions a test process runs before its test, and about a third
# of a valgrind suite's time (valgrind follows a process per test).  The
# tests use no certificate.  The bind mount lives in the namespace only.
#
# Usage: tests/tools/valgrind-run.sh valgrind --tool=... [options] program [args]
# Exit status: the tool's.
set -u
bundle=/etc/ssl/certs/ca-certificates.crt
if [ "$(id -u)" = 0 ] && [ -f "$bundle" ] && command -v unshare >/dev/null 2>&1 &&
	unshare -m true 2>/dev/null; then
	exec unshare -m sh -c 'mount --bind /dev/null "$0" 2>/dev/null; exec "$@"' "$bundle" "$@"
fi
exec "$@"
