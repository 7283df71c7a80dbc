# SPDX-License-Identifier: LGPL-2.1-or-later
# How a build reads the lines an example's source carries about itself
# (examples/CMakeLists.txt describes them).  Shipped beside the examples
# and included by both builds of them: the in-tree one
# (examples/CMakeLists.txt) and the one against an installed polstore
# (tests/consumer/CMakeLists.txt), so that both build the same examples
# with the same modules.  Needs PkgConfig; the hwloc bridge, when there is
# one, is the target polstore::polstore_hwloc.

# jemalloc_arena: libjemalloc-dev (scripts/deps.sh installs it).
pkg_check_modules(JEMALLOC QUIET IMPORTED_TARGET jemalloc)

# polstore_example_line(<src> <key> <out>): the text after "<key>:" on the
# first line of <src> that has it, split into a list; empty when there is
# none.
function(polstore_example_line src key out)
	file(STRINGS ${src} line REGEX "${key}:" LIMIT_COUNT 1)
	set(words "")
	if(line)
		string(REGEX REPLACE ".*${key}:[ \t]*" "" words "${line}")
		string(REGEX REPLACE "[ \t]*\\*/.*$" "" words "${words}")
		separate_arguments(words UNIX_COMMAND "${words}")
	endif()
	set(${out} "${words}" PARENT_SCOPE)
endfunction()

# polstore_example_libs(<src> <libs> <missing>): the targets of the modules
# the "example-requires:" line of <src> names, in <libs>; those this build
# lacks, in <missing> (then the example is not built).
function(polstore_example_libs src libs_out missing_out)
	polstore_example_line(${src} "example-requires" requires)
	set(libs "")
	set(missing "")
	foreach(module ${requires})
		if(module STREQUAL "jemalloc" AND TARGET PkgConfig::JEMALLOC)
			list(APPEND libs PkgConfig::JEMALLOC)
		elseif(module STREQUAL "polstore-hwloc" AND TARGET polstore::polstore_hwloc)
			list(APPEND libs polstore::polstore_hwloc)
		else()
			list(APPEND missing ${module})
		endif()
	endforeach()
	set(${libs_out} "${libs}" PARENT_SCOPE)
	set(${missing_out} "${missing}" PARENT_SCOPE)
endfunction()
