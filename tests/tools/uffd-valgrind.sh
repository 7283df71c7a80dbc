#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run a valgrind tool (the arguments: valgrind and its options, then the
# program) with valgrind's notes about the userfaultfd calls it does not
# know taken out of its stderr, so that a "==pid== " line left there is a
# report.  valgrind 3.19 has no wrapper for userfaultfd(2) (it answers
# ENOSYS and says so on "--pid--" lines) and warns once per process about
# USERFAULTFD_IOC_NEW, the ioctl of /dev/userfaultfd, which carries no size:
#   ==pid== Warning: noted but unhandled ioctl 0xaa00 with no size/direction hints.
#   ==pid==    This could cause spurious value errors to appear.
#   ==pid==    See README_MISSING_SYSCALL_OR_IOCTL for guidance on writing a proper wrapper.
# The ioctl only returns a descriptor: no memory goes unchecked.
#
# Usage: tests/tools/uffd-valgrind.sh valgrind --tool=... [options] program [args]
# Exit status: the tool's.
set -u
log=$(mktemp "${TMPDIR:-/tmp}/uffd-valgrind.XXXXXX") || exit 2
"$@" 2>"$log"
rc=$?
grep -v -e 'unhandled ioctl 0xaa00 with no size/direction hints' \
	-e 'This could cause spurious value errors to appear' \
	-e 'README_MISSING_SYSCALL_OR_IOCTL' "$log" >&2
rm -f "$log"
exit $rc
