#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Everything libpolstore allocates goes through the hooks of
# polstore/alloc.h: no object of the static library but the allocator's
# own (alloc.c) calls the C library's allocator directly.  The one other
# object allowed is topology.c, whose tables live as long as the process
# (its header comment says why).  nm -u lists what each object calls.
# Usage: check_alloc_hooks.sh <libpolstore.a>
set -eu
lib=$1
allowed='alloc.c.o topology.c.o'
calls='malloc|calloc|realloc|reallocarray|free|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|strdup|strndup'
found=$(nm -A -u "$lib" | sed -n 's/^[^:]*:\([^:]*\): *U \(.*\)$/\1 \2/p' |
	grep -wE "($calls)\$" || true)
status=0
nobj=0
for o in $(ar t "$lib"); do
	nobj=$((nobj + 1))
	case " $allowed " in *" $o "*) continue ;; esac
	bad=$(printf '%s\n' "$found" | awk -v o="$o" '$1 == o { print $2 }' | tr '\n' ' ')
	if [ -n "$bad" ]; then
		echo "$o calls the C library's allocator ($bad), not psi_alloc()/psi_free()"
		status=1
	fi
done
# The allocator's own object must still be there and call malloc(): a
# rename would otherwise leave this check passing on nothing.
printf '%s\n' "$found" | grep -q '^alloc\.c\.o malloc$' ||
	{ echo "alloc.c.o does not call malloc(): is $lib the library?"; status=1; }
[ $status -eq 0 ] && echo "alloc-hooks: $nobj objects, only the allocator's own calls malloc()"
exit $status
