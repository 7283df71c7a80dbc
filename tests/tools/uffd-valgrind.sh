#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run a valgrind tool (the arguments: valgrind and its options, then the
# program) with valgrind's notes about the userfaultfd calls it does not
# know taken out of its stderr, so that a "==pid== " line left there is a
# report, and a failure's output shows the report, not pages of notes.
# valgrind 3.19 has no wrapper for userfaultfd(2) (it answers ENOSYS and
# says so in five "--pid--" lines at every call, and the suite calls it in
# every test process):
#   --pid-- WARNING: unhandled amd64-linux syscall: 323
#   --pid-- You may be able to write your own handler.
#   --pid-- Read the file README_MISSING_SYSCALL_OR_IOCTL.
#   --pid-- Nevertheless we consider this a bug.  Please report
#   --pid-- it at http://valgrind.org/support/bug_reports.html.
# and warns once per process about USERFAULTFD_IOC_NEW, the ioctl of
# /dev/userfaultfd, which carries no size:
#   ==pid== Warning: noted but unhandled ioctl 0xaa00 with no size/direction hints.
#   ==pid==    This could cause spurious value errors to appear.
#   ==pid==    See README_MISSING_SYSCALL_OR_IOCTL for guidance on writing a proper wrapper.
# The ioctl only returns a descriptor: no memory goes unchecked.  The
# first line of a note about any other system call stays (its trailing
# lines, the same for every call, go).
#
# Usage: tests/tools/uffd-valgrind.sh valgrind --tool=... [options] program [args]
# Exit status: the tool's.
set -u
log=$(mktemp "${TMPDIR:-/tmp}/uffd-valgrind.XXXXXX") || exit 2
"$@" 2>"$log"
rc=$?
grep -v -E \
	-e 'unhandled ioctl 0xaa00 with no size/direction hints' \
	-e 'This could cause spurious value errors to appear' \
	-e 'README_MISSING_SYSCALL_OR_IOCTL' \
	-e '^--[0-9]+-- WARNING: unhandled (amd64|arm64)-linux syscall: (323|282)$' \
	-e '^--[0-9]+-- (You may be able to write your own handler|Nevertheless we consider this a bug|it at http://valgrind.org/support/bug_reports.html)' \
	"$log" >&2
rm -f "$log"
exit $rc
