# SPDX-License-Identifier: LGPL-2.1-or-later
# How each example is built and run, from the table below: shared by
# both builds of the examples, in-tree (examples/CMakeLists.txt) and
# against an installed polstore (tests/tools/consumer/CMakeLists.txt, which
# takes this file from beside the sources), so that both build the same
# examples with the same modules.  Needs PkgConfig and Threads; the library is the target
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

# polstore_example(<name> [REQUIRES <module>...] [ARGS <arg>...]
#                  [VALGRIND_ARGS <arg>...]): what example <name> needs and how
# its test runs.
#   REQUIRES       pkg-config modules it needs beyond polstore (jemalloc,
#                  polstore-hwloc, polstore-uffd); without one of them the
#                  example is not built (a configure message says so).
#   ARGS           the arguments of its test (none by default): the run must
#                  take a few seconds at most.  Exit status 77 means
#                  "skipped" (e.g. mbind(2) not permitted).
#   VALGRIND_ARGS  also run it under valgrind memcheck with these arguments
#                  (test valgrind.example.<name>, label valgrind) when
#                  POLSTORE_VALGRIND is on.
# An example not in the table needs nothing and runs without arguments.
# tests/tools/consumer/run.sh reads the REQUIRES of each line with sed: keep one
# line per example, REQUIRES first.
function(polstore_example name)
	cmake_parse_arguments(E "" "" "REQUIRES;ARGS;VALGRIND_ARGS" ${ARGN})
	foreach(key REQUIRES ARGS VALGRIND_ARGS)
		set_property(GLOBAL PROPERTY polstore_example_${key}_${name} "${E_${key}}")
	endforeach()
endfunction()

polstore_example(deferred_destroy ARGS -v all -t 2 -s 200 VALGRIND_ARGS -v all -t 2 -s 20)
polstore_example(hwloc_policy REQUIRES polstore-hwloc)
polstore_example(jemalloc_arena REQUIRES jemalloc ARGS -t 2 -n 300 VALGRIND_ARGS -t 2 -n 150)
polstore_example(shared_text ARGS -v all -r 2 -p 256 -n 2)
polstore_example(tiering ARGS -t 2 -p 3 -r 4 -i 20)
polstore_example(uffd_restore REQUIRES polstore-uffd ARGS -g 2 -m 2 -v 4)

# polstore_example_get(<name> <key> <out>): the <key> (REQUIRES, ARGS,
# VALGRIND_ARGS) of example <name>, a list; empty when the table gives none.
function(polstore_example_get name key out)
	get_property(v GLOBAL PROPERTY polstore_example_${key}_${name})
	set(${out} "${v}" PARENT_SCOPE)
endfunction()

# polstore_example_libs(<src> <libs> <missing>): the targets of the modules
# example <src> REQUIRES, in <libs>; those this build lacks, in <missing>
# (then the example is not built).
function(polstore_example_libs src libs_out missing_out)
	get_filename_component(name ${src} NAME_WE)
	polstore_example_get(${name} REQUIRES requires)
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
# it REQUIRES.  When this build lacks one of them, a message says so and
# <target> is not defined.
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
