# SPDX-License-Identifier: LGPL-2.1-or-later
# How an example is built, from the lines its source carries about itself
# (examples/CMakeLists.txt describes them): shared by both builds of the
# examples, in-tree (examples/CMakeLists.txt) and against an installed
# polstore (tests/consumer/CMakeLists.txt, which takes this file from
# beside the sources), so that both build the same examples with the same
# modules.  Needs PkgConfig and Threads; the library is the target
# POLSTORE_EXAMPLE_LIB (default polstore::polstore), the hwloc bridge (when
# there is one) POLSTORE_EXAMPLE_HWLOC_LIB (default polstore::polstore_hwloc),
# the fault plane POLSTORE_EXAMPLE_UFFD_LIB (default polstore::polstore_uffd).
if(NOT POLSTORE_EXAMPLE_LIB)
	set(POLSTORE_EXAMPLE_LIB polstore::polstore)
endif()
if(NOT POLSTORE_EXAMPLE_HWLOC_LIB)
	set(POLSTORE_EXAMPLE_HWLOC_LIB polstore::polstore_hwloc)
endif()
if(NOT POLSTORE_EXAMPLE_UFFD_LIB)
	set(POLSTORE_EXAMPLE_UFFD_LIB polstore::polstore_uffd)
endif()

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
		elseif(module STREQUAL "polstore-hwloc" AND TARGET ${POLSTORE_EXAMPLE_HWLOC_LIB})
			list(APPEND libs ${POLSTORE_EXAMPLE_HWLOC_LIB})
		elseif(module STREQUAL "polstore-uffd" AND TARGET ${POLSTORE_EXAMPLE_UFFD_LIB})
			list(APPEND libs ${POLSTORE_EXAMPLE_UFFD_LIB})
		else()
			list(APPEND missing ${module})
		endif()
	endforeach()
	set(${libs_out} "${libs}" PARENT_SCOPE)
	set(${missing_out} "${missing}" PARENT_SCOPE)
endfunction()

# polstore_add_example(<src> <target>): the program <target> (its file
# named as the example) from <src>, linked with polstore and the modules
# its "example-requires:" line names.  When this build lacks one of
# them, a message says so and <target> is not defined.
function(polstore_add_example src target)
	get_filename_component(name ${src} NAME_WE)
	polstore_example_libs(${src} libs missing)
	if(missing)
		message(STATUS "examples: ${name} not built (needs ${missing})")
		return()
	endif()
	add_executable(${target} ${src})
	set_target_properties(${target} PROPERTIES OUTPUT_NAME ${name})
	target_link_libraries(${target} PRIVATE ${POLSTORE_EXAMPLE_LIB} ${libs} Threads::Threads)
endfunction()
